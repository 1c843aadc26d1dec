"""Which format a candidate file is in, read from its source without importing it."""

from __future__ import annotations

import ast
import re

from htam_graph.vocab import CandidateFormat

_KERNELBENCH = re.compile(r"\bload_inline\b|\bcpp_extension\b")
_NATIVE = re.compile(r"\bload_cuda\b")


def detect_format(source: str) -> CandidateFormat:
    """'native' when the source uses load_cuda; 'kernelbench' for torch.utils.cpp_extension
    builds (load_inline); 'native' otherwise, the contract this project asks for."""
    if _KERNELBENCH.search(source) and not _NATIVE.search(source):
        return "kernelbench"
    return "native"


def candidate_problem(source: str) -> str | None:
    """Why `source` cannot be a candidate at all, read without importing it (an empty file,
    one that does not parse, one with no module-level ModelNew); None when it can."""
    if not source.strip():
        return "the file is empty; a candidate defines class ModelNew"
    try:
        tree = ast.parse(source)
    except SyntaxError as e:
        return f"line {e.lineno}: SyntaxError: {e.msg}"
    except ValueError as e:  # null bytes
        return f"not Python source: {e}"
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == "ModelNew":
            return None
        if isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id == "ModelNew" for t in targets):
                return None
        if isinstance(node, ast.ImportFrom) and any((a.asname or a.name) == "ModelNew" for a in node.names):
            return None
    return "defines no ModelNew at module level; a candidate defines class ModelNew"


def static_cuda_sources(source: str) -> list[str]:
    """The strings assigned to module-level CUDA_SRC* names, for building ahead: literals,
    and concatenations of literals and of module-level names bound to them.

    A source built any other way at import time is compiled when load_cuda asks for it,
    through the same cache (in the sandbox, by the referee on the candidate's request).
    """
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    found = []
    for name, value in module_strings(tree).items():
        if name.startswith("CUDA_SRC"):
            found.append(value)
    return found


def module_strings(tree: ast.Module) -> dict[str, str]:
    """Module-level names bound to string expressions that fold (fold_string), in order."""
    names: dict[str, str] = {}
    for stmt in tree.body:
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
            if (value := fold_string(stmt.value, names)) is not None:
                names[stmt.targets[0].id] = value
    return names


def fold_string(node: ast.expr, names: dict[str, str]) -> str | None:
    """The value of a string expression built from literals, known names, + and f-strings."""
    match node:
        case ast.Constant(value=str() as value):
            return value
        case ast.Name(id=name):
            return names.get(name)
        case ast.BinOp(left=left, op=ast.Add(), right=right):
            a, b = fold_string(left, names), fold_string(right, names)
            return None if a is None or b is None else a + b
        case ast.JoinedStr(values=values):
            parts = [fold_string(v.value if isinstance(v, ast.FormattedValue) else v, names) for v in values]
            return None if any(p is None for p in parts) else "".join(p or "" for p in parts)
    return None
