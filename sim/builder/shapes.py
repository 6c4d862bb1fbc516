"""Collision shapes of a ModelBuilder: primitives, planes, meshes and SDF volumes, their materials, and
the mass they give their bodies."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

import loomwork as wp

from ..enums import Axis, GeoType, ShapeFlags
from ..geometry import Heightfield, Mesh
from .bodies import _split, _transform_tuple


def _quat_from_z(n: np.ndarray) -> Any:
    """The shortest rotation (xyzw) taking +Z to the unit vector ``n``."""
    z = np.array([0.0, 0.0, 1.0])
    d = float(np.dot(z, n))
    if d < -1.0 + 1e-9:
        return wp.quat(1.0, 0.0, 0.0, 0.0)
    axis = np.cross(z, n)
    q = np.array([*axis, 1.0 + d])
    q /= np.linalg.norm(q)
    return wp.quat(*q)


class ShapeConfig:
    """Physical and collision properties of a shape: ``density`` [kg/m^3], contact stiffness ``ke``
    [N/m], damping ``kd`` [N s/m], friction stiffness ``kf``, adhesion ``ka``, friction ``mu``,
    ``restitution``, contact ``margin`` and ``gap`` [m], and which collisions it takes part in."""

    def __init__(self, *, density: float = 1000.0, ke: float = 2.5e3, kd: float = 100.0, kf: float = 1000.0,
                 ka: float = 0.0, mu: float = 1.0, restitution: float = 0.0, mu_torsional: float = 0.005,
                 mu_rolling: float = 0.0001, margin: float = 0.0, gap: float | None = None, is_solid: bool = True,
                 collision_group: int = 1, collision_filter_parent: bool = True, has_shape_collision: bool = True,
                 has_particle_collision: bool = True, is_visible: bool = True, is_site: bool = False,
                 **_: Any) -> None:
        self.density = density
        self.ke, self.kd, self.kf, self.ka = ke, kd, kf, ka
        self.mu, self.restitution = mu, restitution
        self.mu_torsional, self.mu_rolling = mu_torsional, mu_rolling
        self.margin, self.gap = margin, gap
        self.is_solid = is_solid
        self.collision_group = collision_group
        self.collision_filter_parent = collision_filter_parent
        self.has_shape_collision = has_shape_collision
        self.has_particle_collision = has_particle_collision
        self.is_visible = is_visible
        self.is_site = is_site

    def validate(self, shape_type: int | None = None) -> None:
        """Raise ``ValueError`` naming the first field that is out of range."""
        for name in ("density", "ke", "kd", "kf", "ka", "mu", "restitution", "margin"):
            v = getattr(self, name)
            if not np.isfinite(v) or v < 0.0:
                raise ValueError(f"ShapeConfig.{name} must be finite and >= 0, got {v}")

    @property
    def flags(self) -> int:
        """The ShapeFlags these settings give."""
        f = 0
        if self.is_visible:
            f |= ShapeFlags.VISIBLE
        if self.has_shape_collision and not self.is_site:
            f |= ShapeFlags.COLLIDE_SHAPES
        if self.has_particle_collision and not self.is_site:
            f |= ShapeFlags.COLLIDE_PARTICLES
        if self.is_site:
            f |= ShapeFlags.SITE
        return int(f)

    def copy(self) -> ShapeConfig:
        """A shallow copy."""
        c = ShapeConfig()
        c.__dict__.update(self.__dict__)
        return c


def primitive_mass_properties(shape_type: GeoType, scale: tuple[float, float, float], density: float,
                              src: Any = None) -> tuple[float, np.ndarray, np.ndarray]:
    """Mass [kg], center of mass (shape frame) and inertia about it [kg m^2] of a solid shape."""
    a, b, c = scale
    if shape_type == GeoType.SPHERE:
        m = 4.0 / 3.0 * math.pi * a ** 3 * density
        return m, np.zeros(3), np.eye(3) * 0.4 * m * a * a
    if shape_type == GeoType.BOX:
        m = 8.0 * a * b * c * density
        return m, np.zeros(3), np.diag([b * b + c * c, a * a + c * c, a * a + b * b]) * m / 3.0
    if shape_type == GeoType.CAPSULE:
        r, h = a, b
        mc = math.pi * r * r * 2.0 * h * density
        ms = 4.0 / 3.0 * math.pi * r ** 3 * density
        izz = mc * r * r / 2.0 + ms * 0.4 * r * r
        ixx = mc * (r * r / 4.0 + (2.0 * h) ** 2 / 12.0) + ms * (0.4 * r * r + h * h + 0.75 * h * r)
        return mc + ms, np.zeros(3), np.diag([ixx, ixx, izz])
    if shape_type == GeoType.CYLINDER:
        r, h = a, b
        m = math.pi * r * r * 2.0 * h * density
        ixx = m * (3.0 * r * r + 4.0 * h * h) / 12.0
        return m, np.zeros(3), np.diag([ixx, ixx, m * r * r / 2.0])
    if shape_type == GeoType.ELLIPSOID:
        m = 4.0 / 3.0 * math.pi * a * b * c * density
        return m, np.zeros(3), np.diag([b * b + c * c, a * a + c * c, a * a + b * b]) * m / 5.0
    if shape_type == GeoType.CONE:  # apex at +h, base at -h: the center of mass a quarter of the height up
        r, h = a, b
        m = math.pi * r * r * 2.0 * h / 3.0 * density
        ixx = m * (3.0 * r * r / 20.0 + 3.0 * (2.0 * h) ** 2 / 80.0)
        return m, np.array([0.0, 0.0, -h / 2.0]), np.diag([ixx, ixx, 0.3 * m * r * r])
    if shape_type == GeoType.MESH and src is not None:
        return src.mass_properties(density, np.asarray(scale))
    return 0.0, np.zeros(3), np.zeros((3, 3))


class ShapeBuilder:
    """Collision shapes attached to bodies (or to the world with ``body=-1``)."""

    _lists = {"shape_transform": None, "shape_body": "body", "shape_type": None, "shape_scale": None,
              "shape_source": None, "shape_material_ke": None, "shape_material_kd": None,
              "shape_material_kf": None, "shape_material_ka": None, "shape_material_mu": None,
              "shape_material_restitution": None, "shape_margin": None, "shape_gap": None, "shape_flags": None,
              "shape_collision_group": None, "shape_world": "world", "shape_label": "label",
              "shape_is_solid": None, "shape_filter_pairs": "shape"}

    def _init_domain(self) -> None:
        for name in ShapeBuilder._lists:
            setattr(self, name, [])
        self.default_shape_cfg = ShapeConfig()
        self.rigid_gap = 0.1

    @property
    def shape_count(self) -> int:
        """Number of shapes added so far."""
        return len(self.shape_type)

    def add_shape(self, *, body: int, type: int, xform: Any = None, cfg: ShapeConfig | None = None,
                  scale: Any = None, src: Any = None, is_static: bool = False, label: str | None = None,
                  **_: Any) -> int:
        """Add a shape of ``type`` to ``body`` (-1: static, in the world) at ``xform`` in the body frame;
        with a density its mass and inertia add to the body. Returns the shape's index."""
        cfg = self.default_shape_cfg if cfg is None else cfg
        gt = GeoType(type)
        what = f"add_shape({gt.name}{f', {label!r}' if label else ''})"
        if not -1 <= body < len(self.body_q):
            raise IndexError(f"{what}: body {body} out of range [-1, {len(self.body_q)})")
        try:
            cfg.validate(gt)
        except ValueError as e:
            raise ValueError(f"{what}: {e}") from None
        s = (1.0, 1.0, 1.0) if scale is None else tuple(float(v) for v in np.reshape(scale, 3))
        if not all(np.isfinite(s)) or (gt != GeoType.PLANE and any(v < 0.0 for v in s)):
            raise ValueError(f"{what}: dimensions must be finite and >= 0, got {s}")
        x = _transform_tuple(xform)
        index = len(self.shape_type)
        self.shape_transform.append(x)
        self.shape_body.append(body)
        self.shape_type.append(int(gt))
        self.shape_scale.append(s)
        self.shape_source.append(src)
        self.shape_material_ke.append(float(cfg.ke))
        self.shape_material_kd.append(float(cfg.kd))
        self.shape_material_kf.append(float(cfg.kf))
        self.shape_material_ka.append(float(cfg.ka))
        self.shape_material_mu.append(float(cfg.mu))
        self.shape_material_restitution.append(float(cfg.restitution))
        self.shape_margin.append(float(cfg.margin))
        self.shape_gap.append(float(self.rigid_gap if cfg.gap is None else cfg.gap))
        self.shape_flags.append(cfg.flags)
        self.shape_collision_group.append(int(cfg.collision_group))
        self.shape_world.append(self.current_world)
        self.shape_label.append(label or f"shape_{index}")
        self.shape_is_solid.append(bool(cfg.is_solid))
        if body >= 0:
            for other in range(index):
                if self.shape_body[other] == body:
                    self.shape_filter_pairs.append((other, index))
            if not is_static and cfg.density > 0.0 and not cfg.is_site:
                m, com, inertia = primitive_mass_properties(gt, s, cfg.density, src)
                p, q = _split(x)
                rot = np.asarray(wp.quat_to_matrix(q), dtype=np.float64).reshape(3, 3)
                com_body = np.asarray(wp.transform_point(wp.transform(p, q), wp.vec3(*com)), dtype=np.float64)
                self._add_body_mass(body, m, com_body, rot @ inertia @ rot.T)
        return index

    def add_shape_plane(self, plane: Any = (0.0, 0.0, 1.0, 0.0), *, xform: Any = None, width: float = 10.0,
                        length: float = 10.0, body: int = -1, cfg: ShapeConfig | None = None,
                        label: str | None = None, **_: Any) -> int:
        """Add a plane whose normal is its local Z axis, given by ``xform`` or by the equation
        ``a x + b y + c z + d = 0``; ``width``/``length`` 0 make it infinite."""
        if xform is None:
            n = np.asarray(plane[:3], dtype=np.float64)
            norm = float(np.linalg.norm(n))
            if norm == 0.0:
                raise ValueError(f"add_shape_plane: the plane normal {tuple(n)} is zero")
            n /= norm
            p = -float(plane[3]) / norm * n
            xform = wp.transform(wp.vec3(*p), _quat_from_z(n))
        return self.add_shape(body=body, type=GeoType.PLANE, xform=xform, cfg=cfg, scale=(width, length, 0.0),
                              is_static=True, label=label)

    def add_ground_plane(self, *, height: float = 0.0, cfg: ShapeConfig | None = None, label: str | None = None,
                         **_: Any) -> int:
        """Add an infinite static ground plane at ``height`` [m] along the up axis."""
        n = np.asarray(Axis(self.up_axis).to_vector())
        return self.add_shape_plane((*n, -float(height)), width=0.0, length=0.0, cfg=cfg, label=label or "ground_plane")

    def add_shape_sphere(self, body: int, *, xform: Any = None, radius: float = 1.0, cfg: ShapeConfig | None = None,
                         label: str | None = None, **_: Any) -> int:
        """Add a sphere of ``radius`` [m]."""
        return self.add_shape(body=body, type=GeoType.SPHERE, xform=xform, cfg=cfg, scale=(radius, 0.0, 0.0),
                              label=label)

    def add_shape_box(self, body: int, *, xform: Any = None, hx: float = 0.5, hy: float = 0.5, hz: float = 0.5,
                      cfg: ShapeConfig | None = None, label: str | None = None, **_: Any) -> int:
        """Add a box with half extents ``hx, hy, hz`` [m]."""
        return self.add_shape(body=body, type=GeoType.BOX, xform=xform, cfg=cfg, scale=(hx, hy, hz), label=label)

    def add_shape_capsule(self, body: int, *, xform: Any = None, radius: float = 1.0, half_height: float = 0.5,
                          cfg: ShapeConfig | None = None, label: str | None = None, **_: Any) -> int:
        """Add a capsule along the local Z axis: a cylinder of ``half_height`` [m] with hemispherical caps of
        ``radius`` [m]."""
        return self.add_shape(body=body, type=GeoType.CAPSULE, xform=xform, cfg=cfg,
                              scale=(radius, half_height, 0.0), label=label)

    def add_shape_cylinder(self, body: int, *, xform: Any = None, radius: float = 1.0, half_height: float = 0.5,
                           cfg: ShapeConfig | None = None, label: str | None = None, **_: Any) -> int:
        """Add a cylinder along the local Z axis."""
        return self.add_shape(body=body, type=GeoType.CYLINDER, xform=xform, cfg=cfg,
                              scale=(radius, half_height, 0.0), label=label)

    def add_shape_ellipsoid(self, body: int, *, xform: Any = None, rx: float = 1.0, ry: float = 0.75, rz: float = 0.5,
                            cfg: ShapeConfig | None = None, label: str | None = None, **_: Any) -> int:
        """Add an ellipsoid with semi-axes ``rx, ry, rz`` [m] along its local X, Y, Z axes."""
        return self.add_shape(body=body, type=GeoType.ELLIPSOID, xform=xform, cfg=cfg, scale=(rx, ry, rz),
                              label=label)

    def add_shape_cone(self, body: int, *, xform: Any = None, radius: float = 1.0, half_height: float = 0.5,
                       cfg: ShapeConfig | None = None, label: str | None = None, **_: Any) -> int:
        """Add a cone along the local Z axis, centered between its base (``radius`` [m], at -``half_height``) and
        its apex (at +``half_height``); its center of mass lies ``half_height / 2`` below the origin."""
        return self.add_shape(body=body, type=GeoType.CONE, xform=xform, cfg=cfg, scale=(radius, half_height, 0.0),
                              label=label)

    def add_shape_heightfield(self, *, xform: Any = None, heightfield: Heightfield | None = None, scale: Any = None,
                              cfg: ShapeConfig | None = None, label: str | None = None, **_: Any) -> int:
        """Add a static terrain (a :class:`loomwork.sim.Heightfield`) at ``xform``, its extents and heights
        scaled by ``scale``."""
        if not isinstance(heightfield, Heightfield):
            raise TypeError(f"add_shape_heightfield: heightfield must be a loomwork.sim.Heightfield, got "
                            f"{type(heightfield).__name__}")
        return self.add_shape(body=-1, type=GeoType.HFIELD, xform=xform, cfg=cfg, scale=scale, src=heightfield,
                              is_static=True, label=label)

    def add_shape_mesh(self, body: int, *, xform: Any = None, mesh: Mesh | None = None, scale: Any = None,
                       cfg: ShapeConfig | None = None, label: str | None = None, **_: Any) -> int:
        """Add a triangle mesh (a :class:`loomwork.sim.Mesh`) scaled by ``scale``."""
        if not isinstance(mesh, Mesh):
            raise TypeError(f"add_shape_mesh: mesh must be a loomwork.sim.Mesh, got {type(mesh).__name__}")
        return self.add_shape(body=body, type=GeoType.MESH, xform=xform, cfg=cfg, scale=scale, src=mesh, label=label)

    def add_shape_sdf(self, body: int, *, xform: Any = None, volume: Any = None, scale: Any = None,
                      cfg: ShapeConfig | None = None, label: str | None = None, **_: Any) -> int:
        """Add a shape given by a signed-distance ``wp.Volume`` (float grid, negative inside) [m]; it takes
        part in particle contacts and adds no mass."""
        if not isinstance(volume, wp.Volume):
            raise TypeError(f"add_shape_sdf: volume must be a wp.Volume, got {type(volume).__name__}")
        return self.add_shape(body=body, type=GeoType.SDF, xform=xform, cfg=cfg, scale=scale, src=volume,
                              is_static=True, label=label)

    def add_shape_collision_filter_pair(self, shape_a: int, shape_b: int) -> None:
        """Never collide shapes ``shape_a`` and ``shape_b``."""
        n = len(self.shape_type)
        for s in (shape_a, shape_b):
            if not 0 <= s < n:
                raise IndexError(f"add_shape_collision_filter_pair: shape {s} out of range [0, {n})")
        self.shape_filter_pairs.append((min(shape_a, shape_b), max(shape_a, shape_b)))

    def _transform_appended(self, starts: dict[str, int], xform: Any) -> None:
        for s in range(starts["shape"], len(self.shape_type)):
            if self.shape_body[s] < 0:
                moved = wp.transform_multiply(xform, wp.transform(*_split(self.shape_transform[s])))
                self.shape_transform[s] = tuple(float(v) for v in moved)

    def _finalize_domain(self, model: Any, requires_grad: bool) -> None:
        n = len(self.shape_type)
        f32, i32 = np.float32, np.int32
        model.shape_count = n
        model.shape_transform = wp.array(np.asarray(self.shape_transform, dtype=f32).reshape(n, 7), dtype=wp.transform,
                                         requires_grad=requires_grad)
        model.shape_body = wp.array(np.asarray(self.shape_body, dtype=i32).reshape(n), dtype=wp.int32)
        model.shape_type = wp.array(np.asarray(self.shape_type, dtype=i32).reshape(n), dtype=wp.int32)
        model.shape_scale = wp.array(np.asarray(self.shape_scale, dtype=f32).reshape(n, 3), dtype=wp.vec3,
                                     requires_grad=requires_grad)
        model.shape_source = list(self.shape_source)
        ptr = np.zeros(n, dtype=np.uint64)
        model._shape_runtime = []
        for s, src in enumerate(self.shape_source):
            if isinstance(src, Mesh):
                m = src.finalize(model.device)
                model._shape_runtime.append(m)
                ptr[s] = m.id
            elif isinstance(src, wp.Volume):
                ptr[s] = src.id
        model.shape_source_ptr = wp.array(ptr, dtype=wp.uint64)
        for name in ("ke", "kd", "kf", "ka", "mu", "restitution"):
            values = np.asarray(getattr(self, f"shape_material_{name}"), dtype=f32).reshape(n)
            setattr(model, f"shape_material_{name}", wp.array(values, dtype=wp.float32, requires_grad=requires_grad))
        model.shape_margin = wp.array(np.asarray(self.shape_margin, dtype=f32).reshape(n), dtype=wp.float32)
        model.shape_gap = wp.array(np.asarray(self.shape_gap, dtype=f32).reshape(n), dtype=wp.float32)
        model.shape_flags = wp.array(np.asarray(self.shape_flags, dtype=i32).reshape(n), dtype=wp.int32)
        model.shape_collision_group = wp.array(np.asarray(self.shape_collision_group, dtype=i32).reshape(n),
                                               dtype=wp.int32)
        model.shape_world = wp.array(np.asarray(self.shape_world, dtype=i32).reshape(n), dtype=wp.int32)
        model.shape_label = list(self.shape_label)
        model.shape_is_solid = wp.array(np.asarray(self.shape_is_solid, dtype=i32).reshape(n), dtype=wp.int32)
        model.shape_collision_radius = wp.array(self._collision_radii(), dtype=wp.float32)
        filters = set(self.shape_filter_pairs)
        by_body: dict[int, list[int]] = {}
        for s, b in enumerate(self.shape_body):
            by_body.setdefault(b, []).append(s)
        for a, b in self.body_filter_pairs:
            for sa in by_body.get(a, []):
                for sb in by_body.get(b, []):
                    filters.add((min(sa, sb), max(sa, sb)))
        model.shape_collision_filter_pairs = filters
        model.body_shapes = {b: ss for b, ss in by_body.items()}

    def _collision_radii(self) -> np.ndarray:
        """Bounding-sphere radius [m] of each shape about its frame origin (planes and SDFs: a large value)."""
        out = np.zeros(len(self.shape_type), dtype=np.float32)
        for s, (t, (a, b, c)) in enumerate(zip(self.shape_type, self.shape_scale, strict=True)):
            if t == GeoType.SPHERE:
                out[s] = a
            elif t == GeoType.BOX:
                out[s] = math.sqrt(a * a + b * b + c * c)
            elif t in (GeoType.CAPSULE, GeoType.CYLINDER):
                out[s] = a + b
            elif t == GeoType.ELLIPSOID:
                out[s] = max(a, b, c)
            elif t == GeoType.CONE:
                out[s] = math.hypot(a, b)
            elif t == GeoType.MESH:
                out[s] = self.shape_source[s].bounding_radius() * max(abs(a), abs(b), abs(c))
            else:
                out[s] = 1.0e6
        return out
