"""Isosurfaces of dense scalar fields by marching cubes: `IsoSurfaceMarchingCubes` (also `wp.MarchingCubes`).

The triangle table is derived here rather than typed in: on each face of a cube the crossing edges are
paired (an ambiguous face, two diagonal corners below the threshold, cuts each of those corners off),
the pairs chain into closed loops of edge vertices, and each loop is fanned into triangles wound
counter-clockwise seen from the side above the threshold. A face's pairing depends only on its four
corners, so neighbouring cubes agree on it: the surface is closed and manifold away from the domain
boundary. Vertices are shared between the cubes of an edge, and their positions are differentiable
with respect to the field (linear interpolation along the edge).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from loomwork.kernels import builtins as B
from loomwork.kernels import types as T
from loomwork.kernels.array import array, array3d, zeros
from loomwork.kernels.extensions import export_name
from loomwork.kernels.launch import launch
from loomwork.kernels.module import kernel
from loomwork.kernels.utils import array_scan

# corner i sits at (i & 1, i >> 1 & 1, i >> 2 & 1); edge 4 * axis + k runs along `axis` from the corner
# whose other two coordinates are the bits of k (the lower axis first)
CUBE_CORNER_OFFSETS = tuple((i & 1, i >> 1 & 1, i >> 2 & 1) for i in range(8))


def _edge_corners(axis: int, k: int) -> tuple[int, int]:
    u, v = [a for a in range(3) if a != axis]
    base = (k & 1) << u | (k >> 1 & 1) << v
    return base, base | 1 << axis


EDGE_TO_CORNERS = tuple(_edge_corners(e // 4, e % 4) for e in range(12))
_EDGE_OF = {frozenset(c): e for e, c in enumerate(EDGE_TO_CORNERS)}


def _case_loops(case: int) -> list[list[int]]:
    """The closed loops of crossing edges of one case (bit i set: corner i below the threshold)."""
    below = [bool(case >> i & 1) for i in range(8)]
    links: dict[int, list[int]] = {}
    for axis in range(3):
        u, v = [a for a in range(3) if a != axis]
        for side in (0, 1):
            ring = [side << axis | du << u | dv << v for du, dv in ((0, 0), (1, 0), (1, 1), (0, 1))]
            edges = [_EDGE_OF[frozenset((ring[j], ring[(j + 1) % 4]))] for j in range(4)]
            cut = [j for j in range(4) if below[ring[j]] != below[ring[(j + 1) % 4]]]
            if len(cut) == 2:
                pairs = [(edges[cut[0]], edges[cut[1]])]
            elif len(cut) == 4:  # cut off each corner below the threshold: edges j-1 and j meet at corner j
                pairs = [(edges[(j - 1) % 4], edges[j]) for j in range(4) if below[ring[j]]]
            else:
                pairs = []
            for a, b in pairs:
                links.setdefault(a, []).append(b)
                links.setdefault(b, []).append(a)
    loops, seen = [], set()
    for start in sorted(links):
        if start in seen:
            continue
        loop, prev, cur = [start], None, start
        seen.add(start)
        while True:
            nxt = next(e for e in links[cur] if e != prev) if prev is not None else links[cur][0]
            if nxt == start:
                break
            loop.append(nxt)
            seen.add(nxt)
            prev, cur = cur, nxt
        loops.append(_outward(loop, below))
    return loops


def _outward(loop: list[int], below: list[bool]) -> list[int]:
    """The loop ordered so that its (Newell) normal points from the corners below to those above."""
    corner = np.array(CUBE_CORNER_OFFSETS, dtype=float)
    mid = [corner[list(EDGE_TO_CORNERS[e])].mean(axis=0) for e in loop]
    normal = sum(np.cross(mid[i], mid[(i + 1) % len(mid)]) for i in range(len(mid)))
    up = sum(corner[b] - corner[a] if below[a] else corner[a] - corner[b] for a, b in map(EDGE_TO_CORNERS.__getitem__,
                                                                                          loop))
    return loop if np.dot(normal, up) > 0 else loop[::-1]


def _tables() -> tuple[tuple[int, ...], tuple[int, ...]]:
    ranges, tris = [0], []
    for case in range(256):
        for loop in _case_loops(case):
            for j in range(1, len(loop) - 1):
                tris += [loop[0], loop[j], loop[j + 1]]
        ranges.append(len(tris))
    return tuple(ranges), tuple(tris)


CASE_TO_TRI_RANGE, TRI_LOCAL_INDICES = _tables()

tid, cw_mul = B.BUILTINS["tid"], B.BUILTINS["cw_mul"]


@kernel(enable_backward=False)
def _crossings(field: array3d(dtype=T.float32), threshold: T.float32, flags: array(dtype=T.int32)):
    i, j, k = tid()
    nx, ny, nz = field.shape[0], field.shape[1], field.shape[2]
    below = field[i, j, k] < threshold
    base = ((i * ny + j) * nz + k) * 3
    flags[base] = int(i + 1 < nx and (field[i + 1, j, k] < threshold) != below)
    flags[base + 1] = int(j + 1 < ny and (field[i, j + 1, k] < threshold) != below)
    flags[base + 2] = int(k + 1 < nz and (field[i, j, k + 1] < threshold) != below)


@kernel
def _vertices(field: array3d(dtype=T.float32), threshold: T.float32, flags: array(dtype=T.int32),
              offsets: array(dtype=T.int32), lower: T.vec3f, delta: T.vec3f, verts: array(dtype=T.vec3f)):
    i, j, k = tid()
    ny, nz = field.shape[1], field.shape[2]
    base = ((i * ny + j) * nz + k) * 3
    f0 = field[i, j, k]
    node = T.vec3f(float(i), float(j), float(k))
    for axis in range(3):
        if flags[base + axis] != 0:
            step = T.vec3f(0.0, 0.0, 0.0)
            step[axis] = 1.0
            f1 = field[i + int(step[0]), j + int(step[1]), k + int(step[2])]
            t = (threshold - f0) / (f1 - f0)
            verts[offsets[base + axis]] = lower + cw_mul(node + step * t, delta)


@kernel(enable_backward=False)
def _cell_cases(field: array3d(dtype=T.float32), threshold: T.float32, ranges: array(dtype=T.int32),
                cases: array(dtype=T.int32), counts: array(dtype=T.int32)):
    i, j, k = tid()
    case = 0
    for c in range(8):
        if field[i + (c & 1), j + ((c >> 1) & 1), k + ((c >> 2) & 1)] < threshold:
            case = case | (1 << c)
    cell = (i * (field.shape[1] - 1) + j) * (field.shape[2] - 1) + k
    cases[cell] = case
    counts[cell] = (ranges[case + 1] - ranges[case]) // 3


@kernel(enable_backward=False)
def _faces(ny: int, nz: int, cases: array(dtype=T.int32), first: array(dtype=T.int32), ranges: array(dtype=T.int32),
           local: array(dtype=T.int32), edge_corner: array(dtype=T.int32), offsets: array(dtype=T.int32),
           indices: array(dtype=T.int32)):
    i, j, k = tid()
    cell = (i * (ny - 1) + j) * (nz - 1) + k
    case = cases[cell]
    out = first[cell] * 3
    for t in range(ranges[case], ranges[case + 1]):
        e = local[t]
        c = edge_corner[e]  # the edge's start corner; the edge runs along axis e // 4
        node = ((i + (c & 1)) * ny + j + ((c >> 1) & 1)) * nz + k + ((c >> 2) & 1)
        indices[out + t - ranges[case]] = offsets[node * 3 + e // 4]


class IsoSurfaceMarchingCubes:
    """Marching cubes over a dense float32 field of `nx * ny * nz` nodes. Node (i, j, k) lies at
    `lower + (i, j, k) * (upper - lower) / (n - 1)` (by default the integer coordinates of its index).
    `surface(field, threshold)` fills `verts` (vec3f) and `indices` (int32, three per triangle,
    counter-clockwise seen from where the field is above the threshold); `extract` does the same once,
    statelessly. Vertex positions carry gradients back to the field when a Tape records the call."""

    CUBE_CORNER_OFFSETS = CUBE_CORNER_OFFSETS
    EDGE_TO_CORNERS = EDGE_TO_CORNERS
    CASE_TO_TRI_RANGE = CASE_TO_TRI_RANGE
    TRI_LOCAL_INDICES = TRI_LOCAL_INDICES

    def __init__(self, nx: int, ny: int, nz: int, lower: Any = None, upper: Any = None, *,
                 domain_bounds_lower_corner: Any = None, domain_bounds_upper_corner: Any = None) -> None:
        for new, old, name in ((lower, domain_bounds_lower_corner, "lower"),
                               (upper, domain_bounds_upper_corner, "upper")):
            if new is not None and old is not None:
                raise TypeError(f"IsoSurfaceMarchingCubes: give `{name}` or `domain_bounds_{name}_corner`, not both")
        self.nx, self.ny, self.nz = nx, ny, nz
        self.lower = lower if lower is not None else domain_bounds_lower_corner
        self.upper = upper if upper is not None else domain_bounds_upper_corner
        self.verts: array | None = None
        self.indices: array | None = None

    def resize(self, nx: int, ny: int, nz: int) -> None:
        """Take fields of another resolution from the next `surface` on."""
        self.nx, self.ny, self.nz = nx, ny, nz

    def surface(self, field: array, threshold: float) -> None:
        """Extract the isosurface `field == threshold` into `verts` and `indices`."""
        if tuple(getattr(field, "shape", ())) != (self.nx, self.ny, self.nz):
            raise ValueError(f"IsoSurfaceMarchingCubes.surface: field shape {getattr(field, 'shape', None)} does "
                             f"not match the grid dimensions {(self.nx, self.ny, self.nz)}")
        self.verts, self.indices = self.extract(field, threshold, lower=self.lower, upper=self.upper)

    @classmethod
    def extract(cls, field: array, threshold: float = 0.0, *, lower: Any = None,
                upper: Any = None) -> tuple[array, array]:
        """The isosurface `field == threshold` as (vertices, flat triangle indices), in one call."""
        if not isinstance(field, array) or field.ndim != 3:
            raise ValueError(f"marching cubes: field must be a 3-D wp.array, got {field!r}")
        if min(field.shape) < 2:
            raise ValueError(f"marching cubes: field needs at least 2 nodes on each axis, got shape {field.shape}")
        if field.dtype is not T.float32:
            raise TypeError(f"marching cubes: field must be float32, got {T.type_name(field.dtype)}")
        nx, ny, nz = field.shape
        lo = np.zeros(3, np.float32) if lower is None else np.asarray(lower, dtype=np.float32).reshape(3)
        hi = np.array([nx - 1, ny - 1, nz - 1], np.float32) if upper is None else np.asarray(
            upper, dtype=np.float32).reshape(3)
        delta = (hi - lo) / np.array([nx - 1, ny - 1, nz - 1], np.float32)
        dev = field.device
        tables = _device_tables(dev)
        flags = zeros(nx * ny * nz * 3, dtype=T.int32, device=dev)
        offsets = zeros(flags.size, dtype=T.int32, device=dev)
        launch(_crossings, (nx, ny, nz), inputs=[field, threshold, flags], device=dev)
        array_scan(flags, offsets, inclusive=False)
        nverts = int(offsets.numpy()[-1] + flags.numpy()[-1])
        verts = zeros(nverts, dtype=T.vec3f, device=dev, requires_grad=field.requires_grad)
        launch(_vertices, (nx, ny, nz), inputs=[field, threshold, flags, offsets, T.vec3f(*lo), T.vec3f(*delta)],
               outputs=[verts], device=dev)
        cells = (nx - 1) * (ny - 1) * (nz - 1)
        cases = zeros(cells, dtype=T.int32, device=dev)
        counts = zeros(cells, dtype=T.int32, device=dev)
        launch(_cell_cases, (nx - 1, ny - 1, nz - 1), inputs=[field, threshold, tables[0], cases, counts], device=dev)
        first = zeros(cells, dtype=T.int32, device=dev)
        array_scan(counts, first, inclusive=False)
        ntris = int(first.numpy()[-1] + counts.numpy()[-1])
        indices = zeros(3 * ntris, dtype=T.int32, device=dev)
        launch(_faces, (nx - 1, ny - 1, nz - 1), inputs=[ny, nz, cases, first, *tables, offsets, indices], device=dev)
        return verts, indices


_TABLES: dict[Any, tuple[array, array, array]] = {}


def _device_tables(device: Any) -> tuple[array, array, array]:
    """The case ranges, local edge indices and each edge's start corner, as arrays on `device`."""
    if device not in _TABLES:
        _TABLES[device] = tuple(array(np.array(t, dtype=np.int32), dtype=T.int32, device=device) for t in (
            CASE_TO_TRI_RANGE, TRI_LOCAL_INDICES, [a for a, _ in EDGE_TO_CORNERS]))
    return _TABLES[device]


export_name("MarchingCubes", IsoSurfaceMarchingCubes)  # Warp's deprecated spelling of the same class
