"""Op compatibility (``ok.compat``): TensorFlow's rules, each in both directions, the
built-in ops' snapshot, the command line, and a call that omits an attr added later."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import opkernel as ok
from opkernel import compat
from opkernel.cli import main as cli
from opkernel.op_registry import OpDefBuilder

ROOT = Path(__file__).resolve().parents[1]
SNAPSHOT = ROOT / "tests" / "snapshots" / "builtin_ops.json"


def op(*lines: str, name: str = "Fruit") -> ok.OpDef:
    """An OpDef from spec lines: 'in x: T', 'out y: T', 'attr T: type'."""
    builder = OpDefBuilder(name)
    for line in lines:
        kind, spec = line.split(" ", 1)
        builder = {"in": builder.input, "out": builder.output, "attr": builder.attr}[kind](spec)
    return builder.build()


BASE = ("in x: int32", "out y: int32")
# (rule, old spec, new spec, compatible): every rule appears with a compatible and a breaking
# direction (the same change reversed, or the same kind of change done wrong).
RULES = [
    ("attr added with default", BASE, (*BASE, "attr scale: float = 1.0"), True),
    ("attr added without default", BASE, (*BASE, "attr scale: float"), False),
    ("attr removed", (*BASE, "attr scale: float = 1.0"), BASE, False),
    ("constraint relaxed", ("in x: T", "attr T: {int32, int64}"), ("in x: T", "attr T: {int32, int64, float}"), True),
    ("constraint tightened", ("in x: T", "attr T: {int32, int64, float}"), ("in x: T", "attr T: {int32, int64}"), False),
    ("constraint relaxed", ("in x: T", "attr T: {int32, int64}"), ("in x: T", "attr T: type"), True),
    ("constraint tightened", ("in x: T", "attr T: type"), ("in x: T", "attr T: {int32, int64}"), False),
    ("constraint relaxed", ("attr kind: {'apple', 'orange'}",), ("attr kind: {'apple', 'orange', 'banana'}",), True),
    ("constraint relaxed", ("attr kind: {'apple', 'orange'}",), ("attr kind: string",), True),
    ("constraint tightened", ("attr kind: {'apple', 'orange', 'banana'}",), ("attr kind: {'apple', 'orange'}",), False),
    ("constraint tightened", ("attr kind: string",), ("attr kind: {'apple', 'orange'}",), False),
    ("minimum lowered", ("attr n: int >= 2",), ("attr n: int >= 1",), True),
    ("minimum raised", ("attr n: int >= 1",), ("attr n: int >= 2",), False),
    ("default added", ("attr n: int",), ("attr n: int = 3",), True),
    ("default removed", ("attr n: int = 3",), ("attr n: int",), False),
    ("default changed", ("attr n: int = 3",), ("attr n: int = 4",), False),
    ("attr type changed", ("attr n: int = 3",), ("attr n: float = 3.0",), False),
    ("input type changed", ("in x: float",), ("in x: double",), False),
    ("input type changed", ("in x: float",), ("in x: T", "attr T: {float, double} = DT_DOUBLE"), False),
    ("attr added with default", ("in x: float",), ("in x: T", "attr T: {float, double} = DT_FLOAT"), True),
    ("output type changed", ("out y: int32",), ("out y: int64",), False),
    ("input became a list", ("in x: T", "attr T: type"), ("in x: N * T", "attr T: type", "attr N: int >= 1 = 1"), True),
    ("input became a list", ("in x: T", "attr T: type"), ("in x: N * T", "attr T: type", "attr N: int >= 1 = 2"), False),
    ("input became a list", ("in x: float",), ("in x: L", "attr L: list(type) = [DT_FLOAT]"), True),
    ("input became a list", ("in x: float",), ("in x: L", "attr L: list(type) = [DT_INT32]"), False),
    ("output became a list", ("out y: float",), ("out y: N * float", "attr N: int = 1"), True),
    ("input list became single", ("in x: N * T", "attr T: type", "attr N: int >= 1 = 1"), ("in x: T", "attr T: type"), False),
    ("list input added with empty default", ("in x: float",), ("in x: float", "in extra: N * float", "attr N: int >= 0 = 0"), True),
    ("input added", ("in x: float",), ("in x: float", "in extra: N * float", "attr N: int >= 0 = 1"), False),
    ("input added", ("in x: float",), ("in x: float", "in bias: float"), False),
    ("input added", ("in x: float",), ("in extra: L", "in x: float", "attr L: list(type) >= 0 = []"), False),
    ("list output added with empty default", ("out y: float",), ("out y: float", "out more: L", "attr L: list(type) >= 0 = []"), True),
    ("output added", ("out y: float",), ("out y: float", "out more: float"), False),
    ("input removed", ("in x: float", "in y: float"), ("in x: float",), False),
    ("input renamed", ("in x: float",), ("in features: float",), False),
    ("inputs reordered", ("in x: float", "in y: int32"), ("in y: int32", "in x: float"), False),
    ("output renamed", ("out y: float",), ("out z: float",), False),
    ("input no longer Ref", ("in x: Ref(float)",), ("in x: float",), True),
    ("input became Ref", ("in x: float",), ("in x: Ref(float)",), False),
    ("output became Ref", ("out y: float",), ("out y: Ref(float)",), True),
    ("output no longer Ref", ("out y: Ref(float)",), ("out y: float",), False),
]


@pytest.mark.parametrize("rule, old, new, compatible", RULES, ids=[f"{r[0]}-{'ok' if r[3] else 'breaks'}-{i}" for i, r in enumerate(RULES)])
def test_rule(rule: str, old: tuple[str, ...], new: tuple[str, ...], compatible: bool) -> None:
    report = ok.compat.check(op(*old), op(*new))
    assert report.compatible is compatible, report
    applied = [v for v in report.verdicts if v.rule == rule]
    assert applied, f"rule {rule!r} did not apply:\n{report}"
    assert any(v.breaking is not compatible for v in applied)
    word = "compatible" if compatible else "BREAKING"
    assert any(line.startswith(f"{word} [{rule}]") for line in report.reasons), report.reasons


def test_every_rule_has_both_directions() -> None:
    kinds: dict[str, set[bool]] = {}
    for rule, _, _, compatible in RULES:
        base = rule.replace("input", "ARG").replace("output", "ARG")
        kinds.setdefault(base, set()).add(compatible)
    pairs = [("constraint relaxed", "constraint tightened"), ("minimum lowered", "minimum raised"),
             ("default added", "default removed"), ("attr added with default", "attr added without default")]
    for good, bad in pairs:
        assert kinds[good] == {True} and kinds[bad] == {False}
    assert kinds["ARG became a list"] == {True, False}


def test_unchanged_and_doc_only_changes_are_compatible() -> None:
    old = op("in x: float", "out y: float", "attr n: int = 1")
    assert ok.compat.check(old, old).reasons == []
    documented = OpDefBuilder("Fruit").input("x: float").output("y: float").attr("n: int = 1").doc("Now with docs.\n\nx: the input").build()
    report = ok.compat.check(old, documented)
    assert report.compatible and report.reasons == []


def test_renamed_op_breaks_and_dicts_are_accepted() -> None:
    report = ok.compat.check(op(*BASE).to_dict(), op(*BASE, name="Vegetable").to_dict())
    assert not report.compatible and report.verdicts[0].rule == "op renamed"
    assert "op 'Vegetable': BREAKING" in str(report)


def test_builtin_ops_have_not_changed_incompatibly() -> None:
    reports = compat.check_snapshot(SNAPSHOT, "builtin")
    broken = [str(r) for r in reports if not r.compatible]
    assert not broken, (
        "a built-in op changed incompatibly (TensorFlow's rules: add attrs with defaults, relax constraints, "
        "add ops instead of changing them):\n" + "\n".join(broken)
    )


def test_snapshot_update_records_compatible_changes_only(tmp_path: Path) -> None:
    path = tmp_path / "ops.json"
    data = json.loads(SNAPSHOT.read_text())
    add = data["ops"]["Add"]
    add["attrs"] = [a for a in add["attrs"] if a["name"] != "T"] + [{**next(a for a in add["attrs"] if a["name"] == "T"), "allowed_values": ["float32"]}]
    path.write_text(json.dumps(data))  # an older Add that allowed only float32: today's relaxes it
    reports = compat.update_snapshot(path)
    assert [r.op for r in reports if r.verdicts] == ["Add"] and all(r.compatible for r in reports)
    assert json.loads(path.read_text())["ops"]["Add"] == json.loads(SNAPSHOT.read_text())["ops"]["Add"]
    data["ops"]["Add"]["inputs"][0]["name"] = "a"  # an older Add whose first input was 'a': renaming breaks
    path.write_text(json.dumps(data))
    with pytest.raises(ValueError, match="input renamed"):
        compat.update_snapshot(path)
    assert compat.update_snapshot(path, force=True)


def test_the_documented_refresh_command(tmp_path: Path) -> None:
    path = tmp_path / "builtin_ops.json"
    path.write_text(SNAPSHOT.read_text())
    run = subprocess.run([sys.executable, "-m", "opkernel.compat", "--update-snapshot", str(path)],
                         capture_output=True, text=True, check=True)
    assert "wrote" in run.stdout and "0 breaking" in run.stdout
    assert json.loads(path.read_text()) == json.loads(SNAPSHOT.read_text())


def test_the_command_checks_and_updates_snapshots(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli(["compat", "--check-snapshot", str(SNAPSHOT)]) == 0
    assert "0 breaking" in capsys.readouterr().out
    path = tmp_path / "builtin_ops.json"
    assert cli(["compat", "--update-snapshot", str(path)]) == 0
    assert f"wrote {path}" in capsys.readouterr().out
    assert json.loads(path.read_text()) == json.loads(SNAPSHOT.read_text())
    assert cli(["compat", "--check-snapshot", str(tmp_path / "missing.json")]) == 2
    assert "missing.json" in capsys.readouterr().err


def _write(path: Path, op_def: ok.OpDef) -> str:
    path.write_text(json.dumps(op_def.to_dict()))
    return str(path)


def test_cli_exit_status(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    old = _write(tmp_path / "old.json", op("in x: T", "attr T: {int32, int64}"))
    relaxed = _write(tmp_path / "relaxed.json", op("in x: T", "attr T: {int32, int64, float}"))
    assert cli(["compat", old, relaxed]) == 0
    assert "compatible [constraint relaxed]" in capsys.readouterr().out
    assert cli(["compat", relaxed, old]) == 1
    assert "BREAKING [constraint tightened]" in capsys.readouterr().out
    assert cli(["compat", old, str(tmp_path / "missing.json")]) == 2


# ------------------------------------------------------- a call omitting a later attr


def _register_general_unary(polymorphic: bool) -> None:
    builder = ok.register_op("MyGeneralUnaryOp")
    if polymorphic:  # version 2: made polymorphic, with a default that keeps version 1's behaviour
        builder.input("in: T").output("out: T").attr("T: numerictype = DT_FLOAT")
    else:
        builder.input("in: float").output("out: float")
    builder.set_shape_fn(ok.shape_fns.unchanged_shape)
    ok.register_kernel("MyGeneralUnaryOp", backend="*")(lambda x, **attrs: ok.ops.mul(x, x))


CALLS: list[Any] = [[1.0, 2.5], [[1, 2], [3, 4]], np.array([0.5, -2.0], np.float32), 3]


def test_an_omitted_attr_added_with_a_default_behaves_as_before(fresh_registry: None) -> None:
    results = {}
    for polymorphic in (False, True):
        with ok.testing.isolated_registries():
            _register_general_unary(polymorphic)
            results[polymorphic] = [ok.ops.my_general_unary_op(x) for x in CALLS]
            defs = ok.op_def("MyGeneralUnaryOp")
            if polymorphic:
                new_def = defs
            else:
                old_def = defs
    assert ok.compat.check(old_def, new_def).compatible
    for before, after in zip(results[False], results[True]):
        assert before.dtype == after.dtype == ok.float32
        np.testing.assert_array_equal(before.numpy(), after.numpy())
