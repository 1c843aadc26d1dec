"""Every kernel variant the catalog can write: the runner's static checks pass on each
candidate file, every launched kernel is an extern "C" kernel launch() can call, and the
CUDA builds with the real nvcc for sm_90. For the built-in suite (every family) the
variants are the base kernel, each strategy applied alone, and every strategy of the
family's order applied in turn; for the tasks in tests/catalog/tasks, the first and last.
To stay within a minute on two cores, a task's variants are built as one translation unit
(each in a namespace of its own), in parallel across tasks (runner.build.build_many)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from htam_graph.catalog.knobs import Knobs
from htam_graph.catalog.render import kernel_templates
from htam_graph.catalog.variants import everything, recognized, render, singles
from htam_graph.runner.build import BuildSettings, build_many, find_nvcc
from htam_graph.runner.formats import static_cuda_sources
from htam_graph.runner.native import parse_kernels, parse_signature
from htam_graph.runner.static_checks import static_check
from tests.catalog.variants import own, suite


def _launched(source: str) -> set[str]:
    return {
        node.args[0].value
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "launch"
        and node.args
        and isinstance(node.args[0], ast.Constant)
    }


EXTERN_C = 'extern "C" '


def _unit(dtype: str, sources: list[str]) -> str:
    """The variants' kernels as one file: the shared helpers once, each variant in a
    namespace (extern "C" dropped so equal kernel names do not clash)."""
    half, bf16 = dtype == "float16", dtype == "bfloat16"
    heads = sorted(
        {
            kernel_templates().render("common", half=h, bf16=b, pipeline=p, mma=m).text.strip()
            for p in (False, True)
            for m in (False, True)
            for h in {False, half}
            for b in {False, bf16}
        },
        key=len,
    )
    body = []
    for i, source in enumerate(sources):
        text = source.strip()
        head = max((h for h in heads if text.startswith(h)), key=len)
        kernels = text[len(head) :].replace(EXTERN_C, "")
        body.append(f"namespace v{i} {{\n{kernels}\n}}")
    return kernel_templates().render("common", half=half, bf16=bf16, pipeline=True, mma=True).text + "\n".join(body)


@pytest.mark.nvcc
def test_every_variant_passes_the_static_checks_and_builds(tmp_path: Path) -> None:
    units, problems, count = [], [], 0
    builtin = suite()
    for name, source in {**builtin, **own()}.items():
        rec = recognized(source)
        if rec is None:
            continue
        sources: list[str] = []
        variants = {"base": Knobs(), **(singles(rec) if name in builtin else {}), "all": everything(rec)}
        for variant, knobs in variants.items():
            candidate = render(rec, knobs)
            count += 1
            for finding in static_check(candidate, rec.dtype, "native"):
                problems.append(f"{name} {variant}: {finding.kind.value}: {finding.detail}")
            cuda = static_cuda_sources(candidate)
            if len(cuda) != 1:
                problems.append(f"{name} {variant}: {len(cuda)} CUDA_SRC strings")
                continue
            kernels = parse_kernels(cuda[0])
            for kernel, params in kernels.items():
                parse_signature(kernel, params)
            if missing := _launched(candidate) - set(kernels):
                problems.append(f'{name} {variant}: launches {missing}, not extern "C" kernels of its CUDA_SRC')
            if cuda[0] not in sources:
                sources.append(cuda[0])
        units.append((name, _unit(rec.dtype, sources)))
    assert not problems, "\n".join(problems)
    assert count > 400  # every family contributes variants
    settings = BuildSettings(nvcc=find_nvcc(), cache_dir=tmp_path, arch="sm_90")
    results = build_many([text for _, text in units], settings)
    failed = [f"{name}:\n{r.errors}" for (name, _), r in zip(units, results) if not r.ok]
    assert not failed, "\n\n".join(failed)
