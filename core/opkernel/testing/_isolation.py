"""``isolated_registries``: undo every registration made inside a block."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

from .. import engine, gradients, kernels, op_registry, plugins
from ._examples import registered_examples, restore_examples


@contextmanager
def isolated_registries() -> Iterator[None]:
    """Undo every op, kernel, gradient and hand-registered plugin added inside the block."""
    plugins.ensure_loaded()
    ops_snap, kern_snap, grad_snap = op_registry.snapshot(), kernels.snapshot(), gradients.snapshot()
    before = {p.name for p in plugins.plugins()}
    examples = registered_examples()
    try:
        yield
    finally:
        for info in plugins.plugins():
            if info.name not in before:
                plugins.unregister_plugin(info.name)
        op_registry.restore(ops_snap)
        kernels.restore(kern_snap)
        gradients.restore(grad_snap)
        restore_examples(examples)
        engine.reset_handles()
        from .. import ops

        ops._invalidate()
