"""ok.profile and ok.explain."""

from __future__ import annotations

import numpy as np
import pytest

import opkernel as ok


def test_profile_counts_calls_time_and_bytes_per_backend_and_op(backend):
    a = ok.tensor(np.ones((8, 8), np.float32))
    ok.ops.add(a, a)  # warm: the fast path must not hide calls from the profiler
    with ok.profile() as prof:
        for _ in range(3):
            ok.ops.add(ok.ops.mat_mul(a, a), a)
    stats = {(b, o): (n, sec, nbytes) for b, o, n, sec, nbytes in prof.rows()}
    assert stats[(backend, "MatMul")][0] == 3 and stats[(backend, "Add")][0] == 3
    assert stats[(backend, "Add")][2] == 3 * 8 * 8 * 4
    assert all(sec > 0 for _, sec, _ in stats.values())
    assert "MatMul" in str(prof)
    ok.ops.add(a, a)
    assert stats == {(b, o): (n, sec, nb) for b, o, n, sec, nb in prof.rows()}  # closed: records nothing more


def test_explain_names_the_chosen_kernel_and_why_others_lose(backend, fresh_registry):
    ok.register_op("Test>Twice").input("x: T").output("y: T").attr("T: {float, double}")
    ok.register_kernel("Test>Twice", backend="*")(lambda x: x + x)
    ok.register_kernel("Test>Twice", backend=backend, type_constraints={"T": ["float64"]}, priority=5)(
        lambda x: x * 2
    )
    x32 = ok.tensor(np.ones(2, np.float32))
    text = str(ok.explain("Test>Twice", x32))
    assert "T=float32" in text and "type constraints do not match" in text and "runs (no kernel of the backend" in text
    x64 = ok.tensor(np.ones(2, np.float64))
    exp = ok.explain("Test>Twice", x64)
    assert exp.chosen is not None and exp.chosen.backend == backend and exp.chosen.priority == 5
    assert "a kernel above it wins" in str(exp)


def test_explain_reports_when_no_kernel_runs(backend, fresh_registry):
    ok.register_op("Test>Lonely").input("x: float").output("y: float")
    exp = ok.explain("Test>Lonely", np.ones(1, np.float32))
    assert exp.chosen is None and "no kernel" in str(exp)
    with pytest.raises(ok.errors.OpNotFoundError):
        ok.explain("Test>Missing", 1.0)
