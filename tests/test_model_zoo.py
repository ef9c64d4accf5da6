"""The model zoo (examples/transformer_lm.py, resnet_digits.py, char_lstm.py) as a test
suite: each model trains a few steps on every backend, eagerly and traced, and its loss
curve must equal PyTorch's from the same initial weights and batches.

PyTorch is not installed by ``make test`` (on most machines its PyPI build brings
gigabytes of CUDA libraries), so PyTorch's curves are recorded in
``tests/snapshots/model_zoo_torch.json``; where torch is importable the test also runs
the PyTorch twins live and checks the recording against them.  Re-record with

    .venv/bin/python tests/test_model_zoo.py --record

after changing a model, its data or its sizes here.
"""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest


EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
RECORDING = Path(__file__).resolve().parent / "snapshots" / "model_zoo_torch.json"
STEPS = 6
# The models at the sizes the test trains them (small, for speed; the examples' defaults are larger).
SIZES: dict[str, dict[str, Any]] = {
    "transformer_lm": {"batch": 4, "context": 16, "d_model": 32, "layers": 1},
    "resnet_digits": {"batch": 32, "width": 8},
    "char_lstm": {"batch": 8, "steps": 12, "hidden": 32},
}
# Relative difference allowed between a loss and PyTorch's: float32 arithmetic in another
# order, through a few optimizer steps.
RTOL = 5e-5


def _example(name: str) -> Any:
    sys.path.insert(0, str(EXAMPLES))
    try:
        return importlib.import_module(name)
    finally:
        sys.path.remove(str(EXAMPLES))


def _setup(name: str) -> tuple[Any, Any, dict[str, np.ndarray], list[tuple[np.ndarray, np.ndarray]]]:
    module = _example(name)
    cfg = module.Config(**SIZES[name])
    data = module.batches(cfg)
    return module, cfg, module.initial_weights(cfg), [data() for _ in range(STEPS)]


def opkernel_curve(name: str, traced: bool) -> list[float]:
    module, cfg, w, batches = _setup(name)
    step = module.opkernel_step(cfg, w, traced=traced)
    return [float(step(x, y).numpy()) for x, y in batches]


def torch_curve(torch: Any, name: str) -> list[float]:
    torch.manual_seed(0)
    module, cfg, w, batches = _setup(name)
    step = module.torch_step(torch, cfg, w, **module.TWIN_OPTIONS)
    return [float(step(x, y)) for x, y in batches]


def _recorded() -> dict[str, Any]:
    return json.loads(RECORDING.read_text())  # type: ignore[no-any-return]


@pytest.mark.parametrize("traced", [False, True], ids=["eager", "traced"])
@pytest.mark.parametrize("name", list(SIZES))
def test_model_trains_like_pytorch(backend: str, name: str, traced: bool) -> None:
    recorded = _recorded()
    assert recorded["sizes"][name] == SIZES[name] and recorded["steps"] == STEPS, \
        "the recording is of other sizes: re-record (python tests/test_model_zoo.py --record)"
    theirs = np.array(recorded["losses"][name])
    ours = np.array(opkernel_curve(name, traced))
    assert np.all(np.isfinite(ours)), ours
    assert ours[-1] < ours[0], f"{name} did not learn: {ours}"
    np.testing.assert_allclose(ours, theirs, rtol=RTOL, err_msg=f"{name} on {backend} ({'traced' if traced else 'eager'})")


@pytest.mark.parametrize("name", list(SIZES))
def test_recording_is_pytorchs_curve(name: str) -> None:
    """Where torch is importable, the recorded curve is what the PyTorch twin gives now."""
    torch = pytest.importorskip("torch")
    live = torch_curve(torch, name)
    np.testing.assert_allclose(live, _recorded()["losses"][name], rtol=1e-5, atol=0)


def _record() -> None:
    import torch

    torch.set_num_threads(1)
    data = {"torch": torch.__version__, "steps": STEPS, "sizes": SIZES,
            "losses": {name: torch_curve(torch, name) for name in SIZES}}
    RECORDING.write_text(json.dumps(data, indent=1) + "\n")
    print(json.dumps(data["losses"], indent=1))


if __name__ == "__main__":
    if sys.argv[1:] != ["--record"]:
        raise SystemExit(__doc__)
    _record()
