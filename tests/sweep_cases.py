"""The bad-input sweep's cases and its child-process runner (tests/test_bad_input_sweep.py).

Every op registered in ``opkernel.ops`` gets one valid *base* call: the first row of the
op tables (tests/test_ops_*.py, ``CASES``) or, for ops those tables leave out, a row of
``EXTRA_BASES`` here.  Each base is perturbed into bad inputs, one class at a time: a
wrong dtype, rank or shape, an empty or 0-d input, NaN and infinities, byte-swapped,
unaligned and non-contiguous arrays (same values, so the answer must equal the base's),
out-of-range indices, sizes past int32 and int64, absurd attrs, and wrong Python
arguments.

``run_cases`` executes cases in this process and writes one JSON line per case: a
``start`` line before the call (so the parent can name the case a crash or hang stopped
in) and an outcome line after it.  The parent (the test module) classifies them.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Sequence

import numpy as np

import opkernel as ok
from opkernel import op_registry, plugins
from opkernel.errors import OpkernelError
from opkernel.op_registry import ArgDef, AttrDef, OpDef
from opkernel.ops._gen import param_name, split_namespace

Args = tuple[list[Any], dict[str, Any]]


@dataclass(frozen=True)
class Base:
    """One valid call of an op: host inputs (one per declared input) and explicit attrs."""

    op: str
    inputs: Callable[[], list[Any]]
    attrs: dict[str, Any]
    variant: str = ""  # "" for an op's first valid call, else its dtype ("int32"), which leads its case names


@dataclass(frozen=True)
class Case:
    """One call of an op wrapper: ``build()`` makes (inputs, attrs) afresh on every call.

    ``kind`` is the class of bad input; ``same_as_base`` says the inputs hold the base's
    values (only their memory layout differs), so the answer must equal the base's;
    ``as_tensors`` converts the host inputs to tensors on the active backend before the
    call, so a repeated signature takes the wrappers' fast path.
    """

    op: str
    name: str
    kind: str
    build: Callable[[], Args]
    same_as_base: bool = False
    as_tensors: bool = False

    @property
    def id(self) -> str:
        return f"{self.op}/{self.name}"


# ---------------------------------------------------------------- base calls


def _extra_bases() -> list[Base]:
    """Valid calls of the ops the op tables do not cover (Ref-input ops, op packages)."""
    f32 = np.float32

    def data(*shape: int, seed: int = 0) -> np.ndarray:
        return np.random.default_rng(seed).standard_normal(shape).astype(f32)

    def scalar(v: float) -> np.ndarray:
        return np.array(v, f32)

    pool = {"ksize": [1, 3, 3, 1], "strides": [1, 1, 1, 1], "padding": "SAME"}

    def table(mutable: bool) -> ok.Tensor:
        """A handle to an int64 -> float32 table on the active backend (a mutable one holding
        keys 1 and 2)."""
        if not mutable:
            return ok.ops.hash_table_v2(key_dtype="int64", value_dtype="float32")
        t = ok.ops.mutable_hash_table_v2(key_dtype="int64", value_dtype="float32")
        ok.ops.lookup_table_insert_v2(t, np.array([1, 2], np.int64), data(2, seed=6))
        return t

    def queue(closed: bool) -> ok.Tensor:
        """A handle to an unbounded queue of float32 [2] elements holding 3 (closed: every
        dequeue is served or fails at once, never waits)."""
        q = ok.ops.fifo_queue_v2(component_types=["float32"], shapes=[[2]])
        ok.ops.queue_enqueue_many_v2(q, [data(3, 2, seed=7)])
        if closed:
            ok.ops.queue_close_v2(q)
        return q

    def variable() -> ok.Tensor:
        """A handle to an assigned float32 [2, 3] resource variable on the active backend."""
        return ok.ResourceVariable(data(2, 3, seed=5)).handle

    return [
        Base("Assign", lambda: [data(2, 3), data(2, 3, seed=1)], {}),
        Base("AssignAdd", lambda: [data(2, 3), data(2, 3, seed=1)], {}),
        Base("AssignSub", lambda: [data(2, 3), data(2, 3, seed=1)], {}),
        Base("ApplyGradientDescent", lambda: [data(2, 3), scalar(0.1), data(2, 3, seed=1)], {}),
        Base("ApplyMomentum", lambda: [data(2, 3), data(2, 3, seed=1), scalar(0.1), data(2, 3, seed=2), scalar(0.9)], {}),
        Base(
            "ApplyAdam",
            lambda: [data(2, 3), data(2, 3, seed=1) ** 2, data(2, 3, seed=2) ** 2, scalar(0.9), scalar(0.999),
                     scalar(0.01), scalar(0.9), scalar(0.999), scalar(1e-7), data(2, 3, seed=3)],
            {},
        ),
        # the stateless random ops (tests/test_random.py checks their numbers)
        Base("StatelessRandomGetKeyCounter", lambda: [np.array([1, 2], np.int64)], {}),
        *(Base(op, lambda: [np.array([3, 4], np.int32), np.array([7], np.uint64), np.array([1, 2], np.uint64),
                            np.int32(1)], {})
          for op in ("StatelessRandomUniformV2", "StatelessRandomNormalV2", "StatelessTruncatedNormalV2",
                     "StatelessRandomUniformFullIntV2")),
        Base("StatelessRandomUniformIntV2", lambda: [np.array([3, 4], np.int32), np.array([7], np.uint64),
                                                     np.array([1, 2], np.uint64), np.int32(1), np.int32(-2),
                                                     np.int32(9)], {}),
        *(Base(op, lambda: [np.array([3, 4], np.int32), np.array([1, 2], np.int64)], {})
          for op in ("StatelessRandomUniform", "StatelessRandomNormal", "StatelessTruncatedNormal")),
        Base("StatelessRandomUniformInt", lambda: [np.array([3, 4], np.int32), np.array([1, 2], np.int64),
                                                   np.int32(-2), np.int32(9)], {}),
        Base("StatelessMultinomial", lambda: [data(2, 5), np.int32(3), np.array([1, 2], np.int64)], {}),
        Base("RngReadAndSkip", lambda: [np.array([5, 0, 0], np.int64), np.int32(1), np.uint64(4)], {}),
        Base("FusedBatchNormGradV3", lambda: [data(2, 2, 2, 3), data(2, 2, 2, 3, seed=1), data(3, seed=2) ** 2 + 0.5,
                                              data(3, seed=3), data(3, seed=4) ** 2 + 0.5, np.zeros(0, f32)], {}),
        # the resource variable ops (tests/test_resource_variables.py compares them with TensorFlow)
        Base("VarHandleOp", lambda: [], {"dtype": "float32", "shape": [2, 3], "shared_name": "swept"}),
        Base("ReadVariableOp", lambda: [variable()], {"dtype": "float32"}),
        Base("AssignVariableOp", lambda: [variable(), data(2, 3, seed=1)], {}),
        Base("AssignAddVariableOp", lambda: [variable(), data(2, 3, seed=1)], {}),
        Base("AssignSubVariableOp", lambda: [variable(), data(2, 3, seed=1)], {}),
        Base("VarIsInitializedOp", lambda: [variable()], {}),
        Base("VariableShape", lambda: [variable()], {}),
        Base("ResourceGather", lambda: [variable(), np.array([1, 0], np.int32)], {"dtype": "float32"}),
        Base("DestroyResourceOp", lambda: [variable()], {}),
        Base("ResourceScatterAdd", lambda: [variable(), np.array([1, 0, 1], np.int32), data(3, 3, seed=2)], {}),
        Base("ResourceScatterUpdate", lambda: [variable(), np.array([1], np.int64), data(1, 3, seed=2)], {}),
        Base("ResourceApplyGradientDescent", lambda: [variable(), scalar(0.1), data(2, 3, seed=1)], {}),
        Base("ResourceApplyMomentum", lambda: [variable(), variable(), scalar(0.1), data(2, 3, seed=2), scalar(0.9)], {}),
        Base(
            "ResourceApplyAdam",
            lambda: [variable(), variable(), variable(), scalar(0.9), scalar(0.999), scalar(0.01), scalar(0.9),
                     scalar(0.999), scalar(1e-7), data(2, 3, seed=3)],
            {},
        ),
        # the lookup table ops
        Base("HashTableV2", lambda: [], {"key_dtype": "int64", "value_dtype": "float32", "shared_name": "swept"}),
        Base("MutableHashTableV2", lambda: [], {"key_dtype": "int64", "value_dtype": "float32"}),
        Base("InitializeTableV2", lambda: [table(False), np.array([1, 2], np.int64), data(2)], {}),
        Base("LookupTableFindV2", lambda: [table(True), np.array([[1, 5]], np.int64), scalar(-1.0)], {}),
        Base("LookupTableInsertV2", lambda: [table(True), np.array([3, 1], np.int64), data(2)], {}),
        Base("LookupTableRemoveV2", lambda: [table(True), np.array([1, 9], np.int64)], {}),
        Base("LookupTableSizeV2", lambda: [table(True)], {}),
        Base("LookupTableExportV2", lambda: [table(True)], {"Tkeys": "int64", "Tvalues": "float32"}),
        Base("LookupTableImportV2", lambda: [table(True), np.array([4, 5], np.int64), data(2)], {}),
        # the queue ops: dequeues from closed queues, so a dequeue never waits for an enqueue
        Base("FIFOQueueV2", lambda: [], {"component_types": ["float32"], "shapes": [[2]], "capacity": 5}),
        Base("QueueEnqueueV2", lambda: [queue(False), [data(2)]], {}),
        Base("QueueEnqueueManyV2", lambda: [queue(False), [data(3, 2)]], {}),
        Base("QueueDequeueV2", lambda: [queue(True)], {"component_types": ["float32"]}),
        Base("QueueDequeueManyV2", lambda: [queue(True), np.int32(2)], {"component_types": ["float32"]}),
        Base("QueueCloseV2", lambda: [queue(False)], {}),
        Base("QueueSizeV2", lambda: [queue(False)], {}),
        Base("QueueIsClosedV2", lambda: [queue(False)], {}),
        Base("Addons>MedianPool2D", lambda: [data(1, 4, 5, 2)], dict(pool)),
        Base("Addons>MedianPool2DGrad", lambda: [data(1, 4, 5, 2), data(1, 4, 5, 2, seed=1)], dict(pool)),
    ]


def _fresh(inputs: Sequence[Any]) -> list[Any]:
    """Copies of a row's inputs: rows may hand out the same constant arrays on every
    call, and a case overwrites its inputs (to see whether an output still reads them)."""
    return [[np.array(v) for v in x] if isinstance(x, list) else np.array(x) if isinstance(x, np.ndarray) else x for x in inputs]


def _table_bases() -> dict[str, Base]:
    import test_ops_array
    import test_ops_math
    import test_ops_nn

    bases: dict[str, Base] = {}
    for module in (test_ops_math, test_ops_array, test_ops_nn):
        for row in module.CASES:
            if row.op in bases:
                continue
            dtype = "float32" if "float32" in row.dtypes else row.dtypes[0]
            maker = row.inputs
            bases[row.op] = Base(row.op, lambda maker=maker, dtype=dtype: _fresh(maker(np.random.default_rng(0), dtype)), dict(row.attrs))
    return bases


def other_dtype_bases() -> dict[str, Base]:
    """Per op, a second valid call in another dtype the op tables use for it (integer,
    bool or complex before float64), so the bad inputs also reach a second kernel."""
    import test_ops_array
    import test_ops_math
    import test_ops_nn

    first: dict[str, str] = {}
    chosen: dict[str, tuple[int, str, Any]] = {}
    for module in (test_ops_math, test_ops_array, test_ops_nn):
        for row in module.CASES:
            first.setdefault(row.op, "float32" if "float32" in row.dtypes else row.dtypes[0])
            for dtype in row.dtypes:
                rank = 1 if ok.as_dtype(dtype).is_floating else 0
                if dtype != first[row.op] and (row.op not in chosen or rank < chosen[row.op][0]):
                    chosen[row.op] = (rank, dtype, row)
    return {
        op: Base(op, lambda maker=row.inputs, dtype=dtype: _fresh(maker(np.random.default_rng(0), dtype)), dict(row.attrs), dtype)
        for op, (_, dtype, row) in chosen.items()
    }


def bases() -> dict[str, Base]:
    """The base call of every registered op (a missing one is reported by the sweep's test)."""
    table = _table_bases()
    for base in _extra_bases():
        table.setdefault(base.op, base)
    return table


def op_names() -> list[str]:
    plugins.ensure_loaded()
    return sorted(op_registry.op_names())


def wrapper(op: str) -> Callable[..., Any]:
    """The generated wrapper of ``op`` (``ok.ops.mat_mul``, ``ok.ops.addons.median_pool2d``)."""
    ns, attr = split_namespace(op)
    return getattr(getattr(ok.ops, ns) if ns else ok.ops, attr)


# ---------------------------------------------------------------- perturbations

# Dtypes tried as the wrong dtype of an input, first one the input does not accept.
_WRONG_DTYPES = ("bool", "complex64", "uint8", "float16", "int64", "float64", "int32", "float32")
_NUMERIC = "biufc"


def _allowed(op_def: OpDef, arg: ArgDef) -> set[str] | None:
    """Names of the dtypes an input accepts (None: any)."""
    if arg.dtype is not None:
        return {arg.dtype.name}
    attr_name = arg.type_attr or arg.type_list_attr
    if attr_name is None:
        return None
    allowed = op_def.attr(attr_name).allowed_values
    return None if not allowed else {d.name for d in allowed}


def _wrong_dtype(op_def: OpDef, arg: ArgDef, x: np.ndarray) -> str | None:
    allowed = _allowed(op_def, arg)
    for name in _WRONG_DTYPES:
        if name == x.dtype.name:
            continue
        if allowed is None or name not in allowed:
            return name
    return None


def _cast(x: np.ndarray, dtype: str) -> np.ndarray:
    if np.dtype(dtype).kind == "c" or x.dtype.kind != "c":
        return x.astype(dtype)
    return x.real.astype(dtype)


def _unaligned(x: np.ndarray) -> np.ndarray:
    """``x``'s values in a buffer that starts one byte past an aligned address."""
    raw = np.zeros(x.nbytes + 1, np.uint8)
    out = np.frombuffer(raw.data, dtype=x.dtype, count=x.size, offset=1).reshape(x.shape)
    out[...] = x
    return out


def _strided(x: np.ndarray) -> np.ndarray:
    """``x``'s values every other element of a twice-as-long last axis."""
    big = np.zeros(x.shape[:-1] + (2 * x.shape[-1],), x.dtype)
    big[..., ::2] = x
    return big[..., ::2]


def _reversed(x: np.ndarray) -> np.ndarray:
    """``x``'s values read backwards along the first axis (negative strides)."""
    return np.ascontiguousarray(x[::-1])[::-1]


def _nonfinite(x: np.ndarray) -> np.ndarray:
    y = x.copy()
    flat = y.reshape(-1)
    flat[0] = np.nan
    flat[-1] = np.inf
    if flat.size > 2:
        flat[flat.size // 2] = -np.inf
    return y


def _with(inputs: Sequence[Any], i: int, value: Any) -> list[Any]:
    out = list(inputs)
    out[i] = value
    return out


def _input_variants(op_def: OpDef, arg: ArgDef, x: np.ndarray) -> Iterator[tuple[str, str, Callable[[np.ndarray], Any], bool, bool]]:
    """(name, kind, transform, same_as_base, as_tensors) of the bad versions of one array input."""
    wrong = _wrong_dtype(op_def, arg, x)
    if wrong is not None:
        yield f"dtype_{wrong}", "dtype", lambda a, w=wrong: _cast(a, w), False, False
    if x.dtype.kind in _NUMERIC:
        yield "dtype_string", "dtype", lambda a: a.astype(str).astype(object) if a.ndim else np.array(str(a), object), False, False
    yield "rank_plus_1", "rank", lambda a: np.stack([a, a]), False, True
    if x.ndim > 0:
        yield "rank_0", "scalar", lambda a: a.reshape(-1)[:1].reshape(()) if a.size else np.zeros((), a.dtype), False, True
        yield "last_dim_plus_1", "shape", lambda a: np.concatenate([a, a[..., :1] if a.shape[-1] else np.zeros(a.shape[:-1] + (1,), a.dtype)], -1), False, True
        yield "empty_first_dim", "empty", lambda a: a[:0], False, True
        if x.ndim > 1:
            yield "empty_last_dim", "empty", lambda a: a[..., :0], False, True
    if x.size and x.dtype.kind in "fc":
        yield "nan_inf", "nonfinite", _nonfinite, False, True
    if x.dtype.itemsize > 1 and x.dtype.kind != "O":
        yield "byteswapped", "byteswap", lambda a: a.astype(a.dtype.newbyteorder()), True, False
        yield "unaligned", "unaligned", _unaligned, True, False
    if x.ndim > 0 and x.size > 1:
        yield "strided", "noncontig", _strided, True, False
        yield "negative_strides", "noncontig", _reversed, True, False
    if x.ndim > 1:
        yield "fortran_order", "noncontig", np.asfortranarray, True, False
    if x.dtype.kind in "iu" and x.size:
        if np.iinfo(x.dtype).max >= 10**6:  # int8 and int16 cannot hold it (index_int_max is their largest)
            yield "index_huge", "index", lambda a: np.full_like(a, 10**6), False, True
            if x.dtype.kind == "i":  # an unsigned input holds no negative value
                yield "index_negative", "index", lambda a: np.full_like(a, -(10**6)), False, True
        yield "index_int_max", "index", lambda a: np.full_like(a, np.iinfo(a.dtype).max), False, True
        yield "size_2e31_int64", "size", lambda a: np.full(a.shape, 2**31, np.int64), False, True
        yield "size_2e62_int64", "size", lambda a: np.full(a.shape, 2**62, np.int64), False, True
        yield "size_python_2e70", "size", lambda a: np.full(a.shape, 2**70, object).tolist() if a.ndim else 2**70, False, False


def _attr_variants(attr: AttrDef, value: Any) -> Iterator[tuple[str, Any]]:
    """(name, absurd value) of one attr."""
    t = attr.type
    if t == "int":
        yield from (("minus_1", -1), ("2e31", 2**31), ("2e63", 2**63), ("float", 1.5), ("string", "3"))
    elif t == "float":
        yield from (("nan", float("nan")), ("inf", float("inf")), ("string", "0.5"))
    elif t == "bool":
        yield from (("string", "yes"), ("none", None))
    elif t == "string":
        yield from (("bogus", "BOGUS"), ("empty", ""), ("int", 3))
    elif t == "type":
        yield from (("string_dtype", ok.string), ("not_a_dtype", "float33"), ("int", 7))
    elif t == "list(int)":
        n = len(value) if isinstance(value, (list, tuple)) else 4
        yield from (
            ("empty", []),
            ("zeros", [0] * n),
            ("negative", [-1] * n),
            ("2e31", [2**31] * n),
            ("one_longer", [1] * (n + 1)),
            ("not_a_list", 5),
        )
    elif t == "shape":
        yield from (("negative", [-5]), ("overflow", [2**40, 2**40]))
    elif t.startswith("list("):
        yield from (("empty", []), ("not_a_list", 5))


def _as_list(x: Any) -> list[Any]:
    return [np.asarray(v) for v in x]


def _appended(base: Base, i: int, make: Callable[[np.ndarray], Any]) -> Callable[[], Args]:
    """Build the base call with one more element, ``make(first element)``, in list input ``i``."""

    def build() -> Args:
        inputs = base.inputs()
        xs = _as_list(inputs[i])
        return _with(inputs, i, [*xs, make(xs[0])]), dict(base.attrs)

    return build


def cases_of(base: Base) -> list[Case]:
    """The base call (as host arrays and as tensors) and every bad version of it."""
    op_def = ok.op_def(base.op)
    attrs0 = base.attrs
    inputs0 = base.inputs()
    prefix = f"{base.variant}|" if base.variant else ""
    out = [
        Case(base.op, prefix + "base", "base", lambda: (base.inputs(), dict(attrs0))),
        Case(base.op, prefix + "base_tensors", "base", lambda: (base.inputs(), dict(attrs0)), as_tensors=True),
    ]

    def add(name: str, kind: str, build: Callable[[], Args], same: bool = False, tensors: bool = False) -> None:
        out.append(Case(base.op, prefix + name, kind, build, same, tensors))

    for i, (arg, x0) in enumerate(zip(op_def.inputs, inputs0)):
        p = arg.name
        if arg.dtype is not None and arg.dtype.is_resource:  # a handle: made by ops only, never from host data
            add(f"{p}:float_for_handle", "dtype", lambda i=i: (_with(base.inputs(), i, np.float32(1)), dict(attrs0)))
            add(f"{p}:vector_for_handle", "rank", lambda i=i: (_with(base.inputs(), i, np.zeros(2, np.float32)), dict(attrs0)))
            add(f"{p}:none", "pyarg", lambda i=i: (_with(base.inputs(), i, None), dict(attrs0)))
            continue
        if arg.is_list:
            if isinstance(x0, (list, tuple)) and len(x0) > 0:
                add(f"{p}:empty_list", "shape", lambda i=i: (_with(base.inputs(), i, []), dict(attrs0)))
                add(f"{p}:extra_element_rank_plus_1", "rank", _appended(base, i, lambda a: np.stack([a, a])))
                wrong = _wrong_dtype(op_def, arg, np.asarray(x0[0]))
                if wrong is not None:
                    add(f"{p}:extra_element_{wrong}", "dtype", _appended(base, i, lambda a, w=wrong: _cast(a, w)))
                add(f"{p}:extra_element_none", "pyarg", _appended(base, i, lambda a: None))
            continue
        x = np.asarray(x0)
        for name, kind, fn, same, tensors in _input_variants(op_def, arg, x):
            add(f"{p}:{name}", kind, lambda i=i, fn=fn: (_with(base.inputs(), i, fn(np.asarray(base.inputs()[i]))), dict(attrs0)), same, tensors)
        add(f"{p}:none", "pyarg", lambda i=i: (_with(base.inputs(), i, None), dict(attrs0)))
        add(f"{p}:ragged_list", "pyarg", lambda i=i: (_with(base.inputs(), i, [[1, 2], [3]]), dict(attrs0)))
        if arg.is_ref:
            add(f"{p}:plain_array_for_ref", "dtype", lambda i=i: (_with(base.inputs(), i, np.asarray(base.inputs()[i])), {**attrs0, "_plain": i}))
    # Two inputs sharing a type attr, given different dtypes.
    by_attr: dict[str, list[int]] = {}
    for i, arg in enumerate(op_def.inputs):
        if arg.type_attr and not arg.is_list:
            by_attr.setdefault(arg.type_attr, []).append(i)
    for attr_name, idx in by_attr.items():
        if len(idx) > 1:
            j = idx[-1]
            x = np.asarray(inputs0[j])
            other = "float64" if x.dtype.name != "float64" else "float32"
            add(f"{op_def.inputs[j].name}:mismatched_{attr_name}_{other}", "dtype", lambda j=j, o=other: (_with(base.inputs(), j, np.asarray(base.inputs()[j]).astype(o)), dict(attrs0)))
    for attr in op_def.attrs:
        if attr.name in op_def.inferred_attrs:
            continue
        value = attrs0.get(attr.name, attr.default)
        for name, bad in _attr_variants(attr, value):
            add(f"attr_{attr.name}:{name}", "attr", lambda n=attr.name, b=bad: (base.inputs(), {**attrs0, n: b}))
    add("pycall:missing_input", "pyarg", lambda: (base.inputs()[:-1], dict(attrs0)))
    add("pycall:extra_input", "pyarg", lambda: ([*base.inputs(), *([None] * (1 + len(op_def.attrs)))], dict(attrs0)))
    add("pycall:unknown_keyword", "pyarg", lambda: (base.inputs(), {**attrs0, "no_such_attr": 1}))
    return out


# ---------------------------------------------------------------- groups

SELFTEST = "_selftest"
GROUPS = {
    "math": ("test_ops_math",),
    "array": ("test_ops_array",),
    "nn": ("test_ops_nn",),
    "state_and_packages": (),
}


def group_of(op: str) -> str:
    import test_ops_array
    import test_ops_math
    import test_ops_nn

    for group, module in (("math", test_ops_math), ("array", test_ops_array), ("nn", test_ops_nn)):
        if any(row.op == op for row in module.CASES):
            return group
    return "state_and_packages"


def _selftest_cases() -> list[Case]:
    """Cases that crash and hang on purpose, to prove the runner names them (never swept)."""

    def fine() -> Args:
        return [np.array([1.0, 2.0], np.float32)], {}

    def segfault() -> Args:
        os.kill(os.getpid(), signal.SIGSEGV)
        return fine()

    def hang() -> Args:
        time.sleep(3600)
        return fine()

    return [
        Case("Neg", "fine_first", "selftest", fine),
        Case("Neg", "segfault", "selftest", segfault),
        Case("Neg", "fine_between", "selftest", fine),
        Case("Neg", "hang", "selftest", hang),
        Case("Neg", "fine_last", "selftest", fine),
    ]


def group_cases(group: str) -> list[Case]:
    if group == SELFTEST:
        return _selftest_cases()
    table, second = bases(), other_dtype_bases()
    out: list[Case] = []
    for op in op_names():
        if op in table and group_of(op) == group:
            out += cases_of(table[op])
            if op in second:
                out += cases_of(second[op])
    return out


# ---------------------------------------------------------------- running (in the child)


def _flat(x: Any) -> list[Any]:
    if isinstance(x, (tuple, list)):
        return [v for item in x for v in _flat(item)]
    return [x]


def digest(value: Any) -> dict[str, Any]:
    """An output as JSON: dtype, shape and the values (complex as [re, im] pairs)."""
    if isinstance(value, ok.Tensor) and value.dtype.is_resource:  # handles name their backend: compare the kind
        return {"dtype": "resource", "shape": list(value.shape), "values": [h.kind for h in value.numpy().reshape(-1)]}
    a = value.numpy() if isinstance(value, ok.Tensor) else np.asarray(value)
    a = np.asarray(a)
    if a.dtype.kind == "c":
        vals: Any = np.stack([a.real, a.imag], -1).tolist()
    elif a.dtype.kind in _NUMERIC:
        vals = a.tolist()
    else:
        vals = [str(v) for v in a.reshape(-1)]
    return {"dtype": a.dtype.name, "shape": list(a.shape), "values": vals}


def _snapshot(x: Any) -> Any:
    if isinstance(x, ok.Tensor):
        return x.numpy().copy()
    if isinstance(x, np.ndarray):
        return x.copy()
    if isinstance(x, list):
        return [_snapshot(v) for v in x]
    return None


def _same(a: Any, b: Any) -> bool:
    if a is None or b is None:
        return True
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.dtype.kind in "fc":
        return bool(np.array_equal(a, b, equal_nan=True))
    return bool(np.array_equal(a, b))


def _scribble(x: Any) -> None:
    """Overwrite a caller's host array, to see whether an output still reads it."""
    if isinstance(x, list):
        for v in x:
            _scribble(v)
    elif isinstance(x, np.ndarray) and x.dtype != object and x.flags.writeable:
        x[...] = 1 if x.dtype.kind != "b" else True
        if x.dtype.kind in "fc":
            x[...] = 12345.0


def run_case(case: Case) -> dict[str, Any]:
    """Call the case's wrapper; the outcome as a JSON-able dict."""
    op_def = ok.op_def(case.op)
    try:
        inputs, attrs = case.build()
    except Exception as e:  # noqa: BLE001 - a broken case is the sweep's bug, reported as such
        return {"op": case.op, "case": case.name, "kind": case.kind, "outcome": "sweep_error", "type": type(e).__name__, "message": str(e)[:300]}
    plain = attrs.pop("_plain", None)
    refs = [i for i, arg in enumerate(op_def.inputs) if arg.is_ref and i != plain and i < len(inputs)]
    record: dict[str, Any] = {"op": case.op, "case": case.name, "kind": case.kind}
    before: list[Any] = []
    stage = "inputs"
    try:
        # Making the Variables and tensors is part of the call a user makes, so their
        # errors count as the case's outcome too.
        for i in refs:
            if inputs[i] is not None:
                inputs[i] = ok.Variable(inputs[i])
        if case.as_tensors:
            inputs = [ok.tensor(v) if isinstance(v, np.ndarray) else v for v in inputs]
        before = [_snapshot(v) for v in inputs]
        stage = "call"
        # The wrappers take some attrs under TensorFlow's Python names (Squeeze's axis).
        result = wrapper(case.op)(*inputs, **{param_name(k, case.op): v for k, v in attrs.items()})
        outs = [digest(v) for v in _flat(result)]
    except OpkernelError as e:
        record.update(outcome="error", type=type(e).__name__, message=str(e)[:300], stage=stage)
    except Exception as e:  # noqa: BLE001 - the sweep's point is to see what escapes
        record.update(outcome="raw", type=type(e).__name__, message=str(e)[:300], type_error=isinstance(e, TypeError), stage=stage)
    else:
        record.update(outcome="ok", outputs=outs)
    if not before:
        before = [None] * len(inputs)
    after = [_snapshot(v) for v in inputs]
    if record["outcome"] != "ok":
        # A failed call must leave every Variable as it was: no half-applied update.
        changed = [op_def.inputs[i].name for i in refs if not _same(before[i], after[i])]
        if changed:
            record["half_applied"] = changed
    mutated = [op_def.inputs[i].name for i in range(min(len(inputs), len(op_def.inputs))) if i not in refs and not _same(before[i], after[i])]
    if mutated:
        record["mutated"] = mutated
    if record["outcome"] == "ok" and not case.as_tensors:
        for i, v in enumerate(inputs):
            if i not in refs:
                _scribble(v)
        again = [digest(v) for v in _flat(result)]
        if again != record["outputs"] and json.dumps(again) != json.dumps(record["outputs"]):
            record["aliases_input"] = True
    return record


# The child's address space: a missing size check then fails its case with an allocation
# error instead of taking the memory of the machine the suite runs on.
ADDRESS_SPACE = 3 << 30


def _limit_memory() -> None:
    import resource

    limit, cap = resource.RLIMIT_AS, ADDRESS_SPACE
    if os.environ.get("OPKERNEL_BACKEND") == "cuda":
        # cuInit reserves tens of GiB of address space (under an RLIMIT_AS of 3 GiB it fails
        # with CUDA_ERROR_OUT_OF_MEMORY), and device memory is not the host's: the device is
        # initialised first, then the child's writable host memory (RLIMIT_DATA, which counts
        # neither that reservation nor device mappings) may grow by ADDRESS_SPACE.
        try:
            ok.engine.backend_instance("cuda")
        except ok.errors.OpkernelError:
            pass  # no device: every case reports it
        limit, cap = resource.RLIMIT_DATA, _data_bytes() + ADDRESS_SPACE
    soft, hard = resource.getrlimit(limit)
    if soft == resource.RLIM_INFINITY or soft > cap:
        resource.setrlimit(limit, (cap, hard))


def _data_bytes() -> int:
    """This process's private writable memory now (VmData), what RLIMIT_DATA bounds."""
    with open("/proc/self/status", encoding="ascii") as f:
        for line in f:
            if line.startswith("VmData:"):
                return int(line.split()[1]) * 1024
    return 0


def run_cases(group: str, start: int, path: str) -> None:
    """Run the group's cases from index ``start``, appending JSON lines to ``path``."""
    _limit_memory()
    cases = group_cases(group)
    with open(path, "a", encoding="utf-8") as f:
        for index in range(start, len(cases)):
            case = cases[index]
            f.write(json.dumps({"start": index, "id": case.id}) + "\n")
            f.flush()
            t0 = time.perf_counter()
            record = run_case(case)
            record.update(index=index, seconds=round(time.perf_counter() - t0, 4))
            f.write(json.dumps(record) + "\n")
            f.flush()


def run_one(group: str, index: int, path: str) -> None:
    _limit_memory()
    cases = group_cases(group)
    with open(path, "a", encoding="utf-8") as f:
        record = run_case(cases[index])
        record.update(index=index)
        f.write(json.dumps(record) + "\n")


if __name__ == "__main__":
    run_cases(sys.argv[1], int(sys.argv[2]), sys.argv[3])
