"""Ops whose result is 0-d (issue 24): on OpenCL they used to return garbage or kill the
process with SIGSEGV, nondeterministically, because the layout of a copy down to a scalar
was read from a numpy scalar's address instead of a view's.  Each case runs in a child
process, repeated so that a wild read or write shows, and compares exact values."""

from __future__ import annotations

import json

import pytest
from isolated import run_isolated

PRELUDE = """
import json, numpy as np, opkernel as ok
out = []
for _ in range(50):
"""

CASES = {
    # Unpack of a vector: every output is a scalar.
    "Unpack": "    out = [float(t.numpy()) for t in ok.ops.unpack(np.array([1.5, -2.0, 3.25], np.float32), num=3)]",
    # StridedSlice with shrink_axis_mask on every dimension.
    "StridedSlice": (
        "    x = np.arange(12, dtype=np.float32).reshape(3, 4)\n"
        "    out = [float(ok.ops.strided_slice(x, [2, 1], [3, 2], [1, 1], shrink_axis_mask=3).numpy())]"
    ),
    # Its gradient writes a scalar dy into a zero tensor: a wild write before the fix.
    "StridedSliceGrad": (
        "    g = ok.ops.strided_slice_grad([3, 4], [2, 1], [3, 2], [1, 1], np.float32(7.0), shrink_axis_mask=3)\n"
        "    out = g.numpy().ravel().tolist()"
    ),
    # The gradient of Pack on scalars is an Unpack of a vector.
    "PackGrad": (
        "    xs = [ok.tensor(np.float32(v)) for v in (1.0, 2.0, 3.0)]\n"
        "    with ok.GradientTape() as tape:\n"
        "        tape.watch(xs)\n"
        "        y = ok.ops.pack(xs) * np.array([2.0, 3.0, 4.0], np.float32)\n"
        "    out = [float(g.numpy()) for g in tape.gradient(y, xs)]"
    ),
}

EXPECTED = {
    "Unpack": [1.5, -2.0, 3.25],
    "StridedSlice": [9.0],
    "StridedSliceGrad": [0.0] * 9 + [7.0] + [0.0] * 2,
    "PackGrad": [2.0, 3.0, 4.0],
}


@pytest.mark.parametrize("op", sorted(CASES))
def test_scalar_result_is_exact_and_does_not_crash(op: str, backend: str) -> None:
    code = PRELUDE + CASES[op] + "\nprint(json.dumps(out))\n"
    done = run_isolated(code, backend=backend, what=f"{op} to a 0-d result on {backend}", timeout=120)
    assert json.loads(done.stdout.strip().splitlines()[-1]) == EXPECTED[op]
