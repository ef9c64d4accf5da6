"""An outside backend author's journey, end to end, as docs/backend-authoring.md tells it.

The author writes a backend plugin the way examples/minimal_backend does — its own
distribution with an entry point in group ``opkernel``, a ``Backend`` subclass, and
one table of kernels — with only six forward kernels.  pip installs it (into a
fresh target directory, with ``--no-build-isolation``: the build needs no network);
a fresh interpreter that finds it there through its entry point, as it would in a
new virtual environment, then trains the digits MLP (examples/digits.py's data,
benchmarks/models.py's model) on it with ``ok.config.kernel_fallback = ("cpu",)``.
Every gradient, every step's loss and the trained weights must agree with the same
training on cpu alone, the calls that fell back are exactly what the backend lacks
for training, and the gradient-coverage report lists exactly what each of its
kernels' gradients lacks.  Without setuptools >= 77 to build it, the distribution is laid
out by hand as pip would install it (tests/test_plugin_trust.py's ``install``); the
interpreter sees the same ``.dist-info`` and entry point either way.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import pytest
from isolated import run_isolated

pytest.importorskip("sklearn", reason="the digits data come from scikit-learn (make install puts it in the venv)")

PYPROJECT = """
[build-system]
requires = ["setuptools>=77"]
build-backend = "setuptools.build_meta"

[project]
name = "opkernel-journey"
version = "0.1.0"
description = "A six-kernel backend: the rest runs on cpu through ok.config.kernel_fallback."
requires-python = ">=3.10"
dependencies = ["opkernel>=0.1,<0.2", "numpy>=1.24"]

[project.entry-points.opkernel]
journey = "opkernel_journey"

[tool.setuptools]
packages = ["opkernel_journey"]
"""

INIT = '''
"""opkernel-journey: a backend whose native array is a numpy array in a box."""

import opkernel as ok


@ok.hookimpl
def opkernel_register_backends():
    from .backend import JourneyBackend

    return [JourneyBackend]


@ok.hookimpl
def opkernel_register_kernels():
    from . import kernels

    kernels.register_all()
'''

BACKEND = '''
import numpy as np

import opkernel as ok


class Box:
    """The native array: stands in for a device array; opkernel only reads ``.shape``."""

    __slots__ = ("data",)

    def __init__(self, data):
        self.data = data

    @property
    def shape(self):
        return self.data.shape


class JourneyBackend(ok.Backend):
    name = "journey"
    priority = -10
    array_types = (Box,)

    def from_numpy(self, array):
        return Box(np.array(array, copy=True))

    def to_numpy(self, value):
        return value.data.copy()

    def as_output(self, value, dtype):
        if type(value) is Box and value.data.dtype == dtype.np:
            return value
        return Box(np.asarray(value.data if isinstance(value, Box) else value, dtype.np))
'''

KERNELS = '''
import numpy as np

import opkernel as ok

from .backend import Box

FLOATS = {"T": ["float32", "float64"]}


def mat_mul(a, b, transpose_a, transpose_b):
    x, y = a.data, b.data
    return Box((x.T if transpose_a else x) @ (y.T if transpose_b else y))


def bias_add(value, bias, **attrs):
    return Box(value.data + bias.data)


def relu(features, **attrs):
    return Box(np.maximum(features.data, 0))


def mul(x, y, **attrs):
    return Box(x.data * y.data)


def real_div(x, y, **attrs):
    return Box(x.data / y.data)


def mean(input, reduction_indices, keep_dims, **attrs):
    axes = tuple(int(a) % max(input.data.ndim, 1) for a in np.ravel(reduction_indices))
    return Box(np.mean(input.data, axis=axes, keepdims=keep_dims).astype(input.data.dtype))


def register_all():
    """(op, kernel, host-memory inputs): the whole backend."""
    for op, kernel, host in [
        ("MatMul", mat_mul, ()),
        ("BiasAdd", bias_add, ()),
        ("Relu", relu, ()),
        ("Mul", mul, ()),
        ("RealDiv", real_div, ()),
        ("Mean", mean, ("reduction_indices",)),
    ]:
        ok.register_kernel(op, backend="journey", type_constraints=FLOATS, host_memory=host)(kernel)
'''

TRAIN = '''
import json
import warnings

import numpy as np
from sklearn.datasets import load_digits

import opkernel as ok

assert "journey" in ok.available_backends(), ok.available_backends()
provider = {k.provider.distribution for k in ok.kernels.kernels_for("MatMul", "journey")}
ok.config.kernel_fallback = ("cpu",)

digits = load_digits()
x_all = (digits.data / 16.0).astype(np.float32)
y_all = digits.target.astype(np.int64)
STEPS, BATCH = 25, 64


def train(backend):
    with ok.use_backend(backend):
        model = ok.nn.Sequential([ok.nn.Dense(64, 32, "relu", seed=1), ok.nn.Dense(32, 10, seed=2)])
        opt = ok.nn.SGD(0.5)
        losses, grads = [], []
        for step in range(STEPS):
            rows = slice(step * BATCH, (step + 1) * BATCH)
            x, y = ok.tensor(x_all[rows]), ok.tensor(y_all[rows])
            with ok.GradientTape() as tape:
                loss = ok.nn.sparse_softmax_cross_entropy(model(x), y)
            g = tape.gradient(loss, model.variables)
            grads.append([t.numpy() for t in g])
            assert {t.backend for t in g} == {backend}
            opt.apply_gradients(zip(g, model.variables))
            losses.append(float(loss.numpy()))
        assert {v.backend for v in model.variables} == {backend}
        logits = model(ok.tensor(x_all)).numpy()
        return losses, grads, [v.numpy() for v in model.variables], float((logits.argmax(1) == y_all).mean())


reference = train("cpu")
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    journey = train("journey")
warned = sorted({str(w.message).split("'")[1] for w in caught if w.category is ok.errors.KernelFallbackWarning})
print(json.dumps({
    "provider": sorted(provider),
    "losses": [reference[0], journey[0]],
    "grad_diff": max(float(np.abs(a - b).max()) for s, t in zip(reference[1], journey[1]) for a, b in zip(s, t)),
    "weight_diff": max(float(np.abs(a - b).max()) for a, b in zip(reference[2], journey[2])),
    "accuracy": [reference[3], journey[3]],
    "fallbacks": sorted([list(k) + [n] for k, n in ok.config.fallbacks.items()]),
    "warned": warned,
    "coverage": [[c.op, c.status, list(c.missing)] for c in ok.testing.gradient_coverage("journey")],
}))
'''

#: What training the MLP with SGD needs beyond the six kernels: the gradient kernels of
#: Relu and BiasAdd, the fused loss, and the variable update (ApplyGradientDescent's
#: generic kernel runs on journey; its AssignSub falls back).
EXPECTED_FALLBACKS = ["AssignSub", "BiasAddGrad", "ReluGrad", "SparseSoftmaxCrossEntropyWithLogits"]


#: The gradient-coverage report of the six kernels (``opkernel kernels --backend journey
#: --gradients``): what each one's gradient lacks on journey, derived by running it.
EXPECTED_COVERAGE = [
    ["BiasAdd", "missing-kernels", ["BiasAddGrad"]],
    ["MatMul", "ok", []],
    ["Mean", "missing-kernels", ["BroadcastTo", "Reshape"]],
    ["Mul", "missing-kernels", ["Reshape", "Sum"]],
    ["RealDiv", "missing-kernels", ["Neg", "Reshape", "Sum"]],
    ["Relu", "missing-kernels", ["ReluGrad"]],
]


def write_package(root: Path) -> Path:
    src = root / "src"
    package = src / "opkernel_journey"
    package.mkdir(parents=True)
    (src / "pyproject.toml").write_text(textwrap.dedent(PYPROJECT))
    for name, text in (("__init__", INIT), ("backend", BACKEND), ("kernels", KERNELS)):
        (package / f"{name}.py").write_text(textwrap.dedent(text))
    return src


def can_build() -> bool:
    try:
        return int(version("setuptools").split(".")[0]) >= 77
    except (PackageNotFoundError, ValueError):
        return False


def install(src: Path, site: Path) -> None:
    """``pip install --target site src``, or the same layout by hand (see the module docstring)."""
    if can_build():
        subprocess.run(
            [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation", "--no-index",
             "--disable-pip-version-check", "--target", str(site), str(src)],
            check=True, capture_output=True, text=True, timeout=180,
        )
        return
    import shutil

    shutil.copytree(src / "opkernel_journey", site / "opkernel_journey")
    info = site / "opkernel_journey-0.1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: opkernel-journey\nVersion: 0.1.0\n")
    (info / "entry_points.txt").write_text("[opkernel]\njourney = opkernel_journey\n")
    files = [f"opkernel_journey/{p.name}" for p in (site / "opkernel_journey").glob("*.py")]
    (info / "RECORD").write_text("".join(f"{f},,\n" for f in [*files, f"{info.name}/METADATA", f"{info.name}/RECORD"]))


def test_a_six_kernel_backend_trains_the_digits_mlp_with_the_cpu_fallback(tmp_path: Path) -> None:
    site = tmp_path / "site"
    install(write_package(tmp_path), site)
    assert (site / "opkernel_journey-0.1.0.dist-info" / "entry_points.txt").read_text().split() == [
        "[opkernel]", "journey", "=", "opkernel_journey",
    ]
    env = {"PYTHONPATH": os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH", "")])),
           "OPKERNEL_STRICT_PLUGINS": "1"}
    out = run_isolated(TRAIN, env=env, cwd=tmp_path, timeout=240, what="training on the journey backend")
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["provider"] == ["opkernel-journey"]  # found through the installed entry point
    reference, journey = result["losses"]
    assert journey == pytest.approx(reference, rel=1e-5, abs=1e-6)
    assert reference[-1] < 0.6 * reference[0]  # it learned something
    assert result["grad_diff"] < 1e-5 and result["weight_diff"] < 1e-5
    assert result["accuracy"][1] == pytest.approx(result["accuracy"][0], abs=1e-3) and result["accuracy"][1] > 0.7
    fallbacks = result["fallbacks"]
    assert sorted({op for op, *_ in fallbacks}) == EXPECTED_FALLBACKS == result["warned"]
    assert all(source == "journey" and target == "cpu" and n > 0 for _, source, target, n in fallbacks)
    assert result["coverage"] == EXPECTED_COVERAGE
