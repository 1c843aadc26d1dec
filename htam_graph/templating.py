"""Renders the project's Jinja templates: the LLM prompts in `prompts/` and the strategy
catalog's CUDA kernel templates in `htam_graph/catalog/kernels/` (catalog/render.py).

Every rendered template is named and versioned by its first line, a comment
`{# <name> v<N>: <one-line purpose> #}` whose name is the file's name without `.j2`, and
rendering returns a `Rendered` record with a hash of the text, so each LLM call can record
exactly which prompt produced it. The environment never autoescapes (escaping would
corrupt code in prompts) and is strict: a missing variable is an error that names the
template, the variable and the line, never an empty string. Partials pulled in with
`{% include %}` need no header; the text they add is covered by the hash.
"""

from __future__ import annotations

import hashlib
import re
from functools import cache
from pathlib import Path
from types import TracebackType

import jinja2
from pydantic import BaseModel, ConfigDict

from htam_graph.resources import resource_dir

SUFFIX = ".j2"
# `{# generate v3: asks for the next kernel #}`; whitespace control (`{#-`, `-#}`) allowed.
_HEADER = re.compile(r"^\{#-?\s*(?P<name>[\w./-]+)\s+v(?P<version>\d+):\s*(?P<purpose>\S.*?)\s*-?#\}\s*$")


class TemplateError(Exception):
    """A template is missing, has no valid header, or needs a variable it was not given: a
    bug in the templates or in the code that renders them, not something a user can fix."""


class Rendered(BaseModel):
    """One rendered template: what an LLM call records about the prompt it sent."""

    model_config = ConfigDict(frozen=True)

    name: str
    version: int
    text: str
    sha256: str


class TemplateHeader(BaseModel):
    model_config = ConfigDict(frozen=True)

    name: str
    version: int
    purpose: str


class Templates:
    """The templates under one folder, rendered by one strict environment."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._loader = jinja2.FileSystemLoader(root)
        self._env = jinja2.Environment(
            loader=self._loader,
            undefined=jinja2.StrictUndefined,
            autoescape=False,
            keep_trailing_newline=True,
            trim_blocks=True,
            lstrip_blocks=True,
        )

    def header(self, name: str) -> TemplateHeader:
        """The name, version and purpose the template declares on its first line."""
        source = self._source(name)
        first_line = source.split("\n", 1)[0]
        match = _HEADER.match(first_line)
        if match is None:
            raise TemplateError(
                f"template {self._path(name)} must start with a header line "
                f"`{{# {name} v<N>: <one-line purpose> #}}`; it starts with {first_line!r}"
            )
        if match["name"] != name:
            raise TemplateError(
                f"template {self._path(name)} declares the name {match['name']!r} in its header; it must be {name!r}"
            )
        version = int(match["version"])
        if version < 1:
            raise TemplateError(f"template {self._path(name)}: the version in its header must be 1 or more")
        return TemplateHeader(name=name, version=version, purpose=match["purpose"])

    def render(self, name: str, /, **variables: object) -> Rendered:
        """Render `<root>/<name>.j2` with `variables`; every variable it uses must be given."""
        header = self.header(name)
        try:
            text = self._env.get_template(name + SUFFIX).render(**variables)
        except jinja2.UndefinedError as e:
            where = _template_lines(e.__traceback__, self.root)
            raise TemplateError(f"template {name!r} v{header.version}: {e.message} ({where})") from None
        return Rendered(name=name, version=header.version, text=text, sha256=hashlib.sha256(text.encode()).hexdigest())

    def _source(self, name: str) -> str:
        try:
            source, _, _ = self._loader.get_source(self._env, name + SUFFIX)
        except jinja2.TemplateNotFound:
            raise TemplateError(f"no template {name!r}: {self._path(name)} does not exist") from None
        return source

    def _path(self, name: str) -> Path:
        return self.root / (name + SUFFIX)


def _template_lines(tb: TracebackType | None, root: Path) -> str:
    """Where in the templates rendering failed: 'a.j2 line 3 > partial.j2 line 2', outermost
    first (Jinja rewrites the traceback so template frames carry the file and line)."""
    where = []
    while tb is not None:
        filename = tb.tb_frame.f_code.co_filename
        if filename.endswith(SUFFIX):
            path = Path(filename)
            shown = path.relative_to(root) if path.is_relative_to(root) else path
            where.append(f"{shown} line {tb.tb_lineno}")
        tb = tb.tb_next
    return " > ".join(where) or "line unknown"


@cache
def prompts() -> Templates:
    """The LLM prompts shipped in `prompts/`."""
    return Templates(resource_dir("prompts"))


def render(name: str, /, **variables: object) -> Rendered:
    """Render the prompt `prompts/<name>.j2`."""
    return prompts().render(name, **variables)
