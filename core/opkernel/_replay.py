"""Replay for ``ok.function``: a :class:`ConcreteFunction` runs one traced graph.  Per
backend, on first use, every live node's kernel signature is bound once and the graph
is compiled into one straight-line Python function over native arrays; while a
GradientTape records, it runs node by node through the signatures' calls instead."""

from __future__ import annotations

import copy
import math
import threading
import time
from typing import Any, Callable, Sequence

from . import _fusion, engine, plugins
from . import kernels as kernel_registry
from ._context import CONFIG_LISTENERS
from ._symbolic import SymbolicTensor, _flat_result, _shape_text, _VariableArgument, graph_shapes
from .autodiff import RECORDING, active_tapes, canonical_handle
from .backend import Backend
from .dtypes import of_array
from .errors import InvalidArgumentError, OpkernelError, OpTypeError
from .graph import Edge, Graph, GraphError, TensorSpec
from .shapes import output_size_inputs
from .tensor import Tensor, Variable, update_lock

# ---------------------------------------------------------------- replay


#: Bumped when kernels or plugins change: plans bound before are bound again (the
#: engine drops its cached signatures then too).
_GENERATION = [0]


def _kernels_changed() -> None:
    _GENERATION[0] += 1


kernel_registry.on_change(_kernels_changed)
plugins.on_change(_kernels_changed)
CONFIG_LISTENERS.append(_kernels_changed)


class _Plan:
    """One graph bound to one backend: the compiled replay and what the tape path needs;
    ``groups``: the elementwise groups the replay computes in one call each (_fusion)."""

    __slots__ = ("backend", "replay", "steps", "consts", "lines", "generation", "groups")

    def __init__(
        self, backend: Backend, replay: Callable[..., Any], steps: list[Any], consts: list[Tensor], lines: dict[int, int],
        generation: int, groups: list[_fusion.Group] | None = None,
    ) -> None:
        self.backend = backend
        self.replay = replay
        self.steps = steps
        self.consts = consts
        self.lines = lines
        self.generation = generation
        self.groups = groups or []


class ConcreteFunction:
    """One graph, callable: ``cf(*tensors)`` runs it on the active backend.

    Any valid :class:`Graph` works, traced, built by hand or loaded from disk.
    Positional arguments are the graph's inputs in order (tensors, or host data
    converted to the input's dtype); the result is nested as
    ``graph.output_structure`` says.
    """

    def __init__(self, graph: Graph, name: str | None = None, structure: Any = None, validate: bool = True) -> None:
        if not isinstance(graph, Graph):
            raise OpTypeError(f"ConcreteFunction: expected an opkernel Graph, got {type(graph).__name__}")
        if validate:
            graph.validate()
        self.graph = graph
        self.name = name or "graph"
        self._structure = graph.output_structure if structure is None else structure
        self._plans: dict[Backend, _Plan] = {}
        self._lock = threading.Lock()
        #: What besides its tensors' specs an ok.function keyed this trace by (Python
        #: arguments, nesting, kernel labels); None for a graph run directly.
        self._trace_key: Any = None
        #: For a trace of an ok.function given Variables: per distinct Variable argument, the
        #: variable slot it feeds (None: the function did not use it); each call passes them.
        self._arg_slots: list[int | None] | None = None
        self.live_nodes = _live_nodes(graph)
        self._out_dtypes = [s.dtype for s in graph.output_specs]
        #: Per input: its dtype, and its shape as a tuple when fully known (compared as is),
        #: else a _PartialShape (compared dimension by dimension).
        self._in_checks = [
            (s.dtype, s.shape if s.is_fully_defined() else _PartialShape(s.shape)) for s in graph.inputs
        ]

    def __repr__(self) -> str:
        ins = ", ".join(str(s) for s in self.graph.inputs)
        return f"<ConcreteFunction {self.name}({ins}): {len(self.graph.nodes)} nodes>"

    @property
    def inputs(self) -> list[TensorSpec]:
        return self.graph.inputs

    @property
    def outputs(self) -> list[TensorSpec]:
        return self.graph.output_specs

    def __call__(self, *args: Any) -> Any:
        return self._call_flat(list(args))

    def bound(self, variables: Sequence[Variable]) -> ConcreteFunction:
        """This trace with its Variable arguments bound to ``variables`` (which it then
        captures, as a trace captures the Variables its function closes over)."""
        if self._arg_slots is None:
            return self
        graph = self.graph
        captured = list(graph.variables)
        names = list(graph.variable_names)
        for j, k in enumerate(self._arg_slots):
            if k is not None:
                captured[k] = variables[j]
                names[k] = variables[j].name or names[k]
        g = Graph(inputs=graph.inputs, nodes=graph.nodes, outputs=graph.outputs, output_structure=graph.output_structure,
                  constants=graph.constants, variables=captured, variable_names=names)
        cf = ConcreteFunction(g, name=self.name, structure=self._structure, validate=False)
        cf._trace_key = self._trace_key
        return cf

    # -- calling -----------------------------------------------------------------

    def _call_flat(self, args: list[Any], variables: Sequence[Variable] = ()) -> Any:
        graph = self.graph
        fed: list[Variable] = []
        if self._arg_slots is not None:
            fed = self._fed(variables)
        if engine.TRACER.get() is not None:
            return _rebuild(self._structure, self._inline(args, fed))
        be = engine.ACTIVE.get() or engine.default_backend()
        if len(args) != len(graph.inputs):
            raise InvalidArgumentError(
                f"function {self.name!r} takes {len(graph.inputs)} tensors "
                f"({', '.join(str(s) for s in graph.inputs)}), got {len(args)}"
            )
        tensors = args
        for x, (dt, shape) in zip(args, self._in_checks):  # the usual call: tensors that fit, here
            if x.__class__ is not Tensor or x._dtype is not dt or x._backend is not be or (
                x._value.shape != shape if shape.__class__ is tuple else not _shape_fits(shape, x._value.shape)
            ):
                tensors = [self._checked(k, x, be) for k, x in enumerate(args)]
                break
        plan = self._plans.get(be)
        if plan is None or plan.generation != _GENERATION[0]:
            plan = self._bind(be)
        for v, slot in zip(fed, self._arg_slots or ()):
            if slot is not None and v._backend is not be:
                raise InvalidArgumentError(
                    f"function {self.name!r} is given variable {v.name!r}, which lives on backend {v.backend!r}, "
                    f"but runs on {be.name!r}; make the variable on {be.name!r}"
                )
        if (RECORDING[0] and active_tapes()) or engine.PROFILERS:
            flat = self._run_nodes(plan, tensors, fed)
        else:
            try:
                values = plan.replay(*[t._value for t in tensors], *fed)
            except Exception as e:
                raise self._failed(e, plan) from e
            flat = [v if v.__class__ is Tensor else Tensor(v, dt, be) for v, dt in zip(values, self._out_dtypes)]
        return _rebuild(self._structure, flat)

    def _fed(self, variables: Sequence[Variable]) -> list[Variable]:
        """The distinct Variable arguments of a call of this trace, checked against its slots."""
        slots = self._arg_slots
        assert slots is not None
        if len(variables) != len(slots):
            raise InvalidArgumentError(
                f"function {self.name!r} is a trace that takes {len(slots)} Variable argument(s); call the "
                "ok.function, or bind the Variables with get_concrete_function(...) or .bound(variables)"
            )
        return list(variables)

    def _variable(self, index: int, fed: Sequence[Variable]) -> Any:
        """Variable slot ``index``: the captured Variable, or the one fed by this call."""
        v = self.graph.variables[index]
        return fed[v.index] if isinstance(v, _VariableArgument) else v

    def _checked(self, k: int, arg: Any, be: Backend) -> Tensor:
        spec = self.graph.inputs[k]
        x: Tensor = arg if isinstance(arg, Tensor) else engine.to_tensor(arg, spec.dtype, be.name)
        if isinstance(x, SymbolicTensor):
            raise InvalidArgumentError(f"function {self.name!r}: input {k} is a placeholder of another trace")
        if x._dtype is not spec.dtype or not _shape_fits(spec.shape, x._value.shape):
            raise InvalidArgumentError(
                f"function {self.name!r}: input {k} must be {spec.dtype.name} of shape {_shape_text(spec.shape)}, "
                f"got {x._dtype.name} of shape {_shape_text(tuple(x._value.shape))}"
            )
        if x._backend is not be:
            if engine.config.transfer_policy == "copy":
                engine.config.transfers += 1
                return engine.transfer(x, be.name)
            raise InvalidArgumentError(
                f"function {self.name!r}: input {k} lives on backend {x.backend!r} but the function runs on "
                f"{be.name!r}. Move it with x.to({be.name!r}), or set ok.config.transfer_policy = 'copy'."
            )
        return x


    def _failed(self, e: Exception, plan: _Plan) -> Exception:
        """The error of a failed replay, naming the node that failed."""
        tb = e.__traceback__
        node = None
        while tb is not None:
            if tb.tb_frame.f_code.co_filename == f"<opkernel replay {self.name}>":
                node = plan.lines.get(tb.tb_lineno)
            tb = tb.tb_next
        if node is None:
            return e
        return self._node_error(e, plan.backend, node)

    def _node_error(self, e: Exception, be: Backend, node: int) -> Exception:
        """``e`` (raised by node ``node``'s kernel) as the engine reports it, led by the
        function, the node and the op; the same class, so callers catch what they would."""
        op = self.graph.nodes[node].op
        err = engine.translated(e, be, op)
        where = f"function {self.name!r}, node {node} (op {op!r}): "
        if isinstance(err, OpkernelError):
            err = copy.copy(err)
            err.message = where + err.message
            err.args = (err.message,)
            return err
        return InvalidArgumentError(f"{where}{type(e).__name__}: {e}", op=op)

    def _inline(self, args: list[Any], fed: Sequence[Variable] = ()) -> list[Tensor]:
        """Called while another function is traced: every live node is called as an op,
        so the tracer records it into the graph being traced."""
        graph = self.graph
        if len(args) != len(graph.inputs):
            raise InvalidArgumentError(f"function {self.name!r} takes {len(graph.inputs)} tensors, got {len(args)}")
        values: dict[tuple[int, int], Any] = {}
        consts: list[Any] = list(graph.constants)

        def get(e: Edge) -> Any:
            if e.kind == "node":
                return values[(e.index, e.output)]
            if e.kind == "input":
                return args[e.index]
            if e.kind == "const":
                return consts[e.index]
            return self._variable(e.index, fed)

        for i in self.live_nodes:
            node = graph.nodes[i]
            op = engine.op_handle(node.op)
            lengths = engine.input_lengths(op.op_def, node.attrs)
            grouped = engine.group_flat(op.op_def, [get(e) for e in node.inputs], lengths)
            result = engine.execute(op, grouped, dict(node.attrs), node.label)
            for k, t in enumerate(_flat_result(result)):
                values[(i, k)] = t
        identity = engine.op_handle("Identity")
        return [  # a variable output is its value now, as a replay returns it: not the variable
            engine.execute(identity, [get(e)], {}) if e.kind == "var" else
            engine.to_tensor(get(e)) if e.kind == "const" else get(e)
            for e in graph.outputs
        ]

    def _run_nodes(self, plan: _Plan, tensors: list[Tensor], fed: Sequence[Variable] = ()) -> list[Tensor]:
        """The replay node by node through the engine's signature calls, so tapes record
        every op (and profilers see it)."""
        graph, be = self.graph, plan.backend
        values: dict[tuple[int, int], Tensor] = {}

        def get(e: Edge) -> Tensor:
            if e.kind == "node":
                return values[(e.index, e.output)]
            if e.kind == "input":
                return tensors[e.index]
            if e.kind == "const":
                return plan.consts[e.index]
            return self._variable(e.index, fed)  # type: ignore[no-any-return]

        # Without a recording tape (a profile only), fused groups run as in the replay, one
        # profile row each: "Fused(Mul+Erf+...)"; a tape needs every node's op.
        fused = {} if (RECORDING[0] and active_tapes()) else {g.last: g for g in plan.groups}
        skipped = {i for g in fused.values() for i in g.members[:-1]}
        for i, sig in plan.steps:
            if i in skipped:
                continue
            node = graph.nodes[i]
            group = fused.get(i)
            if group is not None:
                try:
                    for n, t in zip(group.outputs, _run_group(group, [get(e) for e in group.inputs], be)):
                        values[(n, 0)] = t
                except Exception as err:
                    raise self._node_error(err, be, i) from err
                continue
            ins = [get(e) for e in node.inputs]
            try:
                result = engine.profiled(node.op, sig, ins, be) if engine.PROFILERS else sig.call(*ins)
            except Exception as err:
                raise self._node_error(err, be, i) from err
            for k, t in enumerate(_flat_result(result)):
                values[(i, k)] = t
        out: list[Tensor] = []
        for e in graph.outputs:
            t = get(e)
            out.append(Tensor(t._value, t._dtype, t._backend) if isinstance(t, Variable) else t)
        return out

    # -- binding -----------------------------------------------------------------

    def _bind(self, be: Backend) -> _Plan:
        with self._lock:
            plan = self._plans.get(be)
            if plan is None or plan.generation != _GENERATION[0]:
                plan = self._plans[be] = _compile(self, be)
            return plan


def _run_group(group: _fusion.Group, ins: list[Tensor], be: Backend) -> list[Tensor]:
    """A fused group's call on tensors, reported to the active profilers as one row."""
    sync = any(p.synchronize for p in engine.PROFILERS)
    if sync:
        be.synchronize()
    start = time.perf_counter()
    arrays = group.runner(*[t._value for t in ins])
    if sync:
        be.synchronize()
    elapsed = time.perf_counter() - start
    outs = [Tensor(a, group.dtype, be) for a in arrays]
    name = f"Fused({'+'.join(group.ops)})"
    for p in list(engine.PROFILERS):
        p.add(be.name, name, elapsed, sum(int(getattr(a, "nbytes", 0)) for a in arrays))
    return outs


class _PartialShape:
    """A spec's shape with unknown dimensions (never a tuple, so never equal to a shape)."""

    __slots__ = ("dims",)

    def __init__(self, dims: tuple[int | None, ...] | None) -> None:
        self.dims = dims


def _shape_fits(spec: Any, shape: tuple[int, ...]) -> bool:
    if isinstance(spec, _PartialShape):
        spec = spec.dims
    if spec is None:
        return True
    return len(spec) == len(shape) and all(a is None or a == b for a, b in zip(spec, shape))


def _rebuild(structure: Any, flat: list[Tensor]) -> Any:
    if structure is None:
        return None
    if isinstance(structure, int):
        return flat[structure]
    if isinstance(structure, dict):
        return {k: _rebuild(v, flat) for k, v in structure.items()}
    if isinstance(structure, tuple):
        if len(structure) == 3 and structure[0] == "namedtuple" and isinstance(structure[1], type):
            return structure[1](*[_rebuild(v, flat) for v in structure[2]])
        return tuple(_rebuild(v, flat) for v in structure)
    return [_rebuild(v, flat) for v in structure]


def _live_nodes(graph: Graph) -> list[int]:
    """Nodes an output or a stateful op (a Ref update, a random op) depends on, in order."""
    from . import op_registry, plugins

    plugins.ensure_loaded()
    live: set[int] = set()
    stack = [e.index for e in graph.outputs if e.kind == "node"]
    for i, node in enumerate(graph.nodes):
        try:
            stateful = op_registry.get_op_def(node.op).is_stateful
        except OpkernelError:
            stateful = True  # reported when the node is bound
        if stateful:
            stack.append(i)
    while stack:
        i = stack.pop()
        if i in live:
            continue
        live.add(i)
        stack.extend(e.index for e in graph.nodes[i].inputs if e.kind == "node")
    return sorted(live)


def _node_signature(graph: Graph, i: int, be: Backend, fname: str) -> engine.Signature:
    """Node ``i``'s kernel signature on ``be``: its attrs checked against the OpDef,
    its input dtypes against the specs of its edges; from the op handle's cache."""
    node = graph.nodes[i]
    where = f"function {fname!r}, node {i} (op {node.op!r})"
    op = engine.op_handle(node.op)
    op_def = op.op_def
    bound: dict[str, Any] = {}
    for name, value in node.attrs.items():
        try:
            bound[name] = op_def.coerce_attr(name, value)
        except OpkernelError as err:
            raise GraphError(f"{where}: {err}", op=node.op, node=i) from err
    for attr in op_def.attrs:
        if attr.name not in bound:
            if not attr.has_default:
                raise GraphError(f"{where}: missing attr {attr.name!r} of type {attr.type}", op=node.op, node=i)
            bound[attr.name] = attr.default
    lengths = engine.input_lengths(op_def, bound)
    in_dtypes = [dt for arg, n in zip(op_def.inputs, lengths) for dt in engine.arg_dtypes(arg, n, bound)]
    for k, (e, want) in enumerate(zip(node.inputs, in_dtypes)):
        got = graph.spec_of(e).dtype
        if got is not want:
            raise GraphError(f"{where}: input {k} ({e}) is {got.name}, the op expects {want.name}", op=node.op, node=i)
    out_dtypes, _ = engine.output_dtypes(op_def, bound)
    for k, (spec, want) in enumerate(zip(node.outputs, out_dtypes)):
        if spec.dtype is not want:
            raise GraphError(f"{where}: output {k} is declared {spec.dtype.name}, the op gives {want.name}", op=node.op, node=i)
    key = (be, node.label, *in_dtypes, *engine.hashable_items(bound))
    sig = op.cache.get(key)
    if sig is None:
        with op.build_lock:
            sig = op.cache.get(key)
            if sig is None:
                generation = op.generation
                sig = engine.build_signature(op, bound, be, node.label)
                with engine.cache_lock:
                    if op.generation == generation:
                        op.cache[key] = sig
    return sig


def _statically_small(graph: Graph) -> set[int]:
    """Nodes whose outputs graph shape inference sizes exactly (from the input specs and
    the constants) at most ``CHEAP_BYTES`` in all: the engine's output-size guard (of
    Fill, Reshape, Pad, ...) lets such calls through, so their replay skips it.  A graph
    that shape inference refuses keeps every guard (its replay reports the error)."""
    from ._bounds import CHEAP_BYTES  # only graphs are sized here

    try:
        shapes = graph_shapes(graph)
    except OpkernelError:
        return set()
    small: set[int] = set()
    for i, specs in enumerate(shapes):
        total = 0
        for spec in specs:
            if not spec.is_fully_defined():
                break
            total += math.prod(d for d in spec.shape or () if d is not None) * spec.dtype.size
        else:
            if total <= CHEAP_BYTES:
                small.add(i)
    return small


def _outputs(result: Any, n: int, op_def: Any) -> Any:
    """A several-output kernel's result, checked: a tuple or list of ``n`` values."""
    if (result.__class__ is tuple or result.__class__ is list) and len(result) == n:
        return result
    engine.flatten_outputs(op_def, result, [None] * n)  # raises the kernel-contract error
    return result


def _const(value: Any, be: Backend) -> Tensor:
    """A graph constant as a tensor on ``be``; a resource variable's handle as the variable's
    own handle tensor, so a tape watching the variable sees the replay's reads."""
    known = canonical_handle(value, be)
    return known if known is not None else Tensor(be.from_numpy(value), of_array(value), be)


def _compile(cf: ConcreteFunction, be: Backend) -> _Plan:
    """Bind every live node on ``be`` and generate the straight-line replay."""
    graph, fname = cf.graph, cf.name
    for k, v in enumerate(graph.variables):
        if isinstance(v, _VariableArgument):
            continue  # fed by each call, checked there
        if v._backend is not be:
            raise InvalidArgumentError(
                f"function {fname!r} captures variable {graph.variable_names[k]!r}, which lives on backend "
                f"{v.backend!r}, but runs on {be.name!r}; make the variable on {be.name!r} (or trace the function "
                "there)"
            )
    generation = _GENERATION[0]  # read first: a change while binding makes the plan stale at once
    # A resource variable's handle replays as the variable's own handle tensor (tapes know it).
    consts = [_const(c, be) for c in graph.constants]
    small = _statically_small(graph)
    steps = []
    for i in cf.live_nodes:
        try:
            steps.append((i, _node_signature(graph, i, be, fname)))
        except GraphError:
            raise
        except OpkernelError as err:  # no kernel here: the engine's error, led by the node
            raise cf._node_error(err, be, i) from err
    native: Any = (be.array_types or (None,))[0]
    env: dict[str, Any] = {
        "Tensor": Tensor, "be": be, "conv": be.as_output, "native": native, "_flat": _flat_result, "_outputs": _outputs, "_update_lock": update_lock,
    }
    for k, c in enumerate(consts):
        env[f"c{k}"] = c._value
    for k, v in enumerate(graph.variables):
        if not isinstance(v, _VariableArgument):
            env[f"v{k}"] = v
    last_use: dict[str, int] = {}
    names: dict[tuple[int, int], str] = {}

    def ref(e: Edge, native_value: bool) -> str:
        if e.kind == "node":
            return names[(e.index, e.output)]
        if e.kind == "input":
            return f"x{e.index}"
        if e.kind == "const":
            return f"c{e.index}"
        return f"v{e.index}._value" if native_value else f"v{e.index}"

    fused = _fusion.plan_groups(graph, steps, be) if engine.config.graph_fusion else []
    group_of = {i: g for g, group in enumerate(fused) for i in group.members}
    groups: list[tuple[int, list[str], list[str]]] = []
    for step, (i, sig) in enumerate(steps):
        node = graph.nodes[i]
        outs = [f"a{i}_{k}" for k in range(len(node.outputs))]
        for k, n in enumerate(outs):
            names[(i, k)] = n
        g = group_of.get(i)
        if g is not None:
            # A fused group runs as one call where its last node stood; its other nodes
            # emit nothing, and its values no node outside reads are never arrays.
            group = fused[g]
            if i != group.last:
                groups.append((i, [], []))
                continue
            env[f"g{g}"] = group.runner
            outs = [names[(n, 0)] for n in group.outputs]
            groups.append((i, [f"{', '.join(outs)}, = g{g}({', '.join(ref(e, True) for e in group.inputs)})"], outs))
            for e in group.inputs:
                if e.kind == "node":
                    last_use[names[(e.index, e.output)]] = step
            continue
        kdef = sig.kernel
        simple = (
            type(sig) is engine.Signature and kdef.backend == be.name  # not a fallback to another backend
            and not kdef.is_class and not kdef.is_generic and bool(outs)
            and (i in small or not output_size_inputs(sig.op_def.shape_fn))
            and not (kdef.host_memory and not be.host_memory_is_native)
            and not any(a.is_list for a in sig.op_def.inputs)
            and not any(a.is_list for a in sig.op_def.outputs)
        )
        code: list[str] = []
        if simple:
            # The kernel called directly, as the engine's compiled fast calls do: a Ref
            # input's variable is made private first (copy-on-write) and its version bumped.
            fn = kdef.impl
            kw = engine.kernel_kwargs(fn, sig.attrs)
            env[f"f{i}"], env[f"k{i}"], env[f"m{i}"] = fn, kw, sig.op_def
            refs = [node.inputs[p].index for p in sig.refs]
            update = [f"v{r}._unshare()" for r in refs]
            args = [ref(e, True) for e in node.inputs] + ([f"**k{i}"] if kw else [])
            call = f"f{i}({', '.join(args)})"
            if len(outs) == 1:
                update.append(f"{outs[0]} = {call}")
            else:
                update.append(f"{', '.join(outs)}, = _outputs({call}, {len(outs)}, m{i})")
            update += [f"v{r}._version += 1" for r in refs]
            if refs:  # an update is atomic per variable, as in eager calls (tensor.update_lock)
                code.append(f"with _update_lock({', '.join(f'v{r}' for r in refs)}):")
                update = ["    " + line for line in update]
            code += update
            for k, o in enumerate(outs):
                dt = sig.out_dtypes[k]
                env[f"d{i}_{k}"], env[f"n{i}_{k}"] = dt, dt.np
                code.append(f"if type({o}) is not native or {o}.dtype is not n{i}_{k}: {o} = conv({o}, d{i}_{k})")
        else:
            # Anything else (Ref updates, class and generic kernels, list arguments, several
            # outputs, ops sized by input values) goes through the signature's own call.
            env[f"s{i}"] = sig.call
            env[f"t{i}"] = [graph.spec_of(e).dtype for e in node.inputs]
            wrapped = [ref(e, False) if e.kind == "var" else f"Tensor({ref(e, True)}, t{i}[{k}], be)" for k, e in enumerate(node.inputs)]
            call = f"_flat(s{i}({', '.join(wrapped)}))"
            if outs:
                code.append(f"{', '.join(outs)}, = [t._value for t in {call}]")
            else:
                code.append(call)
        groups.append((i, code, outs))
        for e in node.inputs:
            if e.kind == "node":
                last_use[names[(e.index, e.output)]] = step
    returns: list[str] = []
    for k, e in enumerate(graph.outputs):
        if e.kind == "var":
            returns.append(f"Tensor(v{e.index}._value, v{e.index}._dtype, be)")
        else:
            returns.append(ref(e, True))
        if e.kind == "node":
            last_use[names[(e.index, e.output)]] = len(steps)
    dead_after: dict[int, list[str]] = {}
    for name, s_last in last_use.items():
        dead_after.setdefault(s_last, []).append(name)
    params = [f"x{k}" for k in range(len(graph.inputs))]
    # then each distinct Variable argument, in order (one the function does not use is a dummy)
    params += [f"v{k}" if k is not None else f"_unused{j}" for j, k in enumerate(cf._arg_slots or ())]
    lines = [f"def replay({', '.join(params)}):"]
    line_nodes: dict[int, int] = {}
    for step, (i, code, outs) in enumerate(groups):
        for text in code:
            lines.append("    " + text)
            line_nodes[len(lines)] = i
        # Values no later step reads are dropped at once: a view of a variable held past its
        # last use would make the next in-place update copy the variable.  (This step's own
        # outputs, not a scan of every name: that made the first call quadratic in nodes.)
        gone = dead_after.get(step, []) + [n for n in outs if n not in last_use]
        if gone:
            lines.append(f"    del {', '.join(gone)}")
    lines.append(f"    return ({''.join(r + ', ' for r in returns)})")
    filename = f"<opkernel replay {fname}>"
    namespace = dict(env)
    exec(compile("\n".join(lines) + "\n", filename, "exec"), namespace)
    return _Plan(be, namespace["replay"], steps, consts, line_nodes, generation, fused)


