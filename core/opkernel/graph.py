"""The graph IR: what ``ok.function`` traces, ``ok.infer_shapes`` checks, a
``ConcreteFunction`` replays and ``ok.save`` writes.

A :class:`Graph` is a flat, topologically ordered list of :class:`Node` (op
calls).  Every node input and graph output is an :class:`Edge` naming where
its value comes from: a graph input, an earlier node's flat output, a
constant captured at trace time (a host numpy copy) or a captured
:class:`~opkernel.Variable` (by reference: a replay reads its value at the
time the node runs, and ``Ref`` ops update it).  Nodes hold every attr, the
inferred type and length attrs included, so a node can be run, checked or
serialized without the Python function that made it.

:meth:`Graph.validate` checks the structure (edges point backwards to
things that exist, counts agree with each op's definition); loaders and
``ConcreteFunction`` call it before anything runs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterator

import numpy as np

from ._provenance import Provider
from .dtypes import DType, as_dtype, of_array
from .errors import InvalidArgumentError, OpkernelError
from .tensor import Tensor, Variable

__all__ = ["TensorSpec", "Edge", "Node", "Graph", "GraphError", "EDGE_KINDS"]

#: The kinds of :class:`Edge`.
EDGE_KINDS = ("input", "node", "const", "var")


class GraphError(InvalidArgumentError):
    """A graph that breaks the IR's rules: a dangling edge, a cycle, counts that
    disagree with an op's definition.  ``.node`` is the index of the node at
    fault, when there is one."""


@dataclass(frozen=True)
class TensorSpec:
    """The static description of a tensor: a partial shape and a dtype (``tf.TensorSpec``).

    ``shape`` is a tuple with ``None`` for unknown dimensions, or ``None`` for
    an unknown rank.  ``ok.TensorSpec((None, 784), ok.float32)`` accepts any
    batch size.  A list or a TensorShape is accepted and kept as a tuple; the
    dtype may be anything ``ok.as_dtype`` reads.
    """

    shape: tuple[int | None, ...] | None
    dtype: DType
    name: str | None = None

    def __post_init__(self) -> None:
        shape: Any = self.shape
        if hasattr(shape, "rank") and hasattr(shape, "as_list"):  # a TensorShape
            shape = None if shape.rank is None else tuple(shape.as_list())
        if shape is not None:
            if isinstance(shape, (int, np.integer)) or not hasattr(shape, "__iter__"):
                raise InvalidArgumentError(
                    f"TensorSpec: shape must be a tuple of ints and None (or None), got {shape!r}"
                )
            dims: list[int | None] = []
            for d in shape:
                if d is None:
                    dims.append(None)
                elif isinstance(d, (int, np.integer)) and not isinstance(d, bool) and d >= 0:
                    dims.append(int(d))
                elif isinstance(d, (int, np.integer)) and not isinstance(d, bool) and d == -1:
                    dims.append(None)  # TensorFlow's -1 for unknown
                else:
                    raise InvalidArgumentError(
                        f"TensorSpec: every dimension must be an int >= 0 or None, got {d!r} in shape {shape!r}"
                    )
            shape = tuple(dims)
        object.__setattr__(self, "shape", shape)
        object.__setattr__(self, "dtype", as_dtype(self.dtype))

    @classmethod
    def from_tensor(cls, t: Tensor, name: str | None = None) -> TensorSpec:
        """The exact spec of ``t``: its shape and dtype."""
        return cls(tuple(t.shape), t.dtype, name)

    @property
    def rank(self) -> int | None:
        return None if self.shape is None else len(self.shape)

    def is_fully_defined(self) -> bool:
        return self.shape is not None and None not in self.shape

    def is_compatible_with(self, other: TensorSpec | Tensor) -> bool:
        """Whether ``other`` (a spec or a tensor) could be described by this spec:
        the same dtype, and shapes that agree wherever both are known."""
        if isinstance(other, Tensor):
            other = TensorSpec(tuple(other.shape), other.dtype)
        if other.dtype is not self.dtype:
            return False
        if self.shape is None or other.shape is None:
            return True
        return len(self.shape) == len(other.shape) and all(
            a is None or b is None or a == b for a, b in zip(self.shape, other.shape)
        )

    def __repr__(self) -> str:
        name = f", name={self.name!r}" if self.name is not None else ""
        return f"TensorSpec(shape={self.shape!r}, dtype={self.dtype.name}{name})"


@dataclass(frozen=True)
class Edge:
    """Where one node input or graph output comes from.

    ``kind`` is ``"input"`` (graph input ``index``), ``"node"`` (flat output
    ``output`` of node ``index``), ``"const"`` (``Graph.constants[index]``) or
    ``"var"`` (``Graph.variables[index]``).
    """

    kind: str
    index: int
    output: int = 0

    def __str__(self) -> str:
        if self.kind == "node":
            return f"node {self.index} output {self.output}"
        return f"{self.kind} {self.index}"


@dataclass
class Node:
    """One op call: the op's name, ALL its attrs (inferred type and length attrs
    and defaults too), its flat inputs in OpDef order, its flat output specs."""

    op: str
    attrs: dict[str, Any]
    inputs: list[Edge]
    outputs: list[TensorSpec]
    provider: Provider | None = None
    label: str | None = None


@dataclass
class Graph:
    """A traced computation (see the module docstring).

    ``output_structure`` is a JSON-able nesting (lists, dicts with str keys) of
    ints indexing ``outputs``, a bare int for a single output, or None for a
    function returning None.
    """

    inputs: list[TensorSpec]
    nodes: list[Node]
    outputs: list[Edge]
    output_structure: Any
    constants: list[np.ndarray] = field(default_factory=list)
    variables: list[Variable] = field(default_factory=list)
    variable_names: list[str] = field(default_factory=list)

    # -- reading -------------------------------------------------------------

    def spec_of(self, edge: Edge) -> TensorSpec:
        """The static spec of the value ``edge`` names (the graph must be valid)."""
        if edge.kind == "input":
            return self.inputs[edge.index]
        if edge.kind == "node":
            return self.nodes[edge.index].outputs[edge.output]
        if edge.kind == "const":
            c = self.constants[edge.index]
            return TensorSpec(tuple(c.shape), of_array(c))
        v = self.variables[edge.index]
        return TensorSpec(tuple(v.shape), v.dtype, self.variable_names[edge.index])

    @property
    def output_specs(self) -> list[TensorSpec]:
        return [self.spec_of(e) for e in self.outputs]

    def op_names(self) -> list[str]:
        """The distinct op names the graph uses, in first-use order."""
        return list(dict.fromkeys(n.op for n in self.nodes))

    def __iter__(self) -> Iterator[Node]:
        return iter(self.nodes)

    def __len__(self) -> int:
        return len(self.nodes)

    def __str__(self) -> str:
        lines = [f"Graph({len(self.inputs)} inputs, {len(self.nodes)} nodes, {len(self.outputs)} outputs)"]
        for i, spec in enumerate(self.inputs):
            lines.append(f"  input {i}: {spec}")
        for i, n in enumerate(self.nodes):
            ins = ", ".join(str(e) for e in n.inputs)
            outs = ", ".join(f"{s.dtype.name}{list(s.shape) if s.shape is not None else '[?]'}" for s in n.outputs)
            lines.append(f"  node {i}: {n.op}({ins}) -> {outs}")
        lines.append("  outputs: " + ", ".join(str(e) for e in self.outputs))
        return "\n".join(lines)

    # -- checking ------------------------------------------------------------

    def validate(self, check_ops: bool = True) -> Graph:
        """Check the graph's structure; returns the graph, raises :class:`GraphError`.

        Checks every edge (its kind, that it points to an existing input,
        constant, variable or an EARLIER node's existing output: a forward edge
        is reported as a cycle when the nodes form one), the output structure,
        and the specs.  With ``check_ops`` (the default) every op must be
        registered and every node's input and output counts must agree with its
        OpDef and attrs; a ``Ref`` input must come from a variable.
        """
        self._check_containers()
        for i, node in enumerate(self.nodes):
            self._check_node(i, node)
        for k, edge in enumerate(self.outputs):
            self._check_edge(edge, len(self.nodes), f"graph output {k}")
        self._check_structure()
        if check_ops:
            self._check_ops()
        return self

    def _check_containers(self) -> None:
        for name, value, kind in (
            ("inputs", self.inputs, list), ("nodes", self.nodes, list), ("outputs", self.outputs, list),
            ("constants", self.constants, list), ("variables", self.variables, list),
            ("variable_names", self.variable_names, list),
        ):
            if not isinstance(value, kind):
                raise GraphError(f"graph: {name} must be a list, got {type(value).__name__}")
        for k, spec in enumerate(self.inputs):
            if not isinstance(spec, TensorSpec):
                raise GraphError(f"graph: input {k} must be a TensorSpec, got {type(spec).__name__}")
        for k, c in enumerate(self.constants):
            if not isinstance(c, np.ndarray):
                raise GraphError(f"graph: constant {k} must be a numpy array, got {type(c).__name__}")
        for k, v in enumerate(self.variables):
            if not isinstance(v, Variable):
                raise GraphError(f"graph: variable {k} must be an ok.Variable, got {type(v).__name__}")
        if len(self.variable_names) != len(self.variables):
            raise GraphError(
                f"graph: {len(self.variables)} variables but {len(self.variable_names)} variable names"
            )
        for k, e in enumerate(self.outputs):
            if not isinstance(e, Edge):
                raise GraphError(f"graph: output {k} must be an Edge, got {type(e).__name__}")

    def _check_node(self, i: int, node: Node) -> None:
        if not isinstance(node, Node):
            raise GraphError(f"graph: node {i} must be a Node, got {type(node).__name__}", node=i)
        if not isinstance(node.op, str) or not node.op:
            raise GraphError(f"graph: node {i} has no op name (got {node.op!r})", node=i)
        if not isinstance(node.attrs, dict) or not all(isinstance(k, str) for k in node.attrs):
            raise GraphError(f"graph: node {i} ({node.op!r}): attrs must be a dict with str keys", node=i, op=node.op)
        for k, spec in enumerate(node.outputs):
            if not isinstance(spec, TensorSpec):
                raise GraphError(
                    f"graph: node {i} ({node.op!r}) output {k} must be a TensorSpec, got {type(spec).__name__}",
                    node=i, op=node.op,
                )
        for k, edge in enumerate(node.inputs):
            if not isinstance(edge, Edge):
                raise GraphError(
                    f"graph: node {i} ({node.op!r}) input {k} must be an Edge, got {type(edge).__name__}",
                    node=i, op=node.op,
                )
            self._check_edge(edge, i, f"node {i} ({node.op!r}) input {k}", node=i, op=node.op)

    def _check_edge(self, edge: Edge, before: int, where: str, **context: Any) -> None:
        """``edge`` must exist; a node edge must point to a node before ``before``."""
        kind, index = edge.kind, edge.index
        if kind not in EDGE_KINDS:
            raise GraphError(f"graph: {where} has an edge of unknown kind {kind!r}; expected one of {EDGE_KINDS}", **context)
        if not isinstance(index, int) or isinstance(index, bool) or not isinstance(edge.output, int):
            raise GraphError(f"graph: {where}: edge indices must be ints, got {edge!r}", **context)
        sizes = {"input": len(self.inputs), "const": len(self.constants), "var": len(self.variables)}
        if kind != "node":
            if not 0 <= index < sizes[kind] or edge.output != 0:
                raise GraphError(
                    f"graph: {where} is a dangling edge: {kind} {index} (output {edge.output}) does not exist; "
                    f"the graph has {sizes[kind]} {kind}{'s' if kind != 'const' else 'ants'}",
                    **context,
                )
            return
        if not 0 <= index < len(self.nodes):
            raise GraphError(
                f"graph: {where} is a dangling edge: node {index} does not exist (the graph has {len(self.nodes)} nodes)",
                **context,
            )
        if index >= before:
            cycle = self._cycle_through(index)
            if cycle:
                shown = [f"node {n} ({self.nodes[n].op!r})" for n in cycle]
                if len(shown) > 9:  # a long cycle: its ends, and how many nodes it runs through
                    shown = [*shown[:5], f"... ({len(cycle) - 8} more nodes)", *shown[-3:]]
                path = " -> ".join(shown)
                raise GraphError(f"graph: {where} closes a cycle (each node reads the next): {path}", **context)
            raise GraphError(
                f"graph: {where} reads node {index}, which comes later: nodes must be in topological order "
                "(every input from an earlier node)",
                **context,
            )
        n_out = len(self.nodes[index].outputs)
        if not 0 <= edge.output < n_out:
            raise GraphError(
                f"graph: {where} is a dangling edge: node {index} ({self.nodes[index].op!r}) has {n_out} outputs, "
                f"not an output {edge.output}",
                **context,
            )

    def _cycle_through(self, start: int) -> list[int]:
        """A cycle of node edges through ``start`` as a node path, or [] if none."""
        def reads(n: int) -> Iterator[int]:
            for e in self.nodes[n].inputs:
                if isinstance(e, Edge) and e.kind == "node" and isinstance(e.index, int) and 0 <= e.index < len(self.nodes):
                    yield e.index

        # Depth first without recursion: a long chain must not exhaust Python's stack.
        path: list[int] = [start]
        stack: list[Iterator[int]] = [reads(start)]
        seen: set[int] = set()
        while stack:
            n = next(stack[-1], None)
            if n is None:
                stack.pop()
                path.pop()
            elif n == start:
                return list(reversed([*path, start]))
            elif n not in seen:
                seen.add(n)
                path.append(n)
                stack.append(reads(n))
        return []

    def _check_structure(self) -> None:
        used: set[int] = set()

        def walk(s: Any, where: str) -> None:
            if isinstance(s, bool):
                raise GraphError(f"graph: output_structure{where} must index outputs with ints, got {s!r}")
            if isinstance(s, int):
                if not 0 <= s < len(self.outputs):
                    raise GraphError(
                        f"graph: output_structure{where} = {s} but the graph has {len(self.outputs)} outputs"
                    )
                used.add(s)
            elif isinstance(s, list):
                for k, v in enumerate(s):
                    walk(v, f"{where}[{k}]")
            elif isinstance(s, dict):
                for k, v in s.items():
                    if not isinstance(k, str):
                        raise GraphError(f"graph: output_structure{where} has a key {k!r} that is not a str")
                    walk(v, f"{where}[{k!r}]")
            elif s is not None:
                raise GraphError(
                    f"graph: output_structure{where} must be ints in lists and dicts, got {type(s).__name__}"
                )

        walk(self.output_structure, "")
        missing = sorted(set(range(len(self.outputs))) - used)
        if missing:
            raise GraphError(f"graph: outputs {missing} appear nowhere in output_structure")

    def _check_ops(self) -> None:
        from . import op_registry, plugins

        plugins.ensure_loaded()
        for i, node in enumerate(self.nodes):
            try:
                op_def = op_registry.get_op_def(node.op)
            except OpkernelError as err:
                raise GraphError(f"graph: node {i}: {err}", node=i, op=node.op) from err
            want_in = _flat_count(op_def.inputs, node, i)
            if len(node.inputs) != want_in:
                raise GraphError(
                    f"graph: node {i} ({node.op!r}) has {len(node.inputs)} inputs but op {node.op!r} takes "
                    f"{want_in} with these attrs ({', '.join(a.name for a in op_def.inputs)})",
                    node=i, op=node.op,
                )
            want_out = _flat_count(op_def.outputs, node, i)
            if len(node.outputs) != want_out:
                raise GraphError(
                    f"graph: node {i} ({node.op!r}) has {len(node.outputs)} outputs but op {node.op!r} gives "
                    f"{want_out} with these attrs",
                    node=i, op=node.op,
                )
            pos = 0
            for arg in op_def.inputs:
                width = _arg_width(arg, node, i)
                if arg.is_ref:
                    for e in node.inputs[pos : pos + width]:
                        if e.kind != "var":
                            raise GraphError(
                                f"graph: node {i} ({node.op!r}) input {arg.name!r} is a Ref input and must come "
                                f"from a variable, got {e}",
                                node=i, op=node.op,
                            )
                pos += width


def _arg_width(arg: Any, node: Node, i: int) -> int:
    attr = arg.type_list_attr or arg.number_attr
    if attr is None:
        return 1
    value = node.attrs.get(attr)
    if arg.type_list_attr:
        ok = isinstance(value, (list, tuple))
        n = len(value) if ok else -1  # type: ignore[arg-type]
    else:
        ok = bool(isinstance(value, (int, np.integer)) and not isinstance(value, bool) and value >= 0)
        n = int(value) if ok else -1  # type: ignore[arg-type]
    if not ok:
        raise GraphError(
            f"graph: node {i} ({node.op!r}) needs attr {attr!r} (the length of {arg.name!r}), got {value!r}",
            node=i, op=node.op,
        )
    return n


def _flat_count(args: Any, node: Node, i: int) -> int:
    return sum(_arg_width(a, node, i) for a in args)
