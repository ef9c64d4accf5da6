"""Functions of an array module, resolved when first called.

Kernel tables are built at discovery, when cupy must not be imported yet;
``LazyModule("cupy").add`` stands for ``cupy.add`` and imports cupy on its
first call, which only happens after the backend has initialised it.  The
same tables built over ``LazyModule("numpy")`` run the CUDA plugin's
array-API kernels on the CPU in the tests.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["LazyModule", "LazyFunction"]


class LazyFunction:
    __slots__ = ("module", "name", "fn", "__name__")

    def __init__(self, module: str, name: str) -> None:
        self.module = module
        self.name = name
        self.fn: Any = None
        self.__name__ = name

    def resolve(self) -> Any:
        fn = self.fn
        if fn is None:
            fn = self.fn = getattr(importlib.import_module(self.module), self.name)
        return fn

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        fn = self.fn
        if fn is None:
            fn = self.resolve()
        return fn(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<lazy {self.module}.{self.name}>"


class LazyModule:
    """``LazyModule("cupyx.scipy.special").erf`` is a LazyFunction; nothing is imported yet."""

    def __init__(self, name: str) -> None:
        self.__name = name

    @property
    def name(self) -> str:
        return self.__name

    def __getattr__(self, attr: str) -> LazyFunction:
        if attr.startswith("__"):
            raise AttributeError(attr)
        return LazyFunction(self.__name, attr)
