"""The backend class and its native array type."""

from __future__ import annotations

import os
from typing import Any

import numpy as np

import opkernel as ok


class ExampleArray:
    """The native array of the ``example`` backend: a numpy array in a box.

    It stands in for a device array.  opkernel only asks a native array for
    ``.shape``; everything else goes through the backend's methods.
    """

    __slots__ = ("data",)

    def __init__(self, data: np.ndarray) -> None:
        self.data = data

    @property
    def shape(self) -> tuple[int, ...]:
        return self.data.shape

    def __repr__(self) -> str:
        return f"ExampleArray({self.data!r})"


class ExampleBackend(ok.Backend):
    name = "example"
    priority = -10  # below cpu (0): available, but never the default
    array_types = (ExampleArray,)

    @classmethod
    def availability(cls) -> str | None:
        # Runs at discovery and in `opkernel info`: cheap, and never raises.  A
        # device backend checks here that its library is installed
        # (importlib.util.find_spec) without importing it.
        if os.environ.get("OPKERNEL_EXAMPLE_DISABLE"):
            return "disabled by OPKERNEL_EXAMPLE_DISABLE"
        return None

    def __init__(self) -> None:
        # Runs once, when the backend is first used: the place to import the
        # array library and open the device.  Raising here makes the backend
        # unavailable, with this error as the reason.
        self.uploads = 0  # host -> backend copies, so tests can watch transfers

    def from_numpy(self, array: np.ndarray) -> ExampleArray:
        self.uploads += 1
        return ExampleArray(np.array(array, copy=True))  # a device copy: never aliases the caller's array

    def to_numpy(self, value: ExampleArray) -> np.ndarray:
        return value.data.copy()

    def empty(self, shape: tuple[int, ...], dtype: ok.DType) -> ExampleArray:
        return ExampleArray(np.empty(shape, dtype.np))

    def as_output(self, value: Any, dtype: ok.DType) -> ExampleArray:
        # Called on every kernel output: return at once when it is already right.
        if type(value) is ExampleArray and value.data.dtype == dtype.np:
            return value
        data = value.data if isinstance(value, ExampleArray) else value
        return ExampleArray(np.asarray(data, dtype.np))

    def describe(self) -> dict[str, str]:
        return {"device": "host memory (numpy arrays in a box)", "numpy": np.__version__}
