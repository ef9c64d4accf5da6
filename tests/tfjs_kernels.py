"""TensorFlow.js's kernel names (tfjs-core/src/kernel_names.ts at tensorflow/tfjs commit
0fc04d958ea592f3b8db79a8b3b497b5c8904097, 2025-06-06), each with the TensorFlow op that computes it
(``TF_OP``: the same name unless listed) or the reason it has none (``TFJS_ONLY``).  Data only:
tests/test_tfjs_kernels.py reads it."""

from __future__ import annotations

#: The kernel names, in the file's order.
KERNELS = (
    "Abs", "Acos", "Acosh", "Add", "AddN", "All", "Any", "ArgMax", "ArgMin", "Asin", "Asinh", "Atan", "Atanh",
    "Atan2", "AvgPool", "AvgPoolGrad", "AvgPool3D", "AvgPool3DGrad", "BatchMatMul", "BatchToSpaceND", "Bincount",
    "BitwiseAnd", "BroadcastTo", "BroadcastArgs", "Cast", "Ceil", "ClipByValue", "Complex", "ComplexAbs", "Concat",
    "Conv2D", "Conv2DBackpropFilter", "Conv2DBackpropInput", "Conv3D", "Conv3DBackpropFilterV2",
    "Conv3DBackpropInputV2", "Cos", "Cosh", "Cumprod", "Cumsum", "CropAndResize", "DenseBincount", "DepthToSpace",
    "DepthwiseConv2dNative", "DepthwiseConv2dNativeBackpropFilter", "DepthwiseConv2dNativeBackpropInput", "Diag",
    "Dilation2D", "Dilation2DBackpropInput", "Dilation2DBackpropFilter", "Draw", "RealDiv", "Einsum", "Elu",
    "EluGrad", "Erf", "Equal", "Exp", "ExpandDims", "Expm1", "FFT", "Fill", "FlipLeftRight", "Floor", "FloorDiv",
    "FusedBatchNorm", "GatherV2", "GatherNd", "Greater", "GreaterEqual", "Identity", "IFFT", "Imag", "IsFinite",
    "IsInf", "IsNan", "LeakyRelu", "Less", "LessEqual", "LinSpace", "Log", "Log1p", "LogicalAnd", "LogicalNot",
    "LogicalOr", "LogicalXor", "LogSoftmax", "LowerBound", "LRN", "LRNGrad", "MatrixBandPart", "Max", "Maximum",
    "MaxPool", "MaxPoolGrad", "MaxPool3D", "MaxPool3DGrad", "MaxPoolWithArgmax", "Mean", "Min", "Minimum",
    "MirrorPad", "Mod", "Multinomial", "Multiply", "Neg", "NotEqual", "NonMaxSuppressionV3", "NonMaxSuppressionV4",
    "NonMaxSuppressionV5", "OnesLike", "OneHot", "Pack", "PadV2", "Pool", "Pow", "Prelu", "Prod", "RaggedGather",
    "RaggedRange", "RaggedTensorToTensor", "Range", "Real", "Reciprocal", "Relu", "Reshape", "ResizeNearestNeighbor",
    "ResizeNearestNeighborGrad", "ResizeBilinear", "ResizeBilinearGrad", "Relu6", "Reverse", "Round", "Rsqrt",
    "ScatterNd", "TensorScatterUpdate", "SearchSorted", "Select", "Selu", "Slice", "Sin", "Sinh", "Sign", "Sigmoid",
    "Softplus", "Sqrt", "Sum", "SpaceToBatchND", "SplitV", "Softmax", "SparseFillEmptyRows", "SparseReshape",
    "SparseSegmentMean", "SparseSegmentSum", "SparseToDense", "SquaredDifference", "Square", "StaticRegexReplace",
    "StridedSlice", "StringNGrams", "StringSplit", "StringToHashBucketFast", "Sub", "Tan", "Tanh", "Tile", "TopK",
    "Transform", "Transpose", "Unique", "Unpack", "UnsortedSegmentSum", "UpperBound", "ZerosLike", "Step",
    "FromPixels", "RotateWithOffset", "_FusedMatMul", "FusedConv2D", "FusedDepthwiseConv2D",
)

#: TF.js kernels whose TensorFlow op has another name.
TF_OP = {
    "Concat": "ConcatV2",
    "Multiply": "Mul",
    "Mod": "FloorMod",
    "Reverse": "ReverseV2",
    "TopK": "TopKV2",
    "FusedBatchNorm": "FusedBatchNormV3",
    "_FusedMatMul": "FusedMatMul",
    "Multinomial": "StatelessMultinomial",
    "Transform": "ImageProjectiveTransformV3",
    "FusedDepthwiseConv2D": "_FusedDepthwiseConv2dNative",
    "Unique": "UniqueV2",
    "StringSplit": "StringSplitV2",
}

#: TF.js kernels with no TensorFlow op of their own, and why.
TFJS_ONLY = {
    "Draw": "draws a tensor on an HTML canvas",
    "FromPixels": "reads browser image data",
    "RotateWithOffset": "TF.js's image rotation (TensorFlow uses ImageProjectiveTransformV3)",
    "Step": "TF.js's step function; TensorFlow has no such op",
    "Prelu": "Keras's PReLU composes Relu, Neg and Mul in TensorFlow",
    "LogicalXor": "tf.math.logical_xor composes LogicalAnd, LogicalOr and LogicalNot",
    "FlipLeftRight": "tf.image.flip_left_right is ReverseV2 in TensorFlow",
    "Pool": "tf.nn.pool dispatches to the pooling ops",
    "SearchSorted": "tf.searchsorted is LowerBound or UpperBound",
}
