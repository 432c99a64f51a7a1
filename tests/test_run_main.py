"""The tests' in-process entry point (tests.helpers.run_main) starts from the flags a fresh
interpreter has, whatever the test process imported before it."""
from tests.helpers import run_main


def test_an_entry_point_in_process_starts_from_absls_own_flags():
    import experiments.stability.paired_gap  # noqa: F401  defines --data_dir at import, as run/ does
    from absl import flags
    for script in ("cifar_train.py", "prepare_data.py"):
        p = run_main(script, "--help")
        assert p.returncode == 0 and "--data_dir" in p.stdout, p.stderr[-1500:]
    assert "data_dir" in flags.FLAGS  # the importer's flag is back afterwards
