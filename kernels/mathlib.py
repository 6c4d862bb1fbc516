"""Builtins written in the kernel language itself: rotations and rigid transforms that branch or
compose other builtins. They compile like user functions, so their adjoints come from the adjoint
generator, and they have one overload per float precision, so a wrong argument lists both."""

from typing import Any

from . import types as T
from .builtins import BUILTINS
from .module import Function, func

# ruff: noqa: N806, N803  (type parameters of the per-precision factories are capitalized like classes)

acos, asin, atan2, clamp, dot, normalize, quat_to_matrix, sin, sqrt = (BUILTINS[n] for n in (
    "acos", "asin", "atan2", "clamp", "dot", "normalize", "quat_to_matrix", "sin", "sqrt"))
PRECISIONS = (T.float32, T.float64)


def _overloaded(make: Any) -> Function:
    """One Function with the overload `make(S)` for each float precision S."""
    fn = None
    for st in PRECISIONS:
        f = make(st)
        f.__qualname__ = f.__name__
        if fn is None:
            fn = func(f)
        else:
            fn.add_overload(f)
    return fn


@_overloaded
def quat_from_matrix(S: Any) -> Any:
    Q, M33 = T.quaternion(S), T.matrix((3, 3), S)

    def quat_from_matrix(m: M33):
        """The unit quaternion of a rotation matrix (Shepperd's method: the largest of w, x, y, z first)."""
        tr = m[0, 0] + m[1, 1] + m[2, 2]
        x = S(0.0)
        y = S(0.0)
        z = S(0.0)
        w = S(1.0)
        if tr > 0.0:
            h = sqrt(tr + 1.0)
            w = 0.5 * h
            f = 0.5 / h
            x = (m[2, 1] - m[1, 2]) * f
            y = (m[0, 2] - m[2, 0]) * f
            z = (m[1, 0] - m[0, 1]) * f
        elif m[0, 0] >= m[1, 1] and m[0, 0] >= m[2, 2]:
            h = sqrt(1.0 + m[0, 0] - m[1, 1] - m[2, 2])
            x = 0.5 * h
            f = 0.5 / h
            y = (m[0, 1] + m[1, 0]) * f
            z = (m[0, 2] + m[2, 0]) * f
            w = (m[2, 1] - m[1, 2]) * f
        elif m[1, 1] >= m[2, 2]:
            h = sqrt(1.0 + m[1, 1] - m[0, 0] - m[2, 2])
            y = 0.5 * h
            f = 0.5 / h
            x = (m[0, 1] + m[1, 0]) * f
            z = (m[1, 2] + m[2, 1]) * f
            w = (m[0, 2] - m[2, 0]) * f
        else:
            h = sqrt(1.0 + m[2, 2] - m[0, 0] - m[1, 1])
            z = 0.5 * h
            f = 0.5 / h
            x = (m[0, 2] + m[2, 0]) * f
            y = (m[1, 2] + m[2, 1]) * f
            w = (m[1, 0] - m[0, 1]) * f
        return normalize(Q(x, y, z, w))

    return quat_from_matrix


def _quat_from_matrix44(S: Any) -> Any:
    M33, M44 = T.matrix((3, 3), S), T.matrix((4, 4), S)

    def quat_from_matrix44(m: M44):
        """The unit quaternion of the rotation block of a 4x4 transform."""
        return quat_from_matrix(M33(m[0, 0], m[0, 1], m[0, 2], m[1, 0], m[1, 1], m[1, 2], m[2, 0], m[2, 1], m[2, 2]))

    return quat_from_matrix44


for _st in PRECISIONS:
    quat_from_matrix.add_overload(_quat_from_matrix44(_st))


@_overloaded
def quat_slerp(S: Any) -> Any:
    Q = T.quaternion(S)

    def quat_slerp(q0: Q, q1: Q, t: S):
        """Spherical interpolation from q0 (t = 0) to q1 (t = 1) along the arc between them (negate q1
        for the other arc); nearly equal rotations interpolate linearly."""
        d = clamp(dot(q0, q1), -1.0, 1.0)
        theta = acos(d)
        s = sin(theta)
        if s < 1.0e-4:
            return normalize(q0 * (1.0 - t) + q1 * t)
        return (q0 * sin((1.0 - t) * theta) + q1 * sin(t * theta)) / s

    return quat_slerp


@_overloaded
def quat_to_rpy(S: Any) -> Any:
    Q, V3 = T.quaternion(S), T.vector(3, S)

    def quat_to_rpy(q: Q):
        """(roll, pitch, yaw): the angles about x, y and z that quat_rpy turns back into q."""
        x = q[0]
        y = q[1]
        z = q[2]
        w = q[3]
        roll = atan2(2.0 * (w * x + y * z), 1.0 - 2.0 * (x * x + y * y))
        pitch = asin(clamp(2.0 * (w * y - z * x), -1.0, 1.0))
        yaw = atan2(2.0 * (w * z + x * y), 1.0 - 2.0 * (y * y + z * z))
        return V3(roll, pitch, yaw)

    return quat_to_rpy


@_overloaded
def transform_to_matrix(S: Any) -> Any:
    TR, M44, Q = T.transformation(S), T.matrix((4, 4), S), T.quaternion(S)

    def transform_to_matrix(t: TR):
        """The 4x4 homogeneous matrix of a rigid transform."""
        r = quat_to_matrix(Q(t[3], t[4], t[5], t[6]))
        return M44(r[0, 0], r[0, 1], r[0, 2], t[0], r[1, 0], r[1, 1], r[1, 2], t[1], r[2, 0], r[2, 1], r[2, 2], t[2],
                   0.0, 0.0, 0.0, 1.0)

    return transform_to_matrix


@_overloaded
def transform_from_matrix(S: Any) -> Any:
    TR, M44 = T.transformation(S), T.matrix((4, 4), S)

    def transform_from_matrix(m: M44):
        """The rigid transform of a 4x4 matrix whose upper-left block is a rotation."""
        q = quat_from_matrix(m)
        return TR(m[0, 3], m[1, 3], m[2, 3], q[0], q[1], q[2], q[3])

    return transform_from_matrix


@_overloaded
def matrix_trs(S: Any) -> Any:
    Q, M44, V3 = T.quaternion(S), T.matrix((4, 4), S), T.vector(3, S)

    def matrix(pos: V3, rot: Q, scale: V3):
        """translate(pos) * rotate(rot) * scale(scale) as a 4x4 matrix."""
        r = quat_to_matrix(rot)
        return M44(r[0, 0] * scale[0], r[0, 1] * scale[1], r[0, 2] * scale[2], pos[0],
                   r[1, 0] * scale[0], r[1, 1] * scale[1], r[1, 2] * scale[2], pos[1],
                   r[2, 0] * scale[0], r[2, 1] * scale[1], r[2, 2] * scale[2], pos[2],
                   0.0, 0.0, 0.0, 1.0)

    return matrix
