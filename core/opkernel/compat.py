"""Op compatibility: is a new version of an op's definition safe for existing callers?

``check(old, new)`` applies TensorFlow's rules for evolving an op (its "Adding an
op: backwards compatibility" guide and ``OpDefCompatible``) and returns a
:class:`CompatReport`: ``.compatible``, and ``.reasons``, one line per rule that
applied, each naming the rule and saying ``compatible`` or ``BREAKING``.

Compatible: a new attr with a default (that keeps the old behaviour: a new
type attr standing for a fixed dtype must default to it); relaxing a
constraint (more allowed values, or none; a lower minimum); a default for an
attr that had none; a single input or output becoming a list whose default
length and types give the old signature; a new list input or output (after the
old ones) whose default is empty; dropping ``Ref`` from an input, adding it to
an output.  Breaking: renaming the op, removing, renaming or reordering inputs,
outputs or attrs, a new attr without a default, tightening a constraint,
changing or removing a default, changing a type.  Docs may change freely.

Snapshots hold the interface of every op of one plugin as JSON; the built-in
ops' is ``tests/snapshots/builtin_ops.json``, and a test fails when a built-in
op changes incompatibly.  After a compatible change, refresh it with::

    opkernel compat --update-snapshot tests/snapshots/builtin_ops.json

(``--plugin NAME`` for another plugin's ops; ``--check-snapshot FILE`` only
compares; ``python -m opkernel.compat`` is the same command).
``opkernel compat OLD.json NEW.json`` compares two files (one
OpDef, a list of them, or a snapshot) and exits with status 1 when a change
breaks, 2 when a file cannot be read or does not hold well-formed op
definitions (the message names the file, the op and each problem).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import op_registry, plugins
from .errors import OpSpecError
from .hookspecs import PLUGIN_API_VERSION
from .op_registry import ArgDef, AttrDef, OpDef

__all__ = [
    "CompatReport",
    "Verdict",
    "check",
    "compare",
    "interface",
    "snapshot",
    "check_snapshot",
    "update_snapshot",
    "load_ops",
    "print_reports",
    "main",
    "EXIT_COMPATIBLE",
    "EXIT_BREAKING",
    "EXIT_BAD_INPUT",
]


@dataclass(frozen=True)
class Verdict:
    """One rule that applied to a change: its name, whether it breaks callers, the details."""

    rule: str
    breaking: bool
    detail: str

    def __str__(self) -> str:
        return f"{'BREAKING' if self.breaking else 'compatible'} [{self.rule}]: {self.detail}"


@dataclass(frozen=True)
class CompatReport:
    """The verdicts of one op's change; ``compatible`` unless one of them breaks."""

    op: str
    verdicts: tuple[Verdict, ...]

    @property
    def compatible(self) -> bool:
        return not any(v.breaking for v in self.verdicts)

    @property
    def reasons(self) -> list[str]:
        """One line per rule that applied (none: the interface is unchanged)."""
        return [str(v) for v in self.verdicts]

    def __str__(self) -> str:
        state = "compatible" if self.compatible else "BREAKING"
        head = f"op '{self.op}': {state}" + ("" if self.verdicts else " (interface unchanged)")
        return "\n".join([head, *(f"  {r}" for r in self.reasons)])


# ------------------------------------------------------------------ the rules


def _show(values: Iterable[Any]) -> str:
    return "{" + ", ".join(str(v) for v in values) + "}"


def _check_attr(old: AttrDef, new: AttrDef, out: list[Verdict]) -> None:
    name = f"attr '{old.name}'"
    if old.type != new.type:
        out.append(Verdict("attr type changed", True, f"{name}: {old.type} -> {new.type}"))
        return
    o, n = old.to_dict(), new.to_dict()
    before, after = o["allowed_values"], n["allowed_values"]
    if before != after:
        if after is None:
            out.append(Verdict("constraint relaxed", False, f"{name}: {_show(before)} -> any {old.type}"))
        elif before is None:
            out.append(Verdict("constraint tightened", True, f"{name}: any {old.type} -> {_show(after)}"))
        elif set(map(str, before)) <= set(map(str, after)):
            added = [v for v in after if v not in before]
            out.append(Verdict("constraint relaxed", False, f"{name}: {_show(before)} -> {_show(after)} (adds {_show(added)})"))
        else:
            dropped = [v for v in before if v not in after]
            out.append(Verdict("constraint tightened", True, f"{name}: {_show(before)} -> {_show(after)} (no longer allows {_show(dropped)})"))
    if old.minimum != new.minimum:
        if new.minimum is None or (old.minimum is not None and new.minimum < old.minimum):
            out.append(Verdict("minimum lowered", False, f"{name}: minimum {old.minimum} -> {new.minimum}"))
        else:
            out.append(Verdict("minimum raised", True, f"{name}: minimum {old.minimum} -> {new.minimum}"))
    if old.has_default and not new.has_default:
        out.append(Verdict("default removed", True, f"{name}: the default {o['default']!r} is gone; callers that omit it fail"))
    elif not old.has_default and new.has_default:
        out.append(Verdict("default added", False, f"{name}: now defaults to {n['default']!r}"))
    elif old.has_default and o["default"] != n["default"]:
        out.append(Verdict("default changed", True, f"{name}: default {o['default']!r} -> {n['default']!r}; callers that omit it change behaviour"))


def _tokens(arg: ArgDef, op: OpDef, shared: set[str]) -> tuple[str, ...]:
    """The signature of ``arg``: attrs both versions have stay symbolic (``@T``), attrs only
    ``op`` has are replaced by their defaults (TensorFlow's ComputeArgSignature)."""

    def default(name: str) -> Any:
        attr = op.attr_map.get(name)
        return attr.default if attr is not None and attr.has_default else None

    if arg.type_list_attr:
        if arg.type_list_attr in shared:
            return (f"@{arg.type_list_attr}",)
        types = default(arg.type_list_attr)
        return tuple(t.name for t in types) if types is not None else (f"?{arg.type_list_attr}",)
    if arg.dtype is not None:
        kind = arg.dtype.name
    elif arg.type_attr in shared:
        kind = f"@{arg.type_attr}"
    else:
        dtype = default(arg.type_attr or "")
        kind = dtype.name if dtype is not None else f"?{arg.type_attr}"
    if arg.number_attr:
        if arg.number_attr in shared:
            return (f"{arg.number_attr}*{kind}",)
        count = default(arg.number_attr)
        return (kind,) * count if count is not None else (f"?{arg.number_attr}*{kind}",)
    return (kind,)


def _signature(tokens: tuple[str, ...]) -> str:
    return "[" + ", ".join(tokens) + "]"


def _check_args(kind: str, old: OpDef, new: OpDef, shared: set[str], out: list[Verdict]) -> None:
    olds = list(old.inputs if kind == "input" else old.outputs)
    news = list(new.inputs if kind == "input" else new.outputs)
    old_names, new_names = [a.name for a in olds], [a.name for a in news]
    removed = [i for i, a in enumerate(olds) if a.name not in new_names]
    added = [i for i, a in enumerate(news) if a.name not in old_names]
    for i in [i for i in removed if i in added]:
        out.append(Verdict(f"{kind} renamed", True, f"{kind} {i} '{olds[i].name}' -> '{news[i].name}'"))
        removed.remove(i)
        added.remove(i)
    for i in removed:
        out.append(Verdict(f"{kind} removed", True, f"{kind} '{olds[i].name}' is gone"))
    for i in added:
        arg = news[i]
        tokens = _tokens(arg, new, shared)
        if arg.is_list and tokens == () and i >= len(olds):
            out.append(Verdict(f"list {kind} added with empty default", False, f"new list {kind} '{arg.name}' defaults to no tensors"))
        elif arg.is_list and tokens == ():
            out.append(Verdict(f"{kind} added", True, f"new list {kind} '{arg.name}' comes before existing {kind}s, shifting them"))
        else:
            what = f"defaults to {_signature(tokens)}" if arg.is_list else "is required"
            out.append(Verdict(f"{kind} added", True, f"new {kind} '{arg.name}' {what}; old calls do not provide it"))
    common_old = [n for n in old_names if n in new_names]
    common_new = [n for n in new_names if n in old_names]
    if common_old != common_new:
        out.append(Verdict(f"{kind}s reordered", True, f"{', '.join(common_old)} -> {', '.join(common_new)}"))
    for name in common_old:
        a, b = olds[old_names.index(name)], news[new_names.index(name)]
        before, after = _tokens(a, old, shared), _tokens(b, new, shared)
        label = f"{kind} '{name}'"
        if not a.is_list and b.is_list:
            ok = before == after
            out.append(Verdict(
                f"{kind} became a list", not ok,
                f"{label}: {_signature(before)} -> list defaulting to {_signature(after)}"
                + ("" if ok else "; the default length and types must give the old signature"),
            ))
        elif a.is_list and not b.is_list:
            out.append(Verdict(f"{kind} list became single", True, f"{label}: {_signature(before)} -> {_signature(after)}"))
        elif before != after:
            out.append(Verdict(f"{kind} type changed", True, f"{label}: {_signature(before)} -> {_signature(after)}"))
        if a.is_ref != b.is_ref:
            gained = b.is_ref
            fine = (kind == "input") != gained  # inputs may drop Ref, outputs may gain it
            out.append(Verdict(
                f"{kind} {'became' if gained else 'no longer'} Ref", not fine,
                f"{label}: {'Ref(' if a.is_ref else ''}{_signature(before)}{')' if a.is_ref else ''} -> "
                f"{'Ref(' if b.is_ref else ''}{_signature(after)}{')' if b.is_ref else ''}",
            ))


def _as_op_def(op: OpDef | Mapping[str, Any]) -> OpDef:
    return op if isinstance(op, OpDef) else OpDef.from_dict(op)


def check(old: OpDef | Mapping[str, Any], new: OpDef | Mapping[str, Any]) -> CompatReport:
    """Whether ``new`` (an OpDef or its ``to_dict()``) can replace ``old`` without breaking callers."""
    old_def, new_def = _as_op_def(old), _as_op_def(new)
    out: list[Verdict] = []
    if old_def.name != new_def.name:
        out.append(Verdict("op renamed", True, f"'{old_def.name}' -> '{new_def.name}'"))
    for attr in old_def.attrs:
        if attr.name not in new_def.attr_map:
            out.append(Verdict("attr removed", True, f"attr '{attr.name}' ({attr.type}) is gone"))
        else:
            _check_attr(attr, new_def.attr_map[attr.name], out)
    for attr in new_def.attrs:
        if attr.name in old_def.attr_map:
            continue
        if attr.has_default:
            out.append(Verdict("attr added with default", False, f"attr '{attr.name}' ({attr.type}) defaults to {attr.to_dict()['default']!r}"))
        else:
            out.append(Verdict("attr added without default", True, f"attr '{attr.name}' ({attr.type}) has no default; old calls do not set it"))
    shared = set(old_def.attr_map) & set(new_def.attr_map)
    _check_args("input", old_def, new_def, shared, out)
    _check_args("output", old_def, new_def, shared, out)
    return CompatReport(new_def.name, tuple(out))


def compare(old: Mapping[str, OpDef], new: Mapping[str, OpDef]) -> list[CompatReport]:
    """Reports for every op of ``old`` (by name): removed ops break, new ops are compatible."""
    reports = []
    for name in sorted(old):
        if name not in new:
            reports.append(CompatReport(name, (Verdict("op removed", True, f"op '{name}' is no longer registered"),)))
        else:
            reports.append(check(old[name], new[name]))
    for name in sorted(set(new) - set(old)):
        reports.append(CompatReport(name, (Verdict("op added", False, f"op '{name}' is new"),)))
    return reports


# ------------------------------------------------------------------ snapshots


def interface(op: OpDef) -> dict[str, Any]:
    """``op.to_dict()`` without what callers never see: docs and where it was registered."""
    data = op.to_dict()
    del data["doc"], data["registered_at"]
    for key in ("inputs", "outputs", "attrs"):
        for item in data[key]:
            item.pop("description", None)
    return data


def _ops_of(plugin: str) -> dict[str, OpDef]:
    plugins.ensure_loaded()
    snap = op_registry.snapshot()
    names = [n for n, r in snap.pending.items() if r.provider is not None and r.provider.plugin == plugin]
    names += [n for n, d in snap.ops.items() if d.provider is not None and d.provider.plugin == plugin]
    return {name: op_registry.get_op_def(name) for name in sorted(names)}


def snapshot(plugin: str = "builtin") -> dict[str, Any]:
    """The interface of every op ``plugin`` registered, as JSON-safe data."""
    ops = _ops_of(plugin)
    if not ops:
        known = sorted(p.name for p in plugins.plugins())
        raise LookupError(f"plugin {plugin!r} registered no ops (loaded plugins: {known})")
    return {"plugin": plugin, "plugin_api": PLUGIN_API_VERSION, "ops": {n: interface(d) for n, d in ops.items()}}


_OP_KEYS = frozenset({"name", "inputs", "outputs", "attrs", "doc", "is_stateful", "registered_at"})
_ARG_KEYS = frozenset({"name", "dtype", "type_attr", "number_attr", "type_list_attr", "is_ref", "description"})
_ATTR_KEYS = frozenset({"name", "type", "allowed_values", "minimum", "has_default", "default", "description"})
_SNAPSHOT_KEYS = frozenset({"ops", "plugin", "plugin_api"})
_SCALAR_ATTR_TYPES = ("string", "int", "float", "bool", "type", "shape", "tensor")
_ATTR_TYPES = frozenset(_SCALAR_ATTR_TYPES) | {f"list({t})" for t in _SCALAR_ATTR_TYPES}


def _is_name(value: Any) -> bool:
    return isinstance(value, str) and value.isidentifier() and value.isascii()


def _kind(value: Any) -> str:
    """A JSON value's kind, for messages: "an object", "an int", "null"."""
    if value is None:
        return "null"
    name = {dict: "object", list: "array", str: "string", bool: "boolean"}.get(type(value), type(value).__name__)
    return f"{'an' if name[0] in 'aeiou' else 'a'} {name}"


def _arg_problems(kind: str, k: int, arg: Any, attr_types: Mapping[str, Any]) -> list[str]:
    where = f"{kind} #{k}"
    if not isinstance(arg, Mapping):
        return [f"{where} must be an object, got {_kind(arg)}"]
    name = arg.get("name")
    where = f"{kind} {name!r}" if _is_name(name) else where
    problems = [f"{where}: unknown key {key!r} (expected some of {', '.join(sorted(_ARG_KEYS))})" for key in arg if key not in _ARG_KEYS]
    if not _is_name(name):
        problems.append(f"{where}: 'name' must be an identifier, got {name!r}")
    typed = [key for key in ("dtype", "type_attr", "type_list_attr") if arg.get(key) is not None]
    if len(typed) != 1:
        problems.append(f"{where}: exactly one of 'dtype', 'type_attr', 'type_list_attr' must be set, got {typed or 'none'}")
    for key, wanted in (("type_attr", "type"), ("type_list_attr", "list(type)"), ("number_attr", "int")):
        ref = arg.get(key)
        if ref is not None and attr_types.get(ref) != wanted:
            found = "no such attr" if ref not in attr_types else f"attr {ref!r} has type {attr_types[ref]!r}"
            problems.append(f"{where}: {key!r} must name an attr of type {wanted!r}, got {ref!r} ({found})")
    if arg.get("number_attr") is not None and arg.get("type_list_attr") is not None:
        problems.append(f"{where}: a list argument has either 'number_attr' or 'type_list_attr', not both")
    for key in ("dtype", "type_attr", "number_attr", "type_list_attr"):
        if arg.get(key) is not None and not isinstance(arg[key], str):
            problems.append(f"{where}: {key!r} must be a string or null, got {_kind(arg[key])}")
    if not isinstance(arg.get("is_ref", False), bool):
        problems.append(f"{where}: 'is_ref' must be a boolean, got {_kind(arg['is_ref'])}")
    return problems


def _attr_problems(k: int, attr: Any) -> list[str]:
    if not isinstance(attr, Mapping):
        return [f"attr #{k} must be an object, got {_kind(attr)}"]
    name = attr.get("name")
    where = f"attr {name!r}" if _is_name(name) else f"attr #{k}"
    problems = [f"{where}: unknown key {key!r} (expected some of {', '.join(sorted(_ATTR_KEYS))})" for key in attr if key not in _ATTR_KEYS]
    if not _is_name(name):
        problems.append(f"{where}: 'name' must be an identifier, got {name!r}")
    if attr.get("type") not in _ATTR_TYPES:
        problems.append(f"{where}: 'type' must be one of {', '.join(sorted(_ATTR_TYPES))}, got {attr.get('type')!r}")
    allowed = attr.get("allowed_values")
    if allowed is not None and not isinstance(allowed, list):
        problems.append(f"{where}: 'allowed_values' must be an array or null, got {_kind(allowed)}")
    minimum = attr.get("minimum")
    if minimum is not None and (not isinstance(minimum, int) or isinstance(minimum, bool)):
        problems.append(f"{where}: 'minimum' must be an integer or null, got {_kind(minimum)}")
    has_default = attr.get("has_default", False)
    if not isinstance(has_default, bool):
        problems.append(f"{where}: 'has_default' must be a boolean, got {_kind(has_default)}")
    elif has_default and "default" not in attr:
        problems.append(f"{where}: 'has_default' is true but there is no 'default'")
    return problems


def _op_problems(data: Any) -> list[str]:
    """What makes ``data`` not an OpDef dict as ``OpDef.to_dict()`` (or a snapshot) writes it."""
    if not isinstance(data, Mapping):
        return [f"an op definition must be an object, got {_kind(data)}"]
    problems = [f"unknown key {key!r} (expected some of {', '.join(sorted(_OP_KEYS))})" for key in data if key not in _OP_KEYS]
    name = data.get("name")
    if not isinstance(name, str) or not op_registry._OP_NAME_RE.fullmatch(name):
        problems.append(f"'name' must be an op name (CamelCase, optionally after 'Namespace>'), got {name!r}")
    lists = {}
    for key in ("inputs", "outputs", "attrs"):
        lists[key] = data.get(key, [])
        if not isinstance(lists[key], list):
            problems.append(f"{key!r} must be an array, got {_kind(lists[key])}")
            lists[key] = []
    for key, wanted in (("is_stateful", bool), ("doc", str), ("registered_at", str)):
        if key in data and not isinstance(data[key], wanted):
            problems.append(f"{key!r} must be {_kind(wanted())}, got {_kind(data[key])}")
    for k, attr in enumerate(lists["attrs"]):
        problems += _attr_problems(k, attr)
    attr_types = {a["name"]: a.get("type") for a in lists["attrs"] if isinstance(a, Mapping) and _is_name(a.get("name"))}
    for kind in ("input", "output"):
        for k, arg in enumerate(lists[kind + "s"]):
            problems += _arg_problems(kind, k, arg, attr_types)
    seen: dict[str, str] = {}
    for kind in ("input", "output", "attr"):
        for item in lists[kind + "s"]:
            item_name = item.get("name") if isinstance(item, Mapping) else None
            if isinstance(item_name, str) and _is_name(item_name):
                if item_name in seen:
                    problems.append(f"the name {item_name!r} is given twice ({seen[item_name]} and {kind}); names must be unique")
                seen.setdefault(item_name, kind)
    return problems


def _read_json(path: Path) -> Any:
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as e:
        raise OpSpecError(f"{path}: not UTF-8 text ({e.reason} at byte {e.start})") from e
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise OpSpecError(f"{path}: not valid JSON: {e.msg} at line {e.lineno}, column {e.colno}") from e
    except RecursionError as e:
        raise OpSpecError(f"{path}: its JSON is nested too deeply to be op definitions") from e


def load_ops(path: str | Path) -> dict[str, OpDef]:
    """The OpDefs in a JSON file: a snapshot, a list of OpDef dicts, or one OpDef dict.

    A file that is not UTF-8 JSON, or that holds anything but well-formed op
    definitions (unknown keys, arguments typed by missing attrs, duplicate names
    or ops) raises OpSpecError naming the file, the op and every problem;
    OSError when it cannot be read."""
    path = Path(path)
    data = _read_json(path)
    entries: list[tuple[str, Any]]
    if isinstance(data, Mapping) and "ops" in data:
        extra = sorted(str(k) for k in data if k not in _SNAPSHOT_KEYS)
        if extra:
            raise OpSpecError(f"{path}: a snapshot has the keys {sorted(_SNAPSHOT_KEYS)}, not {extra}")
        ops = data["ops"]
        if isinstance(ops, Mapping):
            entries = [(f"ops[{k!r}]", v) for k, v in ops.items()]
            for key, value in ops.items():
                if isinstance(value, Mapping) and value.get("name") != key:
                    raise OpSpecError(f"{path}: ops[{key!r}] holds the op {value.get('name')!r}; the key must be its name")
        elif isinstance(ops, list):
            entries = [(f"ops[{k}]", v) for k, v in enumerate(ops)]
        else:
            raise OpSpecError(f"{path}: 'ops' must be an object or an array of op definitions, got {_kind(ops)}")
    elif isinstance(data, list):
        entries = [(f"entry {k}", v) for k, v in enumerate(data)]
    elif isinstance(data, Mapping):
        entries = [("the op", data)]
    else:
        raise OpSpecError(f"{path}: expected an op definition, an array of them or a snapshot, got {_kind(data)}")
    result: dict[str, OpDef] = {}
    for where, item in entries:
        label = f"{where} ({item['name']!r})" if isinstance(item, Mapping) and isinstance(item.get("name"), str) else where
        problems = _op_problems(item)
        if problems:
            raise OpSpecError(f"{path}: {label} is malformed: " + "; ".join(problems))
        try:
            op = OpDef.from_dict(item)
        except OpSpecError as e:
            raise OpSpecError(f"{path}: {label} is malformed: {e.__cause__ or e}") from e
        if op.name in result:
            raise OpSpecError(f"{path}: op {op.name!r} is defined twice")
        result[op.name] = op
    return result


def check_snapshot(path: str | Path, plugin: str = "builtin") -> list[CompatReport]:
    """Reports comparing the snapshot at ``path`` with ``plugin``'s ops as registered now.

    LookupError when ``plugin`` is installed but failed to load (its ops would all read as
    removed), naming the recorded failure."""
    old = load_ops(path)
    current = _ops_of(plugin)
    if not current:
        failure = plugins.failure_of(plugin)
        if failure is not None:
            raise LookupError(f"cannot check the ops of plugin {plugin!r}: {failure.failed_to_load()}")
    return compare(old, current)


def update_snapshot(path: str | Path, plugin: str = "builtin", *, force: bool = False) -> list[CompatReport]:
    """Write ``plugin``'s current interface to ``path``; refuses (ValueError) when a
    change breaks, unless ``force``.  Returns the reports of the changes."""
    target = Path(path)
    reports = check_snapshot(target, plugin) if target.exists() else []
    broken = [r for r in reports if not r.compatible]
    if broken and not force:
        raise ValueError("refusing to record breaking changes (use --force if intended):\n" + "\n".join(map(str, broken)))
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(snapshot(plugin), indent=1, sort_keys=True) + "\n", encoding="utf-8")
    return reports


def print_reports(reports: Sequence[CompatReport], quiet_unchanged: bool = True) -> None:
    """Print the reports of changed ops (all with ``quiet_unchanged=False``) and a summary line."""
    for report in reports:
        if report.verdicts or not quiet_unchanged:
            print(report)
    broken = sum(not r.compatible for r in reports)
    changed = sum(bool(r.verdicts) for r in reports)
    print(f"{len(reports)} ops compared: {changed} changed, {broken} breaking")


#: Exit statuses of ``opkernel compat`` and ``python -m opkernel.compat`` (as diff's:
#: 0 same, 1 different, 2 trouble).
EXIT_COMPATIBLE, EXIT_BREAKING, EXIT_BAD_INPUT = 0, 1, 2
EXIT_STATUS_HELP = (
    "exit status: 0 every change is compatible; 1 a change breaks existing callers; "
    "2 a file cannot be read, is not JSON or does not hold well-formed op definitions "
    "(or the command line is wrong)"
)


def main(argv: Sequence[str] | None = None, prog: str = "opkernel compat") -> int:
    """``opkernel compat`` (and its alias ``python -m opkernel.compat``): compare two
    files, or check / refresh a plugin's snapshot."""
    parser = argparse.ArgumentParser(prog=prog, description=__doc__.splitlines()[0], epilog=EXIT_STATUS_HELP)
    parser.add_argument("files", nargs="*", metavar="OLD.json NEW.json", help="compare two files of OpDefs")
    parser.add_argument("--update-snapshot", metavar="FILE", help="record the plugin's ops in FILE (compatible changes only)")
    parser.add_argument("--check-snapshot", metavar="FILE", help="compare the plugin's ops with FILE")
    parser.add_argument("--plugin", default="builtin", help="whose ops (default: builtin, the core's)")
    parser.add_argument("--force", action="store_true", help="with --update-snapshot: record breaking changes too")
    args = parser.parse_args(argv)
    if not (args.update_snapshot or args.check_snapshot or len(args.files) == 2):
        parser.error("give OLD.json NEW.json, --check-snapshot FILE or --update-snapshot FILE")
    try:
        if args.update_snapshot:
            try:
                reports = update_snapshot(args.update_snapshot, args.plugin, force=args.force)
            except OpSpecError:
                raise
            except ValueError as e:  # a breaking change it refused to record
                print(e, file=sys.stderr)
                return EXIT_BREAKING
            print_reports(reports)
            print(f"wrote {args.update_snapshot}")
            return EXIT_COMPATIBLE
        if args.check_snapshot:
            reports = check_snapshot(args.check_snapshot, args.plugin)
        else:
            try:
                old, new = load_ops(args.files[0]), load_ops(args.files[1])
            except (OSError, OpSpecError) as e:
                print(f"{parser.prog}: cannot read the OpDefs: {e}", file=sys.stderr)
                return EXIT_BAD_INPUT
            reports = compare(old, new)
    except (OSError, OpSpecError, LookupError) as e:
        print(f"{parser.prog}: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    print_reports(reports, quiet_unchanged=bool(args.check_snapshot))  # two files: every op, changed or not
    return EXIT_COMPATIBLE if all(r.compatible for r in reports) else EXIT_BREAKING


if __name__ == "__main__":
    raise SystemExit(main(prog="python -m opkernel.compat"))
