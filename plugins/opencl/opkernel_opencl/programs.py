"""OpenCL programs: the registry of program families, and the per-device cache.

A *family* renders the OpenCL C source of one program for one dtype (the
elementwise kernels of ``Add`` for float32, the MatMul kernels for int32, ...).
Kernel modules declare their families at import time with ``family``; the
cache builds a program the first time one of its kernels is asked for, once per
(source, options) on the backend's device, and ``build_all`` (``ok.warmup``)
builds every family for every dtype the device supports.

Builds go through pyopencl's on-disk binary cache.  Its location is
``$OPKERNEL_OPENCL_CACHE_DIR`` (default ``$XDG_CACHE_HOME/opkernel/opencl``, i.e.
``~/.cache/opkernel/opencl``); ``OPKERNEL_OPENCL_CACHE_DIR=off`` builds from
source every time.  PoCL keeps its own cache of compiled kernels; when the
variable is set and ``POCL_CACHE_DIR`` is not, PoCL's goes to ``<dir>/pocl``.
"""

from __future__ import annotations

import os
import re
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable

from opkernel.errors import InternalError

if TYPE_CHECKING:
    from .backend import OpenCLBackend

ENV_CACHE = "OPKERNEL_OPENCL_CACHE_DIR"
_OFF = {"off", "0", "none", "no", "false", ""}


def cache_dir() -> str | None:
    """The on-disk program cache directory, or None when caching is off."""
    value = os.environ.get(ENV_CACHE)
    if value is None:
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        return os.path.join(base, "opkernel", "opencl")
    return None if value.strip().lower() in _OFF else os.path.abspath(os.path.expanduser(value))


def configure_environment() -> None:
    """Point PoCL's kernel cache under ours (before the platform is first loaded)."""
    value = os.environ.get(ENV_CACHE)
    if value is None or "POCL_CACHE_DIR" in os.environ:
        return
    where = cache_dir()
    if where is None:
        os.environ.setdefault("POCL_KERNEL_CACHE", "0")
    else:
        os.environ["POCL_CACHE_DIR"] = os.path.join(where, "pocl")


@dataclass(frozen=True)
class Family:
    """One program per dtype: ``render(dtype_name)`` returns its OpenCL C source."""

    name: str
    render: Callable[[str], str]
    dtypes: tuple[str, ...]
    options: tuple[str, ...] = ()


_families: dict[str, Family] = {}


def family(name: str, dtypes: tuple[str, ...] | list[str], options: tuple[str, ...] = ()) -> Callable[[Callable[[str], str]], Callable[[str], str]]:
    """Decorator declaring a program family; returns the render function unchanged."""

    def decorate(render: Callable[[str], str]) -> Callable[[str], str]:
        _families[name] = Family(name, render, tuple(dtypes), options)
        return render

    return decorate


def families() -> dict[str, Family]:
    return dict(_families)


PRELUDE = """\
#ifdef OK_FP64
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
#endif
typedef struct { int v[8]; } dims_t;
// A comparison, not the isnan() builtin: PoCL's CPU device calls that out of line and
// stops vectorising the kernel around it (a MaxPool ran 6x slower).  Valid without
// -cl-finite-math-only, which no program here is built with.
#define OK_ISNAN(v) ((v) != (v))
// n / d for 0 <= n < 2^31 from d's (m, s) (common.fast_divisor).  A division by a runtime
// value is not vectorised on a CPU device and costs more than the copy or comparison of an
// element around it; so does mul_hi.  A 32 x 32 -> 64-bit product is vectorised.
inline int fdiv(int n, int m, int s) {
  return (int)(((uint)(((ulong)(uint)n * (uint)m) >> 32) + (uint)n) >> s);
}
"""


class ProgramBuildError(InternalError):
    """An OpenCL program failed to build: the message shows the op, the offending
    source lines and the compiler log."""


def _error_lines(source: str, log: str) -> str:
    lines = source.splitlines()
    shown: list[str] = []
    for m in re.finditer(r"(?:<source>|input\.cl|\.cl)?:(\d+):(\d+):\s*(error|warning)?", log):
        n = int(m.group(1))
        if 1 <= n <= len(lines) and (m.group(3) == "error" or not shown):
            text = f"  line {n}: {lines[n - 1].strip()}"
            if text not in shown:
                shown.append(text)
    return "\n".join(shown[:5])


class ProgramCache:
    """Built programs and kernels of one backend (one context, one device)."""

    def __init__(self, backend: OpenCLBackend) -> None:
        self._be = backend
        self._lock = threading.RLock()
        self._programs: dict[tuple[str, str], Any] = {}
        self._kernels: dict[tuple[str, str, str], Any] = {}
        self.builds = 0  # programs built (or fetched from disk) by this cache

    def source(self, fam: Family, dtype: str) -> str:
        return PRELUDE + fam.render(dtype)

    def options(self, fam: Family) -> str:
        opts = list(fam.options)
        if self._be.fp64:
            opts.append("-DOK_FP64")
        return " ".join(opts)

    def program(self, family_name: str, dtype: str, op: str) -> Any:
        fam = _families[family_name]
        src, opts = self.source(fam, dtype), self.options(fam)
        key = (src, opts)
        prg = self._programs.get(key)
        if prg is None:
            with self._lock:
                prg = self._programs.get(key)
                if prg is None:
                    prg = self._programs[key] = self._build(src, opts, f"{family_name}[{dtype}]", op)
        return prg

    def kernel(self, family_name: str, dtype: str, name: str, op: str) -> Any:
        """The kernel ``name`` of family ``family_name`` built for ``dtype``."""
        key = (family_name, dtype, name)
        k = self._kernels.get(key)
        if k is None:
            prg = self.program(family_name, dtype, op)
            with self._lock:
                k = self._kernels.get(key)
                if k is None:
                    k = self._kernels[key] = self._be.cl.Kernel(prg, name)
        return k

    def _build(self, src: str, opts: str, what: str, op: str) -> Any:
        cl = self._be.cl
        where = cache_dir()
        try:
            if where is None:
                prg = cl.Program(cl._cl._Program(self._be.context, src)).build(options=opts)
            else:
                os.makedirs(where, exist_ok=True)
                prg = cl.Program(self._be.context, src).build(options=opts, cache_dir=where)
        except cl.Error as e:
            log = str(e)
            raise ProgramBuildError(
                f"op {op!r}: the OpenCL program {what} failed to build on device {self._be.device_name!r} "
                f"(options {opts!r}).\n{_error_lines(src, log)}\ncompiler log:\n{log}",
                op=op, backend="opencl", source=src, log=log,
            ) from e
        self.builds += 1
        return prg

    def build_all(self) -> int:
        """Build every family for every dtype the device supports; returns how many were built."""
        from opkernel.dtypes import as_dtype

        def supported(key: str) -> bool:  # keys are dtype names, sizes, or both joined by ':'
            for part in key.split(":"):
                if not part.isdigit() and not self._be.supports_dtype(as_dtype(part)):
                    return False
            return True

        before = len(self._programs)
        for fam in list(_families.values()):
            for key in fam.dtypes:
                if supported(key):
                    self.program(fam.name, key, f"warmup of {fam.name}")
        return len(self._programs) - before
