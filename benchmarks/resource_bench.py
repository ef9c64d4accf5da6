"""What a resource variable costs per call (docs/resources.md): a read and an update of an
``ok.ResourceVariable`` (ReadVariableOp, AssignAddVariableOp: a new value per update,
under the variable's lock) against a Ref ``ok.Variable`` (in place), numpy's in-place
``+=`` and, where torch is installed, torch's ``add_`` on a tensor, interleaved in one
run, medians, on cpu.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE .venv/bin/python benchmarks/resource_bench.py
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Callable

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import opkernel as ok  # noqa: E402
from harness import Timed, fmt_time, interleaved  # noqa: E402
from run import environment  # noqa: E402

SIZES = [1, 1000, 1_000_000]


def contenders(n: int) -> list[tuple[str, Callable[[], Any], Callable[[], Any]]]:
    """(what, a read, an update) for each kind of variable holding n float32 zeros."""
    delta = np.full(n, 1e-6, np.float32)
    out: list[tuple[str, Callable[[], Any], Callable[[], Any]]] = []
    rv = ok.ResourceVariable(np.zeros(n, np.float32))
    d = ok.tensor(delta)
    out.append(("ok.ResourceVariable", rv.read_value, lambda: rv.assign_add(d)))
    handle = rv.handle
    out.append(("its ops, called directly", lambda: ok.ops.read_variable_op(handle, dtype=ok.float32),
                lambda: ok.ops.assign_add_variable_op(handle, d)))
    v = ok.Variable(np.zeros(n, np.float32))
    out.append(("ok.Variable (Ref)", v.read_value, lambda: v.assign_add(d)))
    a = np.zeros(n, np.float32)

    def np_add() -> None:
        a.__iadd__(delta)

    out.append(("numpy +=", a.copy, np_add))
    try:
        import torch
    except ImportError:
        return out
    torch.set_num_threads(2)
    tt, td = torch.zeros(n), torch.from_numpy(delta)
    out.append(("torch add_", tt.clone, lambda: tt.add_(td)))
    return out


def main() -> int:
    ok.set_backend("cpu")
    print(environment())
    print("| elements | variable | read | update |")
    print("|---|---|---|---|")
    for n in SIZES:
        rows = contenders(n)
        reads = interleaved([Timed(r) for _, r, _ in rows], rounds=5)
        updates = interleaved([Timed(u) for _, _, u in rows], rounds=5)
        for (what, _, _), r, u in zip(rows, reads, updates):
            print(f"| {n} | {what} | {fmt_time(r)} | {fmt_time(u)} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
