"""TensorFlow.js's kernel-registry API in opkernel's names: ``ok.unregister_kernel`` and
``ok.unregister_gradient`` each undo exactly one registration (giving back what it
overrode), ``ok.get_kernel``, ``ok.get_kernels_for_backend``, ``ok.get_gradient``,
``ok.copy_registered_kernels``.  Also: a plugin that is installed but failed to load is named
as such by ``set_backend`` / ``use_backend`` / ``OPKERNEL_BACKEND`` / ``load_op_library`` /
the compat snapshot check, and a backend's ``array_types`` given as import strings are not
imported by discovery.
"""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from test_plugin_trust import install, run
from test_plugins import FakeEntryPoints, discovery, make_backend  # noqa: F401  (discovery: the fixture)

import opkernel as ok
from opkernel import compat, engine, kernels, plugins
from opkernel.errors import AlreadyExistsError, BackendNotFoundError, GradientNotFoundError, KernelNotFoundError, PluginError

A = np.array([1.0, -2.0], np.float32)


def neg_on_cpu(x: Any) -> np.ndarray:
    with ok.use_backend("cpu"):
        return ok.ops.neg(x).numpy()  # type: ignore[no-any-return]


# ------------------------------------------------------------ unregister_kernel


def test_unregister_kernel_undoes_the_newest_registration_and_gives_back_what_it_overrode(
    fresh_registry: None,
) -> None:
    original = ok.get_kernel("Neg", "cpu", T="float32")
    with pytest.warns(UserWarning, match="overridden"):
        ok.register_kernel("Neg", backend="cpu", type_constraints=dict(original.type_constraints), override=True)(
            lambda x: x * 10
        )
    np.testing.assert_array_equal(neg_on_cpu(A), A * 10)
    removed = ok.unregister_kernel("Neg", "cpu")
    assert removed.impl(A)[0] == 10.0 and ok.get_kernel("Neg", "cpu", T="float32") is original
    np.testing.assert_array_equal(neg_on_cpu(A), -A)  # the engine's cached signature was dropped


def test_unregister_kernel_by_label_priority_or_kerneldef(fresh_registry: None) -> None:
    first = ok.register_kernel("Neg", backend="cpu", label="a")(lambda x: x + 1)
    second = ok.register_kernel("Neg", backend="cpu", label="b")(lambda x: x + 2)
    high = ok.register_kernel("Neg", backend="cpu", label="a", priority=5)(lambda x: x + 3)
    assert ok.unregister_kernel("Neg", "cpu", label="a", priority=0).impl is first
    assert ok.unregister_kernel("Neg", "cpu", label="a").impl is high
    kdef = ok.get_kernel("Neg", "cpu", label="b")
    assert kdef.impl is second and ok.unregister_kernel(kdef) is kdef
    assert [k.label for k in kernels.kernels_for("Neg", "cpu")] == [None]  # only the cpu plugin's own


def test_unregister_kernel_errors_say_what_is_registered(fresh_registry: None) -> None:
    with pytest.raises(KernelNotFoundError, match=r"op 'Neg': no kernel registered on backend 'nowhere'.*kernels on: 'cpu'"):
        ok.unregister_kernel("Neg", "nowhere")
    with pytest.raises(KernelNotFoundError, match=r"label='zzz'.*registered there: any type, label=None"):
        ok.unregister_kernel("Neg", "cpu", label="zzz")
    with pytest.raises(TypeError, match="name the backend"):
        ok.unregister_kernel("Neg")
    ok.register_kernel("Neg", backend="cpu", label="once")(lambda x: x)
    kdef = ok.unregister_kernel("Neg", "cpu", label="once")
    with pytest.raises(KernelNotFoundError, match="is not registered .already unregistered"):
        ok.unregister_kernel(kdef)


def test_a_kernel_unregistered_inside_isolated_registries_comes_back_after(fresh_registry: None) -> None:
    from opkernel.testing import isolated_registries

    with isolated_registries():
        ok.unregister_kernel(ok.get_kernel("Neg", "cpu", T="float32"))
        with ok.use_backend("cpu"), pytest.raises(KernelNotFoundError):
            ok.ops.neg(A)
    np.testing.assert_array_equal(neg_on_cpu(A), -A)


def test_an_override_unregistered_inside_isolated_registries_still_gives_back_what_it_replaced(
    fresh_registry: None,
) -> None:
    from opkernel.testing import isolated_registries

    def first(x: Any) -> Any:
        return x + 1

    def second(x: Any) -> Any:
        return x + 2

    ok.register_kernel("Neg", backend="cpu", label="pair")(first)
    with pytest.warns(UserWarning, match="overridden"):
        ok.register_kernel("Neg", backend="cpu", label="pair", override=True)(second)
    with isolated_registries():
        assert ok.unregister_kernel("Neg", "cpu", label="pair").impl is second
        assert ok.get_kernel("Neg", "cpu", label="pair").impl is first
    assert ok.get_kernel("Neg", "cpu", label="pair").impl is second  # the registry as it was, overrides included
    assert ok.unregister_kernel("Neg", "cpu", label="pair").impl is second
    assert ok.get_kernel("Neg", "cpu", label="pair").impl is first  # one registration undone, not two
    with ok.use_backend("cpu"):
        np.testing.assert_array_equal(ok.execute("Neg", A, _kernel="pair").numpy(), A + 1)

    original = ok.get_gradient("Neg")
    with pytest.warns(UserWarning, match="overridden"):
        ok.register_gradient("Neg", override=True)(lambda op, grad: [grad * 0])
    with isolated_registries():
        ok.unregister_gradient("Neg")
    ok.unregister_gradient("Neg")
    assert ok.get_gradient("Neg") is original


# ------------------------------------------------------------ gradients


def test_unregister_gradient_gives_back_the_overridden_gradient(fresh_registry: None) -> None:
    original = ok.get_gradient("Neg")
    with pytest.warns(UserWarning, match="overridden"):
        ok.register_gradient("Neg", override=True)(lambda op, grad: [grad * 0])
    assert ok.unregister_gradient("Neg").fn is not original.fn
    assert ok.get_gradient("Neg") is original
    with ok.use_backend("cpu"):
        x = ok.Variable(A)
        with ok.GradientTape() as tape:
            y = ok.ops.neg(x)
        np.testing.assert_array_equal(tape.gradient(y, x).numpy(), [-1.0, -1.0])


def test_unregister_gradient_of_an_op_without_one_is_an_error(fresh_registry: None) -> None:
    ok.register_op("Unreg>Op").input("x: float").output("y: float")
    ok.not_differentiable("Unreg>Op")
    assert ok.unregister_gradient("Unreg>Op").fn is None
    with pytest.raises(GradientNotFoundError, match="'Unreg>Op' has no registered gradient or not-differentiable mark"):
        ok.unregister_gradient("Unreg>Op")
    with pytest.raises(GradientNotFoundError):
        ok.get_gradient("Unreg>Op")


# ------------------------------------------------------------ the rest of the tfjs registry


def test_get_kernels_for_backend_and_copy_registered_kernels(discovery: FakeEntryPoints) -> None:
    discovery.add_cpu()
    twin = make_backend("numpy2")  # holds numpy arrays, as cpu does

    class Plugin:
        @ok.hookimpl
        def opkernel_register_backends(self) -> list[type[ok.Backend]]:
            return [twin]

        @ok.hookimpl
        def opkernel_register_kernels(self) -> None:
            ok.copy_registered_kernels("cpu", "numpy2")

    discovery.add("numpy2", Plugin())
    cpu_ops = [k.op for k in ok.get_kernels_for_backend("cpu")]
    assert [k.op for k in ok.get_kernels_for_backend("numpy2")] == cpu_ops and "MatMul" in cpu_ops
    assert all(k.provider.plugin == "numpy2" for k in ok.get_kernels_for_backend("numpy2"))
    with ok.use_backend("numpy2"):
        np.testing.assert_array_equal(ok.ops.neg(A).numpy(), -A)


def test_copy_registered_kernels_is_all_or_nothing(fresh_registry: None) -> None:
    mine = ok.register_kernel("MatMul", backend="numpy3")(lambda a, b: a @ b)
    with pytest.raises(AlreadyExistsError, match="'MatMul': a kernel for backend 'numpy3'"):
        ok.copy_registered_kernels("cpu", "numpy3")
    assert [k.impl for k in ok.get_kernels_for_backend("numpy3")] == [mine]
    with pytest.raises(KernelNotFoundError, match="no kernels are registered for backend 'nowhere'"):
        ok.copy_registered_kernels("nowhere", "numpy3")


def test_get_kernel_without_a_match_lists_the_kernels() -> None:
    with pytest.raises(KernelNotFoundError, match=r"op 'MatMul': no kernel on backend 'cpu' for label='nope'.*registered there: "):
        ok.get_kernel("MatMul", "cpu", label="nope")


# ------------------------------------------------------------ plugin failures named


class BrokenImport(ImportError):
    pass


def test_a_backend_whose_plugin_failed_is_named_not_unknown(
    discovery: FakeEntryPoints, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    discovery.add_cpu()
    discovery.add("torchy", error=ImportError("No module named 'torch'"), dist=("opkernel-torchy", "0.2"))
    with pytest.warns(plugins.PluginWarning):
        ok.available_backends()
    named = r"plugin 'torchy' \(opkernel-torchy 0.2\) is installed but failed to load: ImportError: No module named 'torch'"
    with pytest.raises(BackendNotFoundError, match=named):
        ok.set_backend("torchy")
    with pytest.raises(BackendNotFoundError, match=named), ok.use_backend("torchy"):
        pass
    monkeypatch.setenv("OPKERNEL_BACKEND", "torchy")
    engine._reset_backends_for_tests()
    with pytest.raises(BackendNotFoundError, match=named):
        ok.get_backend()
    monkeypatch.delenv("OPKERNEL_BACKEND")
    with pytest.raises(PluginError, match=named), pytest.warns(plugins.PluginWarning):  # retried, and failed again
        ok.load_op_library("torchy")
    with pytest.raises(LookupError, match=r"cannot check the ops of plugin 'torchy': " + named):
        compat.check_snapshot(Path(__file__).parent / "snapshots" / "builtin_ops.json", "torchy")


def test_an_installed_op_package_with_a_syntax_error_is_named_by_the_snapshot_check(tmp_path: Path) -> None:
    site = tmp_path / "site"
    install(site, "opkernel-gelu", "gelu", "opkernel_gelu", "def oops(:\n")
    snapshot = tmp_path / "ops.json"
    snapshot.write_text('{"plugin": "gelu", "plugin_api": 1, "ops": {}}')
    out = run(
        f"""
        import warnings
        warnings.simplefilter("ignore")
        import opkernel as ok
        from opkernel import compat
        for attempt in (
            lambda: ok.set_backend("gelu"),
            lambda: compat.check_snapshot({str(snapshot)!r}, "gelu"),
            lambda: ok.load_op_library("opkernel_gelu"),  # by module name
        ):
            try:
                attempt()
            except Exception as e:
                print(type(e).__name__, e)
        """,
        site,
        what="a plugin with a SyntaxError",
    )
    lines = out.stdout.splitlines()
    assert len(lines) == 3, out
    assert all("plugin 'gelu' (opkernel-gelu 6.6.6) is installed but failed to load: SyntaxError" in x for x in lines)
    assert lines[0].startswith("BackendNotFoundError") and "pip install" not in lines[0]
    assert lines[1].startswith("LookupError") and lines[2].startswith("PluginError")


# ------------------------------------------------------------ lazy array_types


def test_discovery_does_not_import_a_backends_array_library(
    discovery: FakeEntryPoints, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    (tmp_path / "heavy_arrays.py").write_text(textwrap.dedent("""
        import builtins
        builtins.heavy_arrays_imported = True

        class Array:
            pass
    """))
    monkeypatch.syspath_prepend(str(tmp_path))
    lazy = make_backend("lazy")
    lazy.array_types = ("heavy_arrays.Array",)
    broken = make_backend("broken")
    broken.array_types = ("heavy_arrays.Missing",)

    class Plugin:
        @ok.hookimpl
        def opkernel_register_backends(self) -> list[type[ok.Backend]]:
            return [lazy, broken]

    discovery.add("lazy", Plugin())
    assert set(ok.available_backends()) == {"lazy", "broken"}
    assert "heavy_arrays" not in sys.modules
    with ok.use_backend("lazy") as be:
        assert be.array_types == (sys.modules["heavy_arrays"].Array,)
    assert lazy.array_types == ("heavy_arrays.Array",)  # the class keeps its strings
    with pytest.raises(BackendNotFoundError, match=r"initialisation failed: ImportError: backend 'broken': "
                       r"array_types entry 'heavy_arrays.Missing' cannot be imported"):
        ok.set_backend("broken")
    monkeypatch.delitem(sys.modules, "heavy_arrays")
