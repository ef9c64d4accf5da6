"""Op definitions and the op registry.

An op is declared with TensorFlow's builder and spec grammar::

    register_op("ZeroOut").attr("T: {float, int32} = DT_INT32") \\
        .input("to_zero: T").output("zeroed: T")

:func:`register_op` stores the registration at once, pending; the first lookup
(:func:`get_op_def`) finalizes it into an immutable :class:`OpDef`, as
TensorFlow does.  Syntax errors surface at the ``.input``/``.attr`` call,
cross-check errors at finalization; either way nothing is left registered.
"""

from __future__ import annotations

import inspect
import re
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import FrozenInstanceError, dataclass, field, replace
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Callable, TypeVar

from ._attr_values import (
    _WRONG_KIND,
    _attr_message,
    _canonical,
    _decode,
    _element_type,
    _encode,
    _encode_scalar,
    _expected_kind,
    _show,
    _violation,
)
from ._known_packages import known_package_for
from ._provenance import Provider, caller_location, current_provider
from .dtypes import DType, as_dtype
from .errors import (
    AlreadyExistsError,
    InvalidArgumentError,
    OpNotFoundError,
    OpSpecError,
    OpTypeError,
)

if TYPE_CHECKING:
    from .spec import ArgSpec, AttrSpec

# The spec grammar (opkernel.spec) is imported by the first builder method that
# parses a spec, not with opkernel: it is needed only once ops are registered.

__all__ = [
    "ArgDef",
    "AttrDef",
    "OpDef",
    "OpDefBuilder",
    "OpRegistration",
    "RegistrySnapshot",
    "register_op",
    "get_op_def",
    "op_names",
    "is_registered",
    "declaration",
    "remove_provider",
    "version",
    "snapshot",
    "restore",
]

ShapeFn = Callable[..., Any]

_OP_NAME_RE = re.compile(r"(?:[A-Za-z][A-Za-z0-9_]*>)?[A-Z][A-Za-z0-9_]*", re.ASCII)
_DOC_NAME_RE = re.compile(r"([A-Za-z][A-Za-z0-9_]*)\s*:\s?(.*)", re.ASCII)
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


# ------------------------------------------------------------------ definitions


@dataclass(frozen=True)
class ArgDef:
    """One input or output of an op.

    Exactly one of ``dtype`` (a fixed dtype), ``type_attr`` (a ``type`` attr)
    and ``type_list_attr`` (a ``list(type)`` attr) says its type;
    ``number_attr`` names the int attr giving the length of an ``N * T`` list.
    """

    name: str
    dtype: DType | None = None
    type_attr: str | None = None
    number_attr: str | None = None
    type_list_attr: str | None = None
    is_ref: bool = False
    description: str = ""

    @property
    def is_list(self) -> bool:
        """Whether the argument is a list of tensors."""
        return self.number_attr is not None or self.type_list_attr is not None

    def to_dict(self) -> dict[str, Any]:
        """A JSON-safe dict; :meth:`from_dict` reads it back."""
        return {
            "name": self.name,
            "dtype": None if self.dtype is None else self.dtype.name,
            "type_attr": self.type_attr,
            "number_attr": self.number_attr,
            "type_list_attr": self.type_list_attr,
            "is_ref": self.is_ref,
            "description": self.description,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ArgDef:
        """The ArgDef :meth:`to_dict` wrote."""
        dtype = data.get("dtype")
        fields = {**data, "dtype": None if dtype is None else as_dtype(dtype)}
        return cls(**fields)


@dataclass(frozen=True, eq=False)
class AttrDef:
    """One attr of an op: its type (``"int"``, ``"list(type)"``, ...), constraints and default.

    ``default`` is canonical: a DType for type attrs, a TensorShape for shape
    attrs, a read-only numpy array for tensor attrs, a tuple for lists.
    """

    name: str
    type: str
    allowed_values: tuple[Any, ...] | None = None
    minimum: int | None = None
    has_default: bool = False
    default: Any = None
    description: str = ""

    @property
    def is_list(self) -> bool:
        """Whether the attr holds a list (``list(...)``)."""
        return self.type.startswith("list(")

    def to_dict(self) -> dict[str, Any]:
        """A JSON-safe dict; :meth:`from_dict` reads it back."""
        allowed = self.allowed_values
        return {
            "name": self.name,
            "type": self.type,
            "allowed_values": None if allowed is None else [_encode_scalar(v) for v in allowed],
            "minimum": self.minimum,
            "has_default": self.has_default,
            "default": _encode(self.type, self.default) if self.has_default else None,
            "description": self.description,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> AttrDef:
        """The AttrDef :meth:`to_dict` wrote."""
        attr_type = data["type"]
        allowed = data.get("allowed_values")
        element_type = _element_type(attr_type)
        return cls(
            name=data["name"],
            type=attr_type,
            allowed_values=None if allowed is None else tuple(_decode(element_type, v) for v in allowed),
            minimum=data.get("minimum"),
            has_default=data.get("has_default", False),
            default=_decode(attr_type, data["default"]) if data.get("has_default") else None,
            description=data.get("description", ""),
        )

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, AttrDef):
            return NotImplemented
        return _canonical_json(self.to_dict()) == _canonical_json(other.to_dict())

    def __hash__(self) -> int:
        return hash((self.name, self.type))


@dataclass(frozen=True, eq=False)
class OpDef:
    """The finalized, immutable definition of an op.

    ``inferred_attrs`` are the attrs an input's type or length determines
    (``T`` in ``x: T``, ``N`` in ``x: N * T``); callers do not pass them.
    Equality compares the structure (name, arguments, attrs, doc, statefulness),
    not the shape function, provider or registration place.
    """

    name: str
    inputs: tuple[ArgDef, ...] = ()
    outputs: tuple[ArgDef, ...] = ()
    attrs: tuple[AttrDef, ...] = ()
    shape_fn: ShapeFn | None = None
    doc: str = ""
    is_stateful: bool = False
    provider: Provider | None = None
    registered_at: str = ""
    attr_map: Mapping[str, AttrDef] = field(init=False, repr=False)
    inferred_attrs: frozenset[str] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "attr_map", MappingProxyType({a.name: a for a in self.attrs}))
        object.__setattr__(self, "inferred_attrs", _inferred_attrs(self.inputs))

    @property
    def namespace(self) -> str | None:
        """The part of the name before ``>`` (``"Vendor"`` in ``"Vendor>MedianPool"``), or None."""
        return self.name.split(">", 1)[0] if ">" in self.name else None

    @property
    def summary(self) -> str:
        """The first line of the doc."""
        return next((line.strip() for line in self.doc.splitlines() if line.strip()), "")

    def attr(self, name: str) -> AttrDef:
        """The attr called ``name``; InvalidArgumentError if there is none."""
        found = self.attr_map.get(name)
        if found is None:
            known = ", ".join(repr(a.name) for a in self.attrs) or "none"
            raise InvalidArgumentError(f"op '{self.name}' has no attr '{name}'; its attrs: {known}", op=self.name)
        return found

    def coerce_attr(self, name: str, value: Any) -> Any:
        """``value`` checked against attr ``name`` and made canonical.

        An int attr takes an int (not a bool), a float attr an int or float, a
        type attr anything :func:`~opkernel.dtypes.as_dtype` takes, a shape attr
        a list, tuple, TensorShape or None, a tensor attr anything array-like,
        a list attr a list or tuple.  Allowed values and minimums are enforced.
        Raises InvalidArgumentError naming the op, the attr, what was expected
        and what was given.
        """
        attr = self.attr(name)
        canonical = _canonical(attr.type, value)
        if canonical is _WRONG_KIND:
            raise self._attr_error(name, f"must be {_expected_kind(attr.type)}", value)
        problem = _violation(attr, canonical)
        if problem is not None:
            raise self._attr_error(name, problem, canonical)
        return canonical

    def check_type_attr(self, attr_name: str, dtype: Any, arg_name: str) -> None:
        """Raise OpTypeError unless ``dtype`` is allowed for type attr ``attr_name``
        (inferred from input ``arg_name``)."""
        allowed = self.attr(attr_name).allowed_values
        dtype = as_dtype(dtype)
        if allowed is None or dtype in allowed:
            return
        where = f"attr '{attr_name}'" if arg_name == attr_name else f"input '{arg_name}' (attr '{attr_name}')"
        raise OpTypeError(
            f"op '{self.name}': {where} must have a dtype in {_show(allowed)}, got {dtype.name}", op=self.name
        )

    def _attr_error(self, name: str, problem: str, value: Any) -> InvalidArgumentError:
        return InvalidArgumentError(_attr_message(self.name, name, problem, value), op=self.name)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-safe dict of everything but the shape function and provider."""
        return {
            "name": self.name,
            "inputs": [arg.to_dict() for arg in self.inputs],
            "outputs": [arg.to_dict() for arg in self.outputs],
            "attrs": [attr.to_dict() for attr in self.attrs],
            "doc": self.doc,
            "is_stateful": self.is_stateful,
            "registered_at": self.registered_at,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> OpDef:
        """The OpDef :meth:`to_dict` wrote (without shape function or provider).

        A malformed dict raises OpSpecError."""
        try:
            return cls(
                name=data["name"],
                inputs=tuple(ArgDef.from_dict(d) for d in data.get("inputs", ())),
                outputs=tuple(ArgDef.from_dict(d) for d in data.get("outputs", ())),
                attrs=tuple(AttrDef.from_dict(d) for d in data.get("attrs", ())),
                doc=data.get("doc", ""),
                is_stateful=data.get("is_stateful", False),
                registered_at=data.get("registered_at", ""),
            )
        except (KeyError, TypeError, ValueError) as error:
            raise OpSpecError(f"malformed op dict for {data.get('name')!r}: {error!r}") from error

    def _structure(self) -> str:
        data = self.to_dict()
        del data["registered_at"]
        return _canonical_json(data)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, OpDef):
            return NotImplemented
        return self._structure() == other._structure()

    def __hash__(self) -> int:
        return hash(self.name)


def _inferred_attrs(inputs: tuple[ArgDef, ...]) -> frozenset[str]:
    names = {arg.type_attr for arg in inputs} | {arg.number_attr for arg in inputs}
    names |= {arg.type_list_attr for arg in inputs}
    return frozenset(name for name in names if name is not None)


def _canonical_json(data: Any) -> str:
    import json  # imported at first use, not with opkernel

    return json.dumps(data, sort_keys=True)


# ----------------------------------------------------------------- the builder

_B = TypeVar("_B", bound="OpDefBuilder")


def _check_op_name(name: object) -> None:
    if isinstance(name, str) and _OP_NAME_RE.fullmatch(name):
        return
    raise OpSpecError(
        f"invalid op name {name!r}: an op name is CamelCase (an uppercase letter, then letters, "
        "digits, underscores), optionally after one namespace prefix such as 'Vendor>MedianPool'",
        op=name if isinstance(name, str) else None,
    )


class OpDefBuilder:
    """Builds an :class:`OpDef` from specs in TensorFlow's grammar; every method chains.

    Spec syntax errors raise OpSpecError at once; :meth:`build` runs the
    cross-checks between specs.
    """

    def __init__(self, name: str) -> None:
        _check_op_name(name)
        self.name = name
        self.provider = current_provider()
        self.registered_at = caller_location()
        self._inputs: list[ArgSpec] = []
        self._outputs: list[ArgSpec] = []
        self._attrs: list[AttrSpec] = []
        self._shape_fn: ShapeFn | None = None
        self._doc: str | None = None
        self._is_stateful = False

    def input(self: _B, spec: str) -> _B:
        """Add an input, e.g. ``"x: T"``, ``"values: N * int32"``, ``"ref: Ref(T)"``."""
        from .spec import parse_arg_spec

        self._inputs.append(parse_arg_spec(spec, kind="input", op=self.name))
        return self

    def output(self: _B, spec: str) -> _B:
        """Add an output, in the same grammar as :meth:`input`."""
        from .spec import parse_arg_spec

        self._outputs.append(parse_arg_spec(spec, kind="output", op=self.name))
        return self

    def attr(self: _B, spec: str) -> _B:
        """Add an attr, e.g. ``"T: {float, int32} = DT_INT32"`` or ``"n: int >= 1 = 1"``."""
        from .spec import parse_attr_spec

        self._attrs.append(parse_attr_spec(spec, op=self.name))
        return self

    def set_shape_fn(self: _B, fn: ShapeFn) -> _B:
        """Set the shape function (called with an InferenceContext)."""
        if not callable(fn):
            raise OpSpecError(f"op '{self.name}': the shape function must be callable, got {fn!r}", op=self.name)
        self._shape_fn = fn
        return self

    def doc(self: _B, text: str) -> _B:
        """Set the doc, in TensorFlow's layout: a summary line, an optional
        description, then ``name: description`` entries for inputs, outputs and
        attrs (continuation lines indented).  As in TensorFlow, any unindented
        ``word:`` line after the summary starts an entry, and an entry for an
        unknown name fails the build."""
        if self._doc is not None:
            raise OpSpecError(f"op '{self.name}': doc() was already called", op=self.name)
        self._doc = text
        return self

    def set_is_stateful(self: _B) -> _B:
        """Mark the op stateful (its result may differ between identical calls)."""
        self._is_stateful = True
        return self

    def build(self) -> OpDef:
        """Finalize into an OpDef; OpSpecError lists every cross-check that fails."""
        return _Finalizer(self).run()


class _Finalizer:
    """One finalization of a builder: resolves arguments against attrs and collects problems."""

    def __init__(self, builder: OpDefBuilder) -> None:
        self.builder = builder
        self.problems: list[str] = []
        self.attr_types = {spec.name: spec.type for spec in builder._attrs}
        self.minimums = {spec.name: spec.minimum for spec in builder._attrs}

    def run(self) -> OpDef:
        builder = self.builder
        self.check_duplicates()
        inputs = [self.resolve(spec, "input") for spec in builder._inputs]
        outputs = [self.resolve(spec, "output") for spec in builder._outputs]
        attrs = [self.attr_def(spec) for spec in builder._attrs]
        descriptions = self.doc_descriptions(builder._doc or "")
        if self.problems:
            raise self.error()
        return OpDef(
            name=builder.name,
            inputs=tuple(_described(a, descriptions) for a in inputs),
            outputs=tuple(_described(a, descriptions) for a in outputs),
            attrs=tuple(_described(a, descriptions) for a in attrs),
            shape_fn=builder._shape_fn,
            doc=_clean_doc(builder._doc or ""),
            is_stateful=builder._is_stateful or any(a.is_ref for a in inputs),
            provider=builder.provider,
            registered_at=builder.registered_at,
        )

    def error(self) -> OpSpecError:
        builder = self.builder
        header = f"op '{builder.name}' (registered at {builder.registered_at}) is invalid"
        return OpSpecError(
            f"{header}: " + "; ".join(self.problems), op=builder.name, registered_at=builder.registered_at
        )

    def check_duplicates(self) -> None:
        seen: dict[str, str] = {}
        builder = self.builder
        named = [("input", s.name) for s in builder._inputs] + [("output", s.name) for s in builder._outputs]
        for kind, name in named + [("attr", s.name) for s in builder._attrs]:
            if name in seen:
                self.problems.append(_duplicate_name(name, seen[name], kind))
            seen.setdefault(name, kind)

    def resolve(self, spec: ArgSpec, kind: str) -> ArgDef:
        """The ArgDef of ``spec``; a type attr turns out to be ``type`` or ``list(type)``."""
        type_attr, type_list_attr = spec.type_attr, None
        if spec.type_attr is not None:
            attr_type = self.referenced(spec, kind, spec.type_attr, "type", ("type", "list(type)"))
            if attr_type == "list(type)":
                type_attr, type_list_attr = None, spec.type_attr
                self.list_type_arg(spec, kind, spec.type_attr)
        if spec.number_attr is not None:
            if self.referenced(spec, kind, spec.number_attr, "length", ("int",)) == "int":
                self.length_attr(spec.number_attr)
        return ArgDef(spec.name, spec.dtype, type_attr, spec.number_attr, type_list_attr, spec.is_ref)

    def referenced(self, spec: ArgSpec, kind: str, attr: str, role: str, types: tuple[str, ...]) -> str | None:
        """The type of ``attr`` used as ``spec``'s ``role``, recording a problem if it does not fit."""
        attr_type = self.attr_types.get(attr)
        if attr_type is None:
            from .spec import DTYPE_NAMES

            candidates = list(self.attr_types) + (list(DTYPE_NAMES) if role == "type" else [])
            close = _close_matches(attr, candidates, 1)
            hint = f" (did you mean '{close[0]}'?)" if close else ""
            self.problems.append(f"{kind} '{spec.name}' refers to undefined attr '{attr}'{hint}")
        elif attr_type not in types:
            self.problems.append(
                f"{kind} '{spec.name}' uses attr '{attr}' as its {role}, but '{attr}' has type "
                f"{attr_type}; it must be {' or '.join(types)}"
            )
        return attr_type

    def list_type_arg(self, spec: ArgSpec, kind: str, attr: str) -> None:
        if spec.number_attr is not None:
            self.problems.append(
                f"{kind} '{spec.name}' is '{spec.number_attr} * {attr}' but '{attr}' is a list(type) "
                "attr, which already gives the length; drop the length or make it a type attr"
            )
        # As in TensorFlow, a list(type) attr typing an argument holds at least one type.
        if self.minimums[attr] is None:
            self.minimums[attr] = 1

    def length_attr(self, name: str) -> None:
        # As in TensorFlow, a length attr has a minimum of 1 unless the spec says otherwise.
        minimum = self.minimums[name]
        if minimum is None:
            self.minimums[name] = 1
        elif minimum < 0:
            self.problems.append(f"length attr '{name}' must have a minimum >= 0, got {minimum}")

    def attr_def(self, spec: AttrSpec) -> AttrDef:
        attr = AttrDef(
            spec.name, spec.type, spec.allowed_values, self.minimums[spec.name], spec.has_default, spec.default
        )
        problem = _violation(attr, attr.default) if attr.has_default else None
        if problem is not None:
            self.problems.append(f"the default of attr '{spec.name}' {problem}, got {_show(attr.default)}")
        return attr

    def doc_descriptions(self, doc: str) -> dict[str, str]:
        descriptions = _parse_doc(doc)
        known = set(self.attr_types) | {s.name for s in self.builder._inputs + self.builder._outputs}
        for name in descriptions:
            if name not in known:
                self.problems.append(f"the doc describes '{name}', which is no input, output or attr")
        return descriptions


def _close_matches(word: str, candidates: list[str], n: int) -> list[str]:
    import difflib  # only for error messages; not imported with opkernel

    return difflib.get_close_matches(word, candidates, n=n)


def _duplicate_name(name: str, first: str, second: str) -> str:
    if first == second:
        return f"the {first} name '{name}' is used twice"
    return f"the name '{name}' is used by both an {first} and an {second}"


_D = TypeVar("_D", ArgDef, AttrDef)


def _described(definition: _D, descriptions: Mapping[str, str]) -> _D:
    text = descriptions.get(definition.name)
    if text is None:
        return definition
    return replace(definition, description=text)


def _clean_doc(doc: str) -> str:
    return inspect.cleandoc(doc) if doc else ""


def _parse_doc(doc: str) -> dict[str, str]:
    """``name: description`` entries after the summary; continuation lines are
    indented and lose their common indent, as in TensorFlow."""
    lines = _clean_doc(doc).splitlines()[1:]
    entries: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in lines:
        match = _DOC_NAME_RE.match(line)
        if match is not None:
            current = entries.setdefault(match.group(1), [])
            current[:] = [match.group(2).rstrip()]
        elif current is not None:
            current.append(line.rstrip())
    return {name: _join_description(parts) for name, parts in entries.items()}


def _join_description(parts: list[str]) -> str:
    while parts and not parts[-1]:
        parts.pop()
    rest = [line for line in parts[1:] if line]
    indent = min((len(line) - len(line.lstrip(" ")) for line in rest), default=0)
    return "\n".join([parts[0]] + [line[indent:] for line in parts[1:]]) if parts else ""


# ---------------------------------------------------------------- the registry

_lock = threading.RLock()
_pending: dict[str, OpRegistration] = {}
_ops: dict[str, OpDef] = {}
_version = 0


def _bump() -> None:
    global _version
    _version += 1


_R = TypeVar("_R", bound="OpRegistration")


class OpRegistration(OpDefBuilder):
    """A builder stored in the registry as soon as it is created, finalized at first lookup.

    If a chained call raises, the registration is withdrawn, so a failed
    declaration leaves nothing behind.
    """

    _finalized = False

    def input(self: _R, spec: str) -> _R:
        with self._withdraw_on_error():
            return super().input(spec)

    def output(self: _R, spec: str) -> _R:
        with self._withdraw_on_error():
            return super().output(spec)

    def attr(self: _R, spec: str) -> _R:
        with self._withdraw_on_error():
            return super().attr(spec)

    def set_shape_fn(self: _R, fn: ShapeFn) -> _R:
        with self._withdraw_on_error():
            return super().set_shape_fn(fn)

    def doc(self: _R, text: str) -> _R:
        with self._withdraw_on_error():
            return super().doc(text)

    def set_is_stateful(self: _R) -> _R:
        with self._withdraw_on_error():
            return super().set_is_stateful()

    @contextmanager
    def _withdraw_on_error(self) -> Iterator[None]:
        if self._finalized:
            raise OpSpecError(
                f"op '{self.name}' (registered at {self.registered_at}) was already finalized by a "
                "lookup; declare all of it before using it",
                op=self.name,
            )
        try:
            yield
        except Exception:
            _withdraw(self)
            raise


def _withdraw(registration: OpRegistration) -> None:
    with _lock:
        if _pending.get(registration.name) is registration:
            del _pending[registration.name]
            _bump()


def _no_owner(name: str) -> str | None:
    return None


# The party (distribution, else plugin) that owns an op name: the one that declares the
# name's namespace ('Vendor' of 'Vendor>Op', in the entry point group 'opkernel.namespaces').
# The plugin layer installs the real lookup (set_owner_lookup): this room imports nothing above it.
_owner: Callable[[str], str | None] = _no_owner
# (new registration's provider, the registration it replaced, op name): registrations made
# with override=True over another party's; removing the newer one puts the older back.
_superseded: list[tuple[Provider, OpRegistration | OpDef, str]] = []
# (owner's provider, squatter's provider, op name): another party's registration of an op in
# a namespace it does not own, replaced when the owner registered it.
_displaced: list[tuple[Provider, Provider, str]] = []


def set_owner_lookup(fn: Callable[[str], str | None]) -> None:
    """Install ``fn(op_name)``: the party that owns the op name's namespace, or None."""
    global _owner
    _owner = fn


def party(provider: Provider | None) -> str | None:
    """The party behind ``provider``: its distribution, else its plugin (or script)."""
    return None if provider is None else provider.distribution or provider.plugin


def register_op(name: str, *, override: bool = False) -> OpRegistration:
    """Register op ``name`` and return its builder; chain ``.input()``, ``.attr()``, ...

    Raises OpSpecError for an invalid name and AlreadyExistsError, naming both
    providers, when the name is taken.  An op name in a namespace another
    distribution declares (``Vendor>Op``, entry point group ``opkernel.namespaces``)
    is that distribution's: registering it elsewhere raises AlreadyExistsError unless
    ``override=True``, and the owner's own registration replaces any other party's,
    with a warning naming both.  ``override=True`` also replaces another party's
    registration of the name, with a warning; the plugin layer lists such overrides
    and refuses them under ``OPKERNEL_STRICT_PLUGINS=1``.
    """
    registration = OpRegistration(name)
    with _lock:
        me, owner = party(registration.provider), _owner(name)
        if name in _pending or name in _ops:
            old = _pending.get(name) or _ops[name]
            theirs = party(old.provider)
            if owner is not None and me == owner != theirs and not override:
                import warnings

                warnings.warn(
                    f"op {name!r}: {old.provider} registered an op in namespace {_namespace(name)!r}, which {owner} "
                    f"declares, without override=True; {registration.provider} replaces it",
                    stacklevel=2,
                )
                _displaced.append((registration.provider, old.provider, name))  # type: ignore[arg-type]
            elif override and theirs != me:
                import warnings

                warnings.warn(f"op {name!r}: the registration of {old.provider} overridden by "
                              f"{registration.provider} (override=True)", stacklevel=2)
                _superseded.append((registration.provider, old, name))
            else:
                raise _duplicate_error(name, registration)
            _pending.pop(name, None)
            _ops.pop(name, None)
        elif owner is not None and me != owner and not override:
            raise AlreadyExistsError(
                f"op {name!r} is in namespace {_namespace(name)!r}, which {owner} declares (entry point group "
                f"'opkernel.namespaces'); {registration.provider} at {registration.registered_at} may not register "
                f"it. Name the op in a namespace of its own, or pass override=True to take the name over",
                op=name,
                providers=(None, registration.provider),
            )
        _pending[name] = registration
        _bump()
    return registration


def _namespace(name: str) -> str:
    return name.split(">", 1)[0] if ">" in name else ""


def overrides() -> list[tuple[Provider, Provider, str]]:
    """Every (overriding provider, overridden provider, op) in use across parties."""
    with _lock:
        return [(new, old.provider, name) for new, old, name in _superseded  # type: ignore[misc]
                if _origin(name)[0] == new and party(new) != party(old.provider)]


def displaced() -> list[tuple[Provider, Provider, str]]:
    """Every (owner's provider, squatter's provider, op): squatters the namespace's owner replaced."""
    with _lock:
        return list(_displaced)


def _duplicate_error(name: str, new: OpRegistration) -> AlreadyExistsError:
    old_provider, old_at = _origin(name)
    return AlreadyExistsError(
        f"op '{name}' is already registered by {old_provider} at {old_at}; {new.provider} at "
        f"{new.registered_at} tried to register it again. Rename one of them (a namespace "
        f"prefix such as 'Vendor>{name.split('>')[-1]}' avoids clashes) or uninstall one of the packages",
        op=name,
        providers=(old_provider, new.provider),
    )


def _origin(name: str) -> tuple[Provider | None, str]:
    pending = _pending.get(name)
    if pending is not None:
        return pending.provider, pending.registered_at
    op_def = _ops.get(name)
    if op_def is None:
        return None, "?"
    return op_def.provider, op_def.registered_at


def get_op_def(name: str) -> OpDef:
    """The finalized OpDef of ``name``, finalizing a pending registration now.

    A registration that fails its cross-checks is removed and raises
    OpSpecError; an unknown name raises OpNotFoundError with suggestions.
    """
    op_def = _ops.get(name)
    if op_def is not None:
        return op_def
    with _lock:
        op_def = _ops.get(name)
        if op_def is not None:
            return op_def
        registration = _pending.get(name)
        if registration is None:
            raise _not_found_error(name)
        return _finalize(registration)


def _finalize(registration: OpRegistration) -> OpDef:
    try:
        op_def = registration.build()
    except OpSpecError:
        del _pending[registration.name]
        _bump()
        raise
    _ops[registration.name] = op_def
    del _pending[registration.name]
    registration._finalized = True
    return op_def


def _not_found_error(name: str) -> OpNotFoundError:
    close = _close_matches(str(name), op_names(), 3)
    hint = f"; did you mean {', '.join(repr(c) for c in close)}?" if close else ""
    known = known_package_for(str(name))
    if known is not None:
        hint += f"; it is provided by the op package {known.distribution}: pip install {known.distribution}"
    return OpNotFoundError(f"no op named {name!r} is registered{hint}", op=str(name))


def op_names() -> list[str]:
    """The names of all registered ops, pending or finalized, sorted."""
    with _lock:
        return sorted([*_pending, *_ops])


def declaration(name: str) -> tuple[list[str], list[str], dict[str, str]] | None:
    """(input names, output names, attr name -> attr type) of op ``name`` as declared so far,
    without finalizing a pending registration; None when no op ``name`` is registered.
    Kernel registrations are checked against it."""
    with _lock:
        op_def = _ops.get(name)
        if op_def is not None:
            return (
                [a.name for a in op_def.inputs], [a.name for a in op_def.outputs], {a.name: a.type for a in op_def.attrs}
            )
        pending = _pending.get(name)
        if pending is None:
            return None
        return (
            [a.name for a in pending._inputs], [a.name for a in pending._outputs], {a.name: a.type for a in pending._attrs}
        )


def is_registered(name: str) -> bool:
    """Whether an op called ``name`` is registered (pending or finalized)."""
    return name in _ops or name in _pending


def remove_provider(provider: Provider) -> None:
    """Remove every op ``provider`` registered (rolls back a failed plugin); a registration
    it overrode comes back."""
    with _lock:
        names = [n for n, r in _pending.items() if r.provider == provider]
        names += [n for n, d in _ops.items() if d.provider == provider]
        for name in names:
            _unregister(name)
        for entry in [e for e in _superseded if e[0] == provider]:
            _superseded.remove(entry)
            _, old, name = entry
            if name in names and not is_registered(name):
                if isinstance(old, OpDef):
                    _ops[name] = old
                else:
                    _pending[name] = old
                _bump()
        _displaced[:] = [e for e in _displaced if provider not in (e[0], e[1])]


def _unregister(name: str) -> None:
    """Remove op ``name`` if it is registered."""
    with _lock:
        if _pending.pop(name, None) is not None or _ops.pop(name, None) is not None:
            _bump()


def version() -> int:
    """A counter that changes whenever the set of registered ops changes."""
    return _version


class RegistrySnapshot:
    """The registry's contents at one moment (see :func:`snapshot`); immutable.

    (A plain class rather than a frozen dataclass, which costs ~0.5 ms to build
    at import.)
    """

    __slots__ = ("pending", "ops")

    pending: Mapping[str, OpRegistration]
    ops: Mapping[str, OpDef]

    def __init__(self, pending: Mapping[str, OpRegistration], ops: Mapping[str, OpDef]) -> None:
        object.__setattr__(self, "pending", pending)
        object.__setattr__(self, "ops", ops)

    def __setattr__(self, name: str, value: object) -> None:
        raise FrozenInstanceError(f"cannot assign to field {name!r}")

    def __delattr__(self, name: str) -> None:
        raise FrozenInstanceError(f"cannot delete field {name!r}")

    def __eq__(self, other: object) -> bool:
        if type(other) is not RegistrySnapshot:
            return NotImplemented
        return (self.pending, self.ops) == (other.pending, other.ops)

    __hash__ = None  # type: ignore[assignment]  # the mappings are not hashable

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:  # pickle and copy through __init__
        return RegistrySnapshot, (self.pending, self.ops)

    def __repr__(self) -> str:
        return f"RegistrySnapshot(pending={self.pending!r}, ops={self.ops!r})"


def snapshot() -> RegistrySnapshot:
    """The registry's current contents, for :func:`restore` (tests isolate registrations with it)."""
    with _lock:
        return RegistrySnapshot(dict(_pending), dict(_ops))


def restore(snap: RegistrySnapshot) -> None:
    """Put back the contents of a :func:`snapshot`; the version still moves forward."""
    with _lock:
        _pending.clear()
        _pending.update(snap.pending)
        _ops.clear()
        _ops.update(snap.ops)
        _bump()
