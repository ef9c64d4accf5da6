"""The conformance kit for op and backend authors.

``check_op`` proves an op correct on every backend with one call;
``compute_gradient`` / ``compute_gradient_error`` check a gradient against finite
differences (``tf.test.compute_gradient``); ``gradient_coverage`` says which
gradients can run on a backend and which kernels they lack;
``assert_all_close`` compares with dtype-aware tolerances; ``isolated_registries``
undoes every registration made inside it (tests register throwaway ops,
kernels, gradients and plugins through it).
"""

from __future__ import annotations

import sys
from contextlib import contextmanager
from typing import Iterator

from .. import engine, gradients, kernels, op_registry, plugins
from . import _check_op
from ._check_op import CheckOpFailure, CheckOpReport, CheckResult, check_op
from ._compare import assert_all_close, default_tolerance
from ._coverage import GradientCoverage, gradient_coverage
from ._examples import register_example_inputs, registered_examples, restore_examples
from .gradient_checker import compute_gradient, compute_gradient_error

__all__ = [
    "CheckOpFailure",
    "CheckOpReport",
    "CheckResult",
    "GradientCoverage",
    "assert_all_close",
    "check_op",
    "compute_gradient",
    "compute_gradient_error",
    "default_tolerance",
    "gradient_coverage",
    "isolated_registries",
    "register_example_inputs",
]

# The module's former import path, ``from opkernel.testing.check_op import check_op``, keeps
# working; ``opkernel.testing.check_op`` itself is the function.
sys.modules[f"{__name__}.check_op"] = _check_op


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
        engine._reset_handles()
        from .. import ops

        ops._invalidate()
