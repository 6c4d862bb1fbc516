"""Triangle meshes of shapes drawn as triangles (cylinders, cones, arrows, planes; ellipsoids as scaled spheres),
in the shape's local frame, as (points (n, 3) float32, indices (3 m,) int32)."""

from __future__ import annotations

import numpy as np


def _axis_frame(points: np.ndarray, up_axis: int) -> np.ndarray:
    """Points built along +Y moved onto local axis `up_axis` (a cyclic permutation keeps orientation)."""
    return np.roll(points, up_axis - 1, axis=1).astype(np.float32)


def frustum(r_bottom: float, r_top: float, y0: float, y1: float, up_axis: int, segments: int = 32) -> tuple:
    """A closed frustum around local `up_axis` from y0 (radius r_bottom) to y1 (radius r_top): a cylinder
    when the radii agree, a cone when r_top is 0."""
    a = np.linspace(0.0, 2.0 * np.pi, segments, endpoint=False)
    ring = np.stack([np.cos(a), np.zeros_like(a), -np.sin(a)], axis=1)  # counter-clockwise seen from +Y
    bottom = ring * r_bottom + (0.0, y0, 0.0)
    top = ring * r_top + (0.0, y1, 0.0)
    points = np.concatenate([bottom, top, [(0.0, y0, 0.0), (0.0, y1, 0.0)]])
    i = np.arange(segments)
    j = (i + 1) % segments
    nb, nt = 2 * segments, 2 * segments + 1  # the two cap centres
    sides = np.stack([np.stack([i, j, segments + j], 1), np.stack([i, segments + j, segments + i], 1)], 1)
    caps = np.concatenate([np.stack([np.full(segments, nb), j, i], 1), np.stack([np.full(segments, nt),
                                                                                 segments + i, segments + j], 1)])
    tris = np.concatenate([sides.reshape(-1, 3), caps])
    return _axis_frame(points, up_axis), tris.reshape(-1).astype(np.int32)


def sphere(rings: int = 12, segments: int = 24) -> tuple:
    """A latitude-longitude unit sphere around the origin (poles on local Z), outward-facing triangles."""
    theta = np.linspace(0.0, np.pi, rings + 1)[1:-1]
    phi = np.linspace(0.0, 2.0 * np.pi, segments, endpoint=False)
    ring = np.stack([np.outer(np.sin(theta), np.cos(phi)), np.outer(np.sin(theta), np.sin(phi)),
                     np.repeat(np.cos(theta)[:, None], segments, axis=1)], axis=-1).reshape(-1, 3)
    points = np.concatenate([[[0.0, 0.0, 1.0]], ring, [[0.0, 0.0, -1.0]]])
    k = np.arange(segments)
    nxt = (k + 1) % segments
    tris = [np.stack([np.zeros(segments, np.int64), 1 + k, 1 + nxt], axis=1)]
    for i in range(rings - 2):
        a, b = 1 + i * segments, 1 + (i + 1) * segments
        tris += [np.stack([a + k, b + k, b + nxt], axis=1), np.stack([a + k, b + nxt, a + nxt], axis=1)]
    last = 1 + (rings - 2) * segments
    tris.append(np.stack([np.full(segments, len(points) - 1), last + nxt, last + k], axis=1))
    return points.astype(np.float32), np.concatenate(tris).reshape(-1).astype(np.int32)


def merge(*meshes: tuple) -> tuple:
    """One mesh holding all of `meshes`."""
    points, indices, offset = [], [], 0
    for pts, idx in meshes:
        points.append(pts)
        indices.append(idx + offset)
        offset += len(pts)
    return np.concatenate(points).astype(np.float32), np.concatenate(indices).astype(np.int32)


def quad(corners: np.ndarray) -> tuple:
    """Two triangles over four corners given in order around the quad."""
    return np.asarray(corners, dtype=np.float32), np.array([0, 1, 2, 0, 2, 3], dtype=np.int32)
