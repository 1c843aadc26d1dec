"""Every notebook's code cells run top to bottom against a fresh embedded store."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

NOTEBOOKS = sorted((Path(__file__).parents[1] / "notebooks").glob("*.ipynb"))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_runs(path, tmp_path, monkeypatch, capsys):
    for key in ("HTAM_NEO4J_URI", "HTAM_STORE"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("HTAM_LOCAL_PATH", str(tmp_path / "nb.sqlite"))
    monkeypatch.chdir(tmp_path)
    cells = [c for c in json.loads(path.read_text())["cells"] if c["cell_type"] == "code"]
    assert cells, f"{path.name} has no code"
    namespace: dict = {}
    for i, cell in enumerate(cells):
        exec(compile("".join(cell["source"]), f"{path.name}[cell {i}]", "exec"), namespace)
    assert "memory_access" in capsys.readouterr().out
