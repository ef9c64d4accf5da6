"""OpDefs, the builder's cross-checks, attr coercion and the op registry."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from opkernel import dtypes
from opkernel import op_registry as registry
from opkernel._provenance import Provider, providing
from opkernel.errors import (
    AlreadyExistsError,
    InvalidArgumentError,
    OpNotFoundError,
    OpSpecError,
    OpTypeError,
)
from opkernel.op_registry import ArgDef, AttrDef, OpDef, OpDefBuilder, get_op_def, register_op
from opkernel.shapes import TensorShape

HERE = __file__


@pytest.fixture(autouse=True)
def empty_registry() -> Iterator[None]:
    """Each test starts from an empty registry and leaves the previous one intact."""
    saved = registry.snapshot()
    registry.restore(registry.RegistrySnapshot({}, {}))
    try:
        yield
    finally:
        registry.restore(saved)


def _register_seed_ops() -> None:
    register_op("ZeroOut").attr("T: {float, int32} = DT_INT32").input("to_zero: T").output("zeroed: T")
    register_op("EnumExample").attr("e: {'apple', 'orange'}")
    register_op("RestrictedTypeExample").attr("t: {int32, float, bool}")
    register_op("NumberType").attr("t: numbertype")
    register_op("NumberOrBooleanType").attr("t: {numbertype, bool}")
    register_op("MinIntExample").attr("a: int >= 2")
    register_op("TypeListExample").attr("a: list({int32, float}) >= 3")
    register_op("AttrDefaultExample").attr("i: int = 0")
    register_op("AttrConstraintAndDefaultExample").attr("i: int >= 1 = 1")
    (
        register_op("AttrDefaultExampleForAllTypes")
        .attr("s: string = 'foo'")
        .attr("i: int = 0")
        .attr("f: float = 1.0")
        .attr("b: bool = true")
        .attr("ty: type = DT_INT32")
        .attr("sh: shape = { dim { size: 1 } dim { size: 2 } }")
        .attr("te: tensor = { dtype: DT_INT32 int_val: 5 }")
        .attr("l_empty: list(int) = []")
        .attr("l_int: list(int) = [2, 3, 5, 7]")
    )
    register_op("PolymorphicListExample").attr("T: list(type)").input("in: T").output("out: T")
    register_op("IntListInputExample").attr("N: int").input("in: N * int32").output("out: int32")
    register_op("SameListInputExample").attr("N: int").attr("T: type").input("in: N * T").output("out: T")
    register_op("MinLengthIntListExample").attr("N: int >= 2").input("in: N * int32").output("out: int32")
    register_op("RefExample").attr("T: type").input("ref: Ref(T)").input("count: Ref(int32)").output("out: T")


# ------------------------------------------------------------- the seed's ops


def test_zero_out() -> None:
    _register_seed_ops()
    op = get_op_def("ZeroOut")
    assert op.inputs == (ArgDef("to_zero", type_attr="T"),)
    assert op.outputs == (ArgDef("zeroed", type_attr="T"),)
    assert op.attrs == (AttrDef("T", "type", (dtypes.float32, dtypes.int32), None, True, dtypes.int32),)
    assert op.inferred_attrs == {"T"}
    assert op.attr("T").default is dtypes.int32
    assert not op.is_stateful and op.namespace is None and op.shape_fn is None


@pytest.mark.parametrize(
    "name, attr, attr_type, allowed, minimum",
    [
        ("EnumExample", "e", "string", ("apple", "orange"), None),
        ("RestrictedTypeExample", "t", "type", (dtypes.int32, dtypes.float32, dtypes.bool_), None),
        ("MinIntExample", "a", "int", None, 2),
        ("TypeListExample", "a", "list(type)", (dtypes.int32, dtypes.float32), 3),
        ("AttrConstraintAndDefaultExample", "i", "int", None, 1),
    ],
)
def test_constrained_attrs(
    name: str, attr: str, attr_type: str, allowed: tuple[Any, ...] | None, minimum: int | None
) -> None:
    _register_seed_ops()
    definition = get_op_def(name).attr(attr)
    assert (definition.type, definition.allowed_values, definition.minimum) == (attr_type, allowed, minimum)


def test_type_classes() -> None:
    _register_seed_ops()
    number = get_op_def("NumberType").attr("t").allowed_values
    assert number is not None and set(number) == dtypes.numbertype
    with_bool = get_op_def("NumberOrBooleanType").attr("t").allowed_values
    assert with_bool is not None and set(with_bool) == dtypes.numbertype | {dtypes.bool_}


def test_defaults_of_all_types() -> None:
    _register_seed_ops()
    op = get_op_def("AttrDefaultExampleForAllTypes")
    defaults = {a.name: a.default for a in op.attrs}
    assert all(a.has_default for a in op.attrs)
    assert defaults["s"] == "foo" and defaults["i"] == 0 and defaults["f"] == 1.0 and defaults["b"] is True
    assert defaults["ty"] is dtypes.int32
    assert defaults["sh"] == TensorShape([1, 2])
    assert isinstance(defaults["te"], np.ndarray) and defaults["te"].dtype == np.int32 and defaults["te"] == 5
    assert defaults["l_empty"] == () and defaults["l_int"] == (2, 3, 5, 7)
    assert op.inferred_attrs == frozenset()


def test_list_arguments() -> None:
    _register_seed_ops()
    poly = get_op_def("PolymorphicListExample")
    assert poly.inputs == (ArgDef("in", type_list_attr="T"),)
    assert poly.inputs[0].is_list and poly.inputs[0].type_attr is None
    assert poly.attr("T").minimum == 1  # a list(type) attr used by an argument has at least one type
    ints = get_op_def("IntListInputExample")
    assert ints.inputs == (ArgDef("in", dtype=dtypes.int32, number_attr="N"),)
    assert ints.attr("N").minimum == 1  # TF: a length attr used as N * T has a minimum of 1
    same = get_op_def("SameListInputExample")
    assert same.inputs == (ArgDef("in", type_attr="T", number_attr="N"),)
    assert same.inferred_attrs == {"N", "T"}
    assert get_op_def("MinLengthIntListExample").attr("N").minimum == 2
    assert not get_op_def("ZeroOut").inputs[0].is_list


def test_ref_inputs_make_the_op_stateful() -> None:
    _register_seed_ops()
    op = get_op_def("RefExample")
    assert op.inputs == (ArgDef("ref", type_attr="T", is_ref=True), ArgDef("count", dtype=dtypes.int32, is_ref=True))
    assert op.is_stateful


def test_builder_options() -> None:
    def shape_fn(ctx: Any) -> None:
        return None

    op = OpDefBuilder("Vendor>MedianPool").input("x: float").output("y: float").set_shape_fn(shape_fn)
    built = op.set_is_stateful().build()
    assert built.shape_fn is shape_fn and built.is_stateful
    assert built.namespace == "Vendor" and built.name == "Vendor>MedianPool"
    assert built.registered_at.startswith(HERE + ":")
    assert built.provider == Provider(plugin=__name__)


def test_doc_descriptions() -> None:
    op = (
        OpDefBuilder("Documented")
        .attr("T: type")
        .input("x: T")
        .output("y: T")
        .doc(
            """
            Does something.

            A longer description
            over two lines.

            x: the input,
              continued
                and indented.
            y: the output.
            T: the type.
            """
        )
        .build()
    )
    assert op.summary == "Does something."
    assert op.inputs[0].description == "the input,\ncontinued\n  and indented."
    assert op.outputs[0].description == "the output."
    assert op.attr("T").description == "the type."
    assert op.doc.startswith("Does something.\n\nA longer description")


# ---------------------------------------------------------------- cross-checks

BUILD_ERRORS = [
    (lambda b: b.input("x: T"), "input 'x' refers to undefined attr 'T'"),
    (lambda b: b.attr("Tx: type").input("x: T"), "input 'x' refers to undefined attr 'T' (did you mean 'Tx'?)"),
    (lambda b: b.input("x: flaot"), "refers to undefined attr 'flaot' (did you mean 'float'?)"),
    (lambda b: b.output("y: N * int32"), "output 'y' refers to undefined attr 'N'"),
    (lambda b: b.input("x: int32").input("x: float"), "the input name 'x' is used twice"),
    (lambda b: b.input("x: int32").output("x: int32"), "the name 'x' is used by both an input and an output"),
    (lambda b: b.attr("x: int").input("x: int32"), "the name 'x' is used by both an input and an attr"),
    (lambda b: b.attr("a: int").attr("a: float"), "the attr name 'a' is used twice"),
    (lambda b: b.attr("T: int").input("x: T"), "input 'x' uses attr 'T' as its type, but 'T' has type int; it must be type or list(type)"),
    (lambda b: b.attr("N: type").input("x: N * int32"), "uses attr 'N' as its length, but 'N' has type type; it must be int"),
    (lambda b: b.attr("N: list(int)").input("x: N * int32"), "'N' has type list(int); it must be int"),
    (lambda b: b.attr("N: int").attr("T: list(type)").input("x: N * T"), "'T' is a list(type) attr, which already gives the length"),
    (lambda b: b.attr("N: int >= -1").input("x: N * int32"), "length attr 'N' must have a minimum >= 0, got -1"),
    (lambda b: b.attr("e: {'a', 'b'} = 'c'"), "the default of attr 'e' must be one of ['a', 'b'], got 'c'"),
    (lambda b: b.attr("T: {float, int32} = DT_BOOL"), "the default of attr 'T' must be one of [float32, int32], got bool"),
    (lambda b: b.attr("i: int >= 2 = 1"), "the default of attr 'i' must be >= 2, got 1"),
    (lambda b: b.attr("l: list(int) >= 2 = [1]"), "the default of attr 'l' must have at least 2 elements, got [1]"),
    (lambda b: b.attr("l: list({int32}) = [DT_FLOAT]"), "the default of attr 'l' elements must be one of [int32], got [float32]"),
    (lambda b: b.attr("N: int = 0").input("x: N * int32"), "the default of attr 'N' must be >= 1, got 0"),
    (lambda b: b.input("x: int32").doc("Sum.\n\nz: nothing"), "the doc describes 'z', which is no input, output or attr"),
]


@pytest.mark.parametrize("declare, problem", BUILD_ERRORS, ids=[e[1][:50] for e in BUILD_ERRORS])
def test_build_errors(declare: Any, problem: str) -> None:
    builder = OpDefBuilder("Broken")
    declare(builder)
    with pytest.raises(OpSpecError) as info:
        builder.build()
    message = str(info.value)
    assert message.startswith(f"op 'Broken' (registered at {HERE}:"), message
    assert problem in message, message
    assert info.value.op == "Broken" and info.value.registered_at.startswith(HERE)  # type: ignore[attr-defined]


def test_build_reports_every_problem() -> None:
    builder = OpDefBuilder("Broken").input("x: T").input("y: U")
    with pytest.raises(OpSpecError, match="undefined attr 'T'; input 'y' refers to undefined attr 'U'"):
        builder.build()


@pytest.mark.parametrize(
    "call, problem",
    [
        (lambda b: b.attr("i: int = 'a'"), "expected an integer"),
        (lambda b: b.attr("f: float = true"), "expected a number"),
        (lambda b: b.attr("t: type = 3"), "expected a dtype"),
        (lambda b: b.input("x T"), "expected ':'"),
        (lambda b: b.output("y: Ref(T"), "to close 'Ref('"),
        (lambda b: b.doc("a").doc("b"), "doc() was already called"),
        (lambda b: b.set_shape_fn(3), "the shape function must be callable, got 3"),
    ],
)
def test_spec_errors_raise_at_the_call(call: Any, problem: str) -> None:
    with pytest.raises(OpSpecError) as info:
        call(OpDefBuilder("Broken"))
    assert str(info.value).startswith("op 'Broken': ") and problem in str(info.value)


@pytest.mark.parametrize(
    "name", ["zeroOut", "Zero Out", "", "_Zero", "Vendor>", ">Zero", "A>B>C", "Vendor>zero", "1Op", "Zéro", 3, None]
)
def test_invalid_op_names(name: Any) -> None:
    with pytest.raises(OpSpecError, match="invalid op name .*CamelCase"):
        register_op(name)
    with pytest.raises(OpSpecError):
        OpDefBuilder(name)
    assert registry.op_names() == []


@pytest.mark.parametrize("name", ["A", "ZeroOut", "Conv2D", "Vendor>MedianPool", "my_vendor2>Op_1"])
def test_valid_op_names(name: str) -> None:
    register_op(name)
    assert get_op_def(name).name == name


# -------------------------------------------------------------------- registry


def test_registration_is_lazy() -> None:
    register_op("Lazy").input("x: T")  # T is undefined, but nothing is checked yet
    assert registry.is_registered("Lazy") and registry.op_names() == ["Lazy"]
    with pytest.raises(OpSpecError, match="undefined attr 'T'"):
        get_op_def("Lazy")
    assert not registry.is_registered("Lazy")
    with pytest.raises(OpNotFoundError):
        get_op_def("Lazy")


def test_lookup_returns_the_same_opdef() -> None:
    register_op("Once").input("x: int32")
    assert get_op_def("Once") is get_op_def("Once")


def test_finalized_registration_cannot_change() -> None:
    reg = register_op("Frozen").input("x: int32")
    get_op_def("Frozen")
    with pytest.raises(OpSpecError, match="already finalized"):
        reg.input("y: int32")
    assert get_op_def("Frozen").inputs == (ArgDef("x", dtype=dtypes.int32),)


def test_syntax_error_withdraws_the_registration() -> None:
    before = registry.version()
    with pytest.raises(OpSpecError):
        register_op("HalfDone").input("x: int32").attr("T: {float")
    assert not registry.is_registered("HalfDone")
    assert registry.version() > before
    register_op("HalfDone").input("x: int32")  # the name is free again
    assert get_op_def("HalfDone").inputs[0].name == "x"


def test_duplicate_names_both_providers() -> None:
    with providing(Provider("first-plugin", "opkernel-first", "1.0")):
        register_op("Dup").input("x: int32")
    with providing(Provider("second-plugin", "opkernel-second", "2.0")):
        with pytest.raises(AlreadyExistsError) as info:
            register_op("Dup")
    message = str(info.value)
    assert message.startswith("op 'Dup' is already registered by first-plugin (opkernel-first 1.0) at ")
    assert "second-plugin (opkernel-second 2.0)" in message and "'Vendor>Dup'" in message
    assert info.value.op == "Dup"
    get_op_def("Dup")
    with pytest.raises(AlreadyExistsError, match="already registered by first-plugin"):
        register_op("Dup")  # finalized ops are still taken


def test_not_found_suggests() -> None:
    register_op("ZeroOut")
    register_op("ZeroIn")
    with pytest.raises(OpNotFoundError, match=r"no op named 'ZeroOt' is registered; did you mean 'ZeroOut'"):
        get_op_def("ZeroOt")
    with pytest.raises(OpNotFoundError) as info:
        get_op_def("Completely")
    assert str(info.value) == "no op named 'Completely' is registered"
    assert isinstance(info.value, LookupError)


def test_remove_provider() -> None:
    plugin = Provider("rolled-back")
    with providing(plugin):
        register_op("PluginA")
        register_op("PluginB")
        get_op_def("PluginB")
    register_op("Mine")
    before = registry.version()
    registry.remove_provider(plugin)
    assert registry.op_names() == ["Mine"]
    assert registry.version() > before
    registry.remove_provider(plugin)  # nothing left: a no-op


def test_unregister_and_version() -> None:
    start = registry.version()
    register_op("Temp")
    assert registry.version() == start + 1
    get_op_def("Temp")
    assert registry.version() == start + 1  # finalizing changes nothing visible
    registry._unregister("Temp")
    assert registry.version() == start + 2 and not registry.is_registered("Temp")
    registry._unregister("Temp")
    assert registry.version() == start + 2


def test_snapshot_restore() -> None:
    register_op("Kept")
    snap = registry.snapshot()
    register_op("Dropped")
    get_op_def("Kept")
    registry.restore(snap)
    assert registry.op_names() == ["Kept"]
    assert get_op_def("Kept").name == "Kept"


def test_concurrent_lookups_finalize_once() -> None:
    register_op("Shared").attr("T: type").input("x: T")
    results: list[OpDef] = []
    threads = [threading.Thread(target=lambda: results.append(get_op_def("Shared"))) for _ in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(results) == 16 and all(r is results[0] for r in results)


# ------------------------------------------------------------- serialization


def test_to_dict_round_trips_through_json() -> None:
    _register_seed_ops()
    register_op("Special").attr("f: float = -inf").attr("te: tensor = { dtype: DT_FLOAT float_val: nan }").attr(
        "ls: list(shape) = [{ unknown_rank: true }, { dim { size: -1 } }]"
    ).attr("c: tensor = { dtype: DT_COMPLEX64 scomplex_val: [1, 2] }").attr(
        "s: tensor = { dtype: DT_STRING string_val: 'x' }"
    ).attr("h: tensor = { dtype: DT_BFLOAT16 half_val: 16256 }").doc("Special.\n\nf: a float")
    for name in registry.op_names():
        op = get_op_def(name)
        text = json.dumps(op.to_dict(), allow_nan=False)
        back = OpDef.from_dict(json.loads(text))
        assert back == op, name
        assert back.to_dict() == op.to_dict()
        assert back.inferred_attrs == op.inferred_attrs
        assert back.shape_fn is None and back.provider is None


def test_round_trip_keeps_canonical_defaults() -> None:
    _register_seed_ops()
    op = OpDef.from_dict(json.loads(json.dumps(get_op_def("AttrDefaultExampleForAllTypes").to_dict())))
    assert op.attr("ty").default is dtypes.int32
    assert isinstance(op.attr("sh").default, TensorShape)
    assert op.attr("te").default.dtype == np.int32
    assert op.attr("l_int").default == (2, 3, 5, 7)


def test_equality_is_structural() -> None:
    first = OpDefBuilder("Same").attr("T: type").input("x: T").build()
    second = OpDefBuilder("Same").attr("T: type").input("x: T").set_shape_fn(lambda ctx: None).build()
    assert first == second and hash(first) == hash(second)
    assert first != OpDefBuilder("Same").attr("T: type = DT_FLOAT").input("x: T").build()
    assert first != "Same"


def test_from_dict_rejects_malformed() -> None:
    with pytest.raises(OpSpecError, match="malformed op dict"):
        OpDef.from_dict({"name": "X", "inputs": [{"nom": "x"}]})


# ------------------------------------------------------------- attr coercion


@pytest.fixture
def coercer() -> OpDef:
    return (
        OpDefBuilder("Coerce")
        .attr("i: int")
        .attr("m: int >= 2")
        .attr("f: float")
        .attr("b: bool")
        .attr("s: string")
        .attr("e: {'apple', 'orange'}")
        .attr("t: type")
        .attr("r: {float, int32}")
        .attr("sh: shape")
        .attr("te: tensor")
        .attr("li: list(int) >= 2")
        .attr("lt: list({int32, float})")
        .attr("ls: list(shape)")
        .build()
    )


ACCEPT = [
    ("i", 3, 3),
    ("i", np.int64(-4), -4),
    ("i", np.uint8(7), 7),
    ("m", 2, 2),
    ("f", 1.5, 1.5),
    ("f", 2, 2.0),
    ("f", np.float32(0.5), 0.5),
    ("b", True, True),
    ("b", np.bool_(False), False),
    ("s", "text", "text"),
    ("e", "orange", "orange"),
    ("t", "float64", dtypes.float64),
    ("t", np.int8, dtypes.int8),
    ("t", dtypes.bool_, dtypes.bool_),
    ("t", float, dtypes.float32),
    ("r", "DT_INT32", dtypes.int32),
    ("sh", [2, None], TensorShape([2, None])),
    ("sh", (), TensorShape([])),
    ("sh", None, TensorShape(None)),
    ("sh", TensorShape([1]), TensorShape([1])),
    ("li", [1, 2, 3], (1, 2, 3)),
    ("li", (4, np.int32(5)), (4, 5)),
    ("lt", ["float", np.int32], (dtypes.float32, dtypes.int32)),
    ("lt", [], ()),
    ("ls", [[1], None], (TensorShape([1]), TensorShape(None))),
]


@pytest.mark.parametrize("attr, value, expected", ACCEPT, ids=[f"{a}={v!r}" for a, v, _ in ACCEPT])
def test_coerce_accepts(coercer: OpDef, attr: str, value: Any, expected: Any) -> None:
    result = coercer.coerce_attr(attr, value)
    assert result == expected and type(result) is type(expected)


def test_coerce_tensor(coercer: OpDef) -> None:
    source = [[1, 2], [3, 4]]
    result = coercer.coerce_attr("te", source)
    assert isinstance(result, np.ndarray) and result.shape == (2, 2) and not result.flags.writeable
    array = np.zeros(3)
    assert coercer.coerce_attr("te", array) is not array and array.flags.writeable
    assert coercer.coerce_attr("te", ["a", "b"]).dtype == object


REJECT = [
    ("i", True, "must be an int, got True"),
    ("i", 1.0, "must be an int, got 1.0"),
    ("i", "3", "must be an int, got '3'"),
    ("i", 2**64, "must be an int"),
    ("m", 1, "attr 'm' must be >= 2, got 1"),
    ("f", "1.0", "must be a float, got '1.0'"),
    ("f", False, "must be a float, got False"),
    ("b", 1, "must be a bool, got 1"),
    ("s", b"bytes", "must be a str, got b'bytes'"),
    ("e", "banana", "attr 'e' must be one of ['apple', 'orange'], got 'banana'"),
    ("t", "float31", "must be a dtype"),
    ("r", "float64", "attr 'r' must be one of [float32, int32], got float64"),
    ("sh", [1.5], "must be a shape"),
    ("sh", "2x3", "must be a shape"),
    ("sh", [-2], "must be a shape"),
    ("te", [[1], [2, 3]], "must be an array-like value"),
    ("li", [1], "attr 'li' must have at least 2 elements, got [1]"),
    ("li", 3, "must be a list or tuple of int values, got 3"),
    ("li", [1, "2"], "must be a list or tuple of int values, got [1, '2']"),
    ("lt", ["bool"], "attr 'lt' elements must be one of [int32, float32], got [bool]"),
]


@pytest.mark.parametrize("attr, value, problem", REJECT, ids=[f"{a}={v!r}"[:40] for a, v, _ in REJECT])
def test_coerce_rejects(coercer: OpDef, attr: str, value: Any, problem: str) -> None:
    with pytest.raises(InvalidArgumentError) as info:
        coercer.coerce_attr(attr, value)
    message = str(info.value)
    assert message.startswith(f"op 'Coerce': attr '{attr}' "), message
    assert problem in message, message
    assert info.value.op == "Coerce"


def test_unknown_attr(coercer: OpDef) -> None:
    with pytest.raises(InvalidArgumentError, match="op 'Coerce' has no attr 'nope'; its attrs: 'i', 'm'"):
        coercer.coerce_attr("nope", 1)


def test_check_type_attr() -> None:
    op = OpDefBuilder("ZeroOut").attr("T: {float, int32} = DT_INT32").input("to_zero: T").build()
    op.check_type_attr("T", dtypes.float32, "to_zero")
    op.check_type_attr("T", "int32", "to_zero")
    with pytest.raises(OpTypeError) as info:
        op.check_type_attr("T", dtypes.float64, "to_zero")
    assert str(info.value) == (
        "op 'ZeroOut': input 'to_zero' (attr 'T') must have a dtype in [float32, int32], got float64"
    )
    assert info.value.op == "ZeroOut" and isinstance(info.value, TypeError)
    with pytest.raises(OpTypeError, match="op 'ZeroOut': attr 'T' must have a dtype in"):
        op.check_type_attr("T", dtypes.bool_, "T")
    unrestricted = OpDefBuilder("Any").attr("T: type").build()
    unrestricted.check_type_attr("T", dtypes.string, "x")
