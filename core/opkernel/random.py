"""Random numbers that are values: TensorFlow's ``tf.random.stateless_*`` functions and
``tf.random.Generator``, on every backend (docs/random.md).

The stateless functions are pure functions of a seed (two integers): the same seed gives
the same numbers, in eager code, traced functions and saved graphs alike, and on the CPU
backend they are TensorFlow's numbers bit for bit (uniform and integer ones on every
backend).  A :class:`Generator` holds its state in a Variable, so each call draws new
numbers, also from inside ``ok.function`` and from a saved graph, and a generator made
from the same seed draws the same sequence (TensorFlow's ``Generator.from_seed``
sequence: the same state layout and the same ops).

    >>> ok.random.stateless_uniform([2, 3], seed=[1, 2])          # as tf.random.stateless_uniform
    >>> g = ok.random.Generator.from_seed(1234)
    >>> g.normal([4])                                              # as tf.random.Generator.from_seed(1234).normal
"""

from __future__ import annotations

import os
from typing import Any, Sequence

import numpy as np

from .dtypes import DType, as_dtype
from .errors import InvalidArgumentError
from .tensor import Tensor, Variable, ops_module
from .typing import TensorLike

__all__ = [
    "Generator", "stateless_categorical", "stateless_normal", "stateless_truncated_normal", "stateless_uniform",
    "stateless_dropout",
]

#: Algorithm names and ids, as TensorFlow's (``tf.random.Algorithm``); "auto_select" is Philox.
_ALGORITHMS = {"philox": 1, "auto_select": 3}


def _alg(alg: Any, where: str) -> int:
    if isinstance(alg, str):
        found = _ALGORITHMS.get(alg.lower())
        if found is None:
            raise InvalidArgumentError(f"{where}: unsupported algorithm {alg!r}; expected one of {sorted(_ALGORITHMS)} "
                                       "('threefry' runs only under XLA in TensorFlow)")
        return found
    if alg in (1, 3):
        return int(alg)
    raise InvalidArgumentError(f"{where}: unsupported algorithm id {alg!r}; expected 1 (Philox) or 3 (auto-select)")


def _shape(shape: Any) -> Any:
    """A shape argument as the ops take it: a Tensor as it is, else an int vector (int64
    when a dimension needs it)."""
    if isinstance(shape, Tensor):
        return shape
    dims = [int(d) for d in np.asarray(shape).reshape(-1)]
    return np.asarray(dims, np.int32 if all(-(2**31) <= d < 2**31 for d in dims) else np.int64)


def _seed(seed: Any, where: str) -> Any:
    if isinstance(seed, Tensor):
        return seed
    s = np.asarray(seed)
    if s.shape != (2,) or s.dtype.kind not in "iu":
        raise InvalidArgumentError(f"{where}: seed must be two integers (shape [2]), got {seed!r}")
    return s.astype(np.int64)


def _key_counter(seed: Any, where: str) -> tuple[Any, Any]:
    key, counter = ops_module().stateless_random_get_key_counter(_seed(seed, where))
    return key, counter


def stateless_uniform(shape: Any, seed: Any, minval: Any = 0, maxval: Any = None, dtype: Any = "float32",
                      alg: Any = "auto_select") -> Tensor:
    """Uniform numbers in [minval, maxval) (tf.random.stateless_uniform): floats (maxval
    defaults to 1) as ``StatelessRandomUniformV2 * (maxval - minval) + minval``; integers
    need maxval (StatelessRandomUniformIntV2, a slight bias for ranges that are not a power
    of two, as TensorFlow's), or minval and maxval both None for the whole range of the type
    (StatelessRandomUniformFullIntV2)."""
    where = "ok.random.stateless_uniform"
    dt = as_dtype(dtype)
    ops = ops_module()
    key, counter = _key_counter(seed, where)
    a = _alg(alg, where)
    if dt.is_integer:
        if minval is None and maxval is None:
            return ops.stateless_random_uniform_full_int_v2(_shape(shape), key, counter, np.int32(a), dtype=dt)  # type: ignore[no-any-return]
        if minval is None or maxval is None:
            raise InvalidArgumentError(f"{where}: integer dtype {dt.name} needs both minval and maxval (or neither, "
                                       "for the whole range)")
        return ops.stateless_random_uniform_int_v2(  # type: ignore[no-any-return]
            _shape(shape), key, counter, np.int32(a), np.asarray(minval, dt.np), np.asarray(maxval, dt.np))
    if not dt.is_floating:
        raise InvalidArgumentError(f"{where}: dtype must be a float or integer type, got {dt.name}")
    rnd = ops.stateless_random_uniform_v2(_shape(shape), key, counter, np.int32(a), dtype=dt)
    hi = 1 if maxval is None else maxval
    return _scaled(rnd, ops.sub(_const(hi, dt), _const(minval, dt)), _const(minval, dt))


def stateless_normal(shape: Any, seed: Any, mean: Any = 0.0, stddev: Any = 1.0, dtype: Any = "float32",
                     alg: Any = "auto_select") -> Tensor:
    """Normal numbers (tf.random.stateless_normal): ``StatelessRandomNormalV2 * stddev + mean``."""
    where = "ok.random.stateless_normal"
    dt = _float(dtype, where)
    key, counter = _key_counter(seed, where)
    rnd = ops_module().stateless_random_normal_v2(_shape(shape), key, counter, np.int32(_alg(alg, where)), dtype=dt)
    return _scaled(rnd, _const(stddev, dt), _const(mean, dt))


def stateless_truncated_normal(shape: Any, seed: Any, mean: Any = 0.0, stddev: Any = 1.0, dtype: Any = "float32",
                               alg: Any = "auto_select") -> Tensor:
    """Normal numbers within two standard deviations of the mean, redrawn beyond
    (tf.random.stateless_truncated_normal)."""
    where = "ok.random.stateless_truncated_normal"
    dt = _float(dtype, where)
    key, counter = _key_counter(seed, where)
    rnd = ops_module().stateless_truncated_normal_v2(_shape(shape), key, counter, np.int32(_alg(alg, where)), dtype=dt)
    return _scaled(rnd, _const(stddev, dt), _const(mean, dt))


def stateless_categorical(logits: TensorLike, num_samples: int, seed: Any, dtype: Any = "int64") -> Tensor:
    """``num_samples`` class indices per row of ``logits`` [batch, classes], drawn with
    probabilities softmax(logits) (tf.random.stateless_categorical: StatelessMultinomial)."""
    where = "ok.random.stateless_categorical"
    return ops_module().stateless_multinomial(  # type: ignore[no-any-return]
        logits, np.int32(num_samples), _seed(seed, where), output_dtype=as_dtype(dtype))


def stateless_dropout(x: TensorLike, rate: float, seed: Any, noise_shape: Sequence[int] | None = None) -> Tensor:
    """``x`` with each element zeroed with probability ``rate`` and the others scaled by
    1 / (1 - rate) (tf.nn.experimental.stateless_dropout): the mask is
    ``stateless_uniform(noise_shape or x's shape, seed) >= rate``."""
    where = "ok.random.stateless_dropout"
    ops = ops_module()
    t = x if isinstance(x, Tensor) else ops.identity(x)
    if not t.dtype.is_floating:
        raise InvalidArgumentError(f"{where}: x must be a float tensor, got {t.dtype.name}")
    if not 0 <= float(rate) < 1:
        raise InvalidArgumentError(f"{where}: rate must be in [0, 1), got {rate!r}")
    if float(rate) == 0:
        return t
    shape = list(noise_shape) if noise_shape is not None else ops.shape(t)
    uniform = stateless_uniform(shape, seed, dtype=t.dtype)
    return dropped(t, uniform, float(rate))


def dropped(t: Tensor, uniform: Tensor, rate: float) -> Tensor:
    """``t`` with the elements where ``uniform < rate`` zeroed and the others scaled by
    1 / (1 - rate) (ok.nn.Dropout uses it too).  TensorFlow's dropout arithmetic: x * (1 / (1 - rate)) * cast(uniform >= rate)."""
    ops = ops_module()
    dt = t.dtype
    keep = ops.cast(ops.greater_equal(uniform, _const(rate, dt)), DstT=dt)
    return ops.mul(ops.mul(t, _const(1 / (1 - rate), dt)), keep)  # type: ignore[no-any-return]


def _float(dtype: Any, where: str) -> DType:
    dt = as_dtype(dtype)
    if not dt.is_floating:
        raise InvalidArgumentError(f"{where}: dtype must be a float type, got {dt.name}")
    return dt


def _const(value: Any, dt: DType) -> Any:
    return value if isinstance(value, Tensor) else np.asarray(value, dt.np)


def _scaled(rnd: Tensor, scale: Any, shift: Any) -> Tensor:
    """``rnd * scale + shift``, as TensorFlow's math_ops.add(rnd * scale, shift)."""
    ops = ops_module()
    return ops.add(ops.mul(rnd, scale), shift)  # type: ignore[no-any-return]


class Generator:
    """A random number generator whose state is a Variable (tf.random.Generator, Philox):
    int64 [3], the 128-bit counter's low and high halves and the key.  Each draw reads the
    state and moves its counter on by 256 per element drawn (RngReadAndSkip, atomic under
    the variable's lock), then runs the stateless V2 op on that key and counter, so the
    draws of a generator never overlap, traced functions and saved graphs that use it draw
    fresh numbers on every call, and ``Generator.from_seed(s)`` repeats TensorFlow's
    ``tf.random.Generator.from_seed(s)`` sequence."""

    def __init__(self, state: Any, alg: Any = "philox") -> None:
        where = "ok.random.Generator"
        self.algorithm = _alg(alg, where)
        if isinstance(state, Variable):
            if state.dtype.name != "int64" or tuple(state.shape) != (3,):
                raise InvalidArgumentError(f"{where}: the state must be an int64 Variable of shape [3], got "
                                           f"{state.dtype.name} {list(state.shape)}")
            self.state = state
        else:
            s = np.asarray(state)
            if s.shape != (3,) or s.dtype.kind not in "iu":
                raise InvalidArgumentError(f"{where}: the state must be three integers, got {state!r}")
            self.state = Variable(s.astype(np.uint64).view(np.int64) if s.dtype.kind == "u" else s.astype(np.int64))

    @classmethod
    def from_seed(cls, seed: int | Sequence[int], alg: Any = "philox") -> Generator:
        """TensorFlow's state for ``seed``: a Python int cut into three 64-bit pieces, lowest
        first; a sequence of integers right-aligned in the three (zeros before)."""
        return cls(_state_from_seed(seed), alg)

    @classmethod
    def from_non_deterministic_state(cls, alg: Any = "philox") -> Generator:
        """A generator seeded from the operating system's entropy."""
        return cls(np.frombuffer(os.urandom(24), np.int64).copy(), alg)

    @classmethod
    def from_state(cls, state: Any, alg: Any = "philox") -> Generator:
        return cls(state, alg)

    @property
    def key(self) -> Tensor:
        return self.state[2]

    def _key_counter(self, shape: Any) -> tuple[Any, Any]:
        ops = ops_module()
        dims = _shape(shape)
        delta = ops.cast(ops.prod(dims, [0]), DstT="uint64")
        state = ops.rng_read_and_skip(self.state, np.int32(self.algorithm), delta)
        # int64 to uint64: the same bits (a cast between integers of one width wraps)
        counter = ops.cast(state[:2], DstT="uint64")
        key = ops.cast(state[2:3], DstT="uint64")
        return key, counter

    def uniform(self, shape: Any, minval: Any = 0, maxval: Any = None, dtype: Any = "float32") -> Tensor:
        """As tf.random.Generator.uniform (see stateless_uniform for the arithmetic)."""
        dt = as_dtype(dtype)
        ops = ops_module()
        if dt.is_integer:
            if dt.name.startswith("uint"):
                raise InvalidArgumentError("Generator.uniform: unsigned integer dtypes are not supported (as in "
                                           "TensorFlow); use uniform_full_int")
            if maxval is None:
                raise InvalidArgumentError(f"Generator.uniform: integer dtype {dt.name} needs maxval")
            if minval is None:
                return self.uniform_full_int(shape, dt)
            key, counter = self._key_counter(shape)
            return ops.stateless_random_uniform_int_v2(  # type: ignore[no-any-return]
                _shape(shape), key, counter, np.int32(self.algorithm), np.asarray(minval, dt.np),
                np.asarray(maxval, dt.np))
        dt = _float(dt, "Generator.uniform")
        key, counter = self._key_counter(shape)
        rnd = ops.stateless_random_uniform_v2(_shape(shape), key, counter, np.int32(self.algorithm), dtype=dt)
        hi = 1 if maxval is None else maxval
        return _scaled(rnd, ops.sub(_const(hi, dt), _const(minval, dt)), _const(minval, dt))

    def uniform_full_int(self, shape: Any, dtype: Any = "uint64") -> Tensor:
        key, counter = self._key_counter(shape)
        return ops_module().stateless_random_uniform_full_int_v2(  # type: ignore[no-any-return]
            _shape(shape), key, counter, np.int32(self.algorithm), dtype=as_dtype(dtype))

    def normal(self, shape: Any, mean: Any = 0.0, stddev: Any = 1.0, dtype: Any = "float32") -> Tensor:
        dt = _float(dtype, "Generator.normal")
        key, counter = self._key_counter(shape)
        rnd = ops_module().stateless_random_normal_v2(_shape(shape), key, counter, np.int32(self.algorithm), dtype=dt)
        return _scaled(rnd, _const(stddev, dt), _const(mean, dt))

    def truncated_normal(self, shape: Any, mean: Any = 0.0, stddev: Any = 1.0, dtype: Any = "float32") -> Tensor:
        dt = _float(dtype, "Generator.truncated_normal")
        key, counter = self._key_counter(shape)
        rnd = ops_module().stateless_truncated_normal_v2(_shape(shape), key, counter, np.int32(self.algorithm), dtype=dt)
        return _scaled(rnd, _const(stddev, dt), _const(mean, dt))

    def make_seeds(self, count: int = 1) -> Tensor:
        """``count`` new seeds for the stateless functions, int64 [2, count] (TensorFlow's:
        keys from uniform_full_int, a row of zeros under them)."""
        ops = ops_module()
        keys = self.uniform_full_int([count], "int64")
        return ops.pack([keys, ops.zeros_like(keys)], axis=0)  # type: ignore[no-any-return]

    def split(self, count: int = 1) -> list[Generator]:
        """``count`` new generators whose streams are independent of this one's (TensorFlow's:
        state [0, 0, key] with keys from make_seeds)."""
        keys = self.make_seeds(count).numpy()[0]
        return [Generator(np.array([0, 0, k], np.int64), self.algorithm) for k in keys]

    def __repr__(self) -> str:
        return f"<ok.random.Generator state={self.state.numpy().tolist()} alg={self.algorithm}>"


def _state_from_seed(seed: Any) -> np.ndarray:
    if isinstance(seed, (int, np.integer)) and not isinstance(seed, bool):
        v = int(seed)
        parts = []
        for _ in range(3):
            parts.append(v & (2**64 - 1))
            v >>= 64
        return np.array(parts, np.uint64).view(np.int64)
    values = [int(s) & (2**64 - 1) for s in np.asarray(seed).reshape(-1)][:3]
    return np.array([0] * (3 - len(values)) + values, np.uint64).view(np.int64)
