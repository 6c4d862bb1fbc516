"""SolverXPBD: extended position-based dynamics (Macklin et al. 2016; Mueller et al. 2020) for particles,
springs and rigid bodies with contacts and joints.

Each step predicts positions with an explicit step, then ``iterations`` Jacobi sweeps project the
constraints (springs with compliance 1/ke, particle-shape, particle-particle and shape-shape contacts
with positional friction, joints as in :mod:`.joints`), and velocities are taken from the position
change. Every sweep writes new arrays, so a ``wp.Tape`` over the steps differentiates it."""

from __future__ import annotations

from typing import Any

import numpy as np

import loomwork as wp

from ...contacts import Contacts
from ...enums import JointType
from ...model import Control, Model, State
from ..forces import MAX_NEIGHBORS, particle_neighbors
from ..solver import SolverBase
from .joints import (
    copy_wrenches_kernel,
    joint_angular_kernel,
    joint_force_kernel,
    joint_linear_kernel,
    whole_count_kernel,
)


@wp.kernel
def spring_constraints_kernel(x: wp.array(dtype=wp.vec3), inv_mass: wp.array(dtype=float),
                              indices: wp.array(dtype=wp.int32), rest: wp.array(dtype=float),
                              ke: wp.array(dtype=float), dt: float, delta: wp.array(dtype=wp.vec3),
                              count: wp.array(dtype=float)):
    t = wp.tid()
    i = indices[2 * t]
    j = indices[2 * t + 1]
    wi = inv_mass[i]
    wj = inv_mass[j]
    d = x[i] - x[j]
    l = wp.length(d)
    if l < 1.0e-9 or wi + wj == 0.0:
        return
    n = d / l
    c = l - rest[t]
    alpha = 1.0 / (ke[t] * dt * dt)
    dl = -c / (wi + wj + alpha)
    wp.atomic_add(delta, i, n * (dl * wi))
    wp.atomic_sub(delta, j, n * (dl * wj))
    wp.atomic_add(count, i, 1.0)
    wp.atomic_add(count, j, 1.0)


@wp.kernel
def particle_shape_constraints_kernel(x: wp.array(dtype=wp.vec3), x_start: wp.array(dtype=wp.vec3),
                                      inv_mass: wp.array(dtype=float), radius: wp.array(dtype=float),
                                      body_q: wp.array(dtype=wp.transform), body_q_start: wp.array(dtype=wp.transform),
                                      shape_body: wp.array(dtype=wp.int32), mat_mu: wp.array(dtype=float),
                                      mu: float, contact_count: wp.array(dtype=wp.int32),
                                      contact_particle: wp.array(dtype=wp.int32),
                                      contact_shape: wp.array(dtype=wp.int32), contact_pos: wp.array(dtype=wp.vec3),
                                      contact_normal: wp.array(dtype=wp.vec3), delta: wp.array(dtype=wp.vec3),
                                      count: wp.array(dtype=float), active: wp.array(dtype=wp.int32)):
    t = wp.tid()
    if t >= contact_count[0]:
        return
    i = contact_particle[t]
    if inv_mass[i] == 0.0:
        return
    s = contact_shape[t]
    b = shape_body[s]
    bx = contact_pos[t]
    bx0 = contact_pos[t]
    if b >= 0:
        bx = wp.transform_point(body_q[b], contact_pos[t])
        bx0 = wp.transform_point(body_q_start[b], contact_pos[t])
    n = contact_normal[t]
    c = wp.dot(n, x[i] - bx) - radius[i]
    if c >= 0.0:
        return
    active[t] = 1  # it touched during the solve: restitution (if enabled) acts on it
    corr = n * (-c)
    # Positional (static/kinetic) friction against the motion of the particle relative to the surface.
    rel = (x[i] - x_start[i]) - (bx - bx0)
    tangent = rel - n * wp.dot(n, rel)
    tl = wp.length(tangent)
    f = 0.5 * (mu + mat_mu[s])
    if tl > 1.0e-9:
        corr = corr - tangent * (wp.min(f * (-c), tl) / tl)
    wp.atomic_add(delta, i, corr)
    wp.atomic_add(count, i, 1.0)


@wp.kernel
def particle_particle_constraints_kernel(x: wp.array(dtype=wp.vec3), x_start: wp.array(dtype=wp.vec3),
                                         inv_mass: wp.array(dtype=float), radius: wp.array(dtype=float),
                                         neighbors: wp.array(dtype=wp.int32), count: wp.array(dtype=wp.int32),
                                         capacity: int, mu: float, cohesion: float, delta: wp.array(dtype=wp.vec3),
                                         hits: wp.array(dtype=float)):
    i, k = wp.tid()
    if k >= count[i] or inv_mass[i] == 0.0:
        return
    j = neighbors[i * capacity + k]
    d = x[i] - x[j]
    l = wp.length(d)
    c = l - radius[i] - radius[j]
    if c >= cohesion or l <= 1.0e-9:
        return
    n = d / l
    w = inv_mass[i] / (inv_mass[i] + inv_mass[j])
    corr = n * (-c * w)
    rel = (x[i] - x_start[i]) - (x[j] - x_start[j])
    tangent = rel - n * wp.dot(n, rel)
    tl = wp.length(tangent)
    if tl > 1.0e-9 and c < 0.0:
        corr = corr - tangent * (wp.min(mu * (-c), tl) / tl * w)
    wp.atomic_add(delta, i, corr)
    wp.atomic_add(hits, i, 1.0)


@wp.func
def point_velocity(qd: wp.spatial_vector, q: wp.transform, com: wp.vec3, p: wp.vec3) -> wp.vec3:
    """Velocity of the body's material point at world ``p`` (body_qd: center-of-mass velocity, angular)."""
    return wp.spatial_top(qd) + wp.cross(wp.spatial_bottom(qd), p - wp.transform_point(q, com))


@wp.kernel
def particle_restitution_kernel(v: wp.array(dtype=wp.vec3), v_start: wp.array(dtype=wp.vec3),
                                inv_mass: wp.array(dtype=float), body_q: wp.array(dtype=wp.transform),
                                body_q_start: wp.array(dtype=wp.transform), body_qd: wp.array(dtype=wp.spatial_vector),
                                body_qd_start: wp.array(dtype=wp.spatial_vector), body_com: wp.array(dtype=wp.vec3),
                                shape_body: wp.array(dtype=wp.int32), restitution: float,
                                contact_count: wp.array(dtype=wp.int32), contact_particle: wp.array(dtype=wp.int32),
                                contact_shape: wp.array(dtype=wp.int32), contact_pos: wp.array(dtype=wp.vec3),
                                contact_normal: wp.array(dtype=wp.vec3), active: wp.array(dtype=wp.int32),
                                threshold: float, delta: wp.array(dtype=wp.vec3), count: wp.array(dtype=float)):
    t = wp.tid()
    if t >= contact_count[0] or active[t] == 0:
        return
    i = contact_particle[t]
    if inv_mass[i] == 0.0:
        return
    b = shape_body[contact_shape[t]]
    n = contact_normal[t]
    # Normal speed of the particle relative to the shape's surface point before the solve and after it.
    u = v[i]
    u_start = v_start[i]
    if b >= 0:
        u = u - point_velocity(body_qd[b], body_q[b], body_com[b], wp.transform_point(body_q[b], contact_pos[t]))
        u_start = u_start - point_velocity(body_qd_start[b], body_q_start[b], body_com[b],
                                           wp.transform_point(body_q_start[b], contact_pos[t]))
    vn_start = wp.dot(n, u_start)
    if vn_start > -threshold:
        return  # resting contact: no bounce from the speed gravity adds in a step
    wp.atomic_add(delta, i, n * (wp.max(-restitution * vn_start, 0.0) - wp.dot(n, u)))
    wp.atomic_add(count, i, 1.0)


@wp.kernel
def apply_velocity_deltas_kernel(v: wp.array(dtype=wp.vec3), delta: wp.array(dtype=wp.vec3),
                                 count: wp.array(dtype=float), v_out: wp.array(dtype=wp.vec3)):
    i = wp.tid()
    v_out[i] = v[i] + delta[i] / wp.max(count[i], 1.0)


@wp.kernel
def apply_particle_deltas_kernel(x: wp.array(dtype=wp.vec3), delta: wp.array(dtype=wp.vec3),
                                 count: wp.array(dtype=float), relaxation: float, x_out: wp.array(dtype=wp.vec3)):
    i = wp.tid()
    x_out[i] = x[i] + delta[i] * (relaxation / wp.max(count[i], 1.0))


@wp.kernel
def particle_velocity_kernel(x: wp.array(dtype=wp.vec3), x_start: wp.array(dtype=wp.vec3),
                             v_pred: wp.array(dtype=wp.vec3), inv_mass: wp.array(dtype=float), dt: float,
                             x_out: wp.array(dtype=wp.vec3), v_out: wp.array(dtype=wp.vec3)):
    i = wp.tid()
    x_out[i] = x[i]
    if inv_mass[i] == 0.0:
        v_out[i] = v_pred[i]
    else:
        v_out[i] = (x[i] - x_start[i]) / dt


@wp.func
def body_inv_mass_at(q: wp.transform, com: wp.vec3, inv_mass: float, inv_inertia: wp.mat33, p: wp.vec3,
                     n: wp.vec3) -> float:
    """Generalized inverse mass of the body at world point p along n."""
    if inv_mass == 0.0:
        return 0.0
    r = p - wp.transform_point(q, com)
    rn = wp.quat_rotate_inv(wp.transform_get_rotation(q), wp.cross(r, n))
    return inv_mass + wp.dot(rn, inv_inertia * rn)


@wp.kernel
def rigid_contact_constraints_kernel(body_q: wp.array(dtype=wp.transform),
                                     body_q_start: wp.array(dtype=wp.transform), body_com: wp.array(dtype=wp.vec3),
                                     inv_mass: wp.array(dtype=float), inv_inertia: wp.array(dtype=wp.mat33),
                                     shape_body: wp.array(dtype=wp.int32), mat_mu: wp.array(dtype=float),
                                     contact_count: wp.array(dtype=wp.int32), shape0: wp.array(dtype=wp.int32),
                                     shape1: wp.array(dtype=wp.int32), point0: wp.array(dtype=wp.vec3),
                                     point1: wp.array(dtype=wp.vec3), normal: wp.array(dtype=wp.vec3),
                                     margin0: wp.array(dtype=float), margin1: wp.array(dtype=float),
                                     delta: wp.array(dtype=wp.spatial_vector), count: wp.array(dtype=float),
                                     active: wp.array(dtype=wp.int32)):
    t = wp.tid()
    if t >= contact_count[0]:
        return
    b0 = shape_body[shape0[t]]
    b1 = shape_body[shape1[t]]
    p0 = point0[t]
    p1 = point1[t]
    p0_prev = point0[t]
    p1_prev = point1[t]
    q0 = wp.transform_identity()
    q1 = wp.transform_identity()
    if b0 >= 0:
        q0 = body_q[b0]
        p0 = wp.transform_point(q0, point0[t])
        p0_prev = wp.transform_point(body_q_start[b0], point0[t])
    if b1 >= 0:
        q1 = body_q[b1]
        p1 = wp.transform_point(q1, point1[t])
        p1_prev = wp.transform_point(body_q_start[b1], point1[t])
    n = normal[t]
    c = wp.dot(n, p1 - p0) - margin0[t] - margin1[t]
    if c >= 0.0:
        return
    active[t] = 1  # it touched during the solve: restitution (if enabled) acts on it
    pc = p1 - n * margin1[t]
    # Normal correction and positional friction share one impulse direction.
    rel = (p1 - p1_prev) - (p0 - p0_prev)
    tangent = rel - n * wp.dot(n, rel)
    tl = wp.length(tangent)
    mu = 0.5 * (mat_mu[shape0[t]] + mat_mu[shape1[t]])
    corr = n * (-c)
    if tl > 1.0e-9:
        corr = corr - tangent * (wp.min(mu * (-c), tl) / tl)
    cl = wp.length(corr)
    dir = corr / cl
    w0 = 0.0
    w1 = 0.0
    if b0 >= 0:
        w0 = body_inv_mass_at(q0, body_com[b0], inv_mass[b0], inv_inertia[b0], pc, dir)
    if b1 >= 0:
        w1 = body_inv_mass_at(q1, body_com[b1], inv_mass[b1], inv_inertia[b1], pc, dir)
    if w0 + w1 == 0.0:
        return
    impulse = dir * (cl / (w0 + w1))
    if b1 >= 0 and inv_mass[b1] > 0.0:
        r1 = pc - wp.transform_point(q1, body_com[b1])
        wp.atomic_add(delta, b1, wp.spatial_vector(impulse, wp.cross(r1, impulse)))
        wp.atomic_add(count, b1, 1.0)
    if b0 >= 0 and inv_mass[b0] > 0.0:
        r0 = pc - wp.transform_point(q0, body_com[b0])
        wp.atomic_sub(delta, b0, wp.spatial_vector(impulse, wp.cross(r0, impulse)))
        wp.atomic_add(count, b0, 1.0)


@wp.func
def impulse_pose(tf: wp.transform, com: wp.vec3, inv_mass: float, inv_inertia: wp.mat33, imp: wp.spatial_vector):
    """The pose ``tf`` moved by the impulse ``imp`` (linear, angular about the center of mass; world frame) as a
    position change."""
    p = wp.transform_get_translation(tf)
    r = wp.transform_get_rotation(tf)
    x_com = p + wp.quat_rotate(r, com)
    dx = wp.spatial_top(imp) * inv_mass
    dw = wp.quat_rotate(r, inv_inertia * wp.quat_rotate_inv(r, wp.spatial_bottom(imp)))
    r1 = wp.normalize(r + wp.quat(dw, 0.0) * r * 0.5)
    return wp.transform(x_com + dx - wp.quat_rotate(r1, com), r1)


@wp.kernel
def apply_body_deltas_kernel(q: wp.array(dtype=wp.transform), com: wp.array(dtype=wp.vec3),
                             inv_mass: wp.array(dtype=float), inv_inertia: wp.array(dtype=wp.mat33),
                             delta: wp.array(dtype=wp.spatial_vector), count: wp.array(dtype=float), relaxation: float,
                             q_out: wp.array(dtype=wp.transform)):
    """Apply the impulses ``delta`` averaged over their ``count`` constraints, times ``relaxation``."""
    i = wp.tid()
    if inv_mass[i] == 0.0 or count[i] == 0.0:
        q_out[i] = q[i]
        return
    q_out[i] = impulse_pose(q[i], com[i], inv_mass[i], inv_inertia[i], delta[i] * (relaxation / count[i]))


@wp.kernel
def apply_body_impulses_kernel(q: wp.array(dtype=wp.transform), com: wp.array(dtype=wp.vec3),
                               inv_mass: wp.array(dtype=float), inv_inertia: wp.array(dtype=wp.mat33),
                               impulse: wp.array(dtype=wp.spatial_vector), q_out: wp.array(dtype=wp.transform)):
    """Apply the impulses ``impulse`` whole (joints, with mass splitting)."""
    i = wp.tid()
    if inv_mass[i] == 0.0 or wp.length_sq(impulse[i]) == 0.0:
        q_out[i] = q[i]
        return
    q_out[i] = impulse_pose(q[i], com[i], inv_mass[i], inv_inertia[i], impulse[i])


@wp.kernel
def rigid_restitution_kernel(body_q: wp.array(dtype=wp.transform), body_q_start: wp.array(dtype=wp.transform),
                             body_qd: wp.array(dtype=wp.spatial_vector),
                             body_qd_start: wp.array(dtype=wp.spatial_vector), body_com: wp.array(dtype=wp.vec3),
                             inv_mass: wp.array(dtype=float), inv_inertia: wp.array(dtype=wp.mat33),
                             shape_body: wp.array(dtype=wp.int32), restitution: wp.array(dtype=float),
                             contact_count: wp.array(dtype=wp.int32), shape0: wp.array(dtype=wp.int32),
                             shape1: wp.array(dtype=wp.int32), point0: wp.array(dtype=wp.vec3),
                             point1: wp.array(dtype=wp.vec3), normal: wp.array(dtype=wp.vec3),
                             active: wp.array(dtype=wp.int32), threshold: float,
                             delta: wp.array(dtype=wp.spatial_vector), count: wp.array(dtype=float)):
    t = wp.tid()
    if t >= contact_count[0] or active[t] == 0:
        return
    b0 = shape_body[shape0[t]]
    b1 = shape_body[shape1[t]]
    n = normal[t]
    # The normal approach speed before the solve and the normal speed after it, at the contact point.
    v0 = wp.vec3(0.0)
    v0_start = wp.vec3(0.0)
    v1 = wp.vec3(0.0)
    v1_start = wp.vec3(0.0)
    pc = point1[t]
    if b1 >= 0:
        pc = wp.transform_point(body_q[b1], point1[t])
        v1 = point_velocity(body_qd[b1], body_q[b1], body_com[b1], pc)
        v1_start = point_velocity(body_qd_start[b1], body_q_start[b1], body_com[b1],
                                  wp.transform_point(body_q_start[b1], point1[t]))
    if b0 >= 0:
        v0 = point_velocity(body_qd[b0], body_q[b0], body_com[b0], pc)
        v0_start = point_velocity(body_qd_start[b0], body_q_start[b0], body_com[b0],
                                  wp.transform_point(body_q_start[b0], point0[t]))
    vn_start = wp.dot(n, v1_start - v0_start)
    vn = wp.dot(n, v1 - v0)
    e = 0.5 * (restitution[shape0[t]] + restitution[shape1[t]])
    if vn_start > -threshold:
        e = 0.0  # resting contact: no bounce from the speed gravity adds in a step (Mueller et al. 2020)
    dv = -vn + wp.max(-e * vn_start, 0.0)
    w0 = 0.0
    w1 = 0.0
    if b0 >= 0:
        w0 = body_inv_mass_at(body_q[b0], body_com[b0], inv_mass[b0], inv_inertia[b0], pc, n)
    if b1 >= 0:
        w1 = body_inv_mass_at(body_q[b1], body_com[b1], inv_mass[b1], inv_inertia[b1], pc, n)
    if w0 + w1 == 0.0 or dv == 0.0:
        return
    impulse = n * (dv / (w0 + w1))
    if b1 >= 0 and inv_mass[b1] > 0.0:
        wp.atomic_add(delta, b1, wp.spatial_vector(impulse, wp.cross(pc - wp.transform_point(body_q[b1],
                                                                                             body_com[b1]), impulse)))
        wp.atomic_add(count, b1, 1.0)
    if b0 >= 0 and inv_mass[b0] > 0.0:
        wp.atomic_sub(delta, b0, wp.spatial_vector(impulse, wp.cross(pc - wp.transform_point(body_q[b0],
                                                                                             body_com[b0]), impulse)))
        wp.atomic_add(count, b0, 1.0)


@wp.kernel
def apply_velocity_impulses_kernel(q: wp.array(dtype=wp.transform), qd: wp.array(dtype=wp.spatial_vector),
                                   inv_mass: wp.array(dtype=float), inv_inertia: wp.array(dtype=wp.mat33),
                                   delta: wp.array(dtype=wp.spatial_vector), count: wp.array(dtype=float),
                                   qd_out: wp.array(dtype=wp.spatial_vector)):
    i = wp.tid()
    if count[i] == 0.0:
        qd_out[i] = qd[i]
        return
    s = 1.0 / count[i]
    r = wp.transform_get_rotation(q[i])
    dw = wp.quat_rotate(r, inv_inertia[i] * wp.quat_rotate_inv(r, wp.spatial_bottom(delta[i])))
    qd_out[i] = qd[i] + wp.spatial_vector(wp.spatial_top(delta[i]) * (inv_mass[i] * s), dw * s)


@wp.kernel
def body_velocity_kernel(q: wp.array(dtype=wp.transform), q_start: wp.array(dtype=wp.transform),
                         qd_pred: wp.array(dtype=wp.spatial_vector), com: wp.array(dtype=wp.vec3),
                         inv_mass: wp.array(dtype=float), dt: float, q_out: wp.array(dtype=wp.transform),
                         qd_out: wp.array(dtype=wp.spatial_vector)):
    i = wp.tid()
    q_out[i] = q[i]
    if inv_mass[i] == 0.0:
        qd_out[i] = qd_pred[i]
        return
    r = wp.transform_get_rotation(q[i])
    r0 = wp.transform_get_rotation(q_start[i])
    x1 = wp.transform_point(q[i], com[i])
    x0 = wp.transform_point(q_start[i], com[i])
    dq = r * wp.quat_inverse(r0)
    w = wp.vec3(dq[0], dq[1], dq[2]) * (2.0 / dt)
    if dq[3] < 0.0:
        w = -w
    qd_out[i] = wp.spatial_vector((x1 - x0) / dt, w)


class SolverXPBD(SolverBase):
    """Position-based solver for particles, springs, and rigid bodies in contact and joined by joints.

    ``iterations`` constraint sweeps per step; ``soft_body_relaxation``, ``soft_contact_relaxation`` and
    ``rigid_contact_relaxation`` scale the averaged corrections, ``joint_linear_relaxation`` and
    ``joint_angular_relaxation`` the rigid joint constraints' impulses. Joints (PRISMATIC, REVOLUTE, BALL, FIXED,
    FREE, DISTANCE, D6) hold their locked directions with compliance ``joint_linear_compliance`` [m/N] and
    ``joint_angular_compliance`` [rad/(N m)] (0: rigid), keep their coordinates inside their limits (with the same
    compliance), and drive them toward ``control.joint_target_q``/``joint_target_qd`` with gains
    ``Model.joint_target_ke``/``kd`` as compliant constraints (compliance 1/ke). Every compliant constraint (drives,
    and locked directions and limits when their compliance is > 0) accumulates its impulse over the sweeps of a step
    (XPBD's Lagrange multiplier), so its stiffness does not depend on ``iterations``; rigid ones are re-solved each
    sweep. A joint's impulse is applied whole and opposite to its two bodies, each solve splitting a body's mass
    among the joints on it (so the joints conserve a free chain's momentum at any sweep count, and a lone drive
    converges in one sweep); at few sweeps a chain's rigid joints are left apart by the unconverged error, which
    also costs energy, as in Newton's XPBD. The angular coordinates of a D6 joint with two or three angular axes are
    intrinsic Euler angles about its axes (as ``eval_fk``), those of a BALL joint the components of its rotation
    vector in the parent joint frame (so its limits bound them axis by axis, and its drive target, a quaternion in
    its ``joint_target_q`` entries as in ``joint_q``, is taken as a rotation vector); each is corrected along its
    own covector; ``control.joint_f`` and the passive damping ``Model.joint_damping`` act as forces in the
    prediction. ``State.joint_q``/ ``joint_qd`` are not updated (call ``eval_ik``). With ``enable_restitution``, a
    rigid contact that touched during the step leaves at its restitution (the mean of its shapes' ``restitution``)
    times its normal approach speed before the solve, by a velocity pass after it (Mueller et al. 2020; none below
    an approach speed of 2 |g| dt, so resting contacts stay at rest); a particle-shape contact likewise at
    ``Model.soft_contact_restitution`` (relative to the shape's surface velocity; several contacts of one particle
    are averaged), as Newton's XPBD; particle-particle contacts have no restitution (nor in Newton). Triangle FEM
    and bending are not simulated by this solver; a model that has them is refused."""

    def __init__(self, model: Model, *, iterations: int = 2, soft_body_relaxation: float = 0.9,
                 soft_contact_relaxation: float = 0.9, joint_linear_relaxation: float = 0.7,
                 joint_angular_relaxation: float = 0.4, joint_linear_compliance: float = 0.0,
                 joint_angular_compliance: float = 0.0, rigid_contact_relaxation: float = 0.8,
                 angular_damping: float = 0.0, enable_restitution: bool = False, check_finite: bool = False,
                 **_: Any) -> None:
        super().__init__(model, check_finite)
        if iterations < 1:
            raise ValueError(f"SolverXPBD: iterations must be >= 1, got {iterations}")
        if model.tri_count and np.abs(model.tri_materials.numpy()[:, :2]).max() > 0.0:
            raise ValueError(f"SolverXPBD: the model has {model.tri_count} triangles with membrane stiffness "
                             f"(tri_ke/tri_ka), which XPBD does not simulate; build cloth with add_springs=True and "
                             f"tri_ke=tri_ka=0, or use SolverSemiImplicit")
        if model.edge_count and np.abs(model.edge_bending_properties.numpy()[:, 0]).max() > 0.0:
            raise ValueError(f"SolverXPBD: the model has {model.edge_count} bending edges with edge_ke > 0, which XPBD "
                             f"does not simulate; set edge_ke=0 or use SolverSemiImplicit")
        for name, value in (("joint_linear_compliance", joint_linear_compliance),
                            ("joint_angular_compliance", joint_angular_compliance)):
            if not value >= 0.0:
                raise ValueError(f"SolverXPBD: {name} must be >= 0, got {value}")
        self._constrained_joints = False
        if model.joint_count:
            types = model.joint_type.numpy()
            self._constrained_joints = bool((types != JointType.FREE).any())
        self.iterations = int(iterations)
        self.soft_body_relaxation = float(soft_body_relaxation)
        self.soft_contact_relaxation = float(soft_contact_relaxation)
        self.rigid_contact_relaxation = float(rigid_contact_relaxation)
        self.angular_damping = float(angular_damping)
        self.enable_restitution = bool(enable_restitution)
        self.joint_linear_relaxation = float(joint_linear_relaxation)
        self.joint_angular_relaxation = float(joint_angular_relaxation)
        self.joint_linear_compliance = float(joint_linear_compliance)
        self.joint_angular_compliance = float(joint_angular_compliance)

    def step(self, state_in: State, state_out: State, control: Control | None, contacts: Contacts | None,
             dt: float) -> None:
        """Predict with ``state_in``'s forces and gravity, project constraints, write ``state_out``."""
        self._check_step(state_in, state_out, dt)
        m = self.model
        d = m.device
        grad = m.requires_grad or state_in.requires_grad
        predicted = State()
        predicted.particle_q = wp.empty_like(state_in.particle_q, requires_grad=grad)
        predicted.particle_qd = wp.empty_like(state_in.particle_qd, requires_grad=grad)
        predicted.body_q = wp.empty_like(state_in.body_q, requires_grad=grad)
        predicted.body_qd = wp.empty_like(state_in.body_qd, requires_grad=grad)
        self.integrate_particles(m, state_in, predicted, dt)
        forced = state_in
        if m.joint_count and m.body_count:
            forced = State()
            forced.body_q, forced.body_qd = state_in.body_q, state_in.body_qd
            forced.body_f = self._joint_forces(state_in, control, dt, grad)
        self.integrate_bodies(m, forced, predicted, dt, self.angular_damping)
        x, q = predicted.particle_q, predicted.body_q
        rigid = m.body_count and contacts is not None and contacts.rigid_contact_max
        active = wp.zeros(contacts.rigid_contact_max, dtype=wp.int32, device=d) if rigid else None
        soft = m.particle_count and contacts is not None and contacts.soft_contact_max
        soft_active = wp.zeros(contacts.soft_contact_max, dtype=wp.int32, device=d) if soft else None
        # The impulses the joints' compliant constraints applied in this step's sweeps so far, per pass (linear,
        # angular): the drives' and the limits' per dof, the locked directions' per joint.
        joint_impulses = [[wp.zeros(m.joint_dof_count, dtype=float, requires_grad=grad, device=d),
                           wp.zeros(m.joint_dof_count, dtype=float, requires_grad=grad, device=d),
                           wp.zeros(m.joint_count, dtype=wp.vec3, requires_grad=grad, device=d)] for _ in range(2)]
        whole_counts = [wp.zeros(m.body_count, dtype=float, device=d) for _ in range(2)]
        if self._constrained_joints:
            wp.launch(whole_count_kernel, dim=m.joint_count,
                      inputs=[m.joint_type, m.joint_enabled, m.joint_parent, m.joint_child], outputs=whole_counts,
                      device=d)
        for _ in range(self.iterations):
            if m.particle_count:
                x = self._project_particles(x, state_in, q, contacts, soft_active, dt, grad)
            if rigid:
                q = self._project_bodies(q, state_in.body_q, contacts, active, grad)
            if self._constrained_joints:
                q, joint_impulses = self._project_joints(q, state_in.body_q, control, dt, grad, joint_impulses,
                                                         whole_counts)
        bounce_particles = soft and self.enable_restitution and m.soft_contact_restitution > 0.0
        particle_qd = state_out.particle_qd
        if bounce_particles:
            particle_qd = wp.empty_like(state_out.particle_qd, requires_grad=grad)
        if m.particle_count:
            wp.launch(particle_velocity_kernel, dim=m.particle_count,
                      inputs=[x, state_in.particle_q, predicted.particle_qd, m.particle_inv_mass, dt],
                      outputs=[state_out.particle_q, particle_qd], device=d)
        if m.body_count:
            bounce = rigid and self.enable_restitution
            qd = wp.empty_like(state_out.body_qd, requires_grad=grad) if bounce else state_out.body_qd
            wp.launch(body_velocity_kernel, dim=m.body_count,
                      inputs=[q, state_in.body_q, predicted.body_qd, m.body_com, m.body_inv_mass, dt],
                      outputs=[state_out.body_q, qd], device=d)
            if bounce:
                self._restitution(state_out.body_q, qd, state_in.body_q, predicted.body_qd, contacts, active, dt,
                                  state_out.body_qd, grad)
        if bounce_particles:
            self._particle_restitution(particle_qd, predicted, state_in.body_q, state_out, contacts, soft_active, dt,
                                       grad)
        self._finish_step(state_out)

    def _restitution(self, q: Any, qd: Any, q_start: Any, qd_start: Any, contacts: Contacts, active: Any,
                     dt: float, qd_out: Any, grad: bool) -> None:
        """``qd`` with the normal speed of every contact that touched during the solve set to its restitution
        times its approach speed before the solve (``qd_start`` at ``q_start``), into ``qd_out``."""
        m = self.model
        d = m.device
        threshold = 2.0 * float(np.linalg.norm(m.gravity.numpy(), axis=1).max()) * dt
        delta = wp.zeros(m.body_count, dtype=wp.spatial_vector, requires_grad=grad, device=d)
        count = wp.zeros(m.body_count, dtype=float, device=d)
        wp.launch(rigid_restitution_kernel, dim=contacts.rigid_contact_max,
                  inputs=[q, q_start, qd, qd_start, m.body_com, m.body_inv_mass, m.body_inv_inertia, m.shape_body,
                          m.shape_material_restitution, contacts.rigid_contact_count, contacts.rigid_contact_shape0,
                          contacts.rigid_contact_shape1, contacts.rigid_contact_point0, contacts.rigid_contact_point1,
                          contacts.rigid_contact_normal, active, threshold], outputs=[delta, count], device=d)
        wp.launch(apply_velocity_impulses_kernel, dim=m.body_count,
                  inputs=[q, qd, m.body_inv_mass, m.body_inv_inertia, delta, count], outputs=[qd_out], device=d)

    def _particle_restitution(self, qd: Any, predicted: State, body_q_start: Any, state_out: State,
                              contacts: Contacts, active: Any, dt: float, grad: bool) -> None:
        """``qd`` with the normal speed of every particle-shape contact that touched during the solve set to
        ``Model.soft_contact_restitution`` times its approach speed before the solve (the prediction
        ``predicted``), into ``state_out.particle_qd``."""
        m = self.model
        d = m.device
        threshold = 2.0 * float(np.linalg.norm(m.gravity.numpy(), axis=1).max()) * dt
        delta = wp.zeros(m.particle_count, dtype=wp.vec3, requires_grad=grad, device=d)
        count = wp.zeros(m.particle_count, dtype=float, device=d)
        wp.launch(particle_restitution_kernel, dim=contacts.soft_contact_max,
                  inputs=[qd, predicted.particle_qd, m.particle_inv_mass, state_out.body_q, body_q_start,
                          state_out.body_qd, predicted.body_qd, m.body_com, m.shape_body,
                          float(m.soft_contact_restitution), contacts.soft_contact_count,
                          contacts.soft_contact_particle, contacts.soft_contact_shape, contacts.soft_contact_body_pos,
                          contacts.soft_contact_normal, active, threshold], outputs=[delta, count], device=d)
        wp.launch(apply_velocity_deltas_kernel, dim=m.particle_count, inputs=[qd, delta, count],
                  outputs=[state_out.particle_qd], device=d)

    def _project_particles(self, x: Any, state_in: State, body_q: Any, contacts: Contacts | None, active: Any,
                           dt: float, grad: bool) -> Any:
        m = self.model
        x_start, body_q_start = state_in.particle_q, state_in.body_q
        d = m.device
        n = m.particle_count
        x_out = x
        if m.spring_count:
            delta = wp.zeros(n, dtype=wp.vec3, requires_grad=grad, device=d)
            count = wp.zeros(n, dtype=float, device=d)
            wp.launch(spring_constraints_kernel, dim=m.spring_count,
                      inputs=[x_out, m.particle_inv_mass, m.spring_indices, m.spring_rest_length, m.spring_stiffness,
                              dt], outputs=[delta, count], device=d)
            x_out = self._apply(x_out, delta, count, self.soft_body_relaxation, grad)
        touching = contacts is not None and contacts.soft_contact_max > 0
        if touching or (m.particle_grid is not None and n > 1):
            delta = wp.zeros(n, dtype=wp.vec3, requires_grad=grad, device=d)
            count = wp.zeros(n, dtype=float, device=d)
            if touching:
                wp.launch(particle_shape_constraints_kernel, dim=contacts.soft_contact_max,
                          inputs=[x_out, x_start, m.particle_inv_mass, m.particle_radius, body_q, body_q_start,
                                  m.shape_body, m.shape_material_mu, m.soft_contact_mu, contacts.soft_contact_count,
                                  contacts.soft_contact_particle, contacts.soft_contact_shape,
                                  contacts.soft_contact_body_pos, contacts.soft_contact_normal],
                          outputs=[delta, count, active], device=d)
            if m.particle_grid is not None and n > 1:
                neighbors, ncount = particle_neighbors(m, state_in, x_out, m.particle_cohesion)
                wp.launch(particle_particle_constraints_kernel, dim=(n, MAX_NEIGHBORS),
                          inputs=[x_out, x_start, m.particle_inv_mass, m.particle_radius, neighbors, ncount,
                                  MAX_NEIGHBORS, m.particle_mu, m.particle_cohesion],
                          outputs=[delta, count], device=d)
            x_out = self._apply(x_out, delta, count, self.soft_contact_relaxation, grad)
        return x_out

    def _apply(self, x: Any, delta: Any, count: Any, relaxation: float, grad: bool) -> Any:
        out = wp.empty_like(x, requires_grad=grad)
        wp.launch(apply_particle_deltas_kernel, dim=len(x), inputs=[x, delta, count, relaxation], outputs=[out],
                  device=self.model.device)
        return out

    def _control_array(self, control: Control | None, name: str) -> Any:
        arr = getattr(control, name, None) if control is not None else None
        return arr if arr is not None else getattr(self.model, name)

    def _joint_forces(self, state: State, control: Control | None, dt: float, grad: bool) -> Any:
        """``state.body_f`` plus the wrenches of ``control.joint_f`` and the joints' passive damping, as a new
        array."""
        m = self.model
        f = wp.empty_like(state.body_f, requires_grad=grad)
        wp.launch(copy_wrenches_kernel, dim=m.body_count, inputs=[state.body_f], outputs=[f], device=m.device)
        wp.launch(joint_force_kernel, dim=m.joint_count,
                  inputs=[state.body_q, state.body_qd, m.body_com, m.body_inv_mass, m.body_inv_inertia, m.joint_type,
                          m.joint_enabled, m.joint_parent, m.joint_child, m.joint_qd_start, m.joint_dof_dim,
                          m.joint_X_p, m.joint_X_c, m.joint_axis, self._control_array(control, "joint_f"),
                          m.joint_damping, dt], outputs=[f], device=m.device)
        return f

    def _project_joints(self, q: Any, q_start: Any, control: Control | None, dt: float, grad: bool,
                        joint_impulses: list, whole_counts: list) -> tuple[Any, list]:
        """One sweep of the joints' linear then angular constraints (rigid ones relaxed); returns the new body
        poses and the compliant constraints' impulses so far (fresh arrays, so a Tape sees every sweep)."""
        m = self.model
        d = m.device
        target_q = self._control_array(control, "joint_target_q")
        target_qd = self._control_array(control, "joint_target_qd")
        passes = ((joint_linear_kernel, [m.body_com], self.joint_linear_compliance, self.joint_linear_relaxation),
                  (joint_angular_kernel, [], self.joint_angular_compliance, self.joint_angular_relaxation))
        impulses = []
        for (kernel, extra, compliance, relaxation), lam, whole_count in zip(passes, joint_impulses, whole_counts,
                                                                              strict=True):
            whole = wp.zeros(m.body_count, dtype=wp.spatial_vector, requires_grad=grad, device=d)
            lam_out = [wp.zeros_like(a, requires_grad=grad) for a in lam]
            wp.launch(kernel, dim=m.joint_count,
                      inputs=[q, q_start, *extra, m.body_inv_mass, m.body_inv_inertia, m.joint_type, m.joint_enabled,
                              m.joint_parent, m.joint_child, m.joint_q_start, m.joint_qd_start, m.joint_dof_dim,
                              m.joint_X_p, m.joint_X_c, m.joint_axis, m.joint_limit_lower, m.joint_limit_upper,
                              m.joint_target_ke, m.joint_target_kd, target_q, target_qd, compliance / (dt * dt),
                              relaxation, dt, *lam, whole_count],
                      outputs=[whole, *lam_out], device=d)
            impulses.append(lam_out)
            out = wp.empty_like(q, requires_grad=grad)
            wp.launch(apply_body_impulses_kernel, dim=m.body_count,
                      inputs=[q, m.body_com, m.body_inv_mass, m.body_inv_inertia, whole], outputs=[out], device=d)
            q = out
        return q, impulses

    def _project_bodies(self, q: Any, q_start: Any, contacts: Contacts, active: Any, grad: bool) -> Any:
        m = self.model
        d = m.device
        delta = wp.zeros(m.body_count, dtype=wp.spatial_vector, requires_grad=grad, device=d)
        count = wp.zeros(m.body_count, dtype=float, device=d)
        wp.launch(rigid_contact_constraints_kernel, dim=contacts.rigid_contact_max,
                  inputs=[q, q_start, m.body_com, m.body_inv_mass, m.body_inv_inertia, m.shape_body,
                          m.shape_material_mu, contacts.rigid_contact_count, contacts.rigid_contact_shape0,
                          contacts.rigid_contact_shape1, contacts.rigid_contact_point0, contacts.rigid_contact_point1,
                          contacts.rigid_contact_normal, contacts.rigid_contact_margin0,
                          contacts.rigid_contact_margin1], outputs=[delta, count, active], device=d)
        out = wp.empty_like(q, requires_grad=grad)
        wp.launch(apply_body_deltas_kernel, dim=m.body_count,
                  inputs=[q, m.body_com, m.body_inv_mass, m.body_inv_inertia, delta, count,
                          self.rigid_contact_relaxation], outputs=[out], device=d)
        return out
