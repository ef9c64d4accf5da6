"""Op libraries in C: a shared object built against ``opkernel/c_api.h``, loaded by
``ok.load_op_library("./zero_out.so")`` (docs/c-kernels.md).

Loading calls the library's ``opkernel_c_abi_version`` (it must equal
:data:`opkernel.sysconfig.C_ABI_VERSION`) and then ``opkernel_library_register`` once,
with the ``OK_Api`` table built here from ctypes callbacks.  What the library declares
is checked as it is declared (a malformed spec fails that call, with its message) and
only collected; when the registration function has returned without an error, the
library becomes a plugin module whose hooks register the collected ops and kernels, so
a library that fails anywhere leaves nothing registered.

A C kernel is a class kernel (:class:`~opkernel.kernels.OpKernel`): each call hands the
function an opaque context whose inputs are DLPack ``DLTensor`` views of the backend's
arrays (numpy on host backends, CuPy on cuda), built when the kernel asks for them, and
whose outputs the kernel allocates through the table.  ctypes releases the GIL for the
call; the callbacks take it back.  The shared object is never unloaded.
"""

from __future__ import annotations

import ctypes
import itertools
import re
import struct
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from . import op_registry, plugins
from .dtypes import DType, as_dtype
from .errors import (
    AlreadyExistsError,
    InternalError,
    InvalidArgumentError,
    OpkernelError,
    OpSpecError,
    PluginError,
    ResourceExhaustedError,
)
from .hookspecs import hookimpl
from .kernels import OpKernel, OpKernelConstruction, OpKernelContext, register_kernel
from .sysconfig import C_ABI_VERSION

__all__ = ["load", "is_shared_object", "SHAPE_FNS"]

# ---------------------------------------------------------------- DLPack structs

K_DL_CPU, K_DL_CUDA = 1, 2
K_DL_INT, K_DL_UINT, K_DL_FLOAT, K_DL_BFLOAT, K_DL_COMPLEX, K_DL_BOOL = 0, 1, 2, 4, 5, 6


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device", DLDevice),
        ("ndim", ctypes.c_int32),
        ("dtype", DLDataType),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]


def dl_dtype(dtype: DType) -> tuple[int, int] | None:
    """(DLPack type code, bits) of ``dtype``, or None where DLPack has none (strings,
    quantized and resource types)."""
    if dtype.name == "bfloat16":
        return K_DL_BFLOAT, 16
    kind = np.dtype(dtype.np).kind if dtype.np is not None and not dtype.is_quantized else ""
    code = {"f": K_DL_FLOAT, "i": K_DL_INT, "u": K_DL_UINT, "c": K_DL_COMPLEX, "b": K_DL_BOOL}.get(kind)
    return None if code is None else (code, np.dtype(dtype.np).itemsize * 8)


# ---------------------------------------------------------------- status codes

_CODE_NAMES = {
    0: "OK", 1: "CANCELLED", 2: "UNKNOWN", 3: "INVALID_ARGUMENT", 5: "NOT_FOUND", 6: "ALREADY_EXISTS",
    8: "RESOURCE_EXHAUSTED", 9: "FAILED_PRECONDITION", 11: "OUT_OF_RANGE", 12: "UNIMPLEMENTED", 13: "INTERNAL",
}
OK, INVALID_ARGUMENT, RESOURCE_EXHAUSTED, INTERNAL = 0, 3, 8, 13


def code_name(code: int) -> str:
    return _CODE_NAMES.get(code, f"code {code}")


def _error_class(code: int) -> type[OpkernelError]:
    if code in (3, 9, 11):
        return InvalidArgumentError
    if code == 6:
        return AlreadyExistsError
    if code == 8:
        return ResourceExhaustedError
    return InternalError


# ---------------------------------------------------------------- the OK_Api table

_handles: dict[int, Any] = {}  # an opaque handle's number -> the Python object it stands for
_numbers = itertools.count(1)

_p = ctypes.c_void_p
_s = ctypes.c_char_p
_i = ctypes.c_int
_COMPUTE = ctypes.CFUNCTYPE(_i, _p, _p)

#: The shape functions a library may name (``op_shape_fn``), all of ``opkernel.shape_fns``.
SHAPE_FNS = (
    "unchanged_shape", "scalar_shape", "unknown_shape", "broadcast_binary_op_shape", "matmul_shape",
    "batch_matmul_shape", "merge_all_inputs", "no_outputs", "reduction_shape",
)

_SIGNATURES: list[tuple[str, Any, tuple[Any, ...]]] = [
    ("new_op", _p, (_p, _s)),
    ("op_input", _i, (_p, _s)),
    ("op_output", _i, (_p, _s)),
    ("op_attr", _i, (_p, _s)),
    ("op_shape_fn", _i, (_p, _s)),
    ("op_doc", _i, (_p, _s)),
    ("op_set_is_stateful", _i, (_p,)),
    ("register_kernel", _i, (_p, _s, _s, _s, _p)),
    ("num_inputs", _i, (_p,)),
    ("num_outputs", _i, (_p,)),
    ("input", _p, (_p, _i)),
    ("allocate_output", _p, (_p, _i, _i, ctypes.POINTER(ctypes.c_int64))),
    ("attr_int", _i, (_p, _s, ctypes.POINTER(ctypes.c_int64))),
    ("attr_float", _i, (_p, _s, ctypes.POINTER(ctypes.c_double))),
    ("attr_bool", _i, (_p, _s, ctypes.POINTER(_i))),
    ("attr_type", _i, (_p, _s, ctypes.POINTER(DLDataType))),
    ("attr_int_list", _i, (_p, _s, ctypes.POINTER(ctypes.c_int64), _i, ctypes.POINTER(_i))),
    ("attr_string", _i, (_p, _s, _p, ctypes.c_size_t, ctypes.POINTER(ctypes.c_size_t))),
    ("stream", _p, (_p,)),
    ("set_error", _i, (_p, _i, _s)),
]
_TYPES = {name: ctypes.CFUNCTYPE(restype, *argtypes) for name, restype, argtypes in _SIGNATURES}


class OKApi(ctypes.Structure):
    _fields_ = [("abi_version", ctypes.c_uint32), ("size", ctypes.c_uint32)] + [
        (name, _TYPES[name]) for name, _, _ in _SIGNATURES
    ]


def _text(raw: bytes | None) -> str:
    return "" if raw is None else raw.decode("utf-8", "replace")


class _Failure(Exception):
    """A callback's error: its code and message go back to the C caller."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def _guarded(name: str, fn: Callable[..., Any], failed: Any) -> Callable[..., Any]:
    """``fn`` as a callback that never lets a Python exception reach ctypes (which would
    print it and return garbage): a failure is recorded on the handle's owner and the
    callback returns its code (or NULL)."""

    def callback(handle: int | None, *args: Any) -> Any:
        owner = _handles.get(handle or 0)
        if owner is None:
            return failed(INVALID_ARGUMENT)
        try:
            return fn(owner, *args)
        except _Failure as e:
            code, message = e.code, e.message
        except ResourceExhaustedError as e:
            code, message = RESOURCE_EXHAUSTED, str(e)
        except OpkernelError as e:
            code, message = INVALID_ARGUMENT, str(e)
        except MemoryError as e:
            code, message = RESOURCE_EXHAUSTED, f"out of memory: {e}"
        except Exception as e:  # a bug here must not crash the library's process
            code, message = INTERNAL, f"{type(e).__name__}: {e}"
        owner.fail(code, f"{name}: {message}")
        return failed(code)  # this call's code (the first recorded is the one raised)

    callback.__name__ = name
    return callback


# ---------------------------------------------------------------- registration


class _OpDecl:
    """An op a library declares: the calls, replayed by its ops hook, and a builder that
    checks each spec as it comes."""

    def __init__(self, lib: _Registration, name: str) -> None:
        self.lib = lib
        self.name = name
        self.builder = op_registry.OpDefBuilder(name)
        self.builder.registered_at = str(lib.path)
        self.calls: list[tuple[str, Any]] = []
        self.handle = 0

    def fail(self, code: int, message: str) -> None:
        self.lib.fail(code, message)

    def add(self, method: str, value: Any) -> int:
        if self.lib.closed:
            raise _Failure(INVALID_ARGUMENT, "the library's registration has ended")
        getattr(self.builder, method)(*([] if value is None else [value]))
        self.calls.append((method, value))
        return OK


class _Registration:
    """What one library's ``opkernel_library_register`` declares."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.ops: list[_OpDecl] = []
        self.kernels: list[tuple[str, str, dict[str, list[DType]] | None, Any]] = []
        self.errors: list[tuple[int, str]] = []
        self.closed = False

    def fail(self, code: int, message: str) -> None:
        self.errors.append((code, message))


def _new_op(lib: _Registration, name: bytes | None) -> int:
    if lib.closed:
        raise _Failure(INVALID_ARGUMENT, "the library's registration has ended")
    text = _text(name)
    if any(d.name == text for d in lib.ops):
        raise _Failure(6, f"op {text!r} is declared twice by this library")
    decl = _OpDecl(lib, text)  # a malformed name raises OpSpecError: recorded
    decl.handle = next(_numbers)
    _handles[decl.handle] = decl
    lib.ops.append(decl)
    return decl.handle


def _spec_call(method: str) -> Callable[[_OpDecl, bytes | None], int]:
    def call(decl: _OpDecl, spec: bytes | None) -> int:
        if spec is None:
            raise _Failure(INVALID_ARGUMENT, f"op {decl.name!r}: the spec is NULL")
        return decl.add(method, _text(spec))

    return call


def _op_shape_fn(decl: _OpDecl, name: bytes | None) -> int:
    text = _text(name)
    if text not in SHAPE_FNS:
        raise _Failure(
            INVALID_ARGUMENT, f"op {decl.name!r}: unknown shape function {text!r}; known: {', '.join(SHAPE_FNS)}"
        )
    from . import shape_fns

    decl.builder.set_shape_fn(getattr(shape_fns, text))
    decl.calls.append(("set_shape_fn", text))
    return OK


def _op_set_is_stateful(decl: _OpDecl) -> int:
    return decl.add("set_is_stateful", None)


#: The most dimensions an output may have (TensorFlow's limit).
MAX_NDIM = 254

_CONSTRAINT = re.compile(r"\s*([A-Za-z_]\w*)\s*:\s*\{([^{}]*)\}\s*(?:;|$)")


def parse_constraints(text: str) -> dict[str, list[DType]]:
    """``"T: {float, int32}; U: {int64}"`` as register_kernel's ``type_constraints``."""
    out: dict[str, list[DType]] = {}
    pos = 0
    while pos < len(text.rstrip()):
        m = _CONSTRAINT.match(text, pos)
        if m is None:
            raise _Failure(
                INVALID_ARGUMENT,
                f"malformed type constraints {text!r} at {text[pos:]!r}: expected 'T: {{float, int32}}; U: {{...}}'",
            )
        names = [t.strip() for t in m.group(2).split(",") if t.strip()]
        if not names:
            raise _Failure(INVALID_ARGUMENT, f"type constraint {m.group(1)!r} lists no types in {text!r}")
        try:
            out[m.group(1)] = [as_dtype(t) for t in names]
        except (TypeError, ValueError) as e:
            raise _Failure(INVALID_ARGUMENT, f"type constraint {m.group(1)!r}: {e}") from None
        for dt in out[m.group(1)]:
            if dl_dtype(dt) is None:
                raise _Failure(INVALID_ARGUMENT, f"type constraint {m.group(1)!r}: {dt.name} has no DLPack dtype")
        pos = m.end()
    return out


def _register_kernel(
    lib: _Registration, op: bytes | None, backend: bytes | None, constraints: bytes | None, compute: int | None
) -> int:
    if lib.closed:
        raise _Failure(INVALID_ARGUMENT, "the library's registration has ended")
    op_name, backend_name = _text(op), _text(backend)
    if not op_name or not backend_name:
        raise _Failure(INVALID_ARGUMENT, "the op and the backend must be named")
    if not compute:
        raise _Failure(INVALID_ARGUMENT, f"kernel of op {op_name!r} on {backend_name!r}: the compute function is NULL")
    known = plugins.backend_classes().get(backend_name)
    if known is not None and not known[0].host_memory_is_native and backend_name != "cuda":
        raise _Failure(
            INVALID_ARGUMENT,
            f"kernel of op {op_name!r}: backend {backend_name!r} keeps tensors in memory without a DLPack "
            "pointer; C kernels run on host backends (cpu) and cuda",
        )
    parsed = parse_constraints(_text(constraints)) if constraints else None
    lib.kernels.append((op_name, backend_name, parsed, _COMPUTE(compute)))
    return OK


# ---------------------------------------------------------------- a kernel's call


class _Call:
    """One run of a C kernel: the handle its context stands for."""

    __slots__ = ("ctx", "inputs", "tensors", "outputs", "errors", "keep", "library")

    def __init__(self, ctx: OpKernelContext, library: str) -> None:
        self.ctx = ctx
        self.library = library
        flat: list[Any] = []
        for item in ctx.inputs:
            if isinstance(item, (list, tuple)):
                flat.extend(item)
            else:
                flat.append(item)
        self.inputs = flat
        self.tensors: dict[int, int] = {}  # input -> its DLTensor's address
        self.outputs: list[int | None] = [None] * len(ctx.outputs)
        self.errors: list[tuple[int, str]] = []
        self.keep: list[Any] = []

    def fail(self, code: int, message: str) -> None:
        self.errors.append((code, message))

    def dltensor(self, value: Any, dtype: DType) -> int:
        """The address of a DLTensor viewing ``value`` (made contiguous first, if it is not),
        alive until the call ends."""
        code_bits = _DL_DTYPES.get(dtype)
        if code_bits is None:
            code_bits = _DL_DTYPES[dtype] = dl_dtype(dtype)
            if code_bits is None:
                raise _Failure(INVALID_ARGUMENT, f"a {dtype.name} tensor has no DLPack dtype")
        if isinstance(value, np.generic):
            value = np.asarray(value)
        if isinstance(value, np.ndarray):
            if not value.flags.c_contiguous:
                value = np.ascontiguousarray(value)
            data, device_type, device_id = _host_address(value), K_DL_CPU, 0
        elif hasattr(value, "__cuda_array_interface__"):
            if not value.flags.c_contiguous:
                value = value.copy()
            data, device_type, device_id = value.data.ptr, K_DL_CUDA, int(value.device.id)
        else:
            raise _Failure(
                INVALID_ARGUMENT,
                f"backend {self.ctx.backend.name!r} holds {type(value).__name__} arrays, which have no "
                "DLPack pointer (C kernels run on host backends and cuda)",
            )
        shape = value.shape
        ndim = len(shape)
        strides = [1] * ndim
        for k in range(ndim - 2, -1, -1):
            strides[k] = strides[k + 1] * shape[k + 1]
        layout = _LAYOUTS.get(ndim) or _layout(ndim)
        buf = ctypes.create_string_buffer(layout.size)
        at = ctypes.addressof(buf)
        layout.pack_into(
            buf, 0, data, device_type, device_id, ndim, code_bits[0], code_bits[1], 1,
            at + _DL_SIZE if ndim else 0, at + _DL_SIZE + 8 * ndim if ndim else 0, 0, *shape, *strides,
        )
        self.keep.append((value, buf))
        return at


def _host_address(array: np.ndarray) -> int:
    """The address of a C-contiguous array's data (a writable array's through the buffer
    protocol, three times cheaper than ``array.ctypes.data``)."""
    if array.flags.writeable and array.size:
        try:
            return ctypes.addressof(ctypes.c_char.from_buffer(array.data))
        except ValueError:  # a dtype the buffer protocol cannot carry (ml_dtypes' bfloat16)
            pass
    return int(array.ctypes.data)


# A DLTensor and, after it, its shape and strides: one buffer, filled by one pack_into.
_DL_STRUCT = "@PiiiBBHPPQ"
_DL_SIZE = struct.calcsize(_DL_STRUCT)
assert _DL_SIZE == ctypes.sizeof(DLTensor), "DLTensor's layout"
_LAYOUTS: dict[int, struct.Struct] = {}
_DL_DTYPES: dict[DType, tuple[int, int] | None] = {}


def _layout(ndim: int) -> struct.Struct:
    layout = _LAYOUTS[ndim] = struct.Struct(f"{_DL_STRUCT}{2 * ndim}q")
    return layout


def _num_inputs(call: _Call) -> int:
    return len(call.inputs)


def _num_outputs(call: _Call) -> int:
    return len(call.outputs)


def _input(call: _Call, i: int) -> int:
    if not 0 <= i < len(call.inputs):
        raise _Failure(INVALID_ARGUMENT, f"input {i} out of range: the op has {len(call.inputs)} inputs")
    at = call.tensors.get(i)
    if at is None:
        at = call.tensors[i] = call.dltensor(call.inputs[i], as_dtype(call.inputs[i].dtype))
    return at


def _allocate_output(call: _Call, i: int, ndim: int, shape: Any) -> int:
    n = len(call.outputs)
    if not 0 <= i < n:
        raise _Failure(INVALID_ARGUMENT, f"output {i} out of range: the op has {n} outputs")
    if call.outputs[i] is not None:
        raise _Failure(INVALID_ARGUMENT, f"output {i} was already allocated")
    if not 0 <= ndim <= MAX_NDIM or (ndim and not shape):
        raise _Failure(
            INVALID_ARGUMENT, f"output {i}: ndim {ndim} (0 to {MAX_NDIM}) with {'no' if not shape else 'a'} shape"
        )
    dims = [int(shape[k]) for k in range(ndim)]
    if any(d < 0 for d in dims):
        raise _Failure(INVALID_ARGUMENT, f"output {i}: negative dimension in shape {dims}")
    size = 1
    for d in dims:
        size *= d
    if size * call.ctx.output_dtypes[i].size >= 1 << 63:
        raise _Failure(INVALID_ARGUMENT, f"output {i}: shape {dims} has more bytes than a 64-bit size can count")
    value = call.ctx.allocate_output(i, dims)
    at = call.outputs[i] = call.dltensor(value, call.ctx.output_dtypes[i])
    return at


def _attr(call: _Call, name: bytes | None) -> tuple[str, Any]:
    key = _text(name)
    if key not in call.ctx.attrs:
        raise _Failure(INVALID_ARGUMENT, f"the op has no attr {key!r} (attrs: {sorted(call.ctx.attrs)})")
    return key, call.ctx.attrs[key]


def _wrong_kind(key: str, value: Any, wanted: str) -> _Failure:
    return _Failure(INVALID_ARGUMENT, f"attr {key!r} is {type(value).__name__} {value!r}, not {wanted}")


def _attr_int(call: _Call, name: bytes | None, out: Any) -> int:
    key, value = _attr(call, name)
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise _wrong_kind(key, value, "an int")
    out[0] = int(value)
    return OK


def _attr_float(call: _Call, name: bytes | None, out: Any) -> int:
    key, value = _attr(call, name)
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise _wrong_kind(key, value, "a float")
    out[0] = float(value)
    return OK


def _attr_bool(call: _Call, name: bytes | None, out: Any) -> int:
    key, value = _attr(call, name)
    if not isinstance(value, (bool, np.bool_)):
        raise _wrong_kind(key, value, "a bool")
    out[0] = int(bool(value))
    return OK


def _attr_type(call: _Call, name: bytes | None, out: Any) -> int:
    key, value = _attr(call, name)
    if not isinstance(value, DType):
        raise _wrong_kind(key, value, "a type")
    code_bits = dl_dtype(value)
    if code_bits is None:
        raise _Failure(INVALID_ARGUMENT, f"attr {key!r}: {value.name} has no DLPack dtype")
    out[0] = DLDataType(code_bits[0], code_bits[1], 1)
    return OK


def _attr_int_list(call: _Call, name: bytes | None, values: Any, capacity: int, count: Any) -> int:
    key, value = _attr(call, name)
    items = list(value) if isinstance(value, (list, tuple)) else None
    if items is None or any(isinstance(v, bool) or not isinstance(v, (int, np.integer)) for v in items):
        raise _wrong_kind(key, value, "a list of ints")
    if capacity < 0 or (capacity and not values):
        raise _Failure(INVALID_ARGUMENT, f"attr {key!r}: capacity {capacity} with a NULL buffer")
    for k, v in enumerate(items[:capacity]):
        values[k] = int(v)
    if count:
        count[0] = len(items)
    return OK


def _attr_string(call: _Call, name: bytes | None, buffer: int | None, size: int, length: Any) -> int:
    key, value = _attr(call, name)
    if not isinstance(value, (str, bytes)):
        raise _wrong_kind(key, value, "a string")
    raw = value.encode() if isinstance(value, str) else value
    if size:
        if not buffer:
            raise _Failure(INVALID_ARGUMENT, f"attr {key!r}: size {size} with a NULL buffer")
        n = min(len(raw), size - 1)
        ctypes.memmove(buffer, raw, n)
        ctypes.memset(buffer + n, 0, 1)
    if length:
        length[0] = len(raw)
    return OK


def _stream(call: _Call) -> int | None:
    return call.ctx.backend.stream_pointer()


def _set_error(owner: Any, code: int, message: bytes | None) -> int:
    owner.fail(code if code else INTERNAL, _text(message) or f"status {code_name(code)}")
    return int(code)


_IMPLS: dict[str, Callable[..., Any]] = {
    "new_op": _new_op,
    "op_input": _spec_call("input"),
    "op_output": _spec_call("output"),
    "op_attr": _spec_call("attr"),
    "op_shape_fn": _op_shape_fn,
    "op_doc": _spec_call("doc"),
    "op_set_is_stateful": _op_set_is_stateful,
    "register_kernel": _register_kernel,
    "num_inputs": _num_inputs,
    "num_outputs": _num_outputs,
    "input": _input,
    "allocate_output": _allocate_output,
    "attr_int": _attr_int,
    "attr_float": _attr_float,
    "attr_bool": _attr_bool,
    "attr_type": _attr_type,
    "attr_int_list": _attr_int_list,
    "attr_string": _attr_string,
    "stream": _stream,
    "set_error": _set_error,
}


def _failed_value(name: str, restype: Any) -> Callable[[int], Any]:
    """What a failed callback returns: NULL for a pointer, -1 for a count, else the code."""
    if restype is _p:
        return lambda code: None
    if name in ("num_inputs", "num_outputs"):
        return lambda code: -1
    return lambda code: code


def _build_api() -> OKApi:
    fields: dict[str, Any] = {}
    for name, restype, _ in _SIGNATURES:
        fields[name] = _TYPES[name](_guarded(name, _IMPLS[name], _failed_value(name, restype)))
    return OKApi(C_ABI_VERSION, ctypes.sizeof(OKApi), **fields)


_API = _build_api()  # the callbacks live as long as the process: libraries keep the table
_API_POINTER = ctypes.addressof(_API)


def _run(compute: Any, ctx: OpKernelContext, library: str) -> None:
    call = _Call(ctx, library)
    number = next(_numbers)
    _handles[number] = call
    try:
        code = compute(_API_POINTER, number)
    finally:
        del _handles[number]
    op = ctx.op_name
    if code != OK or call.errors:
        err_code, message = call.errors[0] if call.errors else (code, f"returned {code_name(code)} without a message")
        raise _error_class(err_code)(
            f"op {op!r}: the C kernel from {library} failed ({code_name(err_code)}): {message}", op=op, code=err_code
        )
    missing = [i for i, t in enumerate(call.outputs) if t is None]
    if missing:
        raise InternalError(
            f"op {op!r}: the C kernel from {library} returned OK without allocating output(s) {missing}", op=op
        )


def _kernel_class(op: str, compute: Any, library: str) -> type[OpKernel]:
    class CKernel(OpKernel):
        def __init__(self, ctx: OpKernelConstruction) -> None:
            pass

        def compute(self, ctx: OpKernelContext) -> None:
            _run(compute, ctx, library)

    CKernel.__name__ = CKernel.__qualname__ = f"CKernel[{op}]"
    CKernel.__module__ = __name__
    return CKernel


# ---------------------------------------------------------------- loading

_MAGICS = (b"\x7fELF", b"\xfe\xed\xfa\xce", b"\xfe\xed\xfa\xcf", b"\xce\xfa\xed\xfe", b"\xcf\xfa\xed\xfe", b"MZ")


def is_shared_object(path: Path) -> bool:
    """Whether ``path`` is a shared object (by its first bytes: ELF, Mach-O or PE)."""
    if path.suffix in (".so", ".dylib", ".dll"):
        return True
    try:
        with path.open("rb") as f:
            head = f.read(4)
    except OSError:
        return False
    return any(head.startswith(m) for m in _MAGICS)


def load(path: Path, module_name: str) -> types.ModuleType:
    """Load the library at ``path`` and return the plugin module that registers what it
    declared (not yet registered).  PluginError, with nothing registered, when it cannot
    be loaded, speaks another ABI version, or fails its registration."""
    where = str(path)
    try:
        dll = ctypes.CDLL(where, mode=getattr(ctypes, "RTLD_LOCAL", 0))
    except OSError as e:
        raise PluginError(f"load_op_library: cannot load shared object {where!r}: {e}", plugin=where) from None
    try:
        version_fn = dll.opkernel_c_abi_version
        register_fn = dll.opkernel_library_register
    except AttributeError:
        raise PluginError(
            f"load_op_library: {where!r} is not an opkernel op library: it exports no opkernel_c_abi_version "
            "and opkernel_library_register (define them with OPKERNEL_LIBRARY from <opkernel/c_api.h>)",
            plugin=where,
        ) from None
    version_fn.restype, version_fn.argtypes = ctypes.c_uint32, []
    version = int(version_fn())
    if version != C_ABI_VERSION:
        raise PluginError(
            f"load_op_library: {where!r} was built for opkernel C ABI version {version}; this opkernel speaks "
            f"version {C_ABI_VERSION}: rebuild it against this opkernel's header (opkernel.sysconfig.get_include())",
            plugin=where,
        )
    register_fn.restype, register_fn.argtypes = ctypes.c_int, [ctypes.c_void_p, ctypes.c_void_p]
    lib = _Registration(path)
    number = next(_numbers)
    _handles[number] = lib
    try:
        code = register_fn(_API_POINTER, number)
    finally:
        lib.closed = True
        del _handles[number]
        for decl in lib.ops:
            _handles.pop(decl.handle, None)
    for decl in lib.ops:
        if not lib.errors:
            try:
                decl.builder.build()
            except OpSpecError as e:
                lib.fail(INVALID_ARGUMENT, str(e))
    if code != OK or lib.errors:
        messages = [m for _, m in lib.errors] or [f"opkernel_library_register returned {code_name(code)}"]
        raise PluginError(
            f"load_op_library: {where!r} failed to register, so nothing of it is: " + "; ".join(messages),
            plugin=where,
        )
    return _plugin_module(lib, dll, module_name)


def _plugin_module(lib: _Registration, dll: ctypes.CDLL, module_name: str) -> types.ModuleType:
    module = types.ModuleType(module_name, f"opkernel op library {str(lib.path)!r} (C ABI {C_ABI_VERSION})")
    module.__file__ = str(lib.path)
    where = str(lib.path)

    @hookimpl
    def opkernel_register_ops() -> None:
        from . import shape_fns

        for decl in lib.ops:
            reg = op_registry.register_op(decl.name)
            reg.registered_at = where
            for method, value in decl.calls:
                if method == "set_shape_fn":
                    reg.set_shape_fn(getattr(shape_fns, value))
                elif value is None:
                    getattr(reg, method)()
                else:
                    getattr(reg, method)(value)

    @hookimpl
    def opkernel_register_kernels() -> None:
        for op, backend, constraints, compute in lib.kernels:
            register_kernel(op, backend=backend, type_constraints=constraints)(_kernel_class(op, compute, where))

    module.opkernel_register_ops = opkernel_register_ops  # type: ignore[attr-defined]
    module.opkernel_register_kernels = opkernel_register_kernels  # type: ignore[attr-defined]
    module._dll = dll  # type: ignore[attr-defined]  # never unloaded
    return module
