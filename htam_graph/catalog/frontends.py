"""Reading a reference model as IR: torch.fx first, the dispatcher trace when fx fails.

Both run the model on meta tensors (no memory, no GPU): every call's result gives the
shape and dtype of its IR node, and Python-level values (sizes, `self.scale`) come out as
the constants they are. fx sees calls as written (F.gelu, nn.Linear with its parameter
names); it fails on control flow over tensors and on calls the table does not know, and
then the dispatcher trace (a TorchDispatchMode over one forward) sees the same model as
aten ops, composite functions already decomposed.
"""

from __future__ import annotations

import inspect
import logging
import operator
from collections.abc import Callable
from typing import Any

import torch
import torch.fx
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten, tree_map

from htam_graph.catalog import ir
from htam_graph.catalog.ir import Node, Unsupported
from htam_graph.catalog.lowering import SIGNATURES, VARARG_SHAPE, Lowering, canonical

log = logging.getLogger(__name__)

_OPERATORS = {
    operator.add: "add",
    operator.iadd: "add",
    operator.sub: "sub",
    operator.isub: "sub",
    operator.mul: "mul",
    operator.imul: "mul",
    operator.truediv: "div",
    operator.itruediv: "div",
    operator.neg: "neg",
    operator.pow: "pow",
    operator.matmul: "matmul",
    operator.getitem: "getitem",
    operator.gt: "gt",
    operator.lt: "lt",
    operator.ge: "ge",
    operator.le: "le",
    operator.eq: "eq",
    operator.ne: "ne",
    operator.abs: "abs",
    operator.and_: "logical_and",
    operator.or_: "logical_or",
}
_REVERSED = {"add", "mul"}  # 2 * x reaches fx as mul(2, x): commutative ops take the tensor first

# nn module class -> (call name, module attributes passed as arguments, names of its inputs)
_MODULES: dict[str, tuple[str, tuple[str, ...], tuple[str, ...]]] = {
    "Linear": ("linear", (), ("self",)),
    "Conv1d": ("conv1d", ("stride", "padding", "dilation", "groups"), ("self",)),
    "Conv2d": ("conv2d", ("stride", "padding", "dilation", "groups"), ("self",)),
    "ConvTranspose1d": ("conv_transpose1d", ("stride", "padding", "output_padding", "groups", "dilation"), ("self",)),
    "Conv3d": ("conv3d", ("stride", "padding", "dilation", "groups"), ("self",)),
    "ConvTranspose2d": ("conv_transpose2d", ("stride", "padding", "output_padding", "groups", "dilation"), ("self",)),
    "ConvTranspose3d": ("conv_transpose3d", ("stride", "padding", "output_padding", "groups", "dilation"), ("self",)),
    "LayerNorm": ("layer_norm", ("normalized_shape", "eps"), ("self",)),
    "BatchNorm1d": ("batch_norm", ("eps",), ("self",)),
    "BatchNorm2d": ("batch_norm", ("eps",), ("self",)),
    "BatchNorm3d": ("batch_norm", ("eps",), ("self",)),
    "GroupNorm": ("group_norm", ("num_groups", "eps"), ("self",)),
    "RMSNorm": ("rms_norm", ("normalized_shape", "eps"), ("self",)),
    "InstanceNorm1d": ("instance_norm", ("eps",), ("self",)),
    "InstanceNorm2d": ("instance_norm", ("eps",), ("self",)),
    "InstanceNorm3d": ("instance_norm", ("eps",), ("self",)),
    "Softmax": ("softmax", ("dim",), ("self",)),
    "LogSoftmax": ("log_softmax", ("dim",), ("self",)),
    "Softmin": ("softmin", ("dim",), ("self",)),
    "MaxPool1d": (
        "max_pool1d",
        ("kernel_size", "stride", "padding", "dilation", "ceil_mode", "return_indices"),
        ("self",),
    ),
    "MaxPool2d": (
        "max_pool2d",
        ("kernel_size", "stride", "padding", "dilation", "ceil_mode", "return_indices"),
        ("self",),
    ),
    "MaxPool3d": (
        "max_pool3d",
        ("kernel_size", "stride", "padding", "dilation", "ceil_mode", "return_indices"),
        ("self",),
    ),
    "AvgPool1d": ("avg_pool1d", ("kernel_size", "stride", "padding", "ceil_mode", "count_include_pad"), ("self",)),
    "AvgPool2d": (
        "avg_pool2d",
        ("kernel_size", "stride", "padding", "ceil_mode", "count_include_pad", "divisor_override"),
        ("self",),
    ),
    "AvgPool3d": (
        "avg_pool3d",
        ("kernel_size", "stride", "padding", "ceil_mode", "count_include_pad", "divisor_override"),
        ("self",),
    ),
    "AdaptiveAvgPool1d": ("adaptive_avg_pool1d", (), ("self",)),
    "AdaptiveAvgPool2d": ("adaptive_avg_pool2d", (), ("self",)),
    "AdaptiveAvgPool3d": ("adaptive_avg_pool3d", (), ("self",)),
    "AdaptiveMaxPool2d": ("adaptive_max_pool2d", (), ("self",)),
    "Dropout": ("dropout", ("p",), ("self",)),
    "Dropout1d": ("dropout", ("p",), ("self",)),
    "Dropout2d": ("dropout", ("p",), ("self",)),
    "Dropout3d": ("dropout", ("p",), ("self",)),
    "Identity": ("identity", (), ("self",)),
    "Flatten": ("flatten", ("start_dim", "end_dim"), ("self",)),
    "ReLU": ("relu", (), ("self",)),
    "ReLU6": ("relu6", (), ("self",)),
    "GELU": ("gelu", ("approximate",), ("self",)),
    "SiLU": ("silu", (), ("self",)),
    "Mish": ("mish", (), ("self",)),
    "Tanh": ("tanh", (), ("self",)),
    "Sigmoid": ("sigmoid", (), ("self",)),
    "ELU": ("elu", ("alpha",), ("self",)),
    "SELU": ("selu", (), ("self",)),
    "CELU": ("celu", ("alpha",), ("self",)),
    "LeakyReLU": ("leaky_relu", ("negative_slope",), ("self",)),
    "Hardtanh": ("hardtanh", ("min_val", "max_val"), ("self",)),
    "Hardsigmoid": ("hardsigmoid", (), ("self",)),
    "Hardswish": ("hardswish", (), ("self",)),
    "Softplus": ("softplus", ("beta", "threshold"), ("self",)),
    "Softsign": ("softsign", (), ("self",)),
    "Tanhshrink": ("tanhshrink", (), ("self",)),
    "LogSigmoid": ("logsigmoid", (), ("self",)),
    "Threshold": ("threshold", ("threshold", "value"), ("self",)),
    "Softshrink": ("softshrink", ("lambd",), ("self",)),
    "Hardshrink": ("hardshrink", ("lambd",), ("self",)),
    "MSELoss": ("mse_loss", ("reduction",), ("self", "target")),
    "L1Loss": ("l1_loss", ("reduction",), ("self", "target")),
    "SmoothL1Loss": ("smooth_l1_loss", ("reduction", "beta"), ("self", "target")),
    "HuberLoss": ("huber_loss", ("reduction", "delta"), ("self", "target")),
    "KLDivLoss": ("kl_div", ("reduction", "log_target"), ("self", "target")),
    "BCELoss": ("binary_cross_entropy", ("reduction",), ("self", "target")),
    "CrossEntropyLoss": ("cross_entropy", ("ignore_index", "reduction", "label_smoothing"), ("self", "target")),
    "NLLLoss": ("nll_loss", ("ignore_index", "reduction"), ("self", "target")),
    "CosineSimilarity": ("cosine_similarity", ("dim", "eps"), ("x1", "x2")),
    "TripletMarginLoss": (
        "triplet_margin_loss",
        ("margin", "p", "eps", "swap", "reduction"),
        ("anchor", "positive", "negative"),
    ),
}
_MODULE_OUTPUT_SIZE = {"AdaptiveAvgPool1d", "AdaptiveAvgPool2d", "AdaptiveAvgPool3d", "AdaptiveMaxPool2d"}
_UNSUPPORTED_MODULES = {
    "MultiheadAttention": "attention",
    "LSTM": "recurrent layers",
    "GRU": "recurrent layers",
    "RNN": "recurrent layers",
    "Embedding": "embedding lookups",
}


def _is_tensorish(value: Any) -> bool:
    return any(isinstance(v, torch.Tensor) for v in tree_flatten(value)[0])


def _has_node(value: Any) -> bool:
    return any(isinstance(v, Node) for v in tree_flatten(value)[0])


def bind_python(fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any] | None:
    """Arguments of a Python function by name (defaults filled in); the first is also `self`."""
    try:
        sig = inspect.signature(fn)
        bound = sig.bind(*args, **kwargs)
    except (TypeError, ValueError):
        return None
    variadic = (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
    if any(p.kind in variadic for p in sig.parameters.values()):
        return None  # a dispatching wrapper (F.max_pool2d): the table knows its arguments
    bound.apply_defaults()
    named = dict(bound.arguments)
    first = next(iter(sig.parameters), None)
    if first is not None and first in named:
        named["self"] = named[first]
    return named


def bind_table(name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
    """Arguments of a torch function or Tensor method by the SIGNATURES table."""
    named: dict[str, Any] = {"self": args[0] if args else kwargs.pop("input", None)}
    rest = args[1:]
    if name in VARARG_SHAPE:
        dims = rest[0] if len(rest) == 1 and isinstance(rest[0], (tuple, list, torch.Size)) else rest
        named["dims" if name == "permute" else "size"] = tuple(dims)
        return {**named, **kwargs}
    params = SIGNATURES.get(name, ())
    for param, value in zip(params, rest):
        named[param] = value
    if len(rest) > len(params):
        named["_extra"] = rest[len(params) :]
    named.update({("self" if k == "input" and name != "where" else k): v for k, v in kwargs.items()})
    return named


# -- torch.fx ----------------------------------------------------------------------------


def trace_fx(model: nn.Module, inputs: list[Any], params: dict[str, Node], lowering: Lowering) -> Any:
    """The IR of `model`'s output through a symbolic trace; raises on what fx cannot trace."""
    graph = torch.fx.symbolic_trace(model)
    env: dict[torch.fx.Node, tuple[Any, Any]] = {}
    placeholders = 0

    def meta_of(a: Any) -> Any:
        return torch.fx.node.map_arg(a, lambda n: env[n][0])

    def ir_of(a: Any) -> Any:
        return torch.fx.node.map_arg(a, lambda n: env[n][1])

    for node in graph.graph.nodes:
        if node.op == "placeholder":
            value = inputs[placeholders] if placeholders < len(inputs) else None
            ir_value = _input(value, placeholders, node.target) if isinstance(value, torch.Tensor) else value
            env[node] = (value, ir_value)
            placeholders += 1
        elif node.op == "get_attr":
            value = _fetch(graph, node.target)
            if isinstance(value, torch.Tensor):
                if node.target not in params:
                    raise Unsupported(f"tensor attribute `{node.target}` that is neither a parameter nor a buffer")
                env[node] = (value, params[node.target])
            else:
                env[node] = (value, value)
        elif node.op in ("call_function", "call_method"):
            m_args, m_kwargs = meta_of(node.args), meta_of(node.kwargs)
            if node.op == "call_function":
                meta = node.target(*m_args, **m_kwargs)
            else:
                meta = getattr(m_args[0], node.target)(*m_args[1:], **m_kwargs)
            i_args, i_kwargs = ir_of(node.args), ir_of(node.kwargs)
            if not (_is_tensorish(meta) or _has_node((i_args, i_kwargs))):
                env[node] = (meta, meta)  # sizes, dims, Python arithmetic on them
                continue
            env[node] = (meta, _lower_fx_call(node, i_args, i_kwargs, meta, lowering))
        elif node.op == "call_module":
            module = graph.get_submodule(node.target)
            m_args, m_kwargs = meta_of(node.args), meta_of(node.kwargs)
            meta = module(*m_args, **m_kwargs)
            env[node] = (meta, _lower_module(module, node.target, ir_of(node.args), meta, params, lowering))
        elif node.op == "output":
            return ir_of(node.args[0])
    raise Unsupported("the traced graph has no output")


def _input(value: torch.Tensor, index: int, name: str) -> Node:
    return ir.Input(shape=tuple(value.shape), dtype=str(value.dtype).removeprefix("torch."), index=index, name=name)


def _fetch(graph: torch.fx.GraphModule, target: str) -> Any:
    value: Any = graph
    for part in target.split("."):
        value = getattr(value, part)
    return value


def _lower_fx_call(node: torch.fx.Node, args: tuple[Any, ...], kwargs: dict[str, Any], meta: Any, lw: Lowering) -> Any:
    target = node.target
    if node.op == "call_method":
        name = str(target)
        if name in ("size", "dim", "numel"):
            return meta
        return lw.call(name, bind_table(canonical(name), args, dict(kwargs)), meta)
    if target is getattr:
        attr = args[1]
        if attr in ("T", "mT"):
            return lw.call("t", {"self": args[0]}, meta)
        if attr in ("shape", "dtype", "device"):
            return meta
        raise Unsupported(f"attribute `.{attr}` of a tensor")
    if target in _OPERATORS:
        name = _OPERATORS[target]
        if name == "getitem":
            return lw.call("getitem", {"self": args[0], "index": args[1]}, meta)
        a = list(args)
        if name in _REVERSED and len(a) == 2 and not isinstance(a[0], Node) and isinstance(a[1], Node):
            a.reverse()
        elif name == "sub" and len(a) == 2 and not isinstance(a[0], Node):
            return lw.call("rsub", {"self": a[1], "other": a[0]}, meta)
        elif name == "div" and len(a) == 2 and not isinstance(a[0], Node):
            return lw.pointwise("mul", [lw.like("reciprocal", [a[1]], a[1]), float(a[0])], meta)
        elif name == "pow" and len(a) == 2 and not isinstance(a[0], Node):
            return lw.call("pow", {"self": a[0], "exponent": a[1]}, meta)
        return lw.call(name, bind_table(name, tuple(a), dict(kwargs)), meta)
    name = getattr(target, "__name__", str(target))
    bound = bind_python(target, args, dict(kwargs)) if inspect.isfunction(target) else None
    if bound is None:
        bound = bind_table(canonical(name), args, dict(kwargs))
    return lw.call(name, bound, meta)


def _lower_module(
    module: nn.Module, qualname: str, args: tuple[Any, ...], meta: Any, params: dict[str, Node], lw: Lowering
) -> Any:
    kind = type(module).__name__
    if kind in _UNSUPPORTED_MODULES:
        raise Unsupported(_UNSUPPORTED_MODULES[kind])
    if kind not in _MODULES:
        raise Unsupported(f"no kernel template for the module nn.{kind}")
    name, attrs, input_names = _MODULES[kind]
    named: dict[str, Any] = dict(zip(input_names, args))
    named.setdefault("self", args[0] if args else None)
    for attr in attrs:
        named[attr] = getattr(module, attr)
    if kind in _MODULE_OUTPUT_SIZE:
        named["output_size"] = module.output_size
    if kind.startswith("Dropout"):
        named["training"] = module.training
    if kind.startswith("Conv") and getattr(module, "padding_mode", "zeros") != "zeros":
        raise Unsupported(f"convolution with padding_mode={module.padding_mode!r}")
    if kind.startswith("InstanceNorm") and getattr(module, "track_running_stats", False):
        named["running_mean"] = True
    if kind.startswith("BatchNorm"):  # batch statistics in training mode or without running ones (nn.BatchNorm's rule)
        named["training"] = module.training or module.running_mean is None
        named["running_mean"], named["running_var"] = (
            params.get(f"{qualname}.{s}") for s in ("running_mean", "running_var")
        )
    for pname in ("weight", "bias"):
        if getattr(module, pname, None) is not None:
            named[pname] = params[f"{qualname}.{pname}"]
        elif pname in ("weight", "bias"):
            named.setdefault(pname, None)
    if kind == "CrossEntropyLoss" and getattr(module, "weight", None) is not None:
        raise Unsupported("cross-entropy with class weights")
    return lw.call(name, named, meta)


# -- the dispatcher trace -----------------------------------------------------------------


class _Recorder(TorchDispatchMode):
    """Lowers every aten call of one forward as it runs on meta tensors."""

    def __init__(self, lowering: Lowering, env: dict[int, tuple[torch.Tensor, Any]]) -> None:
        super().__init__()
        self.lowering, self.env = lowering, env

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: dict | None = None) -> Any:
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        name = func.overloadpacket.__name__
        bound: dict[str, Any] = {}
        schema_args = func._schema.arguments
        for param, value in zip(schema_args, args):
            bound[param.name] = value
        bound.update(kwargs)
        if schema_args:
            bound["self"] = bound.get(schema_args[0].name)
        ir_args = tree_map(self._ir, bound)
        value = self.lowering.call(name, ir_args, out)
        self._register(out, value)
        return out

    def _ir(self, value: Any) -> Any:
        if isinstance(value, torch.Tensor):
            found = self.env.get(id(value))
            if found is None:
                raise Unsupported("a tensor constant made inside forward (its values are not in the graph)")
            return found[1]
        if isinstance(value, torch.dtype | torch.device | torch.layout | torch.memory_format):
            return None
        return value

    def _register(self, out: Any, value: Any) -> None:
        outs = out if isinstance(out, (tuple, list)) else (out,)
        values = value if isinstance(value, tuple) else (value,)
        for o, v in zip(outs, values):
            if isinstance(o, torch.Tensor):
                self.env[id(o)] = (o, v)  # the tensor is kept alive so its id is not reused


def trace_dispatch(model: nn.Module, inputs: list[Any], params: dict[str, Node], lowering: Lowering) -> Any:
    env: dict[int, tuple[torch.Tensor, Any]] = {}
    for name, tensor in [*model.named_parameters(), *model.named_buffers()]:
        env[id(tensor)] = (tensor, params[name])
    names = list(inspect.signature(model.forward).parameters)
    for i, value in enumerate(inputs):
        if isinstance(value, torch.Tensor):
            env[id(value)] = (value, _input(value, i, names[i] if i < len(names) else f"arg{i}"))
    with _Recorder(lowering, env):
        out = model(*inputs)
    if not isinstance(out, torch.Tensor):
        raise Unsupported("forward returns something other than one tensor")
    found = env.get(id(out))
    if found is None:
        raise Unsupported("the output is not computed from the inputs")
    return found[1]
