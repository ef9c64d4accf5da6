"""The top-level namespace: exactly the public API, in ``__all__`` and ``dir(opkernel)``.

A name added to (or dropped from) ``opkernel`` must be added here too, on purpose.
"""

from __future__ import annotations

import json
import types

import pytest
from isolated import run_isolated

import opkernel as ok

PUBLIC = frozenset({
    "__version__",
    # modules
    "errors", "ops", "nn", "random", "compat", "shape_fns", "testing", "typing", "dask", "sysconfig",
    # tensors and dtypes
    "Tensor", "Variable", "tensor", "DType", "as_dtype",
    "bfloat16", "bool_", "complex64", "complex128", "double", "float16", "float32", "float64", "half",
    "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "string", "resource",
    "qint8", "qint16", "qint32", "quint8", "quint16",
    "numbertype", "numerictype", "realnumbertype", "realnumerictype", "quantizedtype",
    # backends and dispatch
    "Backend", "available_backends", "config", "execute", "get_backend", "set_backend", "use_backend",
    "kernel_label_map", "kernel_fallback", "warmup", "memory", "profile", "explain",
    # registries
    "register_op", "op_def", "OpDef", "OpDefBuilder", "register_kernel", "unregister_kernel",
    "OpKernel", "AsyncOpKernel", "OpKernelConstruction", "OpKernelContext", "ResourceBase", "ResourceMgr", "ResourceHandle", "ResourceVariable", "register_gradient", "unregister_gradient",
    "get_kernel", "get_kernels_for_backend", "copy_registered_kernels", "get_gradient",
    "not_differentiable", "register_plugin", "plugin_errors", "load_op_library", "hookimpl", "PLUGIN_API_VERSION",
    # exchange: DLPack, and the C ABI's build settings
    "from_dlpack",
    # shapes
    "Dimension", "InferenceContext", "TensorShape", "infer_shapes",
    # autodiff
    "GradientTape", "custom_gradient", "grad", "value_and_grad", "stop_recording", "stop_gradient",
    # functions, saving
    "function", "TensorSpec", "save", "load",
})

MODULES = {"errors", "ops", "nn", "random", "compat", "shape_fns", "testing", "typing", "dask", "sysconfig"}
TYPE_CLASSES = {"numbertype", "numerictype", "realnumbertype", "realnumerictype", "quantizedtype"}


def _public(names: list[str]) -> list[str]:
    return sorted(n for n in names if not n.startswith("_") or n == "__version__")


def test_all_is_exactly_the_public_namespace() -> None:
    assert len(ok.__all__) == len(set(ok.__all__)), "a name is listed twice in opkernel.__all__"
    assert set(ok.__all__) - PUBLIC == set(), "new public names: list them in tests/test_public_api.py"
    assert PUBLIC - set(ok.__all__) == set(), "public names missing from opkernel.__all__"


def test_dir_shows_only_the_public_names_before_and_after_lazy_imports() -> None:
    out = run_isolated(
        "import json, opkernel as ok\n"
        "before = dir(ok)\n"
        "import opkernel.engine, opkernel.cli, opkernel.ops._stubgen\n"  # binds submodules on the package
        "for n in ok.__all__: getattr(ok, n)\n"
        "print(json.dumps([before, dir(ok)]))",
        backend="cpu", what="dir(opkernel)",
    )
    before, after = json.loads(out.stdout)
    assert _public(before) == sorted(PUBLIC)
    assert _public(after) == sorted(PUBLIC)


def test_no_import_helpers_leak() -> None:
    for name in ("Any", "annotations", "TYPE_CHECKING", "importlib"):
        assert name not in vars(ok), name
        with pytest.raises(AttributeError, match=f"module 'opkernel' has no attribute '{name}'"):
            getattr(ok, name)


def test_star_import_binds_every_public_name() -> None:
    out = run_isolated(
        "from opkernel import *\nimport opkernel\nprint([n for n in opkernel.__all__ if n not in globals()])",
        backend="cpu", what="from opkernel import *",
    )
    assert out.stdout.strip() == "[]"


def test_lazy_names_are_not_imported_with_opkernel() -> None:
    out = run_isolated(
        "import sys, opkernel as ok\n"
        "print(sorted(m for m in ('dask', 'opkernel.dask', 'opkernel.typing', 'opkernel.testing', 'opkernel.ops')"
        " if m in sys.modules))\n"
        "print(type(ok.dask).__name__, ok.dask.__name__)",
        backend="cpu", what="import opkernel",
    )
    lazy, dask = out.stdout.splitlines()
    assert lazy == "[]"
    assert dask == "module opkernel.dask"


def test_public_names_are_what_they_say() -> None:
    for name in MODULES:
        assert isinstance(getattr(ok, name), types.ModuleType), name
    for name in TYPE_CLASSES:
        assert all(isinstance(d, ok.DType) for d in getattr(ok, name)), name
    for name in PUBLIC - MODULES - TYPE_CLASSES - {"__version__", "config", "PLUGIN_API_VERSION"}:
        assert callable(getattr(ok, name)) or isinstance(getattr(ok, name), ok.DType), name
    assert not isinstance(ok.config, types.ModuleType)
    assert isinstance(ok.__version__, str)


def test_implementation_modules_stay_reachable_but_unlisted() -> None:
    # docs name a few of their settings (ok.engine.MAX_INTRA_OP_THREADS).
    assert isinstance(ok.engine, types.ModuleType)
    assert "engine" not in dir(ok)
