"""The suite covers the library: every op has cases or a reasoned exemption, and the
case tables, the lists of differences and the checked-in recording agree with each other."""

from __future__ import annotations

import re

import numpy as np
import pytest

import opkernel as ok
from opkernel import op_registry, plugins

from tf_suite import DIFFERENCES_END, DIFFERENCES_START, DOC, Reference, documented_section, families, suite
from test_tf_values import _mismatch

RERECORD = "re-record with `.venv/bin/python tests/tf_conformance/record.py --out tests/tf_conformance/recorded`"


def registered_ops() -> list[str]:
    plugins.ensure_loaded()
    return sorted(op_registry.op_names())


@pytest.mark.parametrize("family", families())
def test_case_module_loads(family: str) -> None:
    error = suite().module_errors.get(family)
    if error:
        pytest.fail(f"cases_{family}.py cannot give its cases (it needs cases(), DIFFERENCES and EXEMPT):\n{error}")


def test_case_ids_are_unique() -> None:
    if suite().duplicates:
        pytest.fail(f"case ids used more than once: {sorted(set(suite().duplicates))}")


def uncovered_ops() -> list[str]:
    s = suite()
    with_cases = {c.op for _, c in s.cases.values()}
    return [op for op in registered_ops() if op not in with_cases and op not in s.exempt]


def test_every_op_has_cases_or_an_exemption() -> None:
    missing = uncovered_ops()
    if missing:
        pytest.fail(f"{len(missing)} registered ops have no TensorFlow conformance case and no EXEMPT entry "
                    f"with a reason: {missing}")


def test_an_op_added_without_cases_is_named(fresh_registry: None) -> None:
    """The coverage rule sees ops registered by any plugin, not a list frozen when the suite was written."""
    ok.register_op("ZzConformanceProbe").input("x: float").output("y: float")
    assert "ZzConformanceProbe" in uncovered_ops()


def test_every_case_names_a_registered_op() -> None:
    ops = set(registered_ops())
    unknown = sorted({c.op for _, c in suite().cases.values()} - ops)
    if unknown:
        pytest.fail(f"cases for ops opkernel does not register: {unknown}")


def test_differences_and_exemptions_name_real_cases_with_reasons() -> None:
    s = suite()
    ops_with_cases = {c.op for _, c in s.cases.values()}
    problems = [f"DIFFERENCES[{k!r}] in cases_{fam}.py names no case and no op with cases"
                for k, (fam, _) in s.differences.items() if k not in s.cases and k not in ops_with_cases]
    problems += [f"EXEMPT[{k!r}] in cases_{fam}.py: not a registered op" for k, (fam, _) in s.exempt.items()
                 if k not in set(registered_ops())]
    direct = {c.op for cid, (_, c) in s.cases.items() if cid not in s.composed}
    problems += [f"EXEMPT[{k!r}] in cases_{fam}.py: the op has cases" for k, (fam, _) in s.exempt.items()
                 if k in direct]
    problems += [f"{k!r} in cases_{fam}.py has no reason" for table in (s.differences, s.exempt)
                 for k, (fam, why) in table.items() if not why.strip()]
    if problems:
        pytest.fail("\n".join(problems))


def test_checked_in_recording_covers_every_case(checked_in: Reference) -> None:
    cases = set(suite().cases)
    recorded = {cid for doc in checked_in.families.values() for cid in doc["cases"]}
    missing, stale = sorted(cases - recorded), sorted(recorded - cases)
    if missing or stale:
        pytest.fail(f"checked-in recording lacks cases {missing[:20]} and has cases no module gives {stale[:20]}: "
                    f"{RERECORD}")


def test_checked_in_recording_is_current(checked_in: Reference, reference: Reference) -> None:
    """The checked-in recording is what TensorFlow answers today (so the fallback never goes stale).

    Values within the case's tolerance: a machine with other vector units may round
    TensorFlow's kernels differently in the last bits, which is not staleness."""
    if reference.source.startswith("checked-in"):
        pytest.skip(f"no fresh TensorFlow recording to compare with: {reference.source}")
    stale = []
    for cid, (_, case) in sorted(suite().cases.items()):
        tol = case.tol
        old, new = checked_in.entry(cid), reference.entry(cid)
        if old is None or new is None:
            continue                      # test_checked_in_recording_covers_every_case names these
        if ("error" in old) != ("error" in new) or ("grad_error" in old) != ("grad_error" in new):
            stale.append(f"{cid}: error/success changed")
        elif "error" in old:
            if old["error"]["class"] != new["error"]["class"]:
                stale.append(f"{cid}: {old['error']['class']} recorded, {new['error']['class']} now")
        else:
            for kind in ("outputs", "grads"):
                a, b = old.get(kind) or [], new.get(kind) or []
                if len(a) != len(b):
                    stale.append(f"{cid}: {len(a)} {kind} recorded, {len(b)} now")
                    continue
                for j, (x, y) in enumerate(zip(a, b)):
                    why = (f"dtype {x['dtype']} recorded, {y['dtype']} now" if x["dtype"] != y["dtype"] else
                           _mismatch(np.asarray(x["value"]), np.asarray(y["value"]), y["dtype"], tol))
                    if why:
                        stale.append(f"{cid} {kind}[{j}]: {why}")
    if stale:
        pytest.fail(f"{len(stale)} cases' checked-in recording is stale ({RERECORD}):\n" + "\n".join(stale[:30]))


def test_docs_list_every_difference_and_exemption() -> None:
    """docs/conformance.md lists exactly the families' DIFFERENCES and EXEMPT keys."""
    section = documented_section()
    if not section:
        pytest.fail(f"{DOC} has no section between {DIFFERENCES_START} and {DIFFERENCES_END}")
    s = suite()
    listed = set(re.findall(r"^\| `([^`]+)` \|", section, re.M))
    keys = set(s.differences) | set(s.exempt)
    if listed != keys:
        pytest.fail(f"docs/conformance.md is out of date: not listed {sorted(keys - listed)}, listed but gone "
                    f"{sorted(listed - keys)}; run `.venv/bin/python tests/tf_conformance/tf_suite.py --write-docs`")
