"""Scripts of resource ops (variables, tables) run step by step in TensorFlow and in
opkernel, and the transcripts they give: each step's output (value and dtype), ``"ok"``
for an op without outputs, or the class of its error.  tests/test_resource_variables.py
compares opkernel's transcript on every backend with TensorFlow's: run live where
TensorFlow imports, and checked in (tests/snapshots/resource_transcripts.json) for
where it does not.  Re-record with
``.venv/bin/python tests/resource_transcripts.py --record``.
"""

from __future__ import annotations

import json
import pathlib
import sys
from typing import Any, Callable

SNAPSHOT = pathlib.Path(__file__).parent / "snapshots" / "resource_transcripts.json"

#: A step: (op, arguments).  "$name" is the handle an earlier step saved as name
#: (a step whose op makes a handle saves it under its "as" argument); dtypes are names.
Step = tuple[str, dict[str, Any]]

VARIABLES: list[Step] = [
    ("VarHandleOp", {"as": "a", "dtype": "float32", "shape": [2], "shared_name": "a"}),
    ("VarIsInitializedOp", {"resource": "$a"}),
    ("ReadVariableOp", {"resource": "$a", "dtype": "float32"}),
    ("AssignAddVariableOp", {"resource": "$a", "value": ([1, 2], "float32")}),
    ("VariableShape", {"input": "$a"}),
    ("AssignVariableOp", {"resource": "$a", "value": ([1, 2], "float32")}),
    ("ReadVariableOp", {"resource": "$a", "dtype": "float32"}),
    ("VarIsInitializedOp", {"resource": "$a"}),
    ("ReadVariableOp", {"resource": "$a", "dtype": "int32"}),
    ("AssignVariableOp", {"resource": "$a", "value": ([1, 2], "int32")}),
    ("AssignAddVariableOp", {"resource": "$a", "value": ([10, 20], "float32")}),
    ("ReadVariableOp", {"resource": "$a", "dtype": "float32"}),
    ("AssignSubVariableOp", {"resource": "$a", "value": ([1, 2], "float32")}),
    ("ReadVariableOp", {"resource": "$a", "dtype": "float32"}),
    ("AssignAddVariableOp", {"resource": "$a", "value": ([1, 2, 3], "float32")}),
    ("AssignSubVariableOp", {"resource": "$a", "value": ([[1, 2]], "float32")}),
    ("ReadVariableOp", {"resource": "$a", "dtype": "float32"}),
    ("ResourceGather", {"resource": "$a", "indices": ([1, 0, 1], "int32"), "dtype": "float32"}),
    ("ResourceGather", {"resource": "$a", "indices": ([[1], [0]], "int64"), "dtype": "float32"}),
    ("ResourceGather", {"resource": "$a", "indices": ([2], "int32"), "dtype": "float32"}),
    ("VariableShape", {"input": "$a"}),
    ("VariableShape", {"input": "$a", "out_type": "int64"}),
    ("AssignVariableOp", {"resource": "$a", "value": ([1, 2, 3], "float32")}),
    ("ReadVariableOp", {"resource": "$a", "dtype": "float32"}),
    ("AssignVariableOp", {"resource": "$a", "value": ([7, 8, 9], "float32"), "validate_shape": True}),
    ("ReadVariableOp", {"resource": "$a", "dtype": "float32"}),
    ("AssignVariableOp", {"resource": "$a", "value": ([[4.5]], "float32"), "validate_shape": True}),
    ("ReadVariableOp", {"resource": "$a", "dtype": "float32"}),
    ("AssignVariableOp", {"resource": "$a", "value": ([[4.5]], "float32")}),
    ("ReadVariableOp", {"resource": "$a", "dtype": "float32"}),
    ("VariableShape", {"input": "$a"}),
    ("VarHandleOp", {"as": "a2", "dtype": "float32", "shape": [], "shared_name": "a"}),
    ("ReadVariableOp", {"resource": "$a2", "dtype": "float32"}),
    ("DestroyResourceOp", {"resource": "$a"}),
    ("VarIsInitializedOp", {"resource": "$a2"}),
    ("ReadVariableOp", {"resource": "$a", "dtype": "float32"}),
    ("AssignSubVariableOp", {"resource": "$a", "value": ([1], "float32")}),
    ("DestroyResourceOp", {"resource": "$a", "ignore_lookup_error": False}),
    ("DestroyResourceOp", {"resource": "$a"}),
    ("AssignVariableOp", {"resource": "$a", "value": (5, "float32")}),
    ("ReadVariableOp", {"resource": "$a2", "dtype": "float32"}),
    ("VarHandleOp", {"as": "n", "dtype": "int64", "shape": [], "shared_name": "n", "container": "other"}),
    ("AssignVariableOp", {"resource": "$n", "value": (5, "int64")}),
    ("AssignAddVariableOp", {"resource": "$n", "value": (3, "int64")}),
    ("ReadVariableOp", {"resource": "$n", "dtype": "int64"}),
    ("VarHandleOp", {"as": "n2", "dtype": "int64", "shape": [], "shared_name": "n"}),
    ("VarIsInitializedOp", {"resource": "$n2"}),
    ("VarHandleOp", {"as": "b", "dtype": "bool", "shape": [3], "shared_name": "b"}),
    ("AssignVariableOp", {"resource": "$b", "value": ([True, False, True], "bool")}),
    ("ReadVariableOp", {"resource": "$b", "dtype": "bool"}),
    ("ResourceGather", {"resource": "$b", "indices": ([2, 1], "int32"), "dtype": "bool"}),
]

TABLES: list[Step] = [
    ("HashTableV2", {"as": "t", "key_dtype": "int64", "value_dtype": "float32", "shared_name": "t"}),
    ("LookupTableFindV2", {"table_handle": "$t", "keys": ([1, 2], "int64"), "default_value": (-1, "float32")}),
    ("LookupTableSizeV2", {"table_handle": "$t"}),
    ("InitializeTableV2", {"table_handle": "$t", "keys": ([1, 2, 3], "int64"), "values": ([1, 2], "float32")}),
    ("InitializeTableV2", {"table_handle": "$t", "keys": ([1, 2, 2], "int64"), "values": ([1, 2, 3], "float32")}),
    ("LookupTableSizeV2", {"table_handle": "$t"}),
    ("InitializeTableV2", {"table_handle": "$t", "keys": ([1, 2, 2], "int64"), "values": ([1, 2, 2], "float32")}),
    ("LookupTableSizeV2", {"table_handle": "$t"}),
    ("InitializeTableV2", {"table_handle": "$t", "keys": ([1, 5], "int64"), "values": ([1, 9], "float32")}),
    ("LookupTableFindV2", {"table_handle": "$t", "keys": ([[1, 7], [2, 5]], "int64"), "default_value": (-1, "float32")}),
    ("LookupTableFindV2", {"table_handle": "$t", "keys": (2, "int64"), "default_value": ([0], "float32")}),
    ("LookupTableFindV2", {"table_handle": "$t", "keys": ([], "int64"), "default_value": (0, "float32")}),
    ("LookupTableFindV2", {"table_handle": "$t", "keys": ([[2, 7]], "int64"), "default_value": ([[8, 9]], "float32")}),
    ("LookupTableFindV2", {"table_handle": "$t", "keys": ([[2, 7]], "int64"), "default_value": ([8, 9], "float32")}),
    ("LookupTableFindV2", {"table_handle": "$t", "keys": ([1], "int32"), "default_value": (-1, "float32")}),
    ("LookupTableFindV2", {"table_handle": "$t", "keys": ([1], "int64"), "default_value": ([-1, 2], "float32")}),
    ("LookupTableFindV2", {"table_handle": "$t", "keys": ([1], "int64"), "default_value": (-1, "float64")}),
    ("LookupTableInsertV2", {"table_handle": "$t", "keys": ([1], "int64"), "values": ([1], "float32")}),
    ("LookupTableRemoveV2", {"table_handle": "$t", "keys": ([1], "int64")}),
    ("LookupTableExportV2", {"table_handle": "$t", "Tkeys": "int64", "Tvalues": "float32"}),
    ("LookupTableImportV2", {"table_handle": "$t", "keys": ([1], "int64"), "values": ([1], "float32")}),
    ("LookupTableImportV2", {"table_handle": "$t", "keys": ([2, 1], "int64"), "values": ([2, 1], "float32")}),
    ("HashTableV2", {"as": "u", "key_dtype": "string", "value_dtype": "int32", "shared_name": "u"}),
    ("LookupTableImportV2", {"table_handle": "$u", "keys": (["a", "b"], "string"), "values": ([1, 2], "int32")}),
    ("LookupTableFindV2", {"table_handle": "$u", "keys": (["b", "c", "a"], "string"), "default_value": (0, "int32")}),
    ("MutableHashTableV2", {"as": "m", "key_dtype": "string", "value_dtype": "int64", "shared_name": "m"}),
    ("LookupTableSizeV2", {"table_handle": "$m"}),
    ("LookupTableFindV2", {"table_handle": "$m", "keys": (["a"], "string"), "default_value": (0, "int64")}),
    ("InitializeTableV2", {"table_handle": "$m", "keys": (["a"], "string"), "values": ([1], "int64")}),
    ("LookupTableInsertV2", {"table_handle": "$m", "keys": (["a", "b", "a"], "string"), "values": ([1, 2, 3], "int64")}),
    ("LookupTableFindV2", {"table_handle": "$m", "keys": (["a", "b", "c"], "string"), "default_value": (0, "int64")}),
    ("LookupTableInsertV2", {"table_handle": "$m", "keys": (["a", "b"], "string"), "values": ([1], "int64")}),
    ("LookupTableInsertV2", {"table_handle": "$m", "keys": ([["a"], ["b"]], "string"), "values": ([1, 2], "int64")}),
    ("LookupTableInsertV2", {"table_handle": "$m", "keys": ([["a"], ["z"]], "string"), "values": ([[5], [6]], "int64")}),
    ("LookupTableFindV2", {"table_handle": "$m", "keys": ([["q", "a", "r"]], "string"), "default_value": ([[4, 5, 6]], "int64")}),
    ("LookupTableRemoveV2", {"table_handle": "$m", "keys": (["b", "zz"], "string")}),
    ("LookupTableExportV2", {"table_handle": "$m", "Tkeys": "string", "Tvalues": "int64"}),
    ("LookupTableImportV2", {"table_handle": "$m", "keys": (["x", "y"], "string"), "values": ([7, 8], "int64")}),
    ("LookupTableExportV2", {"table_handle": "$m", "Tkeys": "string", "Tvalues": "int64"}),
    ("LookupTableInsertV2", {"table_handle": "$m", "keys": ([1], "int32"), "values": ([7], "int64")}),
    ("LookupTableSizeV2", {"table_handle": "$m"}),
    ("VarHandleOp", {"as": "v", "dtype": "float32", "shape": [], "shared_name": "v"}),
    ("LookupTableSizeV2", {"table_handle": "$v"}),
    ("ReadVariableOp", {"resource": "$t", "dtype": "float32"}),
    ("DestroyResourceOp", {"resource": "$m"}),
    ("LookupTableSizeV2", {"table_handle": "$m"}),
    ("MutableHashTableV2", {"as": "b", "key_dtype": "string", "value_dtype": "bool", "shared_name": "bools"}),
    ("LookupTableInsertV2", {"table_handle": "$b", "keys": (["p", "q"], "string"), "values": ([True, True], "bool")}),
    ("LookupTableFindV2", {"table_handle": "$b", "keys": (["p", "r", "q"], "string"), "default_value": (False, "bool")}),
    ("LookupTableExportV2", {"table_handle": "$b", "Tkeys": "string", "Tvalues": "bool"}),
    ("MutableHashTableV2", {"as": "i", "key_dtype": "int32", "value_dtype": "float32", "shared_name": "i"}),
    ("LookupTableInsertV2", {"table_handle": "$i", "keys": ([3, -4], "int32"), "values": ([0.5, -0.0], "float32")}),
    ("LookupTableFindV2", {"table_handle": "$i", "keys": ([3, 4, -4], "int32"), "default_value": (2, "float32")}),
    ("MutableHashTableV2", {"as": "n", "key_dtype": "int64", "value_dtype": "string", "shared_name": "n"}),
    ("LookupTableInsertV2", {"table_handle": "$n", "keys": ([10, 20], "int64"), "values": (["ten", "twenty"], "string")}),
    ("LookupTableFindV2", {"table_handle": "$n", "keys": ([20, 30], "int64"), "default_value": ("?", "string")}),
]

_FI = ["float32", "int32"]
QUEUES: list[Step] = [
    ("FIFOQueueV2", {"as": "q", "component_types": _FI, "shapes": [[2], []], "capacity": 10, "shared_name": "q"}),
    ("QueueSizeV2", {"handle": "$q"}),
    ("QueueIsClosedV2", {"handle": "$q"}),
    ("QueueEnqueueV2", {"handle": "$q", "components": [([1, 2], "float32"), (7, "int32")]}),
    ("QueueEnqueueV2", {"handle": "$q", "components": [([1, 2, 3], "float32"), (7, "int32")]}),
    ("QueueEnqueueV2", {"handle": "$q", "components": [([1, 2], "float32"), (7, "int64")]}),
    ("QueueEnqueueV2", {"handle": "$q", "components": [([1, 2], "float32")]}),
    ("QueueEnqueueManyV2", {"handle": "$q", "components": [([[3, 4], [5, 6], [7, 8]], "float32"), ([8, 9, 10], "int32")]}),
    ("QueueEnqueueManyV2", {"handle": "$q", "components": [([[3, 4], [5, 6]], "float32"), ([8, 9, 10], "int32")]}),
    ("QueueSizeV2", {"handle": "$q"}),
    ("QueueDequeueV2", {"handle": "$q", "component_types": _FI}),
    ("QueueDequeueV2", {"handle": "$q", "component_types": ["float32", "int64"]}),
    ("QueueDequeueManyV2", {"handle": "$q", "n": (2, "int32"), "component_types": _FI}),
    ("QueueDequeueManyV2", {"handle": "$q", "n": (0, "int32"), "component_types": _FI}),
    ("QueueDequeueManyV2", {"handle": "$q", "n": (-1, "int32"), "component_types": _FI}),
    ("QueueSizeV2", {"handle": "$q"}),
    ("QueueCloseV2", {"handle": "$q"}),
    ("QueueIsClosedV2", {"handle": "$q"}),
    ("QueueEnqueueV2", {"handle": "$q", "components": [([1, 2], "float32"), (7, "int32")]}),
    ("QueueDequeueManyV2", {"handle": "$q", "n": (2, "int32"), "component_types": _FI}),
    ("QueueDequeueV2", {"handle": "$q", "component_types": _FI}),
    ("QueueDequeueV2", {"handle": "$q", "component_types": _FI}),
    ("QueueSizeV2", {"handle": "$q"}),
    ("FIFOQueueV2", {"as": "s", "component_types": ["string"], "shared_name": "s"}),
    ("QueueEnqueueV2", {"handle": "$s", "components": [(["a", "bc"], "string")]}),
    ("QueueEnqueueV2", {"handle": "$s", "components": [("d", "string")]}),
    ("QueueDequeueV2", {"handle": "$s", "component_types": ["string"]}),
    ("QueueDequeueV2", {"handle": "$s", "component_types": ["string"]}),
    ("QueueEnqueueManyV2", {"handle": "$s", "components": [(["x", "y"], "string")]}),
    ("QueueDequeueManyV2", {"handle": "$s", "n": (1, "int32"), "component_types": ["string"]}),
    ("QueueCloseV2", {"handle": "$s", "cancel_pending_enqueues": True}),
    ("QueueDequeueV2", {"handle": "$s", "component_types": ["string"]}),
    ("QueueDequeueV2", {"handle": "$s", "component_types": ["string"]}),
    ("FIFOQueueV2", {"as": "bad", "component_types": _FI, "shapes": [[2]], "shared_name": "bad"}),
    ("MutableHashTableV2", {"as": "a_table", "key_dtype": "int64", "value_dtype": "int64", "shared_name": "a_table"}),
    ("QueueSizeV2", {"handle": "$a_table"}),
]

def _f(*values: float) -> tuple[list[float], str]:
    return (list(values), "float32")


def _s(value: float) -> tuple[float, str]:
    return (value, "float32")


UPDATES: list[Step] = [
    ("VarHandleOp", {"as": "x", "dtype": "float32", "shape": [3, 2], "shared_name": "upd_x"}),
    ("ResourceScatterAdd", {"resource": "$x", "indices": ([0], "int32"), "updates": ([[1, 1]], "float32")}),
    ("AssignVariableOp", {"resource": "$x", "value": ([[0, 1], [2, 3], [4, 5]], "float32")}),
    ("ResourceScatterAdd", {"resource": "$x", "indices": ([0, 2, 0], "int32"), "updates": ([[1, 1], [2, 2], [3, 3]], "float32")}),
    ("ReadVariableOp", {"resource": "$x", "dtype": "float32"}),
    ("ResourceScatterAdd", {"resource": "$x", "indices": ([[1], [1]], "int64"), "updates": ([[[1, 2]], [[3, 4]]], "float32")}),
    ("ReadVariableOp", {"resource": "$x", "dtype": "float32"}),
    ("ResourceScatterAdd", {"resource": "$x", "indices": ([1], "int32"), "updates": (10, "float32")}),
    ("ReadVariableOp", {"resource": "$x", "dtype": "float32"}),
    ("ResourceScatterAdd", {"resource": "$x", "indices": ([3], "int32"), "updates": ([[1, 1]], "float32")}),
    ("ResourceScatterAdd", {"resource": "$x", "indices": ([-1], "int32"), "updates": ([[1, 1]], "float32")}),
    ("ResourceScatterAdd", {"resource": "$x", "indices": ([0], "int32"), "updates": ([[1, 1, 1]], "float32")}),
    ("ResourceScatterUpdate", {"resource": "$x", "indices": ([2, 0], "int32"), "updates": ([[7, 7], [8, 8]], "float32")}),
    ("ReadVariableOp", {"resource": "$x", "dtype": "float32"}),
    ("ResourceScatterUpdate", {"resource": "$x", "indices": ([1], "int32"), "updates": ([[1]], "float32")}),
    ("ReadVariableOp", {"resource": "$x", "dtype": "float32"}),
    ("VarHandleOp", {"as": "w", "dtype": "float32", "shape": [2], "shared_name": "upd_w"}),
    ("VarHandleOp", {"as": "a", "dtype": "float32", "shape": [2], "shared_name": "upd_a"}),
    ("VarHandleOp", {"as": "m", "dtype": "float32", "shape": [2], "shared_name": "upd_m"}),
    ("VarHandleOp", {"as": "v", "dtype": "float32", "shape": [2], "shared_name": "upd_v"}),
    ("AssignVariableOp", {"resource": "$w", "value": _f(1, 2)}),
    ("AssignVariableOp", {"resource": "$a", "value": _f(0.5, -0.25)}),
    ("AssignVariableOp", {"resource": "$m", "value": _f(0.125, 0.5)}),
    ("AssignVariableOp", {"resource": "$v", "value": _f(0.25, 0.0625)}),
    ("ResourceApplyGradientDescent", {"var": "$w", "alpha": _s(0.5), "delta": _f(1, -3)}),
    ("ReadVariableOp", {"resource": "$w", "dtype": "float32"}),
    ("ResourceApplyGradientDescent", {"var": "$w", "alpha": _f(0.5), "delta": _f(1, -3)}),
    ("ResourceApplyGradientDescent", {"var": "$w", "alpha": _s(0.5), "delta": _f(1, -3, 2)}),
    ("ResourceApplyMomentum", {"var": "$w", "accum": "$a", "lr": _s(0.1), "grad": _f(1, 2), "momentum": _s(0.9)}),
    ("ReadVariableOp", {"resource": "$w", "dtype": "float32"}),
    ("ReadVariableOp", {"resource": "$a", "dtype": "float32"}),
    ("ResourceApplyMomentum", {"var": "$w", "accum": "$a", "lr": _s(0.1), "grad": _f(1, 2), "momentum": _s(0.9),
                               "use_nesterov": True}),
    ("ReadVariableOp", {"resource": "$w", "dtype": "float32"}),
    ("ReadVariableOp", {"resource": "$a", "dtype": "float32"}),
    ("ResourceApplyAdam", {"var": "$w", "m": "$m", "v": "$v", "beta1_power": _s(0.9), "beta2_power": _s(0.999),
                           "lr": _s(0.01), "beta1": _s(0.9), "beta2": _s(0.999), "epsilon": _s(1e-7), "grad": _f(1, -1)}),
    ("ReadVariableOp", {"resource": "$w", "dtype": "float32"}),
    ("ReadVariableOp", {"resource": "$m", "dtype": "float32"}),
    ("ReadVariableOp", {"resource": "$v", "dtype": "float32"}),
    ("ResourceApplyAdam", {"var": "$w", "m": "$m", "v": "$v", "beta1_power": _s(0.81), "beta2_power": _s(0.998),
                           "lr": _s(0.01), "beta1": _s(0.9), "beta2": _s(0.999), "epsilon": _s(1e-7), "grad": _f(0.5, 2),
                           "use_nesterov": True}),
    ("ReadVariableOp", {"resource": "$w", "dtype": "float32"}),
    ("ReadVariableOp", {"resource": "$m", "dtype": "float32"}),
    ("ReadVariableOp", {"resource": "$v", "dtype": "float32"}),
    ("ResourceApplyAdam", {"var": "$w", "m": "$m", "v": "$x", "beta1_power": _s(0.9), "beta2_power": _s(0.999),
                           "lr": _s(0.01), "beta1": _s(0.9), "beta2": _s(0.999), "epsilon": _s(1e-7), "grad": _f(1, -1)}),
    ("ReadVariableOp", {"resource": "$w", "dtype": "float32"}),
    ("ReadVariableOp", {"resource": "$m", "dtype": "float32"}),
]

SCRIPTS: dict[str, list[Step]] = {"variables": VARIABLES, "tables": TABLES, "queues": QUEUES, "updates": UPDATES}

#: Steps where opkernel deliberately answers otherwise, by (script, the step's index): why.
DIFFERENCES: dict[tuple[str, int], str] = {
    ("tables", 43): "ReadVariableOp given a table's handle: TensorFlow looks for a variable of the table's name and "
                    "says FailedPrecondition (no such variable); opkernel says InvalidArgument: the handle is a "
                    "table's, not a variable's",
    ("updates", 11): "ResourceScatterAdd with updates of the right rank and the wrong size: TensorFlow checks the "
                     "rank only and runs (an update of another size than the rows it names); opkernel checks "
                     "indices.shape + variable.shape[1:] and refuses",
    ("updates", 14): "ResourceScatterUpdate with updates of the right rank and the wrong size: TensorFlow writes "
                     "part of the row; opkernel refuses and writes nothing",
    ("updates", 15): "the read after that ResourceScatterUpdate: TensorFlow's row was partly written, opkernel's "
                     "is unchanged",
}

#: Error classes by the status they stand for.
TF_ERRORS = {"InvalidArgumentError": "InvalidArgument", "FailedPreconditionError": "FailedPrecondition",
             "NotFoundError": "NotFound", "OutOfRangeError": "OutOfRange", "AlreadyExistsError": "AlreadyExists", "CancelledError": "Cancelled",
             "UnimplementedError": "Unimplemented"}
OK_ERRORS = {"InvalidArgumentError": "InvalidArgument", "ShapeError": "InvalidArgument",
             "UnimplementedError": "Unimplemented", "KernelNotFoundError": "NotFound",
             "FailedPreconditionError": "FailedPrecondition", "ResourceNotFoundError": "NotFound",
             "OutOfRangeError": "OutOfRange", "AlreadyExistsError": "AlreadyExists", "CancelledError": "Cancelled"}


def run(script: list[Step], call: Callable[[str, dict[str, Any]], Any], convert: Callable[[Any, str], Any],
        dtype: Callable[[str], Any], to_list: Callable[[Any], tuple[Any, str]], errors: dict[str, str]) -> list[Any]:
    """Run ``script``: ``call(op, kwargs)`` runs an op, ``convert(value, dtype)`` makes an
    input, ``dtype(name)`` a dtype attr, ``to_list(out)`` reads an output as (list, dtype
    name); ``errors`` maps error class names to statuses."""
    handles: dict[str, Any] = {}
    transcript: list[Any] = []
    for op, args in script:
        kwargs: dict[str, Any] = {}
        for key, value in args.items():
            if key == "as":
                continue
            if isinstance(value, str) and value.startswith("$"):
                kwargs[key] = handles[value[1:]]
            elif key == "components":
                kwargs[key] = [convert(*v) for v in value]
            elif key == "component_types":
                kwargs[key] = [dtype(v) for v in value]
            elif isinstance(value, tuple):
                kwargs[key] = convert(*value)
            elif key in ("dtype", "out_type", "key_dtype", "value_dtype", "Tkeys", "Tvalues"):
                kwargs[key] = dtype(value)
            else:
                kwargs[key] = value
        try:
            out = call(op, kwargs)
        except Exception as e:  # the transcript records the error's class
            status = errors.get(type(e).__name__)
            if status is None:
                raise
            transcript.append({"error": status})
            continue
        if "as" in args:
            handles[args["as"]] = out
            transcript.append("handle")
        elif out is None:
            transcript.append("ok")
        else:
            outs = [dict(zip(("value", "dtype"), to_list(o))) for o in (out if isinstance(out, (tuple, list)) else [out])]
            if op == "LookupTableExportV2":  # in no particular order: compared sorted by key
                order = sorted(range(len(outs[0]["value"])), key=lambda k: outs[0]["value"][k])
                for o in outs:
                    o["value"] = [o["value"][k] for k in order]
            transcript.append(outs)
    return transcript


def _text(value: Any) -> Any:
    """Strings as str (TensorFlow gives bytes), in nested lists."""
    if isinstance(value, list):
        return [_text(v) for v in value]
    return value.decode("utf-8") if isinstance(value, bytes) else value


def tensorflow_transcripts() -> dict[str, list[Any]]:
    import numpy as np
    import tensorflow as tf

    def to_list(t: Any) -> tuple[Any, str]:
        return _text(np.asarray(t).tolist()), t.dtype.name

    def call(op: str, kwargs: dict[str, Any]) -> Any:
        if op == "VarHandleOp":
            kwargs.setdefault("container", "")
        out = getattr(tf.raw_ops, op)(**kwargs)
        return None if isinstance(out, tf.Operation) else out

    errors = {getattr(tf.errors, name).__name__: status for name, status in TF_ERRORS.items()}
    return {name: run(script, call, lambda v, d: tf.constant(v, dtype=d), tf.as_dtype, to_list, errors)
            for name, script in SCRIPTS.items()}


def opkernel_transcripts(backend: str) -> dict[str, list[Any]]:
    import numpy as np

    import opkernel as ok

    def to_list(t: Any) -> tuple[Any, str]:
        return _text(np.asarray(t.numpy()).tolist()), t.dtype.name

    def call(op: str, kwargs: dict[str, Any]) -> Any:
        from opkernel.ops._gen import snake_case

        return getattr(ok.ops, snake_case(op))(**kwargs)

    with ok.use_backend(backend):
        return {name: run(script, call, lambda v, d: ok.tensor(np.array(v), d), ok.as_dtype, to_list, OK_ERRORS)
                for name, script in SCRIPTS.items()}


def same(a: Any, b: Any, rtol: float = 2e-6) -> bool:
    """Two transcript entries agree: equal, floats within ``rtol`` (an optimizer step's
    float32 rounding may differ from TensorFlow's Eigen expression in the last bit)."""
    if isinstance(a, float) and isinstance(b, float):
        return a == b or abs(a - b) <= rtol * max(abs(a), abs(b))
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y, rtol) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k], rtol) for k in a)
    return bool(a == b)


def recorded() -> dict[str, list[Any]]:
    found: dict[str, list[Any]] = json.loads(SNAPSHOT.read_text())
    return found


if __name__ == "__main__":
    if sys.argv[1:] != ["--record"]:
        sys.exit(f"usage: {sys.argv[0]} --record   (writes {SNAPSHOT} from TensorFlow)")
    SNAPSHOT.write_text(json.dumps(tensorflow_transcripts(), indent=1) + "\n")
    print(f"wrote {SNAPSHOT}")
