"""`wp.Volume`: a sparse grid of voxels in NanoVDB's layout (nanovdb.py), for lookups, stores and
interpolated, differentiable samples in kernels.

Volumes come from dense NumPy arrays (`load_from_numpy`), from boxes or points (`allocate`,
`allocate_by_tiles`: value grids whose 8^3 tiles are allocated and active; `allocate_by_voxels`: an
index grid numbering its active voxels) or from `.nvdb` files (`load_from_nvdb`, `save_to_nvdb`). In a
kernel, `wp.volume_sample(id, uvw, wp.Volume.LINEAR, dtype=float)` interpolates at an index-space point,
`wp.volume_lookup` / `wp.volume_store` read and write voxels, `wp.volume_lookup_index` and
`wp.volume_sample_index` read an array through an index grid, and `wp.volume_world_to_index` and its
kin map between world and index space. Voxels without storage read the background value.
"""

from __future__ import annotations

import ast
import ctypes
import math
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from loomwork.kernels import builtins as B
from loomwork.kernels import ir
from loomwork.kernels import types as T
from loomwork.kernels.array import array
from loomwork.kernels.builtins import Arr, Exact, Out, Value
from loomwork.kernels.device import get_device
from loomwork.kernels.errors import KernelTypeError
from loomwork.kernels.extensions import add_builtin, export_name, register_handle_type, register_header
from loomwork.kernels.frontend import Builder, call_form

from . import nanovdb as nv
from .common import GeometryError, Handle

HEADER = register_header(Path(__file__).parent / "native" / "volume.h")


class _VolumeDesc(ctypes.Structure):
    """Mirrors `lw::volume_t` in volume.h."""

    _fields_ = [("tag", ctypes.c_uint32), ("grid_type", ctypes.c_uint32), ("grid", ctypes.c_uint64),
                ("root", ctypes.c_uint64), *((n, ctypes.c_uint32) for n in (
                    "root_tiles", "root_size", "root_tile_size", "root_tile_value", "root_background",
                    "upper_table", "lower_table", "leaf_table", "table_stride", "value_size", "index_kind")),
                ("voxel_count", ctypes.c_int32)]


def _device_of(points: Any, device: Any) -> Any:
    """Where a volume built from `points` lives: `device`, else the points' device (a wp.array), else the
    default device, as Warp decides."""
    if device is None and isinstance(points, array):
        return points.device
    return get_device(device)


def _voxel_size(voxel_size: Any) -> tuple[float, float, float]:
    """A positive, finite voxel size per axis, from a scalar or three values."""
    try:
        if isinstance(voxel_size, str | bytes) or voxel_size is None:
            raise TypeError
        v = (float(voxel_size),) * 3 if np.ndim(voxel_size) == 0 else tuple(float(x) for x in voxel_size)
    except (TypeError, ValueError):
        raise TypeError(f"Volume: voxel_size must be a number or three numbers, got {voxel_size!r}") from None
    if len(v) != 3:
        raise ValueError(f"Volume: voxel_size must be a scalar or a 3-element sequence, got length {len(v)}")
    if not all(math.isfinite(x) and x > 0.0 for x in v):
        raise ValueError(f"Volume: all voxel_size components must be finite and positive, got {v}")
    return v


def _vec3(value: Any, what: str) -> tuple[float, float, float]:
    v = np.asarray(value, dtype=np.float64).reshape(-1)
    if v.shape != (3,) or not np.isfinite(v).all():
        raise ValueError(f"Volume: {what} must be three finite numbers, got {value!r}")
    return tuple(float(x) for x in v)


def _value_kind(bg_value: Any) -> nv.GridKind:
    """The grid type a background value makes (as Warp decides it): an int makes int32, a list of three
    or four numbers vec3f / vec4f, a Warp value its own type, anything else float32."""
    if isinstance(bg_value, T.ScalarType | T._CompositeMixin):
        t = type(bg_value)
    elif isinstance(bg_value, bool | np.bool_):
        raise TypeError("Volume: a bool background value makes no supported grid type")
    elif isinstance(bg_value, np.integer):
        t = T.normalize_dtype(type(bg_value))
    elif isinstance(bg_value, int):
        t = T.int32
    elif isinstance(bg_value, float | np.floating):
        t = T.float32
    else:
        n = np.asarray(bg_value).size
        t = {3: T.vec3f, 4: T.vec4f}.get(n)
        if t is None:
            raise TypeError(f"Volume: bg_value must be a number, or three or four numbers, got {bg_value!r}")
    kind = nv.KIND_OF_DTYPE.get(t)
    if kind is None:
        names = ", ".join(T.type_name(d) for d in nv.KIND_OF_DTYPE)
        raise TypeError(f"Volume: unsupported grid type {T.type_name(t)} (supported: {names})")
    return kind


def _bg_array(kind: nv.GridKind, bg_value: Any) -> np.ndarray:
    v = bg_value.numpy_value() if isinstance(bg_value, T._CompositeMixin) else getattr(bg_value, "value", bg_value)
    return np.asarray(v, dtype=kind.scalar).reshape(kind.components)


def _points(points: Any, what: str, point_mask: Any = None) -> tuple[np.ndarray, bool]:
    """(n, 3) coordinates from a wp.array of vec3i / vec3f or an (n, 3) int32 / float32 array (those whose
    `point_mask` entry is nonzero, when given), and whether they are world-space (float) points."""
    if isinstance(points, array):
        if not points.is_contiguous:
            raise GeometryError(f"{what} must be contiguous")
        scalar = T.elem_scalar(points.dtype)
        pts = points.numpy()
    else:
        pts = np.asarray(points)
        scalar = T.int32 if np.issubdtype(pts.dtype, np.integer) else T.float32
    if scalar not in (T.int32, T.float32) or pts.size % 3 or (pts.ndim == 2 and pts.shape[-1] != 3) or pts.ndim > 2:
        raise GeometryError(f"{what} must be a 1-D array of vec3i / vec3f or an (n, 3) array of int32 / float32")
    pts = pts.reshape(-1, 3)
    if point_mask is not None:
        mask = (point_mask.numpy() if isinstance(point_mask, array) else np.asarray(point_mask)).reshape(-1)
        if len(mask) != len(pts):
            raise GeometryError(f"{what}: point_mask has {len(mask)} entries for {len(pts)} points")
        pts = pts[mask != 0]
    return pts, scalar is T.float32


def _index_points(points: Any, what: str, point_mask: Any, vs: tuple, t: tuple) -> np.ndarray:
    """Index-space voxel coordinates (int64) of tile or voxel points: integer points as they are, float
    (world-space) points rounded to the nearest voxel; non-finite points and coordinates beyond int32 are
    refused."""
    pts, world = _points(points, what, point_mask)
    if world:
        if not np.isfinite(pts).all():
            raise GeometryError(f"{what} has a NaN or infinite point")
        pts = np.around((pts - t) / vs)
        if (np.abs(pts) >= 2**31).any():
            raise GeometryError(f"{what}: a point lies beyond the int32 range of voxel coordinates")
    return pts.astype(np.int64)


def _tiles_grid(kind: nv.GridKind, tiles: np.ndarray, bg: np.ndarray | None, vs: tuple, t: tuple) -> np.ndarray:
    """A grid with every voxel of the given tiles (distinct multiples of 8) active, set to `bg` (None: an
    index grid)."""
    tiles = tiles[nv.leaf_key_order(tiles)]
    masks = np.ones((len(tiles), 512), bool)
    if bg is None:
        return nv.build_grid(kind, tiles, masks, None, np.zeros(1), vs, t)
    return nv.build_grid(kind, tiles, masks, np.broadcast_to(bg, (len(tiles), 512, kind.components)), bg, vs, t)


def _voxels_grid(ijk: np.ndarray, vs: tuple, t: tuple) -> np.ndarray:
    """An index grid with the given (distinct) voxels active."""
    tiles, inverse = np.unique((ijk >> 3) << 3, axis=0, return_inverse=True)
    order = nv.leaf_key_order(tiles)
    rank = np.empty(len(order), np.int64)
    rank[order] = np.arange(len(order))
    masks = np.zeros((len(tiles), 512), bool)
    local = ijk & 7
    masks[rank[inverse.reshape(-1)], local[:, 0] * 64 + local[:, 1] * 8 + local[:, 2]] = True
    return nv.build_grid(nv.KINDS[nv.ON_INDEX], tiles[order], masks, None, np.zeros(1), vs, t)


class RebuildInfo(NamedTuple):
    """Warp's `Volume.RebuildInfo`: the rebuild input kind and the counts reserved."""

    kind: str | None
    max_voxel_count: int
    max_leaf_node_count: int
    max_lower_node_count: int
    max_upper_node_count: int

    def overflow(self, layout: nv.GridLayout) -> int:
        """The `REBUILD_*_CAPACITY_EXCEEDED` flags of a grid that does not fit (0 when it does)."""
        return ((layout.leaf_count > self.max_leaf_node_count) * Volume.REBUILD_LEAF_CAPACITY_EXCEEDED
                | (layout.lower_count > self.max_lower_node_count) * Volume.REBUILD_LOWER_CAPACITY_EXCEEDED
                | (layout.upper_count > self.max_upper_node_count) * Volume.REBUILD_UPPER_CAPACITY_EXCEEDED
                | (layout.voxel_count > self.max_voxel_count) * Volume.REBUILD_VOXEL_CAPACITY_EXCEEDED)


class _Rebuild(NamedTuple):
    capacity: RebuildInfo
    build: Callable  # (points, point_mask) -> grid bytes


def _capacity(value: Any, default: int, name: str) -> int:
    capacity = default if value is None else value
    if isinstance(capacity, bool) or not isinstance(capacity, int | np.integer):
        raise TypeError(f"Volume: {name} must be an integer, got {capacity!r}")
    if not 0 < capacity < 2**32:
        raise ValueError(f"Volume: {name} must be positive and fit in uint32, got {capacity}")
    return int(capacity)


def _check_status(status: Any, device: Any) -> None:
    if status is not None and (not isinstance(status, array) or status.dtype is not T.uint32 or status.size < 1
                               or status.device != device):
        raise GeometryError(f"Volume: status must be a wp.array of uint32 with at least one element on {device}, got "
                            f"{status!r}")


def _set_status(status: array | None, flags: int) -> None:
    if status is not None:
        status.reshape(-1)[0:1].fill_(flags)


class Volume:
    """A sparse volume in NanoVDB's layout; kernels take its `id`."""

    CLOSEST = 0
    """Sampling mode: the nearest voxel (coordinates rounded half away from zero)."""
    LINEAR = 1
    """Sampling mode: trilinear interpolation of the eight surrounding voxels."""

    class GridInfo(NamedTuple):
        """A grid's metadata."""

        name: str
        size_in_bytes: int
        grid_index: int
        grid_count: int
        type_str: str
        translation: Any
        transform_matrix: Any

    RebuildInfo = RebuildInfo
    """The rebuild input kind and the capacity reserved (`get_rebuild_info`)."""

    def __init__(self, data: Any, copy: bool = True) -> None:
        """A volume over the bytes of a NanoVDB grid (a wp.array of uint8 on the CPU, or NumPy bytes),
        checked before use."""
        self._id = 0
        buf = data.numpy() if isinstance(data, array) else np.asarray(data)
        if buf.dtype != np.uint8 or buf.ndim != 1:
            raise GeometryError(f"Volume: data must be a 1-D array of uint8 (a NanoVDB grid), got {buf.dtype} with "
                                f"shape {buf.shape}")
        device = data.device if isinstance(data, array) else get_device("cpu")
        if copy or buf.ctypes.data % 32 or not device.backend.host_accessible:
            aligned = nv.aligned_bytes(len(buf))
            aligned[:] = buf
            buf = aligned
        self._data = data  # an aliased array stays alive with the volume
        self._adopt(buf, device)

    @classmethod
    def _from_buffer(cls, buf: np.ndarray, device: Any) -> Volume:
        v = cls.__new__(cls)
        v._id = 0
        v._adopt(buf, get_device(device))
        return v

    def _adopt(self, buf: np.ndarray, device: Any) -> None:
        """Take `buf` (host bytes) as the grid; on a device the host cannot read, kernels use a device copy."""
        self.device = device
        self._rebuild: _Rebuild | None = None
        self._handle = Handle(_VolumeDesc, device)
        self._id = self._handle.id
        self._describe(buf)

    def _describe(self, buf: np.ndarray) -> None:
        """Point the descriptor kernels read at the grid in `buf` (its device copy on a device the host cannot
        read: the same copy again when `buf` is the same size)."""
        self._layout = layout = nv.check_grid(buf, "Volume")
        self._buf = buf
        k, handle = layout.kind, self._handle
        desc = handle.desc
        self._base = base = handle.address("grid", buf)  # where kernels read the grid's bytes
        desc.grid_type = k.code
        desc.grid = base
        desc.root = base + layout.root
        desc.root_tiles = layout.root_tiles
        desc.root_size, desc.root_tile_size, desc.root_tile_value = k.root_size, k.root_tile_size, k.root_tile_value
        desc.root_background = k.root_background
        desc.upper_table, desc.lower_table, desc.leaf_table = k.upper_table, k.lower_table, k.leaf_table
        desc.table_stride, desc.value_size = k.table_stride, k.value_size
        desc.index_kind = {nv.INDEX: 1, nv.ON_INDEX: 2}.get(k.code, 0)
        desc.voxel_count = min(max(layout.value_count - 1, 0), 2**31 - 1)
        self._desc = desc
        handle.publish()

    def _host_bytes(self) -> np.ndarray:
        """The grid's bytes on the host, with what kernels wrote into a device copy read back first."""
        if not self._handle.on_host:
            self.device.backend.download(self._buf.ctypes.data, self._base, self._buf.nbytes)
        return self._buf

    @property
    def id(self) -> int:
        """The handle kernels take as a `wp.uint64`."""
        return self._id

    def __del__(self) -> None:
        if getattr(self, "_id", 0):
            self._handle.release()
            self._id = 0

    # -- construction ------------------------------------------------------------------------------

    @classmethod
    def load_from_nvdb(cls, file_or_buffer: Any, device: Any = None) -> Volume:
        """The first grid of a NanoVDB file: a path, an open binary file or its bytes (codecs none and
        zip; blosc when the blosc package is installed)."""
        if isinstance(file_or_buffer, str | os.PathLike):
            data = Path(file_or_buffer).read_bytes()
        elif hasattr(file_or_buffer, "read"):
            data = file_or_buffer.read()
        else:
            data = file_or_buffer
        if not isinstance(data, bytes | bytearray | memoryview):
            raise TypeError(f"Volume.load_from_nvdb takes a path, a binary file or bytes, got {type(data).__name__}")
        return cls._from_buffer(nv.read_file(bytes(data), "Volume.load_from_nvdb"), device)

    def save_to_nvdb(self, path: Any, codec: str = "none") -> Any:
        """Write the grid as a NanoVDB file (codec "none", "zip" or "blosc"); returns `path`."""
        Path(path).write_bytes(nv.write_file(self._host_bytes(), self._layout, codec))
        return path

    @classmethod
    def load_from_numpy(cls, ndarray: np.ndarray, min_world: Any = (0.0, 0.0, 0.0), voxel_size: Any = 1.0,
                        bg_value: Any = 0.0, device: Any = None) -> Volume:
        """A volume holding a dense (X, Y, Z) array (or (X, Y, Z, 3) for vec3f values): voxel (i, j, k) is
        ndarray[i, j, k], at world position min_world + (i, j, k) * voxel_size. Its tiles cover the array
        (rounded up to 8^3, padded with bg_value); an int bg_value makes an int32 grid, three values a
        vec3f grid, anything else float32."""
        a = np.asarray(ndarray)
        vector = np.ndim(bg_value) > 0 or isinstance(bg_value, T._CompositeMixin)
        if a.ndim != (4 if vector else 3) or (vector and a.shape[3] != 3):
            raise GeometryError(f"Volume.load_from_numpy: expected a {'(X, Y, Z, 3)' if vector else '(X, Y, Z)'} "
                                f"array for this bg_value, got shape {a.shape}")
        kind = nv.KIND_OF_DTYPE[T.vec3f] if vector else (
            nv.KIND_OF_DTYPE[T.int32] if isinstance(bg_value, int) else nv.KIND_OF_DTYPE[T.float32])
        vs, t = _voxel_size(voxel_size), _vec3(min_world, "min_world")
        dims = [max(1, -(-s // 8)) for s in a.shape[:3]]
        padded = np.empty((dims[0] * 8, dims[1] * 8, dims[2] * 8, kind.components), kind.scalar)
        padded[...] = _bg_array(kind, bg_value)
        padded[:a.shape[0], :a.shape[1], :a.shape[2]] = a.reshape(*a.shape[:3], kind.components)
        tiles = np.stack(np.meshgrid(*(np.arange(d) for d in dims), indexing="ij"), -1).reshape(-1, 3) * 8
        blocks = padded.reshape(dims[0], 8, dims[1], 8, dims[2], 8, kind.components).transpose(0, 2, 4, 1, 3, 5, 6)
        values = blocks.reshape(-1, 512, kind.components)
        order = nv.leaf_key_order(tiles)
        buf = nv.build_grid(kind, tiles[order], np.ones((len(tiles), 512), bool), values[order],
                            _bg_array(kind, bg_value), vs, t)
        return cls._from_buffer(buf, device)

    @classmethod
    def allocate(cls, min: Any, max: Any, voxel_size: Any, bg_value: Any = 0.0, translation: Any = (0.0, 0.0, 0.0),
                 points_in_world_space: bool = False, device: Any = None) -> Volume:
        """A volume whose tiles cover voxels min..max (inclusive; index space, or world space with
        points_in_world_space), all active and set to bg_value (which also picks the grid type; None
        makes an index grid)."""
        vs, t = _voxel_size(voxel_size), _vec3(translation, "translation")
        lo, hi = np.asarray(_vec3(min, "min")), np.asarray(_vec3(max, "max"))
        if points_in_world_space:
            lo, hi = np.around((lo - t) / vs), np.around((hi - t) / vs)
        lo, hi = lo.astype(np.int64) >> 3, hi.astype(np.int64) >> 3
        if (hi < lo).any():
            raise GeometryError(f"Volume.allocate: max {max} is below min {min}")
        tiles = np.stack(np.meshgrid(*(np.arange(a, b + 1) for a, b in zip(lo, hi, strict=True)), indexing="ij"),
                         -1).reshape(-1, 3) * 8
        kind = nv.KINDS[nv.ON_INDEX] if bg_value is None else _value_kind(bg_value)
        bg = None if bg_value is None else _bg_array(kind, bg_value)
        return cls._from_buffer(_tiles_grid(kind, tiles, bg, vs, t), device)

    @classmethod
    def allocate_by_tiles(cls, tile_points: Any, voxel_size: Any = None, bg_value: Any = 0.0,
                          translation: Any = (0.0, 0.0, 0.0), device: Any = None, *, rebuildable: bool = False,
                          max_tiles: int | None = None, max_lower_nodes: int | None = None,
                          max_upper_nodes: int | None = None, status: array | None = None,
                          point_mask: Any = None) -> Volume:
        """A volume with an 8^3 tile, active and set to bg_value, around each point (index-space vec3i
        points, or world-space vec3f points rounded to the nearest voxel; only those with a nonzero
        `point_mask` entry when given); bg_value None makes an index grid.

        `rebuildable` (or any `max_*` capacity) reserves room for `max_tiles` leaves (default: one per point)
        and as many lower and upper nodes (default: the count below), so `rebuild` can later replace the
        tiles in place; `status` (one uint32) then receives the `REBUILD_*` flags of this first build."""
        if voxel_size is None:
            raise ValueError("Volume.allocate_by_tiles: voxel_size is required")
        vs, t = _voxel_size(voxel_size), _vec3(translation, "translation")
        what = "Volume.allocate_by_tiles: tile_points"
        bg = None if bg_value is None else _bg_array(_value_kind(bg_value), bg_value)  # a copy: rebuilds keep it
        kind = nv.KINDS[nv.ON_INDEX] if bg is None else _value_kind(bg_value)

        def build(points: Any, mask: Any) -> np.ndarray:
            return _tiles_grid(kind, np.unique((_index_points(points, what, mask, vs, t) >> 3) << 3, axis=0), bg,
                               vs, t)

        if not (rebuildable or max_tiles is not None or max_lower_nodes is not None or max_upper_nodes is not None):
            return cls._from_buffer(build(tile_points, point_mask), _device_of(tile_points, device))
        leaves = _capacity(max_tiles, len(_points(tile_points, what)[0]), "max_tiles")
        lowers = _capacity(max_lower_nodes, leaves, "max_lower_nodes")
        capacity = RebuildInfo("tiles", leaves * 512, leaves, lowers, _capacity(max_upper_nodes, lowers,
                                                                             "max_upper_nodes"))
        return cls._rebuildable(kind, build, capacity, tile_points, point_mask, status, device)

    @classmethod
    def allocate_by_voxels(cls, voxel_points: Any, voxel_size: Any = None, translation: Any = (0.0, 0.0, 0.0),
                           device: Any = None, *, rebuildable: bool = False, max_active_voxels: int | None = None,
                           max_leaf_nodes: int | None = None, max_lower_nodes: int | None = None,
                           max_upper_nodes: int | None = None, status: array | None = None,
                           point_mask: Any = None) -> Volume:
        """An index grid with one active voxel per point (index-space vec3i points, or world-space vec3f
        points rounded to the nearest voxel; only those with a nonzero `point_mask` entry when given):
        `volume_lookup_index` numbers them from 0.

        `rebuildable` (or any `max_*` capacity) reserves room for `max_active_voxels` voxels (default: one per
        point) and as many leaf, lower and upper nodes (default: the count before), so `rebuild` can later
        replace the voxels in place; `status` (one uint32) then receives the `REBUILD_*` flags of this first
        build."""
        if voxel_size is None:
            raise ValueError("Volume.allocate_by_voxels: voxel_size is required")
        vs, t = _voxel_size(voxel_size), _vec3(translation, "translation")
        what = "Volume.allocate_by_voxels: voxel_points"

        def build(points: Any, mask: Any) -> np.ndarray:
            return _voxels_grid(np.unique(_index_points(points, what, mask, vs, t), axis=0), vs, t)

        if not (rebuildable or max_active_voxels is not None or max_leaf_nodes is not None
                or max_lower_nodes is not None or max_upper_nodes is not None):
            return cls._from_buffer(build(voxel_points, point_mask), _device_of(voxel_points, device))
        voxels = _capacity(max_active_voxels, len(_points(voxel_points, what)[0]), "max_active_voxels")
        leaves = _capacity(max_leaf_nodes, voxels, "max_leaf_nodes")
        lowers = _capacity(max_lower_nodes, leaves, "max_lower_nodes")
        capacity = RebuildInfo("voxels", voxels, leaves, lowers, _capacity(max_upper_nodes, lowers, "max_upper_nodes"))
        return cls._rebuildable(nv.KINDS[nv.ON_INDEX], build, capacity, voxel_points, point_mask, status, device)

    # -- rebuilding in place -------------------------------------------------------------------------

    REBUILD_SUCCESS = 0
    """`rebuild` status: the topology fit in the reserved capacity."""
    REBUILD_LEAF_CAPACITY_EXCEEDED = 1 << 0
    """`rebuild` status flag: more leaves (tiles) than reserved."""
    REBUILD_LOWER_CAPACITY_EXCEEDED = 1 << 1
    """`rebuild` status flag: more lower internal nodes than reserved."""
    REBUILD_UPPER_CAPACITY_EXCEEDED = 1 << 2
    """`rebuild` status flag: more upper internal nodes than reserved."""
    REBUILD_VOXEL_CAPACITY_EXCEEDED = 1 << 3
    """`rebuild` status flag: more active voxels than reserved."""
    REBUILD_INVALID_INPUT = 1 << 4
    """`rebuild` status flag: the input could not be used (here such input raises instead)."""

    @classmethod
    def _rebuildable(cls, kind: nv.GridKind, build: Callable, capacity: RebuildInfo, points: Any, point_mask: Any,
                     status: Any, device: Any) -> Volume:
        """A volume in a buffer sized for `capacity`, first built from `points` (empty when they do not fit)."""
        device = _device_of(points, device)
        _check_status(status, device)
        reserved = nv.aligned_bytes(nv.grid_bytes(kind, capacity.max_upper_node_count, capacity.max_lower_node_count,
                                                  capacity.max_leaf_node_count))
        grid = build(points, point_mask)
        flags = capacity.overflow(nv.check_grid(grid, "Volume"))
        if flags:
            grid = build(np.zeros((0, 3), np.int32), None)
        reserved[:len(grid)] = grid
        v = cls._from_buffer(reserved, device)
        v._rebuild = _Rebuild(capacity, build)
        _set_status(status, flags)
        return v

    def rebuild(self, points: Any, status: array | None = None, point_mask: Any = None) -> array | None:
        """Replace the topology in place from `points`: tile points for a volume made rebuildable by
        `allocate_by_tiles` (the new tiles hold the background value), voxel points for one made by
        `allocate_by_voxels`. The id, transform, background, grid type and capacity stay. When the new
        topology does not fit the capacity, the volume is left as it was and `status` (one uint32, if given)
        receives the `REBUILD_*_CAPACITY_EXCEEDED` flags; otherwise `REBUILD_SUCCESS`. Returns `status`.
        A host-side rebuild cannot be recorded in a graph capture: rebuild outside one."""
        r = self._rebuild
        if r is None:
            raise GeometryError("Volume.rebuild: this volume is not rebuildable (allocate it by tiles or voxels with "
                                "rebuildable=True or a capacity)")
        _check_status(status, self.device)
        if self.device.is_capturing:
            raise GeometryError("Volume.rebuild: a graph capture is active on the volume's device; a rebuild runs on "
                                "the host and cannot be recorded, so rebuild before or after capturing")
        grid = r.build(points, point_mask)
        flags = r.capacity.overflow(nv.check_grid(grid, "Volume.rebuild"))
        if not flags:
            self._buf[:len(grid)] = grid
            self._describe(self._buf)
        _set_status(status, flags)
        return status

    # -- queries -------------------------------------------------------------------------------------

    def array(self) -> array:
        """The grid's bytes (NanoVDB's layout) as a wp.array of uint8 sharing this volume's memory."""
        return array(ptr=self._base, dtype=T.uint8, shape=self._layout.size, device=self.device, owner=self)

    @property
    def dtype(self) -> type | None:
        """The kernel type of the values (None for an index grid)."""
        return self._layout.kind.dtype

    @property
    def is_index(self) -> bool:
        """Whether this is an index grid (voxels numbered, values kept in separate arrays)."""
        return self._layout.kind.is_index

    def get_voxel_size(self) -> tuple[float, float, float]:
        """The size of a voxel along each world axis."""
        return tuple(float(x) for x in self._buf[608:632].view("<f8"))

    def get_tile_count(self) -> int:
        """The number of 8^3 tiles (NanoVDB leaves); of a rebuildable volume, the leaves reserved (as Warp)."""
        return self._rebuild.capacity.max_leaf_node_count if self._rebuild else self._layout.leaf_count

    def get_voxel_count(self) -> int:
        """The number of active voxels; of a rebuildable volume, the voxels reserved (as Warp)."""
        return self._rebuild.capacity.max_voxel_count if self._rebuild else self._layout.voxel_count

    def _leaves(self) -> np.ndarray:
        lay = self._layout
        return self._buf[lay.leaves:lay.leaves + lay.leaf_count * lay.kind.leaf_size].reshape(
            lay.leaf_count, lay.kind.leaf_size)

    def get_tiles(self, out: array | None = None) -> array:
        """The index-space origins of the tiles, (tile_count, 3) int32 (into `out` if given). Of a rebuildable
        volume, the active tiles: the first rows of `out`, the rest left as they are."""
        origins = self._leaves()[:, 0:12].copy().view("<i4").reshape(-1, 3) & ~7
        return self._output(origins, out, "get_tiles")

    def get_voxels(self, out: array | None = None) -> array:
        """The index-space coordinates of the active voxels, (voxel_count, 3) int32, in index order for
        index grids (row n is the voxel `volume_lookup_index` numbers n). Of a rebuildable volume, the active
        voxels: the first rows of `out`, the rest left as they are."""
        leaves = self._leaves()
        origins = leaves[:, 0:12].copy().view("<i4").reshape(-1, 3) & ~7
        bits = np.unpackbits(leaves[:, 16:80], axis=1, bitorder="little").astype(bool)
        leaf, n = np.nonzero(bits)
        voxels = origins[leaf] + np.stack([n >> 6, (n >> 3) & 7, n & 7], -1)
        return self._output(voxels.astype(np.int32), out, "get_voxels")

    def _output(self, rows: np.ndarray, out: array | None, what: str) -> array:
        if out is None:
            return array(rows, dtype=T.int32, device=self.device)
        if out.device != self.device or out.shape[0] < len(rows) or T.elem_scalar(out.dtype) is not T.int32 or \
                not out.is_contiguous or out.size < 3 * len(rows):
            raise GeometryError(f"Volume.{what}: out must be a contiguous array of at least {len(rows)} vec3i (or "
                                f"rows of 3 int32) on {self.device}")
        view = out.numpy()
        view.reshape(-1)[:rows.size] = rows.reshape(-1)
        if not out.device.backend.host_accessible:  # a copy of device memory: store it back
            out.assign(view)
        return out

    def load_next_grid(self) -> Volume | None:
        """The grid after this one in the buffer it was loaded from (a file of several grids), or None."""
        info = self.get_grid_info()
        rest = self._host_bytes()[self._layout.size:]
        if info.grid_index + 1 >= info.grid_count or len(rest) < nv.GRID_SIZE + nv.TREE_SIZE:
            return None
        buf = nv.aligned_bytes(len(rest))
        buf[:] = rest
        return Volume._from_buffer(buf, self.device)

    def get_feature_array_count(self) -> int:
        """The number of blind data arrays the grid carries (NanoVDB's per-grid extra arrays)."""
        return len(self._layout.blind)

    class FeatureArrayInfo(NamedTuple):
        """A blind data array's metadata."""

        name: str
        ptr: int
        value_size: int
        value_count: int
        type_str: str

    def get_feature_array_info(self, feature_index: int) -> Volume.FeatureArrayInfo:
        """The name, address, value size and count, and NanoVDB type name of a blind data array."""
        if not 0 <= feature_index < len(self._layout.blind):
            raise IndexError(f"Volume: feature array {feature_index} out of range (the grid has "
                             f"{len(self._layout.blind)})")
        name, start, count, size, type_str = self._layout.blind[feature_index]
        return Volume.FeatureArrayInfo(name, self._base + start, size, count, type_str)

    def feature_array(self, feature_index: int, dtype: Any = None) -> array:
        """A blind data array as a wp.array sharing the grid's memory: of `dtype`, or of its recorded type
        (bytes when that has no kernel type); any array reads as bytes, and bytes as any type that divides
        them."""
        info = self.get_feature_array_info(feature_index)
        if dtype is None:
            kind = next((k for k in nv.KINDS.values() if k.name == info.type_str and k.dtype is not None), None)
            dtype = kind.dtype if kind is not None else T.uint8
        dtype = T.normalize_dtype(dtype)
        want = T.type_size(dtype)
        nbytes = info.value_size * info.value_count
        if want != info.value_size and not (want == 1 or (info.value_size == 1 and nbytes % want == 0)):
            raise GeometryError(f"Volume.feature_array: cannot view values of {info.value_size} bytes as "
                                f"{T.type_name(dtype)}")
        return array(ptr=info.ptr, dtype=dtype, shape=nbytes // want, device=self.device, owner=self)

    class ActiveStats(NamedTuple):
        """Counts of the grid's active voxels and nodes."""

        voxel_count: int
        leaf_node_count: int
        lower_node_count: int
        upper_node_count: int

    def get_active_stats(self) -> Volume.ActiveStats:
        """The active voxel count and the leaf, lower and upper node counts."""
        lay = self._layout
        return Volume.ActiveStats(lay.voxel_count, lay.leaf_count, lay.lower_count, lay.upper_count)

    @property
    def is_rebuildable(self) -> bool:
        """Whether `rebuild` can replace the topology in place (allocated by tiles or voxels with capacity)."""
        return self._rebuild is not None

    def get_rebuild_info(self) -> Volume.RebuildInfo:
        """The rebuild input kind ("tiles", "voxels", or None) and the capacity reserved (zeros when None)."""
        return self._rebuild.capacity if self._rebuild else RebuildInfo(None, 0, 0, 0, 0)

    def get_grid_info(self) -> Volume.GridInfo:
        """The grid's name, size, index and count in its buffer, NanoVDB type name and map."""
        b = self._buf
        name = bytes(b[40:296]).split(b"\0", 1)[0].decode("utf-8", "replace")
        index, count = (int(x) for x in b[24:32].view("<u4"))
        mat = b[296:332].view("<f4").reshape(3, 3)
        return Volume.GridInfo(name, self._layout.size, index, count, self._layout.kind.name,
                               T.vec3f(*b[368:380].view("<f4")), T.mat33f(*mat.ravel()))

    def __repr__(self) -> str:
        what = "index" if self.is_index else T.type_name(self.dtype)
        return f"Volume({what}, tiles={self.get_tile_count()}, voxels={self.get_voxel_count()}, device={self.device})"


register_handle_type(Volume)
export_name("Volume", Volume)

# -- kernel builtins ----------------------------------------------------------------------------------

U64, I32, V3 = Exact(T.uint64), Exact(T.int32), Exact(T.vec3f)
_G = {"header": HEADER, "group": "Volumes"}
_SUFFIX = {T.float32: "float32", T.float64: "float64", T.int32: "int32", T.int64: "int64", T.uint32: "uint32",
           T.vec3f: "vec3f", T.vec3d: "vec3d", T.vec4f: "vec4f", T.vec4d: "vec4d"}
_OLD = {T.float32: "f", T.vec3f: "v", T.int32: "i"}  # Warp's older spellings: volume_sample_f and so on


def _grad_type(v: Any) -> Any:
    return T.vector(3, v) if T.is_scalar(v) else T.matrix((v._length_, 3), v._wp_scalar_type_)


def _typed_name(op: str, v: Any) -> str:
    """The builtin for `op` on values of type v: Warp's older public spelling where Warp has one
    (volume_sample_f, volume_sample_grad_f, volume_lookup_v, ...), else a hidden name."""
    old = v in _OLD and (op != "volume_sample_grad" or v is T.float32)
    return f"{op}_{_OLD[v]}" if old else f"_{op}_{_SUFFIX[v]}"


for _v, _s in _SUFFIX.items():
    _float = T.elem_scalar(_v).is_float
    add_builtin(_typed_name("volume_sample", _v), (U64, V3, I32), _v, f"lw::volume_sample_{_s}",
                differentiable=_float, adjoint=f"lw::adj_volume_sample_{_s}" if _float else None,
                export=not _typed_name("volume_sample", _v).startswith("_"), **_G,
                doc=f"volume_sample(id, uvw, sampling_mode, dtype={T.type_name(_v)}): the value at index-space "
                    "point uvw (CLOSEST: the nearest voxel; LINEAR: trilinear, differentiable in uvw)")
    add_builtin(_typed_name("volume_sample_grad", _v), (U64, V3, I32, Out(_grad_type(_v))), _v,
                f"lw::volume_sample_grad_{_s}", differentiable=_float,
                adjoint=f"lw::adj_volume_sample_grad_{_s}" if _float else None,
                export=not _typed_name("volume_sample_grad", _v).startswith("_"), **_G,
                doc="volume_sample_grad(id, uvw, sampling_mode, grad, dtype): the sampled value, and its gradient "
                    "with respect to uvw into grad (a vec3 for scalars, an N x 3 Jacobian for vectors)")
    add_builtin(_typed_name("volume_lookup", _v), (U64, I32, I32, I32), _v, f"lw::volume_lookup_{_s}",
                differentiable=False, export=not _typed_name("volume_lookup", _v).startswith("_"), **_G,
                doc="volume_lookup(id, i, j, k, dtype): the value of voxel (i, j, k) (the background where there "
                    "is none)")
    add_builtin("volume_store", (U64, I32, I32, I32, Exact(_v)), None, "lw::volume_store", differentiable=False,
                **_G, doc="volume_store(id, i, j, k, value): write a voxel that has tile storage (elsewhere nothing "
                          "happens; the value's type must be the grid's)")
    if _v in _OLD:
        add_builtin(f"volume_store_{_OLD[_v]}", (U64, I32, I32, I32, Exact(_v)), None, "lw::volume_store",
                    differentiable=False, **_G, doc=f"volume_store_{_OLD[_v]}(id, i, j, k, value): volume_store for "
                                                    f"{T.type_name(_v)} grids")

add_builtin("volume_sample_i", (U64, V3), T.int32, "lw::volume_sample_closest_int32", differentiable=False, **_G,
            doc="volume_sample_i(id, uvw): the int32 value of the voxel closest to index-space point uvw")
add_builtin("volume_lookup_index", (U64, I32, I32, I32), T.int32, "lw::volume_lookup_index", differentiable=False,
            **_G, doc="volume_lookup_index(id, i, j, k): the 0-based index of voxel (i, j, k) in an index grid, or -1")
add_builtin("volume_voxel_count", (U64,), T.int32, "lw::volume_voxel_count", differentiable=False, **_G,
            doc="volume_voxel_count(id): the number of indexed voxels of an index grid")


@dataclass(frozen=True)
class _GridValue(Value):
    """A value type a grid can hold (the same wherever `var` recurs)."""

    def match(self, t: Any, b: dict) -> bool:
        return t in _SUFFIX and super().match(t, b)

    def __str__(self) -> str:
        return "volume value"


_GV = _GridValue("V")  # the background; the array's dtype binds the same V
add_builtin("volume_sample_index", (U64, V3, I32, Arr(var="V"), _GV), "V", "lw::volume_sample_index",
            adjoint="lw::adj_volume_sample_index", **_G,
            doc="volume_sample_index(id, uvw, sampling_mode, voxel_data, background): sample voxel_data[index] "
                "through an index grid (background where a voxel has no index); differentiable in uvw, voxel_data "
                "and background")
add_builtin("volume_sample_grad_index", (U64, V3, I32, Arr(var="V"), _GV, Out(lambda b: _grad_type(b["V"]))),
            "V", "lw::volume_sample_grad_index", adjoint="lw::adj_volume_sample_grad_index", **_G,
            doc="volume_sample_grad_index(id, uvw, sampling_mode, voxel_data, background, grad): as "
                "volume_sample_index, with the gradient with respect to uvw into grad")
for _name, _arg, _what in (("volume_index_to_world", "uvw", "an index-space point to world space"),
                           ("volume_world_to_index", "xyz", "a world-space point to index space"),
                           ("volume_index_to_world_dir", "uvw", "an index-space direction to world space (no "
                                                                "translation)"),
                           ("volume_world_to_index_dir", "xyz", "a world-space direction to index space (no "
                                                                "translation)")):
    for _t in (T.vec3f, T.vec3d):
        add_builtin(_name, (U64, Exact(_t)), _t, f"lw::{_name}", adjoint=f"lw::adj_{_name}", **_G,
                    doc=f"{_name}(id, {_arg}): {_what} by the volume's map")

class GradientTypeError(KernelTypeError, RuntimeError):
    """A gradient variable whose type does not fit the sampled value type (a TypeError, and the RuntimeError
    Warp raises for it)."""


# the generic spellings take the value type as dtype=, a compile-time argument
_DTYPE_AT = {"volume_sample": 3, "volume_sample_grad": 4, "volume_lookup": 4}
for _name in _DTYPE_AT:
    B.BUILTINS[_name] = B.Builtin(_name, "Volumes", B.BUILTINS[_typed_name(_name, T.float32)].__doc__)
    export_name(_name, B.BUILTINS[_name])


@call_form(*_DTYPE_AT)
def _typed_volume_call(bld: Builder, node: ast.Call, obj: Any) -> Any:
    """volume_sample(id, uvw, mode, dtype=...) and kin: the overload for that value type."""
    at = _DTYPE_AT[obj.name]
    args, dtype_node = list(node.args), None
    if len(args) > at:
        dtype_node = args.pop(at)
    for k in node.keywords:
        if k.arg != "dtype" or dtype_node is not None:
            bld.error(node, KernelTypeError, f"{obj.name}() takes the value type as its only keyword, dtype=")
        dtype_node = k.value
    if dtype_node is None or len(args) != at:
        bld.error(node, KernelTypeError, f"{obj.name}() takes {at} arguments and the value type (dtype=...)")
    try:
        dtype = T.normalize_dtype(bld.eval_static(dtype_node, f"{obj.name}(dtype=...)"))
    except TypeError:
        dtype = None
    if dtype not in _SUFFIX:
        names = ", ".join(T.type_name(t) for t in _SUFFIX)
        bld.error(node, KernelTypeError, f"{obj.name}(): unsupported volume type {ast.unparse(dtype_node)} "
                  f"(supported: {names})")
    if obj.name == "volume_sample_grad" and isinstance(args[3], ast.Name) and args[3].id in bld.scope.vars:
        have, want = bld.value(args[3]).type, _grad_type(dtype)
        if have != want:
            bld.error(node, GradientTypeError, f"volume_sample_grad(): Incompatible gradient type, expected "
                      f"{T.type_name(want)}, got {T.type_name(have)}")
    call = ast.copy_location(ast.Call(func=node.func, args=args, keywords=[]), node)
    return bld.builtin_call(B.BUILTINS[_typed_name(obj.name, dtype)], call)


@call_form("volume_store", *(f"volume_store_{s}" for s in _OLD.values()))
def _volume_store_call(bld: Builder, node: ast.Call, obj: Any) -> None:
    """volume_store(id, i, j, k, value): a statement (the call returns nothing)."""
    bld.no_keywords(node, obj.name)
    args = [bld.value(a) for a in node.args]
    found, args = bld.resolve_literals(obj.name, args, node)
    if found is None:
        got = ", ".join(T.type_name(a.type) for a in args)
        cands = "\n".join(f"      {ov.signature()}" for ov in B.candidates(obj.name))
        bld.error(node, KernelTypeError, f"no overload of {obj.name}() takes ({got}); these do:\n{cands}")
    bld.emit(ir.Eval(ir.Call(found[0], tuple(args)), line=bld.cur_line))
