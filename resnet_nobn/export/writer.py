"""Writing an export: a trained run taken out of its run directory (run/export.py). Reading it back
and predicting: resnet_nobn/export/predict.py; the model card: resnet_nobn/export/model_card.py.

`export(model_dir, export_dir)` restores one checkpoint of the run and writes EXPORT_DIR whole or
not at all (built in a temporary directory beside it, then renamed into place): saved_model/ (a
SavedModel whose `serving_default` takes images as a user has them, with the run's evaluation
preprocessing inside the graph, `serving_archive`; it loads with `tf.saved_model.load` alone),
model.keras (`keras_model`: for a dataset of pixels, resnet_nobn.ImageClassifier, raw pixels in
as the SavedModel takes them, the run's standardisation inside, logits out; ImageNet's, the bare
network of preprocessed float images), model_card.md,
labels.txt (the tfds label names, class i on line i + 1) and export.json (the dataset, its
input, image size, step, and the `digest` of saved_model/ with that description, checked when
the export is read).

Which checkpoint: the newest whose weights restore and are finite, by the rules a re-run resumes by
(resnet_nobn/training/recovery.py: after a divergence, the newest taken before the blow-up), or the
one asked for. Checkpoints from any number of replicas or workers restore alike. The run directory
is read once (rundir.read) and only read; an export is never written into, over or around it
(`check_paths`, before TensorFlow loads). `--overwrite` replaces only an earlier export holding
nothing but what an export writes (`check_replaceable`). The rename that puts an export in place
never replaces a directory that is not empty: of two exports into one new directory at once, one
is refused.
"""
import errno
import json
import os
import shutil
import tempfile

from resnet_nobn.config import TrainConfig
from resnet_nobn.data.datasets import DATASETS
from resnet_nobn.data.standardization import DATASET
from resnet_nobn.errors import UserError, broken_link, disk_full, first_line
from resnet_nobn.export.layout import CARD, GLOB, KERAS, LABELS, META, SAVED_MODEL, WRITTEN, digest
from resnet_nobn.export.model_card import model_card
from resnet_nobn.export.serving import run_standardization, serving_archive
from resnet_nobn.files import nearest_existing, read_json
from resnet_nobn.training import recovery, rundir
from resnet_nobn.training.results import problem as results_problem


# --------------------------------------------------------------------------------------------
# what is exported, checked before TensorFlow loads


def _config(run):
    """The TrainConfig config.json of the RunDir `run` records; UserError where it has none."""
    path = os.path.join(run.model_dir, rundir.CONFIG)
    if run.config is None and not run.config_unreadable:
        raise UserError(f"{run.model_dir} holds no config.json: not the --model_dir of a training "
                        "run (or the run never started); give the --model_dir you trained with")
    try:
        return TrainConfig.from_json(run.config)
    except (TypeError, ValueError, AttributeError) as e:
        raise UserError(f"{path} is unreadable or not a run configuration ({e}); give the "
                        "--model_dir of a training run") from None


def check_paths(model_dir, export_dir, checkpoint=None, overwrite=False):
    """The run's TrainConfig; UserError (one line, nothing written) for a model_dir that is not a
    trained run, a --checkpoint it does not hold, or an export_dir that cannot be written."""
    return _checked(model_dir, export_dir, checkpoint, overwrite)[0]


def _checked(model_dir, export_dir, checkpoint, overwrite):
    """(cfg, run) of `check_paths`: the run's TrainConfig and its directory read once
    (rundir.RunDir), which the export then restores and describes from."""
    if not (model_dir or "").strip():
        raise UserError("--model_dir is empty; give the directory of a training run")
    for path, flag in ((model_dir, "--model_dir"), (export_dir, "--export_dir")):
        if (path or "").strip() and broken_link(path, flag):
            raise UserError(broken_link(path, flag))
    if not os.path.isdir(model_dir):
        what = "is a file" if os.path.exists(model_dir) else "does not exist"
        raise UserError(f"--model_dir={model_dir} {what}; give the directory of a training run")
    run = rundir.read(model_dir, ask_lock=False)  # whether a run trains there is not asked
    cfg = _config(run)
    ckpt_dir, on_disk = run.ckpt_dir, run.steps
    if not on_disk:
        raise UserError(f"no checkpoint in {ckpt_dir}: nothing to export; train first")
    if checkpoint is not None and checkpoint not in on_disk:
        raise UserError(f"--checkpoint={checkpoint}: there is no ckpt-{checkpoint} in {ckpt_dir} "
                        f"(there are: {', '.join(str(s) for s in sorted(on_disk))})")
    if not (export_dir or "").strip():
        raise UserError("--export_dir is empty; give the directory to write the export to")
    if any(c in export_dir for c in GLOB):
        raise UserError(f"--export_dir={export_dir} contains [, ], * or ?, which TensorFlow reads "
                        "as a glob pattern (the SavedModel could not be loaded from there); use a "
                        "path without them")
    inside, out = os.path.realpath(model_dir), os.path.realpath(export_dir)
    where = ("is the run directory" if out == inside else
             "contains the run directory" if inside.startswith(out.rstrip(os.sep) + os.sep) else
             "is inside the run directory" if out.startswith(inside + os.sep) else None)
    if where:
        raise UserError(f"--export_dir={export_dir} {where} --model_dir={model_dir}; give a "
                        "directory outside the run (nothing was written or deleted)")
    if os.path.exists(export_dir):
        if not os.path.isdir(export_dir):
            raise UserError(f"--export_dir={export_dir} is a file; give a new directory")
        if os.listdir(export_dir):
            if not overwrite:
                try:
                    check_replaceable(export_dir)
                except UserError:  # --overwrite would be refused too
                    raise UserError(f"--export_dir={export_dir} is not empty and holds no export; "
                                    "give a new or empty directory") from None
                raise UserError(f"--export_dir={export_dir} holds an earlier export; pass "
                                "--overwrite to replace it, or give a new or empty directory")
            check_replaceable(export_dir)
    _check_writable(export_dir)
    return cfg, run


def check_replaceable(export_dir):
    """UserError unless export_dir is an earlier export holding only what an export writes
    (WRITTEN): what --overwrite may delete."""
    meta = read_json(os.path.join(export_dir, META))
    if meta is None or "checkpoint" not in meta:
        raise UserError(f"--export_dir={export_dir} is not an export (no {META} of run/export.py); "
                        "--overwrite replaces only an earlier export: give a new directory")
    for root, dirs, files in os.walk(export_dir):
        for name in sorted(dirs + files):
            rel = os.path.relpath(os.path.join(root, name), export_dir)
            if not WRITTEN.fullmatch(rel):
                raise UserError(f"--export_dir={export_dir} holds {rel}, which run/export.py does "
                                "not write; --overwrite replaces only an earlier export: move "
                                "that file away, or give a new directory")


def _check_writable(export_dir):
    """UserError unless a directory can be made beside export_dir (in its nearest existing
    ancestor): tried, and removed at once."""
    existing = nearest_existing(os.path.dirname(os.path.abspath(export_dir)))
    if not os.path.isdir(existing):
        raise UserError(f"--export_dir={export_dir}: {existing} is a file, not a directory; give "
                        "another path")
    try:
        os.rmdir(tempfile.mkdtemp(prefix=".export-probe-", dir=existing))
    except OSError as e:
        raise UserError(f"--export_dir={export_dir} cannot be written ({existing}: "
                        f"{e.strerror}); fix its permissions or give another directory") from None


# --------------------------------------------------------------------------------------------
# the checkpoint


def restore(cfg: TrainConfig, run, checkpoint=None):
    """(model, step, skipped, note): the Keras model of `cfg` with the weights of the newest
    checkpoint that restores with finite weights, by the rules a re-run resumes by (or of
    ckpt-`checkpoint`); `skipped` names the newer ones passed over and why; `note` says why a
    re-run would not resume from an explicitly chosen one (or is None). The model is built as
    the trainer builds it, and the checkpoint chosen by resnet_nobn/training/recovery.py's rule.
    The initialisation (ckpt-0: nothing trained, e.g. of a run that diverged in its first loop)
    only when asked for with `checkpoint=0`: else UserError. `run`: the run directory as
    `rundir.read` found it."""
    import tensorflow as tf

    from resnet_nobn.training import checkpoints, steps
    model, optimizer = steps.build(cfg, tf.distribute.get_strategy())
    ckpt_dir = run.ckpt_dir
    order, diverged = recovery.resume_order(run, cfg.model.num_classes)
    try:
        restored = checkpoints.restore_newest(tf.train.Checkpoint(model=model, optimizer=optimizer),
                                              model.weights, ckpt_dir, order, checkpoint)
    except checkpoints.Unusable as e:
        if checkpoint is not None:
            raise UserError(f"--checkpoint={checkpoint} cannot be exported: {e.skipped[0]}; leave "
                            "--checkpoint out to export the newest usable one") from None
        raise UserError(f"no checkpoint in {ckpt_dir} restores with finite weights ({e}); "
                        "nothing to export") from None
    if restored is None:
        raise UserError(f"no checkpoint in {ckpt_dir}: nothing to export; train first")
    if restored.step == 0 and checkpoint is None:
        why = (f"the run diverged at step {diverged.get('step')} before any later checkpoint: "
               f"continue it with its advice (retry with: {diverged.get('retry_with')})"
               if diverged else
               f"the later ones cannot be restored: {', '.join(restored.skipped)}; a re-run "
               "would train again from ckpt-0" if restored.skipped else
               "the run has not saved a later one: train it on")
        raise UserError(f"the only checkpoint of {run.model_dir} to export is ckpt-0, the "
                        f"network's initialisation, with nothing trained ({why}); give "
                        "--checkpoint=0 to export the initial weights all the same")
    return model, restored.step, restored.skipped, restored.note


# --------------------------------------------------------------------------------------------
# label names


def label_names(cfg: TrainConfig):
    """(names, where they came from): the tfds label names of the run's dataset, read without
    downloading from the prepared dataset in the run's --data_dir (or tfds' default directory),
    else from the tfds builder's own code, else the dataset table's (resnet_nobn/data/datasets.py: tfds'
    code does not name CIFAR's classes); numbers when none has names. An image folder's are the
    class folders config.json records (TrainConfig.class_names): the folder need not be here."""
    import tensorflow_datasets as tfds
    n, info = cfg.model.num_classes, DATASETS[cfg.dataset]
    if info.folder:
        return list(cfg.class_names), (f"the class folders of `{cfg.data_dir}/train`, sorted, "
                                       "as the run's config.json records them")
    for data_dir in dict.fromkeys([cfg.data_dir, None]):
        try:
            builder = tfds.builder(cfg.dataset, data_dir=data_dir)
            names = list(builder.info.features["label"].names)
        except Exception:  # noqa: BLE001 -- a damaged or missing dataset_info: try the next
            continue
        if len(names) != n or names == [str(i) for i in range(n)]:
            continue
        where = (f"the prepared dataset in {builder.data_dir}" if builder.is_prepared()
                 else f"tfds' {cfg.dataset} builder (the dataset is not prepared here)")
        return names, f"the names of {where}"
    if len(info.label_names) == n:
        return list(info.label_names), (f"the names of {info.title} (resnet_nobn/data/datasets.py; the "
                                        "dataset is not prepared here)")
    return [str(i) for i in range(n)], f"class numbers only: tfds has no {cfg.dataset} names here"


# --------------------------------------------------------------------------------------------
# the export


def unusable_results(run):
    """Why the results.json of the RunDir `run` is there but not a run's (resnet_nobn/training/
    results.py `problem`), or None: an export then takes nothing from it."""
    if run.results_unreadable:
        return "is not a JSON object"
    why = run.results is not None and results_problem(run.results)
    return f"is not a run's results ({why})" if why else None


def keras_model(model, cfg: TrainConfig, standardize):
    """What the export's model.keras holds: for a dataset of pixels (DatasetInfo.pixels: the CIFAR
    recipe's, an image folder) the run's `resnet_nobn.ImageClassifier` with the trained weights
    of `model`: raw pixels in, as the library's models and the SavedModel take them (Fashion-
    MNIST's 28x28 grey padded inside), the run's `standardize` inside, logits out; saved uncompiled
    (no optimizer state: it loads uncompiled, and `model.compile()` gives the run's recipe).
    ImageNet's is
    `model` itself, the bare network: images preprocessed as its evaluation does (decoded,
    cropped, normalised) in."""
    if not DATASETS[cfg.dataset].pixels:
        return model
    from resnet_nobn.model.classifier import ImageClassifier
    moments = ((standardize.mean, standardize.std) if standardize.mode == DATASET
               else (None, None))
    classifier = ImageClassifier(cfg.model, dataset=cfg.dataset, recipe=cfg, seed=cfg.seed,
                                 mean=moments[0], std=moments[1], compile=False)
    classifier.get_layer(model.name).set_weights(model.get_weights())
    return classifier


def _write(tmp, model, cfg, step, skipped, note, run, export_dir, chosen, unusable=None):
    import keras

    from resnet_nobn.model.network import count_params
    names, names_from = label_names(cfg)
    results = {} if unusable else run.results or {}
    standardize = run_standardization(cfg, results)
    serving_archive(model, cfg, standardize).write_out(os.path.join(tmp, SAVED_MODEL),
                                                       verbose=False)
    keras_model(model, cfg, standardize).save(os.path.join(tmp, KERAS))
    with open(os.path.join(tmp, LABELS), "w", encoding="utf-8") as f:
        f.write("".join(f"{n}\n" for n in names))
    info = DATASETS[cfg.dataset]  # the served images: as the dataset holds them
    meta = dict(dataset=cfg.dataset, image_size=info.stored[0] if info.pixels else
                cfg.model.image_size, num_classes=cfg.model.num_classes,
                input="pixels" if info.pixels else "encoded", step=step,
                checkpoint=f"ckpt-{step}", model_dir=os.path.abspath(run.model_dir),
                keras_version=keras.__version__,
                **({"data_mismatch": results["data_mismatch"]}  # another dataset's images
                   if results.get("data_mismatch") else {}))
    meta["digest"] = digest(tmp, meta)
    with open(os.path.join(tmp, META), "w") as f:
        json.dump(meta, f, indent=2)
    card = model_card(cfg, step, skipped, note, results, names_from, export_dir, run.model_dir,
                      count_params(model.trainable_variables), chosen, standardize,
                      recovery.pending(run.diverged, run.results) is not None, unusable)
    with open(os.path.join(tmp, CARD), "w") as f:
        f.write(card)


def _put_in_place(tmp, export_dir, overwrite, parent):
    """Renames the finished export `tmp` to export_dir. With --overwrite an earlier export there
    is first moved aside into a directory that is returned (to delete once all is done) and put
    back if the rename fails. The rename replaces an empty directory, never one with files."""
    old = None
    if overwrite and os.path.isdir(export_dir) and os.listdir(export_dir):
        check_replaceable(export_dir)  # again: it may have changed while this export was made
        old = tempfile.mkdtemp(prefix=f".{os.path.basename(export_dir)}.old-", dir=parent)
        os.rename(export_dir, os.path.join(old, "export"))
    try:
        os.rename(tmp, export_dir)
    except OSError as e:
        if old is not None:
            try:
                os.rename(os.path.join(old, "export"), export_dir)
                os.rmdir(old)
            except OSError:
                raise UserError(f"cannot put --export_dir={export_dir} in place ({e.strerror}); "
                                f"the earlier export is in {old}/export") from None
        if e.errno in (errno.ENOTEMPTY, errno.EEXIST):
            raise UserError(f"--export_dir={export_dir} was written by another export while this "
                            "one ran; this one was not kept: pass --overwrite to replace it, or "
                            "give another directory") from None
        raise
    return old


def export(model_dir, export_dir, checkpoint=None, overwrite=False, log=print):
    """Exports a run (see the module docstring); returns the exported step. UserError for bad
    input or a failed write, after which export_dir is as it was."""
    import tensorflow as tf
    cfg, run = _checked(model_dir, export_dir, checkpoint, overwrite)
    unusable = unusable_results(run)
    if unusable:
        log(f"warning: {os.path.join(model_dir, rundir.RESULTS)} {unusable}: the model card gives "
            "no error nor anything else from it")
    model, step, skipped, note = restore(cfg, run, checkpoint)
    if skipped:
        log(f"skipped {', '.join(skipped)}")
    log(f"exporting ckpt-{step} (step {step}) of {model_dir}" + (f"; note: {note}" if note else ""))
    export_dir = os.path.normpath(export_dir)
    parent = os.path.dirname(os.path.abspath(export_dir))
    made = parent
    while not os.path.exists(os.path.dirname(made)) and os.path.dirname(made) != made:
        made = os.path.dirname(made)
    made = None if os.path.exists(made) else made  # the first directory this export creates
    tmp = old = None
    try:
        os.makedirs(parent, exist_ok=True)
        tmp = tempfile.mkdtemp(prefix=f".{os.path.basename(export_dir)}.tmp-", dir=parent)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o777 & ~umask)  # as os.makedirs would make it, not mkdtemp's 0700
        _write(tmp, model, cfg, step, skipped, note, run, export_dir, checkpoint is not None,
               unusable)
        old = _put_in_place(tmp, export_dir, overwrite, parent)
        tmp = None
    except (OSError, tf.errors.OpError) as e:
        text = (f"{e.strerror}{f' ({e.filename})' if e.filename else ''}"
                if isinstance(e, OSError) and e.strerror else first_line(e))
        full = disk_full(e, export_dir, "free space there or give another --export_dir")
        if full and tmp:  # the file as the export will be named, not its temporary directory
            full = full.replace(tmp, export_dir)
        raise UserError(f"cannot write --export_dir={export_dir}: " + (full or (
            f"{text}; fix permissions, free space or give another directory"))) from None
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
            d = parent
            while made is not None:  # the directories this export made, if still empty
                try:
                    os.rmdir(d)
                except OSError:
                    break
                if d == made:
                    break
                d = os.path.dirname(d)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    log(f"wrote {export_dir}: {SAVED_MODEL}/, {KERAS}, {CARD}, {LABELS}, {META}")
    return step
