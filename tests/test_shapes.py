"""Shapes with unknowns, the inference context and the common shape functions."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from opkernel import shape_fns
from opkernel.errors import InvalidArgumentError, ShapeError
from opkernel.shapes import (
    Dimension,
    InferenceContext,
    ShapeLike,
    TensorShape,
    as_shape,
    matrix,
    run_shape_fn,
    scalar,
    unknown_shape,
    vector,
)

U = None  # an unknown dimension, for readability


@dataclass(frozen=True)
class Arg:
    """A stand-in for the op registry's ArgDef."""

    name: str
    number_attr: str | None = None
    type_list_attr: str | None = None

    @property
    def is_list(self) -> bool:
        return bool(self.number_attr or self.type_list_attr)


@dataclass
class FakeOp:
    """A stand-in for the op registry's OpDef."""

    name: str
    inputs: tuple[Arg, ...] = (Arg("a"), Arg("b"))
    outputs: tuple[Arg, ...] = (Arg("out"),)
    shape_fn: Callable[[InferenceContext], Any] | None = None


def make_ctx(
    *shapes: ShapeLike,
    name: str = "Op",
    attrs: dict[str, Any] | None = None,
    tensors: Sequence[Any] | None = None,
    outputs: tuple[Arg, ...] = (Arg("out"),),
) -> InferenceContext:
    args = tuple(Arg(n) for n in "abcdefgh"[: len(shapes)])
    op = FakeOp(name, inputs=args, outputs=outputs)
    return InferenceContext(op, list(shapes), attrs or {}, tensors)


def infer(
    fn: Callable[[InferenceContext], Any],
    *shapes: ShapeLike,
    name: str = "Op",
    **kwargs: Any,
) -> TensorShape:
    ctx = make_ctx(*shapes, name=name, **kwargs)
    fn(ctx)
    return ctx.output(0)


# -- Dimension ------------------------------------------------------------------


def test_dimension_value_eq_hash_repr() -> None:
    assert Dimension(3).value == 3 and Dimension(None).value is None
    assert Dimension(np.int64(3)) == 3 == Dimension(Dimension(3))
    assert Dimension(3) != Dimension(4)
    assert Dimension(None) != Dimension(None)
    assert Dimension(3) != None
    assert Dimension(3).__eq__("3") is NotImplemented
    assert hash(Dimension(3)) == hash(3)
    assert repr(Dimension(3)) == "Dimension(3)" and repr(Dimension(None)) == "Dimension(None)"
    assert str(Dimension(3)) == "3" and str(Dimension(None)) == "?"


def test_dimension_rejects_bad_sizes() -> None:
    with pytest.raises(ValueError, match="-1 must be >= 0"):
        Dimension(-1)
    with pytest.raises(TypeError):
        Dimension(True)
    with pytest.raises(TypeError):
        Dimension("3")  # type: ignore[arg-type]


def test_dimension_compatibility_and_merge() -> None:
    assert Dimension(3).is_compatible_with(3)
    assert Dimension(3).is_compatible_with(None)
    assert Dimension(None).is_compatible_with(Dimension(7))
    assert not Dimension(3).is_compatible_with(4)
    known = Dimension(3)
    assert Dimension(None).merge_with(known) is known
    assert known.merge_with(None) is known
    assert Dimension(None).merge_with(None).value is None
    with pytest.raises(ValueError, match="Dimensions 3 and 4 are not compatible"):
        known.merge_with(4)


def test_dimension_arithmetic() -> None:
    d, u = Dimension(6), Dimension(None)
    results = (d + 2, 2 + d, d - 2, 8 - d, d * 2, 2 * d, d // 4, 13 // d)
    assert [r.value for r in results] == [8, 8, 4, 2, 12, 12, 1, 2]
    for result in (u + 1, 1 + u, u - 1, d - u, u * 2, d * u, u // 2, d // u, 7 // u):
        assert result.value is None
    assert (u * 0).value == 0 and (0 * u).value == 0
    with pytest.raises(ValueError, match="must be >= 0"):
        d - 7
    with pytest.raises(ValueError, match="by 0"):
        d // 0


def test_dimension_int_and_index() -> None:
    assert int(Dimension(3)) == 3
    assert [0, 1, 2, 3][Dimension(2)] == 2
    with pytest.raises(ValueError, match="unknown dimension"):
        int(Dimension(None))


# -- TensorShape ------------------------------------------------------------------


def test_tensorshape_basics() -> None:
    s = TensorShape([2, None, Dimension(4)])
    assert s.rank == 3 and len(s) == 3
    assert s.dims == [Dimension(2), s[1], Dimension(4)]
    assert s.as_list() == [2, None, 4]
    assert [d.value for d in s] == [2, None, 4]
    assert s[0] == 2 and s[-1] == 4 and s[1].value is None
    assert s[1:] == TensorShape([None, 4])
    assert bool(s) and bool(scalar()) and not bool(unknown_shape())
    assert TensorShape(s) == s and TensorShape(n for n in (1, 2)) == [1, 2]


def test_tensorshape_unknown_rank() -> None:
    s = unknown_shape()
    assert s.rank is None and s.dims is None
    assert s[0].value is None and s[1:].rank is None
    for op in (s.as_list, lambda: len(s), lambda: list(s)):
        with pytest.raises(ValueError, match="unknown rank"):
            op()


def test_tensorshape_fully_defined_and_num_elements() -> None:
    assert TensorShape([2, 3]).is_fully_defined()
    assert TensorShape([2, 3]).num_elements() == 6
    assert scalar().num_elements() == 1
    assert TensorShape([2, 0]).num_elements() == 0
    assert not TensorShape([2, None]).is_fully_defined()
    assert TensorShape([2, None]).num_elements() is None
    assert not unknown_shape().is_fully_defined()
    assert unknown_shape().num_elements() is None


def test_tensorshape_compatibility_and_merge() -> None:
    a, b = TensorShape([2, None]), TensorShape([None, 3])
    assert a.is_compatible_with(b) and a.is_compatible_with(None)
    assert not a.is_compatible_with([2, 3, 4]) and not a.is_compatible_with([3, 3])
    assert a.merge_with(b) == [2, 3]
    full = TensorShape([2, 3])
    assert full.merge_with(a) is full
    assert unknown_shape().merge_with(full) is full and full.merge_with(None) is full
    with pytest.raises(ValueError, match=r"Shapes \(2, \?\) and \(3, 3\) are not compatible"):
        a.merge_with([3, 3])


def test_tensorshape_rank_checks() -> None:
    s = TensorShape([2, 3])
    assert s.with_rank(2) is s
    assert unknown_shape().with_rank(3) == TensorShape([U, U, U])
    assert s.with_rank_at_least(2) is s and s.with_rank_at_most(2) is s
    assert unknown_shape().with_rank_at_least(5).rank is None
    with pytest.raises(ValueError, match=r"\(2, 3\) must have rank 3"):
        s.with_rank(3)
    with pytest.raises(ValueError, match="rank at least 3"):
        s.with_rank_at_least(3)
    with pytest.raises(ValueError, match="rank at most 1"):
        s.with_rank_at_most(1)


def test_tensorshape_concatenate() -> None:
    assert TensorShape([2]).concatenate([None, 3]) == [2, None, 3]
    assert TensorShape([2]) + TensorShape([3]) == (2, 3)
    assert [1] + TensorShape([3]) == (1, 3)
    assert TensorShape([2]).concatenate(None).rank is None
    assert unknown_shape().concatenate([1]).rank is None


def test_tensorshape_equality_and_hash() -> None:
    assert TensorShape([2, None]) == TensorShape([2, None])
    assert TensorShape([2, None]) != TensorShape([2, 3])
    assert unknown_shape() == unknown_shape() != scalar()
    assert TensorShape([2, 3]) == [2, 3] == TensorShape((2, 3))
    assert TensorShape([2, 3]) != [2, 3, 4]
    assert TensorShape([2]) != ["x"] and TensorShape([2]) != "2"
    assert hash(TensorShape([2, 3])) == hash((2, 3))
    assert len({TensorShape([2, None]), TensorShape([2, None]), unknown_shape()}) == 2


def test_tensorshape_repr_and_str() -> None:
    assert repr(TensorShape([2, None])) == "TensorShape([2, None])"
    assert repr(unknown_shape()) == "TensorShape(None)"
    assert str(TensorShape([2, None])) == "(2, ?)"
    assert str(TensorShape([5])) == "(5,)" and str(scalar()) == "()"
    assert str(unknown_shape()) == "<unknown>"


def test_module_helpers() -> None:
    assert unknown_shape(2) == [None, None]
    assert scalar() == [] and vector(3) == [3] and matrix(2, None) == TensorShape([2, None])
    with pytest.raises(ValueError, match="Rank must be >= 0"):
        unknown_shape(-1)


def test_as_shape() -> None:
    s = TensorShape([1])
    assert as_shape(s) is s
    assert as_shape(None).rank is None
    assert as_shape([2, None]) == (2, None) and as_shape((4,)) == [4]
    assert as_shape(np.array([2, 3], dtype=np.int32)) == [2, 3]
    assert as_shape(np.array([])) == scalar()
    with pytest.raises(ValueError, match="1-D"):
        as_shape(np.zeros((2, 2), dtype=np.int64))
    with pytest.raises(TypeError, match="integers"):
        as_shape(np.array([2.0]))
    with pytest.raises(TypeError, match="Cannot convert"):
        as_shape("23")  # type: ignore[arg-type]


# -- InferenceContext: construction, inputs, outputs, attrs --------------------------


def list_op() -> FakeOp:
    return FakeOp(
        "Concat",
        inputs=(Arg("axis"), Arg("values", number_attr="N"), Arg("extra", type_list_attr="Ts")),
        outputs=(Arg("out"), Arg("parts", number_attr="N")),
    )


def test_context_flat_inputs_and_outputs() -> None:
    attrs = {"N": 3, "Ts": ("float32",)}
    ctx = InferenceContext(list_op(), [[], [1], [2], [3], [4, 4]], attrs)
    assert ctx.num_inputs() == 5 and ctx.num_outputs() == 4
    assert ctx.op_name == "Concat"
    assert ctx.inputs("values") == [[1], [2], [3]]
    assert ctx.inputs("extra") == [[4, 4]] and ctx.inputs("axis") == [scalar()]
    assert ctx.input(4) == [4, 4]
    assert ctx.input_label(0) == "input 'axis'"
    assert ctx.input_label(2) == "input 'values'[1]"
    assert ctx.outputs() == [unknown_shape()] * 4
    ctx.set_output(3, [7])
    assert ctx.output(3) == [7] and ctx.output(0).rank is None


def test_context_infers_one_missing_input_length() -> None:
    ctx = InferenceContext(list_op(), [[], [1], [2], [3]], {"N": 1})
    assert ctx.inputs("extra") == [[2], [3]] and ctx.input_label(3) == "input 'extra'[1]"


def test_context_construction_errors() -> None:
    with pytest.raises(ShapeError, match=r"op 'Concat': expected 5 input shapes .* but got 1"):
        InferenceContext(list_op(), [[]], {"N": 3, "Ts": (1,)})
    with pytest.raises(ShapeError, match="op 'Concat': attr 'N' .* is not given"):
        InferenceContext(list_op(), [], {"Ts": ()})
    with pytest.raises(ShapeError, match="op 'Concat': attr 'N' .* 'parts'.* is not given"):
        InferenceContext(list_op(), [[], [1]], {"Ts": ()})
    with pytest.raises(ShapeError, match="op 'Concat': attr 'Ts' .* 'extra'.* is not given"):
        InferenceContext(list_op(), [[]], {"N": 1})
    with pytest.raises(ShapeError, match="op 'Concat': attr 'N' of argument 'values' is invalid"):
        InferenceContext(list_op(), [], {"N": "x", "Ts": ()})
    with pytest.raises(ShapeError, match="op 'Concat': attr 'N' must be >= 0"):
        InferenceContext(list_op(), [], {"N": -1, "Ts": ()})
    with pytest.raises(ShapeError, match="op 'Op': the shape of input 'b' is invalid"):
        make_ctx([1], [-2])
    with pytest.raises(ShapeError, match="op 'Op': expected 2 input tensors"):
        make_ctx([1], [2], tensors=[None])


def test_context_index_and_name_errors() -> None:
    ctx = make_ctx([1], [2], name="Foo")
    for call in (lambda: ctx.input(2), lambda: ctx.input_tensor(-1), lambda: ctx.input_label(5)):
        with pytest.raises(ShapeError, match="op 'Foo': input index .* the op has 2 inputs"):
            call()
    for call in (lambda: ctx.output(1), lambda: ctx.set_output(1, [])):
        with pytest.raises(ShapeError, match="op 'Foo': output index 1 .* 1 outputs"):
            call()
    with pytest.raises(ShapeError, match="op 'Foo': no input named 'c'; inputs are: 'a', 'b'"):
        ctx.inputs("c")
    with pytest.raises(ShapeError, match="op 'Foo': invalid shape for output 'out'"):
        ctx.set_output(0, [-3])


def test_context_input_shapes_are_private_copies() -> None:
    shared = TensorShape([2, 3])
    ctx = make_ctx(shared, shared)
    assert ctx.input(0) == shared and ctx.input(0) is not ctx.input(1)


def test_context_input_tensor_and_attrs() -> None:
    ctx = make_ctx([2], [], tensors=[[4, 5], None], attrs={"keep_dims": True})
    value = ctx.input_tensor(0)
    assert isinstance(value, np.ndarray) and value.tolist() == [4, 5]
    assert ctx.input_tensor(1) is None and make_ctx([1]).input_tensor(0) is None
    assert ctx.get_attr("keep_dims") is True
    assert ctx.get_attr("missing", 3) == 3
    with pytest.raises(ShapeError, match="op 'Op': no attr named 'T'; attrs given: 'keep_dims'"):
        ctx.get_attr("T")


def test_context_error_and_describe() -> None:
    ctx = make_ctx([2, 3], name="Foo")
    err = ctx.error("bad")
    assert isinstance(err, ShapeError) and isinstance(err, InvalidArgumentError)
    assert str(err) == "op 'Foo': bad" and err.op == "Foo"
    assert ctx.describe(ctx.input(0)) == "input 'a' (shape (2, 3))"
    assert ctx.describe(TensorShape([2, 3])) == "shape (2, 3)"


# -- InferenceContext: ranks, merging, dimensions --------------------------------------


def test_context_with_rank() -> None:
    ctx = make_ctx([2, 3, 4], None, name="MatMul")
    assert ctx.with_rank(ctx.input(0), 3) is ctx.input(0)
    refined = ctx.with_rank(ctx.input(1), 2)
    assert refined == [U, U]
    with pytest.raises(
        ShapeError,
        match=r"^op 'MatMul': Shape must be rank 2 but is rank 3 for input 'a' \(shape \(2, 3, 4\)\)$",
    ):
        ctx.with_rank(ctx.input(0), 2)
    with pytest.raises(
        ShapeError, match=r"rank 1 but is rank 2 for input 'b' \(shape \(\?, \?\)\)"
    ):
        ctx.with_rank(refined, 1)


def test_context_with_rank_at_least_and_most() -> None:
    ctx = make_ctx([2, 3], None, name="Foo")
    a, u = ctx.input(0), ctx.input(1)
    assert ctx.with_rank_at_least(a, 2) is a and ctx.with_rank_at_most(a, 2) is a
    assert ctx.with_rank_at_least(u, 9) is u and ctx.with_rank_at_most(u, 0) is u
    with pytest.raises(
        ShapeError, match="op 'Foo': Shape must be at least rank 3 but is rank 2 for input 'a'"
    ):
        ctx.with_rank_at_least(a, 3)
    with pytest.raises(
        ShapeError, match="op 'Foo': Shape must be at most rank 1 but is rank 2 for input 'a'"
    ):
        ctx.with_rank_at_most(a, 1)


def test_context_merge_shapes() -> None:
    ctx = make_ctx([2, None], [None, 3], [2, 4, 1], [5, 3], name="AddN")
    a, b, c, d = (ctx.input(i) for i in range(4))
    assert ctx.merge(a, b) == [2, 3]
    assert ctx.merge(a, unknown_shape()) is a
    with pytest.raises(
        ShapeError,
        match=r"op 'AddN': Shapes must be equal rank, but are 2 and 3 for input 'a' "
        r"\(shape \(2, \?\)\) and input 'c' \(shape \(2, 4, 1\)\)",
    ):
        ctx.merge(a, c)
    with pytest.raises(
        ShapeError,
        match=r"op 'AddN': Dimension 0 in both shapes must be equal, but are 2 and 5, "
        r"for input 'a' \(shape \(2, \?\)\) and input 'd' \(shape \(5, 3\)\)",
    ):
        ctx.merge(a, d)


def test_context_merge_dims() -> None:
    ctx = make_ctx([2, 3], [4, 5], name="MatMul")
    known = ctx.dim(ctx.input(0), 1)
    assert ctx.merge(known, None) is known and ctx.merge(None, 3) == 3
    assert ctx.merge(ctx.unknown_dim(), ctx.unknown_dim()).value is None
    with pytest.raises(
        ShapeError,
        match=r"op 'MatMul': Dimensions must be equal, but are 3 and 4, for dimension 1 of "
        r"input 'a' \(shape \(2, 3\)\) and dimension 0 of input 'b' \(shape \(4, 5\)\)$",
    ):
        ctx.merge(known, ctx.dim(ctx.input(1), 0))
    with pytest.raises(
        ShapeError, match=r"op 'MatMul': Dimensions must be equal, but are 3 and 7$"
    ):
        ctx.merge(3, 7)
    with pytest.raises(ShapeError, match="op 'MatMul': cannot merge a shape with a dimension"):
        ctx.merge(ctx.input(0), 3)  # type: ignore[call-overload]
    with pytest.raises(ShapeError, match="op 'MatMul': invalid dimension -1"):
        ctx.merge(-1, 3)


def test_context_dim_and_queries() -> None:
    ctx = make_ctx([2, None, 4], None, name="Foo")
    s, u = ctx.input(0), ctx.input(1)
    assert ctx.dim(s, 0) == 2 and ctx.dim(s, -1) == 4 and ctx.dim(s, -3) == 2
    assert ctx.dim(u, 5).value is None and ctx.dim(u, -1).value is None
    with pytest.raises(
        ShapeError, match=r"op 'Foo': Dimension index 3 is out of range for input 'a' .*\[-3, 3\)"
    ):
        ctx.dim(s, 3)
    with pytest.raises(ShapeError, match="op 'Foo': Dimension index -4"):
        ctx.dim(s, -4)
    assert ctx.value(ctx.dim(s, 0)) == 2 and ctx.value(ctx.dim(s, 1)) is None and ctx.value(5) == 5
    assert ctx.rank(s) == 3 and ctx.rank(u) is None
    assert ctx.rank_known(s) and not ctx.rank_known(u)
    assert ctx.value_known(ctx.dim(s, 0)) and not ctx.value_known(ctx.dim(s, 1))
    assert ctx.num_elements(s) is None and ctx.num_elements(TensorShape([2, 3])) == 6


def test_context_makers() -> None:
    ctx = make_ctx(name="Foo")
    assert ctx.scalar() == [] and ctx.vector(3) == [3] and ctx.matrix(None, 2) == [None, 2]
    assert ctx.make_shape([1, None, Dimension(3)]) == [1, None, 3]
    assert ctx.make_dim(4) == 4 and ctx.make_dim(None).value is None
    assert ctx.unknown_shape().rank is None and ctx.unknown_dim().value is None
    assert ctx.unknown_shape_of_rank(2) == [None, None]
    with pytest.raises(ShapeError, match="op 'Foo': rank must be >= 0, but is -1"):
        ctx.unknown_shape_of_rank(-1)
    with pytest.raises(ShapeError, match="op 'Foo': invalid dimension -2"):
        ctx.make_shape([-2])


def test_context_dimension_arithmetic() -> None:
    ctx = make_ctx(name="Foo")
    d = ctx.make_dim(6)
    assert ctx.add(d, 2) == 8 and ctx.add(d, 0) is d and ctx.add(0, d) is d
    assert ctx.add(None, 2).value is None
    assert ctx.subtract(d, 2) == 4 and ctx.subtract(d, 0) is d
    assert ctx.subtract(None, 2).value is None and ctx.subtract(d, None).value is None
    assert ctx.multiply(d, 2) == 12 and ctx.multiply(d, 1) is d and ctx.multiply(1, d) is d
    assert ctx.multiply(None, 0) == 0 and ctx.multiply(0, None) == 0
    assert ctx.multiply(None, 2).value is None
    assert ctx.divide(d, 4) == 1 and ctx.divide(d, 3, evenly=True) == 2 and ctx.divide(d, 1) is d
    assert ctx.divide(None, 2).value is None and ctx.divide(d, None).value is None
    with pytest.raises(
        ShapeError, match="op 'Foo': Negative dimension size caused by subtracting 7 from 6"
    ):
        ctx.subtract(d, 7)
    with pytest.raises(ShapeError, match="op 'Foo': Divisor must be positive but is 0"):
        ctx.divide(d, 0)
    with pytest.raises(
        ShapeError, match="op 'Foo': Dimension size must be evenly divisible by 4 but is 6"
    ):
        ctx.divide(d, 4, evenly=True)


def test_context_concatenate_subshape_replace_dim() -> None:
    ctx = make_ctx([2, 3, 4], None, name="Foo")
    s, u = ctx.input(0), ctx.input(1)
    assert ctx.concatenate(s, TensorShape([5])) == [2, 3, 4, 5]
    assert ctx.concatenate(s, u).rank is None
    assert ctx.subshape(s, 1) == [3, 4] and ctx.subshape(s, 0, -1) == [2, 3]
    assert ctx.subshape(s, -2, 3) == [3, 4] and ctx.subshape(s, 3) == []
    assert ctx.subshape(s, 0) is s and ctx.subshape(u, 1).rank is None
    for start, end in ((4, None), (0, 4), (-4, None), (2, 1)):
        with pytest.raises(
            ShapeError, match=r"op 'Foo': Subshape \[.*\] is out of range for input 'a'"
        ):
            ctx.subshape(s, start, end)
    assert ctx.replace_dim(s, 1, None) == [2, None, 4]
    assert ctx.replace_dim(s, -1, 9) == [2, 3, 9]
    assert ctx.replace_dim(u, 0, 1).rank is None
    with pytest.raises(ShapeError, match="op 'Foo': Dimension index 3 is out of range"):
        ctx.replace_dim(s, 3, 1)


def test_context_broadcast() -> None:
    ctx = make_ctx([2, 1, 3], [4, 1], name="Add")
    b = ctx.broadcast
    assert b(ctx.input(0), ctx.input(1)) == [2, 4, 3]
    assert b(TensorShape([None, 1, 5]), TensorShape([3, None, 1])) == [3, None, 5]
    assert b(TensorShape([None]), TensorShape([None])) == [None]
    assert b(TensorShape([None]), TensorShape([0])) == [0]
    assert b(TensorShape([2, 3]), scalar()) == [2, 3]
    assert b(TensorShape([2]), unknown_shape()).rank is None
    with pytest.raises(
        ShapeError,
        match=r"op 'Add': Shapes cannot be broadcast together: dimensions 3 and 4 differ and "
        r"neither is 1, for input 'a' \(shape \(2, 1, 3\)\) and shape \(4,\)",
    ):
        b(ctx.input(0), TensorShape([4]))


def test_make_shape_from_shape_tensor_known() -> None:
    def from_tensor(value: Any, shape: ShapeLike = None) -> TensorShape:
        ctx = make_ctx(shape, name="Reshape", tensors=[value])
        return ctx.make_shape_from_shape_tensor(0)

    assert from_tensor(np.array([2, -1, 3], dtype=np.int64)) == [2, None, 3]
    assert from_tensor(np.array([], dtype=np.int32)) == scalar()
    assert from_tensor(np.array(-1, dtype=np.int32)).rank is None
    with pytest.raises(ShapeError, match="op 'Reshape': Shape tensor input 'a' must hold integers"):
        from_tensor(np.array([2.0]))
    with pytest.raises(
        ShapeError, match=r"op 'Reshape': Shape tensor input 'a' must be a vector .* \(2, 1\)"
    ):
        from_tensor(np.array([[2], [3]]))
    with pytest.raises(ShapeError, match="op 'Reshape': Shape tensor input 'a' must be a vector"):
        from_tensor(np.array(3))
    with pytest.raises(
        ShapeError, match="op 'Reshape': Invalid value -2 at index 1 of shape tensor input 'a'"
    ):
        from_tensor(np.array([1, -2]))


def test_make_shape_from_shape_tensor_unknown() -> None:
    def from_shape(shape: ShapeLike) -> TensorShape:
        return make_ctx(shape, name="Reshape").make_shape_from_shape_tensor(0)

    assert from_shape([3]) == [None, None, None]
    assert from_shape([None]).rank is None
    assert from_shape(None).rank is None
    assert from_shape([]).rank is None
    with pytest.raises(
        ShapeError, match="op 'Reshape': Shape must be at most rank 1 but is rank 2 for input 'a'"
    ):
        from_shape([2, 2])


# -- run_shape_fn -----------------------------------------------------------------------


def test_run_shape_fn_without_fn_gives_unknown_outputs() -> None:
    op = FakeOp("NoFn", outputs=(Arg("x"), Arg("y")))
    assert run_shape_fn(op, [[1], [2]], {}) == [unknown_shape(), unknown_shape()]


def test_run_shape_fn_cpp_style() -> None:
    op = FakeOp("MatMul", shape_fn=shape_fns.matmul_shape)
    assert run_shape_fn(op, [[2, 3], [3, 5]], {"transpose_a": False}) == [[2, 5]]


def test_run_shape_fn_python_style() -> None:
    two = FakeOp("Split", outputs=(Arg("x"), Arg("y")), shape_fn=lambda c: [c.input(0), [1]])
    assert run_shape_fn(two, [[4], [1]], {}) == [[4], [1]]
    one = FakeOp("Id", inputs=(Arg("x"),), shape_fn=lambda c: c.input(0).with_rank(2))
    assert run_shape_fn(one, [None], {}) == [[None, None]]


def test_run_shape_fn_passes_input_tensors() -> None:
    op = FakeOp("Reshape", shape_fn=lambda c: c.set_output(0, c.make_shape_from_shape_tensor(1)))
    assert run_shape_fn(op, [[6], [2]], {}, [None, np.array([2, 3])]) == [[2, 3]]


def test_run_shape_fn_wraps_value_errors() -> None:
    op = FakeOp("Weird", shape_fn=lambda c: c.input(0).merge_with(c.input(1)))
    with pytest.raises(
        ShapeError,
        match=r"^op 'Weird': Shapes \(2,\) and \(3,\) are not compatible \(input shapes: \(2,\), \(3,\)\)$",
    ) as info:
        run_shape_fn(op, [[2], [3]], {})
    assert isinstance(info.value.__cause__, ValueError) and info.value.op == "Weird"


def test_run_shape_fn_bad_returns() -> None:
    cases: list[tuple[Callable[[InferenceContext], Any], str]] = [
        (
            lambda c: 3,
            "shape function must return None, a TensorShape or a list of shapes .*not int",
        ),
        (lambda c: [[1], [2]], "shape function returned 2 shapes but the op has 1 outputs"),
        (lambda c: [["x"]], "invalid shape for output 'out'"),
    ]
    for fn, message in cases:
        with pytest.raises(ShapeError, match=f"op 'Bad': {message}"):
            run_shape_fn(FakeOp("Bad", shape_fn=fn), [[1], [1]], {})
    two = FakeOp("Bad", outputs=(Arg("x"), Arg("y")), shape_fn=lambda c: TensorShape([1]))
    with pytest.raises(ShapeError, match="returned 1 shapes but the op has 2 outputs"):
        run_shape_fn(two, [[1], [1]], {})


def test_run_shape_fn_does_not_rewrap_shape_errors() -> None:
    op = FakeOp("MatMul", shape_fn=shape_fns.matmul_shape)
    with pytest.raises(ShapeError, match=r"^op 'MatMul': Shape must be rank 2 .*\)$"):
        run_shape_fn(op, [[2], [2, 2]], {})


def test_run_shape_fn_lets_other_errors_through() -> None:
    def broken(ctx: InferenceContext) -> None:
        raise KeyError("bug")

    with pytest.raises(KeyError):
        run_shape_fn(FakeOp("Broken", shape_fn=broken), [[1], [1]], {})


# -- common shape functions ---------------------------------------------------------------


def test_unchanged_shape() -> None:
    for shape in ([2, 3], [None, 3], None):
        assert infer(shape_fns.unchanged_shape, shape) == as_shape(shape)


def test_unchanged_shape_with_rank() -> None:
    fn = shape_fns.unchanged_shape_with_rank(2)
    assert infer(fn, [2, 3]) == [2, 3] and infer(fn, [None, 3]) == [None, 3]
    assert infer(fn, None) == [None, None]
    with pytest.raises(
        ShapeError, match="op 'Cholesky': Shape must be rank 2 but is rank 1 for input 'a'"
    ):
        infer(fn, [3], name="Cholesky")


def test_unchanged_shape_with_rank_at_least_and_most() -> None:
    least = shape_fns.unchanged_shape_with_rank_at_least(2)
    most = shape_fns.unchanged_shape_with_rank_at_most(1)
    assert infer(least, [2, None, 4]) == [2, None, 4] and infer(least, None).rank is None
    assert infer(most, [None]) == [None] and infer(most, None).rank is None
    with pytest.raises(ShapeError, match="op 'Op': Shape must be at least rank 2 but is rank 1"):
        infer(least, [3])
    with pytest.raises(ShapeError, match="op 'Op': Shape must be at most rank 1 but is rank 2"):
        infer(most, [3, 3])


def test_scalar_unknown_and_no_outputs() -> None:
    assert infer(shape_fns.scalar_shape, [2, 3]) == scalar()
    ctx = make_ctx([2], outputs=(Arg("x"), Arg("y")))
    ctx.set_output(0, [1])
    shape_fns.unknown_shape(ctx)
    assert ctx.outputs() == [unknown_shape(), unknown_shape()]
    op = FakeOp("NoOp", inputs=(), outputs=(), shape_fn=shape_fns.no_outputs)
    assert run_shape_fn(op, [], {}) == []


def test_merge_all_inputs() -> None:
    fn = shape_fns.merge_all_inputs
    assert infer(fn, [2, None], [None, 3], [2, 3]) == [2, 3]
    assert infer(fn, None, [None, 3]) == [None, 3]
    assert infer(fn, None, None).rank is None
    with pytest.raises(
        ShapeError, match="op 'AddN': Dimension 1 in both shapes must be equal, but are 3 and 4"
    ):
        infer(fn, [2, 3], [2, 4], name="AddN")
    with pytest.raises(ShapeError, match="op 'AddN': Shapes must be equal rank, but are 2 and 1"):
        infer(fn, [2, 3], [3], name="AddN")
    with pytest.raises(ShapeError, match="op 'AddN': merge_all_inputs needs at least one input"):
        infer(fn, name="AddN")


def test_matmul_shape() -> None:
    fn = shape_fns.matmul_shape
    assert infer(fn, [2, 3], [3, 5]) == [2, 5]
    assert infer(fn, [3, 2], [3, 5], attrs={"transpose_a": True}) == [2, 5]
    assert infer(fn, [2, 3], [5, 3], attrs={"transpose_b": True}) == [2, 5]
    assert infer(fn, [3, 2], [5, 3], attrs={"transpose_a": True, "transpose_b": True}) == [2, 5]
    assert infer(fn, [None, 3], [None, None]) == [None, None]
    assert infer(fn, None, [3, 5]) == [None, 5]
    assert infer(fn, None, None) == [None, None]


def test_matmul_shape_errors() -> None:
    with pytest.raises(
        ShapeError,
        match=r"^op 'MatMul': Dimensions must be equal, but are 3 and 4, for dimension 1 of input 'a' "
        r"\(shape \(2, 3\)\) and dimension 0 of input 'b' \(shape \(4, 5\)\)$",
    ):
        infer(shape_fns.matmul_shape, [2, 3], [4, 5], name="MatMul")
    with pytest.raises(
        ShapeError, match="op 'MatMul': Shape must be rank 2 but is rank 3 for input 'b'"
    ):
        infer(shape_fns.matmul_shape, [2, 3], [3, 4, 5], name="MatMul")


def test_batch_matmul_shape() -> None:
    fn = shape_fns.batch_matmul_shape
    assert infer(fn, [2, 3], [3, 5]) == [2, 5]
    assert infer(fn, [7, 2, 3], [3, 5]) == [7, 2, 5]
    assert infer(fn, [7, 1, 2, 3], [6, 3, 5]) == [7, 6, 2, 5]
    assert infer(fn, [7, 3, 2], [7, 5, 3], attrs={"adj_x": True, "adj_y": True}) == [7, 2, 5]
    assert infer(fn, [None, 2, None], [1, None, 5]) == [None, 2, 5]
    assert infer(fn, None, [3, 5]).rank is None


def test_batch_matmul_shape_errors() -> None:
    fn = shape_fns.batch_matmul_shape
    with pytest.raises(
        ShapeError, match="op 'BatchMatMulV2': Dimensions must be equal, but are 3 and 4"
    ):
        infer(fn, [7, 2, 3], [7, 4, 5], name="BatchMatMulV2")
    with pytest.raises(ShapeError, match="op 'BatchMatMulV2': Shapes cannot be broadcast together"):
        infer(fn, [7, 2, 3], [6, 3, 5], name="BatchMatMulV2")
    with pytest.raises(
        ShapeError, match="op 'BatchMatMulV2': Shape must be at least rank 2 but is rank 1"
    ):
        infer(fn, [3], [3, 5], name="BatchMatMulV2")


def test_broadcast_binary_op_shape() -> None:
    fn = shape_fns.broadcast_binary_op_shape
    assert infer(fn, [2, 1], [3]) == [2, 3]
    assert infer(fn, [None, 1], [1, 4]) == [None, 4]
    assert infer(fn, [None], [5]) == [5]
    assert infer(fn, [2], None).rank is None
    with pytest.raises(
        ShapeError,
        match=r"op 'Add': Shapes cannot be broadcast together: dimensions 2 and 3 .* "
        r"for input 'a' \(shape \(2,\)\) and input 'b' \(shape \(3,\)\)",
    ):
        infer(fn, [2], [3], name="Add")


def reduce(
    shape: ShapeLike, axes: Any, keep_dims: bool | None = None, name: str = "Sum"
) -> TensorShape:
    attrs = {} if keep_dims is None else {"keep_dims": keep_dims}
    value = None if axes is None else np.asarray(axes, dtype=np.int32)
    return infer(
        shape_fns.reduction_shape, shape, [None], name=name, attrs=attrs, tensors=[None, value]
    )


def test_reduction_shape_known_axes() -> None:
    assert reduce([2, 3, 4], [1]) == [2, 4]
    assert reduce([2, 3, 4], 1, keep_dims=True) == [2, 1, 4]
    assert reduce([2, None, 4], [-1, 0]) == [None]
    assert reduce([2, 3, 4], [0, -3, 0], keep_dims=True) == [1, 3, 4]
    assert reduce([2, 3], []) == [2, 3]
    assert reduce([2, 3], [0, 1]) == scalar()
    assert reduce(None, [0]).rank is None and reduce(None, [0], keep_dims=True).rank is None


def test_reduction_shape_unknown_axes() -> None:
    assert reduce([2, 3, 4], None, keep_dims=True) == [None, None, None]
    assert reduce([2, 3, 4], None, keep_dims=False).rank is None
    assert reduce(None, None, keep_dims=True).rank is None


def test_reduction_shape_errors() -> None:
    for axes in ([3], [-4], [0, 5]):
        with pytest.raises(
            ShapeError,
            match=r"op 'Max': Invalid reduction dimension -?\d for input 'a' \(shape \(2, 3, 4\)\) "
            r"of rank 3; expected an axis in \[-3, 3\)",
        ):
            reduce([2, 3, 4], axes, name="Max")
    with pytest.raises(ShapeError, match="op 'Max': Invalid reduction dimension 0 .* rank 0"):
        reduce([], 0, name="Max")
    bad_dtype = [None, np.array([0.0])]
    with pytest.raises(
        ShapeError, match="op 'Max': input 'b' .* must be an int32 or int64 scalar or vector"
    ):
        infer(shape_fns.reduction_shape, [2], [1], name="Max", tensors=bad_dtype)


# -- properties -----------------------------------------------------------------------------

shapes_st = st.lists(st.sampled_from([1, 1, 2, 3]), min_size=0, max_size=4)


@st.composite
def broadcastable_pair(draw: st.DrawFn) -> tuple[list[int], list[int]]:
    out = draw(shapes_st)

    def part() -> list[int]:
        tail = out[len(out) - draw(st.integers(0, len(out))) :]
        return [d if draw(st.booleans()) else 1 for d in tail]

    return part(), part()


def blur(data: st.DataObject, shape: list[int]) -> list[int | None]:
    return [None if data.draw(st.booleans()) else d for d in shape]


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_broadcast_matches_numpy_and_is_never_too_specific(data: st.DataObject) -> None:
    a, b = data.draw(broadcastable_pair())
    expected = np.broadcast_shapes(tuple(a), tuple(b))
    assert infer(shape_fns.broadcast_binary_op_shape, a, b) == expected
    partial = infer(shape_fns.broadcast_binary_op_shape, blur(data, a), blur(data, b))
    assert partial.is_compatible_with(list(expected)) and partial.rank == len(expected)


@settings(max_examples=100, deadline=None)
@given(shapes_st, shapes_st)
def test_broadcast_errors_exactly_when_numpy_does(a: list[int], b: list[int]) -> None:
    try:
        expected: tuple[int, ...] | None = np.broadcast_shapes(tuple(a), tuple(b))
    except ValueError:
        expected = None
    if expected is None:
        with pytest.raises(ShapeError, match="op 'Op': Shapes cannot be broadcast"):
            infer(shape_fns.broadcast_binary_op_shape, a, b)
    else:
        assert infer(shape_fns.broadcast_binary_op_shape, a, b) == expected
