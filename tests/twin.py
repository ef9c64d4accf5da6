"""A throwaway second backend, ``twin``, registered the way a plugin is.

It lives in its own module, not in conftest.py, so that tests and child processes can
import it by a name no other conftest.py in the tree shares."""

from __future__ import annotations

from typing import Any

import numpy as np

import opkernel as ok


class Boxed:
    """The twin backend's native array: a numpy array in a box, so a twin tensor's
    value can never be mistaken for a cpu one."""

    __slots__ = ("array",)

    def __init__(self, array: np.ndarray) -> None:
        self.array = array

    @property
    def shape(self) -> tuple[int, ...]:
        return self.array.shape  # type: ignore[no-any-return]


class TwinBackend(ok.Backend):
    """A second host backend; its priority is below cpu's, so it never becomes the default."""

    name = "twin"
    priority = -10
    array_types = (Boxed,)

    def from_numpy(self, array: np.ndarray) -> Boxed:
        return Boxed(np.array(array))

    def to_numpy(self, value: Boxed) -> np.ndarray:
        return value.array

    def as_output(self, value: Any, dtype: ok.DType) -> Boxed:
        if not isinstance(value, Boxed):
            raise TypeError(f"a twin kernel returned {type(value).__name__}, not a Boxed array")
        return value


def _boxed(fn: Any) -> Any:
    return lambda *xs, **attrs: Boxed(np.asarray(fn(*(x.array for x in xs))))


class TwinPlugin:
    """The twin backend with kernels for a few arithmetic ops."""

    @ok.hookimpl
    def opkernel_register_backends(self) -> list[type[ok.Backend]]:
        return [TwinBackend]

    @ok.hookimpl
    def opkernel_register_kernels(self) -> None:
        for op, fn in (("Add", np.add), ("Sub", np.subtract), ("Mul", np.multiply), ("Neg", np.negative)):
            ok.register_kernel(op, backend="twin")(_boxed(fn))
