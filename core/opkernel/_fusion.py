"""Elementwise fusion for ``ok.function``: which nodes of a traced graph one backend call
can compute together.

A *group* is a set of elementwise nodes (one output, one or two inputs, each input of
the output's dtype and of its shape or broadcast to it) whose output shapes are one fully
known shape ``S``, whose kernels the backend says it can fuse (``Backend.fusable``), and
that the replay can run as one call at the place of the group's last node.  The backend
compiles each group's program (``Backend.fuse_elementwise``); a group it declines runs
node by node as before.

Grouping walks the bound nodes in their order and keeps one group open:
* a fusable node of the open group's shape and dtype joins it (connected to it or not:
  one pass over the elements computes both);
* a node that reads a value of the open group, or that is stateful (a Variable update:
  the group may read that Variable, and must read it before the update), closes the
  group first, so the group's call comes before it;
* any other node runs before the group's call (it reads nothing of the group);
* a fusable node of another shape or dtype closes the open group and opens its own.

Values of a group that nodes outside it (or the graph's outputs) read are the group's
outputs; the others never exist as arrays.  A group of one node is left alone.

Planned memory: an input of a group may be *donated* (``ElementwiseProgram.donated``),
so the backend can write a result into its array, when
* it has the group's shape and is the value of a fusable node (a group's output, or a
  node run alone: either way a new array, as ``Backend.fusable`` promises);
* every node that reads it is fusable (none keeps a reference or returns a view of it)
  and runs no later than the group's call; and
* it is not one of the graph's outputs (the caller's values are never written).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Sequence

from . import engine
from ._symbolic import graph_shapes
from .backend import Backend, ElementwiseProgram
from .errors import OpkernelError
from .graph import Edge, Graph
from .shapes import broadcast_layout

#: The limits of one group (``_native.fused`` holds programs up to these).
MAX_INPUTS, MAX_OUTPUTS, MAX_NODES = 16, 16, 32


@dataclass
class Group:
    """Nodes fused into one call, in graph order; ``inputs``: the edges it reads from
    outside (in slot order); ``outputs``: the nodes whose values leave it."""

    members: list[int] = field(default_factory=list)
    shape: tuple[int, ...] = ()
    dtype: Any = None
    inputs: list[Edge] = field(default_factory=list)
    layouts: list[tuple[int, int]] = field(default_factory=list)
    outputs: list[int] = field(default_factory=list)
    runner: Any = None
    ops: list[str] = field(default_factory=list)
    donated: list[int] = field(default_factory=list)

    @property
    def last(self) -> int:
        return self.members[-1]


def _candidate(graph: Graph, shapes: list[list[Any]], i: int, sig: Any, be: Backend) -> tuple[tuple[int, ...], Any] | None:
    """(shape, dtype) of node ``i`` when it may join a group, else None."""
    node = graph.nodes[i]
    kdef = sig.kernel
    if (type(sig) is not engine.Signature or kdef.backend != be.name or kdef.is_class or kdef.is_generic
            or sig.refs or sig.op_def.is_stateful or len(node.outputs) != 1 or not 1 <= len(node.inputs) <= 2
            or any(a.is_list for a in sig.op_def.inputs)):
        return None
    spec = shapes[i][0]
    if not spec.is_fully_defined() or spec.shape is None:
        return None
    out = tuple(int(d) for d in spec.shape)
    if not math.prod(out):
        return None
    dtype = spec.dtype
    for e in node.inputs:
        s = _edge_spec(graph, shapes, e)
        if s.dtype is not dtype or not s.is_fully_defined() or s.shape is None or broadcast_layout(s.shape, out) is None:
            return None
    if not be.fusable(kdef.impl, dtype):
        return None
    return out, dtype


def _edge_spec(graph: Graph, shapes: list[list[Any]], e: Edge) -> Any:
    return shapes[e.index][e.output] if e.kind == "node" else graph.spec_of(e)


def plan_groups(graph: Graph, steps: Sequence[tuple[int, Any]], be: Backend) -> list[Group]:
    """The groups of ``steps`` (bound live nodes, in order) that ``be`` compiled."""
    try:
        shapes = graph_shapes(graph)
    except OpkernelError:
        return []
    consumers: dict[int, set[int]] = {}
    for i, _ in steps:
        for e in graph.nodes[i].inputs:
            if e.kind == "node":
                consumers.setdefault(e.index, set()).add(i)
    returned = {e.index for e in graph.outputs if e.kind == "node"}
    position = {i: k for k, (i, _) in enumerate(steps)}
    fresh: set[int] = set()  # fusable nodes: their values are new arrays, their inputs kept by nothing
    groups: list[Group] = []
    open_: Group | None = None
    members: set[int] = set()

    def close() -> None:
        nonlocal open_
        if open_ is not None and len(open_.members) > 1:
            donate = engine.config.buffer_reuse
            group = _finish(graph, shapes, open_, consumers, returned, steps, be,
                            (fresh, position) if donate else None)
            if group is not None:
                groups.append(group)
        open_ = None
        members.clear()

    for i, sig in steps:
        node = graph.nodes[i]
        cand = _candidate(graph, shapes, i, sig, be)
        if cand is not None:
            fresh.add(i)
        if open_ is not None and cand is not None and cand == (open_.shape, open_.dtype) and len(open_.members) < MAX_NODES:
            open_.members.append(i)
            members.add(i)
            continue
        if open_ is not None and (sig.op_def.is_stateful or sig.refs
                                  or any(e.kind == "node" and e.index in members for e in node.inputs)):
            close()
        if cand is not None:
            close()
            open_ = Group(members=[i], shape=cand[0], dtype=cand[1])
            members.add(i)
    close()
    return groups


def _finish(graph: Graph, shapes: list[list[Any]], group: Group, consumers: dict[int, set[int]], returned: set[int],
            steps: Sequence[tuple[int, Any]], be: Backend,
            reuse: tuple[set[int], dict[int, int]] | None = None) -> Group | None:
    """The group's inputs, outputs and program, compiled by the backend (None: declined)."""
    inside = set(group.members)
    slot: dict[tuple[str, int, int], int] = {}
    instructions: list[tuple[Any, tuple[int, ...]]] = []
    sigs = dict(steps)
    for i in group.members:
        srcs = []
        for e in graph.nodes[i].inputs:
            if e.kind == "node" and e.index in inside:
                srcs.append(slot[("node", e.index, 0)])
                continue
            key = (e.kind, e.index, e.output)
            if key not in slot:
                slot[key] = len(group.inputs)
                group.inputs.append(e)
                lay = broadcast_layout(_edge_spec(graph, shapes, e).shape, group.shape)
                assert lay is not None
                group.layouts.append(lay)
            srcs.append(slot[key])
        instructions.append((sigs[i].kernel.impl, tuple(srcs)))
        slot[("node", i, 0)] = -1 - len(instructions)  # renumbered below, once the inputs are known
        group.ops.append(graph.nodes[i].op)
    n_in = len(group.inputs)
    if n_in > MAX_INPUTS:
        return None

    def number(s: int) -> int:
        return n_in + (-1 - s) - 1 if s < 0 else s

    program = [(impl, tuple(number(s) for s in srcs)) for impl, srcs in instructions]
    group.outputs = [i for i in group.members if i in returned or consumers.get(i, set()) - inside]
    if not group.outputs or len(group.outputs) > MAX_OUTPUTS:
        return None
    out_slots = [n_in + group.members.index(i) for i in group.outputs]
    donated: list[int] = []
    if reuse is not None:
        fresh, position = reuse
        call = position[group.last]
        size = math.prod(group.shape)
        for k, e in enumerate(group.inputs):
            if (e.kind == "node" and e.index in fresh and e.index not in returned and group.layouts[k] == (1, size)
                    and all(c in fresh and position[c] <= call for c in consumers.get(e.index, ()))):
                donated.append(k)
    group.donated = donated
    prog = ElementwiseProgram(
        dtype=group.dtype, shape=group.shape, layouts=tuple(group.layouts), instructions=tuple(program),
        outputs=tuple(out_slots), ops=tuple(group.ops), donated=tuple(donated),
    )
    group.runner = be.fuse_elementwise(prog)
    return group if group.runner is not None else None
