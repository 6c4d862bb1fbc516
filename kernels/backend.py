"""The device-backend interface: what loomwork asks of one kind of device.

A `Backend` serves one device: it allocates, copies and zeroes memory, compiles a module's source and
loads it as a `Program`, and hands out a `Launcher` per kernel entry. Arrays, launches and utilities
ask the device's backend (`device.backend`) instead of testing which kind of device it is. The CPU
implementation is `cpu.py`, the CUDA one `cuda.py`; another kind registers itself with
`device.register_backend`.
"""

from __future__ import annotations

import ctypes
from abc import ABC, abstractmethod
from collections.abc import Callable
from pathlib import Path
from typing import Any

#: `struct` format of `lw::launch_t` (size, ndim, dims[4], zero_grads, error record address): ends every
#: launch header
LAUNCH_T = "q6iQ"


class ErrorRecord(ctypes.Structure):
    """Mirrors `lw::error_t`: the first fault a debug-mode launch met."""

    _fields_ = [("code", ctypes.c_int32), ("site", ctypes.c_int32), ("index", ctypes.c_int64),
                ("extent", ctypes.c_int64)]


class FaultSlot(ABC):
    """Where the debug-mode launches one Python thread makes on one device report their first fault.

    Its `address` (device memory) travels in each launch header (`lw::launch_t.error`), so launches
    from two threads, of the same module too, never see each other's faults."""

    address: int

    @abstractmethod
    def take(self) -> ErrorRecord | None:
        """The fault recorded by this thread's launches since the last `take` (None: none), cleared."""


class BuildOptions:
    """What a module build needs besides its source (from the module's options and `wp.config`): `opt_level`
    and `cpu_flags` are wp.config.optimization_level and cpu_compiler_flags, `reuse` is cache_kernels."""

    __slots__ = ("debug", "fast_math", "cache_dir", "verbose", "opt_level", "cpu_flags", "reuse")

    def __init__(self, debug: bool, fast_math: bool, cache_dir: str, verbose: bool, opt_level: int | None = None,
                 cpu_flags: str | None = None, reuse: bool = True) -> None:
        self.debug, self.fast_math, self.cache_dir, self.verbose = debug, fast_math, cache_dir, verbose
        self.opt_level, self.cpu_flags, self.reuse = opt_level, cpu_flags, reuse


class Launcher:
    """How to run one kernel entry, bound once when its module loads so a launch looks nothing up.

    `header(size, dims, fault=0, zero_grads=0, block_dim=0, max_blocks=0)` gives the values packed (in the
    backend's `launch_format`) ahead of the kernel's argument block for a grid of `dims` (`size` threads in
    all); `fault` is the address of a `FaultSlot` (debug builds report there; release builds ignore it);
    `zero_grads` is `lw::launch_t.zero_grads` (adjoint launches); `block_dim` and `max_blocks` are
    `wp.launch`'s (threads per block, a cap on the blocks; 0: the backend's choice), for devices that run
    blocks. `launch(blob)` runs the packed block."""

    __slots__ = ("header", "launch")

    def __init__(self, header: Callable[..., tuple], launch: Callable[[bytes], None]) -> None:
        self.header, self.launch = header, launch


class Program(ABC):
    """A module's compiled code, loaded on one device."""

    @abstractmethod
    def kernel(self, name: str, serial_threshold: int | None = None, lanes: int = 0) -> Launcher:
        """The launcher of the generated entry `name` (a kernel's C name, or it plus "_adj"). Where a device
        runs small launches on the calling thread, `serial_threshold` (a module's `cpu_serial_threshold`)
        replaces wp.config's size below which it does. `lanes` > 0: the entry runs blocks of that many
        lanes together (a CPU build for wp.config.enable_cpu_blocks), its range counting blocks."""


class Backend(ABC):
    """One device's memory, compiler, loader and launches.

    Memory is addressed by integer pointers; an allocation lives as long as the owner object
    `allocate` returns (there is no explicit free)."""

    #: the device kind this backend serves ("cpu", "cuda")
    name: str
    #: whether its memory is host memory, so NumPy views arrays in place and host data needs no copy
    host_accessible: bool
    #: `struct` format (no byte order) of a launch header; the kernel's argument block follows it
    launch_format: str
    #: the DLPack device type of its memory (kDLCPU = 1, kDLCUDA = 2); None: it is not exchanged by DLPack
    dlpack_device_type: int | None = None
    #: whether other frameworks reach its memory through `__cuda_array_interface__` (CUDA device memory)
    cuda_array_interface: bool = False
    #: the kind of memory `allocate` hands out, a `wp.MemoryKind` value (0: unknown, 1: host, 3: CUDA device,
    #: 4: a CUDA memory pool's)
    memory_kind: int = 0
    #: wp.config.enable_cpu_blocks: None where it does not apply (a GPU's blocks are its own), else whether
    #: this CPU can run a block's threads together as lanes (Module.load(device, lanes))
    cpu_blocks: bool | None = None

    def current_stream(self) -> int | None:
        """The handle of the stream this device's work is queued on now, which exchanges with other
        frameworks are ordered against (DLPack's `stream`); None where work completes in order (the CPU)."""
        return None

    def wait_stream(self, waiter: int | None, producer: int | None) -> None:
        """Make stream `waiter` wait for the work queued so far on stream `producer` (None: this device's
        current stream), so memory shared with another framework is read only once written. Devices
        whose launches complete before they return have nothing to order."""
        return None

    def batch(self, launches: list[tuple[Callable[[bytes], None], bytes]]) -> Callable[[], None]:
        """One call that runs `launches` in order: (launch function, packed block) pairs as a `Launcher`
        takes them (a captured graph's consecutive launches). A backend may run them all in one native call."""
        def run() -> None:
            for launch, blob in launches:
                launch(blob)
        return run

    @abstractmethod
    def device_name(self) -> str:
        """The hardware's name (`Device.name`), e.g. the processor model."""

    @abstractmethod
    def allocate(self, nbytes: int, *, zero: bool) -> tuple[int, Any]:
        """`nbytes` of device memory (zeroed when `zero`): its address and the object that owns it."""

    @abstractmethod
    def copy(self, dst: int, src: int, nbytes: int) -> None:
        """Copy `nbytes` between two addresses of this device's memory (the ranges may overlap)."""

    @abstractmethod
    def zero(self, ptr: int, nbytes: int) -> None:
        """Set `nbytes` at `ptr` to zero."""

    def upload(self, dst: int, host: int, nbytes: int) -> None:
        """Copy `nbytes` from host memory at `host` to this device's memory; `host` may be reused on return."""
        self.copy(dst, host, nbytes)

    def download(self, host: int, src: int, nbytes: int) -> None:
        """Copy `nbytes` of this device's memory to host memory, complete (the work queued before included)
        when this returns."""
        self.copy(host, src, nbytes)

    def fill(self, ptr: int, pattern: bytes, count: int) -> bool:
        """Write `pattern` `count` times from `ptr` where the device has a native way (False: it does not;
        the caller fills another way)."""
        return False

    @abstractmethod
    def compile(self, source: str, name: str, options: BuildOptions, what: str) -> Path:
        """Build a module's generated source (or find it in the cache); `what` names it in errors."""

    @abstractmethod
    def load(self, artifact: Path) -> Program:
        """Load what `compile` built."""

    @abstractmethod
    def synchronize(self) -> None:
        """Wait until the work queued on this device is done."""

    @abstractmethod
    def fault_slot(self) -> FaultSlot:
        """The calling Python thread's fault slot on this device (made on first use)."""

    def digest(self, ptr: int, nbytes: int) -> int | None:
        """A checksum of `nbytes` of device memory at `ptr` that changes when their content does (None:
        this backend has none). Tapes use it to see writes made through memory aliases they cannot track."""
        return None
