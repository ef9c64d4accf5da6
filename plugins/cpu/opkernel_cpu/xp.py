"""``xp_of``: the array module a kernel body computes with (thinc's ``xp``).

Most CPU kernel bodies are written once against ``xp`` instead of ``np`` so
that a backend whose arrays follow numpy's API (cupy) can register the same
functions.  For numpy arrays ``xp_of`` returns numpy itself, so the CPU
backend computes exactly as before; for anything else it returns the module
that defines the array's class, found through ``sys.modules``, so this file
never imports an array library (cupy is imported by its own backend, and only
when that backend is first used).
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np

__all__ = ["xp_of"]

_MODULES: dict[type, Any] = {np.ndarray: np}


def _module_of(cls: type) -> Any:
    """The top-level module whose ``ndarray`` ``cls`` is (or subclasses); numpy otherwise."""
    top = sys.modules.get(cls.__module__.split(".", 1)[0])
    array = getattr(top, "ndarray", None)
    module = top if isinstance(array, type) and issubclass(cls, array) and top is not None else np
    _MODULES[cls] = module
    return module


def xp_of(*arrays: Any) -> Any:
    """numpy when every argument is a numpy array (or a host value), else the
    module of the first argument that is not: ``cupy`` for a ``cupy.ndarray``."""
    for a in arrays:
        module = _MODULES.get(type(a)) or _module_of(type(a))
        if module is not np:
            return module
    return np
