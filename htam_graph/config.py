"""Configuration: command-line flags > environment (HTAM_*) > a `.env` file > defaults."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError
from pydantic_settings import BaseSettings, SettingsConfigDict

from htam_graph.errors import UserError
from htam_graph.llm.settings import LLMSettings
from htam_graph.vocab import MAX_DISTANCE


def data_dir() -> Path:
    """Where the embedded store and caches live unless configured otherwise."""
    return Path.home() / ".local" / "share" / "htam-graph"


class ScoringParams(BaseModel):
    """Transition-attended scoring and the policy's temperature (docs/method.md); recorded
    with every run. Numbers must be finite: an infinite alpha or lambda makes NaN scores."""

    model_config = ConfigDict(frozen=True, allow_inf_nan=False)

    K: int = Field(3, ge=1, le=MAX_DISTANCE, description="prefix length: how many recent globals attend")
    lam: float = Field(0.5, ge=0.0, description="decay of attention with prefix distance")
    alpha: float = Field(2.0, gt=0.0, description="shrinkage strength toward the back-off")
    beta: float = Field(0.5, ge=0.0, description="weight of the global node's own utility")
    tau: float = Field(0.5, gt=0.0, description="softmax temperature of the policy")


class Settings(BaseSettings):
    """Every setting can come from a flag, HTAM_<NAME> in the environment, or `.env`."""

    model_config = SettingsConfigDict(env_prefix="HTAM_", env_file=".env", env_nested_delimiter="__", extra="ignore")

    store: Literal["auto", "local", "neo4j"] = Field(
        "auto", description="auto: Neo4j when HTAM_NEO4J_URI is set, else the local file"
    )
    local_path: Path = Field(default_factory=lambda: data_dir() / "memory.sqlite")
    neo4j_uri: str | None = None
    neo4j_user: str = "neo4j"
    neo4j_password: SecretStr = SecretStr("htam-graph")
    neo4j_database: str = "neo4j"
    scoring: ScoringParams = Field(default_factory=ScoringParams)
    # The runner (read in GPU workers too, so they follow the same .env).
    nvcc: Path | None = Field(None, description="nvcc to use; default: PATH, the PyPI nvcc, /usr/local/cuda")
    cuda_arch: str | None = Field(None, pattern=r"^sm_\d+a?$", description="e.g. sm_90; default: the GPU's")
    cache_dir: Path | None = Field(None, description="build cache root; default: the data folder")
    # The LLM that writes kernels (htam optimize): HTAM_LLM__BACKEND, HTAM_LLM__MODEL, ...
    llm: LLMSettings = Field(default_factory=LLMSettings)

    def store_kind(self) -> Literal["local", "neo4j"]:
        if self.store == "auto":
            return "neo4j" if self.neo4j_uri else "local"
        return self.store


def load_settings(**overrides: Any) -> Settings:
    """Settings from flags (`overrides`), environment and .env; a bad value is a UserError
    that names the variable."""
    try:
        return Settings(**overrides)
    except ValidationError as e:
        err = e.errors()[0]
        name = "HTAM_" + "__".join(str(p) for p in err["loc"]).upper()
        raise UserError(f"{name}: {err['msg']}; fix the flag, the environment or .env") from None
