"""Start-up cost: what ``import opkernel`` and plugin discovery import, and that the
shortcuts they take give the same answers as the long way.

``import opkernel`` leaves the rarely used parts (nn, ops, the profiler, op
libraries, compat, the spec grammar), pluggy and ml_dtypes for their first use;
discovery reads entry points without ``importlib.metadata`` when it can.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import opkernel as ok
from opkernel import _entrypoints, engine, plugins, spec
from opkernel.errors import OpSpecError

#: Imported at first use, never by ``import opkernel``.
LAZY_MODULES = (
    "opkernel.nn", "opkernel.ops", "opkernel.profiler", "opkernel.library", "opkernel.compat", "opkernel.cli",
    "opkernel.spec", "opkernel.shape_fns", "opkernel.hookspecs", "pluggy", "ml_dtypes", "importlib.metadata",
    "difflib",
)


def run_python(code: str, **env: str) -> Any:
    """Run ``code`` in a fresh interpreter (warnings as errors); its last stdout line, as JSON."""
    full_env = {k: v for k, v in os.environ.items() if not k.startswith(("OPKERNEL_", "PYTHONWARNINGS"))}
    full_env.update(env)
    out = subprocess.run(
        [sys.executable, "-W", "error", "-c", textwrap.dedent(code)],
        capture_output=True, text=True, env=full_env, timeout=120, check=False,
    )
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


# ------------------------------------------------------------------ import opkernel


def test_import_opkernel_leaves_the_rarely_used_parts_unimported() -> None:
    imported = run_python(f"""
        import json, sys
        import opkernel
        print(json.dumps([m for m in {LAZY_MODULES!r} if m in sys.modules]))
    """)
    assert imported == []


def test_lazy_attributes_import_on_first_use() -> None:
    result = run_python("""
        import json, sys
        import opkernel as ok
        seen = {
            "nn": ok.nn.Dense.__name__, "profile": ok.profile.__module__, "explain": ok.explain.__module__,
            "load_op_library": ok.load_op_library.__module__, "compat": ok.compat.__name__,
            "hookimpl": type(ok.hookimpl).__name__, "api": ok.PLUGIN_API_VERSION,
            "shape_fns": ok.shape_fns.unchanged_shape.__name__, "ops": ok.ops.__name__,
            "engine": ok.engine.__name__, "library": ok.library.__name__, "cli": ok.cli.__name__,
        }
        print(json.dumps(seen))
    """)
    assert result == {
        "nn": "Dense", "profile": "opkernel.profiler", "explain": "opkernel.profiler",
        "load_op_library": "opkernel.library", "compat": "opkernel.compat", "hookimpl": "HookimplMarker",
        "api": 1, "shape_fns": "unchanged_shape", "ops": "opkernel.ops", "engine": "opkernel.engine",
        "library": "opkernel.library", "cli": "opkernel.cli",
    }


def test_star_import_and_dir_give_every_public_name() -> None:
    names = run_python("""
        import json
        import opkernel
        namespace = {}
        exec("from opkernel import *", namespace)
        print(json.dumps({"star": sorted(n for n in namespace if n != "__builtins__"), "dir": dir(opkernel),
                          "all": sorted(opkernel.__all__)}))
    """)
    assert names["star"] == names["all"]
    assert set(names["all"]) <= set(names["dir"])


def test_public_names_are_the_objects_they_name() -> None:
    from opkernel import library, nn, profiler

    assert ok.tensor is engine.to_tensor and ok.execute is engine.execute_by_name
    assert ok.nn is nn and ok.profile is profiler.profile and ok.explain is profiler.explain
    assert ok.load_op_library is library.load_op_library
    with pytest.raises(AttributeError, match="no attribute 'no_such_thing'"):
        ok.no_such_thing  # noqa: B018


def test_first_op_on_cpu_touches_no_other_backend() -> None:
    imported = run_python("""
        import json, sys
        import opkernel as ok
        ok.set_backend("cpu")
        assert ok.ops.add(ok.tensor([1.0]), ok.tensor([1.0])).numpy().tolist() == [2.0]
        print(json.dumps([m for m in ("pyopencl", "cupy", "ml_dtypes") if m in sys.modules]))
    """)
    assert imported == []


# ------------------------------------------------------------------ bfloat16


def test_bfloat16_fills_in_its_numpy_type_at_first_use() -> None:
    result = run_python("""
        import json, sys
        import numpy as np
        import opkernel as ok
        before = "ml_dtypes" in sys.modules
        import ml_dtypes
        found = [ok.as_dtype(np.dtype(ml_dtypes.bfloat16)) is ok.bfloat16,
                 ok.as_dtype(ml_dtypes.bfloat16) is ok.bfloat16]
        print(json.dumps({"before": before, "found": found, "np": str(ok.bfloat16.np),
                          "scalar": ok.bfloat16.as_numpy_dtype is ml_dtypes.bfloat16}))
    """)
    assert result == {"before": False, "found": [True, True], "np": "bfloat16", "scalar": True}


def test_bfloat16_behaves_as_every_other_dtype() -> None:
    import ml_dtypes

    assert ok.bfloat16.np == np.dtype(ml_dtypes.bfloat16) and ok.bfloat16.size == 2
    assert ok.as_dtype("bfloat16") is ok.bfloat16 and ok.as_dtype(ok.bfloat16.np) is ok.bfloat16
    assert ok.bfloat16.max == float(ml_dtypes.finfo(ml_dtypes.bfloat16).max)
    with pytest.raises(AttributeError):
        ok.bfloat16.no_such_field  # noqa: B018
    with pytest.raises(ok.errors.OpTypeError):
        ok.as_dtype(np.dtype([("a", np.int32)]))  # another void dtype is still no dtype of ours


# ------------------------------------------------------------------ the spec cache


def test_a_spec_is_parsed_once_and_errors_still_name_their_op() -> None:
    text = "Tstartup: {float, double} = DT_FLOAT"
    assert spec.parse_attr_spec(text) is spec.parse_attr_spec(text, op="Other")
    assert spec.parse_arg_spec("x: Tstartup") is spec.parse_arg_spec("x: Tstartup", op="Other")
    assert spec.parse_arg_spec("x: Tstartup", kind="output") is not spec.parse_arg_spec("x: Tstartup")
    for op in ("FirstOp", "SecondOp"):
        with pytest.raises(OpSpecError, match=f"op '{op}'"):
            spec.parse_attr_spec("T: {float, nosuchtype}", op=op)


# ------------------------------------------------------------------ entry points


def _described(eps: Any) -> list[tuple[Any, ...]]:
    return [(e.name, e.value, e.group, e.dist.name if e.dist else None, e.dist.version if e.dist else None)
            for e in eps]


@pytest.mark.parametrize("group", ["opkernel", "console_scripts", "pytest11", "no.such.group"])
def test_entry_point_scan_finds_what_importlib_metadata_finds(group: str) -> None:
    found = _entrypoints.scan(group)
    assert found is not None
    assert _described(found) == _described(importlib.metadata.entry_points(group=group))


def test_entry_point_scan_follows_importlib_metadata_on_a_made_up_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def dist(folder: Path, dirname: str, name: str, version: str, entry_points: str | None) -> None:
        info = folder / dirname
        info.mkdir(parents=True)
        (info / ("PKG-INFO" if dirname.endswith(".egg-info") else "METADATA")).write_text(
            f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\nSummary: x\n\nName: not a header\n"
        )
        if entry_points is not None:
            (info / "entry_points.txt").write_text(entry_points)

    first, second = tmp_path / "first", tmp_path / "second"
    dist(first, "alpha_pkg-1.0.dist-info", "Alpha.Pkg", "1.0",
         "[demo.group]\nzeta = alpha.z:obj\n# a comment\n a = alpha\n\n[other]\nx = y\n")
    dist(first, "beta-2.0.egg-info", "beta", "2.0", "[demo.group]\nb = beta.mod:attr.sub [extra]\n")
    dist(first, "gamma-0.1.dist-info", "gamma", "0.1", None)
    (first / "delta-1.0.egg-info").write_text("Name: delta\n")  # a metadata file, not a directory
    dist(second, "Alpha.Pkg-9.0.dist-info", "alpha-pkg", "9.0", "[demo.group]\nshadowed = alpha\n")
    dist(second, "epsilon-3.dist-info", "epsilon", "3", "[demo.group]\ne = epsilon\n")
    monkeypatch.setattr(sys, "path", [str(first), str(tmp_path / "missing"), str(second)])

    found = _entrypoints.scan("demo.group")
    assert found is not None
    assert _described(found) == _described(importlib.metadata.entry_points(group="demo.group"))
    by_name = {e.name: e for e in found}
    assert sorted(by_name) == ["a", "b", "e", "zeta"]  # the second Alpha.Pkg is shadowed by the first
    assert (by_name["a"].module, by_name["a"].attr) == ("alpha", None)
    assert (by_name["b"].module, by_name["b"].attr, by_name["b"].dist.version) == ("beta.mod", "attr.sub", "2.0")


def test_entry_point_scan_loads_what_it_names() -> None:
    found = {e.name: e for e in _entrypoints.scan("opkernel") or []}
    if "cpu" not in found:
        pytest.skip("opkernel-cpu is not installed")
    import opkernel_cpu

    assert found["cpu"].load() is opkernel_cpu
    assert found["cpu"].dist.name == "opkernel-cpu"


def test_entry_point_scan_hands_over_to_importlib_metadata_when_unsure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    archive = tmp_path / "bundle.zip"
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr("zipped-1.0.dist-info/METADATA", "Name: zipped\nVersion: 1.0\n")
        z.writestr("zipped-1.0.dist-info/entry_points.txt", "[opkernel.test]\nzipped = zipped_mod\n")
    monkeypatch.setattr(sys, "path", [*sys.path, str(archive)])
    assert _entrypoints.scan("opkernel.test") is None
    assert [e.name for e in plugins.entry_points(group="opkernel.test")] == ["zipped"]  # importlib.metadata's answer

    class Finder:
        @staticmethod
        def find_distributions(context: Any = None) -> list[Any]:
            return []

    monkeypatch.setattr(sys, "path", [p for p in sys.path if p != str(archive)])
    monkeypatch.setattr(sys, "meta_path", [*sys.meta_path, Finder])
    assert _entrypoints.scan("opkernel") is None
    assert sorted(e.name for e in plugins.entry_points(group="opkernel")) == sorted(
        e.name for e in importlib.metadata.entry_points(group="opkernel")
    )
