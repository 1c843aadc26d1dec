"""The elementwise ops the catalog can emit, as CUDA expressions in fp32 ("opmath").

Each expression mirrors what PyTorch's own CUDA kernel computes for that op (same
formula, same NaN propagation, same special cases of `pow`), so a fused chain matches the
eager reference to rounding: 16-bit results are rounded after every op, as eager does
(catalog/expr.py). Arguments are always names of values already computed, so an
expression may use an argument more than once.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

SELU_ALPHA = 1.6732632423543772848170429916717
SELU_SCALE = 1.0507009873554804934193349852946


def c_float(value: float | int | bool) -> str:
    """A C float literal equal to `value` rounded to fp32, as PyTorch converts a Python
    scalar to the kernel's opmath type."""
    v = float(value)
    if math.isnan(v):
        return "NAN"
    try:
        f = struct.unpack("f", struct.pack("f", v))[0]  # the fp32 PyTorch casts the scalar to
    except OverflowError:
        f = math.copysign(math.inf, v)
    if math.isinf(f):
        return "INFINITY" if f > 0 else "(-INFINITY)"
    text = repr(f)
    if "e" not in text and "." not in text:
        text += ".0"
    return f"{text}f" if f >= 0 else f"({text}f)"


@dataclass(frozen=True)
class OpDef:
    arity: int
    emit: Callable[[list[str], dict[str, Any]], str]
    transcendental: bool = False  # uses expf/logf/tanhf...: the fast-math variant may swap it


def _u(template: str, transcendental: bool = False) -> OpDef:
    return OpDef(1, lambda a, _: template.format(a=a[0]), transcendental)


def _b(template: str) -> OpDef:
    return OpDef(2, lambda a, _: template.format(a=a[0], b=a[1]))


def _attr(attrs: dict[str, Any], name: str) -> str:
    return c_float(attrs[name])


def _elu(a: list[str], attrs: dict[str, Any]) -> str:
    neg = c_float(attrs["alpha"] * attrs.get("scale", 1.0))
    pos = c_float(attrs.get("scale", 1.0))
    inp = c_float(attrs.get("input_scale", 1.0))
    return f"({a[0]} > 0.0f ? {a[0]} * {pos} : expm1f({a[0]} * {inp}) * {neg})"


def _gelu(a: list[str], attrs: dict[str, Any]) -> str:
    x = a[0]
    if attrs.get("approximate", "none") == "tanh":
        return f"(0.5f * {x} * (1.0f + tanhf(0.7978845608028654f * ({x} + 0.044715f * ({x} * {x} * {x})))))"
    return f"(0.5f * {x} * (1.0f + erff({x} * 0.70710678118654752f)))"


def _add(a: list[str], attrs: dict[str, Any]) -> str:
    alpha = attrs.get("alpha", 1)
    return f"({a[0]} + {a[1]})" if alpha == 1 else f"({a[0]} + {c_float(alpha)} * {a[1]})"


def _sub(a: list[str], attrs: dict[str, Any]) -> str:
    alpha = attrs.get("alpha", 1)
    return f"({a[0]} - {a[1]})" if alpha == 1 else f"({a[0]} - {c_float(alpha)} * {a[1]})"


def _clamp(a: list[str], attrs: dict[str, Any]) -> str:
    x, lo, hi = a[0], attrs.get("min"), attrs.get("max")
    inner = x
    if lo is not None:
        inner = f"fmaxf({inner}, {c_float(lo)})"
    if hi is not None:
        inner = f"fminf({inner}, {c_float(hi)})"
    return f"({x} != {x} ? {x} : {inner})"  # NaN passes through, as in torch.clamp


def _smooth_l1(a: list[str], attrs: dict[str, Any]) -> str:
    beta = attrs.get("beta", 1.0)
    if beta == 0:
        return f"fabsf({a[0]} - {a[1]})"
    b = c_float(beta)
    return f"smooth_l1(fabsf({a[0]} - {a[1]}), {b})"


def _huber(a: list[str], attrs: dict[str, Any]) -> str:
    return f"huber(fabsf({a[0]} - {a[1]}), {_attr(attrs, 'delta')})"


OPS: dict[str, OpDef] = {
    # unary
    "identity": _u("{a}"),
    "neg": _u("(-{a})"),
    "abs": _u("fabsf({a})"),
    "relu": _u("({a} <= 0.0f ? 0.0f : {a})"),
    "sigmoid": _u("(1.0f / (1.0f + expf(-{a})))", True),
    "tanh": _u("tanhf({a})", True),
    "gelu": OpDef(1, _gelu, True),
    "silu": _u("({a} / (1.0f + expf(-{a})))", True),
    "mish": _u("({a} * tanhf(log1pf(expf({a}))))", True),
    "softplus": OpDef(
        1,
        lambda a, k: (
            f"({a[0]} * {_attr(k, 'beta')} > {_attr(k, 'threshold')} ? {a[0]} "
            f": log1pf(expf({a[0]} * {_attr(k, 'beta')})) / {_attr(k, 'beta')})"
        ),
        True,
    ),
    "elu": OpDef(1, _elu, True),
    "leaky_relu": OpDef(1, lambda a, k: f"({a[0]} > 0.0f ? {a[0]} : {a[0]} * {_attr(k, 'negative_slope')})"),
    "hardtanh": OpDef(
        1,
        lambda a, k: (
            f"({a[0]} != {a[0]} ? {a[0]} : fminf(fmaxf({a[0]}, {_attr(k, 'min_val')}), {_attr(k, 'max_val')}))"
        ),
    ),
    "hardsigmoid": _u("(min_nan(max_nan({a} + 3.0f, 0.0f), 6.0f) * 0.16666666666666666f)"),
    "hardswish": _u("({a} * min_nan(max_nan({a} + 3.0f, 0.0f), 6.0f) * 0.16666666666666666f)"),
    "softsign": _u("({a} / (1.0f + fabsf({a})))"),
    "tanhshrink": _u("({a} - tanhf({a}))", True),
    "logsigmoid": _u("(({a} < 0.0f ? {a} : 0.0f) - log1pf(expf(-fabsf({a}))))", True),
    "threshold": OpDef(1, lambda a, k: f"({a[0]} <= {_attr(k, 'threshold')} ? {_attr(k, 'value')} : {a[0]})"),
    "softshrink": OpDef(
        1,
        lambda a, k: (
            f"({a[0]} > {_attr(k, 'lambd')} ? {a[0]} - {_attr(k, 'lambd')} : "
            f"({a[0]} < -{_attr(k, 'lambd')} ? {a[0]} + {_attr(k, 'lambd')} : 0.0f))"
        ),
    ),
    "hardshrink": OpDef(
        1, lambda a, k: f"(({a[0]} >= -{_attr(k, 'lambd')} && {a[0]} <= {_attr(k, 'lambd')}) ? 0.0f : {a[0]})"
    ),
    "exp": _u("expf({a})", True),
    "exp2": _u("exp2f({a})", True),
    "expm1": _u("expm1f({a})", True),
    "log": _u("logf({a})", True),
    "log2": _u("log2f({a})", True),
    "log10": _u("log10f({a})", True),
    "log1p": _u("log1pf({a})", True),
    "sqrt": _u("sqrtf({a})"),
    "rsqrt": _u("rsqrtf({a})"),
    "sin": _u("sinf({a})", True),
    "cos": _u("cosf({a})", True),
    "tan": _u("tanf({a})", True),
    "asin": _u("asinf({a})", True),
    "acos": _u("acosf({a})", True),
    "atan": _u("atanf({a})", True),
    "sinh": _u("sinhf({a})", True),
    "cosh": _u("coshf({a})", True),
    "asinh": _u("asinhf({a})", True),
    "acosh": _u("acoshf({a})", True),
    "atanh": _u("atanhf({a})", True),
    "erf": _u("erff({a})", True),
    "erfc": _u("erfcf({a})", True),
    "erfinv": _u("erfinvf({a})", True),
    "reciprocal": _u("(1.0f / {a})"),
    "square": _u("({a} * {a})"),
    "cube": _u("({a} * {a} * {a})"),
    "sign": _u("(float)(({a} > 0.0f) - ({a} < 0.0f))"),
    "floor": _u("floorf({a})"),
    "ceil": _u("ceilf({a})"),
    "round": _u("rintf({a})"),
    "trunc": _u("truncf({a})"),
    "frac": _u("({a} - truncf({a}))"),
    "logical_not": _u("({a} == 0.0f ? 1.0f : 0.0f)"),
    "isnan": _u("({a} != {a} ? 1.0f : 0.0f)"),
    "isinf": _u("(isinf({a}) ? 1.0f : 0.0f)"),
    "clamp": OpDef(1, _clamp),
    "pow_scalar": OpDef(1, lambda a, k: f"powf({a[0]}, {_attr(k, 'exponent')})", True),
    "rpow_scalar": OpDef(1, lambda a, k: f"powf({_attr(k, 'base')}, {a[0]})", True),
    # binary
    "add": OpDef(2, _add),
    "sub": OpDef(2, _sub),
    "mul": _b("({a} * {b})"),
    "div": _b("({a} / {b})"),
    "div_trunc": _b("truncf({a} / {b})"),
    "div_floor": _b("div_floor({a}, {b})"),
    "pow": OpDef(2, lambda a, _: f"powf({a[0]}, {a[1]})", True),
    "maximum": _b("max_nan({a}, {b})"),
    "minimum": _b("min_nan({a}, {b})"),
    "fmax": _b("fmaxf({a}, {b})"),
    "fmin": _b("fminf({a}, {b})"),
    "atan2": OpDef(2, lambda a, _: f"atan2f({a[0]}, {a[1]})", True),
    "xlogy": OpDef(2, lambda a, _: f"({a[1]} != {a[1]} ? NAN : ({a[0]} == 0.0f ? 0.0f : {a[0]} * logf({a[1]})))", True),
    "gt": _b("({a} > {b} ? 1.0f : 0.0f)"),
    "lt": _b("({a} < {b} ? 1.0f : 0.0f)"),
    "ge": _b("({a} >= {b} ? 1.0f : 0.0f)"),
    "le": _b("({a} <= {b} ? 1.0f : 0.0f)"),
    "eq": _b("({a} == {b} ? 1.0f : 0.0f)"),
    "ne": _b("({a} != {b} ? 1.0f : 0.0f)"),
    "logical_and": _b("(({a} != 0.0f && {b} != 0.0f) ? 1.0f : 0.0f)"),
    "logical_or": _b("(({a} != 0.0f || {b} != 0.0f) ? 1.0f : 0.0f)"),
    "mse": _b("(({a} - {b}) * ({a} - {b}))"),
    "l1": _b("fabsf({a} - {b})"),
    "smooth_l1": OpDef(2, _smooth_l1),
    "huber": OpDef(2, _huber),
    "bce": OpDef(
        2,
        lambda a, _: f"(({a[1]} - 1.0f) * fmaxf(log1pf(-{a[0]}), -100.0f) - {a[1]} * fmaxf(logf({a[0]}), -100.0f))",
        True,
    ),
    # ternary
    "where": OpDef(3, lambda a, _: f"({a[0]} != 0.0f ? {a[1]} : {a[2]})"),
}

# Device helpers the expressions above call (catalog/kernels/common.j2 defines them).
HELPERS = ("max_nan", "min_nan", "div_floor", "smooth_l1", "huber")

UNARY_ALIASES = {
    "negative": "neg",
    "absolute": "abs",
    "arctan": "atan",
    "arcsin": "asin",
    "arccos": "acos",
    "special_expit": "sigmoid",
    "expit": "sigmoid",
    "sgn": "sign",
    "fix": "trunc",
    "special_erf": "erf",
}
