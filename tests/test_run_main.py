"""The tests' in-process entry point (tests.helpers.run_main) starts from the flags a fresh
interpreter has, whatever the test process imported before it, and in the environment it is
given (a variable given None removed)."""
from tests.helpers import run_main


def test_an_entry_point_in_process_starts_from_absls_own_flags():
    import experiments.stability.paired_gap  # noqa: F401  defines --data_dir at import, as run/ does
    from absl import flags
    for script in ("cifar_train.py", "prepare_data.py"):
        p = run_main(script, "--help")
        assert p.returncode == 0 and "--data_dir" in p.stdout, p.stderr[-1500:]
    assert "data_dir" in flags.FLAGS  # the importer's flag is back afterwards


def test_a_variable_given_none_is_removed_for_the_call_and_back_afterwards(tmp_path, monkeypatch):
    """tests.helpers.no_network_env's proxies reach the entry point without the no_proxy that
    would let a request bypass them; the test's environment is as it was afterwards."""
    import os

    from tests.helpers import no_network_env
    script = tmp_path / "show.py"  # an absolute path: run_main runs it as it runs run/<script>
    script.write_text("import os\nprint(os.environ.get('no_proxy'), os.environ['HTTPS_PROXY'])\n")
    monkeypatch.setenv("no_proxy", "*")
    with no_network_env() as env:
        p = run_main(str(script), env=env)
    assert p.returncode == 0, p.stderr
    said_no_proxy, proxy = p.stdout.split()
    assert said_no_proxy == "None" and proxy == env["HTTPS_PROXY"], p.stdout
    assert os.environ["no_proxy"] == "*"
