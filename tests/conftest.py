"""Shared fixtures: a throwaway second backend, registered the way a plugin is."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import opkernel as ok
from twin import TwinPlugin


@pytest.fixture
def twin(fresh_registry: None) -> Iterator[str]:
    """A second backend, ``"twin"``, for the length of one test; yields its name."""
    ok.register_plugin(TwinPlugin(), name="twin-plugin")
    yield "twin"
