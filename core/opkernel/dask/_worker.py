"""What runs inside a worker: one op call on numpy chunks.

Each worker process imports opkernel once; the op's handle and its attrs are
looked up once per process (``_calls``) and the engine's signature cache finds
the kernel once per input dtypes, so a chunk costs an upload, the kernel and a
download.  Chunks arrive and leave as numpy arrays, whatever backend runs them.
This module does not import dask.
"""

from __future__ import annotations

import threading
from typing import Any, Callable, Sequence

import numpy as np

__all__ = ["kernel_call", "run", "freeze", "calls_made"]

_calls: dict[tuple[Any, ...], Callable[..., Any]] = {}
_lock = threading.Lock()
#: How many distinct (op, attrs) calls this process built (tests read it through a worker).
_built = [0]


def freeze(value: Any) -> Any:
    """``value`` made hashable (lists become tuples), for a per-process cache key."""
    if isinstance(value, (list, tuple)):
        return tuple(freeze(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((k, freeze(v)) for k, v in value.items()))
    return value


def _host(value: Any) -> Any:
    if isinstance(value, (list, tuple)):
        return type(value)(_host(v) for v in value)
    return np.asarray(value.numpy())


def kernel_call(op: str, attrs: tuple[tuple[str, Any], ...]) -> Callable[..., Any]:
    """A function of host arrays that runs ``op`` with ``attrs`` on this process's
    active backend and returns host arrays; built once per process and (op, attrs)."""
    key = (op, attrs)
    fn = _calls.get(key)
    if fn is not None:
        return fn
    with _lock:
        fn = _calls.get(key)
        if fn is None:
            from .. import engine

            handle = engine.op_handle(op)
            bound = dict(attrs)

            def fn(*inputs: Any) -> Any:
                return _host(engine.execute(handle, inputs, bound))

            _calls[key] = fn
            _built[0] += 1
    return fn


def run(op: str, attrs: tuple[tuple[str, Any], ...], *inputs: Any) -> Any:
    """Run ``op`` on host ``inputs`` (a list input is a list)."""
    return kernel_call(op, attrs)(*inputs)


_saved: dict[str, Any] = {}


def run_saved(token: str, data: Any, *inputs: Any) -> Any:
    """Run the saved graph ``data`` (the bytes of an ``.okg`` file; ``token`` names
    them) on host ``inputs``: loaded once per process, on its active backend."""
    fn = _saved.get(token)
    if fn is None:
        with _lock:
            fn = _saved.get(token)
            if fn is None:
                import os
                import tempfile

                from ..saving import load

                with tempfile.TemporaryDirectory() as tmp:
                    path = os.path.join(tmp, "fn.okg")
                    with open(path, "wb") as f:
                        f.write(np.asarray(data, np.uint8).tobytes())
                    fn = _saved[token] = load(path)
                _built[0] += 1
    return _host(fn(*inputs))


def calls_made() -> int:
    """How many (op, attrs) calls this process has built."""
    return _built[0]


def concat_grid(pieces: Sequence[Any]) -> np.ndarray:
    """The numpy array made of a nested list of blocks, one nesting level per axis (``np.block``)."""
    return np.block(pieces)
