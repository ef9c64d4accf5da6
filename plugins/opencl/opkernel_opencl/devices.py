"""Which OpenCL device the backend uses: every platform's devices, each proven by a probe.

The plugin looks at every device of every platform the ICD loader offers (the
PoCL bundled with pyopencl, Intel's CPU runtime, vendor GPU drivers, system
ICDs).  A device counts only after the probe, a small program built with the
backend's own prelude and options, has compiled, run and given the right
answer there (``probe``); verdicts are cached per device fingerprint by
``opkernel.probes``.

Without ``OPKERNEL_OPENCL_DEVICE`` the backend uses the first working device in
this order (``rank``): GPUs, then accelerators, then CPUs; among devices of one
kind, a vendor's own driver before PoCL (the portable fallback); then the order
the ICD loader lists them.  Devices are probed in that order until one passes,
so a warm start probes nothing and a cold one only what it must.

``OPKERNEL_OPENCL_DEVICE`` names one device (then only that one is probed, and
the backend is unavailable when it fails):

* ``P:D``: platform P's device D, as ``opkernel info`` numbers them;
* ``gpu``, ``cpu`` or ``accelerator``: the best working device of that kind;
* ``pocl`` or ``intel`` (any other word): the best working device whose platform
  or device name contains it (``pocl`` also matches "Portable Computing
  Language"), compared without case.

The process that loads the platform is noted (``choose``): a fork() copy of it
cannot use OpenCL (``fork_reason``).  ``availability`` and ``report`` are what
``OpenCLBackend.availability`` and ``OpenCLBackend.devices`` answer, and what
``python -m opkernel_opencl.devices`` prints.
"""

from __future__ import annotations

import os
import re
import threading
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from opkernel.probes import DeviceStatus, verdict

from . import _version
from .programs import PRELUDE, build_quietly, configure_environment

__all__ = [
    "ENV_DEVICE", "Candidate", "candidates", "select", "statuses", "explain_build_failure",
    "availability", "report", "choose", "fork_reason", "forked_message", "platform_pid", "load_pyopencl",
]

ENV_DEVICE = "OPKERNEL_OPENCL_DEVICE"
POCL_PLATFORM = "Portable Computing Language"
INTEL_REMEDY = "pip install 'opkernel-opencl[intel]' (Intel's CPU OpenCL runtime)"
_KINDS = ("gpu", "accelerator", "cpu")

#: The probe: one by-value int, the prelude's fdiv and dims_t, a float multiply-add and
#: a global offset, launched as the backend launches (groups of 64, then a remainder).
_PROBE_SOURCE = """\
__kernel void opkernel_probe(__global const float* a, __global const int* b, __global float* out,
                             const int m, const int s, const dims_t d) {
  int i = get_global_id(0);
  out[i] = a[i] * 2.0f + (float)fdiv(b[i], m, s) + (float)d.v[1];
}
"""
_PROBE_N = 1000
_PROBE_VERSION = "1"


@dataclass(frozen=True)
class Candidate:
    """A device as the ICD loader lists it: platform index, device index, objects."""

    platform_index: int
    device_index: int
    platform: Any
    device: Any

    @property
    def id(self) -> str:
        return f"{self.platform_index}:{self.device_index}"

    @property
    def name(self) -> str:
        return str(self.device.name).strip()

    @property
    def platform_name(self) -> str:
        return str(self.platform.name).strip()

    @property
    def is_pocl(self) -> bool:
        return self.platform_name == POCL_PLATFORM

    def kind(self, cl: Any) -> str:
        t = int(self.device.type)
        if t & cl.device_type.GPU:
            return "gpu"
        if t & cl.device_type.ACCELERATOR:
            return "accelerator"
        if t & cl.device_type.CPU:
            return "cpu"
        return "other"

    def describe(self) -> str:
        return f"{self.id} {self.name!r} ({self.platform_name})"


class NoPlatform(Exception):
    """The ICD loader offers no platform, or no platform has a device."""


def candidates(cl: Any) -> list[Candidate]:
    """Every device of every platform, in the loader's order; NoPlatform (with the
    reason) when there is none."""
    try:
        platforms = cl.get_platforms()
    except Exception as e:  # no ICD loader entry at all
        raise NoPlatform(
            f"no OpenCL platform found ({type(e).__name__}: {e}); install a device driver (an ICD), "
            f"or pip install 'opkernel-opencl[pocl]' or {INTEL_REMEDY.split(' (')[0]} for a CPU device"
        ) from None
    found: list[Candidate] = []
    for pi, p in enumerate(platforms):
        try:
            devices = p.get_devices()
        except Exception:  # a platform with no device raises DEVICE_NOT_FOUND
            devices = []
        found.extend(Candidate(pi, di, p, d) for di, d in enumerate(devices))
    if not found:
        names = ", ".join(repr(str(p.name).strip()) for p in platforms)
        raise NoPlatform(f"OpenCL platform(s) {names} have no device")
    return found


def rank(cl: Any, c: Candidate) -> tuple[int, int, int, int]:
    """The sort key of the default choice: kind, vendor driver before PoCL, loader order."""
    kind = c.kind(cl)
    return (_KINDS.index(kind) if kind in _KINDS else len(_KINDS), int(c.is_pocl), c.platform_index, c.device_index)


def _versions() -> str:
    from opkernel import __version__ as core

    return f"{core}/{_version.__version__}"


def fingerprint(cl: Any, c: Candidate) -> str:
    """What the probe's verdict depends on: the device and its driver, pyopencl, opkernel,
    the probe, and the environment variables through which PoCL changes its compiler."""
    d, p = c.device, c.platform
    pocl_env = sorted((k, v) for k, v in os.environ.items() if k.startswith("POCL_") and k != "POCL_CACHE_DIR")
    return "\0".join([
        "opencl-probe", _PROBE_VERSION, _versions(), str(cl.VERSION_TEXT),
        str(p.name), str(p.version), str(p.vendor), str(d.vendor), str(d.name), str(d.version), str(d.driver_version),
        repr(pocl_env),
    ])


def explain_build_failure(c: Candidate, log: str) -> str:
    """One line: why the probe failed to build on ``c``, and the remedy where there is one."""
    first = next((ln.strip() for ln in log.splitlines() if "error" in ln.lower()), log.strip().splitlines()[0] if log.strip() else "")
    if c.is_pocl:
        version = str(c.platform.version)
        pocl = re.search(r"PoCL\s+([0-9][\w.\-]*)", version)
        llvm = re.search(r"LLVM\s+([0-9][\w.]*)", version)
        what = f"PoCL {pocl.group(1) if pocl else '?'}" + (f" (LLVM {llvm.group(1)})" if llvm else "")
        remedy = _cpu_remedy()
        target = re.search(r"unknown target CPU '([^']*)'", log)
        if target:
            return f"{what} cannot compile for this CPU (unknown target CPU {target.group(1)!r}){remedy}"
        return f"{what} failed to build the probe program: {first[:200]}{remedy}"
    return f"the probe program failed to build: {first[:200]}"


def _cpu_remedy() -> str:
    """What to do when PoCL cannot build here: install Intel's runtime, unless it is."""
    from .icd import installed_runtimes

    return "" if installed_runtimes() else f"; {INTEL_REMEDY}"


def probe(cl: Any, c: Candidate) -> str | None:
    """Build the probe on ``c`` as the backend builds its programs, run it, check every
    value: None when all is right, else why not (one line)."""
    from .common import fast_divisor

    device = c.device
    try:
        ctx = cl.Context([device])
        queue = cl.CommandQueue(ctx, device)
    except Exception as e:
        return f"no context on the device ({type(e).__name__}: {str(e).strip()[:200]})"
    ext = str(device.extensions).split()
    opts = "-DOK_FP64" if ("cl_khr_fp64" in ext or bool(getattr(device, "double_fp_config", 0))) else ""
    prg, log = build_quietly(cl, ctx, PRELUDE + _PROBE_SOURCE, opts)
    if prg is None:
        return explain_build_failure(c, log)
    try:
        rng = np.random.default_rng(7)
        a = rng.integers(-1000, 1000, _PROBE_N).astype(np.float32) / 8
        b = rng.integers(0, 2**31 - 1, _PROBE_N).astype(np.int32)
        m, s = fast_divisor(7)
        dims = np.zeros(8, np.int32)
        dims[1] = 3
        want = a * 2 + (b // 7).astype(np.float32) + 3
        mf = cl.mem_flags
        buf_a = cl.Buffer(ctx, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=a)
        buf_b = cl.Buffer(ctx, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=b)
        buf_out = cl.Buffer(ctx, mf.WRITE_ONLY, a.nbytes)
        kernel = cl.Kernel(prg, "opkernel_probe")
        kernel.set_args(buf_a, buf_b, buf_out, np.int32(m), np.int32(s), dims)
        main = _PROBE_N - _PROBE_N % 64
        cl.enqueue_nd_range_kernel(queue, kernel, (main,), (64,))
        cl.enqueue_nd_range_kernel(queue, kernel, (_PROBE_N - main,), (1,), (main,))
        got = np.empty_like(a)
        cl.enqueue_copy(queue, got, buf_out, is_blocking=True)
    except Exception as e:
        return f"the probe program did not run ({type(e).__name__}: {str(e).strip()[:200]})"
    bad = np.flatnonzero(got != want)
    if bad.size:
        i = int(bad[0])
        return f"the probe program gave wrong answers ({bad.size} of {_PROBE_N} values; element {i}: {got[i]!r}, expected {want[i]!r})"
    return None


_lock = threading.Lock()
_selected: dict[str, tuple[Candidate | None, str | None]] = {}


def _check(cl: Any, c: Candidate) -> tuple[str | None, bool, float]:
    return verdict("opencl", fingerprint(cl, c), lambda: probe(cl, c))


def _matches(cl: Any, c: Candidate, spec: str) -> bool:
    low = spec.lower()
    if low in _KINDS:
        return c.kind(cl) == low
    names = f"{c.platform_name} {c.name}".lower()
    return low in names or (low == "pocl" and c.is_pocl)


def _spec_is_index(spec: str) -> bool:
    return ":" in spec and all(part.strip().isdigit() for part in spec.split(":", 1))


def select(cl: Any, spec: str) -> tuple[Candidate | None, str | None]:
    """(device, None), or (None, why no device can be used), for ``OPKERNEL_OPENCL_DEVICE``
    = ``spec`` ('' for the default choice).  Probes in rank order until one passes; the
    answer is kept for the life of the process."""
    spec = spec.strip()
    with _lock:
        if spec in _selected:
            return _selected[spec]
        try:
            found = candidates(cl)
        except NoPlatform as e:
            result: tuple[Candidate | None, str | None] = (None, str(e))
        else:
            result = _select(cl, found, spec)
        _selected[spec] = result
        return result


def _select(cl: Any, found: list[Candidate], spec: str) -> tuple[Candidate | None, str | None]:
    listing = "; ".join(c.describe() for c in found)
    if spec:
        if _spec_is_index(spec):
            want = tuple(int(part) for part in spec.split(":", 1))
            chosen = [c for c in found if (c.platform_index, c.device_index) == want]
        else:
            chosen = [c for c in found if _matches(cl, c, spec)]
        if not chosen:
            return None, f"no OpenCL device matches {ENV_DEVICE}={spec!r}; devices: {listing}"
    else:
        chosen = list(found)
    chosen.sort(key=lambda c: rank(cl, c))
    failures: list[str] = []
    for c in chosen:
        reason = _check(cl, c)[0]
        if reason is None:
            return c, None
        failures.append(f"{c.describe()}: {reason}")
    if spec:
        return None, f"the OpenCL device {ENV_DEVICE}={spec!r} names does not work: " + " | ".join(failures)
    return None, "no OpenCL device works: " + " | ".join(failures)


def statuses(cl: Any, spec: str) -> list[DeviceStatus]:
    """Every device with its probe's verdict (probing those not yet probed), the one the
    backend uses for ``spec`` marked chosen.  Never raises."""
    try:
        found = candidates(cl)
    except NoPlatform:
        return []
    chosen = select(cl, spec)[0]
    out: list[DeviceStatus] = []
    for c in found:
        start = time.perf_counter()
        try:
            reason, cached, seconds = _check(cl, c)
        except Exception as e:  # never raise from a report
            reason, cached, seconds = f"{type(e).__name__}: {e}", False, time.perf_counter() - start
        out.append(DeviceStatus(
            backend="opencl", id=c.id, name=c.name, platform=c.platform_name, kind=c.kind(cl), reason=reason,
            chosen=chosen is not None and chosen.id == c.id, cached=cached, seconds=seconds,
        ))
    return out


def forget() -> None:
    """Drop this process's choices (tests; ``opkernel info --reprobe``)."""
    with _lock:
        _selected.clear()


# ------------------------------------------------------------ the platform in this process

#: The process that loaded the OpenCL platform: the driver's threads live there alone.
platform_pid: list[int] = []


def forked_message(owner: int) -> str:
    return (
        f"backend 'opencl' cannot be used in this process (pid {os.getpid()}): the OpenCL platform was loaded "
        f"in process {owner}, of which this one is a fork() copy, and an OpenCL driver's threads and queues do "
        "not survive fork() (the first wait for the device would block forever). Start worker processes with the 'spawn' "
        "or 'forkserver' start method (multiprocessing.set_start_method('spawn'), or "
        "multiprocessing.get_context('spawn')), which load it afresh in each child; or use another backend "
        "in the child (ok.set_backend('cpu'))."
    )


def fork_reason() -> str | None:
    """Why OpenCL is unusable here: this is a forked child of the process that loaded it."""
    if platform_pid and platform_pid[0] != os.getpid():
        return forked_message(platform_pid[0])
    return None


def choose(cl: Any, spec: str) -> tuple[Candidate | None, str | None]:
    """``select``, this process noted first as the one that loads the platform (``fork_reason``)."""
    if not platform_pid:
        platform_pid.append(os.getpid())
    return select(cl, spec)


def load_pyopencl() -> Any:
    """pyopencl, imported after ``programs.configure_environment`` (which must run before
    the platform is first loaded)."""
    configure_environment()
    import pyopencl as cl

    return cl


def availability(spec: str) -> str | None:
    """None when a device for ``OPKERNEL_OPENCL_DEVICE`` = ``spec`` passed its probe, else why
    none can be used (``OpenCLBackend.availability``, which keeps the answer).  Never raises."""
    forked = fork_reason()
    if forked is not None:
        return forked
    try:
        cl = load_pyopencl()
    except Exception as e:
        return f"pyopencl cannot be imported ({type(e).__name__}: {e}); pip install opkernel-opencl"
    try:
        return choose(cl, spec)[1]
    except Exception as e:  # never raise from here
        return f"OpenCL device query failed: {type(e).__name__}: {e}"


def report(spec: str) -> list[DeviceStatus]:
    """Every OpenCL device of every platform with its probe's verdict (``statuses``), after
    loading pyopencl; [] in a forked child or when that fails (``availability`` says why)."""
    if fork_reason() is not None:
        return []
    try:
        return statuses(load_pyopencl(), spec)
    except Exception:  # never raise from a report
        return []


def main(argv: list[str] | None = None) -> int:
    """``python -m opkernel_opencl.devices``: every device and its probe, one per line
    (``--working``: the ids of the devices that work, the default one first;
    ``--others``: those but the default, e.g. to run a test suite on each)."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m opkernel_opencl.devices", description=main.__doc__)
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--working", action="store_true", help="ids of the working devices, the default one first")
    group.add_argument("--others", action="store_true", help="ids of the working devices other than the default one")
    args = parser.parse_args(argv)
    spec = os.environ.get(ENV_DEVICE, "")
    found = report(spec)
    if not (args.working or args.others):
        for d in found:
            verdict_text = "works" if d.works else f"fails: {d.reason}"
            print(f"{d.id}\t{'*' if d.chosen else ' '} {d.name} ({d.platform}, {d.kind}): {verdict_text}")
        if not found:
            print(f"no OpenCL device: {availability(spec)}")
        return 0
    working = sorted((d for d in found if d.works), key=lambda d: not d.chosen)
    for d in working:
        if not (args.others and d.chosen):
            print(d.id)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
