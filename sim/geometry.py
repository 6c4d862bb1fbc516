"""Simulation geometry sources: a triangle mesh with the mass properties collision and inertia need, and a
heightfield (terrain) collided as the triangle mesh of its grid."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

import loomwork as wp


class Mesh:
    """A triangle mesh used as a collision shape (``ModelBuilder.add_shape_mesh``) or for cloth; holds
    host data and makes a ``wp.Mesh`` per device on demand."""

    def __init__(self, vertices: Sequence[Any] | np.ndarray, indices: Sequence[int] | np.ndarray, *,
                 normals: Any = None, compute_inertia: bool = True, is_solid: bool = True, **_: Any) -> None:
        v = np.asarray(vertices, dtype=np.float32).reshape(-1, 3)
        i = np.asarray(indices, dtype=np.int32).reshape(-1)
        if i.size % 3:
            raise ValueError(f"Mesh: indices hold {i.size} values, not a multiple of 3")
        if i.size and (i.min() < 0 or i.max() >= len(v)):
            raise IndexError(f"Mesh: index {int(i.max() if i.max() >= len(v) else i.min())} out of range "
                             f"[0, {len(v)})")
        if not np.all(np.isfinite(v)):
            raise ValueError("Mesh: vertices hold non-finite values")
        self.vertices = v
        self.indices = i
        self.normals = None if normals is None else np.asarray(normals, dtype=np.float32).reshape(-1, 3)
        self.is_solid = is_solid
        self._runtime: dict[str, wp.Mesh] = {}

    def finalize(self, device: Any = None, requires_grad: bool = False) -> wp.Mesh:
        """The ``wp.Mesh`` of this mesh on ``device`` (built once per device)."""
        dev = wp.get_device(device)
        key = str(dev)
        if key not in self._runtime:
            self._runtime[key] = wp.Mesh(points=wp.array(self.vertices, dtype=wp.vec3, device=dev),
                                         indices=wp.array(self.indices, dtype=wp.int32, device=dev))
        return self._runtime[key]

    def bounding_radius(self) -> float:
        """Largest distance [m] of a vertex from the mesh origin."""
        return float(np.linalg.norm(self.vertices, axis=1).max()) if len(self.vertices) else 0.0

    def mass_properties(self, density: float, scale: np.ndarray) -> tuple[float, np.ndarray, np.ndarray]:
        """Mass [kg], center of mass and inertia about it [kg m^2] of the solid the (closed, outward-wound)
        mesh bounds, scaled per axis by ``scale``, by summing signed tetrahedra from the origin."""
        v = self.vertices.astype(np.float64) * np.asarray(scale, dtype=np.float64)
        t = self.indices.reshape(-1, 3)
        a, b, c = v[t[:, 0]], v[t[:, 1]], v[t[:, 2]]
        vol6 = np.einsum("ij,ij->i", a, np.cross(b, c))
        volume = vol6.sum() / 6.0
        if abs(volume) < 1e-18:
            return 0.0, np.zeros(3), np.zeros((3, 3))
        com = ((a + b + c) * vol6[:, None]).sum(axis=0) / (24.0 * volume)
        # Second moment of the tetrahedron (origin, a, b, c) about the origin: det/120 (sum v v^T + s s^T).
        s = a + b + c
        cov = sum(np.einsum("i,ij,ik->jk", vol6, x, x) for x in (a, b, c, s)) / 120.0
        mass = density * volume
        cov *= density
        cov -= mass * np.outer(com, com)
        inertia = np.trace(cov) * np.eye(3) - cov
        return float(mass), com, inertia


class Heightfield(Mesh):
    """A static terrain: a grid of ``nrow`` x ``ncol`` elevations over [-hx, hx] x [-hy, hy] (rows along Y,
    columns along X), with heights ``min_z + data * (max_z - min_z)`` for data normalized to [0, 1] (the range
    of ``data`` itself unless ``min_z`` and ``max_z`` are given). Collided as its grid's triangles, faces up:
    a point below the surface is inside."""

    def __init__(self, data: Sequence[Sequence[float]] | np.ndarray, nrow: int, ncol: int, hx: float = 1.0,
                 hy: float = 1.0, min_z: float | None = None, max_z: float | None = None) -> None:
        if nrow < 2 or ncol < 2:
            raise ValueError(f"Heightfield requires nrow >= 2 and ncol >= 2, got nrow={nrow}, ncol={ncol}")
        if (min_z is None) != (max_z is None):
            raise ValueError("Heightfield: min_z and max_z must both be given or both omitted")
        raw = np.asarray(data, dtype=np.float32)
        if raw.size != nrow * ncol:
            raise ValueError(f"Heightfield: data holds {raw.size} values for a {nrow} x {ncol} grid")
        raw = raw.reshape(nrow, ncol)
        if not np.all(np.isfinite(raw)):
            raise ValueError("Heightfield: data holds non-finite values")
        if not (hx > 0.0 and hy > 0.0):
            raise ValueError(f"Heightfield: half extents must be positive, got hx={hx}, hy={hy}")
        lo, hi = float(raw.min()), float(raw.max())
        self.data = (raw - lo) / (hi - lo) if hi > lo else np.zeros_like(raw)
        """Elevations normalized to [0, 1], shape (nrow, ncol)."""
        self.nrow, self.ncol, self.hx, self.hy = int(nrow), int(ncol), float(hx), float(hy)
        self.min_z = lo if min_z is None else float(min_z)
        self.max_z = hi if max_z is None else float(max_z)
        x = np.linspace(-self.hx, self.hx, self.ncol, dtype=np.float32)
        y = np.linspace(-self.hy, self.hy, self.nrow, dtype=np.float32)
        gx, gy = np.meshgrid(x, y)
        z = self.min_z + self.data * (self.max_z - self.min_z)
        r, c = np.meshgrid(np.arange(self.nrow - 1), np.arange(self.ncol - 1), indexing="ij")
        v00 = (r * self.ncol + c).reshape(-1)
        v01, v10 = v00 + 1, v00 + self.ncol
        tris = np.stack([v00, v01, v10 + 1, v00, v10 + 1, v10], axis=1)  # counter-clockwise seen from +Z
        super().__init__(np.stack([gx, gy, z], axis=-1).reshape(-1, 3), tris.reshape(-1), is_solid=True)

    def height(self, x: float, y: float) -> float:
        """The surface's height [m] at (x, y) in its frame (the grid's triangles, as collisions see it)."""
        u = np.clip((x + self.hx) / (2.0 * self.hx) * (self.ncol - 1), 0.0, self.ncol - 1 - 1e-6)
        v = np.clip((y + self.hy) / (2.0 * self.hy) * (self.nrow - 1), 0.0, self.nrow - 1 - 1e-6)
        c, r = int(u), int(v)
        fu, fv = u - c, v - r
        z00, z01, z10, z11 = (self.min_z + self.data[i, j] * (self.max_z - self.min_z)
                              for i, j in ((r, c), (r, c + 1), (r + 1, c), (r + 1, c + 1)))
        if fu >= fv:  # the triangle (r, c), (r, c + 1), (r + 1, c + 1)
            return float(z00 + fu * (z01 - z00) + fv * (z11 - z01))
        return float(z00 + fv * (z10 - z00) + fu * (z11 - z10))
