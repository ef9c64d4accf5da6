"""The op packages opkernel knows of, so that an error about a missing op or kernel
(raised by the op registry, the plugin layer or kernel selection) can name the
package to install.  ``opkernel.library`` re-exports these names."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["KNOWN_OP_PACKAGES", "KnownOpPackage", "known_package_for"]


@dataclass(frozen=True)
class KnownOpPackage:
    """An op package published for opkernel: its distribution, the ops it registers
    (a name, or a namespace prefix ending in ``>``) and the backends it has kernels for."""

    distribution: str
    ops: tuple[str, ...]
    backends: tuple[str, ...]

    def provides(self, op: str) -> bool:
        return any(op == name or (name.endswith(">") and op.startswith(name)) for name in self.ops)


#: Op packages opkernel knows of (suggested by errors when not installed).
KNOWN_OP_PACKAGES: tuple[KnownOpPackage, ...] = (
    KnownOpPackage(
        "opkernel-medianpool", ("Addons>MedianPool2D", "Addons>MedianPool2DGrad"), ("cpu", "opencl", "cuda", "*")
    ),
)


def known_package_for(op: str) -> KnownOpPackage | None:
    """The known op package that provides ``op``, if any."""
    return next((p for p in KNOWN_OP_PACKAGES if p.provides(op)), None)
