"""The TensorFlow-oracle suite's fixtures: the cases, TensorFlow's answers, the summary.

* ``tf_case``: parametrized over every case of every ``cases_<family>.py`` (ids are
  case ids; with the ``backend`` fixture: ``test_values[cpu-Add/int32_wraps]``).
* ``reference``: TensorFlow's answers.  When TensorFlow is importable they are
  recorded afresh by ``record.py`` in a child process (TensorFlow never loads in
  the test process, which also holds PoCL); otherwise the checked-in recording in
  ``recorded/`` is used.  ``OPKERNEL_TF_REFERENCE=recorded`` forces the checked-in
  one (quicker, when you know it is current), ``=fresh`` requires TensorFlow.
* The terminal summary counts ops, cases, comparisons per backend and outcome.
"""

from __future__ import annotations

import os
import sys
from collections import Counter
from importlib.util import find_spec
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

import recording  # noqa: E402
from case import Case  # noqa: E402
from tf_suite import OUTCOMES, RECORDED, Reference, record_fresh, suite, write_summary  # noqa: E402


_REFERENCE: Reference | None = None


@pytest.fixture(scope="session")
def reference(tmp_path_factory: pytest.TempPathFactory) -> Reference:
    global _REFERENCE
    if _REFERENCE is None:
        want = os.environ.get("OPKERNEL_TF_REFERENCE", "auto")
        have_tf = find_spec("tensorflow") is not None
        if want == "fresh" and not have_tf:
            pytest.fail("OPKERNEL_TF_REFERENCE=fresh but tensorflow is not importable (pip install -e '.[tf-oracle]')")
        if have_tf and want != "recorded":
            out, selftest = tmp_path_factory.mktemp("tf_reference"), tmp_path_factory.mktemp("tf_selftest")
            record_fresh(out, selftest)
            fams = recording.read_dir(out)
            version = next(iter(fams.values()))["tensorflow"] if fams else "?"
            _REFERENCE = Reference(f"recorded now from TensorFlow {version}", fams,
                                   recording.read_dir(selftest / "out"))
        else:
            fams = recording.read_dir(RECORDED)
            version = next(iter(fams.values()))["tensorflow"] if fams else "?"
            why = "OPKERNEL_TF_REFERENCE=recorded" if have_tf else "tensorflow not installed"
            _REFERENCE = Reference(f"checked-in recording from TensorFlow {version} ({why})", fams)
    return _REFERENCE


def pytest_report_header(config: pytest.Config) -> str:
    want = os.environ.get("OPKERNEL_TF_REFERENCE", "auto")
    if find_spec("tensorflow") is not None and want != "recorded":
        return "TensorFlow reference: recorded afresh by tests/tf_conformance/record.py (tensorflow is importable)"
    why = "OPKERNEL_TF_REFERENCE=recorded" if want == "recorded" else "tensorflow is not installed"
    return f"TensorFlow reference: checked-in recording in {RECORDED} ({why})"


@pytest.fixture(scope="session")
def checked_in() -> Reference:
    return Reference("checked-in recording", recording.read_dir(RECORDED))


@pytest.fixture
def tf_case(request: pytest.FixtureRequest) -> tuple[str, Case]:
    return suite().cases[request.param]


@pytest.hookimpl(trylast=True)            # after the backend parametrization: ids read cpu-<case id>
def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "tf_case" in metafunc.fixturenames:
        ids = sorted(suite().cases)
        metafunc.parametrize("tf_case", ids, ids=ids, indirect=True)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    # A failure anywhere in a values test counts as "failed", whatever the test noted.
    key = dict(report.user_properties).get("tf_outcome_key")
    if key is not None and report.failed:
        OUTCOMES[key] = "failed"


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    if not OUTCOMES:
        return
    s = suite()
    ran = {cid for _, cid in OUTCOMES}
    ops = {s.cases[cid][1].op for cid in ran if cid in s.cases}
    lines = [
        f"reference: {_REFERENCE.source if _REFERENCE else 'not loaded'}",
        f"ops compared: {len(ops)}; cases: {len(ran)} of {len(s.cases)}; "
        f"deliberate differences listed: {len(s.differences)}; exempt ops: {len(s.exempt)}",
    ]
    for backend in sorted({b for b, _ in OUTCOMES}):
        counts = Counter(v for (b, _), v in OUTCOMES.items() if b == backend)
        parts = ", ".join(f"{counts[k]} {k}" for k in ("agrees", "difference", "missing kernel", "failed"))
        lines.append(f"{backend}: {sum(counts.values())} comparisons: {parts}")
    tr = terminalreporter
    tr.section("TensorFlow conformance")
    for line in lines:
        tr.write_line(line)
    if os.environ.get("OPKERNEL_TF_WRITE_SUMMARY") == "1":
        # Keeps docs/conformance.md's "Last run" figures the ones a run printed, not retyped.
        write_summary(lines, "pytest " + " ".join(config.invocation_params.args))
