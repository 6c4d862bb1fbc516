"""`wp.HashGrid`: points bucketed into a hashed grid of cubic cells, for neighbour queries in kernels.

In a kernel, `query = wp.hash_grid_query(grid_id, p, max_dist)` starts a query of the points near p and
`while wp.hash_grid_query_next(query, index):` or `for index in query:` visits each candidate (the
points of every cell the sphere of radius max_dist touches: test the distance); a grid built with
groups answers `wp.hash_grid_query(grid_id, p, max_dist, group)` with that group's points only.
Cells are floor(x / radius) clamped to the int32 range (NaN in cell 0), wrapped into the grid's
buckets, so far, negative and non-finite coordinates are found too. `wp.hash_grid_point_id(grid_id, tid)` maps a
thread index to a point in cell order, so neighbouring threads query neighbouring points.
The grid is an extension of the kernel layer: its native header, value type and builtins are
registered from here (see kernels/extensions.py).
"""

from __future__ import annotations

import ctypes
import operator
from pathlib import Path
from typing import Any

import numpy as np

from loomwork.kernels import types as T
from loomwork.kernels.array import array
from loomwork.kernels.builtins import Exact, InOut, Out
from loomwork.kernels.device import get_device
from loomwork.kernels.errors import DeviceError
from loomwork.kernels.extensions import (
    add_builtin,
    export_name,
    register_handle_type,
    register_header,
    register_value_type,
)

HEADER = register_header(Path(__file__).parent / "native" / "hash_grid.h")

hash_grid_query_t = register_value_type(
    "hash_grid_query_t", "lw::hash_grid_query_t",
    [("id", T.uint64), *((n, T.int32) for n in ("sx", "sy", "sz", "nx", "ny", "nz", "ix", "iy", "iz", "cursor",
                                                  "stop", "group", "grouped"))],
    header=HEADER, iterate="hash_grid_query_next")
_VEC3 = {T.float16: T.vec3h, T.float32: T.vec3f, T.float64: T.vec3d}


def _query_type(cls: type, dtype: Any) -> type:
    """`wp.HashGridQuery[wp.float64]`: one query type serves every coordinate precision."""
    if T.normalize_dtype(dtype) not in _VEC3:
        raise TypeError(f"HashGridQuery[{dtype}]: the coordinate type must be float16, float32 or float64")
    return cls


hash_grid_query_t.__class_getitem__ = classmethod(_query_type)
_COMPUTE = {T.float16: np.float32, T.float32: np.float32, T.float64: np.float64}  # as hash_grid.h bins them
_MAX_CELLS = 2**31 - 1
_INT32 = (-(2**31), 2**31 - 1)


class _GridDesc(ctypes.Structure):
    """Mirrors `lw::hash_grid_t` in hash_grid.h: what a grid's id points to."""

    _fields_ = [("points", ctypes.c_uint64), ("sorted_ids", ctypes.c_uint64), ("sorted_groups", ctypes.c_uint64),
                ("cell_starts", ctypes.c_uint64), ("cell_ends", ctypes.c_uint64), ("cell_width", ctypes.c_double),
                ("dim_x", ctypes.c_int32), ("dim_y", ctypes.c_int32), ("dim_z", ctypes.c_int32),
                ("num_points", ctypes.c_int32), ("grouped", ctypes.c_int32)]


class HashGrid:
    """A hashed grid of `dim_x * dim_y * dim_z` buckets of points with `dtype` coordinates (float16,
    float32 or float64); `build(points, radius, groups=None)` fills it."""

    def __init__(self, dim_x: int, dim_y: int, dim_z: int, device: Any = None, dtype: Any = None) -> None:
        try:
            dims = tuple(operator.index(d) for d in (dim_x, dim_y, dim_z))
        except TypeError:
            raise TypeError(f"HashGrid dimensions must be integers, got {(dim_x, dim_y, dim_z)}") from None
        if min(dims) <= 0:
            raise RuntimeError(f"HashGrid dimensions must be positive, got {dims}")
        cells = int(np.prod(dims, dtype=np.int64))
        if cells > _MAX_CELLS:
            raise RuntimeError(f"HashGrid cell count exceeds supported limit: {' * '.join(map(str, dims))} = {cells} "
                             f"> {_MAX_CELLS}")
        scalar = T.float32 if dtype is None else T.normalize_dtype(dtype)
        if scalar not in _VEC3:
            raise TypeError(f"HashGrid dtype must be float16, float32 or float64, got {T.type_name(scalar)}")
        self.device = get_device(device)
        if not self.device.backend.host_accessible:  # its tables are NumPy arrays the queries read
            raise DeviceError(f"HashGrid on {self.device} is not supported yet (devices with host memory only)")
        self.dtype = scalar
        self.dims = dims
        self.reserved = False
        self.groups: array | None = None
        self._desc = _GridDesc(dim_x=dims[0], dim_y=dims[1], dim_z=dims[2], cell_width=1.0)
        self._starts = np.zeros(cells, dtype=np.int32)
        self._ends = np.zeros(cells, dtype=np.int32)
        self._sorted = np.zeros(1, dtype=np.int32)
        self._sorted_groups = np.zeros(1, dtype=np.int32)
        self._points: Any = None
        self._publish()

    @property
    def id(self) -> int:
        """The handle kernels take as a `wp.uint64`."""
        return ctypes.addressof(self._desc)

    def reserve(self, num_points: int, with_groups: bool = False) -> None:
        """Make room for `num_points` points ahead of `build` (builds grow it as needed anyway)."""
        if num_points > self._sorted.size:
            self._sorted = np.zeros(num_points, dtype=np.int32)
        if with_groups and num_points > self._sorted_groups.size:
            self._sorted_groups = np.zeros(num_points, dtype=np.int32)
        self._publish()
        self.reserved = True

    def build(self, points: Any, radius: float, groups: Any = None) -> None:
        """Bucket `points` (a wp.array of the grid's vec3 type, any shape, indexed flat by the queries;
        rebuild after moving them) into cubic cells of edge `radius`; queries work best with a max_dist
        close to it. With `groups` (int32, one per point), `wp.hash_grid_query(id, p, r, group)` visits
        one group only."""
        want = _VEC3[self.dtype]
        pts = points if isinstance(points, array) else array(points, dtype=want)
        if pts.dtype is not want:
            raise TypeError(f"HashGrid.build: points must have type {T.type_name(want)} (the grid's dtype is "
                            f"{T.type_name(self.dtype)}), got {T.type_name(pts.dtype)}")
        if not radius > 0.0:
            raise ValueError(f"HashGrid.build: radius must be positive, got {radius}")
        if pts.device != self.device:
            raise DeviceError(f"HashGrid.build: points must live on the same device as this HashGrid: they are "
                              f"on {pts.device}, the grid on {self.device}")
        n = pts.size
        if groups is not None:
            groups = groups if isinstance(groups, array) else array(groups, dtype=T.int32)
            if groups.dtype is not T.int32:
                raise TypeError(f"HashGrid.build: groups must be an array of int32, got {T.type_name(groups.dtype)}")
            if groups.device != self.device:
                raise DeviceError("HashGrid.build: groups must live on the same device as this HashGrid")
            if groups.size != n:
                raise ValueError(f"HashGrid.build: groups must have the same length as points ({groups.size} "
                                 f"vs {n})")
        c = _COMPUTE[self.dtype]
        with np.errstate(invalid="ignore", over="ignore"):
            scaled = np.floor(pts.numpy().reshape(-1, 3).astype(c) * (c(1) / c(radius))).astype(np.float64)
        cells = np.where(np.isnan(scaled), 0.0, np.clip(scaled, *_INT32)).astype(np.int64) % np.array(self.dims)
        buckets = (cells[:, 2] * self.dims[1] + cells[:, 1]) * self.dims[0] + cells[:, 0]
        key = buckets
        if groups is not None:
            g = groups.numpy().reshape(-1)
            key = (buckets << 32) | (g.astype(np.int64) + 2**31)
        order = np.argsort(key, kind="stable").astype(np.int32)
        bounds = np.searchsorted(buckets[order], np.arange(len(self._starts) + 1)).astype(np.int32)
        self.reserve(n, with_groups=groups is not None)
        self._sorted[:n] = order
        if groups is not None:
            self._sorted_groups[:n] = g[order]
        self._starts[:], self._ends[:] = bounds[:-1], bounds[1:]
        self._points = pts
        self.groups = groups
        self._desc.cell_width = c(radius)
        self._desc.num_points = n
        self._desc.grouped = int(groups is not None)
        self._publish()

    def _publish(self) -> None:
        d = self._desc
        d.points = (self._points.ptr or 0) if self._points is not None else 0
        d.sorted_ids, d.sorted_groups, d.cell_starts, d.cell_ends = (
            a.ctypes.data for a in (self._sorted, self._sorted_groups, self._starts, self._ends))

    def __repr__(self) -> str:
        return (f"HashGrid(dims={self.dims}, dtype={T.type_name(self.dtype)}, points={self._desc.num_points}, "
                f"device={self.device})")


register_handle_type(HashGrid)
export_name("HashGrid", HashGrid)
export_name("hash_grid_query_t", hash_grid_query_t)
export_name("HashGridQuery", hash_grid_query_t)
U64, I32 = Exact(T.uint64), Exact(T.int32)
for _s, _v in _VEC3.items():
    add_builtin("hash_grid_query", (U64, Exact(_v), Exact(_s)), hash_grid_query_t, "lw::hash_grid_query",
                header=HEADER, group="Geometry", differentiable=False,
                doc="hash_grid_query(id, point, max_dist): start a query of the grid's points near `point` "
                    "(candidates: test the distance); `for index in wp.hash_grid_query(...)` visits them")
    add_builtin("hash_grid_query", (U64, Exact(_v), Exact(_s), I32), hash_grid_query_t, "lw::hash_grid_query",
                header=HEADER, group="Geometry", differentiable=False,
                doc="hash_grid_query(id, point, max_dist, group): only the points built with that group id")
add_builtin("hash_grid_query_next", (InOut(hash_grid_query_t), Out(T.int32)), T.bool_, "lw::hash_grid_query_next",
            header=HEADER, group="Geometry", differentiable=False,
            doc="hash_grid_query_next(query, index): the next candidate's point index into `index`; False at the end")
add_builtin("hash_grid_point_id", (U64, I32), T.int32, "lw::hash_grid_point_id", header=HEADER, group="Geometry",
            differentiable=False, doc="hash_grid_point_id(id, index): the point at position `index` in cell order")
