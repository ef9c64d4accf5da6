"""Every REGISTER_OP example of TensorFlow's "Create an op" guide, run end to end.

Each test registers the guide's op (in the ``Guide>`` namespace, so nothing can
clash with a real op of the same name), a kernel for it, and makes the calls the
guide shows: the valid ones against numpy, the invalid ones against the error
the guide promises.  Kernels are either generic (written with opkernel ops) or
written with numpy through ``on_host``, so one test body runs on every backend.
"""

from __future__ import annotations

import inspect
import warnings
from typing import Any, Callable

import numpy as np
import pytest

import opkernel as ok
from opkernel import engine
from opkernel.errors import (
    AlreadyExistsError,
    InvalidArgumentError,
    KernelNotFoundError,
    OpNotFoundError,
    OpSpecError,
    OpTypeError,
    ShapeError,
)

pytestmark = pytest.mark.usefixtures("fresh_registry")


def on_host(backend: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    """A kernel for ``backend`` written with numpy: the inputs go to the host, the result comes back."""
    be = engine.backend_instance(backend)

    def kernel(*inputs: Any, **attrs: Any) -> Any:
        return be.from_numpy(np.asarray(fn(*[be.to_numpy(x) for x in inputs], **attrs)))

    return kernel


def zero_out_np(to_zero: np.ndarray, preserve: int = 0) -> np.ndarray:
    flat = to_zero.reshape(-1)
    out = np.zeros_like(flat)
    if flat.size:
        out[preserve] = flat[preserve]
    return out.reshape(to_zero.shape)


def set_output_to_input(c: ok.InferenceContext) -> None:
    c.set_output(0, c.input(0))


def kernel_receiving(seen: dict[str, Any]) -> Callable[..., None]:
    """A generic kernel for an attr-only op: it records the attrs it was called with."""

    def kernel(**attrs: Any) -> None:
        seen.clear()
        seen.update(attrs)

    return kernel


# ----------------------------------------------------------------- ZeroOut


def test_zero_out_int32(backend: str) -> None:
    ok.register_op("Guide>ZeroOut").input("to_zero: int32").output("zeroed: int32").set_shape_fn(
        set_output_to_input
    )
    ok.register_kernel("Guide>ZeroOut", backend=backend)(on_host(backend, lambda to_zero: zero_out_np(to_zero)))
    x = np.array([[5, 4], [3, 2]], np.int32)

    out = ok.ops.guide.zero_out(x)
    assert out.dtype is ok.int32 and out.backend == backend
    np.testing.assert_array_equal(out.numpy(), zero_out_np(x))
    np.testing.assert_array_equal(ok.ops.guide.zero_out([7, 8, 9]).numpy(), [7, 0, 0])
    np.testing.assert_array_equal(ok.ops.guide.zero_out(ok.tensor(x)).numpy(), zero_out_np(x))
    assert ok.infer_shapes("Guide>ZeroOut", [[2, None]]) == [ok.TensorShape([2, None])]

    with pytest.raises(TypeError, match=r"'Guide>ZeroOut', input 'to_zero': expected dtype int32, got .*float32"):
        ok.ops.guide.zero_out(np.ones(3, np.float32))
    with pytest.raises(TypeError, match="floating point"):
        ok.ops.guide.zero_out([1.5, 2.0])
    with pytest.raises(InvalidArgumentError, match="takes 1 inputs"):
        ok.execute("Guide>ZeroOut", x, x)


def test_zero_out_for_vectors_only(backend: str) -> None:
    def vector_shape(c: ok.InferenceContext) -> None:
        c.set_output(0, c.with_rank(c.input(0), 1))

    ok.register_op("Guide>ZeroOut").input("to_zero: int32").output("zeroed: int32").set_shape_fn(vector_shape)

    assert ok.infer_shapes("Guide>ZeroOut", [[5]]) == [ok.TensorShape([5])]
    assert ok.infer_shapes("Guide>ZeroOut", [None]) == [ok.TensorShape([None])]
    with pytest.raises(ShapeError, match="Shape must be rank 1 but is rank 2") as info:
        ok.infer_shapes("Guide>ZeroOut", [[2, 3]])
    assert info.value.op == "Guide>ZeroOut"


class ZeroOutPreservingIndex(ok.OpKernel):
    """The guide's ZeroOutOp with a ``preserve_index`` attr, checked as its OP_REQUIRES do."""

    def __init__(self, ctx: ok.OpKernelConstruction) -> None:
        self.index = ctx.get_attr("preserve_index")
        ctx.require(self.index >= 0, f"Need preserve_index >= 0, got {self.index}")

    def compute(self, ctx: ok.OpKernelContext) -> None:
        x = ctx.backend.to_numpy(ctx.input(0))
        ctx.require(self.index < x.size, f"preserve_index out of range: {self.index} >= {x.size}")
        ctx.set_output(0, ctx.backend.from_numpy(zero_out_np(x, self.index)))


def test_zero_out_with_preserve_index(backend: str) -> None:
    ok.register_op("Guide>ZeroOut").attr("preserve_index: int").input("to_zero: int32").output("zeroed: int32")
    ok.register_kernel("Guide>ZeroOut", backend=backend)(ZeroOutPreservingIndex)
    x = np.array([5, 4, 3], np.int32)

    for index in range(3):
        np.testing.assert_array_equal(ok.ops.guide.zero_out(x, preserve_index=index).numpy(), zero_out_np(x, index))
    np.testing.assert_array_equal(ok.ops.guide.zero_out(x, 2).numpy(), [0, 0, 3])

    for _ in range(2):  # a kernel whose construction failed is not cached
        with pytest.raises(InvalidArgumentError, match=r"op 'Guide>ZeroOut': Need preserve_index >= 0, got -1") as info:
            ok.ops.guide.zero_out(x, preserve_index=-1)
        assert info.value.op == "Guide>ZeroOut"
    with pytest.raises(InvalidArgumentError, match=r"op 'Guide>ZeroOut': preserve_index out of range: 3 >= 3"):
        ok.ops.guide.zero_out(x, preserve_index=3)
    with pytest.raises(InvalidArgumentError, match=r"op 'Guide>ZeroOut': missing required attr 'preserve_index'"):
        ok.ops.guide.zero_out(x)
    with pytest.raises(InvalidArgumentError, match=r"attr 'preserve_index' must be an int, got 1.5"):
        ok.ops.guide.zero_out(x, preserve_index=1.5)


def _zero_out_class(name: str, served: list[str]) -> type[ok.OpKernel]:
    class ZeroOut(ok.OpKernel):
        def compute(self, ctx: ok.OpKernelContext) -> None:
            served.append(name)
            ctx.set_output(0, ctx.backend.from_numpy(zero_out_np(ctx.backend.to_numpy(ctx.input(0)))))

    ZeroOut.__name__ = name
    return ZeroOut


def test_polymorphic_zero_out_one_kernel_class_per_type(backend: str) -> None:
    ok.register_op("Guide>ZeroOut").attr("T: {float, int32}").input("to_zero: T").output("zeroed: T")
    served: list[str] = []
    ok.register_kernel("Guide>ZeroOut", backend=backend, type_constraints={"T": "float32"})(
        _zero_out_class("ZeroOutFloatOp", served)
    )
    ok.register_kernel("Guide>ZeroOut", backend=backend, type_constraints={"T": ["int32"]})(
        _zero_out_class("ZeroOutInt32Op", served)
    )

    for dtype, kernel in ((np.float32, "ZeroOutFloatOp"), (np.int32, "ZeroOutInt32Op")):
        x = np.array([[1, 2], [3, 4]], dtype)
        out = ok.ops.guide.zero_out(x)
        assert out.dtype is ok.as_dtype(dtype) and served[-1] == kernel
        np.testing.assert_array_equal(out.numpy(), zero_out_np(x))

    with pytest.raises(OpTypeError, match=r"'Guide>ZeroOut'.*must have a dtype in \[float32, int32\], got float64"):
        ok.ops.guide.zero_out(np.ones(2))
    with pytest.raises(OpTypeError, match="got string"):
        ok.ops.guide.zero_out(["a", "b"])


def test_polymorphic_zero_out_with_a_type_the_kernels_lack(backend: str) -> None:
    """The guide adds double to the attr; until a kernel is registered, double finds none."""
    ok.register_op("Guide>ZeroOut").attr("T: {float, double, int32}").input("to_zero: T").output("zeroed: T")
    for t in ("float32", "int32"):
        ok.register_kernel("Guide>ZeroOut", backend=backend, type_constraints={"T": t})(
            _zero_out_class(f"ZeroOut_{t}", [])
        )
    with pytest.raises(KernelNotFoundError) as info:
        ok.ops.guide.zero_out(np.ones(2))
    message = str(info.value)
    assert message.startswith(f"no kernel on backend {backend!r} for these types: op 'Guide>ZeroOut' with T=float64")
    assert f"{backend} (T in [float32])" in message and f"{backend} (T in [int32])" in message
    assert info.value.op == "Guide>ZeroOut" and info.value.backend == backend


def test_polymorphic_zero_out_registered_like_a_template(backend: str) -> None:
    """The guide's REGISTER_KERNEL(type) macro: one registration per type, in a loop."""
    ok.register_op("Guide>ZeroOut").attr("T: {float, double, int32}").input("to_zero: T").output("zeroed: T")
    served: list[str] = []
    for t in ("float32", "float64", "int32"):
        ok.register_kernel("Guide>ZeroOut", backend=backend, type_constraints={"T": t})(_zero_out_class(t, served))

    for t in ("float32", "float64", "int32"):
        x = np.arange(1, 5, dtype=t).reshape(2, 2)
        out = ok.ops.guide.zero_out(x)
        assert out.dtype.name == t and served[-1] == t
        np.testing.assert_array_equal(out.numpy(), zero_out_np(x))


def test_zero_out_wrapper_signature_and_docstring() -> None:
    ok.register_op("Guide>ZeroOut").attr("T: {float, int32}").input("to_zero: T").output("zeroed: T").doc(
        "Zeroes all but the first element.\n\nto_zero: The tensor to zero out."
    )
    fn = ok.ops.guide.zero_out
    assert fn.__name__ == "zero_out"
    assert str(inspect.signature(fn)) == "(to_zero, name=None, *, _kernel=None)"
    doc = fn.__doc__
    assert doc.startswith("Zeroes all but the first element.")
    assert "to_zero: A `Tensor`. Must be one of the following types: `float32`, `int32`." in doc
    assert "A `Tensor`. Has the same type as `to_zero`." in doc
    assert "zero_out" in dir(ok.ops.guide)


# ------------------------------------------------------- Example, StringToNumber


def test_example_function_kernel(backend: str) -> None:
    ok.register_op("Guide>Example").attr("T: numbertype").input("input: T").output("input_times_two: T")
    for t in ("float32", "int32"):
        ok.register_kernel("Guide>Example", backend=backend, type_constraints={"T": t})(
            on_host(backend, lambda input, T: (2 * input).astype(T.np))
        )
    assert str(inspect.signature(ok.ops.guide.example)) == "(input, name=None, *, _kernel=None)"

    for dtype in (np.float32, np.int32):
        x = np.array([[1, -2], [3, 4]], dtype)
        out = ok.ops.guide.example(x)
        assert out.dtype is ok.as_dtype(dtype)
        np.testing.assert_array_equal(out.numpy(), 2 * x)

    with pytest.raises(KernelNotFoundError, match=r"for these types: op 'Guide>Example' with T=float64"):
        ok.ops.guide.example(np.ones(2))
    with pytest.raises(OpTypeError, match="got bool"):
        ok.ops.guide.example(np.array([True]))


def test_string_to_number(backend: str) -> None:
    if not engine.backend_instance(backend).supports_dtype(ok.string):
        pytest.skip(f"backend {backend!r} holds no strings")
    strings = np.array(["1.5", "-2", " 3e2 "], dtype=object)
    out = ok.ops.string_to_number(strings)
    assert out.dtype is ok.float32
    np.testing.assert_array_equal(out.numpy(), np.array([1.5, -2, 300], np.float32))
    out = ok.ops.string_to_number([["12", "-7"]], out_type=ok.int32)
    assert out.dtype is ok.int32 and out.shape == (1, 2)
    np.testing.assert_array_equal(out.numpy(), [[12, -7]])
    assert ok.ops.string_to_number(["4"], out_type="int32").dtype is ok.int32

    with pytest.raises(InvalidArgumentError, match=r"'StringToNumber': could not convert string 'abc' to float32"):
        ok.ops.string_to_number(["1", "abc"])
    with pytest.raises(InvalidArgumentError, match="'StringToNumber'.*'1.5' to int32"):
        ok.ops.string_to_number(["1.5"], out_type=ok.int32)
    with pytest.raises(
        InvalidArgumentError,
        match=r"attr 'out_type' must be one of \[float32, float64, int32, int64, uint32, uint64\], got float16",
    ):
        ok.ops.string_to_number(["1"], out_type=ok.float16)
    with pytest.raises(TypeError, match="expected dtype string"):
        ok.ops.string_to_number(np.array([1.0]))


def test_string_to_number_wrapper_signature_and_docstring() -> None:
    fn = ok.ops.string_to_number
    assert str(inspect.signature(fn)) == "(string_tensor, out_type=ok.float32, name=None, *, _kernel=None)"
    assert "string_tensor: A `Tensor` of type `string`." in fn.__doc__
    assert (
        "out_type: An optional `type` from: `float32`, `float64`, `int32`, `int64`, `uint32`, `uint64`. "
        "Defaults to `float32`."
    ) in fn.__doc__
    assert "A `Tensor` of type `out_type`." in fn.__doc__


# ------------------------------------------------------------------- attrs


def test_enum_attr(backend: str) -> None:
    ok.register_op("Guide>EnumExample").attr("e: {'apple', 'orange'}")
    seen: dict[str, Any] = {}
    ok.register_kernel("Guide>EnumExample", backend="*")(kernel_receiving(seen))

    for fruit in ("apple", "orange"):
        assert ok.ops.guide.enum_example(fruit) is None
        assert seen == {"e": fruit}
    with pytest.raises(InvalidArgumentError, match=r"attr 'e' must be one of \['apple', 'orange'\], got 'banana'"):
        ok.ops.guide.enum_example("banana")
    with pytest.raises(InvalidArgumentError, match="attr 'e' must be a str"):
        ok.ops.guide.enum_example(1)


@pytest.mark.parametrize(
    ("spec", "accepted", "rejected"),
    [
        ("t: {int32, float, bool}", ["int32", ok.float32, np.bool_], ["float64", "string"]),
        ("t: numbertype", ["float64", "int8", "complex64", "qint8"], ["bool", "string"]),
        ("t: {numbertype, bool}", ["float64", "int8", "bool"], ["string"]),
    ],
    ids=["RestrictedTypeExample", "NumberType", "NumberOrBooleanType"],
)
def test_type_attrs_with_restrictions(backend: str, spec: str, accepted: list[Any], rejected: list[str]) -> None:
    ok.register_op("Guide>TypeAttr").attr(spec)
    seen: dict[str, Any] = {}
    ok.register_kernel("Guide>TypeAttr", backend="*")(kernel_receiving(seen))

    for t in accepted:
        ok.ops.guide.type_attr(t)
        assert seen["t"] is ok.as_dtype(t)
    for t in rejected:
        with pytest.raises(InvalidArgumentError, match=rf"attr 't' must be one of \[.*\], got {t}"):
            ok.ops.guide.type_attr(t)
    with pytest.raises(InvalidArgumentError, match="attr 't' must be a dtype"):
        ok.ops.guide.type_attr("floaty")


def test_min_int_attr(backend: str) -> None:
    ok.register_op("Guide>MinIntExample").attr("a: int >= 2")
    seen: dict[str, Any] = {}
    ok.register_kernel("Guide>MinIntExample", backend="*")(kernel_receiving(seen))

    ok.ops.guide.min_int_example(2)
    assert seen == {"a": 2}
    ok.ops.guide.min_int_example(a=np.int64(7))
    assert seen == {"a": 7} and type(seen["a"]) is int
    with pytest.raises(InvalidArgumentError, match="attr 'a' must be >= 2, got 1"):
        ok.ops.guide.min_int_example(1)
    with pytest.raises(InvalidArgumentError, match="attr 'a' must be an int, got True"):
        ok.ops.guide.min_int_example(True)


def test_type_list_attr_with_minimum_length(backend: str) -> None:
    ok.register_op("Guide>TypeListExample").attr("a: list({int32, float}) >= 3")
    seen: dict[str, Any] = {}
    ok.register_kernel("Guide>TypeListExample", backend="*")(kernel_receiving(seen))

    ok.ops.guide.type_list_example(["int32", "float", ok.int32])
    assert seen == {"a": (ok.int32, ok.float32, ok.int32)}
    with pytest.raises(InvalidArgumentError, match="attr 'a' must have at least 3 elements"):
        ok.ops.guide.type_list_example([ok.int32, ok.float32])
    with pytest.raises(InvalidArgumentError, match=r"elements must be one of \[int32, float32\], got .*float64"):
        ok.ops.guide.type_list_example([ok.int32, ok.float32, ok.float64])
    with pytest.raises(InvalidArgumentError, match="must be a list or tuple of type values"):
        ok.ops.guide.type_list_example(ok.int32)


def test_attr_defaults(backend: str) -> None:
    ok.register_op("Guide>AttrDefaultExample").attr("i: int = 0")
    ok.register_op("Guide>AttrConstraintAndDefaultExample").attr("i: int >= 1 = 1")
    seen: dict[str, Any] = {}
    for name in ("Guide>AttrDefaultExample", "Guide>AttrConstraintAndDefaultExample"):
        ok.register_kernel(name, backend="*")(kernel_receiving(seen))

    assert str(inspect.signature(ok.ops.guide.attr_default_example)) == "(i=0, name=None, *, _kernel=None)"
    ok.ops.guide.attr_default_example()
    assert seen == {"i": 0}
    ok.ops.guide.attr_default_example(i=-4)
    assert seen == {"i": -4}

    assert str(inspect.signature(ok.ops.guide.attr_constraint_and_default_example)).startswith("(i=1,")
    ok.ops.guide.attr_constraint_and_default_example()
    assert seen == {"i": 1}
    ok.ops.guide.attr_constraint_and_default_example(5)
    assert seen == {"i": 5}
    with pytest.raises(InvalidArgumentError, match="attr 'i' must be >= 1, got 0"):
        ok.ops.guide.attr_constraint_and_default_example(0)


def test_attr_defaults_of_every_type(backend: str) -> None:
    (
        ok.register_op("Guide>AttrDefaultExampleForAllTypes")
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
    seen: dict[str, Any] = {}
    ok.register_kernel("Guide>AttrDefaultExampleForAllTypes", backend="*")(kernel_receiving(seen))

    assert ok.ops.guide.attr_default_example_for_all_types() is None
    te = seen.pop("te")
    assert seen == {
        "s": "foo", "i": 0, "f": 1.0, "b": True, "ty": ok.int32, "sh": ok.TensorShape([1, 2]),
        "l_empty": (), "l_int": (2, 3, 5, 7),
    }
    assert type(seen["f"]) is float and seen["ty"] is ok.int32 and isinstance(seen["sh"], ok.TensorShape)
    assert isinstance(te, np.ndarray) and te.dtype == np.int32 and te.shape == () and int(te) == 5
    assert not te.flags.writeable

    ok.ops.guide.attr_default_example_for_all_types(
        s="bar", i=3, f=2, b=False, ty="float64", sh=[None, 4], te=[[1.5, 2.5]], l_empty=[1], l_int=(9,)
    )
    te = seen.pop("te")
    assert seen == {
        "s": "bar", "i": 3, "f": 2.0, "b": False, "ty": ok.float64, "sh": ok.TensorShape([None, 4]),
        "l_empty": (1,), "l_int": (9,),
    }
    assert type(seen["f"]) is float
    np.testing.assert_array_equal(te, [[1.5, 2.5]])
    with pytest.raises(InvalidArgumentError, match="attr 'sh' must be a shape"):
        ok.ops.guide.attr_default_example_for_all_types(sh="1x2")
    with pytest.raises(InvalidArgumentError, match="attr 'l_int' must be a list or tuple of int values"):
        ok.ops.guide.attr_default_example_for_all_types(l_int=[1.5])


# -------------------------------------------------------------- list inputs


def identity_list(*lists: Any, **attrs: Any) -> Any:
    """A generic kernel returning its (only) list input as it is."""
    return list(lists[0])


def test_polymorphic_list(backend: str) -> None:
    ok.register_op("Guide>PolymorphicListExample").attr("T: list(type)").input("in: T").output("out: T")
    ok.register_kernel("Guide>PolymorphicListExample", backend="*")(identity_list)
    fn = ok.ops.guide.polymorphic_list_example
    assert str(inspect.signature(fn)) == "(in_, name=None, *, _kernel=None)"

    values = [np.array([1.5], np.float32), np.array([[2]], np.int64), ok.tensor([True, False])]
    out = fn(values)
    assert isinstance(out, list) and [t.dtype for t in out] == [ok.float32, ok.int64, ok.bool_]
    for got, want in zip(out, values):
        np.testing.assert_array_equal(got.numpy(), np.asarray(want))
    assert [t.dtype for t in fn(in_=[1, 2.5])] == [ok.int32, ok.float32]

    with pytest.raises(TypeError, match="expected a list of tensors, got ndarray"):
        fn(np.ones(2))
    with pytest.raises(InvalidArgumentError, match="attr 'T' must have at least 1 elements"):
        fn([])


def test_list_type_restriction(backend: str) -> None:
    ok.register_op("Guide>ListTypeRestrictionExample").attr("T: list({float, double})").input("in: T").output(
        "out: T"
    )
    ok.register_kernel("Guide>ListTypeRestrictionExample", backend="*")(identity_list)
    fn = ok.ops.guide.list_type_restriction_example

    out = fn([np.ones(2, np.float32), np.zeros(3), 1.5])
    assert [t.dtype for t in out] == [ok.float32, ok.float64, ok.float32]
    with pytest.raises(OpTypeError, match=r"attr 'T'.* must have a dtype in \[float32, float64\], got int32"):
        fn([np.ones(2, np.float32), np.ones(2, np.int32)])


def test_int_list_input(backend: str) -> None:
    ok.register_op("Guide>IntListInputExample").attr("N: int").input("in: N * int32").output("out: int32")
    ok.register_kernel("Guide>IntListInputExample", backend="*")(lambda in_, N: ok.ops.add_n(in_))
    fn = ok.ops.guide.int_list_input_example
    assert str(inspect.signature(fn)) == "(in_, name=None, *, _kernel=None)"

    xs = [np.arange(3, dtype=np.int32) * k for k in range(1, 5)]
    np.testing.assert_array_equal(fn(xs).numpy(), sum(xs))
    np.testing.assert_array_equal(fn([[1, 2]]).numpy(), [1, 2])
    with pytest.raises(TypeError, match=r"input 'in': expected dtype int32, got .*float32"):
        fn([np.ones(2, np.int32), np.ones(2, np.float32)])
    with pytest.raises(InvalidArgumentError, match="attr 'N' must be >= 1, got 0"):
        fn([])


def test_same_list_input(backend: str) -> None:
    ok.register_op("Guide>SameListInputExample").attr("N: int").attr("T: type").input("in: N * T").output("out: T")
    ok.register_kernel("Guide>SameListInputExample", backend="*")(lambda in_, N, T: ok.ops.add_n(in_))
    fn = ok.ops.guide.same_list_input_example

    for dtype in (np.float32, np.float64, np.int64):
        xs = [np.full((2, 2), k, dtype) for k in (1, 2, 3)]
        out = fn(xs)
        assert out.dtype is ok.as_dtype(dtype)
        np.testing.assert_array_equal(out.numpy(), sum(xs))
    out = fn([np.ones(2, np.float32), [2.0, 3.0]])  # a literal adopts the list's type
    assert out.dtype is ok.float32
    np.testing.assert_array_equal(out.numpy(), [3.0, 4.0])

    with pytest.raises(TypeError, match=r"input 'in' has T=float64 but input 'in' has T=float32"):
        fn([np.ones(2, np.float32), np.ones(2, np.float64)])


def test_min_length_int_list(backend: str) -> None:
    ok.register_op("Guide>MinLengthIntListExample").attr("N: int >= 2").input("in: N * int32").output("out: int32")
    ok.register_kernel("Guide>MinLengthIntListExample", backend="*")(lambda in_, N: ok.ops.add_n(in_))
    fn = ok.ops.guide.min_length_int_list_example

    np.testing.assert_array_equal(fn([[1, 2], [3, 4]]).numpy(), [4, 6])
    with pytest.raises(InvalidArgumentError, match="attr 'N' must be >= 2, got 1"):
        fn([[1, 2]])


def test_minimum_length_polymorphic_list(backend: str) -> None:
    ok.register_op("Guide>MinimumLengthPolymorphicListExample").attr("T: list(type) >= 3").input("in: T").output(
        "out: T"
    )
    ok.register_kernel("Guide>MinimumLengthPolymorphicListExample", backend="*")(identity_list)
    fn = ok.ops.guide.minimum_length_polymorphic_list_example

    assert [t.dtype for t in fn([1, 2.0, True])] == [ok.int32, ok.float32, ok.bool_]
    with pytest.raises(InvalidArgumentError, match="attr 'T' must have at least 3 elements"):
        fn([1, 2.0])


def test_arbitrary_and_typed_tensor_sequences(backend: str) -> None:
    ok.register_op("Guide>ArbitraryTensorSequenceExample").attr("T: list(type)").input("in: T").output("out: T")
    ok.register_op("Guide>Int32SequenceExample").attr("NumTensors: int").input("in: NumTensors * int32").output(
        "out: int32"
    )
    ok.register_op("Guide>SameTypeSequenceExample").attr("NumTensors: int").attr("T: type").input(
        "in: NumTensors * T"
    ).output("out: T")
    ok.register_kernel("Guide>ArbitraryTensorSequenceExample", backend="*")(identity_list)
    for name in ("Guide>Int32SequenceExample", "Guide>SameTypeSequenceExample"):
        ok.register_kernel(name, backend="*")(lambda in_, NumTensors, **attrs: ok.ops.add_n(in_))

    out = ok.ops.guide.arbitrary_tensor_sequence_example([np.ones(1, np.float64), np.zeros(2, np.uint8)])
    assert [t.dtype for t in out] == [ok.float64, ok.uint8]
    np.testing.assert_array_equal(ok.ops.guide.int32_sequence_example([[1], [2], [3]]).numpy(), [6])
    out = ok.ops.guide.same_type_sequence_example([np.ones(2, np.float64)] * 3)
    assert out.dtype is ok.float64
    np.testing.assert_array_equal(out.numpy(), [3.0, 3.0])

    with pytest.raises(TypeError, match="expected dtype int32"):
        ok.ops.guide.int32_sequence_example([np.ones(1, np.int64)])
    with pytest.raises(TypeError, match="inputs sharing attr 'T' must agree"):
        ok.ops.guide.same_type_sequence_example([np.ones(1, np.int64), np.ones(1, np.int32)])


# ------------------------------------------------------ several ins and outs


def test_multiple_ins_and_outs(backend: str) -> None:
    if not engine.backend_instance(backend).supports_dtype(ok.string):
        pytest.skip(f"backend {backend!r} holds no strings")
    ok.register_op("Guide>MultipleInsAndOuts").input("y: int32").input("z: float").output("a: string").output(
        "b: int32"
    )
    be = engine.backend_instance(backend)

    @ok.register_kernel("Guide>MultipleInsAndOuts", backend=backend)
    def kernel(y: Any, z: Any) -> tuple[Any, Any]:
        y, z = be.to_numpy(y), be.to_numpy(z)
        return be.from_numpy(np.array([f"{v:g}" for v in z], dtype=object)), be.from_numpy(y * 2)

    result = ok.ops.guide.multiple_ins_and_outs([1, 2], [0.5, 3.0])
    assert type(result).__name__ == "Guide_MultipleInsAndOuts" and result._fields == ("a", "b")
    a, b = result
    assert a is result.a and b is result.b
    assert (a.dtype, b.dtype) == (ok.string, ok.int32)
    assert a.numpy().tolist() == ["0.5", "3"]
    np.testing.assert_array_equal(b.numpy(), [2, 4])
    with pytest.raises(TypeError, match="input 'y': expected dtype int32"):
        ok.ops.guide.multiple_ins_and_outs(np.ones(2, np.float32), [0.5, 3.0])


def test_built_in_types(backend: str) -> None:
    ok.register_op("Guide>BuiltInTypesExample").input("integers: int32").input("complex_numbers: complex64").output(
        "output: float"
    )
    ok.register_kernel("Guide>BuiltInTypesExample", backend=backend)(
        on_host(backend, lambda integers, complex_numbers: (integers * np.abs(complex_numbers)).astype(np.float32))
    )
    fn = ok.ops.guide.built_in_types_example
    assert str(inspect.signature(fn)) == "(integers, complex_numbers, name=None, *, _kernel=None)"
    assert "integers: A `Tensor` of type `int32`." in fn.__doc__
    assert "A `Tensor` of type `float32`." in fn.__doc__

    out = fn([1, 2], [3 + 4j, 1j])
    assert out.dtype is ok.float32
    np.testing.assert_allclose(out.numpy(), [5.0, 2.0])
    with pytest.raises(TypeError, match="input 'integers': expected dtype int32, got a numpy array of int64"):
        fn(np.array([1, 2]), [1j, 1j])
    with pytest.raises(TypeError, match="input 'complex_numbers': expected dtype complex64"):
        fn([1, 2], np.array([1j, 1j]))


def test_general_unary_op_made_polymorphic_with_a_default(backend: str) -> None:
    """The guide's backwards-compatible change: ``in: float`` becomes ``in: T`` with ``T = DT_FLOAT``."""
    ok.register_op("Guide>MyGeneralUnaryOp").input("in: T").output("out: T").attr("T: numerictype = DT_FLOAT")
    ok.register_kernel("Guide>MyGeneralUnaryOp", backend="*")(lambda in_, T: ok.ops.neg(in_))
    fn = ok.ops.guide.my_general_unary_op
    assert str(inspect.signature(fn)) == "(in_, name=None, *, _kernel=None)"
    assert "A `Tensor`. Has the same type as `in_`." in fn.__doc__  # the parameter's name, not the keyword

    out = fn([1.5, -2.0])  # the old float callers keep working
    assert out.dtype is ok.float32
    np.testing.assert_array_equal(out.numpy(), [-1.5, 2.0])
    assert fn([1, 2]).dtype is ok.float32  # a literal takes the default, as before
    out = fn(np.array([3, -4], np.int32))  # and int32 is new
    assert out.dtype is ok.int32
    np.testing.assert_array_equal(out.numpy(), [-3, 4])
    with pytest.raises(TypeError, match="got bool"):
        fn(np.array([True]))


# ------------------------------------------------------------------ kernels


def test_generic_kernel_serves_every_backend(backend: str) -> None:
    ok.register_op("Guide>ZeroOut").attr("T: {float, int32} = DT_INT32").input("to_zero: T").output("zeroed: T")

    @ok.register_kernel("Guide>ZeroOut", backend="*")
    def zero_out_generic(to_zero: ok.Tensor, T: ok.DType) -> ok.Tensor:
        assert isinstance(to_zero, ok.Tensor) and to_zero.backend == backend
        flat = ok.ops.reshape(to_zero, [-1])
        mask = ok.ops.pad(ok.tensor([1], dtype=T), [[0, max(flat.shape[0] - 1, 0)]])
        return ok.ops.reshape(ok.ops.mul(flat, mask), ok.ops.shape(to_zero))

    for x in (np.array([[5, 4], [3, 2]], np.int32), np.array([1.5, 2.5, 3.5], np.float32)):
        out = ok.ops.guide.zero_out(x)
        assert out.backend == backend and out.dtype is ok.as_dtype(x.dtype)
        np.testing.assert_array_equal(out.numpy(), zero_out_np(x))

    specific: list[str] = []
    ok.register_kernel("Guide>ZeroOut", backend=backend, type_constraints={"T": "int32"})(
        _zero_out_class("specific", specific)
    )
    ok.ops.guide.zero_out(np.array([1, 2], np.int32))
    assert specific == ["specific"]  # a backend's own kernel wins over the generic one
    ok.ops.guide.zero_out(np.array([1, 2], np.float32))
    assert specific == ["specific"]  # and the generic one still serves the other types


def test_generic_kernel_serves_a_backend_that_only_has_the_ops_it_uses(twin: str) -> None:
    ok.register_op("Guide>Double").input("x: T").output("y: T").attr("T: {float, int32}")
    ok.register_kernel("Guide>Double", backend="*")(lambda x, T: x + x)
    for name in ("cpu", twin):  # twin has kernels for Add, Sub, Mul and Neg only
        with ok.use_backend(name):
            out = ok.ops.guide.double([1.5, 2.0])
            assert out.backend == name and out.dtype is ok.float32
            np.testing.assert_array_equal(out.numpy(), [3.0, 4.0])


def test_generic_kernel_missing_an_op_names_both_ops(twin: str) -> None:
    ok.register_op("Guide>ExpTwice").input("x: float").output("y: float")
    ok.register_kernel("Guide>ExpTwice", backend="*")(lambda x: ok.ops.exp(x) + ok.ops.exp(x))
    with ok.use_backend(twin):  # twin has kernels for Add, Sub, Mul and Neg only
        with pytest.raises(KernelNotFoundError, match=(
            rf"op 'Guide>ExpTwice' runs its generic kernel on backend '{twin}' .*op 'Exp' has no kernel there"
        )) as info:
            ok.ops.guide.exp_twice([1.0])
    assert info.value.op == "Guide>ExpTwice" and info.value.backend == twin
    assert isinstance(info.value.__cause__, KernelNotFoundError) and info.value.__cause__.op == "Exp"


def _labelled(backend: str) -> dict[str, list[int]]:
    calls: dict[str, list[int]] = {"default": [], "fast": []}
    ok.register_op("Guide>Labelled").input("x: float").output("y: float")
    for label, tag in ((None, "default"), ("fast", "fast")):
        def fn(x: Any, tag: str = tag) -> Any:
            calls[tag].append(1)
            return x

        ok.register_kernel("Guide>Labelled", backend=backend, label=label)(on_host(backend, fn))
    return calls


def test_kernel_labels(backend: str) -> None:
    calls = _labelled(backend)
    x = np.ones(2, np.float32)

    ok.ops.guide.labelled(x)
    assert calls == {"default": [1], "fast": []}
    ok.ops.guide.labelled(x, _kernel="fast")
    assert calls == {"default": [1], "fast": [1]}
    with ok.kernel_label_map({"Guide>Labelled": "fast"}):
        ok.ops.guide.labelled(x)
        ok.execute("Guide>Labelled", x)
        with ok.kernel_label_map({"Other": "slow"}):  # nested maps merge
            ok.ops.guide.labelled(x)
    assert calls == {"default": [1], "fast": [1, 1, 1, 1]}
    ok.ops.guide.labelled(x)
    assert calls == {"default": [1, 1], "fast": [1, 1, 1, 1]}

    with pytest.raises(KernelNotFoundError, match=rf"no kernel on backend '{backend}' with label 'slow'") as info:
        ok.ops.guide.labelled(x, _kernel="slow")
    assert f"{backend} (any type, label='fast')" in str(info.value)


def test_kernel_priority(backend: str) -> None:
    ok.register_op("Guide>Prioritised").input("x: float").output("y: float")
    served: list[int] = []
    for priority in (1, 5, 3):
        def fn(x: Any, priority: int = priority) -> Any:
            served.append(priority)
            return x

        ok.register_kernel("Guide>Prioritised", backend=backend, priority=priority)(on_host(backend, fn))
    ok.ops.guide.prioritised([1.0])
    assert served == [5]


class VendorPlugin:
    """A plugin whose kernel for Guide>ZeroOut the test then overrides."""

    def __init__(self, backend: str) -> None:
        self.backend = backend

    @ok.hookimpl
    def opkernel_register_kernels(self) -> None:
        ok.register_kernel("Guide>ZeroOut", backend=self.backend)(on_host(self.backend, lambda to_zero: to_zero))


def test_override_warns_naming_both_providers_and_duplicates_raise(backend: str) -> None:
    ok.register_op("Guide>ZeroOut").input("to_zero: int32").output("zeroed: int32")
    ok.register_plugin(VendorPlugin(backend), name="vendor-kernels")
    x = np.array([3, 2, 1], np.int32)
    np.testing.assert_array_equal(ok.ops.guide.zero_out(x).numpy(), x)

    ours = on_host(backend, lambda to_zero: zero_out_np(to_zero))
    with pytest.raises(AlreadyExistsError) as info:
        ok.register_kernel("Guide>ZeroOut", backend=backend)(ours)
    assert "already registered by vendor-kernels" in str(info.value)
    assert "override=True" in str(info.value) and info.value.op == "Guide>ZeroOut"
    np.testing.assert_array_equal(ok.ops.guide.zero_out(x).numpy(), x)  # nothing changed

    with pytest.warns(UserWarning, match=rf"op 'Guide>ZeroOut': kernel on backend '{backend}' from vendor-kernels "
                      rf"overridden by {__name__}"):
        ok.register_kernel("Guide>ZeroOut", backend=backend, override=True)(ours)
    np.testing.assert_array_equal(ok.ops.guide.zero_out(x).numpy(), [3, 0, 0])

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert ok.register_kernel("Guide>ZeroOut", backend=backend)(ours) is ours  # the same callable: a no-op
    assert [k.impl for k in ok.kernels.kernels_for("Guide>ZeroOut", backend)] == [ours]  # type: ignore[attr-defined]


def test_kernel_not_found_messages(backend: str) -> None:
    with pytest.raises(OpNotFoundError, match=r"no op named 'Guide>Nowhere' is registered"):
        ok.execute("Guide>Nowhere", 1)

    ok.register_op("Guide>ZeroOut").attr("T: {float, double, int32}").input("to_zero: T").output("zeroed: T")
    with pytest.raises(KernelNotFoundError, match=r"^no kernel is registered on any backend: op 'Guide>ZeroOut' "
                       r"with T=int32\.$"):
        ok.ops.guide.zero_out([1])

    ok.register_kernel("Guide>ZeroOut", backend="elsewhere", type_constraints={"T": ["float32", "int32"]})(
        lambda to_zero, T: to_zero
    )
    with pytest.raises(KernelNotFoundError) as info:
        ok.ops.guide.zero_out([1])
    assert str(info.value) == (
        f"no kernel on backend {backend!r}: op 'Guide>ZeroOut' with T=int32; "
        "registered: elsewhere (T in [float32, int32])."
    )

    ok.register_kernel("Guide>ZeroOut", backend=backend, type_constraints={"T": "float32"})(
        _zero_out_class("f", [])
    )
    with pytest.raises(KernelNotFoundError) as info:
        ok.ops.guide.zero_out(np.ones(1))
    assert str(info.value) == (
        f"no kernel on backend {backend!r} for these types: op 'Guide>ZeroOut' with T=float64; "
        f"registered: {', '.join(sorted([f'{backend} (T in [float32])', 'elsewhere (T in [float32, int32])']))}."
    )
    assert isinstance(info.value, LookupError) and info.value.backend == backend


# --------------------------------------------------------------- Ref inputs


def test_ref_input_updates_a_variable_in_place(backend: str) -> None:
    ok.register_op("Guide>ScaleInPlace").input("ref: Ref(T)").input("factor: T").output("out: T").attr(
        "T: {float, double, int32}"
    )

    @ok.register_kernel("Guide>ScaleInPlace", backend="*")
    def scale_in_place(ref: ok.Variable, factor: ok.Tensor, T: ok.DType) -> ok.Tensor:
        assert isinstance(ref, ok.Variable)
        ok.ops.assign(ref, ok.ops.mul(ref, factor))
        return ok.ops.identity(ref)

    assert ok.op_def("Guide>ScaleInPlace").is_stateful
    initial = np.array([1.0, -2.0, 3.0], np.float32)
    v = ok.Variable(initial)
    out = ok.ops.guide.scale_in_place(v, 2.0)
    np.testing.assert_array_equal(v.numpy(), initial * 2)
    np.testing.assert_array_equal(out.numpy(), initial * 2)
    ok.ops.guide.scale_in_place(v, np.float32(-1))
    np.testing.assert_array_equal(v.numpy(), initial * -2)
    np.testing.assert_array_equal(initial, [1.0, -2.0, 3.0])  # the Variable copied its initial value

    with pytest.raises(TypeError, match=r"input 'ref': is a Ref input and needs an ok.Variable, got Tensor"):
        ok.ops.guide.scale_in_place(ok.tensor(initial), 2.0)
    with pytest.raises(TypeError, match="needs an ok.Variable, got ndarray"):
        ok.ops.guide.scale_in_place(initial, 2.0)
    with pytest.raises(TypeError, match="input 'factor' has T=float64 but input 'ref' has T=float32"):
        ok.ops.guide.scale_in_place(v, np.float64(2))
    np.testing.assert_array_equal(v.numpy(), initial * -2)


# ------------------------------------------------------ failed registrations


def test_syntax_error_mid_chain_leaves_nothing_behind() -> None:
    builder = ok.register_op("Guide>ZeroOut").attr("T: {float, int32}")
    with pytest.raises(OpSpecError, match="to_zero"):
        builder.input("to_zero: T T")
    with pytest.raises(OpNotFoundError):
        ok.op_def("Guide>ZeroOut")
    with pytest.raises(AttributeError):
        ok.ops.guide.zero_out  # noqa: B018

    ok.register_op("Guide>ZeroOut").attr("T: {float, int32}").input("to_zero: T").output("zeroed: T")
    ok.register_kernel("Guide>ZeroOut", backend="*")(lambda to_zero, T: to_zero)
    assert ok.ops.guide.zero_out([1.5]).dtype is ok.float32


def test_cross_check_failure_at_lookup_leaves_nothing_behind() -> None:
    ok.register_op("Guide>ZeroOut").attr("T: {float, int32}").input("to_zero: Tx").output("zeroed: T")
    with pytest.raises(OpSpecError, match=r"input 'to_zero' refers to undefined attr 'Tx' \(did you mean 'T'\?\)"):
        ok.op_def("Guide>ZeroOut")
    with pytest.raises(OpNotFoundError):
        ok.op_def("Guide>ZeroOut")
    assert "Guide>ZeroOut" not in ok.op_registry.op_names()  # type: ignore[attr-defined]

    ok.register_op("Guide>ZeroOut").attr("T: {float, int32}").input("to_zero: T").output("zeroed: T")
    ok.register_kernel("Guide>ZeroOut", backend="*")(lambda to_zero, T: to_zero)
    np.testing.assert_array_equal(ok.ops.guide.zero_out([1, 2]).numpy(), [1, 2])


def test_duplicate_op_registration_names_both_places() -> None:
    ok.register_op("Guide>ZeroOut").input("to_zero: int32").output("zeroed: int32")
    with pytest.raises(AlreadyExistsError, match=r"op 'Guide>ZeroOut' is already registered by .*test_seed_examples"):
        ok.register_op("Guide>ZeroOut")
    assert ok.op_def("Guide>ZeroOut").inputs[0].dtype is ok.int32  # the first registration stands
