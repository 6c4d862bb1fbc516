"""The CPU backend: NumPy buffers for memory, the system C++ compiler for modules, ctypes to load them,
and the runtime library's thread pool to run launches (the runtime is built once and cached)."""

from __future__ import annotations

import ctypes
import os
import platform
import threading
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np

from . import build, config
from .backend import LAUNCH_T, Backend, BuildOptions, ErrorRecord, FaultSlot, Launcher, Program
from .errors import KernelRuntimeError

_PARALLEL_ZERO = 1 << 20  # bytes from which zero() uses the thread pool
_ALIGN = 64  # bytes


def cpu_count() -> int:
    """Cores this process may use."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def runtime_loaded() -> bool:
    """Whether the runtime is already loaded in this process."""
    return cpu_runtime.cache_info().currsize > 0


@cache
def cpu_runtime() -> ctypes.CDLL:
    """Build (first use only) and load the runtime; its `lw_launch` runs a kernel's range function."""
    source = (build.NATIVE_DIR / "runtime.cpp").read_text()
    lib_path = build.build_cpu(source, "runtime", config.kernel_cache_dir, debug=False, fast_math=False,
                               verbose=config.reports_builds(), what="the loomwork CPU runtime")
    lib = ctypes.CDLL(str(lib_path))
    lib.lw_launch.restype = None  # no argtypes: its one argument is a bytes object, passed as char*
    lib.lw_launch_batch.argtypes = [ctypes.POINTER(ctypes.c_char_p), ctypes.c_longlong]
    lib.lw_launch_batch.restype = None
    lib.lw_set_num_threads.argtypes = [ctypes.c_int]
    lib.lw_get_num_threads.restype = ctypes.c_int
    lib.lw_zero.argtypes = [ctypes.c_void_p, ctypes.c_longlong]
    lib.lw_zero.restype = None
    lib.lw_digest.argtypes = [ctypes.c_void_p, ctypes.c_longlong]
    lib.lw_digest.restype = ctypes.c_uint64
    lib.lw_set_num_threads(config.cpu_threads or 0)
    return lib


@cache
def utils_library() -> ctypes.CDLL:
    """The native loomwork.utils routines (built on first use), running on the runtime's thread pool."""
    rt = cpu_runtime()
    source = (build.NATIVE_DIR / "utils.cpp").read_text()
    lib_path = build.build_cpu(source, "utils", config.kernel_cache_dir, debug=False, fast_math=False,
                               verbose=config.reports_builds(), what="the loomwork.utils routines")
    lib = ctypes.CDLL(str(lib_path))
    parallel_for = ctypes.cast(rt.lw_parallel_for, ctypes.c_void_p).value
    threads = ctypes.cast(rt.lw_get_num_threads, ctypes.c_void_p).value
    lib.lw_utils_init.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
    lib.lw_utils_init(parallel_for, threads)
    p, n = ctypes.c_void_p, ctypes.c_longlong
    for name in ("lw_sum_f32", "lw_sum_f64"):
        getattr(lib, name).argtypes, getattr(lib, name).restype = [p, n], ctypes.c_double
    for name in ("lw_dot_f32", "lw_dot_f64"):
        getattr(lib, name).argtypes, getattr(lib, name).restype = [p, p, n], ctypes.c_double
    for name in ("lw_scan_f32", "lw_scan_f64", "lw_scan_i32"):
        getattr(lib, name).argtypes, getattr(lib, name).restype = [p, p, n, ctypes.c_int], None
    for name in ("lw_radix_sort_i32", "lw_radix_sort_f32"):
        getattr(lib, name).argtypes, getattr(lib, name).restype = [p, p, p, p, n], None
    return lib


@cache
def dlpack_library() -> ctypes.CDLL:
    """The native DLPack capsule reader (native/dlpack.cpp, built on first use), given the Python C API
    functions it calls."""
    source = (build.NATIVE_DIR / "dlpack.cpp").read_text()
    path = build.build_cpu(source, "dlpack", config.kernel_cache_dir, debug=False, fast_math=False,
                           verbose=config.reports_builds(), what="the loomwork DLPack reader")
    lib = ctypes.CDLL(str(path))
    lib.lw_dlpack_init.argtypes = [ctypes.c_void_p] * 4
    lib.lw_dlpack_init(*(ctypes.cast(getattr(ctypes.pythonapi, f), ctypes.c_void_p).value
                         for f in ("PyCapsule_GetName", "PyCapsule_GetPointer", "PyCapsule_SetName", "PyErr_Clear")))
    return lib


def _try_load_runtime() -> None:
    try:
        cpu_runtime()
    except Exception:  # noqa: BLE001 - reported by the cpu_runtime() call in CpuBackend.load
        pass


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "CPU"


def _launcher(fn: int, launch: Any, serial_threshold: int | None = None, lanes: int = 0,
              block_error: Any = None, name: str = "") -> Launcher:
    """The runtime's call record (range function, size, serial threshold, pool size: config.cpu_launch, the
    threshold replaced by the module's own when it has one and deterministic mode is off), then
    `lw::launch_t`. The pool size travels with every launch, so a new wp.config.cpu_threads resizes the pool at
    the next one. With `lanes`, the range counts blocks of that many threads (the last one partial), and
    after each launch `block_error` (the module's lw_block_error) tells whether a block failed."""

    def header(size: int, dims: tuple[int, ...], fault: int = 0, zero_grads: int = 0, block_dim: int = 0,
               max_blocks: int = 0) -> tuple:
        serial, threads = config.cpu_launch
        if serial_threshold is not None and not config.deterministic:
            serial = serial_threshold
        n = -(-size // lanes) if lanes else size
        if len(dims) == 1:
            return (fn, n, serial, threads, size, 1, size, 1, 1, 1, zero_grads, fault)
        return (fn, n, serial, threads, size, len(dims), *dims, *(1,) * (4 - len(dims)), zero_grads, fault)

    if not lanes:
        return Launcher(header, launch)

    def run_blocks(blob: bytes) -> None:
        launch(blob)
        message = block_error()
        if message:
            raise KernelRuntimeError(f"kernel {name}: {message.decode()}")

    return Launcher(header, run_blocks)


class CpuProgram(Program):
    """A module's shared library, loaded with ctypes; kernels run on the runtime's thread pool."""

    def __init__(self, path: Path, launch: Any) -> None:
        self.lib = ctypes.CDLL(str(path))
        self._launch = launch

    def kernel(self, name: str, serial_threshold: int | None = None, lanes: int = 0) -> Launcher:
        entry = ctypes.cast(getattr(self.lib, f"{name}_cpu"), ctypes.c_void_p).value
        if not lanes:
            return _launcher(entry, self._launch, serial_threshold)
        block_error = self.lib.lw_block_error
        block_error.restype = ctypes.c_char_p
        return _launcher(entry, self._launch, serial_threshold, lanes, block_error, name)


class HostFaultSlot(FaultSlot):
    """A fault slot in host memory: launches on the CPU have finished when `launch` returns."""

    def __init__(self) -> None:
        self.record = ErrorRecord()
        self.address = ctypes.addressof(self.record)

    def take(self) -> ErrorRecord | None:
        r = self.record
        if not r.code:
            return None
        fault = ErrorRecord.from_buffer_copy(r)
        r.code = 0
        return fault


class CpuBackend(Backend):
    """The CPU: host memory, so `array.numpy()` is a zero-copy view; launches finish before they return."""

    name = "cpu"
    host_accessible = True
    memory_kind = 1  # MemoryKind.HOST
    launch_format = "Qqqq" + LAUNCH_T
    # the lanes' context switch and memory mappings (native/lanes.h) are written for x86-64 Linux
    cpu_blocks = platform.machine().lower() in ("x86_64", "amd64") and platform.system() == "Linux"
    dlpack_device_type = 1  # kDLCPU

    def device_name(self) -> str:
        return _cpu_name()

    def allocate(self, nbytes: int, *, zero: bool) -> tuple[int, Any]:
        """Memory aligned to 64 bytes (a cache line, and what JAX needs to view it without a copy)."""
        buf = (np.zeros if zero else np.empty)(nbytes + _ALIGN - 1, dtype=np.uint8)
        return buf.ctypes.data + (-buf.ctypes.data) % _ALIGN, buf

    def copy(self, dst: int, src: int, nbytes: int) -> None:
        ctypes.memmove(dst, src, nbytes)

    def zero(self, ptr: int, nbytes: int) -> None:
        if nbytes >= _PARALLEL_ZERO:
            cpu_runtime().lw_zero(ptr, nbytes)
        else:
            ctypes.memset(ptr, 0, nbytes)

    def compile(self, source: str, name: str, options: BuildOptions, what: str) -> Path:
        # the first module of a process also needs the runtime: build both at once (compilers run as
        # subprocesses, so the two builds overlap)
        runtime_thread = None
        if not runtime_loaded():
            runtime_thread = threading.Thread(target=_try_load_runtime)
            runtime_thread.start()
        try:
            return build.build_cpu(source, name, options.cache_dir, options.debug, options.fast_math,
                                   options.verbose, what, opt_level=options.opt_level, extra_flags=options.cpu_flags,
                                   reuse=options.reuse)
        finally:  # also when this build fails: a runtime build cut off at exit would leave its compiler behind
            if runtime_thread is not None:
                runtime_thread.join()

    def batch(self, launches: list[tuple[Any, bytes]]) -> Any:
        """Launches of compiled modules (all through the runtime's `lw_launch`) run in one native call."""
        rt = cpu_runtime()
        if any(fn is not rt.lw_launch for fn, _ in launches):  # e.g. debug-mode launches that check faults
            return super().batch(launches)
        blobs = [blob for _, blob in launches]
        table = (ctypes.c_char_p * len(blobs))(*blobs)
        run, n = rt.lw_launch_batch, len(blobs)
        return lambda: run(table, n)

    def load(self, artifact: Path) -> CpuProgram:
        return CpuProgram(artifact, cpu_runtime().lw_launch)  # cpu_runtime() raises here if its build failed

    def synchronize(self) -> None:
        """CPU launches complete before `launch` returns: nothing is outstanding."""

    _slots = threading.local()  # each Python thread's HostFaultSlot

    def fault_slot(self) -> HostFaultSlot:
        slot = getattr(self._slots, "slot", None)
        if slot is None:
            slot = self._slots.slot = HostFaultSlot()
        return slot

    def digest(self, ptr: int, nbytes: int) -> int:
        return cpu_runtime().lw_digest(ptr, nbytes)
