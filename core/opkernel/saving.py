"""Saving and loading graphs: ``ok.save``, ``ok.load`` and the ``.okg`` format.

A saved graph is one zip archive (docs/saved-graphs.md is the format's reference):

    graph.json         the graphs, every op's provider and interface, the variables' table
    tensors/*.npy      constants and variable values, in numpy's .npy format (no pickles)

Loading never runs code from the file: ``graph.json`` is JSON, the tensors are raw
little-endian data behind a ``.npy`` header, read with ``allow_pickle=False`` rules.
Before anything runs, every op the graph names is checked against what is installed:
a missing op names the distribution that provided it and the version it was saved
with; an op whose definition changed since is compared with TensorFlow's
compatibility rules (:func:`opkernel.compat.check`) and refused when a change breaks.
Every structural problem of a file (truncation, a wrong format version, unknown attr
types, dangling edges, cycles, wrong input counts or dtypes, sizes the file does not
hold or the host cannot give) is a :class:`~opkernel.errors.GraphFormatError` naming
the file and where in it the problem is.
"""

from __future__ import annotations

import base64
import json
import math
import os
import re
import secrets
import zipfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np

from ._provenance import Provider
from .dtypes import DType, as_dtype, of_array
from .errors import (
    IncompatibleOpError,
    InvalidArgumentError,
    OpkernelError,
    OpNotFoundError,
    ResourceExhaustedError,
)
from .hostmem import host_available_bytes
from ._saved_format import (  # the file format: constants, limits, the archive, the parsed document
    _INT64_MAX,
    _INT64_MIN,
    FORMAT,
    FORMAT_VERSION,
    GRAPH_MEMBER,
    JSON_EXPANSION,
    MAX_JSON_BYTES,
    MAX_MEMBERS,
    MAX_NESTING,
    MAX_NODE_INPUTS,
    MAX_NPY_HEADER,
    MAX_RANK,
    TENSOR_DIR,
    _amount,
    _Archive,
    _Bad,
    _Document,
    _document,
    _dtype,
    _fail,
    _fingerprint,
    _int,
    _kind,
    _list,
    _obj,
    _SavedGraph,
    _SavedNode,
    _SavedOp,
    _shape,
    _storage,
    _str,
)

__all__ = [
    "FORMAT",
    "FORMAT_VERSION",
    "JSON_EXPANSION",
    "MAX_JSON_BYTES",
    "MAX_MEMBERS",
    "MAX_NESTING",
    "MAX_NODE_INPUTS",
    "MAX_NPY_HEADER",
    "MAX_RANK",
    "LoadedFunction",
    "OpStatus",
    "SavedGraphInfo",
    "inspect",
    "load",
    "save",
]

#: The ``format`` field of every graph.json, and the version this opkernel writes and reads.


# ------------------------------------------------------------------ writing


def _spec_json(spec: Any) -> dict[str, Any]:
    shape = None if spec.shape is None else [None if d is None else int(d) for d in spec.shape]
    return {"shape": shape, "dtype": as_dtype(spec.dtype).name, "name": spec.name}


def _edge_json(edge: Any) -> list[Any]:
    return [edge.kind, int(edge.index), int(edge.output)]


def _encode_value(attr_type: str, value: Any) -> Any:
    if attr_type.startswith("list("):
        return [_encode_value(attr_type[5:-1], v) for v in value]
    if attr_type == "type":
        return as_dtype(value).name
    if attr_type == "shape":
        from .shapes import as_shape

        shape = as_shape(value)
        return None if shape.rank is None else shape.as_list()
    if attr_type == "tensor":
        array = np.asarray(value)
        dtype = as_dtype(array.dtype)
        if dtype.is_complex:
            flat: list[Any] = [[_encode_float(float(v.real)), _encode_float(float(v.imag))] for v in array.ravel()]
        elif dtype.is_floating:
            flat = [_encode_float(float(v)) for v in array.ravel()]
        else:
            flat = array.ravel().tolist()
        return {"dtype": dtype.name, "shape": list(array.shape), "values": flat}
    if attr_type == "float":
        return _encode_float(float(value))
    if attr_type == "bytes":
        return base64.b64encode(bytes(value)).decode("ascii")
    if attr_type == "int":
        return int(value)
    if attr_type == "bool":
        return bool(value)
    return value


def _encode_float(value: float) -> Any:
    return value if math.isfinite(value) else repr(value)  # "inf", "-inf", "nan": JSON has no literal


def _attr_type(op_def: Any, name: str, value: Any) -> str:
    declared: str = op_def.attr(name).type
    if isinstance(value, (bytes, bytearray)):
        return "bytes"
    if declared.startswith("list(") and value and all(isinstance(v, (bytes, bytearray)) for v in value):
        return "list(bytes)"
    return declared


def _dtype_of(value: Any) -> DType:
    dtype = getattr(value, "dtype", None)
    return dtype if isinstance(dtype, DType) else of_array(np.asarray(value))


class _Writer:
    """Collects one file's JSON and tensors."""

    def __init__(self) -> None:
        self.tensors: dict[str, np.ndarray[Any, Any]] = {}
        self.ops: dict[str, dict[str, Any]] = {}
        self.variables: list[dict[str, Any]] = []
        self.variable_ids: dict[int, int] = {}

    def tensor(self, prefix: str, value: Any, dtype: Any) -> dict[str, Any]:
        dt = as_dtype(dtype)
        array = np.asarray(value)  # not ascontiguousarray: it makes a 0-d array 1-d
        stored = array.view(np.uint16) if dt.name == "bfloat16" else array
        stored = np.require(stored.astype(_storage(dt), copy=False), requirements="C")
        member = f"{TENSOR_DIR}{prefix}.npy"
        self.tensors[member] = stored
        return {"dtype": dt.name, "shape": list(array.shape), "data": member}

    def variable(self, var: Any, name: str | None) -> int:
        key = id(var)
        if key not in self.variable_ids:
            index = len(self.variables)
            entry = self.tensor(f"var{index}", var.numpy(), var.dtype)
            entry.update(name=name if name is not None else var.name, trainable=bool(var.trainable))
            self.variables.append(entry)
            self.variable_ids[key] = index
        return self.variable_ids[key]

    def op(self, name: str, provider: Provider | None) -> Any:
        from . import compat, plugins
        from .op_registry import get_op_def

        plugins.ensure_loaded()
        op_def = get_op_def(name)
        if name not in self.ops:
            prov = provider or op_def.provider
            interface = compat.interface(op_def)
            self.ops[name] = {
                "provider": None if prov is None else
                {"plugin": prov.plugin, "distribution": prov.distribution, "version": prov.version},
                "fingerprint": _fingerprint(interface),
                "interface": interface,
            }
        return op_def

    def graph(self, graph: Any, number: int) -> dict[str, Any]:
        names = list(getattr(graph, "variable_names", None) or [])
        nodes = []
        for k, node in enumerate(graph.nodes):
            op_def = self.op(node.op, node.provider)
            attrs = {}
            for name, value in node.attrs.items():
                attr_type = _attr_type(op_def, name, value)
                attrs[name] = {"type": attr_type, "value": _encode_value(attr_type, value)}
            nodes.append({
                "op": node.op,
                "attrs": attrs,
                "inputs": [_edge_json(e) for e in node.inputs],
                "outputs": [_spec_json(s) for s in node.outputs],
                "label": node.label,
            })
        return {
            "inputs": [_spec_json(s) for s in graph.inputs],
            "nodes": nodes,
            "outputs": [_edge_json(e) for e in graph.outputs],
            "output_structure": graph.output_structure,
            "constants": [self.tensor(f"f{number}_c{k}", c, _dtype_of(c)) for k, c in enumerate(graph.constants)],
            "variables": [self.variable(v, names[k] if k < len(names) else None) for k, v in enumerate(graph.variables)],
        }


def _graphs_of(obj: Any) -> tuple[str, list[Any]]:
    """The graphs ``obj`` holds: a Graph, a ConcreteFunction, or an ``ok.function``'s
    traces (one with an ``input_signature`` is traced for it if it was never called)."""
    from .function import ConcreteFunction, Function
    from .graph import Graph

    if isinstance(obj, Graph):
        return "graph", [obj]
    if isinstance(obj, ConcreteFunction):
        _refuse_variable_arguments([obj], obj.name)
        return "function", [obj.graph]
    if isinstance(obj, Function):
        traces = obj.concrete_functions
        if not traces and obj.input_signature is not None:
            traces = [obj.get_concrete_function(*obj.input_signature)]
        if not traces:
            raise InvalidArgumentError(
                f"ok.save: the function {obj.__name__!r} has not been traced yet; call it once (or give it an "
                "input_signature) so there is a graph to save"
            )
        _refuse_variable_arguments(traces, obj.__name__)
        for k, cf in enumerate(traces):
            for other in traces[:k]:
                if cf._trace_key != other._trace_key and _overlap(cf.inputs, other.inputs):
                    shown = ", ".join(f"{s.dtype.name}{_show_shape(s.shape)}" for s in cf.inputs) or "no tensors"
                    raise InvalidArgumentError(
                        f"ok.save: the function {obj.__name__!r} has traces that take the same tensors ({shown}) "
                        "but were traced for different Python arguments, argument nesting, variables or kernel "
                        "labels; a loaded function is called with tensors only and could not tell them apart. "
                        "Save the trace you mean: ok.save(fn.get_concrete_function(...), path)"
                    )
        return "function", [cf.graph for cf in traces]
    raise InvalidArgumentError(
        f"ok.save: expected a traced function (ok.function), a ConcreteFunction or a Graph, got {type(obj).__name__}"
    )


def _refuse_variable_arguments(traces: Sequence[Any], name: str) -> None:
    """A saved graph captures its Variables' values: a trace fed Variables by its arguments
    has none to capture until it is bound to some."""
    if any(cf._arg_slots for cf in traces):
        raise InvalidArgumentError(
            f"ok.save: the function {name!r} takes Variables as arguments, and a saved graph holds the values of "
            "the Variables it uses; save the trace bound to the ones you mean: "
            "ok.save(fn.get_concrete_function(variable, ...), path)"
        )


def _overlap(a: Sequence[Any], b: Sequence[Any]) -> bool:
    """Whether some tensors fit both input spec lists (a loaded function could run either)."""
    return len(a) == len(b) and all(x.dtype == y.dtype and x.is_compatible_with(y) for x, y in zip(a, b))


def save(obj: Any, path: str | os.PathLike[str]) -> None:
    """Save a traced function (every traced signature, with its captured variables'
    current values) or a Graph to ``path`` (a ``.okg`` file; docs/saved-graphs.md).

    The file names, for every op, the distribution that provides it, its version and
    the op's interface, so :func:`load` can say what is missing or changed.  Written
    to a temporary file beside ``path`` and renamed, so a failed save leaves no file."""
    kind, graphs = _graphs_of(obj)
    for graph in graphs:
        graph.validate()  # a hand-built graph that breaks the IR's rules is refused here, not at load
    writer = _Writer()
    functions = [{"graph": writer.graph(g, k)} for k, g in enumerate(graphs)]
    from ._version import __version__

    doc = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "opkernel_version": __version__,
        "kind": kind,
        "ops": writer.ops,
        "variables": writer.variables,
        "functions": functions,
    }
    text = json.dumps(doc, indent=1, allow_nan=False)
    target = Path(path)
    # A temporary file of this call's own (a random name, created exclusively, with the
    # mode the umask gives), so two saves to one path at once, from threads or processes,
    # never write the same file: the last rename wins, whole.
    tmp = target.with_name(f".{target.name}.{os.getpid()}.{secrets.token_hex(8)}.tmp")
    try:
        with open(tmp, "xb") as raw, zipfile.ZipFile(raw, "w") as zf:
            # Fixed member dates: the same graph and values give the same bytes.
            zf.writestr(zipfile.ZipInfo(GRAPH_MEMBER), text, compress_type=zipfile.ZIP_DEFLATED)
            for member, array in writer.tensors.items():
                info = zipfile.ZipInfo(member)
                info.compress_type = zipfile.ZIP_STORED
                with zf.open(info, "w", force_zip64=array.nbytes > (1 << 30)) as f:
                    np.lib.format.write_array(f, array, allow_pickle=False)  # streamed: no copy of the array
        os.replace(tmp, target)
    finally:
        if tmp.exists():
            tmp.unlink()


# ------------------------------------------------------------------ the ops against what is installed


@dataclass(frozen=True)
class OpStatus:
    """One op a saved graph needs, against what is installed here.

    ``state``: ``"ok"`` (the same interface), ``"compatible"`` (changed compatibly:
    ``reasons`` says how), ``"incompatible"`` (a change breaks: ``reasons`` names the
    rules) or ``"missing"`` (not registered; ``message`` says which package provides it)."""

    op: str
    nodes: int
    saved: Provider | None
    installed: Provider | None
    state: str
    reasons: tuple[str, ...]
    message: str

    @property
    def package(self) -> str:
        """The distribution (and version) the graph was saved with, or who registered the op."""
        p = self.saved
        if p is None:
            return "-"
        return f"{p.distribution} {p.version or '?'}" if p.distribution else f"{p.plugin} (no distribution)"


def _installed_version(distribution: str) -> str | None:
    from importlib import metadata

    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return None


def _missing_message(op: str, saved: Provider | None) -> str:
    from . import plugins

    if saved is not None and not saved.distribution and saved.plugin.endswith((".so", ".dylib", ".dll", ".py")):
        return (
            f"op {op!r} is not registered; when the graph was saved it came from the op library {saved.plugin!r}: "
            f"ok.load_op_library({saved.plugin!r}) before ok.load"
        )
    if saved is None or not saved.distribution:
        who = f"registered by {saved.plugin!r}, not by an installed distribution" if saved else "of unknown origin"
        return f"op {op!r} is not registered; when the graph was saved it was {who}: register it before ok.load"
    dist, version = saved.distribution, saved.version or "?"
    head = f"op {op!r} is provided by {dist} (saved with {version})"
    have = _installed_version(dist)
    if have is None:
        return f"{head}: pip install {dist}"
    failed = [f for f in plugins.plugin_errors() if f.distribution == dist]
    if failed:
        return f"{head}; {dist} {have} is installed but its plugin failed to load: {failed[0].error}"
    return f"{head}; the installed {dist} {have} does not register it: pip install '{dist}=={version}'"


def _op_status(saved: _SavedOp, nodes: int) -> OpStatus:
    from . import compat, op_registry

    if not op_registry.is_registered(saved.name):
        return OpStatus(saved.name, nodes, saved.provider, None, "missing", (), _missing_message(saved.name, saved.provider))
    current = op_registry.get_op_def(saved.name)
    installed = current.provider
    if _fingerprint(compat.interface(current)) == saved.fingerprint:
        return OpStatus(saved.name, nodes, saved.provider, installed, "ok", (), "")
    report = compat.check(saved.op_def, current)
    reasons = tuple(report.reasons)
    if report.compatible:
        return OpStatus(saved.name, nodes, saved.provider, installed, "compatible", reasons, "")
    versions = []
    if saved.provider is not None and saved.provider.distribution:
        versions.append(f"saved with {saved.provider.distribution} {saved.provider.version or '?'}")
    if installed is not None and installed.distribution:
        versions.append(f"installed: {installed.distribution} {installed.version or '?'}")
    where = f" ({', '.join(versions)})" if versions else ""
    broken = "; ".join(str(v) for v in report.verdicts if v.breaking)
    return OpStatus(saved.name, nodes, saved.provider, installed, "incompatible", reasons,
                    f"op {saved.name!r} changed incompatibly since the graph was saved{where}: {broken}")


def _statuses(doc: _Document) -> list[OpStatus]:
    from . import plugins

    plugins.ensure_loaded()
    counts = {name: 0 for name in doc.ops}
    for graph in doc.graphs:
        for node in graph.nodes:
            counts[node.op] += 1
    return [_op_status(op, counts[name]) for name, op in sorted(doc.ops.items())]


def _raise_for(statuses: Sequence[OpStatus], path: Path) -> None:
    missing = [s for s in statuses if s.state == "missing"]
    broken = [s for s in statuses if s.state == "incompatible"]
    if missing:
        lines = [s.message for s in missing + broken]
        raise OpNotFoundError(
            f"{path}: " + "\n".join(lines), op=missing[0].op,
            distribution=missing[0].saved.distribution if missing[0].saved else None,
            saved_version=missing[0].saved.version if missing[0].saved else None,
        )
    if broken:
        raise IncompatibleOpError(f"{path}: " + "\n".join(s.message for s in broken), op=broken[0].op,
                                  reasons=broken[0].reasons)


# ------------------------------------------------------------------ the nodes against the installed ops


def _decode_float(where: str, value: Any) -> float:
    if isinstance(value, str) and value in ("inf", "-inf", "nan"):
        return float(value)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        _fail(where, f"must be a number, got {_kind(value)}")
    return float(value)


def _decode_value(where: str, attr_type: str, value: Any) -> Any:
    if attr_type.startswith("list("):
        return tuple(_decode_value(f"{where}[{k}]", attr_type[5:-1], v) for k, v in enumerate(_list(where, value)))
    if attr_type == "type":
        return _dtype(where, value)
    if attr_type == "shape":
        return _shape(where, value)
    if attr_type == "int":
        return _int(where, value, _INT64_MIN, _INT64_MAX)
    if attr_type == "float":
        return _decode_float(where, value)
    if attr_type == "bool":
        if not isinstance(value, bool):
            _fail(where, f"must be a boolean, got {_kind(value)}")
        return value
    if attr_type == "string":
        return _str(where, value)
    if attr_type == "bytes":
        try:
            return base64.b64decode(_str(where, value), validate=True)
        except ValueError:
            _fail(where, "must be base64 text")
    # tensor
    data = _obj(where, value, ("dtype", "shape", "values"))
    dtype = _dtype(f"{where}.dtype", data["dtype"])
    shape = _shape(f"{where}.shape", data["shape"])
    if shape is None or any(d is None for d in shape):
        _fail(f"{where}.shape", "a tensor attr needs a fully known shape")
    values = _list(f"{where}.values", data["values"])
    count = math.prod(d for d in shape if d is not None)
    if count != len(values):
        _fail(f"{where}.values", f"holds {len(values)} values; shape {list(shape)} needs {count}")
    try:
        if dtype.is_complex:
            items: list[Any] = [complex(_decode_float(where, re), _decode_float(where, im)) for re, im in values]
        elif dtype.is_floating:
            items = [_decode_float(where, v) for v in values]
        else:
            items = values
        return np.array(items, dtype=dtype.np).reshape(shape)
    except (TypeError, ValueError, OverflowError) as e:
        _fail(f"{where}.values", f"not {dtype.name} values: {e}")


def _source_spec(where: str, edge: Any, graph: _SavedGraph, node_index: int, doc: _Document,
                 specs: Sequence[Sequence[Any]]) -> tuple[DType, tuple[int | None, ...] | None]:
    """The dtype and shape of what ``edge`` reads; a dangling edge or one to a later node fails."""
    kind, index, output = edge.kind, edge.index, edge.output
    if kind != "node" and output != 0:
        _fail(where, f"an edge of kind {kind!r} has output 0, got {output}")
    if kind == "input":
        if index >= len(graph.inputs):
            _fail(where, f"reads graph input {index}; the graph has {len(graph.inputs)}")
        return graph.inputs[index].dtype, graph.inputs[index].shape
    if kind == "const":
        if index >= len(graph.constants):
            _fail(where, f"reads constant {index}; the graph has {len(graph.constants)}")
        return graph.constants[index].dtype, graph.constants[index].shape
    if kind == "var":
        if index >= len(graph.variables):
            _fail(where, f"reads variable {index}; the graph captures {len(graph.variables)}")
        ref = doc.variables[graph.variables[index]].ref
        return ref.dtype, ref.shape
    if index >= len(graph.nodes):
        _fail(where, f"reads node {index}; the graph has {len(graph.nodes)} (a dangling edge)")
    if index >= node_index:
        _fail(where, f"reads node {index}, which does not come before node {node_index}: "
              "a cycle, or nodes out of topological order")
    if output >= len(specs[index]):
        _fail(where, f"reads output {output} of node {index}, which has {len(specs[index])}")
    spec = specs[index][output]
    return spec.dtype, spec.shape


def _arg_types(op_def: Any, args: Sequence[Any], attrs: Mapping[str, Any]) -> list[tuple[str, DType, bool]]:
    """The flat (argument name, dtype, is_ref) list an op's inputs or outputs have with ``attrs``."""
    flat = []
    for arg in args:
        if arg.type_list_attr:
            flat += [(arg.name, as_dtype(t), arg.is_ref) for t in attrs[arg.type_list_attr]]
            continue
        dtype = arg.dtype if arg.dtype is not None else attrs[arg.type_attr]
        count = attrs[arg.number_attr] if arg.number_attr else 1
        flat += [(arg.name, as_dtype(dtype), arg.is_ref)] * count
    return flat


def _check_node(where: str, node: _SavedNode, saved_op: _SavedOp, current: Any, graph: _SavedGraph,
                index: int, doc: _Document, specs: Sequence[Sequence[Any]]) -> dict[str, Any]:
    """The node's attrs, decoded, checked and completed with the installed op's defaults;
    its inputs' count and dtypes and its outputs' checked against the op."""
    attrs: dict[str, Any] = {}
    for name, (attr_type, value) in node.attrs.items():
        spot = f"{where}.attrs.{name}"
        declared = saved_op.op_def.attr_map.get(name)
        if declared is None:
            _fail(spot, f"the op {node.op!r} had no attr {name!r} when saved")
        if attr_type != declared.type and attr_type.replace("bytes", "string") != declared.type:
            _fail(f"{spot}.type", f"is {attr_type!r}; the op's attr {name!r} has type {declared.type!r}")
        decoded = _decode_value(f"{spot}.value", attr_type, value)
        try:
            attrs[name] = current.coerce_attr(name, decoded)
        except OpkernelError as e:
            _fail(spot, str(e))
    for attr in current.attrs:
        if attr.name not in attrs:
            if not attr.has_default:
                _fail(f"{where}.attrs", f"the op {node.op!r} needs attr {attr.name!r}, which the node does not set")
            attrs[attr.name] = attr.default
    for kind, args in (("input", current.inputs), ("output", current.outputs)):
        expected = _arg_types(current, args, attrs)
        given = node.inputs if kind == "input" else node.outputs
        if len(given) != len(expected):
            names = ", ".join(f"{a.name}" for a in args) or "none"
            _fail(f"{where}.{kind}s", f"op {node.op!r} with these attrs takes {len(expected)} {kind}s ({names}), "
                  f"the node has {len(given)}")
        for k, (arg_name, dtype, is_ref) in enumerate(expected):
            spot = f"{where}.{kind}s[{k}]"
            if kind == "input":
                got, _ = _source_spec(spot, given[k], graph, index, doc, specs)
                if is_ref and given[k].kind != "var":
                    _fail(spot, f"input {arg_name!r} of op {node.op!r} is a Ref input and must read a variable, "
                          f"not a {given[k].kind!r} edge")
            else:
                got = given[k].dtype
            if got != dtype:
                _fail(spot, f"{kind} {arg_name!r} of op {node.op!r} must be {dtype.name}, got {got.name}")
    return attrs


# ------------------------------------------------------------------ loading


class LoadedFunction:
    """What :func:`load` returns: call it with tensors (one per graph input, flat, in
    order) and it runs the saved graph on the active backend.

    ``graph``: the (first) saved graph; ``graphs``: every saved trace, tried in order
    for a call's inputs; ``variables``: the restored variables (created on the backend
    active at load, or ``load(backend=...)``); ``signature``: the first graph's inputs
    as TensorSpecs; ``ops``: the :class:`OpStatus` of every op the file needs."""

    def __init__(self, graphs: list[Any], variables: list[Any], ops: list[OpStatus], path: Path) -> None:
        self.graphs = graphs
        self.graph = graphs[0]
        self.variables = variables
        self.signature = tuple(graphs[0].inputs)
        self.ops = ops
        self.path = path
        self._functions: list[Any] = [None] * len(graphs)

    def _matches(self, graph: Any, args: Sequence[Any]) -> bool:
        if len(args) != len(graph.inputs):
            return False
        for arg, spec in zip(args, graph.inputs):
            dtype = getattr(arg, "dtype", None)
            shape = getattr(arg, "shape", None)
            if dtype is None or shape is None:
                return False
            try:
                if as_dtype(dtype) != spec.dtype:
                    return False
            except (OpkernelError, TypeError, ValueError):
                return False
            if spec.shape is not None and (len(shape) != len(spec.shape)
                                           or any(s is not None and s != d for s, d in zip(spec.shape, shape))):
                return False
        return True

    def __call__(self, *args: Any) -> Any:
        from .engine import to_tensor
        from .function import ConcreteFunction
        from .tensor import Tensor

        tensors = [a if isinstance(a, Tensor) else to_tensor(a) for a in args]
        for k, graph in enumerate(self.graphs):
            if self._matches(graph, tensors):
                if self._functions[k] is None:
                    self._functions[k] = ConcreteFunction(graph)
                return self._functions[k](*tensors)
        given = ", ".join(f"{t.dtype.name}{list(t.shape)}" for t in tensors) or "no arguments"
        wanted = "; ".join("(" + ", ".join(f"{s.dtype.name}{_show_shape(s.shape)}" for s in g.inputs) + ")"
                           for g in self.graphs)
        raise InvalidArgumentError(f"{self.path}: no saved graph takes ({given}); the saved signatures: {wanted}")

    def __repr__(self) -> str:
        sig = ", ".join(f"{s.dtype.name}{_show_shape(s.shape)}" for s in self.signature)
        return f"<LoadedFunction {str(self.path)!r} ({sig}): {len(self.graphs)} graph(s), {len(self.variables)} variable(s)>"


def _show_shape(shape: Any) -> str:
    return "[?]" if shape is None else "[" + ", ".join("?" if d is None else str(d) for d in shape) + "]"


def _read(path: str | os.PathLike[str]) -> tuple[_Archive, _Document]:
    archive = _Archive(Path(path))
    try:
        return archive, _document(archive.document())
    except _Bad as e:
        archive.close()
        raise archive.error(str(e)) from None
    except BaseException:
        archive.close()
        raise


def _check_sizes(archive: _Archive, doc: _Document) -> int:
    """Every stored tensor's member checked; the total bytes, within the host's memory."""
    total = largest = 0
    refs = [(f"variables[{k}]", v.ref) for k, v in enumerate(doc.variables)]
    refs += [(f"functions[{g}].graph.constants[{k}]", c) for g, graph in enumerate(doc.graphs)
             for k, c in enumerate(graph.constants)]
    counted: set[tuple[Any, ...]] = set()
    for where, ref in refs:
        held = archive.check_tensor(where, ref)
        need = math.prod(ref.shape) * _storage(ref.dtype).itemsize
        if need > held:
            raise archive.error(f"{where}: shape {list(ref.shape)} of {ref.dtype.name} needs {_amount(need)}; "
                                f"the file holds {_amount(held)} for it")
        key = (ref.member, ref.dtype.name, ref.shape)
        if key not in counted:  # references to one member share one array (read_tensor)
            counted.add(key)
            total += need
            largest = max(largest, need)
    room = host_available_bytes()
    if room is not None and total + largest > room:  # each tensor is read, then converted: one extra copy at a time
        raise ResourceExhaustedError(
            f"{archive.path}: its tensors need {_amount(total + largest)} of host memory; the host has "
            f"{_amount(room)} available",
            requested_bytes=total + largest,
        )
    return total


def _build(archive: _Archive, doc: _Document, backend: str | None) -> tuple[list[Any], list[Any]]:
    from . import op_registry
    from .engine import to_tensor
    from .graph import Graph, Node
    from .tensor import Variable

    built_nodes = []
    for g, graph in enumerate(doc.graphs):
        specs: list[list[Any]] = []
        nodes = []
        for k, node in enumerate(graph.nodes):
            where = f"functions[{g}].graph.nodes[{k}]"
            current = op_registry.get_op_def(node.op)
            try:
                attrs = _check_node(where, node, doc.ops[node.op], current, graph, k, doc, specs)
            except _Bad as e:
                raise archive.error(str(e)) from None
            specs.append(node.outputs)
            nodes.append(Node(node.op, attrs, node.inputs, node.outputs, current.provider, node.label))
        for k, edge in enumerate(graph.outputs):
            try:
                _source_spec(f"functions[{g}].graph.outputs[{k}]", edge, graph, len(graph.nodes), doc, specs)
            except _Bad as e:
                raise archive.error(str(e)) from None
        built_nodes.append(nodes)
    _check_sizes(archive, doc)
    values = [archive.read_tensor(f"variables[{k}]", v.ref) for k, v in enumerate(doc.variables)]
    variables = [Variable(to_tensor(value, v.ref.dtype, backend), trainable=v.trainable, name=v.name)
                 for value, v in zip(values, doc.variables)]
    graphs = []
    for g, (graph, nodes) in enumerate(zip(doc.graphs, built_nodes)):
        constants = [archive.read_tensor(f"functions[{g}].graph.constants[{k}]", c) for k, c in enumerate(graph.constants)]
        graphs.append(Graph(
            inputs=list(graph.inputs), nodes=nodes, outputs=list(graph.outputs),
            output_structure=graph.output_structure, constants=constants,
            variables=[variables[i] for i in graph.variables],
            variable_names=[doc.variables[i].name or f"variable_{i}" for i in graph.variables],
        ))
        _check_shapes(archive, f"functions[{g}].graph", graphs[-1])
    return graphs, variables


def _check_shapes(archive: _Archive, where: str, graph: Any) -> None:
    """The graph's structure (``Graph.validate``) and its saved output specs against the
    ops' shape functions: a file whose specs disagree with its ops is refused at load."""
    from .function import infer_shapes

    try:
        graph.validate()
        inferred = infer_shapes(graph)
    except OpkernelError as e:
        raise archive.error(f"{where}: {e}") from e
    for k, (node, specs) in enumerate(zip(graph.nodes, inferred)):
        for o, (saved, found) in enumerate(zip(node.outputs, specs)):
            if not saved.is_compatible_with(found):
                raise archive.error(
                    f"{where}.nodes[{k}].outputs[{o}]: saved as {saved.dtype.name}{_show_shape(saved.shape)}, but the "
                    f"shape function of op {node.op!r} gives {found.dtype.name}{_show_shape(found.shape)} for these inputs"
                )


def load(path: str | os.PathLike[str], *, backend: str | None = None) -> LoadedFunction:
    """Load what :func:`save` wrote: a callable that runs the saved graph on the active backend.

    Every op is checked before anything is read into memory or run: a missing op
    raises OpNotFoundError naming the distribution that provides it, the version it
    was saved with and the pip command; an op changed incompatibly since raises
    IncompatibleOpError naming the compatibility rule; a compatible change (a new attr
    with a default) loads.  A malformed or hostile file raises GraphFormatError (or
    ResourceExhaustedError when its tensors would not fit in host memory).  Variables
    are created on ``backend`` (default: the active backend)."""
    archive, doc = _read(path)
    try:
        statuses = _statuses(doc)
        _raise_for(statuses, archive.path)
        graphs, variables = _build(archive, doc, backend)
    finally:
        archive.close()
    return LoadedFunction(graphs, variables, statuses, archive.path)


@dataclass
class SavedGraphInfo:
    """What :func:`inspect` reports of a file, without running or loading it."""

    path: Path
    kind: str
    opkernel_version: str | None
    signatures: list[tuple[Any, ...]]
    ops: list[OpStatus]
    variables: int
    tensor_bytes: int
    nodes: int = field(default=0)
    #: The resources the graph makes handles to when it runs: (op, container, shared name),
    #: "" for an anonymous one (made anew at each call).  Named ones are found, or created,
    #: in the resource manager of the backend the loaded graph runs on.
    resources: list[tuple[str, str, str]] = field(default_factory=list)

    @property
    def loadable(self) -> bool:
        return all(s.state in ("ok", "compatible") for s in self.ops)


def inspect(path: str | os.PathLike[str]) -> SavedGraphInfo:
    """The ops a saved graph needs, who provides them and whether each is installed and
    compatible here; nothing from the file is run and no tensor is read."""
    archive, doc = _read(path)
    try:
        refs = [v.ref for v in doc.variables] + [c for g in doc.graphs for c in g.constants]
        unique = {(r.member, r.dtype.name, r.shape): r for r in refs}  # one array per member (read_tensor)
        tensor_bytes = sum(math.prod(r.shape) * _storage(r.dtype).itemsize for r in unique.values())
        return SavedGraphInfo(
            archive.path, doc.kind, doc.opkernel_version, [tuple(g.inputs) for g in doc.graphs],
            _statuses(doc), len(doc.variables), tensor_bytes, sum(len(g.nodes) for g in doc.graphs),
            _resources(doc),
        )
    finally:
        archive.close()


def _resources(doc: Any) -> list[tuple[str, str, str]]:
    """(op, container, shared name) of every node that makes a resource handle."""
    found: dict[tuple[str, str, str], None] = {}
    for graph in doc.graphs:
        for node in graph.nodes:
            if any(getattr(o, "dtype", None) is not None and o.dtype.is_resource for o in node.outputs):
                def text(name: str) -> str:
                    value = node.attrs.get(name, ("string", ""))[1]
                    return value if isinstance(value, str) else str(value)

                found[(node.op, text("container") or "localhost", text("shared_name"))] = None
    return list(found)


#: C0 and C1 control characters, DEL, and the bidirectional overrides that reorder text.
_UNPRINTABLE = re.compile("[\x00-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def printable(text: str) -> str:
    """``text`` with every control character shown as its escape (a newline too: a string
    from a file must not start a line of its own that looks like ours)."""
    return _UNPRINTABLE.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), text)


def inspect_main(path: str, table: Callable[[str, Sequence[str], Sequence[Sequence[str]]], None],
                 write: Callable[[str], None] = print) -> int:
    """``opkernel inspect PATH``: exit 0 when the graph loads here, 1 when an op is
    missing or incompatible, 2 when the file cannot be read.  Every string shown is
    printable: control characters from the file (a terminal's escape sequences in a
    version, an op or attr name) are shown escaped (``\\x1b``), never sent raw."""
    return _inspect_shown(path, lambda title, headers, rows: table(
        printable(title), headers, [[printable(str(c)) for c in row] for row in rows]), lambda text: write(printable(text)))


def _inspect_shown(path: str, table: Callable[[str, Sequence[str], Sequence[Sequence[str]]], None],
                   write: Callable[[str], None]) -> int:
    import sys

    try:
        info = inspect(path)
    except (OSError, OpkernelError) as e:
        print(printable(f"opkernel inspect: {e}"), file=sys.stderr)
        return 2
    sigs = "; ".join("(" + ", ".join(f"{s.dtype.name}{_show_shape(s.shape)}" for s in sig) + ")" for sig in info.signatures)
    write(f"{info.path}: a saved {info.kind} (format {FORMAT} {FORMAT_VERSION}, opkernel {info.opkernel_version or '?'})")
    write(f"  signatures: {sigs}")
    write(f"  {info.nodes} nodes, {info.variables} variables, {_amount(info.tensor_bytes)} of tensors")
    if info.resources:
        named = [(op, c, n) for op, c, n in info.resources if n]
        write(f"  resources: {len(info.resources)} made by its ops when it runs"
              + (f"; {len(named)} by shared name, found or created on the backend it runs on: "
                 + ", ".join(f"{op} {c}/{n}" for op, c, n in named) if named else " (all anonymous)"))
    from .kernels import GENERIC, all_kernels

    backends: dict[str, set[str]] = {}
    for k in all_kernels():
        backends.setdefault(k.op, set()).add(k.backend)
    rows = []
    for s in info.ops:
        installed = "-" if s.installed is None else (
            f"{s.installed.distribution} {s.installed.version}" if s.installed.distribution else s.installed.plugin)
        have = backends.get(s.op, set())
        runs = "any (generic)" if GENERIC in have else ", ".join(sorted(have)) or "-"
        rows.append([s.op, str(s.nodes), s.package, installed if s.state != "missing" else "not installed", s.state, runs])
    table("Ops", ["op", "nodes", "saved with", "installed", "status", "kernels"], rows)
    for s in info.ops:  # the full reasons below the table, one per line (a table would wrap them)
        if s.state in ("missing", "incompatible"):
            write(s.message)
        elif s.state == "compatible":
            write(f"op {s.op!r} changed compatibly: " + "; ".join(s.reasons))
    packages = sorted({s.package for s in info.ops})
    write("packages needed: " + ", ".join(packages))
    write("loads here: " + ("yes" if info.loadable else "no"))
    return 0 if info.loadable else 1
