"""`wp.HashGrid`: points bucketed into a hashed grid of cubic cells, for neighbour queries in kernels.

In a kernel, `query = wp.hash_grid_query(grid_id, p, max_dist)` starts a query of the points near p and
`while wp.hash_grid_query_next(query, index):` visits each candidate (the points of every cell the
sphere of radius max_dist touches: test the distance); `wp.hash_grid_point_id(grid_id, tid)` maps a
thread index to a point in cell order, so neighbouring threads query neighbouring points.
The grid is an extension of the kernel layer: its native header, value type and builtins are
registered from here (see kernels/extensions.py).
"""

from __future__ import annotations

import ctypes
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
    [("id", T.uint64), *((n, T.int32) for n in ("x_start", "y_start", "z_start", "x_end", "y_end", "z_end",
                                                  "x", "y", "z", "cursor", "stop"))],
    header=HEADER)


class _GridDesc(ctypes.Structure):
    """Mirrors `lw::hash_grid_t` in hash_grid.h: what a grid's id points to."""

    _fields_ = [("points", ctypes.c_uint64), ("sorted_ids", ctypes.c_uint64), ("cell_starts", ctypes.c_uint64),
                ("cell_ends", ctypes.c_uint64), ("cell_width", ctypes.c_float), ("dim_x", ctypes.c_int32),
                ("dim_y", ctypes.c_int32), ("dim_z", ctypes.c_int32), ("num_points", ctypes.c_int32)]


class HashGrid:
    """A hashed grid of `dim_x * dim_y * dim_z` buckets; `build(points, radius)` fills it."""

    def __init__(self, dim_x: int, dim_y: int, dim_z: int, device: Any = None) -> None:
        dims = (dim_x, dim_y, dim_z)
        if not all(isinstance(d, int | np.integer) and 0 < d < 2**10 for d in dims):
            raise ValueError(f"HashGrid dimensions must be ints in [1, 1024), got {dims}")
        self.device = get_device(device)
        if not self.device.backend.host_accessible:  # its tables are NumPy arrays the queries read
            raise DeviceError(f"HashGrid on {self.device} is not supported yet (devices with host memory only)")
        self.dims = tuple(int(d) for d in dims)
        self.reserved = 0
        self._desc = _GridDesc(dim_x=self.dims[0], dim_y=self.dims[1], dim_z=self.dims[2], cell_width=1.0)
        buckets = int(np.prod(self.dims))
        self._starts = np.zeros(buckets, dtype=np.int32)
        self._ends = np.zeros(buckets, dtype=np.int32)
        self._sorted = np.zeros(1, dtype=np.int32)
        self._points: Any = None
        self._publish()

    @property
    def id(self) -> int:
        """The handle kernels take as a `wp.uint64`."""
        return ctypes.addressof(self._desc)

    def reserve(self, num_points: int) -> None:
        """Make room for `num_points` points ahead of `build` (builds grow it as needed anyway)."""
        if num_points > self._sorted.size:
            self._sorted = np.zeros(num_points, dtype=np.int32)
            self._publish()
        self.reserved = max(self.reserved, int(num_points))

    def build(self, points: Any, radius: float) -> None:
        """Bucket `points` (a wp.array of vec3, kept by reference: rebuild after moving them) into cubic
        cells of edge `radius`; queries work best with a max_dist close to it."""
        if not radius > 0.0:
            raise ValueError(f"HashGrid.build: radius must be positive, got {radius}")
        pts = points if isinstance(points, array) else array(points, dtype=T.vec3f)
        if pts.dtype is not T.vec3f or pts.ndim != 1 or not pts.is_contiguous:
            raise TypeError(f"HashGrid.build: points must be a contiguous 1-D array of wp.vec3, got {pts!r}")
        if pts.device != self.device:
            raise DeviceError(f"HashGrid.build: points are on {pts.device}, the grid on {self.device}")
        p = pts.numpy()
        inv = np.float32(1.0) / np.float32(radius)  # float32 like the queries, so both agree on every cell
        cells = np.floor(p * inv).astype(np.int64) % np.array(self.dims)
        buckets = (cells[:, 2] * self.dims[1] + cells[:, 1]) * self.dims[0] + cells[:, 0]
        order = np.argsort(buckets, kind="stable").astype(np.int32)
        edges = np.arange(int(np.prod(self.dims)) + 1)
        bounds = np.searchsorted(buckets[order], edges).astype(np.int32)
        self.reserve(len(p))
        self._sorted[: len(p)] = order
        self._starts[:], self._ends[:] = bounds[:-1], bounds[1:]
        self._points = pts
        self._desc.cell_width = radius
        self._desc.num_points = len(p)
        self._publish()

    def _publish(self) -> None:
        d = self._desc
        d.points = (self._points.ptr or 0) if self._points is not None else 0
        d.sorted_ids, d.cell_starts, d.cell_ends = (a.ctypes.data for a in (self._sorted, self._starts, self._ends))

    def __repr__(self) -> str:
        return f"HashGrid(dims={self.dims}, points={self._desc.num_points}, device={self.device})"


register_handle_type(HashGrid)
export_name("HashGrid", HashGrid)
export_name("hash_grid_query_t", hash_grid_query_t)
U64, V3, F32, I32 = Exact(T.uint64), Exact(T.vec3f), Exact(T.float32), Exact(T.int32)
add_builtin("hash_grid_query", (U64, V3, F32), hash_grid_query_t, "lw::hash_grid_query", header=HEADER,
            group="Geometry", differentiable=False,
            doc="hash_grid_query(id, point, max_dist): start a query of the grid's points near `point`")
add_builtin("hash_grid_query_next", (InOut(hash_grid_query_t), Out(T.int32)), T.bool_, "lw::hash_grid_query_next",
            header=HEADER, group="Geometry", differentiable=False,
            doc="hash_grid_query_next(query, index): the next candidate's point index into `index`; False at the end")
add_builtin("hash_grid_point_id", (U64, I32), T.int32, "lw::hash_grid_point_id", header=HEADER, group="Geometry",
            differentiable=False, doc="hash_grid_point_id(id, index): the point at position `index` in cell order")
