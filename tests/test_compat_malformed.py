"""``opkernel compat`` on files that are not well-formed op definitions: a clear message
naming the file and the problem, and exit status 2, never 1 (which says a change breaks
callers) or a traceback; ``python -m opkernel.compat`` the same."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from opkernel import compat
from opkernel.cli import main
from opkernel.errors import OpSpecError

GOOD = {"name": "Foo", "inputs": [{"name": "x", "type_attr": "T"}], "outputs": [{"name": "y", "type_attr": "T"}],
        "attrs": [{"name": "T", "type": "type"}]}


def _op(**changes: object) -> str:
    return json.dumps({**GOOD, **changes})


MALFORMED: dict[str, tuple[str | bytes, str]] = {
    "truncated JSON": ('{"name": "Foo",', r"not valid JSON: .* at line 1, column 16"),
    "not UTF-8": (b"\xff\xfe{}", "not UTF-8 text"),
    "nested too deeply": ("[" * 100_000 + "]" * 100_000, "nested too deeply"),
    "a string": ('"Foo"', "expected an op definition, an array of them or a snapshot, got a string"),
    "a list of ints": ("[1, 2]", "entry 0 is malformed: an op definition must be an object, got an int"),
    "ops not a collection": ('{"ops": 5}', "'ops' must be an object or an array of op definitions, got an int"),
    "snapshot key is not the op's name": ('{"ops": {"Bar": ' + _op() + "}}", r"ops\['Bar'\] holds the op 'Foo'"),
    "name not a string": (_op(name=5), "'name' must be an op name"),
    "name not CamelCase": (_op(name="foo bar"), "'name' must be an op name"),
    "misspelt key": (_op(input=[]), "unknown key 'input'"),
    "input without a type": (_op(inputs=[{"name": "x"}]), "input 'x': exactly one of 'dtype', 'type_attr'"),
    "input typed twice": (_op(inputs=[{"name": "x", "dtype": "float32", "type_attr": "T"}]), "exactly one of"),
    "type attr missing": (_op(attrs=[]), r"input 'x': 'type_attr' must name an attr of type 'type', got 'T' \(no such attr\)"),
    "length attr of the wrong type": (
        _op(inputs=[{"name": "x", "type_attr": "T", "number_attr": "T"}]), "'number_attr' must name an attr of type 'int'"
    ),
    "unknown attr type": (_op(attrs=[{"name": "T", "type": "typ"}]), "attr 'T': 'type' must be one of"),
    "default missing": (_op(attrs=[{"name": "T", "type": "type", "has_default": True}]), "'has_default' is true but there is no 'default'"),
    "bad default": (_op(attrs=[{"name": "T", "type": "type", "has_default": True, "default": "floaty"}]), "cannot interpret 'floaty'"),
    "minimum not an int": (_op(attrs=[{"name": "T", "type": "type", "minimum": "1"}]), "'minimum' must be an integer"),
    "is_stateful not a boolean": (_op(is_stateful="yes"), "'is_stateful' must be a boolean, got a string"),
    "duplicate argument names": (_op(outputs=[{"name": "x", "type_attr": "T"}]), r"the name 'x' is given twice \(input and output\)"),
    "op defined twice": ("[" + _op() + ", " + _op() + "]", "op 'Foo' is defined twice"),
}


@pytest.fixture
def good(tmp_path: Path) -> str:
    path = tmp_path / "good.json"
    path.write_text(_op(), encoding="utf-8")
    return str(path)


def _write(tmp_path: Path, content: str | bytes) -> str:
    path = tmp_path / "bad.json"
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8")
    return str(path)


@pytest.mark.parametrize("case", MALFORMED)
def test_a_malformed_file_exits_with_status_2_and_says_what_is_wrong(
    case: str, tmp_path: Path, good: str, capsys: pytest.CaptureFixture[str]
) -> None:
    content, expected = MALFORMED[case]
    bad = _write(tmp_path, content)
    for old, new in ((good, bad), (bad, good)):
        assert main(["compat", old, new]) == 2
        captured = capsys.readouterr()
        assert "Traceback" not in captured.err and not captured.out
        assert captured.err.startswith(f"opkernel compat: cannot read the OpDefs: {bad}: ")
        assert len(re.findall(expected, captured.err)) == 1, captured.err
    with pytest.raises(OpSpecError):
        compat.load_ops(bad)
    assert (compat.EXIT_COMPATIBLE, compat.EXIT_BREAKING, compat.EXIT_BAD_INPUT) == (0, 1, 2)


def test_the_well_formed_file_still_compares(good: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["compat", good, good]) == 0
    breaking = tmp_path / "new.json"
    breaking.write_text(_op(attrs=[{"name": "T", "type": "type", "allowed_values": ["float32"]}]), encoding="utf-8")
    assert main(["compat", good, str(breaking)]) == 1
    assert "BREAKING [constraint tightened]" in capsys.readouterr().out


def test_python_m_opkernel_compat_exits_2_without_a_traceback(tmp_path: Path, good: str) -> None:
    bad = _write(tmp_path, MALFORMED["nested too deeply"][0])
    for args in ([good, bad], ["--check-snapshot", bad]):
        done = subprocess.run(
            [sys.executable, "-m", "opkernel.compat", *args], capture_output=True, text=True, timeout=120
        )
        assert done.returncode == 2 and "Traceback" not in done.stderr
        assert f"{bad}: its JSON is nested too deeply" in done.stderr


def test_the_exit_statuses_are_documented_in_help(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["compat", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "exit status: 0 every change is compatible; 1 a change breaks existing callers; 2 a file cannot be read" in text
    assert " ".join(compat.EXIT_STATUS_HELP.split()) in text
    with pytest.raises(SystemExit):
        compat.main(["--help"])
    assert " ".join(compat.EXIT_STATUS_HELP.split()) in " ".join(capsys.readouterr().out.split())
