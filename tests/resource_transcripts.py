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
import re
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

SCRIPTS: dict[str, list[Step]] = {"variables": VARIABLES}

#: Error classes by the status they stand for.
TF_ERRORS = {"InvalidArgumentError": "InvalidArgument", "FailedPreconditionError": "FailedPrecondition",
             "NotFoundError": "NotFound", "OutOfRangeError": "OutOfRange", "AlreadyExistsError": "AlreadyExists"}
OK_ERRORS = {"InvalidArgumentError": "InvalidArgument", "ShapeError": "InvalidArgument",
             "FailedPreconditionError": "FailedPrecondition", "ResourceNotFoundError": "NotFound",
             "OutOfRangeError": "OutOfRange", "AlreadyExistsError": "AlreadyExists"}


def snake(name: str) -> str:
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name).lower()


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
            elif isinstance(value, tuple):
                kwargs[key] = convert(*value)
            elif key in ("dtype", "out_type", "key_dtype", "value_dtype"):
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
            outs = out if isinstance(out, (tuple, list)) else [out]
            transcript.append([dict(zip(("value", "dtype"), to_list(o))) for o in outs])
    return transcript


def tensorflow_transcripts() -> dict[str, list[Any]]:
    import numpy as np
    import tensorflow as tf

    def to_list(t: Any) -> tuple[Any, str]:
        return np.asarray(t).tolist(), t.dtype.name

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
        return np.asarray(t.numpy()).tolist(), t.dtype.name

    def call(op: str, kwargs: dict[str, Any]) -> Any:
        return getattr(ok.ops, snake(op))(**kwargs)

    with ok.use_backend(backend):
        return {name: run(script, call, lambda v, d: ok.tensor(np.array(v), d), ok.as_dtype, to_list, OK_ERRORS)
                for name, script in SCRIPTS.items()}


def recorded() -> dict[str, list[Any]]:
    found: dict[str, list[Any]] = json.loads(SNAPSHOT.read_text())
    return found


if __name__ == "__main__":
    if sys.argv[1:] != ["--record"]:
        sys.exit(f"usage: {sys.argv[0]} --record   (writes {SNAPSHOT} from TensorFlow)")
    SNAPSHOT.write_text(json.dumps(tensorflow_transcripts(), indent=1) + "\n")
    print(f"wrote {SNAPSHOT}")
