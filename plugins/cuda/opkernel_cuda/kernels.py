"""The CUDA kernel table: every family's rows, registered for backend ``cuda``.

Each row is (op, function, type constraints, host-memory args), as in the CPU
plugin; ``register_all`` wraps every function with ``runtime.guarded`` (the
device of this backend, and one retry after an out-of-memory error; kernels
with ``Ref`` inputs are not retried).

``rows(xp="numpy")`` builds the same table over numpy: the tests register it
for a throwaway backend to run the CUDA plugin's array-API code on the CPU.
"""

from __future__ import annotations

from typing import Any

from . import array_kernels, math_kernels, nn_kernels, random_kernels, runtime, state_kernels
from .lazy import LazyModule

Row = tuple[str, Any, "dict[str, list[str]] | None", tuple[str, ...]]

#: Ops of the op library without a CUDA kernel, and why.
CPU_ONLY = dict(array_kernels.CPU_ONLY)

_STATEFUL = {op for op, *_ in state_kernels.rows()}


def rows(xp: str = "cupy", special: str = "cupyx.scipy.special") -> list[Row]:
    return [
        *math_kernels.rows(LazyModule(xp), LazyModule(special)),
        *array_kernels.rows(),
        *nn_kernels.rows(),
        *state_kernels.rows(),
        *random_kernels.rows(),
    ]


def register_all(backend: str = "cuda", xp: str = "cupy", special: str = "cupyx.scipy.special") -> None:
    import opkernel as ok

    for op, fn, constraints, host in rows(xp, special):
        kernel = runtime.guarded(fn, retry=op not in _STATEFUL)
        ok.register_kernel(op, backend=backend, type_constraints=constraints, host_memory=host)(kernel)
