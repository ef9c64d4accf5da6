"""The ``.okg`` file, read defensively: the format's constants and limits, the zip archive
(members, sizes, ``.npy`` headers, checked before anything is read) and the parsing of
``graph.json`` into typed records, each problem a GraphFormatError naming the file and
the place.  ``opkernel.saving`` writes files and loads them through this module."""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import stat
import struct
import zipfile
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

import numpy as np

from ._provenance import Provider
from .dtypes import DType, as_dtype
from .errors import GraphFormatError, InvalidArgumentError, OpkernelError, ResourceExhaustedError
from .hostmem import host_available_bytes

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
    if dtype.is_resource:
        raise InvalidArgumentError(
            "a resource handle cannot be saved: it names a resource of one process's backend (a function that "
            "captures an ok.ResourceVariable's handle): make the handle inside the function (VarHandleOp with a "
            "shared_name), or pass the variable's value as an argument"
        )
    return np.dtype(dtype.np).newbyteorder("<") if np.dtype(dtype.np).byteorder not in "|" else np.dtype(dtype.np)


def _amount(nbytes: int) -> str:
    size = float(nbytes)
    for unit in ("bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"):
        if size < 1024 or unit == "EiB":
            return f"{nbytes} bytes" if unit == "bytes" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{nbytes} bytes"  # pragma: no cover


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
# A plugin's name: an entry point's or module's name, or the path of an op library loaded
# from a file (``ok.load_op_library("./zero_out.so")`` names it by its absolute path).
_PLUGIN_RE = re.compile(r"[A-Za-z0-9_<?/\\~.][A-Za-z0-9_.<>?/\\:~+ -]{0,1023}", re.ASCII)


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
