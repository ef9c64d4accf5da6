"""TensorFlow.js's kernels (tests/tfjs_kernels.py, from TF.js's kernel_names.ts): which of their
TensorFlow ops opkernel's registry lacks.  ``LACKING`` is that list, checked in, so a change to
the library's breadth shows in a diff: a test fails when an op it names arrives (remove it
there) or when a listed-as-present op disappears.  The ops the model-building issue named
are listed too (``NAMED``), and those still lacking are reported."""

from __future__ import annotations

import pytest

import tfjs_kernels
from opkernel import op_registry, plugins

#: TensorFlow ops of TF.js kernels that opkernel does not register yet.
LACKING = sorted([
    "AvgPool3D", "AvgPool3DGrad", "Conv3D", "Conv3DBackpropFilterV2", "Conv3DBackpropInputV2", "CropAndResize",
    "FFT", "IFFT", "ImageProjectiveTransformV3", "MaxPool3D", "MaxPool3DGrad", "NonMaxSuppressionV3",
    "NonMaxSuppressionV4", "NonMaxSuppressionV5", "RaggedGather", "RaggedRange", "RaggedTensorToTensor",
    "SparseFillEmptyRows", "SparseReshape", "StaticRegexReplace", "StringNGrams", "StringSplitV2",
    "StringToHashBucketFast", "UniqueV2", "_FusedDepthwiseConv2dNative",
])

#: The TensorFlow.js ops the model-building issue names (Multinomial as StatelessMultinomial).
NAMED = [
    "FusedBatchNormV3", "DepthwiseConv2dNative", "Conv2DBackpropInput", "ResizeBilinear", "ResizeNearestNeighbor",
    "MirrorPad", "ReverseV2", "Cumsum", "Cumprod", "TopKV2", "GatherNd", "ScatterNd", "TensorScatterUpdate", "Einsum",
    "MatrixBandPart", "LeakyRelu", "SquaredDifference", "Floor", "Ceil", "Round", "IsNan", "IsInf", "IsFinite", "Atan2",
    "Asin", "Acos", "Atan", "Asinh", "Acosh", "Atanh", "Sinh", "Cosh", "Tan", "Expm1", "Reciprocal", "LinSpace",
    "StatelessMultinomial",
]


def _ours() -> set[str]:
    plugins.ensure_loaded()
    return set(op_registry.op_names())


def _wanted() -> dict[str, str]:
    """TF.js kernel -> its TensorFlow op, for the kernels that have one."""
    return {k: tfjs_kernels.TF_OP.get(k, k) for k in tfjs_kernels.KERNELS if k not in tfjs_kernels.TFJS_ONLY}


def test_the_lacking_list_is_current(capsys: pytest.CaptureFixture[str]) -> None:
    ours = _ours()
    lacking = sorted({op for op in _wanted().values() if op not in ours})
    with capsys.disabled():
        have = len(set(_wanted().values())) - len(lacking)
        print(f"\nTensorFlow.js kernels: {len(tfjs_kernels.KERNELS)}, {len(tfjs_kernels.TFJS_ONLY)} without a "
              f"TensorFlow op; opkernel has {have} of their {len(set(_wanted().values()))} TensorFlow ops, lacks "
              f"{len(lacking)}: {', '.join(lacking)}")
    assert lacking == LACKING, (
        f"arrived (remove from LACKING): {sorted(set(LACKING) - set(lacking))}; "
        f"missing (registered before?): {sorted(set(lacking) - set(LACKING))}"
    )


def test_the_data_names_each_kernel_once_and_every_exception_is_a_kernel() -> None:
    assert len(set(tfjs_kernels.KERNELS)) == len(tfjs_kernels.KERNELS)
    assert set(tfjs_kernels.TF_OP) <= set(tfjs_kernels.KERNELS)
    assert set(tfjs_kernels.TFJS_ONLY) <= set(tfjs_kernels.KERNELS)
    assert all(why for why in tfjs_kernels.TFJS_ONLY.values())


def test_the_named_ops_are_tfjs_kernels_and_say_which_remain(capsys: pytest.CaptureFixture[str]) -> None:
    assert set(NAMED) <= set(_wanted().values())
    remaining = [op for op in NAMED if op in LACKING]
    with capsys.disabled():
        print(f"\nof the {len(NAMED)} ops the model-building issue names, {len(remaining)} remain: {', '.join(remaining)}")
