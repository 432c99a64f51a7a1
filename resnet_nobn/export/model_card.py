"""The model card of an export (model_card.md, written by resnet_nobn/export/writer.py): what the
network is, which checkpoint, its error from results.json, how to use and load the files, the
versions, and what it is not.
"""
import datetime
import os

from resnet_nobn import paper
from resnet_nobn.cli import departure_text, flag_text
from resnet_nobn.config import (ModelConfig, TrainConfig, config_diffs, options, resolve_head_seed,
                                resolve_init)
from resnet_nobn.data.datasets import DATASETS, partial_evaluation, shown
from resnet_nobn.export.layout import KERAS
from resnet_nobn.export.serving import TOP_K, input_spec
from resnet_nobn.training import provenance, rundir

# How to load model.keras: given in the model card and in docs/training.md.
LOAD_KERAS = ("```python", "import keras, resnet_nobn  # resnet_nobn registers its Keras classes",
              f'model = keras.saving.load_model("EXPORT_DIR/{KERAS}")', "```")


def run_flags(cfg: TrainConfig):
    """The flags of the run (config.json) that differ from its entry point's defaults."""
    recipe = paper.recipe_of(cfg.dataset)
    out = []
    for owner, defaults, cls in ((cfg.model, recipe.model, ModelConfig),
                                 (cfg, recipe, TrainConfig)):
        for f in options(cls):
            value, default = getattr(owner, f.name), getattr(defaults, f.name)
            if f.name == "init":  # the flag's default is auto
                default = resolve_init("auto", cfg.model.norm)
            elif f.name == "head_seed":  # its default follows --seed
                value, default = resolve_head_seed(value, cfg.seed), cfg.seed
            if flag_text(value) != flag_text(default):
                out.append(f"--{f.name}={flag_text(value)}")
    return out


def _pct(x):
    return "not recorded" if x is None else f"{100 * x:.2f}%"


def model_card(cfg: TrainConfig, step, skipped, note, results, names_from, export_dir,
               model_dir, num_params, chosen=False, standardize=None, diverged=False,
               unusable=None):
    """The Markdown model card of an export; `chosen`: its checkpoint was asked for;
    `standardize`: the run's standardisation (serving.py `run_standardization`; None: the
    per-image one), which the card states with its mean and std; `diverged`: the run has a
    divergence it has not resumed past (recovery.pending), so its checkpoint is the rollback's;
    `unusable`: why the run's results.json is not a run's (writer.py `unusable_results`), whose
    place `results` ({}) then takes."""
    import keras
    import tensorflow as tf

    m, recipe, info = cfg.model, paper.recipe_of(cfg.dataset), DATASETS[cfg.dataset]
    spec = input_spec(cfg, *([standardize] if standardize else []))
    results = results or {}
    mismatch = results.get("data_mismatch")  # another dataset's images under the name
    cifar, script = info.recipe == "cifar", info.entry_point
    config = cfg.to_json()
    where = "Table 1 (Section 4)" if cifar else "Section 4.2"
    if m.norm == "batch":
        what = (f"the BN-ResNet baseline (`--norm=batch`, pre-activation blocks) of the shape of "
                f"{where}: not the paper's network")
    elif not paper.paper_network(config["model"]):
        what = (f"a normalization-free residual network of the shape of {where}, with "
                f"`--init={m.init} --head={m.head}` (the paper's: identity, random)")
    else:
        relu = "ReLU" if m.relu_leakiness == 0 else "φ"  # the fork's leaky one: said below
        what = (f"the all-convolutional, normalization-free residual network of {where}: blocks "
                f"`x + C2({relu}(C1 x))`, identity init, a fixed random-projection head")
    shape = (f"{len(m.widths)} stages of {flag_text(m.blocks_per_stage)} blocks, widths "
             f"{flag_text(m.widths)}, stem {m.stem_kernel}x{m.stem_kernel}/{m.stem_stride} with "
             f"{m.stem_width} channels; "
             + ("every activation a ReLU" if m.relu_leakiness == 0 else
                f"every activation φ a leaky ReLU of slope {flag_text(m.relu_leakiness)}, as in "
                "the code the paper forked (the paper writes ReLU)")
             + f"; {num_params:,} trainable parameters"
             + ("" if paper.paper_shape(config) else f" (the paper's shape is widths "
                f"{flag_text(recipe.model.widths)}, {flag_text(recipe.model.blocks_per_stage)} "
                "blocks per stage)"))
    flags = run_flags(cfg)
    evaluated = next((h for h in results.get("history") or []
                      if isinstance(h, dict) and h.get("step") == step), None)
    split = "test" if cifar else "validation"
    folder = results.get("image_folder") or {}  # resnet_nobn/data/folder_input.py
    data = ("synthetic random images (`--use_synthetic_data`): the errors and the predictions "
            "mean nothing" if cfg.use_synthetic_data else
            f"your images in `{cfg.data_dir}` (`--dataset=image_folder`: {m.num_classes} classes, "
            f"the folders of train/ and test/; {folder.get('train_images', '?')} training and "
            f"{folder.get('test_images', '?')} test images, each resized to "
            f"{m.image_size}x{m.image_size})" if info.folder else
            f"tfds `{cfg.dataset}` ({info.title})"
            + (f" from `--data_dir={cfg.data_dir}`" if cfg.data_dir else "")
            + (f", **but {mismatch}**" if mismatch else ""))
    if unusable:
        evaluation = (f"- No error is given for this checkpoint: the run's results.json {unusable}.")
    elif evaluated is None:
        seen = ", ".join(str(h.get("step")) for h in results.get("history") or []
                         if isinstance(h, dict))
        evaluation = (f"- No evaluation of step {step} is recorded in results.json (evaluated "
                      f"steps: {seen or 'none'}); no error is given for this checkpoint.")
    else:
        n = evaluated.get("eval_examples")
        first = partial_evaluation(cfg.dataset, n, cfg.batch_size, folder.get("test_images"))
        whole = (f" (its first {n // cfg.batch_size} batches of {cfg.batch_size}: `--eval_steps`)"
                 if first else " (the whole split)")
        images = (f"{n:,} synthetic random images (`--use_synthetic_data`)"
                  if cfg.use_synthetic_data else f"{n:,} images of the {split} split{whole}")
        evaluation = (f"- Top-1 error **{_pct(evaluated.get('top1_error'))}**, top-5 error "
                      f"**{_pct(evaluated.get('top5_error'))}** at step {evaluated['step']}, on "
                      f"{images} (`results.json`).")
    nots = []
    if cfg.use_synthetic_data:
        nots.append("trained on synthetic random images, not on data")
    elif mismatch:
        nots.append(f"not trained on {info.title}, though its records name `{cfg.dataset}`: "
                    f"{mismatch}")
    elif cfg.data_dir and not info.folder:
        nots.append(f"not checked to be {info.title} beyond the image shape and class names its tfds "
                    f"directory `{cfg.data_dir}` records")
    departs = paper.departures(config, step)
    if departs:
        nots.append("not the paper's recipe: " + "; ".join(departure_text(*d) for d in departs))
    differs = [d for d in config_diffs(recipe.to_json(), cfg.to_json())
               if not d.startswith(("num_classes", "image_size", "init", "head_seed"))]
    if differs:
        nots.append("not the paper's network: " + "; ".join(differs))
    row = None if mismatch else paper.paper_row(config)
    if row is None or nots:
        nots.append("not a Table 2 reproduction" + (
            f" ({info.title} is not one of Table 2's datasets)"
            if cfg.dataset not in paper.TABLE2 else
            "" if row is None else f" (Table 2, row {row[0]}: {row[1]}% top-1 error)"))
    else:
        nots.append(f"one run (seed {cfg.seed}) of the paper's setup, not a Table 2 "
                    f"reproduction by itself: Table 2, row {row[0]}, gives {row[1]}% top-1 error")
    rollbacks = results.get("rollbacks") or []
    lines = [
        f"# Model card: {m.norm == 'none' and 'resnet_nobn' or 'resnet_bn'}, "
        f"{shown(cfg.dataset, cfg.use_synthetic_data, mismatch, cfg.data_dir)}, step {step}",
        "",
        "## What it is",
        "",
        f"- Hardt & Ma, \"Identity Matters in Deep Learning\" (ICLR 2017): {what}.",
        f"- {shape}; {m.num_classes} classes, {m.image_size}x{m.image_size} RGB input"
        + ("." if not info.pixels or info.stored == (m.image_size, m.image_size, 3) else
           f" ({info.title}'s {info.stored[0]}x{info.stored[1]} "
           f"{'grey ' if info.stored[2] == 1 else ''}images zero-padded to it, as in training)."),
        f"- Trained by `python {script}` with "
        + (" ".join(f"`{f}`" for f in flags) if flags else "its defaults") + " (config.json; "
        "the other flags are the recipe's defaults).",
        f"- Checkpoint: `ckpt-{step}` of `{os.path.join(model_dir, rundir.CKPT)}`, step {step}: "
        + (f"chosen with `--checkpoint`{f'; {note}' if note else ''}." if chosen or note else
           "the newest that restores with finite weights"
           + (" (the one a re-run resumes from after a divergence)"
              if diverged else "")
           + (f"; skipped: {'; '.join(skipped)}." if skipped else "."))
        + (f" The run rolled back after a divergence {len(rollbacks)} time(s) (results.json "
           "`rollbacks`)." if rollbacks else ""),
        "",
        "## Evaluation",
        "",
        f"- Data: {data}; evaluated on "
        + ("random images too" if cfg.use_synthetic_data else f"its {split} split")
        + ", preprocessed as in the served graph.",
        evaluation,
        "",
        "## Use",
        "",
        f"- `saved_model/`: `serving_default` takes `images`: {spec[1]} (the run's "
        f"evaluation preprocessing, inside the graph); returns `logits` and `probabilities` "
        f"[N, {m.num_classes}] and `classes` [N, {min(TOP_K, m.num_classes)}] (top-"
        f"{min(TOP_K, m.num_classes)} indices, best first). `tf.saved_model.load` alone loads it.",
        ("- `model.keras`: the Keras model (`resnet_nobn.ImageClassifier`); it takes the "
         "`images` the SavedModel takes, uint8 or float 0..255, with the same preprocessing "
         "inside, and returns logits." if info.pixels else
         "- `model.keras`: the Keras network; it takes images preprocessed as evaluation does "
         f"(decoded, cropped, normalised: float [N, {m.image_size}, {m.image_size}, 3]) and "
         "returns logits.")
        + " With this repository on `sys.path` (EXPORT_DIR: this directory):",
        "",
        *LOAD_KERAS,
        "",
        f"- `labels.txt`: class i on line i + 1; {names_from}.",
        f"- `python run/predict.py --export_dir={export_dir}{' --resize' * info.folder} FILE...` "
        "prints the top-5 classes of image files"
        + (f" (`--resize`: to {m.image_size}x{m.image_size}, as training resized the folder's)."
           if info.folder else "."),
        "",
        "## Versions",
        "",
        f"- Trained: commit {results.get('git_commit') or 'not recorded'}, TensorFlow "
        f"{results.get('tf_version') or '?'}, Keras {results.get('keras_version') or '?'}, "
        f"{results.get('num_replicas') or '?'} replica(s) ({results.get('strategy') or '?'}).",
        f"- Exported: commit {provenance.git_commit() or 'not recorded'}, TensorFlow "
        f"{tf.__version__}, Keras {keras.__version__}, "
        f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC.",
        "",
        "## What it is not",
        "",
        *[f"- {x[0].upper()}{x[1:]}." for x in nots],
        "",
    ]
    return "\n".join(lines)


