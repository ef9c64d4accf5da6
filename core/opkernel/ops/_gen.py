"""Generation of the snake_case Python wrappers from OpDefs, as TensorFlow's
python_op_gen does: inputs are positional parameters, attrs that are not
inferred from the inputs are keyword parameters with their defaults, and the
docstring says which types each input accepts."""

from __future__ import annotations

import keyword
from typing import Any, Callable

from ..dtypes import DType
from ..op_registry import ArgDef, AttrDef, OpDef

__all__ = ["snake_case", "split_namespace", "attr_params", "make_wrapper"]


def snake_case(name: str) -> str:
    """TensorFlow's GenerateLowerCaseOpName: ZeroOut -> zero_out, Conv2D -> conv2d,
    AddN -> add_n, ConcatV2 -> concat_v2, Conv2DBackpropInput -> conv2d_backprop_input."""
    out: list[str] = []
    last = len(name) - 1
    for i, c in enumerate(name):
        if c == ">":
            out.append("_")
            continue
        if c.isupper() and i > 0 and name[i - 1] != ">":
            if name[i - 1].islower() or (i < last and name[i + 1].islower()):
                out.append("_")
        out.append(c.lower())
    return "".join(out)


def split_namespace(op_name: str) -> tuple[str | None, str]:
    """``"Addons>MedianPool2D"`` -> ``("addons", "median_pool2d")``."""
    if ">" in op_name:
        ns, rest = op_name.split(">", 1)
        return snake_case(ns), snake_case(rest)
    return None, snake_case(op_name)


_RESERVED = {"name", "_kernel"}

#: TensorFlow's Python names for some built-in ops' inputs and attrs (the renames of its
#: ApiDefs, which python_op_gen applies): tf.raw_ops.Sum takes ``axis``, not the OpDef's
#: ``reduction_indices``.  The wrappers use them so that code written for tf.raw_ops runs
#: with the same keywords; the OpDef, and calls by name (``ok.execute``), keep TensorFlow's
#: OpDef names.  tests/tf_conformance/test_interfaces.py checks this table against TensorFlow.
API_NAMES: dict[str, dict[str, str]] = {
    **{op: {"reduction_indices": "axis"} for op in ("All", "Any", "Max", "Mean", "Min", "Prod", "Sum")},
    "ExpandDims": {"dim": "axis"},
    "Split": {"split_dim": "axis"},
    "SplitV": {"split_dim": "axis"},
    "Squeeze": {"squeeze_dims": "axis"},
    "Select": {"t": "x", "e": "y"},
    "Where": {"input": "condition"},
}


def param_name(name: str, op: str | None = None) -> str:
    """The wrapper's parameter for input or attr ``name`` of ``op``: its Python name
    (API_NAMES), made safe (TensorFlow appends ``_`` to keywords)."""
    name = API_NAMES.get(op, {}).get(name, name) if op is not None else name
    if keyword.iskeyword(name) or name in _RESERVED:
        return name + "_"
    return name


def _types_text(op_def: OpDef, arg: ArgDef) -> str:
    if arg.dtype is not None:
        kind = f"of type `{arg.dtype.name}`"
    else:
        attr = op_def.attr(arg.type_list_attr or arg.type_attr or "")
        allowed = attr.allowed_values
        kind = (
            "Must be one of the following types: " + ", ".join(f"`{d.name}`" for d in sorted(allowed, key=lambda d: d.name)) + "."
            if allowed
            else ""
        )
    if arg.is_list:
        count = f"of at least {op_def.attr(arg.number_attr).minimum or 1} " if arg.number_attr else ""
        return f"A list {count}`Tensor` objects{' ' + kind if arg.dtype else ''}. {kind if not arg.dtype else ''}".strip()
    if arg.dtype is not None:
        return f"A `Tensor` {kind}."
    return f"A `Tensor`. {kind}".strip()


def _attr_text(attr: AttrDef) -> str:
    base = f"An optional `{attr.type}`" if attr.has_default else f"A `{attr.type}`"
    if attr.allowed_values:
        base += " from: " + ", ".join(f"`{v.name if isinstance(v, DType) else repr(v)}`" for v in attr.allowed_values)
    if attr.minimum is not None:
        base += f" that is `>= {attr.minimum}`"
    if attr.has_default:
        d = attr.default
        base += f". Defaults to `{d.name if isinstance(d, DType) else repr(d)}`"
    return base + "."


def _returns_text(op_def: OpDef) -> str:
    if not op_def.outputs:
        return "None."
    parts = []
    for out in op_def.outputs:
        if out.dtype is not None:
            kind = f"A `Tensor` of type `{out.dtype.name}`."
        elif out.type_attr and out.type_attr in op_def.inferred_attrs:
            src = next(param_name(a.name, op_def.name) for a in op_def.inputs if a.type_attr == out.type_attr)
            kind = f"A `Tensor`. Has the same type as `{src}`."
        else:
            kind = f"A `Tensor` of type `{out.type_attr or out.type_list_attr}`."
        if out.is_list:
            kind = "A list of `Tensor` objects. " + kind.replace("A `Tensor`", "Each").replace("A `Tensor` of", "Each of")
        parts.append(kind if len(op_def.outputs) == 1 else f"{out.name}: {kind}")
    if len(parts) == 1:
        return parts[0]
    return "A tuple of `Tensor` objects (" + ", ".join(o.name for o in op_def.outputs) + ").\n    " + "\n    ".join(parts)


def docstring(op_def: OpDef) -> str:
    lines = [op_def.doc.strip() or f"Runs the op {op_def.name}.", "", "Args:"]
    for arg in op_def.inputs:
        lines.append(f"  {param_name(arg.name, op_def.name)}: {_types_text(op_def, arg)}")
    for attr in op_def.attrs:
        if attr.name not in op_def.inferred_attrs:
            lines.append(f"  {param_name(attr.name, op_def.name)}: {_attr_text(attr)}")
    lines += ["  name: A name for the operation (optional).", "", "Returns:", "  " + _returns_text(op_def)]
    return "\n".join(lines)


def list_attr_key(value: Any) -> tuple[Any, ...]:
    """The fast-table key of a list attr's value: a list or tuple keys as its
    elements with their classes, so [1, 1] and (True, 1) never share an entry.
    Anything else raises TypeError, which sends the call down the general path."""
    if value.__class__ is not list and value.__class__ is not tuple:
        raise TypeError(value)
    return (tuple(value), tuple(v.__class__ for v in value))


def attr_params(op_def: OpDef) -> tuple[list[AttrDef], list[AttrDef]]:
    """The attrs a wrapper takes as parameters, in their order after the inputs:
    those without a default, then those with one (inferred attrs are not parameters).
    The stub generator (``_stubgen``) lays out the typed signatures the same way."""
    attrs = [a for a in op_def.attrs if a.name not in op_def.inferred_attrs]
    return [a for a in attrs if not a.has_default], [a for a in attrs if a.has_default]


def make_wrapper(op_def: OpDef, handle: Any, engine: Any) -> Callable[..., Any]:
    """Compile a wrapper function for ``op_def`` (real parameters, so help() and
    IDEs see the signature, and no per-call argument parsing).

    For ops whose inputs are single tensors, the wrapper first looks the call up
    in the op handle's ``fast`` table — keyed by the active backend, the input
    dtypes, the classes of Ref inputs and the attr values with their classes —
    and runs the cached signature directly; anything else (literals, another
    backend, a kernel label, a first call) goes through ``engine.execute``,
    which files the signature under the key the wrapper built.  The key is
    built here only, so calls by name (``ok.execute``) never add to the table.
    """
    fname = split_namespace(op_def.name)[1]

    def pname(name: str) -> str:
        return param_name(name, op_def.name)

    inputs = [pname(a.name) for a in op_def.inputs]
    required_attrs, optional_attrs = attr_params(op_def)
    ordered = required_attrs + optional_attrs
    params = inputs + [f"{pname(a.name)}=_REQUIRED" for a in required_attrs]
    params += [f"{pname(a.name)}=_D_{i}" for i, a in enumerate(optional_attrs)]
    params += ["name=None", "*", "_kernel=None"]
    attr_dict = ", ".join(f"{a.name!r}: {pname(a.name)}" for a in ordered)
    tuple_expr = "(" + "".join(f"{p}, " for p in inputs) + ")"
    lines = [f"def {fname}({', '.join(params)}):"]
    key_arg = ""
    if not any(a.is_list for a in op_def.inputs):
        # Generated locals start with "_": spec names cannot, so they never shadow a parameter.
        refs = [pname(a.name) for a in op_def.inputs if a.is_ref]
        attr_keys = [
            f"_lk({pname(a.name)})" if a.type.startswith("list(") else f"{pname(a.name)}, {pname(a.name)}.__class__"
            for a in ordered
        ]
        key = ", ".join(["_be"] + [f"{p}._dtype" for p in inputs] + [f"{p}.__class__" for p in refs] + attr_keys)
        same = " and ".join(f"{p}._backend is _be" for p in inputs) or "True"
        lines += [
            "    _key = None",
            "    if _kernel is None and not _SLOW_SCOPES[0]:",
            "        _be = _active() or _DEFAULT[0]",
            "        try:",
            f"            _key = ({key},)",
            "            _call = _fast[_key]",
            "        except KeyError:",
            "            pass",
            "        except (AttributeError, TypeError):",
            "            _key = None",
            "        else:",
            f"            if {same}:",
            f"                return _call({', '.join(inputs)})",
            "            _key = None",
        ]
        key_arg = ", _key"
    lines.append(f"    return _execute(_handle, {tuple_expr}, {{{attr_dict}}}, _kernel{key_arg})")
    namespace: dict[str, Any] = {
        "_execute": engine.execute, "_handle": handle, "_fast": handle.fast, "_REQUIRED": engine.REQUIRED,
        "_active": engine.ACTIVE.get, "_DEFAULT": engine.DEFAULT, "_SLOW_SCOPES": engine.SLOW_SCOPES,
        "_lk": list_attr_key,
    }
    for i, a in enumerate(optional_attrs):
        namespace[f"_D_{i}"] = a.default
    exec(compile("\n".join(lines) + "\n", f"<opkernel wrapper {op_def.name}>", "exec"), namespace)
    fn: Callable[..., Any] = namespace[fname]
    fn.__doc__ = docstring(op_def)
    fn.__module__ = "opkernel.ops"
    fn.__qualname__ = fname
    fn._op_name = op_def.name  # type: ignore[attr-defined]
    return fn
