"""From the IR to a program: the kernels (stages) a candidate launches, in order.

Each non-elementwise op (matmul, conv, a reduction, softmax, a norm, pooling, a scan, a
loss's gather) anchors a stage; elementwise ops are grouped around the anchors. How much
is fused is what the fusion strategies choose (`Fusion`):

- base: consecutive elementwise ops form one pass; every anchor is its own kernel, reading
  and writing whole tensors, as eager PyTorch does;
- `prologue`: elementwise ops feeding an anchor are computed inside its kernel;
- `epilogue`: elementwise ops after an anchor are applied as it stores its result;
- `stats`: row statistics and the elementwise use of them (normalize with a mean, divide
  by a sum) form one row kernel.

Stages name their tensors by slots into `inputs`; expressions (catalog/expr.py) read them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import ClassVar

from htam_graph.catalog import ir
from htam_graph.catalog.expr import Const, Expr, Load, Op, Pick, Val, op, substitute, vals, walk
from htam_graph.catalog.ir import Node, Unsupported

_ZERO = Const(0.0)  # a placeholder expression until the builder sets the real one
ANCHORS = (ir.Matmul, ir.Conv, ir.Reduce, ir.Softmax, ir.LayerNorm, ir.GroupNorm, ir.Pool, ir.Scan, ir.Nll)


@dataclass(frozen=True)
class Fusion:
    prologue: bool = False
    epilogue: bool = False
    stats: bool = False


@dataclass
class Buffer:
    """A tensor forward holds: an input, a parameter, or a temporary it allocates."""

    name: str  # the Python expression forward uses: x, self.linear.weight, t2
    shape: tuple[int, ...]
    dtype: str
    role: str  # input, param, temp

    @property
    def numel(self) -> int:
        return math.prod(self.shape)


@dataclass
class Stage:
    kind: ClassVar[str]
    inputs: list[Buffer]
    out: Buffer

    def slot(self, buf: Buffer) -> int:
        for i, b in enumerate(self.inputs):
            if b.name == buf.name:
                return i
        self.inputs.append(buf)
        return len(self.inputs) - 1


@dataclass
class PointwiseStage(Stage):
    kind: ClassVar[str] = "pointwise"
    space: tuple[int, ...] = ()
    expr: Expr = _ZERO


@dataclass
class GemmStage(Stage):
    """out[b] = epilogue(A[b] @ B[b]); A stored (M, K) or, with a_t, (K, M); B stored (K, N)
    or, with b_t, (N, K). Batch strides 0 broadcast an operand."""

    kind: ClassVar[str] = "gemm"
    batch: int = 1
    M: int = 0
    N: int = 0
    K: int = 0
    a_t: bool = False
    b_t: bool = False
    a_bstride: int = 0
    b_bstride: int = 0
    epilogue: Expr | None = None


@dataclass
class ConvStage(Stage):
    """NCDHW direct convolution; slot 0 x, slot 1 weight, slot 2 bias when has_bias. A 2-D
    (or 1-D) convolution has depth 1: D = OD = KD = 1, depth stride 1, padding 0, dilation 1.
    stride, padding and dilation are (depth, height, width)."""

    kind: ClassVar[str] = "conv"
    N: int = 0
    C: int = 0
    D: int = 1
    H: int = 0
    W: int = 0
    O: int = 0  # noqa: E741 - the convolution's own name for output channels
    KD: int = 1
    KH: int = 0
    KW: int = 0
    stride: tuple[int, ...] = (1, 1, 1)  # (depth, height, width), also below
    padding: tuple[int, ...] = (0, 0, 0)
    dilation: tuple[int, ...] = (1, 1, 1)
    groups: int = 1
    OD: int = 1
    OH: int = 0
    OW: int = 0
    has_bias: bool = False
    transposed: bool = False  # the gradient of a convolution: weight (C, O / groups, KD, KH, KW)
    epilogue: Expr | None = None


@dataclass
class PoolStage(Stage):
    kind: ClassVar[str] = "pool"
    op: str = "max"
    src: Expr = _ZERO
    planes: int = 0
    in_sizes: tuple[int, ...] = ()
    out_sizes: tuple[int, ...] = ()
    kernel: tuple[int, ...] = ()
    stride: tuple[int, ...] = ()
    padding: tuple[int, ...] = ()
    dilation: tuple[int, ...] = ()
    count_include_pad: bool = True
    divisor: int | None = None
    epilogue: Expr | None = None


@dataclass
class ScanStage(Stage):
    kind: ClassVar[str] = "scan"
    op: str = "sum"
    src: Expr = _ZERO
    outer: int = 0
    L: int = 0
    inner: int = 0
    reverse: bool = False
    epilogue: Expr | None = None


@dataclass
class Acc:
    """One accumulator of a row stage: sum, prod, max, min, argmax or argmin of `expr`."""

    kind: str
    expr: Expr


@dataclass
class RowStage(Stage):
    """Statistics of rows (outer, R, inner) of `space`, then one output per row ("row") or
    per element ("element"). `accs[k]` gives Val("a{k}"); `scalars[j]` (over accs) gives
    Val("s{j}"); an accumulator's expression may use scalars of earlier accumulators (a
    second pass). `pairs` mark accumulator pairs with a one-pass form: ("lse", max, sum of
    exp) and ("welford", sum, sum of squared deviations)."""

    kind: ClassVar[str] = "row"
    space: tuple[int, ...] = ()
    outer: int = 1
    R: int = 1
    inner: int = 1
    row_space: tuple[int, ...] = ()
    accs: list[Acc] = field(default_factory=list)
    scalars: list[Expr] = field(default_factory=list)
    pairs: list[tuple[str, int, int]] = field(default_factory=list)
    mode: str = "row"
    out_expr: Expr = _ZERO

    def levels(self) -> list[int]:
        """Each accumulator's pass: 0 reads only inputs, k+1 uses a scalar of pass k."""
        memo: dict[int, int] = {}

        def level(k: int) -> int:
            if k not in memo:
                deps = [a for s in _scalar_keys(self.accs[k].expr) for a in _acc_keys(self.scalars[s])]
                memo[k] = 1 + max((level(a) for a in deps), default=-1)
            return memo[k]

        return [level(k) for k in range(len(self.accs))]


@dataclass
class GemmRowStage(Stage):
    """A GEMM and the row stage over its output's rows in one kernel (the tensor-core GEMM
    holds whole rows of C in registers, so the row statistics and the per-element output
    never pass through memory): softmax(q @ k^T * scale), layer norm of a Linear layer's rows.
    `inputs` are the GEMM's; the row stage reads only the GEMM's result, as its slot 0."""

    kind: ClassVar[str] = "gemm_row"
    gemm: GemmStage
    row: RowStage


def _dhw(values: tuple[int, ...], depth: int, spatial: int) -> tuple[int, ...]:
    """`values` whose last `spatial` entries are (height, width) or (depth, height, width),
    with `depth` as the depth of a 2-D one."""
    return values if spatial == 3 else (*values[: len(values) - 2], depth, *values[len(values) - 2 :])


def _scalar_keys(expr: Expr) -> list[int]:
    return sorted(int(k[1:]) for k in vals(expr) if k.startswith("s"))


def _acc_keys(expr: Expr) -> list[int]:
    return sorted(int(k[1:]) for k in vals(expr) if k.startswith("a"))


@dataclass
class Program:
    stages: list[Stage]
    output: Buffer
    output_shape: tuple[int, ...]
    temps: list[Buffer]


class RowBuilder:
    """Accumulators and scalars of one row stage, added per reduction."""

    def __init__(self, stage: RowStage, dims: tuple[int, ...]) -> None:
        self.stage, self.dims = stage, dims
        self.known: dict[int, Val] = {}

    def scalar(self, expr: Expr) -> Val:
        self.stage.scalars.append(expr)
        return Val(f"s{len(self.stage.scalars) - 1}")

    def acc(self, kind: str, expr: Expr) -> Val:
        self.stage.accs.append(Acc(kind, expr))
        return Val(f"a{len(self.stage.accs) - 1}")

    def max_sum_exp(self, e: Expr, mask_inf: bool = False) -> tuple[Val, Val]:
        """(max, sum exp(e - max)) of the row, marked as an online-softmax pair."""
        a0 = self.acc("max", e)
        m = self.scalar(op("where", op("isinf", a0), Const(0.0), a0) if mask_inf else a0)
        a1 = self.acc("sum", op("exp", op("sub", e, m)))
        self.stage.pairs.append(("lse", len(self.stage.accs) - 2, len(self.stage.accs) - 1))
        return m, self.scalar(a1)

    def mean_var(self, e: Expr, divisor: float) -> tuple[Val, Val]:
        """(mean, sum of squared deviations from it), marked as a Welford pair."""
        R = self.stage.R
        a0 = self.acc("sum", e)
        mean = self.scalar(op("div", a0, Const(R)))
        a1 = self.acc("sum", op("square", op("sub", e, mean)))
        self.stage.pairs.append(("welford", len(self.stage.accs) - 2, len(self.stage.accs) - 1))
        return mean, self.scalar(op("div", a1, Const(divisor)) if divisor != 1 else a1)

    def reduce(self, kind: str, e: Expr, attrs: dict) -> Val:
        """The scalar a Reduce node gives, per its kind."""
        R = self.stage.R
        if kind == "sum":
            return self.scalar(self.acc("sum", e))
        if kind == "mean":
            return self.scalar(op("mul", self.acc("sum", e), Const(1.0 / R)))
        if kind in ("amax", "amin", "prod", "argmax", "argmin"):
            acc_kind = {"amax": "max", "amin": "min"}.get(kind, kind)
            return self.scalar(self.acc(acc_kind, e))
        if kind == "logsumexp":
            m, s = self.max_sum_exp(e, mask_inf=True)
            return self.scalar(op("add", op("log", s), m))
        if kind in ("var", "std"):
            divisor = max(R - attrs.get("correction", 1.0), 0.0)
            _, var = self.mean_var(e, divisor if divisor > 0 else 0.0)
            return self.scalar(op("sqrt", var)) if kind == "std" else var
        if kind == "norm":
            p = attrs.get("p", 2.0)
            if p == 1:
                return self.scalar(self.acc("sum", op("abs", e)))
            if math.isinf(p):
                return self.scalar(self.acc("max", op("abs", e)))
            return self.scalar(op("sqrt", self.acc("sum", op("square", e))))
        raise Unsupported(f"reduction {kind}")


def _row_split(space: tuple[int, ...], dims: tuple[int, ...]) -> tuple[int, int, int]:
    if list(dims) != list(range(dims[0], dims[-1] + 1)):
        raise Unsupported(f"a reduction over non-adjacent dims {list(dims)} of shape {list(space)}")
    return math.prod(space[: dims[0]]), math.prod(space[dims[0] : dims[-1] + 1]), math.prod(space[dims[-1] + 1 :])


class ProgramBuilder:
    def __init__(self, output: Node, params: dict[str, ir.Param], fusion: Fusion) -> None:
        self.output, self.fusion = output, fusion
        self.param_names = {id(p): name for name, p in params.items()}
        order = ir.walk([output])
        for node in order:
            if isinstance(node, ir.Flip):
                raise Unsupported("a flip that is not around a cumulative sum or product")
        self.consumers = ir.consumers(order)
        self.buffers: dict[int, Buffer] = {}
        self.stages: list[Stage] = []
        self.temps: list[Buffer] = []

    # -- buffers ---------------------------------------------------------------------------
    def temp(self, shape: tuple[int, ...], dtype: str) -> Buffer:
        buf = Buffer(f"t{len(self.temps)}", shape, dtype, "temp")
        self.temps.append(buf)
        return buf

    def build(self) -> Program:
        root = self.output
        while isinstance(root, ir.View):
            root = root.src
        if isinstance(root, (ir.Input, ir.Param, ir.Fill)) or id(root) in self.buffers:
            out = self.copy(root)
        else:
            out = self.materialize(root)
        return Program(self.stages, out, self.output.shape, self.temps)

    def copy(self, node: Node) -> Buffer:
        """A stage that writes `node` into a new tensor (outputs never alias inputs)."""
        stage = PointwiseStage(inputs=[], out=self.temp(node.shape, node.dtype), space=node.shape)
        stage.expr = self.expr(node, stage, node.shape, force_leaf=True)
        self.stages.append(stage)
        return stage.out

    def materialize(self, node: Node) -> Buffer:
        if id(node) in self.buffers:
            return self.buffers[id(node)]
        if isinstance(node, ir.Input):
            buf = Buffer(node.name, node.shape, node.dtype, "input")
        elif isinstance(node, ir.Param):
            buf = Buffer(self.param_names[id(node)], node.shape, node.dtype, "param")
        elif isinstance(node, ir.View):
            base = self.materialize(node.src)
            buf = Buffer(base.name, node.shape, node.dtype, base.role)
        elif isinstance(node, ir.Permute):
            raise Unsupported("a transposed or permuted tensor used outside a matmul")
        elif isinstance(node, (ir.Pointwise, ir.Fill)):
            buf = self.pointwise_root(node)
        elif isinstance(node, ANCHORS):
            buf = self.anchor(node, None, node)
        else:
            raise Unsupported(f"no stage for {type(node).__name__}")
        self.buffers[id(node)] = buf
        return buf

    # -- expressions -------------------------------------------------------------------------
    def expr(
        self,
        node: Node,
        stage: Stage,
        space: tuple[int, ...],
        acc: Node | None = None,
        row: RowBuilder | None = None,
        force_leaf: bool = False,
        row_space: bool = False,
    ) -> Expr:
        """`node` as an expression of `stage`: elementwise ops inlined down to buffers."""
        if acc is not None and node is acc:
            return Val("acc")
        if not force_leaf and id(node) not in self.buffers:
            if isinstance(node, ir.Fill):
                return Const(node.value)
            if isinstance(node, ir.Pointwise):
                args = tuple(
                    self.expr(a, stage, space, acc, row, row_space=row_space)
                    if isinstance(a, Node)
                    else Const(float(a))
                    for a in node.args
                )
                return Op(node.op, args, tuple(sorted(node.attrs.items())), node.dtype)
            if row is not None:
                reduce = _reduce_of(node)
                if reduce is not None and reduce.src.shape == row.stage.space and reduce.dims == row.dims:
                    key = id(reduce)
                    if key not in row.known:
                        src = self.prologue(reduce.src, row.stage, row)
                        row.known[key] = row.reduce(reduce.kind, src, reduce.attrs)
                    return row.known[key]
        buf = self.materialize(node)
        return Load(stage.slot(buf), node.shape, space, row_space)

    def prologue(self, node: Node, stage: Stage, row: RowBuilder | None = None) -> Expr:
        """An anchor's input: inlined with fusion.prologue, else read from a buffer."""
        if self.fusion.prologue:
            return self.expr(node, stage, node.shape, row=row if self.fusion.stats else None)
        return self.expr(node, stage, node.shape, force_leaf=True)

    # -- elementwise roots ---------------------------------------------------------------------
    def tree(self, root: Node) -> tuple[list[Node], list[Node]]:
        """The elementwise nodes an expression of `root` inlines, and its other leaves."""
        inner: list[Node] = []
        leaves: list[Node] = []
        stack, seen = [root], set()
        while stack:
            node = stack.pop()
            if id(node) in seen:
                continue
            seen.add(id(node))
            if isinstance(node, ir.Pointwise) and (node is root or id(node) not in self.buffers):
                inner.append(node)
                stack.extend(a for a in node.args if isinstance(a, Node))
            elif not isinstance(node, ir.Fill):
                leaves.append(node)
        return inner, leaves

    def pointwise_root(self, root: Node) -> Buffer:
        if isinstance(root, ir.Fill):
            stage = PointwiseStage(inputs=[], out=self.temp(root.shape, root.dtype), space=root.shape)
            stage.expr = Const(root.value)
            self.stages.append(stage)
            return stage.out
        inner, leaves = self.tree(root)
        inside = {id(n) for n in inner}
        if self.fusion.epilogue:
            candidates = [
                leaf
                for leaf in leaves
                if isinstance(leaf, ANCHORS)
                and id(leaf) not in self.buffers
                and leaf.shape == root.shape
                and self._read_only_through(leaf, inside, root)
            ]
            if len(candidates) == 1:
                return self.anchor(candidates[0], root, root)
        if self.fusion.stats:
            reduces = [r for leaf in leaves if (r := _reduce_of(leaf)) is not None and id(r) not in self.buffers]
            if reduces and all(r.src.shape == root.shape and r.dims == reduces[0].dims for r in reduces):
                return self.row_element(root, reduces[0].dims)
        stage = PointwiseStage(inputs=[], out=self.temp(root.shape, root.dtype), space=root.shape)
        stage.expr = self.expr(root, stage, root.shape)
        self.stages.append(stage)
        return stage.out

    def _read_only_through(self, leaf: Node, inside: set[int], root: Node) -> bool:
        """Whether the anchor `leaf` reaches the rest of the graph only through the tree of
        `root`: no node between them is read elsewhere (a batch norm's statistics of a
        convolution's output, say). Else the fused anchor would be computed twice: once for
        that reader, once again as this tree's epilogue."""
        stack, seen = [leaf], set()
        while stack:
            node = stack.pop()
            if node is root:
                continue
            for consumer in self.consumers[id(node)]:
                if id(consumer) not in inside:
                    return False
                if id(consumer) not in seen:
                    seen.add(id(consumer))
                    stack.append(consumer)
        return True

    def row_element(self, root: Node, dims: tuple[int, ...]) -> Buffer:
        """A generic normalization: reductions of the root's space used elementwise in it."""
        stage = self.row_stage(root.shape, dims, root.dtype, "element", root.shape)
        row = RowBuilder(stage, dims)
        stage.out_expr = self.expr(root, stage, root.shape, row=row)
        self.stages.append(stage)
        return stage.out

    def row_stage(
        self, space: tuple[int, ...], dims: tuple[int, ...], dtype: str, mode: str, out_shape: tuple[int, ...]
    ) -> RowStage:
        outer, R, inner = _row_split(space, dims)
        row_space = tuple(s for d, s in enumerate(space) if d not in dims)
        return RowStage(
            inputs=[], out=self.temp(out_shape, dtype), space=space, outer=outer, R=R, inner=inner,
            row_space=row_space, mode=mode,
        )  # fmt: skip

    # -- anchors -------------------------------------------------------------------------------
    def anchor(self, node: Node, epilogue_root: Node | None, out_node: Node) -> Buffer:
        """The stage of an anchor op, applying the elementwise tree of `epilogue_root` (whose
        leaf `node` is) as it stores, when one is given."""
        if isinstance(node, ir.Matmul):
            return self.gemm(node, epilogue_root, out_node)
        if isinstance(node, ir.Conv):
            return self.conv(node, epilogue_root, out_node)
        if isinstance(node, ir.Pool):
            return self.pool(node, epilogue_root, out_node)
        if isinstance(node, ir.Scan):
            return self.scan(node, epilogue_root, out_node)
        return self.row_anchor(node, epilogue_root, out_node)

    def _epilogue(self, node: Node, stage: Stage, root: Node | None, space: tuple[int, ...]) -> Expr | None:
        return None if root is None else self.expr(root, stage, space, acc=node)

    def gemm(self, node: ir.Matmul, root: Node | None, out_node: Node) -> Buffer:
        a, a_t, a_shape = self.operand(node.a)
        b, b_t, b_shape = self.operand(node.b)
        M, K, N = a_shape[-2], a_shape[-1], b_shape[-1]  # logical shapes; a_t and b_t say how they are stored
        a_batch, b_batch = math.prod(a_shape[:-2]), math.prod(b_shape[:-2])
        out_batch = math.prod(node.shape[:-2])
        if b_batch == 1 and not a_t and a_batch > 1:
            M, batch, a_bs, b_bs = M * a_batch, 1, 0, 0
        elif a_batch == b_batch == out_batch:
            batch, a_bs, b_bs = out_batch, M * K, K * N
        elif a_batch == 1 and b_batch == out_batch:
            batch, a_bs, b_bs = out_batch, 0, K * N
        elif b_batch == 1 and a_batch == out_batch:
            batch, a_bs, b_bs = out_batch, M * K, 0
        else:
            raise Unsupported(f"matmul batch dims {list(a_shape[:-2])} and {list(b_shape[:-2])}")
        stage = GemmStage(
            inputs=[a, b], out=self.temp(out_node.shape, out_node.dtype), batch=batch, M=M, N=N, K=K,
            a_t=a_t, b_t=b_t, a_bstride=a_bs, b_bstride=b_bs,
        )  # fmt: skip
        if node.dtype != "float32" or a.dtype != "float32" or b.dtype != "float32":
            raise Unsupported(f"a {node.dtype} matmul (the catalog's GEMMs are fp32)")
        stage.epilogue = self._epilogue(node, stage, root, out_node.shape)
        self.stages.append(stage)
        return stage.out

    def operand(self, node: Node) -> tuple[Buffer, bool, tuple[int, ...]]:
        """A matmul operand as (buffer, stored transposed, logical shape)."""
        if isinstance(node, ir.Permute):
            n = len(node.perm)
            if n >= 2 and node.perm == (*range(n - 2), n - 1, n - 2):
                return self.materialize(node.src), True, node.shape
            raise Unsupported(f"a matmul operand permuted by {list(node.perm)}")
        return self.materialize(node), False, node.shape

    def conv(self, node: ir.Conv, root: Node | None, out_node: Node) -> Buffer:
        x, w = self.materialize(node.x), self.materialize(node.weight)
        spatial = len(node.stride)  # 2 or 3: a 2-D convolution has depth 1
        N, C, D, H, W = _dhw(node.x.shape, 1, spatial)
        _, O, OD, OH, OW = _dhw(node.shape, 1, spatial)  # noqa: E741 - output channels
        _, _, KD, KH, KW = _dhw(node.weight.shape, 1, spatial)
        stage = ConvStage(
            inputs=[x, w], out=self.temp(out_node.shape, out_node.dtype), N=N, C=C, D=D, H=H, W=W, O=O, KD=KD,
            KH=KH, KW=KW, stride=_dhw(node.stride, 1, spatial), padding=_dhw(node.padding, 0, spatial),
            dilation=_dhw(node.dilation, 1, spatial), groups=node.groups, OD=OD, OH=OH, OW=OW,
            has_bias=node.bias is not None, transposed=node.transposed,
        )  # fmt: skip
        if node.dtype != "float32":
            raise Unsupported(f"a {node.dtype} convolution (the catalog's convolutions are fp32)")
        if node.bias is not None:
            stage.slot(self.materialize(node.bias))
        stage.epilogue = self._epilogue(node, stage, root, out_node.shape)
        self.stages.append(stage)
        return stage.out

    def pool(self, node: ir.Pool, root: Node | None, out_node: Node) -> Buffer:
        n = len(node.kernel)
        src_shape = node.src.shape
        stage = PoolStage(
            inputs=[], out=self.temp(out_node.shape, out_node.dtype), op=node.kind,
            planes=math.prod(src_shape[:-n]), in_sizes=src_shape[-n:], out_sizes=node.shape[-n:], kernel=node.kernel,
            stride=node.stride, padding=node.padding, dilation=node.dilation,
            count_include_pad=node.count_include_pad, divisor=node.divisor,
        )  # fmt: skip
        stage.src = self.prologue(node.src, stage)
        stage.epilogue = self._epilogue(node, stage, root, out_node.shape)
        self.stages.append(stage)
        return stage.out

    def scan(self, node: ir.Scan, root: Node | None, out_node: Node) -> Buffer:
        outer, L, inner = _row_split(node.shape, (node.dim,))
        stage = ScanStage(
            inputs=[], out=self.temp(out_node.shape, out_node.dtype), op=node.kind, outer=outer, L=L, inner=inner,
            reverse=node.reverse,
        )  # fmt: skip
        stage.src = self.prologue(node.src, stage)
        stage.epilogue = self._epilogue(node, stage, root, out_node.shape)
        self.stages.append(stage)
        return stage.out

    def row_anchor(self, node: Node, root: Node | None, out_node: Node) -> Buffer:
        if isinstance(node, ir.Nll):
            return self.nll(node, root, out_node)
        if isinstance(node, ir.Reduce):
            stage = self.row_stage(node.src.shape, node.dims, out_node.dtype, "row", out_node.shape)
            row = RowBuilder(stage, node.dims)
            value: Expr = row.reduce(node.kind, self.prologue(node.src, stage, row), node.attrs)
            space = node.shape
        elif isinstance(node, ir.Softmax):
            stage = self.row_stage(node.src.shape, (node.dim,), out_node.dtype, "element", out_node.shape)
            row = RowBuilder(stage, (node.dim,))
            e = self.prologue(node.src, stage, row)
            m, s = row.max_sum_exp(e)
            shifted = op("sub", e, m)
            value = op("sub", shifted, op("log", s)) if node.log else op("div", op("exp", shifted), s)
            space = node.shape
        elif isinstance(node, (ir.LayerNorm, ir.GroupNorm)):
            stage, value = self.norm(node, out_node)
            space = node.shape
        else:
            raise Unsupported(f"no stage for {type(node).__name__}")
        value = _dtype_round(value, node.dtype)
        stage.out_expr = (
            value
            if root is None
            else _with_acc(self.expr(root, stage, space, acc=node, row_space=stage.mode == "row"), value)
        )
        self.stages.append(stage)
        return stage.out

    def norm(self, node: ir.LayerNorm | ir.GroupNorm, out_node: Node) -> tuple[RowStage, Expr]:
        shape = node.src.shape
        if isinstance(node, ir.LayerNorm):
            dims = tuple(range(len(shape) - node.ndims, len(shape)))
            stage = self.row_stage(shape, dims, out_node.dtype, "element", out_node.shape)
            param_view = shape[len(shape) - node.ndims :]
        else:
            C, G = shape[1], node.groups
            if C % G:
                raise Unsupported(f"group norm with {C} channels in {G} groups")
            stage = RowStage(
                inputs=[], out=self.temp(out_node.shape, out_node.dtype), space=shape, outer=shape[0] * G,
                R=(C // G) * math.prod(shape[2:]), inner=1, row_space=(shape[0], G), mode="element",
            )  # fmt: skip
            dims = tuple(range(1, len(shape)))
            param_view = (C,) + (1,) * (len(shape) - 2)
        row = RowBuilder(stage, dims)
        e = (
            self.prologue(node.src, stage, row)
            if isinstance(node, ir.LayerNorm)
            else self.expr(node.src, stage, shape, force_leaf=not self.fusion.prologue)
        )
        mean, var = row.mean_var(e, float(stage.R))
        rstd = row.scalar(op("rsqrt", op("add", var, Const(node.eps))))
        value: Expr = op("mul", op("sub", e, mean), rstd)
        for param, name in ((node.weight, "mul"), (node.bias, "add")):
            if param is not None:
                value = op(name, value, Load(stage.slot(self.materialize(param)), param_view, shape))
        return stage, value

    def nll(self, node: ir.Nll, root: Node | None, out_node: Node) -> Buffer:
        rows, classes = node.src.shape
        per_row_shape = (rows,)
        fused = (
            isinstance(node.src, ir.Softmax) and node.src.log and node.src.dim == 1 and id(node.src) not in self.buffers
        )
        logits = node.src.src if isinstance(node.src, ir.Softmax) and fused else node.src
        stage = RowStage(
            inputs=[], out=self.temp(per_row_shape if node.reduction != "none" else out_node.shape, node.dtype),
            space=(rows, classes), outer=rows, R=classes, inner=1, row_space=per_row_shape, mode="row",
        )  # fmt: skip
        row = RowBuilder(stage, (1,))
        x_slot = stage.slot(self.materialize(logits))
        target = Load(stage.slot(self.materialize(node.target)), node.target.shape, per_row_shape, True)
        picked: Expr = Pick(x_slot, target)
        if fused:
            m, s = row.max_sum_exp(Load(x_slot, logits.shape, logits.shape))
            picked = op("sub", op("sub", picked, m), op("log", s))
        loss = op("where", op("eq", target, Const(node.ignore_index)), Const(0.0), op("neg", picked))
        stage.out_expr = loss
        self.stages.append(stage)
        if node.reduction == "none":
            if root is not None:
                stage.out_expr = _with_acc(self.expr(root, stage, out_node.shape, acc=node, row_space=True), loss)
            return stage.out
        final = RowStage(
            inputs=[], out=self.temp(out_node.shape, out_node.dtype), space=per_row_shape, outer=1, R=rows, inner=1,
            row_space=(), mode="row",
        )  # fmt: skip
        total = RowBuilder(final, (0,))
        s_loss = total.reduce("sum", Load(final.slot(stage.out), per_row_shape, per_row_shape), {})
        value: Expr = s_loss
        if node.reduction == "mean":
            valid = op(
                "ne",
                Load(final.slot(self.materialize(node.target)), per_row_shape, per_row_shape),
                Const(node.ignore_index),
            )
            value = op("div", s_loss, total.reduce("sum", valid, {}))
        final.out_expr = (
            value
            if root is None
            else _with_acc(self.expr(root, final, out_node.shape, acc=node, row_space=True), value)
        )
        self.stages.append(final)
        return final.out


def _reduce_of(node: Node) -> ir.Reduce | None:
    """The reduction a (possibly unsqueezed) leaf is, for statistics fusion."""
    while isinstance(node, ir.View):
        node = node.src
    return node if isinstance(node, ir.Reduce) and node.kind not in ("argmax", "argmin") else None


def _with_acc(expr: Expr, value: Expr) -> Expr:
    return substitute(expr, {"acc": value})


def _dtype_round(value: Expr, dtype: str) -> Expr:
    if dtype in ("float16", "bfloat16"):
        return Op("identity", (value,), (), dtype)
    return value


def build_program(output: Node, params: dict[str, ir.Param], fusion: Fusion) -> Program:
    return ProgramBuilder(output, params, fusion).build()


ROW_ACC_KINDS = ("sum", "max", "min")


def gemm_row_fusable(gemm: GemmStage, row: RowStage, later: list[Stage], output: Buffer, max_n: int, max_k: int) -> str:
    """Why `row` cannot run inside `gemm`'s kernel ("" when it can): it must read nothing but
    the GEMM's result, element by element, over whole rows of it."""
    if [b.name for b in row.inputs] != [gemm.out.name]:
        return "the row stage reads more than the GEMM's result"
    if gemm.out.name == output.name or any(b.name == gemm.out.name for st in later for b in st.inputs):
        return "the GEMM's result is used after the row stage"
    if row.mode != "element" or row.inner != 1 or row.R != gemm.N or row.outer != gemm.batch * gemm.M:
        return "the row stage's rows are not the GEMM's rows"
    row_len, depth = gemm.N, gemm.K
    if row_len > max_n or depth > max_k or depth % 8:
        return f"rows of {row_len} (at most {max_n}) or K = {depth} (a multiple of 8, at most {max_k})"
    if gemm.batch > 65535:
        return f"a batch of {gemm.batch} (a grid's second dimension holds at most 65535)"
    if any(a.kind not in ROW_ACC_KINDS for a in row.accs):
        return "a row statistic other than sum, max or min"
    exprs = [a.expr for a in row.accs] + list(row.scalars) + [row.out_expr]
    for e in exprs:
        for sub in walk(e):
            if isinstance(sub, Pick) or (isinstance(sub, Load) and (sub.slot != 0 or sub.row or not sub.full)):
                return "the row stage reads the GEMM's result other than element by element"
    return ""


def fuse_gemm_rows(program: Program, max_n: int, max_k: int) -> Program:
    """`program` with each GEMM whose result only a following row stage reads, over whole rows,
    merged with that stage (`GemmRowStage`); the GEMM's result is then never allocated."""
    stages: list[Stage] = []
    temps = list(program.temps)
    i = 0
    while i < len(program.stages):
        st = program.stages[i]
        nxt = program.stages[i + 1] if i + 1 < len(program.stages) else None
        if (
            isinstance(st, GemmStage)
            and isinstance(nxt, RowStage)
            and not gemm_row_fusable(st, nxt, program.stages[i + 2 :], program.output, max_n, max_k)
        ):
            stages.append(GemmRowStage(inputs=st.inputs, out=nxt.out, gemm=st, row=nxt))
            temps = [t for t in temps if t.name != st.out.name]
            i += 2
            continue
        stages.append(st)
        i += 1
    return Program(stages, program.output, program.output_shape, temps)
