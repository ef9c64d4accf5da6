"""What proving the devices costs a fresh process: a cold and a warm probe cache.

    python benchmarks/probe_cost.py [--reps 5]

Each run is a whole process that imports opkernel and asks ``ok.available_backends()``
(discovery, the ICD directory, pyopencl's platforms, the device probes), timed inside
the child from before ``import opkernel`` to the answer, then asks again (every verdict
known: the cost of a repeat).  Per repetition: one run with an empty probe cache (cold:
the probes run, in rank order until a device passes), then one with the cache it left
(warm: verdicts read from disk).  The program cache is off in both, so only the probes
differ.  Also prints each device's own probe time from a cold run.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

CHILD = """
import json, time
t0 = time.perf_counter()
import opkernel as ok
from opkernel import probes
names = ok.available_backends()
t1 = time.perf_counter()
ok.available_backends()
t2 = time.perf_counter()
from opkernel_opencl.backend import OpenCLBackend
devices = [(d.id, d.name, d.platform, d.reason is None, d.cached, d.seconds) for d in OpenCLBackend.devices()]
print(json.dumps({"first": t1 - t0, "repeat": t2 - t1, "stats": probes.stats(), "backends": names, "devices": devices}))
"""


def run(cache: str) -> dict[str, object]:
    env = {**os.environ, "OPKERNEL_PROBE_CACHE_DIR": cache, "OPKERNEL_OPENCL_CACHE_DIR": "off", "OPKERNEL_PLUGINS": "cpu,opencl"}
    done = subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True, text=True, timeout=300, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=5)
    args = parser.parse_args()
    cold: list[float] = []
    warm: list[float] = []
    repeat: list[float] = []
    devices: list[object] = []
    for _ in range(args.reps):
        where = tempfile.mkdtemp(prefix="opkernel-probe-bench-")
        try:
            first = run(os.path.join(where, "probes"))
            second = run(os.path.join(where, "probes"))
        finally:
            shutil.rmtree(where, ignore_errors=True)
        assert second["stats"]["probes"] == 0, second  # type: ignore[index]
        cold.append(float(first["first"]))  # type: ignore[arg-type]
        warm.append(float(second["first"]))  # type: ignore[arg-type]
        repeat.append(float(second["repeat"]))  # type: ignore[arg-type]
        devices = first["devices"]  # type: ignore[assignment]
    print(f"# opkernel device probes, {args.reps} repetitions (medians); backends: {first['backends']}")
    print(f"cold (probes run):        import + available_backends() {statistics.median(cold) * 1e3:7.0f} ms")
    print(f"warm (verdicts on disk):  import + available_backends() {statistics.median(warm) * 1e3:7.0f} ms")
    print(f"probe cost at a cold start: {(statistics.median(cold) - statistics.median(warm)) * 1e3:.0f} ms")
    print(f"available_backends() again in the same process: {statistics.median(repeat) * 1e6:.1f} us")
    print("devices (a cold run's own probe times):")
    for dev_id, name, platform, works, _cached, seconds in devices:  # type: ignore[misc]
        print(f"  {dev_id}  {name} ({platform}): {'passed' if works else 'failed'} in {seconds * 1e3:.0f} ms")


if __name__ == "__main__":
    main()
