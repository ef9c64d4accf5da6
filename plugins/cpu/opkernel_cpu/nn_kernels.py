"""CPU kernels of the neural-network ops: one table in ``register_all``."""

from __future__ import annotations

from typing import Any

import numpy as np

import opkernel as ok
from opkernel.errors import InvalidArgumentError


def register_all() -> None:
    """(op, function, type constraints, host-memory args), one row per kernel."""
    table: list[tuple[str, Any, dict[str, list[str]] | None, tuple[str, ...]]] = []
    for op, fn, constraints, host in table:
        ok.register_kernel(op, backend="cpu", type_constraints=constraints, host_memory=host)(fn)
