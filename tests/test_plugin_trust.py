"""Plugin trust: no plugin silently takes over another distribution's kernel or backend,
discovery is all-or-nothing per plugin (KeyboardInterrupt included) and resumable, a failed
``load_op_library`` leaves nothing behind, and a module in the current directory never
passes for an installed op package.

Hostile plugins are real distributions (a ``.dist-info`` with ``entry_points.txt`` and
``RECORD`` beside their module) in a temporary site directory that a child process finds
on ``PYTHONPATH``; each child runs with a timeout (tests/isolated.py).
"""

from __future__ import annotations

import os
import subprocess
import textwrap
from pathlib import Path

import numpy as np
import pytest
from isolated import run_isolated

import opkernel as ok
from opkernel import plugins
from opkernel.errors import AlreadyExistsError, PluginError

MATMUL_CHECK = """
import warnings
import numpy as np
import opkernel as ok
from opkernel import plugins
a = np.arange(6, dtype=np.float32).reshape(2, 3)
with ok.use_backend("cpu"):
    got = ok.ops.mat_mul(a, a.T).numpy()
print("CORRECT" if np.array_equal(got, a @ a.T) else "WRONG")
print("ERRORS", [(f.plugin, str(f.error)) for f in plugins.plugin_errors()])
print("OVERRIDES", [str(o) for o in plugins.overrides()])
"""


def install(
    site: Path, dist: str, entry_point: str | None, module: str, source: str, version: str = "6.6.6",
    namespaces: tuple[str, ...] = (),
) -> None:
    """Install ``module`` (``source``) into ``site`` as distribution ``dist`` whose entry point
    ``entry_point`` in the group ``opkernel`` (if any) names it, declaring the op ``namespaces``
    (group ``opkernel.namespaces``), as pip would lay it out."""
    site.mkdir(parents=True, exist_ok=True)
    (site / f"{module}.py").write_text(textwrap.dedent(source))
    info = site / f"{dist.replace('-', '_')}-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n")
    text = f"[opkernel]\n{entry_point} = {module}\n" if entry_point else ""
    if namespaces:
        text += "[opkernel.namespaces]\n" + "".join(f"{ns} = {module}\n" for ns in namespaces)
    (info / "entry_points.txt").write_text(text)
    record = [f"{module}.py", *(f"{info.name}/{n}" for n in ("METADATA", "entry_points.txt", "RECORD"))]
    (info / "RECORD").write_text("".join(f"{line},,\n" for line in record))


def run(
    code: str, site: Path, *, strict: bool = False, cwd: Path | None = None, what: str = ""
) -> subprocess.CompletedProcess[str]:
    env = {"PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)}
    if strict:
        env["OPKERNEL_STRICT_PLUGINS"] = "1"
    return run_isolated(textwrap.dedent(code), timeout=180, cwd=cwd, env=env, what=what)


def fast_matmul(override: bool, priority: int = 100) -> str:
    """A plugin's MatMul kernel for cpu: priority 100 outranks opkernel-cpu's; priority 0 and
    no type constraints is the very key opkernel-cpu registers its own under."""
    return f"""
        import opkernel as ok

        @ok.hookimpl
        def opkernel_register_kernels():
            @ok.register_kernel("MatMul", backend="cpu", priority={priority}, override={override})
            def matmul(a, b, **attrs):
                return (a @ b) * 0  # fast, and wrong
        """


# ------------------------------------------------------------------ kernels


@pytest.mark.parametrize("priority", [100, 0])
@pytest.mark.parametrize("entry_point", ["aaa_fast", "zzz_fast"])  # loaded before and after opkernel-cpu
def test_a_kernel_for_a_builtin_op_does_not_silently_win(tmp_path: Path, entry_point: str, priority: int) -> None:
    install(tmp_path, "evil-fast-matmul", entry_point, "evil_fast_matmul", fast_matmul(False, priority))
    out = run(MATMUL_CHECK, tmp_path, what="MatMul@cpu from a third party").stdout
    assert "CORRECT" in out
    assert f"('{entry_point}'," in out and "override=True" in out  # refused, and says why
    assert "OVERRIDES []" in out


@pytest.mark.parametrize("priority", [100, 0])
@pytest.mark.parametrize("entry_point", ["aaa_fast", "zzz_fast"])
def test_an_overriding_kernel_is_warned_listed_and_refused_in_strict_mode(
    tmp_path: Path, entry_point: str, priority: int
) -> None:
    install(tmp_path, "evil-fast-matmul", entry_point, "evil_fast_matmul", fast_matmul(True, priority))
    done = run(MATMUL_CHECK, tmp_path, what="MatMul override")
    assert "WRONG" in done.stdout  # it asked to win, and does, but not silently:
    warned = [line for line in done.stderr.splitlines() if "PluginWarning" in line]
    assert any("evil-fast-matmul 6.6.6" in line and "opkernel-cpu" in line for line in warned), done.stderr
    assert "OVERRIDES [\"kernel for op 'MatMul' on backend 'cpu'" in done.stdout
    info = run("from opkernel.cli import main; main(['info'])", tmp_path, what="opkernel info").stdout
    assert "Overrides" in info and "evil-fast-matmul" in info and "MatMul" in info
    strict = run(
        "import opkernel as ok\ntry:\n    ok.available_backends()\nexcept ok.errors.PluginError as e:\n"
        "    print('REFUSED', e)\n" + MATMUL_CHECK,
        tmp_path,
        strict=True,
        what="MatMul override under OPKERNEL_STRICT_PLUGINS=1",
    ).stdout
    assert "REFUSED" in strict and "OPKERNEL_STRICT_PLUGINS=1 refuses overrides" in strict
    assert "CORRECT" in strict and "OVERRIDES []" in strict


def test_a_script_registering_over_a_backends_kernel_needs_override(fresh_registry: None) -> None:
    ok.available_backends()  # discovery has run: opkernel-cpu's MatMul is registered
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    with pytest.raises(AlreadyExistsError, match=r"would be chosen over the one cpu \(opkernel-cpu") as info:
        ok.register_kernel("MatMul", backend="cpu", priority=100)(lambda a, b, **attrs: a @ b * 0)
    assert info.value.op == "MatMul" and "override=True" in str(info.value)
    with ok.use_backend("cpu"):
        np.testing.assert_array_equal(ok.ops.mat_mul(a, a.T).numpy(), a @ a.T)
        ok.register_kernel("MatMul", backend="cpu", priority=-1, type_constraints={"T": "int8"})(
            lambda a, b, **attrs: a @ b
        )  # lower priority: only adds coverage, no override
        assert plugins.overrides() == []
        ok.register_kernel("MatMul", backend="cpu", priority=100, override=True)(lambda a, b, **attrs: a @ b * 0)
        (override,) = plugins.overrides()
        assert override.provider.plugin == __name__ and override.overridden.distribution == "opkernel-cpu"
        np.testing.assert_array_equal(ok.ops.mat_mul(a, a.T).numpy(), np.zeros((2, 2)))


def test_a_script_kernel_registered_before_discovery_does_not_win_either(tmp_path: Path) -> None:
    done = run(
        textwrap.dedent("""
            import opkernel as ok
            from opkernel import plugins
            assert not plugins._loaded  # registering a kernel does not run discovery
            ok.register_kernel("MatMul", backend="cpu", priority=100)(lambda a, b, **attrs: a @ b * 0)
            """) + MATMUL_CHECK,
        tmp_path,
        what="a script's MatMul registered before discovery",
    )
    assert "CORRECT" in done.stdout and "OVERRIDES []" in done.stdout
    assert "PluginWarning: __main__: its kernel for op 'MatMul' on backend 'cpu'" in done.stderr


def test_kernels_from_one_distribution_still_use_priorities(fresh_registry: None) -> None:
    ok.register_op("Trust>Pick").input("x: T").output("y: T").attr("T: {float, int32}").set_shape_fn(
        ok.shape_fns.unchanged_shape
    )
    ok.register_kernel("Trust>Pick", backend="*")(lambda x, T: x)
    ok.register_kernel("Trust>Pick", backend="*", priority=5)(lambda x, T: x + 1)  # the same script: no override
    assert ok.ops.trust.pick([1.0]).numpy().tolist() == [2.0]


# ------------------------------------------------------------------ backends

IMPOSTOR = """
    import numpy as np
    import opkernel as ok

    class Impostor(ok.Backend):
        name = "cpu"
        priority = 100
        override = {override}
        array_types = (np.ndarray,)
        host_memory_is_native = True

        def from_numpy(self, array):
            return array

        def to_numpy(self, value):
            return value

    @ok.hookimpl
    def opkernel_register_backends():
        return [Impostor]
    """

BACKEND_CHECK = """
import opkernel as ok
from opkernel import plugins
print("CPU", plugins.backend_classes()["cpu"][0].__module__)
print("ERRORS", [(f.plugin, str(f.error)) for f in plugins.plugin_errors()])
print("OVERRIDES", [str(o) for o in plugins.overrides()])
"""


def test_a_plugin_sorting_first_cannot_take_the_cpu_backend(tmp_path: Path) -> None:
    install(tmp_path, "evil-backend", "aaa", "evil_backend", IMPOSTOR.format(override=False))
    out = run(BACKEND_CHECK, tmp_path, what="backend 'cpu' from a plugin sorting first").stdout
    assert "CPU opkernel_cpu.backend" in out
    assert "('aaa'," in out and "belongs to cpu (opkernel-cpu" in out


def test_an_overriding_backend_is_warned_listed_and_refused_in_strict_mode(tmp_path: Path) -> None:
    install(tmp_path, "evil-backend", "aaa", "evil_backend", IMPOSTOR.format(override=True))
    done = run(BACKEND_CHECK, tmp_path, what="backend override")
    assert "CPU evil_backend" in done.stdout
    assert "evil-backend 6.6.6" in done.stderr and "opkernel-cpu" in done.stderr
    assert "OVERRIDES [\"backend 'cpu'" in done.stdout
    strict = run(
        "import opkernel as ok\ntry:\n    ok.available_backends()\nexcept ok.errors.PluginError as e:\n"
        "    print('REFUSED', e)\n" + BACKEND_CHECK,
        tmp_path,
        strict=True,
        what="backend override under OPKERNEL_STRICT_PLUGINS=1",
    ).stdout
    assert "REFUSED" in strict and "CPU opkernel_cpu.backend" in strict


def test_a_second_distribution_declaring_the_cpu_entry_point_is_not_loaded_silently(tmp_path: Path) -> None:
    install(tmp_path, "evil-cpu", "cpu", "evil_backend", IMPOSTOR.format(override=False))
    out = run(
        "import opkernel as ok\nfrom opkernel import plugins\n"
        "print('LOADED', [(p.name, p.distribution) for p in plugins.plugins()])\n"
        "print('ERRORS', [str(f) for f in plugins.plugin_errors()])\n",
        tmp_path,
        what="two distributions named cpu",
    ).stdout
    assert "('cpu', 'opkernel-cpu')" not in out and "('cpu', 'evil-cpu')" not in out
    assert "declared by more than one distribution" in out and "evil-cpu 6.6.6" in out
    by_name = run(
        "import opkernel as ok\ntry:\n    ok.load_op_library('cpu')\nexcept ok.errors.PluginError as e:\n"
        "    print('REFUSED', e)\n",
        tmp_path,
        what="load_op_library of a name two distributions declare",
    ).stdout
    assert "REFUSED load_op_library: plugin 'cpu' is declared by more than one distribution" in by_name


# ------------------------------------------------------------------ interrupted discovery

INTERRUPTING = """
    import opkernel as ok

    calls = []

    @ok.hookimpl
    def opkernel_register_ops():
        ok.register_op("Trust>Interrupted").input("x: float").output("y: float")

    @ok.hookimpl
    def opkernel_register_kernels():
        calls.append(1)
        if len(calls) == 1:
            raise KeyboardInterrupt  # Ctrl-C while this plugin loads
        ok.register_kernel("Trust>Interrupted", backend="*")(lambda x: x)
    """


def test_ctrl_c_during_discovery_leaves_nothing_half_loaded_and_can_be_retried(tmp_path: Path) -> None:
    install(tmp_path, "slow-plugin", "aaa_slow", "slow_plugin", INTERRUPTING)
    out = run(
        """
        import numpy as np
        import opkernel as ok
        from opkernel import op_registry, plugins
        try:
            ok.available_backends()
        except KeyboardInterrupt:
            print("INTERRUPTED", op_registry.is_registered("Trust>Interrupted"), [p.name for p in plugins._plugins.values()])
        print("BACKENDS", ok.available_backends())
        print("ADD", ok.ops.add([1.0], [2.0]).numpy().tolist())
        print("OP", ok.ops.trust.interrupted([3.0]).numpy().tolist())
        print("ERRORS", plugins.plugin_errors())
        """,
        tmp_path,
        what="KeyboardInterrupt in a plugin hook",
    ).stdout
    assert "INTERRUPTED False ['builtin']" in out
    assert "'cpu'" in out.split("BACKENDS")[1].splitlines()[0]
    assert "ADD [3.0]" in out and "OP [3.0]" in out and "ERRORS []" in out


def test_ctrl_c_while_a_plugin_is_imported_rolls_back_what_it_registered(tmp_path: Path) -> None:
    marker = tmp_path / "interrupted-once"
    install(tmp_path, "slow-import", "aaa_slow_import", "slow_import", f"""
        import pathlib
        import opkernel as ok

        ok.register_op("Trust>AtImport").input("x: float").output("y: float")
        if not pathlib.Path({str(marker)!r}).exists():
            pathlib.Path({str(marker)!r}).touch()
            raise KeyboardInterrupt  # Ctrl-C while the module is being imported
        """)
    out = run(
        """
        import opkernel as ok
        from opkernel import op_registry, plugins
        try:
            ok.available_backends()
        except KeyboardInterrupt:
            print("INTERRUPTED", op_registry.is_registered("Trust>AtImport"))
        print("BACKENDS", ok.available_backends(), op_registry.is_registered("Trust>AtImport"))
        print("PROVIDER", ok.op_def("Trust>AtImport").provider.distribution, plugins.plugin_errors())
        """,
        tmp_path,
        what="KeyboardInterrupt while importing a plugin",
    ).stdout
    assert "INTERRUPTED False" in out
    assert "'cpu'" in out and "] True" in out and "PROVIDER slow-import []" in out


def test_a_strict_error_during_discovery_still_loads_every_other_plugin(tmp_path: Path) -> None:
    install(tmp_path, "broken-plugin", "aaa_broken", "broken_plugin", """
        import opkernel as ok

        @ok.hookimpl
        def opkernel_register_ops():
            ok.register_op("Trust>Broken").input("x: float").output("y: float")
            raise RuntimeError("broken on purpose")
        """)
    out = run(
        """
        import opkernel as ok
        from opkernel import op_registry
        try:
            ok.available_backends()
        except ok.errors.PluginError as e:
            print("RAISED", e)
        print("BACKENDS", ok.available_backends(), op_registry.is_registered("Trust>Broken"))
        print("ADD", ok.ops.add([1.0], [2.0]).numpy().tolist())
        """,
        tmp_path,
        strict=True,
        what="strict-mode error in discovery",
    ).stdout
    assert "RAISED plugin 'aaa_broken'" in out and "broken on purpose" in out
    assert "'cpu'" in out and "] False" in out and "ADD [3.0]" in out


# ------------------------------------------------------------------ load_op_library

HALF_LIBRARY = """
import opkernel as ok

ok.register_op("Trust>AtImport").input("x: float").output("y: float")


@ok.hookimpl
def opkernel_register_ops():
    ok.register_op("Trust>InHook").input("x: float").output("y: float")


@ok.hookimpl
def opkernel_register_kernels():
    raise RuntimeError("kernels failed")
"""


def test_a_failed_load_op_library_rolls_back_and_can_be_retried(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fresh_registry: None
) -> None:
    path = tmp_path / "trust_half_file.py"
    path.write_text(HALF_LIBRARY)
    (tmp_path / "trust_half_module.py").write_text(HALF_LIBRARY)
    monkeypatch.syspath_prepend(str(tmp_path))
    for target in (path, "trust_half_module"):
        for _ in range(2):  # the retry fails the same way, not with AlreadyExistsError
            with pytest.raises(PluginError, match="kernels failed"):
                ok.load_op_library(target)
            assert not ok.op_registry.is_registered("Trust>AtImport")
            assert not ok.op_registry.is_registered("Trust>InHook")


def test_a_library_failing_at_import_leaves_nothing_behind(tmp_path: Path, fresh_registry: None) -> None:
    path = tmp_path / "trust_import_fails.py"
    path.write_text('import opkernel as ok\nok.register_op("Trust>Orphan").input("x: float")\nraise ValueError("bad")\n')
    for _ in range(2):
        with pytest.raises(PluginError, match="ValueError: bad"):
            ok.load_op_library(path)
        assert not ok.op_registry.is_registered("Trust>Orphan")


def test_a_module_in_the_current_directory_does_not_pass_for_an_installed_op_package(tmp_path: Path) -> None:
    site, cwd = tmp_path / "site", tmp_path / "work"
    genuine = """
        import opkernel as ok

        @ok.hookimpl
        def opkernel_register_ops():
            ok.register_op("Trust>Genuine").input("x: float").output("y: float")
        """
    install(site, "opkernel-trustlib", "trustlib", "trustlib_ops", genuine, version="1.0")
    cwd.mkdir()
    (cwd / "trustlib_ops.py").write_text(textwrap.dedent(genuine).replace("Genuine", "Impostor"))
    out = run(
        """
        import opkernel as ok
        from opkernel import op_registry, plugins
        try:
            lib = ok.load_op_library("trustlib")
            print("LOADED", lib.op_names, lib.distribution)
        except ok.errors.PluginError as e:
            print("REFUSED", e)
        print("IMPOSTOR", op_registry.is_registered("Trust>Impostor"))
        """,
        site,
        cwd=cwd,
        what="python -c with a shadowing module in the current directory",
    ).stdout
    assert "REFUSED" in out and str(cwd / "trustlib_ops.py") in out and "opkernel-trustlib 1.0" in out
    assert "IMPOSTOR False" in out
    elsewhere = run("import opkernel as ok\nprint(ok.load_op_library('trustlib').op_names)", site, what="from elsewhere")
    assert "['Trust>Genuine']" in elsewhere.stdout


def test_a_module_in_the_current_directory_does_not_pass_for_an_installed_module(tmp_path: Path) -> None:
    site, cwd = tmp_path / "site", tmp_path / "work"
    genuine = """
        import opkernel as ok

        @ok.hookimpl
        def opkernel_register_ops():
            ok.register_op("Trust>PlainGenuine").input("x: float").output("y: float")
        """
    install(site, "trust-plain", None, "trustplain_ops", genuine, version="2.0")  # no entry point: a plain module
    cwd.mkdir()
    (cwd / "trustplain_ops.py").write_text(textwrap.dedent(genuine).replace("PlainGenuine", "PlainImpostor"))
    code = """
        import opkernel as ok
        try:
            print("LOADED", ok.load_op_library("trustplain_ops").op_names)
        except ok.errors.PluginError as e:
            print("REFUSED", e)
        """
    out = run(code, site, cwd=cwd, what="a shadowed plain module").stdout
    assert "REFUSED" in out and str(cwd / "trustplain_ops.py") in out and "trust-plain 2.0" in out
    assert "LOADED ['Trust>PlainGenuine']" in run(code, site, what="the installed plain module").stdout


def test_a_module_in_the_current_directory_does_not_pass_for_an_editable_install(tmp_path: Path) -> None:
    """An editable install lists no module file in its RECORD; its project directory
    (PEP 610's direct_url.json) must hold the module.  A same-named module in the current
    directory ran and replaced the package, even under OPKERNEL_STRICT_PLUGINS=1."""
    import json as _json

    site, project, cwd = tmp_path / "site", tmp_path / "project", tmp_path / "work"
    genuine = """
        import opkernel as ok

        @ok.hookimpl
        def opkernel_register_ops():
            ok.register_op("Edit>Genuine").input("x: float").output("y: float")
        """
    for d in (site, project, cwd):
        d.mkdir()
    (project / "editable_ops.py").write_text(textwrap.dedent(genuine))
    (cwd / "editable_ops.py").write_text(textwrap.dedent(genuine).replace("Genuine", "Impostor"))
    info = site / "editable_ops-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: editable-ops\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[opkernel]\neditable = editable_ops\n")
    (info / "direct_url.json").write_text(_json.dumps({"url": project.as_uri(), "dir_info": {"editable": True}}))
    names = ("METADATA", "entry_points.txt", "direct_url.json", "RECORD")
    (info / "RECORD").write_text("".join(f"{info.name}/{n},,\n" for n in names))
    code = """
        import opkernel as ok
        from opkernel import op_registry, plugins
        try:
            ok.available_backends()
        except ok.errors.PluginError as e:
            print("STRICT", e)
        print("OPS", sorted(n for n in op_registry.op_names() if n.startswith("Edit>")))
        print("ERRORS", [str(f.error) for f in plugins.plugin_errors()])
        """
    env_path = os.pathsep.join([str(site), str(project)])
    for strict in (False, True):
        env = {"PYTHONPATH": env_path}
        if strict:
            env["OPKERNEL_STRICT_PLUGINS"] = "1"
        out = run_isolated(textwrap.dedent(code), timeout=180, cwd=cwd, env=env, what="a shadowed editable install").stdout
        assert "OPS []" in out and "Edit>Impostor" not in out, out
        assert str(cwd / "editable_ops.py") in out and "editable install of editable-ops 1.0" in out, out
    out = run_isolated(textwrap.dedent(code), timeout=180, cwd=tmp_path, env={"PYTHONPATH": env_path}, what="the editable install").stdout
    assert "OPS ['Edit>Genuine']" in out and "ERRORS []" in out, out


# ------------------------------------------------------------------ gradients

GRAD_CHECK = """
import numpy as np
import opkernel as ok
from opkernel import plugins
with ok.use_backend("cpu"):
    x = ok.Variable(np.ones((2, 2), np.float32))
    with ok.GradientTape() as tape:
        y = ok.ops.sum(ok.ops.mat_mul(x, x), [0, 1])
    g = tape.gradient(y, x).numpy()
print("CORRECT" if np.array_equal(g, np.full((2, 2), 4.0, np.float32)) else "WRONG", g.tolist())
print("ERRORS", [(f.plugin, str(f.error)) for f in plugins.plugin_errors()])
print("OVERRIDES", [str(o) for o in plugins.overrides()])
"""

EVIL_GRADIENT = """
import opkernel as ok

@ok.hookimpl
def opkernel_register_gradients():
    @ok.register_gradient("MatMul", override=True)
    def wrong(op, grad):
        return [ok.ops.zeros_like(op.inputs[0]), ok.ops.zeros_like(op.inputs[1])]
"""


def test_an_overriding_gradient_is_warned_listed_and_refused_in_strict_mode(tmp_path: Path) -> None:
    """register_gradient('MatMul', override=True) from a plugin replaced MatMul's gradient
    silently, even under OPKERNEL_STRICT_PLUGINS=1, and was not listed as an override."""
    install(tmp_path, "evil-gradient", "evil", "evil_gradient", EVIL_GRADIENT)
    done = run(GRAD_CHECK, tmp_path, what="MatMul gradient override")
    assert "WRONG" in done.stdout  # it asked to win, and does, but not silently:
    assert any("PluginWarning" in line and "evil-gradient 6.6.6" in line for line in done.stderr.splitlines()), done.stderr
    assert "OVERRIDES [\"gradient of op 'MatMul'" in done.stdout
    strict = run(
        "import opkernel as ok\ntry:\n    ok.available_backends()\nexcept ok.errors.PluginError as e:\n"
        "    print('REFUSED', e)\n" + GRAD_CHECK,
        tmp_path, strict=True, what="MatMul gradient override under OPKERNEL_STRICT_PLUGINS=1",
    ).stdout
    assert "REFUSED" in strict and "OPKERNEL_STRICT_PLUGINS=1 refuses overrides" in strict
    assert "CORRECT" in strict and "OVERRIDES []" in strict


SQUATTER = """
import opkernel as ok

@ok.hookimpl
def opkernel_register_gradients():
    @ok.register_gradient("Victim>Double")
    def wrong(op, grad):
        return [ok.ops.zeros_like(grad)]
"""

VICTIM = """
import opkernel as ok

@ok.hookimpl
def opkernel_register_ops():
    ok.register_op("Victim>Double").input("x: float").output("y: float").set_shape_fn(ok.shape_fns.unchanged_shape)

@ok.hookimpl
def opkernel_register_kernels():
    @ok.register_kernel("Victim>Double", backend="cpu")
    def double(x):
        return x * 2

@ok.hookimpl
def opkernel_register_gradients():
    @ok.register_gradient("Victim>Double")
    def grad(op, g):
        return [ok.ops.mul(g, 2.0)]
"""

VICTIM_CHECK = """
import numpy as np
import opkernel as ok
from opkernel import plugins
with ok.use_backend("cpu"):
    x = ok.Variable(np.ones(3, np.float32))
    with ok.GradientTape() as tape:
        y = ok.execute("Victim>Double", x)
    print("GRAD", tape.gradient(y, x).numpy().tolist())
print("ERRORS", [(f.plugin, str(f.error)) for f in plugins.plugin_errors()])
"""


@pytest.mark.parametrize("strict", [False, True])
def test_a_gradient_squatter_never_stops_the_ops_own_package(tmp_path: Path, strict: bool) -> None:
    """A plugin loading first that registers the gradient of another package's op made that
    package fail to load, with an error blaming the package; now the op's provider replaces
    the squatter's gradient and the squatter is the plugin refused."""
    install(tmp_path, "squatter", "aaa", "squatter_plugin", SQUATTER)
    install(tmp_path, "victim-ops", "zzz", "victim_ops", VICTIM)
    first = "import opkernel as ok\ntry:\n    ok.available_backends()\nexcept ok.errors.PluginError as e:\n    print('REFUSED', e)\n"
    out = run(first + VICTIM_CHECK, tmp_path, strict=strict, what="a gradient squatter").stdout
    assert "GRAD [2.0, 2.0, 2.0]" in out  # the op's own gradient
    errors = out.split("ERRORS", 1)[1]
    assert "('aaa', \"plugin 'aaa': it registered the gradient of op 'Victim>Double', which zzz" in errors
    assert "'zzz'" not in errors.replace("which zzz", "")  # the op's package loaded
    assert ("REFUSED plugin 'aaa'" in out) == strict


# ------------------------------------------------------------------ op names


OP_SQUATTER = """
import opkernel as ok

@ok.hookimpl
def opkernel_register_ops():
    ok.register_op("Victim>Double", override={override}).input("x: float").output("y: float").set_shape_fn(
        ok.shape_fns.unchanged_shape)

@ok.hookimpl
def opkernel_register_kernels():
    @ok.register_kernel("Victim>Double", backend="cpu")
    def wrong(x):
        return x * 0
"""


@pytest.mark.parametrize("override", [False, True])
@pytest.mark.parametrize("strict", [False, True])
def test_an_op_name_squatter_never_stops_the_namespaces_owner(tmp_path: Path, strict: bool, override: bool) -> None:
    """A plugin loading first that registered another package's op name made that package
    fail to load, with an error blaming the package.  Now a namespace declared in
    'opkernel.namespaces' is its distribution's: without override=True the squatter's own
    registration fails, naming the owner; with it, the owner's registration replaces the
    squatter's when the owner loads, and the squatter is the plugin refused."""
    install(tmp_path, "squatter", "aaa", "squatter_ops", OP_SQUATTER.format(override=override))
    install(tmp_path, "victim-ops", "zzz", "victim_ops", VICTIM, namespaces=("Victim",))
    first = "import opkernel as ok\ntry:\n    ok.available_backends()\nexcept ok.errors.PluginError as e:\n    print('REFUSED', e)\n"
    out = run(first + VICTIM_CHECK, tmp_path, strict=strict, what="an op name squatter").stdout
    assert "GRAD [2.0, 2.0, 2.0]" in out, out          # the owner's op, kernel and gradient
    errors = out.split("ERRORS", 1)[1]
    assert "'zzz'" not in errors.replace("victim-ops", "")   # the owner loaded
    if override:
        assert "it registered op 'Victim>Double', in a namespace zzz (victim-ops 6.6.6) declares" in errors, errors
    else:
        assert "('aaa', \"op 'Victim>Double' is in namespace 'Victim', which victim-ops declares" in errors, errors
    assert ("REFUSED plugin 'aaa'" in out) == strict, out


OP_OVERRIDER = """
import opkernel as ok

@ok.hookimpl
def opkernel_register_ops():
    ok.register_op("Victim>Double", override=True).input("x: float").output("y: float").set_shape_fn(
        ok.shape_fns.unchanged_shape)

@ok.hookimpl
def opkernel_register_kernels():
    @ok.register_kernel("Victim>Double", backend="cpu")
    def triple(x):
        return x * 3
"""


@pytest.mark.parametrize("strict", [False, True])
def test_taking_over_an_op_needs_override_and_is_listed(tmp_path: Path, strict: bool) -> None:
    """override=True over another party's registered op replaces it with a warning, is listed
    by plugins.overrides() (so by opkernel info), and is refused in strict mode."""
    install(tmp_path, "victim-ops", "aaa", "victim_ops", VICTIM)
    install(tmp_path, "overrider", "zzz", "overrider_ops", OP_OVERRIDER)
    code = """
        import warnings
        import numpy as np
        import opkernel as ok
        from opkernel import plugins
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            try:
                ok.available_backends()
            except ok.errors.PluginError as e:
                print("REFUSED", e)
        print("WARNED", any("overridden by zzz" in str(w.message) for w in seen))
        with ok.use_backend("cpu"):
            print("VALUE", ok.execute("Victim>Double", np.ones(2, np.float32)).numpy().tolist())
        print("OVERRIDES", [str(o) for o in plugins.overrides()])
        print("ERRORS", [(f.plugin, str(f.error)) for f in plugins.plugin_errors()])
    """
    out = run(code, tmp_path, strict=strict, what="an op override").stdout
    if strict:
        assert "VALUE [2.0, 2.0]" in out and "REFUSED" in out and "OPKERNEL_STRICT_PLUGINS=1 refuses" in out, out
        assert "OVERRIDES []" in out
    else:
        assert "VALUE [3.0, 3.0]" in out and "WARNED True" in out, out
        assert "op 'Victim>Double'" in out.split("OVERRIDES", 1)[1].split("ERRORS")[0], out


def test_a_namespace_declared_twice_has_no_owner(tmp_path: Path) -> None:
    install(tmp_path, "one", None, "one_mod", "", namespaces=("Shared",))
    install(tmp_path, "two", None, "two_mod", "", namespaces=("Shared",))
    out = run("""
        import warnings
        from opkernel import plugins
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            print("OWNER", plugins.namespace_owner("Shared>Op"))
        print("WARNED", [str(w.message) for w in seen])
    """, tmp_path, what="a namespace declared twice").stdout
    assert "OWNER None" in out and "declared by one, two: it has no owner" in out, out


PROGRAM_SQUATTER = """
from opkernel_opencl import DeviceProgram

PROGRAM = DeviceProgram("Victim>double", lambda **params: "__kernel void k(__global float* x) { x[0] = 0; }")
"""

PROGRAM_OWNER = VICTIM + """
from opkernel_opencl import DeviceProgram

PROGRAM = DeviceProgram("Victim>double", lambda **params: "__kernel void k(__global float* x) { x[0] *= 2; }")
"""


def test_a_device_program_squatter_never_stops_the_namespaces_owner(tmp_path: Path) -> None:
    """A package declaring an OpenCL program under another package's name first made that
    package fail at import; a name in a declared namespace is now the owner's."""
    pytest.importorskip("opkernel_opencl")
    install(tmp_path, "squatter", "aaa", "squatter_programs", PROGRAM_SQUATTER)
    install(tmp_path, "victim-ops", "zzz", "victim_ops", PROGRAM_OWNER, namespaces=("Victim",))
    out = run(VICTIM_CHECK + """
from opkernel_opencl import device_kernels
print("PROGRAM", device_kernels.registered()["Victim>double"].origin[0])
""", tmp_path, what="a device program squatter").stdout
    assert "GRAD [2.0, 2.0, 2.0]" in out and "PROGRAM victim_ops" in out, out
    errors = out.split("ERRORS", 1)[1]
    assert "('aaa', \"OpenCL program 'Victim>double' is in namespace 'Victim', which victim-ops declares" in errors, out


DASK_OVERRIDER = """
import opkernel as ok

@ok.hookimpl
def opkernel_register_ops():
    ok.dask.declare("Transpose", ok.dask.Batch(1), override=True)
"""


@pytest.mark.parametrize("strict", [False, True])
def test_a_dask_rule_override_is_listed_and_refused_in_strict_mode(tmp_path: Path, strict: bool) -> None:
    """A plugin's ok.dask.declare(..., override=True) of another party's op was warned about but
    neither listed by plugins.overrides() (opkernel info) nor refused under OPKERNEL_STRICT_PLUGINS=1."""
    install(tmp_path, "rule-overrider", "aaa", "rule_overrider", DASK_OVERRIDER)
    code = """
        import opkernel as ok
        from opkernel import plugins
        try:
            ok.available_backends()
        except ok.errors.PluginError as e:
            print("REFUSED", e)
        print("OVERRIDES", [str(o) for o in plugins.overrides()])
        print("RULE", ok.dask.rule_for("Transpose") if "Transpose" in ok.dask.rules._DECLARED else None)
    """
    out = run(code, tmp_path, strict=strict, what="a dask rule override").stdout
    if strict:
        assert "REFUSED plugin 'aaa'" in out and "OPKERNEL_STRICT_PLUGINS=1 refuses" in out, out
        assert "OVERRIDES []" in out and "RULE None" in out, out        # rolled back with the plugin
    else:
        assert "partitioning rule of op 'Transpose'" in out.split("OVERRIDES", 1)[1], out
        assert "RULE Batch" in out, out
