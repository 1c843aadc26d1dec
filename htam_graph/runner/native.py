"""The native candidate format: CUDA source -> cubin -> launch on torch's current stream.

A candidate calls `load_cuda(CUDA_SRC)` once and then `module.launch(...)` per kernel
call (docs/native_format.md is the contract). Arguments are marshalled from each kernel's
C signature, parsed from the source, so a wrong count or type fails with a message naming
the kernel and the parameter instead of a silent misread on the device.
"""

from __future__ import annotations

import ctypes
import hashlib
import numbers
import re
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from htam_graph.runner.build import BuildSettings, build_cubin, gpu_arch
from htam_graph.runner.models import BuildResult

# Set by the judge's harness for the candidate it loads (the settings travel with the job);
# unset when a user runs a candidate by hand, and load_cuda then reads the configuration.
JUDGE_BUILD: ContextVar[BuildSettings | None] = ContextVar("htam_judge_build", default=None)

MAX_STATIC_SHARED = 48 * 1024  # above this, a kernel must opt in to dynamic shared memory


class CudaBuildError(Exception):
    """nvcc rejected the candidate's CUDA source; `result.errors` holds the condensed errors."""

    def __init__(self, result: BuildResult) -> None:
        super().__init__(f"CUDA_SRC failed to compile:\n{result.errors}")
        self.result = result


class CudaDriverError(RuntimeError):
    """A CUDA driver call failed."""


class LaunchError(ValueError):
    """A launch's arguments do not fit the kernel's C signature or the launch limits."""


# --- signatures -----------------------------------------------------------------------


@dataclass(frozen=True)
class Param:
    name: str
    ctype: str  # normalised C type, e.g. "float*" or "long long"
    kind: str  # "pointer", "int", "uint", "float", "bool"
    size: int  # bytes passed to the kernel


@dataclass(frozen=True)
class KernelSignature:
    name: str
    params: tuple[Param, ...]


_SCALARS: dict[str, tuple[str, int]] = {
    "bool": ("bool", 1),
    "char": ("int", 1),
    "signed char": ("int", 1),
    "int8_t": ("int", 1),
    "unsigned char": ("uint", 1),
    "uint8_t": ("uint", 1),
    "short": ("int", 2),
    "int16_t": ("int", 2),
    "unsigned short": ("uint", 2),
    "uint16_t": ("uint", 2),
    "int": ("int", 4),
    "signed": ("int", 4),
    "int32_t": ("int", 4),
    "unsigned": ("uint", 4),
    "uint32_t": ("uint", 4),
    "long": ("int", 8),
    "long long": ("int", 8),
    "int64_t": ("int", 8),
    "ptrdiff_t": ("int", 8),
    "unsigned long": ("uint", 8),
    "unsigned long long": ("uint", 8),
    "uint64_t": ("uint", 8),
    "size_t": ("uint", 8),
    "float": ("float", 4),
    "double": ("float", 8),
}
_QUALIFIERS = re.compile(r"\b(?:const|volatile|__restrict__|__restrict|restrict|struct|std::)\b|__grid_constant__")
_COMMENTS = re.compile(r"//[^\n]*|/\*.*?\*/", re.DOTALL)
_KERNEL = re.compile(
    r'extern\s*"C"\s*((?:(?:__global__|__launch_bounds__\s*\([^()]*\)|static|inline|__forceinline__)\s*)+)'
    r"void\s+(?:__launch_bounds__\s*\([^()]*\)\s*)?(\w+)\s*\(([^)]*)\)"
)


def parse_kernels(source: str) -> dict[str, str]:
    """Name -> raw parameter list of every `extern "C" __global__` kernel in the source."""
    kernels = {}
    for match in _KERNEL.finditer(_COMMENTS.sub(" ", source)):
        if "__global__" in match.group(1):
            kernels[match.group(2)] = match.group(3)
    return kernels


def parse_signature(name: str, raw_params: str) -> KernelSignature:
    text = raw_params.strip()
    if text in ("", "void"):
        return KernelSignature(name, ())
    return KernelSignature(name, tuple(_parse_param(name, i, p) for i, p in enumerate(text.split(","))))


def _parse_param(kernel: str, index: int, text: str) -> Param:
    decl = " ".join(_QUALIFIERS.sub(" ", text).split())
    match = re.fullmatch(r"(.*?)\s*([*&\s]*)\s*(\w+)(\s*\[\s*\])?", decl)
    if match is None or "&" in match.group(2):
        raise LaunchError(f"kernel {kernel!r} parameter {index} ({text.strip()!r}): cannot parse this declaration")
    base, stars, pname, array = match.group(1), match.group(2).replace(" ", ""), match.group(3), match.group(4)
    if stars or array:
        return Param(pname, f"{base}*", "pointer", 8)
    base = re.sub(r"\s+int$", "", base) if base not in ("int", "unsigned int") else base
    base = {"unsigned int": "unsigned", "signed int": "int"}.get(base, base)
    if base not in _SCALARS:
        raise LaunchError(
            f"kernel {kernel!r} parameter {index} {pname!r} has type {base!r}, which launch() cannot pass; "
            "use a pointer or one of: " + ", ".join(sorted(_SCALARS))
        )
    kind, size = _SCALARS[base]
    return Param(pname, base, kind, size)


# --- argument marshalling ---------------------------------------------------------------

# The ctypes type of each scalar kind and size.
CTYPES: dict[tuple[str, int], type[Any]] = {
    ("int", 1): ctypes.c_int8,
    ("int", 2): ctypes.c_int16,
    ("int", 4): ctypes.c_int32,
    ("int", 8): ctypes.c_int64,
    ("uint", 1): ctypes.c_uint8,
    ("uint", 2): ctypes.c_uint16,
    ("uint", 4): ctypes.c_uint32,
    ("uint", 8): ctypes.c_uint64,
    ("float", 4): ctypes.c_float,
    ("float", 8): ctypes.c_double,
    ("bool", 1): ctypes.c_bool,
}


class PackedArgs:
    """The `void*[]` cuLaunchKernel reads; keeps the argument buffers alive until launched."""

    def __init__(self, values: list[ctypes._SimpleCData]) -> None:
        self.values = values
        self.array = (ctypes.c_void_p * max(len(values), 1))(*(ctypes.addressof(v) for v in values))

    @property
    def address(self) -> int:
        return ctypes.addressof(self.array)


def pack_args(sig: KernelSignature, args: tuple[Any, ...] | list[Any], device_index: int | None) -> PackedArgs:
    """Convert Python values to the kernel's C types; `device_index` is the current CUDA device."""
    if len(args) != len(sig.params):
        names = ", ".join(f"{p.ctype} {p.name}" for p in sig.params)
        raise LaunchError(f"kernel {sig.name!r} takes {len(sig.params)} arguments ({names}), got {len(args)}")
    pairs = enumerate(zip(sig.params, args, strict=True))
    return PackedArgs([_convert(sig, i, param, value, device_index) for i, (param, value) in pairs])


def _convert(sig: KernelSignature, index: int, param: Param, value: Any, device_index: int | None) -> Any:
    import torch

    where = f"kernel {sig.name!r} parameter {index} {param.name!r} ({param.ctype})"
    if param.kind == "pointer":
        return ctypes.c_uint64(_pointer_value(where, value, device_index))
    if isinstance(value, torch.Tensor) or not isinstance(value, numbers.Real):
        raise LaunchError(f"{where} expects a Python number, got {type(value).__name__}")
    if param.kind == "float":
        return CTYPES[("float", param.size)](float(value))
    if not isinstance(value, numbers.Integral):
        raise LaunchError(f"{where} expects an integer, got {value!r}")
    return CTYPES[(param.kind, param.size)](_checked_int(where, param, int(value)))


def _checked_int(where: str, param: Param, value: int) -> int:
    bits = param.size * 8
    low, high = (0, 2**bits - 1) if param.kind in ("uint", "bool") else (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1)
    if not low <= value <= high:
        hint = "" if bits == 64 else "; declare it long long"
        raise LaunchError(f"{where} got {value}, outside its {bits}-bit range{hint}")
    return value


def _pointer_value(where: str, value: Any, device_index: int | None) -> int:
    import torch

    if isinstance(value, torch.Tensor):
        if not value.is_cuda or (device_index is not None and value.device.index != device_index):
            raise LaunchError(f"{where} expects a CUDA tensor on cuda:{device_index}, got one on {value.device}")
        return value.data_ptr()
    if isinstance(value, numbers.Integral) and not isinstance(value, bool) and int(value) >= 0:
        return int(value)
    raise LaunchError(f"{where} expects a CUDA tensor or an int device address, got {type(value).__name__}")


def _dims(what: str, kernel: str, dims: Any) -> tuple[int, int, int]:
    dims = (dims,) if isinstance(dims, int) else tuple(dims)
    if not 1 <= len(dims) <= 3 or not all(isinstance(d, int) and d >= 1 for d in dims):
        raise LaunchError(f"kernel {kernel!r}: {what} must be 1-3 positive ints, got {dims!r}")
    padded = (*dims, 1, 1)
    return padded[0], padded[1], padded[2]


# --- driver -----------------------------------------------------------------------------


def check_driver(result: tuple[Any, ...], what: str) -> Any:
    """Raise on a failed driver call; return its value (None, one value, or a tuple)."""
    from cuda.bindings import driver

    err, *values = result
    if err != driver.CUresult.CUDA_SUCCESS:
        _, name = driver.cuGetErrorName(err)
        _, text = driver.cuGetErrorString(err)
        decode = lambda b: b.decode() if isinstance(b, bytes) else str(b)
        raise CudaDriverError(f"{what} failed: {decode(name)} ({decode(text)})")
    if not values:
        return None
    return values[0] if len(values) == 1 else tuple(values)


# The primary context of each device, retained once for the life of the process.
_CONTEXTS: dict[int, Any] = {}


def ensure_context(device_index: int) -> None:
    """Make torch's primary context of the device current on this thread.

    torch works in each device's primary context; retaining it through the driver (once,
    never released) and making it current means cuModuleLoadData and cuLaunchKernel act in
    the context of torch's tensors and streams, even on a thread where torch made no call.
    """
    from cuda.bindings import driver

    if device_index not in _CONTEXTS:
        check_driver(driver.cuInit(0), "cuInit")
        device = check_driver(driver.cuDeviceGet(device_index), "cuDeviceGet")
        _CONTEXTS[device_index] = check_driver(driver.cuDevicePrimaryCtxRetain(device), "cuDevicePrimaryCtxRetain")
    context = _CONTEXTS[device_index]
    if int(check_driver(driver.cuCtxGetCurrent(), "cuCtxGetCurrent")) != int(context):
        check_driver(driver.cuCtxSetCurrent(context), "cuCtxSetCurrent")


# One loaded module per (cubin content, device) for the life of the process: loading the
# same cubin twice would waste device memory, and a module stays valid with its context.
_LOADED: dict[tuple[str, int], Any] = {}


def _load_module(cubin: bytes, device_index: int) -> Any:
    from cuda.bindings import driver

    key = (hashlib.sha256(cubin).hexdigest(), device_index)
    if key not in _LOADED:
        ensure_context(device_index)
        _LOADED[key] = check_driver(driver.cuModuleLoadData(cubin), "cuModuleLoadData")
    return _LOADED[key]


class CudaModule:
    """A loaded cubin plus the C signatures of its kernels."""

    def __init__(self, source: str, cubin: bytes, device_index: int) -> None:
        self.device_index = device_index
        self.kernels = parse_kernels(source)
        self._module = _load_module(cubin, device_index)
        self._functions: dict[str, tuple[Any, KernelSignature]] = {}
        self._shared_limit: dict[str, int] = {}

    def _function(self, name: str) -> tuple[Any, KernelSignature]:
        from cuda.bindings import driver

        if name not in self._functions:
            if name not in self.kernels:
                found = ", ".join(sorted(self.kernels)) or "none"
                raise LaunchError(
                    f'kernel {name!r} is not an extern "C" __global__ kernel of CUDA_SRC (found: {found})'
                )
            sig = parse_signature(name, self.kernels[name])
            func = check_driver(driver.cuModuleGetFunction(self._module, name.encode()), f"cuModuleGetFunction({name})")
            self._functions[name] = (func, sig)
        return self._functions[name]

    def _allow_shared(self, name: str, func: Any, shared_mem: int) -> None:
        """Opt the kernel in to more than 48 KB of dynamic shared memory when asked for."""
        from cuda.bindings import driver

        if shared_mem <= MAX_STATIC_SHARED or shared_mem <= self._shared_limit.get(name, 0):
            return
        attr = driver.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
        check_driver(
            driver.cuFuncSetAttribute(func, attr, shared_mem), f"{name}: setting {shared_mem} B of shared memory"
        )
        self._shared_limit[name] = shared_mem

    def launch(self, name: str, grid: Any, block: Any, args: tuple[Any, ...] | list[Any], shared_mem: int = 0) -> None:
        """Launch kernel `name` on torch's current stream (asynchronous, like any CUDA launch)."""
        import torch
        from cuda.bindings import driver

        func, sig = self._function(name)
        g, b = _dims("grid", name, grid), _dims("block", name, block)
        if not isinstance(shared_mem, int) or shared_mem < 0:
            raise LaunchError(f"kernel {name!r}: shared_mem must be a non-negative int of bytes, got {shared_mem!r}")
        packed = pack_args(sig, args, self.device_index)
        ensure_context(self.device_index)
        self._allow_shared(name, func, shared_mem)
        stream = driver.CUstream(torch.cuda.current_stream(self.device_index).cuda_stream)
        check_driver(
            driver.cuLaunchKernel(func, *g, *b, shared_mem, stream, packed.address, 0),
            f"cuLaunchKernel({name}, grid={g}, block={b}, shared_mem={shared_mem})",
        )


def load_cuda(source: str) -> CudaModule:
    """Build `source` for the current GPU (cached by content) and load it into torch's context."""
    import torch

    settings = JUDGE_BUILD.get() or BuildSettings.resolve()
    result = build_cubin(source, settings.for_arch(gpu_arch()))
    if not result.ok:
        raise CudaBuildError(result)
    if result.cubin_path is None:
        raise RuntimeError(f"build {result.key[:12]} succeeded without a cubin path")
    return CudaModule(source, Path(result.cubin_path).read_bytes(), torch.cuda.current_device())
