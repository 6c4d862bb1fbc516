"""Cloth of a ModelBuilder: triangles (membrane FEM), bending edges, grids and meshes, graph coloring."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

import loomwork as wp


def dihedral_angle(x0: np.ndarray, x1: np.ndarray, x2: np.ndarray, x3: np.ndarray) -> float:
    """Signed bending angle [rad] across the edge (x2, x3) between the triangles (x0, x2, x3) and
    (x1, x3, x2); 0 for a flat pair."""
    n1 = np.cross(x2 - x0, x3 - x0)
    n2 = np.cross(x3 - x1, x2 - x1)
    e = x3 - x2
    l1, l2, le = np.linalg.norm(n1), np.linalg.norm(n2), np.linalg.norm(e)
    if l1 < 1e-12 or l2 < 1e-12 or le < 1e-12:
        return 0.0
    n1, n2 = n1 / l1, n2 / l2
    return float(np.arctan2(np.dot(np.cross(n1, n2), e / le), np.dot(n1, n2)))


def color_graph(n: int, elements: Sequence[Sequence[int]], balance: bool = True) -> list[np.ndarray]:
    """Greedy coloring of ``n`` vertices (most connected first) such that no element (a tuple of vertex indices,
    -1 for none) has two vertices of one color; with ``balance`` colors are kept similar in size. Returns the
    vertex indices of each color."""
    adj: list[set[int]] = [set() for _ in range(n)]
    for vs in elements:
        for a in vs:
            for b in vs:
                if a != b and a >= 0 and b >= 0:
                    adj[a].add(b)
    color = np.full(n, -1, dtype=np.int64)
    counts: list[int] = []
    for v in sorted(range(n), key=lambda v: -len(adj[v])):
        used = {color[u] for u in adj[v] if color[u] >= 0}
        options = [c for c in range(len(counts)) if c not in used]
        if options:
            c = min(options, key=lambda c: counts[c]) if balance else options[0]
        else:
            c = len(counts)
            counts.append(0)
        color[v] = c
        counts[c] += 1
    return [np.flatnonzero(color == c).astype(np.int32) for c in range(len(counts))]


class ClothBuilder:
    """Triangles with a membrane material, bending edges, and the grid/mesh helpers that make cloth."""

    _lists = {"tri_indices": "particle", "tri_poses": None, "tri_activations": None, "tri_materials": None,
              "tri_areas": None, "edge_indices": "particle", "edge_rest_angle": None, "edge_rest_length": None,
              "edge_bending_properties": None}

    def _init_domain(self) -> None:
        for name in ClothBuilder._lists:
            setattr(self, name, [])
        self.default_tri_ke = 100.0
        self.default_tri_ka = 100.0
        self.default_tri_kd = 10.0
        self.default_tri_drag = 0.0
        self.default_tri_lift = 0.0
        self.default_edge_ke = 100.0
        self.default_edge_kd = 0.0
        self.particle_color_groups: list[np.ndarray] = []

    @property
    def tri_count(self) -> int:
        """Number of triangles added so far."""
        return len(self.tri_indices)

    @property
    def edge_count(self) -> int:
        """Number of bending edges added so far."""
        return len(self.edge_indices)

    def _check_particles(self, what: str, **idx: int) -> None:
        n = len(self.particle_q)
        for name, i in idx.items():
            if not 0 <= i < n:
                raise IndexError(f"{what}: particle {name}={i} out of range [0, {n})")

    def add_triangle(self, i: int, j: int, k: int, *, tri_ke: float | None = None, tri_ka: float | None = None,
                     tri_kd: float | None = None, tri_drag: float | None = None, tri_lift: float | None = None,
                     **_: Any) -> float:
        """Add a membrane triangle over particles ``i, j, k`` at rest in their current positions, with shear
        stiffness ``tri_ke`` and area stiffness ``tri_ka`` [N/m], damping ``tri_kd``. Returns its rest area
        [m^2] (0 for a degenerate triangle, which is then skipped)."""
        self._check_particles("add_triangle", i=i, j=j, k=k)
        p, q, r = (np.asarray(self.particle_q[v], dtype=np.float64) for v in (i, j, k))
        qp, rp = q - p, r - p
        n = np.cross(qp, rp)
        area = 0.5 * float(np.linalg.norm(n))
        if area < 1e-12:
            return 0.0
        e1 = qp / np.linalg.norm(qp)
        e2 = np.cross(n / np.linalg.norm(n), e1)
        dm = np.array([[np.dot(e1, qp), np.dot(e1, rp)], [np.dot(e2, qp), np.dot(e2, rp)]])
        self.tri_indices.append((i, j, k))
        self.tri_poses.append(tuple(np.linalg.inv(dm).reshape(-1)))
        self.tri_activations.append(0.0)
        self.tri_materials.append((
            self.default_tri_ke if tri_ke is None else float(tri_ke),
            self.default_tri_ka if tri_ka is None else float(tri_ka),
            self.default_tri_kd if tri_kd is None else float(tri_kd),
            self.default_tri_drag if tri_drag is None else float(tri_drag),
            self.default_tri_lift if tri_lift is None else float(tri_lift)))
        self.tri_areas.append(area)
        return area

    def add_triangles(self, i: Sequence[int], j: Sequence[int], k: Sequence[int], **kw: Any) -> list[float]:
        """Add many triangles; keyword materials apply to all. Returns their rest areas."""
        return [self.add_triangle(a, b, c, **kw) for a, b, c in zip(i, j, k, strict=True)]

    def add_edge(self, i: int, j: int, k: int, l: int, *, rest: float | None = None,
                 edge_ke: float | None = None, edge_kd: float | None = None, **_: Any) -> int:
        """Add a bending element over the edge (``k``, ``l``) shared by the triangles whose opposite vertices
        are ``i`` and ``j`` (-1 for a boundary edge, which carries no bending). ``rest`` is the rest angle
        [rad], by default the current one. Returns its index."""
        self._check_particles("add_edge", k=k, l=l)
        if i >= 0 and j >= 0:
            self._check_particles("add_edge", i=i, j=j)
            x = [np.asarray(self.particle_q[v], dtype=np.float64) for v in (i, j, k, l)]
            angle = dihedral_angle(*x) if rest is None else float(rest)
        else:
            angle = 0.0 if rest is None else float(rest)
        self.edge_indices.append((i, j, k, l))
        self.edge_rest_angle.append(angle)
        self.edge_rest_length.append(float(np.linalg.norm(np.subtract(self.particle_q[k], self.particle_q[l]))))
        self.edge_bending_properties.append((self.default_edge_ke if edge_ke is None else float(edge_ke),
                                             self.default_edge_kd if edge_kd is None else float(edge_kd)))
        return len(self.edge_indices) - 1

    def add_edges(self, i: Sequence[int], j: Sequence[int], k: Sequence[int], l: Sequence[int], **kw: Any) -> None:
        """Add many bending edges; keyword properties apply to all."""
        for a, b, c, d in zip(i, j, k, l, strict=True):
            self.add_edge(a, b, c, d, **kw)

    def _add_surface(self, verts: np.ndarray, tris: np.ndarray, vel: Any, masses: np.ndarray, *, radius: float | None,
                     tri_kw: dict, edge_ke: float | None, edge_kd: float | None, add_springs: bool,
                     spring_ke: float | None, spring_kd: float | None) -> None:
        start = len(self.particle_q)
        for v, m in zip(verts, masses, strict=True):
            self.add_particle(v, vel, float(m), radius)
        for a, b, c in tris:
            self.add_triangle(start + a, start + b, start + c, **tri_kw)
        opposite: dict[tuple[int, int], list[int]] = {}
        for a, b, c in tris:
            for u, v, o in ((a, b, c), (b, c, a), (c, a, b)):
                opposite.setdefault((min(u, v), max(u, v)), []).append(o)
        for (u, v), opp in opposite.items():
            o0, o1 = (opp[0], opp[1]) if len(opp) >= 2 else (opp[0], -1)
            self.add_edge(start + o0, start + o1 if o1 >= 0 else -1, start + u, start + v,
                          edge_ke=edge_ke, edge_kd=edge_kd)
            if add_springs:
                ke = self.default_spring_ke if spring_ke is None else spring_ke
                kd = self.default_spring_kd if spring_kd is None else spring_kd
                self.add_spring(start + u, start + v, ke, kd, 0.0)

    def add_cloth_grid(self, *, pos: Any, rot: Any, vel: Any, dim_x: int, dim_y: int, cell_x: float, cell_y: float,
                       mass: float, reverse_winding: bool = False, fix_left: bool = False, fix_right: bool = False,
                       fix_top: bool = False, fix_bottom: bool = False, tri_ke: float | None = None,
                       tri_ka: float | None = None, tri_kd: float | None = None, tri_drag: float | None = None,
                       tri_lift: float | None = None, edge_ke: float | None = None, edge_kd: float | None = None,
                       add_springs: bool = False, spring_ke: float | None = None, spring_kd: float | None = None,
                       particle_radius: float | None = None, **_: Any) -> None:
        """Add a ``dim_x`` by ``dim_y`` cell cloth sheet in its local XY plane, placed by ``pos``/``rot``;
        each particle weighs ``mass`` [kg]; ``fix_*`` pins a border (mass 0)."""
        if dim_x < 1 or dim_y < 1:
            raise ValueError(f"add_cloth_grid: dim_x and dim_y must be >= 1, got {dim_x}, {dim_y}")
        origin = np.asarray(pos, dtype=np.float64).reshape(3)
        verts, masses = [], []
        for y in range(dim_y + 1):
            for x in range(dim_x + 1):
                verts.append(origin + np.asarray(wp.quat_rotate(rot, wp.vec3(x * cell_x, y * cell_y, 0.0))))
                pinned = (fix_left and x == 0) or (fix_right and x == dim_x) or (fix_bottom and y == 0) \
                    or (fix_top and y == dim_y)
                masses.append(0.0 if pinned else mass)
        tris = []
        for y in range(dim_y):
            for x in range(dim_x):
                v0 = y * (dim_x + 1) + x
                v1, v2, v3 = v0 + 1, v0 + dim_x + 1, v0 + dim_x + 2
                quad = [(v0, v1, v3), (v0, v3, v2)] if (x + y) % 2 == 0 else [(v0, v1, v2), (v1, v3, v2)]
                tris += [(a, c, b) if reverse_winding else (a, b, c) for a, b, c in quad]
        self._add_surface(np.asarray(verts), np.asarray(tris), vel, np.asarray(masses), radius=particle_radius,
                          tri_kw=dict(tri_ke=tri_ke, tri_ka=tri_ka, tri_kd=tri_kd, tri_drag=tri_drag,
                                      tri_lift=tri_lift),
                          edge_ke=edge_ke, edge_kd=edge_kd, add_springs=add_springs, spring_ke=spring_ke,
                          spring_kd=spring_kd)

    def add_cloth_mesh(self, *, pos: Any, rot: Any, scale: float, vel: Any, vertices: Sequence[Any],
                       indices: Sequence[int], density: float, tri_ke: float | None = None,
                       tri_ka: float | None = None, tri_kd: float | None = None, tri_drag: float | None = None,
                       tri_lift: float | None = None, edge_ke: float | None = None, edge_kd: float | None = None,
                       add_springs: bool = False, spring_ke: float | None = None, spring_kd: float | None = None,
                       particle_radius: float | None = None, **_: Any) -> None:
        """Add cloth from a triangle mesh (``indices`` flat, 3 per triangle) scaled, rotated and placed;
        particle masses come from ``density`` [kg/m^2] times the area around each vertex."""
        v = np.asarray(vertices, dtype=np.float64).reshape(-1, 3) * float(scale)
        t = np.asarray(indices, dtype=np.int64).reshape(-1, 3)
        if t.size and (t.min() < 0 or t.max() >= len(v)):
            raise IndexError(f"add_cloth_mesh: indices reference vertex {int(t.max())} of {len(v)}")
        verts = np.asarray(pos, dtype=np.float64).reshape(3) + np.asarray(
            [np.asarray(wp.quat_rotate(rot, wp.vec3(*p))) for p in v]).reshape(-1, 3)
        areas = 0.5 * np.linalg.norm(np.cross(verts[t[:, 1]] - verts[t[:, 0]], verts[t[:, 2]] - verts[t[:, 0]]), axis=1)
        masses = np.zeros(len(verts))
        for c in range(3):
            np.add.at(masses, t[:, c], areas * float(density) / 3.0)
        self._add_surface(verts, t, vel, masses, radius=particle_radius,
                          tri_kw=dict(tri_ke=tri_ke, tri_ka=tri_ka, tri_kd=tri_kd, tri_drag=tri_drag,
                                      tri_lift=tri_lift),
                          edge_ke=edge_ke, edge_kd=edge_kd, add_springs=add_springs, spring_ke=spring_ke,
                          spring_kd=spring_kd)

    def color(self, include_bending: bool = False, balance_colors: bool = True, **_: Any) -> None:
        """Color the particle graph (triangles, springs and, with ``include_bending``, bending edges connect
        particles) so no two particles of one color share an element; solvers such as VBD update one color
        at a time in parallel. Stored as ``particle_color_groups``."""
        elements = [*self.tri_indices, *self.spring_indices,
                    *(e if include_bending else e[2:] for e in self.edge_indices)]
        self.particle_color_groups = color_graph(len(self.particle_q), elements, balance_colors)

    def _finalize_domain(self, model: Any, requires_grad: bool) -> None:
        t = len(self.tri_indices)
        model.tri_count = t
        model.tri_indices = wp.array(np.asarray(self.tri_indices, dtype=np.int32).reshape(t, 3), dtype=wp.int32)
        model.tri_poses = wp.array(np.asarray(self.tri_poses, dtype=np.float32).reshape(t, 2, 2), dtype=wp.mat22,
                                   requires_grad=requires_grad)
        model.tri_activations = wp.array(np.asarray(self.tri_activations, dtype=np.float32).reshape(t),
                                         dtype=wp.float32, requires_grad=requires_grad)
        model.tri_materials = wp.array(np.asarray(self.tri_materials, dtype=np.float32).reshape(t, 5),
                                       dtype=wp.float32, requires_grad=requires_grad)
        model.tri_areas = wp.array(np.asarray(self.tri_areas, dtype=np.float32).reshape(t), dtype=wp.float32,
                                   requires_grad=requires_grad)
        e = len(self.edge_indices)
        model.edge_count = e
        model.edge_indices = wp.array(np.asarray(self.edge_indices, dtype=np.int32).reshape(e, 4), dtype=wp.int32)
        model.edge_rest_angle = wp.array(np.asarray(self.edge_rest_angle, dtype=np.float32).reshape(e),
                                         dtype=wp.float32, requires_grad=requires_grad)
        model.edge_rest_length = wp.array(np.asarray(self.edge_rest_length, dtype=np.float32).reshape(e),
                                          dtype=wp.float32, requires_grad=requires_grad)
        model.edge_bending_properties = wp.array(
            np.asarray(self.edge_bending_properties, dtype=np.float32).reshape(e, 2), dtype=wp.float32,
            requires_grad=requires_grad)
        model.particle_color_groups = [wp.array(g, dtype=wp.int32) for g in self.particle_color_groups]
