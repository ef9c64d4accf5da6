"""The CUDA backend: tensors are ``cupy.ndarray`` on one NVIDIA GPU.

cupy is imported in ``__init__`` (the first time the backend is used), never
at discovery: ``availability`` asks the driver through ctypes (``driver.py``).
Kernels run on cupy's current stream and nothing waits for the device after
an op; ``to_numpy`` (and so ``Tensor.numpy()`` and host-memory arguments)
and ``synchronize`` are the synchronisation points.
"""

from __future__ import annotations

import os
import re
from typing import TYPE_CHECKING, Any, ClassVar, Sequence

import numpy as np

import opkernel as ok
from opkernel.errors import DLPackError, InternalError, InvalidArgumentError, OpTypeError, ResourceExhaustedError

from . import device_kernels, driver, runtime

if TYPE_CHECKING:
    from opkernel.probes import DeviceStatus

    from .device_kernels import Program

#: dtypes a cupy array can hold (no bfloat16, strings or quantized types).
SUPPORTED = frozenset(
    ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
     "float16", "float32", "float64", "complex64", "complex128"]
)

_BYTES = re.compile(r"allocating ([\d,]+) bytes")


class CudaBackend(ok.Backend):
    name = "cuda"
    priority = 20
    array_types: ClassVar[tuple[type, ...]] = ()  # (cupy.ndarray,), filled in at initialisation

    _availability: ClassVar[dict[str, str | None]] = {}

    @classmethod
    def availability(cls) -> str | None:
        spec = os.environ.get(driver.ENV_DEVICE, "")
        if spec not in cls._availability:
            try:
                cls._availability[spec] = driver.probe(spec)
            except Exception as e:  # never raise from here
                cls._availability[spec] = f"CUDA availability check failed: {type(e).__name__}: {e}"
        return cls._availability[spec]

    @classmethod
    def devices(cls) -> list[DeviceStatus]:
        """Every CUDA device with its probe's verdict (the probe runs in a child process)."""
        return driver.statuses(os.environ.get(driver.ENV_DEVICE, ""))

    def __init__(self) -> None:
        import cupy

        index = driver.device_index(os.environ.get(driver.ENV_DEVICE, ""), cupy.cuda.runtime.getDeviceCount())
        self.cupy = cupy
        self.index = index
        self.device = cupy.cuda.Device(index)
        self.device.use()  # this thread; runtime.guarded enters the device in other threads
        props = cupy.cuda.runtime.getDeviceProperties(index)
        name = props["name"]
        self.device_name = name.decode() if isinstance(name, bytes) else str(name)
        self.compute_capability = f"{props['major']}.{props['minor']}"
        self.total_memory = int(props["totalGlobalMem"])
        type(self).array_types = (cupy.ndarray,)
        self._ndarray = cupy.ndarray
        runtime.activate(cupy, self.device, index)

    # ------------------------------------------------------------ arrays

    def supports_dtype(self, dtype: ok.DType) -> bool:
        return dtype.name in SUPPORTED

    def _upload(self, array: np.ndarray) -> Any:
        if array.ndim == 0:
            # cupy.asarray fills a 0-d array from the Python scalar, which lost the sign of
            # -0.0; a 1-element copy keeps every bit.
            return self._upload(array.reshape(1)).reshape(())
        if self.index:
            with self.device:
                return self.cupy.asarray(array)
        return self.cupy.asarray(array)

    def from_numpy(self, array: np.ndarray) -> Any:
        if array.dtype.kind in "OUSV":  # strings, objects, bfloat16 (ml_dtypes)
            raise OpTypeError(f"backend 'cuda' cannot hold arrays of dtype {array.dtype}; supported: {sorted(SUPPORTED)}")
        try:
            return self._upload(array)
        except MemoryError as e:
            runtime.free_cached_blocks()
            try:
                return self._upload(array)
            except MemoryError:
                raise ResourceExhaustedError(
                    f"ok.tensor: out of memory on CUDA device {self.index} ({self.device_name!r}) "
                    f"uploading {array.nbytes} bytes: {e}",
                    requested_bytes=array.nbytes, backend=self.name,
                ) from e

    def from_dlpack(self, source: Any, copy: bool | None = None) -> Any:
        device_type, _ = source.__dlpack_device__()
        if int(device_type) not in (2, 13):  # kDLCUDA, kDLCUDAManaged: else through host memory
            return super().from_dlpack(source, copy)
        if self.index:
            with self.device:
                array = self.cupy.from_dlpack(source)
        else:
            array = self.cupy.from_dlpack(source)
        return array.copy() if copy else array

    def stream_pointer(self) -> int | None:
        return int(self.cupy.cuda.get_current_stream().ptr) or None

    def dlpack_exporter(self, value: Any, copy: bool | None = None) -> Any:
        # CuPy cannot mark an export read-only: the consumer gets a copy of its own.
        if not isinstance(value, self._ndarray):
            return None
        if copy is False:
            raise DLPackError(
                "Tensor.__dlpack__: a tensor on cuda is exported as a copy (CuPy cannot mark an export read-only, "
                "and a tensor is a value), so copy=False cannot be honoured", backend=self.name,
            )
        return self.copy(value)

    def copy(self, value: Any) -> Any:
        if self.index:
            with self.device:
                return value.copy()
        return value.copy()

    def memory_owners(self, value: Any) -> tuple[Any, ...] | None:
        # As in numpy, a cupy view keeps the array owning the memory as its ``base``.
        return (value,) if value.base is None else None

    def to_numpy(self, value: Any) -> np.ndarray:
        if isinstance(value, np.ndarray):
            return value
        try:
            return value.get()  # type: ignore[no-any-return]  # blocks until the value is computed
        except MemoryError as e:  # the host, not the device: a tensor the device holds may not fit there
            raise ResourceExhaustedError(
                f"out of host memory copying a tensor of shape {list(value.shape)} ({value.nbytes} bytes) "
                f"from CUDA device {self.index} ({self.device_name!r}) to the host: {e}",
                requested_bytes=int(value.nbytes), backend=self.name,
            ) from e

    def empty(self, shape: tuple[int, ...], dtype: ok.DType) -> Any:
        if self.index:
            with self.device:
                return self.cupy.empty(shape, dtype.np)
        return self.cupy.empty(shape, dtype.np)

    def as_output(self, value: Any, dtype: ok.DType) -> Any:
        if type(value) is self._ndarray:
            return value if value.dtype == dtype.np else value.astype(dtype.np)
        # host results (Shape, Range, ConcatOffset, ...) and numpy scalars
        return self.from_numpy(np.asarray(value, dtype.np))

    def synchronize(self) -> None:
        self.device.synchronize()

    # ------------------------------------------------------------ hooks

    def warmup(self) -> int:
        if self.index:
            with self.device:
                return self._compile_all()
        return self._compile_all()

    def _compile_all(self) -> int:
        """Every raw source (``runtime.compile_all``) and every device program op packages
        declared (``device_kernels.warm``); returns how many were compiled."""
        return runtime.compile_all() + device_kernels.warm(self)

    def build_program(self, source: str, *, name: str, options: Sequence[str] = (), op: str | None = None) -> Program:
        """A ``cupy.RawModule`` of CUDA C++ ``source`` with NVRTC ``options``, compiled at its
        first kernel and kept in the verified kernel cache; ``name`` and ``op`` appear in
        its errors.  A program declared with ``DeviceProgram`` is also compiled by ``ok.warmup``."""
        return device_kernels.build(self, source, options, name, op)

    def translate_error(self, error: Exception, op: str) -> Exception | None:
        module = type(error).__module__ or ""
        if isinstance(error, MemoryError) and module.startswith("cupy"):
            requested = getattr(error, "_size", None)
            if requested is None:
                found = _BYTES.search(str(error))
                requested = int(found.group(1).replace(",", "")) if found else None
            stats = self.memory()
            return ResourceExhaustedError(
                f"op {op!r}: out of memory on CUDA device {self.index} ({self.device_name!r}) allocating "
                f"{requested if requested is not None else 'an unknown number of'} bytes, after freeing cupy's "
                f"cached blocks and retrying once ({stats.get('active_bytes', 0)} bytes in use, "
                f"{stats.get('device_total_bytes', 0)} on the device). Free tensors or use smaller batches.",
                op=op, requested_bytes=requested, backend=self.name,
            )
        if isinstance(error, ValueError):  # cupy's broadcasting and reshape errors, as the CPU backend names them
            text = str(error)
            prefix = "Incompatible shapes: " if "broadcast" in text else ""
            return InvalidArgumentError(f"op {op!r}: {prefix}{text}", op=op)
        if module.startswith(("cupy", "cupy_backends", "cupyx")):
            return InternalError(
                f"op {op!r}: CUDA error on device {self.index} ({self.device_name!r}): {type(error).__name__}: {error}",
                op=op, backend=self.name,
            )
        return None

    def memory(self) -> dict[str, int]:
        pool = runtime.STATE.pool
        out = {
            "active_bytes": int(pool.used_bytes()),
            "held_bytes": int(pool.total_bytes()),
            "oom_retries": runtime.STATE.retries,
        }
        try:
            free, total = self.cupy.cuda.runtime.memGetInfo()
            out.update(device_free_bytes=int(free), device_total_bytes=int(total))
        except Exception:  # memGetInfo needs the device's context in this thread
            pass
        return out

    def describe(self) -> dict[str, str]:
        cp = self.cupy
        return {
            "device": f"{self.index}: {self.device_name}",
            "compute capability": self.compute_capability,
            "memory": f"{self.total_memory / 2**30:.1f} GiB",
            "cupy": cp.__version__,
            "CUDA runtime": str(cp.cuda.runtime.runtimeGetVersion()),
            "driver": str(cp.cuda.runtime.driverGetVersion()),
            "kernel cache": os.environ.get("CUPY_CACHE_DIR", os.path.expanduser("~/.cupy/kernel_cache")),
        }


device_kernels.register_backend_class(CudaBackend)
