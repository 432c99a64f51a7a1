"""experiments/stability/mechanism.py: a run's cross-entropy, pooled_spread and logit_norm read back from its
TensorBoard events as written, with the step a diverged run went non-finite."""
import json

from experiments.stability import mechanism


def test_curves_are_the_logged_scalars_and_the_divergence_step(tmp_path):
    import tensorflow as tf
    writer = tf.summary.create_file_writer(str(tmp_path / "train"))
    with writer.as_default():
        for step in (10, 20, 400):
            tf.summary.scalar("cross_entropy", 2.3 - step / 100, step=step)
            tf.summary.scalar("pooled_spread", step / 1000, step=step)
            tf.summary.scalar("logit_norm", step / 10, step=step)
    writer.close()
    (tmp_path / "diverged.json").write_text(json.dumps({"step": 30}))
    data, diverged = mechanism.curves(str(tmp_path), max_step=300)
    assert diverged == 30
    assert data["pooled_spread"][0] == [10, 20]  # step 400 is past max_step
    assert [round(v, 4) for v in data["cross_entropy"][1]] == [2.2, 2.1]
    assert [round(v, 4) for v in data["logit_norm"][1]] == [1.0, 2.0]


def test_a_run_it_cannot_draw_is_one_line_not_an_empty_figure(tmp_path):
    import pytest
    empty = tmp_path / "empty"
    empty.mkdir()
    for items, max_step, said in (
            (["x:" + str(tmp_path / "nope")], 300, "is not a directory"),
            (["bad"], 300, "is not LABEL:MODEL_DIR"),
            (["x:" + str(empty)], 300, "holds none of cross_entropy"),
            (["x:" + str(empty)], 0, "--max_step=0 shows no step")):
        with pytest.raises(ValueError, match=said):
            mechanism.read_runs(items, max_step)
