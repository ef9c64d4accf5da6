"""The example op package opkernel-medianpool (examples/median_pool): the op on every
installed backend against a plain reference, its generic kernel, its gradient and
tie rule, its shape function, errors, and how it registers kernels."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest

import opkernel as ok
from opkernel.errors import InvalidArgumentError, KernelNotFoundError, OpkernelError
from opkernel.ops.nn_ops import window_output_size
from opkernel.testing import assert_all_close, isolated_registries
from opkernel.testing.check_op import check_op
from opkernel.testing.gradient_checker import compute_gradient_error

mp = pytest.importorskip("opkernel_medianpool", reason="pip install -e examples/median_pool")
from opkernel_medianpool import composite, device, kernels  # noqa: E402
from isolated import run_isolated  # noqa: E402

OP, GRAD = "Addons>MedianPool2D", "Addons>MedianPool2DGrad"


def reference(x: np.ndarray, k: Sequence[int], s: Sequence[int], padding: str) -> np.ndarray:
    """Each window's in-bounds elements sorted, the lower middle one taken."""
    n, h, w, c = x.shape
    oh, top, _ = window_output_size(h, k[0], 1, s[0], padding)
    ow, left, _ = window_output_size(w, k[1], 1, s[1], padding)
    out = np.empty((n, oh, ow, c), x.dtype)
    for oy in range(oh):
        for ox in range(ow):
            y0, x0 = oy * s[0] - top, ox * s[1] - left
            win = x[:, max(y0, 0) : max(0, y0 + k[0]), max(x0, 0) : max(0, x0 + k[1])].reshape(n, -1, c)
            out[:, oy, ox] = np.sort(win, axis=1)[:, (win.shape[1] - 1) // 2]
    return out


def attrs(k: Sequence[int], s: Sequence[int], padding: str) -> dict[str, Any]:
    return {"ksize": [1, *k, 1], "strides": [1, *s, 1], "padding": padding}


GEOMETRIES = [  # (ksize, strides, padding): 3x3 (the network, its border strips), other sizes, strides
    ((3, 3), (1, 1), "VALID"),
    ((3, 3), (1, 1), "SAME"),
    ((3, 3), (2, 3), "SAME"),
    ((3, 3), (1, 2), "VALID"),
    ((2, 2), (2, 1), "SAME"),
    ((3, 2), (1, 2), "VALID"),
    ((1, 1), (1, 1), "VALID"),
    ((4, 5), (3, 2), "SAME"),
]


def _data(shape: Sequence[int], dtype: Any = np.float32, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(shape) * 10).astype(dtype)


@pytest.mark.parametrize("k, s, padding", GEOMETRIES, ids=lambda v: str(v).replace(" ", ""))
def test_matches_reference(k: tuple[int, int], s: tuple[int, int], padding: str, backend: str) -> None:
    x = _data((2, 9, 17, 8))
    y = ok.ops.addons.median_pool2d(ok.tensor(x), **attrs(k, s, padding))
    assert y.backend == backend
    np.testing.assert_array_equal(y.numpy(), reference(x, k, s, padding))


@pytest.mark.parametrize("dtype", ["int32", "uint8", "float64", "int64", "float16", "bfloat16"])
def test_dtypes(dtype: str, backend: str) -> None:
    if not ok.engine.backend_instance(backend).supports_dtype(ok.as_dtype(dtype)):
        pytest.skip(f"{backend} cannot hold {dtype}")
    x = _data((1, 6, 7, 3), np.float32).astype(ok.as_dtype(dtype).np)
    try:
        y = ok.ops.addons.median_pool2d(ok.tensor(x), **attrs((3, 3), (1, 1), "SAME"))
    except KernelNotFoundError as e:
        if backend == "cpu" or dtype not in ("float16", "bfloat16"):
            raise
        pytest.skip(f"neither a {backend} kernel nor the ops of the generic one take {dtype}: {e}")
    assert y.dtype.name == dtype
    np.testing.assert_array_equal(y.numpy(), reference(x, (3, 3), (1, 1), "SAME"))


def test_odd_channel_counts_and_wide_rows(backend: str) -> None:
    for c in (1, 3, 5):
        x = _data((1, 5, 23, c), seed=c)
        y = ok.ops.addons.median_pool2d(x, **attrs((3, 3), (1, 1), "VALID"))
        np.testing.assert_array_equal(y.numpy(), reference(x, (3, 3), (1, 1), "VALID"))


@pytest.mark.parametrize("k, s, padding", [GEOMETRIES[1], GEOMETRIES[3]], ids=["3x3-SAME", "2x2-s21-SAME"])
def test_generic_kernel_matches_reference(k: tuple[int, int], s: tuple[int, int], padding: str, backend: str) -> None:
    x = _data((2, 6, 7, 3)).round()  # integral values: many ties
    y = composite.median_pool2d(ok.tensor(x), T=ok.float32, **attrs(k, s, padding))
    np.testing.assert_array_equal(y.numpy(), reference(x, k, s, padding))
    g = _data(y.shape, seed=1)
    got = composite.median_pool2d_grad(ok.tensor(x), ok.tensor(g), T=ok.float32, **attrs(k, s, padding))
    with ok.use_backend("cpu"):
        expected = ok.ops.addons.median_pool2d_grad(x, g, **attrs(k, s, padding))
    assert_all_close(got.numpy(), expected.numpy())
    with pytest.raises(InvalidArgumentError, match="grad must have the shape"):
        composite.median_pool2d_grad(ok.tensor(x), ok.tensor(g[:, :1]), T=ok.float32, **attrs(k, s, padding))


def test_empty_outputs(backend: str) -> None:
    x = _data((2, 2, 5, 3))
    y = ok.ops.addons.median_pool2d(x, **attrs((3, 3), (1, 1), "VALID"))
    assert y.shape == (2, 0, 3, 3)
    dx = ok.ops.addons.median_pool2d_grad(x, np.zeros((2, 0, 3, 3), np.float32), **attrs((3, 3), (1, 1), "VALID"))
    np.testing.assert_array_equal(dx.numpy(), np.zeros_like(x))


def _first_nan_positions(x: np.ndarray, k: Sequence[int], s: Sequence[int], padding: str) -> np.ndarray:
    """Where the gradient of each window with a NaN median goes: its first NaN inside."""
    n, h, w, c = x.shape
    oh, top, _ = window_output_size(h, k[0], 1, s[0], padding)
    ow, left, _ = window_output_size(w, k[1], 1, s[1], padding)
    dx = np.zeros(x.shape)
    med = reference(x, k, s, padding)
    for b, oy, ox, ch in zip(*np.nonzero(np.isnan(med))):
        for i in range(k[0] * k[1]):
            yy, xx = oy * s[0] - top + i // k[1], ox * s[1] - left + i % k[1]
            if 0 <= yy < h and 0 <= xx < w and np.isnan(x[b, yy, xx, ch]):
                dx[b, yy, xx, ch] += 1
                break
    return dx


@pytest.mark.parametrize("k, s, padding", GEOMETRIES, ids=lambda v: str(v).replace(" ", ""))
def test_nan_sorts_after_every_number(k: tuple[int, int], s: tuple[int, int], padding: str, backend: str) -> None:
    """NaN had no place in the order: cpu's network and OpenCL's gave different medians
    for one window, and partial windows padded with inf took the padding as their
    median.  Every kernel now sorts NaN last, as np.sort does, and a NaN median's
    gradient goes to the window's first NaN."""
    rng = np.random.default_rng(5)
    for frac, channels in ((0.2, 3), (0.5, 4), (0.7, 8)):
        x = _data((2, 7, 9, channels))
        x[rng.random(x.shape) < frac] = np.nan
        x[rng.random(x.shape) < 0.05] = np.inf
        expected = reference(x, k, s, padding)
        np.testing.assert_array_equal(ok.ops.addons.median_pool2d(x, **attrs(k, s, padding)).numpy(), expected)
        np.testing.assert_array_equal(composite.median_pool2d(ok.tensor(x), T=ok.float32, **attrs(k, s, padding)).numpy(), expected)
        g = np.where(np.isnan(expected), 1, 0).astype(np.float32)
        dx = ok.ops.addons.median_pool2d_grad(x, g, **attrs(k, s, padding)).numpy()
        np.testing.assert_array_equal(dx, _first_nan_positions(x, k, s, padding))


def test_float64_with_eight_channels(backend: str) -> None:
    """OpenCL took eight float64 channels per work-item (double8), which PoCL passes to
    its builtins with an ABI x86 without AVX-512 does not share: a segfault."""
    out = run_isolated(
        "import numpy as np, opkernel as ok\n"
        "x = np.random.default_rng(0).standard_normal((2, 7, 9, 8))\n"
        "y = ok.ops.addons.median_pool2d(x, ksize=[1, 3, 3, 1], strides=[1, 1, 1, 1], padding='VALID')\n"
        "print(repr(float(y.numpy().sum())))",
        backend=backend, what=f"MedianPool2D of float64 with 8 channels on {backend}",
    )
    x = np.random.default_rng(0).standard_normal((2, 7, 9, 8))
    assert float(out.stdout) == pytest.approx(reference(x, (3, 3), (1, 1), "VALID").sum(), rel=1e-12)


def test_check_op(backend: str) -> None:
    x = _data((2, 5, 6, 2)) / 10
    check_op(OP, [x], attrs((3, 3), (1, 1), "SAME"), backends=[backend], threads=2)
    g = _data((2, 2, 2, 2), seed=3)
    check_op(GRAD, [x, g], attrs((2, 3), (2, 3), "VALID"), backends=[backend], threads=2)


def test_check_op_across_backends() -> None:
    x = _data((1, 5, 6, 4))
    report = check_op(OP, [x], attrs((3, 3), (1, 1), "SAME"), check_gradients=False, threads=1)
    assert {r.backend for r in report.results} >= set(ok.available_backends())


@pytest.mark.parametrize("k, s, padding", [((3, 3), (1, 1), "SAME"), ((2, 3), (2, 1), "VALID")], ids=["3x3", "2x3"])
def test_gradient_checker(k: tuple[int, int], s: tuple[int, int], padding: str) -> None:
    x = np.random.default_rng(5).permutation(2 * 5 * 6 * 2).reshape(2, 5, 6, 2).astype(np.float64) / 7  # no ties
    with ok.use_backend("cpu"):
        error = compute_gradient_error(lambda t: ok.ops.addons.median_pool2d(t, **attrs(k, s, padding)), [x])
        assert error < 1e-6
        g = _data(ok.infer_shapes(OP, [x.shape], attrs(k, s, padding))[0].as_list(), np.float64)
        second = compute_gradient_error(
            lambda t: ok.ops.addons.median_pool2d_grad(x, t, **attrs(k, s, padding)), [g]
        )
        assert second < 1e-6


def test_ties_go_to_the_first_equal_element_inside(backend: str) -> None:
    x = np.array([[1, 5, 5], [5, 0, 5], [9, 5, 2]], np.float32)[None, :, :, None]
    dx = ok.ops.addons.median_pool2d_grad(x, np.ones((1, 1, 1, 1), np.float32), **attrs((3, 3), (1, 1), "VALID"))
    expected = np.zeros((3, 3), np.float32)
    expected[0, 1] = 1  # median 5: the first 5 in row-major window order
    np.testing.assert_array_equal(dx.numpy()[0, :, :, 0], expected)
    # SAME at the corner: the window's first in-bounds element, not a padded position
    x = np.full((1, 2, 2, 1), 3.0, np.float32)
    dx = ok.ops.addons.median_pool2d_grad(x, np.ones((1, 2, 2, 1), np.float32), **attrs((3, 3), (1, 1), "SAME"))
    np.testing.assert_array_equal(dx.numpy()[0, :, :, 0], [[4, 0], [0, 0]])


def test_even_count_takes_the_lower_middle(backend: str) -> None:
    x = np.array([[4, 1], [3, 2]], np.float32)[None, :, :, None]
    y = ok.ops.addons.median_pool2d(x, **attrs((2, 2), (1, 1), "VALID"))
    assert y.numpy().item() == 2.0


def test_tape_gradient(backend: str) -> None:
    x = ok.tensor(np.arange(16, dtype=np.float32).reshape(1, 4, 4, 1))
    with ok.GradientTape() as tape:
        tape.watch(x)
        y = ok.ops.sum(ok.ops.addons.median_pool2d(x, **attrs((3, 3), (1, 1), "VALID")), [0, 1, 2, 3])
    grad = tape.gradient(y, x)
    assert grad.backend == backend
    np.testing.assert_array_equal(grad.numpy()[0, :, :, 0], [[0, 0, 0, 0], [0, 1, 1, 0], [0, 1, 1, 0], [0, 0, 0, 0]])


def test_shape_function_propagates_unknown_dims() -> None:
    a = attrs((3, 3), (2, 2), "SAME")
    assert ok.infer_shapes(OP, [[None, 9, None, 3]], a)[0].as_list() == [None, 5, None, 3]
    assert ok.infer_shapes(OP, [[4, 9, 10, None]], attrs((3, 3), (1, 1), "VALID"))[0].as_list() == [4, 7, 8, None]
    assert ok.infer_shapes(OP, [None], a)[0].as_list() == [None, None, None, None]
    assert ok.infer_shapes(GRAD, [[2, 9, 10, 3], [None, None, None, None]], a)[0].as_list() == [2, 9, 10, 3]
    with pytest.raises(OpkernelError, match="rank"):
        ok.infer_shapes(OP, [[9, 10, 3]], a)
    with pytest.raises(OpkernelError):
        ok.infer_shapes(GRAD, [[2, 9, 10, 3], [2, 4, 5, 3]], a)


@pytest.mark.parametrize("bad, match", [
    ({"ksize": [1, 3, 3]}, "ksize"),
    ({"ksize": [2, 3, 3, 1]}, "batch and depth"),
    ({"strides": [1, 0, 1, 1]}, "strides"),
    ({"padding": "EXPLICIT"}, "padding"),
])
def test_bad_attrs_name_the_op(bad: dict[str, Any], match: str, backend: str) -> None:
    with pytest.raises(OpkernelError, match=match) as info:
        ok.ops.addons.median_pool2d(_data((1, 4, 4, 1)), **{**attrs((3, 3), (1, 1), "VALID"), **bad})
    assert "MedianPool2D" in str(info.value)


def test_bad_input_rank_and_grad_shape(backend: str) -> None:
    with pytest.raises(OpkernelError, match="MedianPool2D"):
        ok.ops.addons.median_pool2d(_data((4, 4, 1)), **attrs((3, 3), (1, 1), "VALID"))
    with pytest.raises(InvalidArgumentError, match="grad must have the shape"):
        ok.ops.addons.median_pool2d_grad(_data((1, 4, 4, 1)), _data((1, 3, 3, 1)), **attrs((3, 3), (1, 1), "VALID"))


def test_provenance_names_the_package() -> None:
    provider = ok.op_def(OP).provider
    assert provider is not None and provider.distribution == "opkernel-medianpool"
    from opkernel import kernels as registry

    found = {k.backend: k.provider.distribution for k in registry.all_kernels() if k.op == OP}
    assert found["*"] == "opkernel-medianpool" and found.get("cpu") == "opkernel-medianpool"


def test_kernels_only_for_installed_backends(monkeypatch: pytest.MonkeyPatch) -> None:
    from opkernel import kernels as registry

    def only(*present: str) -> Any:
        return lambda name: object() if name in present else None

    with isolated_registries():
        registry.restore({key: [k for k in ks if k.op not in (OP, GRAD)] for key, ks in registry.snapshot().items()})
        monkeypatch.setattr(importlib.util, "find_spec", only("opkernel_cpu"))
        kernels.register_all()
        assert sorted({k.backend for k in registry.all_kernels() if k.op == OP}) == ["*", "cpu"]
        registry.restore({key: [k for k in ks if k.op not in (OP, GRAD)] for key, ks in registry.snapshot().items()})
        monkeypatch.setattr(importlib.util, "find_spec", only("opkernel_cpu", "opkernel_opencl", "opkernel_cuda"))
        kernels.register_all()
        assert sorted({k.backend for k in registry.all_kernels() if k.op == GRAD}) == ["*", "cpu", "cuda", "opencl"]


def test_importing_the_package_imports_no_device_library() -> None:
    code = (
        "import sys, opkernel as ok, numpy as np\n"
        "import opkernel_medianpool, opkernel_medianpool.opencl, opkernel_medianpool.cuda\n"
        "ok.ops.addons.median_pool2d(np.ones((1, 3, 3, 1), np.float32), ksize=[1, 3, 3, 1], strides=[1, 1, 1, 1], "
        "padding='VALID')\n"
        "print(sorted(m for m in ('pyopencl', 'cupy') if m in sys.modules))\n"
    )
    env = {"OPKERNEL_PLUGINS": "cpu,medianpool", "PATH": "/usr/bin:/bin"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    assert out.stdout.strip() == "[]"


def _nvrtc() -> Any:
    try:
        from cupy.cuda import nvrtc
    except Exception as e:  # cupy absent, or without its NVRTC library
        pytest.skip(f"cupy with NVRTC is not importable: {type(e).__name__}: {e}")
    return nvrtc


@pytest.mark.parametrize("dtype", ["float32", "float64", "int8", "uint64"])
def test_cuda_source_compiles_with_nvrtc(dtype: str) -> None:
    nvrtc = _nvrtc()
    for kh, kw, sw, wide in ((3, 3, 1, False), (3, 3, 2, True), (3, 3, 4, False), (2, 5, 1, False)):
        program = nvrtc.createProgram(device.source("cuda", dtype, kh, kw, sw, 1, wide), "median_pool.cu", [], [])
        try:
            nvrtc.compileProgram(program, ["--gpu-architecture=compute_80", "--std=c++11"])
        except Exception as e:
            pytest.fail(f"{dtype} {kh}x{kw}: {e}\n{nvrtc.getProgramLog(program)}")
