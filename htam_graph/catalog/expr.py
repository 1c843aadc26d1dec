"""Expressions a kernel computes per element (or per row), and their CUDA emission.

An expression reads stage inputs (`Load`: a buffer broadcast into the stage's index
space, `Pick`: a row's element at a computed column), values the kernel provides (`Val`:
a GEMM accumulator, a row statistic) and constants, through the ops of catalog/ops.py.
Expressions are hashable: the emitter computes each distinct subexpression once, so a
value used twice (x * sigmoid(x)) is loaded once.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from htam_graph.catalog.ir import Unsupported, contiguous_strides
from htam_graph.catalog.ops import OPS, c_float

ROUNDING = {"float16": "round_f16", "bfloat16": "round_bf16"}


@dataclass(frozen=True)
class Load:
    """Element of input `slot`, a contiguous tensor of shape `view`, at the flat index `i`
    of the logical index space `space` (view right-aligned in it, broadcast where it has
    size 1). The index is the element index of the stage, or its row index when `row`."""

    slot: int
    view: tuple[int, ...]
    space: tuple[int, ...]
    row: bool = False

    def index(self, i: str) -> str:
        return broadcast_index(i, self.space, self.view)

    @property
    def full(self) -> bool:
        """Read at the index itself (no broadcast): contiguous along the space."""
        return math.prod(self.view) == math.prod(self.space)


@dataclass(frozen=True)
class Val:
    """A value the kernel provides: "acc" (the anchor's result), "s3" (row scalar 3)."""

    key: str


@dataclass(frozen=True)
class Const:
    value: float


@dataclass(frozen=True)
class Op:
    op: str
    args: tuple[Expr, ...]
    attrs: tuple[tuple[str, Any], ...] = ()
    dtype: str = "float32"


@dataclass(frozen=True)
class Pick:
    """Input `slot` (row-major, rows of `cols`) at this row and column `index`."""

    slot: int
    index: Expr


Expr = Load | Val | Const | Op | Pick


def op(name: str, *args: Expr, dtype: str = "float32", **attrs: Any) -> Op:
    return Op(name, tuple(args), tuple(sorted(attrs.items())), dtype)


def walk(expr: Expr) -> list[Expr]:
    out = [expr]
    if isinstance(expr, Op):
        for a in expr.args:
            out.extend(walk(a))
    elif isinstance(expr, Pick):
        out.extend(walk(expr.index))
    return out


def loads(expr: Expr) -> list[Load]:
    return [e for e in walk(expr) if isinstance(e, Load)]


def vals(expr: Expr) -> set[str]:
    return {e.key for e in walk(expr) if isinstance(e, Val)}


def uses_transcendentals(exprs: list[Expr]) -> bool:
    return any(isinstance(e, Op) and OPS[e.op].transcendental for x in exprs for e in walk(x))


def substitute(expr: Expr, mapping: dict[str, Expr]) -> Expr:
    """`expr` with Val(key) replaced by mapping[key] where given."""
    if isinstance(expr, Val):
        return mapping.get(expr.key, expr)
    if isinstance(expr, Op):
        return Op(expr.op, tuple(substitute(a, mapping) for a in expr.args), expr.attrs, expr.dtype)
    if isinstance(expr, Pick):
        return Pick(expr.slot, substitute(expr.index, mapping))
    return expr


def broadcast_index(i: str, space: tuple[int, ...], view: tuple[int, ...]) -> str:
    """The flat index into a contiguous tensor of shape `view` of the element at flat index
    `i` of `space` (view right-aligned, broadcast where it has size 1)."""
    nd = len(space)
    if len(view) > nd:
        if math.prod(view[: len(view) - nd]) != 1:
            raise Unsupported(f"a tensor of shape {list(view)} in an index space of shape {list(space)}")
        view = view[len(view) - nd :]
    full = (1,) * (nd - len(view)) + tuple(view)
    for v, s in zip(full, space):
        if v not in (1, s):
            raise Unsupported(f"shape {list(view)} does not broadcast to {list(space)}")
    if math.prod(full) == math.prod(space):
        return i
    if math.prod(full) == 1:
        return "0"
    s_strides, v_strides = contiguous_strides(space), contiguous_strides(full)
    terms, d = [], 0
    while d < nd:
        if full[d] == space[d] and space[d] != 1:
            e = d
            while e + 1 < nd and full[e + 1] == space[e + 1]:
                e += 1
            size = math.prod(space[d : e + 1])
            term = i if s_strides[e] == 1 else f"({i} / {s_strides[e]})"
            if math.prod(space[:d]) > 1:
                term = f"({term} % {size})"
            if v_strides[e] != 1:
                term = f"{term} * {v_strides[e]}"
            terms.append(term)
            d = e + 1
        else:
            d += 1
    return " + ".join(terms) if terms else "0"


class Emitter:
    """Emits C statements (`float tN = ...;`) for expressions, each distinct subexpression
    once. `load(Load)` and `pick(Pick, index_var)` give the C expression of a read;
    `values` names the kernel's own values."""

    def __init__(
        self,
        load: Callable[[Load], str],
        values: dict[str, str] | None = None,
        prefix: str = "t",
        pick: Callable[[Pick, str], str] | None = None,
        fast_math: bool = False,
    ) -> None:
        self.load, self.values, self.prefix, self.pick = load, values or {}, prefix, pick
        self.fast_math = fast_math
        self.lines: list[str] = []
        self._cache: dict[Expr, str] = {}

    def emit(self, expr: Expr) -> str:
        if expr in self._cache:
            return self._cache[expr]
        if isinstance(expr, Const):
            return c_float(expr.value)
        if isinstance(expr, Val):
            if expr.key not in self.values:
                raise KeyError(f"value {expr.key!r} is not available here")
            return self.values[expr.key]
        if isinstance(expr, Load):
            code = self.load(expr)
        elif isinstance(expr, Pick):
            if self.pick is None:
                raise Unsupported("a gather outside a row stage")
            code = self.pick(expr, self.emit(expr.index))
        else:
            args = [self.emit(a) for a in expr.args]
            code = OPS[expr.op].emit(args, dict(expr.attrs))
            if self.fast_math:
                code = _fast(code)
            if expr.dtype in ROUNDING:
                code = f"{ROUNDING[expr.dtype]}({code})"
        name = f"{self.prefix}{len(self._cache)}"
        self.lines.append(f"float {name} = {code};")
        self._cache[expr] = name
        return name

    def code(self, indent: str) -> str:
        return "\n".join(indent + line for line in self.lines)


_FAST = {"expf": "__expf", "logf": "__logf", "tanhf": "tanh_fast", "sinf": "__sinf", "cosf": "__cosf"}
_ACCURATE_CALL = re.compile(r"\b(" + "|".join(_FAST) + r")\(")


def _fast(code: str) -> str:
    """Intrinsic forms of the transcendentals (16-bit tasks only: their 1e-2 tolerance
    absorbs the intrinsics' few-ulp error, fp32's 1e-4 may not)."""
    return _ACCURATE_CALL.sub(lambda m: _FAST[m[1]] + "(", code)
