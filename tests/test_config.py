"""Settings precedence (flags > environment > the user's settings file > defaults), where
the settings file is found, and what `htam config` says about each setting."""

from __future__ import annotations

import pytest

from htam_graph.config import Settings, load_settings, setting_sources, settings_file
from htam_graph.errors import ConfigError


@pytest.fixture
def config_home(tmp_path, monkeypatch):
    for key in ("HTAM_NEO4J_URI", "HTAM_STORE", "HTAM_SCORING__TAU", "HTAM_NEO4J_DATABASE", "HTAM_ENV_FILE"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    folder = tmp_path / "config" / "htam-graph"
    folder.mkdir(parents=True)
    return folder / "htam.env"


def test_precedence_and_nested_scoring_defaults(config_home, monkeypatch):
    config_home.write_text("HTAM_SCORING__TAU=0.25\nHTAM_NEO4J_DATABASE=fromfile\n")
    s = load_settings()
    assert s.scoring.tau == 0.25 and s.scoring.K == 3
    assert s.neo4j_database == "fromfile" and s.store_kind() == "local"
    monkeypatch.setenv("HTAM_NEO4J_DATABASE", "fromenv")
    monkeypatch.setenv("HTAM_NEO4J_URI", "bolt://db:7687")
    s = load_settings()
    assert s.neo4j_database == "fromenv" and s.store_kind() == "neo4j"
    assert load_settings(neo4j_database="fromflag").neo4j_database == "fromflag"
    assert Settings(store="local").store_kind() == "local"


def test_a_dotenv_in_the_working_directory_is_never_read(config_home, tmp_path, monkeypatch):
    """A checkout someone else wrote must not choose the server that gets the password,
    nor the nvcc that runs."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".env").write_text("HTAM_NEO4J_URI=bolt://evil.example:7687\nHTAM_NVCC=/tmp/evil\n")
    s = load_settings()
    assert s.neo4j_uri is None and s.nvcc is None and s.store_kind() == "local"


def test_htam_env_file_names_the_settings_file(config_home, tmp_path, monkeypatch):
    named = tmp_path / "project.env"
    named.write_text("HTAM_NEO4J_DATABASE=named\n")
    monkeypatch.setenv("HTAM_ENV_FILE", str(named))
    assert settings_file() == named and load_settings().neo4j_database == "named"
    monkeypatch.setenv("HTAM_ENV_FILE", str(tmp_path / "missing.env"))
    with pytest.raises(ConfigError, match="HTAM_ENV_FILE=.*missing.env: no such file") as err:
        load_settings()
    assert (err.value.setting, err.value.value) == ("HTAM_ENV_FILE", str(tmp_path / "missing.env"))


def test_a_settings_file_others_can_write_is_refused(config_home):
    config_home.write_text("HTAM_NEO4J_DATABASE=x\n")
    config_home.chmod(0o666)
    with pytest.raises(ConfigError, match="could be changed by other users.*chmod go-w") as err:
        load_settings()
    assert err.value.path == config_home


def test_sources_name_flag_environment_file_and_default_and_hide_the_password(config_home, monkeypatch):
    config_home.write_text("HTAM_NEO4J_PASSWORD=secret-from-file\nHTAM_SCORING__LAM=0.7\n")
    monkeypatch.setenv("HTAM_NEO4J_USER", "alice")
    shown = {s.name: s for s in setting_sources({"neo4j_database": "flagged"})}
    database = shown["HTAM_NEO4J_DATABASE"]
    assert (database.value, database.source) == ("flagged", "flag --neo4j-database")
    assert (shown["HTAM_NEO4J_USER"].value, shown["HTAM_NEO4J_USER"].source) == ("alice", "environment")
    assert shown["HTAM_SCORING__LAM"].value == "0.7" and shown["HTAM_SCORING__LAM"].source == f"file {config_home}"
    assert shown["HTAM_SCORING__TAU"].source == "default"
    assert shown["HTAM_NEO4J_PASSWORD"].value == "(hidden)" and shown["HTAM_NEO4J_PASSWORD"].source.startswith("file")
    assert "secret-from-file" not in repr(list(shown.values()))


@pytest.mark.parametrize(
    "name, value",
    [
        ("HTAM_SCORING__ALPHA", "inf"),
        ("HTAM_SCORING__LAM", "nan"),
        ("HTAM_SCORING__BETA", "-inf"),
        ("HTAM_SCORING__TAU", "-1"),
        ("HTAM_SCORING__K", "0"),
        ("HTAM_CUDA_ARCH", "gfx90a"),
    ],
)
def test_bad_value_names_the_variable(config_home, monkeypatch, name, value):
    monkeypatch.setenv(name, value)
    with pytest.raises(ConfigError, match=f"^{name}: .*; fix the flag, the environment or the settings file") as err:
        load_settings()
    assert (err.value.setting, err.value.value) == (name, value)
