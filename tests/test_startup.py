"""Start-up cost: what ``import opkernel`` and plugin discovery import, and that the
lazy parts behave as if they had been imported up front.

``import opkernel`` leaves the rarely used parts (nn, ops, the profiler, op
libraries, compat, the spec grammar), pluggy, ml_dtypes and importlib.metadata
(which discovery uses) for their first use.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from typing import Any

import numpy as np
import pytest

import opkernel as ok
from opkernel import engine, plugins, spec
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


def test_import_opkernel_shortens_openblas_idle_spin_only_where_nothing_chose() -> None:
    """OPENBLAS_THREAD_TIMEOUT (opkernel._blas_env): set to 18 by an import of opkernel that
    comes before numpy's; a value already set, or numpy imported first, is left as it is."""
    code = """
        import json, os{first}
        import opkernel
        print(json.dumps(os.environ.get("OPENBLAS_THREAD_TIMEOUT")))
    """
    clean = {k: v for k, v in os.environ.items() if k != "OPENBLAS_THREAD_TIMEOUT"}
    saved = os.environ.copy()
    try:
        os.environ.clear()
        os.environ.update(clean)
        assert run_python(code.format(first="")) == "18"
        assert run_python(code.format(first="\n        import numpy")) is None
        assert run_python(code.format(first=""), OPENBLAS_THREAD_TIMEOUT="28") == "28"
    finally:
        os.environ.clear()
        os.environ.update(saved)


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

