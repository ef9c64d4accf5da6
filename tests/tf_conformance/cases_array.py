"""Conformance cases of the array ops (shape, data movement, indexing, creation).

Inputs are in each op's OpDef order; index inputs carry the dtype TensorFlow is
given, so the index type attrs (``Tidx``, ``Tshape``, ``Index``...) are inferred.
"""

from __future__ import annotations

import numpy as np

from case import Case, noncontiguous, rng

#: Cases (or ops) where opkernel deliberately differs from TensorFlow, with the reason.
DIFFERENCES: dict[str, str] = {
    **{
        f"Range/{dt}": f"TensorFlow's OpDef allows Range of {dt} but registers no CPU kernel for it (NotFoundError); "
        "opkernel computes it, checked against numpy.arange in test_array_ops_conformance.py"
        for dt in ("int8", "int16", "uint16", "uint32")
    },
    "Tile/uint16": "TensorFlow's CPU Tile has no uint16 instantiation (UnimplementedError); opkernel tiles every "
    "dtype it can move, checked against numpy.tile in test_array_ops_conformance.py",
    "Where/float16": "TensorFlow's CPU Where refuses float16 on purpose (to avoid copies from a GPU); opkernel "
    "answers, checked against numpy.argwhere in test_array_ops_conformance.py",
    "Where/scalar_true": "TensorFlow's CPU Where only has cases for ranks 1 to 8 ('Unhandled input dimensions: 0'); "
    "opkernel gives the defined [num_true, 0] int64 result, as numpy.argwhere",
    "Transpose/perm_int64_wraps_32": "TensorFlow copies an int64 perm into int32 (transpose_op.cc, PermutationHelper), "
    "so 2**32 + 1 silently acts as 1; opkernel rejects the entry as out of range "
    "(test_transpose_rejects_int64_perm_entries_past_int32)",
    "Where/scalar_false": "as Where/scalar_true: the defined [0, 0] result where TensorFlow's CPU kernel rejects rank 0",
    **{
        f"{op}/{dt}": f"TensorFlow's CPU {op} has no {dt} kernel (NotFoundError); opkernel rearranges every dtype, "
        "checked against an element-by-element reference of the definition in tests/test_ops_array.py"
        for op in ("SpaceToBatchND", "BatchToSpaceND") for dt in ("bool", "complex64")
    },
    **{
        f"SparseToDense/{case}": "TensorFlow's gradient passes sparse_indices to GatherNd unchanged, so a vector of "
        "indices is read as one index (a GatherNd error here), and a scalar sparse_values gets a gradient of shape [N]; "
        "opkernel's gradient reads each index as the forward kernel does and sums the scalar's (tests/test_ops_array.py "
        "checks it against finite differences)"
        for case in ("vector_indices", "scalar_value")
    },
    "Diag/bfloat16": "TensorFlow's CPU Diag has no bfloat16 kernel (NotFoundError; its OpDef allows bfloat16); opkernel "
    "places any dtype, checked against an element-by-element reference of the definition in tests/test_ops_array.py",
    **{
        f"{op}/nchw": f"TensorFlow's CPU {op} has no NCHW kernel (NotFoundError: GPU only); opkernel computes NCHW on "
        "every backend, checked against an element-by-element reference of the definition in tests/test_ops_array.py"
        for op in ("DepthToSpace", "SpaceToDepth")
    },
}

#: Ops of this family without cases, with the reason.
EXEMPT: dict[str, str] = {}

try:  # bfloat16 arrays are ml_dtypes' (a dependency of TensorFlow and of opkernel's bfloat16)
    import ml_dtypes  # noqa: F401

    _BF16: tuple[str, ...] = ("bfloat16",)
except ImportError:  # pragma: no cover - the recording then has bfloat16 cases the tests skip
    _BF16 = ()

_ANY = (
    "float32", "float64", "float16", "int32", "int64", "int8", "uint8", "int16", "uint16", "uint32", "uint64", "bool",
    "complex64",
) + _BF16
_FLOATS = ("float32", "float64", "float16")


def _rand(shape: tuple[int, ...], dtype: str, seed: int) -> np.ndarray:
    g = rng(seed)
    if dtype == "bfloat16":
        return g.standard_normal(shape).astype(np.float32).astype(np.dtype("bfloat16"))
    dt = np.dtype(dtype)
    if dt == np.bool_:
        return g.integers(0, 2, shape).astype(bool)
    if dt.kind in "iu":
        info = np.iinfo(dt)
        return g.integers(max(info.min, -100), min(info.max, 100), shape, endpoint=True).astype(dt)
    if dt.kind == "c":
        return (g.standard_normal(shape) + 1j * g.standard_normal(shape)).astype(dt)
    return g.standard_normal(shape).astype(dt)


def _i32(*v: int) -> np.ndarray:
    return np.array(v, np.int32)


def _i64(*v: int) -> np.ndarray:
    return np.array(v, np.int64)


_SPECIAL = np.array([np.nan, np.inf, -np.inf, -0.0, 0.0, 1.5, -2.0], np.float32)


def _identity_like() -> list[Case]:
    out = []
    for op in ("Identity", "StopGradient", "ZerosLike", "OnesLike"):
        for i, dt in enumerate(_ANY):
            # StopGradient, ZerosLike, OnesLike: a zero gradient (TensorFlow's is None, taken as zeros)
            out.append(Case(f"{op}/{dt}", op, (_rand((3, 4), dt, i),), grad=dt in _FLOATS, seed=i))
        out.append(Case(f"{op}/scalar", op, (np.float32(2.5),)))
        out.append(Case(f"{op}/empty", op, (np.zeros((0, 3), np.float32),)))
        out.append(Case(f"{op}/special", op, (_SPECIAL,)))
        out.append(Case(f"{op}/noncontiguous", op, (noncontiguous(_rand((4, 5), "float32", 7)),)))
    out.append(Case("Identity/complex128_2x3", "Identity", (_rand((2, 3), "complex128", 9),)))
    x = _rand((2, 3), "float32", 11)
    out += [
        Case("EnsureShape/exact", "EnsureShape", (x,), {"shape": [2, 3]}, grad=True, seed=1),
        Case("EnsureShape/unknown_dim", "EnsureShape", (_rand((2, 3), "int32", 12),), {"shape": [None, 3]}),
        Case("EnsureShape/unknown_rank", "EnsureShape", (_rand((4,), "float64", 13),), {"shape": None}),
        Case("EnsureShape/scalar", "EnsureShape", (np.float32(2.5),), {"shape": []}),
        Case("EnsureShape/empty", "EnsureShape", (np.zeros((0, 3), np.float32),), {"shape": [0, None]}),
        Case("EnsureShape/wrong_dim", "EnsureShape", (x,), {"shape": [2, 4]}),
        Case("EnsureShape/wrong_rank", "EnsureShape", (x,), {"shape": [6]}),
        Case("EnsureShape/bool", "EnsureShape", (np.array([True, False]),), {"shape": [2]}),
    ]
    out.append(Case("ZerosLike/complex128", "ZerosLike", (_rand((2, 3), "complex128", 9),)))
    return out


def _shape_ops() -> list[Case]:
    out = []
    for op in ("Shape", "Size", "Rank"):
        for name, x in (
            ("matrix", _rand((3, 4), "float32", 1)),
            ("scalar", np.float32(1.0)),
            ("empty", np.zeros((0, 5, 2), np.int32)),
            ("rank5", np.zeros((1, 2, 1, 3, 1), np.bool_)),
            ("noncontiguous", noncontiguous(_rand((2, 3), "float64", 2))),
        ):
            out.append(Case(f"{op}/{name}", op, (x,)))
        if op != "Rank":
            out.append(Case(f"{op}/int64", op, (np.zeros((2, 7), np.float32),), {"out_type": "int64"}))
    return out


def _reshape() -> list[Case]:
    x = _rand((2, 3, 4), "float32", 3)
    return [
        Case("Reshape/basic", "Reshape", (x, _i32(4, 6)), grad=True, seed=1),
        Case("Reshape/infer", "Reshape", (x, _i32(-1, 2)), grad=True, seed=2),
        Case("Reshape/int64_shape", "Reshape", (_rand((6,), "int64", 1), _i64(3, 2))),
        Case("Reshape/to_scalar", "Reshape", (np.array([7], np.int32), _i32())),
        Case("Reshape/from_scalar", "Reshape", (np.float64(3.0), _i32(1, 1, 1))),
        Case("Reshape/empty_infer", "Reshape", (np.zeros((0, 4), np.float32), _i32(-1, 2))),
        Case("Reshape/empty_infer_with_zero", "Reshape", (np.zeros((0, 4), np.float32), _i32(-1, 0))),
        Case("Reshape/empty_infer_with_zero_floor", "Reshape", (np.zeros((0, 4), np.int32), _i32(-1, 0, 3)),
             why="TensorFlow divides 4 by 3 with no remainder check when the input is empty"),
        Case("Reshape/empty_from_rank1", "Reshape", (np.zeros((0,), np.float32), _i32(0, -1, 0))),
        Case("Reshape/nonempty_to_zero", "Reshape", (x, _i32(-1, 0))),
        Case("Reshape/empty_to_zero_dims", "Reshape", (np.zeros((0, 4), np.float32), _i32(2, 0, 5))),
        Case("Reshape/noncontiguous", "Reshape", (noncontiguous(_rand((3, 4), "float32", 4)), _i32(2, 6))),
        Case("Reshape/bool", "Reshape", (_rand((2, 2), "bool", 4), _i32(4))),
        Case("Reshape/bad_size", "Reshape", (x, _i32(5, 5))),
        Case("Reshape/two_minus_one", "Reshape", (x, _i32(-1, -1))),
        Case("Reshape/negative_dim", "Reshape", (x, _i32(-2, 12))),
        Case("Reshape/infer_not_divisible", "Reshape", (x, _i32(-1, 5))),
        Case("Reshape/shape_not_vector", "Reshape", (x, np.array([[24]], np.int32))),
    ]


def _transpose() -> list[Case]:
    x = _rand((2, 3, 4), "float32", 5)
    out = [
        Case(f"Transpose/{dt}", "Transpose", (_rand((3, 4, 2), dt, 6), _i32(2, 0, 1)), grad=dt in _FLOATS, seed=3)
        for dt in _ANY
    ]
    out += [
        Case("Transpose/int64_perm", "Transpose", (x, _i64(1, 2, 0))),
        Case("Transpose/identity", "Transpose", (x, _i32(0, 1, 2))),
        Case("Transpose/scalar", "Transpose", (np.float32(1.0), _i32())),
        Case("Transpose/empty", "Transpose", (np.zeros((0, 3), np.float32), _i32(1, 0))),
        Case("Transpose/rank5", "Transpose", (_rand((2, 1, 3, 2, 2), "int32", 7), _i32(4, 2, 0, 3, 1))),
        Case("Transpose/noncontiguous", "Transpose", (noncontiguous(_rand((3, 4), "float32", 8)), _i32(1, 0))),
        Case("Transpose/special", "Transpose", (_SPECIAL.reshape(7, 1), _i32(1, 0))),
        Case("Transpose/large", "Transpose", ((np.arange(90000) % 251).astype(np.int8).reshape(300, 300), _i32(1, 0)),
             why="large enough for a threaded copy"),
        Case("Transpose/perm_wrong_length", "Transpose", (x, _i32(1, 0))),
        Case("Transpose/perm_repeated", "Transpose", (x, _i32(0, 0, 1))),
        Case("Transpose/perm_out_of_range", "Transpose", (x, _i32(0, 1, 3))),
        Case("Transpose/perm_int64_wraps_32", "Transpose", (x, _i64(2**32 + 1, 0, 2))),
        Case("Transpose/perm_negative", "Transpose", (x, _i32(-1, 0, 1))),
    ]
    return out


def _invert_permutation() -> list[Case]:
    return [
        Case("InvertPermutation/int32", "InvertPermutation", (_i32(3, 4, 0, 2, 1),)),
        Case("InvertPermutation/int64", "InvertPermutation", (_i64(2, 0, 1),)),
        Case("InvertPermutation/int64_wraps_32", "InvertPermutation", (_i64(1, 2**32),)),
        Case("InvertPermutation/empty", "InvertPermutation", (_i32(),)),
        Case("InvertPermutation/single", "InvertPermutation", (_i32(0),)),
        Case("InvertPermutation/repeated", "InvertPermutation", (_i32(0, 0, 1),)),
        Case("InvertPermutation/out_of_range", "InvertPermutation", (_i32(0, 3, 1),)),
        Case("InvertPermutation/negative", "InvertPermutation", (_i32(0, -1, 1),)),
        Case("InvertPermutation/not_vector", "InvertPermutation", (np.array([[0, 1]], np.int32),)),
        Case("InvertPermutation/scalar", "InvertPermutation", (np.int32(0),)),
    ]


def _expand_squeeze() -> list[Case]:
    x = _rand((2, 3), "float32", 10)
    out = [
        Case(f"ExpandDims/dim{d}", "ExpandDims", (x, np.int32(d)), grad=d == 1, seed=d + 10) for d in (0, 1, 2, -1, -3)
    ]
    out += [
        Case("ExpandDims/int64_dim", "ExpandDims", (x, np.int64(1))),
        Case("ExpandDims/scalar", "ExpandDims", (np.int32(5), np.int32(0))),
        Case("ExpandDims/scalar_neg", "ExpandDims", (np.int32(5), np.int32(-1))),
        Case("ExpandDims/empty", "ExpandDims", (np.zeros((0,), np.float32), np.int32(1))),
        Case("ExpandDims/dim_vector1", "ExpandDims", (x, _i32(0)), why="TF takes a 1-element dim"),
        Case("ExpandDims/int64_wraps_32", "ExpandDims", (x, np.int64(2**32))),
        Case("ExpandDims/out_of_range", "ExpandDims", (x, np.int32(3))),
        Case("ExpandDims/out_of_range_neg", "ExpandDims", (x, np.int32(-4))),
        Case("ExpandDims/dim_two_elements", "ExpandDims", (x, _i32(0, 1))),
    ]
    y = _rand((1, 3, 1, 2), "float32", 11)
    out += [
        Case("Squeeze/all", "Squeeze", (y,), grad=True, seed=12),
        Case("Squeeze/dims", "Squeeze", (y,), {"axis": [2]}, grad=True, seed=13),
        Case("Squeeze/neg_dims", "Squeeze", (y,), {"axis": [-4, -2]}),
        Case("Squeeze/int32", "Squeeze", (_rand((1, 1), "int32", 1),)),
        Case("Squeeze/none", "Squeeze", (_rand((2, 3), "int64", 1),)),
        Case("Squeeze/scalar", "Squeeze", (np.float32(2.0),)),
        Case("Squeeze/empty", "Squeeze", (np.zeros((0, 1), np.float32),)),
        Case("Squeeze/noncontiguous", "Squeeze", (noncontiguous(_rand((1, 3, 4), "float32", 2)),)),
        Case("Squeeze/repeated_dim", "Squeeze", (y,), {"axis": [0, 0]}),
        Case("Squeeze/not_one", "Squeeze", (y,), {"axis": [1]}),
        Case("Squeeze/out_of_range", "Squeeze", (y,), {"axis": [4]}),
        Case("Squeeze/out_of_range_neg", "Squeeze", (y,), {"axis": [-5]}),
    ]
    return out


def _pad() -> list[Case]:
    p = _i32(1, 2, 0, 3).reshape(2, 2)
    out = [Case(f"Pad/{dt}", "Pad", (_rand((2, 3), dt, 14), p), grad=dt in _FLOATS, seed=14) for dt in _ANY]
    out += [
        Case("Pad/int64_paddings", "Pad", (_rand((2, 3), "float32", 15), p.astype(np.int64))),
        Case("Pad/scalar", "Pad", (np.float32(3.0), np.zeros((0, 2), np.int32))),
        Case("Pad/empty_input", "Pad", (np.zeros((0, 2), np.float32), _i32(1, 1, 0, 1).reshape(2, 2))),
        Case("Pad/zero", "Pad", (_rand((2, 3), "float32", 16), np.zeros((2, 2), np.int32)), grad=True, seed=16),
        Case("Pad/special", "Pad", (_SPECIAL, _i32(1, 1).reshape(1, 2))),
        Case("Pad/noncontiguous", "Pad", (noncontiguous(_rand((2, 3), "float32", 17)), p)),
        Case("Pad/rank3", "Pad", (_rand((2, 1, 2), "float64", 18), _i32(0, 1, 2, 0, 1, 1).reshape(3, 2)),
             grad=True, seed=18),
        Case("Pad/negative", "Pad", (_rand((2, 3), "float32", 19), _i32(-1, 0, 0, 0).reshape(2, 2))),
        Case("Pad/wrong_rank", "Pad", (_rand((2, 3), "float32", 19), _i32(1, 1).reshape(1, 2))),
        Case("Pad/paddings_not_matrix", "Pad", (_rand((2, 3), "float32", 19), _i32(1, 1, 1, 1))),
    ]
    for i, dt in enumerate(("float32", "float64", "int32", "int64", "uint8", "float16", "bfloat16")):
        c = np.asarray(_rand((), dt, 40 + i))
        out.append(Case(f"PadV2/{dt}", "PadV2", (_rand((2, 3), dt, 30 + i), p, c), grad=dt in _FLOATS, seed=30 + i))
    out += [
        Case("PadV2/bool", "PadV2", (np.array([[True, False]]), p, np.bool_(True))),
        Case("PadV2/inf_border", "PadV2", (_rand((2, 3), "float32", 20), p, np.float32(np.inf))),
        Case("PadV2/nan_border", "PadV2", (_SPECIAL, _i32(2, 1).reshape(1, 2), np.float32(np.nan))),
        Case("PadV2/int64_paddings", "PadV2", (_rand((2, 3), "float32", 21), p.astype(np.int64), np.float32(-1))),
        Case("PadV2/scalar", "PadV2", (np.float32(3.0), np.zeros((0, 2), np.int32), np.float32(7))),
        Case("PadV2/empty_input", "PadV2", (np.zeros((0, 2), np.float32), _i32(1, 1, 0, 1).reshape(2, 2), np.float32(4))),
        Case("PadV2/rank3", "PadV2", (_rand((2, 1, 2), "float64", 22), _i32(0, 1, 2, 0, 1, 1).reshape(3, 2),
                                      np.float64(0.5)), grad=True, seed=22),
        Case("PadV2/constant_not_scalar", "PadV2", (_rand((2, 3), "float32", 23), p, np.ones(1, np.float32))),
        Case("PadV2/negative", "PadV2", (_rand((2, 3), "float32", 24), _i32(-1, 0, 0, 0).reshape(2, 2), np.float32(1))),
        Case("PadV2/wrong_rank", "PadV2", (_rand((2, 3), "float32", 25), _i32(1, 1).reshape(1, 2), np.float32(1))),
    ]
    return out


def _broadcast_tile_fill() -> list[Case]:
    out = [
        Case(f"BroadcastTo/{dt}", "BroadcastTo", (_rand((3, 1), dt, 20), _i32(2, 3, 4)), grad=dt in _FLOATS, seed=20)
        for dt in _ANY
    ]
    out += [
        Case("BroadcastTo/scalar", "BroadcastTo", (np.float32(2.0), _i32(2, 2)), grad=True, seed=21),
        Case("BroadcastTo/same", "BroadcastTo", (_rand((2, 3), "float32", 21), _i32(2, 3)), grad=True, seed=21),
        Case("BroadcastTo/int64_shape", "BroadcastTo", (_rand((1, 3), "int32", 21), _i64(2, 3))),
        Case("BroadcastTo/to_empty", "BroadcastTo", (_rand((1, 3), "float32", 21), _i32(0, 3))),
        Case("BroadcastTo/to_scalar", "BroadcastTo", (np.float32(5.0), _i32())),
        Case("BroadcastTo/noncontiguous", "BroadcastTo", (noncontiguous(_rand((1, 3), "float32", 22)), _i32(4, 3))),
        Case("BroadcastTo/special", "BroadcastTo", (_SPECIAL, _i32(2, 7))),
        Case("BroadcastTo/incompatible", "BroadcastTo", (_rand((2, 3), "float32", 21), _i32(3, 3))),
        Case("BroadcastTo/fewer_dims", "BroadcastTo", (_rand((2, 3), "float32", 21), _i32(3))),
        Case("BroadcastTo/negative", "BroadcastTo", (_rand((1, 3), "float32", 21), _i32(-1, 3))),
    ]
    out += [Case(f"Tile/{dt}", "Tile", (_rand((2, 3), dt, 23), _i32(2, 1)), grad=dt in _FLOATS, seed=23) for dt in _ANY]
    out += [
        Case("Tile/int64_multiples", "Tile", (_rand((2, 3), "float32", 24), _i64(1, 3)), grad=True, seed=24),
        Case("Tile/scalar", "Tile", (np.float32(2.0), _i32())),
        Case("Tile/zero", "Tile", (_rand((2, 3), "float32", 24), _i32(0, 2)), grad=True, seed=25),
        Case("Tile/empty", "Tile", (np.zeros((0, 3), np.float32), _i32(3, 2)), grad=True, seed=26),
        Case("Tile/rank3", "Tile", (_rand((2, 1, 2), "float64", 27), _i32(2, 3, 2)), grad=True, seed=27),
        Case("Tile/noncontiguous", "Tile", (noncontiguous(_rand((2, 3), "float32", 28)), _i32(2, 2))),
        Case("Tile/special", "Tile", (_SPECIAL, _i32(2))),
        Case("Tile/large", "Tile", (_rand((4, 64), "int8", 29), _i32(128, 8)), why="large enough for a threaded copy"),
        Case("Tile/int64_multiples_wrap_32", "Tile", (np.zeros((0, 3), np.float32), _i64(2**32, 1))),
        Case("Tile/wrong_length", "Tile", (_rand((2, 3), "float32", 24), _i32(2))),
        Case("Tile/negative", "Tile", (_rand((2, 3), "float32", 24), _i32(-1, 2))),
    ]
    out += [Case(f"Fill/{dt}", "Fill", (_i32(2, 3), _rand((), dt, 30)), grad=dt in _FLOATS, seed=30) for dt in _ANY]
    out += [
        Case("Fill/int64_dims", "Fill", (_i64(3), np.float32(1.5))),
        Case("Fill/scalar", "Fill", (_i32(), np.int32(7))),
        Case("Fill/empty", "Fill", (_i32(0, 3), np.float32(1.0))),
        Case("Fill/nan", "Fill", (_i32(2), np.float32(np.nan))),
        Case("Fill/neg_zero", "Fill", (_i32(2), np.float32(-0.0))),
        Case("Fill/int64_dims_wrap_32", "Fill", (_i64(2**32, 0), np.float32(1.0)),
             why="[2**32, 0] is empty, not a [0, 0] from 32-bit truncation"),
        Case("Fill/negative", "Fill", (_i32(-1, 3), np.float32(1.0))),
        Case("Fill/value_not_scalar", "Fill", (_i32(2), np.array([1.0, 2.0], np.float32))),
        Case("Fill/dims_not_vector", "Fill", (np.array([[2]], np.int32), np.float32(1.0))),
    ]
    return out


def _concat_pack() -> list[Case]:
    a, b, c = (_rand((2, 3), "float32", s) for s in (31, 32, 33))
    out = [
        Case(f"ConcatV2/{dt}", "ConcatV2", ([_rand((2, 3), dt, 34), _rand((2, 2), dt, 35)], np.int32(1)),
             grad=dt in _FLOATS, seed=34)
        for dt in _ANY
    ]
    out += [
        Case("ConcatV2/axis0", "ConcatV2", ([a, b, c], np.int32(0)), grad=True, seed=36),
        Case("ConcatV2/neg_axis", "ConcatV2", ([a, b], np.int32(-1)), grad=True, seed=37),
        Case("ConcatV2/int64_axis", "ConcatV2", ([a, b], np.int64(0))),
        Case("ConcatV2/empty_part", "ConcatV2", ([a, np.zeros((0, 3), np.float32), b], np.int32(0)), grad=True, seed=38),
        Case("ConcatV2/all_empty", "ConcatV2", ([np.zeros((0, 3), np.float32)] * 2, np.int32(0))),
        Case("ConcatV2/noncontiguous", "ConcatV2", ([noncontiguous(a), b], np.int32(1))),
        Case("ConcatV2/special", "ConcatV2", ([_SPECIAL, _SPECIAL[::-1].copy()], np.int32(0))),
        Case("ConcatV2/axis_out_of_range", "ConcatV2", ([a, b], np.int32(2))),
        Case("ConcatV2/axis_out_of_range_neg", "ConcatV2", ([a, b], np.int32(-3))),
        Case("ConcatV2/shape_mismatch", "ConcatV2", ([a, _rand((3, 2), "float32", 1)], np.int32(0))),
        Case("ConcatV2/rank_mismatch", "ConcatV2", ([a, _rand((6,), "float32", 1)], np.int32(0))),
        Case("ConcatV2/dtype_mismatch", "ConcatV2", ([a, b.astype(np.float64)], np.int32(0))),
        Case("ConcatV2/scalars", "ConcatV2", ([np.float32(1.0), np.float32(2.0)], np.int32(0))),
    ]
    out += [
        Case("ConcatOffset/basic", "ConcatOffset", (np.int32(1), [_i32(2, 3, 5), _i32(2, 7, 5), _i32(2, 1, 5)])),
        Case("ConcatOffset/int64", "ConcatOffset", (np.int32(0), [_i64(2, 3), _i64(4, 3)])),
        Case("ConcatOffset/neg_dim", "ConcatOffset", (np.int32(-1), [_i32(2, 3), _i32(2, 4)])),
        Case("ConcatOffset/zero_sizes", "ConcatOffset", (np.int32(0), [_i32(0, 3), _i32(2, 3), _i32(0, 3)])),
        Case("ConcatOffset/mismatch", "ConcatOffset", (np.int32(0), [_i32(2, 3), _i32(2, 4)])),
        Case("ConcatOffset/rank_mismatch", "ConcatOffset", (np.int32(0), [_i32(2, 3), _i32(2, 3, 1)])),
        Case("ConcatOffset/dim_out_of_range", "ConcatOffset", (np.int32(2), [_i32(2, 3), _i32(2, 3)])),
    ]
    out += [
        Case(f"Pack/{dt}", "Pack", ([_rand((2, 3), dt, 40), _rand((2, 3), dt, 41)],), grad=dt in _FLOATS, seed=40)
        for dt in _ANY
    ]
    out += [
        Case("Pack/axis1", "Pack", ([a, b, c],), {"axis": 1}, grad=True, seed=42),
        Case("Pack/axis_last", "Pack", ([a, b],), {"axis": -1}, grad=True, seed=43),
        Case("Pack/axis_neg_first", "Pack", ([a, b],), {"axis": -3}),
        Case("Pack/one", "Pack", ([a],), grad=True, seed=44),
        Case("Pack/scalars", "Pack", ([np.int32(1), np.int32(2), np.int32(3)],)),
        Case("Pack/empty", "Pack", ([np.zeros((0, 2), np.float32)] * 3,), {"axis": 1}),
        Case("Pack/noncontiguous", "Pack", ([noncontiguous(a), b],)),
        Case("Pack/axis_out_of_range", "Pack", ([a, b],), {"axis": 3}),
        Case("Pack/axis_out_of_range_neg", "Pack", ([a, b],), {"axis": -4}),
        Case("Pack/dtype_mismatch", "Pack", ([a, b.astype(np.int32)],)),
        Case("Pack/shape_mismatch", "Pack", ([a, _rand((3, 2), "float32", 1)],)),
    ]
    x = _rand((3, 2, 4), "float32", 45)
    out += [
        Case(f"Unpack/{dt}", "Unpack", (_rand((3, 2), dt, 46),), {"num": 3}, grad=dt in _FLOATS, seed=46) for dt in _ANY
    ]
    out += [
        Case("Unpack/axis1", "Unpack", (x,), {"num": 2, "axis": 1}, grad=True, seed=47),
        Case("Unpack/axis_neg", "Unpack", (x,), {"num": 4, "axis": -1}, grad=True, seed=48),
        Case("Unpack/zero", "Unpack", (np.zeros((0, 3), np.float32),), {"num": 0}),
        Case("Unpack/empty_rest", "Unpack", (np.zeros((2, 0), np.float32),), {"num": 2}),
        Case("Unpack/zero_axis1", "Unpack", (np.zeros((3, 0), np.float32),), {"num": 0, "axis": 1}),
        Case("Unpack/vector", "Unpack", (_i32(4, 5, 6),), {"num": 3}),
        Case("Unpack/noncontiguous", "Unpack", (noncontiguous(x),), {"num": 2, "axis": 1}),
        Case("Unpack/wrong_num", "Unpack", (x,), {"num": 2}),
        Case("Unpack/axis_out_of_range", "Unpack", (x,), {"num": 3, "axis": 3}),
        Case("Unpack/scalar", "Unpack", (np.float32(1.0),), {"num": 1}),
    ]
    return out


def _split_slice() -> list[Case]:
    x = _rand((4, 6), "float32", 50)
    out = [
        Case(f"Split/{dt}", "Split", (np.int32(1), _rand((2, 6), dt, 51)), {"num_split": 3}, grad=dt in _FLOATS, seed=51)
        for dt in _ANY
    ]
    out += [
        Case("Split/axis0", "Split", (np.int32(0), x), {"num_split": 2}, grad=True, seed=52),
        Case("Split/neg_axis", "Split", (np.int32(-1), x), {"num_split": 6}, grad=True, seed=53),
        Case("Split/one", "Split", (np.int32(0), x), {"num_split": 1}, grad=True, seed=54),
        Case("Split/empty_axis", "Split", (np.int32(0), np.zeros((0, 4), np.float32)), {"num_split": 2}),
        Case("Split/empty", "Split", (np.int32(1), np.zeros((0, 4), np.float32)), {"num_split": 2}),
        Case("Split/noncontiguous", "Split", (np.int32(1), noncontiguous(x)), {"num_split": 2}),
        Case("Split/not_divisible", "Split", (np.int32(1), x), {"num_split": 4}),
        Case("Split/axis_out_of_range", "Split", (np.int32(2), x), {"num_split": 2}),
        Case("Split/scalar", "Split", (np.int32(0), np.float32(1.0)), {"num_split": 1}),
    ]
    out += [
        Case(f"Slice/{dt}", "Slice", (_rand((4, 5), dt, 55), _i32(1, 2), _i32(2, 3)), grad=dt in _FLOATS, seed=55)
        for dt in _ANY
    ]
    out += [
        Case("Slice/int64_index", "Slice", (x, _i64(0, 1), _i64(4, 2)), grad=True, seed=56),
        Case("Slice/minus_one", "Slice", (x, _i32(1, 2), _i32(-1, -1)), grad=True, seed=57),
        Case("Slice/empty_result", "Slice", (x, _i32(1, 2), _i32(0, 2)), grad=True, seed=58),
        Case("Slice/full_empty_begin_end", "Slice", (x, _i32(4, 6), _i32(0, 0))),
        Case("Slice/scalar", "Slice", (np.float32(1.0), _i32(), _i32())),
        Case("Slice/noncontiguous", "Slice", (noncontiguous(x), _i32(1, 1), _i32(2, 2))),
        Case("Slice/out_of_range", "Slice", (x, _i32(3, 0), _i32(2, 1))),
        Case("Slice/negative_begin", "Slice", (x, _i32(-1, 0), _i32(1, 1))),
        Case("Slice/size_below_minus_one", "Slice", (x, _i32(0, 0), _i32(-2, 1))),
        Case("Slice/int64_begin_wraps_32", "Slice", (x, _i64(2**32 + 1, 0), _i64(1, 1))),
        Case("Slice/int64_size_wraps_32", "Slice", (x, _i64(0, 0), _i64(2**32 + 1, 1))),
        Case("Slice/wrong_length", "Slice", (x, _i32(0), _i32(1))),
    ]
    return out


def _strided_slice() -> list[Case]:
    x = _rand((4, 5, 6), "float32", 60)
    ss = "StridedSlice"
    out = [
        Case(f"{ss}/{dt}", ss, (_rand((4, 5), dt, 61), _i32(1, 0), _i32(3, 5), _i32(1, 2)), grad=dt in _FLOATS, seed=61)
        for dt in _ANY
    ]
    out += [
        Case(f"{ss}/negative_stride", ss, (x, _i32(3, 4), _i32(0, 0), _i32(-1, -2)), grad=True, seed=62),
        Case(f"{ss}/negative_indices", ss, (x, _i32(-3, -1), _i32(-1, -6), _i32(1, -1)), grad=True, seed=63),
        Case(f"{ss}/clamped", ss, (x, _i32(-100, 2), _i32(100, 200), _i32(1, 1))),
        Case(f"{ss}/begin_end_mask", ss, (x, _i32(2, 3), _i32(3, 4), _i32(1, 1)), {"begin_mask": 1, "end_mask": 2},
             grad=True, seed=64),
        Case(f"{ss}/ellipsis", ss, (x, _i32(0, 1), _i32(0, 3), _i32(1, 1)), {"ellipsis_mask": 1}, grad=True, seed=65),
        Case(f"{ss}/new_axis", ss, (x, _i32(0, 1), _i32(0, 3), _i32(1, 1)), {"new_axis_mask": 1}, grad=True, seed=66),
        Case(f"{ss}/shrink", ss, (x, _i32(1, 2), _i32(2, 3), _i32(1, 1)), {"shrink_axis_mask": 3}, grad=True, seed=67),
        Case(f"{ss}/shrink_negative", ss, (x, _i32(-1), _i32(0), _i32(1)), {"shrink_axis_mask": 1}),
        Case(f"{ss}/all_masks", ss, (x, _i32(0, 1, 0, 2), _i32(0, 3, 0, 3), _i32(1, 1, 1, 1)),
             {"ellipsis_mask": 1, "new_axis_mask": 4, "shrink_axis_mask": 8}, grad=True, seed=68),
        Case(f"{ss}/int64_index", ss, (x, _i64(1), _i64(3), _i64(1))),
        Case(f"{ss}/int16_index", ss, (x, np.array([3, 1], np.int16), np.array([0, 5], np.int16), np.array([-1, 2], np.int16)),
             why="no gradient: TensorFlow's own StridedSlice gradient fails for int16 indices (Shape has no int16 out_type)"),
        Case(f"{ss}/empty_result", ss, (x, _i32(3), _i32(1), _i32(1)), grad=True, seed=69),
        Case(f"{ss}/scalar_input", ss, (np.float32(2.0), _i32(0), _i32(0), _i32(1)), {"new_axis_mask": 1}),
        Case(f"{ss}/noncontiguous", ss, (noncontiguous(x), _i32(0, 1), _i32(4, 5), _i32(2, 2))),
        Case(f"{ss}/empty_input", ss, (np.zeros((0, 3), np.float32), _i32(0, 1), _i32(0, 3), _i32(1, 1))),
        Case(f"{ss}/begin_after_end", ss, (x, _i32(3), _i32(1), _i32(1)), {"end_mask": 0}),
        Case(f"{ss}/negative_stride_end_mask", ss, (x, _i32(2, -2), _i32(0, 0), _i32(-1, -2)), {"end_mask": 3},
             grad=True, seed=76),
        Case(f"{ss}/shrink_with_negative_stride", ss, (x, _i32(2, 4), _i32(1, 0), _i32(-1, -1)),
             {"shrink_axis_mask": 1}),
        Case(f"{ss}/ellipsis_middle", ss, (x, _i32(1, 0, 2), _i32(2, 0, 5), _i32(1, 1, 2)), {"ellipsis_mask": 2},
             grad=True, seed=77),
        Case(f"{ss}/new_axis_after_ellipsis", ss, (x, _i32(0, 0), _i32(0, 0), _i32(1, 1)),
             {"ellipsis_mask": 1, "new_axis_mask": 2}),
        Case(f"{ss}/stride_larger_than_dim", ss, (x, _i32(0, 4), _i32(4, 0), _i32(10, -10)), grad=True, seed=78),
        Case(f"{ss}/masks_beyond_spec", ss, (x, _i32(1), _i32(2), _i32(1)), {"begin_mask": 6, "end_mask": 4}),
        Case(f"{ss}/int64_huge_bounds", ss, (x, _i64(-2**40, 2**40), _i64(2**40, -2**40), _i64(2**33, -1))),
        Case(f"{ss}/zero_stride", ss, (x, _i32(0), _i32(2), _i32(0))),
        Case(f"{ss}/shrink_out_of_range", ss, (x, _i32(4), _i32(5), _i32(1)), {"shrink_axis_mask": 1}),
        Case(f"{ss}/two_ellipses", ss, (x, _i32(0, 0), _i32(0, 0), _i32(1, 1)), {"ellipsis_mask": 3}),
        Case(f"{ss}/length_mismatch", ss, (x, _i32(0, 0), _i32(1), _i32(1, 1))),
        Case(f"{ss}/too_many_dims", ss, (x, _i32(0, 0, 0, 0), _i32(1, 1, 1, 1), _i32(1, 1, 1, 1))),
    ]
    ssg = "StridedSliceGrad"
    out += [
        Case(f"{ssg}/basic", ssg, (_i32(4, 5), _i32(1, 0), _i32(3, 5), _i32(1, 2), _rand((2, 3), "float32", 70)),
             grad=True, seed=79),
        Case(f"{ssg}/negative_stride", ssg, (_i32(6), _i32(5), _i32(0), _i32(-2), _rand((3,), "float64", 71)),
             grad=True, seed=79),
        Case(f"{ssg}/shrink", ssg, (_i32(3, 4), _i32(1, 0), _i32(2, 4), _i32(1, 1), _rand((4,), "int32", 72)),
             {"shrink_axis_mask": 1}),
        Case(f"{ssg}/new_axis", ssg, (_i32(3), _i32(0, 0), _i32(0, 3), _i32(1, 1), _rand((1, 3), "float32", 73)),
             {"new_axis_mask": 1}),
        Case(f"{ssg}/int64_index", ssg, (_i64(4), _i64(0), _i64(4), _i64(3), _rand((2,), "float32", 74))),
        Case(f"{ssg}/empty", ssg, (_i32(3, 0), _i32(0, 0), _i32(3, 0), _i32(1, 1), np.zeros((3, 0), np.float32))),
        Case(f"{ssg}/dy_shape_mismatch", ssg, (_i32(4), _i32(0), _i32(4), _i32(1), _rand((3,), "float32", 75))),
    ]
    return out


def _gather() -> list[Case]:
    p = _rand((5, 4), "float32", 80)
    out = [
        Case(f"GatherV2/{dt}", "GatherV2", (_rand((5, 3), dt, 81), _i32(4, 0, 2, 2), np.int32(0)), grad=dt in _FLOATS,
             seed=81)
        for dt in _ANY
    ]
    out += [
        Case("GatherV2/int16_indices", "GatherV2", (p, np.array([4, 0, 4], np.int16), np.int32(0)), grad=True, seed=80),
        Case("GatherV2/axis1", "GatherV2", (p, _i64(3, 0, 3), np.int32(1)), grad=True, seed=82),
        Case("GatherV2/neg_axis", "GatherV2", (p, _i32(1), np.int64(-1)), grad=True, seed=83),
        Case("GatherV2/indices_matrix", "GatherV2", (p, _i32(0, 1, 4, 4, 2, 0).reshape(2, 3), np.int32(0)), grad=True,
             seed=84),
        Case("GatherV2/scalar_index", "GatherV2", (p, np.int32(2), np.int32(0)), grad=True, seed=85),
        Case("GatherV2/empty_indices", "GatherV2", (p, _i32(), np.int32(0)), grad=True, seed=86),
        Case("GatherV2/batch_dims", "GatherV2",
             (_rand((2, 3, 4), "float32", 87), _i32(0, 2, 1, 1).reshape(2, 2), np.int32(1)), {"batch_dims": 1},
             grad=True, seed=87),
        Case("GatherV2/batch_dims_axis2", "GatherV2",
             (_rand((2, 3, 4), "float32", 88), _i32(3, 0, 1, 1).reshape(2, 2), np.int32(2)), {"batch_dims": 1},
             grad=True, seed=88),
        Case("GatherV2/batch_dims_negative", "GatherV2",
             (_rand((2, 3), "float32", 89), _i32(0, 2, 1, 1).reshape(2, 2), np.int32(1)), {"batch_dims": -1}),
        Case("GatherV2/batch_dims_all", "GatherV2",
             (_rand((2, 3), "float32", 90), _i32(2, 0), np.int32(1)), {"batch_dims": 1}, grad=True, seed=90),
        Case("GatherV2/two_batch_dims", "GatherV2",
             (_rand((2, 2, 3, 2), "float64", 91), _i32(0, 1, 1, 1, 0, 1, 0, 0).reshape(2, 2, 2), np.int32(3)),
             {"batch_dims": 2}, why="axis 3 is past the gathered axis in the batch"),
        Case("GatherV2/axis_middle_matrix_indices", "GatherV2",
             (_rand((2, 5, 3), "float32", 92), _i32(4, 0, 1, 1).reshape(2, 2), np.int32(1)), grad=True, seed=92),
        Case("GatherV2/noncontiguous", "GatherV2", (noncontiguous(p), _i32(1, 3), np.int32(1))),
        Case("GatherV2/special", "GatherV2", (_SPECIAL, _i32(0, 3, 6, 3), np.int32(0))),
        Case("GatherV2/index_out_of_range", "GatherV2", (p, _i32(0, 5), np.int32(0))),
        # Nothing gathered (an empty slice or outer part): TensorFlow reads no index, so none is checked.
        Case("GatherV2/empty_slices_skip_index_check", "GatherV2",
             (np.zeros((2, 3, 0), np.float32), _i32(7, 9).reshape(2, 1), np.int32(1)), {"batch_dims": 1}),
        Case("GatherV2/empty_outer_skips_index_check", "GatherV2",
             (np.zeros((0, 3, 2), np.float32), _i32(9), np.int32(1))),
        Case("GatherV2/empty_axis_checks_index", "GatherV2",
             (np.zeros((2, 0), np.float32), _i32(0, 0).reshape(2, 1), np.int32(1)), {"batch_dims": 1}),
        Case("GatherV2/int64_index_wraps_32", "GatherV2", (p, _i64(2**32 + 1), np.int32(0)),
             why="2**32 + 1 must be out of range, not row 1"),
        Case("GatherV2/index_negative", "GatherV2", (p, _i32(-1), np.int32(0))),
        Case("GatherV2/axis_out_of_range", "GatherV2", (p, _i32(0), np.int32(2))),
        Case("GatherV2/scalar_params", "GatherV2", (np.float32(1.0), _i32(0), np.int32(0))),
        Case("GatherV2/batch_dims_too_big", "GatherV2", (p, _i32(0, 1), np.int32(1)), {"batch_dims": 2}),
        Case("GatherV2/axis_below_batch_dims", "GatherV2",
             (_rand((2, 3, 4), "float32", 87), _i32(0, 2, 1, 1).reshape(2, 2), np.int32(0)), {"batch_dims": 1}),
    ]
    return out


def _segment_sum() -> list[Case]:
    uss = "UnsortedSegmentSum"
    d = _rand((6, 3), "float32", 90)
    ids = _i32(0, 2, 0, 1, 2, 2)
    dts = ("float32", "float64", "float16", "int32", "int64", "int8", "uint8", "int16", "uint16", "uint32", "uint64",
           "complex64") + _BF16
    out = [Case(f"{uss}/{dt}", uss, (_rand((6, 3), dt, 91), ids, np.int32(4)), grad=dt in _FLOATS, seed=91)
           for dt in dts]
    out += [
        Case(f"{uss}/int16_ids", uss, (d, ids.astype(np.int16), np.int32(3)), grad=True, seed=97),
        Case(f"{uss}/int64_ids", uss, (d, ids.astype(np.int64), np.int64(3)), grad=True, seed=92),
        Case(f"{uss}/negative_ids_dropped", uss, (d, _i32(0, -1, 1, -5, 1, 0), np.int32(2)), grad=True, seed=93),
        Case(f"{uss}/ids_matrix", uss, (d.reshape(2, 3, 3), ids.reshape(2, 3), np.int32(3)), grad=True, seed=94),
        Case(f"{uss}/ids_full_shape", uss, (d, np.tile(ids[:, None], (1, 3)), np.int32(3)), grad=True, seed=95),
        Case(f"{uss}/zero_segments", uss, (np.zeros((0, 3), np.float32), _i32(), np.int32(0))),
        Case(f"{uss}/empty_data", uss, (np.zeros((0, 3), np.float32), _i32(), np.int32(2))),
        Case(f"{uss}/int_wraps", uss, (np.array([2**31 - 1, 1, 5], np.int32), _i32(0, 0, 1), np.int32(2))),
        Case(f"{uss}/uint8_wraps", uss, (np.array([200, 100, 5], np.uint8), _i32(0, 0, 0), np.int32(1))),
        Case(f"{uss}/special", uss, (_SPECIAL, _i32(0, 0, 1, 1, 2, 3, 3), np.int32(4))),
        Case(f"{uss}/noncontiguous", uss, (noncontiguous(d), ids, np.int32(3))),
        Case(f"{uss}/large", uss, (_rand((40000, 8), "float32", 96), rng(96).integers(0, 50, 40000).astype(np.int32),
                                   np.int32(50)), tol=(1e-4, 1e-4), why="large enough for a threaded sum; order differs"),
        Case(f"{uss}/id_out_of_range", uss, (d, _i32(0, 3, 0, 1, 2, 2), np.int32(3))),
        Case(f"{uss}/int64_id_wraps_32", uss, (d, _i64(0, 2**32 + 1, 0, 1, 2, 2), np.int64(3)),
             why="2**32 + 1 must be out of range, not segment 1"),
        Case(f"{uss}/int64_id_negative_wraps", uss, (d, _i64(0, -2**32 + 1, 0, 1, 2, 2), np.int64(3)),
             why="-2**32 + 1 is negative (dropped), not segment 1"),
        Case(f"{uss}/ids_shape_mismatch", uss, (d, _i32(0, 1), np.int32(3))),
        Case(f"{uss}/negative_num_segments", uss, (d, ids, np.int32(-1))),
    ]
    return out


def _one_hot() -> list[Case]:
    idx = _i32(0, 2, -1, 1, 5)
    out = [
        Case(f"OneHot/{dt}", "OneHot", (idx, np.int32(3), _rand((), dt, 100), _rand((), dt, 101))) for dt in _ANY
    ]
    out += [
        Case("OneHot/int64_indices", "OneHot", (idx.astype(np.int64), np.int32(4), np.float32(1), np.float32(0))),
        Case("OneHot/int8_indices", "OneHot", (np.array([0, 3, -1, 127], np.int8), np.int32(4), np.float32(1),
                                              np.float32(0))),
        Case("OneHot/uint8_indices", "OneHot", (np.array([0, 3, 255], np.uint8), np.int32(4), np.float32(1),
                                                np.float32(0))),
        Case("OneHot/axis0", "OneHot", (idx.reshape(5, 1), np.int32(3), np.float32(5), np.float32(-1)), {"axis": 0}),
        Case("OneHot/axis1_matrix", "OneHot", (_i32(0, 1, 2, 0).reshape(2, 2), np.int32(3), np.float64(1),
                                               np.float64(0)), {"axis": 1}),
        Case("OneHot/scalar_index", "OneHot", (np.int32(1), np.int32(3), np.float32(1), np.float32(0))),
        Case("OneHot/depth1", "OneHot", (idx, np.int32(1), np.float32(1), np.float32(0))),
        Case("OneHot/axis0_matrix", "OneHot", (_i32(0, 1, 2, 0).reshape(2, 2), np.int32(3), np.int32(1), np.int32(0)),
             {"axis": 0}),
        Case("OneHot/int64_huge_indices", "OneHot", (_i64(2**40, 1, -2**40, 2**32 + 1), np.int32(3), np.float32(1),
                                                     np.float32(0)), why="no wrap to 32 bits: 2**32 + 1 is not 1"),
        Case("OneHot/depth0", "OneHot", (idx, np.int32(0), np.float32(1), np.float32(0))),
        Case("OneHot/empty", "OneHot", (_i32(), np.int32(3), np.float32(1), np.float32(0))),
        Case("OneHot/nan_values", "OneHot", (idx, np.int32(2), np.float32(np.nan), np.float32(-0.0))),
        Case("OneHot/negative_depth", "OneHot", (idx, np.int32(-1), np.float32(1), np.float32(0))),
        Case("OneHot/axis_out_of_range", "OneHot", (idx, np.int32(3), np.float32(1), np.float32(0)), {"axis": 2}),
        Case("OneHot/on_not_scalar", "OneHot", (idx, np.int32(3), np.array([1.0], np.float32), np.float32(0))),
    ]
    return out


def _range() -> list[Case]:
    out = [
        Case("Range/int32", "Range", (np.int32(0), np.int32(10), np.int32(3))),
        Case("Range/int64", "Range", (np.int64(-5), np.int64(5), np.int64(2))),
        Case("Range/float32", "Range", (np.float32(0.5), np.float32(2.0), np.float32(0.25))),
        Case("Range/float64", "Range", (np.float64(1.0), np.float64(0.0), np.float64(-0.1))),
        Case("Range/negative_delta", "Range", (np.int32(10), np.int32(0), np.int32(-3))),
        Case("Range/empty", "Range", (np.int32(3), np.int32(3), np.int32(1))),
        Case("Range/int8", "Range", (np.int8(-3), np.int8(4), np.int8(2))),
        Case("Range/int16", "Range", (np.int16(0), np.int16(300), np.int16(100))),
        Case("Range/uint16", "Range", (np.uint16(1), np.uint16(9), np.uint16(4))),
        Case("Range/uint32", "Range", (np.uint32(1), np.uint32(9), np.uint32(4))),
        Case("Range/float16", "Range", (np.float16(0), np.float16(1), np.float16(0.25))),
        Case("Range/float_inexact", "Range", (np.float32(0), np.float32(1), np.float32(0.1))),
        Case("Range/int32_near_max", "Range", (np.int32(2**31 - 5), np.int32(2**31 - 1), np.int32(2))),
        Case("Range/float32_long", "Range", (np.float32(-3.0), np.float32(97.0), np.float32(0.1)),
             why="1000 values: TensorFlow's accumulation or multiplication order shows in the last bits"),
        Case("Range/float64_long", "Range", (np.float64(0.0), np.float64(1.0), np.float64(0.001))),
        Case("Range/neg_zero_start", "Range", (np.float32(-0.0), np.float32(1.0), np.float32(0.5))),
        Case("Range/int64_large", "Range", (np.int64(-2**62), np.int64(2**62), np.int64(2**61))),
        Case("Range/int32_negative_long", "Range", (np.int32(5), np.int32(-1000), np.int32(-7))),
        Case("Range/zero_delta", "Range", (np.int32(0), np.int32(5), np.int32(0))),
        Case("Range/wrong_direction", "Range", (np.int32(0), np.int32(5), np.int32(-1))),
        Case("Range/not_scalar", "Range", (_i32(0, 1), np.int32(5), np.int32(1))),
        Case("Range/nan", "Range", (np.float32(0), np.float32(np.nan), np.float32(1))),
        Case("Range/inf", "Range", (np.float32(0), np.float32(np.inf), np.float32(1))),
    ]
    return out


def _where() -> list[Case]:
    out = [Case(f"Where/{dt}", "Where", (_rand((3, 4), dt, 110),)) for dt in _ANY]
    out += [
        Case("Where/large", "Where", (rng(113).random((64, 64)) < 0.3,), why="more than one work-group on OpenCL"),
        Case("Where/uint64_max", "Where", (np.array([0, 2**64 - 1, 0, 1], np.uint64),)),
        Case("Where/vector", "Where", (np.array([0, 1, 0, 2], np.int32),)),
        Case("Where/scalar_true", "Where", (np.bool_(True),)),
        Case("Where/scalar_false", "Where", (np.bool_(False),)),
        Case("Where/empty", "Where", (np.zeros((0, 3), np.bool_),)),
        Case("Where/none_true", "Where", (np.zeros((2, 3), np.bool_),)),
        Case("Where/special", "Where", (_SPECIAL,), why="NaN is non-zero, -0.0 is zero"),
        Case("Where/rank4", "Where", (_rand((2, 1, 3, 2), "bool", 111),)),
        Case("Where/noncontiguous", "Where", (noncontiguous(_rand((3, 4), "int32", 112)),)),
        Case("Where/complex_zero_real", "Where", (np.array([0j, 1j, 1 + 0j, 0j], np.complex64),)),
    ]
    return out


def _string_to_number() -> list[Case]:
    stn = "StringToNumber"
    return [
        Case(f"{stn}/float", stn, (np.array([b"1.5", b"-2", b"3e2", b"  7 ", b"-0"], object),)),
        Case(f"{stn}/special", stn, (np.array([b"nan", b"inf", b"-inf", b"1e40", b"1e-50"], object),)),
        Case(f"{stn}/int32", stn, (np.array([[b"12", b"-7"], [b"0", b"2147483647"]], object),), {"out_type": "int32"}),
        Case(f"{stn}/float64", stn, (np.array([b"0.1", b"-1e300"], object),), {"out_type": "float64"}),
        Case(f"{stn}/int64", stn, (np.array([b"9223372036854775807", b"-3"], object),), {"out_type": "int64"}),
        Case(f"{stn}/empty", stn, (np.array([], object),)),
        Case(f"{stn}/scalar", stn, (np.array(b"4.25", object),)),
        Case(f"{stn}/int32_overflow", stn, (np.array([b"2147483648"], object),), {"out_type": "int32"}),
        Case(f"{stn}/int32_fraction", stn, (np.array([b"1.5"], object),), {"out_type": "int32"}),
        Case(f"{stn}/garbage", stn, (np.array([b"abc"], object),)),
        Case(f"{stn}/empty_string", stn, (np.array([b""], object),)),
        Case(f"{stn}/uint32", stn, (np.array([b"4294967295", b"0", b" 12"], object),), {"out_type": "uint32"}),
        Case(f"{stn}/uint64", stn, (np.array([b"18446744073709551615", b"7"], object),), {"out_type": "uint64"}),
        Case(f"{stn}/uint32_negative", stn, (np.array([b"-1"], object),), {"out_type": "uint32"}),
        Case(f"{stn}/uint32_minus_zero", stn, (np.array([b"-0"], object),), {"out_type": "uint32"}),
        Case(f"{stn}/uint64_minus_zero", stn, (np.array([b"-0"], object),), {"out_type": "uint64"}),
        Case(f"{stn}/nan_payload", stn, (np.array([b"nan(1)", b"NAN(abc)", b"-nan(a_b)", b"nan()"], object),)),
        Case(f"{stn}/nan_open_payload", stn, (np.array([b"nan("], object),)),
        Case(f"{stn}/int64_overflow", stn, (np.array([b"9223372036854775808"], object),), {"out_type": "int64"}),
        Case(f"{stn}/plus_sign", stn, (np.array([b"+5", b"+2.5"], object),)),
        Case(f"{stn}/int_plus_sign", stn, (np.array([b"+5"], object),), {"out_type": "int32"}),
        Case(f"{stn}/words", stn, (np.array([b"infinity", b"-Inf", b"NaN", b"-nan"], object),)),
        Case(f"{stn}/underscore", stn, (np.array([b"1_000"], object),)),
        Case(f"{stn}/int_underscore", stn, (np.array([b"1_000"], object),), {"out_type": "int64"}),
        Case(f"{stn}/hex", stn, (np.array([b"0x10"], object),), {"out_type": "int32"}),
        Case(f"{stn}/hex_float", stn, (np.array([b"0x1p3"], object),), {"out_type": "float64"}),
        Case(f"{stn}/hex_float32", stn, (np.array([b"0x10", b"-0X1.8p1"], object),)),
        Case(f"{stn}/hex_digits_only", stn, (np.array([b"abc"], object),), {"out_type": "float64"}),
        Case(f"{stn}/leading_dot", stn, (np.array([b".5", b"5.", b"1e5"], object),), {"out_type": "float64"}),
        Case(f"{stn}/int_leading_zeros", stn, (np.array([b"007", b"-0"], object),), {"out_type": "int32"}),
        Case(f"{stn}/int_exponent", stn, (np.array([b"1e3"], object),), {"out_type": "int32"}),
        Case(f"{stn}/inner_space", stn, (np.array([b"1 2"], object),)),
        Case(f"{stn}/float32_overflow", stn, (np.array([b"1e39", b"-1e39", b"1e-46"], object),)),
        Case(f"{stn}/tab_newline", stn, (np.array([b"\t3\n"], object),)),
    ]


def _reverse_band_scan_linspace() -> list[Case]:
    out: list[Case] = []
    for dt in _ANY:
        out.append(Case(f"ReverseV2/{dt}", "ReverseV2", (_rand((2, 3, 4), dt, 71), _i32(0, -1)), grad=dt in _FLOATS[:2], seed=71))
    out += [
        Case("ReverseV2/int64_axis", "ReverseV2", (_rand((3, 4), "float32", 72), _i64(1)), grad=True, seed=72),
        Case("ReverseV2/no_axes", "ReverseV2", (_rand((3, 4), "float32", 72), np.zeros(0, np.int32))),
        Case("ReverseV2/scalar", "ReverseV2", (np.float32(2.5), np.zeros(0, np.int32))),
        Case("ReverseV2/empty", "ReverseV2", (np.zeros((0, 3), np.float32), _i32(1))),
        Case("ReverseV2/noncontiguous", "ReverseV2", (noncontiguous(_rand((3, 4), "float64", 73)), _i32(-1, 0))),
        Case("ReverseV2/string", "ReverseV2", (np.array([[b"a", b"bc"], [b"", b"d"]], object), _i32(1))),
        Case("ReverseV2/axis_twice", "ReverseV2", (_rand((3, 4), "float32", 72), _i32(1, -1))),
        Case("ReverseV2/axis_out_of_range", "ReverseV2", (_rand((3, 4), "float32", 72), _i32(2))),
    ]
    for dt in _ANY:
        out.append(Case(f"MatrixBandPart/{dt}", "MatrixBandPart", (_rand((2, 4, 5), dt, 74), np.int64(1), np.int64(2)),
                        grad=dt in _FLOATS[:2], seed=74))
    out += [
        Case("MatrixBandPart/lower_triangle", "MatrixBandPart", (_rand((5, 4), "float32", 75), np.int32(-1), np.int32(0)), grad=True),
        Case("MatrixBandPart/upper_triangle", "MatrixBandPart", (_rand((3, 5), "float64", 76), np.int64(0), np.int64(-1))),
        Case("MatrixBandPart/diagonal", "MatrixBandPart", (_rand((2, 2, 3, 3), "int32", 77), np.int64(0), np.int64(0))),
        Case("MatrixBandPart/everything", "MatrixBandPart", (_rand((3, 3), "float32", 78), np.int64(-1), np.int64(-1))),
        Case("MatrixBandPart/empty", "MatrixBandPart", (np.zeros((0, 2, 3), np.float32), np.int64(1), np.int64(1))),
        Case("MatrixBandPart/vector_bounds", "MatrixBandPart", (np.ones((2, 3), np.float32), _i64(1), _i64(1))),
        Case("MatrixBandPart/vector", "MatrixBandPart", (np.ones(3, np.float32), np.int64(1), np.int64(1))),
        Case("MatrixBandPart/lower_too_big", "MatrixBandPart", (np.ones((2, 3), np.float32), np.int64(3), np.int64(1))),
    ]
    for op in ("Cumsum", "Cumprod"):
        for dt in ("float32", "float64", "int32", "int64", "int8", "uint8", "complex64", "float16"):
            x = _rand((3, 5), dt, 79)
            if op == "Cumprod" and np.dtype(dt).kind == "f":
                x = (np.abs(x) + 0.5).astype(dt)  # away from 0, where the gradient divides
            out.append(Case(f"{op}/{dt}", op, (x, np.int32(1)), grad=dt in ("float32", "float64"), seed=79,
                            tol=(5e-3, 5e-3) if dt == "float16" else None, why="float16 sums" if dt == "float16" else ""))
        base = (np.abs(_rand((3, 4, 2), "float64", 80)) + 0.5)
        for exclusive in (False, True):
            for reverse in (False, True):
                out.append(Case(f"{op}/axis0_exclusive{int(exclusive)}_reverse{int(reverse)}", op,
                                (base, np.int64(0)), {"exclusive": exclusive, "reverse": reverse}, grad=True, seed=81))
        out += [
            Case(f"{op}/negative_axis", op, (base, np.int32(-2)), {"reverse": True}, grad=True, seed=82),
            Case(f"{op}/empty", op, (np.zeros((0, 3), np.float32), np.int32(1))),
            Case(f"{op}/special", op, (_SPECIAL, np.int32(0))),
            Case(f"{op}/scalar", op, (np.float32(1.0), np.int32(0))),
            Case(f"{op}/axis_out_of_range", op, (base, np.int32(3))),
        ]
    out.append(Case("Cumsum/float32_long", "Cumsum", (_rand((4, 5000), "float32", 83), np.int32(1)),
                    tol=(1e-4, 1e-4), why="sequential float32 sums over 5000 elements: TensorFlow's Eigen scan adds in "
                                          "blocks, so the last bits differ"))
    for dt in ("float32", "float64"):
        t = np.dtype(dt).type
        out.append(Case(f"LinSpace/{dt}", "LinSpace", (t(-1.5), t(2.25), np.int32(7))))
    out += [
        Case("LinSpace/one", "LinSpace", (np.float32(3.0), np.float32(9.0), np.int64(1))),
        Case("LinSpace/descending", "LinSpace", (np.float64(5.0), np.float64(-5.0), np.int32(11))),
        Case("LinSpace/fine", "LinSpace", (np.float32(0.0), np.float32(1.0), np.int32(1000))),
        Case("LinSpace/zero", "LinSpace", (np.float32(0.0), np.float32(1.0), np.int32(0))),
        Case("LinSpace/vector_start", "LinSpace", (np.zeros(2, np.float32), np.float32(1.0), np.int32(3))),
        Case("LinSpace/float16", "LinSpace", (np.float16(0.0), np.float16(1.0), np.int32(3)), why="no CPU kernel"),
    ]
    return out


def _top_k_nd() -> list[Case]:
    out: list[Case] = []
    for dt in ("float32", "float64", "int32", "int64", "int8", "uint8", "float16"):
        x = _rand((3, 7), dt, 91)
        out.append(Case(f"TopKV2/{dt}", "TopKV2", (x, np.int32(3)), grad=dt in ("float32", "float64"), seed=91))
    out += [
        # One NaN: with several, TensorFlow's comparisons are no order (it keeps the first NaN first, the
        # others anywhere); opkernel puts every NaN first, by index.
        Case("TopKV2/ties_and_nan", "TopKV2", (np.array([[1.0, np.nan, 3.0, 3.0, -np.inf, 2.0, 0.5]], np.float32),
                                                np.int32(5))),
        Case("TopKV2/int_ties", "TopKV2", (np.array([[5, 1, 5, 2, 5]], np.int32), np.int64(3)), {"index_type": "int64"}),
        Case("TopKV2/vector_all", "TopKV2", (_rand((6,), "float64", 92), np.int32(6)), grad=True, seed=92),
        Case("TopKV2/rank3", "TopKV2", (_rand((2, 3, 5), "float32", 93), np.int16(2)), grad=True, seed=93),
        Case("TopKV2/int16_indices", "TopKV2", (_rand((2, 5), "float32", 93), np.int32(2)), {"index_type": "int16"},
             why="TensorFlow cannot take this gradient (its _TopKGrad adds int32 to int16)"),
        Case("TopKV2/zero", "TopKV2", (_rand((2, 4), "float32", 94), np.int32(0))),
        Case("TopKV2/too_many", "TopKV2", (_rand((2, 4), "float32", 94), np.int32(5))),
        Case("TopKV2/negative_k", "TopKV2", (_rand((2, 4), "float32", 94), np.int32(-1))),
        Case("TopKV2/scalar", "TopKV2", (np.float32(1.0), np.int32(1))),
    ]
    p = _rand((3, 4, 5), "float32", 95)
    for dt in ("float32", "float64", "int32", "int64", "bool", "complex64", "float16", "uint8"):
        out.append(Case(f"GatherNd/{dt}", "GatherNd", (_rand((3, 4, 5), dt, 95), _i32(1, 2, 0, 3, 2, 1).reshape(3, 2)),
                        grad=dt in ("float32", "float64"), seed=95))
    out += [
        Case("GatherNd/full_index", "GatherNd", (p, _i64(2, 3, 4, 0, 0, 0).reshape(2, 3)), grad=True, seed=96),
        Case("GatherNd/batched_indices", "GatherNd", (p, np.array([[[0], [2]], [[1], [1]]], np.int32)), grad=True, seed=97),
        Case("GatherNd/int16_indices", "GatherNd", (p, np.array([[1, 1]], np.int16))),
        Case("GatherNd/out_of_range", "GatherNd", (p, _i32(3, 0).reshape(1, 2))),
        Case("GatherNd/negative_index", "GatherNd", (p, _i32(0, -1).reshape(1, 2))),
        Case("GatherNd/too_deep", "GatherNd", (p, _i32(0, 0, 0, 0).reshape(1, 4))),
        Case("GatherNd/empty_indices", "GatherNd", (p, np.zeros((0, 2), np.int32))),
        Case("GatherNd/string", "GatherNd", (np.array([[b"a", b"b"], [b"c", b""]], object), _i32(1, 0).reshape(1, 2))),
    ]
    for dt in ("float32", "float64", "int32", "int64", "complex64", "float16"):
        out.append(Case(f"ScatterNd/{dt}", "ScatterNd", (_i32(1, 3, 1, 0).reshape(4, 1), _rand((4, 3), dt, 98), _i32(5, 3)),
                        grad=dt in ("float32", "float64"), seed=98, tol=(1e-2, 1e-2) if dt == "float16" else None,
                        why="float16 sums" if dt == "float16" else ""))
    out += [
        Case("ScatterNd/elements", "ScatterNd", (_i64(0, 1, 2, 2, 0, 1).reshape(3, 2), np.array([1.0, 2.0, 4.0], np.float32),
                                                 _i64(3, 3)), grad=True, seed=99),
        Case("ScatterNd/out_of_range", "ScatterNd", (_i32(7).reshape(1, 1), np.ones(1, np.float32), _i32(5))),
        Case("ScatterNd/updates_shape", "ScatterNd", (_i32(1, 2).reshape(2, 1), np.ones(3, np.float32), _i32(5))),
        Case("ScatterNd/empty", "ScatterNd", (np.zeros((0, 1), np.int32), np.zeros((0,), np.float32), _i32(4))),
    ]
    for dt in ("float32", "int32", "bool", "float64"):
        out.append(Case(f"TensorScatterUpdate/{dt}", "TensorScatterUpdate",
                        (_rand((5, 3), dt, 100), _i32(4, 0).reshape(2, 1), _rand((2, 3), dt, 101)),
                        grad=dt in ("float32", "float64"), seed=100))
    out += [
        Case("TensorScatterUpdate/elements", "TensorScatterUpdate",
             (_rand((3, 3), "float64", 102), _i32(0, 1, 2, 2).reshape(2, 2), np.array([7.0, 8.0])), grad=True, seed=102),
        Case("TensorScatterUpdate/out_of_range", "TensorScatterUpdate",
             (_rand((3, 3), "float32", 102), _i32(3).reshape(1, 1), np.ones((1, 3), np.float32))),
    ]
    return out


def _mirror_pad() -> list[Case]:
    out: list[Case] = []
    for mode in ("REFLECT", "SYMMETRIC"):
        for dt in ("float32", "float64", "int32", "bool", "float16", "complex64"):
            pads = _i32(1, 2, 2, 1) if mode == "REFLECT" else _i32(3, 0, 2, 4)
            out.append(Case(f"MirrorPad/{mode}_{dt}", "MirrorPad", (_rand((3, 4), dt, 141), pads.reshape(2, 2)),
                            {"mode": mode}, grad=dt in ("float32", "float64"), seed=141))
        out += [
            Case(f"MirrorPad/{mode}_rank3_int64", "MirrorPad", (_rand((2, 3, 4), "float32", 142),
                                                                _i64(1, 1, 0, 2, 2, 1).reshape(3, 2)),
                 {"mode": mode}, grad=True, seed=142),
            Case(f"MirrorPad/{mode}_too_much", "MirrorPad", (_rand((3, 4), "float32", 141), _i32(0, 0, 5, 0).reshape(2, 2)),
                 {"mode": mode}),
            Case(f"MirrorPad/{mode}_negative", "MirrorPad", (_rand((3, 4), "float32", 141), _i32(0, -1, 0, 0).reshape(2, 2)),
                 {"mode": mode}),
            Case(f"MirrorPadGrad/{mode}", "MirrorPadGrad", (_rand((6, 7), "float32", 143), _i32(1, 2, 2, 1).reshape(2, 2)),
                 {"mode": mode}, tol=(1e-5, 1e-5), why="sums in another order"),
        ]
    out.append(Case("MirrorPad/REFLECT_edge", "MirrorPad", (_rand((3, 4), "float32", 141), _i32(2, 2, 3, 3).reshape(2, 2)),
                    {"mode": "REFLECT"}))
    out.append(Case("MirrorPad/SYMMETRIC_edge", "MirrorPad", (_rand((3, 4), "float32", 141), _i32(3, 3, 4, 4).reshape(2, 2)),
                    {"mode": "SYMMETRIC"}))
    out.append(Case("MirrorPad/scalar", "MirrorPad", (np.float32(1.5), np.zeros((0, 2), np.int32)), {"mode": "REFLECT"}))
    return out


def _split_v_broadcast_args() -> list[Case]:
    x = _rand((3, 7), "float32", 150)
    out = [
        Case(f"SplitV/{dt}", "SplitV", (_rand((3, 7), dt, 150 + i), _i64(2, -1, 0, 4), np.int32(1)), {"num_split": 4},
             grad=dt in ("float32", "float64"), seed=150 + i)
        for i, dt in enumerate(("float32", "float64", "int32", "int64", "uint8", "bool", "complex64", "float16") + _BF16)
    ]
    out += [
        Case("SplitV/int32_sizes_axis0", "SplitV", (x, _i32(1, 2), np.int32(0)), {"num_split": 2}, grad=True, seed=151),
        Case("SplitV/int8_sizes_negative_axis", "SplitV", (x, np.array([3, 4], np.int8), np.int32(-1)), {"num_split": 2}),
        Case("SplitV/one", "SplitV", (x, _i64(7), np.int32(1)), {"num_split": 1}, grad=True, seed=152),
        Case("SplitV/one_wrong_size", "SplitV", (x, _i64(6), np.int32(1)), {"num_split": 1}),
        Case("SplitV/one_minus_one", "SplitV", (x, _i64(-1), np.int32(1)), {"num_split": 1}),
        Case("SplitV/empty_pieces", "SplitV", (np.zeros((0, 4), np.float32), _i64(1, 3), np.int32(1)), {"num_split": 2}),
        Case("SplitV/two_minus_ones", "SplitV", (x, _i64(-1, -1, 2), np.int32(1)), {"num_split": 3}),
        Case("SplitV/negative_size", "SplitV", (x, _i64(-2, 5, 4), np.int32(1)), {"num_split": 3}),
        Case("SplitV/sum_too_small", "SplitV", (x, _i64(1, 1, 1), np.int32(1)), {"num_split": 3}),
        Case("SplitV/rest_negative", "SplitV", (x, _i64(5, -1, 4), np.int32(1)), {"num_split": 3}),
        Case("SplitV/count", "SplitV", (x, _i64(1, 6), np.int32(1)), {"num_split": 3}),
        Case("SplitV/axis_out_of_range", "SplitV", (x, _i64(1, 6), np.int32(2)), {"num_split": 2}),
        Case("SplitV/scalar_input", "SplitV", (np.float32(1), _i64(1), np.int32(0)), {"num_split": 1}),
        Case("SplitV/sizes_matrix", "SplitV", (x, _i64(1, 6).reshape(1, 2), np.int32(1)), {"num_split": 2}),
    ]
    for dt in ("int32", "int64"):
        out += [
            Case(f"BroadcastArgs/{dt}", "BroadcastArgs", (np.array([2, 1, 3], dt), np.array([4, 1], dt))),
            Case(f"BroadcastArgs/empty_{dt}", "BroadcastArgs", (np.zeros(0, dt), np.array([4, 0], dt))),
        ]
    out += [
        Case("BroadcastArgs/zero", "BroadcastArgs", (_i32(0, 1), _i32(1, 5))),
        Case("BroadcastArgs/minus_one_with_one", "BroadcastArgs", (_i32(-1), _i32(1))),
        Case("BroadcastArgs/minus_one_with_four", "BroadcastArgs", (_i32(-1), _i32(4))),
        Case("BroadcastArgs/incompatible", "BroadcastArgs", (_i32(2, 3), _i32(4))),
        Case("BroadcastArgs/scalar", "BroadcastArgs", (np.int32(3), _i32(4))),
        Case("BroadcastArgs/matrix", "BroadcastArgs", (_i32(1).reshape(1, 1), _i32(1))),
    ]
    return out


def _diag() -> list[Case]:
    out = [
        Case(f"Diag/{dt}", "Diag", (_rand((4,), dt, 160 + i),), grad=dt in ("float32", "float64"), seed=160 + i)
        for i, dt in enumerate(("float32", "float64", "int32", "int64", "complex64", "float16") + _BF16)
    ]
    return out + [
        Case("Diag/rank2", "Diag", (_rand((2, 3), "float64", 165),), grad=True, seed=165),
        Case("Diag/rank3", "Diag", (_rand((2, 1, 2), "float32", 166),), grad=True, seed=166),
        Case("Diag/specials", "Diag", (np.array([np.nan, np.inf, -np.inf, -0.0], np.float32),)),
        Case("Diag/empty", "Diag", (np.zeros((0, 2), np.float32),)),
        Case("Diag/scalar", "Diag", (np.float32(1),)),
        Case("Diag/bool_rejected", "Diag", (np.array([True, False]),)),
    ]


def _space_depth_batch() -> list[Case]:
    out: list[Case] = []
    for i, dt in enumerate(("float32", "float64", "int32", "uint8", "bool", "complex64", "float16") + _BF16):
        differentiable = dt in ("float32", "float64")
        out += [
            Case(f"DepthToSpace/{dt}", "DepthToSpace", (_rand((2, 2, 3, 8), dt, 170 + i),), {"block_size": 2},
                 grad=differentiable, seed=170 + i),
            Case(f"SpaceToDepth/{dt}", "SpaceToDepth", (_rand((2, 4, 6, 3), dt, 180 + i),), {"block_size": 2},
                 grad=differentiable, seed=180 + i),
            Case(f"SpaceToBatchND/{dt}", "SpaceToBatchND", (_rand((2, 3, 4, 2), dt, 190 + i), _i32(2, 3),
                                                            _i32(1, 0, 1, 1).reshape(2, 2)),
                 grad=differentiable, seed=190 + i),
            Case(f"BatchToSpaceND/{dt}", "BatchToSpaceND", (_rand((12, 2, 2, 2), dt, 200 + i), _i32(2, 3),
                                                            _i32(1, 0, 1, 1).reshape(2, 2)),
                 grad=differentiable, seed=200 + i),
        ]
    x = _rand((1, 3, 6, 18), "float32", 210)
    out += [
        Case("DepthToSpace/block3", "DepthToSpace", (x,), {"block_size": 3}, grad=True, seed=210),
        Case("DepthToSpace/nchw", "DepthToSpace", (_rand((1, 8, 2, 3), "float32", 211),), {"block_size": 2,
                                                                                           "data_format": "NCHW"}),
        Case("DepthToSpace/not_divisible", "DepthToSpace", (_rand((1, 1, 2, 6), "float32", 212),), {"block_size": 2}),
        Case("DepthToSpace/rank3", "DepthToSpace", (_rand((1, 2, 8), "float32", 213),), {"block_size": 2}),
        Case("DepthToSpace/empty_batch", "DepthToSpace", (np.zeros((0, 2, 2, 4), np.float32),), {"block_size": 2}),
        Case("SpaceToDepth/block3", "SpaceToDepth", (_rand((2, 3, 6, 2), "float64", 214),), {"block_size": 3},
             grad=True, seed=214),
        Case("SpaceToDepth/nchw", "SpaceToDepth", (_rand((1, 2, 4, 6), "float32", 215),), {"block_size": 2,
                                                                                          "data_format": "NCHW"}),
        Case("SpaceToDepth/not_divisible", "SpaceToDepth", (_rand((1, 3, 4, 1), "float32", 216),), {"block_size": 2}),
        Case("SpaceToDepth/rank5", "SpaceToDepth", (_rand((1, 2, 2, 2, 1), "float32", 217),), {"block_size": 2}),
    ]
    y = _rand((2, 4, 6, 3), "float32", 220)
    z = np.zeros((2, 2), np.int32)
    out += [
        Case("SpaceToBatchND/padded_3d", "SpaceToBatchND", (_rand((1, 2, 3, 4, 2), "float64", 221), _i64(1, 3, 2),
                                                            _i64(0, 0, 1, 2, 2, 0).reshape(3, 2)), grad=True, seed=221),
        Case("SpaceToBatchND/no_blocks", "SpaceToBatchND", (y, np.zeros(0, np.int32), np.zeros((0, 2), np.int32))),
        Case("SpaceToBatchND/one_block", "SpaceToBatchND", (y, _i32(2), _i32(0, 0).reshape(1, 2)), grad=True, seed=222),
        Case("SpaceToBatchND/not_divisible", "SpaceToBatchND", (y, _i32(3, 2), z)),
        Case("SpaceToBatchND/negative_padding", "SpaceToBatchND", (y, _i32(2, 2), _i32(-2, 2, 0, 0).reshape(2, 2))),
        Case("SpaceToBatchND/zero_block", "SpaceToBatchND", (y, _i32(0, 2), z)),
        Case("SpaceToBatchND/rank_too_small", "SpaceToBatchND", (y[0, 0], _i32(2, 2), z)),
        Case("SpaceToBatchND/paddings_shape", "SpaceToBatchND", (y, _i32(2, 2), _i32(0, 0).reshape(1, 2))),
        Case("SpaceToBatchND/block_matrix", "SpaceToBatchND", (y, _i32(2, 2).reshape(1, 2), z)),
        Case("SpaceToBatchND/empty_batch", "SpaceToBatchND", (np.zeros((0, 4, 2, 1), np.float32), _i32(2, 2), z)),
        Case("BatchToSpaceND/cropped_3d", "BatchToSpaceND", (_rand((8, 1, 2, 2, 1), "float64", 223), _i64(2, 2, 2),
                                                             _i64(0, 1, 1, 2, 0, 0).reshape(3, 2)), grad=True, seed=223),
        Case("BatchToSpaceND/crop_all", "BatchToSpaceND", (_rand((4, 1, 2, 1), "float32", 224), _i32(2, 2),
                                                           _i32(1, 1, 0, 0).reshape(2, 2))),
        Case("BatchToSpaceND/no_blocks", "BatchToSpaceND", (y, np.zeros(0, np.int64), np.zeros((0, 2), np.int64))),
        Case("BatchToSpaceND/batch_not_divisible", "BatchToSpaceND", (y, _i32(2, 2), z)),
        Case("BatchToSpaceND/crop_too_big", "BatchToSpaceND", (_rand((4, 1, 2, 1), "float32", 224), _i32(2, 2),
                                                               _i32(1, 2, 0, 0).reshape(2, 2))),
        Case("BatchToSpaceND/negative_crop", "BatchToSpaceND", (_rand((4, 1, 2, 1), "float32", 224), _i32(2, 2),
                                                                _i32(-1, 0, 0, 0).reshape(2, 2))),
        Case("BatchToSpaceND/empty_batch", "BatchToSpaceND", (np.zeros((0, 1, 2, 1), np.float32), _i32(2, 2), z)),
    ]
    return out


def _search_count_sparse() -> list[Case]:
    out: list[Case] = []
    for i, dt in enumerate(("float32", "float64", "int32", "int64", "uint8", "int16", "float16") + _BF16):
        s = np.sort(_rand((3, 9), dt, 230 + i).astype(np.float64), axis=1).astype(_rand((1,), dt, 0).dtype)
        v = np.concatenate([s[:, ::3], _rand((3, 4), dt, 240 + i)], axis=1)
        for op in ("LowerBound", "UpperBound"):
            out.append(Case(f"{op}/{dt}", op, (s, v)))
    special = np.array([[1.0, 2.0, 2.0, np.inf], [-np.inf, 0.0, np.nan, 3.0]], np.float32)
    probes = np.array([[2.0, np.nan, np.inf, -1.0, 9.0], [np.nan, 0.0, -np.inf, 3.0, 2.5]], np.float32)
    for op in ("LowerBound", "UpperBound"):
        out += [
            Case(f"{op}/specials", op, (special, probes)),
            Case(f"{op}/unsorted", op, (_rand((2, 7), "float32", 250), _rand((2, 5), "float32", 251))),
            Case(f"{op}/int64_out", op, (np.sort(_rand((2, 6), "int32", 252), 1), _rand((2, 3), "int32", 253)),
                 {"out_type": "int64"}),
            Case(f"{op}/empty_rows", op, (np.zeros((2, 0), np.float32), _rand((2, 3), "float32", 254))),
            Case(f"{op}/no_values", op, (np.sort(_rand((2, 4), "float32", 255), 1), np.zeros((2, 0), np.float32))),
            Case(f"{op}/rows_differ", op, (np.sort(_rand((2, 4), "float32", 255), 1), _rand((3, 2), "float32", 256))),
            Case(f"{op}/vector", op, (np.sort(_rand((4,), "float32", 257)), _rand((2,), "float32", 258))),
            Case(f"{op}/bool_rejected", op, (np.array([[False, True]]), np.array([[True]]))),
        ]
    arr = np.random.default_rng(260).integers(0, 9, (4, 5)).astype(np.int32)
    for dt in ("int32", "int64", "float32", "float64"):
        out += [
            Case(f"Bincount/{dt}", "Bincount", (arr, np.int32(6), _rand((4, 5), dt, 261))),
            Case(f"Bincount/counts_{dt}", "Bincount", (arr, np.int32(7), np.zeros(0, dt))),
            Case(f"DenseBincount/{dt}", "DenseBincount", (arr, np.int32(6), _rand((4, 5), dt, 262))),
            Case(f"DenseBincount/binary_{dt}", "DenseBincount", (arr[0], np.int32(6), np.zeros(0, dt)),
                 {"binary_output": True}),
        ]
    out += [
        Case("Bincount/size_zero", "Bincount", (arr, np.int32(0), np.zeros(0, np.float32))),
        Case("Bincount/empty", "Bincount", (np.zeros(0, np.int32), np.int32(3), np.zeros(0, np.float32))),
        Case("Bincount/negative", "Bincount", (np.array([1, -1], np.int32), np.int32(3), np.zeros(0, np.float32))),
        Case("Bincount/negative_size", "Bincount", (arr, np.int32(-1), np.zeros(0, np.float32))),
        Case("Bincount/weights_size", "Bincount", (arr, np.int32(3), np.ones(3, np.float32))),
        Case("DenseBincount/rows_int64", "DenseBincount", (arr.astype(np.int64), np.int64(5), _rand((4, 5), "float32", 263))),
        Case("DenseBincount/rows_binary", "DenseBincount", (arr, np.int32(5), np.zeros(0, np.int64)), {"binary_output": True}),
        Case("DenseBincount/binary_weights", "DenseBincount", (arr[1], np.int32(6), _rand((5,), "float32", 264)),
             {"binary_output": True}),
        Case("DenseBincount/scalar", "DenseBincount", (np.int32(2), np.int32(4), np.zeros(0, np.float32))),
        Case("DenseBincount/rank3", "DenseBincount", (arr.reshape(2, 2, 5), np.int32(4), np.zeros(0, np.float32))),
        Case("DenseBincount/negative", "DenseBincount", (np.array([1, -1], np.int32), np.int32(3), np.zeros(0, np.float32))),
        Case("DenseBincount/weights_shape", "DenseBincount", (arr, np.int32(3), np.ones(3, np.float32))),
    ]
    data = _rand((5, 3), "float32", 270)
    idx, ids = _i32(0, 4, 4, 1, 2), _i32(0, 0, 2, 2, 4)
    for op in ("SparseSegmentSum", "SparseSegmentMean"):
        for i, dt in enumerate(("float32", "float64", "float16") + _BF16 + (("int32", "uint8") if op == "SparseSegmentSum" else ())):
            out.append(Case(f"{op}/{dt}", op, (_rand((5, 3), dt, 271 + i), idx, ids), grad=dt in ("float32", "float64"),
                            seed=271 + i))
        out += [
            Case(f"{op}/int64_ids_rank3", op, (_rand((4, 2, 2), "float64", 280), _i64(3, 0, 3), _i64(1, 1, 1)), grad=True,
                 seed=280),
            Case(f"{op}/empty", op, (data, np.zeros(0, np.int32), np.zeros(0, np.int32))),
            Case(f"{op}/unsorted_ids", op, (data, _i32(0, 1, 3), _i32(1, 0, 2))),
            Case(f"{op}/index_out_of_range", op, (data, _i32(0, 5), _i32(0, 0))),
            Case(f"{op}/negative_index", op, (data, _i32(0, -1), _i32(0, 0))),
            Case(f"{op}/negative_id", op, (data, _i32(0, 1), _i32(-1, 0))),
            Case(f"{op}/sizes_differ", op, (data, _i32(0, 1), _i32(0))),
            Case(f"{op}/index_matrix", op, (data, _i32(0, 1).reshape(1, 2), _i32(0, 0).reshape(1, 2))),
            Case(f"{op}/scalar_data", op, (np.float32(1), _i32(0), _i32(0))),
        ]
    points = _i64(0, 1, 2, 0, 2, 2).reshape(3, 2)
    for i, dt in enumerate(("float32", "float64", "int32", "int64", "bool", "uint8", "complex64", "float16") + _BF16):
        vals = _rand((3,), dt, 290 + i)
        out.append(Case(f"SparseToDense/{dt}", "SparseToDense", (points, _i64(3, 3), vals, _rand((), dt, 300 + i)),
                        grad=dt in ("float32", "float64"), seed=290 + i))
    f = np.float32
    out += [
        Case("SparseToDense/scalar_value", "SparseToDense", (points, _i64(3, 3), f(5), f(-1)), grad=True, seed=301),
        Case("SparseToDense/vector_indices", "SparseToDense", (_i32(0, 2), _i32(4), np.array([5, 6], f), f(0)),
             grad=True, seed=302),
        Case("SparseToDense/scalar_index", "SparseToDense", (np.int32(2), _i32(4), f(5), f(0))),
        Case("SparseToDense/empty", "SparseToDense", (np.zeros((0, 2), np.int32), _i32(3, 2), np.zeros(0, f), f(-1))),
        Case("SparseToDense/unordered", "SparseToDense", (points[::-1].copy(), _i64(3, 3), np.ones(3, f), f(0))),
        Case("SparseToDense/unordered_unchecked", "SparseToDense", (points[::-1].copy(), _i64(3, 3), np.ones(3, f), f(0)),
             {"validate_indices": False}),
        Case("SparseToDense/repeated", "SparseToDense", (_i64(0, 1, 0, 1).reshape(2, 2), _i64(3, 3), np.ones(2, f), f(0))),
        Case("SparseToDense/out_of_bounds", "SparseToDense", (_i64(0, 1, 3, 1).reshape(2, 2), _i64(3, 3), np.ones(2, f), f(0))),
        Case("SparseToDense/out_of_bounds_unchecked", "SparseToDense", (_i64(0, 1, 3, 1).reshape(2, 2), _i64(3, 3),
                                                                        np.ones(2, f), f(0)), {"validate_indices": False}),
        Case("SparseToDense/negative_unchecked", "SparseToDense", (_i64(0, 1, -1, 1).reshape(2, 2), _i64(3, 3),
                                                                   np.ones(2, f), f(0)), {"validate_indices": False}),
        Case("SparseToDense/values_size", "SparseToDense", (points, _i64(3, 3), np.ones(2, f), f(0))),
        Case("SparseToDense/default_vector", "SparseToDense", (points, _i64(3, 3), np.ones(3, f), np.ones(1, f))),
        Case("SparseToDense/shape_size", "SparseToDense", (points, _i64(3, 3, 1), np.ones(3, f), f(0))),
        Case("SparseToDense/negative_shape", "SparseToDense", (points, _i64(-3, 3), np.ones(3, f), f(0))),
    ]
    return out


def cases() -> list[Case]:
    return (
        _identity_like() + _shape_ops() + _reshape() + _transpose() + _invert_permutation() + _expand_squeeze()
        + _pad() + _broadcast_tile_fill() + _concat_pack() + _split_slice() + _strided_slice() + _gather()
        + _segment_sum() + _one_hot() + _range() + _where() + _string_to_number() + _reverse_band_scan_linspace() + _top_k_nd() + _mirror_pad()
        + _split_v_broadcast_args() + _diag() + _space_depth_batch() + _search_count_sparse()
    )
