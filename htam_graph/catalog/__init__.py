"""The strategy catalog: kernels from templates, chosen by the memory's strategies, for
running HTAM without an LLM (docs/catalog.md). Importing this package is cheap; its
modules import torch."""

from __future__ import annotations

from pathlib import Path

# The results `htam demo` replays on machines without a GPU, recorded on an H200 with
# `htam demo --record htam_graph/catalog/replay/demo-h200.json.gz`.
DEMO_REPLAY = Path(__file__).resolve().parent / "replay" / "demo-h200.json.gz"
