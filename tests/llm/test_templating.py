"""The template renderer on the templates under tests/llm/templates: pinned output, the
header rule, and errors that name the template, the variable and the line."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

import htam_graph.catalog
from htam_graph.catalog.render import kernel_templates
from htam_graph.resources import resource_dir
from htam_graph.templating import Rendered, TemplateError, Templates, prompts

TEMPLATES = Templates(Path(__file__).parent / "templates")

GENERATE = """\
Task: relu <x> & y
Notes:
  - vectorize
  - fuse
Answer with `ModelNew` (fp32).
Code: if (a < b && c > d) {}
"""


def test_render_pins_text_version_and_hash() -> None:
    rendered = TEMPLATES.render(
        "generate", task="relu <x> & y", notes=["vectorize", "fuse"], code="if (a < b && c > d) {}", precision="fp32"
    )
    # Not escaped (code survives), block tags leave no blank lines, the trailing newline stays.
    assert rendered == Rendered(
        name="generate", version=3, text=GENERATE, sha256=hashlib.sha256(GENERATE.encode()).hexdigest()
    )


def test_the_hash_is_of_the_utf8_text() -> None:
    rendered = TEMPLATES.render("whitespace", x="é")
    assert rendered.text == "é\n"
    assert rendered.sha256 == "edd3a863872a04239eb29ad4bc12fc892b3d4ae57cc7e786a3697816f8e141c2"


def test_an_empty_block_renders_nothing() -> None:
    rendered = TEMPLATES.render("generate", task="t", notes=[], code="c", precision="fp16")
    assert rendered.text == "Task: t\nAnswer with `ModelNew` (fp16).\nCode: c\n"


def test_header_with_whitespace_control() -> None:
    header = TEMPLATES.header("whitespace")
    assert (header.name, header.version, header.purpose) == ("whitespace", 12, "header with whitespace control")
    assert TEMPLATES.render("whitespace", x=1).text == "1\n"


def test_a_template_without_a_header_is_an_error() -> None:
    with pytest.raises(TemplateError, match=r"no_header.j2 must start with a header line `\{# no_header v<N>: "):
        TEMPLATES.render("no_header", task="t")


def test_the_header_must_name_its_file() -> None:
    with pytest.raises(
        TemplateError, match="misnamed.j2 declares the name 'generate' in its header; it must be 'misnamed'"
    ):
        TEMPLATES.render("misnamed")


def test_a_missing_template_is_named() -> None:
    with pytest.raises(TemplateError, match=r"no template 'nope': .*nope.j2 does not exist"):
        TEMPLATES.render("nope")


def test_a_missing_variable_names_template_variable_and_line() -> None:
    with pytest.raises(TemplateError, match=r"^template 'generate' v3: 'task' is undefined \(generate.j2 line 2\)$"):
        TEMPLATES.render("generate", notes=[], code="c", precision="fp32")


def test_a_missing_variable_in_a_partial_names_the_include_chain() -> None:
    with pytest.raises(
        TemplateError,
        match=r"^template 'uses_partial' v1: 'precision' is undefined \(uses_partial.j2 line 3 > contract.j2 line 2\)$",
    ):
        TEMPLATES.render("uses_partial")


def test_kernel_templates_render_by_the_same_rules() -> None:
    kernels = Templates(Path(__file__).parent / "templates" / "kernels")
    rendered = kernels.render("relu", floor="0.0f")
    assert rendered.name == "relu" and rendered.version == 1
    assert rendered.text.endswith("    if (i < n) y[i] = fmaxf(x[i], 0.0f);\n}\n")
    with pytest.raises(TemplateError, match="'floor' is undefined"):
        kernels.render("relu")


def test_the_shipped_folders() -> None:
    assert prompts().root == resource_dir("prompts")
    assert kernel_templates().root == Path(htam_graph.catalog.__file__).parent / "kernels"
    assert not (resource_dir("prompts") / "kernels").exists()  # prompts/ holds the LLM's prompts only
