"""Specs, shape functions and the shared arithmetic of TensorFlow's stateless random
ops: StatelessRandomGetKeyCounter, StatelessRandomUniformV2, StatelessRandomNormalV2,
StatelessTruncatedNormalV2, StatelessRandomUniformIntV2, StatelessRandomUniformFullIntV2,
the seed-taking StatelessRandomUniform, StatelessRandomNormal, StatelessTruncatedNormal
and StatelessRandomUniformInt, and StatelessMultinomial.

Every one is a pure function of its inputs (a seed, or a Philox key and counter), so
they trace, fold and save like any op, and their numbers are TensorFlow's: the Philox
4x32-10 generator, TensorFlow's scrambling of a seed into a key and a counter
(``key_counter``), and its distributions (``random_distributions.h``): element ``i`` of
a uniform float32 output is the low 23 bits of word ``i % 4`` of the generator's output
at ``counter + i // 4``, scaled to [0, 1); the other distributions group the words as
TensorFlow does (``GROUP``, ``WORDS_PER_SAMPLE``).  docs/random.md says which results
are bit-identical to TensorFlow's on which backend.

RngReadAndSkip reads and advances a generator's state (``ok.random.Generator``); its
state is a Ref(int64) Variable here, where TensorFlow's is a resource variable.

No op here has a gradient (TensorFlow's are NotDifferentiable too).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import InvalidArgumentError
from ..gradients import not_differentiable
from ..op_registry import register_op
from ..shapes import InferenceContext, output_size_from

__all__ = [
    "ALG_PHILOX", "ALG_AUTO_SELECT", "GROUP", "RANDOM_OPS", "check_alg", "check_delta", "check_key_counter", "check_multinomial",
    "check_range", "check_shape", "fill_kernels", "key_counter", "key_counter_outputs", "philox_at", "philox_words", "register_generic_kernels",
    "register_gradients", "register_ops", "seed_words", "skipped_state",
]

#: TensorFlow's algorithm ids (``Algorithm`` in stateless_random_ops.py): Philox, ThreeFry
#: (XLA only in TensorFlow; not here) and auto-select (Philox on every backend here, as in
#: TensorFlow's CPU and GPU kernels).
ALG_PHILOX, ALG_THREEFRY, ALG_AUTO_SELECT = 1, 2, 3

#: Philox 4x32-10's constants.
PHILOX_M0, PHILOX_M1 = 0xD2511F53, 0xCD9E8D57
PHILOX_W0, PHILOX_W1 = 0x9E3779B9, 0xBB67AE85
#: The key TensorFlow scrambles a seed with (GenerateKey in stateless_random_ops.cc).
SEED_KEY = (0x3EC8F720, 0x02461E29)

#: Outputs per Philox call (a *group*), by distribution and dtype, as TensorFlow's
#: kResultElementCount: 4 for 32-bit and 16-bit results, 2 for 64-bit ones.
GROUP = {"float16": 4, "bfloat16": 4, "float32": 4, "float64": 2, "int32": 4, "uint32": 4, "int64": 2, "uint64": 2}
#: The Philox calls a group of a truncated normal may use (TensorFlow reserves 256
#: samples per output, kReservedSamplesPerOutput): group g starts at counter + g * this.
TRUNCATED_CALLS_PER_GROUP = {"float16": 256, "bfloat16": 256, "float32": 256, "float64": 128}

_FLOATS = "{half, bfloat16, float, double}"
_INTS = "{int32, int64, uint32, uint64}"


# ---------------------------------------------------------------- the generator, on the host


def philox_at(counter: tuple[int, int, int, int], key: tuple[int, int], offsets: np.ndarray) -> np.ndarray:
    """The Philox 4x32-10 outputs at the 128-bit counters ``counter + offsets`` (a
    counter is four words, lowest first; ``offsets`` uint64): uint32 [len(offsets), 4].
    numpy; for keys, counters and the CPU backend's path without its native module."""
    g = np.asarray(offsets, np.uint64)
    mask = np.uint64(0xFFFFFFFF)
    lo = np.uint64(counter[0] | counter[1] << 32) + g
    hi = np.uint64(counter[2] | counter[3] << 32) + (lo < g).astype(np.uint64)  # the carry
    c0, c1, c2, c3 = lo & mask, lo >> np.uint64(32), hi & mask, hi >> np.uint64(32)
    k0, k1 = np.uint64(key[0]), np.uint64(key[1])
    m0, m1 = np.uint64(PHILOX_M0), np.uint64(PHILOX_M1)
    with np.errstate(over="ignore"):
        for _ in range(10):
            p0, p1 = c0 * m0, c2 * m1
            c0, c1, c2, c3 = (p1 >> np.uint64(32)) ^ c1 ^ k0, p1 & mask, (p0 >> np.uint64(32)) ^ c3 ^ k1, p0 & mask
            k0, k1 = (k0 + np.uint64(PHILOX_W0)) & mask, (k1 + np.uint64(PHILOX_W1)) & mask
    return np.stack([c0, c1, c2, c3], axis=-1).astype(np.uint32)


def philox_words(counter: tuple[int, int, int, int], key: tuple[int, int], calls: int) -> np.ndarray:
    """The 32-bit words of ``calls`` Philox outputs at ``counter``, ``counter + 1``, ...,
    call after call (four words each), as uint32."""
    return philox_at(counter, key, np.arange(calls, dtype=np.uint64)).reshape(-1)


def seed_words(op: str, seed: Any) -> tuple[int, int]:
    """A seed input (int32 or int64, shape [2]) as two unsigned 64-bit numbers, or an
    InvalidArgumentError naming ``op``."""
    s = np.asarray(seed)
    if s.shape != (2,):
        raise InvalidArgumentError(f"op {op!r}: seed must have shape [2], not {list(s.shape)}", op=op)
    if s.dtype not in (np.int32, np.int64):
        raise InvalidArgumentError(f"op {op!r}: seed must be int32 or int64, got {s.dtype}", op=op)
    # sign-extended to 64 bits, then read unsigned: TensorFlow's uint64 seed0 = int32 value
    return int(np.int64(s[0])) & (2**64 - 1), int(np.int64(s[1])) & (2**64 - 1)


def key_counter(seed0: int, seed1: int) -> tuple[tuple[int, int], tuple[int, int, int, int]]:
    """TensorFlow's key (two words) and counter (four words) for a seed pair: one Philox
    call on the seed with a fixed key scrambles it (GenerateKey)."""
    counter = (seed0 & 0xFFFFFFFF, seed0 >> 32, seed1 & 0xFFFFFFFF, seed1 >> 32)
    m = [int(w) for w in philox_words(counter, SEED_KEY, 1)]
    return (m[0], m[1]), (0, 0, m[2], m[3])


def check_alg(op: str, alg: Any) -> None:
    a = np.asarray(alg)
    if a.shape != ():
        raise InvalidArgumentError(f"op {op!r}: alg must be a scalar, got shape {list(a.shape)}", op=op)
    if int(a) not in (ALG_PHILOX, ALG_AUTO_SELECT):
        raise InvalidArgumentError(
            f"op {op!r}: unsupported algorithm id {int(a)} (1: Philox and 3: auto-select, which is Philox, are "
            "supported; ThreeFry (2) runs only under XLA in TensorFlow)", op=op,
        )


def check_key_counter(op: str, key: Any, counter: Any, alg: Any) -> tuple[tuple[int, int], tuple[int, int, int, int]]:
    """The Philox key and counter words of the V2 ops' ``key`` (uint64 [1]) and
    ``counter`` (uint64 [2]), after the checks TensorFlow makes; errors name ``op``."""
    check_alg(op, alg)
    k, c = np.asarray(key), np.asarray(counter)
    if k.shape != (1,):
        raise InvalidArgumentError(f"op {op!r}: key must have shape [1], got {list(k.shape)}", op=op)
    if c.ndim != 1 or c.shape[0] < 2:
        raise InvalidArgumentError(f"op {op!r}: counter must be a vector of at least 2 elements, got shape "
                                   f"{list(c.shape)}", op=op)
    kv = int(k.astype(np.uint64)[0])
    c0, c1 = (int(v) for v in c.astype(np.uint64)[:2])
    return (kv & 0xFFFFFFFF, kv >> 32), (c0 & 0xFFFFFFFF, c0 >> 32, c1 & 0xFFFFFFFF, c1 >> 32)


def check_shape(op: str, shape: Any) -> tuple[int, ...]:
    s = np.asarray(shape)
    if s.ndim != 1:
        raise InvalidArgumentError(f"op {op!r}: shape must be a vector, got shape {list(s.shape)}", op=op)
    dims = tuple(int(d) for d in s)
    if any(d < 0 for d in dims):
        raise InvalidArgumentError(f"op {op!r}: shape must be non-negative, got {list(dims)}", op=op)
    return dims


def check_multinomial(op: str, logits: Any, num_samples: Any) -> tuple[int, int, int]:
    """(batch, classes, samples) of StatelessMultinomial's inputs, after TensorFlow's checks."""
    shape = tuple(np.shape(logits))
    if len(shape) != 2:
        raise InvalidArgumentError(f"op {op!r}: logits should be a matrix, got shape {list(shape)}", op=op)
    n = np.asarray(num_samples)
    if n.shape != ():
        raise InvalidArgumentError(f"op {op!r}: num_samples should be a scalar, got shape {list(n.shape)}", op=op)
    if int(n) < 0:
        raise InvalidArgumentError(f"op {op!r}: num_samples should be non-negative, got {int(n)}", op=op)
    if shape[1] < 1:
        raise InvalidArgumentError(f"op {op!r}: num_classes should be positive, got {shape[1]}", op=op)
    return int(shape[0]), int(shape[1]), int(n)


def check_range(op: str, minval: Any, maxval: Any) -> tuple[int, int]:
    lo, hi = np.asarray(minval), np.asarray(maxval)
    if lo.shape != () or hi.shape != ():
        raise InvalidArgumentError(f"op {op!r}: minval and maxval must be scalars, got shapes {list(lo.shape)} and "
                                   f"{list(hi.shape)}", op=op)
    if not int(lo) < int(hi):
        raise InvalidArgumentError(f"op {op!r}: need minval < maxval, got {int(lo)} >= {int(hi)}", op=op)
    return int(lo), int(hi)


# ---------------------------------------------------------------- the fill ops' kernels, over a backend's fill

#: What a backend's ``fill`` draws (see ``fill_kernels``).
UNIFORM, NORMAL, TRUNCATED, INT, FULL_INT = 0, 1, 2, 3, 4

#: The floating-point and integer fill ops, each with its distribution.
FLOAT_FILLS = {"StatelessRandomUniformV2": UNIFORM, "StatelessRandomNormalV2": NORMAL,
               "StatelessTruncatedNormalV2": TRUNCATED}
SEEDED_FILLS = {"StatelessRandomUniform": UNIFORM, "StatelessRandomNormal": NORMAL,
                "StatelessTruncatedNormal": TRUNCATED}


def fill_kernels(fill: Any) -> list[tuple[str, Any, tuple[str, ...]]]:
    """(op, kernel function, host-memory inputs) of every stateless fill op, over a
    backend's ``fill(op, kind, dtype, dims, key, counter, lo, span)``, which returns the
    new array of ``kind`` (UNIFORM ... FULL_INT; INT draws lo + bits % span).  The
    functions check their inputs (TensorFlow's checks), derive the key and counter (from
    the seed for the V1 ops), then call ``fill``: every backend shares them."""
    v2 = ("shape", "key", "counter", "alg")
    out: list[tuple[str, Any, tuple[str, ...]]] = []

    def keyed(op: str, kind: int) -> Any:
        def kernel(shape: Any, key: Any, counter: Any, alg: Any, dtype: Any, **attrs: Any) -> Any:
            k, c = check_key_counter(op, key, counter, alg)
            return fill(op, kind, dtype, check_shape(op, shape), k, c, 0, 1)

        kernel.__name__ = op
        return kernel

    def seeded(op: str, kind: int) -> Any:
        def kernel(shape: Any, seed: Any, dtype: Any, **attrs: Any) -> Any:
            k, c = key_counter(*seed_words(op, seed))
            return fill(op, kind, dtype, check_shape(op, shape), k, c, 0, 1)

        kernel.__name__ = op
        return kernel

    def bounded_v2(shape: Any, key: Any, counter: Any, alg: Any, minval: Any, maxval: Any, dtype: Any,
                   **attrs: Any) -> Any:
        op = "StatelessRandomUniformIntV2"
        k, c = check_key_counter(op, key, counter, alg)
        lo, hi = check_range(op, minval, maxval)
        return fill(op, INT, dtype, check_shape(op, shape), k, c, lo, hi - lo)

    def bounded(shape: Any, seed: Any, minval: Any, maxval: Any, dtype: Any, **attrs: Any) -> Any:
        op = "StatelessRandomUniformInt"
        k, c = key_counter(*seed_words(op, seed))
        lo, hi = check_range(op, minval, maxval)
        return fill(op, INT, dtype, check_shape(op, shape), k, c, lo, hi - lo)

    out += [(op, keyed(op, kind), v2) for op, kind in FLOAT_FILLS.items()]
    out += [(op, seeded(op, kind), ("shape", "seed")) for op, kind in SEEDED_FILLS.items()]
    out += [
        ("StatelessRandomUniformIntV2", bounded_v2, v2 + ("minval", "maxval")),
        ("StatelessRandomUniformFullIntV2", keyed("StatelessRandomUniformFullIntV2", FULL_INT), v2),
        ("StatelessRandomUniformInt", bounded, ("shape", "seed", "minval", "maxval")),
    ]
    return out


def key_counter_outputs(seed: Any) -> list[np.ndarray]:
    """StatelessRandomGetKeyCounter's outputs for ``seed``: the key (uint64 [1]) and the
    counter (uint64 [2]), computed on the host (every backend uploads them)."""
    key, counter = key_counter(*seed_words("StatelessRandomGetKeyCounter", seed))
    return [np.array([key[0] | key[1] << 32], np.uint64),
            np.array([counter[0] | counter[1] << 32, counter[2] | counter[3] << 32], np.uint64)]


# ---------------------------------------------------------------- shape functions


@output_size_from("shape")
def _shape_from_input(c: InferenceContext) -> None:
    c.with_rank(c.input(0), 1)
    c.set_output(0, c.make_shape_from_shape_tensor(0))


def _key_counter_shape(c: InferenceContext) -> None:
    c.with_rank(c.input(0), 1)
    c.set_output(0, c.vector(1))
    c.set_output(1, c.vector(2))


@output_size_from("num_samples")
def _multinomial_shape(c: InferenceContext) -> None:
    logits = c.with_rank(c.input(0), 2)
    c.with_rank(c.input(1), 0)
    c.with_rank(c.input(2), 1)
    n = c.input_tensor(1)
    batch = logits.dims[0] if logits.dims is not None else None
    c.set_output(0, c.make_shape([batch, None if n is None else int(np.asarray(n))]))


# ---------------------------------------------------------------- specs


def register_ops() -> None:
    register_op("StatelessRandomGetKeyCounter").input("seed: Tseed").output("key: uint64").output(
        "counter: uint64"
    ).attr("Tseed: {int32, int64} = DT_INT64").set_shape_fn(_key_counter_shape).doc(
        "The Philox key [1] and counter [2] TensorFlow's V2 stateless random ops draw with for a seed of shape [2]."
    )
    for name, what in (("StatelessRandomUniformV2", "uniform values in [0, 1)"),
                       ("StatelessRandomNormalV2", "standard normal values (Box-Muller)"),
                       ("StatelessTruncatedNormalV2", "standard normal values within 2 standard deviations")):
        register_op(name).input("shape: Tshape").input("key: uint64").input("counter: uint64").input(
            "alg: int32"
        ).output("output: dtype").attr(f"dtype: {_FLOATS} = DT_FLOAT").attr(
            "Tshape: {int32, int64} = DT_INT32"
        ).set_shape_fn(_shape_from_input).doc(f"A tensor of {what}, a pure function of key, counter and alg.")
    register_op("StatelessRandomUniformIntV2").input("shape: Tshape").input("key: uint64").input(
        "counter: uint64"
    ).input("alg: int32").input("minval: dtype").input("maxval: dtype").output("output: dtype").attr(
        f"dtype: {_INTS}"
    ).attr("Tshape: {int32, int64} = DT_INT32").set_shape_fn(_shape_from_input).doc(
        "Integers in [minval, maxval): minval + (random bits mod (maxval - minval)), a pure function of key, "
        "counter and alg."
    )
    register_op("StatelessRandomUniformFullIntV2").input("shape: Tshape").input("key: uint64").input(
        "counter: uint64"
    ).input("alg: int32").output("output: dtype").attr(f"dtype: {_INTS} = DT_UINT64").attr(
        "Tshape: {int32, int64} = DT_INT32"
    ).set_shape_fn(_shape_from_input).doc("Integers over the whole range of dtype, a pure function of key, counter and alg.")
    for name, what in (("StatelessRandomUniform", "uniform values in [0, 1)"),
                       ("StatelessRandomNormal", "standard normal values"),
                       ("StatelessTruncatedNormal", "standard normal values within 2 standard deviations")):
        register_op(name).input("shape: T").input("seed: Tseed").output("output: dtype").attr(
            f"dtype: {_FLOATS} = DT_FLOAT"
        ).attr("T: {int32, int64} = DT_INT32").attr("Tseed: {int32, int64} = DT_INT64").set_shape_fn(
            _shape_from_input
        ).doc(f"A tensor of {what}, a pure function of seed (shape [2]).")
    register_op("StatelessRandomUniformInt").input("shape: T").input("seed: Tseed").input("minval: dtype").input(
        "maxval: dtype"
    ).output("output: dtype").attr("dtype: {int32, int64}").attr("T: {int32, int64}").attr(
        "Tseed: {int32, int64} = DT_INT64"
    ).set_shape_fn(_shape_from_input).doc("Integers in [minval, maxval), a pure function of seed (shape [2]).")
    register_op("RngReadAndSkip").input("resource: Ref(int64)").input("alg: int32").input("delta: uint64").output(
        "value: int64"
    ).set_shape_fn(_rng_read_and_skip_shape).doc(
        "Returns a random generator's state (int64 [3]: the Philox counter's low and high halves, the key) and "
        "moves its counter on by delta * 256, atomically: a tf.random.Generator's draw."
    )
    register_op("StatelessMultinomial").input("logits: T").input("num_samples: int32").input("seed: Tseed").output(
        "output: output_dtype"
    ).attr("T: {half, bfloat16, float, double, int32, int64, uint8, int16, int8, uint16, uint32, uint64}").attr(
        "Tseed: {int32, int64} = DT_INT64"
    ).attr("output_dtype: {int32, int64} = DT_INT64").set_shape_fn(_multinomial_shape).doc(
        "num_samples class indices per row of logits [batch, classes], drawn with probabilities softmax(logits), "
        "a pure function of seed (shape [2])."
    )


#: How far RngReadAndSkip moves a generator's 128-bit counter per unit of ``delta``
#: (TensorFlow's: 256 Philox calls an element, room for any distribution's draws).
SKIP_PER_ELEMENT = 256


def skipped_state(op: str, state: np.ndarray, delta: int) -> np.ndarray:
    """A Philox generator state (int64 [counter low, counter high, key]) moved on by
    ``delta`` elements, as TensorFlow's RngReadAndSkip: the 128-bit counter plus
    ``delta * 256`` taken modulo 2**64 (TensorFlow multiplies in uint64), wrapping at 2**128."""
    if state.shape != (3,) or state.dtype != np.int64:
        raise InvalidArgumentError(f"op {op!r}: a Philox state is int64 of shape [3], got {state.dtype} "
                                   f"{list(state.shape)}", op=op)
    words = state.view(np.uint64)
    counter = (int(words[0]) | int(words[1]) << 64) + (delta * SKIP_PER_ELEMENT & (2**64 - 1))
    counter &= 2**128 - 1
    return np.array([counter & (2**64 - 1), counter >> 64, int(words[2])], np.uint64).view(np.int64)


def check_delta(op: str, delta: Any) -> int:
    d = np.asarray(delta)
    if d.shape != ():
        raise InvalidArgumentError(f"op {op!r}: delta must be a scalar, got shape {list(d.shape)}", op=op)
    return int(d)


def _rng_read_and_skip_shape(c: InferenceContext) -> None:
    c.with_rank(c.input(1), 0)
    c.with_rank(c.input(2), 0)
    c.set_output(0, c.vector(3))


def _rng_read_and_skip(resource: Any, alg: Any, delta: Any, **attrs: Any) -> Any:
    """Every backend: the state (three int64s) is read on the host, moved on and
    assigned back, under the variable's lock that the call holds; the old state is the
    result."""
    from ..tensor import ops_module

    op = "RngReadAndSkip"
    check_alg(op, alg.numpy())
    d = check_delta(op, delta.numpy())
    old = np.array(resource.numpy(), copy=True)
    new = skipped_state(op, old, d)
    ops = ops_module()
    ops.assign(resource, new)
    return ops.identity(old)


def register_generic_kernels() -> None:
    from ..kernels import register_kernel

    register_kernel("RngReadAndSkip", backend="*")(_rng_read_and_skip)


RANDOM_OPS = (
    "StatelessRandomGetKeyCounter", "StatelessRandomUniformV2", "StatelessRandomNormalV2", "StatelessTruncatedNormalV2",
    "StatelessRandomUniformIntV2", "StatelessRandomUniformFullIntV2", "StatelessRandomUniform", "StatelessRandomNormal",
    "StatelessTruncatedNormal", "StatelessRandomUniformInt", "StatelessMultinomial", "RngReadAndSkip",
)


def register_gradients() -> None:
    for name in RANDOM_OPS:
        not_differentiable(name)
