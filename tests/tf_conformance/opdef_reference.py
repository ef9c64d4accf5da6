"""TensorFlow's OpDefs for the interface and grammar round-trip tests, without importing TensorFlow.

``reference()`` is the dump that dump_opdefs.py writes: made fresh in a child process
when TensorFlow is installed (``find_spec``: this process never imports it, see
case.py's neighbours), else read from the checked-in copy.  ``normalize_tf`` and
``normalize_ok`` bring a TensorFlow op (the dump's JSON) and an opkernel OpDef to
one comparable form; ``to_specs`` prints a TensorFlow op back as REGISTER_OP specs.
"""

from __future__ import annotations

import functools
import gzip
import importlib.util
import json
import math
import os
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).parent
CHECKED_IN = HERE / "recorded" / "tf_opdefs.json.gz"
DUMP_SCRIPT = HERE / "dump_opdefs.py"
TF_ENV = {"TF_ENABLE_ONEDNN_OPTS": "0", "TF_CPP_MIN_LOG_LEVEL": "2", "CUDA_VISIBLE_DEVICES": ""}
RERECORD = f"{Path(sys.executable).name} tests/tf_conformance/dump_opdefs.py --out tests/tf_conformance/recorded/tf_opdefs.json.gz"


@dataclass(frozen=True)
class Reference:
    data: dict[str, Any]          # {"tensorflow": version, "ops": [...]}
    fresh: bool                   # dumped now from the installed TensorFlow
    checked_in: dict[str, Any]    # the checked-in dump (equal to data when it is not stale)

    @functools.cached_property
    def ops(self) -> dict[str, dict[str, Any]]:
        return {op["name"]: op for op in self.data["ops"]}


def _read(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(gzip.decompress(path.read_bytes()))
    return data


@functools.lru_cache(maxsize=None)
def reference() -> Reference:
    """TensorFlow's OpDefs; ``OPKERNEL_TF_REFERENCE`` chooses as for the value cases (conftest.py):
    ``recorded`` forces the checked-in dump, ``fresh`` requires TensorFlow, ``auto`` (default) dumps
    afresh when TensorFlow is importable."""
    checked_in = _read(CHECKED_IN)
    want = os.environ.get("OPKERNEL_TF_REFERENCE", "auto")
    have_tf = importlib.util.find_spec("tensorflow") is not None
    if want == "fresh" and not have_tf:
        import pytest

        pytest.fail("OPKERNEL_TF_REFERENCE=fresh but tensorflow is not importable (pip install -e '.[tf-oracle]')")
    if not have_tf or want == "recorded":
        return Reference(checked_in, False, checked_in)
    sys.path.insert(0, str(HERE.parent))
    try:
        from isolated import run_isolated
    finally:
        sys.path.remove(str(HERE.parent))
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "tf_opdefs.json.gz"
        code = f"import runpy, sys; sys.argv = ['dump_opdefs.py', '--out', {str(out)!r}]; " \
               f"runpy.run_path({str(DUMP_SCRIPT)!r}, run_name='__main__')"
        run_isolated(code, timeout=180, what="dump_opdefs.py (TensorFlow's OpDefs)", env=TF_ENV)
        return Reference(_read(out), True, checked_in)


# ----------------------------------------------------------------- normal form

def _float(x: Any) -> Any:
    """A float default as TensorFlow stores it (float32), JSON-comparable."""
    if isinstance(x, str):
        return x
    import numpy as np

    f = float(np.float32(x))
    if math.isnan(f):
        return "nan"
    if math.isinf(f):
        return "inf" if f > 0 else "-inf"
    return f


def _tf_value(kind: str, value: Any) -> Any:
    if kind == "float":
        return _float(value)
    if kind == "tensor":
        return {k: value[k] for k in ("dtype", "shape", "values")}
    if kind == "shape":
        return None if value["unknown_rank"] else [None if d == -1 else d for d in value["dims"]]
    return value


def normalize_tf(op: dict[str, Any]) -> dict[str, Any]:
    """The comparable form of one op of the dump."""
    attrs = {}
    for a in op["attrs"]:
        kind = a["type"][5:-1] if a["type"].startswith("list(") else a["type"]
        entry = {"type": a["type"], "allowed": a["allowed"], "minimum": a["minimum"]}
        if "default" in a:
            d = a["default"]
            entry["default"] = [_tf_value(kind, v) for v in d] if a["type"].startswith("list(") else _tf_value(kind, d)
        attrs[a["name"]] = entry
    return {
        "inputs": [_tf_arg(x) for x in op["inputs"]],
        "outputs": [_tf_arg(x) for x in op["outputs"]],
        "attrs": attrs,
    }


def _tf_arg(arg: dict[str, Any]) -> dict[str, Any]:
    return {k: arg[k] for k in ("name", "type", "type_attr", "number_attr", "type_list_attr", "is_ref")}


def _ok_value(kind: str, value: Any) -> Any:
    import numpy as np

    if kind == "float":
        return _float(value)
    if kind == "type":
        return value.enum
    if kind == "shape":
        dims = value.dims if hasattr(value, "dims") else value
        return None if dims is None else [getattr(d, "value", d) for d in dims]
    if kind == "tensor":
        from opkernel.dtypes import as_dtype

        array = np.asarray(value)
        return {"dtype": as_dtype(array.dtype).enum, "shape": list(array.shape),
                "values": [_float(v) if isinstance(v, float) else v for v in array.ravel().tolist()]}
    return value


def normalize_ok(op_def: Any) -> dict[str, Any]:
    """The comparable form of an opkernel OpDef."""
    attrs = {}
    for a in op_def.attrs:
        kind = a.type[5:-1] if a.is_list else a.type
        allowed = None
        if a.allowed_values is not None:
            allowed = [v.enum if kind == "type" else v for v in a.allowed_values]
        entry = {"type": a.type, "allowed": allowed, "minimum": a.minimum}
        if a.has_default:
            entry["default"] = [_ok_value(kind, v) for v in a.default] if a.is_list else _ok_value(kind, a.default)
        attrs[a.name] = entry
    return {
        "inputs": [_ok_arg(x) for x in op_def.inputs],
        "outputs": [_ok_arg(x) for x in op_def.outputs],
        "attrs": attrs,
    }


def _ok_arg(arg: Any) -> dict[str, Any]:
    return {"name": arg.name, "type": None if arg.dtype is None else arg.dtype.enum, "type_attr": arg.type_attr,
            "number_attr": arg.number_attr, "type_list_attr": arg.type_list_attr, "is_ref": arg.is_ref}


# ------------------------------------------------------------- printing specs

def _quote(text: str) -> str:
    out = []
    for ch in text:
        if ch in "\\'\"":
            out.append("\\" + ch)
        elif " " <= ch <= "~":
            out.append(ch)
        else:
            out.append("\\%03o" % ord(ch))
    return "'" + "".join(out) + "'"


def _spec_type(enum: str, spec_names: dict[str, str]) -> str:
    return spec_names[enum]


def _text_value(kind: str, value: Any) -> str:
    if kind == "string" or kind == "func":
        return _quote(value)
    if kind == "int":
        return str(value)
    if kind == "float":
        return value if isinstance(value, str) else repr(float(value))
    if kind == "bool":
        return "true" if value else "false"
    if kind == "type":
        return str(value)
    if kind == "shape":
        if value["unknown_rank"]:
            return "{ unknown_rank: true }"
        return "{ " + " ".join(f"dim {{ size: {d} }}" for d in value["dims"]) + " }"
    if kind == "tensor":
        return "{ " + value["text"] + " }"
    raise ValueError(kind)


def to_specs(
    op: dict[str, Any], spec_names: dict[str, str], classes: dict[str, frozenset[str]] | None = None
) -> tuple[list[str], list[str], list[str]]:
    """(inputs, outputs, attrs) of a dump's op, as REGISTER_OP specs.

    ``spec_names`` maps a DataType enum name to the name a spec writes (DT_FLOAT -> float);
    a KeyError means the op uses a type opkernel does not model.  With ``classes`` (type
    class name -> its DataType enum names, largest first), an allowed set that holds a
    whole class names the class instead of its dtypes (``{numbertype, bool}``).
    """

    def type_items(allowed: list[str]) -> list[str]:
        rest, items = list(dict.fromkeys(allowed)), []
        for name, members in (classes or {}).items():
            if members <= set(rest):
                items.append(name)
                rest = [t for t in rest if t not in members]
        return items + [spec_names[t] for t in rest]

    def arg(a: dict[str, Any]) -> str:
        t = spec_names[a["type"]] if a["type"] else a["type_attr"] or a["type_list_attr"]
        if a["number_attr"]:
            t = f"{a['number_attr']} * {t}"
        if a["is_ref"]:
            t = f"Ref({t})"
        return f"{a['name']}: {t}"

    def attr(a: dict[str, Any]) -> str:
        is_list = a["type"].startswith("list(")
        kind = a["type"][5:-1] if is_list else a["type"]
        base = kind
        if a["allowed"] is not None:
            items = type_items(a["allowed"]) if kind == "type" else [_quote(s) for s in a["allowed"]]
            base = "{" + ", ".join(items) + "}"
        text = f"{a['name']}: {f'list({base})' if is_list else base}"
        if a["minimum"] is not None:
            text += f" >= {a['minimum']}"
        if "default" in a:
            d = a["default"]
            text += " = " + ("[" + ", ".join(_text_value(kind, v) for v in d) + "]" if is_list else _text_value(kind, d))
        return text

    return [arg(a) for a in op["inputs"]], [arg(a) for a in op["outputs"]], [attr(a) for a in op["attrs"]]
