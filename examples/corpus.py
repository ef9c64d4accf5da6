"""The fixed text the language-model examples (transformer_lm.py, char_lstm.py) train on.

It is held here rather than read from a file that may change, so that the loss curves
recorded from PyTorch (tests/snapshots/model_zoo_torch.json) stay valid."""

from __future__ import annotations

import numpy as np

TEXT = (
    "An op is defined once, with its inputs, outputs, attributes and shape function, and "
    "each backend registers a kernel for it under the op's name. A gradient is written "
    "with other ops, so that it runs wherever they run, and its own gradient follows. "
    "A traced function records the ops a Python function calls and replays them as one "
    "graph, fused where elementwise ops follow each other, with buffers reused where "
    "their lifetimes do not overlap. A saved graph names the packages its ops come from, "
    "so that loading it elsewhere asks for them by name and version. Variables hold the "
    "state a training step changes; an optimizer updates them in place, and every other "
    "value is a value: nothing that a caller holds changes under it. "
)


def character_ids(vocab: int) -> np.ndarray:
    """``TEXT`` as int32 ids: printable ASCII from the space (0) up, clipped to ``vocab - 1``."""
    return np.clip(np.frombuffer(TEXT.encode(), np.uint8).astype(np.int32) - 32, 0, vocab - 1)
