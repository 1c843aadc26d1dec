"""The messages between the referee and a candidate's process (docs/judge.md).

The referee drives: it sends commands (pickled: the candidate's process trusts the
referee) and reads replies as JSON validated against `Reply` (the referee never unpickles
what the candidate's process sends: that would run its code where the verdict is decided).
Tensors never travel in messages: a reply names device memory of the candidate's process
by a CUDA IPC handle, and the referee maps it (runner/ipc.py). Memory of the referee is
never exported, so the candidate's process holds no handle to anything of the judge's.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field, StringConstraints, TypeAdapter

from htam_graph.runner.build import BuildSettings
from htam_graph.vocab import CandidateFormat, Verdict

# Dtypes a tensor crossing the boundary may have (torch.<name>).
DtypeName = Literal[
    "float64", "float32", "float16", "bfloat16", "int64", "int32", "int16", "int8", "uint8", "bool",
    "complex64", "complex128",
]  # fmt: skip
PoisonName = Literal["nan", "garbage"]
MAX_REPLY_BYTES = 1 << 20  # a reply larger than this is a protocol violation
_Text = Annotated[str, StringConstraints(max_length=4000)]
SHORT_TEXT = 300  # characters of a name or a finding in a reply
_Short = Annotated[str, StringConstraints(max_length=SHORT_TEXT)]
_Dims = Annotated[list[Annotated[int, Field(ge=0)]], Field(max_length=16)]


# --- referee -> candidate ------------------------------------------------------------------
class TensorSpec(BaseModel):
    kind: Literal["tensor"] = "tensor"
    shape: tuple[int, ...]
    dtype: DtypeName


class PlainArg(BaseModel):
    """A forward or constructor argument that is not a tensor (an int, a float, a tuple)."""

    kind: Literal["plain"] = "plain"
    value: Any


ArgSpec = Annotated[TensorSpec | PlainArg, Field(discriminator="kind")]


class Load(BaseModel):
    kind: Literal["load"] = "load"
    source: str
    filename: str
    fmt: CandidateFormat
    build: BuildSettings
    seed: int = Field(description="torch.manual_seed before ModelNew(*init_args), as before Model(*init_args)")
    init_args: list[Any]
    gate_cubin: bytes = Field(description="the timing gate's cubin, from the referee's memory (never the cache)")
    nvcc_version: str = Field("", description="part of cubin cache keys; a sandboxed process cannot run nvcc to ask")
    extensions_dir: str | None = Field(
        None, description="load_inline: TORCH_EXTENSIONS_DIR (the sandbox's builder built it; read-only)"
    )


class Alloc(BaseModel):
    """Allocate the buffers of one input set; the referee writes the values into them."""

    kind: Literal["alloc"] = "alloc"
    key: str
    args: list[ArgSpec]


class Free(BaseModel):
    """Drop input sets and the outputs of earlier calls the candidate's process holds."""

    kind: Literal["free"] = "free"
    keys: list[str] = Field(default_factory=list)
    calls: list[int] = Field(default_factory=list)


class Call(BaseModel):
    """forward(*inputs of set `key`) once, outside any timing; its outputs are held until freed."""

    kind: Literal["call"] = "call"
    call: int
    key: str
    poison: PoisonName | None = Field(description="fill free memory with this marker first")
    poison_blocks: int = Field(0, ge=0, description="marked blocks per expected output")
    outputs: list[TensorSpec] = Field(description="the reference's outputs: the sizes of the poisoned blocks")
    record_ops: bool = False
    hold_stream: bool = Field(False, description="run while a spin kernel holds the current stream")


class Warmup(BaseModel):
    """Warm up on the timing sets; measure host time per call and the host's sync latency."""

    kind: Literal["warmup"] = "warmup"
    keys: list[str]
    warmup: int


class Trial(BaseModel):
    """One timed run: flush L2, hold the stream for `gate_ms`, events around forward."""

    kind: Literal["trial"] = "trial"
    index: int
    key: str
    gate_ms: float


class Finish(BaseModel):
    kind: Literal["finish"] = "finish"


class Built(BaseModel):
    """The answer to NeedsBuild: the referee built it (or cached its failure)."""

    kind: Literal["built"] = "built"


Command = Load | Alloc | Free | Call | Warmup | Trial | Finish | Built


# --- candidate -> referee (validated JSON) ---------------------------------------------------
class RemoteTensor(BaseModel):
    """A tensor in the candidate's device memory: its allocation's IPC handle and its layout."""

    kind: Literal["tensor"] = "tensor"
    handle: Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{128}$")] | None = Field(
        description="None for a tensor without elements"
    )
    base: int = Field(ge=0, description="the allocation's address in the candidate's process")
    offset: int = Field(ge=0, description="bytes from the allocation's start to element 0")
    shape: _Dims
    stride: _Dims
    dtype: DtypeName


class Foreign(BaseModel):
    """An output that is not a plain CUDA tensor (a subclass, a CPU tensor, not a tensor)."""

    kind: Literal["foreign"] = "foreign"
    type_name: _Short
    device: _Short = ""


Output = Annotated[RemoteTensor | Foreign, Field(discriminator="kind")]


class Health(BaseModel):
    """What the harness saw of its own process after each step (only as trustworthy as the
    process: tampering that also silences this report still meets the referee's checks)."""

    tampered: list[_Short] = Field(default_factory=list, max_length=64)
    concurrency: _Short = ""


class NamedTensor(BaseModel):
    name: _Short
    tensor: RemoteTensor


class Ready(BaseModel):
    kind: Literal["ready"] = "ready"
    pid: int
    start_seconds: float  # fork -> CUDA ready
    start_stages: dict[str, float] = Field(default_factory=dict, max_length=16)  # where that time went


class Loaded(BaseModel):
    kind: Literal["loaded"] = "loaded"
    weights: list[NamedTensor] = Field(max_length=100_000)
    health: Health


MAX_BUILD_SOURCE = 256 * 1024


class NeedsBuild(BaseModel):
    """While loading, a sandboxed candidate's process (which cannot run nvcc) asks the
    referee to build a CUDA source its CUDA_SRC literals did not hold; it waits for Built."""

    kind: Literal["needs_build"] = "needs_build"
    source: Annotated[str, StringConstraints(max_length=MAX_BUILD_SOURCE)]


class Failed(BaseModel):
    kind: Literal["failed"] = "failed"
    verdict: Verdict
    errors: _Text
    cuda_error: bool = False


class Allocated(BaseModel):
    kind: Literal["allocated"] = "allocated"
    tensors: list[RemoteTensor | None] = Field(max_length=10_000)


class Freed(BaseModel):
    kind: Literal["freed"] = "freed"


class Called(BaseModel):
    kind: Literal["called"] = "called"
    outputs: list[Output] = Field(max_length=10_000)
    ops: list[_Short] = Field(default_factory=list, max_length=64)
    early_fraction: float | None = None
    health: Health


class Warmed(BaseModel):
    kind: Literal["warmed"] = "warmed"
    host_ms: float
    per_run_ms: float
    latency_ms: float
    health: Health


class TrialDone(BaseModel):
    kind: Literal["trial_done"] = "trial_done"
    index: int
    ms: float
    synced_ms: float
    host_ms: float
    outputs: list[Output] = Field(max_length=10_000)


class Finished(BaseModel):
    kind: Literal["finished"] = "finished"
    health: Health


Reply = Annotated[
    Ready | Loaded | NeedsBuild | Failed | Allocated | Freed | Called | Warmed | TrialDone | Finished,
    Field(discriminator="kind"),
]
REPLY: TypeAdapter[
    Ready | Loaded | NeedsBuild | Failed | Allocated | Freed | Called | Warmed | TrialDone | Finished
] = TypeAdapter(Reply)
