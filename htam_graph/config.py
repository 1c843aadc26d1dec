"""Configuration: command-line flags > environment (HTAM_*) > the user's settings file > defaults.

The settings file is `$HTAM_ENV_FILE` when that is set, else
`$XDG_CONFIG_HOME/htam-graph/htam.env` (`~/.config/htam-graph/htam.env`) when it exists:
`.env` syntax, HTAM_* names. A `.env` in the working directory is never read: a folder a
user merely stands in (a checkout of someone else's project) must not point the memory at
a foreign server, which would then receive the password from the environment, nor choose
the nvcc the runner executes. The file must belong to the user and be writable by no one
else, for the same reason. `htam config` shows every setting with where it came from.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any, Literal

from dotenv import dotenv_values
from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError
from pydantic_settings import BaseSettings, SettingsConfigDict

from htam_graph.errors import ConfigError
from htam_graph.llm.settings import LLMSettings
from htam_graph.vocab import MAX_DISTANCE

ENV_FILE_VAR = "HTAM_ENV_FILE"
ENV_PREFIX = "HTAM_"


def data_dir() -> Path:
    """Where the embedded store and caches live unless configured otherwise."""
    return Path.home() / ".local" / "share" / "htam-graph"


def config_dir() -> Path:
    return Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config") / "htam-graph"


# What an ok step's speedup is rewarded against (memory/outcome.py, reward_base).
RewardFrom = Literal["best", "fastest", "parent"]


class ScoringParams(BaseModel):
    """Transition-attended scoring and the policy's temperature (docs/method.md); recorded
    with every run. Numbers must be finite: an infinite alpha or lambda makes NaN scores."""

    model_config = ConfigDict(frozen=True, allow_inf_nan=False)

    K: int = Field(3, ge=1, le=MAX_DISTANCE, description="prefix length: how many recent globals attend")
    lam: float = Field(0.5, ge=0.0, description="decay of attention with prefix distance")
    alpha: float = Field(2.0, gt=0.0, description="shrinkage strength toward the back-off")
    beta: float = Field(0.5, ge=0.0, description="weight of the global node's own utility")
    tau: float = Field(0.5, gt=0.0, description="softmax temperature of the policy")
    reward_from: RewardFrom = Field(
        "parent",
        description="what a step's speedup is rewarded against: parent (the default), the kernel the step modified, "
        "signed, 0 within the dead-band; best, the run's best speedup (the reference's 1.0 until a kernel beats it; "
        "HTAM's original reward, that of the published tuned-start tables); fastest, while no kernel beats the "
        "reference, the run's fastest correct kernel, so progress below eager is rewarded too",
    )
    by_family: bool = Field(
        True,
        description="htam and its ablations condition their evidence on the task's operator family (docs/method.md, "
        '"Conditioning on the operator family"); false pools it over families, as htam-no-family does',
    )
    by_shape: bool = Field(
        False,
        description="with by_family: the evidence of the tasks of the same operator family and shape class "
        "(TaskRecord.shape_class), the family's when that cell has no step yet (docs/method.md, \"Conditioning on the "
        'shape class"); off by default, as the cells are sparse',
    )
    deadband: float = Field(
        0.03,
        ge=0.0,
        description="reward_from = parent: |log2 gain| under this is timing noise and earns 0 (0.03 is 2.1%; the "
        "H200's trials spread 1.3% around their median for half the recorded kernels, 9% for the noisiest tenth)",
    )


class Settings(BaseSettings):
    """Every setting can come from a flag, HTAM_<NAME> in the environment, or the settings
    file (`load_settings` finds it; `Settings()` alone reads the environment only)."""

    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, env_file=None, env_nested_delimiter="__", extra="ignore")

    store: Literal["auto", "local", "neo4j"] = Field(
        "auto", description="auto: Neo4j when HTAM_NEO4J_URI is set, else the local file"
    )
    local_path: Path = Field(default_factory=lambda: data_dir() / "memory.sqlite")
    neo4j_uri: str | None = None
    neo4j_user: str = "neo4j"
    neo4j_password: SecretStr = SecretStr("htam-graph")
    neo4j_database: str = "neo4j"
    scoring: ScoringParams = Field(default_factory=ScoringParams)
    # The runner: resolved once by the process that starts the judge and sent with every
    # job (runner/build.py BuildSettings); GPU processes never read the environment.
    nvcc: Path | None = Field(
        None, description="nvcc to use; default: PATH, cuda.pathfinder (the PyPI nvcc, CUDA_HOME), /usr/local/cuda"
    )
    cuda_arch: str | None = Field(None, pattern=r"^sm_\d+a?$", description="e.g. sm_90; default: the GPU's")
    cache_dir: Path | None = Field(None, description="build cache root; default: the data folder")
    # The LLM that writes kernels (htam optimize): HTAM_LLM__BACKEND, HTAM_LLM__MODEL, ...
    llm: LLMSettings = Field(default_factory=LLMSettings)

    def store_kind(self) -> Literal["local", "neo4j"]:
        if self.store == "auto":
            return "neo4j" if self.neo4j_uri else "local"
        return self.store


def settings_file() -> Path | None:
    """The settings file in force (see the module docstring), checked; None if there is none."""
    named = os.environ.get(ENV_FILE_VAR)
    path = Path(named).expanduser() if named else config_dir() / "htam.env"
    try:
        info = path.stat()
    except FileNotFoundError:
        if named:
            raise ConfigError(f"{ENV_FILE_VAR}={named}: no such file", setting=ENV_FILE_VAR, value=named) from None
        return None
    except OSError as e:
        raise ConfigError(f"cannot read the settings file {path}: {e.strerror}", path=path) from e
    if not stat.S_ISREG(info.st_mode):
        raise ConfigError(f"the settings file {path} is not a file", path=path)
    if info.st_uid not in (os.getuid(), 0) or info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise ConfigError(
            f"the settings file {path} could be changed by other users (it names the Neo4j server that gets"
            f" your password and the nvcc that runs): make it yours and `chmod go-w {path}`",
            path=path,
        )
    return path


def load_settings(**overrides: Any) -> Settings:
    """Settings from flags (`overrides`), environment and the settings file; a bad value
    is a UserError that names the variable."""
    try:
        return Settings(_env_file=settings_file(), **overrides)
    except ValidationError as e:
        err = e.errors()[0]
        name = ENV_PREFIX + "__".join(str(p) for p in err["loc"]).upper()
        raise ConfigError(
            f"{name}: {err['msg']}; fix the flag, the environment or the settings file",
            setting=name,
            value=None if "PASSWORD" in name or "KEY" in name else err.get("input"),  # no secrets
        ) from None


class SettingSource(BaseModel):
    """One setting as `htam config` shows it: never a password's value."""

    name: str
    value: str | None
    source: str


def setting_sources(flags: dict[str, Any]) -> list[SettingSource]:
    """Every setting's effective value and where it came from: a flag, the environment,
    the settings file, or the default (the same precedence as load_settings)."""
    settings = load_settings(**flags)
    path = settings_file()
    in_file = {k.upper(): v for k, v in dotenv_values(path).items()} if path else {}
    in_env = {k.upper(): v for k, v in os.environ.items() if k.upper().startswith(ENV_PREFIX)}

    def origin(field: str, nested: str | None = None) -> str:
        names = [f"{ENV_PREFIX}{field}__{nested}".upper(), f"{ENV_PREFIX}{field}".upper()] if nested else []
        names = names or [f"{ENV_PREFIX}{field}".upper()]
        if nested is None and field in flags:
            return "flag --" + field.replace("_", "-")
        for where, found in (("environment", in_env), (f"file {path}", in_file)):
            if any(n in found for n in names):
                return where
        return "default"

    shown: list[SettingSource] = []
    for field in Settings.model_fields:
        value = getattr(settings, field)
        if isinstance(value, ScoringParams):
            shown += [
                SettingSource(name=f"{ENV_PREFIX}{field}__{k}".upper(), value=str(v), source=origin(field, k))
                for k, v in value.model_dump().items()
            ]
            continue
        if isinstance(value, SecretStr):
            display: str | None = "(hidden)"
        else:
            display = None if value is None else str(value)
        shown.append(SettingSource(name=f"{ENV_PREFIX}{field}".upper(), value=display, source=origin(field)))
    return shown
