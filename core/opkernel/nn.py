"""The few pieces a user expects to train with: layers holding Variables,
seeded initialisers, and optimisers that update Variables in place through
registered ops (so training runs on whichever backend is active)."""

from __future__ import annotations

import math
from typing import Any, Callable, Iterable, Sequence

import numpy as np

from .dtypes import DType, as_dtype
from .engine import to_tensor
from .errors import InvalidArgumentError
from .tensor import Tensor, Variable, ops_module as _ops

__all__ = [
    "glorot_uniform", "he_normal", "zeros", "Layer", "Dense", "Conv2D", "MaxPool2D", "Flatten", "Sequential",
    "Optimizer", "SGD", "Adam", "sparse_softmax_cross_entropy",
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


def _activation(name: str | None) -> Callable[[Tensor], Tensor] | None:
    if name is None:
        return None
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
        ops = _ops()
        if self._fused is not None:
            return ops.fused_mat_mul(x, self.kernel, self.bias, activation=self._fused)  # type: ignore[no-any-return]
        y = ops.bias_add(ops.mat_mul(x, self.kernel), self.bias)
        return self.activation(y) if self.activation else y


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


class Optimizer:
    """Applies gradients to Variables in place; slots (momentum, moments) are Variables too."""

    #: Hyperparameters read through variables (``_hyper``): setting one after a step was
    #: traced by ``ok.function`` reaches the replays, as Keras optimizers' do.
    _HYPER: tuple[str, ...] = ()

    def __init__(self) -> None:
        self._slots: dict[int, dict[str, Variable]] = {}
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

    def _hyper(self, name: str, var: Variable) -> Tensor:
        """Hyperparameter ``name`` as a scalar variable of ``var``'s dtype on its backend."""
        key = (name, var.dtype, var.backend)
        h = self._hypers.get(key)
        if h is None:
            value = to_tensor(np.asarray(getattr(self, name), var.dtype.np), backend=var.backend)
            h = self._hypers[key] = Variable(value, trainable=False, name=f"{type(self).__name__}/{name}")
        return h

    def slot(self, var: Variable, name: str) -> Variable:
        slots = self._slots.setdefault(id(var), {})
        if name not in slots:
            zero = to_tensor(np.zeros(var.shape, var.dtype.np), backend=var.backend)
            slots[name] = Variable(zero, trainable=False)
        return slots[name]

    def _scalar(self, value: float, var: Variable) -> Tensor:
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

    def apply_gradients(self, grads_and_vars: Iterable[tuple[Tensor | None, Variable]]) -> None:
        self.iterations += 1
        for g, v in grads_and_vars:
            if g is not None:
                self._apply(g, v)

    def _apply(self, grad: Tensor, var: Variable) -> None:
        raise NotImplementedError


class SGD(Optimizer):
    """Gradient descent, with optional (Nesterov) momentum: ApplyGradientDescent / ApplyMomentum."""

    _HYPER = ("learning_rate", "momentum")

    def __init__(self, learning_rate: float = 0.01, momentum: float = 0.0, nesterov: bool = False) -> None:
        super().__init__()
        self.learning_rate, self.momentum, self.nesterov = learning_rate, momentum, nesterov

    def _apply(self, grad: Tensor, var: Variable) -> None:
        ops = _ops()
        lr = self._hyper("learning_rate", var)
        if self.momentum:  # whether momentum is used, and nesterov, pick the op: fixed when traced
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

    _HYPER = ("learning_rate", "beta1", "beta2", "epsilon")

    def __init__(self, learning_rate: float = 0.001, beta1: float = 0.9, beta2: float = 0.999, epsilon: float = 1e-7) -> None:
        super().__init__()
        self.learning_rate, self.beta1, self.beta2, self.epsilon = learning_rate, beta1, beta2, epsilon
        self._steps: dict[tuple[DType, str], Variable] = {}
        #: The advanced step of each (dtype, backend) in the current apply_gradients call.
        self._advanced: dict[tuple[DType, str], Tensor] = {}

    def apply_gradients(self, grads_and_vars: Iterable[tuple[Tensor | None, Variable]]) -> None:
        self._advanced = {}
        try:
            super().apply_gradients(grads_and_vars)
        finally:
            self._advanced = {}

    def _step(self, var: Variable) -> Tensor:
        key = (var.dtype, var.backend)
        t = self._advanced.get(key)
        if t is None:
            step = self._steps.get(key)
            if step is None:  # made at this call's count minus one: the AssignAdd below brings it up
                start = to_tensor(np.asarray(self.iterations - 1, var.dtype.np), backend=var.backend)
                step = self._steps[key] = Variable(start, trainable=False)
            t = self._advanced[key] = _ops().assign_add(step, self._scalar(1.0, var))
        return t

    def _apply(self, grad: Tensor, var: Variable) -> None:
        ops = _ops()
        t = self._step(var)

        def s(name: str) -> Tensor:
            return self._hyper(name, var)

        ops.apply_adam(
            var, self.slot(var, "m"), self.slot(var, "v"), ops.pow(s("beta1"), t), ops.pow(s("beta2"), t),
            s("learning_rate"), s("beta1"), s("beta2"), s("epsilon"), grad,
        )
