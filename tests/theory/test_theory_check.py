"""The report `python -m theory.check` (theory/check.py, theory/rows.py) and the layout of theory/:
guarded groups, rows printed as they finish, fatal controls, Ctrl-C, --json that cannot be
written, TensorFlow's start-up lines, no import cycle and no private name across modules."""
import ast
import json
import os
import signal
import subprocess
import sys
import time
import types


from theory import check
from theory.rows import Group, Row
from tests.helpers import signal_when

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _row(rid, kind="proved", passed=True):
    return Row(rid, f"statement {rid}", kind, 1, "q", 0.0, "<= 1", passed, [])


def _fake(monkeypatch, groups):
    module = types.SimpleNamespace(__name__="fake", GROUPS=groups)
    monkeypatch.setattr(check, "load_sections", lambda: [("fake section", module, 0)])


def test_a_crash_is_one_fatal_error_row_and_the_other_rows_still_print(monkeypatch, capsys):
    seen = {}

    def crash(quick, rng):
        seen["before"] = capsys.readouterr().out           # X1 is printed before X2-X3 runs
        raise ZeroDivisionError("division by zero in the check")

    _fake(monkeypatch, [Group(("X1",), lambda q, r: _row("X1")), Group(("X2", "X3"), crash),
                        Group(("X4",), lambda q, r: [_row("X4")])])
    assert check.main([]) == 1
    out = capsys.readouterr().out
    assert "PASS          X1" in seen["before"]
    assert "ERROR         X2-X3 crash raised ZeroDivisionError: division by zero" in out
    assert "PASS          X4" in out and "FAILED: X2-X3" in out and "Traceback" not in out


def test_a_group_returning_other_rows_than_promised_is_an_error(monkeypatch, capsys):
    _fake(monkeypatch, [Group(("X1", "X2"), lambda q, r: [_row("X1")])])
    assert check.main([]) == 1
    assert "promised" in capsys.readouterr().out


def test_statuses_exit_status_json_and_width(monkeypatch, tmp_path, capsys):
    ok = [Row("X1", "a proved statement " * 8, "proved", 3, "max err", 1e-16, "<= 1e-9", True, ["d" * 300]),
          Row("X2", "printed", "printed", 2, "min slack", -0.5, ">= 0", False, ["counterexample"],
              corrected_by="X1"),
          Row("X3", "open", "empirical", 1, "margin", -1.0, ">= 0", False, []),
          Row("X4", "control", "control", 1, "found", 1.0, "> 0", True, [])]
    _fake(monkeypatch, [Group(("X1", "X2", "X3", "X4"), lambda q, r: list(ok))])
    out = tmp_path / "rows.json"
    assert check.main(["--json", str(out)]) == 0
    text = capsys.readouterr().out
    assert "REFUTED" in text and "DOES NOT HOLD" in text and "the statement that holds: X1" in text
    assert max(len(line) for line in text.splitlines()) <= 120
    assert [r["status"] for r in json.load(open(out))] == ["PASS", "REFUTED", "DOES NOT HOLD", "OK"]
    for bad in (_row("Y", "proved", False), Row("Y", "c", "printed", 1, "q", 1.0, ">= 0", True, []),
                _row("Y", "control", False)):
        _fake(monkeypatch, [Group(("Y",), lambda q, r, bad=bad: bad)])
        assert check.main([]) == 1
        assert "FAILED: Y" in capsys.readouterr().out


def test_a_section_that_cannot_be_imported_is_an_error_row(monkeypatch, capsys):
    monkeypatch.setattr(check, "SECTIONS", [("broken", "theory.no_such_section", 0)])
    assert check.main([]) == 1
    assert "ERROR" in capsys.readouterr().out


def _run(args, env=None, timeout=300):
    return subprocess.run([sys.executable, "-m", "theory.check", *args], cwd=REPO, capture_output=True,
                          text=True, timeout=timeout, env=env)


def _env_without_tf_log_level():
    return {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}


def test_no_tensorflow_start_up_lines_when_the_log_level_is_unset():
    proc = _run(["--quick", "--rows", "L1"], env=_env_without_tf_log_level())
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stderr == "", proc.stderr
    assert "PASS          L1" in proc.stdout


def test_json_to_a_full_disk_says_so_in_one_line_and_keeps_the_rows_on_stdout(capsys):
    assert check.main(["--quick", "--rows", "L1", "--json", "/dev/full"]) == 1
    out, err = capsys.readouterr()
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "/dev/full" in lines[0] and "No space left" in lines[0], err
    assert "PASS          L1" in out and "Traceback" not in out + err


def test_json_path_that_cannot_be_opened_is_refused_before_the_checks(tmp_path):
    (tmp_path / "a_file").write_text("")
    t0 = time.time()
    proc = _run(["--quick", f"--json={tmp_path / 'a_file' / 'out.json'}"], timeout=120)
    assert proc.returncode == 2 and "cannot write there" in proc.stderr, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    assert "Traceback" not in proc.stderr and "==" not in proc.stdout  # no check ran
    assert time.time() - t0 < 30


def test_json_is_written_after_every_row(monkeypatch, tmp_path, capsys):
    path = tmp_path / "rows.json"
    seen = {}

    def second(quick, rng):
        seen["json"] = json.load(open(path))
        return _row("X2")

    _fake(monkeypatch, [Group(("X1",), lambda q, r: _row("X1")), Group(("X2",), second)])
    assert check.main(["--json", str(path)]) == 0
    assert [r["id"] for r in seen["json"]] == ["X1"]
    assert [r["id"] for r in json.load(open(path))] == ["X1", "X2"]


def test_ctrl_c_prints_one_line_and_exits_non_zero(tmp_path):
    proc = subprocess.Popen([sys.executable, "-m", "theory.check", "--quick", "--json", str(tmp_path / "r.json")],
                            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=_env_without_tf_log_level())
    _, err = signal_when(proc, lambda lines: lines[-1].startswith("PASS          L1"),  # first row
                         signal.SIGINT, wait=600)
    assert proc.returncode == 130
    assert err.strip().splitlines() == [f"interrupted; the rows so far are in {tmp_path / 'r.json'}"], err
    assert len(json.load(open(tmp_path / "r.json"))) >= 1


def test_unknown_row_id_is_one_line(capsys):
    assert check.main(["--rows", "L99"]) == 2
    assert "unknown row id(s) L99" in capsys.readouterr().err


# ---------------------------------------------------------------- the layout of theory/


def _imports(path, package_root):
    """(module-level and function-level) imports of theory modules in a file: [(module, names)]."""
    tree = ast.parse(open(path, encoding="utf-8").read())
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("theory"):
            for a in node.names:
                full = f"{node.module}.{a.name}"
                is_module = os.path.exists(os.path.join(package_root, *full.split(".")) + ".py") or \
                    os.path.isdir(os.path.join(package_root, *full.split(".")))
                out.append((full if is_module else node.module, None if is_module else a.name))
        elif isinstance(node, ast.Import):
            out += [(a.name, None) for a in node.names if a.name.startswith("theory")]
    return out


def test_theory_is_laid_out_by_section_without_cycles_or_private_imports():
    files = {}
    for folder, _, names in os.walk(os.path.join(REPO, "theory")):
        for name in names:
            if name.endswith(".py"):
                path = os.path.join(folder, name)
                mod = os.path.relpath(path, REPO)[:-3].replace(os.sep, ".").replace(".__init__", "")
                files[mod] = path
    assert {"theory.section2.linear", "theory.section2.optimum", "theory.section2.checks",
            "theory.section3.expressivity", "theory.section3.checks"} <= set(files)
    graph, private = {}, []
    for mod, path in files.items():
        deps = set()
        for target, name in _imports(path, REPO):
            deps.add(target)
            if name and name.startswith("_"):
                private.append(f"{mod} imports {target}.{name}")
        graph[mod] = {d for d in deps if d in files and d != mod}
    assert not private, private
    state = {}

    def visit(m, stack):
        state[m] = "open"
        for d in graph[m]:
            assert state.get(d) != "open", f"import cycle: {' -> '.join(stack + [m, d])}"
            if d not in state:
                visit(d, stack + [m])
        state[m] = "done"
    for m in graph:
        if m not in state:
            visit(m, [])
    # mathematics apart from checks: no module of the mathematics imports a check module
    for mod, deps in graph.items():
        if ".checks" not in mod and "references" not in mod and mod not in ("theory.check", "theory.rows"):
            assert not [d for d in deps if ".checks" in d or "references" in d], (mod, deps)


def test_docs_list_every_slip_numbered_with_the_two_new_ones():
    text = open(os.path.join(REPO, "docs", "theory.md"), encoding="utf-8").read()
    section = text[text.index("## Slips found in the paper"):]
    section = section[:section.index("\n## ", 5)]
    numbers = [int(line.split(".")[0]) for line in section.splitlines() if line[:1].isdigit()]
    assert numbers == list(range(1, len(numbers) + 1)) and len(numbers) >= 10
    assert "B_j = I − S W S⁻¹" in section and "S W S⁻¹ − I" in section
    assert "1 ± ρ/3" in section and "1 ± ρ′" in section and "Lemma B.2" in section
