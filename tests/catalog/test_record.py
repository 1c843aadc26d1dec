"""A catalog kernel's record (catalog/record.py): kept as data by the client that wrote the
kernel, written into the kernel as a `# catalog:` line for provenance, read back from that
line only for a kernel the client has no data for."""

from __future__ import annotations

import json
import logging

import pytest

from htam_graph.catalog.client import CATALOG_MODEL, CatalogClient, best_record
from htam_graph.catalog.families import recognize
from htam_graph.catalog.knobs import Knobs
from htam_graph.catalog.record import CatalogRecord, RecordBook, read_provenance, record_line, without_record
from htam_graph.catalog.render import Header, render_candidate
from htam_graph.catalog.space import kernel_code
from htam_graph.llm.request import KernelRef, PastStep, Pick, Request, StepView, TaskRef
from htam_graph.tasks import resolve_task

TASK = "level2/4_Gemm_GELU"
TILING, FLOAT4 = "data_reuse.register_tiling", "memory_access.vectorized_float4"


def _candidate(knobs: Knobs, strategies: list[str]) -> str:
    rec = recognize(resolve_task(TASK).source)
    return render_candidate(rec, knobs, Header(CATALOG_MODEL, rec.describe(), [], [], strategies))


def _state(task: str, best: str) -> StepView:
    return StepView(
        task=TaskRef(id=TASK, source=task),
        best=KernelRef(step_index=0, source=best),
        step_index=1,
        path=(PastStep(index=0, local_id=TILING, verdict="ok"),),
    )


def test_a_record_round_trips_through_its_line() -> None:
    record = CatalogRecord(Knobs(reg_tile=True, block=128), (TILING, FLOAT4), CATALOG_MODEL, "gemm")
    line = record_line(record)
    # The line the kernels have always carried: the changed knobs, as sorted JSON.
    assert line == "# catalog: " + json.dumps(
        {
            "applied": [TILING, FLOAT4],
            "catalog": CATALOG_MODEL,
            "family": "gemm",
            "knobs": {"block": 128, "reg_tile": True},
        },
        sort_keys=True,
    )
    assert read_provenance(f"import torch\n{line}\nx = 1\n") == record


def test_a_rendered_kernel_carries_its_record_and_loses_it_whole() -> None:
    candidate = _candidate(Knobs(reg_tile=True), [TILING])
    record = read_provenance(candidate)
    assert record is not None
    assert record.knobs == Knobs(reg_tile=True) and record.applied == (TILING,) and record.catalog == CATALOG_MODEL
    stripped = without_record(candidate)
    assert "# catalog:" not in stripped and len(stripped.splitlines()) == len(candidate.splitlines()) - 1
    # The kernel's code (and so its key in a table) ignores the header and the record.
    other = candidate.replace(record_line(record), record_line(CatalogRecord(Knobs(), ("x",))))
    assert kernel_code(other) == kernel_code(candidate)


def test_a_kernel_without_a_record_has_none() -> None:
    source = "import torch\n\nclass ModelNew(torch.nn.Module):\n    pass\n"
    assert read_provenance(source) is None
    assert read_provenance(None) is None and read_provenance("") is None
    assert without_record(source) == source
    assert RecordBook().of(source) is None


@pytest.mark.parametrize(
    "line",
    [
        "# catalog: {not json",
        "# catalog: [1, 2]",
        '# catalog: {"knobs": {"no_such_knob": true}}',
        '# catalog: {"knobs": {"block": "many"}}',
    ],
)
def test_a_malformed_record_reads_as_none_with_a_warning(line: str, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        assert read_provenance(f"import torch\n{line}\n") is None
    assert "not this catalog's" in caplog.text
    assert best_record(_state("", f"{line}\n")) == (Knobs(), [])


def test_the_client_reads_a_kernel_it_wrote_from_its_data_not_its_text() -> None:
    client = CatalogClient(CATALOG_MODEL)
    task = resolve_task(TASK).source
    tiled = _candidate(Knobs(reg_tile=True), [TILING])
    answer = client.generate(Request(state=_state(task, tiled), local=Pick(id=FLOAT4)))
    written = answer.split("```python\n", 1)[1].removesuffix("```\n")
    held = client.records.held(written)
    assert held is not None and held.knobs == Knobs(reg_tile=True, vec=True) and held.applied == (TILING, FLOAT4)
    # A kernel whose line says otherwise (here: the base kernel) is still what the client made.
    forged = written.replace(record_line(held), record_line(CatalogRecord(Knobs(), ())))
    assert read_provenance(forged) == CatalogRecord(Knobs(), ())
    assert best_record(_state(task, forged), client.records) == (Knobs(reg_tile=True, vec=True), [TILING, FLOAT4])
    # A client without data for it (a run resumed from a stored run) reads the line.
    assert best_record(_state(task, forged), CatalogClient(CATALOG_MODEL).records) == (Knobs(), [])
    assert best_record(_state(task, written)) == (Knobs(reg_tile=True, vec=True), [TILING, FLOAT4])


def test_one_text_with_two_records_keeps_none() -> None:
    book = RecordBook()
    source = _candidate(Knobs(reg_tile=True), [TILING])
    book.note(source, CatalogRecord(Knobs(reg_tile=True), (TILING,)))
    assert book.held(source) == CatalogRecord(Knobs(reg_tile=True), (TILING,))
    book.note(source, CatalogRecord(Knobs(vec=True), (FLOAT4,)))
    assert book.held(source) is None
    assert book.of(source) == read_provenance(source)  # the kernel's own line then tells
