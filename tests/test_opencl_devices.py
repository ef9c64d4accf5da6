"""Which OpenCL device is used: every platform's devices, each proven by a probe; the
default falls back when a probe fails, and ``opkernel info`` says why; Intel's CPU
runtime from pip is made visible to pyopencl's ICD loader (docs/opencl.md, "Which device")."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest
from isolated import run_isolated

ocl = pytest.importorskip("opkernel_opencl", reason="opkernel-opencl is not installed")

from opkernel_opencl import devices, icd  # noqa: E402
from opkernel_opencl.backend import OpenCLBackend  # noqa: E402

POCL_VERSION = "OpenCL 3.0 PoCL 3.0-rc2  Linux, Release, RELOC, LLVM 14.0.6, SLEEF, DISTRO, POCL_DEBUG"
ZEN5_LOG = "clBuildProgram failed: BUILD_PROGRAM_FAILURE\nerror: unknown target CPU 'generic'\nnote: valid target CPU values are: ..."


class _Named:
    def __init__(self, name: str, version: str = "", type_: int = 2) -> None:
        self.name, self.version, self.type = name, version, type_


def _fake(pi: int, platform: str, device: str, type_: int = 2, version: str = "") -> devices.Candidate:
    return devices.Candidate(pi, 0, _Named(platform, version), _Named(device, type_=type_))


class _FakeCL:
    class device_type:  # noqa: N801 - pyopencl's name
        CPU, GPU, ACCELERATOR = 2, 4, 8


def _statuses() -> list[Any]:
    return OpenCLBackend.devices()


def _working(platform: str) -> bool:
    return any(d.works and d.platform == platform for d in _statuses())


INTEL_PLATFORM = "Intel(R) OpenCL"


# ---------------------------------------------------------------- reasons and ranking


def test_pocl_that_cannot_target_the_cpu_says_so_and_names_the_remedy(monkeypatch: pytest.MonkeyPatch) -> None:
    c = _fake(0, devices.POCL_PLATFORM, "pthread-AMD EPYC 9R45", version=POCL_VERSION)
    monkeypatch.setattr(icd, "installed_runtimes", lambda: [])
    reason = devices.explain_build_failure(c, ZEN5_LOG)
    assert reason == (
        "PoCL 3.0-rc2 (LLVM 14.0.6) cannot compile for this CPU (unknown target CPU 'generic'); "
        "pip install 'opkernel-opencl[intel]' (Intel's CPU OpenCL runtime)"
    )
    monkeypatch.setattr(icd, "installed_runtimes", lambda: [icd.Runtime("x.icd", "/lib/libintelocl.so")])
    assert "pip install" not in devices.explain_build_failure(c, ZEN5_LOG)  # installed already: no remedy to offer


def test_another_drivers_build_failure_shows_its_first_error() -> None:
    c = _fake(0, "Some Vendor", "Some GPU", type_=4)
    reason = devices.explain_build_failure(c, "clBuildProgram failed\n<source>:3:1: error: half is not supported\n")
    assert reason == "the probe program failed to build: <source>:3:1: error: half is not supported"


def test_ranking_gpu_first_then_a_vendor_driver_before_pocl() -> None:
    found = [
        _fake(0, devices.POCL_PLATFORM, "pthread-cpu"),
        _fake(1, INTEL_PLATFORM, "cpu"),
        _fake(2, "NVIDIA CUDA", "H200", type_=4),
        _fake(3, "Other", "fpga", type_=8),
    ]
    ordered = sorted(found, key=lambda c: devices.rank(_FakeCL, c))
    assert [c.platform_name for c in ordered] == ["NVIDIA CUDA", "Other", INTEL_PLATFORM, devices.POCL_PLATFORM]


@pytest.mark.parametrize("spec, platform", [("pocl", devices.POCL_PLATFORM), ("POCL", devices.POCL_PLATFORM),
                                            ("intel", INTEL_PLATFORM), ("Portable", devices.POCL_PLATFORM)])
def test_the_device_variable_names_a_platform(spec: str, platform: str) -> None:
    if not _working(platform):
        pytest.skip(f"no working {platform} device here")
    import pyopencl as cl

    chosen, reason = devices._select(cl, devices.candidates(cl), spec)
    assert reason is None and chosen is not None and chosen.platform_name == platform


def test_the_device_variable_names_a_kind_or_an_index() -> None:
    import pyopencl as cl

    found = devices.candidates(cl)
    working = [d for d in _statuses() if d.works]
    if not working:
        pytest.skip("no working OpenCL device here")
    chosen, reason = devices._select(cl, found, working[0].id)
    assert reason is None and chosen is not None and chosen.id == working[0].id
    chosen, reason = devices._select(cl, found, working[0].kind)
    assert reason is None and chosen is not None and chosen.kind(cl) == working[0].kind
    if not any(c.kind(cl) == "gpu" for c in found):
        chosen, reason = devices._select(cl, found, "gpu")
        assert chosen is None and reason is not None and "no OpenCL device matches OPKERNEL_OPENCL_DEVICE='gpu'" in reason


def test_the_chosen_device_is_the_best_that_works() -> None:
    found = _statuses()
    if not any(d.works for d in found):
        pytest.skip("no working OpenCL device here")
    chosen = [d for d in found if d.chosen]
    assert len(chosen) == 1 and chosen[0].works
    kinds = ["gpu", "accelerator", "cpu", "other"]
    best = min(kinds.index(d.kind) for d in found if d.works)
    assert kinds.index(chosen[0].kind) == best


# ---------------------------------------------------------------- a device whose builds fail


def _child(code: str, tmp_path: Path, **env: str) -> dict[str, Any]:
    env = {"XDG_CACHE_HOME": str(tmp_path / "xdg"), "HOME": str(tmp_path), "OPKERNEL_PLUGINS": "cpu,opencl",
           "OPKERNEL_OPENCL_CACHE_DIR": "off", **env}
    env.pop("OPKERNEL_OPENCL_DEVICE", None)
    done = run_isolated(code, what="a device whose builds fail", env=env, timeout=240)
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


CHILD = """
import json, os, subprocess, sys
os.environ.pop("OPKERNEL_OPENCL_DEVICE", None)
import numpy as np, opkernel as ok
from opkernel.errors import BackendUnavailableError
out = {"available": ok.available_backends(), "default": ok.get_backend(),
       "add": ok.ops.add(np.ones(2, np.float32), np.ones(2, np.float32)).numpy().tolist()}
try:
    ok.set_backend("opencl")
    out["set"] = "ok"
except BackendUnavailableError as e:
    out["set"] = str(e)
info = subprocess.run([sys.executable, "-m", "opkernel", "info"], capture_output=True, text=True, env={**os.environ, "COLUMNS": "400"})
out["info"] = info.stdout
print(json.dumps(out))
"""


def _unwrapped(table: str) -> str:
    """The text of ``opkernel info``'s tables with rich's cell borders and line wraps taken
    out, so that a phrase wrapped across lines of a cell reads whole (the continuation
    lines' other cells are empty)."""
    return " ".join(table.translate(str.maketrans("│┃", "  ")).split())


def _no_platform_but_pocl(tmp_path: Path) -> str:
    only = tmp_path / "vendors"  # a directory the user chose: no system ICD, and so no Intel runtime
    only.mkdir()
    return str(only)


def test_when_every_opencl_probe_fails_the_default_falls_back_to_cpu(tmp_path: Path) -> None:
    if not _working(devices.POCL_PLATFORM):
        pytest.skip("PoCL's device does not work here, so a failing build cannot be staged on it")
    out = _child(CHILD, tmp_path, OCL_ICD_VENDORS=_no_platform_but_pocl(tmp_path), POCL_EXTRA_BUILD_FLAGS="-march=no-such-cpu")
    assert "opencl" not in out["available"] and out["default"] == "cpu" and out["add"] == [2.0, 2.0]
    assert "failed to build the probe program" in out["set"] and "PoCL" in out["set"], out["set"]
    info = _unwrapped(out["info"])
    assert "unavailable: no OpenCL device works" in info
    assert "failed" in info and "failed to build the probe" in info


def test_when_pocl_fails_intels_runtime_serves(tmp_path: Path) -> None:
    if not icd.installed_runtimes() or not _working(INTEL_PLATFORM):
        pytest.skip("Intel's CPU runtime is not installed or does not work here")
    out = _child(CHILD, tmp_path, POCL_EXTRA_BUILD_FLAGS="-march=no-such-cpu")
    assert "opencl" in out["available"] and out["set"] == "ok"
    info = _unwrapped(out["info"])
    assert "platform=Intel(R) OpenCL" in info and "failed to build the probe program" in info


def test_a_warm_start_runs_no_probe(tmp_path: Path) -> None:
    code = (
        "import json, opkernel as ok\nfrom opkernel import probes\n"
        "ok.available_backends()\nprint(json.dumps(probes.stats()))\n"
    )
    env = {"XDG_CACHE_HOME": str(tmp_path / "xdg"), "HOME": str(tmp_path), "OPKERNEL_PLUGINS": "cpu,opencl"}
    cold = json.loads(run_isolated(code, what="cold start", env=env).stdout.strip().splitlines()[-1])
    warm = json.loads(run_isolated(code, what="warm start", env=env).stdout.strip().splitlines()[-1])
    assert cold["probes"] >= 1 and warm["probes"] == 0 and warm["cache_hits"] >= 1


# ---------------------------------------------------------------- Intel's runtime from pip


@pytest.fixture
def runtime(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> icd.Runtime:
    rt = icd.Runtime("opkernel-intel-cpu.icd", str(tmp_path / "lib" / "libintelocl.so"))
    monkeypatch.setattr(icd, "installed_runtimes", lambda: [rt])
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    system = tmp_path / "system-vendors"
    system.mkdir()
    (system / "nvidia.icd").write_text("libnvidia-opencl.so.1\n")
    (system / "README").write_text("not an icd\n")
    monkeypatch.setenv("OPENCL_VENDOR_PATH", str(system))
    monkeypatch.delenv("OCL_ICD_VENDORS", raising=False)
    return rt


def test_the_runtime_is_listed_beside_the_systems_drivers(runtime: icd.Runtime) -> None:
    where = icd.expose_runtimes()
    assert where is not None and os.environ["OCL_ICD_VENDORS"] == where
    files = {p.name: p.read_text() for p in Path(where).iterdir()}
    assert files == {"opkernel-intel-cpu.icd": runtime.library + "\n", "system-nvidia.icd": "libnvidia-opencl.so.1\n"}
    assert (os.stat(where).st_mode & 0o077) == 0
    # a second start rewrites a changed file and drops one the system no longer has
    Path(where, "opkernel-intel-cpu.icd").write_text("/elsewhere/evil.so\n")
    Path(os.environ["OPENCL_VENDOR_PATH"], "nvidia.icd").unlink()
    assert icd.expose_runtimes() == where
    assert {p.name: p.read_text() for p in Path(where).iterdir()} == {"opkernel-intel-cpu.icd": runtime.library + "\n"}


def test_a_users_ocl_icd_vendors_is_never_overridden(runtime: icd.Runtime, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("OCL_ICD_VENDORS", str(tmp_path / "mine"))
    assert icd.expose_runtimes() is None
    assert os.environ["OCL_ICD_VENDORS"] == str(tmp_path / "mine")


def test_an_inherited_directory_of_ours_is_remade(runtime: icd.Runtime, monkeypatch: pytest.MonkeyPatch) -> None:
    first = icd.expose_runtimes()
    assert first is not None
    monkeypatch.setenv("OCL_ICD_VENDORS", first)  # as a child process inherits it
    assert icd.expose_runtimes() == first
    monkeypatch.setattr(icd, "installed_runtimes", lambda: [])
    assert icd.expose_runtimes() is None and "OCL_ICD_VENDORS" not in os.environ  # the loader's default again


def test_the_installed_runtime_is_found_by_its_distribution() -> None:
    found = icd.installed_runtimes()
    try:
        from importlib import metadata

        metadata.distribution("intel-opencl-rt")
    except Exception:
        assert found == []
        return
    assert len(found) == 1 and found[0].library.endswith("libintelocl.so") and os.path.isfile(found[0].library)
    assert found[0].library.startswith(os.path.realpath(sys.prefix))
