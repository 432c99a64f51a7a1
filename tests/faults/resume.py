"""Fault campaign 2, section 1: work lost or reported wrong on resume (a model_dir with glob
characters, flags changed on resume, the retry after a divergence, NaN weights restored,
`--eval_only` rewriting the record, fewer steps than done, the default model_dir)."""
import json
import os
import re
import shutil

from tests.faults.helpers import (
    RUN, TINY, copy_base, one_line, read, registrar, run, said, tf_quiet, train)

case = registrar(2)


@case("1.1", "--model_dir with [ ] * ?", "resumes, or refused in one line before training")
def model_dir_glob(s):
    d = os.path.join(s, "run[1]*?")
    first = train(d, "--train_steps=2")
    if one_line(first) and not os.path.exists(d):
        return True, said(first)
    again = train(d, "--train_steps=4")
    return again.returncode == 0 and "resumed from" in again.stdout, said(again)


def _changed(s, name, flag, field):
    d = copy_base(s, os.path.join(s, name))
    before = read(os.path.join(d, "config.json"))
    p = train(d, "--train_steps=6", flag)
    ok = one_line(p) and field in p.stderr and read(os.path.join(d, "config.json")) == before
    return ok, said(p)


@case("1.2", "resume with another --seed", "one line naming seed; config.json unchanged")
def changed_seed(s):
    return _changed(s, "seed", "--seed=1", "seed")


@case("1.2", "resume with another --batch_size",
      "one line naming batch_size; config.json unchanged")
def changed_batch(s):
    return _changed(s, "batch", "--batch_size=16", "batch_size")


@case("1.2", "resume with other --lr_boundaries",
      "one line naming lr_boundaries; config.json unchanged")
def changed_boundaries(s):
    return _changed(s, "boundaries", "--lr_boundaries=3", "lr_boundaries")


@case("1.3", "retry after a first-loop divergence",
      "the printed `retry with:` flags resume the run")
def retry_after_divergence(s):
    d = os.path.join(s, "diverge")
    flags = ["--learning_rate=1e6", "--train_steps=8", "--log_every=4", "--steps_per_loop=4",
             "--checkpoint_every=1000"]
    first = train(d, *flags)
    m = re.search(r"retry with: (.*)", first.stderr)
    if not m:
        return False, "no `retry with:` line: " + said(first)
    again = train(d, *flags, *m.group(1).split())
    ok = "corrupt" not in again.stderr and (again.returncode == 0 or "retry with" in again.stderr)
    return ok, said(again)


def _poison(model_dir):
    """Writes NaN into one kernel of the newest checkpoint (same keys, valid checksums); returns
    its prefix."""
    with tf_quiet():
        import tensorflow as tf
    prefix = tf.train.latest_checkpoint(os.path.join(model_dir, "ckpt"))
    reader = tf.train.load_checkpoint(prefix)
    names = sorted(reader.get_variable_to_dtype_map())
    tensors = [reader.get_tensor(n) for n in names]
    kernel = next(i for i, n in enumerate(names)  # a trained weight (not an optimizer slot)
                  if "_trainable_variables" in n and tensors[i].dtype.kind == "f"
                  and tensors[i].size > 1)
    tensors[kernel] = tensors[kernel].copy()
    tensors[kernel].flat[0] = float("nan")
    tf.raw_ops.SaveV2(prefix=prefix, tensor_names=names, shape_and_slices=[""] * len(names),
                      tensors=tensors)
    return prefix


@case("1.4", "NaN weights restored (--eval_only)",
      "the NaN checkpoint skipped and named; no non-finite number recorded")
def nan_weights(s):
    d = copy_base(s, os.path.join(s, "nan"))
    newest = _poison(d)
    p = train(d, "--train_steps=4", "--eval_only")

    def finite_only(constant):
        raise ValueError(f"{constant} in results.json")
    try:
        json.loads(read(os.path.join(d, "results.json")) or "{}", parse_constant=finite_only)
        strict = True
    except ValueError:
        strict = False
    skipped = f"skipped {os.path.basename(newest)}" in p.stdout + p.stderr
    return skipped and strict and "Traceback" not in p.stderr, said(p)


@case("1.5", "--eval_only --seed=7 --learning_rate=0.3",
      "results.json keeps the run's seed and rate")
def eval_only_record(s):
    d = copy_base(s, os.path.join(s, "evalonly"))
    p = train(d, "--train_steps=4", "--eval_only", "--seed=7", "--learning_rate=0.3")
    cfg = (json.loads(read(os.path.join(d, "results.json")) or "{}")).get("config", {})
    got = f"exit {p.returncode}; recorded seed {cfg.get('seed')}, lr {cfg.get('learning_rate')}"
    return cfg.get("seed") == 0 and cfg.get("learning_rate") == 0.01, got


@case("1.6", "--train_steps below the current step", "said; config.json unchanged")
def fewer_steps(s):
    d = copy_base(s, os.path.join(s, "fewer"))
    before = read(os.path.join(d, "config.json"))
    p = train(d, "--train_steps=2")
    text = p.stdout + p.stderr
    ok = "train_steps" in text and read(os.path.join(d, "config.json")) == before
    return ok, said(p)


@case("1.7", "resume with another --mixed_precision", "one line naming mixed_precision")
def changed_precision(s):
    d = copy_base(s, os.path.join(s, "precision"))
    p = train(d, "--train_steps=6", "--mixed_precision=bfloat16")
    return one_line(p) and "mixed_precision" in p.stderr and "corrupt" not in p.stderr, said(p)


@case("1.8", "--model_dir omitted", "the default directory is named")
def no_model_dir(s):
    default = "/tmp/resnet_nobn"
    if os.path.exists(default):
        return False, f"not tried: {default} exists (remove it to run this case)"
    try:
        p = run([os.path.join(RUN, "cifar_train.py"), *TINY, "--train_steps=2"])
        return default in p.stdout + p.stderr, said(p)
    finally:
        shutil.rmtree(default, ignore_errors=True)
