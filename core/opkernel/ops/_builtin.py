"""The built-in op library, registered through the same hooks as any plugin."""

from __future__ import annotations

from ..hookspecs import hookimpl
from . import (
    array_ops, batch_norm_ops, block_ops, data_flow_ops, einsum_ops, indexing_ops, layer_norm_ops, lookup_ops, math_ops,
    nn_ops, random_ops, resource_variable_ops, search_ops, shape_ops, sparse_ops, state_ops,
)

_FAMILIES = (
    math_ops, array_ops, nn_ops, state_ops, random_ops, batch_norm_ops, einsum_ops, layer_norm_ops, resource_variable_ops,
    lookup_ops, data_flow_ops,
)


@hookimpl
def opkernel_register_ops() -> None:
    for family in _FAMILIES:
        family.register_ops()


@hookimpl
def opkernel_register_gradients() -> None:
    for family in _FAMILIES:
        family.register_gradients()


@hookimpl
def opkernel_register_kernels() -> None:
    state_ops.register_generic_kernels()
    nn_ops.register_generic_kernels()
    random_ops.register_generic_kernels()
    batch_norm_ops.register_generic_kernels()
    einsum_ops.register_generic_kernels()
    shape_ops.register_generic_kernels()
    indexing_ops.register_generic_kernels()
    block_ops.register_generic_kernels()
    search_ops.register_generic_kernels()
    sparse_ops.register_generic_kernels()
    resource_variable_ops.register_generic_kernels()
    lookup_ops.register_kernels()
    data_flow_ops.register_kernels()
