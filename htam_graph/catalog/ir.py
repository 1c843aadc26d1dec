"""The operator graph the catalog reads a task as: a small dataflow IR that both front ends
(torch.fx, the dispatcher trace) lower to, so the rest of the catalog sees one vocabulary.

Every node knows its shape and dtype (taken from running the reference on meta tensors,
never inferred here). Tensors are logically contiguous; only `Permute` reorders elements,
and only a matmul operand may be one. Nodes compare by identity: a graph is a DAG whose
shared subtrees are the same objects.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

Scalar = int | float | bool
FLOAT_DTYPES = ("float32", "float16", "bfloat16", "float64")


class Unsupported(Exception):
    """The model uses something the catalog has no kernel for; the message says what."""


@dataclass(eq=False, kw_only=True)
class Node:
    shape: tuple[int, ...]
    dtype: str

    @property
    def numel(self) -> int:
        return math.prod(self.shape)

    def inputs(self) -> tuple[Node, ...]:
        """The nodes this one reads (scalars and attributes excluded)."""
        return ()


@dataclass(eq=False, kw_only=True)
class Input(Node):
    """A forward argument."""

    index: int
    name: str


@dataclass(eq=False, kw_only=True)
class Param(Node):
    """A parameter or buffer of the reference, by its qualified name ("linear.weight")."""

    name: str
    buffer: bool = False


@dataclass(eq=False, kw_only=True)
class Fill(Node):
    """A constant tensor made inside forward (zeros_like, full): broadcast of one value."""

    value: float


@dataclass(eq=False, kw_only=True)
class Pointwise(Node):
    """An elementwise op (catalog/ops.py names them) over broadcast tensor and scalar args."""

    op: str
    args: tuple[Node | Scalar, ...]
    attrs: dict[str, Any] = field(default_factory=dict)

    def inputs(self) -> tuple[Node, ...]:
        return tuple(a for a in self.args if isinstance(a, Node))


@dataclass(eq=False, kw_only=True)
class View(Node):
    """The same elements in the same order under another shape (view, reshape, flatten,
    squeeze, unsqueeze, contiguous of a contiguous tensor)."""

    src: Node

    def inputs(self) -> tuple[Node, ...]:
        return (self.src,)


@dataclass(eq=False, kw_only=True)
class Permute(Node):
    """Dimensions reordered (transpose, permute, .T): only matmul operands may be one."""

    src: Node
    perm: tuple[int, ...]

    def inputs(self) -> tuple[Node, ...]:
        return (self.src,)


@dataclass(eq=False, kw_only=True)
class Matmul(Node):
    """a (..., M, K) @ b (..., K, N), batch dims equal or broadcast from b."""

    a: Node
    b: Node

    def inputs(self) -> tuple[Node, ...]:
        return (self.a, self.b)


@dataclass(eq=False, kw_only=True)
class Conv(Node):
    """A 2D or 3D convolution (1D ones arrive as 2D with height 1), NCHW or NCDHW, zero
    padding; stride, padding and dilation have one entry per spatial dim; transposed: the
    gradient of one (weight (C, O / groups, [KD,] KH, KW); output_padding is in the shape)."""

    x: Node
    weight: Node
    bias: Node | None
    stride: tuple[int, ...]
    padding: tuple[int, ...]
    dilation: tuple[int, ...]
    groups: int
    transposed: bool = False

    def inputs(self) -> tuple[Node, ...]:
        return (self.x, self.weight) + ((self.bias,) if self.bias is not None else ())


REDUCE_KINDS = ("sum", "mean", "amax", "amin", "prod", "argmax", "argmin", "logsumexp", "var", "std", "norm")


@dataclass(eq=False, kw_only=True)
class Reduce(Node):
    """A reduction over `dims` (sorted, non-negative). `keepdim` shapes the output; attrs:
    correction (var, std), p (norm: 1, 2 or inf)."""

    kind: str
    src: Node
    dims: tuple[int, ...]
    keepdim: bool
    attrs: dict[str, Any] = field(default_factory=dict)

    def inputs(self) -> tuple[Node, ...]:
        return (self.src,)


@dataclass(eq=False, kw_only=True)
class Softmax(Node):
    src: Node
    dim: int
    log: bool

    def inputs(self) -> tuple[Node, ...]:
        return (self.src,)


@dataclass(eq=False, kw_only=True)
class LayerNorm(Node):
    """Normalized over the last `ndims` dims; weight and bias have those dims' shape."""

    src: Node
    ndims: int
    weight: Node | None
    bias: Node | None
    eps: float

    def inputs(self) -> tuple[Node, ...]:
        return (self.src, *(p for p in (self.weight, self.bias) if p is not None))


@dataclass(eq=False, kw_only=True)
class GroupNorm(Node):
    """Group norm over (N, C, *): statistics per (n, group); per-channel weight and bias.
    Instance norm is the case groups == C."""

    src: Node
    groups: int
    weight: Node | None
    bias: Node | None
    eps: float

    def inputs(self) -> tuple[Node, ...]:
        return (self.src, *(p for p in (self.weight, self.bias) if p is not None))


@dataclass(eq=False, kw_only=True)
class Pool(Node):
    """max or avg pooling over the trailing `len(kernel)` dims (1 to 3)."""

    kind: str
    src: Node
    kernel: tuple[int, ...]
    stride: tuple[int, ...]
    padding: tuple[int, ...]
    dilation: tuple[int, ...]
    ceil_mode: bool
    count_include_pad: bool = True
    divisor: int | None = None

    def inputs(self) -> tuple[Node, ...]:
        return (self.src,)


@dataclass(eq=False, kw_only=True)
class Scan(Node):
    """Inclusive cumulative sum or product along `dim`; `reverse` scans from the end."""

    kind: str
    src: Node
    dim: int
    reverse: bool = False

    def inputs(self) -> tuple[Node, ...]:
        return (self.src,)


@dataclass(eq=False, kw_only=True)
class Flip(Node):
    """Reversed along `dims`: a kernel only around a cumulative op (flip, cumsum, flip
    is a reverse scan); one left in a graph makes the model unsupported."""

    src: Node
    dims: tuple[int, ...]

    def inputs(self) -> tuple[Node, ...]:
        return (self.src,)


@dataclass(eq=False, kw_only=True)
class Nll(Node):
    """Negative log-likelihood of `target` classes in log-probabilities `src` (N, C):
    per-row -src[n, target[n]], rows whose target is `ignore_index` give 0; reduction
    none, sum, or mean over the rows that are not ignored."""

    src: Node
    target: Node
    reduction: str
    ignore_index: int

    def inputs(self) -> tuple[Node, ...]:
        return (self.src, self.target)


def walk(outputs: list[Node]) -> list[Node]:
    """Every node the outputs depend on, producers before consumers."""
    order: list[Node] = []
    seen: set[int] = set()
    stack: list[tuple[Node, bool]] = [(n, False) for n in reversed(outputs)]
    while stack:
        node, done = stack.pop()
        if done:
            order.append(node)
            continue
        if id(node) in seen:
            continue
        seen.add(id(node))
        stack.append((node, True))
        stack.extend((i, False) for i in reversed(node.inputs()) if id(i) not in seen)
    return order


def consumers(order: list[Node]) -> dict[int, list[Node]]:
    """id(node) -> the nodes that read it (a node reading another twice is listed twice)."""
    found: dict[int, list[Node]] = {id(n): [] for n in order}
    for node in order:
        for i in node.inputs():
            found[id(i)].append(node)
    return found


def contiguous_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    strides = []
    step = 1
    for size in reversed(shape):
        strides.append(step)
        step *= size
    return tuple(reversed(strides))


def broadcast_shape(*shapes: tuple[int, ...]) -> tuple[int, ...]:
    ndim = max((len(s) for s in shapes), default=0)
    out = []
    for d in range(ndim):
        sizes = {s[d - ndim + len(s)] for s in shapes if d - ndim + len(s) >= 0} - {1}
        if len(sizes) > 1:
            raise Unsupported(f"shapes {', '.join(str(list(s)) for s in shapes)} do not broadcast")
        out.append(sizes.pop() if sizes else 1)
    return tuple(out)
