"""opkernel: define a tensor op once, run it on any installed backend.

    import opkernel as ok
    ok.register_op("ZeroOut").attr("T: {float, int32} = DT_INT32") \\
        .input("to_zero: T").output("zeroed: T") \\
        .set_shape_fn(ok.shape_fns.unchanged_shape)

Importing opkernel is cheap: plugins (backends, op libraries) are discovered at
first use, and no backend's array library is imported until that backend is.
"""

from __future__ import annotations

__version__ = "0.1.0"

from . import errors, nn, shape_fns
from .autodiff import GradientTape, custom_gradient, grad, stop_recording, value_and_grad
from .backend import Backend
from .dtypes import (
    DType,
    as_dtype,
    bfloat16,
    bool_,
    complex64,
    complex128,
    double,
    float16,
    float32,
    float64,
    half,
    int8,
    int16,
    int32,
    int64,
    numbertype,
    numerictype,
    qint8,
    qint16,
    qint32,
    quantizedtype,
    quint8,
    quint16,
    realnumbertype,
    realnumerictype,
    string,
    uint8,
    uint16,
    uint32,
    uint64,
)
from .engine import (
    available_backends,
    config,
    execute_by_name as execute,
    get_backend,
    kernel_label_map,
    memory,
    set_backend,
    to_tensor as tensor,
    use_backend,
    warmup,
)
from .gradients import not_differentiable, register_gradient
from .hookspecs import PLUGIN_API_VERSION, hookimpl
from .kernels import OpKernel, OpKernelConstruction, OpKernelContext, register_kernel
from .library import load_op_library
from .op_registry import OpDef, OpDefBuilder, register_op
from .plugins import plugin_errors, register_plugin
from .profiler import explain, profile
from .shapes import Dimension, InferenceContext, TensorShape
from .tensor import Tensor, Variable

__all__ = [
    "__version__", "errors", "shape_fns", "ops", "Backend", "DType", "as_dtype",
    "bfloat16", "bool_", "complex64", "complex128", "double", "float16", "float32", "float64", "half",
    "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "string",
    "qint8", "qint16", "qint32", "quint8", "quint16",
    "numbertype", "numerictype", "realnumbertype", "realnumerictype", "quantizedtype",
    "available_backends", "config", "execute", "get_backend", "kernel_label_map", "set_backend", "tensor",
    "use_backend", "not_differentiable", "register_gradient", "PLUGIN_API_VERSION", "hookimpl",
    "OpKernel", "OpKernelConstruction", "OpKernelContext", "register_kernel", "OpDef", "OpDefBuilder",
    "register_op", "op_def", "infer_shapes", "plugin_errors", "register_plugin", "Dimension",
    "InferenceContext", "TensorShape", "Tensor", "Variable", "nn", "GradientTape", "custom_gradient", "grad",
    "value_and_grad", "stop_recording", "stop_gradient", "warmup", "memory", "profile", "explain", "load_op_library", "compat",
]


def stop_gradient(x: object) -> Tensor:
    """``x`` unchanged, but no gradient flows through it (the StopGradient op)."""
    from . import ops

    return ops.stop_gradient(x)  # type: ignore[no-any-return]


def op_def(name: str) -> OpDef:
    """The finalized OpDef of ``name`` (finalizing it now if it is pending)."""
    from . import op_registry, plugins

    plugins.ensure_loaded()
    return op_registry.get_op_def(name)


def infer_shapes(
    op_name: str, input_shapes: list, attrs: dict | None = None, input_values: list | None = None  # type: ignore[type-arg]
) -> list[TensorShape]:
    """Run ``op_name``'s shape function without running anything.

    ``input_shapes`` has one entry per declared input (a list of shapes for a
    list input); ``attrs`` gives attrs that are not inferred from inputs;
    ``input_values`` optionally gives the known values of inputs (one entry
    per declared input, None where unknown), such as Reshape's ``shape`` or
    Pad's ``paddings``, which shape functions read with ``input_tensor``.
    """
    from ._infer import infer_shapes as _infer

    return _infer(op_def(op_name), input_shapes, attrs or {}, input_values)


def __getattr__(name: str) -> object:
    if name in ("ops", "compat"):
        # import_module, not "from . import ops": that form looks the name up on
        # this package first, which would call this __getattr__ again, forever.
        # (compat is lazy too, so that ``python -m opkernel.compat`` runs it fresh.)
        import importlib

        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module 'opkernel' has no attribute {name!r}")
