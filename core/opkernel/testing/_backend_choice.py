"""Which backends a test run uses: every installed one, unless the run says otherwise.

``OPKERNEL_TEST_BACKENDS=cpu,opencl`` keeps only those; ``OPKERNEL_TEST_EXCLUDE=name``
leaves those out (PyTorch's ``PYTORCH_TESTING_DEVICE_ONLY_FOR`` / ``..._EXCEPT_FOR``).
The pytest options ``--opkernel-only`` and ``--opkernel-exclude`` set the same variables,
so child processes a test starts follow them too.  The ``backend`` fixture and
``check_op`` (when it is not given ``backends``) honour them."""

from __future__ import annotations

import os
from collections.abc import Sequence

from ..errors import InvalidArgumentError

__all__ = ["ENV_EXCLUDE", "ENV_ONLY", "chosen_backends", "left_out"]

ENV_ONLY = "OPKERNEL_TEST_BACKENDS"
ENV_EXCLUDE = "OPKERNEL_TEST_EXCLUDE"


def _names(variable: str) -> list[str] | None:
    value = os.environ.get(variable)
    if value is None or not value.strip():
        return None
    return [n.strip() for n in value.split(",") if n.strip()]


def left_out(name: str) -> str | None:
    """Why backend ``name`` is left out of this test run, or None when it is used."""
    only, exclude = _names(ENV_ONLY), _names(ENV_EXCLUDE)
    if only is not None and name not in only:
        return f"{ENV_ONLY}={','.join(only)} leaves it out"
    if exclude is not None and name in exclude:
        return f"{ENV_EXCLUDE}={','.join(exclude)} leaves it out"
    return None


def chosen_backends(names: Sequence[str]) -> list[str]:
    """``names`` (installed or available backends, in order) less those this run leaves out.

    A name in ``OPKERNEL_TEST_BACKENDS`` that is not among ``names`` is an error (a typo
    would otherwise test nothing), and so is a choice that leaves nothing."""
    only = _names(ENV_ONLY)
    if only is not None:
        unknown = [n for n in only if n not in names]
        if unknown:
            raise InvalidArgumentError(
                f"{ENV_ONLY}={','.join(only)} names {', '.join(map(repr, unknown))}, which is not among "
                f"the backends here: {', '.join(names) or 'none'}"
            )
    kept = [n for n in names if left_out(n) is None]
    if names and not kept:
        raise InvalidArgumentError(
            f"{ENV_ONLY}={os.environ.get(ENV_ONLY, '')!r} and {ENV_EXCLUDE}={os.environ.get(ENV_EXCLUDE, '')!r} "
            f"leave none of the backends here ({', '.join(names)})"
        )
    return kept
