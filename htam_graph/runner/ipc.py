"""Device memory shared from a candidate's process to the referee, through CUDA IPC.

Only one direction exists: the candidate's process exports its own allocations (the input
buffers the referee fills, its weights, its outputs) and the referee maps them. The
referee never exports its memory, so nothing the candidate's process holds leads to the
reference's outputs or inputs. No host copy is made: a 7 GB output is compared in place.

A reply names memory the referee could not have allocated itself, so every mapping is
checked against the allocation's real size, and a tensor that does not fit its
allocation, or a handle that does not open, is a protocol violation (the honest harness
never sends one).
"""

from __future__ import annotations

import ctypes
import logging
import math
from typing import Any

import torch
from cuda.bindings import driver

from htam_graph.runner.native import CudaDriverError, check_driver, ensure_context
from htam_graph.runner.protocol import DtypeName, RemoteTensor

logger = logging.getLogger(__name__)

_HANDLE_BYTES = 64  # sizeof(CUipcMemHandle)


class ProtocolViolation(Exception):
    """The candidate's process sent something the judge's own harness never sends."""


def dtype_name(dtype: torch.dtype) -> DtypeName:
    name = str(dtype).removeprefix("torch.")
    if name not in DtypeName.__args__:  # type: ignore[attr-defined]
        raise ValueError(f"dtype {name} cannot cross the process boundary")
    return name  # type: ignore[return-value]


def export(tensor: torch.Tensor) -> RemoteTensor:
    """Name a CUDA tensor of this process for the referee (the allocation stays ours)."""
    shape, stride = list(tensor.shape), list(tensor.stride())
    if tensor.numel() == 0:
        return RemoteTensor(handle=None, base=0, offset=0, shape=shape, stride=stride, dtype=dtype_name(tensor.dtype))
    pointer = tensor.data_ptr()
    base, _size = check_driver(driver.cuMemGetAddressRange(pointer), "cuMemGetAddressRange")
    handle = check_driver(driver.cuIpcGetMemHandle(base), "cuIpcGetMemHandle")
    return RemoteTensor(
        handle=ctypes.string_at(handle.getPtr(), _HANDLE_BYTES).hex(),
        base=int(base),
        offset=pointer - int(base),
        shape=shape,
        stride=stride,
        dtype=dtype_name(tensor.dtype),
    )


class _DeviceBytes:
    """Raw device memory in the form torch.as_tensor takes without a copy."""

    def __init__(self, pointer: int, nbytes: int) -> None:
        self.__cuda_array_interface__: dict[str, Any] = {
            "shape": (nbytes,),
            "typestr": "|u1",
            "data": (pointer, False),
            "version": 3,
            "strides": None,
            "stream": None,  # the candidate's process synchronized before it replied
        }


class RemoteMemory:
    """The candidate allocations the referee has mapped, for one candidate process."""

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self._opened: dict[str, tuple[int, int]] = {}  # handle -> (pointer here, allocation bytes)
        self._views: dict[str, int] = {}  # handle -> views handed out and not released

    def tensor(self, remote: RemoteTensor) -> torch.Tensor:
        """A view of the candidate's tensor (valid until close())."""
        dtype: torch.dtype = getattr(torch, remote.dtype)
        if len(remote.shape) != len(remote.stride):
            raise ProtocolViolation(f"a tensor of {len(remote.shape)} dims with {len(remote.stride)} strides")
        if math.prod(remote.shape) == 0:
            return torch.empty(remote.shape, dtype=dtype, device=self.device)
        if remote.handle is None:
            raise ProtocolViolation("a tensor with elements but no memory handle")
        pointer, size = self._open(remote.handle)
        self._views[remote.handle] = self._views.get(remote.handle, 0) + 1
        itemsize = dtype.itemsize
        span = (sum((n - 1) * s for n, s in zip(remote.shape, remote.stride, strict=True)) + 1) * itemsize
        if remote.offset % itemsize or remote.offset + span > size:
            raise ProtocolViolation(
                f"a {remote.dtype} tensor of shape {remote.shape} at byte {remote.offset} "
                f"does not fit its {size}-byte allocation"
            )
        flat = torch.as_tensor(_DeviceBytes(pointer + remote.offset, span), device=self.device)
        return flat.view(dtype).as_strided(remote.shape, remote.stride)

    def _open(self, handle: str) -> tuple[int, int]:
        if handle not in self._opened:
            ensure_context(self.device.index or 0)
            raw = driver.CUipcMemHandle()
            ctypes.memmove(raw.getPtr(), bytes.fromhex(handle), _HANDLE_BYTES)
            flags = driver.CUipcMem_flags.CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS
            try:
                pointer = check_driver(driver.cuIpcOpenMemHandle(raw, flags), "cuIpcOpenMemHandle")
            except CudaDriverError as exc:
                raise ProtocolViolation(f"a memory handle that does not open: {exc}") from exc
            _base, size = check_driver(driver.cuMemGetAddressRange(pointer), "cuMemGetAddressRange")
            self._opened[handle] = (int(pointer), int(size))
        return self._opened[handle]

    def release(self, remotes: list[RemoteTensor]) -> None:
        """The views of these tensors are no longer used: unmap allocations nothing else here
        views. Without this, memory the candidate's process freed would stay allocated for as
        long as the referee maps it (14 outputs of 7 GB in one evaluation)."""
        done = []
        for remote in remotes:
            if remote.handle is not None and remote.handle in self._views:
                self._views[remote.handle] -= 1
                if self._views[remote.handle] <= 0:
                    done.append(remote.handle)
        if done:
            torch.cuda.synchronize(self.device)
            for handle in done:
                del self._views[handle]
                self._close(self._opened.pop(handle)[0])

    def _close(self, pointer: int) -> None:
        try:
            check_driver(driver.cuIpcCloseMemHandle(pointer), "cuIpcCloseMemHandle")
        except CudaDriverError:
            # The mapping dies with the candidate's context anyway; keep closing the rest.
            logger.warning("could not unmap a candidate allocation at %#x", pointer, exc_info=True)

    def close(self) -> None:
        """Unmap everything (after the device finished every use of the views)."""
        if not self._opened:
            return
        torch.cuda.synchronize(self.device)
        for pointer, _size in self._opened.values():
            self._close(pointer)
        self._opened.clear()
        self._views.clear()
