"""Write TensorFlow's whole op registry (every OpDef) as JSON, for the interface tests.

Run it in a process of its own (it imports TensorFlow; the tests never do)::

    .venv/bin/python tests/tf_conformance/dump_opdefs.py --out tests/tf_conformance/recorded/tf_opdefs.json.gz

``--out -`` writes the JSON to stdout.  The file is gzip-compressed and written
deterministically (sorted ops, no timestamp), so the checked-in copy compares
byte for byte with a fresh dump of the same TensorFlow version.

Format: ``{"tensorflow": version, "ops": [op, ...]}``, each op::

    {"name", "is_stateful",
     "inputs"/"outputs": [{"name", "type" (DataType enum name or null), "type_attr",
                           "number_attr", "type_list_attr", "is_ref"}],
     "attrs": [{"name", "type", "allowed" (null or list), "minimum" (null or int),
                "default" (absent when there is none)}],
     "raw_ops": the keyword names tf.raw_ops.<Op> takes (without ``name``), or null}

A default is JSON by attr type: ints, bools and strings as such; floats as
numbers or "nan"/"inf"/"-inf"; a type as its enum name; a shape as
``{"unknown_rank": bool, "dims": [size, ...]}`` (-1 unknown); a tensor as
``{"text": its TensorProto in one-line text format, "dtype", "shape", "values":
flat}``; a func as its name; lists as JSON lists.
Descriptions and summaries are left out (they are not part of the interface).
"""

from __future__ import annotations

import argparse
import gzip
import inspect
import json
import math
import os
import sys
from typing import Any


def _float(x: float) -> Any:
    if math.isnan(x):
        return "nan"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return x


def _shape(shape: Any) -> dict[str, Any]:
    return {"unknown_rank": bool(shape.unknown_rank), "dims": [d.size for d in shape.dim]}


def _scalar(kind: str, value: Any, enum_name: Any, text_format: Any) -> Any:
    if kind == "string":
        return value.decode("utf-8", "backslashreplace")
    if kind == "float":
        return _float(value)
    if kind == "type":
        return enum_name(value)
    if kind == "shape":
        return _shape(value)
    if kind == "tensor":
        import tensorflow as tf

        array = tf.make_ndarray(value)
        return {"text": text_format.MessageToString(value, as_one_line=True), "dtype": enum_name(value.dtype),
                "shape": list(array.shape), "values": [_float(v) if isinstance(v, float) else v
                                                       for v in array.ravel().tolist()]}
    if kind == "func":
        return value.name
    return value  # int, bool


_FIELDS = {"string": "s", "int": "i", "float": "f", "bool": "b", "type": "type",
           "shape": "shape", "tensor": "tensor", "func": "func"}


def _default(attr_type: str, value: Any, enum_name: Any, text_format: Any) -> Any:
    if attr_type.startswith("list("):
        kind = attr_type[5:-1]
        items = getattr(value.list, _FIELDS[kind])
        return [_scalar(kind, v, enum_name, text_format) for v in items]
    return _scalar(attr_type, getattr(value, _FIELDS[attr_type]), enum_name, text_format)


def _arg(arg: Any, enum_name: Any) -> dict[str, Any]:
    return {
        "name": arg.name,
        "type": enum_name(arg.type) if arg.type else None,
        "type_attr": arg.type_attr or None,
        "number_attr": arg.number_attr or None,
        "type_list_attr": arg.type_list_attr or None,
        "is_ref": bool(arg.is_ref),
    }


def _attr(attr: Any, enum_name: Any, text_format: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"name": attr.name, "type": attr.type, "allowed": None,
                           "minimum": attr.minimum if attr.has_minimum else None}
    if attr.HasField("allowed_values"):
        allowed = attr.allowed_values.list
        out["allowed"] = [enum_name(t) for t in allowed.type] if allowed.type else [
            s.decode("utf-8", "backslashreplace") for s in allowed.s]
    if attr.HasField("default_value"):
        out["default"] = _default(attr.type, attr.default_value, enum_name, text_format)
    return out


def dump() -> dict[str, Any]:
    """Every OpDef in TensorFlow's registry (imports TensorFlow)."""
    os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")
    import tensorflow as tf
    from google.protobuf import text_format
    from tensorflow.core.framework import op_def_pb2, types_pb2
    from tensorflow.python.client import pywrap_tf_session as c_api

    # TF_GetAllOpList is the C API's whole registry (tf.raw_ops lists only the
    # ops with a Python wrapper; op_def_registry looks up one name at a time).
    buffer = c_api.TF_GetAllOpList()
    try:
        op_list = op_def_pb2.OpList()
        op_list.ParseFromString(c_api.TF_GetBuffer(buffer))
    finally:
        c_api.TF_DeleteBuffer(buffer)
    enum_name = types_pb2.DataType.Name
    ops = [
        {
            "name": op.name,
            "is_stateful": bool(op.is_stateful),
            "inputs": [_arg(a, enum_name) for a in op.input_arg],
            "outputs": [_arg(a, enum_name) for a in op.output_arg],
            "attrs": [_attr(a, enum_name, text_format) for a in op.attr],
        }
        for op in sorted(op_list.op, key=lambda o: o.name)
    ]
    for op in ops:
        # The keywords tf.raw_ops.<Op> takes (its inputs and non-inferred attrs, as TensorFlow
        # names them for Python), or null when the op has no raw_ops wrapper.
        raw = getattr(tf.raw_ops, op["name"], None)
        op["raw_ops"] = None if raw is None else [p for p in inspect.signature(raw).parameters if p != "name"]
    return {"tensorflow": tf.__version__, "ops": ops}


def encode(data: dict[str, Any]) -> bytes:
    """The deterministic gzip bytes of ``data`` (mtime 0, so equal dumps are equal files)."""
    text = json.dumps(data, sort_keys=True, separators=(",", ":")).encode()
    return gzip.compress(text, compresslevel=9, mtime=0)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, help="the .json.gz file to write, or - for JSON on stdout")
    args = parser.parse_args(argv)
    data = dump()
    if args.out == "-":
        json.dump(data, sys.stdout, sort_keys=True, separators=(",", ":"))
        return 0
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "wb") as f:
        f.write(encode(data))
    return 0


if __name__ == "__main__":
    sys.exit(main())
