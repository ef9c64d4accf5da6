"""Specs, shape functions and gradients of the neural-network ops."""

from __future__ import annotations


def register_ops() -> None:
    """Neural-network op specs."""


def register_gradients() -> None:
    """Neural-network op gradients."""
