"""Partitioning rules: how an op splits over chunks.

A rule is a small frozen value that says what an op needs of its inputs' chunks;
``ok.dask.apply`` turns it into a Dask graph.  Built-in ops take their rules from
the table at the end of this module; an op package declares its own with
:func:`declare` from its ``opkernel_register_ops`` hook (this module does not
import dask, so declaring costs nothing where Dask is not installed).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any, Union

from .._provenance import Provider
from ..errors import InvalidArgumentError

__all__ = [
    "Elementwise", "Reduction", "Window", "Contraction", "Batch", "Rule", "RULES",
    "declare", "rule_for", "NoPartitioningRuleError",
]


@dataclass(frozen=True)
class Elementwise:
    """Each output element depends on the inputs' elements at the same (broadcast) index.

    All inputs broadcast against each other (numpy rules); a list input (``AddN``)
    counts as its items.  Dask's ``blockwise`` runs the op on matching chunks.
    """


@dataclass(frozen=True)
class Reduction:
    """A reduction over the axes given by input ``axes_input`` (``Sum(input, axis)``).

    ``kind``: ``"associative"`` -- the op itself combines partial results
    (Sum, Max, Min, Prod, All, Any); ``"mean"`` -- partial sums with counts
    (Mean); ``"arg"`` -- one axis, an index output: each chunk's winners with their
    global indices, and the op run once more over the winners (ArgMax, ArgMin).
    The op needs a ``keep_dims`` attr for ``associative`` and ``mean``.
    """

    kind: str = "associative"
    axes_input: int = 1

    def __post_init__(self) -> None:
        if self.kind not in ("associative", "mean", "arg"):
            raise InvalidArgumentError(
                f"Reduction kind must be 'associative', 'mean' or 'arg', got {self.kind!r}"
            )


@dataclass(frozen=True)
class Window:
    """A sliding window over the two spatial axes of a 4-D input (input 0).

    The window's size comes from attr ``ksize`` (a pool) or from the spatial
    dimensions of input ``filter`` (an HWIO filter: a convolution, whose input
    depth is contracted; the output depth is the filter's last dimension).
    ``strides``, ``padding`` (``SAME``/``VALID``/``EXPLICIT``), ``dilations``,
    ``explicit_paddings`` and ``data_format`` name the op's attrs (None: the op has
    no such attr: dilation 1, no explicit padding, NHWC).  Chunks overlap by the
    window's halo, start on the stride grid, and each result is trimmed, so it
    equals the single-array result, SAME padding at the array's edges included.
    """

    ksize: str | None = "ksize"
    filter: int | None = None
    strides: str = "strides"
    padding: str = "padding"
    dilations: str | None = None
    explicit_paddings: str | None = None
    data_format: str | None = None

    def __post_init__(self) -> None:
        if (self.ksize is None) == (self.filter is None):
            raise InvalidArgumentError("Window needs exactly one of ksize= (an attr name) and filter= (an input index)")


@dataclass(frozen=True)
class Contraction:
    """Matrix product over the last two axes: ``MatMul`` (2-D) or ``BatchMatMul``
    (leading batch axes, broadcast).  ``transpose_a``/``transpose_b`` name the
    attrs that transpose (or adjoint) an operand.  Each pair of chunks runs the op,
    and partial products are summed over the inner dimension's chunks."""

    transpose_a: str = "transpose_a"
    transpose_b: str = "transpose_b"
    batched: bool = False


@dataclass(frozen=True)
class Batch:
    """Independent along the leading ``axes`` axes of every input: the other axes
    are put in one chunk, and the op runs on each batch chunk.  A negative ``axes``
    counts from the end: ``Batch(-1)`` is every axis but the last (Softmax over the
    last axis), so a rank-1 input is one chunk.  Inputs after the first that have
    fewer dimensions (a bias, a filter) are passed whole.  The op's outputs keep the
    leading axes."""

    axes: int = 1

    def __post_init__(self) -> None:
        if self.axes == 0:
            raise InvalidArgumentError("Batch axes must be >= 1 (the leading axes) or <= -1 (all but the last -axes), got 0")

    def batch_axes(self, ndim: int) -> int:
        """How many leading axes of a rank-``ndim`` input are batch axes."""
        return self.axes if self.axes > 0 else max(ndim + self.axes, 0)


Rule = Union[Elementwise, Reduction, Window, Contraction, Batch]
_RULE_TYPES = (Elementwise, Reduction, Window, Contraction, Batch)

_ELEMENTWISE = (
    "Abs Add AddN Angle Atan Cast Ceil ClipByValue Complex ComplexAbs Conj Cos Cosh Elu Equal Erf Exp Expm1 Floor "
    "FloorDiv FloorMod Sinh "
    "Greater GreaterEqual Identity Imag Less LessEqual Log Log1p LogicalAnd LogicalNot LogicalOr Maximum "
    "Minimum Mul Neg NotEqual OnesLike Pow Real RealDiv Relu Relu6 ReluGrad Rsqrt SelectV2 Selu Sigmoid Sign "
    "Sin Softplus Sqrt Square StopGradient Sub Tanh ZerosLike "
    "Tan Asin Acos Asinh Acosh Atanh Reciprocal Round IsNan IsInf IsFinite Atan2 SquaredDifference LeakyRelu "
    "LeakyReluGrad EluGrad BitwiseAnd BitwiseOr BitwiseXor Gelu GeluGrad"
).split()

#: The rules of the built-in ops (op name -> rule).
RULES: dict[str, Rule] = {
    **{name: Elementwise() for name in _ELEMENTWISE},
    **{name: Reduction("associative") for name in ("Sum", "Max", "Min", "Prod", "All", "Any")},
    "Mean": Reduction("mean"),
    "ArgMax": Reduction("arg"),
    "ArgMin": Reduction("arg"),
    "MaxPool": Window(ksize="ksize", explicit_paddings="explicit_paddings", data_format="data_format"),
    "AvgPool": Window(ksize="ksize", data_format="data_format"),
    "Conv2D": Window(
        ksize=None, filter=1, dilations="dilations", explicit_paddings="explicit_paddings", data_format="data_format"
    ),
    "MatMul": Contraction(),
    "BatchMatMul": Contraction("adj_x", "adj_y", batched=True),
    "Softmax": Batch(-1),  # over the last axis: every other axis may be split
    "SoftmaxGrad": Batch(-1),
    "LogSoftmax": Batch(-1),
    "BiasAdd": Batch(),
}

# op -> the declarations made, oldest first: (rule, declaring provider, the op's provider
# when the declaration overrode it).  The newest is in force; removing a provider's
# declarations (a plugin rolled back) brings the one before back.
_DECLARED: dict[str, list[tuple[Rule, Provider | None, Provider | None]]] = {}
_lock = threading.Lock()


class NoPartitioningRuleError(InvalidArgumentError):
    """The op has no partitioning rule, so ``ok.dask.apply`` cannot split it."""


def declare(op: str, rule: Rule, *, override: bool = False) -> Rule:
    """Declare how op ``op`` partitions over chunks (for ``ok.dask.apply``).

    An op package calls it from its ``opkernel_register_ops`` hook, next to the
    op's spec::

        ok.dask.declare("Addons>MedianPool2D", ok.dask.Window(ksize="ksize"))

    A declaration replaces an earlier one for the same op (and overrides the
    built-in table).  An op's rule belongs to the op's provider, as its gradient
    does: declaring the rule of an op that another distribution (or script)
    registered needs ``override=True``, and is then warned about (PluginWarning)
    naming both; without it, an AlreadyExistsError.  Returns ``rule``.
    """
    if not isinstance(op, str) or not op:
        raise InvalidArgumentError(f"declare() takes an op name, got {op!r}")
    if not isinstance(rule, _RULE_TYPES):
        names = ", ".join(t.__name__ for t in _RULE_TYPES)
        raise InvalidArgumentError(f"op {op!r}: a partitioning rule must be one of {names}, got {rule!r}", op=op)
    from .._provenance import current_provider

    overridden = _check_owner(op, override)
    with _lock:
        _DECLARED.setdefault(op, []).append((rule, current_provider(), overridden))
    return rule


def _check_owner(op: str, override: bool) -> Provider | None:
    """AlreadyExistsError, or a warning with ``override``, when ``op`` is another party's;
    returns the op's provider when the declaration overrides it."""
    import warnings

    from .. import op_registry, plugins
    from .._provenance import current_provider
    from ..errors import AlreadyExistsError

    plugins.ensure_loaded()  # the installed ops and their providers (a plugin's own hook sees what is loaded so far)
    if not op_registry.is_registered(op):
        return None  # an op not registered yet: nobody to take it from
    owner = op_registry.get_op_def(op).provider
    me = current_provider()
    if owner is None or (owner.distribution or owner.plugin) == (me.distribution or me.plugin):
        return None
    if not override:
        raise AlreadyExistsError(
            f"op {op!r} is provided by {owner}; {me} may declare its partitioning rule only with "
            f"override=True (ok.dask.declare({op!r}, rule, override=True))",
            op=op,
        )
    warnings.warn(f"op {op!r}: partitioning rule declared by {me} overrides {owner}'s", plugins.PluginWarning, stacklevel=3)
    return owner


def _overrides() -> list[Any]:
    """The declarations in force that override another party's op (plugins.overrides lists
    them, and OPKERNEL_STRICT_PLUGINS=1 refuses the plugin that made one)."""
    from ..plugins import Override

    with _lock:
        return [Override(f"partitioning rule of op {op!r}", by, owner)
                for op, stack in _DECLARED.items() for _, by, owner in stack[-1:] if by is not None and owner is not None]


def _remove_provider(provider: Provider) -> None:
    with _lock:
        for op in list(_DECLARED):
            _DECLARED[op] = [d for d in _DECLARED[op] if d[1] != provider]
            if not _DECLARED[op]:
                del _DECLARED[op]


def _register_with_plugins() -> None:
    from .. import plugins

    plugins.add_registry(_overrides, _remove_provider)


_register_with_plugins()


def rule_for(op: str) -> Rule:
    """The partitioning rule of op ``op``; NoPartitioningRuleError if it has none."""
    declared = _DECLARED.get(op)
    rule = declared[-1][0] if declared else RULES.get(op)
    if rule is None:
        raise NoPartitioningRuleError(
            f"op '{op}' has no partitioning rule, so ok.dask.apply cannot split it over chunks; "
            "its author can declare one of Elementwise(), Reduction(kind), Window(...), Contraction(...) "
            f"or Batch(axes) with ok.dask.declare({op!r}, rule) (see docs/scaling.md); "
            "or compute it on a single chunk with dask.array.map_blocks",
            op=op,
        )
    return rule
