"""SolverVBD: vertex block descent (Chen et al. 2024) for cloth and particles, stable for stiff materials at
large steps.

A step minimizes the incremental potential (inertia plus elastic and contact energies) by sweeping over
colors of the particle graph: each particle of a color moves by one Newton step of its own 3x3 block, with
the other particles held, and a color's particles share no element so they update in parallel. Membrane
blocks are the exact St. Venant-Kirchhoff vertex Hessians (the one indefinite term clamped), bending and
springs use their Gauss-Newton blocks, and particle-shape contacts are found by the vertex itself at each
iteration from the shapes' signed distances (so ``contacts`` may be None), with IPC-style smoothed friction.
With ``model.requires_grad`` every color pass writes a new array, so a ``wp.Tape`` differentiates the step."""

from __future__ import annotations

from typing import Any

import numpy as np

import loomwork as wp

from ...builder.cloth import color_graph
from ...collide import shape_world_transform
from ...contacts import Contacts
from ...enums import JointType, ShapeFlags
from ...model import Control, Model, State
from ...shape_kernels import shape_distance
from ..solver import SolverBase


@wp.kernel
def inertial_target_kernel(x: wp.array(dtype=wp.vec3), v: wp.array(dtype=wp.vec3), f: wp.array(dtype=wp.vec3),
                           inv_mass: wp.array(dtype=float), flags: wp.array(dtype=wp.int32),
                           world: wp.array(dtype=wp.int32), gravity: wp.array(dtype=wp.vec3), dt: float,
                           y: wp.array(dtype=wp.vec3), x_guess: wp.array(dtype=wp.vec3)):
    i = wp.tid()
    if inv_mass[i] == 0.0 or (flags[i] & 1) == 0:
        y[i] = x[i]
        x_guess[i] = x[i]
        return
    target = x[i] + v[i] * dt + (gravity[wp.max(world[i], 0)] + f[i] * inv_mass[i]) * (dt * dt)
    y[i] = target
    x_guess[i] = target


# A color holds a few hundred particles, each a dense local solve: worth the thread pool at that size.
wp.set_module_options({"cpu_serial_threshold": 128})


# A vertex's 3x3 block is symmetric: it is kept as its diagonal and its off-diagonal (xy, xz, yz) entries, two
# vec3s, which the C++ compiler keeps in registers where a mat33's temporaries go through memory. The rank-one
# updates are written out in the kernel: a helper function would not be inlined into a kernel this large.
@wp.func
def sym_solve(hd: wp.vec3, ho: wp.vec3, f: wp.vec3) -> wp.vec3:
    """H^-1 f for the symmetric H with diagonal hd and off-diagonal ho (xy, xz, yz); zero if H is singular."""
    c00 = hd[1] * hd[2] - ho[2] * ho[2]
    c01 = ho[1] * ho[2] - ho[0] * hd[2]
    c02 = ho[0] * ho[2] - hd[1] * ho[1]
    det = hd[0] * c00 + ho[0] * c01 + ho[1] * c02
    if det == 0.0:
        return wp.vec3(0.0, 0.0, 0.0)
    c11 = hd[0] * hd[2] - ho[1] * ho[1]
    c12 = ho[0] * ho[1] - hd[0] * ho[2]
    c22 = hd[0] * hd[1] - ho[0] * ho[0]
    return wp.vec3(c00 * f[0] + c01 * f[1] + c02 * f[2], c01 * f[0] + c11 * f[1] + c12 * f[2],
                   c02 * f[0] + c12 * f[1] + c22 * f[2]) / det


@wp.kernel
def vbd_color_kernel(x: wp.array(dtype=wp.vec3), x_prev: wp.array(dtype=wp.vec3), y: wp.array(dtype=wp.vec3),
                     mass: wp.array(dtype=float), inv_mass: wp.array(dtype=float), flags: wp.array(dtype=wp.int32),
                     radius: wp.array(dtype=float), world: wp.array(dtype=wp.int32), dt: float,
                     group: wp.array(dtype=wp.int32), color_of: wp.array(dtype=wp.int32), active: int,
                     tri_start: wp.array(dtype=wp.int32), tri_adj: wp.array(dtype=wp.int32),
                     tri_indices: wp.array2d(dtype=wp.int32), tri_poses: wp.array(dtype=wp.mat22),
                     tri_areas: wp.array(dtype=float), tri_materials: wp.array2d(dtype=float),
                     edge_start: wp.array(dtype=wp.int32), edge_adj: wp.array(dtype=wp.int32),
                     edge_indices: wp.array2d(dtype=wp.int32), edge_rest: wp.array(dtype=float),
                     edge_props: wp.array2d(dtype=float),
                     spring_start: wp.array(dtype=wp.int32), spring_adj: wp.array(dtype=wp.int32),
                     spring_indices: wp.array(dtype=wp.int32), spring_rest: wp.array(dtype=float),
                     spring_ke: wp.array(dtype=float), spring_kd: wp.array(dtype=float),
                     shapes: wp.array(dtype=wp.int32), body_q: wp.array(dtype=wp.transform),
                     shape_body: wp.array(dtype=wp.int32), shape_transform: wp.array(dtype=wp.transform),
                     shape_type: wp.array(dtype=wp.int32), shape_scale: wp.array(dtype=wp.vec3),
                     shape_source: wp.array(dtype=wp.uint64), shape_world: wp.array(dtype=wp.int32),
                     mat_ke: wp.array(dtype=float), mat_mu: wp.array(dtype=float), contact_ke: float,
                     contact_mu: float, friction_eps: float, x_out: wp.array(dtype=wp.vec3)):
    gi = wp.tid()
    i = group[gi]
    xi = x[i]
    # active >= 0: launched over every particle into a fresh array; the other colors are copied through.
    if inv_mass[i] == 0.0 or (flags[i] & 1) == 0 or (active >= 0 and color_of[i] != active):
        x_out[i] = xi
        return
    inv_dt = 1.0 / dt
    m_h2 = mass[i] * inv_dt * inv_dt
    f = (y[i] - xi) * m_h2
    hd = wp.vec3(m_h2, m_h2, m_h2)  # the block's diagonal
    ho = wp.vec3(0.0, 0.0, 0.0)  # and its off-diagonal (xy, xz, yz)
    # Membrane triangles (St. Venant-Kirchhoff): force -A F S b_i and its exact vertex block.
    for k in range(tri_start[i], tri_start[i + 1]):
        t = tri_adj[k] // 3
        loc = tri_adj[k] - 3 * t
        dm = tri_poses[t]
        b = wp.vec2(-dm[0, 0] - dm[1, 0], -dm[0, 1] - dm[1, 1])
        if loc == 1:
            b = wp.vec2(dm[0, 0], dm[0, 1])
        elif loc == 2:
            b = wp.vec2(dm[1, 0], dm[1, 1])
        a = tri_areas[t]
        mu = tri_materials[t, 0]
        lam = tri_materials[t, 1]
        damp = tri_materials[t, 2]
        t0 = tri_indices[t, 0]
        t1 = tri_indices[t, 1]
        t2 = tri_indices[t, 2]
        x0 = x[t0]
        e1 = x[t1] - x0
        e2 = x[t2] - x0
        f1 = e1 * dm[0, 0] + e2 * dm[1, 0]
        f2 = e1 * dm[0, 1] + e2 * dm[1, 1]
        g11 = 0.5 * (wp.dot(f1, f1) - 1.0)
        g22 = 0.5 * (wp.dot(f2, f2) - 1.0)
        g12 = 0.5 * wp.dot(f1, f2)
        tr = lam * (g11 + g22)
        s11 = 2.0 * mu * g11 + tr
        s22 = 2.0 * mu * g22 + tr
        s12 = 2.0 * mu * g12
        sb0 = s11 * b[0] + s12 * b[1]
        sb1 = s12 * b[0] + s22 * b[1]
        u = f1 * b[0] + f2 * b[1]
        bb = wp.dot(b, b)
        # Viscous damping on the rate of deformation dF/dt (zero for rigid motion), as the explicit solver's.
        p0 = x_prev[t0]
        w1 = e1 - (x_prev[t1] - p0)
        w2 = e2 - (x_prev[t2] - p0)
        gb = (w1 * dm[0, 0] + w2 * dm[1, 0]) * b[0] + (w1 * dm[0, 1] + w2 * dm[1, 1]) * b[1]
        f = f - (f1 * sb0 + f2 * sb1 + gb * (damp * inv_dt)) * a
        # Block: A (max(b.Sb, 0) I + mu |b|^2 (f1 f1^T + f2 f2^T) + (mu + lam) u u^T) + A damp |b|^2 / dt I.
        c_id = a * (wp.max(b[0] * sb0 + b[1] * sb1, 0.0) + damp * bb * inv_dt)
        c_f = a * mu * bb
        c_u = a * (mu + lam)
        hd = hd + wp.vec3(c_id, c_id, c_id) + (wp.cw_mul(f1, f1) + wp.cw_mul(f2, f2)) * c_f + wp.cw_mul(u, u) * c_u
        ho = ho + wp.vec3(f1[0] * f1[1] + f2[0] * f2[1], f1[0] * f1[2] + f2[0] * f2[2],
                          f1[1] * f1[2] + f2[1] * f2[2]) * c_f + wp.vec3(u[0] * u[1], u[0] * u[2], u[1] * u[2]) * c_u
    # Bending: the dihedral-angle spring's force on this vertex and its Gauss-Newton block.
    for k in range(edge_start[i], edge_start[i + 1]):
        e = edge_adj[k] // 4
        loc = edge_adj[k] - 4 * e
        ke = edge_props[e, 0]
        i0 = edge_indices[e, 0]
        i1 = edge_indices[e, 1]
        if i0 >= 0 and i1 >= 0 and ke > 0.0:
            p0 = x[i0]
            p1 = x[i1]
            p2 = x[edge_indices[e, 2]]
            p3 = x[edge_indices[e, 3]]
            n1 = wp.cross(p2 - p0, p3 - p0)
            n2 = wp.cross(p3 - p1, p2 - p1)
            ev = p3 - p2
            l1 = wp.dot(n1, n1)
            l2 = wp.dot(n2, n2)
            le = wp.length(ev)
            if l1 > 1.0e-20 and l2 > 1.0e-20 and le > 1.0e-9:
                # The angle between the unit normals; atan2 takes the unnormalized pair (same positive scale).
                angle = wp.atan2(wp.dot(wp.cross(n1, n2), ev) / le, wp.dot(n1, n2))
                r1 = 1.0 / l1
                r2 = 1.0 / l2
                d = n1 * (le * r1)
                if loc == 1:
                    d = n2 * (le * r2)
                elif loc == 2:
                    d = (n1 * (wp.dot(p0 - p3, ev) * r1) + n2 * (wp.dot(p1 - p3, ev) * r2)) / le
                elif loc == 3:
                    d = (n1 * (wp.dot(p0 - p2, ev) * r1) + n2 * (wp.dot(p1 - p2, ev) * r2)) / (-le)
                c = ke * (angle - edge_rest[e])
                f = f + d * c
                hd = hd + wp.cw_mul(d, d) * ke
                ho = ho + wp.vec3(d[0] * d[1], d[0] * d[2], d[1] * d[2]) * ke
    # Springs.
    for k in range(spring_start[i], spring_start[i + 1]):
        s = spring_adj[k]
        j = spring_indices[2 * s]
        if j == i:
            j = spring_indices[2 * s + 1]
        dvec = xi - x[j]
        l = wp.length(dvec)
        if l > 1.0e-9:
            n = dvec / l
            ks = spring_ke[s]
            rel = (xi - x_prev[i]) - (x[j] - x_prev[j])
            kd = spring_kd[s] * inv_dt
            f = f - n * (ks * (l - spring_rest[s]) + kd * wp.dot(n, rel))
            hd = hd + wp.cw_mul(n, n) * (ks + kd)
            ho = ho + wp.vec3(n[0] * n[1], n[0] * n[2], n[1] * n[2]) * (ks + kd)
    # Contacts with shapes, found here from their signed distances.
    r = radius[i]
    for k in range(shapes.shape[0]):
        s = shapes[k]
        ws = shape_world[s]
        if ws < 0 or world[i] < 0 or ws == world[i]:
            x_ws = shape_world_transform(body_q, shape_body, shape_transform, s)
            p_local = wp.transform_point(wp.transform_inverse(x_ws), xi)
            dn = shape_distance(shape_type[s], shape_scale[s], shape_source[s], p_local, r + 0.1)
            pen = r - dn[0]
            if pen > 0.0:
                n = wp.transform_vector(x_ws, wp.vec3(dn[1], dn[2], dn[3]))
                kc = 0.5 * (contact_ke + mat_ke[s])
                fn = kc * pen
                f = f + n * fn
                mu = 0.5 * (contact_mu + mat_mu[s])
                kt = 0.0
                if mu > 0.0:
                    du = xi - x_prev[i]
                    ut = du - n * wp.dot(n, du)
                    # Smoothed friction: a stiff tangential spring below the sliding speed friction_eps.
                    kt = mu * fn / wp.max(wp.length(ut), friction_eps * dt)
                    f = f - ut * kt
                # The block: kc n n^T + kt (I - n n^T).
                hd = hd + wp.cw_mul(n, n) * (kc - kt) + wp.vec3(kt, kt, kt)
                ho = ho + wp.vec3(n[0] * n[1], n[0] * n[2], n[1] * n[2]) * (kc - kt)
    x_out[i] = xi + sym_solve(hd, ho, f)


@wp.kernel
def vbd_velocity_kernel(x: wp.array(dtype=wp.vec3), x_prev: wp.array(dtype=wp.vec3), v_in: wp.array(dtype=wp.vec3),
                        inv_mass: wp.array(dtype=float), dt: float, x_out: wp.array(dtype=wp.vec3),
                        v_out: wp.array(dtype=wp.vec3)):
    i = wp.tid()
    x_out[i] = x[i]
    if inv_mass[i] == 0.0:
        v_out[i] = v_in[i]
    else:
        v_out[i] = (x[i] - x_prev[i]) / dt


def _adjacency(n: int, elements: np.ndarray, width: int) -> tuple[np.ndarray, np.ndarray]:
    """CSR of vertex -> (element * width + local corner) for the corners of ``elements`` (m, width)."""
    if len(elements) == 0:
        return np.zeros(n + 1, np.int32), np.zeros(1, np.int32)
    verts = elements.reshape(-1)
    codes = np.arange(verts.size, dtype=np.int64)
    keep = verts >= 0
    verts, codes = verts[keep], codes[keep]
    order = np.argsort(verts, kind="stable")
    start = np.zeros(n + 1, np.int64)
    np.add.at(start, verts + 1, 1)
    return np.cumsum(start).astype(np.int32), codes[order].astype(np.int32)


class SolverVBD(SolverBase):
    """Vertex block descent for particles, springs, membrane triangles and bending, with particle-shape
    contacts and friction. ``iterations`` color sweeps per step; ``friction_epsilon`` [m/s] is the sliding
    speed below which friction is smoothed into a stiff tangential spring. Rigid bodies and joints are not
    simulated by this solver (a model with dynamic bodies is refused)."""

    def __init__(self, model: Model, *, iterations: int = 10, friction_epsilon: float = 1.0e-2,
                 check_finite: bool = False, **_: Any) -> None:
        super().__init__(model, check_finite)
        if iterations < 1:
            raise ValueError(f"SolverVBD: iterations must be >= 1, got {iterations}")
        if model.body_count and np.any(model.body_inv_mass.numpy() > 0.0):
            raise ValueError("SolverVBD: the model has dynamic rigid bodies, which loomwork's VBD does not simulate; "
                             "use SolverXPBD or SolverSemiImplicit (or make the bodies kinematic)")
        if model.joint_count and np.any(model.joint_type.numpy() != JointType.FREE):
            raise ValueError("SolverVBD: joints are not simulated by loomwork's VBD")
        self.iterations = int(iterations)
        self.friction_epsilon = float(friction_epsilon)
        n = model.particle_count
        tris = model.tri_indices.numpy() if model.tri_count else np.zeros((0, 3), np.int32)
        edges = model.edge_indices.numpy() if model.edge_count else np.zeros((0, 4), np.int32)
        springs = model.spring_indices.numpy().reshape(-1, 2) if model.spring_count else np.zeros((0, 2), np.int32)
        groups = [g for g in color_graph(n, [*tris.tolist(), *edges.tolist(), *springs.tolist()]) if len(g)]
        color_of = np.zeros(n, np.int32)
        for c, g in enumerate(groups):
            color_of[g] = c
        with wp.ScopedDevice(model.device):
            self._colors = [wp.array(g, dtype=wp.int32) for g in groups]
            self._color_of = wp.array(color_of, dtype=wp.int32)
            self._everyone = wp.array(np.arange(n, dtype=np.int32), dtype=wp.int32)
            self._tri = [wp.array(a, dtype=wp.int32) for a in _adjacency(n, tris, 3)]
            self._edge = [wp.array(a, dtype=wp.int32) for a in _adjacency(n, edges, 4)]
            start, codes = _adjacency(n, springs, 2)
            self._spring = [wp.array(start, dtype=wp.int32), wp.array(codes // 2, dtype=wp.int32)]
            flags = model.shape_flags.numpy() if model.shape_count else np.zeros(0, np.int32)
            self._shapes = wp.array(np.flatnonzero(flags & ShapeFlags.COLLIDE_PARTICLES).astype(np.int32),
                                    dtype=wp.int32)
            empty_f = wp.zeros(1, dtype=float)
            self._spring_arrays = (model.spring_indices if model.spring_count else wp.zeros(2, dtype=wp.int32),
                                   model.spring_rest_length if model.spring_count else empty_f,
                                   model.spring_stiffness if model.spring_count else empty_f,
                                   model.spring_damping if model.spring_count else empty_f)

    def step(self, state_in: State, state_out: State, control: Control | None, contacts: Contacts | None,
             dt: float) -> None:
        """Advance by ``dt`` [s]; ``state_in.particle_f`` adds external forces."""
        self._check_step(state_in, state_out, dt)
        m = self.model
        d = m.device
        n = m.particle_count
        if n == 0:
            self._finish_step(state_out)
            return
        grad = m.requires_grad or state_in.requires_grad
        y = wp.empty_like(state_in.particle_q, requires_grad=grad)
        x = wp.empty_like(state_in.particle_q, requires_grad=grad)
        wp.launch(inertial_target_kernel, dim=n,
                  inputs=[state_in.particle_q, state_in.particle_qd, state_in.particle_f, m.particle_inv_mass,
                          m.particle_flags, m.particle_world, m.gravity, dt], outputs=[y, x], device=d)
        for _ in range(self.iterations):
            for c, group in enumerate(self._colors):
                # Differentiable: every particle written once into a fresh array. Otherwise: in place, per color.
                out = wp.empty_like(x, requires_grad=True) if grad else x
                members, active = (self._everyone, c) if grad else (group, -1)
                wp.launch(vbd_color_kernel, dim=len(members),
                          inputs=[x, state_in.particle_q, y, m.particle_mass, m.particle_inv_mass, m.particle_flags,
                                  m.particle_radius, m.particle_world, dt, members, self._color_of, active,
                                  *self._tri, m.tri_indices,
                                  m.tri_poses, m.tri_areas, m.tri_materials, *self._edge, m.edge_indices,
                                  m.edge_rest_angle, m.edge_bending_properties, *self._spring, *self._spring_arrays,
                                  self._shapes, state_in.body_q, m.shape_body, m.shape_transform, m.shape_type,
                                  m.shape_scale, m.shape_source_ptr, m.shape_world, m.shape_material_ke,
                                  m.shape_material_mu, m.soft_contact_ke, m.soft_contact_mu, self.friction_epsilon],
                          outputs=[out], device=d)
                x = out
        wp.launch(vbd_velocity_kernel, dim=n,
                  inputs=[x, state_in.particle_q, state_in.particle_qd, m.particle_inv_mass, dt],
                  outputs=[state_out.particle_q, state_out.particle_qd], device=d)
        if m.body_count:
            wp.copy(state_out.body_q, state_in.body_q)
            wp.copy(state_out.body_qd, state_in.body_qd)
        self._finish_step(state_out)
