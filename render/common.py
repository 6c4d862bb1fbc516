"""Host-side helpers both renderers share: turning user input into NumPy, quaternion rotation (Warp's
(x, y, z, w) order), the transform that carries a unit segment onto a line, and up-axis names."""

from __future__ import annotations

import zlib
from typing import Any

import numpy as np

AXES = ("X", "Y", "Z")

# a ten-colour qualitative palette for shapes drawn without a colour (picked by the shape's name)
PALETTE = np.array([
    (0.12, 0.47, 0.71), (1.00, 0.50, 0.05), (0.17, 0.63, 0.17), (0.84, 0.15, 0.16), (0.58, 0.40, 0.74),
    (0.55, 0.34, 0.29), (0.89, 0.47, 0.76), (0.50, 0.50, 0.50), (0.74, 0.74, 0.13), (0.09, 0.75, 0.81),
], dtype=np.float32)


def as_numpy(values: Any, what: str, *, dtype: Any = np.float32) -> np.ndarray:
    """`values` (a loomwork array, NumPy array, tuple or list) as a NumPy array of `dtype`."""
    if hasattr(values, "numpy") and callable(values.numpy):
        values = values.numpy()
    try:
        return np.asarray(values, dtype=dtype)
    except (TypeError, ValueError) as e:
        raise TypeError(f"{what}: expected numbers (an array, tuple or list), got {type(values).__name__}") from e


def points_or_raise(points: Any, what: str) -> np.ndarray:
    """`points` as an (n, 3) float32 array, or a ValueError naming `what`."""
    pts = as_numpy(points, what)
    if pts.size == 0:
        return pts.reshape(0, 3)
    if pts.ndim != 2 or pts.shape[1] != 3:
        raise ValueError(f"{what}: expected an array of 3-D points of shape (n, 3), got shape {pts.shape}")
    return pts


def vec_or_raise(value: Any, n: int, what: str) -> np.ndarray:
    """`value` as a float64 vector of length `n`, or a ValueError naming `what`."""
    v = as_numpy(value, what, dtype=np.float64).reshape(-1)
    if v.shape != (n,):
        raise ValueError(f"{what}: expected {n} numbers, got {v.size}")
    return v


def axis_index(up_axis: str | int, what: str) -> int:
    """"X"/"Y"/"Z" (any case) or 0/1/2 as the axis index, or a ValueError naming `what`."""
    if isinstance(up_axis, str) and up_axis.upper() in AXES:
        return AXES.index(up_axis.upper())
    if isinstance(up_axis, (int, np.integer)) and 0 <= int(up_axis) <= 2:
        return int(up_axis)
    raise ValueError(f"{what}: up_axis must be 'X', 'Y', 'Z' or 0, 1, 2, got {up_axis!r}")


def quat_rotate(q: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Rotate the rows of `v` (n, 3) by the unit quaternion `q` = (x, y, z, w)."""
    u, w = np.asarray(q[:3], dtype=np.float64), float(q[3])
    v = np.asarray(v, dtype=np.float64)
    t = 2.0 * np.cross(u, v)
    return v + w * t + np.cross(u, t)


def quat_to_matrix(q: np.ndarray) -> np.ndarray:
    """The 3x3 rotation matrix of the unit quaternion `q` = (x, y, z, w)."""
    return quat_rotate(q, np.eye(3)).T


def rotation_between(frm: np.ndarray, direction: np.ndarray) -> np.ndarray:
    """Quaternions (x, y, z, w), one per row of `direction` (n, 3), that turn the unit vector `frm` onto
    that direction (the identity for a zero row)."""
    a = np.asarray(frm, dtype=np.float64)
    d = np.atleast_2d(np.asarray(direction, dtype=np.float64))
    length = np.linalg.norm(d, axis=1, keepdims=True)
    d = np.divide(d, length, out=np.tile(a, (len(d), 1)), where=length > 0)
    # the half-way vector h between a and d gives the quaternion (a x h, a . h) directly
    h = d + a
    hn = np.linalg.norm(h, axis=1, keepdims=True)
    opposite = hn[:, 0] < 1e-9
    h = np.divide(h, hn, out=np.zeros_like(h), where=hn > 1e-9)
    q = np.concatenate([np.cross(a, h), h @ a[:, None]], axis=1)
    if opposite.any():  # half a turn about an axis perpendicular to a
        side = np.cross(a, (1.0, 0.0, 0.0) if abs(a[0]) < 0.9 else (0.0, 1.0, 0.0))
        q[opposite] = (*(side / np.linalg.norm(side)), 0.0)
    return q


def segment_rotation(direction: np.ndarray) -> np.ndarray:
    """Quaternions (x, y, z, w), one per row of `direction` (n, 3), that turn +Z onto that direction."""
    return rotation_between(np.array([0.0, 0.0, 1.0]), direction)


def line_segments(vertices: Any, indices: Any | None, what: str) -> tuple[np.ndarray, np.ndarray]:
    """The (start, end) points of a line list (`indices` pairs) or, with `indices` None, of a line strip."""
    verts = points_or_raise(vertices, f"{what} vertices")
    if indices is None:
        return verts[:-1], verts[1:]
    idx = as_numpy(indices, f"{what} indices", dtype=np.int64).reshape(-1)
    if idx.size % 2:
        raise ValueError(f"{what}: indices must come in pairs, got {idx.size}")
    if idx.size and (idx.min() < 0 or idx.max() >= len(verts)):
        raise ValueError(f"{what}: an index is out of range for {len(verts)} vertices")
    return verts[idx[0::2]], verts[idx[1::2]]


def name_color(name: str) -> tuple[float, float, float]:
    """A stable palette colour for a shape drawn without one."""
    return tuple(float(c) for c in PALETTE[zlib.crc32(name.encode()) % len(PALETTE)])
