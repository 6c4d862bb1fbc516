"""Devices: where arrays live and kernels run ("cpu", "cuda:N")."""

from __future__ import annotations

import os
from typing import Any

from .errors import DeviceError


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

    @property
    def name(self) -> str:
        if self.is_cpu:
            return _cpu_name()
        return self.alias

    @property
    def arch(self) -> int:
        return 0

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


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    import platform

    return platform.processor() or "CPU"


_CPU = Device("cpu")
_current: Device = _CPU


def get_device(ident: Any = None) -> Device:
    """The device named by `ident` ("cpu", "cuda", "cuda:N", a Device), or the current device."""
    if ident is None:
        return _current
    if isinstance(ident, Device):
        return ident
    if isinstance(ident, str):
        if ident == "cpu":
            return _CPU
        if ident == "cuda" or ident.startswith("cuda:"):
            raise DeviceError(
                f"device {ident!r} is not available: no CUDA device was found on this machine "
                "(loomwork runs kernels on 'cpu' here)"
            )
    raise DeviceError(f"unknown device {ident!r}; expected 'cpu', 'cuda' or 'cuda:N'")


def set_device(ident: Any) -> None:
    """Make `ident` the device used when a call names none."""
    global _current
    _current = get_device(ident)


def get_devices() -> list[Device]:
    """Every device this process can use."""
    return [_CPU]


def get_cuda_device_count() -> int:
    """Number of CUDA devices visible to this process."""
    return 0


def is_cuda_available() -> bool:
    """Whether a CUDA device can run kernels here."""
    return False


def is_cpu_available() -> bool:
    return True


def cpu_count() -> int:
    """Cores this process may use."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


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
