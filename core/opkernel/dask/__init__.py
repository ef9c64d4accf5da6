"""opkernel.dask: run any registered op chunk by chunk over dask arrays.

    import dask.array as da
    import opkernel as ok

    x = da.random.random((64, 4096, 4096, 1), chunks=(8, 1024, 1024, 1)).astype("float32")
    y = ok.dask.apply("Addons>MedianPool2D", x, ksize=[1, 5, 5, 1], strides=[1, 1, 1, 1], padding="SAME")
    y.to_zarr("out.zarr")          # or y.compute(), on any Dask scheduler

How an op splits is its partitioning rule (:mod:`opkernel.dask.rules`):
built-in ops have theirs in a table; an op package declares its own with
:func:`declare`.  Dask schedules; opkernel only says how each op splits and
runs each chunk on the worker's active backend (``OPKERNEL_BACKEND``, or
:class:`BackendPlugin`).  Needs ``pip install opkernel[dask]``; importing this
module and declaring rules work without Dask (only :func:`apply` and
:class:`BackendPlugin` import it).  See docs/scaling.md.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .rules import (
    Batch,
    Contraction,
    Elementwise,
    NoPartitioningRuleError,
    Reduction,
    Rule,
    Window,
    declare,
    rule_for,
)

if TYPE_CHECKING:
    import dask.array

    from ._plugin import BackendPlugin

__all__ = [
    "apply", "declare", "rule_for", "Rule", "Elementwise", "Reduction", "Window", "Contraction", "Batch",
    "NoPartitioningRuleError", "BackendPlugin",
]


def _need_dask() -> None:
    try:
        import dask.array  # noqa: F401
    except ImportError as e:
        from ..errors import BackendUnavailableError

        raise BackendUnavailableError(
            "ok.dask needs Dask: pip install 'opkernel[dask]' (dask[array] and distributed)"
        ) from e


def apply(op: Any, *arrays: Any, **attrs: Any) -> dask.array.Array:
    """Op ``op`` (a name or a generated wrapper such as ``ok.ops.matmul``) over
    ``arrays`` (dask arrays; numpy arrays and scalars are taken too), as a lazy dask
    array whose shape, dtype and chunks come from the op's shape function and
    partitioning rule; nothing is computed to find them.  ``attrs`` are the op's
    attrs.  NoPartitioningRuleError for an op without a rule."""
    _need_dask()
    from ._apply import apply as _apply

    return _apply(op, *arrays, **attrs)


def __getattr__(name: str) -> Any:
    if name == "BackendPlugin":
        _need_dask()
        from ._plugin import BackendPlugin

        return BackendPlugin
    raise AttributeError(f"module 'opkernel.dask' has no attribute {name!r}")
