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

from . import _check_op
from ._check_op import CheckOpFailure, CheckOpReport, CheckResult, check_op
from ._compare import assert_all_close, default_tolerance
from ._coverage import GradientCoverage, gradient_coverage
from ._examples import register_example_inputs
from ._isolation import isolated_registries
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
