"""Registrations are checked when they are made: a kernel for an op that does not exist is a
PluginWarning naming the closest ops (a PluginError under OPKERNEL_STRICT_PLUGINS=1) and is
flagged by the CLI; type constraints on a non-type attr and kernel parameters that match no
input or attr are OpSpecErrors listing the valid names; nothing is left half-registered.

A kernel registered before its op (another plugin, loaded later, declares it) is checked when
discovery ends.  Plugins come from fake entry points, as in tests/test_plugins.py.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pytest
from test_plugins import FakeEntryPoints, discovery  # noqa: F401  (the fixture)

import opkernel as ok
from opkernel import kernels, op_registry, plugins
from opkernel.cli import main as cli
from opkernel.errors import OpSpecError, PluginError
from opkernel.plugins import PluginWarning


@pytest.fixture
def lenient(monkeypatch: pytest.MonkeyPatch) -> None:
    """Run without OPKERNEL_STRICT_PLUGINS (CI sets it): unknown ops then only warn."""
    monkeypatch.delenv("OPKERNEL_STRICT_PLUGINS", raising=False)


def mine(op: str) -> list[kernels.KernelDef]:
    return kernels.kernels_for(op, "cpu")


# ------------------------------------------------------------ kernels for unknown ops


def test_a_kernel_for_a_misspelt_op_warns_naming_the_closest_ops(fresh_registry: None, lenient: None) -> None:
    with pytest.warns(PluginWarning, match=r"no op named 'Relu6x' is registered \(did you mean 'Relu6'"):

        @ok.register_kernel("Relu6x", backend="cpu")
        def relu6x(features: np.ndarray) -> np.ndarray:
            return features

    assert [k.impl for k in mine("Relu6x")] == [relu6x]  # registered, and flagged:
    assert [k.op for k in plugins.unknown_op_kernels()] == ["Relu6x"]


def test_a_kernel_for_a_misspelt_op_is_refused_in_strict_mode(
    fresh_registry: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPKERNEL_STRICT_PLUGINS", "1")
    with pytest.raises(PluginError, match=r"no op named 'Relu6x'.*'Relu6'.*STRICT_PLUGINS=1 refuses it"):
        ok.register_kernel("Relu6x", backend="cpu")(lambda features: features)
    assert mine("Relu6x") == [] and plugins.unknown_op_kernels() == []


def test_the_cli_flags_kernels_for_unknown_ops(
    fresh_registry: None, lenient: None, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.warns(PluginWarning):
        ok.register_kernel("Contrib>Gleu", backend="cpu")(lambda x: x)
    assert cli(["kernels", "--op", "Contrib>Gleu"]) == 0
    assert "Contrib>Gleu (no such op: never used)" in capsys.readouterr().out
    assert cli(["info"]) == 0
    out = capsys.readouterr().out
    assert "Kernels for ops that do not exist" in out and "Contrib>Gleu" in out


class OpsPlugin:
    """Declares ``Late>Op`` (x: T, T type attr, scale float attr)."""

    @ok.hookimpl
    def opkernel_register_ops(self) -> None:
        ok.register_op("Late>Op").attr("T: {float, double}").attr("scale: float = 1.0").input("x: T").output("y: T")


class KernelsPlugin:
    """Registers a cpu kernel for ``op`` with the given function."""

    def __init__(self, op: str, fn: Any) -> None:
        self.op, self.fn = op, fn

    @ok.hookimpl
    def opkernel_register_kernels(self) -> None:
        ok.register_kernel(self.op, backend="cpu")(self.fn)


def test_a_kernel_for_an_op_of_a_plugin_loaded_later_is_checked_when_discovery_ends(
    discovery: FakeEntryPoints,
) -> None:
    discovery.add_cpu()
    discovery.add("a-kernels", KernelsPlugin("Late>Op", lambda x, scale: x * scale))  # sorts before "b-ops"
    discovery.add("b-ops", OpsPlugin())
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert ok.available_backends() == ["cpu"]
    assert plugins.plugin_errors() == [] and plugins.unknown_op_kernels() == []
    with ok.use_backend("cpu"):
        np.testing.assert_allclose(ok.ops.late.op(np.ones(2, np.float32), scale=3.0).numpy(), [3.0, 3.0])


def test_a_bad_parameter_for_an_op_of_a_later_plugin_unloads_the_kernels_plugin(discovery: FakeEntryPoints) -> None:
    discovery.add_cpu()
    discovery.add("a-kernels", KernelsPlugin("Late>Op", lambda x, scal: x))
    discovery.add("b-ops", OpsPlugin())
    with pytest.warns(PluginWarning, match=r"'a-kernels'.*OpSpecError.*parameter 'scal'.*did you mean 'scale'"):
        ok.available_backends()
    assert [f.plugin for f in plugins.plugin_errors()] == ["a-kernels"]
    assert kernels.kernels_for("Late>Op", "cpu") == []  # rolled back; the op's plugin stays
    assert op_registry.is_registered("Late>Op")


def test_a_plugin_kernel_for_an_op_nobody_declares_warns_when_discovery_ends(discovery: FakeEntryPoints) -> None:
    discovery.add_cpu()
    discovery.add("typo", KernelsPlugin("MatMull", lambda a, b: a))
    with pytest.warns(PluginWarning, match=r"'MatMull'.*from typo \(opkernel-typo 1.0\).*did you mean 'MatMul'"):
        ok.available_backends()
    assert [k.op for k in plugins.unknown_op_kernels()] == ["MatMull"]
    assert plugins.plugin_errors() == []  # only warned: the plugin's other registrations work


def test_a_kernel_for_the_op_of_a_failed_plugin_names_that_plugin_and_the_package(discovery: FakeEntryPoints) -> None:
    discovery.add_cpu()
    discovery.add("medianpool", error=SyntaxError("invalid syntax"), dist=("opkernel-medianpool", "0.3"))
    discovery.add("pool-fast", KernelsPlugin("Addons>MedianPool2D", lambda x, **attrs: x))
    with pytest.warns(PluginWarning) as seen:
        ok.available_backends()
    (message,) = [str(w.message) for w in seen if "no op named" in str(w.message)]
    assert "pip install opkernel-medianpool" in message and "failed to load: 'medianpool'" in message


def test_strict_mode_unloads_a_plugin_with_a_kernel_for_an_unknown_op(
    discovery: FakeEntryPoints, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPKERNEL_STRICT_PLUGINS", "1")
    discovery.add_cpu()
    discovery.add("typo", KernelsPlugin("MatMull", lambda a, b: a))
    with pytest.raises(PluginError, match=r"plugin 'typo'.*no op named 'MatMull'"):
        ok.available_backends()
    assert "typo" not in [p.name for p in plugins.plugins()] and plugins.unknown_op_kernels() == []
    assert ok.available_backends() == ["cpu"]  # raised once; everything else loaded


@pytest.mark.parametrize("strict", [False, True], ids=["lenient", "strict"])
def test_a_script_kernel_registered_before_discovery_is_checked_when_it_ends(
    discovery: FakeEntryPoints, monkeypatch: pytest.MonkeyPatch, strict: bool
) -> None:
    discovery.add_cpu()
    discovery.add("b-ops", OpsPlugin())
    if strict:
        monkeypatch.setenv("OPKERNEL_STRICT_PLUGINS", "1")
    try:
        check_script_kernels_at_the_end_of_discovery(strict)
    finally:  # the fixture forgets plugins, not a script's kernels
        kernels.remove_kernels(k for k in kernels.all_kernels() if k.provider.plugin == __name__)


def check_script_kernels_at_the_end_of_discovery(strict: bool) -> None:
    ok.register_kernel("Late>Op", backend="cpu", label="fits")(lambda x, scale: x)  # its op comes with b-ops
    ok.register_kernel("Late>Op", backend="cpu", label="bad")(lambda x, scael: x)
    ok.register_kernel("Late>Opp", backend="cpu")(lambda x: x)
    with pytest.raises(OpSpecError, match=r"parameter 'scael'.*did you mean 'scale'"), warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        ok.available_backends()
    unknown = [str(w.message) for w in seen if issubclass(w.category, PluginWarning)]
    assert [k.label for k in kernels.kernels_for("Late>Op", "cpu")] == ["fits"]  # the bad one dropped
    if strict:  # the first error is raised; the kernel for the unknown op is refused too
        assert unknown == [] and kernels.kernels_for("Late>Opp", "cpu") == []
    else:
        assert len(unknown) == 1 and "no op named 'Late>Opp' is registered (did you mean 'Late>Op'" in unknown[0]
    assert ok.available_backends() == ["cpu"]  # reported once: discovery is complete


def test_a_hand_registered_plugin_is_checked_when_its_hooks_have_run(fresh_registry: None) -> None:
    class Both:
        @ok.hookimpl
        def opkernel_register_ops(self) -> None:
            ok.register_op("Hand>Op").attr("T: {float}").input("x: T").output("y: T")

        @ok.hookimpl
        def opkernel_register_kernels(self) -> None:
            ok.register_kernel("Hand>Op", backend="cpu", type_constraints={"X": ["float32"]})(lambda x: x)

    with pytest.raises(PluginError, match=r"type constraint names 'X', which is not an attr.*type attrs: \['T'\]"):
        ok.register_plugin(Both(), name="hand")
    assert not op_registry.is_registered("Hand>Op")  # the whole plugin rolled back


# ------------------------------------------------------------ checks against the op


def test_a_type_constraint_on_a_non_type_attr_is_refused_at_registration(fresh_registry: None) -> None:
    with pytest.raises(OpSpecError, match=r"'Sum'.*type constraint names 'keep_dims', which is a bool attr.*\['T', 'Tidx'\]"):
        ok.register_kernel("Sum", backend="cpu", label="mine", type_constraints={"keep_dims": ["float32"]})(
            lambda input, reduction_indices: input
        )
    assert [k for k in mine("Sum") if k.label == "mine"] == []


def test_a_misspelt_kernel_parameter_is_refused_naming_the_attr(fresh_registry: None) -> None:
    def sum_kernel(input: Any, reduction_indices: Any, keepdims: bool) -> Any:
        return input

    with pytest.raises(OpSpecError, match=r"parameter 'keepdims' matches no input or attr.*did you mean 'keep_dims'"):
        ok.register_kernel("Sum", backend="cpu", label="mine")(sum_kernel)
    assert [k for k in mine("Sum") if k.label == "mine"] == []


def test_a_misspelt_kernel_parameter_with_a_default_is_refused_too(fresh_registry: None) -> None:
    with pytest.raises(OpSpecError, match=r"parameter 'keepdims' matches no input or attr.*did you mean 'keep_dims'"):
        ok.register_kernel("Sum", backend="cpu", label="mine")(lambda input, reduction_indices, keepdims=False: input)


def test_a_kernel_taking_fewer_inputs_than_the_op_has_is_refused(fresh_registry: None) -> None:
    with pytest.raises(OpSpecError, match=r"takes 1 positional parameter\(s\) \(a\), but the op has 2 input\(s\) \(a, b\)"):
        ok.register_kernel("MatMul", backend="cpu", label="mine")(lambda a: a)


def test_a_pending_op_is_checked_without_being_finalized(fresh_registry: None) -> None:
    ok.register_op("Check>Pending").attr("T: {float}").attr("alpha: float = 0.5").input("x: T").output("y: T")
    with pytest.raises(OpSpecError, match=r"parameter 'alfa'.*did you mean 'alpha'"):
        ok.register_kernel("Check>Pending", backend="cpu")(lambda x, alfa: x)
    assert "Check>Pending" in op_registry.snapshot().pending  # the declaration may still grow


@pytest.mark.parametrize(
    "fn",
    [
        lambda input, reduction_indices, **attrs: input,  # **kwargs: every attr
        lambda *args, keep_dims: args[0],  # *args take the inputs
        lambda input, reduction_indices, *, keep_dims, T: input,
        lambda input, reduction_indices, keep_dims=False: input,
        lambda input, reduction_indices, offset=1.0: input + offset,  # keeps its default
        np.add,  # a ufunc of two inputs: out=, where=, ... keep their defaults
    ],
    ids=["kwargs", "varargs", "keyword-only", "default", "captured-default", "ufunc"],
)
def test_kernels_that_fit_the_op_register(fresh_registry: None, fn: Any) -> None:
    ok.register_kernel("Sum", backend="cpu", label="fits")(fn)
    assert [k.impl for k in mine("Sum") if k.label == "fits"] == [fn]


def test_class_kernels_are_checked_for_constraints_only(fresh_registry: None) -> None:
    class Fine(ok.OpKernel):
        def compute(self, ctx: ok.OpKernelContext) -> None:
            ctx.set_output(0, ctx.input(0))

    ok.register_kernel("Neg", backend="cpu", label="class", type_constraints={"T": ["float32"]})(Fine)
    with pytest.raises(OpSpecError, match=r"type constraint names 'Q'"):
        ok.register_kernel("Neg", backend="cpu", label="class2", type_constraints={"Q": ["float32"]})(Fine)


def test_every_installed_kernel_fits_its_op() -> None:
    """The kernels of every installed plugin (cpu, opencl, the median-pool package) pass the
    checks that registration now makes."""
    plugins.ensure_loaded()
    installed = [k for k in kernels.all_kernels() if k.provider.distribution is not None]
    assert [k for k in plugins.unknown_op_kernels() if k.provider.distribution is not None] == []
    assert {k.provider.plugin for k in installed} >= {"cpu", "opencl"}
    for k in installed:
        declared = op_registry.declaration(k.op)
        assert declared is not None
        k.check_declaration(*declared)
