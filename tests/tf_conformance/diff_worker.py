"""A worker of the differential test: runs cases in a process of its own.

    python diff_worker.py tf              TensorFlow's reference CPU kernels (record.py's way)
    python diff_worker.py ok BACKEND      opkernel on BACKEND (cpu, opencl, cuda...)

The driver (differential.py) writes frames to the worker's stdin and reads its
answers from its stdout: a frame is an 8-byte little-endian length and a pickle.
A request is a list of cases (case.Case); the answer is a list of entries in
record.py's form (``{"op", "outputs": [{"dtype", "shape", "value"}], "grads": [...]}``,
``{"op", "error": {"class", "message"}}``, ``"grad_error"``), one per case, with the
arrays in place.  A worker that crashes or hangs takes only itself down: the driver
restarts it and names the case.  TensorFlow and opkernel never share a process
(both may carry an LLVM).

Importing this module imports neither; the driver uses its frame functions.
"""

from __future__ import annotations

import os
import pickle
import struct
import sys
from pathlib import Path
from typing import Any, BinaryIO

HERE = Path(__file__).resolve().parent

#: A case whose op is this name makes an opkernel worker abort (the driver's crash test).
CRASH_OP = "__differential_selftest_crash__"
#: A case whose op is this name makes an opkernel worker sleep forever (the hang test).
HANG_OP = "__differential_selftest_hang__"


def write_frame(stream: BinaryIO, obj: Any) -> None:
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(struct.pack("<Q", len(data)) + data)
    stream.flush()


def read_exactly(stream: BinaryIO, n: int) -> bytes:
    chunks = []
    while n:
        chunk = stream.read(n)
        if not chunk:
            raise EOFError("the other side closed the pipe")
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


def read_frame(stream: BinaryIO) -> Any:
    (n,) = struct.unpack("<Q", read_exactly(stream, 8))
    return pickle.loads(read_exactly(stream, n))


def _with_values(entry: dict[str, Any], arrays: dict[str, tuple[Any, str]], case_id: str) -> dict[str, Any]:
    for kind, key in (("outputs", "o"), ("grads", "g")):
        for j, spec in enumerate(entry.get(kind) or []):
            spec["value"] = arrays[f"{case_id}#{key}{j}"][0]
    return entry


def tf_runner() -> Any:
    os.environ["TF_ENABLE_ONEDNN_OPTS"] = "0"
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    os.environ["CUDA_VISIBLE_DEVICES"] = ""
    import record

    tf = record._tf()

    def run(case: Any) -> dict[str, Any]:
        arrays: dict[str, tuple[Any, str]] = {}
        try:
            entry = record.record_case(tf, case, arrays)
        except Exception as e:  # noqa: BLE001 - reported as the recorder's failure
            return {"op": case.op, "error": {"class": "RecorderError", "message": repr(e)}}
        return _with_values(entry, arrays, case.id)

    return run


def _flat(value: Any) -> list[Any]:
    if isinstance(value, (list, tuple)):
        return [x for v in value for x in _flat(v)]
    return [value]


def ok_runner(backend: str) -> Any:
    import numpy as np

    import opkernel as ok
    import recording
    from opkernel import errors
    from opkernel.ops._gen import API_NAMES

    ok.set_backend(backend)

    def attrs_of(case: Any) -> dict[str, Any]:
        opdef_name = {py: name for name, py in API_NAMES.get(case.op, {}).items()}
        return {opdef_name.get(k, k): ok.as_dtype(v) if isinstance(v, str) and v in recording.DTYPES else v
                for k, v in case.attrs.items()}

    def error(e: BaseException) -> dict[str, Any]:
        opkernel_error = isinstance(e, errors.OpkernelError)
        return {"class": type(e).__name__, "message": str(e)[:2000], "opkernel": opkernel_error,
                "missing_kernel": isinstance(e, errors.KernelNotFoundError),
                "internal": isinstance(e, errors.InternalError)}

    def numpy_of(t: Any) -> Any:
        a = np.asarray(t.numpy())
        return a.astype(np.bytes_) if t.dtype.name == "string" and a.size else a

    def spec(t: Any) -> dict[str, Any]:
        a = numpy_of(t)
        return {"dtype": t.dtype.name, "shape": list(a.shape), "value": a}

    def run(case: Any) -> dict[str, Any]:
        if case.op == CRASH_OP:
            os.abort()
        if case.op == HANG_OP:
            import time
            time.sleep(10**6)
        entry: dict[str, Any] = {"op": case.op}
        attrs = attrs_of(case)
        refs = [a.is_ref for a in ok.op_def(case.op).inputs]
        try:
            if any(refs):
                args = [ok.Variable(v) if r else v for v, r in zip(case.inputs, refs)]
                ok.execute(case.op, *args, **attrs)
                entry["outputs"] = [spec(a) for a, r in zip(args, refs) if r]
                return entry
            flat = [ok.tensor(x) for v in case.inputs for x in (v if isinstance(v, list) else [v])]
            it = iter(flat)
            args = [[next(it) for _ in v] if isinstance(v, list) else next(it) for v in case.inputs]
            sources = [t for t in flat if t.dtype.name in recording.DIFFERENTIABLE] if case.grad else []
            with ok.GradientTape() as tape:
                tape.watch(sources)
                outs = _flat(ok.execute(case.op, *args, **attrs))
            entry["outputs"] = [spec(o) for o in outs]
        except Exception as e:  # noqa: BLE001 - the answer compared with TensorFlow's
            entry.pop("outputs", None)
            entry["error"] = error(e)
            return entry
        if case.grad:
            ups = recording.upstream(case.seed, [(tuple(s["shape"]), s["dtype"]) for s in entry["outputs"]])
            targets = [(o, u) for o, u in zip(outs, ups) if u is not None]
            try:
                if not sources or not targets:
                    raise errors.InvalidArgumentError("no differentiable input or output")
                grads = tape.gradient([o for o, _ in targets], sources, output_gradients=[u for _, u in targets],
                                      unconnected_gradients="zero")
                entry["grads"] = [spec(g) for g in grads]
            except Exception as e:  # noqa: BLE001
                entry["grad_error"] = error(e)
        return entry

    return run


def main(argv: list[str]) -> int:
    sys.path.insert(0, str(HERE))
    # The frames get file descriptor 1 to themselves: whatever a library prints, from
    # Python or C, goes to stderr.
    stdout = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    stdin = sys.stdin.buffer
    run = tf_runner() if argv[0] == "tf" else ok_runner(argv[1])
    write_frame(stdout, "ready")
    while True:
        try:
            batch = read_frame(stdin)
        except EOFError:
            return 0
        write_frame(stdout, [run(case) for case in batch])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
