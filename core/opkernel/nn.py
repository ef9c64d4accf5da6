"""The few pieces a user expects to train with: layers holding Variables,
seeded initialisers, and optimisers that update Variables in place through
registered ops (so training runs on whichever backend is active)."""

from __future__ import annotations

import math
from typing import Any, Callable, Iterable, Sequence

import numpy as np

from .dtypes import DType, as_dtype
from .engine import is_tracing, not_tracing, to_tensor
from .errors import InvalidArgumentError
from .random import Generator, dropped
from .resource_variables import ResourceVariable
from .tensor import Tensor, Variable, ops_module as _ops

__all__ = [
    "glorot_uniform", "he_normal", "zeros", "ones", "truncated_normal", "variance_scaling", "orthogonal",
    "Layer", "Dense", "Conv2D", "DepthwiseConv2D", "MaxPool2D", "Flatten", "Sequential", "Embedding",
    "LayerNormalization", "Dropout", "MultiHeadAttention", "BatchNormalization",
    "gelu", "softmax", "clip_by_global_norm", "ConstantSchedule", "StepDecay", "CosineDecay", "LinearWarmup",
    "Optimizer", "SGD", "Adam", "AdamW", "sparse_softmax_cross_entropy",
]

# A string: evaluating np.random here would import numpy.random (~10 ms) at `import opkernel`.
Initializer = Callable[[tuple[int, ...], DType, "np.random.Generator"], np.ndarray]


def glorot_uniform(shape: tuple[int, ...], dtype: DType, rng: np.random.Generator) -> np.ndarray:
    """Uniform in +-sqrt(6 / (fan_in + fan_out)) (Keras's default)."""
    receptive = int(np.prod(shape[:-2])) if len(shape) > 2 else 1
    fan_in, fan_out = shape[-2] * receptive, shape[-1] * receptive
    limit = math.sqrt(6.0 / (fan_in + fan_out))
    return rng.uniform(-limit, limit, shape).astype(dtype.np)


def he_normal(shape: tuple[int, ...], dtype: DType, rng: np.random.Generator) -> np.ndarray:
    """Normal with std sqrt(2 / fan_in), for ReLU networks."""
    fan_in = int(np.prod(shape[:-1]))
    return (rng.standard_normal(shape) * math.sqrt(2.0 / fan_in)).astype(dtype.np)


def zeros(shape: tuple[int, ...], dtype: DType, rng: np.random.Generator) -> np.ndarray:
    return np.zeros(shape, dtype.np)


def ones(shape: tuple[int, ...], dtype: DType, rng: np.random.Generator) -> np.ndarray:
    return np.ones(shape, dtype.np)


def _fans(shape: tuple[int, ...]) -> tuple[int, int]:
    """(fan_in, fan_out) as Keras computes them (a convolution kernel's receptive field counts)."""
    if len(shape) < 1:
        return 1, 1
    if len(shape) == 1:
        return shape[0], shape[0]
    receptive = int(np.prod(shape[:-2])) if len(shape) > 2 else 1
    return shape[-2] * receptive, shape[-1] * receptive


def _truncated(rng: np.random.Generator, shape: tuple[int, ...], stddev: float) -> np.ndarray:
    """Normal samples of ``stddev``, each redrawn until it lies within two standard deviations."""
    out = rng.standard_normal(shape)
    bad = np.abs(out) > 2.0
    while bad.any():
        out[bad] = rng.standard_normal(int(bad.sum()))
        bad = np.abs(out) > 2.0
    return out * stddev


def truncated_normal(stddev: float = 0.05) -> Initializer:
    """Normal with ``stddev``, redrawn beyond two standard deviations (Keras's TruncatedNormal)."""
    def init(shape: tuple[int, ...], dtype: DType, rng: np.random.Generator) -> np.ndarray:
        return _truncated(rng, shape, stddev).astype(dtype.np)
    return init


def variance_scaling(scale: float = 1.0, mode: str = "fan_in", distribution: str = "truncated_normal") -> Initializer:
    """Keras's VarianceScaling: variance ``scale / n`` with n the fan in, the fan out or
    their mean (``mode``), drawn from a truncated normal (its stddev corrected for the
    truncation, 0.8796...), a normal or a uniform ``distribution``."""
    if mode not in ("fan_in", "fan_out", "fan_avg"):
        raise InvalidArgumentError(f"variance_scaling: mode must be 'fan_in', 'fan_out' or 'fan_avg', got {mode!r}")
    if distribution not in ("truncated_normal", "untruncated_normal", "uniform"):
        raise InvalidArgumentError(
            "variance_scaling: distribution must be 'truncated_normal', 'untruncated_normal' or 'uniform', "
            f"got {distribution!r}"
        )
    if not scale > 0:
        raise InvalidArgumentError(f"variance_scaling: scale must be positive, got {scale!r}")

    def init(shape: tuple[int, ...], dtype: DType, rng: np.random.Generator) -> np.ndarray:
        fan_in, fan_out = _fans(shape)
        n = {"fan_in": fan_in, "fan_out": fan_out, "fan_avg": (fan_in + fan_out) / 2.0}[mode]
        variance = scale / max(1.0, n)
        if distribution == "truncated_normal":
            values = _truncated(rng, shape, math.sqrt(variance) / 0.87962566103423978)
        elif distribution == "untruncated_normal":
            values = rng.standard_normal(shape) * math.sqrt(variance)
        else:
            limit = math.sqrt(3.0 * variance)
            values = rng.uniform(-limit, limit, shape)
        return values.astype(dtype.np)
    return init


def orthogonal(gain: float = 1.0) -> Initializer:
    """A (semi-)orthogonal matrix of the shape flattened to (prod(shape[:-1]), shape[-1]),
    times ``gain`` (Keras's Orthogonal): QR of a normal matrix, signs fixed by R's diagonal."""
    def init(shape: tuple[int, ...], dtype: DType, rng: np.random.Generator) -> np.ndarray:
        if len(shape) < 2:
            raise InvalidArgumentError(f"orthogonal: needs a shape of rank 2 or more, got {shape}")
        rows, cols = int(np.prod(shape[:-1])), shape[-1]
        flat = rng.standard_normal((max(rows, cols), min(rows, cols)))
        q, r = np.linalg.qr(flat)
        q = q * np.sign(np.diag(r))
        if rows < cols:
            q = q.T
        return (gain * q.reshape(shape)).astype(dtype.np)
    return init


class Layer:
    """A callable holding Variables.

    ``variables`` lists every Variable the layer holds, as Keras layers and ``tf.Module``
    track them: its own (``add_variable``), then those in its attributes — Variables,
    sublayers, and lists, tuples and dicts of them, nested — each once (a Variable two
    sublayers share is listed once), in the order they were assigned.  A subclass only
    assigns its sublayers to attributes; it need not register them."""

    def __init__(self) -> None:
        self._variables: list[Variable] = []

    def add_variable(self, name: str, shape: tuple[int, ...], init: Initializer, dtype: Any, seed: int | None) -> Variable:
        rng = np.random.default_rng(seed)
        var = Variable(init(shape, as_dtype(dtype), rng), name=f"{type(self).__name__}/{name}")
        if "_variables" not in vars(self):  # a subclass whose __init__ did not call Layer's
            self._variables = []
        self._variables.append(var)
        return var

    @property
    def variables(self) -> list[Variable]:
        found: list[Variable] = []
        _collect(self, found, set(), set())
        return found

    @property
    def trainable_variables(self) -> list[Variable]:
        """``variables`` that are trainable (what an optimizer updates)."""
        return [v for v in self.variables if v.trainable]

    def __call__(self, x: Tensor) -> Tensor:
        raise NotImplementedError


def _collect(value: Any, found: list[Variable], variables: set[int], layers: set[int]) -> None:
    """Append the Variables ``value`` holds to ``found`` (depth first, in assignment order),
    skipping those already in ``variables`` and layers already in ``layers`` (ids: a layer
    may be reached twice, or hold a reference back to its parent)."""
    if isinstance(value, Variable):
        if id(value) not in variables:
            variables.add(id(value))
            found.append(value)
    elif isinstance(value, Layer):
        if id(value) in layers:
            return
        layers.add(id(value))
        own = vars(value)
        for v in own.get("_variables", ()):
            _collect(v, found, variables, layers)
        for name, attr in own.items():
            if name != "_variables":
                _collect(attr, found, variables, layers)
    elif isinstance(value, (list, tuple)):
        for item in value:
            _collect(item, found, variables, layers)
    elif isinstance(value, dict):
        for item in value.values():
            _collect(item, found, variables, layers)


def gelu(x: Tensor, approximate: bool = False) -> Tensor:
    """GELU: x * Phi(x), exactly with erf (``approximate=False``, Keras's and torch's
    default) or with the tanh approximation of Hendrycks and Gimpel: one Gelu op each way
    (opkernel's own; TensorFlow composes it from Mul, Erf and Add, which gives the same
    values within float rounding, and on cpu in float32 the same bits)."""
    return _ops().gelu(x, approximate=approximate)  # type: ignore[no-any-return]


def softmax(x: Tensor, axis: int = -1) -> Tensor:
    """Softmax along ``axis``: the Softmax op (which works on the last axis), with the
    axis moved last and back when it is another one."""
    ops = _ops()
    rank = x.ndim
    axis = axis + rank if axis < 0 else axis
    if not 0 <= axis < rank:
        raise InvalidArgumentError(f"softmax: axis {axis} is out of range for a tensor of rank {rank}")
    if axis == rank - 1:
        return ops.softmax(x)  # type: ignore[no-any-return]
    perm = [*range(axis), *range(axis + 1, rank), axis]
    back = [int(p) for p in np.argsort(perm)]
    return ops.transpose(ops.softmax(ops.transpose(x, perm)), back)  # type: ignore[no-any-return]


def clip_by_global_norm(grads: Sequence[Tensor | None], clip_norm: float) -> tuple[list[Tensor | None], Tensor]:
    """``grads`` scaled by ``clip_norm / max(global_norm, clip_norm)``, and the global norm
    (the square root of the sum of every gradient's squares), as ``tf.clip_by_global_norm``;
    None entries stay None."""
    if not clip_norm > 0:
        raise InvalidArgumentError(f"clip_by_global_norm: clip_norm must be positive, got {clip_norm!r}")
    ops = _ops()
    present = [g for g in grads if g is not None]
    if not present:
        raise InvalidArgumentError("clip_by_global_norm: every gradient is None")
    total = ops.add_n([ops.sum(ops.square(g), list(range(g.ndim))) for g in present])
    norm = ops.sqrt(total)
    scale = ops.real_div(clip_norm, ops.maximum(norm, clip_norm))
    return [None if g is None else ops.mul(g, scale) for g in grads], norm


def _activation(name: str | None) -> Callable[[Tensor], Tensor] | None:
    if name is None:
        return None
    if name == "gelu":
        return gelu
    if name == "gelu_tanh":
        return lambda x: gelu(x, approximate=True)
    fn = getattr(_ops(), name, None)
    if fn is None:
        raise InvalidArgumentError(f"unknown activation {name!r}; use the name of a unary op such as 'relu'")
    return fn  # type: ignore[no-any-return]


#: Activations that FusedMatMul and FusedConv2D apply themselves (the others run as their own op).
_FUSED = {None: "Identity", "relu": "Relu", "relu6": "Relu6", "elu": "Elu", "sigmoid": "Sigmoid", "tanh": "Tanh"}


class Dense(Layer):
    """y = activation(x @ kernel + bias): one FusedMatMul op when the activation is
    one it offers (none, relu, relu6, elu, sigmoid, tanh), else MatMul, BiasAdd and
    the activation's op."""

    def __init__(self, units_in: int, units_out: int, activation: str | None = None, *, seed: int | None = 0,
                 dtype: Any = "float32", kernel_initializer: Initializer = glorot_uniform) -> None:
        super().__init__()
        self.kernel = self.add_variable("kernel", (units_in, units_out), kernel_initializer, dtype, seed)
        self.bias = self.add_variable("bias", (units_out,), zeros, dtype, seed)
        self.activation = _activation(activation)
        self._fused = _FUSED.get(activation) if self.kernel.dtype.is_floating else None  # FusedMatMul: floats only

    def __call__(self, x: Tensor) -> Tensor:
        """``x`` of rank 2, or of any rank >= 1 (the last axis holds the features, as in
        Keras's Dense: the leading axes are flattened into one and restored after)."""
        ops = _ops()
        if x.ndim != 2:  # the common rank-2 call reads no shape tuple
            shape = x.shape
            if len(shape) < 1:
                raise InvalidArgumentError("Dense: input must have rank 1 or more, got a scalar")
            flat = ops.reshape(x, [-1, shape[-1] if shape[-1] is not None else self.kernel.shape[0]])
            y = self(flat)
            lead = list(shape[:-1])
            if all(d is not None for d in lead):
                return ops.reshape(y, [*lead, self.kernel.shape[1]])  # type: ignore[no-any-return]
            dims = ops.concat_v2([ops.shape(x)[:-1], np.array([self.kernel.shape[1]], np.int32)], 0)
            return ops.reshape(y, dims)  # type: ignore[no-any-return]
        if self._fused is not None:
            return ops.fused_mat_mul(x, self.kernel, self.bias, activation=self._fused)  # type: ignore[no-any-return]
        y = ops.bias_add(ops.mat_mul(x, self.kernel), self.bias)
        return self.activation(y) if self.activation else y


class Embedding(Layer):
    """A lookup table of ``vocab_size`` vectors of ``dim`` (Keras's Embedding): ``layer(ids)``
    is one GatherV2 of int ids of any shape; its gradient reaches only the rows looked up."""

    def __init__(self, vocab_size: int, dim: int, *, seed: int | None = 0, dtype: Any = "float32",
                 embeddings_initializer: Initializer | None = None) -> None:
        super().__init__()
        init = embeddings_initializer or (lambda shape, dt, rng: rng.uniform(-0.05, 0.05, shape).astype(dt.np))
        self.embeddings = self.add_variable("embeddings", (vocab_size, dim), init, dtype, seed)

    def __call__(self, ids: Any) -> Tensor:
        return _ops().gather_v2(self.embeddings, ids, 0)  # type: ignore[no-any-return]


class Dropout(Layer):
    """Keras's Dropout: while training, each element is zeroed with probability ``rate`` and
    the others scaled by 1 / (1 - rate) (TensorFlow's dropout arithmetic); otherwise the
    input passes unchanged.  ``noise_shape`` (the input's shape by default; a None entry
    takes the input's dimension) lets masks repeat along axes.

    The masks come from an ``ok.random.Generator`` seeded with ``seed`` (from the operating
    system's entropy when None), whose state is a non-trainable Variable of the layer
    (``seed_state``: in ``variables``, not in ``trainable_variables``).  So a traced
    training step draws a new mask on every call, and a model built with the same seed
    draws the same masks, eager or traced."""

    def __init__(self, rate: float, noise_shape: Sequence[int | None] | None = None, seed: int | None = None) -> None:
        super().__init__()
        if not 0 <= float(rate) < 1:
            raise InvalidArgumentError(f"Dropout: rate must be in [0, 1), got {rate!r}")
        self.rate = float(rate)
        self.noise_shape = None if noise_shape is None else list(noise_shape)
        gen = Generator.from_seed(seed) if seed is not None else Generator.from_non_deterministic_state()
        gen.state.trainable = False
        self.generator = gen
        self.seed_state = gen.state

    def __call__(self, x: Tensor, training: bool = False) -> Tensor:
        if not training or self.rate == 0:
            return x
        ops = _ops()
        if self.noise_shape is None:
            shape: Any = ops.shape(x)
        else:
            dims = x.shape
            if len(self.noise_shape) != len(dims):
                raise InvalidArgumentError(f"Dropout: noise_shape {self.noise_shape} must have the input's rank "
                                           f"{len(dims)}")
            shape = [d if d is not None else dims[k] for k, d in enumerate(self.noise_shape)]
            if any(d is None for d in shape):
                raise InvalidArgumentError(f"Dropout: noise_shape {self.noise_shape} leaves a dimension unknown for "
                                           f"an input of shape {list(dims)}")
        uniform = self.generator.uniform(shape, dtype=x.dtype)
        return dropped(x, uniform, self.rate)


class LayerNormalization(Layer):
    """Normalizes the last axis to mean 0 and variance 1, then scales by ``gamma`` and
    shifts by ``beta`` (both learned, of size ``dim``): Keras's LayerNormalization, whose
    default ``epsilon`` is 1e-3 (torch's is 1e-5).  One FusedLayerNorm op each way (with
    second-order gradients); ``fused=False`` composes it of Mean, Sub, Square, Rsqrt and
    Mul ops instead."""

    def __init__(self, dim: int, *, epsilon: float = 1e-3, dtype: Any = "float32", fused: bool = True) -> None:
        super().__init__()
        if not epsilon > 0:
            raise InvalidArgumentError(f"LayerNormalization: epsilon must be positive, got {epsilon!r}")
        self.epsilon = epsilon
        self.fused = fused
        self.gamma = self.add_variable("gamma", (dim,), ones, dtype, None)
        self.beta = self.add_variable("beta", (dim,), zeros, dtype, None)

    def __call__(self, x: Tensor) -> Tensor:
        ops = _ops()
        if self.fused:
            return ops.fused_layer_norm(x, self.gamma, self.beta, epsilon=self.epsilon)  # type: ignore[no-any-return]
        axis = [x.ndim - 1]
        centered = ops.sub(x, ops.mean(x, axis, keep_dims=True))
        variance = ops.mean(ops.square(centered), axis, keep_dims=True)
        inv = ops.rsqrt(ops.add(variance, self.epsilon))
        return ops.add(ops.mul(ops.mul(centered, inv), self.gamma), self.beta)  # type: ignore[no-any-return]


class MultiHeadAttention(Layer):
    """Keras's MultiHeadAttention: ``layer(query, value, key=None, attention_mask=None,
    use_causal_mask=False, training=False)``.

    query [B, T, query_dim], value [B, S, value_input_dim] and key (value when None) are
    projected by Dense layers to ``num_heads`` heads of ``key_dim`` (values: ``value_dim``,
    key_dim by default); the scores ``q @ k^T / sqrt(key_dim)`` (BatchMatMul over [B, H, T, S])
    are masked, softmaxed over S, dropped out while training (``dropout``, with a seeded
    generator as ``Dropout``), applied to the values, and the heads' concatenation is
    projected to ``output_dim`` (query_dim by default).  ``attention_mask`` is bool [B, T, S]
    (or [T, S]), True where a query may attend; ``use_causal_mask`` lets position t attend to
    positions <= t.  A masked score gets -1e9 added (float16: -65500), as Keras adds, so a
    fully masked row is uniform.  With ``return_attention_scores`` the call also returns the
    probabilities [B, H, T, S].  The Dense kernels are Keras's EinsumDense kernels reshaped:
    [query_dim, H * key_dim] and, for the output, [H * value_dim, output_dim]."""

    def __init__(self, num_heads: int, key_dim: int, query_dim: int, *, value_dim: int | None = None,
                 key_input_dim: int | None = None, value_input_dim: int | None = None, output_dim: int | None = None,
                 dropout: float = 0.0, use_bias: bool = True, seed: int | None = 0, dtype: Any = "float32") -> None:
        super().__init__()
        if num_heads < 1 or key_dim < 1 or query_dim < 1:
            raise InvalidArgumentError(f"MultiHeadAttention: num_heads, key_dim and query_dim must be positive, got "
                                       f"{num_heads}, {key_dim}, {query_dim}")
        self.num_heads, self.key_dim = num_heads, key_dim
        self.value_dim = value_dim or key_dim
        value_in = value_input_dim or query_dim
        key_in = key_input_dim or value_in
        out = output_dim or query_dim
        base = 0 if seed is None else seed
        self.query_dense = Dense(query_dim, num_heads * key_dim, seed=base, dtype=dtype)
        self.key_dense = Dense(key_in, num_heads * key_dim, seed=base + 1, dtype=dtype)
        self.value_dense = Dense(value_in, num_heads * self.value_dim, seed=base + 2, dtype=dtype)
        self.output_dense = Dense(num_heads * self.value_dim, out, seed=base + 3, dtype=dtype)
        if not use_bias:
            for d in (self.query_dense, self.key_dense, self.value_dense, self.output_dense):
                d.bias.assign(np.zeros(d.bias.shape, d.bias.dtype.np))
                d.bias.trainable = False
        self.dropout = Dropout(dropout, seed=None if seed is None else seed + 4) if dropout else None

    def _heads(self, x: Tensor, dense: Dense, size: int) -> Tensor:
        """[B, L, dim] -> [B, H, L, size]."""
        ops = _ops()
        b, length = x.shape[0], x.shape[1]
        if b is None or length is None:
            raise InvalidArgumentError(f"MultiHeadAttention: the batch and sequence sizes must be known, got {x.shape}")
        y = ops.reshape(dense(x), [b, length, self.num_heads, size])
        return ops.transpose(y, [0, 2, 1, 3])  # type: ignore[no-any-return]

    def __call__(self, query: Tensor, value: Tensor, key: Tensor | None = None,  # type: ignore[override]
                 attention_mask: Any = None, use_causal_mask: bool = False, training: bool = False,
                 return_attention_scores: bool = False) -> Any:
        ops = _ops()
        key = value if key is None else key
        for name, t in (("query", query), ("value", value), ("key", key)):
            if t.ndim != 3:
                raise InvalidArgumentError(f"MultiHeadAttention: {name} must have rank 3 [batch, length, dim], got "
                                           f"shape {list(t.shape)}")
        q = self._heads(query, self.query_dense, self.key_dim)
        k = self._heads(key, self.key_dense, self.key_dim)
        v = self._heads(value, self.value_dense, self.value_dim)
        scores = ops.mul(ops.batch_mat_mul(q, k, adj_y=True), 1.0 / math.sqrt(self.key_dim))
        t_len, s_len = query.shape[1], value.shape[1]
        mask = None
        if attention_mask is not None:
            mask = attention_mask if isinstance(attention_mask, Tensor) else np.asarray(attention_mask)
            if as_dtype(mask.dtype).name != "bool":  # 0/1 (or any numbers): nonzero attends
                mask = ops.not_equal(mask, 0)
            if mask.ndim == 3:  # [B, T, S]: the same for every head
                mask = ops.expand_dims(mask, 1)
        if use_causal_mask:
            causal = np.tril(np.ones((t_len, s_len), bool))
            mask = causal if mask is None else ops.logical_and(mask, causal)
        if mask is not None:
            big = -65500.0 if scores.dtype.name == "float16" else -1e9
            keep = ops.cast(mask, DstT=scores.dtype)
            scores = ops.add(scores, ops.mul(ops.sub(1.0, keep), big))
        probs = ops.softmax(scores)
        dropped = self.dropout(probs, training=training) if self.dropout is not None else probs
        heads = ops.transpose(ops.batch_mat_mul(dropped, v), [0, 2, 1, 3])
        b = query.shape[0]
        out = self.output_dense(ops.reshape(heads, [b, t_len, self.num_heads * self.value_dim]))
        return (out, probs) if return_attention_scores else out


class BatchNormalization(Layer):
    """Keras's BatchNormalization over the last axis (``axis=-1``) or NCHW's axis 1: one
    FusedBatchNormV3 op.  While training (``layer(x, training=True)``) it normalizes with
    the batch's statistics and moves ``moving_mean`` and ``moving_variance`` (non-trainable
    Variables) toward them, ``moving = moving * momentum + batch * (1 - momentum)`` with the
    batch's uncorrected variance, as Keras 3 does; otherwise it normalizes with the moving
    statistics.  Inputs of any rank >= 2 with the features on the last axis are viewed as
    [rows, 1, 1, features] for the op; ``axis=1`` takes NCHW images (rank 4)."""

    def __init__(self, dim: int, *, axis: int = -1, momentum: float = 0.99, epsilon: float = 1e-3,
                 center: bool = True, scale: bool = True, dtype: Any = "float32") -> None:
        super().__init__()
        if axis not in (-1, 1):
            raise InvalidArgumentError(f"BatchNormalization: axis must be -1 (features last) or 1 (NCHW), got {axis}")
        if not epsilon > 0 or not 0 <= momentum <= 1:
            raise InvalidArgumentError(f"BatchNormalization: need epsilon > 0 and momentum in [0, 1], got {epsilon!r} "
                                       f"and {momentum!r}")
        self.axis, self.momentum, self.epsilon = axis, float(momentum), float(epsilon)
        self.gamma = self.add_variable("gamma", (dim,), ones, "float32", None)
        self.beta = self.add_variable("beta", (dim,), zeros, "float32", None)
        self.gamma.trainable, self.beta.trainable = scale, center
        self.moving_mean = self.add_variable("moving_mean", (dim,), zeros, "float32", None)
        self.moving_variance = self.add_variable("moving_variance", (dim,), ones, "float32", None)
        self.moving_mean.trainable = self.moving_variance.trainable = False

    def __call__(self, x: Tensor, training: bool = False) -> Tensor:
        ops = _ops()
        shape = x.shape
        if self.axis == 1:
            if len(shape) != 4:
                raise InvalidArgumentError(f"BatchNormalization: axis=1 takes NCHW images (rank 4), got shape {list(shape)}")
            x4, fmt = x, "NCHW"
        elif len(shape) == 4:
            x4, fmt = x, "NHWC"
        elif len(shape) >= 2:
            x4, fmt = ops.reshape(x, [-1, 1, 1, shape[-1]]), "NHWC"
        else:
            raise InvalidArgumentError(f"BatchNormalization: input must have rank >= 2, got shape {list(shape)}")
        # Training reads no moving statistic (empty inputs, as Keras's fused call passes): they are
        # updated below, after the op, and a tape must not see its inputs change.
        none = np.zeros(0, np.float32)
        stats = (none, none) if training else (self.moving_mean, self.moving_variance)
        y, _, _, batch_mean, batch_var, _ = ops.fused_batch_norm_v3(
            x4, self.gamma, self.beta, *stats, epsilon=self.epsilon, data_format=fmt, is_training=training)
        if training:
            keep, take = np.float32(self.momentum), np.float32(1 - self.momentum)
            ops.assign(self.moving_mean, ops.add(ops.mul(self.moving_mean, keep), ops.mul(batch_mean, take)))
            ops.assign(self.moving_variance, ops.add(ops.mul(self.moving_variance, keep), ops.mul(batch_var, take)))
        return y if y.shape == shape else ops.reshape(y, [d if d is not None else -1 for d in shape])  # type: ignore[no-any-return]


class Conv2D(Layer):
    """NHWC convolution with a bias: y = activation(conv2d(x, kernel) + bias), one
    FusedConv2D op for the activations it offers (as Dense's FusedMatMul)."""

    def __init__(self, channels_in: int, channels_out: int, kernel_size: int | Sequence[int], *,
                 strides: int = 1, padding: str = "SAME", activation: str | None = None,
                 seed: int | None = 0, dtype: Any = "float32", kernel_initializer: Initializer = he_normal) -> None:
        super().__init__()
        kh, kw = (kernel_size, kernel_size) if isinstance(kernel_size, int) else tuple(kernel_size)
        self.kernel = self.add_variable("kernel", (kh, kw, channels_in, channels_out), kernel_initializer, dtype, seed)
        self.bias = self.add_variable("bias", (channels_out,), zeros, dtype, seed)
        self.strides = [1, strides, strides, 1]
        self.padding = padding
        self.activation = _activation(activation)
        self._fused = _FUSED.get(activation) if self.kernel.dtype.is_floating else None  # FusedConv2D: floats only

    def __call__(self, x: Tensor) -> Tensor:
        ops = _ops()
        if self._fused is not None:
            return ops.fused_conv2d(  # type: ignore[no-any-return]
                x, self.kernel, self.bias, strides=self.strides, padding=self.padding, activation=self._fused
            )
        y = ops.bias_add(ops.conv2d(x, self.kernel, strides=self.strides, padding=self.padding), self.bias)
        return self.activation(y) if self.activation else y


class DepthwiseConv2D(Layer):
    """Keras's DepthwiseConv2D (NHWC): each input channel convolved with its own
    ``depth_multiplier`` filters, y = activation(depthwise_conv2d(x, kernel) + bias) with
    ``channels_in * depth_multiplier`` output channels; a DepthwiseConv2dNative op."""

    def __init__(self, channels_in: int, kernel_size: int | Sequence[int], *, depth_multiplier: int = 1,
                 strides: int = 1, padding: str = "VALID", dilation_rate: int = 1, activation: str | None = None,
                 use_bias: bool = True, seed: int | None = 0, dtype: Any = "float32",
                 kernel_initializer: Initializer = glorot_uniform) -> None:
        super().__init__()
        kh, kw = (kernel_size, kernel_size) if isinstance(kernel_size, int) else tuple(kernel_size)
        self.kernel = self.add_variable("depthwise_kernel", (kh, kw, channels_in, depth_multiplier),
                                        kernel_initializer, dtype, seed)
        self.bias = self.add_variable("bias", (channels_in * depth_multiplier,), zeros, dtype, seed) if use_bias else None
        self.strides = [1, strides, strides, 1]
        self.dilations = [1, dilation_rate, dilation_rate, 1]
        self.padding = padding
        self.activation = _activation(activation)

    def __call__(self, x: Tensor) -> Tensor:
        ops = _ops()
        y = ops.depthwise_conv2d_native(x, self.kernel, strides=self.strides, padding=self.padding,
                                        dilations=self.dilations)
        if self.bias is not None:
            y = ops.bias_add(y, self.bias)
        return self.activation(y) if self.activation else y


class MaxPool2D(Layer):
    def __init__(self, size: int = 2, strides: int | None = None, padding: str = "VALID") -> None:
        super().__init__()
        s = strides or size
        self.ksize, self.strides, self.padding = [1, size, size, 1], [1, s, s, 1], padding

    def __call__(self, x: Tensor) -> Tensor:
        return _ops().max_pool(x, ksize=self.ksize, strides=self.strides, padding=self.padding)  # type: ignore[no-any-return]


class Flatten(Layer):
    def __call__(self, x: Tensor) -> Tensor:
        from .ops._grad_util import constant

        batch, rest = x.shape[0], x.shape[1:]
        if batch is None and all(d is not None for d in rest):  # traced with an unknown batch
            return _ops().reshape(x, constant((-1, math.prod(rest)), x))
        return _ops().reshape(x, constant((batch, -1), x))  # type: ignore[no-any-return]


class Sequential(Layer):
    def __init__(self, layers: Iterable[Layer]) -> None:
        super().__init__()
        self.layers = list(layers)

    def __call__(self, x: Tensor) -> Tensor:
        for layer in self.layers:
            x = layer(x)
        return x


def sparse_softmax_cross_entropy(logits: Tensor, labels: Any, reduction: str = "mean") -> Tensor:
    """Cross-entropy of integer ``labels`` under ``softmax(logits)``, averaged over the
    batch (``reduction="sum"``: summed): one SparseSoftmaxCrossEntropyLoss op, whose
    gradient is its own backprop output."""
    return _ops().sparse_softmax_cross_entropy_loss(logits, labels, reduction=reduction).loss  # type: ignore[no-any-return]


#: What an optimizer updates: a Ref ``Variable`` (through ApplyAdam, ...) or a
#: ``ResourceVariable`` (through ResourceApplyAdam, ...); its slots are of its kind.
AnyVariable = Variable | ResourceVariable


class Optimizer:
    """Applies gradients to variables: ``ok.Variable``s in place (ApplyGradientDescent,
    ApplyMomentum, ApplyAdam) and ``ok.ResourceVariable``s through their resource ops
    (ResourceApply*); slots (momentum, moments) are variables of the same kind."""

    #: Hyperparameters read through variables (``_hyper``): setting one after a step was
    #: traced by ``ok.function`` reaches the replays, as Keras optimizers' do.
    _HYPER: tuple[str, ...] = ()

    def __init__(self) -> None:
        self._slots: dict[int, dict[str, Any]] = {}
        self._scalars: dict[tuple[float, Any, str], Tensor] = {}
        self._hypers: dict[tuple[str, DType, str], Variable] = {}
        self.iterations = 0

    def __setattr__(self, name: str, value: Any) -> None:
        object.__setattr__(self, name, value)
        if name in self._HYPER:
            for (hyper, dtype, _), var in self.__dict__.get("_hypers", {}).items():
                if hyper == name:  # a new value, not an update in place: snapshots keep theirs
                    var._value = var._backend.from_numpy(np.asarray(value, dtype.np))
                    var._version += 1

    def _hyper(self, name: str, var: AnyVariable) -> Tensor:
        """Hyperparameter ``name`` as a scalar variable of ``var``'s dtype on its backend."""
        key = (name, var.dtype, var.backend)
        h = self._hypers.get(key)
        if h is None:
            value = to_tensor(np.asarray(getattr(self, name), var.dtype.np), backend=var.backend)
            h = self._hypers[key] = Variable(value, trainable=False, name=f"{type(self).__name__}/{name}")
        return h

    def slot(self, var: AnyVariable, name: str) -> Any:
        """The slot ``name`` of ``var`` (zeros at first): a Variable of ``var``'s kind."""
        slots = self._slots.setdefault(id(var), {})
        if name not in slots:
            zero = to_tensor(np.zeros(var.shape, var.dtype.np), backend=var.backend)
            if isinstance(var, ResourceVariable):
                with not_tracing():  # made once, for real: a traced step captures it as any variable
                    slots[name] = ResourceVariable(zero, trainable=False, backend=var.backend)
            else:
                slots[name] = Variable(zero, trainable=False)
        return slots[name]

    def _scalar(self, value: float, var: AnyVariable) -> Tensor:
        """``value`` as a scalar of ``var``'s dtype on its backend, made once (tensors are immutable)."""
        try:
            key = (value, var.dtype, var.backend)
            t = self._scalars.get(key)
        except TypeError:  # an unhashable value (a numpy array): made each time
            return to_tensor(np.asarray(value, var.dtype.np), backend=var.backend)
        if t is None:
            if len(self._scalars) >= 64:  # a schedule changing the rate every step must not grow this
                self._scalars.clear()
            t = self._scalars[key] = to_tensor(np.asarray(value, var.dtype.np), backend=var.backend)
        return t

    def _learning_rate(self, learning_rate: float | Callable[[int], float]) -> None:
        """Set the learning rate: a number, or a schedule (``step -> rate``, such as
        ``CosineDecay``) that ``apply_gradients`` evaluates at each step, eagerly."""
        if callable(learning_rate):
            self.schedule: Callable[[int], float] | None = learning_rate
            self.learning_rate = float(learning_rate(0))
        else:
            self.schedule = None
            self.learning_rate = learning_rate

    def apply_gradients(self, grads_and_vars: Iterable[tuple[Tensor | None, AnyVariable]]) -> None:
        schedule = self.__dict__.get("schedule")
        if schedule is not None:
            if is_tracing():
                raise InvalidArgumentError(
                    f"{type(self).__name__}: a learning-rate schedule is evaluated in Python at each eager step, "
                    "and a step traced by ok.function replays without running Python: set "
                    "opt.learning_rate = schedule(step) before each call of the traced step instead"
                )
            self.learning_rate = float(schedule(self.iterations))
        self.iterations += 1
        for g, v in grads_and_vars:
            if g is not None:
                self._apply(g, v)

    def _apply(self, grad: Tensor, var: AnyVariable) -> None:
        raise NotImplementedError


class SGD(Optimizer):
    """Gradient descent, with optional (Nesterov) momentum: ApplyGradientDescent / ApplyMomentum."""

    _HYPER = ("learning_rate", "momentum")

    def __init__(self, learning_rate: float | Callable[[int], float] = 0.01, momentum: float = 0.0,
                 nesterov: bool = False) -> None:
        super().__init__()
        self._learning_rate(learning_rate)
        self.momentum, self.nesterov = momentum, nesterov

    def _apply(self, grad: Tensor, var: AnyVariable) -> None:
        ops = _ops()
        lr = self._hyper("learning_rate", var)
        if isinstance(var, ResourceVariable):
            if self.momentum:
                ops.resource_apply_momentum(var.handle, self.slot(var, "momentum").handle, lr, grad,
                                            self._hyper("momentum", var), use_nesterov=self.nesterov)
            else:
                ops.resource_apply_gradient_descent(var.handle, lr, grad)
        elif self.momentum:  # whether momentum is used, and nesterov, pick the op: fixed when traced
            ops.apply_momentum(var, self.slot(var, "momentum"), lr, grad, self._hyper("momentum", var),
                               use_nesterov=self.nesterov)
        else:
            ops.apply_gradient_descent(var, lr, grad)


class Adam(Optimizer):
    """Adam (Kingma & Ba) through the ApplyAdam op.

    The step count that the bias correction uses is a Variable per dtype and
    backend, advanced by an ``AssignAdd`` once per ``apply_gradients`` call, and
    ``beta ** step`` is computed by a ``Pow`` op: a training step traced by
    ``ok.function`` then advances it on every replay, as eager steps do."""

    _HYPER: tuple[str, ...] = ("learning_rate", "beta1", "beta2", "epsilon")

    def __init__(self, learning_rate: float | Callable[[int], float] = 0.001, beta1: float = 0.9, beta2: float = 0.999,
                 epsilon: float = 1e-7) -> None:
        super().__init__()
        self._learning_rate(learning_rate)
        self.beta1, self.beta2, self.epsilon = beta1, beta2, epsilon
        self._steps: dict[tuple[DType, str], Variable] = {}
        #: The advanced step of each (dtype, backend) in the current apply_gradients call,
        #: and beta1 ** step and beta2 ** step (computed once a call, not once a variable).
        self._advanced: dict[tuple[DType, str], Tensor] = {}
        self._powers: dict[tuple[DType, str], tuple[Tensor, Tensor]] = {}

    def apply_gradients(self, grads_and_vars: Iterable[tuple[Tensor | None, AnyVariable]]) -> None:
        self._advanced, self._powers = {}, {}
        try:
            super().apply_gradients(grads_and_vars)
        finally:
            self._advanced, self._powers = {}, {}

    def _step(self, var: AnyVariable) -> Tensor:
        key = (var.dtype, var.backend)
        t = self._advanced.get(key)
        if t is None:
            step = self._steps.get(key)
            if step is None:  # made at this call's count minus one: the AssignAdd below brings it up
                start = to_tensor(np.asarray(self.iterations - 1, var.dtype.np), backend=var.backend)
                step = self._steps[key] = Variable(start, trainable=False)
            t = self._advanced[key] = _ops().assign_add(step, self._scalar(1.0, var))
        return t

    def _apply(self, grad: Tensor, var: AnyVariable) -> None:
        ops = _ops()
        t = self._step(var)

        def s(name: str) -> Tensor:
            return self._hyper(name, var)

        key = (var.dtype, var.backend)
        powers = self._powers.get(key)
        if powers is None:
            powers = self._powers[key] = (ops.pow(s("beta1"), t), ops.pow(s("beta2"), t))
        hypers = (*powers, s("learning_rate"), s("beta1"), s("beta2"), s("epsilon"))
        if isinstance(var, ResourceVariable):
            ops.resource_apply_adam(var.handle, self.slot(var, "m").handle, self.slot(var, "v").handle, *hypers, grad)
        else:
            ops.apply_adam(var, self.slot(var, "m"), self.slot(var, "v"), *hypers, grad)


class AdamW(Adam):
    """Adam with decoupled weight decay (Loshchilov & Hutter), as Keras's and torch's
    AdamW: each step first shrinks the variable by ``learning_rate * weight_decay`` of
    itself (an AssignSub), then takes the Adam step.  Keras's default decay, 0.004."""

    _HYPER = ("learning_rate", "beta1", "beta2", "epsilon", "weight_decay")

    def __init__(self, learning_rate: float | Callable[[int], float] = 0.001, weight_decay: float = 0.004,
                 beta1: float = 0.9, beta2: float = 0.999, epsilon: float = 1e-7) -> None:
        if not weight_decay >= 0:
            raise InvalidArgumentError(f"AdamW: weight_decay must be 0 or more, got {weight_decay!r}")
        super().__init__(learning_rate, beta1, beta2, epsilon)
        self.weight_decay = weight_decay

    def _apply(self, grad: Tensor, var: AnyVariable) -> None:
        ops = _ops()
        shape, want = tuple(grad.shape), tuple(var.shape)
        if None not in shape and None not in want and shape != want:  # before the decay changes anything
            op = "ResourceApplyAdam" if isinstance(var, ResourceVariable) else "ApplyAdam"
            raise InvalidArgumentError(
                f"op {op!r}: 'grad' must have the shape of 'var', {list(want)}, got {list(shape)}; nothing was updated",
                op=op,
            )
        decay = ops.mul(self._hyper("learning_rate", var), self._hyper("weight_decay", var))
        if isinstance(var, ResourceVariable):
            value = var.read_value()
            ops.assign_sub_variable_op(var.handle, ops.mul(value, decay))
        else:
            ops.assign_sub(var, ops.mul(var, decay))
        super()._apply(grad, var)


# ---------------------------------------------------------------- learning-rate schedules
# A schedule maps the step (0 for the first apply_gradients) to a learning rate; an
# optimizer given one as its learning_rate evaluates it at each eager step.

class ConstantSchedule:
    """The same rate at every step."""

    def __init__(self, rate: float) -> None:
        self.rate = float(rate)

    def __call__(self, step: int) -> float:
        return self.rate


class StepDecay:
    """``initial * decay_rate ** (step / decay_steps)``, the exponent floored with
    ``staircase`` (Keras's ExponentialDecay)."""

    def __init__(self, initial: float, decay_rate: float, decay_steps: int, staircase: bool = True) -> None:
        if decay_steps <= 0:
            raise InvalidArgumentError(f"StepDecay: decay_steps must be positive, got {decay_steps}")
        self.initial, self.decay_rate, self.decay_steps, self.staircase = initial, decay_rate, decay_steps, staircase

    def __call__(self, step: int) -> float:
        p = step / self.decay_steps
        return float(self.initial * self.decay_rate ** (math.floor(p) if self.staircase else p))


class CosineDecay:
    """Keras's CosineDecay: from ``initial`` down to ``alpha * initial`` along half a
    cosine over ``decay_steps``, then constant."""

    def __init__(self, initial: float, decay_steps: int, alpha: float = 0.0) -> None:
        if decay_steps <= 0:
            raise InvalidArgumentError(f"CosineDecay: decay_steps must be positive, got {decay_steps}")
        self.initial, self.decay_steps, self.alpha = initial, decay_steps, alpha

    def __call__(self, step: int) -> float:
        done = min(step, self.decay_steps) / self.decay_steps
        cosine = 0.5 * (1.0 + math.cos(math.pi * done))
        return float(self.initial * ((1.0 - self.alpha) * cosine + self.alpha))


class LinearWarmup:
    """A rate rising linearly from ``start`` to ``schedule(0)`` over ``warmup_steps``, then
    ``schedule(step - warmup_steps)``."""

    def __init__(self, schedule: Callable[[int], float], warmup_steps: int, start: float = 0.0) -> None:
        if warmup_steps < 0:
            raise InvalidArgumentError(f"LinearWarmup: warmup_steps must be 0 or more, got {warmup_steps}")
        self.schedule, self.warmup_steps, self.start = schedule, warmup_steps, start

    def __call__(self, step: int) -> float:
        if step < self.warmup_steps:
            return float(self.start + (self.schedule(0) - self.start) * step / self.warmup_steps)
        return float(self.schedule(step - self.warmup_steps))
