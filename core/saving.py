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
import hashlib
import json
import math
import os
import re
import secrets
import stat
import struct
import zipfile
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, NoReturn

import numpy as np

from ._provenance import Provider
from .dtypes import DType, as_dtype
from .errors import (
    GraphFormatError,
    IncompatibleOpError,
    InvalidArgumentError,
    OpkernelError,
    OpNotFoundError,
    ResourceExhaustedError,
)
from .hostmem import host_available_bytes

__all__ = [
    "FORMAT",
    "FORMAT_VERSION",
    "LoadedFunction",
    "OpStatus",
    "SavedGraphInfo",
    "inspect",
    "load",
    "save",
]

#: The ``format`` field of every graph.json, and the version this opkernel writes and reads.
FORMAT = "opkernel-saved-graph"
FORMAT_VERSION = 1
GRAPH_MEMBER = "graph.json"
TENSOR_DIR = "tensors/"

#: Limits a file must keep before anything is allocated for it.
MAX_JSON_BYTES = 64 << 20
#: Python objects parsed from JSON take up to this many times the text's size.
JSON_EXPANSION = 16
MAX_MEMBERS = 100_000
MAX_RANK = 254  # TensorFlow's TensorShape limit
MAX_NESTING = 64  # output_structure depth
MAX_NPY_HEADER = 4096
#: Inputs of one node (AddN's fan-in): compiling a call costs a few KiB per argument, so
#: 400k inputs in an 11 KiB file took 1.3 GiB at the first call.
MAX_NODE_INPUTS = 16_384
_INT64_MAX = 2**63 - 1
_INT64_MIN = -(2**63)

_EDGE_KINDS = ("input", "node", "const", "var")
_SCALAR_ATTR_TYPES = ("type", "shape", "tensor", "string", "bytes", "int", "float", "bool")
_ATTR_TYPES = frozenset(_SCALAR_ATTR_TYPES) | {f"list({t})" for t in _SCALAR_ATTR_TYPES}


# ------------------------------------------------------------------ helpers


def _fingerprint(interface: Mapping[str, Any]) -> str:
    """``sha256:`` of the interface's canonical JSON (sorted keys, no spaces)."""
    text = json.dumps(interface, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return "sha256:" + hashlib.sha256(text.encode("ascii")).hexdigest()


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    return {dict: "an object", list: "an array", str: "a string", bool: "a boolean", int: "an integer",
            float: "a number"}.get(type(value), type(value).__name__)


def _storage(dtype: DType) -> np.dtype[Any]:
    """The numpy dtype a tensor of ``dtype`` is stored as: little-endian; bfloat16 as its bits."""
    if dtype.name == "bfloat16":
        return np.dtype("<u2")
    if dtype.name == "string":
        raise InvalidArgumentError("string tensors cannot be saved: the format stores numeric tensors only")
    return np.dtype(dtype.np).newbyteorder("<") if np.dtype(dtype.np).byteorder not in "|" else np.dtype(dtype.np)


def _amount(nbytes: int) -> str:
    size = float(nbytes)
    for unit in ("bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"):
        if size < 1024 or unit == "EiB":
            return f"{nbytes} bytes" if unit == "bytes" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{nbytes} bytes"  # pragma: no cover


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
    return dtype if isinstance(dtype, DType) else as_dtype(np.asarray(value).dtype)


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
    from . import __version__

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


# ------------------------------------------------------------------ reading: the archive

_ARCHIVE_ERRORS = (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError, ValueError, struct.error,
                   NotImplementedError, zlib.error, RuntimeError, UnicodeDecodeError, IndexError, KeyError)


#: The most bytes the non-zero dimensions of a stored tensor may span (numpy's limit: intp).
_MAX_EXTENT = 2**63 - 1


class _TooMany(Exception):
    """An archive listing more members than are read."""


class _Archive:
    """An opened ``.okg``: graph.json parsed, tensor members checked against the file's real size."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._read: dict[tuple[Any, ...], np.ndarray[Any, Any]] = {}  # read_tensor's arrays, by member
        self.file = self._open_regular(path)
        try:
            self.size = os.fstat(self.file.fileno()).st_size
            entries = self._entries()
            if entries > MAX_MEMBERS:  # refused before zipfile builds an object per member
                raise _TooMany(f"holds {entries} members; at most {MAX_MEMBERS} are read")
            self.zf = zipfile.ZipFile(self.file)
        except _TooMany as e:
            self.file.close()
            raise self.error(str(e)) from None
        except _ARCHIVE_ERRORS as e:
            self.file.close()
            raise self.error(f"not an opkernel saved graph (not a readable zip archive: {e})") from e
        infos = self.zf.infolist()
        self.members = {i.filename: i for i in infos}
        problem = None
        if len(infos) > MAX_MEMBERS:
            problem = f"holds {len(infos)} members; at most {MAX_MEMBERS} are read"
        elif GRAPH_MEMBER not in self.members:
            problem = f"no {GRAPH_MEMBER} in the archive (members: {sorted(self.members)[:5]})"
        if problem is not None:
            self.close()
            raise self.error(problem)

    def _open_regular(self, path: Path) -> Any:
        """``path`` opened for reading, when it is a regular file: a directory, a device
        (a link to /dev/zero reads without end) or a FIFO (whose open or read blocks until
        a writer comes) is refused before anything is read.  The checks run on the opened
        file itself, so the file read is the file checked."""
        try:
            fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
        except IsADirectoryError:
            raise self.error("is a directory, not a saved graph (.okg file)") from None
        try:
            mode = os.fstat(fd).st_mode
            if not stat.S_ISREG(mode):
                kind = ("a directory" if stat.S_ISDIR(mode) else "a FIFO" if stat.S_ISFIFO(mode) else
                        "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else "a socket" if stat.S_ISSOCK(mode) else "not a regular file")
                raise self.error(f"is {kind}, not a saved graph (.okg file); only regular files are read")
            if hasattr(os, "set_blocking"):
                os.set_blocking(fd, True)
            return os.fdopen(fd, "rb")
        except BaseException:
            os.close(fd)
            raise

    def _entries(self) -> int:
        """The member count the central directory's end record states (0 when it cannot
        be read here: zipfile then reads and judges the archive)."""
        end_record = getattr(zipfile, "_EndRecData", None)
        if end_record is None:  # not CPython's zipfile
            return 0
        end = end_record(self.file)
        if end is None:
            raise zipfile.BadZipFile("File is not a zip file")
        return int(end[getattr(zipfile, "_ECD_ENTRIES_TOTAL", 4)])

    def error(self, message: str) -> GraphFormatError:
        return GraphFormatError(f"{self.path}: {message}", path=str(self.path))

    def close(self) -> None:
        self.zf.close()
        self.file.close()

    def _member(self, name: str, limit: int) -> bytes:
        info = self.members[name]
        if info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
            raise self.error(f"member {name!r} uses compression method {info.compress_type}; only stored and deflated are read")
        if info.file_size > limit:
            raise self.error(f"member {name!r} declares {_amount(info.file_size)}; at most {_amount(limit)} is read")
        if info.header_offset + info.compress_size > self.size:
            raise self.error(f"member {name!r} runs past the end of the file (truncated?)")
        try:
            with self.zf.open(info) as f:
                data = f.read(limit + 1)  # never more than the limit, whatever the member claims
        except _ARCHIVE_ERRORS as e:
            raise self.error(f"member {name!r} cannot be read ({type(e).__name__}: {e}); the file is damaged") from e
        if len(data) != info.file_size or len(data) > limit:
            raise self.error(f"member {name!r} holds {len(data)} bytes, not the {info.file_size} it declares")
        return data

    def document(self) -> Any:
        declared = self.members[GRAPH_MEMBER].file_size
        room = host_available_bytes()
        if room is not None and declared * JSON_EXPANSION > room:
            raise ResourceExhaustedError(
                f"{self.path}: {GRAPH_MEMBER} declares {_amount(declared)}; parsing it may take "
                f"{_amount(declared * JSON_EXPANSION)} of host memory and the host has {_amount(room)} available",
                requested_bytes=declared * JSON_EXPANSION,
            )
        data = self._member(GRAPH_MEMBER, MAX_JSON_BYTES)
        try:
            return json.loads(data.decode("utf-8"), parse_constant=_reject_constant)
        except UnicodeDecodeError as e:
            raise self.error(f"{GRAPH_MEMBER} is not UTF-8 ({e.reason} at byte {e.start})") from e
        except json.JSONDecodeError as e:
            raise self.error(f"{GRAPH_MEMBER} is not valid JSON: {e.msg} at line {e.lineno}, column {e.colno}") from e
        except RecursionError as e:
            raise self.error(f"{GRAPH_MEMBER} is nested too deeply") from e
        except ValueError as e:  # an integer with too many digits, NaN/Infinity literals
            raise self.error(f"{GRAPH_MEMBER}: {e}") from e

    def check_tensor(self, where: str, ref: _TensorRef) -> int:
        """The bytes ``ref``'s member holds, checked against its header and the archive
        (stored, not compressed; inside the file) before anything is allocated."""
        extent = math.prod(d for d in ref.shape if d) * _storage(ref.dtype).itemsize
        if extent > _MAX_EXTENT:  # numpy cannot make such an array, even with a zero dimension
            raise self.error(f"{where}: shape {list(ref.shape)} of {ref.dtype.name} is too large for an array: its "
                             f"non-zero dimensions span {extent} bytes, more than {_MAX_EXTENT}")
        info = self.members.get(ref.member)
        if info is None:
            raise self.error(f"{where}: the archive has no member {ref.member!r}")
        if info.compress_type != zipfile.ZIP_STORED or info.compress_size != info.file_size:
            raise self.error(f"{where}: tensor member {ref.member!r} must be stored uncompressed")
        if info.header_offset + info.compress_size > self.size:
            raise self.error(f"{where}: tensor member {ref.member!r} runs past the end of the file (truncated?)")
        return int(info.file_size)

    def read_tensor(self, where: str, ref: _TensorRef) -> np.ndarray[Any, Any]:
        """The tensor ``ref`` names, read once per member, dtype and shape: references to
        one member share one read-only array (600 constants naming one ``.npy`` were 600
        reads and 600 arrays)."""
        key = (ref.member, ref.dtype.name, ref.shape)
        found = self._read.get(key)
        if found is None:
            found = self._read[key] = self._read_tensor(where, ref)
            found.flags.writeable = False
        return found

    def _read_tensor(self, where: str, ref: _TensorRef) -> np.ndarray[Any, Any]:
        stored = _storage(ref.dtype)
        nbytes = math.prod(ref.shape) * stored.itemsize
        try:
            with self.zf.open(self.members[ref.member]) as f:
                shape, fortran, dtype = _npy_header(f)
                if tuple(shape) != ref.shape or fortran or np.dtype(dtype) != stored:
                    raise ValueError(
                        f"its .npy header says shape {tuple(shape)}, dtype {np.dtype(dtype).str}"
                        f"{', Fortran order' if fortran else ''}; graph.json says shape {ref.shape}, "
                        f"dtype {ref.dtype.name} (stored as {stored.str}, C order)"
                    )
                offset = f.tell()
                if offset + nbytes != self.members[ref.member].file_size:
                    raise ValueError(
                        f"it holds {self.members[ref.member].file_size - offset} bytes of data; "
                        f"shape {ref.shape} of {ref.dtype.name} needs {nbytes}"
                    )
                data = f.read(nbytes)
        except _ARCHIVE_ERRORS as e:
            raise self.error(f"{where}: tensor {ref.member!r} cannot be read: {e}") from e
        if len(data) != nbytes:
            raise self.error(f"{where}: tensor {ref.member!r} is truncated")
        array = np.frombuffer(data, dtype=stored).reshape(ref.shape)
        if ref.dtype.name == "bfloat16":
            return array.view(ref.dtype.np).copy()
        return array.astype(np.dtype(ref.dtype.np), copy=True)


def _npy_header(f: Any) -> tuple[tuple[int, ...], bool, np.dtype[Any]]:
    """(shape, fortran_order, dtype) of a .npy header, versions 1.0 and 2.0, at most
    MAX_NPY_HEADER bytes.  numpy parses the header text (a Python literal, read with
    ``ast.literal_eval``, never executed); whatever it raises on a damaged header
    becomes a ValueError."""
    try:
        version = np.lib.format.read_magic(f)
        if version == (1, 0):
            shape, fortran, dtype = np.lib.format.read_array_header_1_0(f, max_header_size=MAX_NPY_HEADER)
        elif version == (2, 0):
            shape, fortran, dtype = np.lib.format.read_array_header_2_0(f, max_header_size=MAX_NPY_HEADER)
        else:
            raise ValueError(f"npy format version {version} is not read")
    except (zipfile.BadZipFile, zlib.error, OSError):
        raise
    except Exception as e:  # tokenize.TokenError, SyntaxError, RecursionError from the literal's parser
        raise ValueError(f"a damaged .npy header ({type(e).__name__}: {e})") from e
    return tuple(shape), bool(fortran), np.dtype(dtype)


def _reject_constant(name: str) -> NoReturn:
    raise ValueError(f"the literal {name} is not JSON (write non-finite floats as the strings 'inf', '-inf', 'nan')")


# ------------------------------------------------------------------ reading: the document


class _Bad(Exception):
    """A structural problem at a place in graph.json (turned into a GraphFormatError)."""


def _fail(where: str, problem: str) -> NoReturn:
    raise _Bad(f"{where}: {problem}")


def _obj(where: str, value: Any, keys: Sequence[str], optional: Sequence[str] = ()) -> dict[str, Any]:
    if not isinstance(value, dict):
        _fail(where, f"must be an object, got {_kind(value)}")
    missing = [k for k in keys if k not in value]
    if missing:
        _fail(where, f"missing {', '.join(repr(k) for k in missing)}")
    extra = [k for k in value if k not in keys and k not in optional]
    if extra:
        _fail(where, f"unknown key {extra[0]!r} (expected {', '.join(repr(k) for k in [*keys, *optional])})")
    return value


def _list(where: str, value: Any) -> list[Any]:
    if not isinstance(value, list):
        _fail(where, f"must be an array, got {_kind(value)}")
    return value


def _int(where: str, value: Any, lo: int = 0, hi: int = _INT64_MAX) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        _fail(where, f"must be an integer, got {_kind(value)}")
    if not lo <= value <= hi:
        _fail(where, f"must be in [{lo}, {hi}], got {value}")
    return value


def _str(where: str, value: Any, *, optional: bool = False) -> Any:
    if value is None and optional:
        return None
    if not isinstance(value, str):
        _fail(where, f"must be a string{' or null' if optional else ''}, got {_kind(value)}")
    return value


def _dtype(where: str, value: Any) -> DType:
    name = _str(where, value)
    try:
        return as_dtype(name)
    except (OpkernelError, TypeError, ValueError):
        _fail(where, f"unknown dtype {name!r}")


def _shape(where: str, value: Any) -> tuple[int | None, ...] | None:
    if value is None:
        return None
    dims = _list(where, value)
    if len(dims) > MAX_RANK:
        _fail(where, f"rank {len(dims)} is over the limit of {MAX_RANK}")
    return tuple(None if d is None else _int(f"{where}[{k}]", d) for k, d in enumerate(dims))


def _spec(where: str, value: Any) -> Any:
    from .graph import TensorSpec

    data = _obj(where, value, ("shape", "dtype"), ("name",))
    return TensorSpec(_shape(f"{where}.shape", data["shape"]), _dtype(f"{where}.dtype", data["dtype"]),
                      _str(f"{where}.name", data.get("name"), optional=True))


@dataclass(frozen=True)
class _TensorRef:
    dtype: DType
    shape: tuple[int, ...]
    member: str


def _tensor_ref(where: str, value: Any, extra: Sequence[str] = ()) -> _TensorRef:
    data = _obj(where, value, ("dtype", "shape", "data"), extra)
    dtype = _dtype(f"{where}.dtype", data["dtype"])
    if dtype.name == "string":
        _fail(f"{where}.dtype", "string tensors are not stored by this format")
    shape = _shape(f"{where}.shape", data["shape"])
    if shape is None or any(d is None for d in shape):
        _fail(f"{where}.shape", "a stored tensor needs a fully known shape")
    member = _str(f"{where}.data", data["data"])
    if not member.startswith(TENSOR_DIR) or not member.endswith(".npy"):
        _fail(f"{where}.data", f"must name a member '{TENSOR_DIR}*.npy', got {member!r}")
    return _TensorRef(dtype, tuple(d for d in shape if d is not None), member)


@dataclass(frozen=True)
class _SavedOp:
    name: str
    provider: Provider | None
    fingerprint: str
    interface: dict[str, Any]
    op_def: Any  # the saved OpDef, read from the interface


@dataclass
class _SavedNode:
    op: str
    attrs: dict[str, tuple[str, Any]]  # name -> (attr type, encoded value)
    inputs: list[Any]
    outputs: list[Any]
    label: str | None


@dataclass
class _SavedGraph:
    inputs: list[Any]
    nodes: list[_SavedNode]
    outputs: list[Any]
    output_structure: Any
    constants: list[_TensorRef]
    variables: list[int]


@dataclass
class _SavedVariable:
    ref: _TensorRef
    name: str | None
    trainable: bool


@dataclass
class _Document:
    kind: str
    opkernel_version: str | None
    ops: dict[str, _SavedOp]
    variables: list[_SavedVariable]
    graphs: list[_SavedGraph]


#: What a distribution name (PEP 508), a version (PEP 440's characters) and a plugin or module
#: name may look like: they end up in messages and a suggested ``pip install`` command.
_DIST_RE = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9._-]{0,98}[A-Za-z0-9])?", re.ASCII)
_VERSION_RE = re.compile(r"[A-Za-z0-9.+!_-]{1,64}", re.ASCII)
_PLUGIN_RE = re.compile(r"[A-Za-z0-9_<?][A-Za-z0-9_.<>?-]{0,199}", re.ASCII)


def _provider(where: str, value: Any) -> Provider | None:
    if value is None:
        return None
    data = _obj(where, value, ("plugin", "distribution", "version"))
    checked = []
    for key, pattern, optional in (("plugin", _PLUGIN_RE, False), ("distribution", _DIST_RE, True),
                                   ("version", _VERSION_RE, True)):
        text = _str(f"{where}.{key}", data[key], optional=optional)
        if text is not None and not pattern.fullmatch(text):
            _fail(f"{where}.{key}", f"{text[:60]!r} is not a valid {key} name")
        checked.append(text)
    return Provider(*checked)


def _saved_op(where: str, name: str, value: Any) -> _SavedOp:
    from . import compat
    from .op_registry import OpDef

    data = _obj(where, value, ("provider", "fingerprint", "interface"))
    fingerprint = _str(f"{where}.fingerprint", data["fingerprint"])
    interface = data["interface"]
    if not isinstance(interface, dict):
        _fail(f"{where}.interface", f"must be an object, got {_kind(interface)}")
    try:
        problems = compat._op_problems(interface)
    except (TypeError, ValueError, AttributeError, KeyError, IndexError, RecursionError) as e:  # a value of a wrong type
        _fail(f"{where}.interface", f"not a well-formed op definition ({type(e).__name__}: {str(e)[:200]})")
    if problems:
        _fail(f"{where}.interface", "not a well-formed op definition: " + "; ".join(problems[:5]))
    if interface.get("name") != name:
        _fail(f"{where}.interface", f"defines the op {interface.get('name')!r}, not {name!r}")
    if _fingerprint(interface) != fingerprint:
        _fail(f"{where}.fingerprint", "does not match the interface stored with it; the file was edited or damaged")
    try:
        op_def = OpDef.from_dict(interface)
    except (OpkernelError, TypeError, ValueError, KeyError) as e:
        _fail(f"{where}.interface", f"cannot be read as an op definition: {e}")
    return _SavedOp(name, _provider(f"{where}.provider", data["provider"]), fingerprint, interface, op_def)


def _edge(where: str, value: Any) -> Any:
    from .graph import Edge

    items = _list(where, value)
    if len(items) != 3 or items[0] not in _EDGE_KINDS:
        _fail(where, f"an edge is [kind, index, output] with kind in {list(_EDGE_KINDS)}, got {value!r}"[:300])
    return Edge(items[0], _int(f"{where}[1]", items[1]), _int(f"{where}[2]", items[2]))


def _node(where: str, value: Any, ops: Mapping[str, _SavedOp]) -> _SavedNode:
    data = _obj(where, value, ("op", "attrs", "inputs", "outputs"), ("label",))
    op = _str(f"{where}.op", data["op"])
    if op not in ops:
        _fail(f"{where}.op", f"the op {op!r} is not in the file's 'ops' table")
    attrs_in = data["attrs"]
    if not isinstance(attrs_in, dict):
        _fail(f"{where}.attrs", f"must be an object, got {_kind(attrs_in)}")
    attrs = {}
    for name, attr in attrs_in.items():
        spot = f"{where}.attrs.{name}"
        entry = _obj(spot, attr, ("type", "value"))
        attr_type = _str(f"{spot}.type", entry["type"])
        if attr_type not in _ATTR_TYPES:
            _fail(f"{spot}.type", f"unknown attr type {attr_type!r} (known: {', '.join(sorted(_ATTR_TYPES))})")
        attrs[name] = (attr_type, entry["value"])
    inputs = _list(f"{where}.inputs", data["inputs"])
    if len(inputs) > MAX_NODE_INPUTS:
        _fail(f"{where}.inputs", f"op {op!r} has {len(inputs)} inputs; at most {MAX_NODE_INPUTS} per node are read")
    return _SavedNode(
        op, attrs,
        [_edge(f"{where}.inputs[{k}]", e) for k, e in enumerate(inputs)],
        [_spec(f"{where}.outputs[{k}]", s) for k, s in enumerate(_list(f"{where}.outputs", data["outputs"]))],
        _str(f"{where}.label", data.get("label"), optional=True),
    )


def _structure(where: str, value: Any, n_outputs: int, depth: int = 0) -> None:
    if depth > MAX_NESTING:
        _fail(where, f"nested deeper than {MAX_NESTING}")
    if isinstance(value, list):
        for k, item in enumerate(value):
            _structure(f"{where}[{k}]", item, n_outputs, depth + 1)
    elif isinstance(value, dict):
        for key, item in value.items():
            _structure(f"{where}.{key}", item, n_outputs, depth + 1)
    elif value is not None:
        if not n_outputs:
            _fail(where, "the graph has no outputs to index")
        _int(where, value, 0, n_outputs - 1)


def _graph(where: str, value: Any, ops: Mapping[str, _SavedOp], n_variables: int) -> _SavedGraph:
    data = _obj(where, value, ("inputs", "nodes", "outputs", "output_structure", "constants", "variables"))
    graph = _SavedGraph(
        [_spec(f"{where}.inputs[{k}]", s) for k, s in enumerate(_list(f"{where}.inputs", data["inputs"]))],
        [_node(f"{where}.nodes[{k}]", n, ops) for k, n in enumerate(_list(f"{where}.nodes", data["nodes"]))],
        [_edge(f"{where}.outputs[{k}]", e) for k, e in enumerate(_list(f"{where}.outputs", data["outputs"]))],
        data["output_structure"],
        [_tensor_ref(f"{where}.constants[{k}]", c) for k, c in enumerate(_list(f"{where}.constants", data["constants"]))],
        [_int(f"{where}.variables[{k}]", v, 0, n_variables - 1) if n_variables else
         _fail(f"{where}.variables[{k}]", "the file has no variables")
         for k, v in enumerate(_list(f"{where}.variables", data["variables"]))],
    )
    _structure(f"{where}.output_structure", graph.output_structure, len(graph.outputs))
    return graph


def _document(doc: Any) -> _Document:
    if not isinstance(doc, dict):
        _fail(GRAPH_MEMBER, f"must hold an object, got {_kind(doc)}")
    if doc.get("format") != FORMAT:
        _fail(GRAPH_MEMBER, f"is not an opkernel saved graph ('format' is {str(doc.get('format'))[:60]!r}, not {FORMAT!r})")
    version = doc.get("format_version")
    if version != FORMAT_VERSION:
        newer = isinstance(version, int) and not isinstance(version, bool) and version > FORMAT_VERSION
        _fail("format_version", f"the file has format version {str(version)[:20]}; this opkernel reads version "
              f"{FORMAT_VERSION}" + ("; upgrade opkernel to load it" if newer else ""))
    data = _obj("graph.json", doc, ("format", "format_version", "ops", "variables", "functions"),
                ("opkernel_version", "kind"))
    kind = data.get("kind", "function")
    if kind not in ("function", "graph"):
        _fail("kind", f"must be 'function' or 'graph', got {str(kind)[:40]!r}")
    ops_in = data["ops"]
    if not isinstance(ops_in, dict):
        _fail("ops", f"must be an object, got {_kind(ops_in)}")
    ops = {name: _saved_op(f"ops[{name!r}]", name, op) for name, op in ops_in.items()}
    variables = []
    for k, v in enumerate(_list("variables", data["variables"])):
        entry = _obj(f"variables[{k}]", v, ("dtype", "shape", "data", "name", "trainable"))
        trainable = entry["trainable"]
        if not isinstance(trainable, bool):
            _fail(f"variables[{k}].trainable", f"must be a boolean, got {_kind(trainable)}")
        variables.append(_SavedVariable(_tensor_ref(f"variables[{k}]", v, ("name", "trainable")),
                                        _str(f"variables[{k}].name", entry["name"], optional=True), trainable))
    functions = _list("functions", data["functions"])
    if not functions:
        _fail("functions", "holds no graph")
    graphs = [_graph(f"functions[{k}].graph", _obj(f"functions[{k}]", f, ("graph",))["graph"], ops, len(variables))
              for k, f in enumerate(functions)]
    return _Document(kind, _str("opkernel_version", data.get("opkernel_version"), optional=True), ops, variables, graphs)


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
        )
    finally:
        archive.close()


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
