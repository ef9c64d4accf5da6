"""The registry of device programs that backends declare by name (the OpenCL and CUDA
plugins' ``DeviceProgram``), one place for both: ``ok.warmup`` builds what is declared,
a name is declared once per package, and a name in a namespace a distribution declares
(entry point group ``opkernel.namespaces``) is that distribution's (docs/plugins.md)."""

from __future__ import annotations

import threading
from typing import Any, Generic, Protocol, TypeVar

from . import plugins
from .errors import AlreadyExistsError

__all__ = ["DeclaredProgram", "ProgramRegistry"]


class DeclaredProgram(Protocol):
    """What the registry needs of a program: its name, and where it was written
    (``origin[0]``: the module, which tells a package importing again from another)."""

    name: str
    origin: Any


P = TypeVar("P", bound=DeclaredProgram)


class ProgramRegistry(Generic[P]):
    """Programs of one kind (``kind``: "OpenCL program", "CUDA program") by name."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._programs: dict[str, P] = {}
        self._lock = threading.Lock()

    def declare(self, prog: P) -> None:
        """Register ``prog`` under its name; AlreadyExistsError for a name another package
        declared, or one in a namespace another distribution owns."""
        plugins.check_program_name(self.kind, prog.name, prog.origin[0])
        with self._lock:
            known = self._programs.get(prog.name)
            if known is not None and known.origin != prog.origin:
                raise AlreadyExistsError(
                    f"{self.kind} {prog.name!r} is already declared (by {known.origin[0]}); name programs after "
                    "their package ('Package>name') or declare this one with register=False",
                    program=prog.name,
                )
            self._programs[prog.name] = prog

    def registered(self) -> dict[str, P]:
        """Every declared program, by name."""
        with self._lock:
            return dict(self._programs)
