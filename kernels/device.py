"""Devices: where arrays live and kernels run ("cpu", "cuda:N"), each served by the backend of its kind."""

from __future__ import annotations

from collections.abc import Callable
from functools import cached_property
from typing import Any

from . import cuda
from .backend import Backend
from .cpu import CpuBackend
from .errors import DeviceError
from .memory import BuiltinAllocator, CustomBlock


class Device:
    """A compute device. Compare with `==` or by `str(device)` ("cpu", "cuda:0")."""

    def __init__(self, alias: str, ordinal: int = -1) -> None:
        self.alias = alias
        self.ordinal = ordinal

    @property
    def is_cpu(self) -> bool:
        return self.alias == "cpu"

    @property
    def is_cuda(self) -> bool:
        return self.alias.startswith("cuda")

    @cached_property
    def backend(self) -> Backend:
        """The object that allocates, compiles, loads and launches for this device (made on first use)."""
        kind = _kinds.get(self.alias.partition(":")[0])
        if kind is None:
            raise DeviceError(f"device {self.alias!r} has no backend")
        return kind[0](self.ordinal)

    @property
    def name(self) -> str:
        return self.backend.device_name()

    _custom_allocator: Any = None  # set by wp.set_device_allocator / ScopedAllocator

    @cached_property
    def default_allocator(self) -> BuiltinAllocator:
        """This device's built-in allocator as an object with `allocate(size) -> address` and
        `deallocate(address, size)` (to wrap in a custom allocator)."""
        return BuiltinAllocator(self)

    def get_allocator(self, pinned: bool = False) -> Any:
        """The allocator arrays on this device get their memory from: the custom one if set
        (`wp.set_device_allocator`), else the built-in one. `pinned` is Warp's (CPU memory is all the same
        here)."""
        return self._custom_allocator if self._custom_allocator is not None else self.default_allocator

    def allocate(self, nbytes: int, *, zero: bool) -> tuple[int, Any]:
        """Memory for an array: (address, the object keeping it alive), from the custom allocator if one is set."""
        custom = self._custom_allocator
        if custom is None:
            return self.backend.allocate(nbytes, zero=zero)
        ptr = custom.allocate(nbytes)
        if not isinstance(ptr, int) or ptr <= 0:
            raise DeviceError(f"the custom allocator of {self} returned {ptr!r} for {nbytes} bytes, not an address")
        owner = CustomBlock(custom, ptr, nbytes)
        if zero:
            self.backend.zero(ptr, nbytes)
        return ptr, owner

    @property
    def is_capturing(self) -> bool:
        """Whether this device's current stream is recording a graph (host reads of arrays are refused)."""
        return capture_probe(self) if capture_probe is not None else False

    @property
    def arch(self) -> int:
        """Compute capability x 10 of a CUDA device (90 for sm_90); 0 for the CPU."""
        return getattr(self.backend, "arch", 0)

    @property
    def sm_count(self) -> int:
        """Streaming multiprocessors of a CUDA device; 0 for the CPU."""
        return getattr(self.backend, "sm_count", 0)

    @property
    def is_uva(self) -> bool:
        """Whether the device shares one virtual address space with the host (every CUDA device here)."""
        return getattr(self.backend, "is_uva", False)

    @property
    def is_mempool_supported(self) -> bool:
        return getattr(self.backend, "is_mempool_supported", False)

    @property
    def total_memory(self) -> int:
        """Bytes of device memory (0 for the CPU, as Warp)."""
        info = getattr(self.backend, "memory_info", None)
        return info()[1] if info is not None else 0

    @property
    def free_memory(self) -> int:
        """Bytes of device memory free now (0 for the CPU, as Warp)."""
        info = getattr(self.backend, "memory_info", None)
        return info()[0] if info is not None else 0

    @property
    def context(self) -> int | None:
        """The CUDA context handle this device runs in (None for the CPU)."""
        return getattr(self.backend, "ctx", None)

    def __str__(self) -> str:
        return self.alias

    def __repr__(self) -> str:
        return f'Device("{self.alias}")'

    def __eq__(self, other: object) -> bool:
        if isinstance(other, str):
            try:
                other = get_device(other)
            except DeviceError:
                return False
        return isinstance(other, Device) and other.alias == self.alias

    def __hash__(self) -> int:
        return hash(self.alias)


#: the backend kinds: a device alias's prefix -> (the factory of a device's backend, given its ordinal;
#: how many such devices this machine has). Other kinds add themselves with `register_backend`.
_kinds: dict[str, tuple[Callable[[int], Backend], Callable[[], int]]] = {
    "cpu": (lambda ordinal: CpuBackend(), lambda: 1),
    "cuda": (cuda.CudaBackend, cuda.device_count),
}


capture_probe: Callable[[Device], bool] | None = None
"""Set by the stream module (above this one): whether a device's current stream is capturing."""


def register_backend(kind: str, factory: Callable[[int], Backend], count: Callable[[], int]) -> None:
    """Make devices "`kind`:N" (N < `count()`; "`kind`" is "`kind`:0") available, `factory(N)` making
    the backend of each on its first use."""
    _kinds[kind] = (factory, count)


_CPU = Device("cpu")
_devices: dict[str, Device] = {"cpu": _CPU}  # one Device object per alias
_current: Device = _CPU


def get_device(ident: Any = None) -> Device:
    """The device named by `ident` ("cpu", "cuda", "cuda:N", a Device), or the current device."""
    if ident is None:
        return _current
    if isinstance(ident, Device):
        return ident
    if isinstance(ident, str):
        device = _devices.get(ident)
        if device is not None:
            return device
        kind, colon, number = ident.partition(":")
        if kind == "cuda" and not _device_count(kind):
            raise DeviceError(f"device {ident!r} is not available: no CUDA device was found on this machine "
                              "(loomwork runs kernels on 'cpu' here)")
        if kind != "cpu" and kind in _kinds and (not colon or number.isdigit()):
            ordinal = int(number or 0)
            if ordinal >= _device_count(kind):
                raise DeviceError(f"device {ident!r} is not available: this machine has {_device_count(kind)} "
                                  f"{kind} device(s)")
            device = _devices.setdefault(f"{kind}:{ordinal}", Device(f"{kind}:{ordinal}", ordinal))
            _devices[ident] = device
            return device
    raise DeviceError(f"unknown device {ident!r}; expected 'cpu', 'cuda' or 'cuda:N'")


def _device_count(kind: str) -> int:
    entry = _kinds.get(kind)
    return entry[1]() if entry is not None else 0


def set_device(ident: Any) -> None:
    """Make `ident` the device used when a call names none."""
    global _current
    _current = get_device(ident)


def get_devices() -> list[Device]:
    """Every device this process can use."""
    return [_CPU] + [get_device(f"{kind}:{i}") for kind in _kinds if kind != "cpu" for i in range(_device_count(kind))]


def get_cuda_device_count() -> int:
    """Number of CUDA devices visible to this process."""
    return _device_count("cuda")


def get_cuda_devices() -> list[Device]:
    """The CUDA devices this process can use ("cuda:0", ...)."""
    return [get_device(f"cuda:{i}") for i in range(get_cuda_device_count())]


def is_cuda_available() -> bool:
    """Whether a CUDA device can run kernels here."""
    return get_cuda_device_count() > 0


def get_cuda_driver_version() -> tuple[int, int] | None:
    """(major, minor) of the installed CUDA driver (e.g. (12, 4)), or None without a driver (or cuda-python)."""
    return cuda.driver_version()


def get_cuda_toolkit_version() -> tuple[int, int] | None:
    """(major, minor) of the CUDA toolkit loomwork compiles CUDA kernels with (its NVRTC), or None without one."""
    from .build import nvrtc_version

    return nvrtc_version()


def get_cuda_supported_archs() -> list[int]:
    """The compute capabilities CUDA kernels can be compiled for (75 for sm_75, ...), ascending; [] without
    NVRTC."""
    from .build import nvrtc_archs

    return nvrtc_archs()


def is_cpu_available() -> bool:
    return True



class ScopedDevice:
    """Context manager that makes a device current inside its block."""

    def __init__(self, device: Any) -> None:
        self.device = get_device(device)

    def __enter__(self) -> Device:
        global _current
        self._saved = _current
        _current = self.device
        return self.device

    def __exit__(self, *exc: Any) -> None:
        global _current
        _current = self._saved
