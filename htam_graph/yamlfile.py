"""Reading a YAML (or JSON) file into a pydantic type, every problem one UserError line
that names the file, the field and how to fix it. A leaf: used by the seed bank, the LLM
price table and scripted responses."""

from __future__ import annotations

from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import TypeAdapter, ValidationError

from htam_graph.errors import BadInput

T = TypeVar("T")


def field_path(loc: tuple[int | str, ...]) -> str:
    """A pydantic error location as a path: `responses[0].text`, `<top level>` for none."""
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "<top level>"


def load_yaml(path: Path, kind: type[T] | TypeAdapter[T], what: str, fix: str, expected: str = "") -> T:
    """`path` parsed as YAML (JSON is YAML) and validated as `kind`; an empty file is `{}`.
    `what` names the file in errors ("price file"), `fix` ends every error, `expected`
    (when given) says what a field should look like after a validation error."""
    try:
        data: Any = yaml.safe_load(path.read_text())
    except OSError as e:
        raise BadInput(f"{what} {path}: {e.strerror}; {fix}", path=path) from None
    except (yaml.YAMLError, UnicodeDecodeError) as e:
        raise BadInput(f"{what} {path} is not YAML or JSON: {str(e).splitlines()[0]}; {fix}", path=path) from None
    adapter = kind if isinstance(kind, TypeAdapter) else TypeAdapter(kind)
    try:
        return adapter.validate_python(data if data is not None else {})
    except ValidationError as e:
        err = e.errors()[0]
        more = f"; {e.error_count()} problems in all" if e.error_count() > 1 else ""
        hint = f" ({expected})" if expected else ""
        raise BadInput(
            f"{what} {path}: {field_path(err['loc'])}: {err['msg']}{hint}{more}; {fix}",
            value=field_path(err["loc"]),
            path=path,
        ) from None
