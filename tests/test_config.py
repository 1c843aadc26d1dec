"""Settings precedence: flags (init arguments) > environment > .env > defaults."""

from __future__ import annotations

from htam_graph.config import Settings


def test_precedence_and_nested_scoring_defaults(tmp_path, monkeypatch):
    for key in ("HTAM_NEO4J_URI", "HTAM_STORE", "HTAM_SCORING__TAU", "HTAM_NEO4J_DATABASE"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".env").write_text("HTAM_SCORING__TAU=0.25\nHTAM_NEO4J_DATABASE=fromdotenv\n")
    s = Settings()
    assert s.scoring.tau == 0.25 and s.scoring.K == 3
    assert s.neo4j_database == "fromdotenv" and s.store_kind() == "local"
    monkeypatch.setenv("HTAM_NEO4J_DATABASE", "fromenv")
    monkeypatch.setenv("HTAM_NEO4J_URI", "bolt://db:7687")
    s = Settings()
    assert s.neo4j_database == "fromenv" and s.store_kind() == "neo4j"
    assert Settings(neo4j_database="fromflag").neo4j_database == "fromflag"
    assert Settings(store="local").store_kind() == "local"


def test_bad_value_names_the_variable(monkeypatch):
    import pytest

    from htam_graph.config import load_settings
    from htam_graph.errors import UserError

    monkeypatch.setenv("HTAM_SCORING__TAU", "-1")
    with pytest.raises(UserError, match="HTAM_SCORING__TAU"):
        load_settings()
    monkeypatch.delenv("HTAM_SCORING__TAU")
    monkeypatch.setenv("HTAM_CUDA_ARCH", "gfx90a")
    with pytest.raises(UserError, match="HTAM_CUDA_ARCH"):
        load_settings()
