"""A candidate file from a recognized task and a set of knobs.

The program (catalog/program.py) says which kernels run; each stage kind has a Jinja
template in catalog/kernels/ for its kernel skeleton, and the code computing each
element (its loads, ops and stores) is emitted here from the stage's expressions. The
candidate's forward allocates the intermediates and launches the kernels in order.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from htam_graph.catalog import expr as ex
from htam_graph.catalog.expr import Emitter, Expr, Load, Pick
from htam_graph.catalog.families import Recognition
from htam_graph.catalog.ir import Unsupported
from htam_graph.catalog.knobs import Knobs
from htam_graph.catalog.program import (
    ROW_ACC_KINDS,
    Buffer,
    ConvStage,
    GemmRowStage,
    GemmStage,
    PointwiseStage,
    PoolStage,
    Program,
    RowStage,
    ScanStage,
    Stage,
    build_program,
    fuse_gemm_rows,
)
from htam_graph.catalog.record import CatalogRecord, record_line
from htam_graph.templating import Templates

KERNELS = Path(__file__).with_name("kernels")


@cache
def kernel_templates() -> Templates:
    """The catalog's CUDA kernel templates (catalog/kernels/), rendered by the same strict
    rules as the LLM's prompts (htam_graph/templating.py)."""
    return Templates(KERNELS)


CTYPES = {
    "float32": "float",
    "float16": "__half",
    "bfloat16": "__nv_bfloat16",
    "int64": "long long",
    "int32": "int",
    "bool": "bool",
}
ITEMSIZE = {"float32": 4, "float16": 2, "bfloat16": 2, "int64": 8, "int32": 4, "bool": 1}
INT32_MAX = 2**31 - 1


@dataclass
class Header:
    """What the candidate's header says about the step that wrote it."""

    model: str
    summary: str
    applied: list[str]
    not_applied: list[str]
    strategies: list[str]
    first: list[str] = field(default_factory=list)  # the family's first kernel this step started from


@dataclass
class Kernel:
    """One rendered kernel: its CUDA and the forward lines that launch it."""

    cuda: str
    lines: list[str]
    name: str


class Sizes:
    """Sizes a kernel uses: literals when specialized, else kernel parameters."""

    def __init__(self, specialize: bool) -> None:
        self.specialize = specialize
        self.params: list[str] = []
        self.args: list[str] = []
        self._names: set[str] = set()

    def __call__(self, name: str, value: int, ctype: str = "long long") -> str:
        if self.specialize:
            return f"{value}LL" if ctype == "long long" and abs(value) > INT32_MAX else str(value)
        if name not in self._names:
            self._names.add(name)
            self.params.append(f"{ctype} {name}")
            self.args.append(str(value))
        return name


@dataclass
class Context:
    """What every stage renderer shares."""

    knobs: Knobs
    device: str = "x.device"
    dtypes: set[str] = field(default_factory=set)
    needs_sms: bool = False
    pipeline: bool = False
    mma: bool = False

    def load_mode(self, dtype: str, full: bool) -> int:
        if dtype == "bool":
            return 0
        if full and self.knobs.streaming:
            return 2
        return 1 if (self.knobs.ldg or self.knobs.streaming) else 0

    def alloc(self, name: str, count: int, dtype: str) -> str:
        """A forward line allocating a workspace of `count` elements."""
        return f"{name} = torch.empty(({count},), dtype=torch.{dtype}, device={self.device})"

    @property
    def store_mode(self) -> int:
        return 2 if self.knobs.streaming else 0

    def index_type(self, *counts: int) -> str:
        return "int" if self.knobs.index32 and max(counts) <= INT32_MAX // 2 else "long long"

    def grid(self, blocks: int, block: int, stride: bool) -> str:
        """A 1-D grid of `blocks`, capped to whole waves over the SMs for grid-stride kernels."""
        if not stride:
            return str(max(1, blocks))
        self.needs_sms = True
        per_sm = f"(self.threads_per_sm // {block})" if self.knobs.waves else "4"
        return f"min({max(1, blocks)}, self.sms * {per_sm})"


def ctype(dtype: str) -> str:
    if dtype not in CTYPES:
        raise Unsupported(f"{dtype} tensors in a kernel")
    return CTYPES[dtype]


def pointer_params(stage: Stage) -> list[str]:
    params = [f"const {ctype(b.dtype)}* __restrict__ in{i}" for i, b in enumerate(stage.inputs)]
    params.append(f"{ctype(stage.out.dtype)}* __restrict__ out")
    return params


def pointer_args(stage: Stage) -> list[str]:
    return [b.name for b in stage.inputs] + [stage.out.name]


def launch_line(name: str, grid: str, block: str, args: list[str], shared: str = "0") -> str:
    return f'self.kernels.launch("{name}", grid={grid}, block={block}, args=({", ".join(args)},), shared_mem={shared})'


def pack(ctx: Context, stage: Stage, slot: int) -> dict[str, Any]:
    """A 16-byte-access input of a vectorized kernel, as the templates name it."""
    dtype = stage.inputs[slot].dtype
    return {"slot": slot, "ctype": ctype(dtype), "mode": ctx.load_mode(dtype, True)}


def scalar_load(ctx: Context, stage: Stage, load: Load, index: str) -> str:
    buf = stage.inputs[load.slot]
    mode = ctx.load_mode(buf.dtype, load.full)
    return f"to_f(ld1<{mode}>(in{load.slot} + {load.index(index)}))"


def render_pointwise(ctx: Context, k: int, st: PointwiseStage) -> Kernel:
    knobs = ctx.knobs
    name = f"k{k}_pointwise"
    n = math.prod(st.space)
    sizes = Sizes(knobs.specialize)
    idx = ctx.index_type(n, *(b.numel for b in st.inputs))
    full = sorted({ld.slot for ld in ex.loads(st.expr) if ld.full and not ld.row})
    widths = [ITEMSIZE[st.out.dtype]] + [ITEMSIZE[st.inputs[s].dtype] for s in full]
    V = 16 // max(widths) if knobs.vec else 1
    fast = knobs.fast_math

    def lane(j: int) -> str:
        def load(ld: Load) -> str:
            if ld.slot in full and ld.full:
                return f"to_f(p{ld.slot}.v[{j}])"
            return scalar_load(ctx, st, ld, f"(e + {j})")

        em = Emitter(load, prefix=f"l{j}_", fast_math=fast)
        value = em.emit(st.expr)
        return em.code(" " * 16) + f"\n{' ' * 16}o.v[{j}] = from_f<{ctype(st.out.dtype)}>({value});"

    def tail() -> str:
        em = Emitter(lambda ld: scalar_load(ctx, st, ld, "e"), prefix="r", fast_math=fast)
        value = em.emit(st.expr)
        return em.code(" " * 8) + f"\n        out[e] = from_f<{ctype(st.out.dtype)}>({value});"

    n_text = sizes("n", n)
    tail_count = n % V
    text = (
        kernel_templates()
        .render(
            "pointwise",
            name=name,
            params=pointer_params(st) + sizes.params,
            idx=idx,
            n=n_text,
            V=V,
            block=knobs.block,
            ilp=knobs.ilp,
            grid_stride=knobs.grid_stride,
            launch_bounds=knobs.launch_bounds,
            packs=[
                {"slot": s, "ctype": ctype(st.inputs[s].dtype), "mode": ctx.load_mode(st.inputs[s].dtype, True)}
                for s in full
            ],
            out_ctype=ctype(st.out.dtype),
            store_mode=ctx.store_mode if st.out.dtype != "bool" else 0,
            lanes="\n".join(lane(j) for j in range(V)),
            tail=tail() if tail_count else "",
            tail_count=tail_count,
        )
        .text
    )
    blocks = math.ceil((n // V) / (knobs.block * knobs.ilp))
    grid = ctx.grid(blocks, knobs.block, knobs.grid_stride)
    line = launch_line(name, f"({grid},)", f"({knobs.block},)", pointer_args(st) + sizes.args)
    return Kernel(text, [line], name)


# -- row stages: reductions, softmax, norms, losses -----------------------------------------


@dataclass
class Field:
    """One accumulator of a row kernel: a plain one, or a fused pair (lse, welford)."""

    id: int
    kind: str
    expr: Expr
    accs: tuple[int, ...]
    level: int = 0


def row_fields(st: RowStage, knobs: Knobs) -> list[Field]:
    fused: dict[int, tuple[str, int, int]] = {}
    for kind, i, j in st.pairs:
        if (kind == "lse" and knobs.online) or (kind == "welford" and knobs.welford):
            fused[i] = fused[j] = (kind, i, j)
    fields: list[Field] = []
    acc_field: dict[int, Field] = {}
    for k, acc in enumerate(st.accs):
        if k in fused:
            kind, i, j = fused[k]
            if k == i:
                field = Field(len(fields), kind, st.accs[i].expr, (i, j))
                fields.append(field)
                acc_field[i] = acc_field[j] = field
        else:
            field = Field(len(fields), acc.kind, acc.expr, (k,))
            fields.append(field)
            acc_field[k] = field
    scalar_accs = _scalar_accs(st)
    for field in fields:  # accumulators come after those their scalars use
        deps = {acc_field[a].id for s in _scalar_refs(field.expr) for a in scalar_accs[s]} - {field.id}
        field.level = 1 + max((fields[d].level for d in deps), default=-1)
    return fields


def _scalar_refs(e: Expr) -> list[int]:
    return sorted(int(k[1:]) for k in ex.vals(e) if k.startswith("s"))


def _scalar_accs(st: RowStage) -> list[set[int]]:
    """The accumulators each scalar depends on, through other scalars."""
    found: list[set[int]] = []
    for expr in st.scalars:
        keys = ex.vals(expr)
        accs = {int(k[1:]) for k in keys if k.startswith("a")}
        for q in (int(k[1:]) for k in keys if k.startswith("s")):
            accs |= found[q]
        found.append(accs)
    return found


def row_mapping(st: RowStage, knobs: Knobs) -> str:
    """Which row kernel a stage gets under `knobs` (strategies ask the same question)."""
    if st.inner > 1:
        return "column"
    fields = row_fields(st, knobs)
    rows = st.outer * st.inner
    if knobs.split and fields and max(f.level for f in fields) == 0 and rows < 2 * ASSUMED_SMS and st.R >= 2048:
        return "split"
    if knobs.rows == "warp" and st.R <= 4096:
        return "warp"
    return "block"


ASSUMED_SMS = 132  # H200; only shape decisions use it, grids are sized from the GPU at run time
SMEM_STATIC = 48 * 1024
SMEM_OPT_IN = 200 * 1024
CACHED_ROW_BLOCK = 1024
MAX_ROW_REGS = 32  # 32-bit registers per thread that a row kept in registers may take


def _acc_value(field: Field, acc: int, res: str, R: int) -> str:
    i = field.id
    if field.kind in ("argmax", "argmin"):
        return f"(float){res}.i{i}"
    if field.kind == "lse":
        return f"{res}.m{i}" if acc == field.accs[0] else f"{res}.s{i}"
    if field.kind == "welford":
        return f"({res}.mu{i} * {float(R)!r}f)" if acc == field.accs[0] else f"{res}.m2{i}"
    return f"{res}.v{i}"


class RowRender:
    def __init__(self, ctx: Context, k: int, st: RowStage) -> None:
        self.ctx, self.k, self.st, self.knobs = ctx, k, st, ctx.knobs
        self.fields = row_fields(st, self.knobs)
        self.mapping = row_mapping(st, self.knobs)
        self.levels = sorted({f.level for f in self.fields})
        self.rows = st.outer * st.inner
        self.sizes = Sizes(self.knobs.specialize)
        self.idx = ctx.index_type(math.prod(st.space), *(b.numel for b in st.inputs))
        self.ridx = "int" if st.R <= INT32_MAX // 2 else "long long"
        exprs = [f.expr for f in self.fields] + ([st.out_expr] if st.mode == "element" else [])
        self.full = sorted({ld.slot for e in exprs for ld in ex.loads(e) if ld.full and not ld.row})
        widths = [ITEMSIZE[st.inputs[s].dtype] for s in self.full]
        if st.mode == "element":
            widths.append(ITEMSIZE[st.out.dtype])
        V = 16 // max(widths) if widths and self.knobs.vec else 1
        self.V = V if self.mapping != "column" and st.R % V == 0 else 1
        self.scalar_level = self._scalar_levels()
        self.block, self.nit = self.knobs.block, 0  # the register caches set both
        self.caches = self._caches()
        if self.caches and not self.nit:
            self.block = CACHED_ROW_BLOCK

    def _scalar_levels(self) -> list[int]:
        accs = _scalar_accs(self.st)
        field_of = {a: f for f in self.fields for a in f.accs}
        return [max((field_of[a].level for a in deps), default=0) for deps in accs]

    def _caches(self) -> list[dict[str, Any]]:
        """Copies of the row's inputs that later passes read again: in registers (each thread
        its own accesses) when a thread's share fits in MAX_ROW_REGS, else in shared memory."""
        st = self.st
        passes = len(self.levels) + (1 if st.mode == "element" and self.knobs.fuse_stats else 0)
        if not ((self.knobs.row_cache or self.knobs.row_regs) and self.mapping == "block" and passes > 1):
            return []
        later = [f.expr for f in self.fields if f.level > 0]
        if st.mode == "element" and self.knobs.fuse_stats:
            later.append(st.out_expr)
        slots = sorted({ld.slot for e in later for ld in ex.loads(e) if ld.full and not ld.row})
        if self.knobs.row_regs and slots:
            regs = self._register_caches(slots)
            if regs:
                return regs
        if not self.knobs.row_cache:
            return []
        caches, offset = [], 0
        for slot in slots:
            caches.append({"slot": slot, "ctype": ctype(st.inputs[slot].dtype), "offset": offset})
            offset += -(-st.R * ITEMSIZE[st.inputs[slot].dtype] // 16) * 16
        limit = SMEM_OPT_IN if self.knobs.smem_opt_in else SMEM_STATIC
        if not caches or offset > limit:
            return []
        self.cache_bytes = offset
        return caches

    def _register_caches(self, slots: list[int]) -> list[dict[str, Any]]:
        """Register arrays of the row's accesses per thread, with the smallest block from the
        knobs' up to 1024 threads whose share fits; sets the block and the (unrolled) number
        of iterations of each pass. Empty when no block fits."""
        st, V, ilp = self.st, self.V, self.knobs.ilp
        block = self.knobs.block
        while True:
            nit = math.ceil(st.R / (block * V * ilp))
            words = sum(nit * ilp * -(-V * ITEMSIZE[st.inputs[s].dtype] // 4) for s in slots)
            if words <= MAX_ROW_REGS:
                break
            if block >= CACHED_ROW_BLOCK:
                return []
            block *= 2
        self.block, self.nit = block, nit
        return [{"slot": s, "ctype": ctype(st.inputs[s].dtype), "regs": nit * ilp} for s in slots]

    # -- code pieces ----------------------------------------------------------------------
    def scalar_values(self, upto: int) -> dict[str, str]:
        return {f"s{q}": f"s{q}" for q, lvl in enumerate(self.scalar_level) if lvl < upto}

    def body(self, level: int, first: bool) -> list[dict[str, Any]]:
        """Load, compute and push one access (V elements) for the fields of `level`."""
        V = self.V
        fields = [f for f in self.fields if f.level == level]
        used = {ld.slot for f in fields for ld in ex.loads(f.expr) if ld.full and not ld.row}
        cached = {c["slot"] for c in self.caches}
        slots = sorted(used | (cached if first else set())) if V > 1 or cached else sorted(used)
        items: list[dict[str, Any]] = [{"code": line} for line in self.pack_lines(slots, first, cached)]
        values = self.scalar_values(level)
        for j in range(V):
            em = Emitter(self.element_load(j, set(slots)), values, prefix=f"x{j}_", fast_math=self.knobs.fast_math)
            pushes = []
            for f in fields:
                pushes.append((f, em.emit(f.expr)))
            items.extend({"code": line} for line in em.lines)
            for f, x in pushes:
                items.append(
                    {
                        "f": {"id": f.id, "kind": f.kind},
                        "acc": f"acc{self.levels.index(level)}[u]",
                        "x": x,
                        "pos": f"(r + {j})",
                    }
                )
        return items

    def pack_lines(self, slots: list[int], first: bool, cached: set[int]) -> list[str]:
        lines = []
        for slot in slots:
            T, V = ctype(self.st.inputs[slot].dtype), self.V
            where = (
                f"reg{slot}[it * {self.knobs.ilp} + u]"
                if self.nit
                else f"*reinterpret_cast<Pack<{T}, {V}>*>(cache{slot} + r)"
            )
            if slot in cached and not first:
                lines.append(f"const Pack<{T}, {V}> p{slot} = {where};")
                continue
            mode = self.ctx.load_mode(self.st.inputs[slot].dtype, True)
            lines.append(f"const Pack<{T}, {V}> p{slot} = ld_pack<{mode}, {T}, {V}>(in{slot} + e);")
            if slot in cached:
                lines.append(f"{where} = p{slot};")
        return lines

    def element_load(self, j: int, packed: set[int]) -> Callable[[Load], str]:
        def load(ld: Load) -> str:
            if ld.full and not ld.row and ld.slot in packed:
                return f"to_f(p{ld.slot}.v[{j}])"
            if ld.row:
                return scalar_load(self.ctx, self.st, ld, "row")
            return scalar_load(self.ctx, self.st, ld, f"(e + {j})")

        return load

    def scalars_code(self, level: int, res: str, indent: str) -> str:
        values = {f"a{a}": _acc_value(f, a, res, self.st.R) for f in self.fields if f.level == level for a in f.accs}
        values.update(self.scalar_values(level))
        em = Emitter(lambda ld: "0.0f", values, prefix=f"c{level}_")
        lines = []
        for q, lvl in enumerate(self.scalar_level):
            if lvl != level:
                continue
            name = em.emit(self.st.scalars[q])
            lines.extend(em.lines)
            em.lines = []
            lines.append(f"const float s{q} = {name};")
            values[f"s{q}"] = f"s{q}"
        return "\n".join(indent + line for line in lines)

    def row_out(self, indent: str, out: str = "out") -> str:
        st = self.st
        direct = self._integer_result()
        if direct is not None:
            return f"{indent}{out}[row] = {direct};"

        def pick(p: Pick, index: str) -> str:
            return f"to_f(ld1<0>(in{p.slot} + row * {self.st.R} + (long long)({index})))"

        em = Emitter(
            lambda ld: scalar_load(self.ctx, st, ld, "row"),
            self.scalar_values(len(self.levels) + 1),
            prefix="o",
            pick=pick,
        )
        value = em.emit(st.out_expr)
        return em.code(indent) + f"\n{indent}{out}[row] = from_f<{ctype(st.out.dtype)}>({value});"

    def _integer_result(self) -> str | None:
        """An index result (argmax) stored as the integer it is, not through a float."""
        st = self.st
        if st.out.dtype != "int64" or not isinstance(st.out_expr, ex.Val):
            return None
        scalar = st.scalars[int(st.out_expr.key[1:])]
        if not isinstance(scalar, ex.Val) or not scalar.key.startswith("a"):
            return None
        field = next(f for f in self.fields if int(scalar.key[1:]) in f.accs)
        return f"res{self.levels.index(field.level)}.i{field.id}"

    def out_body(self) -> str:
        """One access of the output pass: compute and store V elements."""
        st, V = self.st, self.V
        slots = sorted({ld.slot for ld in ex.loads(st.out_expr) if ld.full and not ld.row})
        cached = {c["slot"] for c in self.caches}
        lines = self.pack_lines(slots, False, cached) if V > 1 or cached else []
        packed = set(slots) if V > 1 or cached else set()
        T = ctype(st.out.dtype)
        lines.append(f"Pack<{T}, {V}> o;")
        values = self.scalar_values(len(self.levels) + 1)
        for j in range(V):
            em = Emitter(self.element_load(j, packed), values, prefix=f"y{j}_", fast_math=self.knobs.fast_math)
            value = em.emit(st.out_expr)
            lines.extend(em.lines)
            lines.append(f"o.v[{j}] = from_f<{T}>({value});")
        lines.append(f"st_pack<{self.ctx.store_mode}, {T}, {V}>(out + e, o);")
        return "\n".join(" " * 20 + line for line in lines)

    def needed_scalars(self) -> list[int]:
        return _scalar_refs(self.st.out_expr)

    def ws_store(self, indent: str) -> str:
        ns = len(self.needed_scalars())
        return "\n".join(f"{indent}ws[row * {ns} + {i}] = s{q};" for i, q in enumerate(self.needed_scalars()))

    def level_context(self) -> list[dict[str, Any]]:
        out = []
        for n, level in enumerate(self.levels):
            fields = [f for f in self.fields if f.level == level]
            out.append(
                {
                    "struct": f"K{self.k}L{n}",
                    "fields": [{"id": f.id, "kind": f.kind} for f in fields],
                    "what": ", ".join(f.kind for f in fields),
                    "body": self.body(level, n == 0),
                    "scalars": self.scalars_code(level, f"res{n}", " " * 8),
                }
            )
        return out

    # -- the kernels ------------------------------------------------------------------------
    def render(self) -> Kernel:
        st, knobs = self.st, self.knobs
        name = f"k{self.k}_row"
        rows = self.sizes("rows", self.rows)
        R = self.sizes("R", st.R)
        unfused = st.mode == "element" and not knobs.fuse_stats and self.mapping in ("block", "warp")
        params = [f"const {ctype(b.dtype)}* __restrict__ in{i}" for i, b in enumerate(st.inputs)]
        lines: list[str] = []
        # A row cached in shared memory (up to 200 KB) leaves room for one block per SM: it gets 1024 threads,
        # enough loads in flight to keep the memory busy, and launch bounds that cap registers to fit them.
        # A row in registers gets the block its share fits in, and launch bounds for the same reason.
        block = self.block
        common: dict[str, Any] = dict(  # noqa: C408 - the template's variables, by name
            name=name, idx=self.idx, ridx=self.ridx, block=block, ilp=knobs.ilp, V=self.V, rows=rows, R=R,
            launch_bounds=knobs.launch_bounds or bool(self.caches), reduce=knobs.reduce, levels=self.level_context(),
            nit=self.nit,
        )  # fmt: skip
        if self.mapping == "split":
            return self.render_split(name, params, common)
        mode = "stats" if unfused else st.mode
        ws = f"w{self.k}"
        if unfused:
            params.append("float* __restrict__ ws")
            lines.append(self.ctx.alloc(ws, self.rows * len(self.needed_scalars()), "float32"))
        else:
            params.append(f"{ctype(st.out.dtype)}* __restrict__ out")
        template = "row_column" if self.mapping == "column" else "row"
        inner = self.sizes("inner", st.inner) if self.mapping == "column" else None
        if mode != "element":
            out_body = ""
        else:
            out_body = self.column_out_body() if self.mapping == "column" else self.out_body()
        text = kernel_templates().render(
            template, **common, params=params + self.sizes.params, mapping=self.mapping, mode=mode,
            caches=self.caches, inner=inner,
            row_out=self.row_out(" " * 12 if self.mapping != "column" else " " * 8) if st.mode == "row" else "",
            out_body=out_body,
            ws_store=self.ws_store(" " * 12) if unfused else "",
        ).text  # fmt: skip
        args = [b.name for b in st.inputs] + [ws if unfused else st.out.name] + self.sizes.args
        if self.mapping == "column":
            blocks = math.ceil(self.rows / knobs.block)
            grid = self.ctx.grid(blocks, knobs.block, knobs.grid_stride or knobs.persistent)
        elif self.mapping == "warp":
            blocks = math.ceil(self.rows / (knobs.block // 32))
            grid = self.ctx.grid(blocks, knobs.block, knobs.persistent)
        else:
            grid = self.ctx.grid(self.rows, block, knobs.persistent)
        shared = str(getattr(self, "cache_bytes", 0)) if self.caches else "0"
        lines.append(launch_line(name, f"({grid},)", f"({block},)", args, shared))
        kernel = Kernel(text, lines, name)
        if unfused:
            apply = self.render_apply(f"{name}_apply", ws)
            kernel = Kernel(text + "\n" + apply.cuda, lines + apply.lines, f"{name}, {apply.name}")
        return kernel

    def column_out_body(self) -> str:
        st = self.st
        em = Emitter(
            self.element_load(0, set()),
            self.scalar_values(len(self.levels) + 1),
            prefix="y",
            fast_math=self.knobs.fast_math,
        )
        value = em.emit(st.out_expr)
        return (
            em.code(" " * 12)
            + f"\n{' ' * 12}st1<{self.ctx.store_mode}>(out + e, from_f<{ctype(st.out.dtype)}>({value}));"
        )

    def render_split(self, name: str, params: list[str], common: dict[str, Any]) -> Kernel:
        st = self.st
        parts = [(f, part) for f in self.fields for part in _field_parts(f.kind)]
        save = [f"p[{q}] = (double)res.{part}{f.id};" for q, (f, part) in enumerate(parts)]
        restore = [
            f"t.{part}{f.id} = ({'long long' if part == 'i' else 'float'})p[{q}];" for q, (f, part) in enumerate(parts)
        ]
        ns = len(self.needed_scalars())
        target = "ws" if st.mode == "element" else "out"
        combine_params = [*params, "const double* __restrict__ part", "int chunks"]
        combine_params.append(
            "float* __restrict__ ws" if st.mode == "element" else f"{ctype(st.out.dtype)}* __restrict__ out"
        )
        text = kernel_templates().render(
            "row_split", **common, partial_params=[*params, "double* __restrict__ part", *self.sizes.params],
            combine_params=combine_params + self.sizes.params, nfields=len(parts), save=save, restore=restore,
            mode=st.mode, row_out=self.row_out(" " * 4, target) if st.mode == "row" else "",
            ws_store=self.ws_store(" " * 4) if st.mode == "element" else "",
        ).text  # fmt: skip
        self.ctx.needs_sms = True
        k = self.k
        max_chunks = max(1, min(65535, math.ceil(st.R / (self.knobs.block * self.V))))
        lines = [
            f"c{k} = min({max_chunks}, max(1, (4 * self.sms + {self.rows - 1}) // {self.rows}))",
            f"p{k} = torch.empty(({self.rows} * c{k} * {len(parts)},), dtype=torch.float64, device={self.ctx.device})",
        ]
        ins = [b.name for b in st.inputs]
        lines.append(
            launch_line(
                f"{name}_partial", f"({self.rows}, c{k})", f"({self.knobs.block},)", [*ins, f"p{k}", *self.sizes.args]
            )
        )
        ws = f"w{k}"
        if st.mode == "element":
            lines.append(f"{ws} = torch.empty(({self.rows * ns},), dtype=torch.float32, device={self.ctx.device})")
        out = ws if st.mode == "element" else st.out.name
        combine_args = [*ins, f"p{k}", f"c{k}", out, *self.sizes.args]
        lines.append(launch_line(f"{name}_combine", f"({math.ceil(self.rows / 128)},)", "(128,)", combine_args))
        kernel = Kernel(text, lines, f"{name}_partial, {name}_combine")
        if st.mode == "element":
            apply = self.render_apply(f"{name}_apply", ws)
            kernel = Kernel(text + "\n" + apply.cuda, lines + apply.lines, f"{kernel.name}, {apply.name}")
        return kernel

    def render_apply(self, name: str, ws: str) -> Kernel:
        """The elementwise output pass over the whole space, reading the row statistics."""
        st, knobs = self.st, self.knobs
        needed = self.needed_scalars()
        ns = len(needed)
        n = math.prod(st.space)
        sizes = Sizes(knobs.specialize)
        full = sorted({ld.slot for ld in ex.loads(st.out_expr) if ld.full and not ld.row})
        widths = [ITEMSIZE[st.out.dtype]] + [ITEMSIZE[st.inputs[s].dtype] for s in full]
        V = 16 // max(widths) if knobs.vec else 1
        V = V if st.R % V == 0 else 1

        def lane(j: int) -> str:
            lines = [f"const float s{q}_{j} = ws[((e + {j}) / {st.R}) * {ns} + {i}];" for i, q in enumerate(needed)]
            values = {f"s{q}": f"s{q}_{j}" for q in needed}

            def load(ld: Load) -> str:
                return (
                    f"to_f(p{ld.slot}.v[{j}])"
                    if ld.full and not ld.row and ld.slot in full
                    else scalar_load(self.ctx, st, ld, f"(e + {j})")
                )

            em = Emitter(load, values, prefix=f"l{j}_", fast_math=knobs.fast_math)
            value = em.emit(st.out_expr)
            lines += [*em.lines, f"o.v[{j}] = from_f<{ctype(st.out.dtype)}>({value});"]
            return "\n".join(" " * 16 + line for line in lines)

        params = [f"const {ctype(b.dtype)}* __restrict__ in{i}" for i, b in enumerate(st.inputs)]
        params += ["const float* __restrict__ ws", f"{ctype(st.out.dtype)}* __restrict__ out"]
        n_text = sizes("n", n)
        text = kernel_templates().render(
            "pointwise", name=name, params=params + sizes.params, idx=self.idx, n=n_text, V=V,
            block=knobs.block, ilp=knobs.ilp, grid_stride=knobs.grid_stride, launch_bounds=knobs.launch_bounds,
            packs=[pack(self.ctx, st, s) for s in full],
            out_ctype=ctype(st.out.dtype), store_mode=self.ctx.store_mode, lanes="\n".join(lane(j) for j in range(V)),
            tail="", tail_count=0,
        ).text  # fmt: skip
        blocks = math.ceil((n // V) / (knobs.block * knobs.ilp))
        grid = self.ctx.grid(blocks, knobs.block, knobs.grid_stride)
        args = [b.name for b in st.inputs] + [ws, st.out.name] + sizes.args
        return Kernel(text, [launch_line(name, f"({grid},)", f"({knobs.block},)", args)], name)


def _field_parts(kind: str) -> list[str]:
    return {"lse": ["m", "s"], "welford": ["n", "mu", "m2"], "argmax": ["v", "i"], "argmin": ["v", "i"]}.get(
        kind, ["v"]
    )


def render_row(ctx: Context, k: int, st: RowStage) -> Kernel:
    return RowRender(ctx, k, st).render()


# -- GEMM ----------------------------------------------------------------------------------

GEMM_BIG_TILE = 128
GEMM_SMALL_TILE = 16


@dataclass(frozen=True)
class TensorCoreTile:
    """The 3xTF32 tensor-core tile (gemm_tc.j2): block tile bm x bn, K slices of bk, a grid of
    warps_m x warps_n warps, `stages` shared-memory buffers."""

    bm: int = 128
    bn: int = 128
    bk: int = 32
    warps_m: int = 2
    warps_n: int = 4
    stages: int = 3
    fresh_steps: int = 2  # k-steps of 8 summed in a fresh accumulator before they join the running sum

    @property
    def threads(self) -> int:
        return 32 * self.warps_m * self.warps_n


def tensor_core_tile(st: GemmStage) -> TensorCoreTile:
    """The tile for `st`'s shape."""
    return TensorCoreTile()


def gemm_tile(st: GemmStage, knobs: Knobs) -> tuple[int, int]:
    """A block's tile of C, rows x columns."""
    if knobs.tf32x3:
        tc = tensor_core_tile(st)
        return tc.bm, tc.bn
    tile = GEMM_BIG_TILE if knobs.reg_tile else GEMM_SMALL_TILE
    return tile, tile


def gemm_tiles(st: GemmStage, knobs: Knobs) -> int:
    bm, bn = gemm_tile(st, knobs)
    return math.ceil(st.M / bm) * math.ceil(st.N / bn) * st.batch


def gemm_splits(st: GemmStage, knobs: Knobs) -> int:
    """How many K-splits split-K uses (1: none): enough tiles for two waves of SMs."""
    if not knobs.split_k or st.N == 1 or st.batch != 1 or st.K < 1024:
        return 1
    tiles = gemm_tiles(st, knobs)
    if tiles >= ASSUMED_SMS:
        return 1
    return max(1, min(math.ceil(2 * ASSUMED_SMS / tiles), st.K // 512))


def epilogue_store(ctx: Context, st: Stage, epilogue: Expr | None, value: str, index: str, indent: str) -> str:
    """Stores `value` (the anchor's result) at `index` of the output, through the epilogue."""
    out_t = ctype(st.out.dtype)
    if epilogue is None:
        return f"{indent}out[{index}] = from_f<{out_t}>({value});"
    em = Emitter(lambda ld: scalar_load(ctx, st, ld, index), {"acc": value}, prefix="ep", fast_math=ctx.knobs.fast_math)
    result = em.emit(epilogue)
    return em.code(indent) + f"\n{indent}out[{index}] = from_f<{out_t}>({result});"


def render_gemm(ctx: Context, k: int, st: GemmStage) -> Kernel:
    knobs = ctx.knobs
    if max(st.M, st.N, st.K) * max(st.M, st.N) > INT32_MAX * 8 or max(st.M, st.N, st.K) > INT32_MAX // 2:
        raise Unsupported("a GEMM with dimensions beyond 32-bit indices")
    if st.batch > 65535:
        raise Unsupported(f"a batched GEMM of {st.batch} matrices (a grid's third dimension holds at most 65535)")
    if st.N == 1:
        return render_gemv(ctx, k, st)
    name = f"k{k}_gemm"
    sizes = Sizes(knobs.specialize)
    M, N, K = sizes("M", st.M, "int"), sizes("N", st.N, "int"), sizes("K", st.K, "int")
    splits = gemm_splits(st, knobs)
    split = splits > 1
    tc = tensor_core_tile(st) if knobs.tf32x3 else None
    step = tc.bk if tc else 16
    kc = -(-math.ceil(st.K / splits) // step) * step
    params = pointer_params(st)
    if split:
        params.append("float* __restrict__ ws")
    reg = knobs.reg_tile or tc is not None
    store_indent = " " * (20 if tc else 16 if reg else 8)
    common: dict[str, Any] = {
        "name": name, "params": params + sizes.params, "M": M, "N": N, "K": K, "a_t": st.a_t, "b_t": st.b_t,
        "a_bstride": st.a_bstride, "b_bstride": st.b_bstride, "split_k": split, "kc": kc, "splits": splits,
        "launch_bounds": knobs.launch_bounds,
        "store": epilogue_store(ctx, st, st.epilogue, "value" if reg else "acc", "i_out" if reg else "i", store_indent),
        "sum_params": [*pointer_params(st), "const float* __restrict__ ws", *sizes.params],
        "sum_store": epilogue_store(ctx, st, st.epilogue, "acc", "i", " " * 8),
    }  # fmt: skip
    shared, threads = 0, 256
    if tc:
        text, shared = _render_gemm_tc(st, tc, knobs, common, M, N, K)
        threads = tc.threads
        ctx.pipeline = ctx.mma = True
    else:
        ld4 = {"A": (st.K if not st.a_t else st.M) % 4 == 0, "B": (st.K if st.b_t else st.N) % 4 == 0}
        text = kernel_templates().render(
            "gemm", **common, reg_tile=reg, vec=knobs.vec, cp_async=knobs.cp_async and reg,
            smem_pad=knobs.smem_pad and reg, raster=knobs.raster and reg, ld_multiple_of_4=ld4,
        ).text  # fmt: skip
        ctx.pipeline = ctx.pipeline or (knobs.cp_async and reg)
    bm, bn = gemm_tile(st, knobs)
    grid = f"({math.ceil(st.N / bn)}, {math.ceil(st.M / bm)}, {splits if split else st.batch})"
    lines: list[str] = []
    args = pointer_args(st)
    if split:
        lines.append(f"w{k} = torch.empty(({splits * st.M * st.N},), dtype=torch.float32, device={ctx.device})")
        args = [*args, f"w{k}"]
    lines.append(launch_line(name, grid, f"({threads},)", args + sizes.args, str(shared)))
    if split:
        blocks = min(math.ceil(st.M * st.N / 256), 8 * ASSUMED_SMS)
        lines.append(launch_line(f"{name}_sum", f"({blocks},)", "(256,)", [*pointer_args(st), f"w{k}", *sizes.args]))
    return Kernel(text, lines, f"{name}, {name}_sum" if split else name)


def _render_gemm_tc(
    st: GemmStage, tc: TensorCoreTile, knobs: Knobs, common: dict[str, Any], M: str, N: str, K: str
) -> tuple[str, int]:
    """The 3xTF32 tensor-core kernel's text and its dynamic shared memory in bytes. Each operand's
    tile keeps its layout in shared memory (rows padded against bank conflicts) and arrives by
    16-byte cp.async where its rows and batch stride are multiples of 4 floats, else by 4 bytes."""
    ends = {"m": ("m0", M, tc.bm), "n": ("n0", N, tc.bn), "k": ("k0", "k_end", tc.bk)}
    sides: list[dict[str, Any]] = []
    for X, (outer, inner), bstride in (
        ("A", ("k", "m") if st.a_t else ("m", "k"), st.a_bstride),
        ("B", ("n", "k") if st.b_t else ("k", "n"), st.b_bstride),
    ):
        ld = {"m": M, "n": N, "k": K}[inner]
        ld_value = {"m": st.M, "n": st.N, "k": st.K}[inner]
        rows, cols = ends[outer][2], ends[inner][2]
        pitch = cols + (8 if inner == "k" else 4)  # fragment loads then hit 32 different banks
        vec = 4 if ld_value % 4 == 0 and bstride % 4 == 0 else 1
        sides.append({
            "X": X, "rows": rows, "cols": cols, "row_dim": outer.upper(), "col_dim": inner.upper(),
            "row_var": outer, "col_var": inner, "row_base": ends[outer][0], "col_base": ends[inner][0],
            "ok": f"{outer} < {ends[outer][1]} && {inner} < {ends[inner][1]}", "ld": ld,
            "src": f"{X}b", "pitch": pitch, "stage": rows * pitch, "vec": vec,
        })  # fmt: skip
    text = kernel_templates().render(
        "gemm_tc", **common, sides=sides, bm=tc.bm, bn=tc.bn, bk=tc.bk, stages=tc.stages, threads=tc.threads,
        warps_n=tc.warps_n, fresh=tc.fresh_steps, wtm=tc.bm // tc.warps_m, wtn=tc.bn // tc.warps_n, raster=knobs.raster,
    ).text  # fmt: skip
    return text, 4 * tc.stages * sum(side["stage"] for side in sides)


GEMM_ROW_WARPS_M = 2  # warps along the rows: a block holds 16 x GEMM_ROW_WARPS_M rows of C
GEMM_ROW_MAX_NI = 16  # tensor-core tiles of 16x8 per warp: 64 accumulators per thread
GEMM_ROW_MAX_N = 8 * 8 * GEMM_ROW_MAX_NI  # at most 8 warps along a row
GEMM_ROW_MAX_K = 128
GEMM_ROW_BK = 16
_ROW_INIT = dict(zip(ROW_ACC_KINDS, ("0.0f", "-INFINITY", "INFINITY"), strict=True))  # sum, max, min


def render_gemm_row(ctx: Context, k: int, st: GemmRowStage) -> Kernel:
    """A GEMM and the row stage over its rows in one kernel (gemm_row.j2): 32 whole rows of C
    per block, held in registers while the row statistics are reduced and the output is stored."""
    g, r = st.gemm, st.row
    name = f"k{k}_gemm_row"
    warps_n = min(8, math.ceil(g.N / (8 * GEMM_ROW_MAX_NI // 2)))  # a warp takes 64 columns or more
    NI = math.ceil(g.N / (8 * warps_n))
    cols, bk, bm = warps_n * NI * 8, GEMM_ROW_BK, 16 * GEMM_ROW_WARPS_M
    slices = math.ceil(g.K / bk)
    a_ld = slices * bk + 8  # 8-byte fragment loads then hit 32 different banks
    if g.b_t:  # B's slice as [n][k]: rows of bk + 8
        b_ld, b_vec = bk + 8, 4
        b_stage, b_copies = cols * b_ld, cols * bk // b_vec
    else:  # [k][n]: rows padded to 4 mod 32 floats
        b_ld, b_vec = cols + (4 - cols) % 32, 4 if g.N % 4 == 0 else 1
        b_stage, b_copies = bk * b_ld, bk * cols // b_vec
    row_values = {f"a{i}": f"a{i}[h]" for i in range(len(r.accs))}  # per row: h = 0, 1 (rows gq, gq + 8)
    row_values |= {f"s{j}": f"s{j}[h]" for j in range(len(r.scalars))}

    def code(expr: Expr, prefix: str) -> tuple[list[str], str]:
        em = Emitter(lambda ld: "x", row_values, prefix=prefix, fast_math=ctx.knobs.fast_math)
        result = em.emit(expr)
        return em.lines, result

    epilogue_lines: list[str] = []
    epilogue_result = "x"
    if g.epilogue is not None:
        fast = ctx.knobs.fast_math
        ep = Emitter(lambda ld: scalar_load(ctx, g, ld, "i_out"), {"acc": "x"}, prefix="ep", fast_math=fast)
        epilogue_result = ep.emit(g.epilogue)
        epilogue_lines = ep.lines
    # Passes as the row kernel orders them: a statistic after those its scalars use (row_fields,
    # with no one-pass pairs), a scalar right after the last statistic it uses (-1: before any).
    acc_levels = [field.level for field in row_fields(r, Knobs())]
    scalar_levels = [max((acc_levels[a] for a in deps), default=-1) for deps in _scalar_accs(r)]
    levels = []
    for level in range(-1, max(acc_levels, default=-1) + 1):
        accs = []
        for i, acc in enumerate(r.accs):
            if acc_levels[i] == level:
                lines, result = code(acc.expr, f"r{i}_")
                accs.append({"id": i, "kind": acc.kind, "init": _ROW_INIT[acc.kind], "lines": lines, "result": result})
        scalars = []
        for j, scalar in enumerate(r.scalars):
            if scalar_levels[j] == level:
                lines, result = code(scalar, f"q{j}_")
                scalars.append({"id": j, "lines": lines, "result": result})
        levels.append({"accs": accs, "scalars": scalars})
    out_lines, out_result = code(r.out_expr, "o")
    threads = 32 * GEMM_ROW_WARPS_M * warps_n
    text = kernel_templates().render(
        "gemm_row", name=name, params=pointer_params(st), warps_m=GEMM_ROW_WARPS_M, warps_n=warps_n, threads=threads,
        NI=NI, bm=bm, bk=bk, slices=slices, M=g.M, N=g.N, K=g.K, a_t=g.a_t, b_t=g.b_t, a_ld=a_ld, b_ld=b_ld,
        b_vec=b_vec, b_stage=b_stage, b_copies=b_copies, cols=cols, a_bstride=g.a_bstride,
        b_bstride=g.b_bstride, max_k=GEMM_ROW_MAX_K,
        epilogue_lines=epilogue_lines, epilogue_result=epilogue_result, levels=levels, out_lines=out_lines,
        out_result=out_result, out_t=ctype(r.out.dtype),
    ).text  # fmt: skip
    ctx.mma = ctx.pipeline = True
    shared = 4 * (bm * a_ld + 2 * b_stage)
    grid = f"({math.ceil(g.M / bm)}, {g.batch})"
    return Kernel(text, [launch_line(name, grid, f"({threads},)", pointer_args(st), str(shared))], name)


def render_gemv(ctx: Context, k: int, st: GemmStage) -> Kernel:
    knobs = ctx.knobs
    name = f"k{k}_gemv"
    sizes = Sizes(knobs.specialize)
    M, K = sizes("M", st.M, "int"), sizes("K", st.K, "int")
    rpw = 4 if knobs.ilp > 1 else 1
    vec = knobs.vec and st.K % 4 == 0 and not st.a_t
    value = "acc" if st.a_t else "value"
    text = kernel_templates().render(
        "gemv", name=name, params=pointer_params(st) + sizes.params, M=M, K=K, a_t=st.a_t,
        a_bstride=st.a_bstride, b_bstride=st.b_bstride, block=knobs.block, rpw=rpw, vec=vec,
        launch_bounds=knobs.launch_bounds, store=epilogue_store(ctx, st, st.epilogue, value, "i", " " * 12),
    ).text  # fmt: skip
    if st.a_t:
        blocks = math.ceil(st.M / knobs.block)
    else:
        blocks = math.ceil(st.M / ((knobs.block // 32) * rpw))
    line = launch_line(name, f"({blocks}, {st.batch})", f"({knobs.block},)", pointer_args(st) + sizes.args)
    return Kernel(text, [line], name)


# -- convolution, pooling, scans ----------------------------------------------------------------


def conv_flat(st: ConvStage) -> bool:
    """A 2-D (or 1-D) convolution: depth 1 in the input, kernel and output, no depth padding."""
    return st.D == st.KD == st.OD == 1 and st.padding[0] == 0


def conv_smem_applies(st: ConvStage) -> bool:
    """Shared-memory tiles: a 2-D convolution of one group, a transposed one only with stride
    1 (it is then the plain convolution of the flipped kernel); the staged tile must fit a
    block's shared memory. 3-D convolutions use the direct kernel."""
    plain = not st.transposed or st.stride == (1, 1, 1)
    return conv_flat(st) and st.groups == 1 and plain and conv_smem_bytes(st) <= 200 * 1024


def conv_tile(st: ConvStage) -> tuple[int, int]:
    """The output pixels a shared-memory block covers, rows x columns (256 threads): 16 x 16,
    or fewer rows, as wide, when the output has fewer (a 1-D convolution is one row of 256)."""
    rows = 16
    while rows > 1 and rows // 2 >= st.OH:
        rows //= 2
    return rows, 256 // rows


def conv_geometry(st: ConvStage, flipped: bool) -> dict[str, int]:
    """Stride, padding and dilation the kernel computes with. `flipped` (the shared-memory
    kernel on a stride-1 transposed convolution, which reads input oh + P - k * D): those of
    the plain convolution of the flipped kernel, whose padding is (K - 1) * D - P."""
    (sd, sh, sw), (pd, ph, pw), (dd, dh, dw) = st.stride, st.padding, st.dilation
    if flipped:
        pd, ph, pw = (st.KD - 1) * dd - pd, (st.KH - 1) * dh - ph, (st.KW - 1) * dw - pw
    return {"SD": sd, "SH": sh, "SW": sw, "PD": pd, "PH": ph, "PW": pw, "DD": dd, "DH": dh, "DW": dw}


def conv_smem_spans(st: ConvStage) -> tuple[int, int, int]:
    """Rows and columns of the input tile a block stages (its output tile and the halo), and
    the floats of the 8 channels' tiles, rounded up to 16 bytes."""
    rows, cols = conv_tile(st)
    span_h = (rows - 1) * st.stride[1] + (st.KH - 1) * st.dilation[1] + 1
    span_w = (cols - 1) * st.stride[2] + (st.KW - 1) * st.dilation[2] + 1
    return span_h, span_w, -(-8 * span_h * span_w // 4) * 4


def conv_smem_bytes(st: ConvStage) -> int:
    return 4 * (conv_smem_spans(st)[2] + 8 * st.KH * st.KW * 16)


def conv_oct(st: ConvStage, knobs: Knobs) -> int:
    """Output channels per thread of the direct kernel: 4 with register tiling when a group allows."""
    return 4 if knobs.reg_tile and (st.O // st.groups) % 4 == 0 else 1


def render_conv(ctx: Context, k: int, st: ConvStage) -> Kernel:
    knobs = ctx.knobs
    name = f"k{k}_conv"
    sizes = Sizes(knobs.specialize)
    smem = knobs.smem_tile and conv_smem_applies(st)
    depth = not conv_flat(st)
    keys = ("N", "C", "H", "W", "O", "OH", "OW", "KH", "KW") + (("D", "OD", "KD") if depth else ())
    dims = {key: sizes(key, getattr(st, key), "int") for key in keys}  # a 2-D kernel never reads D, OD, KD
    geometry = conv_geometry(st, flipped=smem and st.transposed)
    idx = ctx.index_type(st.out.numel, *(b.numel for b in st.inputs))
    oct_ = conv_oct(st, knobs)
    span_h, span_w, in_floats = conv_smem_spans(st)
    tile_h, tile_w = conv_tile(st)
    block = 256 if smem else knobs.block
    store = epilogue_store(ctx, st, st.epilogue, "value", "i", " " * 12)
    text = kernel_templates().render(
        "conv", name=name, params=pointer_params(st) + sizes.params, idx=idx, smem_tile=smem, oct=oct_,
        opg=st.O // st.groups, cpg=st.C // st.groups, has_bias=st.has_bias, mode=ctx.load_mode("float32", False),
        transposed=st.transposed, depth=depth,
        block=block, launch_bounds=knobs.launch_bounds, grid_stride=knobs.grid_stride, specialize=knobs.specialize,
        span_h=span_h, span_w=span_w, in_floats=in_floats, TH=tile_h, TW=tile_w, store=store,
        KSD=st.stride[0] // math.gcd(st.stride[0], st.dilation[0]),
        KSH=st.stride[1] // math.gcd(st.stride[1], st.dilation[1]),
        KSW=st.stride[2] // math.gcd(st.stride[2], st.dilation[2]),
        **dims, **geometry,
    ).text  # fmt: skip
    args = pointer_args(st) + sizes.args
    if smem:
        grid = f"({math.ceil(st.OW / tile_w)}, {math.ceil(st.OH / tile_h)}, {st.N * math.ceil(st.O / 16)})"
        line = launch_line(name, grid, f"({tile_w}, {tile_h})", args, str(conv_smem_bytes(st)))
    else:
        blocks = math.ceil(st.N * (st.O // oct_) * st.OD * st.OH * st.OW / block)
        line = launch_line(name, f"({ctx.grid(blocks, block, knobs.grid_stride)},)", f"({block},)", args)
    return Kernel(text, [line], name)


def _src_code(ctx: Context, st: Stage, src: Expr, index: str, var: str, indent: str) -> str:
    em = Emitter(lambda ld: scalar_load(ctx, st, ld, index), prefix="src", fast_math=ctx.knobs.fast_math)
    value = em.emit(src)
    return em.code(indent) + f"\n{indent}const float {var} = {value};"


def pool_cols(st: PoolStage, knobs: Knobs) -> int:
    """Adjacent outputs of the last dim per thread (pool_cols.j2) under `knobs`; 1: a thread per output."""
    if not knobs.window_reuse:
        return 1
    return next((c for c in POOL_COLS if st.out_sizes[-1] % c == 0), 1)


# 2 adjacent outputs per thread: on the H200, 4 and 8 were slower (max pooling 0.166 and 0.302 ms
# against 0.160, average pooling 0.247 and 0.461 against 0.178; bench/results/pool-cols-2026-12-03-h200/)
POOL_COLS = (2,)


def render_pool(ctx: Context, k: int, st: PoolStage) -> Kernel:
    knobs = ctx.knobs
    name = f"k{k}_pool"
    D = len(st.kernel)
    idx = ctx.index_type(st.out.numel, *(b.numel for b in st.inputs))
    in_strides = [math.prod(st.in_sizes[d + 1 :]) for d in range(D)]
    offset = " + ".join(f"({idx})at{d} * {s}" if s != 1 else f"at{d}" for d, s in enumerate(in_strides))
    C = pool_cols(st, knobs)
    src_code = _src_code(ctx, st, st.src, "src", "v", " " * (20 if C > 1 else 12))
    text = kernel_templates().render(
        "pool_cols" if C > 1 else "pool", C=C, name=name, params=pointer_params(st), idx=idx, op=st.op,
        kernel=list(st.kernel),
        stride=list(st.stride), padding=list(st.padding), dilation=list(st.dilation), in_sizes=list(st.in_sizes),
        out_sizes=list(st.out_sizes), planes=st.planes, out_count=math.prod(st.out_sizes),
        in_count=math.prod(st.in_sizes), src_offset=offset, src_code=src_code,
        divisor=st.divisor, count_include_pad=st.count_include_pad,
        spans=" * ".join(f"span{d}" for d in range(D)), counts=" * ".join(f"(e{d} - s{d})" for d in range(D)),
        store=epilogue_store(ctx, st, st.epilogue, "value", "i", " " * (12 if C > 1 else 8)), block=knobs.block,
        launch_bounds=knobs.launch_bounds, grid_stride=knobs.grid_stride, specialize=knobs.specialize,
    ).text  # fmt: skip
    blocks = math.ceil(st.out.numel // C / knobs.block)
    grid = ctx.grid(blocks, knobs.block, knobs.grid_stride)
    return Kernel(text, [launch_line(name, f"({grid},)", f"({knobs.block},)", pointer_args(st))], name)


SCAN_ITEMS = 8
SCAN_WARP_LINES = 2048  # from this many lines, a warp per line (enough warps to fill the GPU)


def scan_block_applies(st: ScanStage) -> bool:
    return st.inner == 1


def scan_warp_lines(st: ScanStage) -> bool:
    """A warp per line: many lines, or lines short enough for a few chunks of a warp."""
    return st.outer * st.inner >= SCAN_WARP_LINES or st.L <= 4 * 32 * SCAN_ITEMS


def render_scan(ctx: Context, k: int, st: ScanStage) -> Kernel:
    knobs = ctx.knobs
    name = f"k{k}_scan"
    block_scan = knobs.scan == "block" and scan_block_applies(st)
    warp_lines = block_scan and scan_warp_lines(st)
    sizes = Sizes(knobs.specialize)
    lines_total = st.outer * st.inner
    idx = ctx.index_type(st.out.numel, *(b.numel for b in st.inputs))
    ridx = "int" if st.L <= INT32_MAX // 2 else "long long"
    var = "v_in" if block_scan else "v"
    indent = " " * 20 if block_scan else " " * 12
    lines_text, L_text, inner_text = sizes("lines", lines_total), sizes("L", st.L), sizes("inner", st.inner)
    text = kernel_templates().render(
        "scan", name=name, params=pointer_params(st) + sizes.params, idx=idx, ridx=ridx, op=st.op,
        block_scan=block_scan, warp_lines=warp_lines, lines=lines_text, L=L_text, inner=inner_text,
        reverse=st.reverse, items=SCAN_ITEMS, block=knobs.block, launch_bounds=knobs.launch_bounds,
        grid_stride=knobs.grid_stride, src_code=_src_code(ctx, st, st.src, "e", var, indent),
        store=epilogue_store(ctx, st, st.epilogue, "value", "e", indent),
    ).text  # fmt: skip
    if warp_lines:
        grid = ctx.grid(math.ceil(lines_total / (knobs.block // 32)), knobs.block, knobs.persistent)
    elif block_scan:
        grid = ctx.grid(lines_total, knobs.block, knobs.persistent)
    else:
        grid = ctx.grid(math.ceil(lines_total / knobs.block), knobs.block, knobs.grid_stride)
    line = launch_line(name, f"({grid},)", f"({knobs.block},)", pointer_args(st) + sizes.args)
    return Kernel(text, [line], name)


RENDERERS: dict[type[Stage], Callable[[Context, int, Any], Kernel]] = {
    PointwiseStage: render_pointwise,
    RowStage: render_row,
    GemmStage: render_gemm,
    GemmRowStage: render_gemm_row,
    ConvStage: render_conv,
    PoolStage: render_pool,
    ScanStage: render_scan,
}


def render_kernels(program: Program, knobs: Knobs, device: str) -> tuple[list[Kernel], Context]:
    ctx = Context(knobs, device)
    kernels = []
    for k, stage in enumerate(program.stages):
        renderer = RENDERERS.get(type(stage))
        if renderer is None:
            raise Unsupported(f"no template for {stage.kind} stages yet")
        for buf in [*stage.inputs, stage.out]:
            ctx.dtypes.add(buf.dtype)
        kernels.append(renderer(ctx, k, stage))
    return kernels, ctx


def _init_lines(rec: Recognition, program: Program) -> list[str]:
    """Parameter holders named and shaped like the reference's, so the judge copies its values."""
    used = {b.name.removeprefix("self.") for st in program.stages for b in st.inputs if b.role == "param"}
    lines, made = [], {"self"}
    for name in sorted(used):
        param = rec.params[name]
        *path, leaf = name.split(".")
        if not all(part.isidentifier() for part in [*path, leaf]):
            raise Unsupported(f"the parameter name {name!r} is not a chain of identifiers")
        owner = "self"
        for part in path:
            child = f"{owner}.{part}"
            if child not in made:
                lines.append(f"{child} = nn.Module()")
                made.add(child)
            owner = child
        empty = f"torch.empty({tuple(param.shape)!r}, dtype=torch.{param.dtype})"
        if param.buffer:
            lines.append(f'{owner}.register_buffer("{leaf}", {empty})')
        else:
            lines.append(f"{owner}.{leaf} = nn.Parameter({empty}, requires_grad=False)")
    return lines


def _param_ref(buf: Buffer) -> str:
    return f"self.{buf.name}" if buf.role == "param" else buf.name


def render_candidate(rec: Recognition, knobs: Knobs, header: Header) -> str:
    """The candidate file for `rec` with `knobs` (Unsupported when a stage has no template)."""
    program = build_program(rec.output, rec.params, knobs.fusion)
    if knobs.tf32x3 and knobs.fuse_stats:  # a row stage over a GEMM's rows runs in the tensor-core GEMM's kernel
        program = fuse_gemm_rows(program, GEMM_ROW_MAX_N, GEMM_ROW_MAX_K)
    for stage in program.stages:  # forward names parameters through self
        stage.inputs = [Buffer(_param_ref(b), b.shape, b.dtype, b.role) for b in stage.inputs]
    kernels, ctx = render_kernels(program, knobs, _device(rec, program))
    common = (
        kernel_templates()
        .render(
            "common",
            half="float16" in ctx.dtypes,
            bf16="bfloat16" in ctx.dtypes,
            pipeline=ctx.pipeline,
            mma=ctx.mma,
        )
        .text
    )
    init_lines = _init_lines(rec, program)
    if ctx.needs_sms:
        init_lines += [
            "props = torch.cuda.get_device_properties(torch.cuda.current_device())",
            "self.sms = props.multi_processor_count  # grids of grid-stride kernels are sized from the GPU",
            "self.threads_per_sm = props.max_threads_per_multi_processor",
        ]
    forward = _forward_lines(rec, program, kernels)
    record = CatalogRecord(knobs, tuple(header.strategies), header.model, rec.family.value)
    return (
        kernel_templates()
        .render(
            "candidate",
            model=header.model,
            family=rec.family.value,
            summary=header.summary,
            applied=", ".join(header.applied) or "nothing (the base kernel)",
            not_applied="; ".join(header.not_applied) or "-",
            strategies=", ".join(header.strategies) or "none (the base kernel)",
            first=", ".join(header.first),
            kernels=", ".join(k.name for k in kernels),
            record=record_line(record),
            cuda=common + "\n" + "\n".join(k.cuda for k in kernels),
            init_params="".join(
                f", {a.name}" + (f"={a.default}" if a.default is not None else "") for a in rec.init_args
            ),
            init_lines=init_lines,
            forward_params="".join(f", {a}" for a in rec.forward_args),
            forward_lines=forward,
        )
        .text
    )


def _used_inputs(rec: Recognition, program: Program) -> list[str]:
    return [t.name for t in rec.inputs if any(b.name == t.name for st in program.stages for b in st.inputs)]


def _device(rec: Recognition, program: Program) -> str:
    used = _used_inputs(rec, program)
    return f"{used[0]}.device" if used else f"self.{next(iter(rec.params))}.device"


def _forward_lines(rec: Recognition, program: Program, kernels: list[Kernel]) -> list[str]:
    lines = [f"{name} = {name}.contiguous()" for name in _used_inputs(rec, program)]
    device = _device(rec, program)
    for buf in program.temps:
        lines.append(f"{buf.name} = torch.empty({tuple(buf.shape)!r}, dtype=torch.{buf.dtype}, device={device})")
    for kernel in kernels:
        lines.extend(kernel.lines)
    out = program.output
    lines.append(
        f"return {out.name}"
        if out.shape == program.output_shape
        else f"return {out.name}.view({tuple(program.output_shape)!r})"
    )
    return lines
