"""How long numpy's OpenBLAS threads spin when idle, chosen before numpy is loaded.

After each threaded call OpenBLAS keeps its threads spinning for 2**28 cycles (about a
tenth of a second) before they sleep.  In a training step that means always: on a
machine with few cores they then take the cores from the CPU backend's intra-op pool
(opkernel_cpu._native), whose sharded kernels between two MatMuls ran at about half
speed (a [2048, 256] GeluGrad 1.36 ms a call in the transformer's step against 0.65 ms
alone).  OpenBLAS reads ``OPENBLAS_THREAD_TIMEOUT`` (a power of two of cycles, 4 to 30)
when it is loaded; where numpy is not loaded yet and the variable is not set, it is set
to 18 (2**18 cycles, about 0.1 ms: back-to-back BLAS calls still find the threads
awake).  A program that imports numpy first, or sets the variable itself, keeps
OpenBLAS's choice.  TensorFlow's MKL builds set ``KMP_BLOCKTIME`` at import for the same
reason.
"""

from __future__ import annotations

import os
import sys

#: The spin this package chooses, in powers of two of cycles.
THREAD_TIMEOUT = "18"


def choose_blas_spin() -> bool:
    """Set ``OPENBLAS_THREAD_TIMEOUT`` when numpy is not loaded and it is not set;
    True when it was set here."""
    if "numpy" in sys.modules or "OPENBLAS_THREAD_TIMEOUT" in os.environ:
        return False
    os.environ["OPENBLAS_THREAD_TIMEOUT"] = THREAD_TIMEOUT
    return True
