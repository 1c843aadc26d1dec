"""Static cheat checks: read a candidate's source, never run it.

The Python part is read with `ast` (imports resolved to qualified names, a light
per-function notion of which names hold tensors); the C/C++/CUDA strings embedded in it
are read with regexes after C comments are stripped. Every rule errs toward silence on
honest code: a finding rejects the candidate, so a false positive costs a good kernel,
while a miss is still caught by the dynamic checks for most patterns. Stdlib only (no
torch import), so the CLI can run it cheaply.
"""

from __future__ import annotations
import __future__

import ast
import math
import re
import sys
import typing
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from itertools import pairwise

from htam_graph.errors import CandidateError
from htam_graph.runner.formats import fold_string, module_strings
from htam_graph.runner.models import CheatFinding, CheatKind
from htam_graph.vocab import CANDIDATE_FORMATS

_FP32_NAMES = {"float32", "torch.float32", "fp32", "float"}

# ---------------------------------------------------------------- imports and builtins
# Imports are allowed by name, never by namespace: `from htam_graph.runner.native import
# load_cuda` is allowed, `from htam_graph.runner.native import ctypes` (a name the runner's
# own module imports) is not. Modules a candidate may import whole; their attribute chains
# are checked on use (torch's by _torch_name_allowed).
_IMPORTABLE = {"torch", "torch.nn", "torch.nn.functional", "torch.cuda", "math", "typing"}
# typing's functions that evaluate strings (annotations) as code: exec by another name.
_TYPING_EVALUATORS = {"get_type_hints", "ForwardRef", "evaluate_forward_ref"}
_FROM_IMPORTS: dict[str, set[str] | None] = {  # None: any name the torch allow-list passes
    "__future__": set(__future__.all_feature_names),
    "typing": set(typing.__all__) - _TYPING_EVALUATORS,
    "math": {name for name in dir(math) if not name.startswith("_")},
    "torch": None,
    "torch.nn": None,
    "torch.nn.functional": None,
    "torch.cuda": None,
}
_FORMAT_FROM_IMPORTS = {
    "native": {"htam_graph.runner.native": {"load_cuda"}},
    "kernelbench": {"torch.utils.cpp_extension": {"load_inline", "load"}},
}
_DTYPES = {
    "float32", "float", "float16", "half", "bfloat16", "float64", "double", "int8", "int16", "short", "int32",
    "int", "int64", "long", "uint8", "bool", "complex64", "cfloat", "complex128", "cdouble", "dtype",
}  # fmt: skip
# torch.<name> a candidate may reach at all (compute, streams, precision and code generators
# among them are flagged by their own rules); anything else, torch.multiprocessing,
# torch.hub, torch.library, torch.serialization..., is outside the allow-list.
_TORCH_TOP = _DTYPES | {
    "nn", "cuda", "Tensor", "Size", "device", "Generator", "no_grad", "inference_mode", "finfo", "iinfo",
    "is_tensor", "is_floating_point", "numel", "get_default_dtype", "broadcast_shapes", "tensor", "as_tensor",
    "empty", "empty_like", "empty_strided", "zeros", "zeros_like", "ones", "ones_like", "full", "full_like",
    "arange", "rand", "randn", "randint", "rand_like", "randn_like", "randint_like", "randperm", "linspace",
    "logspace", "eye", "reshape", "flatten", "unflatten", "permute", "transpose", "t", "squeeze", "unsqueeze", "narrow",
    "select", "chunk", "split", "unbind", "movedim", "as_strided", "view_as_real", "view_as_complex",
    "backends", "autocast", "amp", "compile", "jit", "func", "vmap", "fx", "export", "compiler", "cond", "ops",
    "functional", "linalg", "fft", "special", "nested", "sparse", "manual_seed", "seed", "set_rng_state",
    "fork_rng", "random", "set_float32_matmul_precision", "get_float32_matmul_precision", "Stream", "Event",
    "float8_e4m3fn", "float8_e5m2", "HalfTensor", "BFloat16Tensor", "utils",
}  # fmt: skip
_TORCH_CUDA = {
    "current_device", "current_stream", "synchronize", "is_available", "get_device_properties",
    "get_device_capability", "get_device_name", "device_count", "device", "Stream", "stream", "Event",
    "ExternalStream", "set_stream", "StreamContext", "graph", "CUDAGraph", "graphs", "streams",
    "make_graphed_callables", "manual_seed", "manual_seed_all", "seed", "seed_all", "set_rng_state",
    "set_rng_state_all", "amp", "multiprocessing",
}  # fmt: skip
_CONCURRENCY_MODULES = {"threading", "_thread", "concurrent", "multiprocessing", "asyncio", "queue"}
_REFLECTIVE_MODULES = {"gc", "importlib", "builtins", "inspect"}  # used to reach and patch the judge
# Module names that must not be reached even through torch (torch.sys, torch.os exist).
_FORBIDDEN_SUBMODULES = {"sys", "os", "ctypes", "subprocess", "importlib", "builtins", "gc", "inspect", "socket"}
# A module that an allowed module imported is its attribute (typing.sys, and through
# torch.backends.cuda.contextlib or torch.random.torch.hub.shutil, whatever torch imported):
# a standard-library module's name in an attribute chain counts as importing it, except the
# names torch gives its own functions and submodules (torch.select, torch.random).
_STDLIB_MODULES = frozenset(sys.stdlib_module_names) - {"chunk", "random", "select", "signal", "trace"}
# APIs that run code inside the judge's own functions (trace and profile functions,
# sys.monitoring callbacks, audit and import hooks) or reach its frames and modules.
_JUDGE_HOOKS = {
    "sys": {
        "monitoring", "settrace", "setprofile", "call_tracing", "addaudithook", "_getframe", "_getframemodulename",
        "_current_frames", "_current_exceptions", "modules", "meta_path", "path_hooks",
    },
    "threading": {"settrace", "setprofile", "settrace_all_threads", "setprofile_all_threads"},
}  # fmt: skip
_LOADERS = {
    "htam_graph.runner.native.load_cuda",
    "torch.utils.cpp_extension.load_inline",
    "torch.utils.cpp_extension.load",
}
_EXEC_BUILTINS = {"exec", "eval", "compile", "__import__", "open", "breakpoint", "input"}
_NAMESPACE_BUILTINS = {"globals", "locals", "vars", "__builtins__"}
_TENSOR_BUILTINS = {"abs", "sum", "max", "min", "pow", "round", "divmod", "sorted"}
# Attributes that reach interpreter internals (namespaces, code, class graphs).
_REFLECTIVE_ATTRS = {
    "__globals__", "__builtins__", "__dict__", "__subclasses__", "__code__", "__closure__",
    "__bases__", "__mro__", "__getattribute__", "__setattr__", "__delattr__", "__import__",
    "__loader__", "__spec__", "__func__", "__self__", "__wrapped__",
}  # fmt: skip
_SUBCLASS_ATTRS = {"as_subclass", "_make_subclass", "_make_wrapper_subclass"}
_LAZY_HOOKS = {"__torch_function__", "__torch_dispatch__"}
# Things that identify an input buffer rather than its values.
_IDENTITY_METHODS = {"data_ptr", "untyped_storage", "storage", "__cuda_array_interface__", "_cdata"}
_KEY_METHODS = {"get", "setdefault", "pop", "__contains__", "__getitem__"}

# ---------------------------------------------------------------- torch API lists
_ALLOWED_TORCH_CALLS = {
    f"torch.{name}"
    for name in (
        "empty", "empty_like", "empty_strided", "zeros", "zeros_like", "ones", "ones_like", "full",
        "full_like", "tensor", "as_tensor", "arange", "device", "Size", "finfo", "iinfo", "is_tensor",
        "is_floating_point", "numel", "no_grad", "inference_mode", "get_default_dtype",
        "reshape", "flatten", "unflatten", "permute", "transpose", "t", "squeeze", "unsqueeze",
        "narrow", "select", "chunk", "split", "unbind", "movedim", "as_strided", "view_as_real",
        "view_as_complex", "broadcast_shapes",
        "cuda.current_device", "cuda.current_stream", "cuda.synchronize", "cuda.is_available",
        "cuda.get_device_properties", "cuda.get_device_capability", "cuda.get_device_name",
        "cuda.device_count", "cuda.device",
        "nn.Module", "nn.Parameter", "nn.ParameterList", "nn.ParameterDict", "nn.Buffer",
    )
}  # fmt: skip
# Constructors under torch.nn that hold tensors rather than compute.
_NN_HOLDERS = {"Module", "Parameter", "ParameterList", "ParameterDict", "Buffer"}
_TORCH_NON_TENSOR_CALLS = {"device", "Size", "finfo", "iinfo", "is_tensor", "is_floating_point", "numel",
                           "no_grad", "inference_mode", "get_default_dtype", "broadcast_shapes"}  # fmt: skip
_STREAM_APIS = {"Stream", "stream", "set_stream", "ExternalStream", "StreamContext", "Event", "graph",
                "CUDAGraph", "graphs", "streams", "make_graphed_callables", "multiprocessing"}  # fmt: skip
_LOW_PRECISION_NAMES = {
    "float16", "half", "bfloat16", "HalfTensor", "BFloat16Tensor", "autocast", "amp",
    "float8_e4m3fn", "float8_e5m2", "set_float32_matmul_precision", "allow_tf32",
    "allow_fp16_reduced_precision_reduction", "allow_bf16_reduced_precision_reduction",
}  # fmt: skip
_LOW_PRECISION_METHODS = {"half", "bfloat16"}
# The judge draws fresh inputs from torch's generators: seeding them makes inputs predictable.
_RNG_CALLS = {"manual_seed", "manual_seed_all", "seed", "seed_all", "set_rng_state", "set_rng_state_all", "fork_rng"}
# torch namespaces that generate or run compute: any use is flagged, even in __init__ (a
# torch.compile'd function built there would run in forward).
_TORCH_GENERATORS = {"compile", "jit", "func", "vmap", "fx", "export", "compiler", "cond"}
# Namespaces of compute functions: a reference to one as a value hides a later call.
_TORCH_COMPUTE_NAMESPACES = {"functional", "linalg", "fft", "special", "ops", "nested", "sparse"}

# Tensor methods (and torch / ATen functions of the same name) that compute. Shared by the
# Python rules and the C++ tensor-method rule; a trailing underscore (in-place) is stripped.
COMPUTE_NAMES = frozenset(
    [
        "abs",
        "absolute",
        "acos",
        "acosh",
        "add",
        "addbmm",
        "addcdiv",
        "addcmul",
        "addmm",
        "addmv",
        "addr",
        "all",
        "amax",
        "amin",
        "any",
        "argmax",
        "argmin",
        "argsort",
        "asin",
        "asinh",
        "atan",
        "atan2",
        "atanh",
        "baddbmm",
        "bmm",
        "cat",
        "ceil",
        "cholesky",
        "clamp",
        "clamp_max",
        "clamp_min",
        "clip",
        "conv1d",
        "conv2d",
        "conv3d",
        "conv_transpose1d",
        "conv_transpose2d",
        "conv_transpose3d",
        "cos",
        "cosh",
        "cross",
        "cummax",
        "cummin",
        "cumprod",
        "cumsum",
        "diag",
        "diff",
        "digamma",
        "dist",
        "div",
        "divide",
        "dot",
        "einsum",
        "elu",
        "eq",
        "erf",
        "erfc",
        "erfinv",
        "exp",
        "exp2",
        "expm1",
        "flip",
        "floor",
        "floor_divide",
        "fmax",
        "fmin",
        "fmod",
        "frac",
        "gather",
        "ge",
        "gelu",
        "gt",
        "hardsigmoid",
        "hardswish",
        "hardtanh",
        "hypot",
        "index_add",
        "index_copy",
        "index_fill",
        "index_put",
        "index_select",
        "inner",
        "inverse",
        "isnan",
        "kron",
        "kthvalue",
        "layer_norm",
        "le",
        "leaky_relu",
        "lerp",
        "lgamma",
        "linear",
        "log",
        "log10",
        "log1p",
        "log2",
        "log_softmax",
        "logaddexp",
        "logcumsumexp",
        "logical_and",
        "logical_not",
        "logical_or",
        "logit",
        "logsumexp",
        "lt",
        "masked_fill",
        "masked_scatter",
        "masked_select",
        "matmul",
        "max",
        "max_pool1d",
        "max_pool2d",
        "max_pool3d",
        "maximum",
        "mean",
        "median",
        "min",
        "minimum",
        "mish",
        "mm",
        "mode",
        "mul",
        "multiply",
        "mv",
        "nan_to_num",
        "nanmean",
        "nansum",
        "ne",
        "neg",
        "negative",
        "norm",
        "outer",
        "pow",
        "prod",
        "reciprocal",
        "relu",
        "relu6",
        "remainder",
        "renorm",
        "repeat",
        "repeat_interleave",
        "roll",
        "round",
        "rsqrt",
        "scatter",
        "scatter_add",
        "scatter_reduce",
        "selu",
        "sigmoid",
        "sign",
        "silu",
        "sin",
        "sinh",
        "softmax",
        "softplus",
        "sort",
        "sqrt",
        "square",
        "stack",
        "std",
        "sub",
        "subtract",
        "sum",
        "tan",
        "tanh",
        "tensordot",
        "tile",
        "topk",
        "trace",
        "tril",
        "triu",
        "true_divide",
        "trunc",
        "var",
        "where",
        "xlogy",
        "avg_pool1d",
        "avg_pool2d",
        "avg_pool3d",
        "batch_norm",
        "group_norm",
        "instance_norm",
        "dropout",
    ]
)
# Compute names that ordinary Python objects also have (set.add, list.sort): flagged only
# on a known tensor.
_AMBIGUOUS_METHODS = {"add", "sort"}
# In CUDA device code these are also cooperative-groups or user-struct methods.
_CPP_NOT_TENSOR_METHODS = {"any", "all"}
_VIEW_METHODS = {
    "view", "view_as", "reshape", "reshape_as", "contiguous", "flatten", "unflatten", "unsqueeze",
    "squeeze", "permute", "transpose", "t", "expand", "expand_as", "narrow", "select", "unbind",
    "split", "chunk", "as_strided", "movedim", "swapaxes", "new_empty", "new_zeros", "new_ones",
    "new_full", "new_empty_strided", "new_tensor", "zero_", "fill_", "clone", "copy_", "detach",
    "requires_grad_", "to", "cuda", "float", "double", "int", "long", "type_as", "cpu",
}  # fmt: skip
_DUNDER_OPS = {"truediv": "div", "floordiv": "floor_divide", "mod": "remainder"}
_TENSOR_ATTRS = {"T", "mT", "H", "mH", "data", "real", "imag", "grad"}
_LAYER_TENSORS = {"weight", "bias", "running_mean", "running_var"}
_NON_TENSOR_ANNOTATIONS = {"int", "float", "bool", "str", "tuple", "list", "dict"}


def static_check(source: str, task_dtype: str, fmt: str) -> list[CheatFinding]:
    """Every cheat pattern visible in a candidate's source, deduplicated: the Python part's
    findings in source order, then those of each embedded C/C++/CUDA string.

    `task_dtype` ("float32", "float16", ...) switches on the precision-downgrade rules for
    fp32 tasks; `fmt` ("native" or "kernelbench") decides which loader may be imported.
    A file that does not parse yields nothing here: loading it reports the error.
    """
    if fmt not in CANDIDATE_FORMATS:
        raise CandidateError(f"unknown candidate format {fmt!r}; use one of {', '.join(CANDIDATE_FORMATS)}", value=fmt)
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    fp32 = task_dtype.strip().lower() in _FP32_NAMES
    found = list(_PythonChecker(tree, fmt, fp32).run())
    for text, line in _embedded_sources(tree):
        found.extend(check_cuda_source(text, fp32, first_line=line))
    unique: dict[tuple[CheatKind, str], CheatFinding] = {}
    for finding in found:
        unique.setdefault((finding.kind, finding.detail), finding)
    return list(unique.values())


def _finding(kind: CheatKind, what: str, line: int) -> CheatFinding:
    return CheatFinding(kind=kind, detail=f"{what} at line {line}", stage="static")


def _code(node: ast.AST, limit: int = 60) -> str:
    text = ast.unparse(node)
    return text if len(text) <= limit else text[: limit - 3] + "..."


# ================================================================ Python
@dataclass
class _Scope:
    """What one function body binds: names holding tensors, nn layers, input identities."""

    tensors: set[str] = field(default_factory=set)
    layers: set[str] = field(default_factory=set)
    identities: set[str] = field(default_factory=set)
    outer: set[str] = field(default_factory=set)  # declared global/nonlocal: outlive the call


@dataclass
class _ClassInfo:
    tensors: set[str] = field(default_factory=set)
    layers: set[str] = field(default_factory=set)
    extensions: set[str] = field(default_factory=set)


class _PythonChecker(ast.NodeVisitor):
    def __init__(self, tree: ast.Module, fmt: str, fp32: bool) -> None:
        self.tree = tree
        self.fmt = fmt
        self.fp32 = fp32
        self.findings: list[CheatFinding] = []
        self.aliases = _import_aliases(tree)
        self.extensions = self._module_extensions()
        self.module_names = _module_level_names(tree)
        self.scopes: list[_Scope] = [_Scope()]
        self.classes: list[_ClassInfo] = []
        self.in_init = False  # directly in an __init__ body: precomputing weights is allowed
        self.in_arithmetic = False  # inside an expression already flagged as tensor arithmetic

    def run(self) -> Iterator[CheatFinding]:
        self.visit(self.tree)
        yield from self.findings

    def flag(self, kind: CheatKind, what: str, node: ast.AST) -> None:
        self.findings.append(_finding(kind, what, getattr(node, "lineno", 0)))

    # ------------------------------------------------------------ name resolution
    def qualname(self, node: ast.AST) -> str | None:
        """torch.cuda.synchronize for `torch.cuda.synchronize`, `F.relu` -> torch.nn.functional.relu."""
        if isinstance(node, ast.Name):
            return self.aliases.get(node.id)
        if isinstance(node, ast.Attribute):
            base = self.qualname(node.value)
            return f"{base}.{node.attr}" if base else None
        return None

    def _module_extensions(self) -> set[str]:
        names: set[str] = set()
        for node in self.tree.body:
            if isinstance(node, ast.Assign) and self.is_loader_call(node.value):
                names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        return names

    def is_loader_call(self, node: ast.AST) -> bool:
        return isinstance(node, ast.Call) and self.qualname(node.func) in _LOADERS

    @property
    def scope(self) -> _Scope:
        return self.scopes[-1]

    @property
    def cls(self) -> _ClassInfo:
        return self.classes[-1] if self.classes else _ClassInfo()

    def is_self_attr(self, node: ast.AST, names: set[str]) -> bool:
        return (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id == "self"
            and node.attr in names
        )

    def is_extension(self, node: ast.AST) -> bool:
        if isinstance(node, ast.Name):
            return node.id in self.extensions
        return self.is_self_attr(node, self.cls.extensions)

    def is_layer(self, node: ast.AST) -> bool:
        if isinstance(node, ast.Name):
            return node.id in self.scope.layers
        if isinstance(node, ast.Subscript):
            return self.is_layer(node.value)
        return self.is_self_attr(node, self.cls.layers)

    def is_tensor(self, node: ast.AST) -> bool:
        """Whether an expression surely holds a tensor (unknown counts as no)."""
        match node:
            case ast.Name(id=name):
                return name in self.scope.tensors
            case ast.Attribute(value=value, attr=attr):
                if self.is_self_attr(node, self.cls.tensors):
                    return True
                if attr in _LAYER_TENSORS and self.is_layer(value):
                    return True
                return attr in _TENSOR_ATTRS and self.is_tensor(value)
            case ast.Subscript(value=value) | ast.NamedExpr(value=value):
                return self.is_tensor(value)
            case ast.Call():
                return self.call_returns_tensor(node)
            case ast.BinOp(left=left, right=right):
                return self.is_tensor(left) or self.is_tensor(right)
            case ast.UnaryOp(operand=operand):
                return self.is_tensor(operand)
            case ast.IfExp(body=body, orelse=orelse):
                return self.is_tensor(body) or self.is_tensor(orelse)
        return False

    def call_returns_tensor(self, node: ast.Call) -> bool:
        name = self.qualname(node.func)
        if name is not None:
            last = name.rsplit(".", 1)[-1]
            return (
                name.startswith("torch.")
                and not name.startswith("torch.cuda.")
                and last not in _TORCH_NON_TENSOR_CALLS
                and not (name.startswith("torch.nn.") and last[:1].isupper())
            )
        if not isinstance(node.func, ast.Attribute):
            return False
        receiver, method = node.func.value, node.func.attr
        if self.is_extension(receiver):
            return method != "launch"  # a load_inline function returns its output tensor
        return self.is_tensor(receiver) and (method in _VIEW_METHODS or _base_name(method) in COMPUTE_NAMES)

    def mentions_identity(self, node: ast.AST) -> bool:
        """Whether an expression carries an input's address (data_ptr(), id(x), ...)."""
        for sub in ast.walk(node):
            if isinstance(sub, ast.Attribute) and sub.attr in _IDENTITY_METHODS:
                return True
            if isinstance(sub, ast.Call) and isinstance(sub.func, ast.Name) and sub.func.id in ("id", "hash"):
                return True
            if isinstance(sub, ast.Name) and sub.id in self.scope.identities:
                return True
        return False

    def outlives_call(self, node: ast.AST) -> bool:
        """self.x, a module-level name, or a subscript of one: state kept across calls."""
        for sub in ast.walk(node):
            if isinstance(sub, ast.Attribute) and isinstance(sub.value, ast.Name) and sub.value.id == "self":
                return True
            if isinstance(sub, ast.Name) and (sub.id in self.module_names or sub.id in self.scope.outer):
                return True
        return False

    # ------------------------------------------------------------ imports
    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            if alias.name not in _IMPORTABLE:
                self.check_import(alias.name, node)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        module = "." * node.level + (node.module or "")
        allowed = {**_FROM_IMPORTS, **_FORMAT_FROM_IMPORTS[self.fmt]} if node.level == 0 else {}
        for alias in node.names:
            self.check_judge_hook([*module.split("."), alias.name], node)
            if alias.name == "Model":
                self.flag(CheatKind.REFERENCE_FALLBACK, f"imports the reference Model from {module}", node)
            names = allowed.get(module, set())
            if module in allowed and (names is None or alias.name in names):
                if names is None and not _torch_name_allowed(f"{module}.{alias.name}".split("."), self.fmt):
                    self.flag(CheatKind.FORBIDDEN_IMPORT, f"imports {module}.{alias.name}", node)
                continue
            self.check_import(f"{module}.{alias.name}" if module in allowed else module, node)

    def check_import(self, module: str, node: ast.AST) -> None:
        root = module.split(".")[0]
        if root in _CONCURRENCY_MODULES:
            self.flag(CheatKind.SIDE_STREAM, f"imports {module} (work off the timed stream)", node)
        elif module.startswith(("htam_graph.tasks", ".")):
            self.flag(CheatKind.REFERENCE_FALLBACK, f"imports the task/reference module {module}", node)
        else:
            self.flag(CheatKind.FORBIDDEN_IMPORT, f"imports {module}", node)

    # ------------------------------------------------------------ definitions
    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        if node.name == "Model":
            self.flag(CheatKind.REFERENCE_FALLBACK, "defines a class named Model (the reference's name)", node)
        for base in node.bases:
            name = self.qualname(base) or _code(base)
            if name.startswith("torch.") and (name.endswith("Tensor") or name == "torch.nn.Parameter"):
                self.flag(CheatKind.LAZY_OUTPUT, f"class {node.name} subclasses {name}", node)
            elif node.name == "ModelNew" and name != "torch.nn.Module":
                self.flag(CheatKind.REFERENCE_FALLBACK, f"ModelNew inherits {name} instead of nn.Module", node)
        self.classes.append(self.collect_class(node))
        self.generic_visit(node)
        self.classes.pop()

    def collect_class(self, node: ast.ClassDef) -> _ClassInfo:
        """Attributes that methods set on self: extension handles, nn layers, tensors."""
        info = _ClassInfo()
        self.classes.append(info)  # is_tensor below sees what is collected so far
        for sub in ast.walk(node):
            if isinstance(sub, ast.Assign):
                for target in sub.targets:
                    match target:
                        case ast.Attribute(value=ast.Name(id="self"), attr=attr):
                            self.classify_attr(attr, sub.value, info)
            elif isinstance(sub, ast.Call) and isinstance(sub.func, ast.Attribute):
                if sub.func.attr in ("register_buffer", "register_parameter") and sub.args:
                    first = sub.args[0]
                    if isinstance(first, ast.Constant) and isinstance(first.value, str):
                        info.tensors.add(first.value)
        self.classes.pop()
        return info

    def classify_attr(self, attr: str, value: ast.expr, info: _ClassInfo) -> None:
        if self.is_loader_call(value) or (isinstance(value, ast.Name) and value.id in self.extensions):
            info.extensions.add(attr)
            return
        name = self.qualname(value.func) if isinstance(value, ast.Call) else None
        last = name.rsplit(".", 1)[-1] if name else ""
        if name and name.startswith("torch.nn.") and last[:1].isupper() and last not in _NN_HOLDERS:
            info.layers.add(attr)
        elif last in ("Parameter", "Buffer") or self.is_tensor(value):
            info.tensors.add(attr)

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda) -> None:
        name = getattr(node, "name", "<lambda>")
        if name in _LAZY_HOOKS:
            self.flag(CheatKind.LAZY_OUTPUT, f"defines {name}", node)
        defaults = [*node.args.defaults, *(d for d in node.args.kw_defaults if d is not None)]
        # Annotations are code too, evaluated where the function is defined (unless
        # `from __future__ import annotations`): `def f(x: __import__("sys")...)` runs.
        args = node.args
        every = [*args.posonlyargs, *args.args, *args.kwonlyargs, *filter(None, [args.vararg, args.kwarg])]
        annotations = [a.annotation for a in every if a.annotation is not None]
        returns = getattr(node, "returns", None)
        for expr in [*getattr(node, "decorator_list", []), *defaults, *annotations, *filter(None, [returns])]:
            self.visit(expr)
        params = {a.arg for a in [*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs]}
        scope = _Scope(tensors=self.scope.tensors - params, layers=self.scope.layers - params)
        if name == "forward":
            scope.tensors |= {arg.arg for arg in _tensor_params(node.args)}
        self.scopes.append(scope)
        was_init, self.in_init = self.in_init, name == "__init__" and bool(self.classes)
        body = node.body if isinstance(node.body, list) else [node.body]
        for stmt in body:
            self.visit(stmt)
        self.in_init = was_init
        self.scopes.pop()

    visit_Lambda = visit_FunctionDef

    def visit_AsyncFunctionDef(self, node: ast.AsyncFunctionDef) -> None:
        self.flag(CheatKind.SIDE_STREAM, f"defines async function {node.name}", node)
        self.visit_FunctionDef(node)

    def visit_Await(self, node: ast.Await) -> None:
        self.flag(CheatKind.SIDE_STREAM, "awaits a coroutine", node)
        self.generic_visit(node)

    def visit_Global(self, node: ast.Global | ast.Nonlocal) -> None:
        self.scope.outer.update(node.names)

    visit_Nonlocal = visit_Global

    def visit_Try(self, node: ast.Try | ast.TryStar) -> None:
        if node.handlers:  # try/finally alone cannot fall back
            self.flag(CheatKind.REFERENCE_FALLBACK, "try/except (a fallback path)", node)
        self.generic_visit(node)

    def visit_TryStar(self, node: ast.TryStar) -> None:
        self.visit_Try(node)

    # ------------------------------------------------------------ bindings
    def visit_Assign(self, node: ast.Assign) -> None:
        self.visit(node.value)
        for target in node.targets:
            self.bind(target, node.value)
            self.visit(target)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        self.visit(node.annotation)  # evaluated at module and class level: `x: setattr(...)` runs
        if node.value is not None:
            self.visit(node.value)
            self.bind(node.target, node.value)
        self.visit(node.target)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        if not self.in_init and (self.is_tensor(node.target) or self.is_tensor(node.value)):
            self.flag(CheatKind.TORCH_COMPUTE_OP, f"tensor arithmetic `{_code(node)}`", node)
        self.generic_visit(node)

    def visit_For(self, node: ast.For) -> None:
        self.visit(node.iter)
        if self.is_layer(node.iter) and isinstance(node.target, ast.Name):
            self.scope.layers.add(node.target.id)
        for stmt in [node.target, *node.body, *node.orelse]:
            self.visit(stmt)

    def bind(self, target: ast.expr, value: ast.expr) -> None:
        if isinstance(target, (ast.Tuple, ast.List)):
            values = value.elts if isinstance(value, (ast.Tuple, ast.List)) else None
            for i, element in enumerate(target.elts):
                self.bind(element, values[i] if values and i < len(values) else value)
            return
        identity = self.mentions_identity(value)
        if identity and self.outlives_call(target):
            self.flag(CheatKind.POINTER_CACHE, f"keeps an input's address in `{_code(target)}`", target)
        if not isinstance(target, ast.Name):
            return
        scope = self.scope
        for names, present in (
            (scope.tensors, self.is_tensor(value)),
            (scope.layers, self.is_layer(value)),
            (scope.identities, identity),
        ):
            (names.add if present else names.discard)(target.id)

    # ------------------------------------------------------------ expressions
    def visit_Name(self, node: ast.Name) -> None:
        if node.id == "Model":
            self.flag(CheatKind.REFERENCE_FALLBACK, "uses the reference class Model", node)
        elif node.id in _EXEC_BUILTINS:
            self.flag(CheatKind.FORBIDDEN_IMPORT, f"uses {node.id}()", node)
        elif node.id in _NAMESPACE_BUILTINS:
            self.flag(CheatKind.TIMER_PATCH, f"uses {node.id} (namespace tampering)", node)
        elif (name := self.aliases.get(node.id)) is not None:
            self.check_reference(name, node, called=False)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if node.attr in _REFLECTIVE_ATTRS:
            self.flag(CheatKind.TIMER_PATCH, f"reflective access `{_code(node)}`", node)
        if node.attr in _SUBCLASS_ATTRS:
            self.flag(CheatKind.LAZY_OUTPUT, f"re-types a tensor with .{node.attr}", node)
        if node.attr == "__class__" and isinstance(node.ctx, ast.Store):
            self.flag(CheatKind.LAZY_OUTPUT, f"assigns `{_code(node)}`", node)
        name = self.qualname(node)
        if name is None:
            self.generic_visit(node)
        elif isinstance(node.ctx, ast.Load):
            self.check_reference(name, node, called=False)
        else:
            self.check_patch(name, node)

    def check_patch(self, name: str, node: ast.AST) -> None:
        if self.fp32 and name.rsplit(".", 1)[-1] in _LOW_PRECISION_NAMES:
            self.flag(CheatKind.PRECISION_DOWNGRADE, f"sets {name}", node)
        else:
            self.flag(CheatKind.TIMER_PATCH, f"assigns {name} (patches an imported module)", node)

    def check_reference(self, name: str, node: ast.AST, called: bool) -> None:
        """Rules on a use of an imported name, e.g. torch.cuda.Stream or F.relu."""
        parts = name.split(".")
        self.check_judge_hook(parts, node)
        if "torch" in parts[1:]:  # torch through its own modules: F.torch.cuda is torch.cuda
            parts = parts[len(parts) - 1 - parts[::-1].index("torch") :]
        qualified = ".".join(parts)
        root, last = parts[0], parts[-1]
        if root in _REFLECTIVE_MODULES:
            self.flag(CheatKind.TIMER_PATCH, f"uses {name}", node)
        if root != "torch":
            self.check_module_attribute(parts, name, node)
            return
        reached = next((p for p in parts[1:] if p in _STDLIB_MODULES), None)
        if any(p in _FORBIDDEN_SUBMODULES or (p.startswith("_") and not p.startswith("__")) for p in parts):
            self.flag(CheatKind.FORBIDDEN_IMPORT, f"reaches torch internals via {name}", node)
        elif reached is not None:
            self.flag_module(reached, name, node)
        elif not _torch_name_allowed(parts, self.fmt):
            self.flag(CheatKind.FORBIDDEN_IMPORT, f"uses {name}, which is outside the allow-list", node)
        elif last in _RNG_CALLS:
            self.flag(CheatKind.TIMER_PATCH, f"uses {name} (the judge's random state)", node)
        elif self.fp32 and any(p in _LOW_PRECISION_NAMES for p in parts):
            self.flag(CheatKind.PRECISION_DOWNGRADE, f"uses {name} in a float32 task", node)
        elif any(p in _TORCH_GENERATORS for p in parts[1:]):
            self.flag(CheatKind.TORCH_COMPUTE_OP, f"uses the code generator {name}", node)
        elif any(p in _STREAM_APIS for p in parts[1:]):
            self.flag(CheatKind.SIDE_STREAM, f"uses {name}", node)
        elif called:
            if not (
                self.in_init or qualified in _ALLOWED_TORCH_CALLS or qualified.startswith("torch.utils.cpp_extension.")
            ):
                self.flag(CheatKind.TORCH_COMPUTE_OP, f"calls {name}", node)
        elif _base_name(last) in COMPUTE_NAMES or any(p in _TORCH_COMPUTE_NAMESPACES for p in parts[1:-1]):
            self.flag(CheatKind.TORCH_COMPUTE_OP, f"refers to {name}", node)

    def check_judge_hook(self, parts: list[str], node: ast.AST) -> None:
        """sys.monitoring, sys.settrace, sys._getframe... however the module was reached."""
        for module, attr in pairwise(parts):
            if attr in _JUDGE_HOOKS.get(module, ()):
                what = f"uses {module}.{attr} (code run inside the judge, or the judge's frames and modules)"
                self.flag(CheatKind.TIMER_PATCH, what, node)
                return

    def check_module_attribute(self, parts: list[str], name: str, node: ast.AST) -> None:
        """math.<x> and typing.<x> are held to the names a from-import may take: typing.sys is
        the sys module, typing.get_type_hints evaluates strings as code."""
        allowed = _FROM_IMPORTS.get(parts[0]) if parts[0] in _IMPORTABLE else None
        if allowed is None or len(parts) < 2 or parts[1] in allowed:
            return
        if parts[1] in _STDLIB_MODULES:
            self.flag_module(parts[1], name, node)
        else:
            self.flag(CheatKind.FORBIDDEN_IMPORT, f"uses {name}, which is outside the allow-list", node)

    def flag_module(self, module: str, name: str, node: ast.AST) -> None:
        """A standard-library module reached as an allowed module's attribute: as if imported."""
        kind = CheatKind.SIDE_STREAM if module in _CONCURRENCY_MODULES else CheatKind.FORBIDDEN_IMPORT
        self.flag(kind, f"reaches module {module} through {name}", node)

    def visit_Call(self, node: ast.Call) -> None:
        self.check_call(node)
        func = node.func
        if (name := self.qualname(func)) is not None:
            self.check_reference(name, func, called=True)
        elif isinstance(func, ast.Attribute):
            if func.attr in _REFLECTIVE_ATTRS | _SUBCLASS_ATTRS:
                self.visit_Attribute(func)
            else:
                self.visit(func.value)
        else:
            self.visit(func)
        for arg in [*node.args, *(kw.value for kw in node.keywords)]:
            self.visit(arg)

    def check_call(self, node: ast.Call) -> None:
        func = node.func
        if isinstance(func, ast.Name):
            self.check_builtin_call(func.id, node)
        elif self.is_layer(func) or (isinstance(func, ast.Attribute) and func.attr in ("forward", "__call__")
                                     and self.is_layer(func.value)):  # fmt: skip
            if not self.in_init:
                self.flag(CheatKind.TORCH_COMPUTE_OP, f"calls nn layer `{_code(func)}`", node)
        elif isinstance(func, ast.Attribute) and self.qualname(func) is None:
            self.check_method_call(func, node)

    def check_builtin_call(self, name: str, node: ast.Call) -> None:
        first = node.args[0] if node.args else None
        target = self.qualname(first) if first is not None else None
        attr = node.args[1] if len(node.args) > 1 else None
        literal = attr.value if isinstance(attr, ast.Constant) and isinstance(attr.value, str) else None
        if name in ("getattr", "setattr", "delattr", "hasattr") and literal in _REFLECTIVE_ATTRS:
            self.flag(CheatKind.TIMER_PATCH, f"reflective access {name}(..., {literal!r})", node)
        elif name in ("setattr", "delattr") and target is not None:
            self.flag(CheatKind.TIMER_PATCH, f"{name}({target}, ...)", node)
        elif name == "getattr" and target is not None:
            self.flag(CheatKind.FORBIDDEN_IMPORT, f"getattr({target}, ...) hides which API is used", node)
        elif name in ("getattr", "setattr", "delattr") and attr is not None and literal is None:
            self.flag(
                CheatKind.FORBIDDEN_IMPORT, f"{name} with a computed name `{_code(node)}` hides what it reaches", node
            )
        elif name == "type" and len(node.args) == 3:
            self.flag(CheatKind.LAZY_OUTPUT, "creates a class with type(name, bases, dict)", node)
        elif name in _TENSOR_BUILTINS and not self.in_init and any(self.is_tensor(a) for a in node.args):
            self.flag(CheatKind.TORCH_COMPUTE_OP, f"{name}() over a tensor", node)

    def check_method_call(self, func: ast.Attribute, node: ast.Call) -> None:
        method, receiver = func.attr, func.value
        if self.fp32 and method in _LOW_PRECISION_METHODS:
            self.flag(CheatKind.PRECISION_DOWNGRADE, f"calls .{method}() in a float32 task", node)
        if method in _KEY_METHODS and node.args and self.is_cache_key(node.args[0], receiver):
            self.flag(CheatKind.POINTER_CACHE, f"looks up `{_code(node)}` by an input's address", node)
        if self.in_init or self.is_extension(receiver) or _base_name(method) not in COMPUTE_NAMES:
            return
        if method in _AMBIGUOUS_METHODS and not self.is_tensor(receiver):
            return
        self.flag(CheatKind.TORCH_COMPUTE_OP, f"calls tensor method .{method}()", node)

    def visit_BinOp(self, node: ast.BinOp) -> None:
        if not self.in_arithmetic and (
            isinstance(node.op, ast.MatMult)
            or (not self.in_init and (self.is_tensor(node.left) or self.is_tensor(node.right)))
        ):
            self.flag(CheatKind.TORCH_COMPUTE_OP, f"tensor arithmetic `{_code(node)}`", node)
            self.in_arithmetic = True  # one finding for a whole expression such as a * b + c
            self.generic_visit(node)
            self.in_arithmetic = False
            return
        self.generic_visit(node)

    def visit_UnaryOp(self, node: ast.UnaryOp) -> None:
        if not (isinstance(node.op, ast.Not) or self.in_init or self.in_arithmetic) and self.is_tensor(node.operand):
            self.flag(CheatKind.TORCH_COMPUTE_OP, f"tensor arithmetic `{_code(node)}`", node)
        self.generic_visit(node)

    def visit_Compare(self, node: ast.Compare) -> None:
        operands = [node.left, *node.comparators]
        identity_ops = (ast.Is, ast.IsNot, ast.In, ast.NotIn)
        if not self.in_init and any(not isinstance(op, identity_ops) for op in node.ops):
            if any(self.is_tensor(o) for o in operands):
                self.flag(CheatKind.TORCH_COMPUTE_OP, f"tensor comparison `{_code(node)}`", node)
        if any(isinstance(op, (ast.In, ast.NotIn)) for op in node.ops):
            if any(self.is_cache_key(node.left, c) for c in node.comparators):
                self.flag(CheatKind.POINTER_CACHE, f"looks up an input's address `{_code(node)}`", node)
        elif any(self.mentions_identity(o) for o in operands):
            if any(self.outlives_call(o) and not self.mentions_identity(o) for o in operands):
                self.flag(CheatKind.POINTER_CACHE, f"compares an input's address `{_code(node)}`", node)
        self.generic_visit(node)

    def is_cache_key(self, key: ast.AST, container: ast.AST) -> bool:
        """An input's address, or a tensor itself (hashed by identity) used to look up kept state.

        Membership in a literal such as (0, 8) is an alignment test, not a lookup.
        """
        if _is_constant(container):
            return False
        if self.mentions_identity(key):
            return True
        return self.is_tensor(key) and not self.is_tensor(container) and self.outlives_call(container)

    def visit_Subscript(self, node: ast.Subscript) -> None:
        if self.is_cache_key(node.slice, node.value):
            self.flag(CheatKind.POINTER_CACHE, f"indexes `{_code(node)}` by an input's address", node)
        if isinstance(node.ctx, ast.Store) and not self.in_init and self.is_tensor(node.value):
            self.flag(CheatKind.TORCH_COMPUTE_OP, f"writes into tensor `{_code(node)}` with PyTorch", node)
        self.generic_visit(node)

    def visit_Dict(self, node: ast.Dict) -> None:
        if any(key is not None and self.mentions_identity(key) for key in node.keys):
            self.flag(CheatKind.POINTER_CACHE, "builds a dict keyed by an input's address", node)
        self.generic_visit(node)


def _base_name(method: str) -> str:
    """The op a method name computes: `add_` -> add (in-place), `__rmatmul__` -> matmul."""
    if method.startswith("__") and method.endswith("__"):
        core = method[2:-2]
        for name in (core, core[1:]):  # core[1:]: the reflected and in-place forms (rmatmul, iadd)
            name = _DUNDER_OPS.get(name, name)
            if name in COMPUTE_NAMES:
                return name
        return method
    return method[:-1] if method.endswith("_") else method


def _is_constant(node: ast.AST) -> bool:
    """A literal of literals, e.g. (0, 8): membership in it is a test, not a lookup."""
    return all(isinstance(sub, (ast.Constant, ast.Tuple, ast.List, ast.Set, ast.Load)) for sub in ast.walk(node))


def _torch_name_allowed(parts: list[str], fmt: str) -> bool:
    """Whether torch.<...> is on the allow-list (other rules judge what it is used for)."""
    if len(parts) < 2:
        return True
    top = parts[1]
    if top not in _TORCH_TOP and _base_name(top) not in COMPUTE_NAMES:
        return False
    if len(parts) < 3:
        return True
    second = parts[2]
    if top == "cuda":
        return second in _TORCH_CUDA
    if top == "nn":
        return second in ("functional", "init") or second[:1].isupper()
    if top == "utils":
        return fmt == "kernelbench" and second == "cpp_extension"
    if top == "backends":
        return second in ("cuda", "cudnn")
    return True


def _tensor_params(args: ast.arguments) -> Iterator[ast.arg]:
    """forward's inputs other than self, minus those annotated as plain Python values."""
    params = [*args.posonlyargs, *args.args, *args.kwonlyargs][1:]
    for arg in params:
        annotation = arg.annotation
        if isinstance(annotation, ast.Name) and annotation.id in _NON_TENSOR_ANNOTATIONS:
            continue
        yield arg


def _import_aliases(tree: ast.Module) -> dict[str, str]:
    """Local name -> what it was imported as (np -> numpy, F -> torch.nn.functional)."""
    aliases: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    aliases[alias.asname] = alias.name
                else:
                    root = alias.name.split(".")[0]
                    aliases[root] = root
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                aliases[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    return aliases


def _module_level_names(tree: ast.Module) -> set[str]:
    names: set[str] = set()
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]
        names.update(t.id for t in targets if isinstance(t, ast.Name))
    return names


# What a string of C/C++/CUDA (or a piece of one) contains and a Python message does not.
_C_MARKERS = re.compile(r"__global__|__device__|#\s*(?:include|define)|::|\basm\b|<<<|__half|__nv_")


def _embedded_sources(tree: ast.Module) -> Iterator[tuple[str, int]]:
    """String constants that hold C/C++/CUDA, and concatenations of string constants (or of
    module-level names bound to them) folded into one: an instruction spelled across
    several literals is read whole. Docstrings and bare string statements excluded."""
    bare = {
        id(node.value) for node in ast.walk(tree) if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
    }
    names = module_strings(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in bare:
            text: str | None = node.value
        elif isinstance(node, (ast.BinOp, ast.JoinedStr)):
            text = fold_string(node, names)
        else:
            continue
        if text is not None and _C_MARKERS.search(text):
            yield text, node.lineno


# ================================================================ C / C++ / CUDA
_C_TOKENS = re.compile(r"//[^\n]*|/\*.*?\*/|\"(?:\\.|[^\"\\\n])*\"|'(?:\\.|[^'\\\n])*'", re.DOTALL)


def strip_c_comments(text: str, blank_strings: bool = False) -> str:
    """Comments (and optionally string literals) blanked; line numbers are kept."""

    def blank(match: re.Match[str]) -> str:
        token = match.group(0)
        if token.startswith(("//", "/*")) or blank_strings:
            return re.sub(r"[^\n]", " ", token)
        return token

    return _C_TOKENS.sub(blank, text)


@dataclass(frozen=True)
class _CRule:
    kind: CheatKind
    pattern: re.Pattern[str]
    what: str
    fp32_only: bool = False
    in_strings: bool = False  # read the strings of asm statements: PTX lives there


def _rule(kind: CheatKind, what: str, *alternatives: str, fp32_only: bool = False, in_strings: bool = False) -> _CRule:
    pattern = re.compile("|".join(f"(?:{a})" for a in alternatives))
    return _CRule(kind, pattern, what, fp32_only, in_strings)


_PD = CheatKind.PRECISION_DOWNGRADE
_C_RULES = (
    # TF32 is not among these: an fp32 task may use TF32 tensor cores when it compensates the rounding
    # (3xTF32 is as accurate as fp32 FMAs); the precision probe measures that and rejects plain TF32.
    _rule(_PD, "includes a half-precision header", r"#\s*include\s*[<\"](?:cuda_fp16|cuda_bf16|cuda_fp8)\.h",
          fp32_only=True),
    _rule(_PD, "uses a 16/8-bit float type", r"\b(?:__half2?|__nv_bfloat162?|nv_bfloat162?|half2|__nv_fp8\w*)\b",
          fp32_only=True),
    # `half` alone is also a common variable name: only its uses as a type count.
    _rule(_PD, "declares a half value", r"\bconst\s+half\b", r"\bhalf\s+(?!and\b|or\b)[A-Za-z_]",
          r"\(\s*half\s*\)", r"[<,]\s*half\s*[,>]", r"\bhalf\s*\*\s*__restrict__", fp32_only=True),
    _rule(_PD, "converts to/from 16-bit",
          r"\b__(?:float2half|half2float|float2bfloat16|bfloat162float|floats2half2|float22half2)\w*",
          fp32_only=True),
    _rule(_PD, "uses wmma fragments in a 16-bit, 8-bit, integer or binary precision",
          r"\bprecision::(?!tf32\b)\w+", r"\bfragment\s*<[^;{}]*?\b(?:u?int8_t|(?:un)?signed\s+char|int|bool)\s*[,>]",
          fp32_only=True),
    _rule(_PD, "uses an ATen half type", r"\b(?:at|c10)::(?:Half|BFloat16)\b", r"\bk(?:Half|BFloat16|Float16)\b",
          r"\.\s*(?:half|bfloat16)\s*\(\s*\)", fp32_only=True),
    _rule(_PD, "runs PTX in f16/bf16/fp8", r"\b(?:w?gmma|w?mma)[\w.]*?\.(?:f16|bf16|e4m3|e5m2|s8|u8|s4|u4|b1)\b",
          r"\bcvt\.[\w.]*(?:f16|bf16|e4m3|e5m2)\b", fp32_only=True, in_strings=True),
    _rule(CheatKind.SIDE_STREAM, "creates or uses another stream", r"\bcu(?:da)?StreamCreate\w*",
          r"\bcu(?:da)?LaunchHostFunc\b", r"\bcudaStreamAddCallback\b", r"\bcudaStreamPerThread\b",
          r"\bgetStreamFromPool\b"),
    _rule(CheatKind.SIDE_STREAM, "starts a host thread", r"\bstd::(?:j?thread|async)\b", r"\bpthread_create\b",
          r"#\s*include\s*<(?:thread|future)>"),
    _rule(CheatKind.TORCH_COMPUTE_OP, "hides the at::/torch:: prefix of its calls",
          r"\busing\s+namespace\s+(?:at|torch|c10)\s*;"),
    _rule(CheatKind.TORCH_COMPUTE_OP, "calls a vendor compute library",
          r"\bcu(?:blas|blasLt|dnn|fft|sparse|solver)\w*\s*\(",
          r"#\s*include\s*[<\"](?:cublas|cudnn|cufft|cusparse|cusolver)\w*\.h"),
    _rule(CheatKind.FORBIDDEN_IMPORT, "calls the OS from C++",
          r"\b(?:system|popen|fopen|dlopen|dlsym|fork|execv\w*)\s*\(",
          r"#\s*include\s*<(?:fstream|dlfcn\.h|unistd\.h)>"),
    _rule(CheatKind.FORBIDDEN_IMPORT, "runs Python from C++", r"\b(?:py|pybind11)::(?:module_?::import|exec|eval)\b",
          r"\bPy(?:Import|Run|Eval)_\w+"),
)  # fmt: skip

_ATEN_CALL = re.compile(r"\b(?:at|torch|c10)((?:::\w+)+)\s*(?:<[^;(){}]*>)?\s*\(")
_ALLOWED_ATEN_CALLS = {
    "empty", "empty_like", "empty_strided", "zeros", "zeros_like", "ones", "ones_like", "full",
    "full_like", "arange", "tensor", "from_blob", "TensorOptions", "Tensor", "Scalar", "Device",
    "IntArrayRef", "Half", "BFloat16", "dtype", "device", "layout", "requires_grad", "elementSize",
    "toString", "typeMetaToScalarType", "CUDAGuard", "OptionalCUDAGuard", "DeviceGuard",
    "getCurrentCUDAStream", "getDefaultCUDAStream", "getCurrentDeviceProperties",
    "getDeviceProperties", "current_device", "device_count", "stream", "kCUDA", "kFloat",
    "check", "irange",
}  # fmt: skip
_TENSOR_METHOD = re.compile(r"\.\s*(\w+)\s*\(")
_TORCH_CPP = re.compile(r"\b(?:at|torch|c10)::|#\s*include\s*<(?:torch|ATen)/")
_LAUNCH = re.compile(r"<<<(.*?)>>>", re.DOTALL)
_ASM = re.compile(r"\b(?:asm|__asm__)\b[^;]*;")
_CURRENT_STREAM = r"(?:at|c10)::cuda::get(?:Current|Default)CUDAStream\s*\([^)]*\)"
_STREAM_VAR = re.compile(r"(\w+)\s*[=({]\s*" + _CURRENT_STREAM)
# A stream handed in by the caller: the caller's own launch decides (and is checked there).
_STREAM_PARAM = re.compile(r"\b(?:cudaStream_t|CUDAStream)\s+(\w+)\s*[,)]")


def check_cuda_source(text: str, fp32: bool, first_line: int = 1) -> list[CheatFinding]:
    """Rules on one C/C++/CUDA string; `first_line` is where it starts in the Python file."""
    with_strings = strip_c_comments(text)
    code = strip_c_comments(text, blank_strings=True)

    def line(offset: int) -> int:
        return first_line + text.count("\n", 0, offset)

    found: list[CheatFinding] = []
    for rule in _C_RULES:
        if rule.fp32_only and not fp32:
            continue
        # The first hit per rule: one line is enough to act on, twenty are noise.
        if match := rule.pattern.search(_asm_text(code, with_strings) if rule.in_strings else code):
            what = f"CUDA/C++ source {rule.what} (`{match.group(0).strip()}`)"
            found.append(_finding(rule.kind, what, line(match.start())))
    if _TORCH_CPP.search(code):
        found.extend(_aten_findings(code, line))
    found.extend(_launch_findings(code, line))
    return found


def _asm_text(code: str, with_strings: str) -> str:
    """`code` with the strings of asm statements restored: the PTX, at its own offsets.

    Statements are found on the blanked text, so a ';' inside the PTX does not end one.
    """
    text = list(code)
    for match in _ASM.finditer(code):
        text[match.start() : match.end()] = with_strings[match.start() : match.end()]
    return "".join(text)


def _aten_findings(code: str, line: Callable[[int], int]) -> Iterator[CheatFinding]:
    """at::/torch:: calls other than allocation and metadata, and tensor compute methods."""
    for match in _ATEN_CALL.finditer(code):
        parts = match.group(1).strip(":").split("::")
        last = parts[-1]
        if last in _ALLOWED_ATEN_CALLS or last.startswith("k"):
            continue
        kind = CheatKind.SIDE_STREAM if "Stream" in last else CheatKind.TORCH_COMPUTE_OP
        what = f"CUDA/C++ source calls {match.group(0).rstrip('( ')}"
        yield _finding(kind, what, line(match.start()))
    for match in _TENSOR_METHOD.finditer(code):
        name = _base_name(match.group(1))
        if name in COMPUTE_NAMES and name not in _CPP_NOT_TENSOR_METHODS:
            what = f"CUDA/C++ source calls tensor method .{match.group(1)}()"
            yield _finding(CheatKind.TORCH_COMPUTE_OP, what, line(match.start()))


def _launch_findings(code: str, line: Callable[[int], int]) -> Iterator[CheatFinding]:
    """A <<<grid, block, smem, stream>>> whose stream is not the current/default one."""
    current = {m.group(1) for m in (*_STREAM_VAR.finditer(code), *_STREAM_PARAM.finditer(code))}
    for match in _LAUNCH.finditer(code):
        params = _split_top_level(match.group(1))
        if len(params) < 4:
            continue
        stream = re.sub(r"\s+", "", params[3])
        stream = re.sub(r"\.stream\(\)$", "", stream)
        if stream in {"0", "0u", "nullptr", "NULL", "cudaStreamLegacy"} or stream in current:
            continue
        if re.fullmatch(_CURRENT_STREAM.replace(r"\s*", ""), stream):
            continue
        what = f"CUDA/C++ source launches on stream `{params[3].strip()}`"
        yield _finding(CheatKind.SIDE_STREAM, what, line(match.start()))


def _split_top_level(text: str) -> list[str]:
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return parts
