"""The Featherstone step as three kernels, each with one thread per articulation:
:func:`bias_kernel` runs forward kinematics of the input coordinates and the recursive Newton-Euler bias
terms, :func:`solve_kernel` the composite-rigid-body mass matrix, a Cholesky solve for the joint
accelerations and semi-implicit Euler on the joint coordinates, and :func:`fk_kernel` poses the bodies
from the new coordinates. (One fused kernel gave the same results, but gcc compiled its single large
body to much slower code.)

Within a kernel everything lives in the thread's local matrices, sized per kernel by its joint and dof
bucket; between kernels the per-joint terms travel in arrays no kernel both reads and writes, so
``wp.Tape`` differentiates a step like any other launches.

Spatial quantities are world frame, referred to the world origin: a twist is (velocity of the material
point at the origin, angular velocity), a wrench (force, torque about the origin), an inertia the
triple (mass m, first moment h = m c, rotational inertia about the origin Io).
"""

from __future__ import annotations

from typing import Any

import loomwork as wp

from ...articulation import (
    _BALL,
    _D6,
    _DISTANCE,
    _FREE,
    _PRISMATIC,
    _REVOLUTE,
    euler_axes,
    euler_of_dofs,
    euler_rates,
    joint_motion,
)
from ..joints import angular_coordinate_of_dof, joint_dof_force, rotation_vector, rotation_vector_covectors

# Each thread steps a whole articulation: worth the thread pool from a few dozen of them on.
HEAVY_THREADS = {"cpu_serial_threshold": 64}


@wp.func
def inertia_apply(m: float, h: wp.vec3, Io: wp.mat33, v: wp.vec3, w: wp.vec3):
    """Momentum (linear, angular about the origin) of a body of inertia (m, h, Io) moving with twist (v, w)."""
    return v * m + wp.cross(w, h), Io * w + wp.cross(h, v)


@wp.func
def origin_inertia(m: float, c: wp.vec3, r: wp.quat, I_com: wp.mat33):
    """Rotational inertia about the world origin of a body of mass ``m`` [kg], center ``c`` and inertia
    ``I_com`` about its center in its own frame, rotated by ``r``."""
    R = wp.quat_to_matrix(r)
    return R * I_com * wp.transpose(R) + (wp.identity(3, dtype=float) * wp.dot(c, c) - wp.outer(c, c)) * m


@wp.func
def quat_integrate(r: wp.quat, w: wp.vec3, dt: float):
    """The rotation ``r`` advanced by angular velocity ``w`` (in the frame ``r`` maps into) over ``dt``."""
    return wp.normalize(r + wp.quat(w[0], w[1], w[2], 0.0) * r * (0.5 * dt))


_KERNELS: dict[tuple[int, int, bool], Any] = {}


def bias_kernel(max_joints: int, backward: bool) -> Any:
    """The first kernel of a step, for articulations of at most ``max_joints`` joints: forward kinematics of
    the input coordinates and, per joint, the motion subspace columns (``s_lin``/``s_ang``, per dof), the
    bias wrench (``bias_f``/``bias_t``) and the child's inertia about the origin (``inertia_m``/``_h``/``_I``)
    for :func:`solve_kernel`. With ``backward`` it has its adjoint (each variant is a module of its own)."""
    key = (max_joints, 0, bool(backward))
    if key in _KERNELS:
        return _KERNELS[key]
    NJ = max_joints
    mat_j3 = wp.types.matrix(shape=(NJ, 3), dtype=float)
    mat_j4 = wp.types.matrix(shape=(NJ, 4), dtype=float)

    @wp.kernel(enable_backward=bool(backward),
               module=f"loomwork.sim.solvers.featherstone.bias_{NJ}{'_grad' if backward else ''}",
               module_options=HEAVY_THREADS)
    def featherstone_bias(
            # model
            art_count: int, art_start: wp.array(dtype=wp.int32), art_world: wp.array(dtype=wp.int32),
            gravity: wp.array(dtype=wp.vec3), joint_type: wp.array(dtype=wp.int32),
            joint_parent: wp.array(dtype=wp.int32), joint_child: wp.array(dtype=wp.int32),
            parent_joint: wp.array(dtype=wp.int32), joint_q_start: wp.array(dtype=wp.int32),
            joint_qd_start: wp.array(dtype=wp.int32), joint_dof_dim: wp.array2d(dtype=wp.int32),
            joint_X_p: wp.array(dtype=wp.transform), joint_X_c_inv: wp.array(dtype=wp.transform),
            joint_axis: wp.array(dtype=wp.vec3), body_com: wp.array(dtype=wp.vec3),
            body_mass: wp.array(dtype=float), body_inertia: wp.array(dtype=wp.mat33),
            # state in
            joint_q: wp.array(dtype=float), joint_qd: wp.array(dtype=float),
            body_q: wp.array(dtype=wp.transform), body_qd: wp.array(dtype=wp.spatial_vector),
            body_f: wp.array(dtype=wp.spatial_vector),
            # out: per dof, then per joint
            s_lin: wp.array(dtype=wp.vec3), s_ang: wp.array(dtype=wp.vec3), bias_f: wp.array(dtype=wp.vec3),
            bias_t: wp.array(dtype=wp.vec3), inertia_m: wp.array(dtype=float), inertia_h: wp.array(dtype=wp.vec3),
            inertia_I: wp.array(dtype=wp.mat33)):
        art = wp.tid()
        if art >= art_count:
            return
        j0 = art_start[art]
        nj = art_start[art + 1] - j0
        g = gravity[wp.max(art_world[art], 0)]
        pos = mat_j3()  # body origins
        rot = mat_j4()  # body rotations (xyzw)
        tv = mat_j3()  # twists
        tw = mat_j3()
        # --- forward pass: kinematics, bias accelerations and forces ---------------------------------------
        av = mat_j3()
        aw = mat_j3()
        for k in range(nj):
            j = j0 + k
            jt = joint_type[j]
            pl = parent_joint[j]
            p_wp = wp.vec3(0.0)  # the parent body's frame (position, rotation), twist and bias acceleration
            r_wp = wp.quat_identity()
            v_p = wp.vec3(0.0)
            w_p = wp.vec3(0.0)
            a_v = wp.vec3(0.0)
            a_w = wp.vec3(0.0)
            if pl >= 0:
                pk = pl - j0
                rq = rot[pk]
                p_wp = pos[pk]
                r_wp = wp.quat(rq[0], rq[1], rq[2], rq[3])
                v_p = tv[pk]
                w_p = tw[pk]
                a_v = av[pk]
                a_w = aw[pk]
            elif joint_parent[j] >= 0:
                pb = joint_parent[j]
                X_b = body_q[pb]
                p_wp = wp.transform_get_translation(X_b)
                r_wp = wp.transform_get_rotation(X_b)
                w_p = wp.spatial_bottom(body_qd[pb])
                v_p = wp.spatial_top(body_qd[pb]) - wp.cross(w_p, wp.transform_point(X_b, body_com[pb]))
            qs = joint_q_start[j]
            ds = joint_qd_start[j]
            nl = joint_dof_dim[j, 0]
            na = joint_dof_dim[j, 1]
            child = joint_child[j]
            p_j = wp.vec3(0.0)  # the joint's motion: joint_motion's, with no call for the single-axis joints
            r_j = wp.quat_identity()
            v_j = wp.vec3(0.0)
            w_j = wp.vec3(0.0)
            if jt == _REVOLUTE:
                a_j = joint_axis[ds]
                r_j = wp.quat_from_axis_angle(a_j, joint_q[qs])
                w_j = a_j * joint_qd[ds]
            elif jt == _PRISMATIC:
                a_j = joint_axis[ds]
                p_j = a_j * joint_q[qs]
                v_j = a_j * joint_qd[ds]
            else:
                X_j, v_j, w_j = joint_motion(jt, qs, ds, nl, na, joint_q, joint_qd, joint_axis)
                p_j = wp.transform_get_translation(X_j)
                r_j = wp.transform_get_rotation(X_j)
            # Child frame X_wc = X_wp X_pj X_j inverse(X_cj), each product written out as (p, r) pairs.
            X_pj = joint_X_p[j]
            r_pj = r_wp * wp.transform_get_rotation(X_pj)  # the parent joint frame X_wpj
            p_pj = p_wp + wp.quat_rotate(r_wp, wp.transform_get_translation(X_pj))
            r_cj = r_pj * r_j  # the child joint frame X_wpj X_j
            ref = p_pj + wp.quat_rotate(r_pj, p_j)
            X_ci = joint_X_c_inv[j]
            r_c = r_cj * wp.transform_get_rotation(X_ci)
            p_c = ref + wp.quat_rotate(r_cj, wp.transform_get_translation(X_ci))
            c = p_c + wp.quat_rotate(r_c, body_com[child])
            ang = wp.quat_rotate(r_pj, w_j)
            ref_v = ref
            if jt == _FREE or jt == _DISTANCE:
                ref_v = c  # the linear velocity is the child's center of mass
            v = v_p + wp.quat_rotate(r_pj, v_j) - wp.cross(ang, ref_v)
            w = w_p + ang
            pos[k] = p_c
            rot[k] = wp.vec4(r_c[0], r_c[1], r_c[2], r_c[3])
            tv[k] = v
            tw[k] = w
            # Motion subspace in world frame, referred to the origin.
            if jt == _FREE or jt == _DISTANCE:
                for i in range(3):
                    e = wp.vec3(0.0)
                    e[i] = 1.0
                    a = wp.quat_rotate(r_pj, e)
                    s_lin[ds + i] = a
                    s_ang[ds + i] = wp.vec3(0.0)
                    s_lin[ds + 3 + i] = wp.cross(c, a)
                    s_ang[ds + 3 + i] = a
            elif jt == _BALL:
                for i in range(3):
                    e = wp.vec3(0.0)
                    e[i] = 1.0
                    a = wp.quat_rotate(r_pj, e)
                    s_lin[ds + i] = wp.cross(ref, a)
                    s_ang[ds + i] = a
            elif jt == _PRISMATIC or jt == _REVOLUTE or jt == _D6:
                # A D6 joint with several angular axes turns its Euler angle rates about the columns of W(t).
                W = wp.identity(n=3, dtype=float)
                if jt == _D6 and na > 1:
                    e0, e1, e2 = euler_axes(joint_axis, ds + nl, na)
                    W = euler_rates(e0, e1, e2, euler_of_dofs(joint_q, qs + nl, na))
                for i in range(nl + na):
                    a = wp.quat_rotate(r_pj, joint_axis[ds + i])
                    if i < nl:
                        s_lin[ds + i] = a
                        s_ang[ds + i] = wp.vec3(0.0)
                    else:
                        if na > 1:
                            c3 = angular_coordinate_of_dof(na, i - nl)
                            a = wp.quat_rotate(r_pj, wp.vec3(W[0, c3], W[1, c3], W[2, c3]))
                        s_lin[ds + i] = wp.cross(ref, a)
                        s_ang[ds + i] = a
            # Velocity-product acceleration: (dS/dt) qd.
            rv = v - v_p
            rw = w - w_p
            if jt == _FREE or jt == _DISTANCE:
                a_v = a_v + wp.cross(v + wp.cross(w, c), rw)
            else:
                a_v = a_v + wp.cross(w_p, rv) + wp.cross(v_p, rw)
                a_w = a_w + wp.cross(w_p, rw)
                if jt == _D6:  # the angular axes pivot about a point the linear dofs move
                    a_v = a_v + wp.cross(wp.quat_rotate(r_pj, v_j), rw)
                if jt == _D6 and na > 1:
                    # The Euler rate axes turn with the angles before them: W-dot times the rates.
                    e0, e1, e2 = euler_axes(joint_axis, ds + nl, na)
                    td = euler_of_dofs(joint_qd, ds + nl, na)
                    W = euler_rates(e0, e1, e2, euler_of_dofs(joint_q, qs + nl, na))
                    w0 = wp.vec3(W[0, 0], W[1, 0], W[2, 0]) * td[0]
                    w1 = wp.vec3(W[0, 1], W[1, 1], W[2, 1]) * td[1]
                    w2 = wp.vec3(W[0, 2], W[1, 2], W[2, 2]) * td[2]
                    dw = wp.quat_rotate(r_pj, wp.cross(w0, w1) + wp.cross(w0 + w1, w2))
                    a_v = a_v + wp.cross(ref, dw)
                    a_w = a_w + dw
            av[k] = a_v
            aw[k] = a_w
            # Inertia about the origin; bias wrench I a + v x* (I v) - f_ext.
            m = body_mass[child]
            h = c * m
            Io = origin_inertia(m, c, r_c, body_inertia[child])
            inertia_m[j] = m
            inertia_h[j] = h
            inertia_I[j] = Io
            p_l, p_a = inertia_apply(m, h, Io, v, w)
            a_l, a_a = inertia_apply(m, h, Io, a_v, a_w)
            f_ext = wp.spatial_top(body_f[child]) + g * m
            t_ext = wp.spatial_bottom(body_f[child]) + wp.cross(c, f_ext)
            bias_f[j] = a_l + wp.cross(w, p_l) - f_ext
            bias_t[j] = a_a + wp.cross(w, p_a) + wp.cross(v, p_l) - t_ext

    _KERNELS[key] = featherstone_bias
    return featherstone_bias


def solve_kernel(max_joints: int, max_dofs: int, backward: bool) -> Any:
    """The second kernel of a step, for articulations of at most ``max_joints`` joints and ``max_dofs``
    dofs: from :func:`bias_kernel`'s per-joint terms, the composite inertias, the joint-space mass matrix
    and bias, the joint forces, a Cholesky solve for the accelerations and semi-implicit Euler on the
    coordinates. With ``backward`` it has its adjoint (each variant is a module of its own)."""
    key = (max_joints, max_dofs, bool(backward))
    if key in _KERNELS:
        return _KERNELS[key]
    NJ = max_joints
    ND = max_dofs
    mat_j3 = wp.types.matrix(shape=(NJ, 3), dtype=float)
    mat_j9 = wp.types.matrix(shape=(NJ, 9), dtype=float)
    vec_j = wp.types.vector(length=NJ, dtype=float)
    mat_d3 = wp.types.matrix(shape=(ND, 3), dtype=float)
    mat_dd = wp.types.matrix(shape=(ND, ND), dtype=float)
    vec_d = wp.types.vector(length=ND, dtype=float)

    @wp.kernel(enable_backward=bool(backward),
               module=f"loomwork.sim.solvers.featherstone.step_{NJ}x{ND}{'_grad' if backward else ''}",
               module_options=HEAVY_THREADS)
    def featherstone_step(
            # model
            art_count: int, art_start: wp.array(dtype=wp.int32), joint_type: wp.array(dtype=wp.int32),
            joint_child: wp.array(dtype=wp.int32), parent_joint: wp.array(dtype=wp.int32),
            joint_q_start: wp.array(dtype=wp.int32), joint_qd_start: wp.array(dtype=wp.int32),
            joint_X_c: wp.array(dtype=wp.transform), armature: wp.array(dtype=float),
            damping: wp.array(dtype=float), limit_lower: wp.array(dtype=float), limit_upper: wp.array(dtype=float),
            limit_ke: wp.array(dtype=float), limit_kd: wp.array(dtype=float), target_ke: wp.array(dtype=float),
            target_kd: wp.array(dtype=float), body_com: wp.array(dtype=wp.vec3),
            # state in, control and bias_kernel's terms
            joint_q: wp.array(dtype=float), joint_qd: wp.array(dtype=float), joint_f: wp.array(dtype=float),
            target_q: wp.array(dtype=float), target_qd: wp.array(dtype=float), s_lin: wp.array(dtype=wp.vec3),
            s_ang: wp.array(dtype=wp.vec3), bias_f: wp.array(dtype=wp.vec3), bias_t: wp.array(dtype=wp.vec3),
            inertia_m: wp.array(dtype=float), inertia_h: wp.array(dtype=wp.vec3),
            inertia_I: wp.array(dtype=wp.mat33), angular_damping: float, dt: float,
            # state out
            joint_q_out: wp.array(dtype=float), joint_qd_out: wp.array(dtype=float)):
        art = wp.tid()
        if art >= art_count:
            return
        j0 = art_start[art]
        nj = art_start[art + 1] - j0
        d0 = joint_qd_start[j0]
        nd = joint_qd_start[j0 + nj] - d0
        fl = mat_j3()  # wrenches the joints transmit (bias forces, then accumulated to the root)
        ft = mat_j3()
        cm = vec_j()  # composite inertias
        ch = mat_j3()
        ci = mat_j9()
        for k in range(nj):
            j = j0 + k
            fl[k] = bias_f[j]
            ft[k] = bias_t[j]
            cm[k] = inertia_m[j]
            ch[k] = inertia_h[j]
            Io = inertia_I[j]
            for r3 in range(3):
                for s3 in range(3):
                    ci[k, r3 * 3 + s3] = Io[r3, s3]
        sv = mat_d3()  # motion subspace columns
        sw = mat_d3()
        for i in range(nd):
            sv[i] = s_lin[d0 + i]
            sw[i] = s_ang[d0 + i]
        # --- backward pass: joint-space bias, composite inertias and the mass matrix -----------------------
        H = mat_dd()
        tau = vec_d()
        for kk in range(nj):
            k = nj - 1 - kk
            j = j0 + k
            ds = joint_qd_start[j] - d0
            n = joint_qd_start[j + 1] - joint_qd_start[j]
            m = cm[k]
            h = ch[k]
            Io = wp.mat33(ci[k, 0], ci[k, 1], ci[k, 2], ci[k, 3], ci[k, 4], ci[k, 5], ci[k, 6], ci[k, 7], ci[k, 8])
            for i in range(n):
                tau[ds + i] = -(wp.dot(sv[ds + i], fl[k]) + wp.dot(sw[ds + i], ft[k]))
                f_l, f_a = inertia_apply(m, h, Io, sv[ds + i], sw[ds + i])
                # Column ds + i against this joint's dofs and every ancestor's.
                anc = k
                while anc >= 0:
                    ja = j0 + anc
                    das = joint_qd_start[ja] - d0
                    na = joint_qd_start[ja + 1] - joint_qd_start[ja]
                    for r in range(na):
                        hv = wp.dot(sv[das + r], f_l) + wp.dot(sw[das + r], f_a)
                        H[das + r, ds + i] = hv
                        H[ds + i, das + r] = hv
                    pa = parent_joint[ja]
                    anc = -1
                    if pa >= 0:
                        anc = pa - j0
            pl = parent_joint[j]
            if pl >= 0:
                pk = pl - j0
                fl[pk] = fl[pk] + fl[k]
                ft[pk] = ft[pk] + ft[k]
                cm[pk] = cm[pk] + m
                ch[pk] = ch[pk] + h
                for r in range(9):
                    ci[pk, r] = ci[pk, r] + ci[k, r]
        # --- joint forces: control, drives, limits and passive damping; armature ------------------------------
        for k in range(nj):
            j = j0 + k
            jt = joint_type[j]
            qs = joint_q_start[j]
            ds = joint_qd_start[j]
            n = joint_qd_start[j + 1] - ds
            for i in range(n):
                d = ds + i
                c = 0.0
                if jt != _FREE and jt != _DISTANCE:
                    c = damping[d]
                # Passive damping -c qd, implicit in the step: c dt joins the diagonal (stable for any c).
                H[d - d0, d - d0] = H[d - d0, d - d0] + armature[d] + c * dt
                tau[d - d0] = tau[d - d0] + joint_f[d] - c * joint_qd[d]
                if jt == _PRISMATIC or jt == _REVOLUTE or jt == _D6:
                    # Scalars, not arrays, cross the call: an array argument is copied whole.
                    tau[d - d0] = tau[d - d0] + joint_dof_force(
                        joint_q[qs + i], joint_qd[d], target_q[qs + i], target_qd[d], target_ke[d], target_kd[d],
                        limit_lower[d], limit_upper[d], limit_ke[d], limit_kd[d])
            if jt == _BALL:
                # Drives and limits act on the rotation vector's components t_i: each generalized force f_i
                # reaches the angular velocity dofs through the covector C_i (rate of t_i = C_i . qd).
                rv = rotation_vector(wp.quat(joint_q[qs], joint_q[qs + 1], joint_q[qs + 2], joint_q[qs + 3]))
                C = rotation_vector_covectors(rv)
                # The target is a quaternion in the joint's coordinate slots, driven toward as its rotation vector.
                tgt = rotation_vector(wp.quat(target_q[qs], target_q[qs + 1], target_q[qs + 2], target_q[qs + 3]))
                rates = C * wp.vec3(joint_qd[ds], joint_qd[ds + 1], joint_qd[ds + 2])
                for i in range(3):
                    d = ds + i
                    f = joint_dof_force(rv[i], rates[i], tgt[i], target_qd[d], target_ke[d], target_kd[d],
                                        limit_lower[d], limit_upper[d], limit_ke[d], limit_kd[d])
                    for r3 in range(3):
                        tau[ds - d0 + r3] = tau[ds - d0 + r3] + C[i, r3] * f
        # --- H qdd = tau by Cholesky ---------------------------------------------------------------------------
        L = mat_dd()
        for col in range(nd):
            acc = H[col, col]
            for k in range(col):
                acc = acc - L[col, k] * L[col, k]
            dg = wp.sqrt(wp.max(acc, 1.0e-12))
            L[col, col] = dg
            for row in range(col + 1, nd):
                acc2 = H[row, col]
                for k in range(col):
                    acc2 = acc2 - L[row, k] * L[col, k]
                L[row, col] = acc2 / dg
        y = vec_d()
        for row in range(nd):
            acc = tau[row]
            for k in range(row):
                acc = acc - L[row, k] * y[k]
            y[row] = acc / L[row, row]
        for back in range(nd):
            row = nd - 1 - back
            acc = y[row]
            for k in range(row + 1, nd):
                acc = acc - L[k, row] * y[k]
            y[row] = acc / L[row, row]
        # --- semi-implicit Euler on the joint coordinates (fk_kernel poses the bodies) ------------------------
        for k in range(nj):
            j = j0 + k
            jt = joint_type[j]
            qs = joint_q_start[j]
            ds = joint_qd_start[j]
            n = joint_qd_start[j + 1] - ds
            if jt == _FREE or jt == _DISTANCE:
                vl = wp.vec3(joint_qd[ds], joint_qd[ds + 1], joint_qd[ds + 2])
                vl = vl + wp.vec3(y[ds - d0], y[ds - d0 + 1], y[ds - d0 + 2]) * dt
                wa = wp.vec3(joint_qd[ds + 3], joint_qd[ds + 4], joint_qd[ds + 5])
                wa = (wa + wp.vec3(y[ds - d0 + 3], y[ds - d0 + 4], y[ds - d0 + 5]) * dt) * (1.0 - angular_damping * dt)
                p = wp.vec3(joint_q[qs], joint_q[qs + 1], joint_q[qs + 2])
                r0 = wp.quat(joint_q[qs + 3], joint_q[qs + 4], joint_q[qs + 5], joint_q[qs + 6])
                com_c = wp.transform_point(wp.transform_inverse(joint_X_c[j]), body_com[joint_child[j]])
                c_j = p + wp.quat_rotate(r0, com_c) + vl * dt  # center of mass in the parent joint frame
                r1 = quat_integrate(r0, wa, dt)
                p1 = c_j - wp.quat_rotate(r1, com_c)
                for i in range(3):
                    joint_q_out[qs + i] = p1[i]
                    joint_qd_out[ds + i] = vl[i]
                    joint_qd_out[ds + 3 + i] = wa[i]
                for i in range(4):
                    joint_q_out[qs + 3 + i] = r1[i]
            elif jt == _BALL:
                wa = wp.vec3(joint_qd[ds], joint_qd[ds + 1], joint_qd[ds + 2])
                wa = wa + wp.vec3(y[ds - d0], y[ds - d0 + 1], y[ds - d0 + 2]) * dt
                r0 = wp.quat(joint_q[qs], joint_q[qs + 1], joint_q[qs + 2], joint_q[qs + 3])
                r1 = quat_integrate(r0, wa, dt)
                for i in range(3):
                    joint_qd_out[ds + i] = wa[i]
                for i in range(4):
                    joint_q_out[qs + i] = r1[i]
            else:
                for i in range(n):
                    qd1 = joint_qd[ds + i] + y[ds - d0 + i] * dt
                    joint_qd_out[ds + i] = qd1
                    joint_q_out[qs + i] = joint_q[qs + i] + qd1 * dt

    _KERNELS[key] = featherstone_step
    return featherstone_step


def fk_kernel(max_joints: int, backward: bool) -> Any:
    """Forward kinematics of the step's new coordinates, one thread per articulation of at most
    ``max_joints`` joints: ``body_q``/``body_qd`` of every child from ``joint_q``/``joint_qd``, a root whose
    parent body lies outside the articulation taking that body's frame and twist from the step's input
    state. (A kernel of its own: fused into the step kernel, it made the compiled step slower.)"""
    key = (max_joints, -1, bool(backward))
    if key in _KERNELS:
        return _KERNELS[key]
    NJ = max_joints
    mat_j3 = wp.types.matrix(shape=(NJ, 3), dtype=float)
    mat_j4 = wp.types.matrix(shape=(NJ, 4), dtype=float)

    @wp.kernel(enable_backward=bool(backward),
               module=f"loomwork.sim.solvers.featherstone.fk_{NJ}{'_grad' if backward else ''}",
               module_options=HEAVY_THREADS)
    def featherstone_fk(
            # model
            art_count: int, art_start: wp.array(dtype=wp.int32), joint_type: wp.array(dtype=wp.int32),
            joint_parent: wp.array(dtype=wp.int32), joint_child: wp.array(dtype=wp.int32),
            parent_joint: wp.array(dtype=wp.int32), joint_q_start: wp.array(dtype=wp.int32),
            joint_qd_start: wp.array(dtype=wp.int32), joint_dof_dim: wp.array2d(dtype=wp.int32),
            joint_X_p: wp.array(dtype=wp.transform), joint_X_c_inv: wp.array(dtype=wp.transform),
            joint_axis: wp.array(dtype=wp.vec3), body_com: wp.array(dtype=wp.vec3),
            # state in (bodies outside the articulations) and the step's new coordinates
            body_q: wp.array(dtype=wp.transform), body_qd: wp.array(dtype=wp.spatial_vector),
            joint_q: wp.array(dtype=float), joint_qd: wp.array(dtype=float),
            # state out
            body_q_out: wp.array(dtype=wp.transform), body_qd_out: wp.array(dtype=wp.spatial_vector)):
        art = wp.tid()
        if art >= art_count:
            return
        j0 = art_start[art]
        nj = art_start[art + 1] - j0
        pos = mat_j3()
        rot = mat_j4()
        tv = mat_j3()
        tw = mat_j3()
        for k in range(nj):
            j = j0 + k
            pl = parent_joint[j]
            p_wp = wp.vec3(0.0)  # the parent body's frame (position, rotation) and twist
            r_wp = wp.quat_identity()
            v_p = wp.vec3(0.0)
            w_p = wp.vec3(0.0)
            if pl >= 0:
                pk = pl - j0
                rq = rot[pk]
                p_wp = pos[pk]
                r_wp = wp.quat(rq[0], rq[1], rq[2], rq[3])
                v_p = tv[pk]
                w_p = tw[pk]
            elif joint_parent[j] >= 0:
                pb = joint_parent[j]
                X_b = body_q[pb]
                p_wp = wp.transform_get_translation(X_b)
                r_wp = wp.transform_get_rotation(X_b)
                w_p = wp.spatial_bottom(body_qd[pb])
                v_p = wp.spatial_top(body_qd[pb]) - wp.cross(w_p, wp.transform_point(X_b, body_com[pb]))
            jt = joint_type[j]
            child = joint_child[j]
            qs = joint_q_start[j]
            ds = joint_qd_start[j]
            p_j = wp.vec3(0.0)  # the joint's motion: joint_motion's, with no call for the single-axis joints
            r_j = wp.quat_identity()
            v_j = wp.vec3(0.0)
            w_j = wp.vec3(0.0)
            if jt == _REVOLUTE:
                a_j = joint_axis[ds]
                r_j = wp.quat_from_axis_angle(a_j, joint_q[qs])
                w_j = a_j * joint_qd[ds]
            elif jt == _PRISMATIC:
                a_j = joint_axis[ds]
                p_j = a_j * joint_q[qs]
                v_j = a_j * joint_qd[ds]
            else:
                X_j, v_j, w_j = joint_motion(jt, qs, ds, joint_dof_dim[j, 0], joint_dof_dim[j, 1], joint_q, joint_qd,
                                             joint_axis)
                p_j = wp.transform_get_translation(X_j)
                r_j = wp.transform_get_rotation(X_j)
            # As child_pose_twist: X_wc = X_wp X_pj X_j inverse(X_cj), each product written out as (p, r) pairs.
            X_pj = joint_X_p[j]
            r_pj = r_wp * wp.transform_get_rotation(X_pj)
            p_pj = p_wp + wp.quat_rotate(r_wp, wp.transform_get_translation(X_pj))
            r_cj = r_pj * r_j
            ref = p_pj + wp.quat_rotate(r_pj, p_j)
            X_ci = joint_X_c_inv[j]
            r_c = r_cj * wp.transform_get_rotation(X_ci)
            p_c = ref + wp.quat_rotate(r_cj, wp.transform_get_translation(X_ci))
            c = p_c + wp.quat_rotate(r_c, body_com[child])
            ang = wp.quat_rotate(r_pj, w_j)
            ref_v = ref
            if jt == _FREE or jt == _DISTANCE:
                ref_v = c
            v = v_p + wp.quat_rotate(r_pj, v_j) - wp.cross(ang, ref_v)
            w = w_p + ang
            pos[k] = p_c
            rot[k] = wp.vec4(r_c[0], r_c[1], r_c[2], r_c[3])
            tv[k] = v
            tw[k] = w
            body_q_out[child] = wp.transform(p_c, r_c)
            body_qd_out[child] = wp.spatial_vector(v + wp.cross(w, c), w)

    _KERNELS[key] = featherstone_fk
    return featherstone_fk


@wp.kernel
def copy_bodies_kernel(indices: wp.array(dtype=wp.int32), body_q: wp.array(dtype=wp.transform),
                       body_qd: wp.array(dtype=wp.spatial_vector), body_q_out: wp.array(dtype=wp.transform),
                       body_qd_out: wp.array(dtype=wp.spatial_vector)):
    i = indices[wp.tid()]
    body_q_out[i] = body_q[i]
    body_qd_out[i] = body_qd[i]


@wp.kernel
def invert_transforms_kernel(xf: wp.array(dtype=wp.transform), xf_out: wp.array(dtype=wp.transform)):
    i = wp.tid()
    xf_out[i] = wp.transform_inverse(xf[i])
