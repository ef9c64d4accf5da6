"""Generated op wrappers: ``ok.ops.<snake_case>`` for every registered op.

Wrappers are generated on first access from the OpDef (``ok.ops.zero_out``,
``ok.ops.mat_mul``); namespaced ops live in a sub-namespace
(``Addons>MedianPool2D`` is ``ok.ops.addons.median_pool2d``).
"""

# Generated wrappers become globals of this module, looked up before ``__getattr__``: every
# other global is private (``_`` or capitalised), so no op or namespace name (always snake
# case) can resolve to one of them.  No ``from __future__ import annotations`` either: it
# would leave a global named ``annotations``.
import builtins as _builtins
import pkgutil as _pkgutil
import threading as _threading
from typing import Any, Callable

from .. import engine as _engine
from .. import op_registry as _op_registry
from .. import plugins as _plugins
from ._gen import make_wrapper as _make_wrapper
from ._gen import split_namespace as _split_namespace

#: Submodules of this package: names the import system may probe, never op lookups.
_SUBMODULES = frozenset(m.name for m in _pkgutil.iter_modules(__path__))
_lock = _threading.RLock()
#: Wrappers made so far: module globals, so some shadow builtins here (any, all, sum, max,
#: min, abs, pow, range, slice, complex); this module calls builtins through ``_builtins``.
_generated: set[str] = set()
_index: dict[tuple[str | None, str], str] = {}
_index_version = -1


def _refresh_index() -> dict[tuple[str | None, str], str]:
    global _index, _index_version
    _plugins.ensure_loaded()
    version = _op_registry.version()
    if version != _index_version:
        _index = {_split_namespace(n): n for n in _op_registry.op_names()}
        _index_version = version
    return _index


def _wrapper(op_name: str) -> Callable[..., Any]:
    """The generated wrapper of ``op_name`` (finalizes the op)."""
    handle = _engine.op_handle(op_name)
    return _make_wrapper(handle.op_def, handle, _engine)


class Namespace:
    """Wrappers of the ops of one namespace (``ok.ops.addons``)."""

    def __init__(self, namespace: str) -> None:
        self._namespace = namespace

    def __getattr__(self, attr: str) -> Callable[..., Any]:
        op_name = _refresh_index().get((self._namespace, attr))
        if op_name is None:
            raise AttributeError(f"no op {attr!r} in namespace {self._namespace!r}")
        fn = _wrapper(op_name)
        setattr(self, attr, fn)
        return fn

    def __dir__(self) -> list[str]:
        return sorted(a for ns, a in _refresh_index() if ns == self._namespace)

    def __repr__(self) -> str:
        return f"<opkernel op namespace {self._namespace!r}>"


def __getattr__(attr: str) -> Any:
    if attr.startswith("__") or attr in _SUBMODULES:
        raise AttributeError(f"module 'opkernel.ops' has no attribute {attr!r}")
    with _lock:
        index = _refresh_index()
        op_name = index.get((None, attr))
        if op_name is not None:
            value: Any = _wrapper(op_name)
        elif _builtins.any(ns == attr for ns, _ in index):  # `any` may be the Any op's wrapper here
            value = Namespace(attr)
        else:
            raise AttributeError(f"module 'opkernel.ops' has no op {attr!r}; registered ops: see opkernel kernels")
        globals()[attr] = value
        _generated.add(attr)
        return value


def __dir__() -> list[str]:
    index = _refresh_index()
    return sorted({a for ns, a in index if ns is None} | {ns for ns, _ in index if ns})


def _invalidate() -> None:
    """Forget generated wrappers (after ops are removed or plugins change)."""
    global _index_version
    with _lock:
        for attr in _generated:
            globals().pop(attr, None)
        _generated.clear()
        _index_version = -1


_plugins.on_change(_invalidate)
