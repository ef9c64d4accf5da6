"""TensorFlow's stateless random ops: the key and counter of a seed, the V2 ops on a
Philox key and counter (uniform, normal, truncated normal, bounded and full-range
integers), the seed-taking V1 ops and StatelessMultinomial, with the calls TensorFlow
rejects.  tests/test_random.py compares these recordings bit for bit where the numbers
are exact on a backend (docs/random.md)."""

from __future__ import annotations

import numpy as np

from case import Case, rng

DIFFERENCES: dict[str, str] = {}
EXEMPT: dict[str, str] = {}

#: Philox keys and counters (any uint64 values are valid), and seeds.
KEYS = [
    (np.array([0x0123456789ABCDEF], np.uint64), np.array([5, 0x8000000000000007], np.uint64)),
    (np.array([42], np.uint64), np.array([0xFFFFFFFFFFFFFFFE, 3], np.uint64)),  # the counter's low half carries
]
SEEDS = [np.array([1, 2], np.int64), np.array([-7, 123456789], np.int32)]
SHAPES = [np.array([3, 5], np.int32), np.array([7], np.int64), np.array([2, 0], np.int32)]
FLOATS = ["float32", "float64", "float16", "bfloat16"]


def cases() -> list[Case]:
    out: list[Case] = []
    alg = np.int32(1)
    for k, seed in enumerate(SEEDS):
        out.append(Case(f"StatelessRandomGetKeyCounter/seed{k}", "StatelessRandomGetKeyCounter", (seed,)))
    out.append(Case("StatelessRandomGetKeyCounter/bad_shape", "StatelessRandomGetKeyCounter",
                    (np.array([1, 2, 3], np.int64),)))
    for op in ("StatelessRandomUniformV2", "StatelessRandomNormalV2", "StatelessTruncatedNormalV2"):
        for k, (key, counter) in enumerate(KEYS):
            for dt in FLOATS:
                for s, shape in enumerate(SHAPES):
                    out.append(Case(f"{op}/{dt}_key{k}_shape{s}", op, (shape, key, counter, alg), {"dtype": dt}))
        key, counter = KEYS[0]
        out.append(Case(f"{op}/large", op, (np.array([257, 33], np.int32), key, counter, np.int32(3)),
                        {"dtype": "float32"}, why="auto-select (3) is Philox"))
        out.append(Case(f"{op}/threefry", op, (SHAPES[0], key, counter, np.int32(2)), {"dtype": "float32"}))
        out.append(Case(f"{op}/bad_key", op, (SHAPES[0], np.array([1, 2], np.uint64), counter, alg), {"dtype": "float32"}))
        out.append(Case(f"{op}/negative_shape", op, (np.array([3, -1], np.int32), key, counter, alg), {"dtype": "float32"}))
    op = "StatelessRandomUniformIntV2"
    for k, (key, counter) in enumerate(KEYS):
        for dt, lo, hi in (("int32", -5, 17), ("int64", -(2**40), 2**50), ("int32", -(2**31), 2**31 - 1),
                           ("int64", -(2**63), 2**63 - 1)):
            for s, shape in enumerate(SHAPES[:2]):
                out.append(Case(f"{op}/{dt}_{lo}_key{k}_shape{s}", op,
                                (shape, key, counter, alg, np.array(lo, dt), np.array(hi, dt))))
    out.append(Case(f"{op}/empty_range", op, (SHAPES[0], *KEYS[0], alg, np.int32(4), np.int32(4))))
    op = "StatelessRandomUniformFullIntV2"
    for k, (key, counter) in enumerate(KEYS):
        for dt in ("int32", "int64", "uint32", "uint64"):
            out.append(Case(f"{op}/{dt}_key{k}", op, (SHAPES[1], key, counter, alg), {"dtype": dt}))
    for op in ("StatelessRandomUniform", "StatelessRandomNormal", "StatelessTruncatedNormal"):
        for k, seed in enumerate(SEEDS):
            for dt in ("float32", "float64"):
                out.append(Case(f"{op}/{dt}_seed{k}", op, (SHAPES[0], seed), {"dtype": dt}))
        out.append(Case(f"{op}/bad_seed", op, (SHAPES[0], np.array([1, 2, 3], np.int64)), {"dtype": "float32"}))
    op = "StatelessRandomUniformInt"
    for k, seed in enumerate(SEEDS):
        out.append(Case(f"{op}/int32_seed{k}", op, (SHAPES[0], seed, np.int32(-3), np.int32(11))))
        out.append(Case(f"{op}/int64_seed{k}", op, (SHAPES[1], seed, np.int64(-(2**62)), np.int64(2**62))))
    op = "RngReadAndSkip"  # the state afterwards (TensorFlow's on a resource variable)
    out.append(Case(f"{op}/philox", op, (np.array([1234, 0, 0], np.int64), np.int32(1), np.uint64(10))))
    out.append(Case(f"{op}/carry", op, (np.array([-3, 5, 9], np.int64), np.int32(3), np.uint64(7)),
                    why="the counter's low half wraps and carries into the high half"))
    out.append(Case(f"{op}/wraps", op, (np.array([-1, -1, 9], np.int64), np.int32(1), np.uint64(2**60))))
    out.append(Case(f"{op}/threefry", op, (np.array([1, 0], np.int64), np.int32(2), np.uint64(1))))
    op = "StatelessMultinomial"
    r = rng(5)
    for dt in ("float32", "float64", "float16"):
        for k, seed in enumerate(SEEDS):
            logits = (r.standard_normal((4, 10)) * 2).astype(dt)
            logits[1, 3] = -np.inf  # never drawn
            for out_dt in ("int64", "int32"):
                out.append(Case(f"{op}/{dt}_seed{k}_{out_dt}", op, (logits, np.int32(6), seed), {"output_dtype": out_dt}))
    wide = (r.standard_normal((3, 65)) * 3).astype(np.float32)
    out.append(Case(f"{op}/65_classes", op, (wide, np.int32(33), SEEDS[0])))
    out.append(Case(f"{op}/no_samples", op, (wide, np.int32(0), SEEDS[0])))
    out.append(Case(f"{op}/vector_logits", op, (wide[0], np.int32(2), SEEDS[0])))
    out.append(Case(f"{op}/negative_samples", op, (wide, np.int32(-1), SEEDS[0])))
    return out
