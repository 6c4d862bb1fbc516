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

from loomwork.kernels import builtins as B
from loomwork.kernels import types as T
from loomwork.kernels.array import array, zeros
from loomwork.kernels.builtins import Exact, InOut, Out, Value
from loomwork.kernels.device import get_device
from loomwork.kernels.errors import DeviceError
from loomwork.kernels.extensions import (
    add_builtin,
    export_name,
    register_handle_type,
    register_header,
    register_value_type,
)
from loomwork.kernels.launch import launch
from loomwork.kernels.module import kernel
from loomwork.kernels.stream import submit
from loomwork.kernels.utils import sort_pairs

from .common import Handle

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
_MAX_CELLS = 2**31 - 1


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
            raise RuntimeError(f"HashGrid cell count exceeds supported limit: {' * '.join(map(str, dims))} = "
                               f"{cells} > {_MAX_CELLS}")
        scalar = T.float32 if dtype is None else T.normalize_dtype(dtype)
        if scalar not in _VEC3:
            raise TypeError(f"HashGrid dtype must be float16, float32 or float64, got {T.type_name(scalar)}")
        self.device = get_device(device)
        self.dtype = scalar
        self.dims = dims
        self.reserved = False
        self.groups: array | None = None
        self._handle = Handle(_GridDesc, self.device)  # on a GPU, the descriptor kernels read is a device copy
        self._desc = d = self._handle.desc
        d.dim_x, d.dim_y, d.dim_z, d.cell_width = *dims, 1.0
        self._starts = zeros(cells, dtype=T.int32, device=self.device)
        self._ends = zeros(cells, dtype=T.int32, device=self.device)
        self._keys = self._sorted = self._sorted_groups = zeros(0, dtype=T.int32, device=self.device)
        self._points: Any = None
        self._publish()

    @property
    def id(self) -> int:
        """The handle kernels take as a `wp.uint64`."""
        return self._handle.id

    def __del__(self) -> None:
        handle = getattr(self, "_handle", None)
        if handle is not None:
            handle.release()
            self._handle = None

    def reserve(self, num_points: int, with_groups: bool = False) -> None:
        """Make room for `num_points` points ahead of `build` (builds grow it as needed anyway). Growing
        allocates, which a graph capture cannot record: reserve before capturing builds."""
        grows = 2 * num_points > self._sorted.size or (with_groups and num_points > self._sorted_groups.size)
        if grows and self.device.is_capturing:
            raise NotImplementedError(f"HashGrid.reserve({num_points}) would allocate while a graph capture is "
                                      "active on its device; reserve before capture")
        if 2 * num_points > self._sorted.size:  # radix sorting uses twice the length
            self._keys = zeros(2 * num_points, dtype=T.int32, device=self.device)
            self._sorted = zeros(2 * num_points, dtype=T.int32, device=self.device)
        if with_groups and num_points > self._sorted_groups.size:
            self._sorted_groups = zeros(num_points, dtype=T.int32, device=self.device)
        self._publish()
        self.reserved = True

    def build(self, points: Any, radius: float, groups: Any = None) -> None:
        """Bucket `points` (a wp.array of the grid's vec3 type, any shape, indexed flat by the queries;
        rebuild after moving them) into cubic cells of edge `radius`; queries work best with a max_dist
        close to it. With `groups` (int32, one per point), `wp.hash_grid_query(id, p, r, group)` visits
        one group only. Under a graph capture the build is recorded whole: each replay rebuilds from the
        arrays' values then (growing the grid first if they need more room)."""
        want = _VEC3[self.dtype]
        pts = points if isinstance(points, array) else array(points, dtype=want, device=self.device)
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
            groups = groups if isinstance(groups, array) else array(groups, dtype=T.int32, device=self.device)
            if groups.dtype is not T.int32:
                raise TypeError(f"HashGrid.build: groups must be an array of int32, got {T.type_name(groups.dtype)}")
            if groups.device != self.device:
                raise DeviceError("HashGrid.build: groups must live on the same device as this HashGrid")
            if groups.size != n:
                raise ValueError(f"HashGrid.build: groups must have the same length as points ({groups.size} "
                                 f"vs {n})")
        submit(self.device, None, self._build, (pts, float(radius), groups), name="HashGrid.build", keep=(pts, groups))

    def _build(self, pts: array, radius: float, groups: array | None) -> None:
        n = pts.size
        flat = pts if pts.ndim == 1 and pts.is_contiguous else pts.contiguous().flatten()
        self.reserve(n, with_groups=groups is not None)
        self._points, self.groups = pts, groups
        self._desc.cell_width = float(radius)
        self._desc.num_points = n
        self._desc.grouped = int(groups is not None)
        self._publish()
        if groups is not None:  # by group first: the stable sort by bucket keeps each bucket's groups in order
            flat_groups = groups if groups.ndim == 1 and groups.is_contiguous else groups.contiguous().flatten()
            launch(_group_keys, n, inputs=[flat_groups, self._keys, self._sorted], device=self.device)
            sort_pairs(self._keys, self._sorted, n, tail_scratch=True)
        launch(_bucket_keys, n, inputs=[self.id, flat, self._sorted, self._keys, int(groups is not None)],
               device=self.device)
        sort_pairs(self._keys, self._sorted, n, tail_scratch=True)
        if n == 0:
            self._starts.zero_()
            self._ends.zero_()
        launch(_cell_bounds, n, inputs=[self._keys, n, self._starts.size, self._starts, self._ends], device=self.device)
        if groups is not None:
            launch(_gather, n, inputs=[flat_groups, self._sorted, self._sorted_groups], device=self.device)

    def _publish(self) -> None:
        d = self._desc
        d.points = (self._points.ptr or 0) if self._points is not None else 0
        d.sorted_ids, d.sorted_groups, d.cell_starts, d.cell_ends = (
            a.ptr or 0 for a in (self._sorted, self._sorted_groups, self._starts, self._ends))
        self._handle.publish()

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
add_builtin("hash_grid_bucket", (U64, Value()), T.int32, "lw::hash_grid_bucket", header=HEADER, group="Geometry",
            differentiable=False, export=False, doc="the bucket of a point (the build's sort key)")
add_builtin("hash_grid_point_id", (U64, I32), T.int32, "lw::hash_grid_point_id", header=HEADER, group="Geometry",
            differentiable=False, doc="hash_grid_point_id(id, index): the point at position `index` in cell order")


# the build, as kernels (the bucket of a point is computed by the same C++ as the queries' cells)
_bucket_of, tid = B.BUILTINS["hash_grid_bucket"], B.BUILTINS["tid"]


@kernel(enable_backward=False)
def _group_keys(groups: array(dtype=T.int32), keys: array(dtype=T.int32), ids: array(dtype=T.int32)):
    i = tid()
    keys[i] = groups[i]
    ids[i] = i


@kernel(enable_backward=False)
def _bucket_keys(grid: T.uint64, points: array(dtype=Any), ids: array(dtype=T.int32), keys: array(dtype=T.int32),
                 ordered: int):
    i = tid()
    if ordered == 0:
        ids[i] = i
    keys[i] = _bucket_of(grid, points[ids[i]])


@kernel(enable_backward=False)
def _cell_bounds(keys: array(dtype=T.int32), n: int, buckets: int, starts: array(dtype=T.int32),
                 ends: array(dtype=T.int32)):
    # every bucket gets its range of sorted positions, empty ones too (an empty range where they would be), so
    # a run of consecutive buckets is one range: queries scan a row of cells at once
    i = tid()
    k = keys[i]
    before = -1
    if i > 0:
        before = keys[i - 1]
    if before != k:
        starts[k] = i
        for b in range(before + 1, k):
            starts[b] = i
            ends[b] = i
    if i == n - 1:
        ends[k] = n
        for b in range(k + 1, buckets):
            starts[b] = n
            ends[b] = n
    elif keys[i + 1] != k:
        ends[k] = i + 1


@kernel(enable_backward=False)
def _gather(values: array(dtype=T.int32), order: array(dtype=T.int32), out: array(dtype=T.int32)):
    i = tid()
    out[i] = values[order[i]]
