"""Joint constraints of SolverXPBD, after Mueller et al. 2020 (Detailed Rigid Body Simulation with XPBD).

Each joint's parent frame (``body_q[parent] * joint_X_p``) and child frame (``body_q[child] * joint_X_c``) are
pulled together: the attachment points along the joint's locked linear directions, the orientations along its
locked angular directions, each correction split between the two bodies by their generalized inverse masses (a
DISTANCE joint only keeps the distance between the frames' origins inside its limits, a negative bound meaning
none). A BALL joint and a D6 joint with two or three angular axes have three angular coordinates (the rotation
vector's components; Euler angles, the middle one locked for two axes), each corrected along its covector, the
row of the map from relative angular velocity to its rate. Along free directions a coordinate outside its
limits is pushed back as a hard inequality constraint, and inside them the drive (``joint_target_ke``/``kd``
toward ``joint_target_q``/``qd``) acts as a compliant constraint, solved implicitly over the step: each sweep
takes the impulse it applied in the earlier sweeps (``lam_in``, per dof) and adds its change (``lam_out``),
so the converged impulse is backward Euler's for any number of sweeps. With a compliance > 0 (``alpha``) the
locked directions and the limits are XPBD's compliant constraints too (Macklin et al. 2016): each carries the
impulse it applied in the step's earlier sweeps (``lock_in``/``lock_out`` per joint, a vector along the locked
directions; ``limit_in``/``limit_out`` per dof, one-sided) and takes ``dlam = -(C + alpha lam) / (w + alpha)``,
so a compliant joint's stiffness does not depend on the number of sweeps; rigid ones (``alpha`` = 0) are
re-solved each sweep and scaled by the pass's relaxation.
``control.joint_f`` and the passive damping ``joint_damping`` enter the prediction as forces
(:func:`joint_force_kernel`).

The sweeps are Jacobi sweeps with mass splitting: each joint's solve takes a body's inverse mass times the
number of joints on it (:func:`whole_count_kernel`) and applies its impulse whole and opposite to its two bodies
(linear impulse, angular impulse about the center of mass; world frame; summed into a fresh ``whole`` array, so
a ``wp.Tape`` differentiates every sweep). Averaging the impulses per body instead would give a joint's two
bodies unequal shares of its impulse wherever they carry different numbers of joints (a chain's end link and
its inner ones), so the joints would push the chain as a whole and change its energy at any sweep count. Linear
and angular constraints run as separate passes so each takes its own relaxation.
"""

from __future__ import annotations

import loomwork as wp

from ...articulation import _BALL, _D6, _DISTANCE, _FIXED, _FREE, _PRISMATIC, _REVOLUTE, twist_angle
from ..joints import (
    angular_coordinate_of_dof,
    angular_coordinates,
    angular_covectors,
    angular_targets,
    rotation_vector,
)


@wp.func
def world_inv_inertia(q: wp.transform, inv_inertia: wp.mat33):
    """The body's inverse inertia [1/(kg m^2)] in world frame."""
    R = wp.quat_to_matrix(wp.transform_get_rotation(q))
    return R * inv_inertia * wp.transpose(R)


@wp.func
def linear_weight(inv_mass: float, Iinv_w: wp.mat33, r: wp.vec3, n: wp.vec3):
    """Generalized inverse mass of a body for an impulse along unit ``n`` at lever arm ``r`` from its center."""
    rn = wp.cross(r, n)
    return inv_mass + wp.dot(rn, Iinv_w * rn)


@wp.func
def compliant_step(c: float, dc: float, w: float, ke: float, kd: float, dt: float, lam: float):
    """Change of the impulse [N s or N m s] of a drive with stiffness ``ke`` and damping ``kd`` on a coordinate
    ``c`` away from its target that changed by ``dc`` (minus the target velocity times dt) over the step, for the
    generalized inverse mass ``w``, when ``lam`` is the impulse it applied in this step's earlier sweeps: one
    Newton step on ``lam + dt (ke c + kd dc / dt) dt = 0``, backward Euler on ``-ke c - kd dc / dt`` (XPBD's
    compliance ``1 / ke``). Once the sweeps converge the total impulse is that of backward Euler, however many
    sweeps ran."""
    return -(lam + dt * dt * ke * c + dt * kd * dc) / (1.0 + w * (dt * dt * ke + dt * kd))


@wp.func
def hard_step(c: float, w: float):
    """Impulse of a rigid constraint ``c = 0`` for the generalized inverse mass ``w``."""
    if w <= 0.0:
        return 0.0
    return -c / w


@wp.func
def lock_step(c: float, w: float, alpha: float, lam: float):
    """Change of the impulse of a constraint ``c = 0`` with compliance ``alpha`` > 0 (divided by dt^2) that has
    applied ``lam`` in this step's earlier sweeps (XPBD: ``-(c + alpha lam) / (w + alpha)``)."""
    return -(c + alpha * lam) / (w + alpha)


@wp.func
def limit_step(q: float, lower: float, upper: float, w: float, alpha: float, lam: float):
    """Change of the impulse ``lam`` (applied in this step's earlier sweeps) of the compliant limits [lower,
    upper] on ``q``: a bound acts while ``q`` is beyond it or it still pushes, and never pulls (the upper one's
    impulse stays <= 0, the lower one's >= 0)."""
    if q > upper or lam < 0.0:
        return wp.min(lam + lock_step(q - upper, w, alpha, lam), 0.0) - lam
    if q < lower or lam > 0.0:
        return wp.max(lam + lock_step(q - lower, w, alpha, lam), 0.0) - lam
    return 0.0


@wp.func
def dof_step(q: float, q_start: float, w: float, lower: float, upper: float, target_q: float, target_qd: float,
             ke: float, kd: float, alpha: float, dt: float, lam: float, lam_limit: float):
    """Impulses along one free dof at coordinate ``q`` (``q_start`` at the step's start; generalized inverse
    mass ``w``, each body's share split among the joints on it): the rigid limits' push back into [lower,
    upper] (first; ``alpha`` = 0), else the change of the compliant limits' impulse (second; ``alpha`` > 0,
    which applied ``lam_limit`` in this step's earlier sweeps), else, inside the limits, the change of the
    drive's (third), which has applied ``lam``."""
    if alpha > 0.0:
        dl = limit_step(q, lower, upper, w, alpha, lam_limit)
        if lam_limit + dl != 0.0 or dl != 0.0:
            return 0.0, dl, 0.0
    elif q < lower:
        return hard_step(q - lower, w), 0.0, 0.0
    elif q > upper:
        return hard_step(q - upper, w), 0.0, 0.0
    if ke == 0.0 and kd == 0.0:
        return 0.0, 0.0, 0.0
    return 0.0, 0.0, compliant_step(q - target_q, q - q_start - target_qd * dt, w, ke, kd, dt, lam)


@wp.func
def split_weight(angular: int, n_p: float, m_p: float, I_p: wp.mat33, a_p: wp.vec3, n_c: float, m_c: float,
                 I_c: wp.mat33, a_c: wp.vec3, n: wp.vec3):
    """Generalized inverse mass of a joint along unit ``n`` (an angular direction when ``angular``, else a
    linear one at lever arms ``a_p``/``a_c``), each body's share times its count ``n_p``/``n_c`` of joints."""
    if angular == 1:
        return n_p * wp.dot(n, I_p * n) + n_c * wp.dot(n, I_c * n)
    return n_p * linear_weight(m_p, I_p, a_p, n) + n_c * linear_weight(m_c, I_c, a_c, n)


@wp.func
def lock_vector_step(angular: int, c: wp.vec3, lam: wp.vec3, alpha: float, n_p: float, m_p: float, I_p: wp.mat33,
                     a_p: wp.vec3, n_c: float, m_c: float, I_c: wp.mat33, a_c: wp.vec3):
    """Change of the impulse ``lam`` (applied in this step's earlier sweeps) of a compliant vector constraint
    ``c = 0`` (``alpha`` > 0): :func:`lock_step` along the residual ``c + alpha lam``."""
    r = c + lam * alpha
    cr = wp.length(r)
    if cr <= 1.0e-12:
        return wp.vec3(0.0)
    n = r / cr
    return n * lock_step(cr, split_weight(angular, n_p, m_p, I_p, a_p, n_c, m_c, I_c, a_c, n), alpha, 0.0)


@wp.func
def wrap_angle(a: float):
    """``a`` [rad] moved into [-pi, pi]."""
    return wp.atan2(wp.sin(a), wp.cos(a))


@wp.func
def joint_frames(body_q: wp.array(dtype=wp.transform), parent: int, child: int, X_p: wp.transform,
                 X_c: wp.transform):
    """World frames of the joint on its parent (the world when ``parent`` < 0) and on its child."""
    X_wp = X_p
    if parent >= 0:
        X_wp = wp.transform_multiply(body_q[parent], X_p)
    return X_wp, wp.transform_multiply(body_q[child], X_c)


@wp.func
def add_whole_impulse(whole: wp.array(dtype=wp.spatial_vector), body: int, inv_mass: wp.array(dtype=float),
                      p: wp.vec3, l: wp.vec3):
    """Record a joint's impulse on ``body`` if it is dynamic (applied whole, not averaged)."""
    if body >= 0:
        if inv_mass[body] > 0.0:
            wp.atomic_add(whole, body, wp.spatial_vector(p, l))


@wp.kernel
def whole_count_kernel(joint_type: wp.array(dtype=wp.int32), joint_enabled: wp.array(dtype=wp.int32),
                       joint_parent: wp.array(dtype=wp.int32), joint_child: wp.array(dtype=wp.int32),
                       linear: wp.array(dtype=float), angular: wp.array(dtype=float)):
    """Per body, the number of joints that act on it in the linear and in the angular pass: the mass splitting
    that lets the Jacobi sweeps apply every joint's impulse whole to both its bodies."""
    j = wp.tid()
    jt = joint_type[j]
    if joint_enabled[j] == 0 or jt == _FREE:
        return
    ang = 1.0
    if jt == _DISTANCE:
        ang = 0.0
    parent = joint_parent[j]
    child = joint_child[j]
    wp.atomic_add(linear, child, 1.0)
    wp.atomic_add(angular, child, ang)
    if parent >= 0:
        wp.atomic_add(linear, parent, 1.0)
        wp.atomic_add(angular, parent, ang)


@wp.kernel
def joint_linear_kernel(body_q: wp.array(dtype=wp.transform), body_q_start: wp.array(dtype=wp.transform),
                        body_com: wp.array(dtype=wp.vec3), inv_mass: wp.array(dtype=float),
                        inv_inertia: wp.array(dtype=wp.mat33), joint_type: wp.array(dtype=wp.int32),
                        joint_enabled: wp.array(dtype=wp.int32), joint_parent: wp.array(dtype=wp.int32),
                        joint_child: wp.array(dtype=wp.int32), joint_q_start: wp.array(dtype=wp.int32),
                        joint_qd_start: wp.array(dtype=wp.int32),
                        joint_dof_dim: wp.array2d(dtype=wp.int32), joint_X_p: wp.array(dtype=wp.transform),
                        joint_X_c: wp.array(dtype=wp.transform), joint_axis: wp.array(dtype=wp.vec3),
                        limit_lower: wp.array(dtype=float), limit_upper: wp.array(dtype=float),
                        target_ke: wp.array(dtype=float), target_kd: wp.array(dtype=float),
                        target_q: wp.array(dtype=float), target_qd: wp.array(dtype=float), alpha: float,
                        relaxation: float, dt: float, lam_in: wp.array(dtype=float),
                        limit_in: wp.array(dtype=float), lock_in: wp.array(dtype=wp.vec3),
                        whole_count: wp.array(dtype=float), whole: wp.array(dtype=wp.spatial_vector),
                        lam_out: wp.array(dtype=float),
                        limit_out: wp.array(dtype=float), lock_out: wp.array(dtype=wp.vec3)):
    j = wp.tid()
    jt = joint_type[j]
    if joint_enabled[j] == 0 or jt == _FREE:
        return
    parent = joint_parent[j]
    child = joint_child[j]
    X_wp, X_wc = joint_frames(body_q, parent, child, joint_X_p[j], joint_X_c[j])
    x_p = wp.transform_get_translation(X_wp)
    x_c = wp.transform_get_translation(X_wc)
    r_p = wp.transform_get_rotation(X_wp)
    # Lever arms and world inverse inertias of both bodies (zero for the world and static bodies).
    m_p = 0.0
    I_p = wp.mat33(0.0)
    a_p = wp.vec3(0.0)
    n_p = 0.0
    if parent >= 0:
        m_p = inv_mass[parent]
        I_p = world_inv_inertia(body_q[parent], inv_inertia[parent])
        a_p = x_p - wp.transform_point(body_q[parent], body_com[parent])
        n_p = whole_count[parent]
    m_c = inv_mass[child]
    I_c = world_inv_inertia(body_q[child], inv_inertia[child])
    a_c = x_c - wp.transform_point(body_q[child], body_com[child])
    n_c = whole_count[child]
    d = x_c - x_p
    p_total = wp.vec3(0.0)
    p_whole = wp.vec3(0.0)
    locked = d
    lock = lock_in[j]
    if jt == _DISTANCE:
        # Only the distance between the frames' origins is held, inside [lower, upper] (a negative bound: none).
        locked = wp.vec3(0.0)
        ds = joint_qd_start[j]
        lower = limit_lower[ds]
        upper = limit_upper[ds]
        if lower < 0.0:
            lower = -1.0
        if upper < 0.0:
            upper = 1.0e30
        l = wp.length(d)
        if l > 1.0e-9:
            n = d / l
            if alpha > 0.0:
                dl = limit_step(l, lower, upper, split_weight(0, n_p, m_p, I_p, a_p, n_c, m_c, I_c, a_c, n), alpha,
                                lock[0])
                lock = wp.vec3(lock[0] + dl, 0.0, 0.0)
                p_whole = n * dl
            elif l < lower:
                p_total = n * hard_step(l - lower, split_weight(0, n_p, m_p, I_p, a_p, n_c, m_c, I_c, a_c, n))
            elif l > upper:
                p_total = n * hard_step(l - upper, split_weight(0, n_p, m_p, I_p, a_p, n_c, m_c, I_c, a_c, n))
    if jt == _PRISMATIC or jt == _D6:
        X_wp0, X_wc0 = joint_frames(body_q_start, parent, child, joint_X_p[j], joint_X_c[j])
        d0 = wp.transform_get_translation(X_wc0) - wp.transform_get_translation(X_wp0)
        r_p0 = wp.transform_get_rotation(X_wp0)
        ds = joint_qd_start[j]
        qs = joint_q_start[j]
        for k in range(joint_dof_dim[j, 0]):
            ax = joint_axis[ds + k]
            a = wp.quat_rotate(r_p, ax)
            q = wp.dot(d, a)
            locked = locked - a * q
            lock = lock - a * wp.dot(lock, a)  # the locked impulse has no part along a free axis
            q0 = wp.dot(d0, wp.quat_rotate(r_p0, ax))
            dl, dlim, dlam = dof_step(q, q0, split_weight(0, n_p, m_p, I_p, a_p, n_c, m_c, I_c, a_c, a),
                                      limit_lower[ds + k], limit_upper[ds + k], target_q[qs + k], target_qd[ds + k],
                                      target_ke[ds + k], target_kd[ds + k], alpha, dt, lam_in[ds + k],
                                      limit_in[ds + k])
            lam_out[ds + k] = lam_in[ds + k] + dlam
            limit_out[ds + k] = limit_in[ds + k] + dlim
            p_total = p_total + a * dl
            p_whole = p_whole + a * (dlim + dlam)
    if jt != _DISTANCE:
        if alpha > 0.0:
            dlock = lock_vector_step(0, locked, lock, alpha, n_p, m_p, I_p, a_p, n_c, m_c, I_c, a_c)
            lock = lock + dlock
            p_whole = p_whole + dlock
        else:
            c = wp.length(locked)
            if c > 1.0e-9:
                n = locked / c
                p_total = p_total + n * hard_step(c, split_weight(0, n_p, m_p, I_p, a_p, n_c, m_c, I_c, a_c, n))
    lock_out[j] = lock
    p_whole = p_whole + p_total * relaxation
    if wp.length(p_whole) > 0.0:
        add_whole_impulse(whole, child, inv_mass, p_whole, wp.cross(a_c, p_whole))
        add_whole_impulse(whole, parent, inv_mass, -p_whole, -wp.cross(a_p, p_whole))


@wp.kernel
def joint_angular_kernel(body_q: wp.array(dtype=wp.transform), body_q_start: wp.array(dtype=wp.transform),
                         inv_mass: wp.array(dtype=float), inv_inertia: wp.array(dtype=wp.mat33),
                         joint_type: wp.array(dtype=wp.int32), joint_enabled: wp.array(dtype=wp.int32),
                         joint_parent: wp.array(dtype=wp.int32), joint_child: wp.array(dtype=wp.int32),
                         joint_q_start: wp.array(dtype=wp.int32), joint_qd_start: wp.array(dtype=wp.int32),
                         joint_dof_dim: wp.array2d(dtype=wp.int32), joint_X_p: wp.array(dtype=wp.transform),
                         joint_X_c: wp.array(dtype=wp.transform), joint_axis: wp.array(dtype=wp.vec3),
                         limit_lower: wp.array(dtype=float),
                         limit_upper: wp.array(dtype=float), target_ke: wp.array(dtype=float),
                         target_kd: wp.array(dtype=float), target_q: wp.array(dtype=float),
                         target_qd: wp.array(dtype=float), alpha: float, relaxation: float, dt: float,
                         lam_in: wp.array(dtype=float), limit_in: wp.array(dtype=float),
                         lock_in: wp.array(dtype=wp.vec3), whole_count: wp.array(dtype=float),
                         whole: wp.array(dtype=wp.spatial_vector),
                         lam_out: wp.array(dtype=float), limit_out: wp.array(dtype=float),
                         lock_out: wp.array(dtype=wp.vec3)):
    j = wp.tid()
    jt = joint_type[j]
    if joint_enabled[j] == 0 or jt == _FREE or jt == _DISTANCE:
        return
    na = joint_dof_dim[j, 1]
    parent = joint_parent[j]
    child = joint_child[j]
    X_wp, X_wc = joint_frames(body_q, parent, child, joint_X_p[j], joint_X_c[j])
    r_p = wp.transform_get_rotation(X_wp)
    r_c = wp.transform_get_rotation(X_wc)
    I_p = wp.mat33(0.0)
    n_p = 0.0
    if parent >= 0:
        I_p = world_inv_inertia(body_q[parent], inv_inertia[parent])
        n_p = whole_count[parent]
    I_c = world_inv_inertia(body_q[child], inv_inertia[child])
    n_c = whole_count[child]
    r_err = wp.quat_inverse(r_p) * r_c
    l_total = wp.vec3(0.0)
    l_whole = wp.vec3(0.0)
    lock = lock_in[j]
    zero = wp.vec3(0.0)
    locked = wp.vec3(0.0)  # the rotation (world frame) the locked directions undo: none for BALL and D6 (na > 1)
    if jt == _REVOLUTE or (jt == _D6 and na == 1):
        ds = joint_qd_start[j]
        nl = joint_dof_dim[j, 0]
        ax = joint_axis[ds + nl]
        a = wp.quat_rotate(r_p, ax)
        # Keep the hinge axes of both frames aligned (the child's axis is turned from the parent's by e).
        e = wp.cross(a, wp.quat_rotate(r_c, ax))
        c = wp.length(e)
        if c > 1.0e-9:
            locked = e * (wp.asin(wp.min(c, 1.0)) / c)
        lock = lock - a * wp.dot(lock, a)
        X_wp0, X_wc0 = joint_frames(body_q_start, parent, child, joint_X_p[j], joint_X_c[j])
        q = twist_angle(r_err, ax)
        q0 = twist_angle(wp.quat_inverse(wp.transform_get_rotation(X_wp0)) * wp.transform_get_rotation(X_wc0), ax)
        d = ds + nl
        w = split_weight(1, n_p, 0.0, I_p, zero, n_c, 0.0, I_c, zero, a)
        dl, dlim, dlam = dof_step(q, q - wrap_angle(q - q0), w, limit_lower[d], limit_upper[d],
                                  target_q[joint_q_start[j] + nl], target_qd[d], target_ke[d], target_kd[d], alpha, dt,
                                  lam_in[d], limit_in[d])
        lam_out[d] = lam_in[d] + dlam
        limit_out[d] = limit_in[d] + dlim
        l_total = l_total + a * dl
        l_whole = l_whole + a * (dlim + dlam)
    elif jt == _BALL or (jt == _D6 and na > 1):
        # Three angular coordinates, each limited and driven along its own direction (its covector); the middle
        # one of a D6 joint with two angular axes is locked at 0 (its impulse in the first entry of ``lock``).
        ds = joint_qd_start[j]
        start = ds + joint_dof_dim[j, 0]
        if jt == _BALL:
            start = ds
        X_wp0, X_wc0 = joint_frames(body_q_start, parent, child, joint_X_p[j], joint_X_c[j])
        r_err0 = wp.quat_inverse(wp.transform_get_rotation(X_wp0)) * wp.transform_get_rotation(X_wc0)
        t = angular_coordinates(jt, joint_axis, start, na, r_err)
        t0 = angular_coordinates(jt, joint_axis, start, na, r_err0)
        C = angular_covectors(jt, joint_axis, start, na, t)
        tgt = angular_targets(jt, target_q, joint_q_start[j] + start - ds, na)
        if na == 2:
            g = wp.quat_rotate(r_p, wp.vec3(C[1, 0], C[1, 1], C[1, 2]))
            w = split_weight(1, n_p, 0.0, I_p, zero, n_c, 0.0, I_c, zero, g)
            if alpha > 0.0:
                dm = lock_step(t[1], w, alpha, lock[0])
                lock = wp.vec3(lock[0] + dm, 0.0, 0.0)
                l_whole = g * dm
            else:
                l_total = g * hard_step(t[1], w)
        for k in range(na):
            i = angular_coordinate_of_dof(na, k)
            g = wp.quat_rotate(r_p, wp.vec3(C[i, 0], C[i, 1], C[i, 2]))
            d = start + k
            dl, dlim, dlam = dof_step(t[i], t[i] - wrap_angle(t[i] - t0[i]),
                                      split_weight(1, n_p, 0.0, I_p, zero, n_c, 0.0, I_c, zero, g), limit_lower[d],
                                      limit_upper[d], tgt[k], target_qd[d], target_ke[d], target_kd[d], alpha, dt,
                                      lam_in[d], limit_in[d])
            lam_out[d] = lam_in[d] + dlam
            limit_out[d] = limit_in[d] + dlim
            l_total = l_total + g * dl
            l_whole = l_whole + g * (dlim + dlam)
    else:
        # FIXED, PRISMATIC and D6 without angular dofs: the child frame's rotation relative to the parent's.
        locked = wp.quat_rotate(r_p, rotation_vector(r_err))
    if jt == _BALL or (jt == _D6 and na > 1):
        lock_out[j] = lock
    elif alpha > 0.0:
        dlock = lock_vector_step(1, locked, lock, alpha, n_p, 0.0, I_p, zero, n_c, 0.0, I_c, zero)
        lock_out[j] = lock + dlock
        l_whole = l_whole + dlock
    else:
        c = wp.length(locked)
        if c > 1.0e-9:
            n = locked / c
            l_total = l_total + n * hard_step(c, split_weight(1, n_p, 0.0, I_p, zero, n_c, 0.0, I_c, zero, n))
    l_whole = l_whole + l_total * relaxation
    if wp.length(l_whole) > 0.0:
        add_whole_impulse(whole, child, inv_mass, zero, l_whole)
        add_whole_impulse(whole, parent, inv_mass, zero, -l_whole)


@wp.kernel
def joint_force_kernel(body_q: wp.array(dtype=wp.transform), body_qd: wp.array(dtype=wp.spatial_vector),
                       body_com: wp.array(dtype=wp.vec3), inv_mass: wp.array(dtype=float),
                       inv_inertia: wp.array(dtype=wp.mat33), joint_type: wp.array(dtype=wp.int32),
                       joint_enabled: wp.array(dtype=wp.int32), joint_parent: wp.array(dtype=wp.int32),
                       joint_child: wp.array(dtype=wp.int32), joint_qd_start: wp.array(dtype=wp.int32),
                       joint_dof_dim: wp.array2d(dtype=wp.int32), joint_X_p: wp.array(dtype=wp.transform),
                       joint_X_c: wp.array(dtype=wp.transform), joint_axis: wp.array(dtype=wp.vec3),
                       joint_f: wp.array(dtype=float), damping: wp.array(dtype=float), dt: float,
                       body_f: wp.array(dtype=wp.spatial_vector)):
    j = wp.tid()
    if joint_enabled[j] == 0:
        return
    jt = joint_type[j]
    parent = joint_parent[j]
    child = joint_child[j]
    ds = joint_qd_start[j]
    if jt == _FREE or jt == _DISTANCE:
        wp.atomic_add(body_f, child, wp.spatial_vector(joint_f[ds], joint_f[ds + 1], joint_f[ds + 2],
                                                       joint_f[ds + 3], joint_f[ds + 4], joint_f[ds + 5]))
        return
    X_wp, X_wc = joint_frames(body_q, parent, child, joint_X_p[j], joint_X_c[j])
    r_p = wp.transform_get_rotation(X_wp)
    x_p = wp.transform_get_translation(X_wp)
    x_c = wp.transform_get_translation(X_wc)
    # Relative velocity of the child's joint frame, lever arms and world inverse inertias (zero for the world).
    a_c = x_c - wp.transform_point(body_q[child], body_com[child])
    w_c = wp.spatial_bottom(body_qd[child])
    v_rel = wp.spatial_top(body_qd[child]) + wp.cross(w_c, a_c)
    w_rel = w_c
    m_c = inv_mass[child]
    I_c = world_inv_inertia(body_q[child], inv_inertia[child])
    a_p = wp.vec3(0.0)
    m_p = 0.0
    I_p = wp.mat33(0.0)
    if parent >= 0:
        a_p = x_p - wp.transform_point(body_q[parent], body_com[parent])
        w_p = wp.spatial_bottom(body_qd[parent])
        v_rel = v_rel - wp.spatial_top(body_qd[parent]) - wp.cross(w_p, a_p)
        w_rel = w_rel - w_p
        m_p = inv_mass[parent]
        I_p = world_inv_inertia(body_q[parent], inv_inertia[parent])
    f = wp.vec3(0.0)
    t = wp.vec3(0.0)
    nl = joint_dof_dim[j, 0]
    na = joint_dof_dim[j, 1]
    if jt == _FIXED:
        na = 0
    # joint_f along each free axis, and the passive damping -c qd taken by backward Euler over the step for
    # the dof alone (-c qd / (1 + c dt w), w its generalized inverse mass): stable for any c, and applied
    # once per step, so it does not grow with the iterations.
    for k in range(nl):
        a = wp.quat_rotate(r_p, joint_axis[ds + k])
        c = damping[ds + k]
        w = linear_weight(m_p, I_p, a_p, a) + linear_weight(m_c, I_c, a_c, a)
        f = f + a * (joint_f[ds + k] - c * wp.dot(v_rel, a) / (1.0 + c * dt * w))
    # A D6 joint's Euler angles take generalized torques along their covectors (k-th row: the rate of angle k).
    C = wp.identity(n=3, dtype=float)
    if jt == _D6 and na > 1:
        r_err = wp.quat_inverse(r_p) * wp.transform_get_rotation(X_wc)
        C = angular_covectors(jt, joint_axis, ds + nl, na, angular_coordinates(jt, joint_axis, ds + nl, na, r_err))
    for k in range(na):
        a = wp.quat_rotate(r_p, joint_axis[ds + nl + k])
        if jt == _BALL or na > 1:
            i = angular_coordinate_of_dof(na, k)
            a = wp.quat_rotate(r_p, wp.vec3(C[i, 0], C[i, 1], C[i, 2]))
        c = damping[ds + nl + k]
        w = wp.dot(a, I_p * a) + wp.dot(a, I_c * a)
        t = t + a * (joint_f[ds + nl + k] - c * wp.dot(w_rel, a) / (1.0 + c * dt * w))
    wp.atomic_add(body_f, child, wp.spatial_vector(f, t + wp.cross(a_c, f)))
    if parent >= 0:
        wp.atomic_sub(body_f, parent, wp.spatial_vector(f, t + wp.cross(a_p, f)))


@wp.kernel
def copy_wrenches_kernel(src: wp.array(dtype=wp.spatial_vector), dst: wp.array(dtype=wp.spatial_vector)):
    i = wp.tid()
    dst[i] = src[i]
