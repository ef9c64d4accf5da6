"""The CPU backend: tensors are numpy arrays.  Kernels receive a caller's arrays as
they are; ``ok.tensor`` and op outputs never share memory with them (see engine)."""

from __future__ import annotations

import os
import platform
from typing import Any

import numpy as np

import opkernel as ok
from opkernel.errors import InvalidArgumentError

from . import allocator, fusion, sharding


class CpuBackend(ok.Backend):
    name = "cpu"
    priority = 0
    array_types = (np.ndarray,)
    host_memory_is_native = True

    def __init__(self) -> None:
        self.malloc = allocator.tune()

    def from_numpy(self, array: np.ndarray) -> np.ndarray:
        return array if type(array) is np.ndarray else np.asarray(array)

    def to_numpy(self, value: Any) -> np.ndarray:
        return value  # type: ignore[no-any-return]

    def copy(self, value: Any) -> np.ndarray:
        return np.array(value, copy=True)

    def memory_owners(self, value: Any) -> tuple[Any, ...] | None:
        # A numpy view keeps the array owning the memory as its ``base``: counting the
        # owner's references counts every view.  An array that owns nothing can't tell.
        return (value,) if value.base is None else None

    def empty(self, shape: tuple[int, ...], dtype: ok.DType) -> np.ndarray:
        return np.empty(shape, dtype.np)

    def as_output(self, value: Any, dtype: ok.DType) -> np.ndarray:
        if type(value) is np.ndarray and value.dtype is dtype.np:
            return value
        return np.asarray(value, dtype.np)

    def fusable(self, kernel: Any, dtype: ok.DType) -> bool:
        return fusion.fusable(kernel, dtype)

    def fuse_elementwise(self, program: ok.backend.ElementwiseProgram) -> Any:
        return fusion.compile_program(program)

    def translate_error(self, error: Exception, op: str) -> Exception | None:
        """numpy's ValueErrors (broadcasting, bad reshapes) name the op, as TensorFlow's do."""
        if isinstance(error, ValueError):
            text = str(error)
            if "broadcast" in text:
                return InvalidArgumentError(f"op {op!r}: Incompatible shapes: {text}", op=op)
            return InvalidArgumentError(f"op {op!r}: {text}", op=op)
        return None

    def describe(self) -> dict[str, str]:
        return {
            "device": platform.processor() or platform.machine(),
            "cores": str(os.cpu_count()),
            "numpy": np.__version__,
            "malloc": self.malloc,
            "intra_op_pool": "native threads (opkernel_cpu._native)" if sharding.native_pool()
            else "Python threads (opkernel_cpu._native was not built: no C compiler at install)",
        }
