"""Keeping freed memory for reuse: glibc's malloc tuned for array workloads.

Out of the box glibc returns the top of its heap to the system once more than
about twice the last freed mmap-sized block lies free there, and serves larger
blocks with fresh mmaps.  An array library frees and allocates same-sized
arrays all the time, so every op then pays page faults on memory the kernel
must zero again (a 64×4×4×16 convolution spends two thirds of its time there).
The CPU backend raises both thresholds when it starts, as PyTorch's and
TensorFlow's performance guides suggest doing with jemalloc or tcmalloc:
freed blocks up to 32 MiB (glibc's ceiling for this setting) stay in the heap
and up to 256 MiB of free heap is kept.

Left alone when ``OPKERNEL_CPU_MALLOC=default``, when the environment already
tunes malloc (``MALLOC_*`` or ``GLIBC_TUNABLES``), and off glibc.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import platform
import threading

__all__ = ["tune", "MMAP_THRESHOLD", "TRIM_THRESHOLD"]

_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3  # from <malloc.h>
MMAP_THRESHOLD = 32 << 20
TRIM_THRESHOLD = 256 << 20

_lock = threading.Lock()
_state: str | None = None


def _skip_reason() -> str | None:
    if os.environ.get("OPKERNEL_CPU_MALLOC", "tuned") == "default":
        return "OPKERNEL_CPU_MALLOC=default"
    if "GLIBC_TUNABLES" in os.environ or any(k.startswith("MALLOC_") for k in os.environ):
        return "tuned by the environment"
    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return "not glibc"
    return None


def tune() -> str:
    """Apply the thresholds once per process; returns what was done, for ``opkernel info``."""
    global _state
    with _lock:
        if _state is None:
            reason = _skip_reason()
            if reason is None:
                try:
                    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
                    done = libc.mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD) == 1
                    done = libc.mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD) == 1 and done
                except (OSError, AttributeError) as e:
                    reason = f"mallopt unavailable: {e}"
                else:
                    reason = None if done else "mallopt refused the thresholds"
            _state = (
                f"glibc, freed blocks kept: mmap_threshold={MMAP_THRESHOLD >> 20} MiB, "
                f"trim_threshold={TRIM_THRESHOLD >> 20} MiB"
                if reason is None
                else f"system default ({reason})"
            )
        return _state
