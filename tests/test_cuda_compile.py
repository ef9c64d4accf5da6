"""Every raw CUDA source of opkernel-cuda compiles with NVRTC, for sm_80 and sm_90,
with every template instantiation the plugin launches; no GPU needed.

NVRTC compiles to a cubin (``-arch=sm_XX`` runs ptxas too), so a syntax error,
a type error in one dtype's instantiation or a register/resource error fails
here.  The options are the plugin's own (``sources.OPTIONS``) plus the include
directory of the CUDA headers (cuda_fp16.h), which cupy adds at run time.

Needs cupy and the NVRTC library: ``pip install cupy-cuda12x
nvidia-cuda-nvrtc-cu12 nvidia-cuda-runtime-cu12`` (or ``cupy-cuda12x[ctk]``).
When opkernel-cuda is installed (or ``OPKERNEL_REQUIRE_NVRTC=1``), a missing
compiler is a failure, not a skip.
"""

from __future__ import annotations

import importlib.metadata
import os
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
ARCHS = ("80", "90")


INSTALLED = any(ep.value == "opkernel_cuda" for ep in importlib.metadata.entry_points(group="opkernel"))
REQUIRED = INSTALLED or os.environ.get("OPKERNEL_REQUIRE_NVRTC") == "1"

if not INSTALLED:  # the sources are plain data: import them from the checkout
    sys.path.insert(0, str(ROOT / "plugins" / "cuda"))
try:
    from opkernel_cuda.sources import OPTIONS, SOURCES, Source
finally:
    if not INSTALLED:
        sys.path.remove(str(ROOT / "plugins" / "cuda"))


def _nvrtc() -> tuple[Any, list[str]]:
    """cupy's NVRTC binding and the -I options for the CUDA headers; fails or skips without them."""
    try:
        from cupy_backends.cuda.libs import nvrtc

        nvrtc.getVersion()
        from cuda.pathfinder import find_nvidia_header_directory

        headers = find_nvidia_header_directory("cudart")
    except Exception as e:  # ImportError, or the library or headers not found
        why = (
            f"NVRTC is not usable ({type(e).__name__}: {e}); "
            "pip install cupy-cuda12x nvidia-cuda-nvrtc-cu12 nvidia-cuda-runtime-cu12"
        )
        (pytest.fail if REQUIRED else pytest.skip)(why)
    if headers is None:
        (pytest.fail if REQUIRED else pytest.skip)("the CUDA headers (cuda_fp16.h) were not found: pip install nvidia-cuda-runtime-cu12")
    return nvrtc, [f"-I{headers}"]


def _compile(src: Source, arch: str) -> tuple[bytes, dict[str, str]]:
    nvrtc, includes = _nvrtc()
    program = nvrtc.createProgram(src.code, f"{src.name}.cu", (), ())
    try:
        names = src.name_expressions()
        for name in names:
            nvrtc.addNameExpression(program, name)
        try:
            nvrtc.compileProgram(program, (*OPTIONS, f"-arch=sm_{arch}", *includes))
        except nvrtc.NVRTCError:
            pytest.fail(f"{src.name}.cu for sm_{arch}:\n{nvrtc.getProgramLog(program)}")
        lowered = {name: nvrtc.getLoweredName(program, name) for name in names}
        return nvrtc.getCUBIN(program), lowered
    finally:
        nvrtc.destroyProgram(program)


@pytest.mark.parametrize("arch", ARCHS, ids=lambda a: f"sm_{a}")
@pytest.mark.parametrize("src", SOURCES, ids=lambda s: s.name)
def test_source_compiles(src: Source, arch: str) -> None:
    cubin, lowered = _compile(src, arch)
    assert cubin, f"{src.name}: NVRTC produced no code"
    assert len(lowered) == len(src.kernels) * len(src.instantiations)
    for name, mangled in lowered.items():
        assert mangled, f"{src.name}: {name} was not instantiated"


def test_every_instantiation_is_listed_once() -> None:
    seen: set[tuple[str, str]] = set()
    for src in SOURCES:
        for name in src.name_expressions():
            assert (src.name, name) not in seen
            seen.add((src.name, name))
    assert len(seen) >= 30
