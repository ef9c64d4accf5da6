"""The randomized differential test against TensorFlow at a fixed seed and budget
(differential.py), and the harness's own rules: a crash or hang in a worker fails one
call, a divergence is shrunk, findings are written, every shared op has a generator.

The budget (``OPKERNEL_TFDIFF_PER_OP`` calls per op, default 12; ``OPKERNEL_TFDIFF_SEED``,
default 0) runs on every backend the ``backend`` fixture gives; TensorFlow's answers
are computed once and shared between backends.  A longer run is one command (docs/conformance.md).
"""

from __future__ import annotations

import json
import os
from importlib.util import find_spec
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import diff_gen
import differential
from case import Case

PER_OP = int(os.environ.get("OPKERNEL_TFDIFF_PER_OP", "12"))
SEED = int(os.environ.get("OPKERNEL_TFDIFF_SEED", "0"))
_TF_ANSWERS: dict[str, dict[str, Any]] = {}

needs_tf = pytest.mark.skipif(find_spec("tensorflow") is None,
                              reason="tensorflow is not installed (pip install -e '.[tf-oracle]')")


#: The ops are split into this many tests (every SHARDS-th op of the sorted list each), so
#: that pytest's workers share the budget: as one test it ran 40-130 s on one worker
#: while the other had finished.
SHARDS = 4


@needs_tf
@pytest.mark.parametrize("shard", range(SHARDS))
def test_differential_against_tensorflow(backend: str, shard: int, tmp_path: Path) -> None:
    if backend == "cuda":
        pytest.skip("the differential test runs TensorFlow's CPU kernels beside each backend; on a GPU machine run "
                    "differential.py --backends cuda")
    ops = sorted(op for op in differential.signatures() if op in diff_gen.GENERATORS)[shard::SHARDS]
    report = differential.run(SEED, PER_OP, [backend], ops=ops, tf_cache=_TF_ANSWERS)
    findings = tmp_path / "differential-findings.json"
    differential.write_findings(findings, report)
    print("\n".join(report.summary()))
    counts = report.counts[backend]
    assert sum(counts.values()) == report.calls == PER_OP * len(report.ops)
    assert counts["agrees"] > report.calls // 2, f"fewer than half the calls agree: {dict(counts)}"
    if report.findings:
        lines = [f"{f['case']}: {f['detail'][:400]}\n    minimal: {json.dumps(f['minimal'])[:600]}\n    {f['repro']}"
                 for f in report.findings]
        pytest.fail(f"{len(report.findings)} calls on {backend} diverge from TensorFlow (findings in {findings}):\n"
                    + "\n".join(lines))


def test_every_shared_op_has_a_generator() -> None:
    sigs = differential.signatures()
    missing = sorted(op for op in sigs if op not in diff_gen.GENERATORS and op not in diff_gen.NOT_GENERATED)
    assert not missing, f"ops shared with TensorFlow without a random-call generator: {missing}"
    assert len(sigs) >= 100


def test_generation_is_deterministic_and_varied() -> None:
    sigs = differential.signatures(["Add", "Conv2D", "StridedSlice"])
    for sig in sigs.values():
        a = [diff_gen.generate(sig, 3, i) for i in range(20)]
        b = [diff_gen.generate(sig, 3, i) for i in range(20)]
        assert [c.attrs for c in a] == [c.attrs for c in b]
        assert all(differential._same_arrays(x, y) for x, y in zip(a, b))
        shapes = {tuple(np.asarray(c.inputs[0]).shape) for c in a}
        assert len(shapes) > 3, f"{sig.op}: 20 calls used only shapes {shapes}"


def test_rules_have_reasons_and_name_shared_ops() -> None:
    sigs = differential.signatures()
    for rule in differential.KNOWN_DIFFERENCES:
        assert rule.op in sigs or rule.op == "*", rule
        assert len(rule.why) > 40, rule


def test_docs_list_every_rule() -> None:
    text = (Path(__file__).resolve().parents[2] / "docs" / "conformance.md").read_text()
    missing = sorted(({r.id for r in differential.KNOWN_DIFFERENCES} | {"tf-flushes-denormals"})
                     - set(text.split("`")))
    assert not missing, f"docs/conformance.md does not list the differential test's rules {missing}"


# ------------------------------------------------------------------ the harness


def _ok_worker() -> differential.Worker:
    return differential.Worker(["ok", "cpu"])


def test_a_crash_fails_one_call_and_the_worker_restarts() -> None:
    w = _ok_worker()
    try:
        good = Case("Add/x:0", "Add", (np.float32(1), np.float32(2)))
        crash = Case("crash/x:1", diff_worker_crash_op(), ())
        out = w.run([good, crash, good])
        assert "outputs" in out[0] and "outputs" in out[2], out
        assert out[1]["died"] == "crash" and "SIGABRT" in out[1]["detail"], out[1]
        assert w.restarts >= 1
    finally:
        w.stop()


def test_a_hang_fails_one_call(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(differential, "CALL_TIMEOUT", 3.0)
    w = _ok_worker()
    try:
        hang = Case("hang/x:0", diff_worker_hang_op(), ())
        out = w.run([hang])
        assert out[0]["died"] == "hang", out
        after = w.run([Case("Add/x:1", "Add", (np.float32(1), np.float32(2)))])
        assert after[0]["outputs"][0]["value"] == 3
    finally:
        w.stop()


def diff_worker_crash_op() -> str:
    import diff_worker
    return diff_worker.CRASH_OP


def diff_worker_hang_op() -> str:
    import diff_worker
    return diff_worker.HANG_OP


def test_shrinking_finds_a_small_call() -> None:
    """A divergence that needs one NaN in one input shrinks to a call of one element."""
    big = Case("Add/x:0", "Add", (np.full((4, 5), 2.5, np.float32), np.r_[np.ones(19), np.nan].astype(np.float32)
                                  .reshape(4, 5)), grad=True)

    def diverges(c: Case) -> bool:
        return bool(np.isnan(np.asarray(c.inputs[1])).any()) and c.inputs[0].shape == c.inputs[1].shape
    small, tries = differential.shrink(big, diverges, budget=200)
    assert tries <= 200 and not small.grad
    assert small.inputs[0].size == 1 and np.isnan(small.inputs[1]).all(), small


def test_comparison_catches_what_it_must() -> None:
    """The comparison is not blind: a wrong value, a wrong accept and a non-opkernel error all diverge."""
    case = Case("Neg/x:0", "Neg", (np.float32([1.0, 2.0]),))
    tf = {"op": "Neg", "outputs": [{"dtype": "float32", "shape": [2], "value": np.float32([-1.0, -2.0])}]}
    wrong = {"op": "Neg", "outputs": [{"dtype": "float32", "shape": [2], "value": np.float32([-1.0, -2.5])}]}
    assert differential.compare(case, tf, wrong, "cpu").diverges
    assert differential.compare(case, tf, tf, "cpu").kind == "agrees"
    rejected = {"op": "Neg", "error": {"class": "InvalidArgumentError", "message": "bad"}}
    assert differential.compare(case, rejected, tf, "cpu").diverges
    raw = {"op": "Neg", "error": {"class": "ValueError", "message": "Neg: x", "opkernel": False}}
    assert differential.compare(case, rejected, raw, "cpu").diverges
    named = {"op": "Neg", "error": {"class": "InvalidArgumentError", "message": "op 'Neg': x", "opkernel": True}}
    assert differential.compare(case, rejected, named, "cpu").kind == "agrees"
    unnamed = {"op": "Neg", "error": {"class": "InvalidArgumentError", "message": "x", "opkernel": True}}
    assert differential.compare(case, rejected, unnamed, "cpu").diverges


def test_findings_file_names_the_command_that_remakes_a_finding(tmp_path: Path) -> None:
    report = differential.Report(0, 1, ["cpu"])
    report.findings.append({"case": "Add/0:3", "repro": "python tests/tf_conformance/differential.py --op Add"})
    path = tmp_path / "f.json"
    differential.write_findings(path, report)
    doc = json.loads(path.read_text())
    assert doc["findings"][0]["case"] == "Add/0:3" and doc["seed"] == 0
