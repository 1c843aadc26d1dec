"""Which format a candidate file is in, read from its source without importing it."""

from __future__ import annotations

import ast
import re
from typing import Literal

Format = Literal["native", "kernelbench"]

_KERNELBENCH = re.compile(r"\bload_inline\b|\bcpp_extension\b")
_NATIVE = re.compile(r"\bload_cuda\b")


def detect_format(source: str) -> Format:
    """'native' when the source uses load_cuda; 'kernelbench' for torch.utils.cpp_extension
    builds (load_inline); 'native' otherwise, the contract this project asks for."""
    if _KERNELBENCH.search(source) and not _NATIVE.search(source):
        return "kernelbench"
    return "native"


def static_cuda_sources(source: str) -> list[str]:
    """The string literals assigned to module-level CUDA_SRC* names, for building ahead.

    Only plain literals are found; a source built at import time is compiled by load_cuda
    when the candidate loads, through the same cache.
    """
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    found = []
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            if any(isinstance(t, ast.Name) and t.id.startswith("CUDA_SRC") for t in node.targets):
                found.append(node.value.value)
    return found
