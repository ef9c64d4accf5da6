"""The gradient registry: a gradient function per op name.

A gradient is ``fn(op, *output_grads) -> list`` (one entry per flat input,
``None`` where no gradient flows), written with opkernel ops so it runs on
every backend.  ``not_differentiable`` marks an op that propagates nothing.
"""

from __future__ import annotations

import threading
import warnings
from dataclasses import dataclass
from typing import Any, Callable, TypeVar

from ._discovery import discover
from ._provenance import Provider, current_provider
from .errors import AlreadyExistsError, GradientNotFoundError

__all__ = [
    "GradientDef",
    "register_gradient",
    "unregister_gradient",
    "not_differentiable",
    "get_gradient",
    "has_gradient",
    "is_not_differentiable",
    "remove_provider",
]

GradFn = Callable[..., Any]
F = TypeVar("F", bound=GradFn)


@dataclass(frozen=True)
class GradientDef:
    """One registry entry.  ``fn`` is None for a not-differentiable op.

    ``materialize_grads``: whether ``fn`` receives zeros (True) or None (False) for
    an output nothing depended on (torch's ``ctx.set_materialize_grads``).
    """

    op: str
    fn: GradFn | None
    provider: Provider
    materialize_grads: bool = True


_lock = threading.RLock()
_gradients: dict[str, GradientDef] = {}
# (newer, older): every entry that replaced another (override=True); unregistering the
# newer one puts the older one back.
_superseded: list[tuple[GradientDef, GradientDef]] = []
# (owner's, squatter's): a gradient registered for another party's op before that party
# came, replaced by the op's own provider's (the plugin layer refuses the squatter).
_displaced: list[tuple[GradientDef, GradientDef]] = []


def _no_owner(op: str) -> str | None:
    return None


# The party that owns an op's gradient: the origin (distribution, or plugin) of the op's
# provider.  The plugin layer installs the real lookup (set_owner_lookup), so this room
# needs no upward import.
_owner: Callable[[str], str | None] = _no_owner


def set_owner_lookup(fn: Callable[[str], str | None]) -> None:
    """Install ``fn(op)``: the origin that may register the op's gradient over another
    party's without ``override=True`` (the op's own provider)."""
    global _owner
    _owner = fn


def origin(provider: Provider) -> str:
    """The party behind ``provider``: its distribution, else its plugin (or script)."""
    return provider.distribution or provider.plugin


def _add(entry: GradientDef, override: bool) -> None:
    with _lock:
        old = _gradients.get(entry.op)
        if old is not None and old.fn is not entry.fn:
            owner = _owner(entry.op)
            if not override and owner is not None and origin(entry.provider) == owner != origin(old.provider):
                # The op's own provider comes after another party registered its gradient:
                # the owner's wins, and the squatter is named (never the other way round).
                warnings.warn(
                    f"op {entry.op!r}: {old.provider} registered a gradient for an op it does not provide, "
                    f"without override=True; the op's provider {entry.provider} replaces it",
                    stacklevel=3,
                )
                _displaced.append((entry, old))
            elif not override:
                raise AlreadyExistsError(
                    f"op {entry.op!r}: a gradient is already registered by {old.provider}; "
                    f"{entry.provider} tried to register another. Pass override=True to replace it.",
                    op=entry.op,
                )
            else:
                warnings.warn(
                    f"op {entry.op!r}: gradient from {old.provider} overridden by {entry.provider}",
                    stacklevel=3,
                )
                _superseded.append((entry, old))
        _gradients[entry.op] = entry


def overrides() -> list[tuple[GradientDef, GradientDef]]:
    """Every (overriding, overridden) pair in use across parties: a gradient registered with
    ``override=True`` over another distribution's (or plugin's)."""
    with _lock:
        return [
            (new, old) for new, old in _superseded
            if _gradients.get(new.op) is new and origin(new.provider) != origin(old.provider)
        ]


def displaced() -> list[tuple[GradientDef, GradientDef]]:
    """Every (owner's, squatter's) pair: squatters whose gradient the op's provider replaced."""
    with _lock:
        return list(_displaced)


def register_gradient(op_name: str, *, override: bool = False, materialize_grads: bool = True) -> Callable[[F], F]:
    """Decorator registering ``fn(op, *grads)`` as the gradient of ``op_name``;
    returns ``fn`` unchanged.

    ``fn`` gets one gradient per output of the op.  For an output that nothing
    the tape differentiates depended on, that gradient is a zeros tensor, or None
    with ``materialize_grads=False`` (a multi-output op whose gradient can skip
    that term saves making the zeros: TensorFlow's softmax cross-entropy losses).
    """

    def decorate(fn: F) -> F:
        _add(GradientDef(op_name, fn, current_provider(), materialize_grads), override)
        return fn

    return decorate


def not_differentiable(op_name: str) -> None:
    """Mark ``op_name`` as propagating no gradient (``Shape``, comparisons)."""
    with _lock:
        old = _gradients.get(op_name)
        if old is not None and old.fn is None:
            return
    _add(GradientDef(op_name, None, current_provider()), override=False)


def unregister_gradient(op_name: str) -> GradientDef:
    """Undo the registration of ``op_name``'s gradient (or not-differentiable mark), as
    TensorFlow.js's ``unregisterGradient``; returns the removed entry.  A gradient registered
    with ``override=True`` gives back the one it replaced.  GradientNotFoundError when
    ``op_name`` has none."""
    discover()  # the installed plugins' gradients first (opkernel._discovery)
    with _lock:
        entry = _gradients.get(op_name)
        if entry is None:
            raise GradientNotFoundError(
                f"op {op_name!r} has no registered gradient or not-differentiable mark to unregister",
                op=op_name,
            )
        older = next((old for new, old in reversed(_superseded) if new is entry), None)
        _superseded[:] = [(new, old) for new, old in _superseded if new is not entry]
        if older is None:
            del _gradients[op_name]
        else:
            _gradients[op_name] = older
        return entry


def get_gradient(op_name: str) -> GradientDef:
    """The registry entry for ``op_name``; raises GradientNotFoundError."""
    entry = _gradients.get(op_name)
    if entry is None:
        discover()  # a lookup before discovery (ok.get_gradient first thing) sees the plugins' gradients
        entry = _gradients.get(op_name)
    if entry is None:
        raise GradientNotFoundError(
            f"op {op_name!r} has no registered gradient. Register one with "
            f"@ok.register_gradient({op_name!r}), mark it with ok.not_differentiable({op_name!r}), "
            "or wrap its input in ok.stop_gradient.",
            op=op_name,
        )
    return entry


def has_gradient(op_name: str) -> bool:
    """True when a gradient function (not a not-differentiable mark) is registered."""
    entry = _gradients.get(op_name)
    return entry is not None and entry.fn is not None


def is_not_differentiable(op_name: str) -> bool:
    entry = _gradients.get(op_name)
    return entry is not None and entry.fn is None


def entries() -> list[GradientDef]:
    with _lock:
        return list(_gradients.values())


def remove_provider(provider: Provider) -> None:
    """Drop every gradient ``provider`` registered (rollback of a failed plugin); one of
    another provider that it overrode comes back."""
    with _lock:
        for name in [n for n, e in _gradients.items() if e.provider == provider]:
            entry = _gradients.pop(name)
            older = next((old for new, old in reversed(_superseded) if new is entry and old.provider != provider), None)
            if older is not None:
                _gradients[name] = older  # the gradient it overrode returns
        _superseded[:] = [(n, o) for n, o in _superseded if provider not in (n.provider, o.provider)]
        _displaced[:] = [(n, o) for n, o in _displaced if provider not in (n.provider, o.provider)]


class Snapshot(dict[str, GradientDef]):
    """The registry's entries, with the record of which entry replaced which (so that an
    override unregistered after :func:`restore` still gives back the one it replaced)."""

    superseded: list[tuple[GradientDef, GradientDef]]
    displaced: list[tuple[GradientDef, GradientDef]]


def snapshot() -> Snapshot:
    with _lock:
        snap = Snapshot(_gradients)
        snap.superseded = list(_superseded)
        snap.displaced = list(_displaced)
        return snap


def restore(snap: dict[str, GradientDef]) -> None:
    with _lock:
        _gradients.clear()
        _gradients.update(snap)
        if isinstance(snap, Snapshot):
            _superseded[:] = snap.superseded
            _displaced[:] = snap.displaced
        else:
            present = {id(e) for e in _gradients.values()}
            _superseded[:] = [(new, old) for new, old in _superseded if id(new) in present]
            _displaced[:] = [(new, old) for new, old in _displaced if id(new) in present]
