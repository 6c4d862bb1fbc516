"""CollisionPipeline: finds particle-shape and shape-shape contacts of a model's state.

Particle-shape: every particle against every shape of its world that takes particle collisions, by the
shape's signed distance (primitives analytically, meshes through their BVH, SDF volumes by trilinear
samples).

Shape-shape, in two phases. The broad phase lists the pairs whose bounds overlap: either a pair list made
once at construction (every pair of a world that may touch: not filtered, not on one body, not both
static), each tested by bounding spheres every step, or a `wp.Bvh` over the shapes' world bounds, one
subtree per world, refitted each step and queried by every shape (no pair list: the cost grows as
n log n with the shapes of a world, not n^2). The narrow phase runs a thread per pair (8 sharing its probes
where meshes collide) and dispatches on the pair's types: capsule-capsule, capsule-box and box-box have exact routines
(`narrow_phase`); a sphere's center is tested against the other shape's exact signed distance; the rest
(planes, cylinders, meshes, SDFs) use probes: the points of the rounder shape (capsule ends, box corners,
cylinder rims, mesh vertices; two meshes probe each other) and its edges, each at its point deepest in the
other shape. Particle-particle and cloth self-contact are found by the solvers through the model's
HashGrid."""

from __future__ import annotations

from typing import Any, Literal

import numpy as np

import loomwork as wp

from .contacts import Contacts
from .enums import GeoType, ShapeFlags
from .model import Model, State
from .narrow_phase import ContactPoint, box_box_contact, capsule_box_contact, capsule_capsule_contact
from .shape_kernels import (
    BOX,
    CAPSULE,
    CONE,
    CYLINDER,
    ELLIPSOID,
    MESH,
    PLANE,
    SPHERE,
    deepest_on_segment,
    edge_probe,
    probe_point,
    shape_distance,
)

# an ellipsoid's one probe is its support point toward the other shape; a mesh's probes are its vertices
_PROBES = {GeoType.SPHERE: 1, GeoType.CAPSULE: 2, GeoType.BOX: 8, GeoType.CYLINDER: 16, GeoType.ELLIPSOID: 1,
           GeoType.CONE: 9}
_EDGES = {GeoType.CAPSULE: 1, GeoType.BOX: 12}  # a mesh: three per triangle (each probed from one of them)
_EDGE_END = 0.005  # an edge's deepest point this close to an end (in parameter) is that end's probe point
MESH_THREADS = 8  # threads per pair where meshes collide, each taking a share of the probes (else one)
_BVH_REBUILD_EVERY = 64  # collides between rebuilds of the broad phase's tree (refits in between)


@wp.func
def shape_world_transform(body_q: wp.array(dtype=wp.transform), shape_body: wp.array(dtype=wp.int32),
                          shape_transform: wp.array(dtype=wp.transform), s: int) -> wp.transform:
    b = shape_body[s]
    if b < 0:
        return shape_transform[s]
    return wp.transform_multiply(body_q[b], shape_transform[s])


@wp.func
def particle_in_shape(particle_q: wp.array(dtype=wp.vec3), body_q: wp.array(dtype=wp.transform),
                      shape_body: wp.array(dtype=wp.int32), shape_transform: wp.array(dtype=wp.transform),
                      shape_type: wp.array(dtype=wp.int32), shape_scale: wp.array(dtype=wp.vec3),
                      shape_source: wp.array(dtype=wp.uint64), i: int, s: int, r: float, gap: float) -> wp.vec4:
    """Particle i's signed distance (x) to shape s and the outward normal (yzw), in the shape's frame."""
    x_ws = shape_world_transform(body_q, shape_body, shape_transform, s)
    p_local = wp.transform_point(wp.transform_inverse(x_ws), particle_q[i])
    return shape_distance(shape_type[s], shape_scale[s], shape_source[s], p_local, r + gap)


@wp.kernel(enable_backward=False)
def soft_contacts_kernel(particle_q: wp.array(dtype=wp.vec3), particle_radius: wp.array(dtype=float),
                         particle_flags: wp.array(dtype=wp.int32), particle_world: wp.array(dtype=wp.int32),
                         body_q: wp.array(dtype=wp.transform), shapes: wp.array(dtype=wp.int32),
                         shape_body: wp.array(dtype=wp.int32), shape_transform: wp.array(dtype=wp.transform),
                         shape_type: wp.array(dtype=wp.int32), shape_scale: wp.array(dtype=wp.vec3),
                         shape_source: wp.array(dtype=wp.uint64), shape_world: wp.array(dtype=wp.int32),
                         gap: float, max_count: int, count: wp.array(dtype=wp.int32),
                         out_particle: wp.array(dtype=wp.int32), out_shape: wp.array(dtype=wp.int32)):
    """Which particles touch which shapes (their geometry follows in soft_contact_geometry_kernel)."""
    i, k = wp.tid()
    s = shapes[k]
    if (particle_flags[i] & 1) == 0:
        return
    wi = particle_world[i]
    ws = shape_world[s]
    if wi >= 0 and ws >= 0 and wi != ws:
        return
    r = particle_radius[i]
    dn = particle_in_shape(particle_q, body_q, shape_body, shape_transform, shape_type, shape_scale, shape_source, i,
                           s, r, gap)
    if dn[0] - r >= gap:
        return
    index = wp.atomic_add(count, 0, 1)
    if index < max_count:
        out_particle[index] = i
        out_shape[index] = s


@wp.kernel
def soft_contact_geometry_kernel(particle_q: wp.array(dtype=wp.vec3), particle_radius: wp.array(dtype=float),
                                 body_q: wp.array(dtype=wp.transform), shape_body: wp.array(dtype=wp.int32),
                                 shape_transform: wp.array(dtype=wp.transform), shape_type: wp.array(dtype=wp.int32),
                                 shape_scale: wp.array(dtype=wp.vec3), shape_source: wp.array(dtype=wp.uint64),
                                 gap: float, count: wp.array(dtype=wp.int32), particle: wp.array(dtype=wp.int32),
                                 shape: wp.array(dtype=wp.int32), out_body_pos: wp.array(dtype=wp.vec3),
                                 out_body_vel: wp.array(dtype=wp.vec3), out_normal: wp.array(dtype=wp.vec3)):
    """The closest point and normal of each soft contact: a kernel of its own, with no atomics, so its adjoint
    knows which contact each thread wrote."""
    c = wp.tid()
    if c >= count[0]:
        return
    i = particle[c]
    s = shape[c]
    dn = particle_in_shape(particle_q, body_q, shape_body, shape_transform, shape_type, shape_scale, shape_source, i,
                           s, particle_radius[i], gap)
    normal = wp.transform_vector(shape_world_transform(body_q, shape_body, shape_transform, s),
                                 wp.vec3(dn[1], dn[2], dn[3]))
    pos = particle_q[i] - normal * dn[0]
    b = shape_body[s]
    if b >= 0:
        pos = wp.transform_point(wp.transform_inverse(body_q[b]), pos)
    out_body_pos[c] = pos
    out_body_vel[c] = wp.vec3(0.0, 0.0, 0.0)
    out_normal[c] = normal


@wp.kernel(enable_backward=False)
def shape_bounds_kernel(body_q: wp.array(dtype=wp.transform), shapes: wp.array(dtype=wp.int32),
                        shape_body: wp.array(dtype=wp.int32), shape_transform: wp.array(dtype=wp.transform),
                        shape_radius: wp.array(dtype=float), shape_gap: wp.array(dtype=float),
                        lowers: wp.array(dtype=wp.vec3), uppers: wp.array(dtype=wp.vec3)):
    """The world box of each collidable shape's bounding sphere, grown by its gap (a plane's is huge)."""
    i = wp.tid()
    s = shapes[i]
    c = wp.transform_get_translation(shape_world_transform(body_q, shape_body, shape_transform, s))
    r = shape_radius[s] + shape_gap[s]
    lowers[i] = c - wp.vec3(r, r, r)
    uppers[i] = c + wp.vec3(r, r, r)


@wp.func
def pair_filtered(a: int, b: int, shape_body: wp.array(dtype=wp.int32), shape_group: wp.array(dtype=wp.int32),
                  filter_keys: wp.array(dtype=wp.int64), shape_count: int) -> bool:
    """Whether shapes a and b never collide: one body, both static, collision groups apart, or a filter pair
    (`filter_keys`: min * shape_count + max of each, sorted)."""
    ba = shape_body[a]
    bb = shape_body[b]
    if ba == bb or (ba < 0 and bb < 0):
        return True
    ga = shape_group[a]
    gb = shape_group[b]
    if ga == 0 or gb == 0 or (ga > 0 and gb > 0 and ga != gb):
        return True
    key = wp.int64(wp.min(a, b)) * wp.int64(shape_count) + wp.int64(wp.max(a, b))
    lo = 0
    hi = filter_keys.shape[0]
    while lo < hi:
        mid = (lo + hi) // 2
        if filter_keys[mid] < key:
            lo = mid + 1
        else:
            hi = mid
    return lo < filter_keys.shape[0] and filter_keys[lo] == key


@wp.kernel(enable_backward=False, module_options={"cpu_serial_threshold": 64})  # a tree query a thread
def bvh_pairs_kernel(bvh: wp.uint64, shapes: wp.array(dtype=wp.int32), lowers: wp.array(dtype=wp.vec3),
                     uppers: wp.array(dtype=wp.vec3), shape_world: wp.array(dtype=wp.int32),
                     shape_body: wp.array(dtype=wp.int32), shape_group: wp.array(dtype=wp.int32),
                     filter_keys: wp.array(dtype=wp.int64), shape_count: int, max_pairs: int,
                     pair_count: wp.array(dtype=wp.int32), pairs: wp.array(dtype=wp.vec2i)):
    """Each shape's overlapping boxes in its own world's subtree (the later ones, so a pair is listed once)
    and in the shared shapes' subtree (world -1)."""
    i = wp.tid()
    s = shapes[i]
    w = shape_world[s]
    for g in range(2):
        group = w
        if g == 1:
            if w < 0:
                break
            group = -1
        root = wp.bvh_get_group_root(bvh, group)
        if root < 0:
            continue
        query = wp.bvh_query_aabb(bvh, lowers[i], uppers[i], root)
        j = 0
        while wp.bvh_query_next(query, j):
            t = shapes[j]
            if g == 0 and j <= i:
                continue
            if pair_filtered(s, t, shape_body, shape_group, filter_keys, shape_count):
                continue
            index = wp.atomic_add(pair_count, 0, 1)
            if index < max_pairs:
                pairs[index] = wp.vec2i(s, t)


@wp.func
def probe_rank(geo: int) -> int:
    """Which shape of a pair carries the probes: the lower rank probes the other (a sphere's center is exact);
    planes and SDFs never probe."""
    if geo == SPHERE:
        return 0
    if geo == CAPSULE or geo == ELLIPSOID:
        return 1
    if geo == BOX:
        return 2
    if geo == CYLINDER or geo == CONE:
        return 3
    if geo == MESH:
        return 4
    return 99


@wp.func
def probe_items(p: int, q: int, shape_type: wp.array(dtype=wp.int32), shape_items: wp.array(dtype=wp.vec2i)) -> int:
    """How many probes (points, then edges) shape p tests against shape q: none where q should probe p
    (a lower rank probes), between two spheres one way, and no edges against a plane."""
    rp = probe_rank(shape_type[p])
    rq = probe_rank(shape_type[q])
    if rp == 99 or rp > rq or (rp == rq and rp == 0 and p > q):
        return 0
    n = shape_items[p]
    if shape_type[q] == PLANE:
        return n[0]
    return n[0] + n[1]


@wp.func
def edge_parameter(x_p: wp.transform, x_q: wp.transform, geo_p: int, scale_p: wp.vec3, source_p: wp.uint64,
                   geo_q: int, scale_q: wp.vec3, source_q: wp.uint64, radius_q: float, n_points: int, item: int,
                   gap: float) -> float:
    """For a probe edge, the parameter of its point deepest in q; -1 for a probe point, and for an edge another
    probe covers (its deepest point is an end, or another triangle probes it)."""
    if item < n_points:
        return -1.0
    e = edge_probe(geo_p, scale_p, source_p, item - n_points)
    if e.valid == 0:
        return -1.0
    p_to_q = wp.transform_multiply(wp.transform_inverse(x_q), x_p)
    s = deepest_on_segment(geo_q, scale_q, source_q, wp.transform_point(p_to_q, e.a), wp.transform_point(p_to_q, e.b),
                           e.radius + gap + radius_q)
    if s <= _EDGE_END or s >= 1.0 - _EDGE_END:
        return -1.0
    return s


@wp.func
def ellipsoid_support(x_p: wp.transform, x_q: wp.transform, r: wp.vec3, geo_q: int, scale_q: wp.vec3,
                      source_q: wp.uint64, gap: float) -> wp.vec3:
    """The point of ellipsoid p (semi-axes r, in its frame) deepest toward shape q: its support point against
    q's outward normal seen from the center, refined once from the point found (exact against a plane)."""
    p_to_q = wp.transform_multiply(wp.transform_inverse(x_q), x_p)
    reach = 2.0 * wp.max(r[0], wp.max(r[1], r[2])) + gap
    s = wp.vec3(0.0, 0.0, 0.0)
    for _i in range(2):
        dn = shape_distance(geo_q, scale_q, source_q, wp.transform_point(p_to_q, s), reach)
        rn = wp.cw_mul(r, wp.transform_vector(wp.transform_inverse(p_to_q), wp.vec3(dn[1], dn[2], dn[3])))
        ln = wp.length(rn)
        if ln > 1.0e-12:
            s = -wp.cw_mul(r, rn) / ln
    return s


@wp.func
def probe_contact(x_p: wp.transform, x_q: wp.transform, geo_p: int, scale_p: wp.vec3, source_p: wp.uint64,
                  geo_q: int, scale_q: wp.vec3, source_q: wp.uint64, n_points: int, item: int, s: float,
                  gap: float) -> ContactPoint:
    """Probe `item` of shape p (a point, or an edge at its parameter s) against q's signed distance: shape 0 is q
    (its surface point), shape 1 is p (the probe, with the radius its surface lies around it)."""
    c = ContactPoint()
    c.valid = 0
    center = wp.vec3()
    radius = 0.0
    if geo_p == ELLIPSOID:
        center = ellipsoid_support(x_p, x_q, scale_p, geo_q, scale_q, source_q, gap)
    elif item < n_points:
        probe = probe_point(geo_p, scale_p, source_p, item)
        center = wp.vec3(probe[0], probe[1], probe[2])
        radius = probe[3]
    else:
        if s < 0.0:
            return c
        e = edge_probe(geo_p, scale_p, source_p, item - n_points)
        center = e.a + (e.b - e.a) * s
        radius = e.radius
    p_world = wp.transform_point(x_p, center)
    p_q = wp.transform_point(wp.transform_inverse(x_q), p_world)
    dn = shape_distance(geo_q, scale_q, source_q, p_q, radius + gap)
    n_q = wp.vec3(dn[1], dn[2], dn[3])
    if dn[0] - radius < gap:
        c.valid = 1
    c.point0 = wp.transform_point(x_q, p_q - n_q * dn[0])
    c.point1 = p_world
    c.normal = wp.transform_vector(x_q, n_q)
    c.margin0 = 0.0
    c.margin1 = radius
    return c


@wp.func
def exact_slots(t0: int, t1: int) -> int:
    """How many contacts the exact routine of a pair of types (shape 0 first) can make; 0 where the pair is
    probed instead (a box-capsule pair is listed capsule first)."""
    if t0 == CAPSULE and t1 == CAPSULE:
        return 2
    if t0 == CAPSULE and t1 == BOX:
        return 2
    if t0 == BOX and t1 == BOX:
        return 8
    return 0


@wp.func
def exact_contact(x_0: wp.transform, x_1: wp.transform, t0: int, t1: int, scale_0: wp.vec3, scale_1: wp.vec3,
                  slot: int, gap: float) -> ContactPoint:
    """Slot `slot` of the exact routine of shape 0 and shape 1 (a pair `exact_slots` counts)."""
    if t0 == CAPSULE and t1 == CAPSULE:
        return capsule_capsule_contact(x_0, scale_0[0], scale_0[1], x_1, scale_1[0], scale_1[1], slot, gap)
    if t1 == BOX and t0 == CAPSULE:
        return capsule_box_contact(x_0, scale_0[0], scale_0[1], x_1, scale_1, slot, gap)
    return box_box_contact(x_0, scale_0, x_1, scale_1, slot, gap)


@wp.func
def pair_contact(x_0: wp.transform, x_1: wp.transform, t0: int, t1: int, scale_0: wp.vec3, scale_1: wp.vec3,
                 source_0: wp.uint64, source_1: wp.uint64, n_points_1: int, feature: int, s: float,
                 gap: float) -> ContactPoint:
    """Contact `feature` between shape 0 and shape 1: slot `feature` of the pair's exact routine, or else shape
    1's probe `feature` (an edge at parameter s) against shape 0's signed distance."""
    if exact_slots(t0, t1) > 0:
        return exact_contact(x_0, x_1, t0, t1, scale_0, scale_1, feature, gap)
    return probe_contact(x_1, x_0, t1, scale_1, source_1, t0, scale_0, source_0, n_points_1, feature, s, gap)


@wp.kernel(enable_backward=False)
def narrow_phase_kernel(body_q: wp.array(dtype=wp.transform), pairs: wp.array(dtype=wp.vec2i),
                        pair_count: wp.array(dtype=wp.int32), shape_body: wp.array(dtype=wp.int32),
                        shape_transform: wp.array(dtype=wp.transform), shape_type: wp.array(dtype=wp.int32),
                        shape_scale: wp.array(dtype=wp.vec3), shape_source: wp.array(dtype=wp.uint64),
                        shape_radius: wp.array(dtype=float), shape_gap: wp.array(dtype=float),
                        shape_items: wp.array(dtype=wp.vec2i), threads: int, max_count: int,
                        count: wp.array(dtype=wp.int32), out_shape0: wp.array(dtype=wp.int32),
                        out_shape1: wp.array(dtype=wp.int32), out_feature: wp.array(dtype=wp.int32),
                        out_param: wp.array(dtype=float)):
    """Which features of which pairs touch (their geometry follows in rigid_contact_geometry_kernel): thread
    (pair, k) of (pairs, threads) runs the pair's exact routine (k = 0), or takes its k-th, (k + threads)-th, ...
    probe, each way the pair probes."""
    p, k = wp.tid()
    if p >= pair_count[0]:
        return
    first = pairs[p][0]
    second = pairs[p][1]
    if shape_type[first] == BOX and shape_type[second] == CAPSULE:
        first = pairs[p][1]
        second = pairs[p][0]
    t0 = shape_type[first]
    t1 = shape_type[second]
    if exact_slots(t0, t1) > 0:
        if k == 0:  # one thread: an exact routine's valid slots come first, so the first invalid one ends them
            gap = wp.max(shape_gap[first], shape_gap[second])
            x_0 = shape_world_transform(body_q, shape_body, shape_transform, first)
            x_1 = shape_world_transform(body_q, shape_body, shape_transform, second)
            for slot in range(exact_slots(t0, t1)):
                c = exact_contact(x_0, x_1, t0, t1, shape_scale[first], shape_scale[second], slot, gap)
                if c.valid == 0:
                    break
                index = wp.atomic_add(count, 0, 1)
                if index < max_count:
                    out_shape0[index] = first
                    out_shape1[index] = second
                    out_feature[index] = slot
                    out_param[index] = -1.0
        return
    for way in range(2):
        a = pairs[p][way]
        b = pairs[p][1 - way]
        ta = shape_type[a]
        tb = shape_type[b]
        gap = wp.max(shape_gap[a], shape_gap[b])
        x_a = shape_world_transform(body_q, shape_body, shape_transform, a)
        x_b = shape_world_transform(body_q, shape_body, shape_transform, b)
        if ta != PLANE and tb != PLANE:
            dist = wp.length(wp.transform_get_translation(x_a) - wp.transform_get_translation(x_b))
            if dist > shape_radius[a] + shape_radius[b] + gap:
                return
        for item in range(k, probe_items(a, b, shape_type, shape_items), threads):
            n_points = shape_items[a][0]
            s = edge_parameter(x_a, x_b, ta, shape_scale[a], shape_source[a], tb, shape_scale[b], shape_source[b],
                               shape_radius[b], n_points, item, gap)
            c = probe_contact(x_a, x_b, ta, shape_scale[a], shape_source[a], tb, shape_scale[b], shape_source[b],
                              n_points, item, s, gap)
            if c.valid != 0:
                index = wp.atomic_add(count, 0, 1)
                if index < max_count:
                    out_shape0[index] = b
                    out_shape1[index] = a
                    out_feature[index] = item
                    out_param[index] = s


@wp.kernel
def rigid_contact_geometry_kernel(body_q: wp.array(dtype=wp.transform), shape_body: wp.array(dtype=wp.int32),
                                  shape_transform: wp.array(dtype=wp.transform), shape_type: wp.array(dtype=wp.int32),
                                  shape_scale: wp.array(dtype=wp.vec3), shape_source: wp.array(dtype=wp.uint64),
                                  shape_gap: wp.array(dtype=float), shape_items: wp.array(dtype=wp.vec2i),
                                  count: wp.array(dtype=wp.int32), shape0: wp.array(dtype=wp.int32),
                                  shape1: wp.array(dtype=wp.int32), feature: wp.array(dtype=wp.int32),
                                  param: wp.array(dtype=float), out_point0: wp.array(dtype=wp.vec3),
                                  out_point1: wp.array(dtype=wp.vec3), out_normal: wp.array(dtype=wp.vec3),
                                  out_margin0: wp.array(dtype=float), out_margin1: wp.array(dtype=float)):
    """The points, normal and margins of each contact the narrow phase found, in the frames of the shapes'
    bodies: a kernel of its own, with no atomics, so its adjoint knows which contact each thread wrote (an edge's
    parameter is read as a constant: a contact point's motion along the edge changes the distance only to second
    order)."""
    i = wp.tid()
    if i >= count[0]:
        return
    a = shape0[i]
    b = shape1[i]
    x_a = shape_world_transform(body_q, shape_body, shape_transform, a)
    x_b = shape_world_transform(body_q, shape_body, shape_transform, b)
    c = pair_contact(x_a, x_b, shape_type[a], shape_type[b], shape_scale[a], shape_scale[b], shape_source[a],
                     shape_source[b], shape_items[b][0], feature[i], param[i], wp.max(shape_gap[a], shape_gap[b]))
    p0 = c.point0
    p1 = c.point1
    if shape_body[a] >= 0:
        p0 = wp.transform_point(wp.transform_inverse(body_q[shape_body[a]]), p0)
    if shape_body[b] >= 0:
        p1 = wp.transform_point(wp.transform_inverse(body_q[shape_body[b]]), p1)
    out_point0[i] = p0
    out_point1[i] = p1
    out_normal[i] = c.normal
    out_margin0[i] = c.margin0
    out_margin1[i] = c.margin1


def _pair_bound(world: np.ndarray) -> int:
    """How many pairs of shapes share a world (the shared world -1 meets every world), before filtering."""
    shared = int((world < 0).sum())
    counts = np.bincount(world[world >= 0]) if (world >= 0).any() else np.zeros(0, np.int64)
    return int((counts * (counts - 1) // 2).sum() + counts.sum() * shared + shared * (shared - 1) // 2)


def collidable_shapes(model: Model) -> np.ndarray:
    """The shapes that collide with other shapes: flagged so, and not in collision group 0."""
    if model.shape_count == 0:
        return np.zeros(0, np.int32)
    flags = model.shape_flags.numpy()
    group = model.shape_collision_group.numpy()
    return np.flatnonzero(((flags & ShapeFlags.COLLIDE_SHAPES) != 0) & (group != 0)).astype(np.int32)


def shape_pairs(model: Model) -> np.ndarray:
    """Every pair of collidable shapes (shape, shape) that may touch: in one world or one of them shared,
    on two bodies not both static, in groups that meet and not filtered; made world by world."""
    m = model
    collide = collidable_shapes(m)
    if len(collide) < 2:
        return np.zeros((0, 2), np.int32)
    body = m.shape_body.numpy()
    world = m.shape_world.numpy()
    group = m.shape_collision_group.numpy()
    shared = collide[world[collide] < 0]
    own = collide[world[collide] >= 0]
    own = own[np.argsort(world[own], kind="stable")]
    starts = np.flatnonzero(np.diff(world[own], prepend=-2)) if len(own) else np.zeros(0, np.int64)
    blocks = [shared] + np.split(own, starts[1:])  # the shared shapes, then each world's own
    a_parts, b_parts = [], []
    for k, members in enumerate(blocks):  # pairs within a block, and each world's own with the shared
        i, j = np.triu_indices(len(members), 1)
        a_parts += [members[i], np.repeat(members, len(shared)) if k else members[:0]]
        b_parts += [members[j], np.tile(shared, len(members)) if k else members[:0]]
    a, b = np.concatenate(a_parts), np.concatenate(b_parts)
    keep = (body[a] != body[b]) & ((body[a] >= 0) | (body[b] >= 0))
    keep &= ~((group[a] > 0) & (group[b] > 0) & (group[a] != group[b]))
    a, b = a[keep], b[keep]
    if m.shape_collision_filter_pairs:
        n = m.shape_count
        filters = np.fromiter((x * n + y for x, y in m.shape_collision_filter_pairs), np.int64)
        keep = ~np.isin(np.minimum(a, b).astype(np.int64) * n + np.maximum(a, b), filters)
        a, b = a[keep], b[keep]
    return np.stack([a, b], axis=1).astype(np.int32)


class CollisionPipeline:
    """Finds the contacts of a state: ``contacts = pipeline.contacts()`` once, then
    ``pipeline.collide(state, contacts)`` each step (or once, for contacts that do not move).

    ``broad_phase`` picks how shape pairs are found: ``"explicit"`` (or ``"nxn"``) tests a pair list made at
    construction (every pair of a world that may touch) by bounding spheres each step: cheapest for many
    small worlds, and it can be captured in a CUDA graph. ``"bvh"`` (or ``"sap"``) queries a `wp.Bvh` over the
    shapes' world bounds, one subtree per world, refitted on the host each step: for worlds of many shapes,
    where a pair list grows as n^2. The default (None) takes the pair list while it has at most 8 pairs per
    shape, else the tree. ``shape_pairs_max`` bounds the pairs the tree may find per step.
    The pair list is ``model.shape_contact_pairs`` (assign it to change the pairs), or ``shape_pairs_filtered``
    when given; ``rigid_contact_max`` / ``soft_contact_max`` default to the model's when it sets them."""

    def __init__(self, model: Model, *, rigid_contact_max: int | None = None, soft_contact_max: int | None = None,
                 soft_contact_gap: float | None = None, soft_contact_margin: float | None = None,
                 requires_grad: bool | None = None,
                 broad_phase: Literal["nxn", "sap", "explicit", "bvh"] | None = None,
                 shape_pairs_max: int | None = None, shape_pairs_filtered: Any = None, verify_buffers: bool = True,
                 **_: Any) -> None:
        if not isinstance(model, Model):
            raise TypeError(f"CollisionPipeline: expected a loomwork.sim.Model, got {type(model).__name__}")
        if broad_phase not in (None, "nxn", "sap", "explicit", "bvh"):
            raise ValueError(f"CollisionPipeline: unknown broad_phase {broad_phase!r}; use 'explicit', 'nxn', 'bvh' "
                             "or 'sap'")
        self.model = model
        self.requires_grad = model.requires_grad if requires_grad is None else bool(requires_grad)
        gap = soft_contact_gap if soft_contact_gap is not None else soft_contact_margin
        self.soft_contact_gap = 0.01 if gap is None else float(gap)
        self.verify_buffers = verify_buffers
        n = model.shape_count
        types = model.shape_type.numpy() if n else np.zeros(0, np.int32)
        flags = model.shape_flags.numpy() if n else np.zeros(0, np.int32)
        d = model.device
        particle_shapes = np.flatnonzero(flags & ShapeFlags.COLLIDE_PARTICLES).astype(np.int32)
        self._particle_shapes = wp.array(particle_shapes, dtype=wp.int32, device=d)
        collide = collidable_shapes(model)
        world = model.shape_world.numpy()[collide] if n else np.zeros(0, np.int32)
        items = np.zeros((max(n, 1), 2), np.int32)
        for s in collide:
            items[s] = self._items(int(s), GeoType(int(types[s])))
        self._shape_items = wp.array(items, dtype=wp.vec2i, device=d)
        self._threads = MESH_THREADS if np.any(types[collide] == GeoType.MESH) else 1
        bound = _pair_bound(world)
        if shape_pairs_filtered is not None:
            if broad_phase not in (None, "explicit"):
                raise ValueError(f"CollisionPipeline: shape_pairs_filtered is a pair list; it needs "
                                 f"broad_phase='explicit', not {broad_phase!r}")
            broad_phase = "explicit"
        elif broad_phase is None:
            broad_phase = "explicit" if bound <= 8 * len(collide) else "bvh"
        self.broad_phase = "explicit" if broad_phase in ("explicit", "nxn") else "bvh"
        if self.broad_phase == "explicit":
            given = model.shape_contact_pairs if shape_pairs_filtered is None else shape_pairs_filtered
            pairs = self._given_pairs(given)
            self.shape_pairs_max = len(pairs)
            self._pairs = wp.array(pairs, dtype=wp.vec2i, device=d)
            self._pair_count = wp.array([len(pairs)], dtype=wp.int32, device=d)
            contact_bound = int(self._contact_bound(pairs, items))
        else:
            self.shape_pairs_max = int(shape_pairs_max) if shape_pairs_max is not None else \
                min(bound, 32 * len(collide) + 64)
            self._collide = wp.array(collide, dtype=wp.int32, device=d)
            self._lowers = wp.zeros(len(collide), dtype=wp.vec3, device=d)
            self._uppers = wp.zeros(len(collide), dtype=wp.vec3, device=d)
            self._bound_shapes(model.body_q)
            self._bvh = wp.Bvh(self._lowers, self._uppers, groups=wp.array(world, dtype=wp.int32, device=d))
            self._collides = 0
            filters = np.asarray(sorted(min(a, b) * n + max(a, b) for a, b in model.shape_collision_filter_pairs),
                                 dtype=np.int64)
            self._filter_keys = wp.array(filters, dtype=wp.int64, device=d)
            is_mesh = types[collide] == GeoType.MESH
            # touching pairs are a fraction of those the gap-grown bounds find: 4 contacts a pair is ample
            contact_bound = 4 * self.shape_pairs_max + 4 * int(items[collide[is_mesh]].sum())
        if soft_contact_max is None:
            soft_contact_max = model.soft_contact_max
        if rigid_contact_max is None:
            rigid_contact_max = model.rigid_contact_max
        self.soft_contact_max = soft_contact_max if soft_contact_max is not None else \
            model.particle_count * len(particle_shapes)
        self.rigid_contact_max = rigid_contact_max if rigid_contact_max is not None else contact_bound

    def _items(self, s: int, geo: GeoType) -> tuple[int, int]:
        """A shape's probe points and probe edges."""
        if geo == GeoType.MESH:
            source = self.model.shape_source[s]
            return len(source.vertices), len(source.indices)
        return _PROBES.get(geo, 0), _EDGES.get(geo, 0)

    def _given_pairs(self, given: Any) -> np.ndarray:
        """A pair list (the model's, or a user's) as an (n, 2) int32 array of shape indices, checked."""
        if given is None:
            return np.zeros((0, 2), np.int32)
        pairs = (given.numpy() if hasattr(given, "numpy") else np.asarray(given)).reshape(-1, 2)
        if pairs.size and (pairs.min() < 0 or pairs.max() >= self.model.shape_count):
            raise IndexError(f"CollisionPipeline: the pair list names shape {int(pairs.max())} or "
                             f"{int(pairs.min())}; the model has {self.model.shape_count} shapes")
        return pairs.astype(np.int32)

    @staticmethod
    def _contact_bound(pairs: np.ndarray, items: np.ndarray) -> np.ndarray:
        """The most contacts the narrow phase can write for these pairs: every probe of both shapes (an exact
        routine writes fewer)."""
        if len(pairs) == 0:
            return np.int64(0)
        return (items[pairs[:, 0]].sum(axis=1) + items[pairs[:, 1]].sum(axis=1)).astype(np.int64).sum()

    def _bound_shapes(self, body_q: Any) -> None:
        m = self.model
        wp.launch(shape_bounds_kernel, dim=len(self._lowers), record_tape=False,
                  inputs=[body_q, self._collide, m.shape_body, m.shape_transform, m.shape_collision_radius,
                          m.shape_gap], outputs=[self._lowers, self._uppers], device=m.device)

    def contacts(self) -> Contacts:
        """Contact buffers sized for this model."""
        return Contacts(self.rigid_contact_max, self.soft_contact_max, requires_grad=self.requires_grad,
                        device=self.model.device)

    def _find_pairs(self, state: State, contacts: Contacts) -> tuple[Any, Any]:
        """The pairs of this state (kept with the contacts, which a Tape's backward reads them with)."""
        if self.broad_phase == "explicit":
            return self._pairs, self._pair_count
        m = self.model
        if wp.get_device(m.device).is_capturing:
            raise RuntimeError("CollisionPipeline.collide: broad_phase='bvh' refits its tree on the host and cannot "
                               "be captured in a CUDA graph; use broad_phase='explicit'")
        pairs = getattr(contacts, "shape_pairs", None)
        if pairs is None or len(pairs) < self.shape_pairs_max:
            contacts.shape_pairs = wp.zeros(max(self.shape_pairs_max, 1), dtype=wp.vec2i, device=m.device)
            contacts.shape_pair_count = wp.zeros(1, dtype=wp.int32, device=m.device)
        self._bound_shapes(state.body_q)
        self._collides += 1
        if self._collides % _BVH_REBUILD_EVERY == 0:
            self._bvh.rebuild()
        else:
            self._bvh.refit()
        contacts.shape_pair_count.zero_()
        wp.launch(bvh_pairs_kernel, dim=len(self._lowers), record_tape=False,
                  inputs=[self._bvh.id, self._collide, self._lowers, self._uppers, m.shape_world, m.shape_body,
                          m.shape_collision_group, self._filter_keys, m.shape_count, self.shape_pairs_max],
                  outputs=[contacts.shape_pair_count, contacts.shape_pairs], device=m.device)
        if self.verify_buffers:
            found = int(contacts.shape_pair_count.numpy()[0])
            if found > self.shape_pairs_max:
                raise RuntimeError(f"CollisionPipeline.collide: the broad phase found {found} shape pairs but holds "
                                   f"{self.shape_pairs_max}; pass shape_pairs_max={found} or more to "
                                   "CollisionPipeline")
        return contacts.shape_pairs, contacts.shape_pair_count

    def collide(self, state: State, contacts: Contacts) -> None:
        """Fill ``contacts`` with the contacts of ``state``: which features touch first (no gradients), then their
        geometry (differentiable with respect to the particle and body positions)."""
        m = self.model
        contacts.clear()
        if m.particle_count and len(self._particle_shapes):
            shapes = [m.shape_body, m.shape_transform, m.shape_type, m.shape_scale, m.shape_source_ptr]
            wp.launch(soft_contacts_kernel, dim=(m.particle_count, len(self._particle_shapes)), record_tape=False,
                      inputs=[state.particle_q, m.particle_radius, m.particle_flags, m.particle_world,
                              state.body_q, self._particle_shapes, *shapes, m.shape_world, self.soft_contact_gap,
                              contacts.soft_contact_max, contacts.soft_contact_count],
                      outputs=[contacts.soft_contact_particle, contacts.soft_contact_shape], device=m.device)
            wp.launch(soft_contact_geometry_kernel, dim=contacts.soft_contact_max,
                      inputs=[state.particle_q, m.particle_radius, state.body_q, *shapes, self.soft_contact_gap,
                              contacts.soft_contact_count, contacts.soft_contact_particle, contacts.soft_contact_shape],
                      outputs=[contacts.soft_contact_body_pos, contacts.soft_contact_body_vel,
                               contacts.soft_contact_normal], device=m.device)
        if self.shape_pairs_max:
            pairs, count = self._find_pairs(state, contacts)
            wp.launch(narrow_phase_kernel, dim=(self.shape_pairs_max, self._threads), record_tape=False,
                      inputs=[state.body_q, pairs, count, m.shape_body, m.shape_transform, m.shape_type,
                              m.shape_scale, m.shape_source_ptr, m.shape_collision_radius, m.shape_gap,
                              self._shape_items, self._threads, contacts.rigid_contact_max,
                              contacts.rigid_contact_count],
                      outputs=[contacts.rigid_contact_shape0, contacts.rigid_contact_shape1,
                               contacts.rigid_contact_feature, contacts.rigid_contact_feature_param], device=m.device)
            wp.launch(rigid_contact_geometry_kernel, dim=contacts.rigid_contact_max,
                      inputs=[state.body_q, m.shape_body, m.shape_transform, m.shape_type, m.shape_scale,
                              m.shape_source_ptr, m.shape_gap, self._shape_items, contacts.rigid_contact_count,
                              contacts.rigid_contact_shape0, contacts.rigid_contact_shape1,
                              contacts.rigid_contact_feature, contacts.rigid_contact_feature_param],
                      outputs=[contacts.rigid_contact_point0, contacts.rigid_contact_point1,
                               contacts.rigid_contact_normal, contacts.rigid_contact_margin0,
                               contacts.rigid_contact_margin1], device=m.device)
        if self.verify_buffers and not wp.get_device(m.device).is_capturing:
            for kind, cap in (("soft", contacts.soft_contact_max), ("rigid", contacts.rigid_contact_max)):
                found = int(getattr(contacts, f"{kind}_contact_count").numpy()[0])
                if found > cap:
                    raise RuntimeError(f"CollisionPipeline.collide: {found} {kind} contacts found but the buffer holds "
                                       f"{cap}; pass {kind}_contact_max={found} or more to CollisionPipeline")
