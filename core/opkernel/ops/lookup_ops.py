"""Lookup tables behind ``resource`` handles (TensorFlow's lookup_ops): HashTableV2, a
table initialized once from keys and values, and MutableHashTableV2, one that takes
inserts and removals; LookupTableFindV2 and the rest work on either.

Keys are int32, int64 or strings (a ``str`` and its UTF-8 bytes are one key); each key
maps to one scalar value.  A table lives in host memory on every backend, as
TensorFlow's tables do: its kernels declare every tensor argument host memory, so on
OpenCL the keys are read to the host and the values written back (TensorFlow's
HostMemory arguments).  Every kernel holds the table's lock, so a lookup sees an insert
whole or not at all, and a failed call changes nothing.
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np

from .. import shape_fns
from ..dtypes import DType
from ..errors import FailedPreconditionError, InvalidArgumentError, UnimplementedError
from ..gradients import not_differentiable
from ..kernels import OpKernel, OpKernelContext, register_kernel
from ..op_registry import register_op
from ..resources import ResourceBase
from ..shapes import InferenceContext
from .resource_variable_ops import (
    handle_array, handle_of, handle_only_shape, handle_to_scalar_shape, make_handle, resource_from_handle,
)

__all__ = ["LOOKUP_OPS", "LookupTable", "register_ops", "register_gradients", "register_kernels"]

LOOKUP_OPS = (
    "HashTableV2", "MutableHashTableV2", "InitializeTableV2", "LookupTableFindV2", "LookupTableInsertV2",
    "LookupTableRemoveV2", "LookupTableSizeV2", "LookupTableExportV2", "LookupTableImportV2",
)
KEY_TYPES = ("int32", "int64", "string")
VALUE_TYPES = ("bool", "half", "float", "double", "int32", "int64", "string")
_KINDS = ("HashTable", "MutableHashTable")


def _key(k: Any) -> Any:
    return k.encode("utf-8") if isinstance(k, str) else k


class LookupTable(ResourceBase):
    """A table's state: its key and value dtypes, the entries, whether it is initialized
    (a mutable table always is) and the lock every op on it holds."""

    handle_kinds = _KINDS

    def __init__(self, key_dtype: DType, value_dtype: DType, mutable: bool) -> None:
        self.key_dtype = key_dtype
        self.value_dtype = value_dtype
        self.mutable = mutable
        self.entries: dict[Any, Any] = {}
        self.initialized = mutable
        self.lock = threading.Lock()

    @property
    def kind(self) -> str:
        return "MutableHashTable" if self.mutable else "HashTable"

    def debug_string(self) -> str:
        return f"{self.kind} {self.key_dtype.name} -> {self.value_dtype.name}, {len(self.entries)} entries"

    def close(self) -> None:
        with self.lock:
            self.entries = {}


def _host(ctx: OpKernelContext, i: int) -> np.ndarray:
    return np.asarray(ctx.input(i))


def _values_array(values: list[Any], dtype: DType, shape: tuple[int, ...]) -> np.ndarray:
    out = np.empty(len(values), dtype=dtype.np)
    out[...] = values if values else out
    return out.reshape(shape)


class _TableOp(OpKernel):
    """A kernel of an op whose input 0 is a table handle."""

    def table(self, ctx: OpKernelContext) -> LookupTable:
        handle = handle_of(ctx.op_name, ctx.backend, ctx.input(0), _KINDS)
        found: LookupTable = resource_from_handle(ctx.op_name, ctx.backend, handle, LookupTable)
        return found

    @staticmethod
    def check_dtype(ctx: OpKernelContext, role: str, want: DType, got: DType) -> None:
        if got is not want:
            raise InvalidArgumentError(
                f"op {ctx.op_name!r}: the table's {role} are {want.name}, the op has {got.name}", op=ctx.op_name
            )

    @staticmethod
    def check_pairs(ctx: OpKernelContext, keys: np.ndarray, values: np.ndarray) -> None:
        if keys.shape != values.shape:
            raise InvalidArgumentError(
                f"op {ctx.op_name!r}: values must have the keys' shape {list(keys.shape)} (one value per key), "
                f"got {list(values.shape)}; nothing was changed", op=ctx.op_name,
            )

    @staticmethod
    def pairs(keys: np.ndarray, values: np.ndarray) -> list[tuple[Any, Any]]:
        return [(_key(k), v) for k, v in zip(keys.reshape(-1).tolist(), values.reshape(-1).tolist())]


class _MakeTable(OpKernel):
    mutable = False

    def compute(self, ctx: OpKernelContext) -> None:
        key_dtype, value_dtype = ctx.get_attr("key_dtype"), ctx.get_attr("value_dtype")
        kind = "MutableHashTable" if self.mutable else "HashTable"
        handle = make_handle(ctx.backend, kind, ctx.get_attr("container"), ctx.get_attr("shared_name"))
        table = ctx.resource_manager.lookup_or_create(
            handle.container, handle.name, LookupTable, lambda: LookupTable(key_dtype, value_dtype, self.mutable)
        )
        if (table.key_dtype, table.value_dtype, table.mutable) != (key_dtype, value_dtype, self.mutable):
            raise InvalidArgumentError(
                f"op {ctx.op_name!r}: {handle.name!r} names a {table.debug_string()}, not a {kind} "
                f"{key_dtype.name} -> {value_dtype.name}", op=ctx.op_name,
            )
        ctx.set_output(0, handle_array(handle))


class _MakeMutableTable(_MakeTable):
    mutable = True


class _Initialize(_TableOp):
    """InitializeTableV2 (initializes a HashTable once; later calls change nothing, as in
    TensorFlow) and LookupTableImportV2 (a mutable table's entries are replaced; a
    HashTable's must be the data it holds)."""

    def compute(self, ctx: OpKernelContext) -> None:
        table = self.table(ctx)
        keys, values = _host(ctx, 1), _host(ctx, 2)
        self.check_dtype(ctx, "keys", table.key_dtype, ctx.get_attr("Tin" if ctx.op_name == "LookupTableImportV2" else "Tkey"))
        self.check_dtype(ctx, "values", table.value_dtype, ctx.get_attr("Tout" if ctx.op_name == "LookupTableImportV2" else "Tval"))
        importing = ctx.op_name == "LookupTableImportV2"
        if not importing and table.mutable:
            raise InvalidArgumentError(
                f"op {ctx.op_name!r}: a MutableHashTable is not initialized; insert or import into it", op=ctx.op_name
            )
        if keys.size != values.size or (importing and keys.shape != values.shape):
            raise InvalidArgumentError(
                f"op {ctx.op_name!r}: keys and values must have the same size, got {keys.size} keys and "
                f"{values.size} values", op=ctx.op_name,
            )
        entries: dict[Any, Any] = {}
        for k, v in self.pairs(keys, values):
            if not table.mutable and k in entries and entries[k] != v:
                raise FailedPreconditionError(
                    f"op {ctx.op_name!r}: key {k!r} is given two values, {entries[k]!r} and {v!r}; the table was "
                    "not changed", op=ctx.op_name,
                )
            entries[k] = v
        with table.lock:
            if table.mutable:
                table.entries = entries
            elif not table.initialized:
                table.entries, table.initialized = entries, True
            elif importing and entries != table.entries:
                raise FailedPreconditionError(
                    f"op {ctx.op_name!r}: the table was already initialized with different data", op=ctx.op_name
                )


class _Find(_TableOp):
    def compute(self, ctx: OpKernelContext) -> None:
        table = self.table(ctx)
        keys, default = _host(ctx, 1), _host(ctx, 2)
        self.check_dtype(ctx, "keys", table.key_dtype, ctx.get_attr("Tin"))
        self.check_dtype(ctx, "values", table.value_dtype, ctx.get_attr("Tout"))
        if default.shape not in ((), keys.shape):
            raise InvalidArgumentError(
                f"op {ctx.op_name!r}: default_value must be a scalar or have the keys' shape {list(keys.shape)} "
                f"(a default per key), got {list(default.shape)}", op=ctx.op_name,
            )
        flat_keys = keys.reshape(-1).tolist()
        defaults = default.reshape(-1).tolist()
        if default.shape == () or not table.mutable:  # a HashTable takes the first default for every key, as TensorFlow's
            defaults = defaults[:1] * len(flat_keys)
        with table.lock:
            if not table.initialized:
                raise FailedPreconditionError(f"op {ctx.op_name!r}: the table is not initialized", op=ctx.op_name)
            entries = table.entries
            found = [entries.get(_key(k), d) for k, d in zip(flat_keys, defaults)]
        ctx.set_output(0, _values_array(found, table.value_dtype, keys.shape))


class _Insert(_TableOp):
    def compute(self, ctx: OpKernelContext) -> None:
        table = self.table(ctx)
        keys, values = _host(ctx, 1), _host(ctx, 2)
        self.check_dtype(ctx, "keys", table.key_dtype, ctx.get_attr("Tin"))
        self.check_dtype(ctx, "values", table.value_dtype, ctx.get_attr("Tout"))
        if not table.mutable:
            raise UnimplementedError(f"op {ctx.op_name!r}: a HashTable is initialized once and takes no inserts "
                                     "(a MutableHashTable does)", op=ctx.op_name)
        self.check_pairs(ctx, keys, values)
        pairs = self.pairs(keys, values)
        with table.lock:
            table.entries.update(pairs)


class _Remove(_TableOp):
    def compute(self, ctx: OpKernelContext) -> None:
        table = self.table(ctx)
        keys = _host(ctx, 1)
        self.check_dtype(ctx, "keys", table.key_dtype, ctx.get_attr("Tin"))
        if not table.mutable:
            raise UnimplementedError(f"op {ctx.op_name!r}: a HashTable is initialized once and takes no removals "
                                     "(a MutableHashTable does)", op=ctx.op_name)
        with table.lock:
            for k in keys.reshape(-1).tolist():
                table.entries.pop(_key(k), None)


class _Size(_TableOp):
    def compute(self, ctx: OpKernelContext) -> None:
        table = self.table(ctx)
        with table.lock:
            ctx.set_output(0, np.array(len(table.entries), np.int64))


class _Export(_TableOp):
    def compute(self, ctx: OpKernelContext) -> None:
        table = self.table(ctx)
        self.check_dtype(ctx, "keys", table.key_dtype, ctx.get_attr("Tkeys"))
        self.check_dtype(ctx, "values", table.value_dtype, ctx.get_attr("Tvalues"))
        with table.lock:
            items = list(table.entries.items())
        ctx.set_output(0, _values_array([k for k, _ in items], table.key_dtype, (len(items),)))
        ctx.set_output(1, _values_array([v for _, v in items], table.value_dtype, (len(items),)))


# ---------------------------------------------------------------- registration


def _find_shape(c: InferenceContext) -> None:
    c.with_rank(c.input(0), 0)
    c.set_output(0, c.input(1))


def _export_shape(c: InferenceContext) -> None:
    c.with_rank(c.input(0), 0)
    n = c.unknown_dim()
    c.set_output(0, c.vector(n))
    c.set_output(1, c.vector(n))


def register_ops() -> None:
    for name, what in (("HashTableV2", "initialized once (InitializeTableV2, LookupTableImportV2)"),
                       ("MutableHashTableV2", "taking inserts and removals")):
        register_op(name).output("table_handle: resource").attr("container: string = ''").attr(
            "shared_name: string = ''"
        ).attr("use_node_name_sharing: bool = false").attr("key_dtype: type").attr("value_dtype: type").set_is_stateful(
        ).set_shape_fn(shape_fns.scalar_shape).doc(
            f"A handle to the lookup table shared_name of this backend, {what}; an anonymous table (deleted with "
            "its handle) when shared_name is empty."
        )
    register_op("InitializeTableV2").input("table_handle: resource").input("keys: Tkey").input("values: Tval").attr(
        "Tkey: type"
    ).attr("Tval: type").set_is_stateful().set_shape_fn(handle_only_shape).doc(
        "Fills a HashTable with keys -> values, once: a later call changes nothing."
    )
    register_op("LookupTableFindV2").input("table_handle: resource").input("keys: Tin").input(
        "default_value: Tout"
    ).output("values: Tout").attr("Tin: type").attr("Tout: type").set_is_stateful().set_shape_fn(_find_shape).doc(
        "The value of each key, in the keys' shape; a missing key takes default_value (a scalar, or in the keys' "
        "shape: a default per key for a mutable table, the first one for every key of a HashTable, as TensorFlow)."
    )
    register_op("LookupTableInsertV2").input("table_handle: resource").input("keys: Tin").input("values: Tout").attr(
        "Tin: type"
    ).attr("Tout: type").set_is_stateful().set_shape_fn(handle_only_shape).doc(
        "Sets keys -> values in a mutable table (values in the keys' shape; a later duplicate key wins)."
    )
    register_op("LookupTableRemoveV2").input("table_handle: resource").input("keys: Tin").attr("Tin: type").set_is_stateful(
    ).set_shape_fn(handle_only_shape).doc("Removes keys from a mutable table (missing keys are ignored).")
    register_op("LookupTableSizeV2").input("table_handle: resource").output("size: int64").set_is_stateful(
    ).set_shape_fn(handle_to_scalar_shape).doc("The number of entries.")
    register_op("LookupTableExportV2").input("table_handle: resource").output("keys: Tkeys").output(
        "values: Tvalues"
    ).attr("Tkeys: type").attr("Tvalues: type").set_is_stateful().set_shape_fn(_export_shape).doc(
        "Every key and its value, in no particular order."
    )
    register_op("LookupTableImportV2").input("table_handle: resource").input("keys: Tin").input("values: Tout").attr(
        "Tin: type"
    ).attr("Tout: type").set_is_stateful().set_shape_fn(handle_only_shape).doc(
        "Replaces a mutable table's entries with keys -> values; initializes a HashTable (or checks that it "
        "holds this data)."
    )


def register_gradients() -> None:
    for name in LOOKUP_OPS:
        not_differentiable(name)


def register_kernels() -> None:
    """Kernels for every backend that holds the keys' and values' dtypes, with every tensor
    argument in host memory (the table is host memory)."""
    tables = {"key_dtype": list(KEY_TYPES), "value_dtype": list(VALUE_TYPES)}
    for name, kernel, constraints, host in (
        ("HashTableV2", _MakeTable, tables, ("table_handle",)),
        ("MutableHashTableV2", _MakeMutableTable, tables, ("table_handle",)),
        ("InitializeTableV2", _Initialize, {"Tkey": list(KEY_TYPES), "Tval": list(VALUE_TYPES)},
         ("table_handle", "keys", "values")),
        ("LookupTableFindV2", _Find, {"Tin": list(KEY_TYPES), "Tout": list(VALUE_TYPES)},
         ("table_handle", "keys", "default_value", "values")),
        ("LookupTableInsertV2", _Insert, {"Tin": list(KEY_TYPES), "Tout": list(VALUE_TYPES)},
         ("table_handle", "keys", "values")),
        ("LookupTableRemoveV2", _Remove, {"Tin": list(KEY_TYPES)}, ("table_handle", "keys")),
        ("LookupTableSizeV2", _Size, {}, ("table_handle", "size")),
        ("LookupTableExportV2", _Export, {"Tkeys": list(KEY_TYPES), "Tvalues": list(VALUE_TYPES)},
         ("table_handle", "keys", "values")),
        ("LookupTableImportV2", _Initialize, {"Tin": list(KEY_TYPES), "Tout": list(VALUE_TYPES)},
         ("table_handle", "keys", "values")),
    ):
        register_kernel(name, backend="*", type_constraints=constraints, host_memory=host)(kernel)

