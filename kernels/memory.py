"""Allocation tracking with Warp's names (`ScopedMemoryTracker`, `print_memory_report`), and the allocator
objects of Warp's custom-allocator API (`Allocator`, `MemoryKind`, a device's built-in `default_allocator`).

While a tracker is on (inside `with wp.ScopedMemoryTracker(...)`, or for the whole process after
`wp.config.track_memory = True` and `wp.init()`), every array allocation is remembered with its size,
device, the tracker scope it was made in ("root/step") and the line of the program that made it, until its
memory is freed. Off, it costs an allocation one attribute test.
"""

from __future__ import annotations

import enum
import itertools
import sys
import threading
import weakref
from pathlib import Path
from typing import IO, Any, Protocol, runtime_checkable

_ROOT = Path(__file__).resolve().parent.parent
_LIBRARY = tuple(str(_ROOT / d) for d in ("kernels", "autodiff", "geometry", "sim", "loomwork"))


class Allocation:
    __slots__ = ("nbytes", "device", "scope", "site", "serial")

    def __init__(self, nbytes: int, device: Any, scope: str, site: str, serial: int) -> None:
        self.nbytes, self.device, self.scope, self.site, self.serial = nbytes, device, scope, site, serial


class Tracker:
    """The live tracked allocations of this process, and each thread's stack of tracker scopes."""

    def __init__(self) -> None:
        self.enabled = 0  # trackers on: a count, so nested ones and config.track_memory combine
        self.live: dict[int, Allocation] = {}
        self.current = 0  # bytes live
        self.peak = 0
        self._serial = itertools.count()
        self._local = threading.local()
        self._lock = threading.Lock()

    def scopes(self) -> list[str]:
        s = getattr(self._local, "scopes", None)
        if s is None:
            s = self._local.scopes = []
        return s

    def allocated(self, owner: Any, nbytes: int, device: Any) -> None:
        """Remember an allocation of `nbytes` on `device` whose memory lives as long as `owner`."""
        a = Allocation(nbytes, device, "/".join(self.scopes()) or "global", _call_site(), next(self._serial))
        try:
            weakref.finalize(owner, self._freed, a.serial)
        except TypeError:  # an owner that cannot be watched: its release would go unseen
            return
        with self._lock:
            self.live[a.serial] = a
            self.current += nbytes
            self.peak = max(self.peak, self.current)

    def _freed(self, serial: int) -> None:
        with self._lock:
            a = self.live.pop(serial, None)
            if a is not None:
                self.current -= a.nbytes

    def reset(self) -> None:
        """Forget every allocation tracked so far, and the peak."""
        with self._lock:
            self.live.clear()
            self.current = self.peak = 0

    def report(self, sort: str = "size", max_items: int = 10) -> str:
        """The tracked live allocations as text: totals per device, then the largest (or oldest) ones."""
        if sort not in ("size", "chronological"):
            raise ValueError(f"sort must be 'size' or 'chronological', got {sort!r}")
        with self._lock:
            live = list(self.live.values())
            peak = self.peak
        live.sort(key=(lambda a: -a.nbytes) if sort == "size" else (lambda a: a.serial))
        lines = [f"Memory report: {len(live)} live allocation(s), {_size(sum(a.nbytes for a in live))} "
                 f"(peak while tracked: {_size(peak)})"]
        by_device: dict[str, list[int]] = {}
        for a in live:
            d = by_device.setdefault(str(a.device), [0, 0])
            d[0] += 1
            d[1] += a.nbytes
        for dev, (count, nbytes) in by_device.items():
            lines.append(f"  {dev}: {count} allocation(s), {_size(nbytes)}")
        for a in live[:max_items]:
            lines.append(f"    {_size(a.nbytes):>10}  {str(a.device):6s}  scope {a.scope}  {a.site}")
        if len(live) > max_items:
            lines.append(f"    ... and {len(live) - max_items} more")
        return "\n".join(lines) + "\n"


tracker = Tracker()


def _size(nbytes: float) -> str:
    if nbytes < 1024:
        return f"{int(nbytes)} B"
    for unit in ("KiB", "MiB", "GiB"):
        nbytes /= 1024
        if nbytes < 1024 or unit == "GiB":
            break
    return f"{nbytes:.1f} {unit}"


def _call_site() -> str:
    """file:line (function) of the innermost caller outside loomwork's own library code."""
    f = sys._getframe(1)
    while f is not None and f.f_code.co_filename.startswith(_LIBRARY):
        f = f.f_back
    return f"{f.f_code.co_filename}:{f.f_lineno} ({f.f_code.co_name})" if f is not None else "?"


def print_memory_report(file: IO[str] | None = None, sort: str = "size", max_items: int = 10) -> None:
    """Print the tracked live allocations (largest first, or `sort="chronological"`), at most `max_items`."""
    if not tracker.enabled:
        raise RuntimeError("allocation tracking is off: set wp.config.track_memory = True before wp.init(), or "
                           "use wp.ScopedMemoryTracker")
    print(tracker.report(sort, max_items), file=file or sys.stdout, end="")


class ScopedMemoryTracker:
    """`with wp.ScopedMemoryTracker("step"):` tracks the allocations made inside (each listed with its scope,
    "outer/inner" for nested trackers) and at the end prints the report of every tracked allocation still
    live (`report_func` takes the text instead)."""

    def __init__(self, name: str = "root", active: bool = True, print: bool = True,  # noqa: A002 - Warp's name
                 report_func: Any = None) -> None:
        self.name, self.active, self.print, self.report_func = name, active, print, report_func

    def __enter__(self) -> ScopedMemoryTracker:
        if self.active:
            tracker.scopes().append(self.name)
            with tracker._lock:
                tracker.enabled += 1
        return self

    def __exit__(self, *exc: Any) -> None:
        if not self.active:
            return
        tracker.scopes().pop()
        try:
            if self.print:
                self.report()
        finally:
            with tracker._lock:
                tracker.enabled -= 1

    def report(self, file: IO[str] | None = None, sort: str = "size", max_items: int = 10) -> None:
        """Print the report of the tracked live allocations now (to `report_func` when given)."""
        text = tracker.report(sort, max_items)
        if self.report_func is not None:
            self.report_func(text)
        else:
            print(text, file=file or sys.stdout, end="")

    def clear(self) -> None:
        """Forget the allocations tracked so far: later reports show only newer ones."""
        tracker.reset()


# ---- allocators ----

class MemoryKind(enum.IntEnum):
    """The kind of memory an allocator hands out (Warp's values)."""

    UNKNOWN = 0
    HOST = 1
    PINNED = 2
    CUDA_DEVICE = 3
    CUDA_MEMPOOL = 4
    CUDA_MANAGED = 5


@runtime_checkable
class Allocator(Protocol):
    """What `wp.set_device_allocator` takes: any object with these two methods (e.g. a wrapper of RMM or of a
    device's `default_allocator`)."""

    def allocate(self, size_in_bytes: int) -> int:
        """Memory of at least `size_in_bytes` on the device: its address."""
        ...

    def deallocate(self, ptr: int, size_in_bytes: int) -> None:
        """Give back memory `allocate` returned (with the size asked for then)."""
        ...


def check_allocator(allocator: Any) -> None:
    """Raise a TypeError unless `allocator` is None or has callable `allocate` and `deallocate`."""
    if allocator is not None and not (callable(getattr(allocator, "allocate", None))
                                      and callable(getattr(allocator, "deallocate", None))):
        raise TypeError(f"allocator must implement the Allocator protocol (allocate(size_in_bytes) -> int, "
                        f"deallocate(ptr, size_in_bytes) -> None), got {type(allocator)!r}")


class BuiltinAllocator:
    """A device's own allocator as an `Allocator` object (`device.default_allocator`), to call directly or to
    wrap in a custom one. Memory it hands out stays alive until `deallocate`."""

    def __init__(self, device: Any) -> None:
        self.device = device
        self._live: dict[int, Any] = {}  # address -> what keeps that memory alive
        self._lock = threading.Lock()

    @property
    def memory_kind(self) -> MemoryKind:
        return MemoryKind(self.device.backend.memory_kind)

    def allocate(self, size_in_bytes: int) -> int:
        ptr, owner = self.device.backend.allocate(max(int(size_in_bytes), 1), zero=False)
        with self._lock:
            self._live[ptr] = owner
        return ptr

    def deallocate(self, ptr: int, size_in_bytes: int) -> None:
        with self._lock:
            if self._live.pop(int(ptr), None) is None:
                raise ValueError(f"{self.device}'s default allocator: address {int(ptr):#x} was not allocated by it "
                                 "(or was already given back)")

    def __repr__(self) -> str:
        return f"<default allocator of {self.device}>"


class CustomBlock:
    """Memory from a custom allocator, given back when this (the arrays' owner) is garbage."""

    def __init__(self, allocator: Any, ptr: int, nbytes: int) -> None:
        self.allocator, self.ptr, self.nbytes = allocator, ptr, nbytes

    def __del__(self) -> None:
        try:
            self.allocator.deallocate(self.ptr, self.nbytes)
        except Exception as e:  # noqa: BLE001 - a finalizer must not raise; say what went wrong instead
            print(f"loomwork: the custom allocator failed to deallocate {self.nbytes} bytes at {self.ptr:#x}: {e!r}",
                  file=sys.stderr)
