"""One conformance case: an op call that TensorFlow and opkernel both run.

This module imports numpy only (neither opkernel nor TensorFlow), so the same case
list is built in the TensorFlow recorder's process and in the test process.  Cases
are made deterministically: every input is a numpy array built from literals or
from a ``numpy.random.default_rng(seed)`` whose seed is part of the case.

* ``inputs``: one entry per declared input of the op, in the OpDef's order (a
  ``list`` of arrays for a list input such as ``Pack``'s ``values``).
* ``attrs``: the op's attrs by name, as ``tf.raw_ops`` takes them.  A dtype attr is
  given by its numpy name (``"float32"``, ``"int64"``, ``"bool"``, ``"complex64"``,
  ``"bfloat16"``); both sides convert it.  Attrs that TensorFlow infers from the
  inputs (``T``, ``N``, ``Tidx``...) are left out.
* ``grad``: also compare the gradients with respect to every floating-point input,
  for an upstream gradient built from ``seed`` (TensorFlow: ``tf.GradientTape``;
  opkernel: ``ok.GradientTape``).
* ``tol``: ``(rtol, atol)`` when the default for the output dtype is not right, with
  the reason in ``why``.

TensorFlow's answer is whatever it returns or raises; a call TensorFlow rejects must
raise an ``opkernel.errors`` error in opkernel, never succeed and never raise anything
else.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np


@dataclass(frozen=True)
class Case:
    id: str                                     # unique across the suite: "Add/int32_wraps"
    op: str                                     # the op's name in both registries: "Add"
    inputs: tuple[Any, ...]                     # np.ndarray, or list[np.ndarray] for a list input
    attrs: dict[str, Any] = field(default_factory=dict)
    grad: bool = False
    seed: int = 0
    tol: tuple[float, float] | None = None
    why: str = ""                               # the reason for a tol, or for anything unusual

    def __str__(self) -> str:
        return self.id


def rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


def noncontiguous(a: np.ndarray) -> np.ndarray:
    """``a``'s values in a non-contiguous array (every other element of a larger one)."""
    wide = np.zeros(a.shape[:-1] + (a.shape[-1] * 2,) if a.ndim else (2,), a.dtype)
    if a.ndim == 0:
        return a
    wide[..., ::2] = a
    return wide[..., ::2]
