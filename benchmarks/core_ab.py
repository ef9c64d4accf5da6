"""One core change measured on dispatch and the training steps: this checkout's core
against another commit's, in alternating child processes, with the same plugins.

    python benchmarks/core_ab.py BASE_COMMIT [--rounds 6] [--backend cpu]

BASE_COMMIT's core package (``core/opkernel/``, or ``core/`` before the package became a
folder of its own) is checked out into a temporary worktree and put first on
``PYTHONPATH`` under the name ``opkernel`` (ahead of the editable install's path), so
the base child imports the old core and the other child this checkout's; the plugins and
everything else are the same installed ones.  Each round runs both children once, in
alternating order; each child times one call of the dispatch path (``add`` of two
1-element tensors, the same under a recording tape, ``add`` with a Python literal,
which takes the general path and its literal cache, and a 4×4 ``mat_mul``), then the
eager and the traced step of the MLP 784-256-10 (batch 64) and of the 8-8-3 MLP
(batch 8), as medians of blocks of calls (benchmarks/harness.py), and also numpy's
hand-written step, as the run's yardstick.  The table gives the medians over rounds
and the ratio new/base.
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
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CHILD = r"""
import json, sys
sys.path.insert(0, {bench!r})
import opkernel as ok
from harness import Timed, interleaved, per_call
from models import MLP, TINY_MLP, BATCH, TINY_BATCH, mlp_step_numpy, mlp_step_opkernel
import numpy as np, os
out = {{"core": os.path.realpath(ok.__file__)}}
with ok.use_backend({backend!r}):
    a = ok.tensor(np.ones(1, np.float32))
    m = ok.tensor(np.ones((4, 4), np.float32))
    add, mat_mul = ok.ops.add, ok.ops.mat_mul

    def taped():  # a tape records 100 calls, then is dropped
        with ok.GradientTape() as tape:
            tape.watch(a)
            for _ in range(100):
                add(a, a)

    out["dispatch"] = {{
        "add 1 elem": per_call(lambda: add(a, a)),
        "add 1 elem, recording tape": per_call(taped) / 100,
        "add 1 elem and a literal": per_call(lambda: add(a, 2.0)),
        "mat_mul 4x4": per_call(lambda: mat_mul(m, m)),
    }}
for sizes, batch in ((MLP, BATCH), (TINY_MLP, TINY_BATCH)):
    name = "-".join(map(str, sizes))
    with ok.use_backend({backend!r}):
        eager = mlp_step_opkernel(sizes, batch)
        traced = ok.function(eager)
        traced()
        t_eager, t_traced, t_np = interleaved([Timed(eager), Timed(traced), Timed(mlp_step_numpy(sizes, batch))], repeats=7)
    out[name] = {{"eager": t_eager, "traced": t_traced, "numpy": t_np}}
print(json.dumps(out))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("base", help="the commit whose core is the baseline")
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--backend", default="cpu")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="opkernel-core-ab-"))
    try:
        tree = tmp / "tree"
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(tree), args.base],
                       check=True, capture_output=True)
        shim = tmp / "shim"
        shim.mkdir()
        base_package = tree / "core" / "opkernel" if (tree / "core" / "opkernel" / "__init__.py").exists() else tree / "core"
        (shim / "opkernel").symlink_to(base_package)
        code = CHILD.format(bench=str(ROOT / "benchmarks"), backend=args.backend)
        runs: dict[str, list[dict[str, dict[str, float]]]] = {"base": [], "new": []}
        for r in range(args.rounds):
            for which in (("base", "new") if r % 2 == 0 else ("new", "base")):
                env = dict(os.environ)
                if which == "base":
                    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(shim), env.get("PYTHONPATH", "")]))
                done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
                result = json.loads(done.stdout.strip().splitlines()[-1])
                expected = os.path.realpath(base_package if which == "base" else ROOT / "core" / "opkernel")
                assert result.pop("core").startswith(expected), (which, expected)
                runs[which].append(result)
        print(f"# core at {args.base} (base) vs this checkout (new), backend {args.backend}, {args.rounds} rounds (medians)")
        print(f"{'case':<34} {'base':>10} {'new':>10} {'new/base':>9}   numpy step (base run, new run)")
        for case in runs["new"][0]["dispatch"]:
            b = statistics.median(x["dispatch"][case] for x in runs["base"])
            n = statistics.median(x["dispatch"][case] for x in runs["new"])
            print(f"dispatch: {case:<24} {b * 1e6:9.2f}us {n * 1e6:9.2f}us {n / b:9.3f}")
        for model in runs["new"][0]:
            if model == "dispatch":
                continue
            for kind in ("eager", "traced"):
                b = statistics.median(x[model][kind] for x in runs["base"])
                n = statistics.median(x[model][kind] for x in runs["new"])
                nb = statistics.median(x[model]["numpy"] for x in runs["base"])
                nn = statistics.median(x[model]["numpy"] for x in runs["new"])
                print(f"MLP {model} {kind:<8} step {b * 1e6:9.1f}us {n * 1e6:9.1f}us {n / b:9.3f}   "
                      f"{nb * 1e6:.1f}us, {nn * 1e6:.1f}us")
    finally:
        subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tmp / "tree")], capture_output=True)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
