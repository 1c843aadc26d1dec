"""Where the non-Python folders (cypher/, prompts/, docker/) are: inside the installed
package (the wheel force-includes them) or at the root of a source checkout."""

from __future__ import annotations

from functools import cache
from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent


@cache
def resource_dir(name: str) -> Path:
    for candidate in (_PACKAGE / name, _PACKAGE.parent / name):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(f"htam-graph resource folder {name!r} is missing; reinstall the package")
