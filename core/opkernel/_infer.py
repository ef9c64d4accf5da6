"""``ok.infer_shapes``: run an op's shape function on shapes alone."""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

from .errors import InvalidArgumentError
from .op_registry import OpDef
from .shapes import TensorShape, as_shape, run_shape_fn


def infer_shapes(
    op_def: OpDef, input_shapes: Sequence[Any], attrs: Mapping[str, Any], input_tensors: Sequence[Any] | None = None
) -> list[TensorShape]:
    """``input_shapes`` has one entry per declared input, a list of shapes for a list input.

    Length attrs (``N``) are inferred from the lists; other attrs come from
    ``attrs`` or their defaults; type attrs that are neither are left out.
    ``input_tensors`` optionally gives known constant values, one per declared input.
    """
    if len(input_shapes) != len(op_def.inputs):
        raise InvalidArgumentError(
            f"op {op_def.name!r} takes {len(op_def.inputs)} inputs, got {len(input_shapes)} shapes", op=op_def.name
        )
    bound: dict[str, Any] = {k: op_def.coerce_attr(k, v) for k, v in attrs.items()}
    flat: list[TensorShape] = []
    tensors: list[np.ndarray | None] = []
    for i, (arg, shape) in enumerate(zip(op_def.inputs, input_shapes)):
        value = input_tensors[i] if input_tensors is not None else None
        if arg.is_list:
            shapes = list(shape)
            if arg.number_attr:
                bound.setdefault(arg.number_attr, len(shapes))
            flat.extend(as_shape(s) for s in shapes)
            tensors.extend(list(value) if value is not None else [None] * len(shapes))
        else:
            flat.append(as_shape(shape))
            tensors.append(None if value is None else np.asarray(value))
    for attr in op_def.attrs:
        if attr.name not in bound and attr.has_default:
            bound[attr.name] = attr.default
    return run_shape_fn(op_def, flat, bound, tensors)
