"""Kernel variants of a recognized task, for checking the catalog beyond the kernels a run
visits: every strategy of the family's order applied (`everything`), each strategy alone
(`singles`), and a task made small for the CPU simulator (`shrink`, runner/cpu_cuda.py).
Used by the catalog's tests and bench/bench_catalog_*.py."""

from __future__ import annotations

import ast
import operator
from functools import cache

from htam_graph.catalog.families import Recognition, recognize
from htam_graph.catalog.ir import Unsupported
from htam_graph.catalog.knobs import Knobs
from htam_graph.catalog.render import Header, render_candidate
from htam_graph.catalog.strategies import STRATEGIES, apply, curriculum

HEADER = Header("catalog-v1", "a test", [], [], [])


_OPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.FloorDiv: operator.floordiv,
        ast.Pow: operator.pow}  # fmt: skip


def _int_value(node: ast.expr) -> int | None:
    """The value of an integer constant expression (`4096`, `16384 * 4`), else None."""
    if isinstance(node, ast.Constant) and isinstance(node.value, int) and not isinstance(node.value, bool):
        return node.value
    if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
        left, right = _int_value(node.left), _int_value(node.right)
        if left is not None and right is not None and abs(right) < 64:
            return int(_OPS[type(node.op)](left, right))
    return None


EVEN_SIZES = (8, 40, 16, 24, 12)  # multiples of 4 and 8: for tasks whose sizes must divide (groups, heads)


def shrink(source: str, sizes: tuple[int, ...] = (6, 37, 5, 12, 9)) -> str:
    """The task with its module-level size constants (32 and up, also when written as an
    expression: `16384 * 4`, or unpacked: `depth, height, width = 32, 64, 64`) made small, in
    turn from `sizes` (odd and even, so tails and 16-byte paths both run), for the CPU
    simulator."""
    tree = ast.parse(source)
    k = 0

    def small(node: ast.expr) -> ast.expr:
        nonlocal k
        value = _int_value(node)
        if value is None or value < 32:
            return node
        k += 1
        return ast.Constant(sizes[(k - 1) % len(sizes)])

    for node in tree.body:
        if not isinstance(node, ast.Assign):
            continue
        if isinstance(node.value, ast.Tuple) and all(isinstance(t, ast.Tuple) for t in node.targets):
            node.value.elts = [small(e) for e in node.value.elts]
        else:
            node.value = small(node.value)
    return ast.unparse(tree)


def render(rec: Recognition, knobs: Knobs) -> str:
    return render_candidate(rec, knobs, HEADER)


def everything(rec: Recognition) -> Knobs:
    """Every strategy of the family's order that composes, applied in turn."""
    knobs = Knobs()
    for sid in curriculum(rec.family):
        result = apply(rec, knobs, sid, lambda k: render(rec, k))
        if not result.reason:
            knobs = result.knobs
    return knobs


def singles(rec: Recognition, start: Knobs | None = None) -> dict[str, Knobs]:
    """Each implemented strategy applied alone to the kernel `start` (the base kernel by
    default), where it composes."""
    out = {}
    for sid in STRATEGIES:
        result = apply(rec, start or Knobs(), sid, lambda k: render(rec, k))
        if not result.reason:
            out[sid] = result.knobs
    return out


@cache
def recognized(source: str) -> Recognition | None:
    try:
        return recognize(source)
    except Unsupported:
        return None
