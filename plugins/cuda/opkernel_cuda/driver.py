"""Whether a CUDA device can be used here, asked without cupy.

``probe`` runs during discovery (``Backend.availability``), so it must be cheap,
never raise and never create a CUDA context: it looks for cupy with
``importlib.util.find_spec`` (which does not import it) and asks the driver
library through ctypes for ``cuInit(0)`` and ``cuDeviceGetCount``, neither of
which creates a context.
"""

from __future__ import annotations

import ctypes
import importlib.util
import os
import sys

__all__ = ["ENV_DEVICE", "DRIVER_LIBRARY", "probe", "device_index"]

ENV_DEVICE = "OPKERNEL_CUDA_DEVICE"
DRIVER_LIBRARY = "nvcuda.dll" if sys.platform == "win32" else "libcuda.so.1"

_CUDA_ERROR_NO_DEVICE = 100


def device_index(spec: str, count: int | None = None) -> int:
    """The device ordinal ``OPKERNEL_CUDA_DEVICE`` names (empty: 0); ValueError if it names none."""
    spec = spec.strip()
    if not spec:
        index = 0
    else:
        try:
            index = int(spec)
        except ValueError:
            raise ValueError(f"{ENV_DEVICE}={spec!r} is not a device ordinal (0, 1, ...)") from None
        if index < 0:
            raise ValueError(f"{ENV_DEVICE}={spec!r} is not a device ordinal (0, 1, ...)")
    if count is not None and index >= count:
        raise ValueError(f"{ENV_DEVICE}={spec!r} but this machine has {count} CUDA device(s) (0..{count - 1})")
    return index


def _error_name(lib: ctypes.CDLL, code: int) -> str:
    name = ctypes.c_char_p()
    try:
        if lib.cuGetErrorName(code, ctypes.byref(name)) == 0 and name.value:
            return name.value.decode()
    except Exception:
        pass
    return f"CUresult {code}"


def probe(spec: str = "") -> str | None:
    """None when cupy is installed and the device ``spec`` names exists, else why not."""
    if importlib.util.find_spec("cupy") is None:
        return "cupy not installed (pip install opkernel-cuda, or a cupy build for your CUDA: see docs/cuda.md)"
    try:
        lib = ctypes.CDLL(DRIVER_LIBRARY)
    except OSError:
        return f"no CUDA driver ({DRIVER_LIBRARY} not found)"
    try:
        status = lib.cuInit(0)
        if status == _CUDA_ERROR_NO_DEVICE:
            return "no CUDA device" + (" (CUDA_VISIBLE_DEVICES is set)" if "CUDA_VISIBLE_DEVICES" in os.environ else "")
        if status != 0:
            return f"no CUDA device (cuInit failed: {_error_name(lib, status)})"
        count = ctypes.c_int(0)
        status = lib.cuDeviceGetCount(ctypes.byref(count))
        if status != 0:
            return f"no CUDA device (cuDeviceGetCount failed: {_error_name(lib, status)})"
    except Exception as e:  # a broken driver library must not break discovery
        return f"the CUDA driver could not be queried ({type(e).__name__}: {e})"
    if count.value == 0:
        return "no CUDA device"
    try:
        device_index(spec, count.value)
    except ValueError as e:
        return str(e)
    return None
