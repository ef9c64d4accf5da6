"""The elementwise kernel generator and its table: unary, binary and ternary ops
with numpy broadcasting, comparisons, logical ops, Select, ClipByValue, Cast,
the activations, Fill/ZerosLike/OnesLike, AddN and BiasAdd.

Every op becomes one program per dtype with these kernels, one element per
work-item and no bounds check (``launch1d`` sizes the launch exactly):

* ``k_v..``: every input has the output's shape (the contiguous fast path);
* ``k_vs`` / ``k_sv``: one input of a binary op is a single element;
* ``k_bc``: general broadcasting (``k_bc2``: two dimensions after collapsing, the
  common case, without k_bc's loop); the host computes each input's element strides
  over the output's (collapsed) shape and passes them by value, with a multiplier
  and shift per size so the kernel divides by multiplying (``fdiv``).

An expression sees its inputs as ``a``, ``b``, ``c`` of the input type ``T``.
"""

from __future__ import annotations

import functools
import typing
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np

import opkernel as ok
from opkernel.ops.math_ops import cast_truncation_bits, select_condition_shape

from .backend import OpenCLBackend, ctype
from .common import (
    ALL, FLOATS, INTS, REALS, SIGNED, broadcast_shape, broadcast_strides, collapse, dims, fail, fast_divisor, literal, scalar,
)
from .programs import PRELUDE, ProgramBuildError, family

_VARS = "abc"


@dataclass(frozen=True)
class Ew:
    """One elementwise op: ``exprs`` maps a dtype class ('f', 'i', 'u', 'b') or a dtype
    name to an OpenCL C expression; ``out`` fixes the output dtype ('bool')."""

    op: str
    arity: int
    exprs: dict[str, str]
    dtypes: tuple[str, ...]
    out: str | None = None
    type_attr: str | None = "T"
    fixed_input: str | None = None  # the input dtype of ops without a type attr (logical ops)
    attrs: dict[str, Any] = field(default_factory=dict)
    variant: str = ""  # a second program family of one op (Gelu's tanh approximation: "Tanh")

    @property
    def family(self) -> str:
        return f"ew:{self.op}{self.variant}"

    def expr(self, dtype: str) -> str:
        if dtype in self.exprs:
            return self.exprs[dtype]
        kind = "b" if dtype == "bool" else ("f" if dtype.startswith("float") else ("u" if dtype.startswith("uint") else "i"))
        if kind in self.exprs:
            return self.exprs[kind]
        if kind == "u" and "i" in self.exprs:
            return self.exprs["i"]
        return self.exprs["*"]


def _variants(arity: int) -> list[str]:
    if arity == 1:
        return ["v"]
    if arity == 2:
        return ["vv", "vs", "sv", "bc2", "bc"]
    return ["v" * arity, "bc2", "bc"]


def render(spec: Ew, dtype: str) -> str:
    T = ctype(ok.as_dtype(dtype))
    R = ctype(ok.as_dtype(spec.out)) if spec.out else T
    expr = spec.expr(dtype)
    if spec.op in ("Select", "SelectV2"):  # the condition is bool; t and e have type T
        types = ["uchar", T, T]
    else:
        types = [T] * spec.arity
    helpers = FLOAT_HELPERS if dtype in FLOATS else (_INT_HELPERS if dtype in INTS else "")
    lines = [f"#define T {T}", f"#define R {R}", helpers]
    ins = ", ".join(f"__global const {t}* restrict x{j}" for j, t in enumerate(types))
    for variant in _variants(spec.arity):
        if variant in ("bc", "bc2"):
            strides = ", ".join(f"dims_t s{j}" for j in range(spec.arity))
            sig = f"__global R* restrict out, {ins}, int rank, dims_t shape, dims_t dm, dims_t ds, {strides}"
            if variant == "bc":
                body = [
                    "  int r = i;",
                    "  " + " ".join(f"int o{j} = 0;" for j in range(spec.arity)),
                    "  for (int d = rank - 1; d >= 0; --d) {",
                    "    int q = fdiv(r, dm.v[d], ds.v[d]); int k = r - q * shape.v[d]; r = q;",
                    "    " + " ".join(f"o{j} += k * s{j}.v[d];" for j in range(spec.arity)),
                    "  }",
                ] + [f"  {t} {_VARS[j]} = x{j}[o{j}];" for j, t in enumerate(types)]
            else:  # two dimensions, without the loop (1000x1000 + 1000x1 on PoCL: 2.1 against 3.1 ms)
                body = ["  int r = fdiv(i, dm.v[1], ds.v[1]); int k = i - r * shape.v[1];"] + [
                    f"  {t} {_VARS[j]} = x{j}[r * s{j}.v[0] + k * s{j}.v[1]];" for j, t in enumerate(types)
                ]
        else:
            body = [f"  {t} {_VARS[j]} = x{j}[{'i' if m == 'v' else '0'}];" for j, (t, m) in enumerate(zip(types, variant))]
            sig = f"__global R* restrict out, {ins}"
        if variant in ("bc", "bc2"):  # int arithmetic for the indices, the contiguous store at gi
            head, store = "  long gi = get_global_id(0); int i = (int)gi;\n", "out[gi]"
        else:
            head, store = "  long i = get_global_id(0);\n", "out[i]"
        lines.append(f"__kernel void k_{variant}({sig}) {{\n{head}" + "\n".join(body) + f"\n  {store} = (R)({expr});\n}}")
    return "\n".join(lines) + "\n#undef T\n#undef R\n"


def _backend() -> OpenCLBackend:
    return typing.cast(OpenCLBackend, ok.engine.backend_instance("opencl"))


def run(be: OpenCLBackend, spec: Ew, dtype: str, xs: Sequence[Any]) -> Any:
    """Launch ``spec`` for ``dtype`` on native arrays ``xs``; returns the new output."""
    shapes = [x.shape for x in xs]
    first = shapes[0]
    same = all(s == first for s in shapes)
    shape = first if same else broadcast_shape(spec.op, *shapes)
    out = be.new_array(shape, _OUT_NP[spec.out or dtype])
    n = out.size
    if n == 0:
        return out
    fam, op = spec.family, spec.op
    bufs = [x.base_data for x in xs]
    if same:
        be.launch1d(be.programs.kernel(fam, dtype, _CONTIGUOUS[len(xs)], op), n, out.base_data, *bufs)
        return out
    if len(xs) == 2 and (xs[0].size == 1 or xs[1].size == 1) and (shapes[0] == shape or shapes[1] == shape):
        variant = "k_sv" if xs[0].size == 1 and shapes[1] == shape else "k_vs"
        be.launch1d(be.programs.kernel(fam, dtype, variant, op), n, out.base_data, *bufs)
        return out
    cshape, cstrides = collapse(shape, *[broadcast_strides(s, shape) for s in shapes])
    if len(cshape) > 8:
        raise fail(op, f"broadcasting over more than 8 non-trivial dimensions is not supported, got {list(shape)}")
    if len(cshape) < 2:  # a leading dimension of 1: k_bc2 serves rank 1 too
        cshape, cstrides = [1, *cshape], [[0, *st] for st in cstrides]
    variant = "k_bc2" if len(cshape) == 2 else "k_bc"
    be.launch1d(be.programs.kernel(fam, dtype, variant, op), n, out.base_data, *bufs, np.int32(len(cshape)),
                *_shape_divisors(tuple(cshape)), *[dims(st) for st in cstrides])
    return out


@functools.lru_cache(maxsize=256)
def _shape_divisors(shape: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``k_bc``'s shape and the (multiplier, shift) of each of its sizes: the kernel finds
    an element's index along each dimension by multiplying (``fdiv``), not dividing (a
    division by a runtime size per dimension and element ran 7 ns an element on PoCL)."""
    magic = [fast_divisor(d) for d in shape]
    out = dims(shape), dims([m for m, _ in magic]), dims([s for _, s in magic])
    for a in out:
        a.flags.writeable = False
    return out


_CONTIGUOUS = {1: "k_v", 2: "k_vv", 3: "k_vvv"}
_OUT_NP = {name: ok.as_dtype(name).np for name in ALL + ("float16",)}


def run_half(be: OpenCLBackend, spec: Ew, xs: Sequence[Any]) -> Any:
    """float16: widen to float32, compute, narrow a floating result back."""
    wide = [cast(be, x, _F32, spec.op) if x.dtype == _F16 else x for x in xs]
    out = run(be, spec, "float32", wide)
    return cast(be, out, _F16, spec.op) if out.dtype == _F32 else out


Check = Callable[[OpenCLBackend, str, Sequence[Any], dict[str, Any]], Any]


def elementwise_kernel(spec: Ew, check: Check | None = None) -> Callable[..., Any]:
    """The kernel function of ``spec``; ``check(be, dtype, inputs, attrs)`` may raise,
    or return a result that replaces the launch."""

    def kernel(*xs: Any, **attrs: Any) -> Any:
        be = _backend()
        dtype = spec.fixed_input or attrs[spec.type_attr].name  # type: ignore[index]
        if check is not None:
            result = check(be, dtype, xs, attrs)
            if result is not None:
                return result
        if dtype == "float16":
            return run_half(be, spec, xs)
        return run(be, spec, dtype, xs)

    kernel.__name__ = spec.op
    return kernel


# ---------------------------------------------------------------- ops with checks


def _host_or_device(be: OpenCLBackend, x: Any) -> np.ndarray:
    """The values of ``x`` for a data check: its host copy, else a read (synchronises)."""
    h = be.host(x)
    return h if h is not None else be.to_numpy(x)


def _division(op: str) -> Check:
    def check(be: OpenCLBackend, dtype: str, xs: Sequence[Any], attrs: dict[str, Any]) -> Any:
        # Where a quotient is computed, as TensorFlow's functors: an empty result computes none.
        if dtype in INTS and all(int(np.prod(x.shape)) for x in xs) and not np.all(_host_or_device(be, xs[1])):
            raise fail(op, "Integer division by zero")
        if op == "FloorDiv" and dtype == "float16":
            # TensorFlow's half FloorDiv floors the quotient rounded to half (Eigen's
            # half division), not the float32 one: 1026 // 1.0009765625 is 1025, not 1024.
            broadcast_shape(op, *(tuple(x.shape) for x in xs))  # a mismatch names FloorDiv, not the RealDiv below
            quotient = run_half(be, _SPECS["RealDiv"], xs)
            return run_half(be, _SPECS["FloorDiv"], [quotient, _half_one(be)])
        return None

    return check


def _half_one(be: OpenCLBackend) -> Any:
    """A 0-d float16 array holding 1 (0-d: it broadcasts to the quotient's shape, a scalar's
    included), made once per backend (floor(q / 1) = floor(q))."""
    one = getattr(be, "_ok_half_one", None)
    if one is None:
        one = be._ok_half_one = be.from_numpy(np.ones((), np.float16))  # type: ignore[attr-defined]
    return one


def check_pow(be: OpenCLBackend, dtype: str, xs: Sequence[Any], attrs: dict[str, Any]) -> None:
    # Checked where a power is computed, as TensorFlow's safe_pow: an empty result computes none.
    if dtype in SIGNED and all(int(np.prod(x.shape)) for x in xs) and np.any(_host_or_device(be, xs[1]) < 0):
        raise fail("Pow", "Integers to negative integer powers are not allowed")


def _equality(op: str) -> Check:
    """Equal/NotEqual: with ``incompatible_shape_error=false`` shapes that do not
    broadcast give a scalar."""

    def check(be: OpenCLBackend, dtype: str, xs: Sequence[Any], attrs: dict[str, Any]) -> Any:
        if not attrs["incompatible_shape_error"]:
            try:
                np.broadcast_shapes(xs[0].shape, xs[1].shape)
            except ValueError:
                return be.from_numpy(np.array(op == "NotEqual"))
        return None

    return check


def check_clip(be: OpenCLBackend, dtype: str, xs: Sequence[Any], attrs: dict[str, Any]) -> None:
    t = xs[0]
    for name, bound in (("clip_value_min", xs[1]), ("clip_value_max", xs[2])):
        if bound.ndim and bound.shape != t.shape:
            raise fail(
                "ClipByValue",
                f"{name} must be a scalar or have the shape of t {list(t.shape)}, got shape {list(bound.shape)}",
            )


SELECT = Ew("Select", 3, {"*": "a ? b : c"}, ALL)


def check_select(be: OpenCLBackend, dtype: str, xs: Sequence[Any], attrs: dict[str, Any]) -> Any:
    """Select (v1): a vector condition picks rows, so it is viewed as [n, 1, ...] first."""
    cond, t, e = xs
    shape = select_condition_shape(tuple(cond.shape), tuple(t.shape), tuple(e.shape))
    if shape == tuple(cond.shape):
        return None
    rows = (be.view(cond, shape), t, e)
    return run_half(be, SELECT, rows) if dtype == "float16" else run(be, SELECT, dtype, rows)


def check_select_v2(be: OpenCLBackend, dtype: str, xs: Sequence[Any], attrs: dict[str, Any]) -> None:
    try:
        np.broadcast_shapes(*[x.shape for x in xs])
    except ValueError:
        raise fail(
            "SelectV2",
            f"condition, t and e must be broadcastable, got shapes {list(xs[0].shape)}, "
            f"{list(xs[1].shape)} and {list(xs[2].shape)}",
        ) from None


def _same_shapes(op: str, second: str) -> Callable[..., None]:
    """The check of an activation's gradient op: gradients and its second input have one shape."""

    def check(be: OpenCLBackend, dtype: str, xs: Sequence[Any], attrs: dict[str, Any]) -> None:
        if xs[0].shape != xs[1].shape:
            raise fail(
                op, f"gradients and {second} must have the same shape, got {list(xs[0].shape)} and {list(xs[1].shape)}"
            )

    return check


check_relu_grad = _same_shapes("ReluGrad", "features")


@family("leaky_relu", FLOATS)
def _leaky_relu_source(dtype: str) -> str:
    T = ctype(ok.as_dtype(dtype))
    return f"""
__kernel void leaky_relu(__global {T}* out, __global const {T}* x, {T} alpha) {{
  long i = get_global_id(0); {T} a = x[i]; out[i] = a > 0 ? a : a * alpha;
}}
__kernel void leaky_relu_grad(__global {T}* out, __global const {T}* g, __global const {T}* f, {T} alpha) {{
  long i = get_global_id(0); out[i] = f[i] > 0 ? g[i] : g[i] * alpha;
}}
"""


def _leaky(op: str, kernel_name: str, arrays: Sequence[Any], alpha: float, T: ok.DType) -> Any:
    """LeakyRelu(Grad): one launch; float16 computes in float32 with alpha rounded to half
    first (TensorFlow's static_cast<T>(alpha)), so the product is the half product."""
    be = _backend()
    half = T.name == "float16"
    alpha = float(np.float32(alpha))  # the attr is a 32-bit float
    if half:
        arrays = [cast(be, a, _F32, op) for a in arrays]
        alpha = float(np.float16(alpha))
    dtype = ok.float32 if half else T
    out = be.new_array(tuple(arrays[0].shape), dtype.np)
    if out.size:
        k = be.programs.kernel("leaky_relu", dtype.name, kernel_name, op)
        be.launch1d(k, out.size, out.base_data, *(a.base_data for a in arrays), scalar(dtype.np, alpha))
    return cast(be, out, _F16, op) if half else out


def leaky_relu(features: Any, alpha: float, T: ok.DType, **attrs: Any) -> Any:
    return _leaky("LeakyRelu", "leaky_relu", [features], alpha, T)


def leaky_relu_grad(gradients: Any, features: Any, alpha: float, T: ok.DType, **attrs: Any) -> Any:
    if gradients.shape != features.shape:
        raise fail("LeakyReluGrad", f"gradients and features must have the same shape, got {list(gradients.shape)} "
                                    f"and {list(features.shape)}")
    return _leaky("LeakyReluGrad", "leaky_relu_grad", [gradients, features], alpha, T)


# Gelu and GeluGrad (opkernel's own ops): the exact form is the row below; the tanh
# approximation (the approximate attr) runs these specs instead, from the rows' checks.
# They use 0.5 * (1 + tanh(u)) = 1 / (1 + exp(-2u)) and 1 - tanh(u)^2 = 4 s(2u) s(-2u):
# tanh's few ulp next to -1 (PoCL's) made 1 + tanh(u) cancel to noise, amplified by the
# derivative's 0.134145 x^2 (x = -30 gave -1.7e-4 for 0, Gelu(-inf) -inf for NaN).  Past
# |x| = 25 the derivative's second term is exactly 0 (and x * x may overflow into it).
_GELU_U = "((b + b * b * b * (T)0.044715) * (T)0.79788456080286536)"
_GELU_TANH = Ew("Gelu", 1, {"f": "a / ((T)1 + exp((T)-2 * ((a + a * a * a * (T)0.044715) * (T)0.79788456080286536)))"},
                FLOATS, variant="Tanh")
_GELU_GRAD_TANH = Ew("GeluGrad", 2, {"f": f"a * ((T)1 / ((T)1 + exp((T)-2 * {_GELU_U})) + (fabs(b) >= (T)25 ? (T)0 : (T)2 * b * "
                                          f"((T)1 / ((T)1 + exp((T)-2 * {_GELU_U}))) * ((T)1 / ((T)1 + exp((T)2 * {_GELU_U}))) * "
                                          "(T)0.79788456080286536 * ((T)1 + (T)0.134145 * b * b)))"}, FLOATS, variant="Tanh")


def _gelu_check(approximate_spec: Ew) -> Check:
    def check(be: OpenCLBackend, dtype: str, xs: Sequence[Any], attrs: dict[str, Any]) -> Any:
        if approximate_spec.op == "GeluGrad":
            _same_shapes("GeluGrad", "features")(be, dtype, xs, attrs)
        if not attrs.get("approximate"):
            return None
        return run_half(be, approximate_spec, xs) if dtype == "float16" else run(be, approximate_spec, dtype, xs)

    return check


def add_n_kernel(spec: Ew) -> Callable[..., Any]:
    """AddN as a chain of contiguous adds (a fresh output each time: kernels never
    write into an input)."""

    def add_n(inputs: list[Any], T: ok.DType, **attrs: Any) -> Any:
        be = _backend()
        shape = inputs[0].shape
        for x in inputs[1:]:
            if x.shape != shape:
                raise fail("AddN", f"all inputs must have shape {list(shape)}, got {list(x.shape)}")
        half = T.name == "float16"
        xs = [cast(be, x, _F32, "AddN") for x in inputs] if half else list(inputs)
        dtype = "float32" if half else T.name
        if len(xs) == 1:
            acc = be.new_array(shape, xs[0].dtype)
            if acc.size:
                be.launch1d(be.programs.kernel("copy", "1", f"copy{xs[0].dtype.itemsize}", "AddN"), acc.size, acc.base_data, xs[0].base_data)
        else:
            acc = run(be, spec, dtype, xs[:2])
            for x in xs[2:]:
                if half:  # each partial sum is a half, as TensorFlow's in0 + in1 + ... in Eigen::half
                    acc = cast(be, cast(be, acc, _F16, "AddN"), _F32, "AddN")
                acc = run(be, spec, dtype, [acc, x])
        return cast(be, acc, _F16, "AddN") if half else acc

    return add_n


def bias_add_kernel(spec: Ew) -> Callable[..., Any]:
    def bias_add(value: Any, bias: Any, T: ok.DType, data_format: str, **attrs: Any) -> Any:
        be = _backend()
        if value.ndim < 2:
            raise fail("BiasAdd", f"input must be at least 2-D, got shape {list(value.shape)}")
        axis = 1 if data_format == "NCHW" else value.ndim - 1
        if bias.ndim != 1 or bias.shape[0] != value.shape[axis]:
            raise fail(
                "BiasAdd",
                f"bias must be 1-D with size the channel dimension of value ({value.shape[axis]}, "
                f"{data_format}), got shapes {list(value.shape)} and {list(bias.shape)}",
            )
        shape = [1] * value.ndim
        shape[axis] = bias.shape[0]
        xs = [value, be.view(bias, tuple(shape))]
        return run_half(be, spec, xs) if T.name == "float16" else run(be, spec, T.name, xs)

    return bias_add


class FillKernel(ok.OpKernel):
    """Fill, ZerosLike, OnesLike: one by-value scalar written everywhere."""

    def __init__(self, ctx: ok.OpKernelConstruction) -> None:
        self.be: OpenCLBackend = ctx.backend  # type: ignore[assignment]
        self.op = ctx.op_name
        self.dtype = ctx.get_attr("T")
        self.np = self.dtype.np

    def fill(self, shape: tuple[int, ...], value: Any) -> Any:
        out = self.be.new_array(shape, self.np)
        if out.size and (self.dtype.is_complex or self.dtype.name == "bfloat16"):
            # No OpenCL C type holds a complex number or a bfloat16: the value's bytes are
            # the fill pattern (2, 8 or 16 bytes, pattern sizes clEnqueueFillBuffer takes).
            pattern = np.full(1, value, self.np)
            with self.be.launch_lock:
                self.be.cl.enqueue_fill_buffer(self.be.queue, out.base_data, pattern, 0, out.nbytes)
        elif out.size:
            k = self.be.programs.kernel("fill", self.dtype.name, "fill", self.op)
            v = scalar(self.np, value)
            self.be.launch1d(k, out.size, out.base_data, np.float16(v).view(np.uint16) if self.np == _F16 else v)
        return out

    def compute(self, ctx: ok.OpKernelContext) -> None:
        if self.op == "Fill":
            dims_, value = ctx.inputs
            d = [int(v) for v in np.asarray(dims_).reshape(-1)]
            if np.ndim(dims_) != 1:
                raise fail("Fill", f"'dims' must be a vector, got shape {list(np.shape(dims_))}")
            if any(v < 0 for v in d):
                raise fail("Fill", f"dims must be non-negative, got {d}")
            if np.ndim(value) != 0 and np.shape(value) != (1,):      # TensorFlow's IsLegacyScalar
                raise fail("Fill", f"value must be a scalar (or a 1-element vector), got shape "
                                   f"{list(np.shape(value))}")
            ctx.set_output(0, self.fill(tuple(d), np.asarray(value).reshape(()).item()))
        else:
            ctx.set_output(0, self.fill(ctx.inputs[0].shape, 0 if self.op == "ZerosLike" else 1))


@family("fill", ALL + ("float16",))
def _fill_source(dtype: str) -> str:
    T = "ushort" if dtype == "float16" else ctype(ok.as_dtype(dtype))  # half travels as its bits
    return f"__kernel void fill(__global {T}* out, {T} v) {{ out[get_global_id(0)] = v; }}\n"


class CastKernel(ok.OpKernel):
    def __init__(self, ctx: ok.OpKernelConstruction) -> None:
        self.be: OpenCLBackend = ctx.backend  # type: ignore[assignment]
        src, dst = ctx.get_attr("SrcT"), ctx.get_attr("DstT")
        self.dst = dst.np
        if not self.be.supports_dtype(dst):
            raise fail("Cast", f"device {self.be.device_name!r} has no {dst.name}")
        self.k = self.be.programs.kernel("cast", src.name, f"to_{dst.name}", "Cast")
        bits = cast_truncation_bits(src, dst) if ctx.get_attr("Truncate") else 0
        # Truncate: the source's low significand bits zeroed first (TensorFlow's LSBZeroSetter).
        self.truncate = self.be.programs.kernel("cast", src.name, "truncate", "Cast") if bits else None
        word = np.uint64 if src.name == "float64" else np.uint32
        self.mask = word(((1 << (8 * np.dtype(word).itemsize)) - 1) ^ ((1 << bits) - 1))

    def compute(self, ctx: ok.OpKernelContext) -> None:
        x = ctx.inputs[0]
        out = self.be.new_array(x.shape, self.dst)
        if out.size:
            if self.truncate is not None:
                cut = self.be.new_array(x.shape, x.dtype)
                self.be.launch1d(self.truncate, out.size, cut.base_data, x.base_data, self.mask)
                x = cut
            self.be.launch1d(self.k, out.size, out.base_data, x.base_data)
        ctx.set_output(0, out)


CASTABLE = ALL + ("float16",)


@family("cast", CASTABLE)
def _cast_source(src: str) -> str:
    # half is only a storage type here: read with vload_half, written with vstore_half_rte.
    S = ctype(ok.as_dtype(src))
    load = "vload_half(i, x)" if src == "float16" else "x[i]"
    out = []
    for dst in CASTABLE:
        D = ctype(ok.as_dtype(dst))
        if dst == "float16":
            body = f"vstore_half_rte((float){load}, i, out);"
        elif dst == "bool":
            body = f"out[i] = {load} != 0;"
        elif src in FLOATS + ("float16",) and dst in INTS:
            # Saturating, NaN to 0 (a plain C cast of an out-of-range float is undefined;
            # PoCL's _sat conversions send NaN to the type's lowest value).
            body = f"out[i] = isnan({load}) ? ({D})0 : convert_{D}_sat_rtz({load});"
        else:
            body = f"out[i] = ({D}){load};"
        k = f"__kernel void to_{dst}(__global {D}* out, __global const {S}* x) {{ long i = get_global_id(0); {body} }}"
        out.append(f"#ifdef OK_FP64\n{k}\n#endif" if dst == "float64" else k)
    if src in FLOATS:  # Cast(Truncate=True): the low bits of each non-NaN value zeroed (LSBZeroSetter)
        W = "ulong" if src == "float64" else "uint"
        k = (f"__kernel void truncate(__global {W}* out, __global const {S}* x, {W} mask) {{ long i = get_global_id(0); "
             f"out[i] = isnan(x[i]) ? as_{W}(x[i]) : (as_{W}(x[i]) & mask); }}")
        out.append(f"#ifdef OK_FP64\n{k}\n#endif" if src == "float64" else k)
    return "\n".join(out) + "\n"


def cast(be: OpenCLBackend, x: Any, dst: np.dtype[Any], op: str) -> Any:
    """``x`` converted to ``dst`` (a new array)."""
    out = be.new_array(x.shape, dst)
    if out.size:
        k = be.programs.kernel("cast", ok.as_dtype(x.dtype).name, f"to_{ok.as_dtype(dst).name}", op)
        be.launch1d(k, out.size, out.base_data, x.base_data)
    return out


_F16, _F32 = np.dtype(np.float16), np.dtype(np.float32)


def float32_compute(fn: Any) -> Any:
    """A kernel function for float16 made from a float32 one: float16 inputs are
    widened, ``T`` (and every float16 attr) becomes float32, float32 outputs are
    narrowed back (TensorFlow's CPU kernels compute half in float32 too)."""

    def widen(v: Any, be: OpenCLBackend, op: str) -> Any:
        if isinstance(v, list):
            return [widen(x, be, op) for x in v]
        if getattr(v, "dtype", None) == _F16 and not isinstance(v, np.ndarray):
            return cast(be, v, _F32, op)
        return v

    def narrow(v: Any, be: OpenCLBackend, op: str) -> Any:
        if isinstance(v, (list, tuple)):
            return type(v)(narrow(x, be, op) for x in v)
        if getattr(v, "dtype", None) == _F32 and not isinstance(v, np.ndarray):
            return cast(be, v, _F16, op)
        return v

    def kernel(*args: Any, **attrs: Any) -> Any:
        halves = [k for k, v in attrs.items() if isinstance(v, ok.DType) and v.name == "float16"]
        if not halves:
            return fn(*args, **attrs)
        be: OpenCLBackend = ok.engine.backend_instance("opencl")  # type: ignore[assignment]
        op = getattr(fn, "__name__", "?")
        attrs = {**attrs, **{k: ok.float32 for k in halves}}
        return narrow(fn(*[widen(a, be, op) for a in args], **attrs), be, op)

    kernel.__name__ = getattr(fn, "__name__", "kernel")
    kernel.__module__ = getattr(fn, "__module__", __name__)
    kernel.__doc__ = fn.__doc__
    kernel._float32_of = fn  # type: ignore[attr-defined]  # see register_table
    return kernel


#: A kernel table's row: (op, kernel, type constraints, host-memory inputs).
KernelRow = tuple[str, Any, dict[str, list[str]] | None, tuple[str, ...]]


def register_table(table: list[KernelRow]) -> None:
    """Register each row's kernel for the OpenCL backend.  A ``float32_compute`` kernel whose
    ``T`` admits float16 becomes two: the wrapper for float16 alone, the function it wraps
    for the other types, which then skip the wrapper's scan of the attrs (about 1 µs a call)."""
    for op, fn, constraints, host in table:
        inner = getattr(fn, "_float32_of", None)
        types = (constraints or {}).get("T")
        if inner is not None and constraints is not None and types is not None and "float16" in types:
            others = [t for t in types if t != "float16"]
            if others:
                ok.register_kernel(op, backend="opencl", type_constraints={**constraints, "T": others}, host_memory=host)(inner)
            constraints = {**constraints, "T": ["float16"]}
        ok.register_kernel(op, backend="opencl", type_constraints=constraints, host_memory=host)(fn)


@family("copy", ("1",))
def _copy_source(_: str) -> str:
    types = {1: "uchar", 2: "ushort", 4: "uint", 8: "ulong"}
    return "\n".join(
        f"__kernel void copy{n}(__global {t}* restrict out, __global const {t}* restrict x) "
        "{ long i = get_global_id(0); out[i] = x[i]; }"
        for n, t in types.items()
    ) + "\n"


# ---------------------------------------------------------------- the table

_INT_HELPERS = """
inline T ok_floordiv(T a, T b) { T q = a / b; if ((a % b != 0) && ((a < 0) != (b < 0))) q -= 1; return q; }
inline T ok_floormod(T a, T b) {
  if ((T)-1 < 0 && b == (T)-1) return 0;  /* INT_MIN % -1 is undefined in C; the remainder is 0 */
  T r = a % b; if (r != 0 && ((r < 0) != (b < 0))) r += b; return r; }
inline T ok_ipow(T a, T b) { T r = 1; while (b > 0) { if (b & 1) r *= a; a *= a; b >>= 1; } return r; }
"""
FLOAT_HELPERS = """
inline T ok_floormod(T a, T b) { T r = fmod(a, b); if (r != 0 && ((r < 0) != (b < 0))) r += b; return r; }
inline T ok_sigmoid(T a) { T e = exp(-fabs(a)); return a >= 0 ? 1 / (1 + e) : e / (1 + e); }
inline T ok_softplus(T a) { return fmax(a, (T)0) + log1p(exp(-fabs(a))); }
"""

_SELU_SCALE, _SELU_ALPHA = 1.0507009873554804934193349852946, 1.6732632423543772848170429916717

#: The floating-point expressions of the activations FusedMatMul applies (shared with their own ops).
ACTIVATIONS = {
    "Identity": "a",
    # "a <= 0 ? 0 : a", not "a > 0 ? a : 0": a nan passes through, as numpy's maximum keeps it;
    # <=, not <: TensorFlow's Relu and Relu6 of -0.0 are +0.0.
    "Relu": "a <= 0 ? (T)0 : a",
    "Relu6": "a <= 0 ? (T)0 : (a > 6 ? (T)6 : a)",
    "Elu": "a > 0 ? a : expm1(a)",
    "Sigmoid": "ok_sigmoid(a)",
    # PoCL's float tanh stops at 1 - 2**-24, even at inf; past 9.1 (19.1 for double) the
    # correctly rounded tanh is +-1.
    "Tanh": "fabs(a) > (T)(sizeof(T) == 8 ? 19.1 : 9.1) ? copysign((T)1, a) : tanh(a)",
}


def _table() -> list[tuple[Ew, Any]]:
    """(spec, extra): extra is None, a ``Check`` run before the launch, or a factory
    of the op's own kernel function (AddN, BiasAdd)."""
    arith = FLOATS + INTS
    E = None  # a plain elementwise op
    rows: list[tuple[Ew, Any]] = [
        (Ew("Add", 2, {"*": "a + b"}, arith), E),
        (Ew("Sub", 2, {"*": "a - b"}, arith), E),
        (Ew("Mul", 2, {"*": "a * b"}, arith), E),
        (Ew("RealDiv", 2, {"*": "a / b"}, arith), _division("RealDiv")),
        (Ew("FloorDiv", 2, {"f": "floor(a / b)", "i": "ok_floordiv(a, b)"}, arith), _division("FloorDiv")),
        (Ew("FloorMod", 2, {"f": "ok_floormod(a, b)", "i": "ok_floormod(a, b)"}, arith), _division("FloorMod")),
        (Ew("Pow", 2, {"f": "pow(a, b)", "i": "ok_ipow(a, b)"}, arith), check_pow),
        (Ew("Maximum", 2, {"f": "(a >= b || OK_ISNAN(a)) ? a : b", "i": "a >= b ? a : b"}, REALS), E),
        (Ew("Minimum", 2, {"f": "(a <= b || OK_ISNAN(a)) ? a : b", "i": "a <= b ? a : b"}, REALS), E),
        (Ew("Neg", 1, {"*": "-a"}, FLOATS + SIGNED), E),
        (Ew("Abs", 1, {"f": "fabs(a)", "i": "a < 0 ? -a : a"}, FLOATS + SIGNED), E),
        (Ew("Sign", 1, {"f": "OK_ISNAN(a) ? a : (T)((a > 0) - (a < 0))", "i": "(a > 0) - (a < 0)"}, FLOATS + SIGNED), E),
        (Ew("Square", 1, {"*": "a * a"}, FLOATS + INTS), E),
        (Ew("Exp", 1, {"f": "exp(a)"}, FLOATS), E),
        (Ew("Log", 1, {"f": "log(a)"}, FLOATS), E),
        (Ew("Log1p", 1, {"f": "log1p(a)"}, FLOATS), E),
        (Ew("Sqrt", 1, {"f": "sqrt(a)"}, FLOATS), E),
        (Ew("Rsqrt", 1, {"f": "1 / sqrt(a)"}, FLOATS), E),
        (Ew("Sin", 1, {"f": "sin(a)"}, FLOATS), E),
        (Ew("Cos", 1, {"f": "cos(a)"}, FLOATS), E),
        (Ew("Tanh", 1, {"f": ACTIVATIONS["Tanh"]}, FLOATS), E),
        (Ew("Sigmoid", 1, {"f": ACTIVATIONS["Sigmoid"]}, FLOATS), E),
        (Ew("Erf", 1, {"f": "erf(a)"}, FLOATS), E),
        (Ew("Floor", 1, {"f": "floor(a)"}, FLOATS), E),
        (Ew("Ceil", 1, {"f": "ceil(a)"}, FLOATS), E),
        (Ew("Expm1", 1, {"f": "expm1(a)"}, FLOATS), E),
        (Ew("Sinh", 1, {"f": "sinh(a)"}, FLOATS), E),
        (Ew("Cosh", 1, {"f": "cosh(a)"}, FLOATS), E),
        (Ew("Atan", 1, {"f": "atan(a)"}, FLOATS), E),
        (Ew("Tan", 1, {"f": "tan(a)"}, FLOATS), E),
        (Ew("Asin", 1, {"f": "asin(a)"}, FLOATS), E),
        (Ew("Acos", 1, {"f": "acos(a)"}, FLOATS), E),
        (Ew("Asinh", 1, {"f": "asinh(a)"}, FLOATS), E),
        (Ew("Acosh", 1, {"f": "acosh(a)"}, FLOATS), E),
        (Ew("Atanh", 1, {"f": "atanh(a)"}, FLOATS), E),
        (Ew("Reciprocal", 1, {"f": "(T)1 / a"}, FLOATS), E),
        # rint: halves to even, as TensorFlow's Round; integers are whole already
        (Ew("Round", 1, {"f": "rint(a)", "i": "a"}, FLOATS + ("int32", "int64")), E),
        # comparisons, not the builtins: see OK_ISNAN
        (Ew("IsNan", 1, {"f": "OK_ISNAN(a)"}, FLOATS, out="bool"), E),
        (Ew("IsInf", 1, {"f": "a == (T)INFINITY || a == -(T)INFINITY"}, FLOATS, out="bool"), E),
        (Ew("IsFinite", 1, {"f": "!OK_ISNAN(a) && a != (T)INFINITY && a != -(T)INFINITY"}, FLOATS, out="bool"), E),
        (Ew("Atan2", 2, {"f": "atan2(a, b)"}, FLOATS), E),
        (Ew("SquaredDifference", 2, {"*": "(a - b) * (a - b)"}, FLOATS + ("int32", "int64")), E),
        (Ew("Equal", 2, {"*": "a == b"}, ALL, out="bool"), _equality("Equal")),
        (Ew("NotEqual", 2, {"*": "a != b"}, ALL, out="bool"), _equality("NotEqual")),
        (Ew("Less", 2, {"*": "a < b"}, REALS, out="bool"), E),
        (Ew("LessEqual", 2, {"*": "a <= b"}, REALS, out="bool"), E),
        (Ew("Greater", 2, {"*": "a > b"}, REALS, out="bool"), E),
        (Ew("GreaterEqual", 2, {"*": "a >= b"}, REALS, out="bool"), E),
        (Ew("LogicalAnd", 2, {"*": "a && b"}, ("bool",), type_attr=None, fixed_input="bool"), E),
        (Ew("LogicalOr", 2, {"*": "a || b"}, ("bool",), type_attr=None, fixed_input="bool"), E),
        (Ew("LogicalNot", 1, {"*": "!a"}, ("bool",), type_attr=None, fixed_input="bool"), E),
        (Ew("BitwiseAnd", 2, {"i": "a & b"}, INTS), E),
        (Ew("BitwiseOr", 2, {"i": "a | b"}, INTS), E),
        (Ew("BitwiseXor", 2, {"i": "a ^ b"}, INTS), E),
        (SELECT, check_select),
        (Ew("SelectV2", 3, {"*": "a ? b : c"}, ALL), check_select_v2),
        # TensorFlow's std::max(std::min(a, c), b): a NaN in t stays, a NaN bound is ignored.
        (Ew("ClipByValue", 3, {"*": "((c < a ? c : a) < b) ? b : (c < a ? c : a)"}, REALS), check_clip),
        (Ew("AddN", 2, {"*": "a + b"}, arith), add_n_kernel),
        (Ew("BiasAdd", 2, {"*": "a + b"}, arith), bias_add_kernel),
        (Ew("Relu", 1, {"*": ACTIVATIONS["Relu"]}, REALS), E),
        (Ew("ReluGrad", 2, {"*": "a * (T)(b > 0)"}, REALS), check_relu_grad),
        (Ew("Relu6", 1, {"*": ACTIVATIONS["Relu6"]}, REALS), E),
        (Ew("Elu", 1, {"f": ACTIVATIONS["Elu"]}, FLOATS), E),
        # a select, as TensorFlow's: an infinite gradient where the output is -1 gives NaN (inf * 0)
        (Ew("EluGrad", 2, {"f": "b < 0 ? a * (b + 1) : a"}, FLOATS), _same_shapes("EluGrad", "outputs")),
        (Ew("Softplus", 1, {"f": "ok_softplus(a)"}, FLOATS), E),
        (Ew("Gelu", 1, {"f": "a * (T)0.5 * (erf(a * (T)0.70710678118654752) + (T)1)"}, FLOATS), _gelu_check(_GELU_TANH)),
        # where x is infinite the density term is 0 (the derivative's limit), not inf * 0
        (Ew("GeluGrad", 2, {"f": "a * ((T)0.5 * (erf(b * (T)0.70710678118654752) + (T)1) + (isinf(b) ? (T)0 : "
                                 "b * exp((T)-0.5 * b * b) * (T)0.39894228040143268))"}, FLOATS),
         _gelu_check(_GELU_GRAD_TANH)),
    ]
    rows.append((Ew("Selu", 1, {d: f"a > 0 ? {literal(_SELU_SCALE, d)} * a : {literal(_SELU_SCALE * _SELU_ALPHA, d)} * expm1(a)" for d in FLOATS}, FLOATS), E))
    return rows


_ROWS = _table()


def spec_of(op: str) -> Ew:
    """The elementwise spec of ``op`` (Maximum, Add, ...), for kernels that run one."""
    return next(spec for spec, _ in _ROWS if spec.op == op)


def _declare(spec: Ew) -> None:
    family(spec.family, spec.dtypes)(functools.partial(render, spec))


for _spec, _ in _ROWS:
    _declare(_spec)
_declare(_GELU_TANH)
_declare(_GELU_GRAD_TANH)

#: The specs by op name (a kernel that composes others: float16 FloorDiv).
_SPECS = {_spec.op: _spec for _spec, _ in _ROWS}


def register_all() -> None:
    """(op, kernel, type constraints, host-memory args), one row per kernel."""
    table: list[KernelRow] = []
    for spec, extra in _ROWS:
        types = list(spec.dtypes) + (["float16"] if "float32" in spec.dtypes else [])
        constraints = {spec.type_attr: types} if spec.type_attr else None
        if extra in (add_n_kernel, bias_add_kernel):
            fn = extra(spec)
        else:
            fn = elementwise_kernel(spec, extra)
            if extra is None:
                fn.ew = spec  # type: ignore[attr-defined]  # its expression, for fused groups (_Fuser)
        table.append((spec.op, fn, constraints, ()))
    table += [
        ("LeakyRelu", leaky_relu, {"T": list(FLOATS) + ["float16"]}, ()),
        ("LeakyReluGrad", leaky_relu_grad, {"T": list(FLOATS) + ["float16"]}, ()),
        ("Cast", CastKernel, {"SrcT": list(CASTABLE), "DstT": list(CASTABLE)}, ()),
        ("Fill", FillKernel, {"T": list(CASTABLE) + ["complex64", "complex128", "bfloat16"]}, ("dims", "value")),
        ("ZerosLike", FillKernel, {"T": list(CASTABLE) + ["complex64", "complex128", "bfloat16"]}, ()),
        ("OnesLike", FillKernel, {"T": list(CASTABLE) + ["complex64", "complex128", "bfloat16"]}, ()),
    ]
    register_table(table)



# ---------------------------------------------------------------- fused groups (ok.function)


class _Fuser:
    """The backend's ``fusable`` and ``fuse_elementwise`` (installed on OpenCLBackend below,
    the layer under this one): a group of elementwise nodes of a traced graph becomes one
    generated kernel, one work-item per element, each node's expression (the one its own
    kernel runs) evaluated in turn on values held in registers, the inputs read through
    their broadcast layouts (constants baked into the source) and only the group's
    outputs written.  Built through the program cache (verified on disk, as every
    program).  float32, and float64 on devices that have it; ops without a check."""

    @staticmethod
    def fusable(be: OpenCLBackend, kernel: Any, dtype: ok.DType) -> bool:
        spec = getattr(kernel, "ew", None)
        return (isinstance(spec, Ew) and spec.out is None and spec.arity in (1, 2) and dtype.name in spec.dtypes
                and (dtype.name == "float32" or (dtype.name == "float64" and be.fp64)))

    @staticmethod
    def compile(be: OpenCLBackend, program: Any) -> Callable[..., tuple[Any, ...]] | None:
        specs = [getattr(kernel, "ew", None) for kernel, _ in program.instructions]
        size = int(np.prod(program.shape))
        if not all(isinstance(s, Ew) for s in specs) or size >= 1 << 31:
            return None
        src = fused_source(program, typing.cast("list[Ew]", specs))
        try:
            prg = be.programs.build_source(PRELUDE + src, "-DOK_FP64" if be.fp64 else "",
                                           f"fused[{'+'.join(program.ops)}]", "Fused")
        except ProgramBuildError:
            return None  # the nodes run one by one, as their own kernels
        kernel = be.cl.Kernel(prg, "fused")
        shape, npdt, n_out = program.shape, program.dtype.np, len(program.outputs)

        def run(*arrays: Any) -> tuple[Any, ...]:
            outs = tuple(be.new_array(shape, npdt) for _ in range(n_out))
            be.launch1d(kernel, size, *[o.base_data for o in outs], *[a.base_data for a in arrays])
            return outs

        return run


def fused_source(program: Any, specs: Sequence[Ew]) -> str:
    """The OpenCL C of a fused group (``ElementwiseProgram``): kernel ``fused(o0, ..., x0, ...)``."""
    dtype = program.dtype.name
    T = ctype(program.dtype)
    n_in = len(program.layouts)
    size = int(np.prod(program.shape))
    params = [f"__global T* restrict o{j}" for j in range(len(program.outputs))]
    params += [f"__global const T* restrict x{k}" for k in range(n_in)]
    # A long index for the contiguous loads and stores: with an int one, Intel's CPU runtime
    # does not see them as contiguous (a float Add of 2^19 elements ran 5-7x slower).
    body = ["  long gi = get_global_id(0); int i = (int)gi;"]
    for k, (inner, mod) in enumerate(program.layouts):
        if inner == 1 and mod == size:
            index = "gi"
        elif mod == 1:
            index = "0"
        elif inner == 1:
            index = f"i % {mod}"
        else:
            index = f"(i / {inner}) % {mod}"
        body.append(f"  T s{k} = x{k}[{index}];")
    for k, (spec, (_, sources)) in enumerate(zip(specs, program.instructions)):
        binds = " ".join(f"T {_VARS[j]} = s{s};" for j, s in enumerate(sources))
        body.append(f"  T s{n_in + k}; {{ {binds} s{n_in + k} = (T)({spec.expr(dtype)}); }}")
    body += [f"  o{j}[gi] = s{slot};" for j, slot in enumerate(program.outputs)]
    return (f"#define T {T}\n#define R {T}\n{FLOAT_HELPERS}\n__kernel void fused({', '.join(params)}) {{\n"
            + "\n".join(body) + "\n}\n#undef T\n#undef R\n")


OpenCLBackend.fuser = _Fuser
