"""The ``REGISTER_OP`` grammar: parsing input, output and attr specs.

This module only parses; the op registry combines the parsed specs and runs
the cross-checks.  The grammar is TensorFlow's (``op_def_builder.cc``)::

    input/output:  <name>: <io-type>
        io-type    := <dtype> | <type attr> | <number attr> * (<dtype> | <type attr>)
                    | Ref(<any of those>)
    attr:          <name>: <attr-type> [>= <int>] [= <default>]
        attr-type  := string | int | float | bool | type | shape | tensor
                    | numbertype | numerictype | realnumbertype | realnumerictype
                    | quantizedtype | {<dtype or type class>, ...} | {'a', "b", ...}
                    | list(<any of those>)

Defaults are written in TensorFlow's text syntax: ``'foo'``, ``-1``, ``1e-3``,
``true``, ``DT_INT32``, ``[2, 3]``, ``{ dim { size: 2 } }`` for a shape,
``{ dtype: DT_INT32 int_val: 5 }`` for a tensor.

Every malformed spec raises :class:`~opkernel.errors.OpSpecError` that quotes
the whole spec and says what is wrong; no other exception escapes.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, NoReturn

import numpy as np

from . import dtypes
from .dtypes import DType
from .errors import OpSpecError

if TYPE_CHECKING:
    from .shapes import TensorShape

__all__ = [
    "ArgSpec",
    "AttrSpec",
    "ATTR_TYPES",
    "NAME_PATTERN",
    "DTYPE_NAMES",
    "parse_arg_spec",
    "parse_attr_spec",
    "spec_dtype",
]

#: The scalar attr types; each may also be wrapped in ``list(...)``.
ATTR_TYPES: tuple[str, ...] = ("string", "int", "float", "bool", "type", "shape", "tensor")

#: Names of inputs, outputs and attrs: a letter, then letters, digits, underscores.
NAME_PATTERN = re.compile(r"[A-Za-z][A-Za-z0-9_]*", re.ASCII)

_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1
_MAX_TENSOR_ELEMENTS = 1 << 20
_MAX_TENSOR_RANK = 32
_MAX_NESTING = 32

# Names a spec may use for a fixed dtype: TensorFlow's ("float", "half") and
# the Python ones ("float32", "float16").  Enum names (DT_FLOAT) are for defaults.
_SPEC_DTYPES: dict[str, DType] = {}
for _dt in (*dtypes.ALL_DTYPES, dtypes.resource):
    _SPEC_DTYPES[_dt.name] = _SPEC_DTYPES[_dt.spec_name] = _dt
del _dt

#: The dtype names an input, output or allowed-values set may use.
DTYPE_NAMES: frozenset[str] = frozenset(_SPEC_DTYPES)

_TYPE_CLASS_NAMES = tuple(name for name in dtypes.TYPE_CLASSES if name != "type")


def spec_dtype(name: str) -> DType | None:
    """The dtype a spec means by ``name`` (``"float"``, ``"int32"``), or None."""
    return _SPEC_DTYPES.get(name)


@dataclass(frozen=True)
class ArgSpec:
    """A parsed input or output spec.

    ``type_attr`` names the attr giving the type; whether that attr is a
    ``type`` or a ``list(type)`` is decided when the op is finalized.
    """

    name: str
    dtype: DType | None
    type_attr: str | None
    number_attr: str | None
    is_ref: bool


@dataclass(frozen=True)
class AttrSpec:
    """A parsed attr spec.

    ``type`` is ``"int"``, ``"list(type)"``, ...; ``allowed_values`` holds
    strings for string attrs and DTypes for type attrs; ``default`` is the
    parsed default (int, float, bool, str, DType, TensorShape, a read-only
    numpy array, or a tuple of those for lists) and ``default_text`` the text
    it was parsed from (None when there is no default).
    """

    name: str
    type: str
    allowed_values: tuple[Any, ...] | None
    minimum: int | None
    default_text: str | None
    default: Any = field(default=None, compare=False, hash=False)

    @property
    def has_default(self) -> bool:
        """Whether the spec gives a default value."""
        return self.default_text is not None


# Parsed specs by text: many ops repeat the same specs ("x: T", "T: numbertype"),
# and a parse does not depend on the op (only its error messages do, and errors
# are not cached).  The results are immutable.
_ARG_SPECS: dict[tuple[str, str], ArgSpec] = {}
_ATTR_SPECS: dict[str, AttrSpec] = {}
_MAX_CACHED = 4096


def parse_arg_spec(spec: str, *, kind: str = "input", op: str | None = None) -> ArgSpec:
    """Parse an input (``kind="input"``) or output spec such as ``"x: N * T"``."""
    key = (spec, kind) if type(spec) is str else None
    if key is not None:
        cached = _ARG_SPECS.get(key)
        if cached is not None:
            return cached
    parsed = _parse_arg_spec(spec, kind, op)
    if key is not None and len(_ARG_SPECS) < _MAX_CACHED:
        _ARG_SPECS[key] = parsed
    return parsed


def parse_attr_spec(spec: str, *, op: str | None = None) -> AttrSpec:
    """Parse an attr spec such as ``"T: {float, int32} = DT_INT32"``."""
    cacheable = type(spec) is str
    if cacheable:
        cached = _ATTR_SPECS.get(spec)
        if cached is not None:
            return cached
    parsed = _parse_attr_spec(spec, op)
    if cacheable and len(_ATTR_SPECS) < _MAX_CACHED:
        _ATTR_SPECS[spec] = parsed
    return parsed


def _parse_arg_spec(spec: str, kind: str, op: str | None) -> ArgSpec:
    parser = _Parser(spec, kind, op)
    name = parser.name(f"{kind} name")
    parser.expect(":", f"after the {kind} name '{name}'")
    is_ref = parser.accept_call("Ref")
    first = parser.ident("a dtype or an attr name")
    number_attr = None
    if parser.accept("*"):
        number_attr = parser.number_attr(first)
        first = parser.ident("a dtype or a type attr name after '*'")
    if is_ref:
        parser.expect(")", "to close 'Ref('")
    parser.end()
    dtype = spec_dtype(first.text)
    type_attr = None if dtype is not None else first.text
    return ArgSpec(name, dtype, type_attr, number_attr, is_ref)


def _parse_attr_spec(spec: str, op: str | None) -> AttrSpec:
    parser = _Parser(spec, "attr", op)
    name = parser.name("attr name")
    parser.expect(":", f"after the attr name '{name}'")
    is_list = parser.accept_call("list")
    base, allowed = parser.attr_base(is_list)
    if is_list:
        parser.expect(")", "to close 'list('")
    attr_type = f"list({base})" if is_list else base
    minimum = parser.minimum(attr_type) if parser.peek_is(">=") else None
    default_text, default = None, None
    if parser.accept("="):
        default_text = parser.rest_text()
        default = _Converter(parser.fail).convert(attr_type, parser.value(0))
    parser.end()
    return AttrSpec(name, attr_type, allowed, minimum, default_text, default)


# --------------------------------------------------------------------------- lexing


class _Token:
    # Plain classes, not dataclasses: building a dataclass costs ~0.5 ms when this module is imported.
    __slots__ = ("kind", "text", "pos")

    def __init__(self, kind: str, text: str, pos: int) -> None:
        self.kind = kind  # "ident", "num", "str", "punct" or "end"
        self.text = text
        self.pos = pos

    def __repr__(self) -> str:
        return f"_Token({self.kind!r}, {self.text!r}, {self.pos})"


_TOKEN_RE = re.compile(
    r"""
      (?P<ws>\s+)
    | (?P<str>'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*")
    | (?P<num>-(?i:infinity|inf|nan)(?![A-Za-z0-9_])
        |[-+]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][-+]?[0-9]+)?[fF]?)
    | (?P<ident>[A-Za-z_][A-Za-z0-9_]*)
    | (?P<punct>>=|[{}\[\]():,;*=])
    """,
    re.ASCII | re.VERBOSE | re.DOTALL,
)


def _tokenize(spec: str, fail: Callable[[str], NoReturn]) -> list[_Token]:
    tokens: list[_Token] = []
    pos = 0
    while pos < len(spec):
        match = _TOKEN_RE.match(spec, pos)
        if match is None:
            fail(_bad_character(spec, pos))
        kind = match.lastgroup or "ws"
        if kind != "ws":
            tokens.append(_Token(kind, match.group(), pos))
        pos = match.end()
    tokens.append(_Token("end", "", len(spec)))
    return tokens


def _bad_character(spec: str, pos: int) -> str:
    char = spec[pos]
    if char in "'\"":
        return f"unterminated string literal starting at column {pos + 1}"
    return f"unexpected character {char!r} at column {pos + 1}"


def _describe(token: _Token) -> str:
    if token.kind == "end":
        return "end of spec"
    return f"'{token.text}' at column {token.pos + 1}"


# -------------------------------------------------------------------------- parsing


class _Parser:
    """A cursor over the tokens of one spec, with error reporting."""

    def __init__(self, spec: object, what: str, op: str | None) -> None:
        self.spec = spec if isinstance(spec, str) else repr(spec)
        self.what = what
        self.op = op
        if not isinstance(spec, str):
            self.fail(f"a spec must be a str, got {type(spec).__name__}")
        self.tokens = _tokenize(spec, self.fail)
        self.index = 0

    def fail(self, problem: str) -> NoReturn:
        """Raise the OpSpecError for ``problem`` in this spec."""
        where = f"op '{self.op}': " if self.op else ""
        raise OpSpecError(f'{where}in {self.what} spec "{self.spec}": {problem}', op=self.op)

    def peek(self, ahead: int = 0) -> _Token:
        return self.tokens[min(self.index + ahead, len(self.tokens) - 1)]

    def next(self) -> _Token:
        token = self.peek()
        self.index = min(self.index + 1, len(self.tokens) - 1)
        return token

    def peek_is(self, text: str, ahead: int = 0) -> bool:
        token = self.peek(ahead)
        return token.kind in ("punct", "ident") and token.text == text

    def accept(self, text: str) -> bool:
        if self.peek_is(text):
            self.next()
            return True
        return False

    def accept_call(self, word: str) -> bool:
        """Consume ``word (`` (as in ``Ref(`` and ``list(``) if it comes next."""
        if self.peek_is(word) and self.peek_is("(", 1):
            self.index += 2
            return True
        return False

    def expect(self, text: str, context: str) -> None:
        if not self.accept(text):
            self.fail(f"expected '{text}' {context}, found {_describe(self.peek())}")

    def end(self) -> None:
        token = self.peek()
        if token.kind != "end":
            self.fail(f"unexpected {_describe(token)}")

    def ident(self, expected: str) -> _Token:
        token = self.next()
        if token.kind != "ident":
            self.fail(f"expected {expected}, found {_describe(token)}")
        return token

    def name(self, expected: str) -> str:
        token = self.ident(f"the {expected}")
        if not NAME_PATTERN.fullmatch(token.text):
            self.fail(f"the {expected} '{token.text}' must start with a letter")
        return token.text

    def number_attr(self, token: _Token) -> str:
        if spec_dtype(token.text) is not None:
            self.fail(f"the length before '*' must be an int attr name, not the dtype '{token.text}'")
        return token.text

    def rest_text(self) -> str:
        text = self.spec[self.peek().pos:].strip()
        if not text:
            self.fail("missing default value after '='")
        return text

    # ----------------------------------------------------------------- attr types

    def attr_base(self, is_list: bool) -> tuple[str, tuple[Any, ...] | None]:
        """The attr type inside an optional ``list(...)`` and its allowed values."""
        token = self.next()
        if token.kind == "punct" and token.text == "{":
            return self.allowed_set()
        if token.kind != "ident":
            self.fail(f"expected an attr type, found {_describe(token)}")
        if token.text in _TYPE_CLASS_NAMES:
            return "type", _ordered(dtypes.TYPE_CLASSES[token.text])
        if token.text in ATTR_TYPES:
            return token.text, None
        self.fail(self._bad_attr_type(token, is_list))

    def _bad_attr_type(self, token: _Token, is_list: bool) -> str:
        word = token.text
        if word == "list":
            if is_list:
                return f"nested list(...) at column {token.pos + 1} is not allowed"
            return f"expected '(' after 'list' at column {token.pos + 1}"
        if word == "func":
            return "func attrs are not supported"
        if spec_dtype(word) is not None:
            return f"'{word}' is a dtype, not an attr type; to allow only it write {{{word}}}"
        choices = ", ".join(ATTR_TYPES + _TYPE_CLASS_NAMES)
        return f"unknown attr type '{word}'; expected one of {choices}, a {{...}} set or list(...)"

    def allowed_set(self) -> tuple[str, tuple[Any, ...]]:
        """``{...}`` after its ``{``: a set of strings or of dtypes and type classes."""
        if self.peek().kind == "str":
            return "string", self._set_items(self._set_string, "strings")
        return "type", self._set_items(self._set_type, "dtypes")

    def _set_items(self, item: Callable[[], list[Any]], what: str) -> tuple[Any, ...]:
        if self.peek_is("}"):
            self.fail("the set {} of allowed values is empty")
        values: list[Any] = []
        while True:
            values.extend(item())
            if self.accept(","):
                if self.accept("}"):
                    break
                continue
            if self.accept("}"):
                break
            self._set_not_closed(what)
        return tuple(dict.fromkeys(values))

    def _set_not_closed(self, what: str) -> NoReturn:
        token = self.peek()
        if token.kind == "end" or token.text in ("=", ")", ">="):
            self.fail(f"missing closing '}}' of the set of allowed {what}")
        self.fail(f"expected ',' or '}}' in the set of allowed {what}, found {_describe(token)}")

    def _set_string(self) -> list[Any]:
        token = self.next()
        if token.kind != "str":
            self.fail(f"expected a quoted string in the set of allowed strings, found {_describe(token)}")
        return [_unescape(token, self.fail)]

    def _set_type(self) -> list[Any]:
        token = self.ident("a dtype or a type class in the set of allowed dtypes")
        if token.text in _TYPE_CLASS_NAMES:
            return list(_ordered(dtypes.TYPE_CLASSES[token.text]))
        dtype = spec_dtype(token.text)
        if dtype is None:
            self.fail(
                f"unknown dtype '{token.text}' at column {token.pos + 1} in the set of allowed "
                f"dtypes; expected a dtype name (int32, float, ...) or a type class "
                f"({', '.join(_TYPE_CLASS_NAMES)})"
            )
        return [dtype]

    def minimum(self, attr_type: str) -> int:
        """``>= <int>``; only int and list attrs may have a minimum."""
        if attr_type != "int" and not attr_type.startswith("list("):
            self.fail(f"a minimum ('>=') is only allowed on int and list(...) attrs, not on {attr_type}")
        self.next()
        token = self.next()
        value = _to_int(token)
        if value is None:
            self.fail(f"expected an integer after '>=', found {_describe(token)}")
        if value < 0 and attr_type != "int":
            self.fail(f"the minimum length of a list must be >= 0, got {value}")
        return value

    # --------------------------------------------------------------- text values

    def value(self, depth: int) -> _Value:
        """One value in TensorFlow's text syntax: scalar, ``[...]`` or ``{...}``."""
        if depth > _MAX_NESTING:
            self.fail(f"default value nested deeper than {_MAX_NESTING} levels")
        token = self.next()
        if token.kind in ("num", "str", "ident"):
            return token
        if token.text == "[":
            return _ListValue(token, self._list_items(depth))
        if token.text == "{":
            return _Message(token, self._message_fields(depth))
        self.fail(f"expected a value, found {_describe(token)}")

    def _list_items(self, depth: int) -> tuple[_Value, ...]:
        items: list[_Value] = []
        if self.accept("]"):
            return ()
        while True:
            items.append(self.value(depth + 1))
            if self.accept("]"):
                return tuple(items)
            if not self.accept(","):
                self.fail(f"expected ',' or ']' in a list, found {_describe(self.peek())}")

    def _message_fields(self, depth: int) -> tuple[tuple[_Token, _Value], ...]:
        fields: list[tuple[_Token, _Value]] = []
        while not self.accept("}"):
            key = self.ident("a field name or '}'")
            colon = self.accept(":")
            if not colon and not self.peek_is("{"):
                self.fail(f"expected ':' or '{{' after the field '{key.text}', found {_describe(self.peek())}")
            fields.append((key, self.value(depth + 1)))
            if not self.accept(","):
                self.accept(";")
        return tuple(fields)


class _ListValue:
    __slots__ = ("token", "items")

    def __init__(self, token: _Token, items: tuple[_Value, ...]) -> None:
        self.token = token
        self.items = items


class _Message:
    __slots__ = ("token", "fields")

    def __init__(self, token: _Token, fields: tuple[tuple[_Token, _Value], ...]) -> None:
        self.token = token
        self.fields = fields


_Value = _Token | _ListValue | _Message


def _describe_value(value: _Value) -> str:
    if isinstance(value, _Token):
        return _describe(value)
    what = "a list [...]" if isinstance(value, _ListValue) else "a message {...}"
    return f"{what} at column {value.token.pos + 1}"


def _ordered(values: frozenset[DType]) -> tuple[DType, ...]:
    return tuple(dt for dt in dtypes.ALL_DTYPES if dt in values)


_INT_RE = re.compile(r"[-+]?[0-9]+", re.ASCII)


def _to_int(token: _Token) -> int | None:
    if token.kind != "num" or not _INT_RE.fullmatch(token.text):
        return None
    value = int(token.text)
    return value if _INT64_MIN <= value <= _INT64_MAX else None


_ESCAPE_RE = re.compile(r"\\(?:([0-7]{1,3})|x([0-9a-fA-F]{1,2})|(.))", re.DOTALL)
_SIMPLE_ESCAPES = {
    "n": "\n", "t": "\t", "r": "\r", "a": "\a", "b": "\b", "f": "\f", "v": "\v",
    "\\": "\\", "'": "'", '"': '"', "?": "?",
}


def _unescape(token: _Token, fail: Callable[[str], NoReturn]) -> str:
    """The value of a quoted string token, with C escapes resolved."""

    def replace(match: re.Match[str]) -> str:
        octal, hexa, char = match.groups()
        if octal is not None:
            code = int(octal, 8)
            if code > 0xFF:
                fail(f"octal escape '\\{octal}' exceeds \\377 in {_describe(token)}")
            return chr(code)
        if hexa is not None:
            return chr(int(hexa, 16))
        if char not in _SIMPLE_ESCAPES:
            fail(f"invalid escape '\\{char}' in the string {_describe(token)}")
        return _SIMPLE_ESCAPES[char]

    return _ESCAPE_RE.sub(replace, token.text[1:-1])


# -------------------------------------------------------------- default values

# Which tensor-proto value field holds the values of which dtypes.
_VALUE_FIELDS: dict[str, frozenset[DType]] = {
    "float_val": frozenset({dtypes.float32}),
    "double_val": frozenset({dtypes.float64}),
    "int_val": frozenset({
        dtypes.int32, dtypes.int16, dtypes.int8, dtypes.uint8, dtypes.uint16,
        dtypes.qint8, dtypes.quint8, dtypes.qint16, dtypes.quint16, dtypes.qint32,
    }),
    "int64_val": frozenset({dtypes.int64}),
    "uint32_val": frozenset({dtypes.uint32}),
    "uint64_val": frozenset({dtypes.uint64}),
    "bool_val": frozenset({dtypes.bool_}),
    "string_val": frozenset({dtypes.string}),
    "half_val": frozenset({dtypes.float16, dtypes.bfloat16}),
    "scomplex_val": frozenset({dtypes.complex64}),
    "dcomplex_val": frozenset({dtypes.complex128}),
}


class _Converter:
    """Turns a parsed text value into the Python value of an attr type."""

    def __init__(self, fail: Callable[[str], NoReturn]) -> None:
        self.fail = fail

    def convert(self, attr_type: str, value: _Value) -> Any:
        if attr_type.startswith("list("):
            return self.convert_list(attr_type[5:-1], value)
        scalar: Callable[[_Value], Any] = getattr(self, f"to_{attr_type}")
        return scalar(value)

    def convert_list(self, element_type: str, value: _Value) -> tuple[Any, ...]:
        if not isinstance(value, _ListValue):
            self.wrong(value, f"a list [...] of {element_type} values")
        return tuple(self.convert(element_type, item) for item in value.items)

    def wrong(self, value: _Value, expected: str) -> NoReturn:
        self.fail(f"expected {expected}, found {_describe_value(value)}")

    def to_int(self, value: _Value) -> int:
        number = _to_int(value) if isinstance(value, _Token) else None
        if number is None:
            self.wrong(value, "an integer in [-2**63, 2**63)")
        return number

    def to_any_int(self, value: _Value) -> int:
        """An integer literal of any size (the tensor's dtype checks the range)."""
        if isinstance(value, _Token) and value.kind == "num" and _INT_RE.fullmatch(value.text):
            return int(value.text)
        self.wrong(value, "an integer")

    def to_float(self, value: _Value) -> float:
        if isinstance(value, _Token) and value.kind == "num":
            text = value.text
            return float(text[:-1] if text[-1] in "fF" and not text.lower().endswith("inf") else text)
        if isinstance(value, _Token) and value.text.lower() in ("inf", "infinity", "nan"):
            return float(value.text)
        self.wrong(value, "a number")

    def to_bool(self, value: _Value) -> bool:
        if isinstance(value, _Token) and value.kind == "ident" and value.text in ("true", "True", "false", "False"):
            return value.text in ("true", "True")
        self.wrong(value, "true or false")

    def to_string(self, value: _Value) -> str:
        if isinstance(value, _Token) and value.kind == "str":
            return _unescape(value, self.fail)
        self.wrong(value, "a quoted string")

    def to_type(self, value: _Value) -> DType:
        dtype = dtypes.DTYPES.get(value.text) if isinstance(value, _Token) and value.kind == "ident" else None
        if dtype is None:
            self.wrong(value, "a dtype such as DT_INT32 or int32")
        return dtype

    def to_shape(self, value: _Value) -> TensorShape:
        from .shapes import TensorShape

        dims = self.shape_dims(value, allow_unknown=True)
        try:
            return TensorShape(dims)
        except (ValueError, TypeError, OverflowError) as error:
            self.fail(f"invalid shape default: {error}")

    def shape_dims(self, value: _Value, *, allow_unknown: bool) -> list[int | None] | None:
        """The dims of a ``{ dim { size: 2 } ... }`` message (None: unknown rank)."""
        if not isinstance(value, _Message):
            self.wrong(value, "a shape such as { dim { size: 2 } }")
        dims: list[int | None] = []
        unknown_rank = False
        for key, item in value.fields:
            if key.text == "dim":
                dims.append(self.dim_size(item))
            elif key.text == "unknown_rank" and allow_unknown:
                unknown_rank = self.to_bool(item)
            else:
                self.fail(f"unknown shape field {_describe(key)}; expected 'dim' or 'unknown_rank'")
        if unknown_rank and dims:
            self.fail("a shape with unknown_rank: true cannot list dims")
        return None if unknown_rank else dims

    def dim_size(self, value: _Value) -> int | None:
        if not isinstance(value, _Message):
            self.wrong(value, "a dim such as { size: 2 }")
        size = 0
        for key, item in value.fields:
            if key.text == "size":
                size = self.to_int(item)
            elif key.text == "name":
                self.to_string(item)
            else:
                self.fail(f"unknown dim field {_describe(key)}; expected 'size' or 'name'")
        if size < -1:
            self.fail(f"a dim size must be >= 0, or -1 for unknown; got {size}")
        return None if size == -1 else size

    def to_tensor(self, value: _Value) -> np.ndarray[Any, Any]:
        if not isinstance(value, _Message):
            self.wrong(value, "a tensor such as { dtype: DT_INT32 int_val: 5 }")
        dtype, shape, field_name, values = self.tensor_fields(value)
        return self.build_tensor(dtype, shape, field_name, values)

    def tensor_fields(self, value: _Message) -> tuple[DType, list[int], str | None, list[_Value]]:
        dtype: DType | None = None
        shape: list[int] = []
        field_name: str | None = None
        values: list[_Value] = []
        for key, item in value.fields:
            if key.text == "dtype":
                dtype = self.to_type(item)
            elif key.text == "tensor_shape":
                shape = self.tensor_shape(item)
            elif key.text in _VALUE_FIELDS:
                if field_name not in (None, key.text):
                    self.fail(f"a tensor default cannot mix {field_name} and {key.text}")
                field_name = key.text
                values.extend(item.items if isinstance(item, _ListValue) else (item,))
            else:
                self.fail(f"unknown tensor field {_describe(key)}; expected dtype, tensor_shape or a *_val field")
        if dtype is None:
            self.fail("a tensor default needs a 'dtype' field, e.g. { dtype: DT_INT32 int_val: 5 }")
        return dtype, shape, field_name, values

    def tensor_shape(self, value: _Value) -> list[int]:
        dims = self.shape_dims(value, allow_unknown=False)
        if dims is None or any(size is None for size in dims):
            self.fail("a tensor default needs a fully known tensor_shape")
        if len(dims) > _MAX_TENSOR_RANK:
            self.fail(f"a tensor default may have rank at most {_MAX_TENSOR_RANK}, got {len(dims)}")
        return [size for size in dims if size is not None]

    def build_tensor(
        self, dtype: DType, shape: list[int], field_name: str | None, values: list[_Value]
    ) -> np.ndarray[Any, Any]:
        count = math.prod(shape)
        if count > _MAX_TENSOR_ELEMENTS:
            self.fail(f"a tensor default may have at most {_MAX_TENSOR_ELEMENTS} elements, got {count}")
        if field_name is not None and dtype not in _VALUE_FIELDS[field_name]:
            self.fail(f"{field_name} cannot hold values of dtype {dtype.name} (use {_value_field_for(dtype)})")
        flat = self.tensor_values(dtype, field_name, values)
        if len(flat) > count:
            self.fail(f"a tensor default of shape {shape} has {count} elements but {len(flat)} values")
        return _fill(dtype, shape, flat, self.fail)

    def tensor_values(self, dtype: DType, field_name: str | None, values: list[_Value]) -> list[Any]:
        if field_name is None:
            return []
        if field_name in ("scomplex_val", "dcomplex_val"):
            parts = [self.to_float(item) for item in values]
            if len(parts) % 2:
                self.fail(f"{field_name} needs (real, imaginary) pairs, got {len(parts)} numbers")
            return [complex(re, im) for re, im in zip(parts[::2], parts[1::2])]
        element = {
            "float_val": self.to_float, "double_val": self.to_float, "bool_val": self.to_bool,
            "string_val": self.to_string,
        }.get(field_name, self.to_any_int)
        return [element(item) for item in values]


def _value_field_for(dtype: DType) -> str:
    return next(name for name, allowed in _VALUE_FIELDS.items() if dtype in allowed)


def _fill(dtype: DType, shape: list[int], flat: list[Any], fail: Callable[[str], NoReturn]) -> np.ndarray[Any, Any]:
    """The read-only tensor of ``shape`` holding ``flat``.

    Fewer values than elements repeat the last one and no values give zeros,
    as in TensorFlow.  half_val holds the bit patterns of float16/bfloat16.
    """
    count = math.prod(shape)
    if flat and len(flat) < count:
        flat = flat + [flat[-1]] * (count - len(flat))
    as_bits = dtype in (dtypes.float16, dtypes.bfloat16)
    storage = np.dtype(np.uint16) if as_bits else dtype.np
    if not flat:
        flat = [""] * count if dtype is dtypes.string else [0] * count
    try:
        with np.errstate(over="ignore"):
            array = np.array(flat, dtype=storage)
    except (OverflowError, ValueError, TypeError) as error:
        fail(f"a value of the tensor default does not fit dtype {dtype.name}: {error}")
    if as_bits:
        array = array.view(dtype.np)
    array = array.reshape(shape)
    array.flags.writeable = False
    return array
