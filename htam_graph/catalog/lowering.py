"""Canonical calls -> IR nodes: one table for both front ends (catalog/frontends.py).

A front end names each call it sees (torch.relu, F.relu, x.relu(), nn.ReLU and aten.relu
are all `relu`), binds its arguments by name (the first tensor argument is always
`self`), runs it on meta tensors for the result's shape and dtype, and hands all three to
`Lowering.call`. Anything without a rule here is `Unsupported`, naming the op.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import torch

from htam_graph.catalog import ir
from htam_graph.catalog.ir import Node, Unsupported
from htam_graph.catalog.ops import OPS, SELU_ALPHA, SELU_SCALE, UNARY_ALIASES

Args = dict[str, Any]

# Positional parameter names (after `self`) of torch functions and Tensor methods, which
# share aten's schema order. Python functions (torch.nn.functional) are bound by their
# own signature instead.
SIGNATURES: dict[str, tuple[str, ...]] = {
    "add": ("other", "alpha"),
    "sub": ("other", "alpha"),
    "rsub": ("other", "alpha"),
    "mul": ("other",),
    "div": ("other", "rounding_mode"),
    "pow": ("exponent",),
    "maximum": ("other",),
    "minimum": ("other",),
    "fmax": ("other",),
    "fmin": ("other",),
    "atan2": ("other",),
    "xlogy": ("other",),
    "gt": ("other",),
    "lt": ("other",),
    "ge": ("other",),
    "le": ("other",),
    "eq": ("other",),
    "ne": ("other",),
    "logical_and": ("other",),
    "logical_or": ("other",),
    "where": ("input", "other"),
    "masked_fill": ("mask", "value"),
    "clamp": ("min", "max"),
    "clamp_min": ("min",),
    "clamp_max": ("max",),
    "sum": ("dim", "keepdim", "dtype"),
    "mean": ("dim", "keepdim", "dtype"),
    "prod": ("dim", "keepdim", "dtype"),
    "amax": ("dim", "keepdim"),
    "amin": ("dim", "keepdim"),
    "max": ("dim", "keepdim"),
    "min": ("dim", "keepdim"),
    "argmax": ("dim", "keepdim"),
    "argmin": ("dim", "keepdim"),
    "logsumexp": ("dim", "keepdim"),
    "var": ("dim", "unbiased", "keepdim"),
    "std": ("dim", "unbiased", "keepdim"),
    "norm": ("p", "dim", "keepdim", "dtype"),
    "linalg_vector_norm": ("ord", "dim", "keepdim", "dtype"),
    "softmax": ("dim", "dtype"),
    "log_softmax": ("dim", "dtype"),
    "cumsum": ("dim", "dtype"),
    "cumprod": ("dim", "dtype"),
    "flip": ("dims",),
    "matmul": ("other",),
    "mm": ("mat2",),
    "bmm": ("mat2",),
    "transpose": ("dim0", "dim1"),
    "swapaxes": ("dim0", "dim1"),
    "flatten": ("start_dim", "end_dim"),
    "unsqueeze": ("dim",),
    "squeeze": ("dim",),
    "gelu": ("approximate",),
    "softplus": ("beta", "threshold"),
    "leaky_relu": ("negative_slope",),
    "elu": ("alpha",),
    "celu": ("alpha",),
    "hardtanh": ("min_val", "max_val"),
    "threshold": ("threshold", "value"),
    "softshrink": ("lambd",),
    "hardshrink": ("lambd",),
    "expand_as": ("other",),
    "type_as": ("other",),
    "view_as": ("other",),
    "reshape_as": ("other",),
    "dropout": ("p", "train"),
    "layer_norm": ("normalized_shape", "weight", "bias", "eps"),
    "group_norm": ("num_groups", "weight", "bias", "eps"),
    "linear": ("weight", "bias"),
    "conv1d": ("weight", "bias", "stride", "padding", "dilation", "groups"),
    "conv2d": ("weight", "bias", "stride", "padding", "dilation", "groups"),
    "conv3d": ("weight", "bias", "stride", "padding", "dilation", "groups"),
    "conv_transpose1d": ("weight", "bias", "stride", "padding", "output_padding", "groups", "dilation"),
    "conv_transpose2d": ("weight", "bias", "stride", "padding", "output_padding", "groups", "dilation"),
    "conv_transpose3d": ("weight", "bias", "stride", "padding", "output_padding", "groups", "dilation"),
    "batch_norm": ("running_mean", "running_var", "weight", "bias", "training", "momentum", "eps"),
    "addmm": ("mat1", "mat2", "beta", "alpha"),
    "cosine_similarity": ("x2", "dim", "eps"),
    "max_pool1d": ("kernel_size", "stride", "padding", "dilation", "ceil_mode", "return_indices"),
    "max_pool2d": ("kernel_size", "stride", "padding", "dilation", "ceil_mode", "return_indices"),
    "max_pool3d": ("kernel_size", "stride", "padding", "dilation", "ceil_mode", "return_indices"),
    "avg_pool1d": ("kernel_size", "stride", "padding", "ceil_mode", "count_include_pad"),
    "avg_pool2d": ("kernel_size", "stride", "padding", "ceil_mode", "count_include_pad", "divisor_override"),
    "avg_pool3d": ("kernel_size", "stride", "padding", "ceil_mode", "count_include_pad", "divisor_override"),
    "adaptive_avg_pool1d": ("output_size",),
    "adaptive_avg_pool2d": ("output_size",),
    "adaptive_avg_pool3d": ("output_size",),
    "adaptive_max_pool2d": ("output_size",),
}
VARARG_SHAPE = {"view", "reshape", "expand", "permute", "repeat"}

UNARY = {
    name
    for name, op in OPS.items()
    if op.arity == 1 and name not in ("clamp", "pow_scalar", "rpow_scalar", "threshold", "softshrink", "hardshrink")
} | set(UNARY_ALIASES)
BINARY = {
    "add", "sub", "mul", "div", "maximum", "minimum", "fmax", "fmin", "atan2", "xlogy",
    "gt", "lt", "ge", "le", "eq", "ne", "logical_and", "logical_or",
}  # fmt: skip
ALIASES = {
    "clip": "clamp",
    "true_divide": "div",
    "multiply": "mul",
    "subtract": "sub",
    "greater": "gt",
    "less": "lt",
    "greater_equal": "ge",
    "less_equal": "le",
    "not_equal": "ne",
    "relu6": "relu6",
    "swapdims": "swapaxes",
    "moveaxis": "movedim",
    "divide": "div",
    "float_power": "pow",
}
IDENTITY_CALLS = {"contiguous", "clone", "detach", "alias", "lift_fresh", "requires_grad_", "cpu", "cuda"}
# Loss functions: a task whose graph uses one is in the loss family.
LOSSES = {
    "mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss", "kl_div", "binary_cross_entropy", "cross_entropy",
    "nll_loss", "nll_loss_forward", "cosine_similarity", "triplet_margin_loss", "hinge_embedding_loss",
    "margin_ranking_loss", "soft_margin_loss", "cosine_embedding_loss",
}  # fmt: skip
REDUCTION_ENUM = {0: "none", 1: "mean", 2: "sum"}


def canonical(name: str) -> str:
    """The table's name for a call: in-place variants (relu_, add_) compute the same value,
    and aten's private names (_softmax, _to_copy) are the public ones."""
    if name.endswith("_") and not name.endswith("__"):
        name = name[:-1]
    if name.startswith("_") and not name.startswith("__") and (name[1:] in RULES or name[1:] in UNARY):
        name = name[1:]
    return ALIASES.get(name, name)


def _dims(value: Any, ndim: int) -> tuple[int, ...]:
    """Normalized reduction dims: None or [] means all."""
    if value is None or (isinstance(value, Sequence) and len(value) == 0):
        return tuple(range(ndim))
    if isinstance(value, int):
        value = [value]
    return tuple(sorted({int(d) % max(ndim, 1) for d in value}))


def _pair(value: Any, n: int) -> tuple[int, ...]:
    if isinstance(value, int):
        return (value,) * n
    value = tuple(int(v) for v in value)
    return value * n if len(value) == 1 else value


def _meta(out: Any) -> torch.Tensor:
    tensor = out[0] if isinstance(out, (tuple, list)) else out
    if not isinstance(tensor, torch.Tensor):
        raise Unsupported(f"expected a tensor result, got {type(tensor).__name__}")
    return tensor


def _dtype(t: torch.Tensor) -> str:
    return str(t.dtype).removeprefix("torch.")


class Lowering:
    """Builds IR nodes; remembers whether the graph used a loss function."""

    def __init__(self) -> None:
        self.used_loss = False
        self.ops_seen: list[str] = []

    # -- helpers ----------------------------------------------------------------------
    def node(self, cls: type[ir.Node], out: Any, **fields: Any) -> Any:
        meta = _meta(out)
        return cls(shape=tuple(meta.shape), dtype=_dtype(meta), **fields)

    def pointwise(self, op: str, args: Sequence[Node | ir.Scalar], out: Any, **attrs: Any) -> ir.Pointwise:
        return self.node(ir.Pointwise, out, op=op, args=tuple(args), attrs=attrs)

    def like(self, op: str, args: Sequence[Node | ir.Scalar], ref: Node, **attrs: Any) -> ir.Pointwise:
        """A pointwise node shaped like the broadcast of its tensor args, in `ref`'s dtype."""
        shapes = [a.shape for a in args if isinstance(a, Node)]
        return ir.Pointwise(shape=ir.broadcast_shape(*shapes), dtype=ref.dtype, op=op, args=tuple(args), attrs=attrs)

    def reduce(self, kind: str, src: Node, dims: tuple[int, ...], keepdim: bool, **attrs: Any) -> ir.Reduce:
        shape = (
            tuple(1 if d in dims else s for d, s in enumerate(src.shape))
            if keepdim
            else tuple(s for d, s in enumerate(src.shape) if d not in dims)
        )
        dtype = "int64" if kind in ("argmax", "argmin") else src.dtype
        return ir.Reduce(shape=shape, dtype=dtype, kind=kind, src=src, dims=dims, keepdim=keepdim, attrs=attrs)

    def apply_reduction(self, value: Node, reduction: str, batch: int | None = None) -> Node:
        if reduction == "none":
            return value
        dims = tuple(range(len(value.shape)))
        if reduction == "sum":
            return self.reduce("sum", value, dims, False)
        if reduction == "mean":
            return self.reduce("mean", value, dims, False)
        if reduction == "batchmean":
            total = self.reduce("sum", value, dims, False)
            return ir.Pointwise(shape=(), dtype=value.dtype, op="div", args=(total, float(batch or 1)))
        raise Unsupported(f"reduction={reduction!r}")

    # -- the entry point ---------------------------------------------------------------
    def call(self, name: str, args: Args, out: Any) -> Any:
        name = canonical(name)
        self.ops_seen.append(name)
        if name in LOSSES:
            self.used_loss = True
        if name in IDENTITY_CALLS:
            return args["self"]
        rule = RULES.get(name)
        if rule is not None:
            return rule(self, args, out)
        if name in UNARY:
            return self.pointwise(UNARY_ALIASES.get(name, name), [args["self"]], out)
        raise Unsupported(f"no kernel template for `{name}`")


def _tensor(args: Args, key: str = "self") -> Node:
    value = args.get(key)
    if not isinstance(value, Node):
        raise Unsupported(f"expected a tensor for `{key}`, got {type(value).__name__}")
    return value


def _scalar_or_node(value: Any) -> Node | ir.Scalar:
    if isinstance(value, (Node, int, float, bool)):
        return value
    raise Unsupported(f"unsupported operand {type(value).__name__}")


def _binary(op: str) -> Callable[[Lowering, Args, Any], Any]:
    def rule(lw: Lowering, args: Args, out: Any) -> Any:
        a, b = _scalar_or_node(args["self"]), _scalar_or_node(args["other"])
        attrs: dict[str, Any] = {}
        if op in ("add", "sub") and args.get("alpha", 1) != 1:
            attrs["alpha"] = args["alpha"]
        if op == "div":
            mode = args.get("rounding_mode")
            if mode is not None:
                return lw.pointwise(f"div_{mode}", [a, b], out)
            if not isinstance(b, Node):  # PyTorch multiplies by the scalar's reciprocal (fp32)
                return lw.pointwise("mul", [a, float(1.0 / float(torch.tensor(b, dtype=torch.float32)))], out)
        return lw.pointwise(op, [a, b], out, **attrs)

    return rule


def _rsub(lw: Lowering, args: Args, out: Any) -> Any:
    attrs = {"alpha": args["alpha"]} if args.get("alpha", 1) != 1 else {}
    return lw.pointwise("sub", [_scalar_or_node(args["other"]), args["self"]], out, **attrs)


def _pow(lw: Lowering, args: Args, out: Any) -> Any:
    base, exponent = args["self"], args["exponent"]
    if isinstance(base, Node) and isinstance(exponent, Node):
        return lw.pointwise("pow", [base, exponent], out)
    if isinstance(base, Node):
        special = {2: "square", 3: "cube", 0.5: "sqrt", -0.5: "rsqrt", -1: "reciprocal", 1: "identity"}
        e = float(exponent)
        if e in special:
            return lw.pointwise(special[e], [base], out)
        if e == -2:
            return lw.pointwise("reciprocal", [lw.like("square", [base], base)], out)
        return lw.pointwise("pow_scalar", [base], out, exponent=e)
    return lw.pointwise("rpow_scalar", [exponent], out, base=float(base))


def _clamp(lw: Lowering, args: Args, out: Any) -> Any:
    x, lo, hi = _tensor(args), args.get("min"), args.get("max")
    if isinstance(lo, Node) or isinstance(hi, Node):
        value: Node = x
        if lo is not None:
            value = lw.like("maximum", [value, lo], x)
        if hi is not None:
            value = lw.like("minimum", [value, hi], x)
        return value
    return lw.pointwise("clamp", [x], out, min=lo, max=hi)


def _where(lw: Lowering, args: Args, out: Any) -> Any:
    cond = args.get("condition", args.get("self"))
    if "condition" not in args:  # torch.where(cond, a, b) binds cond to self
        a, b = args["input"], args["other"]
    else:
        a, b = args["self"], args["other"]
    return lw.pointwise("where", [_scalar_or_node(cond), _scalar_or_node(a), _scalar_or_node(b)], out)


def _masked_fill(lw: Lowering, args: Args, out: Any) -> Any:
    return lw.pointwise("where", [_tensor(args, "mask"), float(args["value"]), _tensor(args)], out)


def _activation(op: str, **defaults: Any) -> Callable[[Lowering, Args, Any], Any]:
    def rule(lw: Lowering, args: Args, out: Any) -> Any:
        attrs = {k: args.get(k, v) if args.get(k) is not None else v for k, v in defaults.items()}
        return lw.pointwise(op, [_tensor(args)], out, **attrs)

    return rule


def _elu(lw: Lowering, args: Args, out: Any) -> Any:
    return lw.pointwise(
        "elu",
        [_tensor(args)],
        out,
        alpha=float(args.get("alpha", 1.0)),
        scale=float(args.get("scale", 1.0)),
        input_scale=float(args.get("input_scale", 1.0)),
    )


def _celu(lw: Lowering, args: Args, out: Any) -> Any:
    alpha = float(args.get("alpha", 1.0))
    return lw.pointwise("elu", [_tensor(args)], out, alpha=alpha, scale=1.0, input_scale=1.0 / alpha)


def _selu(lw: Lowering, args: Args, out: Any) -> Any:
    return lw.pointwise("elu", [_tensor(args)], out, alpha=SELU_ALPHA, scale=SELU_SCALE, input_scale=1.0)


def _relu6(lw: Lowering, args: Args, out: Any) -> Any:
    return lw.pointwise("hardtanh", [_tensor(args)], out, min_val=0.0, max_val=6.0)


def _dropout(lw: Lowering, args: Args, out: Any) -> Any:
    p = float(args.get("p", 0.5))
    training = args.get("training", args.get("train", True))
    if p != 0.0 and training:
        raise Unsupported(f"dropout with p={p} in training mode is random; no deterministic kernel matches it")
    return _tensor(args)


def _to(lw: Lowering, args: Args, out: Any) -> Any:
    x = _tensor(args)
    meta = _meta(out)
    if meta.dtype == torch.float64:
        raise Unsupported("float64 computation")
    if _dtype(meta) == x.dtype:
        return x
    return lw.pointwise("identity", [x], out)


def _view(lw: Lowering, args: Args, out: Any) -> Any:
    x = _tensor(args)
    meta = _meta(out)
    if tuple(meta.shape) == x.shape:
        return x
    if isinstance(x, ir.View):
        x = x.src
    return ir.View(shape=tuple(meta.shape), dtype=x.dtype, src=x)


def _expand(lw: Lowering, args: Args, out: Any) -> Any:
    x = _tensor(args)
    meta = _meta(out)
    if tuple(meta.shape) == x.shape:
        return x
    return lw.pointwise("identity", [x], out)  # a broadcast: the pointwise stage indexes x


def _permute(lw: Lowering, args: Args, out: Any) -> Any:
    x = _tensor(args)
    ndim = len(x.shape)
    if "dims" in args:
        perm = tuple(int(d) % ndim for d in args["dims"])
    else:
        d0, d1 = int(args.get("dim0", 0)) % max(ndim, 1), int(args.get("dim1", 1)) % max(ndim, 1)
        perm_list = list(range(ndim))
        perm_list[d0], perm_list[d1] = perm_list[d1], perm_list[d0]
        perm = tuple(perm_list)
    if perm == tuple(range(ndim)):
        return x
    if isinstance(x, ir.Permute):  # compose: out[i] = x.src[x.perm[perm[i]]]
        perm = tuple(x.perm[p] for p in perm)
        x = x.src
        if perm == tuple(range(ndim)):
            return x
    return lw.node(ir.Permute, out, src=x, perm=perm)


def _t(lw: Lowering, args: Args, out: Any) -> Any:
    x = _tensor(args)
    if len(x.shape) < 2:
        return x
    return _permute(lw, {"self": x, "dim0": -2, "dim1": -1}, out)


def _movedim(lw: Lowering, args: Args, out: Any) -> Any:
    x = _tensor(args)
    ndim = len(x.shape)
    src, dst = int(args["source"]) % ndim, int(args["destination"]) % ndim
    order = [d for d in range(ndim) if d != src]
    order.insert(dst, src)
    return _permute(lw, {"self": x, "dims": order}, out)


def _matmul(lw: Lowering, args: Args, out: Any) -> Any:
    a = _tensor(args)
    b = args.get("other", args.get("mat2"))
    if not isinstance(b, Node):
        raise Unsupported("matmul with a non-tensor operand")
    if len(a.shape) < 2 or len(b.shape) < 2:
        raise Unsupported("matmul with a 1-D operand (use unsqueeze to make it a matrix)")
    return lw.node(ir.Matmul, out, a=a, b=b)


def _linear(lw: Lowering, args: Args, out: Any) -> Any:
    x, w, bias = _tensor(args), _tensor(args, "weight"), args.get("bias")
    wt = ir.Permute(shape=(w.shape[1], w.shape[0]), dtype=w.dtype, src=w, perm=(1, 0))
    meta = _meta(out)
    mm = ir.Matmul(shape=tuple(meta.shape), dtype=_dtype(meta), a=x, b=wt)
    if bias is None:
        return mm
    return lw.pointwise("add", [mm, bias], out)


def _addmm(lw: Lowering, args: Args, out: Any) -> Any:
    bias, a, b = _tensor(args), _tensor(args, "mat1"), _tensor(args, "mat2")
    beta, alpha = args.get("beta", 1), args.get("alpha", 1)
    meta = _meta(out)
    mm: Node = ir.Matmul(shape=tuple(meta.shape), dtype=_dtype(meta), a=a, b=b)
    if alpha != 1:
        mm = lw.pointwise("mul", [mm, float(alpha)], out)
    scaled: Node | float = bias if beta == 1 else lw.like("mul", [bias, float(beta)], bias)
    return lw.pointwise("add", [mm, scaled], out)


def _conv(lw: Lowering, args: Args, out: Any) -> Any:
    x, w, bias = _tensor(args), _tensor(args, "weight"), args.get("bias")
    transposed = bool(args.get("transposed"))
    spatial = len(w.shape) - 2
    if spatial not in (1, 2, 3):
        kind = "transposed convolution" if transposed else "convolution"
        raise Unsupported(f"{spatial}-D {kind} (the catalog has 1-D, 2-D and 3-D)")
    padding = args.get("padding", 0)
    if transposed and isinstance(padding, str):
        raise Unsupported(f"a transposed convolution with padding={padding!r}")
    if isinstance(padding, str):
        if padding == "valid":
            padding = 0
        elif padding == "same":
            dil = _pair(args.get("dilation", 1), spatial)
            total = [d * (k - 1) for d, k in zip(dil, w.shape[2:])]
            if any(t % 2 for t in total):
                raise Unsupported("padding='same' with an even effective kernel (asymmetric padding)")
            padding = [t // 2 for t in total]
        else:
            raise Unsupported(f"padding={padding!r}")
    stride, pad, dil = (
        _pair(args.get("stride", 1), spatial),
        _pair(padding, spatial),
        _pair(args.get("dilation", 1), spatial),
    )
    meta = _meta(out)
    if spatial == 1:  # as 2-D with height 1
        x2 = ir.View(shape=(x.shape[0], x.shape[1], 1, x.shape[2]), dtype=x.dtype, src=x)
        w2 = ir.View(shape=(w.shape[0], w.shape[1], 1, w.shape[2]), dtype=w.dtype, src=w)
        out_shape = (meta.shape[0], meta.shape[1], 1, meta.shape[2])
        conv = ir.Conv(
            shape=out_shape, dtype=_dtype(meta), x=x2, weight=w2, bias=bias, stride=(1, stride[0]),
            padding=(0, pad[0]), dilation=(1, dil[0]), groups=int(args.get("groups", 1)), transposed=transposed,
        )  # fmt: skip
        return ir.View(shape=tuple(meta.shape), dtype=conv.dtype, src=conv)
    return lw.node(
        ir.Conv, out, x=x, weight=w, bias=bias, stride=tuple(stride), padding=tuple(pad), dilation=tuple(dil),
        groups=int(args.get("groups", 1)), transposed=transposed,
    )  # fmt: skip


def _reduction(kind: str) -> Callable[[Lowering, Args, Any], Any]:
    def rule(lw: Lowering, args: Args, out: Any) -> Any:
        x = _tensor(args)
        if args.get("dtype") is not None:
            raise Unsupported(f"{kind} with a dtype argument")
        dims = _dims(args.get("dim"), len(x.shape))
        return lw.reduce(kind, x, dims, bool(args.get("keepdim", False)))

    return rule


def _max_min(kind: str) -> Callable[[Lowering, Args, Any], Any]:
    def rule(lw: Lowering, args: Args, out: Any) -> Any:
        x = _tensor(args)
        other = args.get("other", args.get("dim"))
        if isinstance(other, Node):  # torch.max(a, b)
            return lw.pointwise("maximum" if kind == "max" else "minimum", [x, other], out)
        if args.get("dim") is None:
            return lw.reduce("amax" if kind == "max" else "amin", x, _dims(None, len(x.shape)), False)
        dims, keep = _dims(args["dim"], len(x.shape)), bool(args.get("keepdim", False))
        values = lw.reduce("amax" if kind == "max" else "amin", x, dims, keep)
        indices = lw.reduce("argmax" if kind == "max" else "argmin", x, dims, keep)
        return (values, indices)

    return rule


def _arg(kind: str) -> Callable[[Lowering, Args, Any], Any]:
    def rule(lw: Lowering, args: Args, out: Any) -> Any:
        x = _tensor(args)
        if args.get("dim") is None:
            flat = ir.View(shape=(x.numel,), dtype=x.dtype, src=x)
            return lw.reduce(kind, flat, (0,), False)
        return lw.reduce(kind, x, _dims(args["dim"], len(x.shape)), bool(args.get("keepdim", False)))

    return rule


def _var_std(kind: str) -> Callable[[Lowering, Args, Any], Any]:
    def rule(lw: Lowering, args: Args, out: Any) -> Any:
        x = _tensor(args)
        correction = args.get("correction")
        if correction is None:
            unbiased = args.get("unbiased", True)
            correction = 1 if unbiased in (True, None) else 0
        dims = _dims(args.get("dim"), len(x.shape))
        return lw.reduce(kind, x, dims, bool(args.get("keepdim", False)), correction=float(correction))

    return rule


def _norm(lw: Lowering, args: Args, out: Any) -> Any:
    x = _tensor(args)
    p = args.get("ord", args.get("p", 2))
    p = 2 if p in (None, "fro") else p
    if p not in (1, 2, math.inf, float("inf")):
        raise Unsupported(f"norm with p={p}")
    if args.get("dtype") is not None:
        raise Unsupported("norm with a dtype argument")
    return lw.reduce("norm", x, _dims(args.get("dim"), len(x.shape)), bool(args.get("keepdim", False)), p=float(p))


def _softmax(log: bool, negate: bool = False) -> Callable[[Lowering, Args, Any], Any]:
    def rule(lw: Lowering, args: Args, out: Any) -> Any:
        x = _tensor(args)
        if args.get("dtype") is not None or args.get("half_to_float"):
            raise Unsupported("softmax with a dtype argument")
        if args.get("dim") is None:
            raise Unsupported("softmax without dim")
        src = lw.like("neg", [x], x) if negate else x
        return lw.node(ir.Softmax, out, src=src, dim=int(args["dim"]) % len(x.shape), log=log)

    return rule


def _scan(kind: str) -> Callable[[Lowering, Args, Any], Any]:
    def rule(lw: Lowering, args: Args, out: Any) -> Any:
        x = _tensor(args)
        if args.get("dtype") is not None:
            raise Unsupported(f"cum{kind} with a dtype argument")
        dim = int(args["dim"]) % len(x.shape)
        if isinstance(x, ir.Flip) and x.dims == (dim,):  # cumsum(flip(x)) = flip(reverse cumsum(x))
            scan = lw.node(ir.Scan, out, kind=kind, src=x.src, dim=dim, reverse=True)
            return ir.Flip(shape=scan.shape, dtype=scan.dtype, src=scan, dims=x.dims)
        return lw.node(ir.Scan, out, kind=kind, src=x, dim=dim)

    return rule


def _flip(lw: Lowering, args: Args, out: Any) -> Any:
    x = _tensor(args)
    given = args["dims"]
    dims = tuple(sorted(int(d) % len(x.shape) for d in ([given] if isinstance(given, int) else given)))
    if isinstance(x, ir.Flip) and x.dims == dims:
        return x.src
    return ir.Flip(shape=x.shape, dtype=x.dtype, src=x, dims=dims)


def _layer_norm(lw: Lowering, args: Args, out: Any) -> Any:
    x = _tensor(args)
    shape = args["normalized_shape"]
    ndims = 1 if isinstance(shape, int) else len(shape)
    return lw.node(
        ir.LayerNorm, out, src=x, ndims=ndims, weight=args.get("weight"), bias=args.get("bias"),
        eps=float(args.get("eps", 1e-5)),
    )  # fmt: skip


def _group_norm(lw: Lowering, args: Args, out: Any) -> Any:
    x = _tensor(args)
    groups = int(args["num_groups"] if "num_groups" in args else args.get("group", 1))
    return lw.node(
        ir.GroupNorm, out, src=x, groups=groups, weight=args.get("weight"), bias=args.get("bias"),
        eps=float(args.get("eps", 1e-5)),
    )  # fmt: skip


def _instance_norm(lw: Lowering, args: Args, out: Any) -> Any:
    x = _tensor(args)
    if args.get("running_mean") is not None and not args.get("use_input_stats", True):
        raise Unsupported("instance norm with running statistics")
    if args.get("running_mean") is not None:
        raise Unsupported("instance norm that updates running statistics")
    return lw.node(
        ir.GroupNorm, out, src=x, groups=x.shape[1], weight=args.get("weight"), bias=args.get("bias"),
        eps=float(args.get("eps", 1e-5)),
    )  # fmt: skip


def _batch_norm(lw: Lowering, args: Args, out: Any) -> Any:
    """Batch norm as the reductions and pointwise ops it is made of: per channel (dim 1), the
    mean and the biased variance over every other dim (training mode), or the running
    statistics (eval mode). The running statistics are not updated: the output does not
    depend on that update."""
    x = _tensor(args)
    if len(x.shape) < 2:
        raise Unsupported("batch norm of a tensor with fewer than 2 dims")
    channels = (1, x.shape[1]) + (1,) * (len(x.shape) - 2)

    def per_channel(value: Any) -> Node | None:
        if value is None:
            return None
        if not isinstance(value, Node) or value.shape != (x.shape[1],):
            raise Unsupported("batch norm with a weight, bias or statistic that is not one value per channel")
        return ir.View(shape=channels, dtype=value.dtype, src=value)

    eps = float(args.get("eps", 1e-5))
    if args.get("training", True):
        rest = tuple(range(2, len(x.shape)))

        def over_all_but_channels(t: Node) -> Node:  # two reductions of adjacent dims: the spatial ones, then batch
            return lw.reduce("mean", lw.reduce("mean", t, rest, True) if rest else t, (0,), True)

        mean = over_all_but_channels(x)
        centered = lw.like("sub", [x, mean], x)
        var = over_all_but_channels(lw.like("square", [centered], x))
    else:
        running_mean, running_var = per_channel(args.get("running_mean")), per_channel(args.get("running_var"))
        if running_mean is None or running_var is None:
            raise Unsupported("batch norm in eval mode without both running statistics")
        centered, var = lw.like("sub", [x, running_mean], x), running_var
    y = lw.like("mul", [centered, lw.like("rsqrt", [lw.like("add", [var, eps], var)], var)], x)
    weight, bias = per_channel(args.get("weight")), per_channel(args.get("bias"))
    if weight is not None:
        y = lw.like("mul", [y, weight], x)
    return lw.like("add", [y, bias], x) if bias is not None else y


def _rms_norm(lw: Lowering, args: Args, out: Any) -> Any:
    x = _tensor(args)
    shape = args["normalized_shape"]
    ndims = 1 if isinstance(shape, int) else len(shape)
    eps = args.get("eps")
    if eps is None:
        eps = float(torch.finfo(getattr(torch, x.dtype)).eps)
    dims = tuple(range(len(x.shape) - ndims, len(x.shape)))
    mean = lw.reduce("mean", lw.like("square", [x], x), dims, True)
    scale = lw.like("rsqrt", [lw.like("add", [mean, float(eps)], mean)], mean)
    y = lw.like("mul", [x, scale], x)
    weight = args.get("weight")
    return lw.like("mul", [y, weight], x) if weight is not None else y


def _normalize(lw: Lowering, args: Args, out: Any) -> Any:
    x = _tensor(args)
    p, dim, eps = float(args.get("p", 2.0)), int(args.get("dim", 1)), float(args.get("eps", 1e-12))
    norm = _norm(lw, {"self": x, "p": p, "dim": dim, "keepdim": True}, None)
    clamped = lw.like("clamp", [norm], norm, min=eps, max=None)
    return lw.like("div", [x, clamped], x)


def _pool(kind: str) -> Callable[[Lowering, Args, Any], Any]:
    def rule(lw: Lowering, args: Args, out: Any) -> Any:
        x = _tensor(args)
        if args.get("return_indices"):
            raise Unsupported("pooling that returns indices")
        kernel = args["kernel_size"]
        n = len(kernel) if isinstance(kernel, (list, tuple)) else len(x.shape) - 2
        n = min(max(n, 1), 3)
        k = _pair(kernel, n)
        stride = args.get("stride")
        s = k if stride in (None, [], ()) else _pair(stride, n)
        return lw.node(
            ir.Pool, out, kind=kind, src=x, kernel=k, stride=s, padding=_pair(args.get("padding", 0), n),
            dilation=_pair(args.get("dilation", 1), n), ceil_mode=bool(args.get("ceil_mode", False)),
            count_include_pad=bool(args.get("count_include_pad", True)), divisor=args.get("divisor_override"),
        )  # fmt: skip

    return rule


def _adaptive(kind: str) -> Callable[[Lowering, Args, Any], Any]:
    def rule(lw: Lowering, args: Args, out: Any) -> Any:
        x = _tensor(args)
        meta = _meta(out)
        n = len(meta.shape) - 2
        in_sizes, out_sizes = x.shape[-n:], tuple(meta.shape[-n:])
        if all(o == 1 for o in out_sizes):
            dims = tuple(range(len(x.shape) - n, len(x.shape)))
            return lw.reduce("mean" if kind == "avg" else "amax", x, dims, True)
        if any(i % o for i, o in zip(in_sizes, out_sizes)):
            raise Unsupported("adaptive pooling whose output size does not divide the input size")
        k = tuple(i // o for i, o in zip(in_sizes, out_sizes))
        return lw.node(
            ir.Pool, out, kind=kind, src=x, kernel=k, stride=k, padding=(0,) * n, dilation=(1,) * n, ceil_mode=False
        )

    return rule


def _reduction_arg(args: Args) -> str:
    reduction = args.get("reduction", "mean")
    if isinstance(reduction, int):
        reduction = REDUCTION_ENUM[reduction]
    if args.get("size_average") is not None or args.get("reduce") is not None:
        raise Unsupported("the deprecated size_average/reduce arguments")
    return str(reduction)


def _pair_loss(op: str, **defaults: Any) -> Callable[[Lowering, Args, Any], Any]:
    def rule(lw: Lowering, args: Args, out: Any) -> Any:
        a, b = _tensor(args), _tensor(args, "target")
        if args.get("weight") is not None:
            raise Unsupported(f"{op} with per-element weights")
        attrs = {k: float(args.get(k, v) if args.get(k) is not None else v) for k, v in defaults.items()}
        value = lw.like(op, [a, b], a, **attrs)
        return lw.apply_reduction(value, _reduction_arg(args))

    return rule


def _kl_div(lw: Lowering, args: Args, out: Any) -> Any:
    x, t = _tensor(args), _tensor(args, "target")
    if args.get("log_target"):
        value = lw.like("mul", [lw.like("exp", [t], t), lw.like("sub", [t, x], x)], x)
    else:
        value = lw.like("sub", [lw.like("xlogy", [t, t], t), lw.like("mul", [t, x], x)], x)
    return lw.apply_reduction(value, _reduction_arg(args), batch=x.shape[0] if x.shape else 1)


def _cross_entropy(lw: Lowering, args: Args, out: Any) -> Any:
    x, target = _tensor(args), _tensor(args, "target")
    if args.get("weight") is not None or float(args.get("label_smoothing", 0.0) or 0.0) != 0.0:
        raise Unsupported("cross-entropy with class weights or label smoothing")
    if len(x.shape) != 2:
        raise Unsupported("cross-entropy over more than (batch, classes)")
    logp = ir.Softmax(shape=x.shape, dtype=x.dtype, src=x, dim=1, log=True)
    reduction = _reduction_arg(args)
    if target.dtype.startswith("float"):  # class probabilities
        terms = lw.like("mul", [target, logp], x)
        per_row = lw.like("neg", [lw.reduce("sum", terms, (1,), False)], x)
        return lw.apply_reduction(per_row, reduction)
    return _nll(
        lw, {"self": logp, "target": target, "reduction": reduction, "ignore_index": args.get("ignore_index")}, out
    )


def _nll(lw: Lowering, args: Args, out: Any) -> Any:
    x, target = _tensor(args), _tensor(args, "target")
    if args.get("weight") is not None:
        raise Unsupported("nll loss with class weights")
    if len(x.shape) != 2:
        raise Unsupported("nll loss over more than (batch, classes)")
    reduction = _reduction_arg(args)
    ignore = args.get("ignore_index")
    shape = () if reduction != "none" else (x.shape[0],)
    return ir.Nll(
        shape=shape, dtype=x.dtype, src=x, target=target, reduction=reduction,
        ignore_index=-100 if ignore is None else int(ignore),
    )  # fmt: skip


def _nll_forward(lw: Lowering, args: Args, out: Any) -> Any:
    return (_nll(lw, args, out), None)


def _cosine_similarity(lw: Lowering, args: Args, out: Any) -> Any:
    a, b = _tensor(args), _tensor(args, "x2")
    dim, eps = int(args.get("dim", 1)) % len(a.shape), float(args.get("eps", 1e-8))
    na = lw.like("clamp", [_norm(lw, {"self": a, "dim": dim, "keepdim": True}, None)], a, min=eps, max=None)
    nb = lw.like("clamp", [_norm(lw, {"self": b, "dim": dim, "keepdim": True}, None)], b, min=eps, max=None)
    product = lw.like("mul", [lw.like("div", [a, na], a), lw.like("div", [b, nb], b)], a)
    return lw.reduce("sum", product, (dim,), False)


def _pairwise_distance(lw: Lowering, a: Node, b: Node, p: float, eps: float) -> Node:
    diff = lw.like("add", [lw.like("sub", [a, b], a), eps], a)
    return _norm(lw, {"self": diff, "p": p, "dim": len(a.shape) - 1, "keepdim": False}, None)


def _triplet(lw: Lowering, args: Args, out: Any) -> Any:
    a, pos, neg = _tensor(args, "anchor"), _tensor(args, "positive"), _tensor(args, "negative")
    if args.get("swap"):
        raise Unsupported("triplet margin loss with swap")
    p, eps, margin = float(args.get("p", 2.0)), float(args.get("eps", 1e-6)), float(args.get("margin", 1.0))
    d_ap = _pairwise_distance(lw, a, pos, p, eps)
    d_an = _pairwise_distance(lw, a, neg, p, eps)
    value = lw.like(
        "clamp", [lw.like("add", [lw.like("sub", [d_ap, d_an], d_ap), margin], d_ap)], d_ap, min=0.0, max=None
    )
    return lw.apply_reduction(value, _reduction_arg(args))


def _getitem(lw: Lowering, args: Args, out: Any) -> Any:
    container, index = args["self"], args["index"]
    if isinstance(container, (tuple, list)) and isinstance(index, int):
        value = container[index]
        if value is None:
            raise Unsupported("an auxiliary output of a fused op (e.g. layer norm's mean) is used")
        return value
    raise Unsupported("tensor indexing or slicing")


def _fill(value_key: str | None, value: float = 0.0) -> Callable[[Lowering, Args, Any], Any]:
    def rule(lw: Lowering, args: Args, out: Any) -> Any:
        v = float(args.get(value_key, value)) if value_key else value
        return lw.node(ir.Fill, out, value=v)

    return rule


RULES: dict[str, Callable[[Lowering, Args, Any], Any]] = {
    **{op: _binary(op) for op in BINARY},
    "rsub": _rsub,
    "pow": _pow,
    "clamp": _clamp,
    "clamp_min": lambda lw, a, o: _clamp(lw, {"self": a["self"], "min": a.get("min")}, o),
    "clamp_max": lambda lw, a, o: _clamp(lw, {"self": a["self"], "max": a.get("max")}, o),
    "where": _where,
    "masked_fill": _masked_fill,
    "gelu": _activation("gelu", approximate="none"),
    "softplus": _activation("softplus", beta=1.0, threshold=20.0),
    "leaky_relu": _activation("leaky_relu", negative_slope=0.01),
    "hardtanh": _activation("hardtanh", min_val=-1.0, max_val=1.0),
    "threshold": _activation("threshold", threshold=0.0, value=0.0),
    "softshrink": _activation("softshrink", lambd=0.5),
    "hardshrink": _activation("hardshrink", lambd=0.5),
    "elu": _elu,
    "celu": _celu,
    "selu": _selu,
    "relu6": _relu6,
    "dropout": _dropout,
    "dropout1d": _dropout,
    "dropout2d": _dropout,
    "dropout3d": _dropout,
    "to": _to,
    "float": _to,
    "half": _to,
    "bfloat16": _to,
    "double": _to,
    "type_as": _to,
    "type": _to,
    "to_copy": _to,
    "view": _view,
    "reshape": _view,
    "unsafe_view": _view,
    "flatten": _view,
    "unflatten": _view,
    "unsqueeze": _view,
    "squeeze": _view,
    "view_as": _view,
    "reshape_as": _view,
    "expand": _expand,
    "expand_as": _expand,
    "broadcast_to": _expand,
    "permute": _permute,
    "transpose": _permute,
    "swapaxes": _permute,
    "movedim": _movedim,
    "t": _t,
    "numpy_T": _t,
    "matmul": _matmul,
    "mm": _matmul,
    "bmm": _matmul,
    "linear": _linear,
    "addmm": _addmm,
    "conv1d": _conv,
    "conv2d": _conv,
    "conv3d": _conv,
    "convolution": _conv,
    "batch_norm": _batch_norm,
    "conv_transpose1d": lambda lw, a, o: _conv(lw, {**a, "transposed": True}, o),
    "conv_transpose2d": lambda lw, a, o: _conv(lw, {**a, "transposed": True}, o),
    "conv_transpose3d": lambda lw, a, o: _conv(lw, {**a, "transposed": True}, o),
    "sum": _reduction("sum"),
    "mean": _reduction("mean"),
    "prod": _reduction("prod"),
    "amax": _reduction("amax"),
    "amin": _reduction("amin"),
    "logsumexp": _reduction("logsumexp"),
    "max": _max_min("max"),
    "min": _max_min("min"),
    "argmax": _arg("argmax"),
    "argmin": _arg("argmin"),
    "var": _var_std("var"),
    "std": _var_std("std"),
    "norm": _norm,
    "linalg_vector_norm": _norm,
    "softmax": _softmax(log=False),
    "log_softmax": _softmax(log=True),
    "softmin": _softmax(log=False, negate=True),
    "cumsum": _scan("sum"),
    "cumprod": _scan("prod"),
    "flip": _flip,
    "layer_norm": _layer_norm,
    "native_layer_norm": lambda lw, a, o: (_layer_norm(lw, a, o), None, None),
    "group_norm": _group_norm,
    "native_group_norm": lambda lw, a, o: (_group_norm(lw, a, o), None, None),
    "instance_norm": _instance_norm,
    "rms_norm": _rms_norm,
    "normalize": _normalize,
    "max_pool1d": _pool("max"),
    "max_pool2d": _pool("max"),
    "max_pool3d": _pool("max"),
    "max_pool2d_with_indices": lambda lw, a, o: (_pool("max")(lw, a, o), None),
    "max_pool3d_with_indices": lambda lw, a, o: (_pool("max")(lw, a, o), None),
    "avg_pool1d": _pool("avg"),
    "avg_pool2d": _pool("avg"),
    "avg_pool3d": _pool("avg"),
    "adaptive_avg_pool1d": _adaptive("avg"),
    "adaptive_avg_pool2d": _adaptive("avg"),
    "adaptive_avg_pool3d": _adaptive("avg"),
    "adaptive_max_pool2d": _adaptive("max"),
    "mse_loss": _pair_loss("mse"),
    "l1_loss": _pair_loss("l1"),
    "smooth_l1_loss": _pair_loss("smooth_l1", beta=1.0),
    "huber_loss": _pair_loss("huber", delta=1.0),
    "binary_cross_entropy": _pair_loss("bce"),
    "kl_div": _kl_div,
    "cross_entropy": _cross_entropy,
    "nll_loss": _nll,
    "nll_loss_forward": _nll_forward,
    "cosine_similarity": _cosine_similarity,
    "triplet_margin_loss": _triplet,
    "getitem": _getitem,
    "log_sigmoid_forward": lambda lw, a, o: (lw.pointwise("logsigmoid", [_tensor(a)], o), None),
    "native_dropout": lambda lw, a, o: (_dropout(lw, a, o), None),
    "zeros_like": _fill(None, 0.0),
    "ones_like": _fill(None, 1.0),
    "full_like": _fill("fill_value"),
    "zeros": _fill(None, 0.0),
    "ones": _fill(None, 1.0),
    "full": _fill("fill_value"),
    "scalar_tensor": _fill("s"),
}
