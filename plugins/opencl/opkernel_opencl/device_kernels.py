"""Device kernels of op packages on the OpenCL backend: build a program from source,
launch its kernels, and the elementwise helper for ``y = f(x, ...)``.

An op package declares its programs once, at import (``DeviceProgram``,
``ElementwiseKernel``); a kernel builds one on the backend it runs on and launches
it.  Programs go through the backend's program cache: built once per (source,
options) on the device, kept on disk in the verified cache (``programs.BinaryStore``)
and built by ``ok.warmup("opencl")`` for every parameter set listed in ``warmup``.

Nothing here imports pyopencl: the backend a kernel receives carries it.  Every
check of sizes and arguments happens before anything is queued, and raises an
``opkernel.errors`` error naming the kernel, its program and the op.
"""

from __future__ import annotations

import re
import threading
import weakref
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping, Sequence, Union

import numpy as np

import opkernel as ok
from opkernel.device_programs import ProgramRegistry
from opkernel.errors import InvalidArgumentError, OpSpecError, OpTypeError

if TYPE_CHECKING:
    from .backend import OpenCLBackend

__all__ = ["DeviceProgram", "ElementwiseKernel", "Kernel", "Program", "backend_of", "ctype", "registered", "warm"]

#: What a kernel may be given to find its backend: the backend, or the kernel's context.
BackendLike = Union[ok.Backend, ok.OpKernelConstruction, str]

#: OpenCL C scalar type -> the numpy dtype whose bytes it takes.
C_TYPES: dict[str, np.dtype[Any]] = {
    name: np.dtype(dt) for name, dt in {
        "char": np.int8, "uchar": np.uint8, "short": np.int16, "ushort": np.uint16, "int": np.int32,
        "uint": np.uint32, "long": np.int64, "ulong": np.uint64, "half": np.float16, "float": np.float32,
        "double": np.float64, "unsigned char": np.uint8, "unsigned short": np.uint16, "unsigned int": np.uint32,
        "unsigned long": np.uint64,
    }.items()
}
#: numpy dtype name -> OpenCL C storage type (bool is a byte, as in numpy).
STORAGE = {
    "bool": "uchar", "int8": "char", "uint8": "uchar", "int16": "short", "uint16": "ushort", "int32": "int",
    "uint32": "uint", "int64": "long", "uint64": "ulong", "float16": "half", "float32": "float", "float64": "double",
}


def ctype(dtype: str | ok.DType) -> str:
    """The OpenCL C type that holds one element of ``dtype`` (``"float32"`` -> ``float``,
    ``"float16"`` -> ``half``, ``"bool"`` -> ``uchar``): for rendering a source per dtype."""
    name = dtype if isinstance(dtype, str) else dtype.name
    if name not in STORAGE:
        raise OpTypeError(f"no OpenCL C type holds {name!r} here; types: {sorted(STORAGE)}")
    return STORAGE[name]


_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_GLOBAL, _CONSTANT, _LOCAL = 4507, 4509, 4508  # CL_KERNEL_ARG_ADDRESS_{GLOBAL,CONSTANT,LOCAL}


#: The OpenCL backend's class, registered by ``backend`` when it defines it (this module
#: sits below the backend and never imports it): until then no OpenCL backend exists.
_backend_class: type[OpenCLBackend] | None = None


def register_backend_class(cls: type[OpenCLBackend]) -> None:
    """Called once by ``opkernel_opencl.backend`` with ``OpenCLBackend`` (``backend_of`` checks against it)."""
    global _backend_class
    _backend_class = cls


def backend_of(where: BackendLike, what: str = "a device kernel") -> OpenCLBackend:
    """The OpenCL backend of a kernel's context (or a backend, or ``"opencl"``), typed: raises an
    ``InvalidArgumentError`` naming ``what`` when it is another backend's."""
    if isinstance(where, str):
        from opkernel.engine import backend_instance

        where = backend_instance(where)
    be = where.backend if isinstance(where, ok.OpKernelConstruction) else where
    if _backend_class is None or not isinstance(be, _backend_class):
        raise InvalidArgumentError(
            f"{what}: needs backend 'opencl', got {getattr(be, 'name', type(be).__name__)!r}; "
            "register the kernel with backend='opencl'"
        )
    return be


def _options(owner: str, options: Sequence[str]) -> tuple[str, ...]:
    if isinstance(options, str) or not all(isinstance(o, str) and o.strip() and "\n" not in o for o in options):
        raise OpSpecError(
            f"{owner}: options must be a sequence of build options, one string each (e.g. ('-DN=4', "
            f"'-cl-fast-relaxed-math')), got {options!r}"
        )
    return tuple(o.strip() for o in options)


def _sizes(where: str, what: str, value: int | Sequence[int] | None, rank: int | None, low: int) -> tuple[int, ...] | None:
    if value is None:
        return None
    sizes = (value,) if isinstance(value, (int, np.integer)) else tuple(value)
    if not 1 <= len(sizes) <= 3 or (rank is not None and len(sizes) != rank) or not all(
        isinstance(s, (int, np.integer)) and not isinstance(s, bool) and s >= low for s in sizes
    ):
        need = f"{rank} dimension(s)" if rank is not None else "1 to 3 dimensions"
        raise InvalidArgumentError(f"{where}: {what} must be {need} of integers >= {low}, got {value!r}")
    return tuple(int(s) for s in sizes)


class _Arg:
    """What one kernel parameter takes (from the program's kernel-argument info)."""

    __slots__ = ("index", "name", "type", "space", "dtype", "const")

    def __init__(self, index: int, name: str, type_name: str, space: int, const: bool) -> None:
        self.index, self.name, self.type, self.space, self.const = index, name, type_name, space, const
        base = type_name.rstrip("*").strip()
        self.dtype = C_TYPES.get(base) if space in (_GLOBAL, _CONSTANT) or not type_name.endswith("*") else None

    @property
    def pointer(self) -> bool:
        return self.type.endswith("*")

    def describe(self) -> str:
        space = {_GLOBAL: "__global ", _CONSTANT: "__constant ", _LOCAL: "__local "}.get(self.space, "")
        return f"argument {self.index} ({space}{self.type} {self.name})"


def _dense(a: Any) -> bool:
    """Whether device array ``a`` is C-contiguous (pyopencl's flags cost more to build)."""
    step = a.dtype.itemsize
    for d, st in zip(reversed(a.shape), reversed(a.strides)):
        if d != 1 and st != step:
            return False
        step *= d
    return True


class Kernel:
    """One kernel of a built ``Program``.  ``launch`` checks sizes and arguments, then
    queues it on the backend's in-order queue (it never waits)."""

    def __init__(self, program: Program, name: str, handle: Any) -> None:
        self.program = program
        self.name = name
        self.handle = handle  # the pyopencl.Kernel
        be = program.backend
        cl = be.cl
        self.num_args = int(handle.num_args)
        self.max_work_group = min(be.max_work_group, int(handle.get_work_group_info(cl.kernel_work_group_info.WORK_GROUP_SIZE, be.device)))
        self._align = max(1, int(be.device.mem_base_addr_align) // 8)
        self.args: tuple[_Arg, ...] | None
        stored = getattr(program.handle, "opkernel_arg_info", None)  # a program loaded from a binary
        try:
            if stored is not None and name in stored:
                self.args = tuple(
                    _Arg(i, n, t, space, bool(qual & cl.kernel_arg_type_qualifier.CONST))
                    for i, (n, t, space, qual) in enumerate(stored[name])
                )
                if len(self.args) != self.num_args:
                    raise cl.Error("stored argument info does not match the kernel")
            else:
                info = cl.kernel_arg_info
                self.args = tuple(
                    _Arg(i, handle.get_arg_info(i, info.NAME), handle.get_arg_info(i, info.TYPE_NAME),
                         int(handle.get_arg_info(i, info.ADDRESS_QUALIFIER)),
                         bool(int(handle.get_arg_info(i, info.TYPE_QUALIFIER)) & cl.kernel_arg_type_qualifier.CONST))
                    for i in range(self.num_args)
                )
        except cl.Error:  # a driver without argument info (a program loaded from a binary): counts only
            self.args = None
        # The argument types of the common call (a numpy scalar of each by-value parameter's
        # type, a device array for each global pointer), and per array parameter the dtypes
        # it takes and whether it is const; None where a parameter's type is not known.
        self._types: tuple[type, ...] | None = None
        self._arrays: tuple[tuple[int, tuple[np.dtype[Any], ...], bool], ...] = ()
        known = [(a, a.dtype) for a in self.args or () if a.dtype is not None and a.space != _LOCAL]
        if self.args is not None and len(known) == self.num_args:
            self._types = tuple(be.Array if a.pointer else dt.type for a, dt in known)
            self._arrays = tuple(
                (a.index, (dt, np.dtype(np.bool_)) if dt.itemsize == 1 else (dt,), a.const) for a, dt in known if a.pointer
            )

    def where(self) -> str:
        p = self.program
        return f"kernel {self.name!r} of OpenCL program {p.what!r}" + (f" (op {p.op!r})" if p.op else "")

    def __repr__(self) -> str:
        return f"<{self.where()}>"

    # ------------------------------------------------------------ arguments

    def _buffer(self, arg: _Arg | None, i: int, a: Any) -> Any:
        be = self.program.backend
        if a.dtype.kind in "OUS":
            raise InvalidArgumentError(f"{self.where()}: argument {i} is a string tensor, which stays in host memory")
        if arg is not None and arg.dtype is not None and arg.dtype != a.dtype and not (a.dtype == np.bool_ and arg.dtype.itemsize == 1):
            raise OpTypeError(f"{self.where()}: {arg.describe()} points to {arg.dtype.name}, got an array of {a.dtype.name}")
        if not _dense(a):
            raise InvalidArgumentError(f"{self.where()}: argument {i} is not C-contiguous (strides {a.strides}); pass x.copy()")
        if a.offset == 0:
            return a.base_data
        if a.offset % self._align:
            raise InvalidArgumentError(
                f"{self.where()}: argument {i} starts {a.offset} bytes into its buffer, which the device cannot "
                f"pass as a sub-buffer (offsets must be multiples of {self._align} bytes on {be.device_name!r}); pass "
                f"x.base_data and the element offset {a.offset // a.dtype.itemsize} as an integer argument, or x.copy()"
            )
        base = a.base_data
        if not isinstance(base, be.cl.Buffer):  # a memory pool's block: the same cl_mem, as a Buffer
            base = be.cl.Buffer.from_int_ptr(base.int_ptr, retain=True)
        return base.get_sub_region(a.offset, max(a.nbytes, 1))

    def _scalar(self, arg: _Arg | None, i: int, a: Any) -> Any:
        if isinstance(a, (bool, int, float, complex)) and not isinstance(a, np.generic):
            what = arg.describe() if arg is not None else f"argument {i}"
            want = f"np.{arg.dtype.name}({a!r})" if arg is not None and arg.dtype is not None else "a numpy scalar of its C type"
            raise OpTypeError(
                f"{self.where()}: {what} is a Python {type(a).__name__}; pass {want}: a kernel argument is "
                "the bytes of its declared C type, which a Python number does not fix"
            )
        if arg is not None and arg.dtype is not None and (not isinstance(a, np.generic) or a.dtype != arg.dtype):
            got = a.dtype.name if isinstance(a, np.generic) else type(a).__name__
            raise OpTypeError(f"{self.where()}: {arg.describe()} takes np.{arg.dtype.name}, got {got}")
        if not isinstance(a, (np.generic, np.ndarray)) and type(a).__name__ != "LocalMemory":
            raise OpTypeError(
                f"{self.where()}: argument {i} is a {type(a).__name__}; expected a device array, a buffer, "
                "a numpy scalar (or a numpy array for a struct passed by value), or pyopencl.LocalMemory"
            )
        return a

    def convert(self, args: tuple[Any, ...]) -> tuple[Any, ...]:
        """The arguments as the driver takes them, after checking each against the
        kernel's parameters: arrays become their buffers (a sub-buffer at an offset)."""
        if len(args) != self.num_args:
            names = "" if self.args is None else " (" + ", ".join(a.name for a in self.args) + ")"
            raise InvalidArgumentError(f"{self.where()}: takes {self.num_args} arguments{names}, got {len(args)}")
        be = self.program.backend
        if self._types is not None and tuple(map(type, args)) == self._types:
            # The common case: numpy scalars of the parameters' types and device arrays,
            # whose dtypes, offsets and layouts are all that is left to check.
            fast = list(args)
            for i, dtypes, const in self._arrays:
                a = args[i]
                if a.offset or a.dtype not in dtypes or not _dense(a):
                    break  # the checks below say what is wrong, or make the sub-buffer
                fast[i] = a.base_data
                if not const:
                    be.dirty(a)
            else:
                return tuple(fast)
        out = []
        for i, a in enumerate(args):
            arg = None if self.args is None else self.args[i]
            if isinstance(a, be.Array):
                if arg is not None and (not arg.pointer or arg.space == _LOCAL):
                    raise OpTypeError(f"{self.where()}: {arg.describe()} is not a global buffer, got a device array")
                out.append(self._buffer(arg, i, a))
                if arg is None or not arg.const:
                    be.dirty(a)  # the kernel may write it: a host copy kept of it is stale
            elif isinstance(a, be.cl.MemoryObjectHolder):
                out.append(a)
            elif isinstance(a, np.ndarray) and a.ndim and (arg is None or arg.pointer):
                raise OpTypeError(f"{self.where()}: argument {i} is a host numpy array; upload it first (be.from_numpy) or pass a device array")
            else:
                if arg is not None and arg.pointer and arg.space != _LOCAL:
                    raise OpTypeError(f"{self.where()}: {arg.describe()} takes a device array or buffer, got {type(a).__name__}")
                out.append(self._scalar(arg, i, a))
        return tuple(out)

    # ------------------------------------------------------------ launches

    def launch(self, global_size: int | Sequence[int], *args: Any, local_size: int | Sequence[int] | None = None,
               global_offset: int | Sequence[int] | None = None) -> None:
        """Queue one launch over ``global_size`` work-items (1 to 3 dimensions) in
        work-groups of ``local_size`` (None: the driver picks).  Each global size must be
        a multiple of the local size (OpenCL 1.2's rule, which every device keeps), the
        work-group at most ``max_work_group`` items; ``global_offset`` shifts
        ``get_global_id``.  A zero global size launches nothing."""
        g = _sizes(self.where(), "the global size", global_size, None, 0)
        assert g is not None
        lo = _sizes(self.where(), "the local size", local_size, len(g), 1)
        off = _sizes(self.where(), "the global offset", global_offset, len(g), 0)
        if lo is not None:
            items = int(np.prod(lo))
            if items > self.max_work_group:
                raise InvalidArgumentError(
                    f"{self.where()}: a work-group of {list(lo)} is {items} work-items; at most {self.max_work_group} here"
                )
            bad = [d for d in range(len(g)) if g[d] % lo[d]]
            if bad:
                raise InvalidArgumentError(
                    f"{self.where()}: the global size {list(g)} must be a multiple of the local size {list(lo)} "
                    f"in every dimension (not in dimension {bad[0]}); round it up and return early in the kernel "
                    "for ids past the end, or use launch1d"
                )
        converted = self.convert(args)
        if 0 in g:
            return
        self.program.backend.launch(self.handle, g, lo, *converted, offset=off)

    def launch1d(self, n: int, *args: Any) -> None:
        """Exactly ``n`` work-items with ids 0..n-1 (work-groups of 64, then one launch
        for the remainder): the kernel needs no bounds check.  (On CUDA, whose launches
        have no offset, ``launch1d`` rounds up instead: a source meant for both returns
        early for ids >= n.)"""
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0:
            raise InvalidArgumentError(f"{self.where()}: launch1d needs a work-item count >= 0, got {n!r}")
        converted = self.convert(args)
        if n:
            self.program.backend.launch1d(self.handle, int(n), *converted, group=64)  # the documented groups of 64


class Program:
    """An OpenCL program built on one backend; ``kernel(name)`` gives its kernels."""

    def __init__(self, backend: OpenCLBackend, handle: Any, what: str, op: str | None) -> None:
        self.backend = backend
        self.handle = handle  # the pyopencl.Program
        self.what = what
        self.op = op
        self.kernel_names = tuple(sorted(n for n in handle.kernel_names.split(";") if n))
        self._kernels: dict[str, Kernel] = {}
        self._lock = threading.Lock()

    def kernel(self, name: str) -> Kernel:
        k = self._kernels.get(name)
        if k is None:
            if name not in self.kernel_names:
                raise InvalidArgumentError(
                    f"OpenCL program {self.what!r}" + (f" (op {self.op!r})" if self.op else "")
                    + f" has no kernel {name!r}; its kernels: {', '.join(self.kernel_names) or 'none'}"
                )
            with self._lock:
                k = self._kernels.get(name)
                if k is None:
                    k = self._kernels[name] = Kernel(self, name, self.backend.cl.Kernel(self.handle, name))
        return k

    def __repr__(self) -> str:
        return f"<OpenCL program {self.what!r}: {', '.join(self.kernel_names)}>"


def build(backend: OpenCLBackend, source: str, options: Sequence[str], what: str, op: str | None) -> Program:
    """Build ``source`` through the backend's program cache (memory, then the verified disk cache)."""
    opts = _options(f"OpenCL program {what!r}", options)
    if not isinstance(source, str) or not source.strip():
        raise OpSpecError(f"OpenCL program {what!r}: the source must be a non-empty string of OpenCL C")
    key = (source, opts, what, op)
    found = _programs.get(backend, {}).get(key)
    if found is None:
        # Argument info lets launches check each argument's type; it costs nothing at run time.
        handle = backend.programs.build_source(source, " ".join((*opts, "-cl-kernel-arg-info")), what, op or what)
        with _lock:
            found = _programs.setdefault(backend, {}).setdefault(key, Program(backend, handle, what, op))
    return found


#: Programs (with their kernels) per backend and (source, options, name, op): the same
#: built program under each op that uses it, so that errors name the op that launched.
_programs: weakref.WeakKeyDictionary[Any, dict[tuple[Any, ...], Program]] = weakref.WeakKeyDictionary()
_lock = threading.Lock()


class DeviceProgram:
    """An OpenCL C program of an op package, declared once at import.

    ``render(**params)`` returns its source for one parameter set (a dtype, a window
    size, ...); ``build(ctx, **params)`` builds it on the backend a kernel runs on
    (once per backend and parameter set, then from memory; across processes from
    the verified disk cache).  ``ok.warmup("opencl")`` builds it for each mapping in
    ``warmup`` whose ``dtype`` (if it has one) the device supports.  ``options``:
    compiler options such as ``-DN=4``; ``OK_FP64`` / ``OK_FP16`` are defined when the
    device has ``cl_khr_fp64`` / ``cl_khr_fp16``."""

    def __init__(self, name: str, render: Callable[..., str], *, options: Sequence[str] = (),
                 warmup: Iterable[Mapping[str, Any]] = (), register: bool = True, origin: Any = None) -> None:
        if not isinstance(name, str) or not name:
            raise OpSpecError(f"DeviceProgram: the name must be a non-empty string, got {name!r}")
        if not callable(render):
            raise OpSpecError(f"OpenCL program {name!r}: render must be a function returning OpenCL C, got {render!r}")
        self.name = name
        self.render = render
        self.options = _options(f"OpenCL program {name!r}", options)
        self.warmup = tuple(dict(p) for p in warmup)
        self._built: weakref.WeakKeyDictionary[Any, dict[tuple[Any, ...], Program]] = weakref.WeakKeyDictionary()
        self._lock = threading.Lock()
        #: What makes a second declaration under this name the same program (a module
        #: imported again), not another package's: where ``render`` was written.
        self.origin = origin if origin is not None else (getattr(render, "__module__", None), getattr(render, "__qualname__", None))
        if register:
            _register(self)

    def what(self, params: Mapping[str, Any]) -> str:
        return self.name + ("[" + ", ".join(f"{k}={v}" for k, v in sorted(params.items())) + "]" if params else "")

    def source(self, **params: Any) -> str:
        try:
            src = self.render(**params)
        except TypeError as e:
            raise InvalidArgumentError(f"OpenCL program {self.name!r}: render({params}) failed: {e}") from e
        return src

    def build(self, where: BackendLike, *, op: str | None = None, **params: Any) -> Program:
        be = backend_of(where, f"OpenCL program {self.name!r}")
        key = (op, *sorted(params.items()))
        found = self._built.get(be, {}).get(key)
        if found is None:
            what = self.what(params)
            opts = list(self.options)
            if be.fp64:
                opts.append("-DOK_FP64")
            if be.fp16:
                opts.append("-DOK_FP16")
            found = build(be, self.source(**params), opts, what, op)
            with self._lock:
                found = self._built.setdefault(be, {}).setdefault(key, found)
        return found

    def kernel(self, where: BackendLike, name: str, *, op: str | None = None, **params: Any) -> Kernel:
        """``build(where, op=op, **params).kernel(name)``."""
        return self.build(where, op=op, **params).kernel(name)

    def __repr__(self) -> str:
        return f"<DeviceProgram {self.name!r} (opencl)>"


_registry: ProgramRegistry[DeviceProgram] = ProgramRegistry("OpenCL program")


def _register(prog: DeviceProgram) -> None:
    _registry.declare(prog)


def registered() -> dict[str, DeviceProgram]:
    """Every declared program ``ok.warmup("opencl")`` builds, by name."""
    return _registry.registered()


def warm(backend: OpenCLBackend) -> None:
    """Build every registered program for each of its warmup parameter sets (``ok.warmup``)."""
    for prog in _registry.registered().values():
        for params in prog.warmup:
            dtype = params.get("dtype")
            if dtype is not None and not backend.supports_dtype(ok.as_dtype(dtype)):
                continue
            prog.build(backend, **params)


# ------------------------------------------------------------ the elementwise helper

#: The dtypes an elementwise kernel accepts unless told otherwise.
NUMERIC = ("float16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")


def compute_type(dtype: str) -> str:
    """The C type an elementwise expression computes in: float16 is loaded into float."""
    return "float" if dtype == "float16" else STORAGE[dtype]


def _check_names(owner: str, inputs: Sequence[str], scalars: Sequence[str]) -> None:
    names = list(inputs) + list(scalars)
    bad = [n for n in names if not isinstance(n, str) or not _IDENT.fullmatch(n) or n.endswith("_") or n in ("i", "n")]
    if bad or len(set(names)) != len(names) or not inputs:
        raise OpSpecError(
            f"{owner}: inputs and scalars must be distinct C identifiers (not 'i', 'n' or ending in '_'), "
            f"with at least one input; got inputs={list(inputs)}, scalars={list(scalars)}"
        )


class ElementwiseSpec:
    """What an elementwise kernel is, independent of the device API: ``out = expression``
    per element, over inputs of one dtype and shape, with scalars of the compute type."""

    def __init__(self, name: str, expression: str, inputs: Sequence[str], scalars: Sequence[str],
                 dtypes: Sequence[str], out_dtype: str | None, preamble: str, backend: str) -> None:
        owner = f"elementwise kernel {name!r}"
        if not isinstance(name, str) or not _IDENT.fullmatch(name):
            raise OpSpecError(f"elementwise kernel: the name must be a C identifier, got {name!r}")
        if not isinstance(expression, str) or not expression.strip() or ";" in expression:
            raise OpSpecError(f"{owner}: expression must be one C expression (no ';'), e.g. 'a * x + y', got {expression!r}")
        _check_names(owner, tuple(inputs), tuple(scalars))
        unknown = [d for d in [*dtypes, *([out_dtype] if out_dtype else [])] if d not in STORAGE]
        if unknown or not dtypes or "bool" in dtypes:
            raise OpSpecError(f"{owner}: dtypes must be among {list(NUMERIC)} (out_dtype may also be 'bool'), got {unknown or list(dtypes)}")
        self.name, self.expression, self.preamble, self.backend = name, expression.strip(), preamble, backend
        self.inputs, self.scalars = tuple(inputs), tuple(scalars)
        self.dtypes, self.out_dtype = tuple(dtypes), out_dtype
        self.owner = owner

    def result_dtype(self, dtype: str) -> str:
        return self.out_dtype or dtype

    def check_call(self, native: Sequence[Any], scalars: Mapping[str, Any]) -> tuple[str, tuple[int, ...], tuple[Any, ...]]:
        """(dtype, shape, scalar values) of a call, after checking it."""
        if len(native) != len(self.inputs):
            raise InvalidArgumentError(f"{self.owner}: takes {len(self.inputs)} input(s) ({', '.join(self.inputs)}), got {len(native)}")
        missing = [s for s in self.scalars if s not in scalars]
        extra = [s for s in scalars if s not in self.scalars]
        if missing or extra:
            raise InvalidArgumentError(
                f"{self.owner}: takes the scalars {list(self.scalars)}; missing {missing}, unexpected {extra}"
            )
        dtype, shape = str(native[0].dtype), tuple(native[0].shape)
        for name, a in zip(self.inputs, native):
            if str(a.dtype) != dtype or tuple(a.shape) != shape:
                raise InvalidArgumentError(
                    f"{self.owner}: every input must have the dtype and shape of {self.inputs[0]!r} "
                    f"({dtype}, {list(shape)}); {name!r} is {a.dtype}, {list(a.shape)}"
                )
        if dtype not in self.dtypes:
            raise OpTypeError(f"{self.owner}: inputs of {dtype} are not supported; dtypes: {list(self.dtypes)}")
        ct = np.dtype(np.float32 if dtype == "float16" else dtype)
        values = []
        for s in self.scalars:
            v = scalars[s]
            if not isinstance(v, (int, float, np.number, np.bool_)) or (ct.kind in "iu" and isinstance(v, (float, np.floating))):
                raise OpTypeError(f"{self.owner}: scalar {s!r} must be a {'integer' if ct.kind in 'iu' else 'number'} for inputs of {dtype}, got {v!r}")
            if ct.kind in "iu" and not np.iinfo(ct).min <= int(v) <= np.iinfo(ct).max:
                raise InvalidArgumentError(f"{self.owner}: scalar {s!r}={v} does not fit {dtype}")
            values.append(ct.type(v))
        return dtype, shape, tuple(values)


def opencl_source(spec: ElementwiseSpec, dtype: str) -> str:
    """The OpenCL C program of ``spec`` for inputs of ``dtype`` (one work-item per element)."""
    out_dtype = spec.result_dtype(dtype)
    t, ot = compute_type(dtype), compute_type(out_dtype)
    head = "#pragma OPENCL EXTENSION cl_khr_fp64 : enable\n" if "float64" in (dtype, out_dtype) else ""
    params = [f"__global {STORAGE[out_dtype]}* restrict out_"]
    params += [f"__global const {STORAGE[dtype]}* restrict {x}_" for x in spec.inputs]
    params += [f"const T {s}" for s in spec.scalars]
    loads = "".join(
        f"  const T {x} = vload_half(i, {x}_);\n" if dtype == "float16" else f"  const T {x} = {x}_[i];\n" for x in spec.inputs
    )
    if out_dtype == "bool":
        store = "  out_[i] = (OUT_T)((EXPR) ? 1 : 0);\n"
    elif out_dtype == "float16":
        store = "  vstore_half((float)(EXPR), i, out_);\n"
    else:
        store = "  out_[i] = (OUT_T)(EXPR);\n"
    return (
        f"{head}#define T {t}\n#define OUT_T {ot}\n{spec.preamble}\n#define EXPR {spec.expression}\n"
        f"__kernel void {spec.name}({', '.join(params)}) {{\n  const size_t i = get_global_id(0);\n{loads}{store}}}\n"
    )


class ElementwiseKernel:
    """``out = expression`` per element, on the OpenCL backend: the common device kernel
    of an op package, written as one C expression.

    ``inputs`` name the arrays (all of one dtype and shape; inside the expression each
    is the element's value in the compute type ``T``), ``scalars`` name by-value
    arguments of type ``T``, ``preamble`` holds helper functions or macros.  The
    program is rendered per input dtype (``dtypes``); float16 is stored as ``half``
    and computed in float (``T`` is ``float``).  The result has the inputs' dtype, or
    ``out_dtype``.  Declared at import, it is built by ``ok.warmup("opencl")`` for
    each of its dtypes the device supports.

    ``kernel(ctx, x, y, a=2.0)`` returns a new C-contiguous device array (or fills
    ``out``).  Inputs at an offset or not contiguous are copied first."""

    def __init__(self, name: str, expression: str, *, inputs: Sequence[str] = ("x",), scalars: Sequence[str] = (),
                 dtypes: Sequence[str] = NUMERIC, out_dtype: str | None = None, preamble: str = "",
                 register: bool = True) -> None:
        self.spec = ElementwiseSpec(name, expression, inputs, scalars, dtypes, out_dtype, preamble, "opencl")
        self.name = name
        self.program = DeviceProgram(
            f"elementwise:{name}", lambda dtype: opencl_source(self.spec, dtype),
            warmup=[{"dtype": d} for d in self.spec.dtypes], register=register,
            origin=("elementwise", expression, tuple(inputs), tuple(scalars), tuple(dtypes), out_dtype, preamble),
        )

    def source(self, dtype: str) -> str:
        """The OpenCL C source for inputs of ``dtype``."""
        return opencl_source(self.spec, dtype)

    def __call__(self, where: BackendLike, *inputs: Any, out: Any = None, op: str | None = None, **scalars: Any) -> Any:
        be = backend_of(where, f"elementwise kernel {self.name!r}")
        if op is None and isinstance(where, ok.OpKernelConstruction):
            op = where.op_def.name
        bad = [i for i, a in enumerate(inputs) if not isinstance(a, be.Array)]
        if bad:
            raise OpTypeError(f"elementwise kernel {self.name!r}: input {bad[0]} is a {type(inputs[bad[0]]).__name__}; expected an OpenCL device array")
        dtype, shape, values = self.spec.check_call(inputs, scalars)
        out_dt = np.dtype(self.spec.result_dtype(dtype))
        if out is None:
            out = be.new_array(shape, out_dt)
        elif not isinstance(out, be.Array) or tuple(out.shape) != shape or out.dtype != out_dt or out.offset or not _dense(out):
            raise InvalidArgumentError(
                f"elementwise kernel {self.name!r}: out must be a C-contiguous device array at offset 0 of shape "
                f"{list(shape)} and dtype {out_dt.name}"
            )
        n = int(np.prod(shape, dtype=np.int64))
        if n:
            k = self.program.kernel(be, self.name, op=op, dtype=dtype)
            arrays = [a if a.offset == 0 and _dense(a) else a.copy() for a in inputs]
            k.launch1d(n, out, *arrays, *values)
        return out

    def __repr__(self) -> str:
        return f"<ElementwiseKernel {self.name!r} (opencl): {self.spec.expression}>"
