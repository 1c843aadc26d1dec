"""Finding the candidate file in an LLM's answer."""

from __future__ import annotations

import ast
import re

_BLOCK = re.compile(r"```(?:python|py)?[ \t]*\n(?P<code>.*?)```", re.DOTALL)


def extract_candidate(text: str) -> str | None:
    """The Python code that defines `ModelNew`: the last fenced block that does (models
    often show fragments before the full file), else the whole answer when it is itself
    such a file. None when the answer holds no candidate."""
    for block in reversed([m["code"] for m in _BLOCK.finditer(text)]):
        if _defines_model_new(block):
            return block.rstrip() + "\n"
    return text.strip() + "\n" if _defines_model_new(text) else None


def _defines_model_new(code: str) -> bool:
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return "class ModelNew" in code  # broken code is still a candidate: the judge reports why
    return any(isinstance(node, ast.ClassDef) and node.name == "ModelNew" for node in tree.body)
