"""CollisionPipeline: finds particle-shape and shape-shape contacts of a model's state.

Particle-shape: every particle against every shape of its world that takes particle collisions, by the
shape's signed distance (primitives analytically, meshes through their BVH, SDF volumes by trilinear
samples). Shape-shape: the pairs that may touch (same world, not filtered, not on one body, not both
static) are listed once; each step tests the probe points of the rounder shape of a pair (sphere
centers, capsule end points, box corners, cylinder rims; a mesh's vertices, where the other shape has no
probes, so two meshes probe each other) against the other's signed distance, after a bounding-sphere
test, and its probe edges (a capsule's axis, a box's edges, a mesh's edges) by the point of each edge
deepest in the other shape, where that is not one of its ends: an edge across a face or another edge, two
crossed capsules, touch there though no probe point does. Particle-particle and cloth self-contact are
found by the solvers through the model's HashGrid."""

from __future__ import annotations

from typing import Any, Literal

import numpy as np

import loomwork as wp

from .contacts import Contacts
from .enums import GeoType, ShapeFlags
from .model import Model, State
from .shape_kernels import PLANE, deepest_on_segment, edge_probe, probe_point, shape_distance

# Which shape of a pair carries the probes: lower rank probes the other (a sphere's center is exact).
_PROBE_RANK = {GeoType.SPHERE: 0, GeoType.CAPSULE: 1, GeoType.BOX: 2, GeoType.CYLINDER: 3, GeoType.MESH: 4}
_PROBES = {GeoType.SPHERE: 1, GeoType.CAPSULE: 2, GeoType.BOX: 8, GeoType.CYLINDER: 16}  # a mesh: its vertices
_EDGES = {GeoType.CAPSULE: 1, GeoType.BOX: 12}  # a mesh: three per triangle (each probed from one of them)
_EDGE_END = 0.005  # an edge's deepest point this close to an end (in parameter) is that end's probe point


@wp.func
def shape_world_transform(body_q: wp.array(dtype=wp.transform), shape_body: wp.array(dtype=wp.int32),
                          shape_transform: wp.array(dtype=wp.transform), s: int) -> wp.transform:
    b = shape_body[s]
    if b < 0:
        return shape_transform[s]
    return wp.transform_multiply(body_q[b], shape_transform[s])


@wp.kernel
def soft_contacts_kernel(particle_q: wp.array(dtype=wp.vec3), particle_radius: wp.array(dtype=float),
                         particle_flags: wp.array(dtype=wp.int32), particle_world: wp.array(dtype=wp.int32),
                         body_q: wp.array(dtype=wp.transform), shapes: wp.array(dtype=wp.int32),
                         shape_body: wp.array(dtype=wp.int32), shape_transform: wp.array(dtype=wp.transform),
                         shape_type: wp.array(dtype=wp.int32), shape_scale: wp.array(dtype=wp.vec3),
                         shape_source: wp.array(dtype=wp.uint64), shape_world: wp.array(dtype=wp.int32),
                         gap: float, max_count: int, count: wp.array(dtype=wp.int32),
                         out_particle: wp.array(dtype=wp.int32), out_shape: wp.array(dtype=wp.int32),
                         out_body_pos: wp.array(dtype=wp.vec3), out_body_vel: wp.array(dtype=wp.vec3),
                         out_normal: wp.array(dtype=wp.vec3)):
    i, k = wp.tid()
    s = shapes[k]
    if (particle_flags[i] & 1) == 0:
        return
    wi = particle_world[i]
    ws = shape_world[s]
    if wi >= 0 and ws >= 0 and wi != ws:
        return
    x_ws = shape_world_transform(body_q, shape_body, shape_transform, s)
    r = particle_radius[i]
    p_local = wp.transform_point(wp.transform_inverse(x_ws), particle_q[i])
    dn = shape_distance(shape_type[s], shape_scale[s], shape_source[s], p_local, r + gap)
    d = dn[0]
    if d - r >= gap:
        return
    n_local = wp.vec3(dn[1], dn[2], dn[3])
    closest = p_local - n_local * d
    index = wp.atomic_add(count, 0, 1)
    if index >= max_count:
        return
    b = shape_body[s]
    pos = wp.transform_point(x_ws, closest)
    if b >= 0:
        pos = wp.transform_point(wp.transform_inverse(body_q[b]), pos)
    out_particle[index] = i
    out_shape[index] = s
    out_body_pos[index] = pos
    out_body_vel[index] = wp.vec3(0.0, 0.0, 0.0)
    out_normal[index] = wp.transform_vector(x_ws, n_local)


@wp.func
def near_pair(x_a: wp.transform, x_b: wp.transform, a: int, b: int, shape_type: wp.array(dtype=wp.int32),
              shape_radius: wp.array(dtype=float), gap: float) -> bool:
    """The bounding-sphere test of a shape pair (a plane has no bound)."""
    if shape_type[b] == PLANE:
        return True
    dist = wp.length(wp.transform_get_translation(x_a) - wp.transform_get_translation(x_b))
    return dist <= shape_radius[a] + shape_radius[b] + gap


@wp.kernel(enable_backward=False)
def edge_parameters_kernel(body_q: wp.array(dtype=wp.transform), tasks: wp.array(dtype=wp.vec3i),
                           shape_body: wp.array(dtype=wp.int32), shape_transform: wp.array(dtype=wp.transform),
                           shape_type: wp.array(dtype=wp.int32), shape_scale: wp.array(dtype=wp.vec3),
                           shape_source: wp.array(dtype=wp.uint64), shape_radius: wp.array(dtype=float),
                           shape_gap: wp.array(dtype=float), edge_s: wp.array(dtype=float)):
    """For an edge task, the parameter of its edge's point deepest in the probed shape, or -1 where there is
    none to test (another probe covers it, the shapes are apart, or it is an end). The contacts read it as a
    constant: a contact point's own motion along the edge changes the distance only to second order."""
    tid = wp.tid()
    t = tasks[tid]
    edge_s[tid] = -1.0
    if t[2] >= 0:
        return
    a = t[0]
    b = t[1]
    gap = wp.max(shape_gap[a], shape_gap[b])
    x_a = shape_world_transform(body_q, shape_body, shape_transform, a)
    x_b = shape_world_transform(body_q, shape_body, shape_transform, b)
    if not near_pair(x_a, x_b, a, b, shape_type, shape_radius, gap):
        return
    e = edge_probe(shape_type[a], shape_scale[a], shape_source[a], -t[2] - 1)
    if e.valid == 0:
        return
    a_to_b = wp.transform_multiply(wp.transform_inverse(x_b), x_a)
    s = deepest_on_segment(shape_type[b], shape_scale[b], shape_source[b], wp.transform_point(a_to_b, e.a),
                           wp.transform_point(a_to_b, e.b), e.radius + gap + shape_radius[b])
    if s > _EDGE_END and s < 1.0 - _EDGE_END:
        edge_s[tid] = s


@wp.kernel
def rigid_contacts_kernel(body_q: wp.array(dtype=wp.transform), tasks: wp.array(dtype=wp.vec3i),
                          shape_body: wp.array(dtype=wp.int32), shape_transform: wp.array(dtype=wp.transform),
                          shape_type: wp.array(dtype=wp.int32), shape_scale: wp.array(dtype=wp.vec3),
                          shape_source: wp.array(dtype=wp.uint64), shape_radius: wp.array(dtype=float),
                          shape_gap: wp.array(dtype=float), max_count: int, count: wp.array(dtype=wp.int32),
                          out_shape0: wp.array(dtype=wp.int32), out_shape1: wp.array(dtype=wp.int32),
                          out_point0: wp.array(dtype=wp.vec3), out_point1: wp.array(dtype=wp.vec3),
                          out_normal: wp.array(dtype=wp.vec3), out_margin0: wp.array(dtype=float),
                          out_margin1: wp.array(dtype=float), edge_s: wp.array(dtype=float)):
    tid = wp.tid()
    t = tasks[tid]
    a = t[0]  # the probing shape
    b = t[1]  # the shape probed
    gap = wp.max(shape_gap[a], shape_gap[b])
    x_a = shape_world_transform(body_q, shape_body, shape_transform, a)
    x_b = shape_world_transform(body_q, shape_body, shape_transform, b)
    if not near_pair(x_a, x_b, a, b, shape_type, shape_radius, gap):
        return
    center_a = wp.vec3()
    radius_a = 0.0
    if t[2] >= 0:  # a probe point
        probe = probe_point(shape_type[a], shape_scale[a], shape_source[a], t[2])
        center_a = wp.vec3(probe[0], probe[1], probe[2])
        radius_a = probe[3]
    else:  # a probe edge, at its deepest point (edge_parameters_kernel)
        s = edge_s[tid]
        if s < 0.0:
            return
        e = edge_probe(shape_type[a], shape_scale[a], shape_source[a], -t[2] - 1)
        center_a = e.a + (e.b - e.a) * s
        radius_a = e.radius
    p_world = wp.transform_point(x_a, center_a)
    p_b = wp.transform_point(wp.transform_inverse(x_b), p_world)
    dn = shape_distance(shape_type[b], shape_scale[b], shape_source[b], p_b, radius_a + gap)
    if dn[0] - radius_a >= gap:
        return
    n_b = wp.vec3(dn[1], dn[2], dn[3])
    index = wp.atomic_add(count, 0, 1)
    if index >= max_count:
        return
    on_b = wp.transform_point(x_b, p_b - n_b * dn[0])
    ba = shape_body[a]
    bb = shape_body[b]
    point_a = p_world
    if ba >= 0:
        point_a = wp.transform_point(wp.transform_inverse(body_q[ba]), p_world)
    if bb >= 0:
        on_b = wp.transform_point(wp.transform_inverse(body_q[bb]), on_b)
    out_shape0[index] = b
    out_shape1[index] = a
    out_point0[index] = on_b
    out_point1[index] = point_a
    out_normal[index] = wp.transform_vector(x_b, n_b)
    out_margin0[index] = 0.0
    out_margin1[index] = radius_a


class CollisionPipeline:
    """Finds the contacts of a state: ``contacts = pipeline.contacts()`` once, then
    ``pipeline.collide(state, contacts)`` each step (or once, for contacts that do not move)."""

    def __init__(self, model: Model, *, rigid_contact_max: int | None = None, soft_contact_max: int | None = None,
                 soft_contact_gap: float | None = None, soft_contact_margin: float | None = None,
                 requires_grad: bool | None = None, broad_phase: Literal["nxn", "sap", "explicit"] = "nxn",
                 verify_buffers: bool = True, **_: Any) -> None:
        if not isinstance(model, Model):
            raise TypeError(f"CollisionPipeline: expected a loomwork.sim.Model, got {type(model).__name__}")
        if broad_phase not in ("nxn", "sap", "explicit"):
            raise ValueError(f"CollisionPipeline: unknown broad_phase {broad_phase!r}; use 'nxn', 'sap' or 'explicit'")
        self.model = model
        self.requires_grad = model.requires_grad if requires_grad is None else bool(requires_grad)
        gap = soft_contact_gap if soft_contact_gap is not None else soft_contact_margin
        self.soft_contact_gap = 0.01 if gap is None else float(gap)
        self.verify_buffers = verify_buffers
        types = model.shape_type.numpy() if model.shape_count else np.zeros(0, np.int32)
        flags = model.shape_flags.numpy() if model.shape_count else np.zeros(0, np.int32)
        particle_shapes = np.flatnonzero(flags & ShapeFlags.COLLIDE_PARTICLES).astype(np.int32)
        self._particle_shapes = wp.array(particle_shapes, dtype=wp.int32, device=model.device)
        self._tasks_np = self._shape_tasks(types, flags)
        self._tasks = wp.array(self._tasks_np.reshape(-1, 3), dtype=wp.vec3i, device=model.device)
        self._has_edges = bool(len(self._tasks_np) and (self._tasks_np[:, 2] < 0).any())
        # per task: the parameter of its probe edge's deepest point (-1: none), found before the contacts
        self._edge_s = wp.full(len(self._tasks_np), -1.0, dtype=float, device=model.device)
        self.soft_contact_max = soft_contact_max if soft_contact_max is not None else \
            model.particle_count * len(particle_shapes)
        self.rigid_contact_max = rigid_contact_max if rigid_contact_max is not None else len(self._tasks_np)

    def _shape_tasks(self, types: np.ndarray, flags: np.ndarray) -> np.ndarray:
        """(probing shape, probed shape, probe index) for every shape pair that may touch."""
        m = self.model
        n = m.shape_count
        if n == 0:
            return np.zeros((0, 3), np.int32)
        body = m.shape_body.numpy()
        world = m.shape_world.numpy()
        group = m.shape_collision_group.numpy()
        filters = m.shape_collision_filter_pairs
        collide = np.flatnonzero(flags & ShapeFlags.COLLIDE_SHAPES)
        tasks: list[tuple[int, int, int]] = []
        by_world: dict[int, list[int]] = {}
        for s in collide:
            by_world.setdefault(int(world[s]), []).append(int(s))
        shared = by_world.pop(-1, [])
        for w, members in [(-1, shared)] + list(by_world.items()):
            candidates = members if w == -1 else members + shared
            for ia, a in enumerate(candidates):
                for b in candidates[ia + 1:]:
                    if w != -1 and a in shared and b in shared:
                        continue
                    if body[a] == body[b] or (body[a] < 0 and body[b] < 0) or (min(a, b), max(a, b)) in filters:
                        continue
                    if group[a] == 0 or group[b] == 0 or (group[a] > 0 and group[b] > 0 and group[a] != group[b]):
                        continue
                    tasks += self._pair_tasks(a, b, types)
        return np.asarray(tasks, dtype=np.int32).reshape(-1, 3)

    def _probes(self, s: int, geo: GeoType) -> int:
        return len(self.model.shape_source[s].vertices) if geo == GeoType.MESH else _PROBES[geo]

    def _edges(self, s: int, geo: GeoType) -> int:
        return len(self.model.shape_source[s].indices) if geo == GeoType.MESH else _EDGES.get(geo, 0)

    def _pair_tasks(self, a: int, b: int, types: np.ndarray) -> list[tuple[int, int, int]]:
        """The tasks of shapes a and b: (probing, probed, k), k >= 0 a probe point, k < 0 probe edge -k - 1
        (none against a plane, where an edge is deepest at an end; between two capsules one way only, as their
        axes' deepest points are one contact)."""
        ta, tb = GeoType(int(types[a])), GeoType(int(types[b]))
        ra, rb = _PROBE_RANK.get(ta), _PROBE_RANK.get(tb)
        out: list[tuple[int, int, int]] = []
        for p, q, tp, tq, probing in ((a, b, ta, tb, ra is not None and (rb is None or ra <= rb)),
                                      (b, a, tb, ta, rb is not None and (ra is None or rb <= ra)
                                       and not (ra == rb and ta == GeoType.SPHERE))):
            if probing:
                out += [(p, q, k) for k in range(self._probes(p, tp))]
                if tq != GeoType.PLANE and not (p == b and ta == tb == GeoType.CAPSULE):
                    out += [(p, q, -k - 1) for k in range(self._edges(p, tp))]
        return out

    def contacts(self) -> Contacts:
        """Contact buffers sized for this model."""
        return Contacts(self.rigid_contact_max, self.soft_contact_max, requires_grad=self.requires_grad,
                        device=self.model.device)

    def collide(self, state: State, contacts: Contacts) -> None:
        """Fill ``contacts`` with the contacts of ``state``."""
        m = self.model
        contacts.clear()
        if m.particle_count and len(self._particle_shapes):
            wp.launch(soft_contacts_kernel, dim=(m.particle_count, len(self._particle_shapes)),
                      inputs=[state.particle_q, m.particle_radius, m.particle_flags, m.particle_world,
                              state.body_q, self._particle_shapes, m.shape_body, m.shape_transform, m.shape_type,
                              m.shape_scale, m.shape_source_ptr, m.shape_world, self.soft_contact_gap,
                              contacts.soft_contact_max, contacts.soft_contact_count],
                      outputs=[contacts.soft_contact_particle, contacts.soft_contact_shape,
                               contacts.soft_contact_body_pos, contacts.soft_contact_body_vel,
                               contacts.soft_contact_normal], device=m.device)
        if len(self._tasks_np):
            shapes = [m.shape_body, m.shape_transform, m.shape_type, m.shape_scale, m.shape_source_ptr,
                      m.shape_collision_radius, m.shape_gap]
            if self._has_edges:
                wp.launch(edge_parameters_kernel, dim=len(self._tasks_np),
                          inputs=[state.body_q, self._tasks, *shapes], outputs=[self._edge_s], device=m.device)
            wp.launch(rigid_contacts_kernel, dim=len(self._tasks_np),
                      inputs=[state.body_q, self._tasks, *shapes, contacts.rigid_contact_max,
                              contacts.rigid_contact_count],
                      outputs=[contacts.rigid_contact_shape0, contacts.rigid_contact_shape1,
                               contacts.rigid_contact_point0, contacts.rigid_contact_point1,
                               contacts.rigid_contact_normal, contacts.rigid_contact_margin0,
                               contacts.rigid_contact_margin1, self._edge_s], device=m.device)
        if self.verify_buffers and not wp.get_device(m.device).is_capturing:
            for kind, cap in (("soft", contacts.soft_contact_max), ("rigid", contacts.rigid_contact_max)):
                found = int(getattr(contacts, f"{kind}_contact_count").numpy()[0])
                if found > cap:
                    raise RuntimeError(f"CollisionPipeline.collide: {found} {kind} contacts found but the buffer holds "
                                       f"{cap}; pass {kind}_contact_max={found} or more to CollisionPipeline")
