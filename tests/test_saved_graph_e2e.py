"""Saved graphs end to end: trained here, loaded in fresh processes and fresh virtual
environments that hold only the distributions a user would install.

How a "fresh venv" is made, and why it is faithful: ``python -m venv --without-pip``
gives an empty environment of the same interpreter; each distribution it should hold is
then linked in file by file from this environment's site-packages, exactly the files its
RECORD lists (what pip installed from that distribution's wheel: the package, its
``.dist-info`` with entry points and metadata, an editable install's ``.pth`` and
finder).  Requirements are followed from each distribution's metadata, so the venv
holds what ``pip install opkernel-opencl[pocl]`` would resolve, and nothing else: the
child checks ``importlib.metadata`` lists exactly those distributions.  A changed
version of a package is installed as pip would lay out its wheel: the package directory
plus a ``.dist-info`` with METADATA, entry_points.txt and RECORD.  No network is used.
The children run from an empty directory holding only the saved file and its inputs,
so neither the training code nor the repository's tests are importable there.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import textwrap
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import opkernel as ok
from isolated import child_env
from opkernel.graph import Edge, Graph, Node, TensorSpec

ROOT = Path(__file__).resolve().parents[1]
BASE = ["opkernel", "opkernel-cpu"]


#: Where this environment installs distributions.  Looked up there only: under
#: ``python -m pytest`` the working directory is on sys.path, and a source tree's
#: ``opkernel.egg-info`` (left by ``pip install -e .``) would be found first.
SITE_DIRS = sorted({sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]})


def _dist(name: str) -> metadata.Distribution:
    found = next(iter(metadata.distributions(name=name, path=SITE_DIRS)), None)
    if found is None:
        raise metadata.PackageNotFoundError(name)
    return found


def _installed(name: str) -> bool:
    try:
        _dist(name)
    except metadata.PackageNotFoundError:
        return False
    return True


# opkernel-opencl[pocl,intel]: PoCL's and Intel's CPU devices where they came from pip (a machine may use a
# system OpenCL driver instead; PoCL's cannot compile for every CPU, Intel's runtime can)
OPENCL = ["opkernel-opencl"] + [
    d for d in ("pocl-binary-distribution", "intel-opencl-rt", "intel-cmplr-lib-rt", "tbb") if _installed(d)
]
MEDIANPOOL = ROOT / "examples" / "median_pool" / "opkernel_medianpool"


def _closure(names: list[str]) -> list[str]:
    """``names`` and everything their (non-extra) requirements pull in, as installed here."""
    from packaging.requirements import Requirement

    seen: dict[str, metadata.Distribution] = {}
    todo = list(names)
    while todo:
        name = todo.pop()
        dist = _dist(name)
        key = dist.metadata["Name"].lower().replace("_", "-")
        if key in seen:
            continue
        seen[key] = dist
        for text in dist.requires or []:
            req = Requirement(text)
            if req.marker is None or req.marker.evaluate({"extra": ""}):
                todo.append(req.name)
    return sorted(seen)


class Venv:
    """A fresh virtual environment whose site-packages links in chosen distributions."""

    def __init__(self, root: Path) -> None:
        subprocess.run([sys._base_executable, "-m", "venv", "--without-pip", str(root)], check=True)  # type: ignore[attr-defined]
        self.python = root / "bin" / "python"
        self.site = Path(subprocess.run(
            [str(self.python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            capture_output=True, text=True, check=True).stdout.strip())
        self.installed: dict[str, list[Path]] = {}

    def link(self, *names: str) -> None:
        for name in _closure(list(names)):
            if name in self.installed:
                continue
            dist = _dist(name)
            tops = {Path(str(f)).parts[0] for f in dist.files or [] if not str(f).startswith("..")}
            made = []
            for f in dist.files or []:
                if str(f).startswith(".."):  # data files outside site-packages (Intel's runtime in lib/): file by file
                    source = Path(str(dist.locate_file(f))).resolve()
                    target = Path(os.path.normpath(self.site / str(f)))
                    if source.is_file() and not target.exists() and not target.is_symlink():
                        target.parent.mkdir(parents=True, exist_ok=True)
                        target.symlink_to(source)
                        made.append(target)
            for top in sorted(tops - {"__pycache__"}):
                source = Path(str(dist.locate_file(top)))
                target = self.site / top
                if source.exists() and not target.exists():
                    target.symlink_to(source)
                    made.append(target)
            self.installed[name] = made

    def remove(self, name: str) -> None:
        for path in self.installed.pop(name):
            if path.is_symlink() or path.is_file():
                path.unlink()
            else:
                shutil.rmtree(path)

    def install_copy(self, name: str, version: str, package: Path, edit: dict[str, list[tuple[str, str]]]) -> None:
        """A changed version of an op package, laid out as pip installs its wheel."""
        module = package.name
        target = self.site / module
        shutil.copytree(package, target, ignore=shutil.ignore_patterns("__pycache__"))
        for filename, replacements in edit.items():
            text = (target / filename).read_text()
            for old, new in replacements:
                assert old in text, (filename, old)
                text = text.replace(old, new)
            (target / filename).write_text(text)
        info = self.site / f"{module}-{version}.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
        (info / "entry_points.txt").write_text(f"[opkernel]\n{module.split('_', 1)[1]} = {module}\n")
        files = [p.relative_to(self.site) for p in target.rglob("*") if p.is_file()]
        (info / "RECORD").write_text("".join(f"{f},,\n" for f in files) + f"{info.name}/RECORD,,\n")
        self.installed[name] = [target, info]

    def run(self, code: str, cwd: Path, *, timeout: float = 120, expect: set[str] | None = None) -> subprocess.CompletedProcess[str]:
        check = ""
        if expect is not None:  # the venv holds exactly these distributions
            check = (
                "import importlib.metadata as _m\n"
                "_have = sorted({d.metadata['Name'].lower().replace('_', '-') for d in _m.distributions()})\n"
                f"assert _have == {sorted(expect)!r}, _have\n"
            )
        env = child_env(OPKERNEL_STRICT_PLUGINS="1")
        env.pop("PYTHONPATH", None)
        env.pop("VIRTUAL_ENV", None)
        done = subprocess.run([str(self.python), "-c", check + textwrap.dedent(code)], cwd=str(cwd), env=env,
                              capture_output=True, text=True, timeout=timeout)
        if done.returncode != 0:
            pytest.fail(f"child in the fresh venv failed (exit {done.returncode}):\n{done.stderr[-4000:]}")
        return done


# ------------------------------------------------------------------ (b) an op package, missing and changed


def _median_graph() -> Graph:
    x = TensorSpec((1, 6, 6, 2), ok.float32, "x")
    return Graph(
        inputs=[x],
        nodes=[
            Node("Addons>MedianPool2D", {"T": ok.float32, "ksize": [1, 3, 3, 1], "strides": [1, 1, 1, 1], "padding": "VALID"},
                 [Edge("input", 0)], [TensorSpec((1, 4, 4, 2), ok.float32)]),
            Node("Relu", {"T": ok.float32}, [Edge("node", 0)], [TensorSpec((1, 4, 4, 2), ok.float32)]),
        ],
        outputs=[Edge("node", 1)],
        output_structure=0,
    )


MEDIAN_CHILD = """
    import numpy as np, opkernel as ok
    try:
        f = ok.load("median.okg")
    except ok.errors.OpkernelError as e:
        print("ERROR", type(e).__name__, e)
    else:
        out = f(np.load("x.npy")).numpy()
        np.testing.assert_allclose(out, np.load("y.npy"), rtol=1e-6)
        print("RAN", [s.state for s in f.ops if s.op == "Addons>MedianPool2D"][0])
"""


def test_median_pool_graph_in_a_fresh_venv(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    with ok.use_backend("cpu"):
        ok.save(_median_graph(), work / "median.okg")
        x = np.random.default_rng(0).standard_normal((1, 6, 6, 2)).astype(np.float32)
        y = ok.load(work / "median.okg")(x).numpy()
    np.save(work / "x.npy", x)
    np.save(work / "y.npy", y)
    venv = Venv(tmp_path / "venv")
    venv.link(*BASE)
    base = set(venv.installed)

    out = venv.run(MEDIAN_CHILD, work, expect=base).stdout
    assert out.startswith("ERROR OpNotFoundError"), out
    assert ("op 'Addons>MedianPool2D' is provided by opkernel-medianpool (saved with 0.1.0): "
            "pip install opkernel-medianpool") in out

    venv.link("opkernel-medianpool")
    assert venv.run(MEDIAN_CHILD, work, expect=base | {"opkernel-medianpool"}).stdout.strip() == "RAN ok"
    venv.remove("opkernel-medianpool")

    register = ".set_shape_fn(median_pool_shape)"  # MedianPool2D's registration, after its attrs
    venv.install_copy("opkernel-medianpool", "0.2.0", MEDIANPOOL, {
        "ops.py": [(register, '.attr("keep_nan: bool = false")' + register)],
        "composite.py": [("padding: str, T: ok.DType) -> ok.Tensor:", "padding: str, T: ok.DType, keep_nan: bool = False) -> ok.Tensor:")],
        "cpu.py": [("padding: str, T: ok.DType) -> np.ndarray:", "padding: str, T: ok.DType, keep_nan: bool = False) -> np.ndarray:")],
        "__init__.py": [('__version__ = "0.1.0"', '__version__ = "0.2.0"')],
    })
    assert venv.run(MEDIAN_CHILD, work, expect=base | {"opkernel-medianpool"}).stdout.strip() == "RAN compatible"
    venv.remove("opkernel-medianpool")

    venv.install_copy("opkernel-medianpool", "0.3.0", MEDIANPOOL, {
        "ops.py": [(register, '.attr("method: string")' + register)],
    })
    out = venv.run(MEDIAN_CHILD, work, expect=base | {"opkernel-medianpool"}).stdout
    assert out.startswith("ERROR IncompatibleOpError"), out
    assert ("op 'Addons>MedianPool2D' changed incompatibly since the graph was saved (saved with opkernel-medianpool "
            "0.1.0, installed: opkernel-medianpool 0.3.0): BREAKING [attr added without default]") in out


# ------------------------------------------------------------------ (a) the digits CNN


def _train_digits(steps: int) -> tuple[Any, np.ndarray, np.ndarray]:
    sys.path.insert(0, str(ROOT / "examples"))
    try:
        import digits
    finally:
        sys.path.remove(str(ROOT / "examples"))
    x_train, y_train, x_test, y_test = digits.load()
    model, opt = digits.build_model(), ok.nn.Adam(learning_rate=0.01)
    step = ok.function(lambda x, y: digits.train_step(model, opt, x, y))
    batch = 64
    order = np.random.default_rng(0).permutation(len(x_train))
    for s in range(steps):
        idx = order[(s * batch) % (len(x_train) - batch):][:batch]
        step(ok.tensor(x_train[idx]), ok.tensor(y_train[idx]))
    assert step.tracing_count == 1  # one traced step, replayed

    def classes(x: ok.Tensor) -> ok.Tensor:
        for layer in model.layers:
            # nn.Flatten reads the batch size from x.shape[0], unknown in this trace: reshape to (-1, features)
            x = ok.ops.reshape(x, [-1, 2 * 2 * 32]) if isinstance(layer, ok.nn.Flatten) else layer(x)
        return ok.ops.arg_max(x, 1)

    predict = ok.function(classes, input_signature=[ok.TensorSpec((None, 8, 8, 1), ok.float32)])
    return predict, x_test, y_test


DIGITS_CHILD = """
    import json, sys
    import numpy as np, opkernel as ok
    x = np.load("x_test.npy")
    found = {}
    for backend in sys.argv[1:]:
        with ok.use_backend(backend):
            f = ok.load("digits.okg")
            found[backend] = f(x).numpy().tolist()
    print(json.dumps(found))
"""


def test_digits_cnn_trained_traced_saved_and_loaded_elsewhere(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    with ok.use_backend("cpu"):
        predict, x_test, y_test = _train_digits(steps=60)
        classes = predict(x_test).numpy()
        ok.save(predict, work / "digits.okg")
    assert (classes == y_test).mean() > 0.8  # trained, not a random model
    np.save(work / "x_test.npy", x_test)

    # a fresh process of this environment, without the training script
    code = "import sys; sys.argv[1:] = ['cpu', 'opencl']\n" + textwrap.dedent(DIGITS_CHILD)
    done = subprocess.run([sys.executable, "-c", code], cwd=work, env=child_env(OPKERNEL_STRICT_PLUGINS="1"),
                          capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr[-4000:]
    here = json.loads(done.stdout)
    assert here["cpu"] == classes.tolist() and here["opencl"] == classes.tolist()

    # a fresh venv holding only opkernel, its cpu and opencl backends and their requirements
    venv = Venv(tmp_path / "venv")
    venv.link(*BASE, *OPENCL)
    assert "scikit-learn" not in venv.installed and "opkernel-medianpool" not in venv.installed
    code = "import sys; sys.argv[1:] = ['cpu', 'opencl']\n" + textwrap.dedent(DIGITS_CHILD)
    there = json.loads(venv.run(code, work, expect=set(venv.installed), timeout=180).stdout)
    assert there["cpu"] == classes.tolist() and there["opencl"] == classes.tolist()
    assert sorted(os.listdir(work)) == ["digits.okg", "x_test.npy"]
