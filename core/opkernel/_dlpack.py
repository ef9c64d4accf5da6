"""``ok.from_dlpack``: another array library's data as a tensor, through DLPack.

The exporter (a numpy array, a torch or jax tensor, a CuPy array, anything with
``__dlpack__`` and ``__dlpack_device__``) decides where the data is; the tensor goes to
the backend that holds memory there (host memory: ``cpu``; CUDA memory: ``cuda``) unless
``backend`` names another, which then receives a copy.
"""

from __future__ import annotations

from typing import Any

from ._context import backend_instance
from .dtypes import as_dtype
from .errors import DLPackError, OpTypeError
from .tensor import Tensor

__all__ = ["from_dlpack"]

#: DLPack device types and the backend that holds memory there.
_BACKEND_OF_DEVICE = {1: "cpu", 3: "cpu", 2: "cuda", 13: "cuda"}  # kDLCPU, kDLCUDAHost, kDLCUDA, kDLCUDAManaged
_DEVICE_NAMES = {1: "kDLCPU", 2: "kDLCUDA", 3: "kDLCUDAHost", 4: "kDLOpenCL", 7: "kDLVulkan", 8: "kDLMetal",
                 10: "kDLROCM", 13: "kDLCUDAManaged", 14: "kDLOneAPI"}


def from_dlpack(source: Any, *, backend: str | None = None, copy: bool | None = None) -> Tensor:
    """A tensor of ``source``'s data, as ``tf.experimental.dlpack.from_dlpack`` and the
    Array API's ``from_dlpack``.

    ``copy=None`` (the default) shares ``source``'s memory where the backend can hold
    it (cpu from host memory, cuda from CUDA memory) and copies otherwise; ``copy=True``
    always copies; ``copy=False`` refuses to copy.  A tensor that shares memory is only a
    value while nobody writes to that memory: as with JAX and the Array API, writing to
    ``source`` afterwards is undefined (pass ``copy=True`` to keep using it).
    """
    if isinstance(source, Tensor):
        return source if backend is None or backend == source.backend else source.to(backend)
    if not (hasattr(source, "__dlpack__") and hasattr(source, "__dlpack_device__")):
        raise DLPackError(
            f"ok.from_dlpack: a {type(source).__module__}.{type(source).__qualname__} is not a DLPack exporter "
            "(it has no __dlpack__ and __dlpack_device__); numpy, torch, jax and CuPy arrays are"
        )
    device_type, device_id = (int(v) for v in source.__dlpack_device__())
    home = _BACKEND_OF_DEVICE.get(device_type)
    target = backend or home
    if target is None:
        raise DLPackError(
            f"ok.from_dlpack: the data is on DLPack device {_DEVICE_NAMES.get(device_type, device_type)} "
            f"(id {device_id}), which no backend holds; name one with backend= to copy it through host memory"
        )
    be = backend_instance(target)
    if copy is False and target != home:
        raise DLPackError(
            f"ok.from_dlpack: the data is on {_DEVICE_NAMES.get(device_type, device_type)} and backend {target!r} "
            "would need a copy, but copy=False",
            backend=target,
        )
    try:
        value = be.from_dlpack(source, copy if target == home else True)
    except (BufferError, RuntimeError, TypeError, ValueError) as e:
        raise DLPackError(
            f"ok.from_dlpack: backend {target!r} cannot import this {type(source).__name__} "
            f"({_DEVICE_NAMES.get(device_type, device_type)}): {type(e).__name__}: {e}",
            backend=target,
        ) from e
    try:
        dtype = as_dtype(value.dtype)
    except OpTypeError as e:
        raise DLPackError(f"ok.from_dlpack: the data's dtype {value.dtype} is not an opkernel dtype", backend=target) from e
    return Tensor(value, dtype, be)
