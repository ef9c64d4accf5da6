"""Graph shape inference: ok.infer_shapes over traced and hand-built graphs, partial shapes,
and mismatches reported with the node, the op and the shapes."""

from __future__ import annotations

import numpy as np
import pytest

import opkernel as ok
from opkernel.errors import InvalidArgumentError, ShapeError
from opkernel.function import ConcreteFunction
from opkernel.graph import Edge, Graph, Node, TensorSpec

F32 = ok.float32


def _net(x, w):
    h = ok.ops.relu(ok.ops.mat_mul(x, w))
    return ok.ops.sum(ok.ops.reshape(h, [-1, 2, 2]), [1])


def test_a_traced_graph_carries_partial_shapes_and_infer_shapes_refines_them():
    f = ok.function(_net, input_signature=[TensorSpec((None, 3), F32), TensorSpec((3, 4), F32)])
    cf = f.get_concrete_function(TensorSpec((None, 3), F32), TensorSpec((3, 4), F32))
    assert [n.outputs[0].shape for n in cf.graph.nodes] == [(None, 4), (None, 4), (None, 2, 2), (None, 2)]
    shapes = ok.infer_shapes(cf.graph, [TensorSpec((5, 3), F32), TensorSpec((3, 4), F32)])
    assert [s[0].shape for s in shapes] == [(5, 4), (5, 4), (5, 2, 2), (5, 2)]
    assert all(s[0].dtype is F32 for s in shapes)
    assert ok.infer_shapes(cf) == [[n.outputs[0]] for n in cf.graph.nodes]  # the graph's own input specs


def test_infer_shapes_of_a_function_traces_for_the_specs():
    f = ok.function(_net)
    shapes = ok.infer_shapes(f, [TensorSpec((None, 3), F32), TensorSpec((3, 4), F32)])
    assert shapes[-1][0].shape == (None, 2) and f.tracing_count == 1
    with pytest.raises(InvalidArgumentError, match="give input_specs"):
        ok.infer_shapes(f)


def test_an_unknown_rank_stays_unknown_where_the_op_cannot_know_it():
    graph = Graph(
        inputs=[TensorSpec(None, F32), TensorSpec((2, None), F32)],
        nodes=[
            Node("Neg", {"T": F32}, [Edge("input", 0)], [TensorSpec(None, F32)]),
            Node("Add", {"T": F32}, [Edge("node", 0), Edge("input", 1)], [TensorSpec(None, F32)]),
            Node("Shape", {"T": F32, "out_type": ok.int32}, [Edge("input", 1)], [TensorSpec((2,), ok.int32)]),
        ],
        outputs=[Edge("node", 1), Edge("node", 2)], output_structure=[0, 1],
    )
    shapes = ok.infer_shapes(graph)
    assert shapes[0][0].shape is None and shapes[2][0].shape == (2,)
    assert shapes[1][0].shape is None or shapes[1][0].shape == (2, None)
    refined = ok.infer_shapes(graph, [TensorSpec((2, 1), F32), TensorSpec((2, 3), F32)])
    assert refined[1][0].shape == (2, 3)


def test_a_mismatch_names_the_node_the_op_and_the_shapes():
    graph = Graph(
        inputs=[TensorSpec((None, 3), F32), TensorSpec((3, 4), F32)],
        nodes=[
            Node("Relu", {"T": F32}, [Edge("input", 0)], [TensorSpec((None, 3), F32)]),
            Node("MatMul", {"T": F32, "transpose_a": False, "transpose_b": False},
                 [Edge("node", 0), Edge("input", 1)], [TensorSpec((None, 4), F32)]),
        ],
        outputs=[Edge("node", 1)], output_structure=0,
    )
    assert ok.infer_shapes(graph)[1][0].shape == (None, 4)
    with pytest.raises(ShapeError) as e:
        ok.infer_shapes(graph, [TensorSpec((2, 5), F32), TensorSpec((3, 4), F32)])
    msg = str(e.value)
    assert "graph node 1 (op 'MatMul')" in msg and "(2, 5), (3, 4)" in msg
    with pytest.raises(InvalidArgumentError, match="input 1 is float32, got a spec of int32"):
        ok.infer_shapes(graph, [TensorSpec((2, 3), F32), TensorSpec((3, 4), ok.int32)])


def test_constants_feed_shape_functions_that_read_values():
    graph = Graph(
        inputs=[TensorSpec((None,), F32)],
        nodes=[Node("Reshape", {"T": F32, "Tshape": ok.int32}, [Edge("input", 0), Edge("const", 0)],
                    [TensorSpec(None, F32)])],
        outputs=[Edge("node", 0)], output_structure=0, constants=[np.array([-1, 3], np.int32)],
    )
    assert ok.infer_shapes(graph)[0][0].shape == (None, 3)
    assert ok.infer_shapes(graph, [TensorSpec((12,), F32)])[0][0].shape == (4, 3)
    out = ConcreteFunction(graph)(np.arange(6, dtype=np.float32))
    assert out.shape == (2, 3)


def test_the_op_name_form_still_works():
    assert ok.infer_shapes("MatMul", [(2, 3), (3, 5)], {"transpose_a": False})[0] == (2, 5)


def test_more_specs_than_inputs_is_a_clear_error():
    graph = Graph(inputs=[TensorSpec((2,), F32)], nodes=[Node("Neg", {"T": F32}, [Edge("input", 0)], [TensorSpec((2,), F32)])],
                  outputs=[Edge("node", 0)], output_structure=0)
    with pytest.raises(InvalidArgumentError, match="the graph has 1 inputs, got 2 specs"):
        ok.infer_shapes(graph, [(2,), (3,)])
