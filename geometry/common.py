"""What the geometry types share: their host library (BVH builds, refits, mesh data), the table of live
handles their ids name, the error they raise for bad input, and argument checks.

A handle's id is the address of its descriptor. Descriptors live in slabs that are never given back, and
freeing one clears its tag: a kernel handed the id of a freed object reads a descriptor that says so, and
its queries find nothing instead of reading freed memory (once the slot is reused, such an id names the
new object).

Trees are built and refit on the host. For an object on a device whose memory the host cannot read (a
GPU), its `Handle` keeps device copies of what the host built and of the descriptor, with device
addresses, in slabs of that device's memory: the id is the device copy's address.
"""

from __future__ import annotations

import ctypes
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np

from loomwork.kernels import config
from loomwork.kernels import types as T
from loomwork.kernels.array import array, empty
from loomwork.kernels.build import build_cpu
from loomwork.kernels.cpu import cpu_runtime
from loomwork.kernels.errors import LoomworkError
from loomwork.kernels.extensions import export_name

NATIVE_DIR = Path(__file__).parent / "native"


class GeometryError(LoomworkError, ValueError, RuntimeError):
    """Unusable input to a geometry type (a Mesh, a Bvh): what is wrong and which argument."""


export_name("GeometryError", GeometryError)


@cache
def host_library() -> ctypes.CDLL:
    """The geometry host routines (built on first use), running on the CPU runtime's thread pool."""
    rt = cpu_runtime()
    source = (NATIVE_DIR / "bvh_build.cpp").read_text()
    path = build_cpu(source, "geometry", config.kernel_cache_dir, debug=False, fast_math=False,
                     verbose=config.reports_builds(), what="the loomwork.geometry host routines")
    lib = ctypes.CDLL(str(path))
    p, i = ctypes.c_void_p, ctypes.c_int
    lib.lw_geometry_init.argtypes = [p, p]
    lib.lw_geometry_init(ctypes.cast(rt.lw_parallel_for, p).value, ctypes.cast(rt.lw_get_num_threads, p).value)
    lib.lw_bvh_build.argtypes = [p, p, i, p, i, i, p, p, p, p, p, p, p]
    lib.lw_bvh_build.restype = i
    lib.lw_bvh_refit.argtypes = [p, i, p, p, p]
    lib.lw_triangle_bounds.argtypes = [p, p, i, p, p, p]
    lib.lw_winding_moments.argtypes = [p, i, p, p, p, p]
    lib.lw_leaf_corners.argtypes = [p, p, p, i, p]
    lib.lw_bvh4_collapse.argtypes = [p, i, p, p, p]
    lib.lw_tri_blocks.argtypes = [p, p, i]
    lib.lw_bvh4_collapse.restype = i
    lib.lw_bvh4_refit.argtypes = [p, p, i]
    for f in (lib.lw_bvh_refit, lib.lw_triangle_bounds, lib.lw_winding_moments, lib.lw_leaf_corners,
              lib.lw_bvh4_refit, lib.lw_tri_blocks):
        f.restype = None
    return lib


_SLOT_BYTES = 256
_SLAB_SLOTS = 64


class HandleTable:
    """Descriptor slots for live handles, handed out and taken back; ids carry a generation."""

    def __init__(self) -> None:
        self._slabs: list[np.ndarray] = []
        self._free: list[int] = []
        self.live: dict[int, Any] = {}  # id -> descriptor

    def allocate(self, desc_type: type[ctypes.Structure]) -> tuple[Any, int]:
        """A zeroed descriptor of `desc_type` (with a uint32 field `tag`, set nonzero here) and its id."""
        assert ctypes.sizeof(desc_type) <= _SLOT_BYTES
        if not self._free:
            slab = np.zeros(_SLOT_BYTES * _SLAB_SLOTS, dtype=np.uint8)
            self._slabs.append(slab)
            self._free += [slab.ctypes.data + k * _SLOT_BYTES for k in reversed(range(_SLAB_SLOTS))]
        addr = self._free.pop()
        ctypes.memset(addr, 0, _SLOT_BYTES)
        desc = desc_type.from_address(addr)
        desc.tag = 1
        self.live[addr] = desc
        return desc, addr

    def release(self, handle: int) -> None:
        """Free a handle's descriptor: its id stops naming anything."""
        desc = self.live.pop(handle, None)
        if desc is not None:
            addr = ctypes.addressof(desc)
            ctypes.memset(addr, 0, _SLOT_BYTES)
            self._free.append(addr)


@cache
def handles() -> HandleTable:
    """The process's table of live Mesh and Bvh descriptors (created on first use)."""
    return HandleTable()


class DeviceSlots:
    """Descriptor slots in one device's memory (for devices the host cannot read): kernels there read the
    descriptor an id names. A freed slot is zeroed, as host slots are."""

    def __init__(self, device: Any) -> None:
        self.device = device
        self._slabs: list[array] = []
        self._free: list[int] = []

    def allocate(self) -> int:
        if not self._free:
            slab = empty(_SLOT_BYTES * _SLAB_SLOTS, dtype=T.uint8, device=self.device)
            slab.zero_()
            self._slabs.append(slab)
            self._free += [slab.ptr + k * _SLOT_BYTES for k in reversed(range(_SLAB_SLOTS))]
        return self._free.pop()

    def write(self, slot: int, desc: ctypes.Structure) -> None:
        self.device.backend.upload(slot, ctypes.addressof(desc), ctypes.sizeof(desc))

    def release(self, slot: int) -> None:
        self.device.backend.zero(slot, _SLOT_BYTES)
        self._free.append(slot)


_device_slots: dict[Any, DeviceSlots] = {}


class Handle:
    """A geometry object's descriptor and the id kernels on its device take. On a device with host memory the
    descriptor is the kernels' own and host arrays are pointed to in place. On another (a GPU) `address`
    gives device copies of host arrays, and `publish` copies the descriptor, which then holds device
    addresses, into the device's slot the id names."""

    def __init__(self, desc_type: type[ctypes.Structure], device: Any) -> None:
        self.device = device
        self.desc, self._host_id = handles().allocate(desc_type)
        self.on_host = device.backend.host_accessible
        if self.on_host:
            self.id = self._host_id
        else:
            slots = _device_slots.get(device) or _device_slots.setdefault(device, DeviceSlots(device))
            self.id = slots.allocate()
        self._copies: dict[str, array] = {}

    def address(self, name: str, values: np.ndarray) -> int:
        """Where kernels read `values` (a C-contiguous host array, copied now when they run elsewhere)."""
        if self.on_host:
            return values.ctypes.data
        buf = self._copies.get(name)
        if buf is None or buf.size < values.nbytes:
            buf = self._copies[name] = empty(max(values.nbytes, 1), dtype=T.uint8, device=self.device)
        if values.nbytes:
            self.device.backend.upload(buf.ptr, np.ascontiguousarray(values).ctypes.data, values.nbytes)
        return buf.ptr

    def publish(self) -> None:
        """Make the descriptor's current contents what kernels on the device read."""
        if not self.on_host:
            _device_slots[self.device].write(self.id, self.desc)

    def release(self) -> None:
        handles().release(self._host_id)
        if not self.on_host:
            _device_slots[self.device].release(self.id)
        self._copies.clear()


def vec3_array(value: Any, what: str, device: Any = None, *, allow_none: bool = False) -> array | None:
    """`value` as a contiguous 1-D wp.array of vec3 (lists and NumPy arrays are converted), or a clear error."""
    if value is None:
        if allow_none:
            return None
        raise GeometryError(f"{what} is required")
    a = value if isinstance(value, array) else array(np.asarray(value, dtype=np.float32).reshape(-1, 3),
                                                     dtype=T.vec3f, device=device)
    if a.dtype is not T.vec3f or a.ndim != 1 or not a.is_contiguous:
        raise GeometryError(f"{what} must be a contiguous 1-D array of wp.vec3, got {a!r}")
    return a


def int32_array(value: Any, what: str, device: Any = None) -> array:
    """`value` as a contiguous 1-D wp.array of int32, or a clear error."""
    a = value if isinstance(value, array) else array(np.asarray(value, dtype=np.int32).reshape(-1),
                                                     dtype=T.int32, device=device)
    if a.dtype is not T.int32 or not a.is_contiguous:
        raise GeometryError(f"{what} must be a contiguous array of wp.int32, got {a!r}")
    return a


def finite_or_raise(values: np.ndarray, what: str) -> None:
    if not np.isfinite(values).all():
        bad = int(np.argwhere(~np.isfinite(values).reshape(len(values), -1).all(axis=1))[0, 0])
        raise GeometryError(f"{what} has a NaN or infinite value (item {bad}: {values[bad].tolist()})")
