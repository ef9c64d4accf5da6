"""Kernel calls: how a selected kernel becomes a call that takes tensors and gives
tensors — the layout of an op's inputs and outputs, the kernel's arguments, the
generated fast call of a function kernel, error translation, output wrapping and
tape recording (``Signature``).

Below kernel selection (``_selection``), which builds signatures from these parts.
"""

from __future__ import annotations

import copy
import inspect
import keyword
import math
from collections import namedtuple
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from ._context import ACTIVE
from .autodiff import RECORDING, record_op, record_single
from .backend import Backend
from .dtypes import DType
from .errors import InvalidArgumentError, KernelNotFoundError, OpkernelError, ResourceExhaustedError
from .kernels import KernelDef, OpKernelConstruction, OpKernelContext
from .op_registry import ArgDef, OpDef
from .tensor import Tensor, Variable, update_lock

# ---------------------------------------------------------------- dispatch

class Signature:
    """Everything about one call signature that is worth computing once.

    ``call(*tensors)`` runs the whole call for tensors already on the backend:
    the kernel, output wrapping, tape recording and error translation.
    """

    __slots__ = ("run", "out_dtypes", "pack", "kernel", "op_def", "attrs", "backend", "call", "refs")

    def __init__(
        self, run: Callable[[list[Any]], list[Any]], out_dtypes: list[DType], pack: Callable[[list[Tensor]], Any],
        kernel: KernelDef, op_def: OpDef, attrs: dict[str, Any], backend: Backend,
    ) -> None:
        self.run = run
        self.out_dtypes = out_dtypes
        self.pack = pack
        self.kernel = kernel
        self.op_def = op_def
        self.attrs = attrs
        self.backend = backend
        self.call: Callable[..., Any] = self._call
        #: Flat positions of Ref inputs (a list input counts its length): the call makes
        #: those Variables' memory private first and bumps their versions.
        self.refs = (
            [i for i, a in enumerate(op_def.inputs) if a.is_ref] if not any(a.is_list for a in op_def.inputs)
            else [
                i for i, is_ref in enumerate(
                    a.is_ref for a, n in zip(op_def.inputs, input_lengths(op_def, attrs)) for _ in range(1 if n is None else n)
                ) if is_ref
            ]
        )

    def _call(self, *inputs: Tensor) -> Any:
        if not self.refs:
            return _finish(self, self.backend, self._run_translated([x._value for x in inputs]), inputs)
        with update_lock(*[inputs[i] for i in self.refs]):  # type: ignore[arg-type]  # Ref inputs are Variables
            for i in self.refs:
                inputs[i]._unshare()  # type: ignore[attr-defined]
            flat = [x._value for x in inputs]
            outs = self._run_translated(flat)
            for i in self.refs:
                if flat[i] is not inputs[i]._value:  # a generic kernel's update ran on a fallback backend
                    inputs[i]._value = flat[i]
                inputs[i]._version += 1  # type: ignore[attr-defined]
        return _finish(self, self.backend, outs, inputs)

    def _run_translated(self, flat: list[Any]) -> list[Any]:
        try:
            return self.run(flat)
        except Exception as e:
            mapped = translated(e, self.backend, self.op_def.name)
            if mapped is e:
                raise
            raise mapped from e


def translated(error: Exception, be: Backend, op: str) -> Exception:
    """The backend's opkernel error for a native failure, or the error itself; a
    MemoryError the backend leaves alone (numpy's) becomes a ResourceExhaustedError.
    An opkernel error that names no op (a backend helper's, such as an allocation's)
    gets the op's name."""
    if isinstance(error, OpkernelError):
        return error if error.op is not None else named_error(error, op)
    mapped = be.translate_error(error, op)
    if mapped is None and isinstance(error, MemoryError):
        return _out_of_memory(error, be, op)
    return mapped or error


def named_error(error: OpkernelError, op: str) -> OpkernelError:
    """A copy of ``error`` (same class and context) for ``op``, its message led by the op."""
    named = copy.copy(error)
    named.op = op
    if f"'{op}'" not in error.message:
        named.message = f"op {op!r}: {error.message}"
        named.args = (named.message,)
    return named


def _out_of_memory(error: MemoryError, be: Backend, op: str) -> ResourceExhaustedError:
    """The error for a kernel that ran out of memory; numpy's says what it asked for."""
    shape, dtype = getattr(error, "shape", None), getattr(error, "dtype", None)
    requested: int | None = None
    try:
        if shape is not None and dtype is not None:
            requested = math.prod(int(d) for d in shape) * np.dtype(dtype).itemsize
    except (TypeError, ValueError):
        requested = None
    amount = f"{requested} bytes ({requested / 2**20:.1f} MiB)" if requested is not None else "memory"
    return ResourceExhaustedError(
        f"op {op!r}: out of memory on backend {be.name!r} allocating {amount}: {error}",
        op=op, backend=be.name, requested_bytes=requested,
    )


def _finish(sig: Signature, be: Backend, outs: list[Any], inputs: Sequence[Tensor]) -> Any:
    conv = be.as_output
    tensors = [Tensor(conv(v, dt), dt, be) for v, dt in zip(outs, sig.out_dtypes)]
    if RECORDING[0]:
        record_op(sig.op_def, sig.attrs, inputs, tensors)
    return sig.pack(tensors)


def _hashable(value: Any) -> Any:
    if isinstance(value, np.ndarray):
        return (value.dtype.str, value.shape, value.tobytes())
    if isinstance(value, (list, tuple)):
        return tuple(_hashable(v) for v in value)
    return value


def hashable_items(attrs: Mapping[str, Any]) -> tuple[Any, ...]:
    return tuple((k, _hashable(v)) for k, v in sorted(attrs.items()))


def expected_dtype(arg: ArgDef, index: int, bound: Mapping[str, Any]) -> DType:
    """The dtype of item ``index`` of input or output ``arg`` under the bound attrs."""
    if arg.dtype is not None:
        return arg.dtype
    if arg.type_list_attr:
        return bound[arg.type_list_attr][index]  # type: ignore[no-any-return]
    return bound[arg.type_attr]  # type: ignore[no-any-return,index]


#: Output lists longer than this are checked against the host's memory before anything is made.
_MANY_OUTPUTS = 1 << 16


def output_dtypes(op_def: OpDef, attrs: Mapping[str, Any]) -> tuple[list[DType], list[int | None]]:
    """Flat output dtypes, and per output arg its list length (None for a single tensor)."""
    flat: list[DType] = []
    lengths: list[int | None] = []
    for arg in op_def.outputs:
        if arg.type_list_attr:
            dts = list(attrs[arg.type_list_attr])
            lengths.append(len(dts))
        elif arg.number_attr:
            n = int(attrs[arg.number_attr])
            if n > _MANY_OUTPUTS:
                from ._bounds import check_output_count  # not imported with opkernel: rarely needed

                check_output_count(op_def.name, arg.number_attr, n)
            dts = [expected_dtype(arg, 0, attrs)] * n
            lengths.append(n)
        else:
            dts = [expected_dtype(arg, 0, attrs)]
            lengths.append(None)
        flat.extend(dts)
    return flat, lengths


result_types: dict[str, Any] = {}


def packer(op_def: OpDef, lengths: list[int | None]) -> Callable[[list[Tensor]], Any]:
    if lengths == [None]:
        return lambda outs: outs[0]
    if not lengths:
        return lambda outs: None
    if len(lengths) == 1:  # a single list output is returned as a plain list, as TensorFlow's API does
        return lambda outs: list(outs)
    names = tuple(a.name for a in op_def.outputs)
    rt = result_types.get(op_def.name)
    if rt is None or rt._fields != names:
        rt = result_types[op_def.name] = namedtuple(op_def.name.replace(">", "_"), names, rename=True)

    def pack(outs: list[Tensor]) -> Any:
        parts: list[Any] = []
        pos = 0
        for n in lengths:
            if n is None:
                parts.append(outs[pos])
                pos += 1
            else:
                parts.append(outs[pos : pos + n])
                pos += n
        return rt(*parts)

    return pack


def group_flat(op_def: OpDef, flat: list[Any], lengths: list[int | None]) -> list[Any]:
    out: list[Any] = []
    pos = 0
    for n in lengths:
        if n is None:
            out.append(flat[pos])
            pos += 1
        else:
            out.append(list(flat[pos : pos + n]))
            pos += n
    return out


def input_lengths(op_def: OpDef, attrs: Mapping[str, Any]) -> list[int | None]:
    lengths: list[int | None] = []
    for arg in op_def.inputs:
        if arg.type_list_attr:
            lengths.append(len(attrs[arg.type_list_attr]))
        elif arg.number_attr:
            lengths.append(int(attrs[arg.number_attr]))
        else:
            lengths.append(None)
    return lengths


def flatten_outputs(op_def: OpDef, result: Any, lengths: list[int | None]) -> list[Any]:
    if lengths == [None]:
        return [result]
    if not lengths:
        return []
    if len(lengths) == 1:  # a kernel of an op whose only output is a list returns that list
        result = (result,)
    if not isinstance(result, (tuple, list)) or len(result) != len(lengths):
        raise InvalidArgumentError(
            f"op {op_def.name!r}: kernel must return {len(lengths)} values "
            f"({', '.join(a.name for a in op_def.outputs)}), got {type(result).__name__}",
            op=op_def.name,
        )
    flat: list[Any] = []
    for value, n in zip(result, lengths):
        if n is None:
            flat.append(value)
        else:
            if len(value) != n:
                raise InvalidArgumentError(f"op {op_def.name!r}: kernel returned {len(value)} tensors for a list output of {n}", op=op_def.name)
            flat.extend(value)
    return flat

def host_positions(op_def: OpDef, kdef: KernelDef, in_lengths: list[int | None]) -> list[int]:
    positions: list[int] = []
    pos = 0
    for arg, n in zip(op_def.inputs, in_lengths):
        width = 1 if n is None else n
        if arg.name in kdef.host_memory:
            positions.extend(range(pos, pos + width))
        pos += width
    return positions


def invoker(
    op_def: OpDef, kdef: KernelDef, attrs: dict[str, Any], be: Backend,
    out_dtypes: list[DType], in_lengths: list[int | None], out_lengths: list[int | None],
) -> Callable[[list[Any]], list[Any]]:
    host = [] if be.host_memory_is_native else host_positions(op_def, kdef, in_lengths)
    simple_inputs = all(n is None for n in in_lengths)

    def on_host(flat: list[Any]) -> list[Any]:
        if host:
            flat = list(flat)
            for i in host:  # a literal's array (engine._with_literals) is passed as it is
                if type(flat[i]) is not np.ndarray:
                    flat[i] = be.to_numpy(flat[i])
        return flat

    def prepare(flat: list[Any]) -> list[Any]:
        flat = on_host(flat)
        return flat if simple_inputs else group_flat(op_def, flat, in_lengths)

    if kdef.is_class:
        kernel = kdef.impl(OpKernelConstruction(op_def, attrs, be))

        def run_class(flat: list[Any]) -> list[Any]:
            # A class kernel reads its inputs by flat index (TensorFlow's ctx->input(i)),
            # a list input's tensors one by one.
            ctx = OpKernelContext(op_def, attrs, be, on_host(flat) if host else flat, out_dtypes)
            kernel.compute(ctx)
            if ctx.status is not None:  # ctx.set_status: the kernel failed the call
                raise ctx.status
            return ctx.outputs

        return run_class
    fn = kdef.impl
    if kdef.is_generic:
        in_dtypes = [dt for arg, n in zip(op_def.inputs, in_lengths) for dt in arg_dtypes(arg, n, attrs)]
        makers = [
            Variable._view if arg.is_ref else Tensor
            for arg, n in zip(op_def.inputs, in_lengths)
            for _ in range(1 if n is None else n)
        ]

        generic_kw = kernel_kwargs(fn, attrs)  # as a function kernel: the attrs it names
        ref_positions = [i for i, make in enumerate(makers) if make is not Tensor]

        def run_generic(flat: list[Any]) -> list[Any]:
            tensors = [make(v, dt, be) for make, v, dt in zip(makers, flat, in_dtypes)]
            grouped = tensors if simple_inputs else group_flat(op_def, tensors, in_lengths)
            token = ACTIVE.set(be)
            try:
                result = fn(*grouped, **generic_kw)
            except KernelNotFoundError as e:
                if e.op == op_def.name:
                    raise
                raise KernelNotFoundError(
                    f"op {op_def.name!r} runs its generic kernel on backend {be.name!r} (no kernel of its own "
                    f"matches), which is composed of other ops, and op {e.op!r} has no kernel there: {e}",
                    op=op_def.name, backend=be.name,
                ) from e
            finally:
                ACTIVE.reset(token)
            for i in ref_positions:
                if tensors[i]._value is not flat[i]:  # updated on a fallback backend: the new value goes back
                    flat[i] = tensors[i]._value
            outs = flatten_outputs(op_def, result, out_lengths)
            return [o._value if isinstance(o, Tensor) else o for o in outs]

        return run_generic
    kw = kernel_kwargs(fn, attrs)
    if simple_inputs and not host and out_lengths == [None]:
        return lambda flat: [fn(*flat, **kw)]
    return lambda flat: flatten_outputs(op_def, fn(*prepare(flat), **kw), out_lengths)


def kernel_kwargs(fn: Callable[..., Any], attrs: Mapping[str, Any]) -> dict[str, Any]:
    """The attrs a function kernel receives: all of them if it takes ``**kwargs``, else
    the ones it names; a callable without an inspectable signature (a numpy ufunc
    registered directly) receives none.  Decided once per signature."""
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return {}
    if any(p.kind is p.VAR_KEYWORD for p in params):
        return dict(attrs)
    names = {p.name for p in params if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)}
    return {k: v for k, v in attrs.items() if k in names}


def _positional_attrs(fn: Callable[..., Any], n_inputs: int, kw: dict[str, Any]) -> tuple[Any, ...] | None:
    """``kw``'s values in order when they are exactly the plain parameters that follow
    the ``n_inputs`` inputs of ``fn`` (``mat_mul(a, b, transpose_a, transpose_b)``):
    a positional call is cheaper than one unpacking a dict.  None otherwise."""
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return None
    rest = params[n_inputs:]
    if len(rest) != len(kw) or any(p.kind is not p.POSITIONAL_OR_KEYWORD or p.name not in kw for p in rest):
        return None
    if any(p.kind is not p.POSITIONAL_OR_KEYWORD for p in params[:n_inputs]):
        return None
    return tuple(kw[p.name] for p in rest)


def raise_translated(error: Exception, be: Backend, op: str) -> None:
    """Raise ``translated(error)``, chained to ``error`` (or ``error`` itself)."""
    mapped = translated(error, be, op)
    if mapped is error:
        raise error
    raise mapped from error


_FAST_CALL = """
def call({params}):
    try:
        v = fn({args})
    except Exception as e:
        raise_translated(e, be, name)
    if type(v) is not native or getattr(v, "dtype", None) is not npdt:
        return wrap(v, ({inputs}))
    t = Tensor(v, dt, be)
    if RECORDING[0]:
        record_single(op_def, attrs, ({inputs}), t)
    return t
"""


def _compiled_call(fn: Callable[..., Any], n_inputs: int, kw: dict[str, Any], env: dict[str, Any]) -> Callable[..., Tensor]:
    """The fast call of a function kernel with ``n_inputs`` single-tensor inputs, compiled
    with its attrs written into the kernel call: positionally when they are the plain
    parameters after the inputs (``mat_mul(a, b, transpose_a, transpose_b)``), else as
    keyword arguments.  A call spreading a tuple or dict (``fn(a, b, *extra)``,
    ``fn(a, b, **kw)``) takes CPython's generic call path: 0.45 us more on a 4x4 MatMul.
    ``env`` holds the template's other names; its ``wrap`` covers outputs that need
    converting, while the common case is written out inline, one Python call less."""
    namespace: dict[str, Any] = dict(env, fn=fn, Tensor=Tensor, RECORDING=RECORDING, record_single=record_single,
                                     raise_translated=raise_translated)
    params = [f"x{i}" for i in range(n_inputs)]
    args = [f"{p}._value" for p in params]
    extra = _positional_attrs(fn, n_inputs, kw) if kw else ()
    if extra is not None:
        namespace.update({f"_e{i}": v for i, v in enumerate(extra)})
        args += [f"_e{i}" for i in range(len(extra))]
    elif all(k.isidentifier() and not keyword.iskeyword(k) for k in kw):
        namespace.update({f"_k_{k}": v for k, v in kw.items()})
        args += [f"{k}=_k_{k}" for k in kw]
    else:
        namespace["_kw"] = kw
        args.append("**_kw")
    inputs = "".join(f"{p}, " for p in params)  # a tuple expression, () for none
    source = _FAST_CALL.format(params=", ".join(params), inputs=inputs, args=", ".join(args))
    exec(compile(source, f"<opkernel fast call {namespace['name']}>", "exec"), namespace)
    call: Callable[..., Tensor] = namespace["call"]
    return call


def fast_call(sig: Signature, kdef: KernelDef, in_lengths: list[int | None], out_lengths: list[int | None]) -> Callable[..., Any] | None:
    """A compiled function running the whole call for the common case — a function kernel, single
    tensors in, one tensor out, nothing in host memory — with no per-call work beyond
    the kernel, the output check and the tape check."""
    if (
        kdef.is_class or kdef.is_generic or (kdef.host_memory and not sig.backend.host_memory_is_native)
        or not out_lengths or any(n is not None for n in in_lengths + out_lengths)
    ):
        return None
    fn, be, op_def, attrs = kdef.impl, sig.backend, sig.op_def, sig.attrs
    kw = kernel_kwargs(fn, attrs)
    if len(out_lengths) > 1 or sig.refs:
        return _fast_multi_call(sig, fn, kw)
    dt = sig.out_dtypes[0]
    native: Any = (be.array_types or (None,))[0]
    npdt, conv, name = dt.np, be.as_output, op_def.name

    def wrap(v: Any, inputs: tuple[Tensor, ...]) -> Tensor:
        if type(v) is not native or getattr(v, "dtype", None) is not npdt:
            v = conv(v, dt)
        t = Tensor(v, dt, be)
        if RECORDING[0]:
            record_single(op_def, attrs, inputs, t)
        return t

    env = dict(wrap=wrap, dt=dt, be=be, name=name, native=native, npdt=npdt, op_def=op_def, attrs=attrs)
    return _compiled_call(fn, len(in_lengths), kw, env)


def _fast_multi_call(sig: Signature, fn: Callable[..., Any], kw: dict[str, Any]) -> Callable[..., Any]:
    """``fast_call`` for an op with several single-tensor outputs (a kernel returning a
    tuple) or with Ref inputs (whose Variables' versions each call bumps): one output
    with Refs, several without (``_fast_tuple_call``), or several with Refs."""
    be, op_def, attrs, out_dtypes, pack, name = sig.backend, sig.op_def, sig.attrs, sig.out_dtypes, sig.pack, sig.op_def.name
    conv, n, refs = be.as_output, len(sig.out_dtypes), sig.refs
    if n > 1 and not refs:
        return _fast_tuple_call(sig, fn, kw)
    if n == 1:  # an in-place update (ApplyGradientDescent, AssignAdd): one output, Refs bumped
        dt = out_dtypes[0]
        npdt = dt.np
        native: Any = (be.array_types or (None,))[0]

        def call_ref(*xs: Tensor) -> Any:
            with update_lock(*[xs[i] for i in refs]):  # type: ignore[arg-type]  # Ref inputs are Variables
                for i in refs:
                    xs[i]._unshare()  # type: ignore[attr-defined]
                try:
                    v: Any = fn(*[x._value for x in xs], **kw)
                except Exception as e:
                    raise_translated(e, be, name)
                for i in refs:
                    xs[i]._version += 1  # type: ignore[attr-defined]
            t = Tensor(v if type(v) is native and v.dtype is npdt else conv(v, dt), dt, be)
            if RECORDING[0]:
                record_op(op_def, attrs, xs, (t,))
            return t

        return call_ref

    def call(*xs: Tensor) -> Any:
        with update_lock(*[xs[i] for i in refs]):  # type: ignore[arg-type]  # Ref inputs are Variables
            for i in refs:
                xs[i]._unshare()  # type: ignore[attr-defined]
            try:
                result: Any = fn(*[x._value for x in xs], **kw)
            except Exception as e:
                raise_translated(e, be, name)
            for i in refs:
                xs[i]._version += 1  # type: ignore[attr-defined]
        if not isinstance(result, (tuple, list)) or len(result) != n:
            flatten_outputs(op_def, result, [None] * n)  # raises the kernel-contract error
        outs = [Tensor(conv(v, dt), dt, be) for v, dt in zip(result, out_dtypes)]
        if RECORDING[0]:
            record_op(op_def, attrs, xs, outs)
        return pack(outs)

    return call


def _fast_tuple_call(sig: Signature, fn: Callable[..., Any], kw: dict[str, Any]) -> Callable[..., Any]:
    """``_fast_multi_call`` for the usual several-output op (no Refs), with the output
    conversion of ``fast_call``'s ``wrap`` inline and the result tuple made directly."""
    be, op_def, attrs, name = sig.backend, sig.op_def, sig.attrs, sig.op_def.name
    conv, n, out_dtypes = be.as_output, len(sig.out_dtypes), tuple(sig.out_dtypes)
    typed = tuple((dt, dt.np) for dt in out_dtypes)
    native: Any = (be.array_types or (None,))[0]
    make = result_types[op_def.name]._make

    def call(*xs: Tensor) -> Any:
        try:
            result: Any = fn(*[x._value for x in xs], **kw)
        except Exception as e:
            raise_translated(e, be, name)
        if (result.__class__ is not tuple and result.__class__ is not list) or len(result) != n:
            flatten_outputs(op_def, result, [None] * n)  # raises the kernel-contract error
        outs = [
            Tensor(v if type(v) is native and v.dtype is npdt else conv(v, dt), dt, be)
            for v, (dt, npdt) in zip(result, typed)
        ]
        if RECORDING[0]:
            record_op(op_def, attrs, xs, outs)
        return make(outs)

    return call


def arg_dtypes(arg: ArgDef, n: int | None, attrs: Mapping[str, Any]) -> list[DType]:
    if n is None:
        return [expected_dtype(arg, 0, attrs)]
    return [expected_dtype(arg, i, attrs) for i in range(n)]

