"""Cloth self-contact: particles against the triangles they do not belong to, and edges against the edges
they share no vertex with (two edges can cross with every vertex clear of the other cloth's triangles).

A non-differentiated pass refits a BVH over the triangles' (edges') bounds and lists, per particle (edge),
the triangles (edges) closer than its radius; a differentiable pass then pushes each such pair apart with a
penalty force, split over the corners by the weights of the closest points (barycentric on a triangle,
(1 - s, s) along an edge). The lists are per step under a Tape, as the particle-particle ones."""

from __future__ import annotations

from typing import Any

import loomwork as wp

from ..model import Model, State
from ..narrow_phase import segment_closest_params
from .forces import contact_force

MAX_TRIANGLE_CONTACTS = 8
"""Triangles kept per particle and step."""
MAX_EDGE_CONTACTS = 8
"""Edges kept per edge and step."""


@wp.func
def closest_on_triangle(p: wp.vec3, a: wp.vec3, b: wp.vec3, c: wp.vec3) -> wp.vec3:
    """Barycentric weights (of a, b, c) of the point of triangle abc closest to p (the Voronoi-region walk of
    Ericson's Real-Time Collision Detection, 5.1.5)."""
    ab = b - a
    ac = c - a
    ap = p - a
    d1 = wp.dot(ab, ap)
    d2 = wp.dot(ac, ap)
    if d1 <= 0.0 and d2 <= 0.0:
        return wp.vec3(1.0, 0.0, 0.0)
    bp = p - b
    d3 = wp.dot(ab, bp)
    d4 = wp.dot(ac, bp)
    if d3 >= 0.0 and d4 <= d3:
        return wp.vec3(0.0, 1.0, 0.0)
    vc = d1 * d4 - d3 * d2
    if vc <= 0.0 and d1 >= 0.0 and d3 <= 0.0:
        v = d1 / (d1 - d3)
        return wp.vec3(1.0 - v, v, 0.0)
    cp = p - c
    d5 = wp.dot(ab, cp)
    d6 = wp.dot(ac, cp)
    if d6 >= 0.0 and d5 <= d6:
        return wp.vec3(0.0, 0.0, 1.0)
    vb = d5 * d2 - d1 * d6
    if vb <= 0.0 and d2 >= 0.0 and d6 <= 0.0:
        w = d2 / (d2 - d6)
        return wp.vec3(1.0 - w, 0.0, w)
    va = d3 * d6 - d5 * d4
    if va <= 0.0 and (d4 - d3) >= 0.0 and (d5 - d6) >= 0.0:
        w = (d4 - d3) / ((d4 - d3) + (d5 - d6))
        return wp.vec3(0.0, 1.0 - w, w)
    denom = 1.0 / (va + vb + vc)
    v = vb * denom
    w = vc * denom
    return wp.vec3(1.0 - v - w, v, w)


@wp.kernel(enable_backward=False)
def triangle_bounds_kernel(x: wp.array(dtype=wp.vec3), tri: wp.array2d(dtype=wp.int32), pad: float,
                           lowers: wp.array(dtype=wp.vec3), uppers: wp.array(dtype=wp.vec3)):
    t = wp.tid()
    a = x[tri[t, 0]]
    b = x[tri[t, 1]]
    c = x[tri[t, 2]]
    lo = wp.min(wp.min(a, b), c)
    hi = wp.max(wp.max(a, b), c)
    lowers[t] = lo - wp.vec3(pad, pad, pad)
    uppers[t] = hi + wp.vec3(pad, pad, pad)


@wp.kernel(enable_backward=False)
def triangle_candidates_kernel(bvh: wp.uint64, x: wp.array(dtype=wp.vec3), radius: wp.array(dtype=float),
                               flags: wp.array(dtype=wp.int32), tri: wp.array2d(dtype=wp.int32), capacity: int,
                               found: wp.array(dtype=wp.int32), count: wp.array(dtype=wp.int32)):
    i = wp.tid()
    n = 0
    if (flags[i] & 1) != 0:
        p = x[i]
        r = radius[i]
        query = wp.bvh_query_aabb(bvh, p - wp.vec3(r, r, r), p + wp.vec3(r, r, r))
        t = 0
        while wp.bvh_query_next(query, t):
            if tri[t, 0] != i and tri[t, 1] != i and tri[t, 2] != i and n < capacity:
                a = x[tri[t, 0]]
                b = x[tri[t, 1]]
                c = x[tri[t, 2]]
                w = closest_on_triangle(p, a, b, c)
                if wp.length(p - (a * w[0] + b * w[1] + c * w[2])) < r:
                    found[i * capacity + n] = t
                    n += 1
    count[i] = n


@wp.kernel
def triangle_contact_forces_kernel(x: wp.array(dtype=wp.vec3), v: wp.array(dtype=wp.vec3),
                                   radius: wp.array(dtype=float), tri: wp.array2d(dtype=wp.int32),
                                   found: wp.array(dtype=wp.int32), count: wp.array(dtype=wp.int32), capacity: int,
                                   ke: float, kd: float, kf: float, mu: float, f: wp.array(dtype=wp.vec3)):
    i, k = wp.tid()
    if k >= count[i]:
        return
    t = found[i * capacity + k]
    ia = tri[t, 0]
    ib = tri[t, 1]
    ic = tri[t, 2]
    p = x[i]
    a = x[ia]
    b = x[ib]
    c = x[ic]
    w = closest_on_triangle(p, a, b, c)
    q = a * w[0] + b * w[1] + c * w[2]
    d = p - q
    l = wp.length(d)
    pen = l - radius[i]
    if pen >= 0.0 or l < 1.0e-9:
        return
    vq = v[ia] * w[0] + v[ib] * w[1] + v[ic] * w[2]
    fc = contact_force(d / l, pen, v[i] - vq, ke, kd, kf, mu)
    wp.atomic_add(f, i, fc)
    wp.atomic_sub(f, ia, fc * w[0])
    wp.atomic_sub(f, ib, fc * w[1])
    wp.atomic_sub(f, ic, fc * w[2])


def eval_triangle_contact_forces(model: Model, state: State, particle_f: Any) -> None:
    """Self-contact of cloth: each particle against the triangles within its radius (stiffness and friction
    of the particle-particle contacts)."""
    n, m = model.particle_count, model.tri_count
    if m == 0 or n == 0:
        return
    d = model.device
    x = state.particle_q
    cache = model.__dict__
    if "_tri_bounds" not in cache:
        cache["_tri_bounds"] = (wp.empty(m, dtype=wp.vec3, device=d), wp.empty(m, dtype=wp.vec3, device=d))
    # The bounds only steer the search: no Tape needs them.
    wp.launch(triangle_bounds_kernel, dim=m, inputs=[x, model.tri_indices, model.particle_max_radius],
              outputs=[*cache["_tri_bounds"]], device=d, record_tape=False)
    if "_tri_bvh" not in cache:
        cache["_tri_bvh"] = wp.Bvh(*cache["_tri_bounds"])
    else:
        cache["_tri_bvh"].refit()
    if x.requires_grad:
        lists = (wp.empty(n * MAX_TRIANGLE_CONTACTS, dtype=wp.int32, device=d), wp.zeros(n, dtype=wp.int32, device=d))
        state.__dict__.setdefault("_step_triangle_lists", []).append(lists)
    else:
        lists = cache.get("_triangle_lists")
        if lists is None:
            lists = cache["_triangle_lists"] = (wp.empty(n * MAX_TRIANGLE_CONTACTS, dtype=wp.int32, device=d),
                                                wp.zeros(n, dtype=wp.int32, device=d))
    wp.launch(triangle_candidates_kernel, dim=n,
              inputs=[cache["_tri_bvh"].id, x, model.particle_radius, model.particle_flags, model.tri_indices,
                      MAX_TRIANGLE_CONTACTS], outputs=[*lists], device=d)
    wp.launch(triangle_contact_forces_kernel, dim=(n, MAX_TRIANGLE_CONTACTS),
              inputs=[x, state.particle_qd, model.particle_radius, model.tri_indices, *lists, MAX_TRIANGLE_CONTACTS,
                      model.particle_ke, model.particle_kd, model.particle_kf, model.particle_mu],
              outputs=[particle_f], device=d)


@wp.kernel(enable_backward=False)
def edge_bounds_kernel(x: wp.array(dtype=wp.vec3), edges: wp.array2d(dtype=wp.int32), pad: float,
                       lowers: wp.array(dtype=wp.vec3), uppers: wp.array(dtype=wp.vec3)):
    e = wp.tid()
    a = x[edges[e, 2]]
    b = x[edges[e, 3]]
    lowers[e] = wp.min(a, b) - wp.vec3(pad, pad, pad)
    uppers[e] = wp.max(a, b) + wp.vec3(pad, pad, pad)


@wp.func
def edge_pair_radius(radius: wp.array(dtype=float), a0: int, a1: int, b0: int, b1: int) -> float:
    """Contact distance [m] of two edges: the mean radius of their four particles."""
    return 0.25 * (radius[a0] + radius[a1] + radius[b0] + radius[b1])


@wp.kernel(enable_backward=False)
def edge_candidates_kernel(bvh: wp.uint64, x: wp.array(dtype=wp.vec3), radius: wp.array(dtype=float),
                           edges: wp.array2d(dtype=wp.int32), pad: float, capacity: int,
                           found: wp.array(dtype=wp.int32), count: wp.array(dtype=wp.int32)):
    e = wp.tid()
    a0 = edges[e, 2]
    a1 = edges[e, 3]
    pa = x[a0]
    qa = x[a1]
    n = 0
    query = wp.bvh_query_aabb(bvh, wp.min(pa, qa) - wp.vec3(pad, pad, pad), wp.max(pa, qa) + wp.vec3(pad, pad, pad))
    g = 0
    while wp.bvh_query_next(query, g):
        b0 = edges[g, 2]
        b1 = edges[g, 3]
        # Each pair once (from its lower edge), never two edges with a shared particle.
        if g > e and b0 != a0 and b0 != a1 and b1 != a0 and b1 != a1 and n < capacity:
            pb = x[b0]
            qb = x[b1]
            st = segment_closest_params(pa, qa - pa, pb, qb - pb)
            d = (pa + (qa - pa) * st[0]) - (pb + (qb - pb) * st[1])
            if wp.length(d) < edge_pair_radius(radius, a0, a1, b0, b1):
                found[e * capacity + n] = g
                n += 1
    count[e] = n


@wp.kernel
def edge_contact_forces_kernel(x: wp.array(dtype=wp.vec3), v: wp.array(dtype=wp.vec3),
                               radius: wp.array(dtype=float), edges: wp.array2d(dtype=wp.int32),
                               found: wp.array(dtype=wp.int32), count: wp.array(dtype=wp.int32), capacity: int,
                               ke: float, kd: float, kf: float, mu: float, f: wp.array(dtype=wp.vec3)):
    e, k = wp.tid()
    if k >= count[e]:
        return
    g = found[e * capacity + k]
    a0 = edges[e, 2]
    a1 = edges[e, 3]
    b0 = edges[g, 2]
    b1 = edges[g, 3]
    pa = x[a0]
    qa = x[a1]
    pb = x[b0]
    qb = x[b1]
    st = segment_closest_params(pa, qa - pa, pb, qb - pb)
    s = st[0]
    t = st[1]
    d = (pa + (qa - pa) * s) - (pb + (qb - pb) * t)
    l = wp.length(d)
    pen = l - edge_pair_radius(radius, a0, a1, b0, b1)
    if pen >= 0.0 or l < 1.0e-9:
        return
    rel = (v[a0] * (1.0 - s) + v[a1] * s) - (v[b0] * (1.0 - t) + v[b1] * t)
    fc = contact_force(d / l, pen, rel, ke, kd, kf, mu)
    wp.atomic_add(f, a0, fc * (1.0 - s))
    wp.atomic_add(f, a1, fc * s)
    wp.atomic_sub(f, b0, fc * (1.0 - t))
    wp.atomic_sub(f, b1, fc * t)


def eval_edge_contact_forces(model: Model, state: State, particle_f: Any) -> None:
    """Self-contact of cloth edges: each edge against the edges within the mean radius of their particles
    (stiffness and friction of the particle-particle contacts)."""
    m = model.edge_count
    if m < 2:
        return
    d = model.device
    x = state.particle_q
    cache = model.__dict__
    if "_edge_bounds" not in cache:
        cache["_edge_bounds"] = (wp.empty(m, dtype=wp.vec3, device=d), wp.empty(m, dtype=wp.vec3, device=d))
    pad = model.particle_max_radius
    wp.launch(edge_bounds_kernel, dim=m, inputs=[x, model.edge_indices, pad], outputs=[*cache["_edge_bounds"]],
              device=d, record_tape=False)
    if "_edge_bvh" not in cache:
        cache["_edge_bvh"] = wp.Bvh(*cache["_edge_bounds"])
    else:
        cache["_edge_bvh"].refit()
    if x.requires_grad:
        lists = (wp.empty(m * MAX_EDGE_CONTACTS, dtype=wp.int32, device=d), wp.zeros(m, dtype=wp.int32, device=d))
        state.__dict__.setdefault("_step_edge_lists", []).append(lists)
    else:
        lists = cache.get("_edge_lists")
        if lists is None:
            lists = cache["_edge_lists"] = (wp.empty(m * MAX_EDGE_CONTACTS, dtype=wp.int32, device=d),
                                            wp.zeros(m, dtype=wp.int32, device=d))
    wp.launch(edge_candidates_kernel, dim=m,
              inputs=[cache["_edge_bvh"].id, x, model.particle_radius, model.edge_indices, pad, MAX_EDGE_CONTACTS],
              outputs=[*lists], device=d)
    wp.launch(edge_contact_forces_kernel, dim=(m, MAX_EDGE_CONTACTS),
              inputs=[x, state.particle_qd, model.particle_radius, model.edge_indices, *lists, MAX_EDGE_CONTACTS,
                      model.particle_ke, model.particle_kd, model.particle_kf, model.particle_mu],
              outputs=[particle_f], device=d)
