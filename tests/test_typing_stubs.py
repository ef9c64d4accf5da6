"""Types for users: the generated stub of ``opkernel.ops`` (core/opkernel/ops/__init__.pyi) matches
the wrappers, cannot drift from the generator, and a user program under ``mypy --strict``
sees tensors, op results and attrs typed."""

from __future__ import annotations

import ast
import inspect
import re
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

import opkernel as ok
from opkernel import engine
from opkernel.ops import _stubgen
from opkernel.ops._gen import split_namespace
from opkernel.testing import isolated_registries

ROOT = Path(__file__).resolve().parents[1]
_PRIVATE = {"__getattr__", "__dir__", "_wrapper", "_invalidate"}
_REQUIRED = "<required>"


def _stub_tree() -> ast.Module:
    return ast.parse(_stubgen.STUB_PATH.read_text(encoding="utf-8"))


def _functions(tree: ast.Module) -> dict[str, ast.FunctionDef]:
    return {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}


def _classes(tree: ast.Module) -> dict[str, ast.ClassDef]:
    return {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}


def _normal(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value


def _stub_params(fn: ast.FunctionDef) -> list[tuple[str, str, Any]]:
    """(name, kind, default) per parameter; default is _REQUIRED, a value, or ... (not written)."""
    args = fn.args
    positional: list[Any] = [_REQUIRED] * (len(args.args) - len(args.defaults)) + list(args.defaults)
    out = []
    for a, d in zip(args.args, positional):
        out.append((a.arg, "POSITIONAL_OR_KEYWORD", d if d is _REQUIRED else ast.literal_eval(d)))
    for a, d in zip(args.kwonlyargs, args.kw_defaults):
        out.append((a.arg, "KEYWORD_ONLY", _REQUIRED if d is None else ast.literal_eval(d)))
    return out


def _runtime_params(fn: Any) -> list[tuple[str, str, Any]]:
    out = []
    for p in inspect.signature(fn).parameters.values():
        missing = p.default is inspect.Parameter.empty or p.default is engine.REQUIRED
        out.append((p.name, p.kind.name, _REQUIRED if missing else _normal(p.default)))
    return out


def test_stub_is_what_the_generator_writes_now() -> None:
    expected = _stubgen.render_stub(_stubgen.builtin_op_defs())
    assert _stubgen.STUB_PATH.read_text(encoding="utf-8") == expected, (
        "core/opkernel/ops/__init__.pyi is out of date: run python -m opkernel.ops._stubgen"
    )


def test_every_wrapper_is_in_the_stub_with_its_signature() -> None:
    functions = _functions(_stub_tree())
    defs = _stubgen.builtin_op_defs()
    assert len(defs) >= 100
    names = set()
    for op_def in defs:
        ns, attr = split_namespace(op_def.name)
        assert ns is None, op_def.name
        names.add(attr)
        assert attr in functions, f"ok.ops.{attr} ({op_def.name}) is not in the stub"
        stub = _stub_params(functions[attr])
        runtime = _runtime_params(getattr(ok.ops, attr))
        assert [p[:2] for p in stub] == [p[:2] for p in runtime], op_def.name
        for (name, _, written), (_, _, actual) in zip(stub, runtime):
            if written is not ...:  # a default the stub spells out must be the wrapper's
                assert written == actual, f"{op_def.name}: parameter {name!r}"
    # ...and the stub declares nothing that is not there at run time.
    assert set(functions) - _PRIVATE == names
    for private in _PRIVATE - {"__getattr__", "__dir__"}:
        assert callable(getattr(ok.ops, private))
    assert isinstance(ok.ops.Namespace, type)


def test_result_types_are_the_engines() -> None:
    """Each op's declared result is what the engine packs its outputs into."""
    tree = _stub_tree()
    functions, classes = _functions(tree), _classes(tree)
    seen = set()
    for op_def in _stubgen.builtin_op_defs():
        returns = ast.unparse(functions[split_namespace(op_def.name)[1]].returns)  # type: ignore[arg-type]
        lengths = [2 if o.is_list else None for o in op_def.outputs]
        flat = [object() for _ in range(sum(n or 1 for n in lengths))]
        packed = engine.packer(op_def, lengths)(flat)
        seen.add(returns if returns in ("None", "Tensor", "list[Tensor]") else "NamedTuple")
        if returns == "None":
            assert packed is None, op_def.name
        elif returns == "Tensor":
            assert packed is flat[0], op_def.name
        elif returns == "list[Tensor]":
            assert packed == flat, op_def.name
        else:
            fields = {
                s.target.id: ast.unparse(s.annotation)  # type: ignore[union-attr]
                for s in classes[returns].body if isinstance(s, ast.AnnAssign)
            }
            assert type(packed).__name__ == returns, op_def.name
            assert list(packed._fields) == list(fields), op_def.name
            for field, part in zip(packed._fields, packed):
                assert (fields[field] == "list[Tensor]") == isinstance(part, list), (op_def.name, field)
    assert {"Tensor", "list[Tensor]", "NamedTuple"} <= seen  # (no built-in op has no outputs)


def test_every_attr_kind_and_namespaced_ops_render() -> None:
    with isolated_registries():
        ok.register_op("Vendor>Everything").input("ref: Ref(float)").input("xs: N * T").input("y: float") \
            .output("ys: N * T").output("z: float") \
            .attr("T: {float, double}").attr("N: int >= 1").attr("k: int").attr("f: float = 0.5") \
            .attr("s: shape").attr("ts: list(type) = []").attr("names: list(string) = ['a', 'b']") \
            .attr("mode: {'fast', 'exact'} = 'fast'").attr("flag: bool = true").attr("out: type = DT_INT64") \
            .attr("t: tensor").set_is_stateful()
        ok.register_op("Vendor>Nothing").input("x: float")
        text = _stubgen.render_stub([ok.op_def("Vendor>Everything"), ok.op_def("Vendor>Nothing")])
    compile(text, "__init__.pyi", "exec")
    assert "@type_check_only\nclass Vendor_Everything(NamedTuple):\n    ys: list[Tensor]\n    z: Tensor\n" in text
    assert "@type_check_only\nclass _VendorNamespace(Namespace):\n" in text
    assert "\nvendor: _VendorNamespace\n" in text
    signature = """\
    def everything(
        self,
        ref: Variable,
        xs: Sequence[TensorLike],
        y: TensorLike,
        k: int,
        s: ShapeLike,
        t: TensorLike,
        f: float = 0.5,
        ts: Sequence[DTypeLike] = [],
        names: Sequence[str] = ["a", "b"],
        mode: Literal["fast", "exact"] = "fast",
        flag: bool = True,
        out: DTypeLike = ...,
        name: str | None = None,
        *,
        _kernel: str | None = None,
    ) -> Vendor_Everything:
"""
    assert signature in text
    assert "    def nothing(self, x: TensorLike, name: str | None = None, *, _kernel: str | None = None) -> None:\n" in text


def test_check_mode_reports_a_stale_stub(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    stub = tmp_path / "ops.pyi"
    stub.write_text("# stale\n", encoding="utf-8")
    assert _stubgen.main(["--check", "--output", str(stub)]) == 1
    assert "out of date: run python -m opkernel.ops._stubgen" in capsys.readouterr().err
    assert _stubgen.main(["--output", str(stub)]) == 0
    assert _stubgen.main(["--check", "--output", str(stub)]) == 0
    assert stub.read_text(encoding="utf-8") == _stubgen.STUB_PATH.read_text(encoding="utf-8")


# A user program: each `# T: <type>` is the type mypy must reveal on that line, each
# `# E: <code>` an error it must report there; nothing else may be reported.
USER_PROGRAM = """\
from __future__ import annotations

import numpy as np

import opkernel as ok
from opkernel.typing import TensorLike


def scaled(x: TensorLike, k: float) -> ok.Tensor:
    return ok.ops.mul(x, k)


a = ok.tensor([[1.0, 2.0], [3.0, 4.0]])
reveal_type(a)  # T: opkernel.tensor.Tensor
reveal_type(a @ a)  # T: opkernel.tensor.Tensor
reveal_type(a + 1.0)  # T: opkernel.tensor.Tensor
reveal_type(2.0 * a - a / 2)  # T: opkernel.tensor.Tensor
reveal_type(-a)  # T: opkernel.tensor.Tensor
reveal_type(a.shape)  # T: tuple[int, ...]
reveal_type(a.ndim)  # T: int
reveal_type(a.dtype)  # T: opkernel.dtypes.DType
reveal_type(a.backend)  # T: str
reveal_type(a.numpy())  # T: numpy.ndarray[tuple[Any, ...], numpy.dtype[Any]]
reveal_type(a.to("cpu"))  # T: opkernel.tensor.Tensor
reveal_type(a[0, 1:])  # T: opkernel.tensor.Tensor
reveal_type(a == a)  # T: opkernel.tensor.Tensor
reveal_type(a < 2.0)  # T: opkernel.tensor.Tensor
reveal_type(a ** 2 % 3 // 1)  # T: opkernel.tensor.Tensor
reveal_type(abs(a).T.sum(axis=0))  # T: opkernel.tensor.Tensor
reveal_type(a.ref())  # T: opkernel.tensor.TensorRef
reveal_type([row for row in a])  # T: list[opkernel.tensor.Tensor]
reveal_type(scaled([1.0, 2.0], 3))  # T: opkernel.tensor.Tensor
reveal_type(ok.ops.mat_mul(a, a, transpose_b=True))  # T: opkernel.tensor.Tensor
reveal_type(ok.ops.split(0, a, num_split=2))  # T: list[opkernel.tensor.Tensor]
reveal_type(ok.ops.add_n([a, np.ones((2, 2), np.float32), [[1.0, 1.0], [1.0, 1.0]]]))  # T: opkernel.tensor.Tensor
reveal_type(ok.ops.cast(a, DstT=ok.int32))  # T: opkernel.tensor.Tensor
image = ok.tensor(np.ones((1, 4, 4, 1), np.float32))
pooled = ok.ops.max_pool_with_argmax(image, ksize=[1, 2, 2, 1], strides=[1, 1, 1, 1], padding="VALID")
reveal_type(pooled)  # T: tuple[opkernel.tensor.Tensor, opkernel.tensor.Tensor, fallback=opkernel.ops.MaxPoolWithArgmax]
reveal_type(pooled.argmax)  # T: opkernel.tensor.Tensor
reveal_type(ok.stop_gradient(a))  # T: opkernel.tensor.Tensor
v = ok.Variable(np.zeros(3, np.float32))
reveal_type(v.assign_add([1.0, 2.0, 3.0]))  # T: opkernel.tensor.Variable
reveal_type(ok.ops.assign(v, [0.0, 0.0, 0.0]))  # T: opkernel.tensor.Tensor
with ok.GradientTape(persistent=True) as tape:
    tape.watch(a)
    loss = ok.ops.sum(a * a, [0, 1])
reveal_type(tape)  # T: opkernel.autodiff.GradientTape
reveal_type(loss)  # T: opkernel.tensor.Tensor
reveal_type(tape.gradient(loss, a))  # T: opkernel.tensor.Tensor | None
reveal_type(tape.gradient(loss, a, unconnected_gradients="zero"))  # T: opkernel.tensor.Tensor
reveal_type(tape.gradient(loss, [a, v]))  # T: list[opkernel.tensor.Tensor | None]
reveal_type(tape.gradient(loss, [v], unconnected_gradients="zero"))  # T: list[opkernel.tensor.Tensor]
reveal_type(tape.gradient(loss, {"w": v}))  # T: dict[str, Any]


def square_sum(x: ok.Tensor, k: float = 1.0) -> ok.Tensor:
    return ok.ops.sum(x * x * k, [0, 1])


reveal_type(ok.grad(square_sum)(a))  # T: opkernel.tensor.Tensor
reveal_type(ok.grad(square_sum, argnums=[0])(a))  # T: tuple[opkernel.tensor.Tensor, ...]
reveal_type(ok.value_and_grad(square_sum)(a, k=2.0))  # T: tuple[opkernel.tensor.Tensor, opkernel.tensor.Tensor]
ok.grad(square_sum)(a, k="two")  # E: arg-type
ok.ops.mat_mul(a, a, transpose_a="yes")  # E: arg-type
ok.ops.max_pool(image, ksize=[1, 2, 2, 1], strides=[1, 1, 1, 1], padding="SAME!")  # E: arg-type
ok.ops.assign(a, 1.0)  # E: arg-type
ok.ops.split(0, a)  # E: call-arg
n: int = a @ a  # E: assignment
ok.engine_internals  # E: attr-defined
"""


def _expectations(program: str) -> tuple[dict[int, str], dict[int, str]]:
    types, errors = {}, {}
    for number, line in enumerate(program.splitlines(), 1):
        if "  # T: " in line:
            types[number] = line.split("  # T: ", 1)[1]
        elif "  # E: " in line:
            errors[number] = line.split("  # E: ", 1)[1]
    return types, errors


def test_user_program_is_typed_under_mypy_strict(tmp_path: Path, request: pytest.FixtureRequest) -> None:
    # mypy finds opkernel in the checkout's core/, as the Makefile's typecheck does; its cache
    # stays in pytest's cache between runs: a cold cache (numpy's and opkernel's types) costs
    # several seconds; mypy re-checks what changed.
    cache = getattr(request.config, "cache", None)  # None under -p no:cacheprovider
    kept = cache.mkdir("opkernel-mypy") if cache is not None else tmp_path
    (tmp_path / "mypy.ini").write_text("[mypy]\n", encoding="utf-8")
    # Every public name must be visible to mypy too (a lazy one needs its TYPE_CHECKING import).
    program = USER_PROGRAM + "".join(f"ok.{name}\n" for name in sorted(ok.__all__))
    (tmp_path / "user.py").write_text(program, encoding="utf-8")
    cmd = [
        sys.executable, "-m", "mypy", "--strict", "--config-file", "mypy.ini", "--cache-dir", str(kept / "cache"),
        # Errors inside opkernel are the Makefile's mypy run's business, not this program's.
        "--follow-imports=silent", "--show-error-codes", "--no-pretty", "--no-color-output", "user.py",
    ]
    done = subprocess.run(
        cmd, cwd=tmp_path, env={"MYPYPATH": str(ROOT / "core"), "PATH": "/usr/bin:/bin"}, capture_output=True, text=True,
        timeout=120,
    )
    report = done.stdout + done.stderr
    revealed: dict[int, str] = {}
    reported: dict[int, str] = {}
    other = []
    for line in report.splitlines():
        m = re.match(r"user\.py:(\d+): (note|error): (.*)", line)
        if m is None:
            continue
        number, kind, message = int(m[1]), m[2], m[3]
        note = re.fullmatch(r'Revealed type is "(.*)"', message)
        if kind == "note" and note:
            revealed[number] = note[1]
        elif kind == "error" and (code := re.search(r"\[([a-z-]+)\]$", message)):
            reported[number] = code[1]
        elif kind == "error":
            other.append(line)
    types, errors = _expectations(USER_PROGRAM)
    assert revealed == types, report
    assert reported == errors, report
    assert not other, report
    assert done.returncode == 1, report  # the deliberate errors


def test_user_program_runs() -> None:
    """The typed program's calls (without its deliberate errors) run, so the types describe working code."""
    lines = [ln.split("  # T: ")[0] for ln in USER_PROGRAM.splitlines() if "  # E: " not in ln]
    code = "\n".join(ln.replace("reveal_type(", "print(", 1) if ln.startswith("reveal_type(") else ln for ln in lines)
    with ok.use_backend("cpu"):
        exec(compile(textwrap.dedent(code), "<user program>", "exec"), {"__name__": "user"})
