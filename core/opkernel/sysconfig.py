"""Where the C ABI's header lies and how to compile against it, as ``tf.sysconfig``.

    cc -shared -fPIC $(python -c "import opkernel.sysconfig as s; print(*s.get_compile_flags())") \\
        zero_out.c -o zero_out.so

An op library built so needs no link flags: everything it calls in opkernel reaches it
through the ``OK_Api`` table (``opkernel/c_api.h``, docs/c-kernels.md).
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["C_ABI_VERSION", "get_include", "get_compile_flags", "get_link_flags"]

#: The ``OPKERNEL_C_ABI_VERSION`` of ``opkernel/c_api.h``: a library built with another is refused.
C_ABI_VERSION = 1


def get_include() -> str:
    """The directory to put on the include path: ``#include <opkernel/c_api.h>``."""
    return str(Path(__file__).resolve().parent / "include")


def get_compile_flags() -> list[str]:
    """The flags a C or C++ compiler needs for an op library (the include directory,
    and hidden visibility, so that only the entry points ``OPKERNEL_LIBRARY`` marks are
    exported)."""
    return [f"-I{get_include()}", "-fvisibility=hidden"]


def get_link_flags() -> list[str]:
    """Nothing: an op library links against no opkernel library."""
    return []
