"""A property test of ok.load: mutated saved graphs (flipped bytes, truncations, edited
graph.json values) load, or fail with an error from opkernel.errors; never another
exception, a crash or a giant allocation.

The loop runs in a child process whose address space is capped at what it uses after
start-up plus 1 GiB, so an allocation the loader failed to refuse kills one test, not
the machine; a crash or hang fails the test with the child's stderr (tests/isolated.py).
"""

from __future__ import annotations

from isolated import run_isolated

CHILD = r'''
import io, json, resource, sys, traceback, zipfile
from pathlib import Path
import numpy as np
import opkernel as ok
from opkernel.errors import OpkernelError
from opkernel.graph import Edge, Graph, Node, TensorSpec
from hypothesis import HealthCheck, given, settings, strategies as st

F32 = ok.float32
graph = Graph(
    inputs=[TensorSpec((None, 3), F32, "x")],
    nodes=[
        Node("MatMul", {"T": F32, "transpose_a": False, "transpose_b": False},
             [Edge("input", 0), Edge("var", 0)], [TensorSpec((None, 2), F32)]),
        Node("BiasAdd", {"T": F32, "data_format": "NHWC"}, [Edge("node", 0), Edge("const", 0)], [TensorSpec((None, 2), F32)]),
        Node("ConcatV2", {"T": F32, "N": 2, "Tidx": ok.int32},
             [Edge("node", 1), Edge("node", 0), Edge("const", 1)], [TensorSpec((None, 4), F32)]),
        Node("Relu", {"T": F32}, [Edge("node", 2)], [TensorSpec((None, 4), F32)]),
    ],
    outputs=[Edge("node", 3), Edge("node", 0)], output_structure={"y": 0, "rest": [1]},
    constants=[np.array([1.0, -2.0], np.float32), np.array(1, np.int32)],
    variables=[ok.Variable(np.ones((3, 2), np.float32), name="w")], variable_names=["w"],
)
tmp = Path(sys.argv[1] if len(sys.argv) > 1 else ".")
good = tmp / "good.okg"
ok.save(graph, good)
ok.load(good)  # warm: imports and plugin discovery before the cap
DATA = good.read_bytes()
with zipfile.ZipFile(good) as zf:
    MEMBERS = {n: zf.read(n) for n in zf.namelist()}
DOC = json.loads(MEMBERS["graph.json"])

with open("/proc/self/statm") as f:
    used = int(f.read().split()[0]) * resource.getpagesize()
cap = used + (1 << 30)
resource.setrlimit(resource.RLIMIT_AS, (cap, cap))

def attempt(path):
    try:
        loaded = ok.load(path)
        x = np.ones((2, 3), np.float32)
        for g in loaded.graphs:
            spec = g.inputs[0] if g.inputs else None
            if spec is not None and spec.shape is not None and len(spec.shape) == 2 and spec.dtype is F32:
                loaded(ok.tensor(np.ones([2 if d is None else min(d, 8) for d in spec.shape], np.float32)))
    except OpkernelError:
        pass
    except Exception:
        traceback.print_exc()
        raise

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-2**70, 2**70) | st.floats(allow_nan=False) | st.text(max_size=8)
    | st.sampled_from(["float32", "int32", "node", "var", "const", "input", "list(int)", "tensor", "tensors/var0.npy"]),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=8,
)

def paths(doc, prefix=()):
    yield prefix
    if isinstance(doc, dict):
        for k, v in doc.items():
            yield from paths(v, prefix + (k,))
    elif isinstance(doc, list):
        for k, v in enumerate(doc):
            yield from paths(v, prefix + (k,))

PATHS = [p for p in paths(DOC) if p and not (len(p) > 2 and p[0] == "ops" and p[2] == "interface")]
# The interfaces are covered by their fingerprints: edit a few, the rest of the document often.
PATHS += [p for p in paths(DOC) if len(p) > 2 and p[0] == "ops" and p[2] == "interface"][::25]

def write(doc, path, members=None):
    contents = dict(MEMBERS if members is None else members)
    contents["graph.json"] = json.dumps(doc).encode()
    with zipfile.ZipFile(path, "w") as zf:
        for name, data in contents.items():
            zf.writestr(name, data, compress_type=zipfile.ZIP_STORED if name.endswith(".npy") else zipfile.ZIP_DEFLATED)

COMMON = settings(max_examples=int(sys.argv[2]), deadline=None, database=None, derandomize=True,
                  suppress_health_check=list(HealthCheck))

@COMMON
@given(st.lists(st.tuples(st.integers(0, len(DATA) - 1), st.integers(0, 255)), min_size=1, max_size=6),
       st.integers(0, len(DATA)))
def bytes_mutated(flips, cut):
    data = bytearray(DATA)
    for pos, value in flips:
        data[pos] = value
    path = tmp / "bytes.okg"
    path.write_bytes(bytes(data[:cut]) if cut < len(DATA) - 1 else bytes(data))
    attempt(path)

@COMMON
@given(st.lists(st.tuples(st.sampled_from(PATHS), json_values, st.booleans()), min_size=1, max_size=3))
def json_mutated(edits):
    doc = json.loads(json.dumps(DOC))
    for path, value, delete in edits:
        target = doc
        try:
            for key in path[:-1]:
                target = target[key]
            if delete and isinstance(target, dict):
                del target[path[-1]]
            else:
                target[path[-1]] = value
        except (KeyError, IndexError, TypeError):
            continue
    out = tmp / "json.okg"
    write(doc, out)
    attempt(out)

@COMMON
@given(st.sampled_from(sorted(n for n in MEMBERS if n.endswith(".npy"))), st.binary(max_size=200),
       st.integers(0, 200))
def tensor_mutated(name, tail, keep):
    members = dict(MEMBERS)
    members[name] = members[name][:keep] + tail
    out = tmp / "tensor.okg"
    write(DOC, out, members)
    attempt(out)

bytes_mutated()
json_mutated()
tensor_mutated()
print("fuzzed")
'''


def test_loader_survives_mutated_files(tmp_path) -> None:  # type: ignore[no-untyped-def]
    code = "import sys; sys.argv = ['fuzz', %r, '250']\n" % str(tmp_path) + CHILD
    out = run_isolated(code, backend="cpu", timeout=240, what="ok.load on mutated files",
                       env={"OPKERNEL_STRICT_PLUGINS": "1"})
    assert out.stdout.strip().endswith("fuzzed")
