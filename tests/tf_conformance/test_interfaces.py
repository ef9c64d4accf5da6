"""Op interfaces against TensorFlow's OpDefs: code written for ``tf.raw_ops`` runs unchanged.

For every op in opkernel's registry that TensorFlow also has: input and output names,
order and types (fixed dtype, type attr, number attr, type-list attr, Ref), attrs
(names, types, allowed values, minimums, defaults) and statefulness; and the keywords
of each ``ok.ops`` wrapper against those of ``tf.raw_ops``.  TensorFlow's OpDefs come from
dump_opdefs.py run in a child process when TensorFlow is installed, else from the
checked-in dump; a stale checked-in dump fails ``test_checked_in_opdefs_are_current``.

Each difference opkernel keeps on purpose is one entry of INTERFACE_DIFFERENCES, keyed
``"Op.attr.field"`` (or ``"Op.inputs"``/``"Op.outputs"``) with the reason; it is
reported in the summary, never hidden, and an entry that no longer matches a
difference fails ``test_interface_differences_are_current``.
"""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pytest

import opkernel as ok
from opdef_reference import RERECORD, normalize_ok, normalize_tf, reference
from opkernel import op_registry, plugins

_NO_CPU_KERNEL = "TensorFlow's OpDef allows {types} but TensorFlow has no CPU kernel for them (the call fails " \
                 "with NotFoundError at kernel lookup); opkernel's OpDef leaves them out, so the same call fails " \
                 "early with OpTypeError naming the op"
_VARIANT = "DT_VARIANT is a TensorFlow runtime type (tensor lists, optionals) that opkernel does not model"

#: ``"Op.attr.field"`` -> why opkernel differs from TensorFlow 2.21 there.  Reviewed; keep short.
INTERFACE_DIFFERENCES: dict[str, str] = {
    "AddN.T.allowed": _VARIANT,
    "Conj.T.allowed": _VARIANT,
    "MatMul.T.allowed": _NO_CPU_KERNEL.format(types="uint8, uint16, uint32 and uint64"),
    "RealDiv.T.allowed": _NO_CPU_KERNEL.format(types="uint32 and uint64"),
    "Range.Tidx.allowed": "TensorFlow's OpDef allows uint64 but TensorFlow has no CPU kernel for it (NotFoundError "
                          "at kernel lookup); opkernel's OpDef leaves it out, so the same call fails early with "
                          "OpTypeError naming the op",
    "ApplyAdam.T.allowed": _NO_CPU_KERNEL.format(types="integer and quantized types") +
        "; complex variables are not implemented by opkernel's optimizers",
    "ApplyGradientDescent.T.allowed": _NO_CPU_KERNEL.format(types="integer and quantized types") +
        "; complex variables are not implemented by opkernel's optimizers",
    "ApplyMomentum.T.allowed": _NO_CPU_KERNEL.format(types="integer and quantized types") +
        "; complex variables are not implemented by opkernel's optimizers",
    "BatchMatMul.T.allowed": "opkernel's BatchMatMul is TensorFlow's BatchMatMulV2 (broadcast batch dimensions) "
                             "under the first name, and takes V2's int16 too",
    "AssignAdd.T.allowed": _NO_CPU_KERNEL.format(types="the quantized types"),
    "AssignSub.T.allowed": _NO_CPU_KERNEL.format(types="the quantized types"),
    "ArgMax.Tidx.allowed": "TensorFlow's OpDef allows an int16 dimension, but its CPU kernel reads it as a 32-bit "
                           "integer (two bytes past the value): the same call fails ('Expected dimension in the "
                           "range') or succeeds from run to run. opkernel takes int32 and int64 only",
    "MaxPoolGradGrad.explicit_paddings": "an extra attr with a default, so TensorFlow's keyword calls run unchanged: "
                                         "opkernel's MaxPoolGradGrad is the gradient of MaxPoolGrad, which takes "
                                         "EXPLICIT padding in TensorFlow too (TensorFlow's MaxPoolGradGrad does not)",
    "MaxPoolGradGrad.padding.allowed": "EXPLICIT padding, as MaxPoolGrad (see MaxPoolGradGrad.explicit_paddings)",
    "LinSpace.T.allowed": _NO_CPU_KERNEL.format(types="bfloat16 and half"),
    "Reciprocal.T.allowed": _NO_CPU_KERNEL.format(types="the integer types"),
    "Round.T.allowed": _NO_CPU_KERNEL.format(types="int8, int16 and the complex types"),
    "RngReadAndSkip.inputs": "the generator's state is a Ref(int64) Variable, opkernel's variables, where TensorFlow's "
                             "is a resource handle (opkernel has no resource type yet)",
}

#: Built-in ops TensorFlow has no public op for, with the reason (ops with a namespace,
#: 'Vendor>Name', belong to installed op packages and are not compared).
NOT_IN_TENSORFLOW: dict[str, str] = {
    "FusedConv2D": "TensorFlow's _FusedConv2D is internal (made by grappler); opkernel's is public and its "
                   "attrs differ",
    "FusedMatMul": "TensorFlow's _FusedMatMul is internal (made by grappler); opkernel's is public",
    "SparseSoftmaxCrossEntropyLoss": "opkernel's fused training loss (SparseSoftmaxCrossEntropyWithLogits "
                                     "followed by a reduction); TensorFlow has no such op",
    "FusedLayerNorm": "opkernel's fused layer normalization; TensorFlow and Keras compose it from moments and "
                      "elementwise ops (the oracle compares it with that composition)",
    "FusedLayerNormGrad": "FusedLayerNorm's gradient op (compared with the gradient of TensorFlow's composition)",
    "Gelu": "opkernel's GELU in one op; TensorFlow's tf.nn.gelu composes it (the oracle compares it with that)",
    "GeluGrad": "Gelu's gradient op (compared with the gradient of tf.nn.gelu)",
    "SoftmaxGrad": "Softmax's gradient op (compared with TensorFlow's composition in Softmax's gradient)",
}


def _builtin_ops() -> list[str]:
    plugins.ensure_loaded()
    return [name for name in op_registry.op_names() if ">" not in name]


def _differences(ok: dict[str, Any], tf: dict[str, Any]) -> dict[str, str]:
    """Each difference between two normal forms, keyed like INTERFACE_DIFFERENCES."""
    found: dict[str, str] = {}
    for kind in ("inputs", "outputs"):
        if ok[kind] != tf[kind]:
            found[kind] = f"opkernel {ok[kind]}, TensorFlow {tf[kind]}"
    for name in sorted(set(ok["attrs"]) | set(tf["attrs"])):
        mine, theirs = ok["attrs"].get(name), tf["attrs"].get(name)
        if mine is None or theirs is None:
            found[name] = f"only in {'opkernel' if theirs is None else 'TensorFlow'}: {mine or theirs}"
            continue
        for key in sorted(set(mine) | set(theirs)):
            a, b = mine.get(key, "<none>"), theirs.get(key, "<none>")
            if key == "allowed" and a is not None and b is not None:
                a, b = sorted(set(a)), sorted(set(b))  # a set: the order in the spec means nothing
                if a != b:
                    found[f"{name}.allowed"] = (f"opkernel adds {sorted(set(a) - set(b))}, "
                                                f"lacks {sorted(set(b) - set(a))}")
            elif a != b:
                found[f"{name}.{key}"] = f"opkernel {a!r}, TensorFlow {b!r}"
    return found


def _all_differences() -> dict[str, str]:
    tf_ops = reference().ops
    found: dict[str, str] = {}
    for name in _builtin_ops():
        if name in tf_ops:
            op_def, tf_op = op_registry.get_op_def(name), tf_ops[name]
            diffs = _differences(normalize_ok(op_def), normalize_tf(tf_op))
            found.update({f"{name}.{key}": text for key, text in diffs.items()})
            # An op with a Ref input is stateful in opkernel (see test_grammar_roundtrip.ref_makes_stateful).
            tf_stateful = tf_op["is_stateful"] or any(arg["is_ref"] for arg in tf_op["inputs"])
            if op_def.is_stateful != tf_stateful:
                found[f"{name}.is_stateful"] = f"opkernel {op_def.is_stateful}, TensorFlow {tf_op['is_stateful']}"
    return found


def test_checked_in_opdefs_are_current() -> None:
    ref = reference()
    if not ref.fresh:
        pytest.skip("TensorFlow is not installed: the checked-in dump is the reference")
    assert ref.checked_in == ref.data, (
        f"tests/tf_conformance/recorded/tf_opdefs.json.gz is stale (it is from TensorFlow "
        f"{ref.checked_in.get('tensorflow')}, installed is {ref.data.get('tensorflow')}); re-record with: {RERECORD}"
    )


def test_every_builtin_op_is_compared_or_exempt() -> None:
    tf_ops = reference().ops
    missing = [n for n in _builtin_ops() if n not in tf_ops and n not in NOT_IN_TENSORFLOW]
    assert not missing, f"built-in ops TensorFlow does not have, with no reason in NOT_IN_TENSORFLOW: {missing}"
    stale = [n for n in NOT_IN_TENSORFLOW if n in tf_ops or n not in _builtin_ops()]
    assert not stale, f"NOT_IN_TENSORFLOW names ops that TensorFlow has or opkernel lacks: {stale}"


def test_interfaces_match_tensorflow(capsys: pytest.CaptureFixture[str]) -> None:
    found = _all_differences()
    unexplained = {key: text for key, text in found.items() if key not in INTERFACE_DIFFERENCES}
    compared = sum(1 for n in _builtin_ops() if n in reference().ops)
    with capsys.disabled():
        print(f"\ninterfaces: {compared} ops compared with TensorFlow {reference().data['tensorflow']}'s OpDefs, "
              f"{len(found) - len(unexplained)} deliberate differences: {', '.join(sorted(INTERFACE_DIFFERENCES))}")
    assert not unexplained, "op interfaces differ from TensorFlow's:\n" + "\n".join(
        f"{key}: {text}" for key, text in sorted(unexplained.items()))


def test_interface_differences_are_current() -> None:
    found = _all_differences()
    stale = sorted(key for key in INTERFACE_DIFFERENCES if key not in found)
    assert not stale, f"INTERFACE_DIFFERENCES entries that match no difference any more (remove them): {stale}"


def _wrapper_keywords(op_name: str) -> set[str]:
    """The parameter names of opkernel's generated wrapper of ``op_name``."""
    from opkernel.ops import _gen

    return set(inspect.signature(getattr(ok.ops, _gen.snake_case(op_name))).parameters)


def test_raw_ops_keywords_are_accepted() -> None:
    # What matters to a user: ok.ops.<op> takes the keywords tf.raw_ops.<Op> takes (TensorFlow's
    # Python names, see opkernel.ops._gen.API_NAMES), and no others but the reviewed extra attrs.
    tf_ops = reference().ops
    missing, extra = {}, {}
    for name in _builtin_ops():
        raw = tf_ops[name]["raw_ops"] if name in tf_ops else None
        if raw is None:
            continue
        keywords = _wrapper_keywords(name) - {"name", "_kernel"}
        lacking = [k for k in raw if k not in keywords]
        added = sorted(k for k in keywords - set(raw) if f"{name}.{k}" not in INTERFACE_DIFFERENCES)
        if lacking:
            missing[name] = lacking
        if added:
            extra[name] = added
    assert not missing, f"ok.ops wrappers lack keywords that tf.raw_ops takes: {missing}"
    assert not extra, f"ok.ops wrappers take keywords tf.raw_ops does not: {extra}"


def test_the_checked_in_dump_is_the_reference_without_tensorflow(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.delenv("OPKERNEL_TF_REFERENCE", raising=False)
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "tensorflow" else real(name, *a))
    ref = reference.__wrapped__()
    assert not ref.fresh and ref.data == ref.checked_in and "Conv2D" in ref.ops


def test_interface_differences_are_documented() -> None:
    page = (Path(__file__).parents[2] / "docs" / "conformance.md").read_text(encoding="utf-8")
    missing = [key for key in [*INTERFACE_DIFFERENCES, *NOT_IN_TENSORFLOW] if f"`{key}`" not in page]
    assert not missing, f"docs/conformance.md's Interfaces section does not list: {missing}"


def test_a_changed_default_is_found() -> None:
    # The comparison is not vacuous: an op whose attr default moved away from TensorFlow's is caught.
    tf_op = reference().ops["Conv2D"]
    ok_form = normalize_ok(op_registry.get_op_def("Conv2D"))
    assert "data_format.default" not in _differences(ok_form, normalize_tf(tf_op))
    ok_form["attrs"]["data_format"]["default"] = "NCHW"
    assert _differences(ok_form, normalize_tf(tf_op))["data_format.default"] == "opkernel 'NCHW', TensorFlow 'NHWC'"


# ------------------------------------------------------------------ fixed interfaces
# The calls below are written as for tf.raw_ops (same keywords, same dtypes); TensorFlow
# 2.21's CPU kernels run each of them.  Each failed with OpTypeError before the op's
# spec took TensorFlow's allowed types.

_X = np.arange(12, dtype=np.float32).reshape(3, 4)

TF_ACCEPTS: list[tuple[str, Callable[[], Any], Any]] = [
    ("Mul/uint64", lambda: ok.ops.mul(x=np.array([2**40, 7], np.uint64), y=np.array([3, 5], np.uint64)),
     np.array([3 * 2**40, 35], np.uint64)),
    ("Sub/uint32", lambda: ok.ops.sub(x=np.array([5, 0], np.uint32), y=np.array([2, 1], np.uint32)),
     np.array([3, 2**32 - 1], np.uint32)),
    ("FloorDiv/uint32", lambda: ok.ops.floor_div(x=np.array([7, 4000000000], np.uint32), y=np.array([2, 3], np.uint32)),
     np.array([3, 1333333333], np.uint32)),
    ("Square/uint16", lambda: ok.ops.square(x=np.array([3, 65535], np.uint16)), np.array([9, 1], np.uint16)),
    ("Square/uint64", lambda: ok.ops.square(x=np.array([2**32 + 1], np.uint64)), np.array([2**33 + 1], np.uint64)),
    ("OnesLike/uint64", lambda: ok.ops.ones_like(x=np.zeros(3, np.uint64)), np.ones(3, np.uint64)),
    ("ArgMax/output_type=int16", lambda: ok.ops.arg_max(input=_X, dimension=np.int32(1), output_type="int16"),
     np.array([3, 3, 3], np.int16)),
    ("ArgMax/output_type=uint16", lambda: ok.ops.arg_max(input=_X, dimension=np.int32(0), output_type="uint16"),
     np.array([2, 2, 2, 2], np.uint16)),
    ("StringToNumber/out_type=int64", lambda: ok.ops.string_to_number(
        string_tensor=np.array([b"-9000000000"], object), out_type="int64"), np.array([-9000000000], np.int64)),
    ("StringToNumber/out_type=float64", lambda: ok.ops.string_to_number(
        string_tensor=np.array([b"0.1"], object), out_type="float64"), np.array([0.1])),
    ("StringToNumber/out_type=uint64", lambda: ok.ops.string_to_number(
        string_tensor=np.array([b"18446744073709551615"], object), out_type="uint64"),
     np.array([2**64 - 1], np.uint64)),
    ("GatherV2/int16 indices", lambda: ok.ops.gather_v2(
        params=_X, indices=np.array([2, 0], np.int16), axis=np.int32(0)), _X[[2, 0]]),
    ("StridedSlice/int16 Index", lambda: ok.ops.strided_slice(
        input=_X, begin=np.array([0, 1], np.int16), end=np.array([3, 4], np.int16),
        strides=np.array([2, 2], np.int16)), _X[0:3:2, 1:4:2]),
    ("UnsortedSegmentSum/int16 ids", lambda: ok.ops.unsorted_segment_sum(
        data=_X, segment_ids=np.array([1, 0, 1], np.int16), num_segments=np.int32(2)),
     np.stack([_X[1], _X[0] + _X[2]])),
    ("OneHot/int8 indices", lambda: ok.ops.one_hot(
        indices=np.array([0, 2, -1], np.int8), depth=np.int32(3), on_value=np.float32(1), off_value=np.float32(0)),
     np.array([[1, 0, 0], [0, 0, 1], [0, 0, 0]], np.float32)),
]


@pytest.mark.parametrize("call, want", [(c, w) for _, c, w in TF_ACCEPTS], ids=[i for i, _, _ in TF_ACCEPTS])
def test_calls_tensorflow_accepts_run(backend: str, call: Callable[[], Any], want: Any) -> None:
    got = call()
    assert got.dtype.name == want.dtype.name
    np.testing.assert_array_equal(got.numpy(), want)


@pytest.mark.parametrize("op", ["ArgMax", "ArgMin"])
def test_arg_max_of_complex_is_rejected_as_in_tensorflow(backend: str, op: str) -> None:
    # TensorFlow's ArgMax/ArgMin have no order on complex numbers (T excludes them); opkernel
    # used to accept complex input and order it lexicographically.
    fn = ok.ops.arg_max if op == "ArgMax" else ok.ops.arg_min
    with pytest.raises(ok.errors.OpTypeError, match=f"op '{op}'.*complex64"):
        fn(input=np.array([1 + 2j, 3 - 1j], np.complex64), dimension=np.int32(0))


def test_raw_ops_style_keywords_run(backend: str) -> None:
    # TensorFlow's Python names (its ApiDef renames): each call failed with TypeError
    # ("unexpected keyword argument 'axis'") while the wrappers used the OpDef's names.
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_array_equal(ok.ops.sum(input=x, axis=np.int32(1), keep_dims=True).numpy(), x.sum(1, keepdims=True))
    np.testing.assert_array_equal(ok.ops.mean(input=x, axis=[0]).numpy(), x.mean(0))
    assert ok.ops.squeeze(input=x[None], axis=[0]).shape == (2, 3)
    assert ok.ops.expand_dims(input=x, axis=np.int32(-1)).shape == (2, 3, 1)
    assert [t.shape for t in ok.ops.split(axis=np.int32(1), value=x, num_split=3)] == [(2, 1)] * 3
    picked = ok.ops.select(condition=np.array([True, False]), x=np.array([1, 2]), y=np.array([3, 4]))
    np.testing.assert_array_equal(picked.numpy(), [1, 4])
    np.testing.assert_array_equal(ok.ops.where(condition=np.array([[True, False], [False, True]])).numpy(), [[0, 0], [1, 1]])
