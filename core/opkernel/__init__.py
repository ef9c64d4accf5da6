"""opkernel: define a tensor op once, run it on any installed backend.

    import opkernel as ok
    ok.register_op("ZeroOut").attr("T: {float, int32} = DT_INT32") \\
        .input("to_zero: T").output("zeroed: T") \\
        .set_shape_fn(ok.shape_fns.unchanged_shape)

Importing opkernel is cheap: plugins (backends, op libraries) are discovered at
first use, and no backend's array library is imported until that backend is.
The parts a program may never use (``ok.nn``, ``ok.ops``, ``ok.profile`` and
``ok.explain``, ``ok.load_op_library``, ``ok.compat``, ``ok.shape_fns``,
``ok.hookimpl``, ``ok.testing``, ``ok.typing``) are imported at their first use.

``__all__`` is the public API (tests/test_public_api.py lists it) and ``dir(opkernel)``
shows only it; the other submodules (``ok.engine``, ``ok.plugins``, ...) can be
reached but are the implementation.
"""

from __future__ import annotations

from ._blas_env import choose_blas_spin as _choose_blas_spin

_choose_blas_spin()  # before anything here imports numpy

from ._version import __version__  # noqa: E402

from typing import TYPE_CHECKING, Any

from . import errors
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
    resource,
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
    kernel_fallback,
    kernel_label_map,
    memory,
    set_backend,
    to_tensor as tensor,
    use_backend,
    warmup,
)
from .gradients import get_gradient, not_differentiable, register_gradient, unregister_gradient
from .kernels import AsyncOpKernel, OpKernel, OpKernelConstruction, OpKernelContext, register_kernel
from .kernels import copy_registered_kernels, get_kernel, get_kernels_for_backend, unregister_kernel
from .op_registry import OpDef, OpDefBuilder, register_op
from .plugins import plugin_errors, register_plugin
from .resources import ResourceBase, ResourceHandle, ResourceMgr
from .shapes import Dimension, InferenceContext, TensorShape
from .tensor import install as _install_tensor_hooks
from .tensor import Tensor, Variable

if TYPE_CHECKING:  # imported at first use: see __getattr__
    from . import compat, dask, nn, ops, random, shape_fns, sysconfig, testing, typing
    from .function import function
    from .graph import TensorSpec
    from .hookspecs import PLUGIN_API_VERSION, hookimpl
    from ._dlpack import from_dlpack
    from .resource_variables import ResourceVariable
    from .library import load_op_library
    from .profiler import explain, profile
    from .typing import TensorLike
    from .saving import load, save

__all__ = [
    "__version__", "errors", "shape_fns", "ops", "Backend", "DType", "as_dtype",
    "bfloat16", "bool_", "complex64", "complex128", "double", "float16", "float32", "float64", "half",
    "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "string", "resource",
    "qint8", "qint16", "qint32", "quint8", "quint16",
    "numbertype", "numerictype", "realnumbertype", "realnumerictype", "quantizedtype",
    "available_backends", "config", "execute", "get_backend", "kernel_label_map", "set_backend", "tensor",
    "use_backend", "not_differentiable", "register_gradient", "PLUGIN_API_VERSION", "hookimpl",
    "ResourceBase", "ResourceMgr", "ResourceHandle", "ResourceVariable",
    "OpKernel", "AsyncOpKernel", "OpKernelConstruction", "OpKernelContext", "register_kernel", "OpDef", "OpDefBuilder",
    "register_op", "op_def", "infer_shapes", "function", "TensorSpec", "plugin_errors", "register_plugin", "Dimension",
    "InferenceContext", "TensorShape", "Tensor", "Variable", "nn", "GradientTape", "custom_gradient", "grad",
    "value_and_grad", "stop_recording", "stop_gradient", "warmup", "memory", "profile", "explain", "load_op_library", "compat",
    "from_dlpack", "sysconfig",
    "testing", "typing", "dask", "random",
    "kernel_fallback",
    "save", "load",
    "unregister_kernel", "unregister_gradient", "get_kernel", "get_kernels_for_backend", "get_gradient",
    "copy_registered_kernels",
]

#: Public names imported at first access: name -> (module, attribute; None for the module itself).
_LAZY: dict[str, tuple[str, str | None]] = {
    "nn": ("nn", None),
    "random": ("random", None),
    "ops": ("ops", None),
    "compat": ("compat", None),
    "dask": ("dask", None),
    "shape_fns": ("shape_fns", None),
    "sysconfig": ("sysconfig", None),
    "profile": ("profiler", "profile"),
    "explain": ("profiler", "explain"),
    "load_op_library": ("library", "load_op_library"),
    "from_dlpack": ("_dlpack", "from_dlpack"),
    "ResourceVariable": ("resource_variables", "ResourceVariable"),
    "hookimpl": ("hookspecs", "hookimpl"),
    "PLUGIN_API_VERSION": ("hookspecs", "PLUGIN_API_VERSION"),
    "function": ("function", None),  # the module is callable: ok.function is the decorator
    "TensorSpec": ("graph", "TensorSpec"),
    "save": ("saving", "save"),
    "load": ("saving", "load"),
}

#: Submodules that ``ok.<name>`` reaches even before anything imported them.
_SUBMODULES = frozenset({
    "autodiff", "backend", "cli", "compat", "dtypes", "engine", "errors", "gradients", "hookspecs", "kernels",
    "library", "nn", "op_registry", "ops", "plugins", "profiler", "random", "saving", "shape_fns", "shapes", "spec",
    "resources", "sysconfig", "testing", "typing",
})


def stop_gradient(x: TensorLike) -> Tensor:
    """``x`` unchanged, but no gradient flows through it (the StopGradient op)."""
    from . import ops

    return ops.stop_gradient(x)


def op_def(name: str) -> OpDef:
    """The finalized OpDef of ``name`` (finalizing it now if it is pending)."""
    from . import op_registry, plugins

    plugins.ensure_loaded()
    return op_registry.get_op_def(name)


def infer_shapes(
    op_name: Any, input_shapes: list | None = None, attrs: dict | None = None, input_values: list | None = None  # type: ignore[type-arg]
) -> Any:
    """Run ``op_name``'s shape function without running anything.

    Given a graph, a ConcreteFunction or an ``ok.function`` instead of an op
    name, gives every node's output specs (partial shapes) for the input specs
    ``input_shapes`` (default: the graph's own): see ``opkernel.function.infer_shapes``.

    ``input_shapes`` has one entry per declared input (a list of shapes for a
    list input); ``attrs`` gives attrs that are not inferred from inputs;
    ``input_values`` optionally gives the known values of inputs (one entry
    per declared input, None where unknown), such as Reshape's ``shape`` or
    Pad's ``paddings``, which shape functions read with ``input_tensor``.
    """
    if not isinstance(op_name, str):
        from .function import infer_shapes as _graph_shapes

        return _graph_shapes(op_name, input_shapes)
    from ._infer import infer_shapes as _infer

    return _infer(op_def(op_name), input_shapes or [], attrs or {}, input_values)


def _lazy_attribute(name: str) -> Any:
    """The module's ``__getattr__`` (PEP 562): imports a lazy public name at first use."""
    lazy = _LAZY.get(name)
    if lazy is None and name not in _SUBMODULES:
        raise AttributeError(f"module 'opkernel' has no attribute {name!r}")
    # import_module, not "from . import ops": that form looks the name up on
    # this package first, which would call this function again, forever.
    import importlib

    module_name, attr = lazy or (name, None)
    module = importlib.import_module(f"{__name__}.{module_name}")
    value = module if attr is None else getattr(module, attr)
    if name != "compat":
        # Cached, so this runs once per name.  (compat is not: ``python -m
        # opkernel.compat`` must find it unimported to run it fresh.)
        globals()[name] = value
    return value


def _load_ops() -> Any:
    """``opkernel.ops``, for a tensor operator's first call (``opkernel.tensor`` sits below the
    ops and never imports them: the package, on top of every layer, installs this loader)."""
    from . import ops

    return ops


_install_tensor_hooks(load_ops=_load_ops)

if not TYPE_CHECKING:
    # Hidden from type checkers, to which a module __getattr__ would make every misspelt
    # ``ok.<name>`` an Any instead of an error: they see the lazy names in the
    # TYPE_CHECKING imports above.
    __getattr__ = _lazy_attribute


def __dir__() -> list[str]:
    # The public names and the module's dunders; not the submodules that importing
    # the implementation binds here (engine, autodiff, ...).
    return sorted(set(__all__) | {n for n in globals() if n.startswith("__") and n.endswith("__")})


# Bound by the imports at the top, and no part of the API.
del annotations, Any, TYPE_CHECKING, _install_tensor_hooks
