"""The CUDA backend: NVIDIA GPUs through the CUDA driver API.

The driver (libcuda) is called through ctypes, which costs a launch about a microsecond of Python;
modules are compiled by NVRTC (cuda-python, kernels/build.py) for the device's architecture and cached
like CPU builds. Each device runs in its primary context (shared with PyTorch, JAX and CuPy). Memory
comes from the device's stream-ordered pool where the driver has one (freed on the stream that was
current when its owner went away), else from plain allocations. Work goes to the backend's current
stream (`stream`, a driver handle set by kernels/stream.py); launches and copies are asynchronous.
"""

from __future__ import annotations

import ctypes
import struct
import threading
from functools import cache
from pathlib import Path
from typing import Any

from . import build, config
from .backend import LAUNCH_T, Backend, BuildOptions, ErrorRecord, FaultSlot, Launcher, Program
from .cpu import cpu_runtime
from .errors import DeviceError

_p = ctypes.c_void_p
_u64 = ctypes.c_uint64
_int = ctypes.c_int
_uint = ctypes.c_uint
_size = ctypes.c_size_t

# driver API enumerations (cuda.h)
_ATTR_SM_COUNT = 16
_ATTR_UNIFIED_ADDRESSING = 41
_ATTR_CC_MAJOR = 75
_ATTR_CC_MINOR = 76
_ATTR_MEMORY_POOLS = 115
_FUNC_MAX_THREADS = 0
_POOL_RELEASE_THRESHOLD = 4
_POOL_USED_MEM_CURRENT = 7
_POOL_USED_MEM_HIGH = 8
_EVENT_DISABLE_TIMING = 2
_OUT_OF_MEMORY = 2
_NOT_READY = 600
#: threads per block of a launch by default (wp.launch's; fewer where a kernel's registers allow fewer)
BLOCK_DIM = 256
_PEER_ALREADY_ENABLED = 704
_PEER_NOT_ENABLED = 705
_CAPTURE_THREAD_LOCAL = 1
_STREAM_NON_BLOCKING = 1

#: (name, argument types) of every driver entry point used; each returns a CUresult
_SIGNATURES = {
    "cuInit": [_uint],
    "cuDriverGetVersion": [ctypes.POINTER(_int)],
    "cuDeviceGetCount": [ctypes.POINTER(_int)],
    "cuDeviceGet": [ctypes.POINTER(_int), _int],
    "cuDeviceGetName": [ctypes.c_char_p, _int, _int],
    "cuDeviceGetAttribute": [ctypes.POINTER(_int), _int, _int],
    "cuDeviceTotalMem_v2": [ctypes.POINTER(_size), _int],
    "cuDeviceCanAccessPeer": [ctypes.POINTER(_int), _int, _int],
    "cuDevicePrimaryCtxRetain": [ctypes.POINTER(_p), _int],
    "cuDeviceGetDefaultMemPool": [ctypes.POINTER(_p), _int],
    "cuMemPoolSetAttribute": [_p, _int, _p],
    "cuMemPoolGetAttribute": [_p, _int, _p],
    "cuMemPoolSetAccess": [_p, _p, _size],
    "cuMemPoolGetAccess": [ctypes.POINTER(_int), _p, _p],
    "cuCtxSetCurrent": [_p],
    "cuCtxGetCurrent": [ctypes.POINTER(_p)],
    "cuStreamIsCapturing": [_p, ctypes.POINTER(_int)],
    "cuCtxSynchronize": [],
    "cuCtxEnablePeerAccess": [_p, _uint],
    "cuCtxDisablePeerAccess": [_p],
    "cuCtxGetStreamPriorityRange": [ctypes.POINTER(_int), ctypes.POINTER(_int)],
    "cuMemGetInfo_v2": [ctypes.POINTER(_size), ctypes.POINTER(_size)],
    "cuMemAlloc_v2": [ctypes.POINTER(_u64), _size],
    "cuMemFree_v2": [_u64],
    "cuMemAllocAsync": [ctypes.POINTER(_u64), _size, _p],
    "cuMemFreeAsync": [_u64, _p],
    "cuMemHostAlloc": [ctypes.POINTER(_p), _size, _uint],
    "cuMemFreeHost": [_p],
    "cuMemcpyAsync": [_u64, _u64, _size, _p],
    "cuMemcpyHtoDAsync_v2": [_u64, _p, _size, _p],
    "cuMemcpyDtoHAsync_v2": [_p, _u64, _size, _p],
    "cuMemsetD8Async": [_u64, ctypes.c_ubyte, _size, _p],
    "cuMemsetD16Async": [_u64, ctypes.c_ushort, _size, _p],
    "cuMemsetD32Async": [_u64, _uint, _size, _p],
    "cuModuleLoadData": [ctypes.POINTER(_p), ctypes.c_char_p],
    "cuModuleUnload": [_p],
    "cuModuleGetFunction": [ctypes.POINTER(_p), _p, ctypes.c_char_p],
    "cuFuncGetAttribute": [ctypes.POINTER(_int), _int, _p],
    "cuLaunchKernel": [_p, _uint, _uint, _uint, _uint, _uint, _uint, _uint, _p, _p, _p],
    "cuStreamCreateWithPriority": [ctypes.POINTER(_p), _uint, _int],
    "cuStreamDestroy_v2": [_p],
    "cuStreamSynchronize": [_p],
    "cuStreamQuery": [_p],
    "cuStreamWaitEvent": [_p, _p, _uint],
    "cuStreamGetCtx": [_p, ctypes.POINTER(_p)],
    "cuEventCreate": [ctypes.POINTER(_p), _uint],
    "cuEventDestroy_v2": [_p],
    "cuEventRecord": [_p, _p],
    "cuEventSynchronize": [_p],
    "cuEventQuery": [_p],
    "cuEventElapsedTime": [ctypes.POINTER(ctypes.c_float), _p, _p],
    "cuStreamBeginCapture_v2": [_p, _int],
    "cuStreamEndCapture": [_p, ctypes.POINTER(_p)],
    "cuGraphInstantiateWithFlags": [ctypes.POINTER(_p), _p, ctypes.c_ulonglong],
    "cuGraphLaunch": [_p, _p],
    "cuGraphExecDestroy": [_p],
    "cuGraphDestroy": [_p],
    "cuGetErrorName": [_int, ctypes.POINTER(ctypes.c_char_p)],
    "cuGetErrorString": [_int, ctypes.POINTER(ctypes.c_char_p)],
}


class _Location(ctypes.Structure):  # CUmemLocation
    _fields_ = [("type", _int), ("id", _int)]


class _AccessDesc(ctypes.Structure):  # CUmemAccessDesc
    _fields_ = [("location", _Location), ("flags", _int)]


_LOCATION_DEVICE = 1
_PROT_READWRITE = 3


class CudaError(DeviceError):
    """A CUDA driver call failed: the message names the call and the driver's error."""


@cache
def driver() -> ctypes.CDLL | None:
    """The CUDA driver library, initialized (None: no driver on this machine, or it found no usable GPU)."""
    for name in ("libcuda.so.1", "libcuda.so", "nvcuda.dll"):
        try:
            lib = ctypes.CDLL(name)
        except OSError:
            continue
        for fn, args in _SIGNATURES.items():
            f = getattr(lib, fn, None)
            if f is not None:
                f.argtypes, f.restype = args, _int
        if lib.cuInit(0) != 0:
            return None
        return lib
    return None


def device_count() -> int:
    """How many CUDA devices this process sees (0 without a driver)."""
    lib = driver()
    n = _int(0)
    if lib is None or lib.cuDeviceGetCount(ctypes.byref(n)) != 0:
        return 0
    return n.value


def driver_version() -> tuple[int, int] | None:
    """(major, minor) of the CUDA driver, or None without one."""
    lib = driver()
    v = _int(0)
    if lib is None or lib.cuDriverGetVersion(ctypes.byref(v)) != 0:
        return None
    return v.value // 1000, v.value % 1000 // 10


def error_text(err: int) -> str:
    """The driver's name and description of error code `err` ("CUDA_ERROR_OUT_OF_MEMORY: out of memory")."""
    lib = driver()
    name, desc = ctypes.c_char_p(), ctypes.c_char_p()
    if lib is None or lib.cuGetErrorName(err, ctypes.byref(name)) != 0:
        return f"CUDA error {err}"
    lib.cuGetErrorString(err, ctypes.byref(desc))
    text = f"{name.value.decode()}: {desc.value.decode() if desc.value else ''}"
    if err in (700, 702, 710, 714, 715, 716, 717, 718, 719):  # sticky faults: the context is lost
        text += (" (a kernel faulted, for example by reading or writing out of bounds; the CUDA context cannot "
                 "be used again in this process: run the kernel's module with wp.config.mode = 'debug' on the CPU "
                 "to find the access)")
    return text


def check(err: int, call: str) -> None:
    """Raise CudaError naming `call` unless `err` is CUDA_SUCCESS."""
    if err:
        raise CudaError(f"{call} failed: {error_text(err)}")


class DeviceMemory:
    """Owns one device allocation: freed (on its device's current stream, for pool memory) when this goes."""

    __slots__ = ("ptr", "nbytes", "backend", "pooled", "__weakref__")

    def __init__(self, ptr: int, nbytes: int, backend: CudaBackend, pooled: bool) -> None:
        self.ptr, self.nbytes, self.backend, self.pooled = ptr, nbytes, backend, pooled

    def __del__(self) -> None:
        try:
            self.backend.free(self.ptr, self.pooled)
        except Exception:  # noqa: BLE001 - at interpreter exit the driver may be gone: nothing to free then
            pass


class DeviceFaultSlot(FaultSlot):
    """A fault record in device memory; reading it waits for the device's work."""

    def __init__(self, backend: CudaBackend) -> None:
        self.backend = backend
        self.address, self._owner = backend.allocate(ctypes.sizeof(ErrorRecord), zero=True)

    def take(self) -> ErrorRecord | None:
        record = ErrorRecord()
        self.backend.download(ctypes.addressof(record), self.address, ctypes.sizeof(record))
        if not record.code:
            return None
        self.backend.zero(self.address, ctypes.sizeof(record))
        return record


class CudaProgram(Program):
    """A module loaded into a device's context."""

    def __init__(self, backend: CudaBackend, image: bytes) -> None:
        self.backend = backend
        backend.bind()
        self.module = _p()
        check(backend.lib.cuModuleLoadData(ctypes.byref(self.module), image), "cuModuleLoadData")

    def kernel(self, name: str, serial_threshold: int | None = None, lanes: int = 0) -> Launcher:
        b = self.backend
        lib = b.lib
        fn = _p()
        check(lib.cuModuleGetFunction(ctypes.byref(fn), self.module, f"{name}_cuda".encode()),
              f"cuModuleGetFunction({name}_cuda)")
        limit = _int(0)
        check(lib.cuFuncGetAttribute(ctypes.byref(limit), _FUNC_MAX_THREADS, fn), "cuFuncGetAttribute")
        desc = struct.pack("<QQQIIQQQ", ctypes.cast(lib.cuLaunchKernel, _p).value, fn.value,
                           ctypes.addressof(b.stream_slot), limit.value, b.sm_count, b.ctx,
                           ctypes.cast(lib.cuCtxGetCurrent, _p).value, ctypes.cast(lib.cuCtxSetCurrent, _p).value)
        native = cpu_runtime().lw_cuda_launch

        def header(size: int, dims: tuple[int, ...], fault: int = 0, zero_grads: int = 0, block_dim: int = 0,
                   max_blocks: int = 0) -> tuple:
            if block_dim == BLOCK_DIM:  # the default: the launcher picks (smaller blocks for small grids)
                block_dim = 0
            if len(dims) == 1:
                return (block_dim, max_blocks, size, 1, size, 1, 1, 1, zero_grads, fault)
            return (block_dim, max_blocks, size, len(dims), *dims, *(1,) * (4 - len(dims)), zero_grads, fault)

        def launch(blob: bytes) -> None:
            err = native(desc, blob, len(blob))
            if err:
                check(err, f"cuLaunchKernel({name})")

        launch.backend = b  # a plain launch of this device: CudaBackend.batch can record it into a CUDA graph
        launch.desc = desc  # its native launch settings (the XLA FFI handler launches it on XLA's stream)
        return Launcher(header, launch)

    def __del__(self) -> None:
        try:
            self.backend.bind()
            self.backend.lib.cuCtxSynchronize()  # launches of its kernels may still be queued
            self.backend.lib.cuModuleUnload(self.module)
        except Exception:  # noqa: BLE001 - the driver may be gone at interpreter exit
            pass


class GraphExec:
    """An instantiated CUDA graph; `launch()` runs it on its device's current stream."""

    def __init__(self, backend: CudaBackend, handle: int) -> None:
        self.backend, self.handle = backend, handle

    def launch(self) -> None:
        b = self.backend
        b.bind()
        check(b.lib.cuGraphLaunch(self.handle, b.stream), "cuGraphLaunch")

    def __del__(self) -> None:
        try:
            self.backend.bind()
            self.backend.lib.cuGraphExecDestroy(self.handle)
        except Exception:  # noqa: BLE001 - the driver may be gone at interpreter exit
            pass


class CudaBackend(Backend):
    """One CUDA device: its primary context, memory pool, current stream and modules."""

    name = "cuda"
    host_accessible = False
    launch_format = "II" + LAUNCH_T  # block size and grid cap asked for (read by lw_cuda_launch), then launch_t
    dlpack_device_type = 2  # kDLCUDA
    cuda_array_interface = True

    @property
    def memory_kind(self) -> int:  # type: ignore[override]
        return 4 if self.mempool_enabled else 3  # MemoryKind.CUDA_MEMPOOL / CUDA_DEVICE

    def __init__(self, ordinal: int) -> None:
        lib = driver()
        if lib is None:
            raise CudaError("no CUDA driver could be loaded (libcuda): CUDA devices are not available")
        self.lib, self.ordinal = lib, ordinal
        dev = _int()
        check(lib.cuDeviceGet(ctypes.byref(dev), ordinal), f"cuDeviceGet({ordinal})")
        self.handle = dev.value
        self.ctx = _p()
        check(lib.cuDevicePrimaryCtxRetain(ctypes.byref(self.ctx), self.handle), "cuDevicePrimaryCtxRetain")
        self.ctx = self.ctx.value
        self.arch = self.attribute(_ATTR_CC_MAJOR) * 10 + self.attribute(_ATTR_CC_MINOR)
        self.sm_count = self.attribute(_ATTR_SM_COUNT)
        self.is_uva = bool(self.attribute(_ATTR_UNIFIED_ADDRESSING))
        self.is_mempool_supported = bool(self.attribute(_ATTR_MEMORY_POOLS))
        self.mempool_enabled = self.is_mempool_supported
        self.pool = None
        if self.is_mempool_supported:
            pool = _p()
            check(lib.cuDeviceGetDefaultMemPool(ctypes.byref(pool), self.handle), "cuDeviceGetDefaultMemPool")
            self.pool = pool.value
            self.set_release_threshold(2**64 - 1)  # keep freed blocks for reuse instead of returning them at syncs
        self.bind()
        self.default_stream = self.create_stream(0)
        self.stream_slot = _p(self.default_stream)  # where launches read the current stream (natively too)
        self.peers: set[int] = set()
        self.pending_frees: list[tuple[int, bool]] = []  # (address, pooled) freed during another's capture
        self._slots = threading.local()

    @property
    def stream(self) -> int:
        """The driver handle of the stream work goes to now (kernels/stream.py sets it)."""
        return self.stream_slot.value

    @stream.setter
    def stream(self, handle: int) -> None:
        self.stream_slot.value = handle

    # -- device facts -------------------------------------------------------------------------------

    def attribute(self, attr: int) -> int:
        v = _int()
        check(self.lib.cuDeviceGetAttribute(ctypes.byref(v), attr, self.handle), "cuDeviceGetAttribute")
        return v.value

    def device_name(self) -> str:
        buf = ctypes.create_string_buffer(256)
        check(self.lib.cuDeviceGetName(buf, 256, self.handle), "cuDeviceGetName")
        return buf.value.decode()

    def memory_info(self) -> tuple[int, int]:
        """(free, total) bytes of device memory."""
        self.bind()
        free, total = _size(), _size()
        check(self.lib.cuMemGetInfo_v2(ctypes.byref(free), ctypes.byref(total)), "cuMemGetInfo")
        return free.value, total.value

    def bind(self) -> None:
        """Make this device's context current on the calling thread (another library may have made another
        one current since loomwork's last call, so it is asked each time)."""
        current = _p()
        if self.lib.cuCtxGetCurrent(ctypes.byref(current)) != 0 or current.value != self.ctx:
            check(self.lib.cuCtxSetCurrent(self.ctx), "cuCtxSetCurrent")

    # -- memory -------------------------------------------------------------------------------------

    def allocate(self, nbytes: int, *, zero: bool) -> tuple[int, Any]:
        self.bind()
        if self.pending_frees and not self.capturing():
            pending, self.pending_frees = self.pending_frees, []
            for p, pooled in pending:
                self.free(p, pooled)
        ptr = _u64()
        pooled = self.mempool_enabled
        err = (self.lib.cuMemAllocAsync(ctypes.byref(ptr), nbytes, self.stream) if pooled
               else self.lib.cuMemAlloc_v2(ctypes.byref(ptr), nbytes))
        if err == _OUT_OF_MEMORY:
            free, total = self.memory_info()
            raise MemoryError(f"out of memory on cuda:{self.ordinal} ({self.device_name()}): could not allocate "
                              f"{nbytes} bytes ({nbytes / 2**20:.1f} MiB); {free / 2**20:.0f} MiB of "
                              f"{total / 2**20:.0f} MiB are free")
        check(err, f"{'cuMemAllocAsync' if pooled else 'cuMemAlloc'}({nbytes} bytes)")
        if zero:
            self.zero(ptr.value, nbytes)
        return ptr.value, DeviceMemory(ptr.value, nbytes, self, pooled)

    def capturing(self) -> bool:
        """Whether the current stream is being captured into a CUDA graph (by another library)."""
        status = _int(0)
        check(self.lib.cuStreamIsCapturing(self.stream, ctypes.byref(status)), "cuStreamIsCapturing")
        return status.value != 0

    def free(self, ptr: int, pooled: bool) -> None:
        """Give an allocation back (on the current stream, for pool memory). While that stream is being
        captured a free would join the graph, so it waits for the next allocation outside a capture."""
        self.bind()
        if self.capturing():
            self.pending_frees.append((ptr, pooled))
            return
        err = self.lib.cuMemFreeAsync(ptr, self.stream) if pooled else self.lib.cuMemFree_v2(ptr)
        check(err, "cuMemFreeAsync" if pooled else "cuMemFree")

    def copy(self, dst: int, src: int, nbytes: int) -> None:
        self.bind()
        check(self.lib.cuMemcpyAsync(dst, src, nbytes, self.stream), "cuMemcpyAsync")

    def zero(self, ptr: int, nbytes: int) -> None:
        self.bind()
        check(self.lib.cuMemsetD8Async(ptr, 0, nbytes, self.stream), "cuMemsetD8Async")

    def fill(self, ptr: int, pattern: bytes, count: int) -> bool:
        """Repeat a 1-, 2- or 4-byte `pattern` `count` times from `ptr` (False: other sizes are not done here)."""
        calls = {1: ("cuMemsetD8Async", "<B"), 2: ("cuMemsetD16Async", "<H"), 4: ("cuMemsetD32Async", "<I")}
        if len(pattern) not in calls:
            return False
        name, fmt = calls[len(pattern)]
        self.bind()
        check(getattr(self.lib, name)(ptr, struct.unpack(fmt, pattern)[0], count, self.stream), name)
        return True

    def upload(self, dst: int, host: int, nbytes: int) -> None:
        """Copy from host memory; the host buffer may be reused when this returns."""
        self.bind()
        check(self.lib.cuMemcpyHtoDAsync_v2(dst, host, nbytes, self.stream), "cuMemcpyHtoDAsync")
        self.synchronize_stream(self.stream)

    def download(self, host: int, src: int, nbytes: int) -> None:
        """Copy to host memory, waiting for the work queued before (the data is there when this returns)."""
        self.bind()
        check(self.lib.cuMemcpyDtoHAsync_v2(host, src, nbytes, self.stream), "cuMemcpyDtoHAsync")
        self.synchronize_stream(self.stream)

    # -- memory pool and peers ------------------------------------------------------------------------

    def _pool_attribute(self, attr: int, value: int | None = None) -> int:
        v = _u64(value or 0)
        call = self.lib.cuMemPoolSetAttribute if value is not None else self.lib.cuMemPoolGetAttribute
        check(call(self.pool, attr, ctypes.byref(v)), call.__name__)
        return v.value

    def set_release_threshold(self, nbytes: int) -> None:
        self._pool_attribute(_POOL_RELEASE_THRESHOLD, nbytes)

    def release_threshold(self) -> int:
        return self._pool_attribute(_POOL_RELEASE_THRESHOLD)

    def pool_used(self, high: bool) -> int:
        return self._pool_attribute(_POOL_USED_MEM_HIGH if high else _POOL_USED_MEM_CURRENT)

    def can_access_peer(self, other: CudaBackend) -> bool:
        if other is self:
            return True
        v = _int()
        check(self.lib.cuDeviceCanAccessPeer(ctypes.byref(v), self.handle, other.handle), "cuDeviceCanAccessPeer")
        return bool(v.value)

    def set_peer_access(self, peer: CudaBackend, enable: bool) -> None:
        """Let `peer`'s kernels read and write this device's memory (or stop them)."""
        if peer is self:
            return
        peer.bind()
        if enable:
            err = self.lib.cuCtxEnablePeerAccess(self.ctx, 0)
            if err not in (0, _PEER_ALREADY_ENABLED):
                check(err, "cuCtxEnablePeerAccess")
            self.peers.add(peer.ordinal)
        else:
            err = self.lib.cuCtxDisablePeerAccess(self.ctx)
            if err not in (0, _PEER_NOT_ENABLED):
                check(err, "cuCtxDisablePeerAccess")
            self.peers.discard(peer.ordinal)

    def pool_access(self, peer: CudaBackend) -> bool:
        """Whether `peer` may access allocations from this device's pool."""
        if peer is self:
            return True
        flags = _int()
        where = _Location(_LOCATION_DEVICE, peer.handle)
        check(self.lib.cuMemPoolGetAccess(ctypes.byref(flags), self.pool, ctypes.byref(where)), "cuMemPoolGetAccess")
        return flags.value == _PROT_READWRITE

    def set_pool_access(self, peer: CudaBackend, enable: bool) -> None:
        if peer is self:
            return
        desc = _AccessDesc(_Location(_LOCATION_DEVICE, peer.handle), _PROT_READWRITE if enable else 0)
        check(self.lib.cuMemPoolSetAccess(self.pool, ctypes.byref(desc), 1), "cuMemPoolSetAccess")

    # -- streams and events ---------------------------------------------------------------------------

    def create_stream(self, priority: int, flags: int = 0) -> int:
        """A new stream (by default blocking with respect to the legacy default stream, which other libraries
        use)."""
        self.bind()
        least, greatest = _int(), _int()
        check(self.lib.cuCtxGetStreamPriorityRange(ctypes.byref(least), ctypes.byref(greatest)),
              "cuCtxGetStreamPriorityRange")
        h, level = _p(), greatest.value if priority < 0 else least.value
        check(self.lib.cuStreamCreateWithPriority(ctypes.byref(h), flags, level), "cuStreamCreateWithPriority")
        return h.value

    def destroy_stream(self, handle: int) -> None:
        self.bind()
        self.lib.cuStreamDestroy_v2(handle)

    def synchronize_stream(self, handle: int) -> None:
        check(self.lib.cuStreamSynchronize(handle), "cuStreamSynchronize")

    def stream_done(self, handle: int) -> bool:
        err = self.lib.cuStreamQuery(handle)
        if err == _NOT_READY:
            return False
        check(err, "cuStreamQuery")
        return True

    def create_event(self, timing: bool) -> int:
        self.bind()
        h = _p()
        check(self.lib.cuEventCreate(ctypes.byref(h), 0 if timing else _EVENT_DISABLE_TIMING), "cuEventCreate")
        return h.value

    def destroy_event(self, handle: int) -> None:
        self.bind()
        self.lib.cuEventDestroy_v2(handle)

    def record(self, event: int, stream: int) -> None:
        self.bind()
        check(self.lib.cuEventRecord(event, stream), "cuEventRecord")

    def stream_wait_event(self, stream: int, event: int) -> None:
        self.bind()
        check(self.lib.cuStreamWaitEvent(stream, event, 0), "cuStreamWaitEvent")

    def synchronize_event(self, event: int) -> None:
        check(self.lib.cuEventSynchronize(event), "cuEventSynchronize")

    def event_done(self, event: int) -> bool:
        err = self.lib.cuEventQuery(event)
        if err == _NOT_READY:
            return False
        check(err, "cuEventQuery")
        return True

    def elapsed_ms(self, start: int, end: int) -> float:
        ms = ctypes.c_float()
        check(self.lib.cuEventElapsedTime(ctypes.byref(ms), start, end), "cuEventElapsedTime")
        return ms.value

    def owns_stream(self, handle: int) -> bool:
        """Whether stream `handle` (made by any library) belongs to this device's context."""
        ctx = _p()
        check(self.lib.cuStreamGetCtx(handle, ctypes.byref(ctx)), "cuStreamGetCtx")
        return ctx.value == self.ctx

    def current_stream(self) -> int | None:
        return self.stream

    def wait_stream(self, waiter: int | None, producer: int | None) -> None:
        """Order stream `waiter` after the work queued so far on stream `producer` (either a foreign framework's
        handle; None: this device's current stream)."""
        producer = self.stream if producer is None else producer
        waiter = self.stream if waiter is None else waiter
        if waiter == producer:
            return
        event = self.create_event(False)
        try:
            self.record(event, producer)
            self.stream_wait_event(waiter, event)
        finally:
            self.destroy_event(event)

    def batch(self, launches: list[tuple[Any, bytes]]) -> Any:
        """Consecutive launches of a captured graph become one CUDA graph, replayed by one `cuGraphLaunch`
        (launches that check a debug fault slot after running replay one by one)."""
        if len(launches) < 2 or any(getattr(fn, "backend", None) is not self for fn, _ in launches):
            return super().batch(launches)
        lib, native = self.lib, cpu_runtime().lw_cuda_launch
        self.bind()
        capture = self.create_stream(0, _STREAM_NON_BLOCKING)
        slot, graph = _p(capture), _p()  # the launches read this stream, not the device's current one
        where = struct.pack("<Q", ctypes.addressof(slot))
        check(lib.cuStreamBeginCapture_v2(capture, _CAPTURE_THREAD_LOCAL), "cuStreamBeginCapture")
        failed = 0
        try:
            for fn, blob in launches:
                failed = failed or native(fn.desc[:16] + where + fn.desc[24:], blob, len(blob))
        finally:
            err = lib.cuStreamEndCapture(capture, ctypes.byref(graph))
            self.destroy_stream(capture)
        if failed or err:
            if graph.value:
                lib.cuGraphDestroy(graph)
            check(failed or err, "cuLaunchKernel (recording a CUDA graph)" if failed else "cuStreamEndCapture")
        exe = _p()
        try:
            check(lib.cuGraphInstantiateWithFlags(ctypes.byref(exe), graph, 0), "cuGraphInstantiateWithFlags")
        finally:
            lib.cuGraphDestroy(graph)
        return GraphExec(self, exe.value).launch

    # -- modules ------------------------------------------------------------------------------------

    def compile(self, source: str, name: str, options: BuildOptions, what: str) -> Path:
        archs = build.nvrtc_archs()
        if not archs:
            raise CudaError(f"cannot compile {what} for cuda:{self.ordinal}: NVRTC is not available "
                            "(pip install cuda-python nvidia-cuda-nvrtc)")
        newest = max(archs)
        ptx = config.cuda_output == "ptx" or self.arch > newest  # a device newer than NVRTC runs PTX
        arch = min(self.arch, newest)
        return build.build_cuda(source, name, options.cache_dir, arch, options.debug, options.fast_math,
                                options.verbose, what, opt_level=None, output="ptx" if ptx else None,
                                arch_suffix=config.cuda_arch_suffix, lineinfo=config.lineinfo,
                                reuse=options.reuse)

    def load(self, artifact: Path) -> CudaProgram:
        return CudaProgram(self, artifact.read_bytes())

    def synchronize(self) -> None:
        self.bind()
        check(self.lib.cuCtxSynchronize(), "cuCtxSynchronize")

    def fault_slot(self) -> DeviceFaultSlot:
        slot = getattr(self._slots, "slot", None)
        if slot is None:
            slot = self._slots.slot = DeviceFaultSlot(self)
        return slot
