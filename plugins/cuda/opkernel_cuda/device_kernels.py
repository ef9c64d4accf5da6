"""Device kernels of op packages on the CUDA backend: the same API as
``opkernel_opencl.device_kernels``, over ``cupy.RawModule``.

An op package declares its programs once, at import (``DeviceProgram``,
``ElementwiseKernel``); a kernel builds one on the backend it runs on and launches
it.  cupy compiles a module with NVRTC at its first launch and keeps the binary in
the backend's verified kernel cache (``runtime.use_private_kernel_cache``);
``ok.warmup("cuda")`` compiles every declared program for each parameter set in
its ``warmup``.  Nothing here imports cupy: the backend carries it.

Differences from OpenCL, which a source meant for both must respect: a launch has no
global offset, so ``launch1d`` rounds the grid up to whole blocks and the kernel
returns early for ids past the end; an array at an offset (a cupy view) is passed
as a pointer to its first element, so views need no copy; argument types are
checked only where the kernel's signature is spelled out in the source
(``extern "C" __global__ void name(const float* x, int n)``), since NVRTC does
not report them.
"""

from __future__ import annotations

import re
import threading
import weakref
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping, Sequence, Union

import numpy as np

import opkernel as ok
from opkernel.device_programs import ProgramRegistry
from opkernel.errors import InternalError, InvalidArgumentError, OpSpecError, OpTypeError

if TYPE_CHECKING:
    from .backend import CudaBackend

__all__ = ["DeviceProgram", "ElementwiseKernel", "Kernel", "Program", "backend_of", "ctype", "registered", "warm", "cuda_source"]

BackendLike = Union[ok.Backend, ok.OpKernelConstruction, str]

#: Threads per block of ``launch1d`` and of a 1-D ``launch`` without ``local_size``.
BLOCK = 256
#: The most threads a CUDA block may have.
MAX_BLOCK = 1024

#: CUDA C scalar type -> the numpy dtype whose bytes it takes.
C_TYPES: dict[str, np.dtype[Any]] = {
    name: np.dtype(dt) for name, dt in {
        "char": np.int8, "signed char": np.int8, "unsigned char": np.uint8, "short": np.int16,
        "unsigned short": np.uint16, "int": np.int32, "unsigned int": np.uint32, "unsigned": np.uint32,
        "long long": np.int64, "unsigned long long": np.uint64, "__half": np.float16, "half": np.float16,
        "float": np.float32, "double": np.float64, "bool": np.bool_, "int8_t": np.int8, "uint8_t": np.uint8,
        "int16_t": np.int16, "uint16_t": np.uint16, "int32_t": np.int32, "uint32_t": np.uint32,
        "int64_t": np.int64, "uint64_t": np.uint64,
    }.items()
}
#: numpy dtype name -> CUDA C storage type (bool is a byte, as in numpy).
STORAGE = {
    "bool": "unsigned char", "int8": "signed char", "uint8": "unsigned char", "int16": "short",
    "uint16": "unsigned short", "int32": "int", "uint32": "unsigned int", "int64": "long long",
    "uint64": "unsigned long long", "float16": "__half", "float32": "float", "float64": "double",
}
NUMERIC = ("float16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")



def ctype(dtype: str | ok.DType) -> str:
    """The CUDA C type that holds one element of ``dtype`` (``"float32"`` -> ``float``,
    ``"float16"`` -> ``__half``, ``"bool"`` -> ``unsigned char``): for rendering a source per dtype."""
    name = dtype if isinstance(dtype, str) else dtype.name
    if name not in STORAGE:
        raise OpTypeError(f"no CUDA C type holds {name!r} here; types: {sorted(STORAGE)}")
    return STORAGE[name]


_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_SIGNATURE = re.compile(r'extern\s+"C"\s+__global__\s+(?:__launch_bounds__\([^)]*\)\s+)?void\s+([A-Za-z_]\w*)\s*\(([^)]*)\)')
_PARAM = re.compile(r"^(?:const\s+)?([A-Za-z_][\w ]*?)\s*(\*?)\s*(?:const\s+)?(?:__restrict__\s+)?([A-Za-z_]\w*)$")


#: The CUDA backend's class, registered by ``backend`` when it defines it (this module
#: sits below the backend and never imports it): until then no CUDA backend exists.
_backend_class: type[CudaBackend] | None = None


def register_backend_class(cls: type[CudaBackend]) -> None:
    """Called once by ``opkernel_cuda.backend`` with ``CudaBackend`` (``backend_of`` checks against it)."""
    global _backend_class
    _backend_class = cls


def backend_of(where: BackendLike, what: str = "a device kernel") -> CudaBackend:
    """The CUDA backend of a kernel's context (or a backend, or ``"cuda"``), typed: raises an
    ``InvalidArgumentError`` naming ``what`` when it is another backend's."""
    if isinstance(where, str):
        from opkernel.engine import backend_instance

        where = backend_instance(where)
    be = where.backend if isinstance(where, ok.OpKernelConstruction) else where
    if _backend_class is None or not isinstance(be, _backend_class):
        raise InvalidArgumentError(
            f"{what}: needs backend 'cuda', got {getattr(be, 'name', type(be).__name__)!r}; "
            "register the kernel with backend='cuda'"
        )
    return be


def _options(owner: str, options: Sequence[str]) -> tuple[str, ...]:
    if isinstance(options, str) or not all(isinstance(o, str) and o.strip() and "\n" not in o for o in options):
        raise OpSpecError(
            f"{owner}: options must be a sequence of NVRTC options, one string each (e.g. ('-DN=4', "
            f"'--use_fast_math')), got {options!r}"
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


def signatures(source: str) -> dict[str, tuple[tuple[str, bool, str], ...] | None]:
    """The ``extern "C" __global__`` kernels spelled out in ``source``: name -> its
    parameters as (C type, is a pointer, name), or None where a parameter is not a
    plain declaration of a known type (a macro, a template parameter)."""
    found: dict[str, tuple[tuple[str, bool, str], ...] | None] = {}
    for m in _SIGNATURE.finditer(source):
        params: list[tuple[str, bool, str]] | None = []
        for p in (p.strip() for p in m.group(2).split(",") if p.strip()):
            pm = _PARAM.match(" ".join(p.split()))
            ctype = pm.group(1).strip() if pm else ""
            if pm is None or ctype not in C_TYPES or params is None:
                params = None
                continue
            params.append((ctype, bool(pm.group(2)), pm.group(3)))
        found[m.group(1)] = None if params is None else tuple(params)
    return found


class Kernel:
    """One kernel of a built ``Program``: ``launch`` checks sizes and arguments, then
    queues it on cupy's current stream (it never waits)."""

    def __init__(self, program: Program, name: str, handle: Any, params: tuple[tuple[str, bool, str], ...] | None) -> None:
        self.program = program
        self.name = name
        self.handle = handle  # the cupy.RawKernel
        self.params = params
        self.max_work_group = MAX_BLOCK

    def where(self) -> str:
        p = self.program
        return f"kernel {self.name!r} of CUDA program {p.what!r}" + (f" (op {p.op!r})" if p.op else "")

    def __repr__(self) -> str:
        return f"<{self.where()}>"

    def convert(self, args: tuple[Any, ...]) -> tuple[Any, ...]:
        """The arguments after checking them: device arrays (C-contiguous, any offset)
        and numpy scalars of the parameters' types."""
        params = self.params
        if params is not None and len(args) != len(params):
            names = ", ".join(p[2] for p in params)
            raise InvalidArgumentError(f"{self.where()}: takes {len(params)} arguments ({names}), got {len(args)}")
        ndarray = self.program.backend.cupy.ndarray
        for i, a in enumerate(args):
            p = None if params is None else params[i]
            what = f"argument {i}" if p is None else f"argument {i} ({p[0]}{'*' if p[1] else ''} {p[2]})"
            if isinstance(a, ndarray):
                if p is not None and not p[1]:
                    raise OpTypeError(f"{self.where()}: {what} is passed by value, got a device array")
                if p is not None and C_TYPES[p[0]] != a.dtype and not (a.dtype == np.bool_ and C_TYPES[p[0]].itemsize == 1):
                    raise OpTypeError(f"{self.where()}: {what} points to {C_TYPES[p[0]].name}, got an array of {a.dtype}")
                if not a.flags.c_contiguous:
                    raise InvalidArgumentError(f"{self.where()}: {what} is not C-contiguous (strides {a.strides}); pass x.copy()")
            elif isinstance(a, np.ndarray) and a.ndim:
                raise OpTypeError(f"{self.where()}: {what} is a host numpy array; upload it first or pass a device array")
            elif isinstance(a, (bool, int, float, complex)) and not isinstance(a, np.generic):
                want = f"np.{C_TYPES[p[0]].name}({a!r})" if p is not None and not p[1] else "a numpy scalar of its C type"
                raise OpTypeError(
                    f"{self.where()}: {what} is a Python {type(a).__name__}; pass {want}: a kernel argument is the "
                    "bytes of its declared C type, which a Python number does not fix"
                )
            elif p is not None and (p[1] or not isinstance(a, np.generic) or a.dtype != C_TYPES[p[0]]):
                want = "a device array" if p[1] else f"np.{C_TYPES[p[0]].name}"
                got = a.dtype.name if isinstance(a, np.generic) else type(a).__name__
                raise OpTypeError(f"{self.where()}: {what} takes {want}, got {got}")
            elif p is None and not isinstance(a, (np.generic, np.ndarray)):
                raise OpTypeError(f"{self.where()}: {what} is a {type(a).__name__}; expected a device array or a numpy scalar")
        return args

    def launch(self, global_size: int | Sequence[int], *args: Any, local_size: int | Sequence[int] | None = None,
               shared_mem: int = 0) -> None:
        """Queue one launch over ``global_size`` threads (1 to 3 dimensions) in blocks of
        ``local_size`` (default: in dimension 0 the largest divisor of its size up to 256,
        1 in the others): each global size a multiple of the local size, as on OpenCL, a
        block at most 1024 threads."""
        g = _sizes(self.where(), "the global size", global_size, None, 0)
        assert g is not None
        lo = _sizes(self.where(), "the local size", local_size, len(g), 1) or tuple(
            next(b for b in range(min(BLOCK, g[0]) or 1, 0, -1) if g[0] % b == 0) if d == 0 else 1 for d in range(len(g))
        )
        items = int(np.prod(lo))
        if items > MAX_BLOCK:
            raise InvalidArgumentError(f"{self.where()}: a block of {list(lo)} is {items} threads; at most {MAX_BLOCK}")
        bad = [d for d in range(len(g)) if g[d] % lo[d]]
        if bad:
            raise InvalidArgumentError(
                f"{self.where()}: the global size {list(g)} must be a multiple of the local size {list(lo)} in every "
                f"dimension (not in dimension {bad[0]}); round it up and return early in the kernel for ids past "
                "the end, or use launch1d"
            )
        converted = self.convert(args)
        if 0 in g:
            return
        grid = tuple(gd // ld for gd, ld in zip(g, lo))
        self.program.backend_call(lambda: self.handle(grid, lo, converted, shared_mem=shared_mem))

    def launch1d(self, n: int, *args: Any) -> None:
        """At least ``n`` threads, in blocks of 256 (the grid rounded up): the kernel
        returns early for ids >= n (CUDA launches have no offset, unlike OpenCL's)."""
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0:
            raise InvalidArgumentError(f"{self.where()}: launch1d needs a thread count >= 0, got {n!r}")
        converted = self.convert(args)
        if n:
            grid = ((int(n) + BLOCK - 1) // BLOCK,)
            self.program.backend_call(lambda: self.handle(grid, (BLOCK,), converted))


class Program:
    """A CUDA module built for one backend; ``kernel(name)`` gives its kernels."""

    def __init__(self, backend: CudaBackend, handle: Any, source: str, what: str, op: str | None) -> None:
        self.backend = backend
        self.handle = handle  # the cupy.RawModule
        self.what = what
        self.op = op
        self.signatures = signatures(source)
        self._kernels: dict[str, Kernel] = {}
        self._lock = threading.Lock()

    @property
    def kernel_names(self) -> tuple[str, ...]:
        """The ``extern "C"`` kernels spelled out in the source (a macro-made one is found by name)."""
        return tuple(sorted(self.signatures))

    def backend_call(self, fn: Callable[[], Any]) -> Any:
        be = self.backend
        if be.index:
            with be.device:
                return fn()
        return fn()

    def kernel(self, name: str) -> Kernel:
        k = self._kernels.get(name)
        if k is None:
            with self._lock:
                k = self._kernels.get(name)
                if k is None:
                    try:
                        fn = self.backend_call(lambda: self.handle.get_function(name))
                    except Exception as e:  # cupy's CompileException, or a missing symbol
                        if "CompileException" in type(e).__name__:
                            raise InternalError(
                                f"CUDA program {self.what!r}" + (f" (op {self.op!r})" if self.op else "")
                                + f" failed to compile: {e}", op=self.op, backend="cuda",
                            ) from e
                        raise InvalidArgumentError(
                            f"CUDA program {self.what!r}" + (f" (op {self.op!r})" if self.op else "")
                            + f" has no kernel {name!r} ({e}); kernels in its source: {', '.join(self.kernel_names) or 'none found'}"
                        ) from e
                    k = self._kernels[name] = Kernel(self, name, fn, self.signatures.get(name))
        return k

    def compile(self) -> None:
        """Compile now (cupy otherwise compiles at the first ``get_function``)."""
        self.backend_call(self.handle.compile)

    def __repr__(self) -> str:
        return f"<CUDA program {self.what!r}>"


def build(backend: CudaBackend, source: str, options: Sequence[str], what: str, op: str | None) -> Program:
    """A ``cupy.RawModule`` of ``source``: compiled by NVRTC at the first kernel asked
    for (or ``Program.compile``), kept in the backend's verified kernel cache."""
    opts = _options(f"CUDA program {what!r}", options)
    if not isinstance(source, str) or not source.strip():
        raise OpSpecError(f"CUDA program {what!r}: the source must be a non-empty string of CUDA C++")
    key = (source, opts, what, op)
    found = _programs.get(backend, {}).get(key)
    if found is None:
        with _lock:
            modules = _modules.setdefault(backend, {})
            handle = modules.get((source, opts))
            if handle is None:
                handle = modules[(source, opts)] = backend.cupy.RawModule(code=source, options=("-std=c++17", *opts))
            found = _programs.setdefault(backend, {}).setdefault(key, Program(backend, handle, source, what, op))
    return found


#: One module per backend and (source, options), and a Program over it per name and op
#: (so that errors name the op that launched).
_modules: weakref.WeakKeyDictionary[Any, dict[tuple[Any, ...], Any]] = weakref.WeakKeyDictionary()
_programs: weakref.WeakKeyDictionary[Any, dict[tuple[Any, ...], Program]] = weakref.WeakKeyDictionary()
_lock = threading.Lock()


class DeviceProgram:
    """A CUDA C++ program of an op package, declared once at import: the counterpart of
    ``opkernel_opencl.DeviceProgram`` (``render(**params)`` returns its source;
    ``build(ctx, **params)``; ``ok.warmup("cuda")`` compiles each ``warmup`` set)."""

    def __init__(self, name: str, render: Callable[..., str], *, options: Sequence[str] = (),
                 warmup: Iterable[Mapping[str, Any]] = (), register: bool = True, origin: Any = None) -> None:
        if not isinstance(name, str) or not name:
            raise OpSpecError(f"DeviceProgram: the name must be a non-empty string, got {name!r}")
        if not callable(render):
            raise OpSpecError(f"CUDA program {name!r}: render must be a function returning CUDA C++, got {render!r}")
        self.name = name
        self.render = render
        self.options = _options(f"CUDA program {name!r}", options)
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
            return self.render(**params)
        except TypeError as e:
            raise InvalidArgumentError(f"CUDA program {self.name!r}: render({params}) failed: {e}") from e

    def build(self, where: BackendLike, *, op: str | None = None, **params: Any) -> Program:
        be = backend_of(where, f"CUDA program {self.name!r}")
        key = (op, *sorted(params.items()))
        found = self._built.get(be, {}).get(key)
        if found is None:
            found = build(be, self.source(**params), self.options, self.what(params), op)
            with self._lock:
                found = self._built.setdefault(be, {}).setdefault(key, found)
        return found

    def kernel(self, where: BackendLike, name: str, *, op: str | None = None, **params: Any) -> Kernel:
        return self.build(where, op=op, **params).kernel(name)

    def __repr__(self) -> str:
        return f"<DeviceProgram {self.name!r} (cuda)>"


_registry: ProgramRegistry[DeviceProgram] = ProgramRegistry("CUDA program")


def _register(prog: DeviceProgram) -> None:
    _registry.declare(prog)


def registered() -> dict[str, DeviceProgram]:
    """Every declared program ``ok.warmup("cuda")`` compiles, by name."""
    return _registry.registered()


def warm(backend: CudaBackend) -> int:
    """Compile every registered program for each of its warmup parameter sets; returns how many."""
    built = 0
    for prog in _registry.registered().values():
        for params in prog.warmup:
            dtype = params.get("dtype")
            if dtype is not None and not backend.supports_dtype(ok.as_dtype(dtype)):
                continue
            prog.build(backend, **params).compile()
            built += 1
    return built


# ------------------------------------------------------------ the elementwise helper


def compute_type(dtype: str) -> str:
    """The C type an elementwise expression computes in: float16 is loaded into float."""
    return "float" if dtype == "float16" else STORAGE[dtype]


class ElementwiseSpec:
    """``out = expression`` per element over inputs of one dtype and shape (see
    ``opkernel_opencl.device_kernels.ElementwiseSpec``: the same rules)."""

    def __init__(self, name: str, expression: str, inputs: Sequence[str], scalars: Sequence[str],
                 dtypes: Sequence[str], out_dtype: str | None, preamble: str) -> None:
        owner = f"elementwise kernel {name!r}"
        if not isinstance(name, str) or not _IDENT.fullmatch(name):
            raise OpSpecError(f"elementwise kernel: the name must be a C identifier, got {name!r}")
        if not isinstance(expression, str) or not expression.strip() or ";" in expression:
            raise OpSpecError(f"{owner}: expression must be one C expression (no ';'), e.g. 'a * x + y', got {expression!r}")
        names = [*inputs, *scalars]
        bad = [n for n in names if not isinstance(n, str) or not _IDENT.fullmatch(n) or n.endswith("_") or n in ("i", "n")]
        if bad or len(set(names)) != len(names) or not inputs:
            raise OpSpecError(
                f"{owner}: inputs and scalars must be distinct C identifiers (not 'i', 'n' or ending in '_'), "
                f"with at least one input; got inputs={list(inputs)}, scalars={list(scalars)}"
            )
        unknown = [d for d in [*dtypes, *([out_dtype] if out_dtype else [])] if d not in STORAGE]
        if unknown or not dtypes or "bool" in dtypes:
            raise OpSpecError(f"{owner}: dtypes must be among {list(NUMERIC)} (out_dtype may also be 'bool'), got {unknown or list(dtypes)}")
        self.name, self.expression, self.preamble = name, expression.strip(), preamble
        self.inputs, self.scalars = tuple(inputs), tuple(scalars)
        self.dtypes, self.out_dtype = tuple(dtypes), out_dtype
        self.owner = owner

    def result_dtype(self, dtype: str) -> str:
        return self.out_dtype or dtype

    def check_call(self, native: Sequence[Any], scalars: Mapping[str, Any]) -> tuple[str, tuple[int, ...], tuple[Any, ...]]:
        if len(native) != len(self.inputs):
            raise InvalidArgumentError(f"{self.owner}: takes {len(self.inputs)} input(s) ({', '.join(self.inputs)}), got {len(native)}")
        missing = [s for s in self.scalars if s not in scalars]
        extra = [s for s in scalars if s not in self.scalars]
        if missing or extra:
            raise InvalidArgumentError(f"{self.owner}: takes the scalars {list(self.scalars)}; missing {missing}, unexpected {extra}")
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


def cuda_source(spec: ElementwiseSpec, dtype: str) -> str:
    """The CUDA C++ program of ``spec`` for inputs of ``dtype`` (one thread per element,
    ``n_`` elements)."""
    out_dtype = spec.result_dtype(dtype)
    t, ot = compute_type(dtype), compute_type(out_dtype)
    head = "#include <cuda_fp16.h>\n" if "float16" in (dtype, out_dtype) else ""
    params = [f"{STORAGE[out_dtype]}* __restrict__ out_"]
    params += [f"const {STORAGE[dtype]}* __restrict__ {x}_" for x in spec.inputs]
    params += [f"const {t} {s}" for s in spec.scalars] + ["const long long n_"]
    load = "__half2float({x}_[i])" if dtype == "float16" else "{x}_[i]"
    loads = "".join(f"  const T {x} = {load.format(x=x)};\n" for x in spec.inputs)
    if out_dtype == "bool":
        store = "  out_[i] = (unsigned char)((EXPR) ? 1 : 0);\n"
    elif out_dtype == "float16":
        store = "  out_[i] = __float2half((float)(EXPR));\n"
    else:
        store = "  out_[i] = (OUT_T)(EXPR);\n"
    return (
        f"{head}typedef {t} T;\ntypedef {ot} OUT_T;\n{spec.preamble}\n#define EXPR {spec.expression}\n"
        f'extern "C" __global__ void {spec.name}({", ".join(params)}) {{\n'
        "  const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;\n  if (i >= n_) return;\n"
        f"{loads}{store}}}\n"
    )


class ElementwiseKernel:
    """``out = expression`` per element on the CUDA backend: the counterpart of
    ``opkernel_opencl.ElementwiseKernel`` (same arguments, same rules)."""

    def __init__(self, name: str, expression: str, *, inputs: Sequence[str] = ("x",), scalars: Sequence[str] = (),
                 dtypes: Sequence[str] = NUMERIC, out_dtype: str | None = None, preamble: str = "",
                 register: bool = True) -> None:
        self.spec = ElementwiseSpec(name, expression, inputs, scalars, dtypes, out_dtype, preamble)
        self.name = name
        self.program = DeviceProgram(
            f"elementwise:{name}", lambda dtype: cuda_source(self.spec, dtype),
            warmup=[{"dtype": d} for d in self.spec.dtypes], register=register,
            origin=("elementwise", expression, tuple(inputs), tuple(scalars), tuple(dtypes), out_dtype, preamble),
        )

    def source(self, dtype: str) -> str:
        """The CUDA C++ source for inputs of ``dtype``."""
        return cuda_source(self.spec, dtype)

    def __call__(self, where: BackendLike, *inputs: Any, out: Any = None, op: str | None = None, **scalars: Any) -> Any:
        be = backend_of(where, f"elementwise kernel {self.name!r}")
        if op is None and isinstance(where, ok.OpKernelConstruction):
            op = where.op_def.name
        cp = be.cupy
        bad = [i for i, a in enumerate(inputs) if not isinstance(a, cp.ndarray)]
        if bad:
            raise OpTypeError(f"elementwise kernel {self.name!r}: input {bad[0]} is a {type(inputs[bad[0]]).__name__}; expected a cupy array")
        dtype, shape, values = self.spec.check_call(inputs, scalars)
        out_dt = np.dtype(self.spec.result_dtype(dtype))
        if out is None:
            out = be.empty(shape, ok.as_dtype(out_dt.name))
        elif not isinstance(out, cp.ndarray) or tuple(out.shape) != shape or out.dtype != out_dt or not out.flags.c_contiguous:
            raise InvalidArgumentError(
                f"elementwise kernel {self.name!r}: out must be a C-contiguous cupy array of shape {list(shape)} and dtype {out_dt.name}"
            )
        n = int(np.prod(shape, dtype=np.int64))
        if n:
            k = self.program.kernel(be, self.name, op=op, dtype=dtype)
            arrays = [cp.ascontiguousarray(a) for a in inputs]
            k.launch1d(n, out, *arrays, *values, np.int64(n))
        return out

    def __repr__(self) -> str:
        return f"<ElementwiseKernel {self.name!r} (cuda): {self.spec.expression}>"
