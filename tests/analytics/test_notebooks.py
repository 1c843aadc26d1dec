"""The notebooks run top to bottom in a real Jupyter kernel (nbclient, the venv's
ipykernel): explore_memory on a fresh embedded store, transition_analysis on the test
session's Neo4j filled by real optimization runs (conftest.py). The executed notebooks
are kept under test-artifacts/notebooks/ for a look at their figures."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

REPO = Path(__file__).parents[2]
NOTEBOOKS = REPO / "notebooks"
ARTIFACTS = REPO / "test-artifacts" / "notebooks"


def execute(name: str, cwd: Path) -> nbformat.NotebookNode:
    """Run every cell in a fresh kernel (which inherits this process's environment);
    a failing cell raises with its traceback. The executed notebook is kept."""
    notebook = nbformat.read(NOTEBOOKS / name, as_version=4)
    NotebookClient(notebook, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(cwd)}}).execute()
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    nbformat.write(notebook, ARTIFACTS / name)
    return notebook


def outputs(notebook: nbformat.NotebookNode, kind: str) -> list[str]:
    return [
        str(out["data"][kind]) if "data" in out else str(out.get("text", ""))
        for cell in notebook.cells
        for out in cell.get("outputs", [])
        if kind in out.get("data", {}) or (kind == "text/plain" and out["output_type"] == "stream")
    ]


def test_explore_memory_on_a_fresh_embedded_store(tmp_path, monkeypatch):
    for key in ("HTAM_NEO4J_URI", "HTAM_STORE"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("HTAM_LOCAL_PATH", str(tmp_path / "nb.sqlite"))
    notebook = execute("explore_memory.ipynb", tmp_path)
    assert "memory_access" in "".join(outputs(notebook, "text/plain"))


@pytest.mark.neo4j
@pytest.mark.nvcc
def test_transition_analysis_on_neo4j_filled_by_real_runs(filled_neo4j, tmp_path, monkeypatch):
    for key, value in filled_neo4j.items():
        monkeypatch.setenv(key, value)
    notebook = execute("transition_analysis.ipynb", tmp_path)
    text = "".join(outputs(notebook, "text/plain"))
    assert filled_neo4j["HTAM_NEO4J_URI"] in text  # it read the Neo4j, not a local file
    assert "ci_low" in text and "success_rate" in text  # the success-rate table
    assert len(outputs(notebook, "image/png")) == 3  # heatmap, success over time, the run's path
