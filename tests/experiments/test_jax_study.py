"""experiments/stability/jax_study.py (the stability study's runs under Keras' JAX backend, for a GPU machine
without TensorFlow) and experiments/stability/jax_study_report.py (their tables and paired gaps).

The property that makes its numbers the project's: from the same weights on the same batches, the
project's Fixup through its Keras step there trains exactly as experiments/stability/fixup_jax.py's independent
Fixup does (which shares nothing with the project's model or step); and TensorFlow is never loaded."""
import base64
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from tests.helpers import ROOT, write_idx

pytestmark = pytest.mark.timeout(400)
sys.path.insert(0, os.path.join(ROOT, "experiments", "stability"))


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    """The study's records of three short runs, trained in a process where TensorFlow cannot be
    imported; the history is logged every 2 steps (the study's LOG_EVERY is 10), so that 4 steps
    give two means of 2 steps each to compare."""
    tmp = tmp_path_factory.mktemp("jax_study")
    rng = np.random.default_rng(0)
    write_idx(str(tmp / "idx"), (rng.integers(0, 256, (256, 28, 28)), rng.integers(0, 10, 256)),
              (rng.integers(0, 256, (40, 28, 28)), rng.integers(0, 10, 40)))
    plan = [dict(name="fixup_s3", net="fixup", blocks=1, lr=0.1, steps=4, seed=3,
                 standardize="dataset", crop_padding=4),
            dict(name="ref_s3", net="fixup_ref", blocks=1, lr=0.1, steps=4, seed=3,
                 standardize="dataset", crop_padding=4),
            dict(name="paper_s3", net="paper", blocks=1, lr=0.05, steps=2, seed=3, clip_norm=1.0,
                 mixup=1.0)]
    (tmp / "plan.json").write_text(json.dumps(plan))
    blocker = ("import sys\nclass B:\n def find_spec(self, name, *a):\n"
               "  if name.split('.')[0] == 'tensorflow': raise ImportError('no tensorflow')\n"
               "sys.meta_path.insert(0, B())\n"
               f"sys.path.insert(0, {os.path.join(ROOT, 'experiments', 'stability')!r})\n"
               "import jax_study\njax_study.LOG_EVERY = 2\n"
               f"sys.argv = ['jax_study.py', '--data={tmp / 'idx'}', '--plan={tmp / 'plan.json'}',"
               f" '--out={tmp / 'out'}']\n"
               "jax_study.main()\n")
    p = subprocess.run([sys.executable, "-c", blocker], capture_output=True, text=True, timeout=360,
                       env=dict(os.environ, KERAS_BACKEND="jax", JAX_PLATFORMS="cpu"))
    assert p.returncode == 0, p.stderr[-3000:]
    return {r["name"]: r for r in json.loads((tmp / "out" / "results_0.json").read_text())}


@pytest.mark.slow
def test_the_projects_fixup_trains_as_the_independent_one_without_tensorflow(study):
    ours, ref = study["fixup_s3"], study["ref_s3"]
    assert len(ours["history"]) == 2 and ours["nonfinite_at"] is None
    np.testing.assert_allclose([h[1:3] for h in ours["history"]],
                               [h[1:3] for h in ref["history"]], rtol=1e-5)
    assert ours["standardization"]["mode"] == "dataset" and ours["measured"]["keras"]


def test_a_record_holds_its_error_and_its_per_image_correctness(study):
    from jax_study import correct_of
    paper = study["paper_s3"]
    right = correct_of(paper, n=40)
    assert paper["test_error"] == pytest.approx(1 - right.mean())
    assert paper["clip_norm"] == 1.0 and paper["mixup"] == 1.0 and paper["steps_run"] == 2
    assert all(h[3] > 0 for h in paper["history"])  # the gradient norm, before the clip


def _record(name, seed, wrong):
    wrong = np.asarray(wrong, bool)
    return dict(name=f"{name}_s{seed}", seed=seed, test_error=float(wrong.mean()),
                nonfinite_at=None, correct=base64.b64encode(np.packbits(~wrong)).decode())


def test_the_report_pairs_by_image_over_the_seeds_both_sides_finished(tmp_path, capsys):
    import jax_study_report
    rng = np.random.default_rng(1)
    a = {s: rng.random(10_000) < 0.10 for s in (3, 5, 7)}
    b = {s: rng.random(10_000) < 0.07 for s in (3, 5, 7)}
    records = [_record("a", s, a[s]) for s in (3, 5)] + [_record("b", s, b[s]) for s in (3, 5, 7)]
    records.append(dict(name="a_s7", seed=7, nonfinite_at=290, test_error=None))
    table = jax_study_report.conditions(records)
    seeds, by_image, over = jax_study_report.gap(table["a"], table["b"])
    assert seeds == [3, 5]  # seed 7 diverged on side a
    want = 100 * np.mean([a[s].mean() - b[s].mean() for s in (3, 5)])
    assert by_image[0] == pytest.approx(want) and by_image[1] < want < by_image[2]
    assert over is not None and jax_study_report.cell(records[-1]) == "non-finite @290"
    assert jax_study_report.summary(table["a"])[0] == "2/3"


def _main(tmp_path, monkeypatch, results):
    """experiments/stability/jax_study.py's main() over a plan of three runs, its shard's results file holding
    `results` (text) beforehand, training replaced by a stand-in; (names trained, the file after)."""
    import jax_study
    plan = [dict(name=f"r{k}", net="paper", blocks=1, lr=0.1, steps=10, seed=k) for k in range(3)]
    (tmp_path / "plan.json").write_text(json.dumps(plan))
    (tmp_path / "out").mkdir()
    path = tmp_path / "out" / "results_0.json"
    path.write_text(results)
    trained = []

    def train_one(run, data, cache):
        trained.append(run["name"])
        return dict(run, test_error=0.25, nonfinite_at=None, seconds=0.0), None
    monkeypatch.setattr(jax_study, "load", lambda data: {})
    monkeypatch.setattr(jax_study, "train_one", train_one)
    monkeypatch.setattr(sys, "argv", ["jax_study.py", "--data=unused", f"--plan={tmp_path / 'plan.json'}",
                                      f"--out={tmp_path / 'out'}"])
    jax_study.main()
    return trained, path.read_text()


def test_a_rerun_keeps_its_shards_records_and_runs_only_the_plans_others(tmp_path, monkeypatch,
                                                                         capsys):
    kept = [dict(name="r0", seed=0, test_error=0.5, nonfinite_at=None),
            dict(name="r2", seed=2, test_error=None, nonfinite_at=30)]  # a non-finite run counts
    trained, after = _main(tmp_path, monkeypatch, json.dumps(kept))
    assert trained == ["r1"]
    assert [r["name"] for r in json.loads(after)] == ["r0", "r2", "r1"]
    assert json.loads(after)[:2] == kept
    assert "keeps its 2 records, skips 2 runs of the plan" in capsys.readouterr().out


@pytest.mark.parametrize("text", ['[{"name": "r0"', '{"name": "r0"}', '[{"seed": 0}]'])
def test_a_results_file_that_cannot_be_read_is_refused_and_kept(tmp_path, monkeypatch, text):
    with pytest.raises(SystemExit) as refused:
        _main(tmp_path, monkeypatch, text)
    assert str(refused.value).startswith("error: ") and "\n" not in str(refused.value)
    assert (tmp_path / "out" / "results_0.json").read_text() == text


def test_the_reports_interval_of_an_error_rate_is_cut_to_0_100_and_says_so(tmp_path, monkeypatch,
                                                                             capsys):
    import jax_study_report
    records = [dict(name=f"a_s{s}", seed=s, test_error=e, nonfinite_at=None)
               for s, e in ((3, 0.2), (5, 0.9), (7, 0.7))]  # t over 2 d.f.: about [-29, 149]
    assert jax_study_report.summary(jax_study_report.conditions(records)["a"])[1].endswith(
        " [0.00, 100.00]")
    (tmp_path / "r.json").write_text(json.dumps(records))
    monkeypatch.setattr(sys, "argv", ["jax_study_report.py", f"--results={tmp_path / 'r.json'}"])
    jax_study_report.main()
    assert "(Student t, n - 1 degrees of freedom, cut to [0, 100])" in capsys.readouterr().out
