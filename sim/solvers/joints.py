"""Joint forces for maximal-coordinate solvers: penalty springs that hold each joint's two frames
together along its locked directions, plus drives (PD targets), limits and ``control.joint_f`` along
its free ones, accumulated into ``body_f`` (force at the center of mass, torque; world frame)."""

from __future__ import annotations

from typing import Any

import loomwork as wp

from ..articulation import (
    _BALL,
    _D6,
    _DISTANCE,
    _FIXED,
    _FREE,
    _PRISMATIC,
    _REVOLUTE,
    euler_angles,
    euler_axes,
    euler_covectors,
    twist_angle,
)
from ..model import Control, Model, State


@wp.func
def joint_dof_force(q: float, qd: float, target_q: float, target_qd: float, target_ke: float, target_kd: float,
                    limit_lower: float, limit_upper: float, limit_ke: float, limit_kd: float):
    """Generalized force [N or N m] of one dof: the PD drive toward (target_q, target_qd), replaced by a
    penalty spring-damper back into [limit_lower, limit_upper] while the coordinate is outside it."""
    f = target_ke * (target_q - q) + target_kd * (target_qd - qd)
    if q < limit_lower:
        f = limit_ke * (limit_lower - q) - limit_kd * qd
    elif q > limit_upper:
        f = limit_ke * (limit_upper - q) - limit_kd * qd
    return f


@wp.func
def rotation_vector(r: wp.quat):
    """Axis times angle [rad] (angle in [0, pi]) of the unit quaternion ``r``."""
    v = wp.vec3(r[0], r[1], r[2])
    w = r[3]
    if w < 0.0:
        v = -v
        w = -w
    s = wp.length(v)
    if s < 1.0e-9:
        return v * 2.0
    return v * (2.0 * wp.atan2(s, w) / s)


@wp.func
def rotation_vector_covectors(t: wp.vec3):
    """Rows k map an angular velocity (frame of the rotation's base) to the rate of component k of the
    rotation vector ``t``: the inverse left Jacobian of SO(3), I - [t]/2 + b [t]^2."""
    # b = (1 - h cot h) / theta^2 with h = theta / 2; its series below 0.5 rad, where the difference cancels.
    theta = wp.length(t)
    h2 = 0.25 * theta * theta
    b = 1.0 / 12.0 + h2 / 180.0 + h2 * h2 / 1890.0
    if theta > 0.5:
        h = 0.5 * theta
        b = (1.0 - h * wp.cos(h) / wp.max(wp.sin(h), 1.0e-3)) / (theta * theta)
    K = wp.skew(t)
    return wp.identity(n=3, dtype=float) - K * 0.5 + K * K * b


@wp.func
def angular_coordinates(jt: int, joint_axis: wp.array(dtype=wp.vec3), start: int, na: int, r: wp.quat):
    """The three angular coordinates [rad] of a BALL joint (the rotation vector of ``r``, the child joint
    frame relative to the parent's) or of a D6 joint with ``na`` > 1 angular axes from ``start`` (intrinsic
    Euler angles)."""
    if jt == _BALL:
        return rotation_vector(r)
    a0, a1, a2 = euler_axes(joint_axis, start, na)
    return euler_angles(a0, a1, a2, r)


@wp.func
def angular_covectors(jt: int, joint_axis: wp.array(dtype=wp.vec3), start: int, na: int, t: wp.vec3):
    """Rows k map the relative angular velocity (parent joint frame) to the rate of angular coordinate k at
    coordinates ``t`` (see :func:`angular_coordinates`)."""
    if jt == _BALL:
        return rotation_vector_covectors(t)
    a0, a1, a2 = euler_axes(joint_axis, start, na)
    return euler_covectors(a0, a1, a2, t)


@wp.func
def angular_coordinate_of_dof(na: int, k: int):
    """Index among the three angular coordinates of angular dof ``k`` (two dofs skip the locked middle one)."""
    if na == 2 and k == 1:
        return 2
    return k


@wp.func
def angular_targets(jt: int, target_q: wp.array(dtype=float), start: int, na: int):
    """Targets [rad] of a BALL joint's or a multi-axis D6 joint's angular dofs, whose ``joint_target_q`` entries
    begin at ``start``: the rotation vector of a ball's target quaternion (xyzw; all zeros reads as no rotation),
    a D6 joint's per-dof angles."""
    if jt == _BALL:
        return rotation_vector(wp.quat(target_q[start], target_q[start + 1], target_q[start + 2],
                                       target_q[start + 3]))
    t1 = 0.0
    t2 = 0.0
    if na > 1:
        t1 = target_q[start + 1]
    if na > 2:
        t2 = target_q[start + 2]
    return wp.vec3(target_q[start], t1, t2)


@wp.func
def dof_drive(d: int, t: int, q: float, qd: float, joint_f: wp.array(dtype=float), target_q: wp.array(dtype=float),
              target_qd: wp.array(dtype=float), target_ke: wp.array(dtype=float),
              target_kd: wp.array(dtype=float), limit_lower: wp.array(dtype=float),
              limit_upper: wp.array(dtype=float), limit_ke: wp.array(dtype=float), limit_kd: wp.array(dtype=float),
              damping: wp.array(dtype=float)):
    """``joint_f`` plus the drive, limit and passive damping force of dof ``d`` (target coordinate ``t``) at
    coordinate ``q`` and velocity ``qd``."""
    return joint_f[d] - damping[d] * qd + joint_dof_force(q, qd, target_q[t], target_qd[d], target_ke[d],
                                                          target_kd[d], limit_lower[d], limit_upper[d], limit_ke[d],
                                                          limit_kd[d])


@wp.kernel
def joint_forces_kernel(body_q: wp.array(dtype=wp.transform), body_qd: wp.array(dtype=wp.spatial_vector),
                        body_com: wp.array(dtype=wp.vec3), joint_type: wp.array(dtype=wp.int32),
                        joint_enabled: wp.array(dtype=wp.int32), joint_parent: wp.array(dtype=wp.int32),
                        joint_child: wp.array(dtype=wp.int32), joint_q_start: wp.array(dtype=wp.int32),
                        joint_qd_start: wp.array(dtype=wp.int32),
                        joint_dof_dim: wp.array2d(dtype=wp.int32), joint_X_p: wp.array(dtype=wp.transform),
                        joint_X_c: wp.array(dtype=wp.transform), joint_axis: wp.array(dtype=wp.vec3),
                        joint_f: wp.array(dtype=float), target_q: wp.array(dtype=float),
                        target_qd: wp.array(dtype=float), target_ke: wp.array(dtype=float),
                        target_kd: wp.array(dtype=float), limit_lower: wp.array(dtype=float),
                        limit_upper: wp.array(dtype=float), limit_ke: wp.array(dtype=float),
                        limit_kd: wp.array(dtype=float), damping: wp.array(dtype=float), attach_ke: float,
                        attach_kd: float,
                        angular_kd_scale: float, body_f: wp.array(dtype=wp.spatial_vector)):
    j = wp.tid()
    if joint_enabled[j] == 0:
        return
    jtype = joint_type[j]
    parent = joint_parent[j]
    child = joint_child[j]
    ds = joint_qd_start[j]
    qs = joint_q_start[j]
    if jtype == _FREE or jtype == _DISTANCE:
        wp.atomic_add(body_f, child, wp.spatial_vector(joint_f[ds], joint_f[ds + 1], joint_f[ds + 2],
                                                       joint_f[ds + 3], joint_f[ds + 4], joint_f[ds + 5]))
        return
    X_wp = joint_X_p[j]
    c_p = wp.vec3(0.0)
    v_p = wp.vec3(0.0)
    w_p = wp.vec3(0.0)
    if parent >= 0:
        X_wp = wp.transform_multiply(body_q[parent], X_wp)
        c_p = wp.transform_point(body_q[parent], body_com[parent])
        w_p = wp.spatial_bottom(body_qd[parent])
    X_wc = wp.transform_multiply(body_q[child], joint_X_c[j])
    c_c = wp.transform_point(body_q[child], body_com[child])
    x_p = wp.transform_get_translation(X_wp)
    x_c = wp.transform_get_translation(X_wc)
    if parent >= 0:
        v_p = wp.spatial_top(body_qd[parent]) + wp.cross(w_p, x_p - c_p)
    w_c = wp.spatial_bottom(body_qd[child])
    v_c = wp.spatial_top(body_qd[child]) + wp.cross(w_c, x_c - c_c)
    r_p = wp.transform_get_rotation(X_wp)
    r_err = wp.quat_inverse(r_p) * wp.transform_get_rotation(X_wc)
    x_err = x_c - x_p
    v_err = v_c - v_p
    w_err = w_c - w_p
    lin_free = wp.vec3(0.0)  # the parts of x_err / v_err along free linear axes
    vel_free = wp.vec3(0.0)
    f = wp.vec3(0.0)  # force and torque on the child (the parent gets the opposite)
    t = wp.vec3(0.0)
    nl = joint_dof_dim[j, 0]
    na = joint_dof_dim[j, 1]
    if jtype == _PRISMATIC or jtype == _D6:
        for k in range(nl):
            a = wp.quat_rotate(r_p, joint_axis[ds + k])
            q = wp.dot(x_err, a)
            qd = wp.dot(v_err, a)
            lin_free = lin_free + a * q
            vel_free = vel_free + a * qd
            f = f + a * dof_drive(ds + k, qs + k, q, qd, joint_f, target_q, target_qd, target_ke, target_kd,
                                  limit_lower, limit_upper, limit_ke, limit_kd, damping)
    f = f - (x_err - lin_free) * attach_ke - (v_err - vel_free) * attach_kd
    one_axis = jtype == _REVOLUTE or (jtype == _D6 and na == 1)
    locked = jtype == _FIXED or jtype == _PRISMATIC or (jtype == _D6 and na == 0)
    if one_axis:
        a_local = joint_axis[ds + nl]
        a = wp.quat_rotate(r_p, a_local)
        a_c = wp.quat_rotate(wp.transform_get_rotation(X_wc), a_local)
        q = twist_angle(r_err, a_local)
        qd = wp.dot(w_err, a)
        t = a * dof_drive(ds + nl, qs + nl, q, qd, joint_f, target_q, target_qd, target_ke, target_kd, limit_lower,
                          limit_upper, limit_ke, limit_kd, damping)
        t = t + wp.cross(a_c, a) * attach_ke - (w_err - a * qd) * (attach_kd * angular_kd_scale)
    elif locked:
        t = -wp.quat_rotate(r_p, rotation_vector(r_err)) * attach_ke - w_err * (attach_kd * angular_kd_scale)
    elif jtype == _BALL or jtype == _D6:
        # Three angular coordinates (a ball's rotation vector, a D6 joint's Euler angles), each driven and limited
        # along its covector (the row that maps the relative angular velocity to its rate); joint_f and damping
        # act about a ball's axes and along a D6 joint's covectors, as in SolverXPBD.
        start = ds + nl
        ang = angular_coordinates(jtype, joint_axis, start, na, r_err)
        C = angular_covectors(jtype, joint_axis, start, na, ang)
        rates = C * wp.quat_rotate_inv(r_p, w_err)
        tgt = angular_targets(jtype, target_q, qs + nl, na)
        if na == 2:
            # The middle Euler angle of a two-axis D6 joint is locked at 0.
            g = wp.quat_rotate(r_p, wp.vec3(C[1, 0], C[1, 1], C[1, 2]))
            t = t - g * (ang[1] * attach_ke + rates[1] * attach_kd * angular_kd_scale)
        for k in range(na):
            i = angular_coordinate_of_dof(na, k)
            d = start + k
            g = wp.quat_rotate(r_p, wp.vec3(C[i, 0], C[i, 1], C[i, 2]))
            a = g
            if jtype == _BALL:
                a = wp.quat_rotate(r_p, joint_axis[d])
            t = t + a * (joint_f[d] - damping[d] * wp.dot(w_err, a))
            t = t + g * joint_dof_force(ang[i], rates[i], tgt[k], target_qd[d], target_ke[d], target_kd[d],
                                        limit_lower[d], limit_upper[d], limit_ke[d], limit_kd[d])
    wp.atomic_add(body_f, child, wp.spatial_vector(f, t + wp.cross(x_c - c_c, f)))
    if parent >= 0:
        wp.atomic_add(body_f, parent, wp.spatial_vector(-f, -t - wp.cross(x_p - c_p, f)))


def apply_joint_forces(model: Model, state: State, control: Control | None, body_f: wp.array, *,
                       joint_attach_ke: float = 1.0e4, joint_attach_kd: float = 1.0e2,
                       angular_kd_scale: float = 0.01) -> None:
    """Add every enabled joint's forces to ``body_f`` (shape (body_count,), spatial_vector: force [N] at
    the center of mass, torque [N m], world frame): springs of stiffness ``joint_attach_ke`` [N/m, N m/rad]
    and damping ``joint_attach_kd`` (times ``angular_kd_scale`` for rotations) along each joint's locked
    directions, and along its free ones the drive toward ``control.joint_target_q``/``joint_target_qd``
    (gains ``model.joint_target_ke``/``kd``), the limit penalty (``joint_limit_ke``/``kd``, replacing the
    drive outside the limits), the passive damping ``model.joint_damping`` (-damping qd) and
    ``control.joint_f``. A FREE joint adds its ``joint_f`` as a wrench on its child. A BALL joint's and a D6
    joint's angular coordinates when it has two or three angular axes (the rotation vector's components; the
    Euler angles about its axes, the middle one held at 0 by the attachment spring for two axes) take their
    drives and limits per coordinate, as torques along their covectors; a ball's target is the quaternion in its
    ``joint_target_q`` entries (laid out as ``joint_q``), driven toward as its rotation vector. Without
    ``control`` the model's defaults drive the joints."""
    if model.joint_count == 0:
        return
    src = control if control is not None else model

    def pick(name: str) -> Any:
        arr = getattr(src, name, None)
        return arr if arr is not None else getattr(model, name)

    wp.launch(joint_forces_kernel, dim=model.joint_count,
              inputs=[state.body_q, state.body_qd, model.body_com, model.joint_type, model.joint_enabled,
                      model.joint_parent, model.joint_child, model.joint_q_start, model.joint_qd_start,
                      model.joint_dof_dim, model.joint_X_p, model.joint_X_c, model.joint_axis, pick("joint_f"),
                      pick("joint_target_q"),
                      pick("joint_target_qd"), model.joint_target_ke, model.joint_target_kd,
                      model.joint_limit_lower, model.joint_limit_upper, model.joint_limit_ke, model.joint_limit_kd,
                      model.joint_damping, float(joint_attach_ke), float(joint_attach_kd), float(angular_kd_scale)],
              outputs=[body_f], device=model.device)
