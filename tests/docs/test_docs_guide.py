"""README.md and docs/ as a reader outside this repository meets them: a README that is a front
page, user guides without a lab notebook's history, links and anchors that resolve, and every
command and flag they show accepted by the program it names. Generic over README.md and
docs/*.md, so that a page or section added later is checked the same way."""
import functools
import glob
import os
import re
import sys

import pytest

from tests.helpers import ROOT, run_main

README = os.path.join(ROOT, "README.md")
GUIDES = ["training.md", "imagenet_and_multiworker.md", "theory.md", "ablations_and_table2.md"]
PAGES = [README] + sorted(glob.glob(os.path.join(ROOT, "docs", "*.md")))


def _read(path):
    with open(path) as f:
        return f.read()


def _name(path):
    return os.path.relpath(path, ROOT)


def _sections(text):
    """{heading: body} of the `## ` sections."""
    parts = re.split(r"^## (.+)$", text, flags=re.M)
    return dict(zip(parts[1::2], parts[2::2]))


def _prose(text):
    """The text outside fenced code blocks (a program's verbatim output may hold anything)."""
    return re.sub(r"^```.*?^```", "", text, flags=re.M | re.S)


# --- the README as a front page ---------------------------------------------------------------

def test_readme_is_a_front_page_in_the_agreed_order():
    text = _read(README)
    assert len(text.splitlines()) <= 100 and len(text.split()) <= 1000, \
        (len(text.splitlines()), len(text.split()))
    headings = list(_sections(text))
    order = ["set up", "reproduce table 2", "theory", "export", "status", "layout", "documentation"]
    found = [next(i for i, h in enumerate(headings) if word in h.lower()) for word in order]
    assert found == sorted(found), headings
    assert "Reproduce Table 2" in headings  # another page links to this exact heading
    assert text.split("\n## ")[0].count("\n\n") >= 1  # a paragraph saying what the project is


def test_readme_status_rows_are_short_and_link_to_their_details():
    status = _sections(_read(README))["Status"]
    rows = [line for line in status.splitlines() if line.startswith("|")][2:]  # after the header
    assert 0 < len(rows) <= 8, rows
    for row in rows:
        cells = [c.strip() for c in row.strip("|").split("|")]
        assert all(len(c) <= 120 for c in cells), row
        assert re.search(r"\]\(docs/[\w.]+\.md(#[\w-]+)?\)", row), row


def test_readme_leaves_measured_figures_to_the_pages_that_give_their_command():
    """A figure beside the wrong reference is how a front page goes stale: percentages and
    speed-ups live in the measurement pages, next to their command and commit. (The Table 2
    section may quote the paper.)"""
    sections = _sections(_read(README))
    text = "".join(body for heading, body in sections.items() if heading != "Reproduce Table 2")
    assert not re.findall(r"\d(?:\.\d+)? ?(?:%|×(?! ?\d))|\d\.\d+x\b", text)  # not 32×32


def test_readme_set_up_block_works_as_copied_without_a_gpu():
    """Copied as is, the first block installs the build that runs everywhere (requirements.txt,
    then the package), trains and tests; the CUDA build is the line beside it, a comment, so
    that it is not installed by copying."""
    first = re.search(r"^```bash\n(.*?)^```", _read(README), flags=re.M | re.S).group(1)
    commands = [line for line in first.splitlines() if not line.lstrip().startswith("#")]
    comments = [line for line in first.splitlines() if line.lstrip().startswith("#")]
    assert any("pip install -r requirements.txt" in line for line in commands), first
    assert any("pip install -e ." in line for line in commands), first  # the package, then
    tests = [line.split("#")[0].strip() for line in commands
             if line.startswith("python -m pytest tests")]  # the three: install, train, test
    assert tests, first
    ci = open(os.path.join(ROOT, ".ci", "run"), encoding="utf-8").read().splitlines()
    assert tests[0] in ci, tests  # CI runs the README's test command as written
    assert not any("requirements-gpu.txt" in line for line in commands), first
    assert any("pip install -r requirements-gpu.txt" in line for line in comments), first


def test_readme_says_where_the_theory_check_runs():
    """theory/ is not installed (pyproject.toml): `python -m theory.check` finds it only from the
    checkout's root, and elsewhere fails with exit status 1, the status of a fatal row."""
    said = [p for p in _read(README).split("\n\n") if "python -m theory.check" in p]
    assert said, "the README gives no theory command"
    for paragraph in said:
        assert re.search(r"checkout|repository root", paragraph), paragraph


def test_the_predict_examples_resize_ordinary_photographs():
    """A CIFAR model refuses a photograph that is not its size unless --resize is given; the test
    images run/prepare_data.py --examples_dir writes are (no --resize)."""
    shown = [line for line in _read(README).splitlines() if "run/predict.py" in line
             and re.search(r"\.(jpe?g|png)\b", line)]
    assert shown, shown
    for line in shown:
        photos = re.findall(r"(?<![/*])\b\w+\.(?:jpe?g|png)\b", line.split("#")[0])
        assert not photos or "--resize" in line, line


# --- user guides ---------------------------------------------------------------------------

HISTORY = [(r"\bissues? \d+|\bissue-\d+", "an issue number"),
           (r"\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])[0-9a-f]{7,40}\b", "a commit hash"),
           (r"load average", "a load average")]


@pytest.mark.parametrize("page", ["README.md"] + [f"docs/{g}" for g in GUIDES])
def test_user_guides_carry_no_lab_notebook(page):
    text = _read(os.path.join(ROOT, page))
    prose = _prose(text)
    for pattern, what in HISTORY:
        assert not re.search(pattern, prose, re.I), (page, what, re.search(pattern, prose, re.I))
    tables = len(re.findall(r"^\|[ -:|]+\|$", text, flags=re.M))  # one separator row per table
    dates = re.findall(r"\b20\d\d-\d\d-\d\d\b", prose)
    assert len(dates) <= tables, (page, dates)


@pytest.mark.parametrize("page", ["benchmarks.md", "theory_results.md"])
def test_results_pages_give_each_table_its_command_and_one_provenance_line(page):
    """A results page: every section with a table shows the command that made it and one line
    "Measured DATE ..." (or "Counted"); no table column is named after a commit or a date, and no
    row's history is told ("an earlier version")."""
    text = _read(os.path.join(ROOT, "docs", page))
    for heading, body in _sections(text).items():
        if not re.search(r"^\|[ -:|]+\|$", body, flags=re.M):
            continue
        assert re.search(r"^```bash\n.*?(python|run/|bench/)", body, flags=re.M | re.S) or \
            re.search(r"`(nice -n \d+ )?python [^`]+`", body), (page, heading, "no command")
        provenance = re.findall(r"^(?:Measured|Counted) 20\d\d-\d\d-\d\d\b", body, flags=re.M)
        assert len(provenance) == 1, (page, heading, provenance)
        for header in re.findall(r"^(\|.*\|)\n\|[ -:|]+\|$", body, flags=re.M):
            assert not re.search(HISTORY[1][0] + r"|\b20\d\d-\d\d-\d\d\b", header), (page, header)
    assert not re.search(r"(?i)an earlier version|since folded|previous construction", text), page


@pytest.mark.parametrize("page, words", [("training.md", 2500), ("theory.md", 2500)])
def test_user_guides_are_short_enough_to_read(page, words):
    assert len(_read(os.path.join(ROOT, "docs", page)).split()) <= words


def test_theory_guide_lists_every_status_and_hard_codes_no_row_count():
    from theory import rows
    text = _read(os.path.join(ROOT, "docs", "theory.md"))
    for status in set(rows.STATUS.values()) | {"INCONCLUSIVE"}:
        assert status in text, status
    for page in (README, os.path.join(ROOT, "docs", "theory.md")):
        assert not re.search(r"\b\d+ rows\b", _read(page)), page  # the count drifts as rows are added


def test_changelog_exists_newest_first():
    text = _read(os.path.join(ROOT, "docs", "CHANGELOG.md"))
    assert "newest first" in text.lower() and re.search(r"^- ", text, flags=re.M)


# --- links -----------------------------------------------------------------------------------

def _anchor(heading):
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


@pytest.mark.parametrize("page", PAGES, ids=_name)
def test_every_link_and_anchor_resolves(page):
    text = re.sub(r"`[^`\n]*`", "", _prose(_read(page)))  # links, not code that looks like one
    for target, anchor in re.findall(r"\]\(([^)#\s]*)(?:#([^)\s]+))?\)", text):
        if re.match(r"\w+://", target):
            continue
        path = os.path.normpath(os.path.join(os.path.dirname(page), target)) if target else page
        assert os.path.exists(path), (_name(page), target)
        if anchor:
            headings = re.findall(r"^#+ (.+)$", _prose(_read(path)), flags=re.M)
            assert anchor in {_anchor(h) for h in headings}, (_name(page), target, anchor)


REPO_PATH = re.compile(r"(?<![\w/.])((?:resnet_nobn|run|bench|experiments|theory|tests)/[\w/]+\.py)")


@pytest.mark.parametrize("page", [p for p in PAGES if not p.endswith("CHANGELOG.md")], ids=_name)
def test_every_file_of_the_repository_a_page_names_exists(page):
    """`tests/training/test_remedies.py`, `resnet_nobn/training/rundir.py`: files move (the changelog
    tells history, and is not held to today's tree)."""
    missing = sorted({p for p in REPO_PATH.findall(_read(page))
                      if not os.path.exists(os.path.join(ROOT, p))})
    assert not missing, (_name(page), missing)


# --- the commands the docs show --------------------------------------------------------------

def _command_lines(text):
    """Lines of fenced or indented code (continuations joined, comments cut) and inline code
    spans that hold a command."""
    out, block, lines = [], False, text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.lstrip().startswith("```"):
            block = not block
        elif block or line.startswith("    "):
            while line.rstrip().endswith("\\") and i + 1 < len(lines):
                i += 1
                line = line.rstrip()[:-1] + " " + lines[i].strip()
            out.append(re.split(r"\s#", line)[0])
        else:
            out += re.findall(r"`([^`]*(?:python|(?:run|bench|experiments/\w+)/\w+\.py)[^`]*)`", line)
        i += 1
    return out


PROGRAM = re.compile(
    r"(?:^|\s)(?:python3? +)?(-m +[\w.]+|(?:run|bench|experiments/\w+)/\w+\.py)((?:\s+[^|;&]*)?)")


def _shown_commands():
    """{program: {flag names}} over README.md and docs/*.md; a program is a script path or
    `-m module` of this repository. After ` -- ` (run/launch_local.py) the flags are the inner
    script's."""
    shown = {}
    for page in (p for p in PAGES if not p.endswith("CHANGELOG.md")):  # it tells history
        for line in _command_lines(_read(page)):
            for part in line.split(" -- "):
                m = PROGRAM.search(part)
                if not m or not (m[1].startswith(("run/", "bench/", "experiments/", "-m theory"))):
                    continue
                flags = set(re.findall(r"(?:^|\s|\[)--(\w[\w-]*)", m[2]))
                if flags or "python" in part:  # not a file named in passing (`run/_start.py`)
                    shown.setdefault(" ".join(m[1].split()), set()).update(flags)
    return shown


@functools.lru_cache(maxsize=None)
def _help(program):
    """The program's help: absl's --helpfull for run/ scripts, argparse's --help otherwise. Read in
    this process by `run_main` (its script path is relative to run/), as `python PROGRAM` prints it;
    a `-m` module runs as its file, this repository's root on sys.path. No interpreter start and
    no TensorFlow import for each program."""
    path = (program.split()[-1].replace(".", "/") + ".py" if program.startswith("-m") else program)
    absl = program.startswith("run/") and program != "run/launch_local.py"
    proc = run_main(os.path.relpath(os.path.join(ROOT, path), os.path.join(ROOT, "run")),
                    "--helpfull" if absl else "--help")
    return proc.stdout + proc.stderr


ALWAYS = {"help", "helpfull", "helpshort", "flagfile"}


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_every_command_and_flag_the_docs_show_exists():
    shown = _shown_commands()
    assert {"run/cifar_train.py", "run/predict.py", "-m theory.check"} <= set(shown), shown
    missing = []
    for program, flags in sorted(shown.items()):
        path = program.split()[-1].replace(".", "/") + ".py" if program.startswith("-m") else program
        assert os.path.exists(os.path.join(ROOT, path)), program
        text = _help(program)
        assert "usage" in text.lower() or "flags:" in text, (program, text[-2000:])
        missing += [f"{program} --{f}" for f in sorted(flags - ALWAYS)
                    if not re.search(rf"--(\[no\])?{re.escape(f)}\b", text)]
    assert not missing, missing
