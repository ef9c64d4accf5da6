"""Whether a CUDA device can be used here: the driver, NVRTC, and a probe kernel.

``probe`` runs during discovery (``Backend.availability``), so it must never
raise and never create a CUDA context in this process: it looks for cupy with
``importlib.util.find_spec`` (which does not import it) and asks the driver
library through ctypes for ``cuInit(0)``, ``cuDeviceGetCount`` and the device's
name, compute capability and driver version, none of which creates a context.
Then the device must pass the probe: a small kernel compiled by NVRTC for the
device's architecture (as the backend compiles its own), run there, and every
value checked.  The probe runs in a child process (``python -m
opkernel_cuda.driver --probe N``), so the context it creates, a driver crash
or a hang (bounded by a timeout) stays there; its verdict is cached per device
fingerprint by ``opkernel.probes``, so only the first start on a device, driver
and release pays for it.
"""

from __future__ import annotations

import ctypes
import importlib.util
import json
import os
import subprocess
import sys
from typing import Any

from opkernel.probes import DeviceStatus, verdict

__all__ = ["ENV_DEVICE", "DRIVER_LIBRARY", "probe", "device_index", "statuses", "run_probe"]

ENV_DEVICE = "OPKERNEL_CUDA_DEVICE"
DRIVER_LIBRARY = "nvcuda.dll" if sys.platform == "win32" else "libcuda.so.1"

_CUDA_ERROR_NO_DEVICE = 100
#: How long the probe's child process may take (a cold cupy import and one NVRTC compile).
PROBE_TIMEOUT = 180.0
_PROBE_VERSION = "1"
_PROBE_N = 1000
_PROBE_SOURCE = r"""
extern "C" __global__ void opkernel_probe(const float* a, const int* b, float* out, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {
    out[i] = a[i] * 2.0f + (float)(b[i] / 7);
  }
}
"""


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
    """None when cupy is installed, the device ``spec`` names exists and it passed the probe
    (compiled by NVRTC, run, checked), else why not."""
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
        index = device_index(spec, count.value)
    except ValueError as e:
        return str(e)
    return _proven(lib, index)[0]


def _facts(lib: ctypes.CDLL, index: int) -> dict[str, str]:
    """The device's name, compute capability and the driver's version (no context); what
    the driver does not answer is left out (and the fingerprint says '?')."""
    facts: dict[str, str] = {}
    try:
        dev = ctypes.c_int(0)
        if lib.cuDeviceGet(ctypes.byref(dev), index) != 0:
            return facts
        name = ctypes.create_string_buffer(256)
        if lib.cuDeviceGetName(name, 256, dev) == 0:
            facts["name"] = name.value.decode(errors="replace")
        major, minor, version = ctypes.c_int(0), ctypes.c_int(0), ctypes.c_int(0)
        if lib.cuDeviceGetAttribute(ctypes.byref(major), 75, dev) == 0 and lib.cuDeviceGetAttribute(ctypes.byref(minor), 76, dev) == 0:
            facts["cc"] = f"{major.value}.{minor.value}"  # CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, _MINOR
        if lib.cuDriverGetVersion(ctypes.byref(version)) == 0:
            facts["driver"] = str(version.value)
    except Exception:  # a broken driver library: the probe itself will say why
        pass
    return facts


def _versions() -> str:
    """opkernel's and the CUDA wheels' versions (metadata only: nothing is imported)."""
    from importlib import metadata

    found = []
    for dist in ("opkernel", "opkernel-cuda", "cupy-cuda12x", "cupy-cuda13x", "cupy-cuda11x", "cupy",
                 "nvidia-cuda-nvrtc-cu12", "nvidia-cuda-nvrtc"):
        try:
            found.append(f"{dist}={metadata.version(dist)}")
        except metadata.PackageNotFoundError:
            continue
    return ",".join(found)


def _proven(lib: ctypes.CDLL, index: int) -> tuple[str | None, bool, float, dict[str, str]]:
    facts = _facts(lib, index)
    fingerprint = "\0".join([
        "cuda-probe", _PROBE_VERSION, str(index), facts.get("name", "?"), facts.get("cc", "?"), facts.get("driver", "?"),
        _versions(), os.environ.get("CUDA_VISIBLE_DEVICES", ""),
    ])
    reason, cached, seconds = verdict("cuda", fingerprint, lambda: _probe_in_child(index))
    return reason, cached, seconds, facts


def _probe_in_child(index: int) -> str | None:
    cmd = [sys.executable, "-m", "opkernel_cuda.driver", "--probe", str(index)]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=PROBE_TIMEOUT, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return f"the probe kernel did not finish within {PROBE_TIMEOUT:.0f} s"
    lines = done.stdout.strip().splitlines()
    try:
        answer = json.loads(lines[-1]) if lines else None
    except ValueError:
        answer = None
    if not isinstance(answer, dict) or "reason" not in answer:
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return f"the probe's process exited with status {done.returncode} ({tail[:200]})"
    reason = answer["reason"]
    return None if reason is None else str(reason)


def run_probe(index: int) -> str | None:
    """In this process: compile the probe with NVRTC for device ``index``'s architecture,
    run it and check every value.  None when all is right, else why not (one line)."""
    import numpy as np

    try:
        import cupy
    except Exception as e:
        return f"cupy cannot be imported ({type(e).__name__}: {e}); see docs/cuda.md"
    from .sources import OPTIONS

    try:
        with cupy.cuda.Device(index):
            try:
                kernel = cupy.RawModule(code=_PROBE_SOURCE, options=OPTIONS).get_function("opkernel_probe")
            except Exception as e:  # NVRTC missing, or it cannot target this architecture
                first = (str(e).strip().splitlines() or [""])[0]
                return f"NVRTC could not compile the probe kernel for this device ({type(e).__name__}: {first[:200]})"
            rng = np.random.default_rng(7)
            a = rng.integers(-1000, 1000, _PROBE_N).astype(np.float32) / 8
            b = rng.integers(0, 2**31 - 1, _PROBE_N).astype(np.int32)
            out = cupy.empty(_PROBE_N, np.float32)
            kernel((4,), (128,), (cupy.asarray(a), cupy.asarray(b), out, np.int32(_PROBE_N)))
            got = cupy.asnumpy(out)
    except Exception as e:
        return f"the probe kernel did not run ({type(e).__name__}: {str(e).strip()[:200]})"
    want = a * 2 + (b // 7).astype(np.float32)
    bad = np.flatnonzero(got != want)
    if bad.size:
        i = int(bad[0])
        return f"the probe kernel gave wrong answers ({bad.size} of {_PROBE_N} values; element {i}: {got[i]!r}, expected {want[i]!r})"
    return None


def statuses(spec: str = "") -> list[DeviceStatus]:
    """Every CUDA device with its probe's verdict (``Backend.devices``); never raises."""
    if importlib.util.find_spec("cupy") is None:
        return []
    try:
        lib = ctypes.CDLL(DRIVER_LIBRARY)
        if lib.cuInit(0) != 0:
            return []
        count = ctypes.c_int(0)
        if lib.cuDeviceGetCount(ctypes.byref(count)) != 0:
            return []
        try:
            chosen = device_index(spec, count.value)
        except ValueError:
            chosen = -1
        out = []
        for index in range(count.value):
            reason, cached, seconds, facts = _proven(lib, index)
            out.append(DeviceStatus(
                backend="cuda", id=str(index), name=facts.get("name", "?"), platform=f"CUDA driver {facts.get('driver', '?')}, "
                f"compute capability {facts.get('cc', '?')}", kind="gpu", reason=reason,
                chosen=index == chosen and reason is None, cached=cached, seconds=seconds,
            ))
        return out
    except Exception:  # a broken driver library: availability() says why
        return []


def main(argv: list[str] | None = None) -> int:
    """``python -m opkernel_cuda.driver --probe N``: run the probe on device N here and
    print its verdict as one JSON line (the parent process's ``probe`` reads it)."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m opkernel_cuda.driver")
    parser.add_argument("--probe", type=int, required=True, metavar="N", help="the device ordinal to probe")
    args = parser.parse_args(argv)
    reason: Any = run_probe(args.probe)
    print(json.dumps({"reason": reason}), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
