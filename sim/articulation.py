"""Forward and inverse kinematics of articulations: joint coordinates <-> body frames and velocities.

Conventions follow Newton 1.8: a joint's child frame is ``X_wc = X_wp * X_pj * X_j(q) * inverse(X_cj)``;
``body_qd`` is (velocity of the center of mass, angular velocity), both world frame. Joint velocities
are expressed in the parent's joint frame ``X_wp * X_pj``; a FREE (or DISTANCE) joint's coordinates are
the child joint frame's position then rotation (xyzw) in that frame, and its velocities the linear
velocity of the child's center of mass then the angular velocity, both in that frame.

Both functions launch one kernel with a thread per joint; each thread walks up to its articulation's
root, so threads read only joint coordinates and model arrays (their adjoints need no replay of other
threads' writes and ``wp.Tape`` differentiates them).
"""

from __future__ import annotations

from typing import Any

import numpy as np

import loomwork as wp

from .enums import JointType

MAX_DEPTH = 32
"""Deepest joint chain (joints from a body to its articulation's root) the kinematics kernels accept."""

depth_vec = wp.types.vector(length=MAX_DEPTH, dtype=wp.int32)

_PRISMATIC = wp.constant(int(JointType.PRISMATIC))
_REVOLUTE = wp.constant(int(JointType.REVOLUTE))
_BALL = wp.constant(int(JointType.BALL))
_FIXED = wp.constant(int(JointType.FIXED))
_FREE = wp.constant(int(JointType.FREE))
_DISTANCE = wp.constant(int(JointType.DISTANCE))
_D6 = wp.constant(int(JointType.D6))


@wp.func
def euler_axes(joint_axis: wp.array(dtype=wp.vec3), start: int, count: int):
    """The axes, in order, of the intrinsic rotations that make the angular coordinates of a D6 joint with
    ``count`` (2 or 3) angular axes from ``start``; two axes a0, a1 give (a0, a0 x a1, a1), the middle locked."""
    a0 = wp.normalize(joint_axis[start])
    a1 = wp.normalize(joint_axis[start + 1])
    if count == 3:
        return a0, a1, wp.normalize(joint_axis[start + 2])
    return a0, wp.normalize(wp.cross(a0, a1)), a1


@wp.func
def euler_rotation(a0: wp.vec3, a1: wp.vec3, a2: wp.vec3, t: wp.vec3):
    """The rotation R(a0, t0) R(a1, t1) R(a2, t2): intrinsic turns about a0, then the turned a1, then a2."""
    return (wp.quat_from_axis_angle(a0, t[0]) * wp.quat_from_axis_angle(a1, t[1])
            * wp.quat_from_axis_angle(a2, t[2]))


@wp.func
def euler_angles(a0: wp.vec3, a1: wp.vec3, a2: wp.vec3, r: wp.quat):
    """The angles (t0, t1, t2) [rad] with ``r = euler_rotation(a0, a1, a2, t)`` for orthonormal axes (either
    handedness); t1 in [-pi/2, pi/2]."""
    a2r = wp.cross(a0, a1)
    s = 1.0
    if wp.dot(a2r, a2) < 0.0:
        s = -1.0
    B = wp.matrix_from_cols(a0, a1, a2r)
    M = wp.transpose(B) * wp.quat_to_matrix(r) * B  # = Rx(t0) Ry(t1) Rz(s t2)
    t1 = wp.asin(wp.clamp(M[0, 2], -1.0, 1.0))
    return wp.vec3(wp.atan2(-M[1, 2], M[2, 2]), t1, s * wp.atan2(-M[0, 1], M[0, 0]))


@wp.func
def euler_rates(a0: wp.vec3, a1: wp.vec3, a2: wp.vec3, t: wp.vec3):
    """The axes the three angle rates turn about at angles ``t`` (a0, a1 turned by t0, a2 turned by t0 and t1),
    as the columns of a matrix: the angular velocity is that matrix times the rates."""
    q0 = wp.quat_from_axis_angle(a0, t[0])
    return wp.matrix_from_cols(a0, wp.quat_rotate(q0, a1),
                               wp.quat_rotate(q0 * wp.quat_from_axis_angle(a1, t[1]), a2))


@wp.func
def euler_covectors(a0: wp.vec3, a1: wp.vec3, a2: wp.vec3, t: wp.vec3):
    """Rows k map an angular velocity to the rate of angle k at angles ``t`` (the inverse of
    :func:`euler_rates`, bounded near gimbal lock)."""
    W = euler_rates(a0, a1, a2, t)
    w0 = wp.vec3(W[0, 0], W[1, 0], W[2, 0])
    w1 = wp.vec3(W[0, 1], W[1, 1], W[2, 1])
    w2 = wp.vec3(W[0, 2], W[1, 2], W[2, 2])
    det = wp.dot(w0, wp.cross(w1, w2))
    if det >= 0.0:
        det = wp.max(det, 1.0e-4)
    else:
        det = wp.min(det, -1.0e-4)
    return wp.matrix_from_rows(wp.cross(w1, w2), wp.cross(w2, w0), wp.cross(w0, w1)) / det


@wp.func
def euler_of_dofs(v: wp.array(dtype=float), start: int, count: int):
    """The three Euler angles (or rates) of a D6 joint's ``count`` angular dofs stored from ``start`` (two
    dofs: the middle, locked angle is 0)."""
    if count == 3:
        return wp.vec3(v[start], v[start + 1], v[start + 2])
    return wp.vec3(v[start], 0.0, v[start + 1])


@wp.func
def joint_motion(jtype: int, q_start: int, qd_start: int, lin_count: int, ang_count: int,
                 joint_q: wp.array(dtype=float), joint_qd: wp.array(dtype=float),
                 joint_axis: wp.array(dtype=wp.vec3)):
    """The joint's transform ``X_j`` and its (linear, angular) velocity, in the parent joint frame."""
    p = wp.vec3(0.0)
    r = wp.quat_identity()
    v = wp.vec3(0.0)
    w = wp.vec3(0.0)
    if jtype == _PRISMATIC:
        a = joint_axis[qd_start]
        p = a * joint_q[q_start]
        v = a * joint_qd[qd_start]
    elif jtype == _REVOLUTE:
        a = joint_axis[qd_start]
        r = wp.quat_from_axis_angle(a, joint_q[q_start])
        w = a * joint_qd[qd_start]
    elif jtype == _BALL:
        r = wp.normalize(wp.quat(joint_q[q_start], joint_q[q_start + 1], joint_q[q_start + 2], joint_q[q_start + 3]))
        w = wp.vec3(joint_qd[qd_start], joint_qd[qd_start + 1], joint_qd[qd_start + 2])
    elif jtype == _FREE or jtype == _DISTANCE:
        p = wp.vec3(joint_q[q_start], joint_q[q_start + 1], joint_q[q_start + 2])
        r = wp.normalize(wp.quat(joint_q[q_start + 3], joint_q[q_start + 4], joint_q[q_start + 5],
                                 joint_q[q_start + 6]))
        v = wp.vec3(joint_qd[qd_start], joint_qd[qd_start + 1], joint_qd[qd_start + 2])
        w = wp.vec3(joint_qd[qd_start + 3], joint_qd[qd_start + 4], joint_qd[qd_start + 5])
    elif jtype == _D6:
        for k in range(lin_count):
            a = joint_axis[qd_start + k]
            p = p + a * joint_q[q_start + k]
            v = v + a * joint_qd[qd_start + k]
        if ang_count == 1:
            a = joint_axis[qd_start + lin_count]
            r = wp.quat_from_axis_angle(a, joint_q[q_start + lin_count])
            w = a * joint_qd[qd_start + lin_count]
        elif ang_count > 1:
            a0, a1, a2 = euler_axes(joint_axis, qd_start + lin_count, ang_count)
            t = euler_of_dofs(joint_q, q_start + lin_count, ang_count)
            r = euler_rotation(a0, a1, a2, t)
            w = euler_rates(a0, a1, a2, t) * euler_of_dofs(joint_qd, qd_start + lin_count, ang_count)
    return wp.transform(p, r), v, w


@wp.func
def child_pose_twist(jtype: int, X_wp: wp.transform, v_p: wp.vec3, w_p: wp.vec3, X_pj: wp.transform,
                     X_cj: wp.transform, X_j: wp.transform, v_j: wp.vec3, w_j: wp.vec3, com_c: wp.vec3):
    """Child frame and twist (velocity of the material point at the world origin, angular velocity) from
    the parent's, across a joint whose motion is ``X_j``, ``(v_j, w_j)`` in the parent joint frame."""
    X_wpj = wp.transform_multiply(X_wp, X_pj)
    X_wcj = wp.transform_multiply(X_wpj, X_j)
    X_wc = wp.transform_multiply(X_wcj, wp.transform_inverse(X_cj))
    lin = wp.transform_vector(X_wpj, v_j)
    ang = wp.transform_vector(X_wpj, w_j)
    ref = wp.transform_get_translation(X_wcj)
    if jtype == _FREE or jtype == _DISTANCE:
        ref = wp.transform_point(X_wc, com_c)  # the linear velocity is the child's center of mass
    return X_wc, v_p + lin - wp.cross(ang, ref), w_p + ang


@wp.func
def joint_chain(joint: int, body_joint: wp.array(dtype=wp.int32), joint_parent: wp.array(dtype=wp.int32),
                joint_articulation: wp.array(dtype=wp.int32)):
    """The joints from ``joint`` up to its articulation's root (``chain[0] = joint``) and their count."""
    chain = depth_vec()
    n = 0
    j = joint
    art = joint_articulation[joint]
    while j >= 0 and n < MAX_DEPTH:
        chain[n] = j
        n = n + 1
        parent = joint_parent[j]
        j = -1
        if parent >= 0:
            pj = body_joint[parent]
            if pj >= 0:
                if joint_articulation[pj] == art:
                    j = pj
    return chain, n


@wp.kernel
def eval_fk_kernel(joint_q: wp.array(dtype=float), joint_qd: wp.array(dtype=float),
                   mask: wp.array(dtype=wp.bool), body_joint: wp.array(dtype=wp.int32),
                   joint_type: wp.array(dtype=wp.int32), joint_parent: wp.array(dtype=wp.int32),
                   joint_child: wp.array(dtype=wp.int32), joint_articulation: wp.array(dtype=wp.int32),
                   joint_q_start: wp.array(dtype=wp.int32), joint_qd_start: wp.array(dtype=wp.int32),
                   joint_dof_dim: wp.array2d(dtype=wp.int32), joint_X_p: wp.array(dtype=wp.transform),
                   joint_X_c: wp.array(dtype=wp.transform), joint_axis: wp.array(dtype=wp.vec3),
                   body_com: wp.array(dtype=wp.vec3), base_q: wp.array(dtype=wp.transform),
                   base_qd: wp.array(dtype=wp.spatial_vector), body_q_out: wp.array(dtype=wp.transform),
                   body_qd_out: wp.array(dtype=wp.spatial_vector)):
    joint = wp.tid()
    art = joint_articulation[joint]
    if art < 0:
        return
    if mask:
        if not mask[art]:
            return
    chain, n = joint_chain(joint, body_joint, joint_parent, joint_articulation)
    # The root's parent: the world, or a body outside the articulation whose state is taken as given.
    root = chain[n - 1]
    X = wp.transform_identity()
    v = wp.vec3(0.0)
    w = wp.vec3(0.0)
    rp = joint_parent[root]
    if rp >= 0:
        X = base_q[rp]
        tw = base_qd[rp]
        w = wp.spatial_bottom(tw)
        v = wp.spatial_top(tw) - wp.cross(w, wp.transform_point(X, body_com[rp]))
    for k in range(n):
        j = chain[n - 1 - k]
        X_j, v_j, w_j = joint_motion(joint_type[j], joint_q_start[j], joint_qd_start[j], joint_dof_dim[j, 0],
                                     joint_dof_dim[j, 1], joint_q, joint_qd, joint_axis)
        X, v, w = child_pose_twist(joint_type[j], X, v, w, joint_X_p[j], joint_X_c[j], X_j, v_j, w_j,
                                   body_com[joint_child[j]])
    child = joint_child[joint]
    body_q_out[child] = X
    body_qd_out[child] = wp.spatial_vector(v + wp.cross(w, wp.transform_point(X, body_com[child])), w)


@wp.func
def twist_angle(r: wp.quat, axis: wp.vec3):
    """The signed angle [rad] in [-pi, pi] of the rotation ``r`` about the unit ``axis``."""
    s = wp.dot(wp.vec3(r[0], r[1], r[2]), axis)
    c = r[3]
    if c < 0.0:
        s = -s
        c = -c
    return 2.0 * wp.atan2(s, c)


@wp.kernel
def eval_ik_kernel(body_q: wp.array(dtype=wp.transform), body_qd: wp.array(dtype=wp.spatial_vector),
                   body_com: wp.array(dtype=wp.vec3), joint_type: wp.array(dtype=wp.int32),
                   joint_parent: wp.array(dtype=wp.int32), joint_child: wp.array(dtype=wp.int32),
                   joint_articulation: wp.array(dtype=wp.int32), joint_q_start: wp.array(dtype=wp.int32),
                   joint_qd_start: wp.array(dtype=wp.int32), joint_dof_dim: wp.array2d(dtype=wp.int32),
                   joint_X_p: wp.array(dtype=wp.transform), joint_X_c: wp.array(dtype=wp.transform),
                   joint_axis: wp.array(dtype=wp.vec3), joint_q_out: wp.array(dtype=float),
                   joint_qd_out: wp.array(dtype=float)):
    joint = wp.tid()
    parent = joint_parent[joint]
    child = joint_child[joint]
    X_wpj = joint_X_p[joint]
    v_p = wp.vec3(0.0)
    w_p = wp.vec3(0.0)
    if parent >= 0:
        X_wpj = wp.transform_multiply(body_q[parent], X_wpj)
        w_p = wp.spatial_bottom(body_qd[parent])
        v_p = wp.spatial_top(body_qd[parent]) - wp.cross(w_p, wp.transform_point(body_q[parent], body_com[parent]))
    X_wc = body_q[child]
    c_w = wp.transform_point(X_wc, body_com[child])
    w_c = wp.spatial_bottom(body_qd[child])
    v_c = wp.spatial_top(body_qd[child]) - wp.cross(w_c, c_w)
    X_wcj = wp.transform_multiply(X_wc, joint_X_c[joint])
    X_j = wp.transform_multiply(wp.transform_inverse(X_wpj), X_wcj)
    # Relative twist, then the joint's linear velocity at its reference point, both in the parent joint frame.
    w_rel = w_c - w_p
    v_rel = v_c - v_p
    jtype = joint_type[joint]
    ref = wp.transform_get_translation(X_wcj)
    if jtype == _FREE or jtype == _DISTANCE:
        ref = c_w
    lin = wp.transform_vector(wp.transform_inverse(X_wpj), v_rel + wp.cross(w_rel, ref))
    ang = wp.transform_vector(wp.transform_inverse(X_wpj), w_rel)
    p = wp.transform_get_translation(X_j)
    r = wp.transform_get_rotation(X_j)
    qs = joint_q_start[joint]
    ds = joint_qd_start[joint]
    if jtype == _PRISMATIC:
        a = joint_axis[ds]
        joint_q_out[qs] = wp.dot(p, a)
        joint_qd_out[ds] = wp.dot(lin, a)
    elif jtype == _REVOLUTE:
        a = joint_axis[ds]
        joint_q_out[qs] = twist_angle(r, a)
        joint_qd_out[ds] = wp.dot(ang, a)
    elif jtype == _BALL:
        for k in range(4):
            joint_q_out[qs + k] = r[k]
        for k in range(3):
            joint_qd_out[ds + k] = ang[k]
    elif jtype == _FREE or jtype == _DISTANCE:
        for k in range(3):
            joint_q_out[qs + k] = p[k]
            joint_qd_out[ds + k] = lin[k]
            joint_qd_out[ds + 3 + k] = ang[k]
        for k in range(4):
            joint_q_out[qs + 3 + k] = r[k]
    elif jtype == _D6:
        nl = joint_dof_dim[joint, 0]
        for k in range(nl):
            a = joint_axis[ds + k]
            joint_q_out[qs + k] = wp.dot(p, a)
            joint_qd_out[ds + k] = wp.dot(lin, a)
        na = joint_dof_dim[joint, 1]
        if na == 1:
            a = joint_axis[ds + nl]
            joint_q_out[qs + nl] = twist_angle(r, a)
            joint_qd_out[ds + nl] = wp.dot(ang, a)
        elif na > 1:
            a0, a1, a2 = euler_axes(joint_axis, ds + nl, na)
            t = euler_angles(a0, a1, a2, r)
            td = euler_covectors(a0, a1, a2, t) * ang
            joint_q_out[qs + nl] = t[0]
            joint_qd_out[ds + nl] = td[0]
            if na == 3:
                joint_q_out[qs + nl + 1] = t[1]
                joint_qd_out[ds + nl + 1] = td[1]
                joint_q_out[qs + nl + 2] = t[2]
                joint_qd_out[ds + nl + 2] = td[2]
            else:
                joint_q_out[qs + nl + 1] = t[2]
                joint_qd_out[ds + nl + 1] = td[2]


class _Topology:
    """Host-side facts about a model's joint trees the kinematics and solvers need (cached on the model)."""

    def __init__(self, model: Any) -> None:
        nb, nj = model.body_count, model.joint_count
        parent = model.joint_parent.numpy() if nj else np.zeros(0, np.int32)
        child = model.joint_child.numpy() if nj else np.zeros(0, np.int32)
        art = model.joint_articulation.numpy() if nj else np.zeros(0, np.int32)
        body_joint = np.full(nb, -1, dtype=np.int32)
        body_joint[child] = np.arange(nj, dtype=np.int32)
        self.body_joint = body_joint
        self.depth = np.zeros(nj, dtype=np.int32)
        for j in range(nj):
            p = parent[j]
            pj = body_joint[p] if p >= 0 else -1
            self.depth[j] = 1 + (self.depth[pj] if pj >= 0 and pj < j and art[pj] == art[j] else 0)
            if self.depth[j] > MAX_DEPTH:
                raise ValueError(f"joint {j} ({model.joint_label[j]!r}) is {self.depth[j]} joints below its "
                                 f"articulation's root; the kinematics kernels take at most {MAX_DEPTH}")
        self.body_joint_wp = wp.array(body_joint, dtype=wp.int32, device=model.device)


def topology(model: Any) -> _Topology:
    """The model's cached :class:`_Topology` (built on first use)."""
    topo = model.__dict__.get("_artic_topology")
    if topo is None:
        topo = _Topology(model)
        model.__dict__["_artic_topology"] = topo
    return topo


def _check_array(what: str, name: str, arr: Any, length: int) -> None:
    if arr is None or len(arr) != length:
        got = "None" if arr is None else f"length {len(arr)}"
        raise ValueError(f"{what}: {name} must have length {length}, got {got}")


def eval_fk(model: Any, joint_q: wp.array, joint_qd: wp.array, state: Any, mask: wp.array | None = None) -> None:
    """Set ``state.body_q`` and ``state.body_qd`` of every joint's child body from the joint coordinates
    ``joint_q`` (shape (joint_coord_count,)) and velocities ``joint_qd`` (shape (joint_dof_count,)).
    ``state`` is a :class:`State` or anything with those two arrays (a :class:`Model`). With ``mask``
    (bool, shape (articulation_count,)) only the articulations where it is True are updated. Joints
    outside any articulation are left alone; a root joint's parent body outside the articulation keeps
    the pose and velocity ``state`` gives it."""
    if model.joint_count == 0:
        return
    _check_array("eval_fk", "joint_q", joint_q, model.joint_coord_count)
    _check_array("eval_fk", "joint_qd", joint_qd, model.joint_dof_count)
    if mask is not None:
        _check_array("eval_fk", "mask", mask, model.articulation_count)
    topo = topology(model)
    wp.launch(eval_fk_kernel, dim=model.joint_count,
              inputs=[joint_q, joint_qd, mask, topo.body_joint_wp, model.joint_type,
                      model.joint_parent, model.joint_child, model.joint_articulation, model.joint_q_start,
                      model.joint_qd_start, model.joint_dof_dim, model.joint_X_p, model.joint_X_c, model.joint_axis,
                      model.body_com, state.body_q, state.body_qd],
              outputs=[state.body_q, state.body_qd], device=model.device)


def eval_ik(model: Any, state: Any, joint_q: wp.array, joint_qd: wp.array) -> None:
    """Set ``joint_q`` and ``joint_qd`` from the body frames and velocities of ``state`` (the inverse of
    :func:`eval_fk` for states that satisfy the joints; otherwise the nearest coordinates: a revolute
    angle is the twist about its axis, in [-pi, pi])."""
    if model.joint_count == 0:
        return
    _check_array("eval_ik", "joint_q", joint_q, model.joint_coord_count)
    _check_array("eval_ik", "joint_qd", joint_qd, model.joint_dof_count)
    wp.launch(eval_ik_kernel, dim=model.joint_count,
              inputs=[state.body_q, state.body_qd, model.body_com, model.joint_type, model.joint_parent,
                      model.joint_child, model.joint_articulation, model.joint_q_start, model.joint_qd_start,
                      model.joint_dof_dim, model.joint_X_p, model.joint_X_c, model.joint_axis],
              outputs=[joint_q, joint_qd], device=model.device)
