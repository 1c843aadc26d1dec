"""Operator-family recognition: what a task computes, read from its reference model's graph.

Never from names: the task file's source is executed, `Model(*get_init_inputs())` built
and traced on meta tensors (torch.fx first, the dispatcher trace when fx fails), and the
resulting IR (catalog/ir.py) decides the family (the `OperatorFamily` the seed bank's
`applies_to` uses) and the program of kernels (catalog/program.py). A task the catalog
has no kernels for raises `Unsupported` with the reason.
"""

from __future__ import annotations

import ast
import hashlib
import inspect
import logging
import math
import types
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import torch

from htam_graph.catalog import ir
from htam_graph.catalog.frontends import trace_dispatch, trace_fx
from htam_graph.catalog.ir import Node, Unsupported
from htam_graph.catalog.lowering import Lowering
from htam_graph.tasks import exec_source
from htam_graph.vocab import OperatorFamily

log = logging.getLogger(__name__)

SUPPORTED_DTYPES = {"float32", "float16", "bfloat16", "int64", "int32", "bool"}


@dataclass(frozen=True)
class Argument:
    name: str
    default: str | None  # a Python literal, or None when the argument has no default


@dataclass(frozen=True)
class TensorInfo:
    name: str
    shape: tuple[int, ...]
    dtype: str


@dataclass
class Recognition:
    """A task as the catalog reads it."""

    family: OperatorFamily
    frontend: str  # "fx" or "dispatch"
    output: Node
    params: dict[str, ir.Param]
    forward_args: list[str]
    inputs: list[TensorInfo]  # forward's tensor arguments, in order
    init_args: list[Argument]
    dtype: str  # the task's (first floating-point input's)
    source_sha256: str
    notes: list[str] = field(default_factory=list)

    def describe(self) -> str:
        kinds = sorted({type(n).__name__ for n in ir.walk([self.output])} - {"Input", "Param", "View"})
        return f"{self.family.value} ({', '.join(kinds)}; read by {self.frontend})"


def load_source(source: str) -> types.ModuleType:
    """The task file executed as a fresh module (registered only while it runs)."""
    digest = hashlib.sha256(source.encode()).hexdigest()[:16]
    try:
        module = exec_source(source, f"<task {digest}>", f"htam_catalog_task_{digest}")
    except Exception as e:
        raise Unsupported(f"the task file does not import ({type(e).__name__}: {e})") from e
    for required in ("Model", "get_inputs", "get_init_inputs"):
        if not hasattr(module, required):
            raise Unsupported(f"the task file defines no {required}")
    return module


@lru_cache(maxsize=64)
def recognize(source: str) -> Recognition:
    """The family and graph of a task file's `Model`; Unsupported when there is no kernel
    template for it. Cached by source (a run asks once per call)."""
    module = load_source(source)
    with torch.device("meta"), torch.no_grad():
        try:
            init_values = list(module.get_init_inputs())
            model = module.Model(*init_values)
            inputs = list(module.get_inputs())
        except Exception as e:
            raise Unsupported(f"building the model on meta tensors failed ({type(e).__name__}: {e})") from e
    params: dict[str, ir.Param] = {}
    state = set(model.state_dict())
    for name, tensor in [*model.named_parameters(), *model.named_buffers()]:
        params[name] = ir.Param(
            shape=tuple(tensor.shape),
            dtype=_dtype(tensor),
            name=name,
            buffer=not isinstance(tensor, torch.nn.Parameter),
        )
        if name not in state:
            params[name].dtype = "unsaved"  # a non-persistent buffer: the judge cannot copy it
    notes: list[str] = []
    output, frontend, used_loss = _trace(model, inputs, params, notes)
    if not isinstance(output, Node):
        raise Unsupported("forward returns something other than one tensor")
    order = ir.walk([output])
    for node in order:
        if isinstance(node, ir.Param) and node.dtype == "unsaved":
            raise Unsupported(f"the non-persistent buffer {node.name} (not in the state dict the judge copies)")
        if node.dtype not in SUPPORTED_DTYPES:
            raise Unsupported(f"{node.dtype} tensors")
    tensor_inputs = [
        TensorInfo(n.name, n.shape, n.dtype)
        for n in sorted((n for n in order if isinstance(n, ir.Input)), key=lambda n: n.index)
    ]
    floats = [x for x in inputs if isinstance(x, torch.Tensor) and x.is_floating_point()]
    if not floats:
        raise Unsupported("no floating-point input")
    return Recognition(
        family=classify(order, used_loss),
        frontend=frontend,
        output=output,
        params=params,
        forward_args=list(inspect.signature(model.forward).parameters),
        inputs=tensor_inputs,
        init_args=_init_args(module.Model),
        dtype=_dtype(floats[0]),
        source_sha256=hashlib.sha256(source.encode()).hexdigest(),
        notes=notes,
    )


def family_of(source: str) -> str | None:
    """The operator family of a task file (`recognize`), None when the catalog cannot read it:
    what the memory records with the task (TaskRecord.family) and conditions evidence on."""
    try:
        return recognize(source).family.value
    except Unsupported:
        return None


def _trace(
    model: torch.nn.Module, inputs: list[Any], params: dict[str, ir.Param], notes: list[str]
) -> tuple[Any, str, bool]:
    lowering = Lowering()
    with torch.no_grad():
        try:
            return trace_fx(model, inputs, dict(params), lowering), "fx", lowering.used_loss
        except Exception as fx_error:  # fx fails on control flow, unknown calls, ...: try the dispatcher
            fx_reason = _reason(fx_error)
            log.info("fx could not read the model (%s); trying the dispatcher trace", fx_reason)
            lowering = Lowering()
            try:
                out = trace_dispatch(model, inputs, dict(params), lowering)
            except Exception as dispatch_error:
                raise Unsupported(f"{fx_reason} (dispatcher trace: {_reason(dispatch_error)})") from dispatch_error
            notes.append(f"torch.fx could not read the model ({fx_reason}); read through the dispatcher trace")
            return out, "dispatch", lowering.used_loss


def _reason(error: Exception) -> str:
    if isinstance(error, Unsupported):
        return str(error)
    first = str(error).strip().splitlines()[0] if str(error).strip() else ""
    return f"{type(error).__name__}: {first}"[:300]


def classify(order: list[Node], used_loss: bool) -> OperatorFamily:
    """The family of a graph: its heaviest kind of op decides."""
    kinds = {type(n) for n in order}
    compute = [n for n in order if not isinstance(n, (ir.Input, ir.Param, ir.View, ir.Permute, ir.Fill))]
    if ir.Conv in kinds:
        return OperatorFamily.CONV
    if ir.Matmul in kinds:
        return OperatorFamily.MATMUL if all(isinstance(n, ir.Matmul) for n in compute) else OperatorFamily.GEMM_EPILOGUE
    if used_loss or ir.Nll in kinds:
        return OperatorFamily.LOSS
    if ir.Pool in kinds:
        return OperatorFamily.POOLING
    if ir.LayerNorm in kinds or ir.GroupNorm in kinds:
        return OperatorFamily.NORM
    if ir.Softmax in kinds:
        return OperatorFamily.SOFTMAX
    if ir.Scan in kinds:
        return OperatorFamily.SCAN
    reduces = [n for n in order if isinstance(n, ir.Reduce)]
    if reduces:
        broadcast_back = [r for r in reduces if _used_elementwise_with_its_source(r, order)]
        if broadcast_back:
            exps = any(isinstance(n, ir.Pointwise) and n.op == "exp" for n in order)
            maxes = any(r.kind == "amax" for r in broadcast_back)
            return OperatorFamily.SOFTMAX if exps and maxes else OperatorFamily.NORM
        return OperatorFamily.REDUCTION
    return OperatorFamily.ELEMENTWISE


def _used_elementwise_with_its_source(reduce: ir.Reduce, order: list[Node]) -> bool:
    """A statistic broadcast back over the tensor it summarizes (through row-level ops such
    as `rsqrt(mean + eps)`, or further reductions, as batch norm's mean over the spatial
    dims then the batch): a normalization."""
    space = reduce.src.shape
    derived = {id(reduce)}
    for n in order:  # producers come first, so one pass follows row-level chains
        if n is reduce or not any(id(a) in derived for a in n.inputs()):
            continue
        if isinstance(n, ir.Pointwise) and n.shape == space:
            return True
        if isinstance(n, (ir.Pointwise, ir.View, ir.Reduce)) and math.prod(n.shape) < math.prod(space):
            derived.add(id(n))
    return False


def _dtype(t: torch.Tensor) -> str:
    return str(t.dtype).removeprefix("torch.")


def _init_args(model_cls: type) -> list[Argument]:
    """Model.__init__'s parameters (after self), defaults as literals, for ModelNew."""
    args = []
    init = model_cls.__dict__.get("__init__")
    if init is None:  # nn.Module's own: no arguments
        return []
    for name, param in list(inspect.signature(init).parameters.items())[1:]:
        if param.kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD):
            raise Unsupported("a Model constructor with *args or **kwargs")
        default = None
        if param.default is not inspect.Parameter.empty:
            default = repr(param.default)
            try:
                ast.literal_eval(default)
            except (ValueError, SyntaxError):
                raise Unsupported(f"the constructor default {name}={default} is not a literal") from None
        args.append(Argument(name, default))
    return args
