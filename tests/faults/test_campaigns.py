"""Every case of fault campaigns 2 and 3 (tests/faults/campaign.py) as a test: the case's
verdict, and what happened when it failed.

By default the suite runs the QUICK cases: refusals that start no training beyond the base run
every case copies, and one case of each of campaign 3's sections 1, 3 and 4; the others train,
run studies or start workers for tens of seconds each, and run with FAULTS=all. A case that mounts
file systems (a full disk, a read-only mount) runs as root only."""
import os

import pytest

from tests.faults import campaign, helpers

pytestmark = pytest.mark.faults
FULL = os.environ.get("FAULTS") == "all"
QUICK = {  # a section (all its cases), or a section and a case's name
    2: {"1.2", "1.5", "1.6", "1.7", "2.2 config.json whose model is not an object",
        "2.2 study root with an unrelated config.json: ablate",
        "3.2 launch_local --num_workers=100000", "3.4", "3.5"},
    3: {"1.5", "3.1", "4.1", "4.12", "4.13", "5.6", "5.7", "5.8", "5.9", "5.10", "6.1", "6.2",
        "6.3", "6.4"}}


def quick(number, case):
    """Whether the suite runs `case` without FAULTS=all."""
    return case.section in QUICK[number] or f"{case.section} {case.name}" in QUICK[number]


@pytest.fixture(scope="session")
def shared_runs(tmp_path_factory):
    """One base run and one set of tfds directories per test process, copied by the cases."""
    helpers.SHARED["dir"] = str(tmp_path_factory.mktemp("fault_base"))
    yield
    helpers.SHARED.clear()


def _params(number):
    return [pytest.param(number, c, id=f"campaign{number} {c.section} {c.name}")
            for c in campaign.cases(number)]


@pytest.mark.timeout(1200)
@pytest.mark.parametrize("number, case", _params(2) + _params(3))
def test_case_behaves_as_expected(number, case, shared_runs, tmp_path):
    if not FULL and not quick(number, case):
        pytest.skip("trains for tens of seconds: FAULTS=all runs it")
    try:
        ok, got = case.fn(str(tmp_path))
    except helpers.NeedsRoot as e:
        pytest.skip(str(e))
    finally:
        campaign.after(number)
    assert ok, f"expected: {case.expected}; got: {got}"


def test_the_quick_cases_are_cases():
    """Every entry of QUICK names a case: a renamed case would silently leave the suite."""
    for number, entries in QUICK.items():
        cases = campaign.cases(number)
        for entry in entries:
            assert any(entry in (c.section, f"{c.section} {c.name}") for c in cases), entry
