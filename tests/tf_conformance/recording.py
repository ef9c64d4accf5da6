"""The recorded reference: TensorFlow's answer to every conformance case, on disk.

Imports numpy (and ml_dtypes) only, like ``case.py``: the recorder writes with it in
TensorFlow's process and the tests read with it in opkernel's.

One pair of files per case family (``cases_math.py`` -> family ``math``)::

    values_math.json   {"tensorflow": version, "family": "math", "module_error": null or text,
                        "cases": {case id: entry}}
    values_math.npz    the arrays, keyed "<case id>#o<j>" (outputs), "<case id>#g<j>" (gradients)

An entry is ``{"op", "outputs": [{"dtype", "shape"}], "grads": [{"input", "dtype", "shape"}]}``
or ``{"op", "error": {"class", "message"}}`` when TensorFlow rejects the call; a case
whose gradient TensorFlow cannot take has ``"grad_error"`` instead of ``"grads"``.
The npz file is written without timestamps, so re-recording unchanged values gives
the same bytes (and no diff in git).
"""

from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path
from typing import Any

import ml_dtypes
import numpy as np

#: dtype names a case (or TensorFlow's output) may use, and their numpy types.
DTYPES: dict[str, Any] = {
    "bool": np.bool_, "int8": np.int8, "int16": np.int16, "int32": np.int32, "int64": np.int64,
    "uint8": np.uint8, "uint16": np.uint16, "uint32": np.uint32, "uint64": np.uint64,
    "float16": np.float16, "bfloat16": ml_dtypes.bfloat16, "float32": np.float32, "float64": np.float64,
    "complex64": np.complex64, "complex128": np.complex128, "string": np.bytes_,
}
FLOATING = frozenset({"float16", "bfloat16", "float32", "float64"})
#: The dtypes gradients are taken for (inputs) and given upstream gradients (outputs).
DIFFERENTIABLE = FLOATING | {"complex64", "complex128"}

_EPOCH = (1980, 1, 1, 0, 0, 0)


def dtype_name(a: np.ndarray) -> str:
    if a.dtype.kind in "SUO":
        return "string"
    return "bool" if a.dtype == np.bool_ else str(a.dtype.name)


def upstream(seed: int, outputs: list[tuple[tuple[int, ...], str]]) -> list[np.ndarray | None]:
    """The upstream gradient for each output (None for a non-differentiable one), from the case seed.

    Both sides build it from TensorFlow's recorded output shapes and dtypes, so the
    gradients compared are d(sum(upstream * outputs)) for the same upstream.
    """
    g = np.random.default_rng(seed + 7919)
    ups: list[np.ndarray | None] = []
    for shape, dtype in outputs:
        if dtype.startswith("complex"):
            ups.append((g.standard_normal(shape) + 1j * g.standard_normal(shape)).astype(DTYPES[dtype]))
        else:
            ups.append(g.standard_normal(shape).astype(DTYPES[dtype]) if dtype in FLOATING else None)
    return ups


def _storable(a: np.ndarray, dtype: str) -> np.ndarray:
    if dtype == "bfloat16":
        return a.astype(np.float32)          # exact; np.save cannot describe bfloat16
    if dtype == "string":
        return np.asarray(a.tolist() if a.size else [], dtype=np.bytes_).reshape(a.shape)
    return a if a.flags.c_contiguous else a.copy()       # ascontiguousarray would make 0-d arrays 1-d


def _loaded(a: np.ndarray, dtype: str) -> np.ndarray:
    if dtype == "bfloat16":
        return a.astype(ml_dtypes.bfloat16)
    return a


def write_family(out: Path, family: str, doc: dict[str, Any], arrays: dict[str, tuple[np.ndarray, str]]) -> None:
    """Write ``values_<family>.json`` and ``.npz`` (deterministically: sorted, no timestamps)."""
    out.mkdir(parents=True, exist_ok=True)
    # One line per case, so a re-recording's diff names the cases that changed.
    head = {k: v for k, v in doc.items() if k != "cases"}
    lines = [f"{json.dumps(cid)}: {json.dumps(e, sort_keys=True)}" for cid, e in sorted(doc["cases"].items())]
    text = json.dumps(head, sort_keys=True)[:-1] + ', "cases": {\n' + ",\n".join(lines) + "\n}}\n"
    (out / f"values_{family}.json").write_text(text)
    with zipfile.ZipFile(out / f"values_{family}.npz", "w", zipfile.ZIP_DEFLATED) as z:
        for key in sorted(arrays):
            a, dtype = arrays[key]
            buf = io.BytesIO()
            np.lib.format.write_array(buf, _storable(a, dtype), allow_pickle=False)
            info = zipfile.ZipInfo(key + ".npy", date_time=_EPOCH)
            info.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(info, buf.getvalue())


def read_dir(directory: Path) -> dict[str, dict[str, Any]]:
    """Every family recorded in ``directory``: family -> its JSON document, with the
    arrays put in place (``entry["outputs"][j]["value"]``, ``entry["grads"][j]["value"]``)."""
    families: dict[str, dict[str, Any]] = {}
    for index in sorted(directory.glob("values_*.json")):
        family = index.stem[len("values_"):]
        doc = json.loads(index.read_text())
        npz = index.with_suffix(".npz")
        arrays = np.load(npz, allow_pickle=False) if npz.exists() else {}
        for cid, entry in doc["cases"].items():
            for kind, key in (("outputs", "o"), ("grads", "g")):
                for j, spec in enumerate(entry.get(kind) or []):
                    spec["value"] = _loaded(arrays[f"{cid}#{key}{j}"], spec["dtype"])
        families[family] = doc
    return families
