"""The ``opkernel`` command: ``info`` and ``kernels``, as a subprocess and in-process.

Tables are printed with rich when it is installed and as aligned text when it
is not; ``table`` reads either back into rows, and the in-process tests run
with both renderers.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from importlib.metadata import version

import numpy as np
import pytest

import opkernel as ok
from opkernel import engine
from opkernel.cli import main

CPU_DIST = f"opkernel-cpu {version('opkernel-cpu')}"
HEADERS = {
    "Plugins": ["plugin", "distribution", "version", "module"],
    "Backends": ["backend", "priority", "status", "details"],
    "Kernels": ["op", "backend", "types", "label", "priority", "gradient", "provider"],
}


def table(output: str, title: str) -> list[dict[str, str]]:
    """The rows of the table called ``title`` in ``output``, rich or plain, as dicts by header."""
    lines = output.splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip() == title)
    body = lines[start + 1 :]
    headers = HEADERS[title]
    rows: list[list[str]] = []
    if body[0].startswith("┏"):  # rich: cells between '│'; a wrapped row continues with an empty first cell
        for line in body[3:]:
            if not line.startswith("│"):
                break
            cells = [c.strip() for c in line.strip("│").split("│")]
            if cells[0] or not rows:
                rows.append(cells)
            else:
                rows[-1] = [f"{a} {b}".strip() for a, b in zip(rows[-1], cells)]
    else:  # plain: columns start where the dashes under the header do
        assert body[0].split() == headers
        starts = [m.start() for m in re.finditer(r"-+", body[1])]
        for line in body[2:]:
            if not line.strip():
                break
            rows.append([line[a:b].strip() for a, b in zip(starts, starts[1:] + [len(line)])])
    return [dict(zip(headers, row)) for row in rows]


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "opkernel", *args], capture_output=True, text=True, timeout=60,
        env={**{k: v for k, v in os.environ.items() if not k.startswith("OPKERNEL_")}, "OPKERNEL_BACKEND": "cpu"},
    )


@pytest.fixture(params=["rich", "plain"])
def renderer(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Run the in-process CLI with rich, and again as if rich were not installed."""
    if request.param == "rich":
        pytest.importorskip("rich")
    else:
        for module in ("rich", "rich.console", "rich.table"):
            monkeypatch.setitem(sys.modules, module, None)
    return str(request.param)


# ------------------------------------------------------------- subprocess


def test_info_as_a_command() -> None:
    done = cli("info")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"opkernel {ok.__version__}  (plugin API {ok.PLUGIN_API_VERSION})")
    plugins = {row["plugin"]: row for row in table(done.stdout, "Plugins")}
    assert plugins["cpu"] == {"plugin": "cpu", "distribution": "opkernel-cpu", "version": version("opkernel-cpu"),
                              "module": "opkernel_cpu"}
    assert plugins["builtin"]["distribution"] == "opkernel"
    backends = {row["backend"]: row for row in table(done.stdout, "Backends")}
    assert backends["cpu"]["status"] == "available (active)"
    assert f"numpy={np.__version__}" in backends["cpu"]["details"]
    assert "Plugin errors" not in done.stdout


def test_kernels_as_a_command() -> None:
    done = cli("kernels", "--op", "MatMul", "--backend", "cpu")
    assert done.returncode == 0, done.stderr
    rows = table(done.stdout, "Kernels")
    assert {r["op"] for r in rows} == {"MatMul"}
    assert any(r["backend"] == "cpu" and r["provider"] == f"cpu ({CPU_DIST})" for r in rows)

    done = cli("kernels", "--op", "NoSuchOp")
    assert done.returncode == 1
    assert done.stderr.strip() == "unknown op 'NoSuchOp'" and done.stdout == ""




# -------------------------------------------------------------- in-process


def test_info(renderer: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["info"]) == 0
    out = capsys.readouterr().out
    cpu = next(r for r in table(out, "Plugins") if r["plugin"] == "cpu")
    assert (cpu["distribution"], cpu["version"]) == ("opkernel-cpu", version("opkernel-cpu"))
    backends = {row["backend"]: row for row in table(out, "Backends")}
    assert backends["cpu"]["status"].startswith("available")
    assert backends[ok.get_backend()]["status"] == "available (active)"
    assert list(backends) == [name for name, _, _ in engine.backend_status()]


class NoDevice(ok.Backend):
    name = "nodevice"
    priority = -20

    @classmethod
    def availability(cls) -> str | None:
        return "no device here"


class NoDevicePlugin:
    @ok.hookimpl
    def opkernel_register_backends(self) -> list[type[ok.Backend]]:
        return [NoDevice]


def test_info_shows_a_hand_registered_plugin_and_why_a_backend_is_unavailable(
    renderer: str, fresh_registry: None, capsys: pytest.CaptureFixture[str]
) -> None:
    ok.register_plugin(NoDevicePlugin(), name="nodevice-plugin")
    assert main(["info"]) == 0
    out = capsys.readouterr().out
    plugin = next(r for r in table(out, "Plugins") if r["plugin"] == "nodevice-plugin")
    assert (plugin["distribution"], plugin["version"]) == ("-", "-")
    backend = next(r for r in table(out, "Backends") if r["backend"] == "nodevice")
    assert backend == {"backend": "nodevice", "priority": "-20", "status": "unavailable: no device here", "details": ""}


def test_kernels_lists_every_kernel(renderer: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["kernels"]) == 0
    rows = table(capsys.readouterr().out, "Kernels")
    on_cpu = {r["op"] for r in rows if r["backend"] == "cpu"}
    assert {"MatMul", "AddN", "Add", "Reshape", "Pad", "StringToNumber"} <= on_cpu
    matmul = next(r for r in rows if r["op"] == "MatMul" and r["backend"] == "cpu")
    assert matmul["provider"] == f"cpu ({CPU_DIST})" and matmul["priority"] == "0"
    assert [r["op"] for r in rows] == sorted(r["op"] for r in rows)


def test_kernels_of_one_op_and_one_backend(
    renderer: str, twin: str, capsys: pytest.CaptureFixture[str]
) -> None:
    ok.register_op("Probe>Shown").input("x: T").output("y: T").attr("T: {float, int32}")
    ok.register_kernel("Probe>Shown", backend="*")(lambda x, T: x)
    ok.register_kernel("Probe>Shown", backend="twin", type_constraints={"T": "float32"}, label="fast", priority=3)(
        lambda x, T: x
    )
    ok.not_differentiable("Probe>Shown")

    assert main(["kernels", "--op", "Probe>Shown"]) == 0
    rows = table(capsys.readouterr().out, "Kernels")
    assert rows == [
        {"op": "Probe>Shown", "backend": "*", "types": "any type", "label": "", "priority": "0",
         "gradient": "none (not differentiable)", "provider": __name__},
        {"op": "Probe>Shown", "backend": "twin", "types": "T in [float32]", "label": "fast", "priority": "3",
         "gradient": "none (not differentiable)", "provider": __name__},
    ]

    assert main(["kernels", "--backend", "twin"]) == 0
    rows = table(capsys.readouterr().out, "Kernels")
    assert {r["backend"] for r in rows} <= {"twin", "*"}
    assert {"Add", "Sub", "Mul", "Neg", "Probe>Shown"} <= {r["op"] for r in rows if r["backend"] == "twin"}
    assert next(r for r in rows if r["op"] == "Add")["provider"] == "twin-plugin"

    assert main(["kernels", "--op", "Probe>Shown", "--backend", "cpu"]) == 0
    assert [r["backend"] for r in table(capsys.readouterr().out, "Kernels")] == ["*"]


def test_kernels_of_an_op_without_kernels_and_of_an_unknown_op(
    renderer: str, fresh_registry: None, capsys: pytest.CaptureFixture[str]
) -> None:
    ok.register_op("Probe>Bare").input("x: float").output("y: float")
    assert main(["kernels", "--op", "Probe>Bare"]) == 0
    captured = capsys.readouterr()
    assert [(r["op"], r["backend"], r["types"]) for r in table(captured.out, "Kernels")] == [
        ("Probe>Bare", "-", "no kernels")
    ]

    assert main(["kernels", "--op", "Probe>Nowhere"]) == 1
    captured = capsys.readouterr()
    assert captured.err == "unknown op 'Probe>Nowhere'\n" and captured.out == ""


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["--version"])
    assert info.value.code == 0 and capsys.readouterr().out.strip() == f"opkernel {ok.__version__}"


def test_bad_usage_exits_with_2(capsys: pytest.CaptureFixture[str]) -> None:
    for argv in ([], ["frobnicate"], ["kernels", "--bogus"]):
        with pytest.raises(SystemExit) as info:
            main(argv)
        assert info.value.code == 2
    assert "usage: opkernel" in capsys.readouterr().err


def test_kernels_with_an_unknown_backend_exits_1(capsys):
    from opkernel.cli import main

    assert main(["kernels", "--backend", "cpux"]) == 1
    assert "unknown backend 'cpux'" in capsys.readouterr().err


def test_help_lists_every_command(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["--help"])
    out = capsys.readouterr().out
    for command in ("info", "kernels", "compat"):
        assert re.search(rf"^\s+{command}\s", out, re.M), out
    with pytest.raises(SystemExit):
        main(["kernels", "--help"])
    assert "--gradients" in capsys.readouterr().out


def test_compat_help_is_the_snapshot_tool(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["compat", "--help"])
    out = capsys.readouterr().out
    assert info.value.code == 0 and out.startswith("usage: opkernel compat")
    assert "--check-snapshot" in out and "--update-snapshot" in out and "exit status" in out
