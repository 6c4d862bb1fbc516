"""Simulation geometry sources: a triangle mesh with the mass properties collision and inertia need."""

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
