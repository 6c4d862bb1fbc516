"""Builtins written in the kernel language itself: rotations and rigid transforms that branch or
compose other builtins. They compile like user functions, so their adjoints come from the adjoint
generator, and they have one overload per float precision (16, 32 and 64 bits), so a wrong argument
lists them all."""

from typing import Any

from . import types as T
from .builtins import BUILTINS
from .functions import Function, func

# ruff: noqa: N806, N803  (type parameters of the per-precision factories are capitalized like classes)

(abs_, asin, atan2, clamp, cross, determinant, dot, length, normalize, quat_from_axis_angle, quat_inverse,
 quat_rotate, quat_to_axis_angle, quat_to_matrix, spatial_bottom, spatial_top, sqrt) = (BUILTINS[n] for n in (
    "abs", "asin", "atan2", "clamp", "cross", "determinant", "dot", "length", "normalize", "quat_from_axis_angle",
    "quat_inverse", "quat_rotate", "quat_to_axis_angle", "quat_to_matrix", "spatial_bottom", "spatial_top", "sqrt"))
PRECISIONS = (T.float16, T.float32, T.float64)


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
        """Spherical interpolation from the rotation q0 (t = 0) to the rotation q1 (t = 1) the shorter way
        round, q0 exp(t log(q0^-1 q1)): the relative rotation's axis and angle (in [0, pi]) scaled by t, so
        t = 1 gives -q1 when dot(q0, q1) < 0 (q1 and -q1 are one rotation)."""
        axis, angle = quat_to_axis_angle(quat_inverse(q0) * q1)
        return q0 * quat_from_axis_angle(axis, t * angle)

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


@_overloaded
def transform_compose(S: Any) -> Any:
    Q, V3 = T.quaternion(S), T.vector(3, S)

    def transform_compose(position: V3, rotation: Q, scale: V3):
        """The 4x4 matrix translate(position) * rotate(rotation) * scale(scale)."""
        return matrix_trs(position, rotation, scale)

    return transform_compose


@_overloaded
def transform_decompose(S: Any) -> Any:
    M33, M44, V3 = T.matrix((3, 3), S), T.matrix((4, 4), S), T.vector(3, S)

    def transform_decompose(m: M44):
        """(position, rotation, scale) of a 4x4 matrix translate * rotate * scale: the scales are the
        column lengths of the upper-left block, all negated when it mirrors (negative determinant)."""
        s = V3(length(V3(m[0, 0], m[1, 0], m[2, 0])), length(V3(m[0, 1], m[1, 1], m[2, 1])),
               length(V3(m[0, 2], m[1, 2], m[2, 2])))
        r = M33(m[0, 0], m[0, 1], m[0, 2], m[1, 0], m[1, 1], m[1, 2], m[2, 0], m[2, 1], m[2, 2])
        if determinant(r) < 0.0:
            s = -s
        for c in range(3):
            if s[c] != 0.0:
                for row in range(3):
                    r[row, c] = r[row, c] / s[c]
        return V3(m[0, 3], m[1, 3], m[2, 3]), quat_from_matrix(r), s

    return transform_decompose


@func
def _euler_axes(i: int, j: int, k: int):
    """Whether i, j, k name an Euler axis sequence: axes in {0, 1, 2}, neighbours different."""
    return i >= 0 and i <= 2 and j >= 0 and j <= 2 and k >= 0 and k <= 2 and i != j and j != k


@_overloaded
def quat_from_euler(S: Any) -> Any:
    Q, V3 = T.quaternion(S), T.vector(3, S)

    def quat_from_euler(e: V3, i: int, j: int, k: int):
        """The rotation about fixed axes i, then j, then k by the angles e[i], e[j], e[k] (e[i] again
        when k == i): qk * qj * qi. Axis indices outside {0, 1, 2}, or j equal to i or k, give NaNs."""
        if not _euler_axes(i, j, k):
            nan = S(0.0) / S(0.0)
            return Q(nan, nan, nan, nan)
        ai = V3()
        ai[i] = 1.0
        aj = V3()
        aj[j] = 1.0
        ak = V3()
        ak[k] = 1.0
        return quat_from_axis_angle(ak, e[k]) * quat_from_axis_angle(aj, e[j]) * quat_from_axis_angle(ai, e[i])

    return quat_from_euler


@_overloaded
def quat_to_euler(S: Any) -> Any:
    Q, V3 = T.quaternion(S), T.vector(3, S)
    V2 = T.vector(2, S)
    tol = {T.float16: 1.0e-3, T.float32: 1.0e-6}.get(S, 1.0e-12)

    def quat_to_euler(q: Q, i: int, j: int, k: int):
        """The angles of q about fixed axes i, j, k (in that order), indexed by axis for i != k; for
        proper sequences (k == i) the third angle goes to e[3 - i - j]. At gimbal lock the angle about i
        is 0. Invalid axis indices give NaNs. (Bernardes and Viollet's direct method, 2022.)"""
        if not _euler_axes(i, j, k):
            nan = S(0.0) / S(0.0)
            return V3(nan, nan, nan)
        proper = i == k
        c = k
        if proper:
            c = 3 - i - j
        sign = S(((i - j) * (j - c) * (c - i)) // 2)
        w = q[3]
        a = w
        b = q[i]
        cc = q[j]
        d = q[c] * sign
        if not proper:
            a = w - q[j]
            b = q[i] + q[c] * sign
            cc = q[j] + w
            d = q[c] * sign - q[i]
        t2 = 2.0 * atan2(length(V2(cc, d)), length(V2(a, b)))
        half_sum = atan2(b, a)
        half_diff = atan2(d, cc)
        t1 = half_sum - half_diff
        t3 = half_sum + half_diff
        if t2 < tol:
            t1 = S(0.0)
            t3 = 2.0 * half_sum
        elif t2 > 3.141592653589793 - tol:
            t1 = S(0.0)
            t3 = 2.0 * half_diff
        if not proper:
            t3 = t3 * sign
            t2 = t2 - 1.5707963267948966
        e = V3()
        e[i] = t1
        e[j] = t2
        e[c] = t3
        return e

    return quat_to_euler


@_overloaded
def quat_twist(S: Any) -> Any:
    Q, V3 = T.quaternion(S), T.vector(3, S)

    def quat_twist(axis: V3, q: Q):
        """The twist of q about the unit axis (swing-twist decomposition); the identity when q turns by
        180 degrees about an axis perpendicular to it."""
        p = dot(V3(q[0], q[1], q[2]), axis) * axis
        t = Q(p[0], p[1], p[2], q[3])
        n = length(t)
        if n == 0.0:
            return Q(0.0, 0.0, 0.0, 1.0)
        return t / n

    return quat_twist


@_overloaded
def quat_twist_angle(S: Any) -> Any:
    Q, V3 = T.quaternion(S), T.vector(3, S)

    def quat_twist_angle(axis: V3, q: Q):
        """The unsigned angle of q's twist about the unit axis: in [0, pi] when q[3] >= 0."""
        return 2.0 * atan2(abs_(dot(V3(q[0], q[1], q[2]), axis)), q[3])

    return quat_twist_angle


@_overloaded
def quat_twist_angle_signed(S: Any) -> Any:
    Q, V3 = T.quaternion(S), T.vector(3, S)

    def quat_twist_angle_signed(axis: V3, q: Q):
        """The signed angle (right-handed about the unit axis) of q's twist: in [-pi, pi] when q[3] >= 0."""
        return 2.0 * atan2(dot(V3(q[0], q[1], q[2]), axis), q[3])

    return quat_twist_angle_signed


@_overloaded
def _rotated_parts(S: Any) -> Any:
    TR, SV, Q, V3 = T.transformation(S), T.vector(6, S), T.quaternion(S), T.vector(3, S)

    def rotated_parts(t: TR, x: SV):
        """t's translation, and x's top and bottom halves rotated by t's rotation."""
        q = Q(t[3], t[4], t[5], t[6])
        return V3(t[0], t[1], t[2]), quat_rotate(q, spatial_top(x)), quat_rotate(q, spatial_bottom(x))

    return rotated_parts


@_overloaded
def transform_twist(S: Any) -> Any:
    TR, SV = T.transformation(S), T.vector(6, S)

    def transform_twist(t: TR, x: SV):
        """The twist (angular w, linear v) in the frame t maps to: (R w, R v + p x R w)."""
        p, w, v = _rotated_parts(t, x)
        return SV(w, v + cross(p, w))

    return transform_twist


@_overloaded
def transform_wrench(S: Any) -> Any:
    TR, SV = T.transformation(S), T.vector(6, S)

    def transform_wrench(t: TR, x: SV):
        """The wrench (torque tau, force f) in the frame t maps to: (R tau + p x R f, R f)."""
        p, tau, f = _rotated_parts(t, x)
        return SV(tau + cross(p, f), f)

    return transform_wrench


@_overloaded
def velocity_at_point(S: Any) -> Any:
    SV, V3 = T.vector(6, S), T.vector(3, S)

    def velocity_at_point(qd: SV, r: V3):
        """The linear velocity v + w x r of the point at offset r on a body with twist (w, v)."""
        return spatial_bottom(qd) + cross(spatial_top(qd), r)

    return velocity_at_point
