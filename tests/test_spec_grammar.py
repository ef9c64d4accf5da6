"""The REGISTER_OP spec grammar: every form, every default syntax, every error."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from opkernel import dtypes
from opkernel.errors import OpSpecError
from opkernel.shapes import TensorShape
from opkernel.spec import ArgSpec, AttrSpec, parse_arg_spec, parse_attr_spec

# ---------------------------------------------------------------- inputs/outputs

ARGS = [
    ("x: int32", ArgSpec("x", dtypes.int32, None, None, False)),
    ("x: float", ArgSpec("x", dtypes.float32, None, None, False)),
    ("x: float32", ArgSpec("x", dtypes.float32, None, None, False)),
    ("x: half", ArgSpec("x", dtypes.float16, None, None, False)),
    ("x: string", ArgSpec("x", dtypes.string, None, None, False)),
    ("in: T", ArgSpec("in", None, "T", None, False)),
    ("in: N * T", ArgSpec("in", None, "T", "N", False)),
    ("in: N * int32", ArgSpec("in", dtypes.int32, None, "N", False)),
    ("in:N*T", ArgSpec("in", None, "T", "N", False)),
    ("  values :  N  *  T  ", ArgSpec("values", None, "T", "N", False)),
    ("ref: Ref(int32)", ArgSpec("ref", dtypes.int32, None, None, True)),
    ("ref: Ref(T)", ArgSpec("ref", None, "T", None, True)),
    ("ref: Ref ( N * T )", ArgSpec("ref", None, "T", "N", True)),
    ("x_1: Ref", ArgSpec("x_1", None, "Ref", None, False)),
]


@pytest.mark.parametrize("spec, expected", ARGS, ids=[a[0] for a in ARGS])
def test_arg_specs(spec: str, expected: ArgSpec) -> None:
    assert parse_arg_spec(spec) == expected
    assert parse_arg_spec(spec, kind="output") == expected


ARG_ERRORS = [
    ("", "expected the input name, found end of spec"),
    ("x", "expected ':' after the input name 'x', found end of spec"),
    ("x T", "expected ':' after the input name 'x', found 'T' at column 3"),
    ("_x: T", "the input name '_x' must start with a letter"),
    ("1x: T", "expected the input name, found '1' at column 1"),
    ("x:", "expected a dtype or an attr name, found end of spec"),
    ("x: N *", "expected a dtype or a type attr name after '*', found end of spec"),
    ("x: N * M * T", "unexpected '*' at column 10"),
    ("x: int32 * T", "the length before '*' must be an int attr name, not the dtype 'int32'"),
    ("x: Ref(T", "expected ')' to close 'Ref(', found end of spec"),
    ("x: Ref(T))", "unexpected ')' at column 10"),
    ("x: T U", "unexpected 'U' at column 6"),
    ("x: T$", "unexpected character '$' at column 5"),
    ("x: list(T)", "unexpected '(' at column 8"),
]


@pytest.mark.parametrize("spec, problem", ARG_ERRORS, ids=[a[0] or "empty" for a in ARG_ERRORS])
def test_arg_spec_errors(spec: str, problem: str) -> None:
    with pytest.raises(OpSpecError) as info:
        parse_arg_spec(spec, op="MyOp")
    message = str(info.value)
    assert message.startswith(f"op 'MyOp': in input spec \"{spec}\": ")
    assert problem in message
    assert info.value.op == "MyOp"


def test_output_errors_say_output() -> None:
    with pytest.raises(OpSpecError, match='in output spec "y T": expected \':\' after the output name'):
        parse_arg_spec("y T", kind="output")


def test_non_string_spec() -> None:
    with pytest.raises(OpSpecError, match="a spec must be a str, got int"):
        parse_arg_spec(3)  # type: ignore[arg-type]
    with pytest.raises(OpSpecError, match="a spec must be a str, got NoneType"):
        parse_attr_spec(None)  # type: ignore[arg-type]


# ------------------------------------------------------------------ attr types

NUMBER = tuple(dt for dt in dtypes.ALL_DTYPES if dt in dtypes.numbertype)
REAL = tuple(dt for dt in dtypes.ALL_DTYPES if dt in dtypes.realnumbertype)
QUANTIZED = tuple(dt for dt in dtypes.ALL_DTYPES if dt in dtypes.quantizedtype)

ATTRS = [
    # spec, type, allowed, minimum
    ("s: string", "string", None, None),
    ("i: int", "int", None, None),
    ("f: float", "float", None, None),
    ("b: bool", "bool", None, None),
    ("T: type", "type", None, None),
    ("sh: shape", "shape", None, None),
    ("te: tensor", "tensor", None, None),
    ("l: list(int)", "list(int)", None, None),
    ("l: list(string)", "list(string)", None, None),
    ("l: list ( shape )", "list(shape)", None, None),
    ("T: list(type)", "list(type)", None, None),
    ("e: {'apple', 'orange'}", "string", ("apple", "orange"), None),
    ('e: {"apple", "orange"}', "string", ("apple", "orange"), None),
    ("e: {'a', 'b',}", "string", ("a", "b"), None),
    ("t: {int32, float, bool}", "type", (dtypes.int32, dtypes.float32, dtypes.bool_), None),
    ("t: {int32,float32,}", "type", (dtypes.int32, dtypes.float32), None),
    ("t: numbertype", "type", NUMBER, None),
    ("t: numerictype", "type", NUMBER, None),
    ("t: realnumbertype", "type", REAL, None),
    ("t: realnumerictype", "type", REAL, None),
    ("t: quantizedtype", "type", QUANTIZED, None),
    ("t: {numbertype, bool}", "type", NUMBER + (dtypes.bool_,), None),
    ("t: {quantizedtype, float, qint8}", "type", QUANTIZED + (dtypes.float32,), None),
    ("a: int >= 2", "int", None, 2),
    ("a: int>=-1", "int", None, -1),
    ("a: list(type) >= 3", "list(type)", None, 3),
    ("a: list({int32, float}) >= 3", "list(type)", (dtypes.int32, dtypes.float32), 3),
    ("a: list({'a','b'})", "list(string)", ("a", "b"), None),
    ("a: list(numbertype)", "list(type)", NUMBER, None),
    ("a: list(int) >= 0", "list(int)", None, 0),
]


@pytest.mark.parametrize("spec, attr_type, allowed, minimum", ATTRS, ids=[a[0] for a in ATTRS])
def test_attr_types(spec: str, attr_type: str, allowed: tuple[Any, ...] | None, minimum: int | None) -> None:
    attr = parse_attr_spec(spec)
    assert (attr.type, attr.allowed_values, attr.minimum) == (attr_type, allowed, minimum)
    assert attr.default_text is None and attr.default is None and not attr.has_default


# ------------------------------------------------------------------- defaults

DEFAULTS = [
    ("s: string = 'foo'", "'foo'", "foo"),
    ('s: string = "foo"', '"foo"', "foo"),
    ("s: string = ''", "''", ""),
    (r"s: string = 'a\'b\n\x41\101'", r"'a\'b\n\x41\101'", "a'b\nAA"),
    (r's: string = "say \"hi\""', r'"say \"hi\""', 'say "hi"'),
    ("i: int = 0", "0", 0),
    ("i: int = -1", "-1", -1),
    ("i: int = +7", "+7", 7),
    ("i: int = 9223372036854775807", "9223372036854775807", 2**63 - 1),
    ("f: float = 1.0", "1.0", 1.0),
    ("f: float = 1", "1", 1.0),
    ("f: float = 1e-3", "1e-3", 1e-3),
    ("f: float = -2.5E+2", "-2.5E+2", -250.0),
    ("f: float = .5", ".5", 0.5),
    ("f: float = 0.5f", "0.5f", 0.5),
    ("f: float = -inf", "-inf", -math.inf),
    ("f: float = inf", "inf", math.inf),
    ("f: float = -Infinity", "-Infinity", -math.inf),
    ("f: float = 1e5f", "1e5f", 1e5),
    ("b: bool = true", "true", True),
    ("b: bool = false", "false", False),
    ("b: bool = True", "True", True),
    ("ty: type = DT_INT32", "DT_INT32", dtypes.int32),
    ("ty: type = int32", "int32", dtypes.int32),
    ("ty: type = float", "float", dtypes.float32),
    ("ty: type = DT_BFLOAT16", "DT_BFLOAT16", dtypes.bfloat16),
    ("l_empty: list(int) = []", "[]", ()),
    ("l_int: list(int) = [2, 3, 5, 7]", "[2, 3, 5, 7]", (2, 3, 5, 7)),
    ("l: list(type) = [DT_INT32, DT_FLOAT]", "[DT_INT32, DT_FLOAT]", (dtypes.int32, dtypes.float32)),
    ("l: list(string) = ['a', 'b']", "['a', 'b']", ("a", "b")),
    ("l: list(float) = [1, 2.5]", "[1, 2.5]", (1.0, 2.5)),
    ("l: list(bool) = [true, false]", "[true, false]", (True, False)),
    ("i: int >= 1 = 1", "1", 1),
    ("T: {float, int32} = DT_INT32", "DT_INT32", dtypes.int32),
    ("e: {'apple', 'orange'} = 'apple'", "'apple'", "apple"),
    ("l: list(int) >= 2 = [1, 2]", "[1, 2]", (1, 2)),
]


@pytest.mark.parametrize("spec, text, value", DEFAULTS, ids=[d[0] for d in DEFAULTS])
def test_defaults(spec: str, text: str, value: Any) -> None:
    attr = parse_attr_spec(spec)
    assert attr.has_default and attr.default_text == text
    assert attr.default == value and type(attr.default) is type(value)


def test_nan_default() -> None:
    assert math.isnan(parse_attr_spec("f: float = nan").default)


SHAPES = [
    ("{ dim { size: 1 } dim { size: 2 } }", [1, 2]),
    ("{}", []),
    ("{ unknown_rank: true }", None),
    ("{ unknown_rank: false }", []),
    ("{ dim { size: -1 } }", [None]),
    ("{ dim { size: -1 } dim { size: 3 } }", [None, 3]),
    ("{ dim: { size: 4, name: 'rows' } }", [4]),
    ("{dim{size:0}}", [0]),
    ("{ dim {} }", [0]),
]


@pytest.mark.parametrize("text, dims", SHAPES, ids=[s[0] for s in SHAPES])
def test_shape_defaults(text: str, dims: list[int | None] | None) -> None:
    attr = parse_attr_spec(f"sh: shape = {text}")
    assert isinstance(attr.default, TensorShape)
    assert attr.default == TensorShape(dims)
    assert attr.default.rank == (None if dims is None else len(dims))


def test_list_of_shapes_default() -> None:
    attr = parse_attr_spec("l: list(shape) = [{ dim { size: 2 } }, { unknown_rank: true }]")
    assert attr.default == (TensorShape([2]), TensorShape(None))


TENSORS = [
    ("{ dtype: DT_INT32 int_val: 5 }", np.array(5, dtype=np.int32)),
    ("{ dtype: DT_INT32 tensor_shape { dim { size: 2 } } int_val: 1 int_val: 2 }", np.array([1, 2], np.int32)),
    ("{ dtype: DT_INT32 tensor_shape { dim { size: 3 } } int_val: 7 }", np.array([7, 7, 7], np.int32)),
    ("{ dtype: DT_INT32 tensor_shape { dim { size: 3 } } int_val: [1, 2] }", np.array([1, 2, 2], np.int32)),
    ("{ dtype: DT_INT32 tensor_shape { dim { size: 2 } } }", np.array([0, 0], np.int32)),
    ("{ dtype: DT_FLOAT float_val: 1.5 }", np.array(1.5, np.float32)),
    (
        "{ dtype: DT_FLOAT tensor_shape { dim { size: 2 } dim { size: 2 } } float_val: [1, 2, 3, 4] }",
        np.array([[1, 2], [3, 4]], np.float32),
    ),
    ("{ dtype: DT_DOUBLE double_val: -0.25 }", np.array(-0.25, np.float64)),
    ("{ dtype: DT_BOOL tensor_shape { dim { size: 2 } } bool_val: [true, false] }", np.array([True, False])),
    ("{ dtype: DT_INT64 int64_val: 9223372036854775807 }", np.array(2**63 - 1, np.int64)),
    ("{ dtype: DT_UINT64 uint64_val: 18446744073709551615 }", np.array(2**64 - 1, np.uint64)),
    ("{ dtype: DT_UINT32 uint32_val: 7 }", np.array(7, np.uint32)),
    ("{ dtype: DT_UINT8 int_val: 255 }", np.array(255, np.uint8)),
    ("{ dtype: DT_STRING string_val: 'ab' }", np.array("ab", dtype=object)),
    ("{ dtype: DT_STRING tensor_shape { dim { size: 2 } } }", np.array(["", ""], dtype=object)),
    ("{ dtype: DT_HALF half_val: 15360 }", np.array(1.0, np.float16)),
    ("{ dtype: DT_COMPLEX64 scomplex_val: [1, 2] }", np.array(1 + 2j, np.complex64)),
    ("{ dtype: DT_COMPLEX128 tensor_shape { dim { size: 2 } } dcomplex_val: [1, 2] }", np.array([1 + 2j] * 2)),
    ("{ dtype: DT_QINT8 int_val: -3 }", np.array(-3, np.int8)),
]


@pytest.mark.parametrize("text, expected", TENSORS, ids=[t[0] for t in TENSORS])
def test_tensor_defaults(text: str, expected: np.ndarray[Any, Any]) -> None:
    default = parse_attr_spec(f"te: tensor = {text}").default
    assert isinstance(default, np.ndarray)
    assert default.dtype == expected.dtype and default.shape == expected.shape
    np.testing.assert_array_equal(default, expected)
    assert not default.flags.writeable


def test_bfloat16_tensor_default_holds_bit_patterns() -> None:
    default = parse_attr_spec("te: tensor = { dtype: DT_BFLOAT16 half_val: 16256 }").default
    assert default.dtype == dtypes.bfloat16.np and float(default) == 1.0


def test_list_of_tensors_default() -> None:
    default = parse_attr_spec("l: list(tensor) = [{ dtype: DT_INT32 int_val: 1 }]").default
    assert isinstance(default, tuple) and int(default[0]) == 1


# -------------------------------------------------- the seed's REGISTER_OP examples

SEED = [
    ("T: {float, int32} = DT_INT32", AttrSpec("T", "type", (dtypes.float32, dtypes.int32), None, "DT_INT32")),
    ("e: {'apple', 'orange'}", AttrSpec("e", "string", ("apple", "orange"), None, None)),
    ("t: {int32, float, bool}", AttrSpec("t", "type", (dtypes.int32, dtypes.float32, dtypes.bool_), None, None)),
    ("t: numbertype", AttrSpec("t", "type", NUMBER, None, None)),
    ("t: {numbertype, bool}", AttrSpec("t", "type", NUMBER + (dtypes.bool_,), None, None)),
    ("a: int >= 2", AttrSpec("a", "int", None, 2, None)),
    ("a: list({int32, float}) >= 3", AttrSpec("a", "list(type)", (dtypes.int32, dtypes.float32), 3, None)),
    ("i: int = 0", AttrSpec("i", "int", None, None, "0")),
    ("i: int >= 1 = 1", AttrSpec("i", "int", None, 1, "1")),
    ("s: string = 'foo'", AttrSpec("s", "string", None, None, "'foo'")),
    ("f: float = 1.0", AttrSpec("f", "float", None, None, "1.0")),
    ("b: bool = true", AttrSpec("b", "bool", None, None, "true")),
    ("ty: type = DT_INT32", AttrSpec("ty", "type", None, None, "DT_INT32")),
    ("sh: shape = { dim { size: 1 } dim { size: 2 } }",
     AttrSpec("sh", "shape", None, None, "{ dim { size: 1 } dim { size: 2 } }")),
    ("te: tensor = { dtype: DT_INT32 int_val: 5 }",
     AttrSpec("te", "tensor", None, None, "{ dtype: DT_INT32 int_val: 5 }")),
    ("l_empty: list(int) = []", AttrSpec("l_empty", "list(int)", None, None, "[]")),
    ("l_int: list(int) = [2, 3, 5, 7]", AttrSpec("l_int", "list(int)", None, None, "[2, 3, 5, 7]")),
    ("T: list(type)", AttrSpec("T", "list(type)", None, None, None)),
    ("N: int", AttrSpec("N", "int", None, None, None)),
    ("N: int >= 2", AttrSpec("N", "int", None, 2, None)),
    ("T: type", AttrSpec("T", "type", None, None, None)),
]


@pytest.mark.parametrize("spec, expected", SEED, ids=[s[0] for s in SEED])
def test_seed_examples(spec: str, expected: AttrSpec) -> None:
    assert parse_attr_spec(spec) == expected


# ---------------------------------------------------------------------- errors

ATTR_ERRORS = [
    ("T: {float, int32 = DT_INT32", "missing closing '}' of the set of allowed dtypes"),
    ("e: {'a', 'b'", "missing closing '}' of the set of allowed strings"),
    ("T: {float int32}", "expected ',' or '}' in the set of allowed dtypes, found 'int32' at column 11"),
    ("T: {}", "the set {} of allowed values is empty"),
    ("T: {float, 'a'}", "expected a dtype or a type class in the set of allowed dtypes, found ''a''"),
    ("e: {'a', int32}", "expected a quoted string in the set of allowed strings, found 'int32'"),
    ("T: {flaot}", "unknown dtype 'flaot' at column 5 in the set of allowed dtypes"),
    ("T: {type}", "unknown dtype 'type'"),
    ("x: int32", "'int32' is a dtype, not an attr type; to allow only it write {int32}"),
    ("x: integer", "unknown attr type 'integer'; expected one of string, int, float"),
    ("x: func", "func attrs are not supported"),
    ("x: list(list(int))", "nested list(...) at column 9 is not allowed"),
    ("x: list int", "expected '(' after 'list' at column 4"),
    ("x: list(int", "expected ')' to close 'list(', found end of spec"),
    ("x: list(int]", "expected ')' to close 'list(', found ']' at column 12"),
    ("x: float >= 2", "a minimum ('>=') is only allowed on int and list(...) attrs, not on float"),
    ("x: type >= 1", "not on type"),
    ("x: int >= two", "expected an integer after '>=', found 'two' at column 11"),
    ("x: int >= 1.5", "expected an integer after '>=', found '1.5'"),
    ("x: int >=", "expected an integer after '>=', found end of spec"),
    ("x: list(int) >= -1", "the minimum length of a list must be >= 0, got -1"),
    ("x: int =", "missing default value after '='"),
    ("x: int = ", "missing default value after '='"),
    ("x: int = 1 2", "unexpected '2' at column 12"),
    ("x: int = 1.5", "expected an integer in [-2**63, 2**63), found '1.5' at column 10"),
    ("x: int = 9223372036854775808", "expected an integer in [-2**63, 2**63)"),
    ("x: int = 'a'", "expected an integer"),
    ("x: float = 'a'", "expected a number, found ''a'' at column 12"),
    ("x: bool = 1", "expected true or false, found '1' at column 11"),
    ("x: string = foo", "expected a quoted string, found 'foo' at column 13"),
    ("x: string = 'abc", "unterminated string literal starting at column 13"),
    (r"x: string = 'a\qb'", r"invalid escape '\q'"),
    (r"x: string = '\777'", r"octal escape '\777' exceeds \377"),
    ("x: type = DT_NOPE", "expected a dtype such as DT_INT32 or int32, found 'DT_NOPE'"),
    ("x: list(int) = 3", "expected a list [...] of int values, found '3' at column 16"),
    ("x: list(int) = [1,", "expected a value, found end of spec"),
    ("x: list(int) = [1 2]", "expected ',' or ']' in a list, found '2' at column 19"),
    ("x: list(int) = [1, 'a']", "expected an integer"),
    ("x: shape = [1, 2]", "expected a shape such as { dim { size: 2 } }, found a list [...] at column 12"),
    ("x: shape = { dim { size: 1 }", "expected a field name or '}', found end of spec"),
    ("x: shape = { dims { size: 1 } }", "unknown shape field 'dims' at column 14; expected 'dim' or 'unknown_rank'"),
    ("x: shape = { dim { size: -2 } }", "a dim size must be >= 0, or -1 for unknown; got -2"),
    ("x: shape = { dim { length: 2 } }", "unknown dim field 'length'"),
    ("x: shape = { dim: 2 }", "expected a dim such as { size: 2 }, found '2' at column 19"),
    ("x: shape = { dim size: 2 }", "expected ':' or '{' after the field 'dim', found 'size' at column 18"),
    ("x: shape = { unknown_rank: true dim { size: 1 } }", "a shape with unknown_rank: true cannot list dims"),
    ("x: shape = { dim { size 2 } }", "expected ':' or '{' after the field 'size', found '2'"),
    ("x: tensor = { int_val: 5 }", "a tensor default needs a 'dtype' field"),
    ("x: tensor = 5", "expected a tensor such as { dtype: DT_INT32 int_val: 5 }"),
    ("x: tensor = { dtype: DT_FLOAT int_val: 5 }", "int_val cannot hold values of dtype float32 (use float_val)"),
    ("x: tensor = { dtype: DT_INT32 int_val: 1 float_val: 2 }", "a tensor default cannot mix int_val and float_val"),
    ("x: tensor = { dtype: DT_INT8 int_val: 300 }", "a value of the tensor default does not fit dtype int8"),
    ("x: tensor = { dtype: DT_INT32 int_val: [1, 2] }", "a tensor default of shape [] has 1 elements but 2 values"),
    ("x: tensor = { dtype: DT_INT32 tensor_shape { dim { size: -1 } } }", "needs a fully known tensor_shape"),
    ("x: tensor = { dtype: DT_INT32 tensor_shape { unknown_rank: true } }", "unknown shape field 'unknown_rank'"),
    ("x: tensor = { dtype: DT_INT32 value: 1 }", "unknown tensor field 'value'"),
    ("x: tensor = { dtype: DT_INT32 tensor_shape { dim { size: 4000000 } } }", "at most 1048576 elements"),
    ("x: tensor = { dtype: DT_COMPLEX64 scomplex_val: [1] }", "scomplex_val needs (real, imaginary) pairs"),
    ("x: tensor = { dtype: DT_HALF half_val: 70000 }", "does not fit dtype float16"),
    ("x: list(int) = " + "[" * 40, "default value nested deeper than 32 levels"),
    ("x int", "expected ':' after the attr name 'x', found 'int' at column 3"),
    ("_x: int", "the attr name '_x' must start with a letter"),
    ("x: int # comment", "unexpected character '#' at column 8"),
    ("x: int = 1 = 2", "unexpected '=' at column 12"),
]


@pytest.mark.parametrize("spec, problem", ATTR_ERRORS, ids=[a[0][:60] for a in ATTR_ERRORS])
def test_attr_spec_errors(spec: str, problem: str) -> None:
    with pytest.raises(OpSpecError) as info:
        parse_attr_spec(spec, op="MyOp")
    message = str(info.value)
    assert message.startswith(f"op 'MyOp': in attr spec \"{spec}\": "), message
    assert problem in message, message


def test_error_without_op_name() -> None:
    with pytest.raises(OpSpecError) as info:
        parse_attr_spec("T: {float, int32 = DT_INT32")
    assert str(info.value) == "in attr spec \"T: {float, int32 = DT_INT32\": missing closing '}' of the set of allowed dtypes"
    assert info.value.op is None


# ------------------------------------------------------------ property tests

VALID_SPECS = [spec for spec, *_ in ATTRS] + [d[0] for d in DEFAULTS] + [
    f"sh: shape = {text}" for text, _ in SHAPES
] + [f"te: tensor = {text}" for text, _ in TENSORS]
VALID_ARGS = [spec for spec, _ in ARGS]
ALPHABET = st.sampled_from(list("{}[](),:;*=>-+.'\"\\ \tabcdefxyzTNRefintlsDT_0123456789") + ["\u00e9", "\x00"])


def _parses_or_spec_error(parse: Any, text: str) -> None:
    try:
        parse(text)
    except OpSpecError:
        pass


@st.composite
def _mutated(draw: st.DrawFn, specs: list[str]) -> str:
    text = draw(st.sampled_from(specs))
    for _ in range(draw(st.integers(1, 4))):
        pos = draw(st.integers(0, len(text)))
        action = draw(st.sampled_from(["insert", "delete", "replace", "truncate"]))
        piece = draw(st.text(ALPHABET, min_size=1, max_size=3))
        if action == "insert":
            text = text[:pos] + piece + text[pos:]
        elif action == "delete":
            text = text[:pos] + text[pos + 1:]
        elif action == "replace":
            text = text[:pos] + piece + text[pos + len(piece):]
        else:
            text = text[:pos]
    return text


FAST = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@FAST
@given(st.text(max_size=60))
def test_random_text_gives_only_spec_errors(text: str) -> None:
    _parses_or_spec_error(parse_attr_spec, text)
    _parses_or_spec_error(parse_arg_spec, text)


@FAST
@given(st.text(ALPHABET, max_size=50))
def test_random_grammar_characters_give_only_spec_errors(text: str) -> None:
    _parses_or_spec_error(parse_attr_spec, text)
    _parses_or_spec_error(parse_arg_spec, text)


@FAST
@given(_mutated(VALID_SPECS))
def test_mutated_attr_specs_give_only_spec_errors(text: str) -> None:
    _parses_or_spec_error(parse_attr_spec, text)


@FAST
@given(_mutated(VALID_ARGS))
def test_mutated_arg_specs_give_only_spec_errors(text: str) -> None:
    _parses_or_spec_error(parse_arg_spec, text)
