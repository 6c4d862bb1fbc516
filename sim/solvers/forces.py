"""Force kernels of explicit solvers: springs, membrane triangles, bending, particle and rigid contacts.

Each kernel adds into ``particle_f`` / ``body_f`` with atomics, so they compose and differentiate."""

from __future__ import annotations

from typing import Any

import loomwork as wp

from ..contacts import Contacts
from ..model import Model, State

# A grid query (or a neighbour list) per thread: worth the thread pool from a few hundred particles on.
GRID_QUERIES = {"cpu_serial_threshold": 256}


@wp.kernel
def spring_forces_kernel(x: wp.array(dtype=wp.vec3), v: wp.array(dtype=wp.vec3), indices: wp.array(dtype=wp.int32),
                         rest: wp.array(dtype=float), ke: wp.array(dtype=float), kd: wp.array(dtype=float),
                         f: wp.array(dtype=wp.vec3)):
    t = wp.tid()
    i = indices[2 * t]
    j = indices[2 * t + 1]
    d = x[i] - x[j]
    l = wp.length(d)
    if l < 1.0e-9:
        return
    dir = d / l
    fs = dir * (ke[t] * (l - rest[t]) + kd[t] * wp.dot(dir, v[i] - v[j]))
    wp.atomic_sub(f, i, fs)
    wp.atomic_add(f, j, fs)


@wp.kernel
def triangle_forces_kernel(x: wp.array(dtype=wp.vec3), v: wp.array(dtype=wp.vec3),
                           indices: wp.array2d(dtype=wp.int32), poses: wp.array(dtype=wp.mat22),
                           areas: wp.array(dtype=float), materials: wp.array2d(dtype=float),
                           f: wp.array(dtype=wp.vec3)):
    # St. Venant-Kirchhoff membrane: Green strain E of the 3x2 deformation gradient F = [x1-x0, x2-x0] Dm^-1,
    # first Piola stress F (2 mu E + lambda tr(E) I), plus viscous damping on dF/dt and aerodynamic drag.
    t = wp.tid()
    i = indices[t, 0]
    j = indices[t, 1]
    k = indices[t, 2]
    mu = materials[t, 0]
    lam = materials[t, 1]
    damp = materials[t, 2]
    drag = materials[t, 3]
    dm = poses[t]
    a = areas[t]
    x0 = x[i]
    e1 = x[j] - x0
    e2 = x[k] - x0
    f1 = e1 * dm[0, 0] + e2 * dm[1, 0]
    f2 = e1 * dm[0, 1] + e2 * dm[1, 1]
    u0 = v[i]
    w1 = v[j] - u0
    w2 = v[k] - u0
    g1 = w1 * dm[0, 0] + w2 * dm[1, 0]
    g2 = w1 * dm[0, 1] + w2 * dm[1, 1]
    e11 = 0.5 * (wp.dot(f1, f1) - 1.0)
    e22 = 0.5 * (wp.dot(f2, f2) - 1.0)
    e12 = 0.5 * wp.dot(f1, f2)
    tr = e11 + e22
    p1 = f1 * (2.0 * mu * e11 + lam * tr) + f2 * (2.0 * mu * e12) + g1 * damp
    p2 = f1 * (2.0 * mu * e12) + f2 * (2.0 * mu * e22 + lam * tr) + g2 * damp
    # Forces on vertices 1, 2: -A P Dm^-T; vertex 0 balances them.
    h1 = (p1 * dm[0, 0] + p2 * dm[0, 1]) * (-a)
    h2 = (p1 * dm[1, 0] + p2 * dm[1, 1]) * (-a)
    h0 = -(h1 + h2)
    if drag > 0.0:
        n = wp.cross(e1, e2)
        nl = wp.length(n)
        if nl > 1.0e-12:
            n = n / nl
            vm = (u0 + v[j] + v[k]) / 3.0
            fd = n * (-drag * a * wp.dot(n, vm) / 3.0)
            h0 = h0 + fd
            h1 = h1 + fd
            h2 = h2 + fd
    wp.atomic_add(f, i, h0)
    wp.atomic_add(f, j, h1)
    wp.atomic_add(f, k, h2)


@wp.kernel
def bending_forces_kernel(x: wp.array(dtype=wp.vec3), v: wp.array(dtype=wp.vec3),
                          indices: wp.array2d(dtype=wp.int32), rest_angle: wp.array(dtype=float),
                          props: wp.array2d(dtype=float), f: wp.array(dtype=wp.vec3)):
    # Dihedral-angle spring across the edge (x2, x3) with opposite vertices x0 and x1; d0..d3 are minus the
    # gradients of the angle (the classic ones of Bridson et al. 2003, with n1, n2 unnormalized).
    t = wp.tid()
    i0 = indices[t, 0]
    i1 = indices[t, 1]
    i2 = indices[t, 2]
    i3 = indices[t, 3]
    if i0 < 0 or i1 < 0:
        return
    x0 = x[i0]
    x1 = x[i1]
    x2 = x[i2]
    x3 = x[i3]
    n1 = wp.cross(x2 - x0, x3 - x0)
    n2 = wp.cross(x3 - x1, x2 - x1)
    e = x3 - x2
    l1 = wp.dot(n1, n1)
    l2 = wp.dot(n2, n2)
    le = wp.length(e)
    if l1 < 1.0e-20 or l2 < 1.0e-20 or le < 1.0e-9:
        return
    n1u = n1 / wp.sqrt(l1)
    n2u = n2 / wp.sqrt(l2)
    angle = wp.atan2(wp.dot(wp.cross(n1u, n2u), e / le), wp.dot(n1u, n2u))
    d0 = n1 * (le / l1)
    d1 = n2 * (le / l2)
    d2 = n1 * (wp.dot(x0 - x3, e) / (le * l1)) + n2 * (wp.dot(x1 - x3, e) / (le * l2))
    d3 = n1 * (-wp.dot(x0 - x2, e) / (le * l1)) - n2 * (wp.dot(x1 - x2, e) / (le * l2))
    rate = -(wp.dot(d0, v[i0]) + wp.dot(d1, v[i1]) + wp.dot(d2, v[i2]) + wp.dot(d3, v[i3]))
    s = props[t, 0] * (angle - rest_angle[t]) + props[t, 1] * rate
    wp.atomic_add(f, i0, d0 * s)
    wp.atomic_add(f, i1, d1 * s)
    wp.atomic_add(f, i2, d2 * s)
    wp.atomic_add(f, i3, d3 * s)


@wp.func
def contact_force(n: wp.vec3, c: float, vrel: wp.vec3, ke: float, kd: float, kf: float, mu: float) -> wp.vec3:
    """Penalty force along n for penetration depth -c < 0, damped when approaching, with regularized
    Coulomb friction."""
    vn = wp.dot(n, vrel)
    fn = -(c * ke + wp.min(vn, 0.0) * kd)
    fn = wp.max(fn, 0.0)
    vt = vrel - n * vn
    vtl = wp.length(vt)
    ft = wp.vec3(0.0, 0.0, 0.0)
    if vtl > 1.0e-9:
        ft = vt * (-wp.min(kf, mu * fn / vtl))
    return n * fn + ft


MAX_NEIGHBORS = 16
"""Touching neighbours kept per particle and step (equal spheres have at most 12); more are dropped, and the
largest number seen is kept in ``model.particle_neighbor_overflow`` (checked by ``check_finite``)."""


@wp.kernel(enable_backward=False, module_options=GRID_QUERIES)
def particle_neighbors_kernel(grid: wp.uint64, x: wp.array(dtype=wp.vec3), radius: wp.array(dtype=float),
                              flags: wp.array(dtype=wp.int32), world: wp.array(dtype=wp.int32), max_radius: float,
                              margin: float, capacity: int, neighbors: wp.array(dtype=wp.int32),
                              count: wp.array(dtype=wp.int32), most: wp.array(dtype=wp.int32)):
    tid = wp.tid()
    i = wp.hash_grid_point_id(grid, tid)
    if i == -1:
        return
    n = 0
    if (flags[i] & 1) != 0:
        xi = x[i]
        ri = radius[i]
        wi = world[i]
        query = wp.hash_grid_query(grid, xi, ri + max_radius + margin)
        j = 0
        while wp.hash_grid_query_next(query, j):
            if j != i and (flags[j] & 1) != 0 and (wi < 0 or world[j] < 0 or world[j] == wi):
                if wp.length(xi - x[j]) < ri + radius[j] + margin:
                    if n < capacity:
                        neighbors[i * capacity + n] = j
                    n += 1
    count[i] = wp.min(n, capacity)
    if n > capacity:
        wp.atomic_max(most, 0, n)


@wp.kernel(module_options=GRID_QUERIES)
def particle_pair_forces_kernel(x: wp.array(dtype=wp.vec3), v: wp.array(dtype=wp.vec3),
                                radius: wp.array(dtype=float), neighbors: wp.array(dtype=wp.int32),
                                count: wp.array(dtype=wp.int32), capacity: int, ke: float, kd: float, kf: float,
                                mu: float, f: wp.array(dtype=wp.vec3)):
    i, k = wp.tid()
    if k >= count[i]:
        return
    j = neighbors[i * capacity + k]
    d = x[i] - x[j]
    l = wp.length(d)
    c = l - radius[i] - radius[j]
    if c < 0.0 and l > 1.0e-9:
        wp.atomic_add(f, i, contact_force(d / l, c, v[i] - v[j], ke, kd, kf, mu))


@wp.kernel
def soft_contact_forces_kernel(x: wp.array(dtype=wp.vec3), v: wp.array(dtype=wp.vec3),
                               radius: wp.array(dtype=float), body_q: wp.array(dtype=wp.transform),
                               body_qd: wp.array(dtype=wp.spatial_vector), body_com: wp.array(dtype=wp.vec3),
                               shape_body: wp.array(dtype=wp.int32), mat_ke: wp.array(dtype=float),
                               mat_kd: wp.array(dtype=float), mat_kf: wp.array(dtype=float),
                               mat_mu: wp.array(dtype=float), ke: float, kd: float, kf: float, mu: float,
                               count: wp.array(dtype=wp.int32), contact_particle: wp.array(dtype=wp.int32),
                               contact_shape: wp.array(dtype=wp.int32), contact_pos: wp.array(dtype=wp.vec3),
                               contact_vel: wp.array(dtype=wp.vec3), contact_normal: wp.array(dtype=wp.vec3),
                               particle_f: wp.array(dtype=wp.vec3), body_f: wp.array(dtype=wp.spatial_vector)):
    t = wp.tid()
    if t >= count[0]:
        return
    i = contact_particle[t]
    s = contact_shape[t]
    b = shape_body[s]
    bx = contact_pos[t]
    bv = contact_vel[t]
    r = wp.vec3(0.0, 0.0, 0.0)
    if b >= 0:
        tf = body_q[b]
        bx = wp.transform_point(tf, contact_pos[t])
        r = bx - wp.transform_point(tf, body_com[b])
        w = wp.spatial_bottom(body_qd[b])
        bv = wp.spatial_top(body_qd[b]) + wp.cross(w, r)
    n = contact_normal[t]
    c = wp.dot(n, x[i] - bx) - radius[i]
    if c >= 0.0:
        return
    fc = contact_force(n, c, v[i] - bv, 0.5 * (ke + mat_ke[s]), 0.5 * (kd + mat_kd[s]), 0.5 * (kf + mat_kf[s]),
                       0.5 * (mu + mat_mu[s]))
    wp.atomic_add(particle_f, i, fc)
    if b >= 0:
        wp.atomic_sub(body_f, b, wp.spatial_vector(fc, wp.cross(r, fc)))


@wp.kernel
def rigid_contact_forces_kernel(body_q: wp.array(dtype=wp.transform), body_qd: wp.array(dtype=wp.spatial_vector),
                                body_com: wp.array(dtype=wp.vec3), shape_body: wp.array(dtype=wp.int32),
                                mat_ke: wp.array(dtype=float), mat_kd: wp.array(dtype=float),
                                mat_kf: wp.array(dtype=float), mat_mu: wp.array(dtype=float),
                                count: wp.array(dtype=wp.int32), shape0: wp.array(dtype=wp.int32),
                                shape1: wp.array(dtype=wp.int32), point0: wp.array(dtype=wp.vec3),
                                point1: wp.array(dtype=wp.vec3), normal: wp.array(dtype=wp.vec3),
                                margin0: wp.array(dtype=float), margin1: wp.array(dtype=float),
                                body_f: wp.array(dtype=wp.spatial_vector), force_out: wp.array(dtype=wp.vec3)):
    t = wp.tid()
    if t >= count[0]:
        return
    s0 = shape0[t]
    s1 = shape1[t]
    b0 = shape_body[s0]
    b1 = shape_body[s1]
    p0 = point0[t]
    p1 = point1[t]
    if b0 >= 0:
        p0 = wp.transform_point(body_q[b0], point0[t])
    if b1 >= 0:
        p1 = wp.transform_point(body_q[b1], point1[t])
    n = normal[t]
    c = wp.dot(n, p1 - p0) - margin0[t] - margin1[t]
    if c >= 0.0:
        return
    # The contact point on the surface of shape 1: where the force acts and the relative velocity is taken.
    pc = p1 - n * margin1[t]
    v0 = wp.vec3(0.0, 0.0, 0.0)
    v1 = wp.vec3(0.0, 0.0, 0.0)
    arm0 = wp.vec3(0.0, 0.0, 0.0)
    arm1 = wp.vec3(0.0, 0.0, 0.0)
    if b0 >= 0:
        arm0 = pc - wp.transform_point(body_q[b0], body_com[b0])
        v0 = wp.spatial_top(body_qd[b0]) + wp.cross(wp.spatial_bottom(body_qd[b0]), arm0)
    if b1 >= 0:
        arm1 = pc - wp.transform_point(body_q[b1], body_com[b1])
        v1 = wp.spatial_top(body_qd[b1]) + wp.cross(wp.spatial_bottom(body_qd[b1]), arm1)
    ke = 0.5 * (mat_ke[s0] + mat_ke[s1])
    kd = 0.5 * (mat_kd[s0] + mat_kd[s1])
    kf = 0.5 * (mat_kf[s0] + mat_kf[s1])
    mu = 0.5 * (mat_mu[s0] + mat_mu[s1])
    fc = contact_force(n, c, v1 - v0, ke, kd, kf, mu)
    force_out[t] = fc
    if b1 >= 0:
        wp.atomic_add(body_f, b1, wp.spatial_vector(fc, wp.cross(arm1, fc)))
    if b0 >= 0:
        wp.atomic_sub(body_f, b0, wp.spatial_vector(fc, wp.cross(arm0, fc)))


def particle_neighbors(model: Model, owner: Any, points: Any, margin: float = 0.0) -> tuple[Any, Any]:
    """The particles touching each particle (closer than the radii plus ``margin``) at ``points``, found through
    ``model.particle_grid``: (neighbors, count), MAX_NEIGHBORS slots per particle. Under a Tape the lists are
    new arrays kept on ``owner`` (the backward pass reads each step's own lists), otherwise reused buffers."""
    n = model.particle_count

    def fresh() -> tuple[Any, Any]:
        return (wp.empty(n * MAX_NEIGHBORS, dtype=wp.int32, device=model.device),
                wp.zeros(n, dtype=wp.int32, device=model.device))

    if points.requires_grad:
        lists = fresh()
        owner.__dict__.setdefault("_step_neighbor_lists", []).append(lists)
    else:
        lists = model.__dict__.get("_neighbor_lists")
        if lists is None:
            lists = model.__dict__["_neighbor_lists"] = fresh()
    if model.particle_neighbor_overflow is None:
        model.particle_neighbor_overflow = wp.zeros(1, dtype=wp.int32, device=model.device)
    most = model.particle_neighbor_overflow
    model.particle_grid.build(points, max(2.0 * model.particle_max_radius + margin, 1.0e-4))
    wp.launch(particle_neighbors_kernel, dim=n,
              inputs=[model.particle_grid.id, points, model.particle_radius, model.particle_flags,
                      model.particle_world, model.particle_max_radius, margin, MAX_NEIGHBORS],
              outputs=[*lists, most], device=model.device)
    return lists


def eval_particle_forces(model: Model, state: State, particle_f: Any) -> None:
    """Springs, membrane triangles and bending of ``state`` into ``particle_f``."""
    d = model.device
    if model.spring_count:
        wp.launch(spring_forces_kernel, dim=model.spring_count,
                  inputs=[state.particle_q, state.particle_qd, model.spring_indices, model.spring_rest_length,
                          model.spring_stiffness, model.spring_damping], outputs=[particle_f], device=d)
    if model.tri_count:
        wp.launch(triangle_forces_kernel, dim=model.tri_count,
                  inputs=[state.particle_q, state.particle_qd, model.tri_indices, model.tri_poses, model.tri_areas,
                          model.tri_materials], outputs=[particle_f], device=d)
    if model.edge_count:
        wp.launch(bending_forces_kernel, dim=model.edge_count,
                  inputs=[state.particle_q, state.particle_qd, model.edge_indices, model.edge_rest_angle,
                          model.edge_bending_properties], outputs=[particle_f], device=d)


def eval_particle_contact_forces(model: Model, state: State, particle_f: Any) -> None:
    """Particle-particle penalty contacts (same world only) through ``model.particle_grid``, rebuilt here;
    set it to None to switch these contacts off."""
    if model.particle_grid is None or model.particle_count < 2:
        return
    neighbors, count = particle_neighbors(model, state, state.particle_q)
    wp.launch(particle_pair_forces_kernel, dim=(model.particle_count, MAX_NEIGHBORS),
              inputs=[state.particle_q, state.particle_qd, model.particle_radius, neighbors, count, MAX_NEIGHBORS,
                      model.particle_ke, model.particle_kd, model.particle_kf, model.particle_mu],
              outputs=[particle_f], device=model.device)


def eval_contact_forces(model: Model, state: State, contacts: Contacts | None, particle_f: Any, body_f: Any) -> None:
    """Particle-shape and shape-shape penalty contacts from ``contacts`` into the force arrays."""
    if contacts is None:
        return
    d = model.device
    if model.particle_count and contacts.soft_contact_max:
        wp.launch(soft_contact_forces_kernel, dim=contacts.soft_contact_max,
                  inputs=[state.particle_q, state.particle_qd, model.particle_radius, state.body_q, state.body_qd,
                          model.body_com, model.shape_body, model.shape_material_ke, model.shape_material_kd,
                          model.shape_material_kf, model.shape_material_mu, model.soft_contact_ke,
                          model.soft_contact_kd, model.soft_contact_kf, model.soft_contact_mu,
                          contacts.soft_contact_count, contacts.soft_contact_particle, contacts.soft_contact_shape,
                          contacts.soft_contact_body_pos, contacts.soft_contact_body_vel,
                          contacts.soft_contact_normal], outputs=[particle_f, body_f], device=d)
    if model.body_count and contacts.rigid_contact_max:
        wp.launch(rigid_contact_forces_kernel, dim=contacts.rigid_contact_max,
                  inputs=[state.body_q, state.body_qd, model.body_com, model.shape_body, model.shape_material_ke,
                          model.shape_material_kd, model.shape_material_kf, model.shape_material_mu,
                          contacts.rigid_contact_count, contacts.rigid_contact_shape0, contacts.rigid_contact_shape1,
                          contacts.rigid_contact_point0, contacts.rigid_contact_point1, contacts.rigid_contact_normal,
                          contacts.rigid_contact_margin0, contacts.rigid_contact_margin1],
                  outputs=[body_f, contacts.rigid_contact_force], device=d)
