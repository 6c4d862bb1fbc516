"""Importers of a ModelBuilder: URDF and MJCF robot descriptions and USD Physics scenes become links,
joints, shapes and articulations through the other mixins' ``add_*`` methods."""

from __future__ import annotations

import math
import os
import warnings
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from typing import Any

import numpy as np

import loomwork as wp

from ..enums import Axis, GeoType, JointTargetMode, JointType
from ..geometry import Mesh
from .bodies import MAXVAL, JointDofConfig
from .shapes import ShapeConfig, primitive_mass_properties

# --- small transform algebra on (p, q) pairs, quaternions xyzw -----------------------------------------
Pose = tuple[np.ndarray, np.ndarray]
_IDENTITY_Q = np.array([0.0, 0.0, 0.0, 1.0])


def _qmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Hamilton product of two xyzw quaternions."""
    ax, ay, az, aw = a
    bx, by, bz, bw = b
    return np.array([aw * bx + ax * bw + ay * bz - az * by, aw * by - ax * bz + ay * bw + az * bx,
                     aw * bz + ax * by - ay * bx + az * bw, aw * bw - ax * bx - ay * by - az * bz])


def _qrot(q: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Rotate ``v`` by the unit quaternion ``q``."""
    u, w = q[:3], q[3]
    return v + 2.0 * np.cross(u, np.cross(u, v) + w * v)


def _qaxis(axis: Sequence[float], angle: float) -> np.ndarray:
    a = np.asarray(axis, dtype=np.float64)
    a = a / np.linalg.norm(a)
    return np.array([*(a * math.sin(0.5 * angle)), math.cos(0.5 * angle)])


def _qfrom_matrix(m: np.ndarray) -> np.ndarray:
    """Unit quaternion of a rotation matrix (columns are the rotated axes)."""
    t = np.trace(m)
    if t > 0.0:
        s = 2.0 * math.sqrt(t + 1.0)
        q = [(m[2, 1] - m[1, 2]) / s, (m[0, 2] - m[2, 0]) / s, (m[1, 0] - m[0, 1]) / s, 0.25 * s]
    else:
        i = int(np.argmax(np.diag(m)))
        j, k = (i + 1) % 3, (i + 2) % 3
        s = 2.0 * math.sqrt(max(1.0 + m[i, i] - m[j, j] - m[k, k], 1e-300))
        q = [0.0, 0.0, 0.0, (m[k, j] - m[j, k]) / s]
        q[i] = 0.25 * s
        q[j] = (m[j, i] + m[i, j]) / s
        q[k] = (m[k, i] + m[i, k]) / s
    q = np.asarray(q)
    return q / np.linalg.norm(q)


def _qbetween(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Shortest rotation taking direction ``a`` to direction ``b``."""
    a = a / np.linalg.norm(a)
    b = b / np.linalg.norm(b)
    d = float(np.dot(a, b))
    if d < -1.0 + 1e-12:
        perp = np.cross(a, [1.0, 0.0, 0.0])
        if np.linalg.norm(perp) < 1e-6:
            perp = np.cross(a, [0.0, 1.0, 0.0])
        return _qaxis(perp, math.pi)
    q = np.array([*np.cross(a, b), 1.0 + d])
    return q / np.linalg.norm(q)


def _mul(a: Pose, b: Pose) -> Pose:
    return a[0] + _qrot(a[1], b[0]), _qmul(a[1], b[1])


def _inv(a: Pose) -> Pose:
    qi = np.array([-a[1][0], -a[1][1], -a[1][2], a[1][3]])
    return -_qrot(qi, a[0]), qi


def _pose(p: Any = None, q: Any = None) -> Pose:
    return (np.zeros(3) if p is None else np.asarray(p, dtype=np.float64).reshape(3),
            _IDENTITY_Q.copy() if q is None else np.asarray(q, dtype=np.float64).reshape(4))


def _tf(pose: Pose) -> Any:
    return wp.transform(wp.vec3(*pose[0]), wp.quat(*pose[1]))


def _as_pose(xform: Any) -> Pose:
    if xform is None:
        return _pose()
    parts = [np.ravel(np.asarray([float(c) for c in x] if np.ndim(x) == 0 and hasattr(x, "__len__") else x,
                                 dtype=np.float64)) for x in xform]
    v = np.concatenate(parts) if parts else np.zeros(0)
    if v.shape != (7,):
        raise ValueError(f"expected a transform: a position and an xyzw quaternion (7 values), got {xform!r}")
    return v[:3], v[3:] / np.linalg.norm(v[3:])


def _up_rotation(source_up: Axis | str | int, target_up: Axis) -> np.ndarray:
    """Rotation taking a file's up axis onto the builder's."""
    src = np.asarray(Axis.from_any(source_up).to_vector())
    return _qbetween(src, np.asarray(target_up.to_vector()))


# --- XML helpers -----------------------------------------------------------------------------------------
def _load_xml(source: str, what: str) -> tuple[ET.Element, str]:
    """Parse ``source`` (a file path or XML text); returns the root element and the directory relative paths
    resolve against."""
    if not isinstance(source, str | os.PathLike):
        raise TypeError(f"{what}: source must be a file path or XML text, got {type(source).__name__}")
    text = str(source)
    if text.lstrip().startswith("<"):
        base = os.getcwd()
        try:
            return ET.fromstring(text), base
        except ET.ParseError as e:
            raise ValueError(f"{what}: the XML text does not parse: {e}") from None
    if not os.path.isfile(text):
        raise FileNotFoundError(f"{what}: no such file {text!r}")
    try:
        return ET.parse(text).getroot(), os.path.dirname(os.path.abspath(text))
    except ET.ParseError as e:
        raise ValueError(f"{what}: {text!r} does not parse as XML: {e}") from None


_MJCF_SECTIONS = ("worldbody", "asset", "actuator", "contact", "equality", "tendon", "sensor", "keyframe")
"""Top-level MJCF sections that several files (through ``<include>``) may each give: their children are merged."""


def _mjcf_expand_includes(el: ET.Element, base_dir: str, what: str, chain: tuple[str, ...]) -> None:
    """Replace every ``<include file=...>`` below ``el`` by the children of that file's ``<mujoco>`` root (its
    path relative to ``base_dir``, as MuJoCo resolves it: the top file's directory), recursively, then merge
    repeated top-level sections of a ``<mujoco>`` root into the first one (``<compiler>`` by attributes)."""
    for i, child in reversed(list(enumerate(el))):
        if child.tag != "include":
            _mjcf_expand_includes(child, base_dir, what, chain)
            continue
        name = child.get("file")
        if not name:
            raise ValueError(f"{what}: an <include> without a file attribute")
        path = os.path.abspath(os.path.join(base_dir, name))
        if path in chain:
            raise ValueError(f"{what}: <include file={name!r}> includes itself (through {' -> '.join(chain)})")
        if not os.path.isfile(path):
            raise FileNotFoundError(f"{what}: <include file={name!r}>: no such file {path!r}")
        try:
            inc = ET.parse(path).getroot()
        except ET.ParseError as e:
            raise ValueError(f"{what}: included {path!r} does not parse as XML: {e}") from None
        if inc.tag != "mujoco":
            raise ValueError(f"{what}: included {path!r} has root <{inc.tag}>, expected <mujoco>")
        _mjcf_expand_includes(inc, base_dir, what, (*chain, path))
        el.remove(child)
        for k, item in enumerate(list(inc)):
            el.insert(i + k, item)
    if el.tag != "mujoco":
        return
    first: dict[str, ET.Element] = {}
    for child in list(el):
        if child.tag not in (*_MJCF_SECTIONS, "compiler"):
            continue
        keep = first.setdefault(child.tag, child)
        if keep is child:
            continue
        if child.tag == "compiler":
            keep.attrib.update(child.attrib)
        else:
            keep.extend(list(child))
        el.remove(child)


def _describe(source: Any) -> str:
    """A short name of an import source for messages: its path, or 'xml text'."""
    text = str(source)
    return "xml text" if text.lstrip().startswith("<") else repr(text)


def _floats(text: str | None, what: str, count: int | None = None, default: Any = None) -> np.ndarray | None:
    if text is None:
        return None if default is None else np.asarray(default, dtype=np.float64)
    try:
        v = np.asarray([float(x) for x in text.split()], dtype=np.float64)
    except ValueError:
        raise ValueError(f"{what}: expected numbers, got {text!r}") from None
    if count is not None and v.size != count:
        raise ValueError(f"{what}: expected {count} numbers, got {text!r}")
    return v


def _load_mesh(path: str, scale: np.ndarray, what: str) -> Mesh | None:
    """A :class:`Mesh` from a mesh file through trimesh, or None (with a warning) when it cannot be read."""
    try:
        import trimesh
    except ImportError:
        warnings.warn(f"{what}: trimesh is not installed; mesh {path!r} skipped", stacklevel=3)
        return None
    try:
        tm = trimesh.load(path, force="mesh")
    except Exception as e:  # noqa: BLE001 - any loader failure means: skip this mesh
        warnings.warn(f"{what}: mesh {path!r} could not be loaded ({e}); skipped", stacklevel=3)
        return None
    v = np.asarray(tm.vertices, dtype=np.float64) * np.asarray(scale, dtype=np.float64)
    return Mesh(v, np.asarray(tm.faces, dtype=np.int32).reshape(-1))


def _resolve_path(filename: str, base: str) -> str:
    """Resolve ``package://pkg/rel``, ``file://`` and relative mesh paths against the file's directory."""
    for prefix in ("package://", "model://"):
        if filename.startswith(prefix):
            rest = filename[len(prefix):]
            parts = rest.split("/", 1)
            candidates = [os.path.join(base, rest), os.path.join(base, parts[-1])]
            for c in candidates:
                if os.path.exists(c):
                    return c
            return candidates[0]
    if filename.startswith("file://"):
        filename = filename[len("file://"):]
    return filename if os.path.isabs(filename) else os.path.join(base, filename)


def _urdf_origin(el: ET.Element | None, scale: float, what: str) -> Pose:
    """The pose of a URDF ``<origin xyz rpy>`` (fixed-axis roll, pitch, yaw)."""
    if el is None:
        return _pose()
    xyz = _floats(el.get("xyz"), f"{what} origin xyz", 3, (0.0, 0.0, 0.0)) * scale
    r, p, y = _floats(el.get("rpy"), f"{what} origin rpy", 3, (0.0, 0.0, 0.0))
    q = _qmul(_qaxis((0, 0, 1), y), _qmul(_qaxis((0, 1, 0), p), _qaxis((1, 0, 0), r)))
    return xyz, q


class _Tree:
    """Parent/child structure of named links joined by named joints, checked and ordered root-first."""

    def __init__(self, links: list[str], joints: list[tuple[str, str, str]], what: str) -> None:
        """``joints`` holds (joint name, parent link, child link) triples."""
        known = set(links)
        self.parent_joint: dict[str, int] = {}
        self.children: dict[str, list[int]] = {name: [] for name in links}
        for j, (name, parent, child) in enumerate(joints):
            for role, link in (("parent", parent), ("child", child)):
                if link not in known:
                    raise ValueError(f"{what}: joint {name!r} names {role} link {link!r}, which does not exist")
            if child in self.parent_joint:
                other = joints[self.parent_joint[child]][0]
                raise ValueError(f"{what}: link {child!r} is the child of both joint {other!r} and joint {name!r}; "
                                 f"closed loops are not supported")
            self.parent_joint[child] = j
            self.children[parent].append(j)
        self.roots = [name for name in links if name not in self.parent_joint]
        self.order: list[list[str]] = []
        seen: set[str] = set()
        for root in self.roots:
            tree: list[str] = []
            stack = [root]
            while stack:
                link = stack.pop()
                seen.add(link)
                tree.append(link)
                stack.extend(joints[j][2] for j in reversed(self.children[link]))
            self.order.append(tree)
        loop = [name for name in links if name not in seen]
        if loop:
            raise ValueError(f"{what}: links {loop} form a closed loop of joints (no root link)")


class ImportBuilder:
    """``add_urdf``, ``add_mjcf`` and ``add_usd``: robot descriptions and USD Physics scenes into this builder.
    Every tree of links becomes one articulation; its root is fixed to the world, free, or joined by
    ``base_joint``."""

    # --- shared -----------------------------------------------------------------------------------------
    def _import_cfg(self, *, density: float | None = None, mu: float | None = None, collide: bool = True,
                    visible: bool = True) -> ShapeConfig:
        cfg = self.default_shape_cfg.copy()
        if density is not None:
            cfg.density = float(density)
        if mu is not None:
            cfg.mu = float(mu)
        cfg.has_shape_collision = cfg.has_shape_collision and collide
        cfg.has_particle_collision = cfg.has_particle_collision and collide
        cfg.is_visible = visible
        return cfg

    def _import_primitive(self, body: int, kind: str, pose: Pose, size: dict[str, float], cfg: ShapeConfig,
                          label: str, what: str, mesh: Mesh | None = None) -> int | None:
        """Add one shape of ``kind`` (box, sphere, capsule, cylinder, ellipsoid, plane, mesh) to ``body``."""
        x = _tf(pose)
        if kind == "box":
            return self.add_shape_box(body, xform=x, hx=size["hx"], hy=size["hy"], hz=size["hz"], cfg=cfg,
                                      label=label)
        if kind == "sphere":
            return self.add_shape_sphere(body, xform=x, radius=size["radius"], cfg=cfg, label=label)
        if kind == "capsule":
            return self.add_shape_capsule(body, xform=x, radius=size["radius"], half_height=size["half_height"],
                                          cfg=cfg, label=label)
        if kind == "cylinder":
            return self.add_shape_cylinder(body, xform=x, radius=size["radius"], half_height=size["half_height"],
                                           cfg=cfg, label=label)
        if kind == "ellipsoid":
            return self.add_shape_ellipsoid(body, xform=x, rx=size["a"], ry=size["b"], rz=size["c"], cfg=cfg,
                                            label=label)
        if kind == "plane":
            return self.add_shape_plane(xform=x, width=size.get("width", 0.0), length=size.get("length", 0.0),
                                        body=body, cfg=cfg, label=label)
        if kind == "mesh":
            if mesh is None:
                return None
            return self.add_shape_mesh(body, xform=x, mesh=mesh, cfg=cfg, label=label)
        raise ValueError(f"{what}: unknown shape type {kind!r}")

    def _set_inertial(self, body: int, mass: float, com: np.ndarray, inertia: np.ndarray) -> None:
        """Replace ``body``'s mass properties with given ones (``inertia`` about ``com``, body frame)."""
        self.body_mass[body] = float(mass)
        self.body_com[body] = tuple(float(c) for c in com)
        self.body_inertia[body] = tuple(float(v) for v in np.asarray(inertia, dtype=np.float64).reshape(9))

    def _add_root_joint(self, root: int, root_pose: Pose, floating: bool | None, base_joint: dict | None,
                        file_joint: Any, label: str, what: str) -> int:
        """Join ``root`` (already placed at ``root_pose``) to the world: by ``base_joint``, a free joint when
        ``floating``, a fixed one when ``floating`` is False, else by ``file_joint()`` (the file's own)."""
        if floating is not None and base_joint is not None:
            raise ValueError(f"{what}: give floating or base_joint, not both")
        if base_joint is not None:
            kw = dict(base_joint)
            jt = JointType(kw.pop("joint_type", kw.pop("type", JointType.D6)))
            kw.setdefault("parent_xform", _tf(root_pose))
            kw.setdefault("label", f"{label}/base_joint")
            return self.add_joint(jt, -1, root, **kw)
        if floating:
            return self.add_joint_free(root, label=f"{label}/floating_base")
        if floating is False:
            return self.add_joint_fixed(-1, root, parent_xform=_tf(root_pose), label=f"{label}/fixed_base")
        return file_joint()

    def _disable_self_collisions(self, first_shape: int) -> None:
        """Filter every pair of shapes added since ``first_shape`` that sit on bodies."""
        shapes = [s for s in range(first_shape, len(self.shape_type)) if self.shape_body[s] >= 0]
        for i, a in enumerate(shapes):
            for b in shapes[i + 1:]:
                if self.shape_body[a] != self.shape_body[b]:
                    self.add_shape_collision_filter_pair(a, b)

    # --- URDF -------------------------------------------------------------------------------------------
    def add_urdf(self, source: str, *, xform: Any = None, floating: bool | None = None,
                 base_joint: dict | None = None, scale: float = 1.0, hide_visuals: bool = False,
                 parse_visuals_as_colliders: bool = False, up_axis: Axis | str | int = Axis.Z,
                 enable_self_collisions: bool = True, ignore_inertial_definitions: bool = False,
                 label_prefix: str | None = None) -> None:
        """Add the robot of a URDF file (or XML text) ``source``: one link per ``<link>`` (mass, center of
        mass and inertia from ``<inertial>``, else from the collision shapes' density), one joint per
        ``<joint>`` (revolute, continuous, prismatic, fixed, floating, planar; axis, limits, ``<dynamics
        damping>``), collision shapes (box, sphere, cylinder, capsule, mesh through trimesh) and visual
        shapes that do not collide. The root link is fixed to the world at ``xform`` unless ``floating``
        (a free joint) or ``base_joint`` (keywords of :meth:`add_joint` with ``joint_type``) says
        otherwise. Lengths are multiplied by ``scale``."""
        what = f"add_urdf({_describe(source)})"
        root_el, base_dir = _load_xml(source, what)
        if root_el.tag != "robot":
            raise ValueError(f"{what}: the root element is <{root_el.tag}>, expected <robot>")
        robot = label_prefix or root_el.get("name", "robot")
        scale = float(scale)
        links = {}
        for el in root_el.findall("link"):
            name = el.get("name")
            if name is None:
                raise ValueError(f"{what}: a <link> has no name")
            if name in links:
                raise ValueError(f"{what}: two links are named {name!r}")
            links[name] = el
        joint_els = root_el.findall("joint")
        triples = []
        for el in joint_els:
            name = el.get("name", "?")
            p, c = el.find("parent"), el.find("child")
            if p is None or c is None:
                raise ValueError(f"{what}: joint {name!r} lacks a <parent> or <child> element")
            triples.append((name, p.get("link"), c.get("link")))
        if not links:
            raise ValueError(f"{what}: the robot has no links")
        tree = _Tree(list(links), triples, what)
        up = _up_rotation(up_axis, self.up_axis)
        base = _mul(_as_pose(xform), (np.zeros(3), up))
        has_visuals = any(el.find("visual") is not None for el in links.values())
        first_shape = len(self.shape_type)
        for order in tree.order:
            bodies: dict[str, int] = {}
            poses: dict[str, Pose] = {}
            for name in order:
                j = tree.parent_joint.get(name)
                if j is None:
                    poses[name] = base
                else:
                    parent_link = triples[j][1]
                    poses[name] = _mul(poses[parent_link], _urdf_origin(joint_els[j].find("origin"), scale,
                                                                       f"{what}: joint {triples[j][0]!r}"))
                bodies[name] = self._urdf_link(links[name], poses[name], f"{robot}/{name}", base_dir, scale,
                                               has_visuals, hide_visuals, parse_visuals_as_colliders,
                                               ignore_inertial_definitions, what)
            root = order[0]
            joints = [self._add_root_joint(bodies[root], poses[root], floating, base_joint,
                                           lambda b=bodies[root], r=root: self.add_joint_fixed(
                                               -1, b, parent_xform=_tf(base), label=f"{robot}/{r}_fixed_base"),
                                           robot, what)]
            for name in order[1:]:
                j = tree.parent_joint[name]
                joints.append(self._urdf_joint(joint_els[j], bodies[triples[j][1]], bodies[name], scale,
                                               f"{robot}/{triples[j][0]}", what))
            self.add_articulation(joints, label=robot)
        if not enable_self_collisions:
            self._disable_self_collisions(first_shape)

    def _urdf_link(self, el: ET.Element, pose: Pose, label: str, base_dir: str, scale: float, has_visuals: bool,
                   hide_visuals: bool, visuals_as_colliders: bool, ignore_inertial: bool, what: str) -> int:
        body = self.add_link(xform=_tf(pose), label=label)
        name = el.get("name")
        visuals, colliders = el.findall("visual"), el.findall("collision")
        if visuals_as_colliders:
            colliders = visuals
        else:
            vis_cfg = self._import_cfg(density=0.0, collide=False, visible=not hide_visuals)
            for k, v in enumerate(visuals):
                self._urdf_geometry(body, v, vis_cfg, f"{label}/visual_{k}", base_dir, scale, what)
        col_cfg = self._import_cfg(visible=not has_visuals or visuals_as_colliders)
        for k, c in enumerate(colliders):
            self._urdf_geometry(body, c, col_cfg, f"{label}/collision_{k}", base_dir, scale, what)
        inertial = el.find("inertial")
        if inertial is not None and not ignore_inertial:
            frame = _urdf_origin(inertial.find("origin"), scale, f"{what}: link {name!r} inertial")
            mass_el, i_el = inertial.find("mass"), inertial.find("inertia")
            mass = float(mass_el.get("value", 0.0)) if mass_el is not None else self.body_mass[body]
            inertia = np.zeros((3, 3))
            if i_el is not None:
                g = {k: float(i_el.get(k, 0.0)) for k in ("ixx", "iyy", "izz", "ixy", "ixz", "iyz")}
                inertia = np.array([[g["ixx"], g["ixy"], g["ixz"]], [g["ixy"], g["iyy"], g["iyz"]],
                                    [g["ixz"], g["iyz"], g["izz"]]]) * scale ** 2
                rot = np.asarray(wp.quat_to_matrix(wp.quat(*frame[1])), dtype=np.float64).reshape(3, 3)
                inertia = rot @ inertia @ rot.T
            if mass < 0.0:
                raise ValueError(f"{what}: link {name!r} has negative mass {mass}")
            self._set_inertial(body, mass, frame[0], inertia)
        return body

    def _urdf_geometry(self, body: int, el: ET.Element, cfg: ShapeConfig, label: str, base_dir: str, scale: float,
                       what: str) -> None:
        geo = el.find("geometry")
        if geo is None or len(geo) == 0:
            return
        g = geo[0]
        where = f"{what}: {label}"
        pose = _urdf_origin(el.find("origin"), scale, where)
        if g.tag == "box":
            hx, hy, hz = _floats(g.get("size"), f"{where} box size", 3) * 0.5 * scale
            self._import_primitive(body, "box", pose, {"hx": hx, "hy": hy, "hz": hz}, cfg, label, where)
        elif g.tag == "sphere":
            self._import_primitive(body, "sphere", pose, {"radius": float(g.get("radius", 0.0)) * scale}, cfg,
                                   label, where)
        elif g.tag in ("cylinder", "capsule"):
            size = {"radius": float(g.get("radius", 0.0)) * scale,
                    "half_height": 0.5 * float(g.get("length", 0.0)) * scale}
            self._import_primitive(body, g.tag, pose, size, cfg, label, where)
        elif g.tag == "mesh":
            filename = g.get("filename")
            if not filename:
                raise ValueError(f"{where}: <mesh> has no filename")
            s = _floats(g.get("scale"), f"{where} mesh scale", 3, (1.0, 1.0, 1.0)) * scale
            mesh = _load_mesh(_resolve_path(filename, base_dir), s, where)
            self._import_primitive(body, "mesh", pose, {}, cfg, label, where, mesh=mesh)
        else:
            raise ValueError(f"{where}: unknown geometry <{g.tag}>")

    def _urdf_joint(self, el: ET.Element, parent: int, child: int, scale: float, label: str, what: str) -> int:
        name = el.get("name")
        jtype = el.get("type")
        where = f"{what}: joint {name!r}"
        x_p = _tf(_urdf_origin(el.find("origin"), scale, where))
        axis = _floats(el.find("axis").get("xyz") if el.find("axis") is not None else None, f"{where} axis", 3,
                       (1.0, 0.0, 0.0))
        if np.linalg.norm(axis) == 0.0:
            raise ValueError(f"{where}: the axis is zero")
        lim = el.find("limit")
        dyn = el.find("dynamics")
        dof = {"damping": float(dyn.get("damping", 0.0)) if dyn is not None else 0.0,
               "friction": float(dyn.get("friction", 0.0)) if dyn is not None else 0.0}
        if lim is not None:
            dof["effort_limit"] = float(lim.get("effort", self.default_joint_cfg.effort_limit))
            dof["velocity_limit"] = float(lim.get("velocity", self.default_joint_cfg.velocity_limit))
        common = {"parent_xform": x_p, "label": label}
        if jtype in ("revolute", "prismatic"):
            unit = 1.0 if jtype == "revolute" else scale
            if lim is not None and (lim.get("lower") is not None or lim.get("upper") is not None):
                dof["limit_lower"] = float(lim.get("lower", 0.0)) * unit
                dof["limit_upper"] = float(lim.get("upper", 0.0)) * unit
            cfg = self._dof_cfg(axis, dof)
            if jtype == "revolute":
                return self.add_joint_revolute(parent, child, axis=cfg, **common)
            return self.add_joint_prismatic(parent, child, axis=cfg, **common)
        if jtype == "continuous":
            return self.add_joint_revolute(parent, child, axis=self._dof_cfg(axis, dof), **common)
        if jtype == "fixed":
            return self.add_joint_fixed(parent, child, **common)
        if jtype == "floating":
            return self.add_joint(JointType.D6, parent, child,
                                  linear_axes=[self._dof_cfg(a, dof) for a in np.eye(3)],
                                  angular_axes=[self._dof_cfg(a, dof) for a in np.eye(3)], **common)
        if jtype == "planar":
            n = axis / np.linalg.norm(axis)
            t1 = np.cross(n, [1.0, 0.0, 0.0] if abs(n[0]) < 0.9 else [0.0, 1.0, 0.0])
            t1 /= np.linalg.norm(t1)
            t2 = np.cross(n, t1)
            return self.add_joint(JointType.D6, parent, child,
                                  linear_axes=[self._dof_cfg(t1, dof), self._dof_cfg(t2, dof)],
                                  angular_axes=[self._dof_cfg(n, dof)], **common)
        raise ValueError(f"{where}: unknown joint type {jtype!r} (expected revolute, continuous, prismatic, "
                         f"fixed, floating or planar)")

    def _dof_cfg(self, axis: Any, values: dict[str, float]) -> JointDofConfig:
        """A dof along ``axis`` with the builder's default drive and limit settings, overridden by ``values``."""
        d = self.default_joint_cfg
        kw = {f: getattr(d, f) for f in ("limit_ke", "limit_kd", "target_ke", "target_kd", "armature",
                                         "effort_limit", "velocity_limit", "friction", "damping", "stiffness")}
        kw.update(limit_lower=-MAXVAL, limit_upper=MAXVAL)
        kw.update(values)
        return JointDofConfig(axis=np.asarray(axis, dtype=np.float64), **kw)

    # --- USD --------------------------------------------------------------------------------------------
    def add_usd(self, source: Any, *, xform: Any = None, floating: bool | None = None,
                base_joint: dict | None = None, root_path: str = "/", joint_drive_gains_scaling: float = 1.0,
                enable_self_collisions: bool = True, label_prefix: str | None = None) -> None:
        """Add the USD Physics scene ``source`` (a file, ``#usda`` text or a ``Usd.Stage``; needs usd-core):
        a link per prim with ``RigidBodyAPI`` (mass, center of mass and principal inertia from ``MassAPI``,
        else from its colliders' density), colliders with ``CollisionAPI`` (cube, sphere, capsule, cylinder,
        plane, mesh; static when no rigid body holds them), and revolute, prismatic, spherical, fixed and
        distance joints and generic ``PhysicsJoint`` prims (D6 joints: an axis is free unless its ``LimitAPI``
        bounds it, or locks it with low > high), with limits (degrees for angles) and ``DriveAPI`` gains and
        targets. Each tree of
        bodies is one articulation; a root without a joint to the world is free. Lengths follow the
        stage's meters per unit and its up axis is turned onto the builder's."""
        _usd_add(self, source, xform=xform, floating=floating, base_joint=base_joint, root_path=root_path,
                 joint_drive_gains_scaling=joint_drive_gains_scaling,
                 enable_self_collisions=enable_self_collisions, label_prefix=label_prefix)

    # --- MJCF -------------------------------------------------------------------------------------------
    def add_mjcf(self, source: str, *, xform: Any = None, floating: bool | None = None,
                 base_joint: dict | None = None, scale: float = 1.0, armature_scale: float = 1.0,
                 hide_visuals: bool = False, up_axis: Axis | str | int = Axis.Z, enable_self_collisions: bool = True,
                 ignore_inertial_definitions: bool = False, label_prefix: str | None = None) -> None:
        """Add the bodies of a MuJoCo MJCF file (or XML text) ``source``: one link per ``<body>`` (mass from
        ``<inertial>`` or from its geoms' density or mass), its joints (hinge, slide, ball, free; several
        hinges/slides in one body make a D6 joint; none a fixed one) with axis, range, damping, armature,
        stiffness and ``actuatorfrcrange`` (the effort limit), geoms (plane, sphere, capsule, cylinder, box,
        ellipsoid, mesh through trimesh; ``fromto`` too), ``<default>`` classes and ``<include>`` files (merged
        as MuJoCo does). Geoms of the world body become static shapes. Each child of the world body is one
        articulation, its root placed by ``xform`` and joined as the file says unless ``floating`` or
        ``base_joint`` (as :meth:`add_urdf`) is given.

        A ball joint's ``range`` (MuJoCo: the largest rotation angle, "0 max") limits each component of its
        rotation vector to [-max, max] (so turns about a diagonal go up to sqrt(3) max); Newton 1.8's importer
        drops it (its BALL joints take no limits in any solver).

        Actuators on joints become drive settings of the joint's dofs, as Newton's importer sets them:
        ``<position kp kv>`` sets ``joint_target_ke`` = kp, and ``joint_target_kd`` = kv unless a velocity
        actuator set it first, mode POSITION; ``<velocity kv>`` sets ``joint_target_kd`` = kv, mode VELOCITY
        (both: POSITION_VELOCITY); gains scale by gear^2, targets are in joint units. Newton keeps
        ``<motor>`` and ``<general>`` for SolverMuJoCo's controls and leaves the joint undriven; with no such
        solver here, a ``<general>`` whose gainprm/biasprm make a position or velocity servo (fixed gain g,
        affine bias (0, -g, -kv) or (0, 0, -g)) sets the drive as ``<position>``/``<velocity>`` would, and a
        motor (or a ``<general>`` without bias) marks the dofs EFFORT (force from ``control.joint_f``). A
        ``forcerange`` (forcelimited) caps ``joint_effort_limit`` at gear times its largest magnitude, and a
        motor's ``ctrlrange`` at gear times gain times its largest control. Other actuators (tendon, site or
        body transmissions, muscles, dampers) warn and are skipped."""
        what = f"add_mjcf({_describe(source)})"
        root_el, base_dir = _load_xml(source, what)
        if root_el.tag != "mujoco":
            raise ValueError(f"{what}: the root element is <{root_el.tag}>, expected <mujoco>")
        _mjcf_expand_includes(root_el, base_dir, what, ())
        ctx = _MjcfContext(root_el, base_dir, float(scale), what)
        model = label_prefix or root_el.get("model", "mjcf")
        up = _up_rotation(up_axis, self.up_axis)
        base = _mul(_as_pose(xform), (np.zeros(3), up))
        world = root_el.find("worldbody")
        if world is None:
            raise ValueError(f"{what}: no <worldbody>")
        first_shape = len(self.shape_type)
        for item, pose, cls in ctx.children(world, _pose(), "main"):
            if item.tag == "geom":
                self._mjcf_geom(-1, item, _mul(base, pose), cls, ctx, f"{model}/worldbody", hide_visuals)
        for item, pose, cls in ctx.children(world, _pose(), "main"):
            if item.tag != "body":
                continue
            records: list[tuple[int, int, Pose, list[tuple[str, dict]], str]] = []
            self._mjcf_body(item, -1, base, pose, cls, f"{model}/worldbody", ctx, records, hide_visuals,
                            ignore_inertial_definitions)
            joints = []
            for body, parent, local, jels, label in records:
                if parent < 0:
                    placed = _mul(base, local)
                    joints.append(self._add_root_joint(
                        body, placed, floating, base_joint,
                        lambda b=body, p=placed, j=jels, lb=label: self._mjcf_joint(-1, b, p, j, lb, ctx,
                                                                                    armature_scale),
                        label, what))
                else:
                    joints.append(self._mjcf_joint(parent, body, local, jels, label, ctx, armature_scale))
            self.add_articulation(joints, label=records[0][4])
        for section in root_el.findall("actuator"):
            for el in section:
                self._mjcf_actuator(el, ctx)
        if not enable_self_collisions:
            self._disable_self_collisions(first_shape)

    def _mjcf_body(self, el: ET.Element, parent: int, parent_world: Pose, local: Pose, cls: str, path: str,
                   ctx: _MjcfContext, records: list, hide_visuals: bool, ignore_inertial: bool) -> None:
        name = el.get("name", f"body_{len(self.body_q)}")
        label = f"{path}/{name}"
        cls = el.get("childclass", cls)
        ctx.check_class(cls, f"body {name!r}")
        local = _mul(local, ctx.frame(el.attrib, f"body {name!r}"))
        world = _mul(parent_world, local)
        body = self.add_link(xform=_tf(world), label=label)
        jels: list[tuple[str, dict]] = []
        inertial = None
        record = (body, parent, local, jels, label)
        records.append(record)
        children = list(ctx.children(el, _pose(), cls))
        for item, pose, item_cls in children:
            if item.tag == "geom":
                self._mjcf_geom(body, item, pose, item_cls, ctx, label, hide_visuals)
            elif item.tag in ("joint", "freejoint"):
                attrs = ctx.attrs(item, item_cls)
                if item.tag == "freejoint":
                    attrs["type"] = "free"
                jels.append((attrs.get("name", f"{name}_joint_{len(jels)}"), attrs))
                ctx.joint_names.add(jels[-1][0])
            elif item.tag == "inertial":
                inertial = item
        if inertial is not None and not ignore_inertial and ctx.inertia_from_geom != "true":
            where = f"{ctx.what}: body {name!r} inertial"
            frame = ctx.frame(inertial.attrib, where)
            mass = float(inertial.get("mass", 0.0))
            s2 = ctx.scale ** 2
            if inertial.get("fullinertia") is not None:
                a = _floats(inertial.get("fullinertia"), f"{where} fullinertia", 6) * s2
                inertia = np.array([[a[0], a[3], a[4]], [a[3], a[1], a[5]], [a[4], a[5], a[2]]])
            else:
                inertia = np.diag(_floats(inertial.get("diaginertia"), f"{where} diaginertia", 3, (0, 0, 0)) * s2)
            rot = np.asarray(wp.quat_to_matrix(wp.quat(*frame[1])), dtype=np.float64).reshape(3, 3)
            self._set_inertial(body, mass, frame[0], rot @ inertia @ rot.T)
        elif ctx.inertia_from_geom == "false" and inertial is None:
            self._set_inertial(body, 0.0, np.zeros(3), np.zeros((3, 3)))
        for item, pose, item_cls in children:
            if item.tag == "body":
                self._mjcf_body(item, body, world, pose, item_cls, label, ctx, records, hide_visuals, ignore_inertial)

    def _mjcf_joint(self, parent: int, child: int, local: Pose, jels: list[tuple[str, dict]], label: str,
                    ctx: _MjcfContext, armature_scale: float) -> int:
        """Join ``child`` to ``parent`` at the body's placement ``local`` (world pose for a root) as its
        MJCF joints ``jels`` say."""
        what = ctx.what
        if not jels:
            return self.add_joint_fixed(parent, child, parent_xform=_tf(local), label=f"{label}/fixed")
        types = [attrs.get("type", "hinge") for _, attrs in jels]
        for (name, _), t in zip(jels, types, strict=True):
            if t not in ("hinge", "slide", "ball", "free"):
                raise ValueError(f"{what}: joint {name!r} has unknown type {t!r} (expected hinge, slide, ball or "
                                 f"free)")
        name0, attrs0 = jels[0]
        pos = _floats(attrs0.get("pos"), f"{what}: joint {name0!r} pos", 3, (0.0, 0.0, 0.0)) * ctx.scale
        x_p, x_c = _tf(_mul(local, _pose(pos))), _tf(_pose(pos))
        if "free" in types or "ball" in types:
            if len(jels) != 1:
                raise ValueError(f"{what}: body {label!r} combines a {'free' if 'free' in types else 'ball'} joint "
                                 f"with others ({[n for n, _ in jels]}); give it one joint")
            if types[0] == "free":
                j = self.add_joint_free(child, parent=parent, label=f"{label}/{name0}")
                ctx.joint_dofs[name0] = list(range(self.joint_qd_start[j], self.joint_qd_start[j] + 6))
                return j
            where = f"{what}: joint {name0!r}"
            values = _mjcf_dof_values(attrs0, where, armature_scale, ctx.autolimits)
            rng = _mjcf_range(attrs0, "limited", "range", ctx.autolimits, where)
            if rng is not None:
                # MuJoCo limits the ball's rotation angle (range "0 max"): a cone on the rotation vector's norm,
                # approximated by the box |component| <= max of the per-axis limits BALL joints take here.
                cone = float(rng[1]) * (math.pi / 180.0 if ctx.degrees else 1.0)
                values.update(limit_lower=-cone, limit_upper=cone)
            axes = [self._dof_cfg(a, values) for a in np.eye(3)]
            j = self.add_joint_ball(parent, child, parent_xform=x_p, child_xform=x_c, angular_axes=axes,
                                    label=f"{label}/{name0}")
            ctx.joint_dofs[name0] = list(range(self.joint_qd_start[j], self.joint_qd_start[j] + 3))
            return j
        linear, angular = [], []
        for (name, attrs), t in zip(jels, types, strict=True):
            where = f"{what}: joint {name!r}"
            axis = _floats(attrs.get("axis"), f"{where} axis", 3, (0.0, 0.0, 1.0))
            if np.linalg.norm(axis) == 0.0:
                raise ValueError(f"{where}: the axis is zero")
            unit = (math.pi / 180.0 if ctx.degrees else 1.0) if t == "hinge" else ctx.scale
            values = _mjcf_dof_values(attrs, where, armature_scale, ctx.autolimits)
            rng = _mjcf_range(attrs, "limited", "range", ctx.autolimits, where)
            if rng is not None:
                lo, hi = rng * unit
                if lo > hi:
                    raise ValueError(f"{where}: range {attrs['range']!r} has lower > upper")
                values.update(limit_lower=float(lo), limit_upper=float(hi))
            (angular if t == "hinge" else linear).append(self._dof_cfg(axis, values))
        if len(linear) > 3 or len(angular) > 3:
            raise ValueError(f"{what}: body {label!r} has {len(linear)} slide and {len(angular)} hinge joints; "
                             f"at most 3 of each")
        joint_label = f"{label}/{name0}" if len(jels) == 1 else f"{label}/{'_'.join(n for n, _ in jels)}"
        if not linear and len(angular) == 1:
            j = self.add_joint_revolute(parent, child, axis=angular[0], parent_xform=x_p, child_xform=x_c,
                                        label=joint_label)
        elif not angular and len(linear) == 1:
            j = self.add_joint_prismatic(parent, child, axis=linear[0], parent_xform=x_p, child_xform=x_c,
                                         label=joint_label)
        else:
            j = self.add_joint(JointType.D6, parent, child, linear_axes=linear, angular_axes=angular,
                               parent_xform=x_p, child_xform=x_c, label=joint_label)
        # Each MJCF joint's dof: the slides first, then the hinges, each in file order.
        n_lin = {"slide": 0, "hinge": len(linear)}
        for name, t in zip((n for n, _ in jels), types, strict=True):
            ctx.joint_dofs[name] = [self.joint_qd_start[j] + n_lin[t]]
            n_lin[t] += 1
        return j

    def _mjcf_actuator(self, el: ET.Element, ctx: _MjcfContext) -> None:
        """Turn the MJCF actuator ``el`` into drive settings of the dofs of the joint it moves (see
        :meth:`add_mjcf`)."""
        attrs = ctx.attrs(el, "main")
        kind = el.tag
        joint = attrs.get("joint", attrs.get("jointinparent"))
        where = f"{ctx.what}: <{kind}> actuator {attrs['name']!r}" if "name" in attrs else \
            f"{ctx.what}: <{kind}> actuator on joint {joint!r}"
        if kind not in ("motor", "position", "velocity", "general") or joint is None:
            target = f"a {kind} actuator" if joint is not None else "an actuator without a joint transmission"
            warnings.warn(f"{where}: {target} has no joint drive equivalent; skipped", stacklevel=4)
            return
        if joint not in ctx.joint_names:
            raise ValueError(f"{where}: joint {joint!r} is not defined in the file")
        if joint not in ctx.joint_dofs:
            return  # a root joint the floating or base_joint argument replaced
        gear = float(_floats(attrs.get("gear"), f"{where} gear", None, (1.0,))[0])
        gain = 1.0
        if kind == "position":
            mode, ke, kd = JointTargetMode.POSITION, float(attrs.get("kp", 1.0)), float(attrs.get("kv", 0.0))
        elif kind == "velocity":
            mode, ke, kd = JointTargetMode.VELOCITY, 0.0, float(attrs.get("kv", 1.0))
        elif kind == "motor":
            mode, ke, kd = JointTargetMode.EFFORT, 0.0, 0.0
        else:
            mode, ke, kd, gain = _mjcf_general_drive(attrs, where)
            if mode is None:
                return
        # Force on the joint: gear * (gain ctrl + bias), with actuator length gear * q, so gains scale by gear^2.
        ke, kd = ke * gear * gear, kd * gear * gear
        limit = MAXVAL
        frc = _mjcf_range(attrs, "forcelimited", "forcerange", ctx.autolimits, where)
        if frc is not None:
            limit = abs(gear) * float(np.max(np.abs(frc)))
        ctrl = _mjcf_range(attrs, "ctrllimited", "ctrlrange", ctx.autolimits, where)
        if ctrl is not None and mode == JointTargetMode.EFFORT:
            limit = min(limit, abs(gear * gain) * float(np.max(np.abs(ctrl))))
        for d in ctx.joint_dofs[joint]:
            current = JointTargetMode(self.joint_target_mode[d])
            if mode == JointTargetMode.POSITION:
                self.joint_target_ke[d] = ke
                if current == JointTargetMode.VELOCITY:
                    current = JointTargetMode.POSITION_VELOCITY  # the velocity actuator's kd stays
                elif current in (JointTargetMode.NONE, JointTargetMode.EFFORT):
                    current = JointTargetMode.POSITION
                    self.joint_target_kd[d] = kd
            elif mode == JointTargetMode.VELOCITY:
                if current == JointTargetMode.POSITION:
                    current = JointTargetMode.POSITION_VELOCITY
                elif current in (JointTargetMode.NONE, JointTargetMode.EFFORT):
                    current = JointTargetMode.VELOCITY
                self.joint_target_kd[d] = kd
            elif current == JointTargetMode.NONE:
                current = JointTargetMode.EFFORT
            self.joint_target_mode[d] = int(current)
            self.joint_effort_limit[d] = min(self.joint_effort_limit[d], limit)

    def _mjcf_geom(self, body: int, el: ET.Element, pose: Pose, cls: str, ctx: _MjcfContext, path: str,
                   hide_visuals: bool) -> None:
        attrs = ctx.attrs(el, cls)
        kind = attrs.get("type", "sphere")
        name = attrs.get("name", f"geom_{len(self.shape_type)}")
        where = f"{ctx.what}: geom {name!r}"
        s = ctx.scale
        size = _floats(attrs.get("size"), f"{where} size", None, (0.0, 0.0, 0.0)) * s
        size = np.concatenate([size, np.zeros(3 - min(size.size, 3))])
        fromto = _floats(attrs.get("fromto"), f"{where} fromto", 6)
        if fromto is not None and kind in ("capsule", "cylinder", "box", "ellipsoid"):
            a, b = fromto[:3] * s, fromto[3:] * s
            d = b - a
            length = float(np.linalg.norm(d))
            if length == 0.0:
                raise ValueError(f"{where}: fromto has zero length")
            pose = _mul(pose, ((a + b) * 0.5, _qbetween(np.array([0.0, 0.0, 1.0]), d)))
            half = 0.5 * length
        else:
            pose = _mul(pose, ctx.frame(attrs, where))
            half = float(size[1])
        collide = not (attrs.get("contype", "1") == "0" and attrs.get("conaffinity", "1") == "0")
        visible = not hide_visuals or collide
        mu = _floats(attrs.get("friction"), f"{where} friction", None, (1.0,))[0]
        dims: dict[str, float]
        mesh = None
        if kind in ("sphere",):
            dims = {"radius": float(size[0])}
        elif kind in ("capsule", "cylinder"):
            dims = {"radius": float(size[0]), "half_height": half}
        elif kind == "box":
            dims = {"hx": float(size[0]), "hy": float(size[1]), "hz": half if fromto is not None else float(size[2])}
        elif kind == "ellipsoid":
            dims = {"a": float(size[0]), "b": float(size[1]), "c": half if fromto is not None else float(size[2])}
        elif kind == "plane":
            dims = {"width": float(size[0]), "length": float(size[1])}
        elif kind == "mesh":
            mesh = ctx.mesh(attrs.get("mesh"), where)
            dims = {}
        elif kind in ("hfield", "sdf"):
            warnings.warn(f"{where}: {kind} geoms are not supported; skipped", stacklevel=3)
            return
        else:
            raise ValueError(f"{where}: unknown geom type {kind!r}")
        density = float(attrs.get("density", 1000.0))
        if attrs.get("mass") is not None and body >= 0:
            mass = float(attrs["mass"])
            shape_type = {"sphere": GeoType.SPHERE, "capsule": GeoType.CAPSULE, "cylinder": GeoType.CYLINDER,
                          "box": GeoType.BOX, "mesh": GeoType.MESH}.get(kind)
            scale = {"sphere": (dims.get("radius", 0.0), 0.0, 0.0),
                     "capsule": (dims.get("radius", 0.0), dims.get("half_height", 0.0), 0.0),
                     "cylinder": (dims.get("radius", 0.0), dims.get("half_height", 0.0), 0.0),
                     "box": (dims.get("hx", 0.0), dims.get("hy", 0.0), dims.get("hz", 0.0)),
                     "mesh": (1.0, 1.0, 1.0)}.get(kind, (0.0, 0.0, 0.0))
            volume = primitive_mass_properties(shape_type, scale, 1.0, mesh)[0] if shape_type is not None else 0.0
            if kind == "ellipsoid":
                volume = 4.0 / 3.0 * math.pi * dims["a"] * dims["b"] * dims["c"]
            density = mass / volume if volume > 0.0 else 0.0
        cfg = self._import_cfg(density=density if body >= 0 else 0.0, mu=mu, collide=collide, visible=visible)
        if kind == "plane" and body >= 0:
            raise ValueError(f"{where}: a plane geom must belong to the world body")
        self._import_primitive(body, kind, pose, dims, cfg, f"{path}/{name}", where, mesh=mesh)


def _mjcf_dof_values(attrs: dict[str, str], where: str, armature_scale: float, autolimits: bool) -> dict[str, float]:
    """Damping, armature, stiffness, friction and (from ``actuatorfrcrange``) effort limit of an MJCF joint."""
    values = {"damping": float(attrs.get("damping", 0.0)),
              "armature": float(attrs.get("armature", 0.0)) * armature_scale,
              "stiffness": float(attrs.get("stiffness", 0.0)),
              "friction": float(attrs.get("frictionloss", 0.0))}
    frc = _mjcf_range(attrs, "actuatorfrclimited", "actuatorfrcrange", autolimits, where)
    if frc is not None:
        values["effort_limit"] = float(np.max(np.abs(frc)))
    return values


def _mjcf_range(attrs: dict[str, str], flag: str, name: str, autolimits: bool, where: str) -> np.ndarray | None:
    """The (lower, upper) pair ``attrs[name]`` if its ``flag`` (true, false or auto, auto meaning 'when given'
    under ``autolimits``) turns it on, else None."""
    limited = attrs.get(flag, "auto")
    if limited not in ("true", "false", "auto"):
        raise ValueError(f"{where}: {flag} must be true, false or auto, got {limited!r}")
    rng = attrs.get(name)
    if rng is None or limited == "false" or (limited == "auto" and not autolimits):
        return None
    return _floats(rng, f"{where} {name}", 2)


def _mjcf_general_drive(attrs: dict[str, str], where: str) -> tuple[JointTargetMode | None, float, float, float]:
    """(mode, stiffness, damping, gain) of a ``<general>`` actuator: with a fixed gain g and an affine bias
    (b0, b1, b2), force g ctrl + b1 q + b2 qd is a position servo when b1 = -g (stiffness g, damping -b2), a
    velocity servo when b1 = 0 and b2 = -g, and with no bias a motor of gain g (EFFORT). Anything else warns
    and gives mode None."""
    gaintype, biastype = attrs.get("gaintype", "fixed"), attrs.get("biastype", "none")
    g = float(_floats(attrs.get("gainprm"), f"{where} gainprm", None, (1.0,))[0])
    b = np.concatenate([_floats(attrs.get("biasprm"), f"{where} biasprm", None, (0.0,)), np.zeros(3)])[:3]
    if gaintype == "fixed" and biastype == "none":
        return JointTargetMode.EFFORT, 0.0, 0.0, g
    if gaintype == "fixed" and biastype == "affine" and b[0] == 0.0 and g != 0.0:
        if b[1] == -g:
            return JointTargetMode.POSITION, g, float(-b[2]), g
        if b[1] == 0.0 and b[2] == -g:
            return JointTargetMode.VELOCITY, 0.0, g, g
    warnings.warn(f"{where}: gaintype {gaintype!r}, biastype {biastype!r}, gainprm {g}, biasprm {tuple(b)} is no "
                  f"position, velocity or effort drive; skipped", stacklevel=5)
    return None, 0.0, 0.0, g


class _MjcfContext:
    """What an MJCF file says once for all its elements: compiler settings, default classes, mesh assets."""

    def __init__(self, root: ET.Element, base_dir: str, scale: float, what: str) -> None:
        self.what, self.base_dir, self.scale = what, base_dir, scale
        compiler: dict[str, str] = {}
        for c in root.findall("compiler"):
            compiler.update(c.attrib)
        self.degrees = compiler.get("angle", "degree") == "degree"
        self.eulerseq = compiler.get("eulerseq", "xyz")
        self.inertia_from_geom = compiler.get("inertiafromgeom", "auto")
        self.autolimits = compiler.get("autolimits", "true") == "true"
        self.meshdir = compiler.get("meshdir", compiler.get("assetdir", ""))
        self.classes: dict[str, dict[str, dict[str, str]]] = {}
        for d in root.findall("default"):
            self._read_default(d, {}, d.get("class", "main"))
        self.classes.setdefault("main", {})
        self.meshes: dict[str, ET.Element] = {}
        for asset in root.findall("asset"):
            for m in asset.findall("mesh"):
                file = m.get("file", "")
                self.meshes[m.get("name") or os.path.splitext(os.path.basename(file))[0]] = m
        self._mesh_cache: dict[str, Mesh | None] = {}
        self.joint_names: set[str] = set()
        """Names of the file's joints."""
        self.joint_dofs: dict[str, list[int]] = {}
        """The builder dofs of each MJCF joint the import made (a joint replaced by a base joint has none)."""

    def _read_default(self, el: ET.Element, inherited: dict[str, dict[str, str]], name: str) -> None:
        own = self.classes.setdefault(name, {tag: dict(a) for tag, a in inherited.items()})
        for child in el:
            if child.tag != "default":
                own.setdefault(child.tag, {}).update(child.attrib)
        for child in el:
            if child.tag == "default":
                if child.get("class") is None:
                    raise ValueError(f"{self.what}: a nested <default> has no class name")
                self._read_default(child, own, child.get("class"))

    def check_class(self, cls: str, where: str) -> None:
        """Raise ValueError when ``cls`` names no default class."""
        if cls not in self.classes:
            raise ValueError(f"{self.what}: {where} uses default class {cls!r}, which is not defined")

    def attrs(self, el: ET.Element, cls: str) -> dict[str, str]:
        """The element's attributes over its default class's (its own ``class`` or the inherited one)."""
        cls = el.get("class", cls)
        self.check_class(cls, f"<{el.tag} name={el.get('name')!r}>")
        return {**self.classes[cls].get(el.tag, {}), **el.attrib}

    def children(self, el: ET.Element, pose: Pose, cls: str) -> Any:
        """Yield (element, pose in the enclosing body, class) of ``el``'s children, through ``<frame>``s."""
        for child in el:
            if child.tag == "frame":
                sub_cls = child.get("childclass", cls)
                yield from self.children(child, _mul(pose, self.frame(child.attrib, "frame")), sub_cls)
            else:
                yield child, pose, cls

    def frame(self, attrs: dict[str, str], where: str) -> Pose:
        """The pose given by ``pos`` and one of ``quat`` (wxyz), ``axisangle``, ``euler``, ``xyaxes``,
        ``zaxis``."""
        pos = _floats(attrs.get("pos"), f"{self.what}: {where} pos", 3, (0.0, 0.0, 0.0)) * self.scale
        w = f"{self.what}: {where}"
        unit = math.pi / 180.0 if self.degrees else 1.0
        if attrs.get("quat") is not None:
            qw, qx, qy, qz = _floats(attrs["quat"], f"{w} quat", 4)
            q = np.array([qx, qy, qz, qw])
            q /= np.linalg.norm(q)
        elif attrs.get("axisangle") is not None:
            v = _floats(attrs["axisangle"], f"{w} axisangle", 4)
            q = _qaxis(v[:3], v[3] * unit)
        elif attrs.get("euler") is not None:
            angles = _floats(attrs["euler"], f"{w} euler", 3) * unit
            q = _IDENTITY_Q.copy()
            for ch, angle in zip(self.eulerseq, angles, strict=True):
                qi = _qaxis(np.eye(3)["xyz".index(ch.lower())], angle)
                q = _qmul(q, qi) if ch.islower() else _qmul(qi, q)
        elif attrs.get("xyaxes") is not None:
            v = _floats(attrs["xyaxes"], f"{w} xyaxes", 6)
            x = v[:3] / np.linalg.norm(v[:3])
            y = v[3:] - np.dot(v[3:], x) * x
            y /= np.linalg.norm(y)
            q = _qfrom_matrix(np.column_stack([x, y, np.cross(x, y)]))
        elif attrs.get("zaxis") is not None:
            q = _qbetween(np.array([0.0, 0.0, 1.0]), _floats(attrs["zaxis"], f"{w} zaxis", 3))
        else:
            q = _IDENTITY_Q.copy()
        return pos, q

    def mesh(self, name: str | None, where: str) -> Mesh | None:
        """The mesh asset ``name`` loaded through trimesh (None when it cannot be read)."""
        if name is None or name not in self.meshes:
            raise ValueError(f"{where}: mesh asset {name!r} is not defined in <asset>")
        if name not in self._mesh_cache:
            m = self.meshes[name]
            path = _resolve_path(os.path.join(self.meshdir, m.get("file", "")), self.base_dir)
            s = _floats(m.get("scale"), f"{where} mesh scale", 3, (1.0, 1.0, 1.0)) * self.scale
            self._mesh_cache[name] = _load_mesh(path, s, where)
        return self._mesh_cache[name]


# --- USD Physics ---------------------------------------------------------------------------------------------
def _pxr() -> Any:
    try:
        from pxr import Gf, Usd, UsdGeom, UsdPhysics
    except ImportError:
        raise ImportError("add_usd needs usd-core (pip install usd-core)") from None
    return Gf, Usd, UsdGeom, UsdPhysics


def _usd_pose(matrix: Any, meters: float) -> tuple[Pose, np.ndarray]:
    """Split a USD local-to-world matrix into a pose (lengths in meters) and its per-axis scale."""
    Gf = _pxr()[0]
    t = Gf.Transform(matrix)
    q = t.GetRotation().GetQuat()
    return ((np.asarray(t.GetTranslation(), dtype=np.float64) * meters,
             np.array([*q.GetImaginary(), q.GetReal()], dtype=np.float64)), np.abs(np.asarray(t.GetScale())))


def _usd_quat(q: Any) -> np.ndarray:
    if q is None:
        return _IDENTITY_Q.copy()
    v = np.array([*q.GetImaginary(), q.GetReal()], dtype=np.float64)
    return v / np.linalg.norm(v)


_USD_AXES = {"X": (1.0, 0.0, 0.0), "Y": (0.0, 1.0, 0.0), "Z": (0.0, 0.0, 1.0)}


def _usd_get(attr: Any, default: Any = None) -> Any:
    value = attr.Get() if attr and attr.HasAuthoredValue() else None
    return default if value is None else value


class _UsdImport:
    """One pass of :meth:`ImportBuilder.add_usd` over a stage."""

    def __init__(self, builder: ImportBuilder, source: Any, root_path: str, what: str) -> None:
        self.Gf, Usd, self.UsdGeom, self.UsdPhysics = _pxr()
        self.b, self.what = builder, what
        if isinstance(source, Usd.Stage):
            stage = source
        else:
            text = str(source)
            if text.lstrip().startswith("#usda"):
                stage = Usd.Stage.CreateInMemory()
                stage.GetRootLayer().ImportFromString(text)
            elif os.path.isfile(text):
                stage = Usd.Stage.Open(text)
            else:
                raise FileNotFoundError(f"{what}: no such file {text!r}")
        self.stage = stage
        self.meters = float(self.UsdGeom.GetStageMetersPerUnit(stage))
        self.up = str(self.UsdGeom.GetStageUpAxis(stage))
        root = stage.GetPrimAtPath(root_path)
        if not root.IsValid():
            raise ValueError(f"{what}: no prim at root_path {root_path!r}")
        self.prims = list(Usd.PrimRange(root))
        self.cache = self.UsdGeom.XformCache()

    def world(self, prim: Any) -> tuple[Pose, np.ndarray]:
        return _usd_pose(self.cache.GetLocalToWorldTransform(prim), self.meters)

    def owner(self, prim: Any, bodies: dict[str, int]) -> int:
        """The body a collision prim belongs to: its nearest rigid-body ancestor (or itself), else -1."""
        p = prim
        while p.IsValid() and not p.IsPseudoRoot():
            if str(p.GetPath()) in bodies:
                return bodies[str(p.GetPath())]
            p = p.GetParent()
        return -1


def _usd_add(self: ImportBuilder, source: Any, *, xform: Any = None, floating: bool | None = None,
             base_joint: dict | None = None, root_path: str = "/", joint_drive_gains_scaling: float = 1.0,
             enable_self_collisions: bool = True, label_prefix: str | None = None) -> None:
    what = f"add_usd({_describe(source) if isinstance(source, str | os.PathLike) else 'stage'})"
    u = _UsdImport(self, source, root_path, what)
    P = u.UsdPhysics
    base = _mul(_as_pose(xform), (np.zeros(3), _up_rotation(u.up, self.up_axis)))
    body_prims = [p for p in u.prims if p.HasAPI(P.RigidBodyAPI)]
    joint_prims = [p for p in u.prims if p.IsA(P.Joint)]
    names = [str(p.GetPath()) for p in body_prims]
    triples, world_joint = [], {}
    for jp in joint_prims:
        j = P.Joint(jp)
        rel0, rel1 = j.GetBody0Rel().GetTargets(), j.GetBody1Rel().GetTargets()
        b0, b1 = (str(rel0[0]) if rel0 else None), (str(rel1[0]) if rel1 else None)
        for role, path in (("body0", b0), ("body1", b1)):
            if path is not None and path not in names:
                raise ValueError(f"{what}: joint {str(jp.GetPath())!r} names {role} {path!r}, which is not a rigid "
                                 f"body")
        if b1 is None:
            if b0 is None:
                raise ValueError(f"{what}: joint {str(jp.GetPath())!r} connects no bodies")
            b0, b1 = None, b0
            jp = (jp, True)
        else:
            jp = (jp, False)
        if b0 is None:
            if b1 in world_joint:
                raise ValueError(f"{what}: body {b1!r} has two joints to the world; closed loops are not supported")
            world_joint[b1] = jp
        else:
            triples.append((str(jp[0].GetPath()), b0, b1, jp))
    tree = _Tree(names, [t[:3] for t in triples], what)
    prefix = f"{label_prefix}/" if label_prefix else ""
    first_shape = len(self.shape_type)
    for order in tree.order:
        bodies: dict[str, int] = {}
        for path in order:
            prim = u.stage.GetPrimAtPath(path)
            pose, _ = u.world(prim)
            bodies[path] = self.add_link(xform=_tf(_mul(base, pose)), label=prefix + path)
        for prim in u.prims:
            owner = u.owner(prim, bodies) if prim.HasAPI(P.CollisionAPI) else -1
            if owner >= 0:
                body_path = next(n for n, b in bodies.items() if b == owner)
                _usd_shape(self, u, prim, owner, u.world(u.stage.GetPrimAtPath(body_path))[0], what)
        for path in order:
            _usd_mass(self, u, u.stage.GetPrimAtPath(path), bodies[path], what)
        root = order[0]
        root_pose = _mul(base, u.world(u.stage.GetPrimAtPath(root))[0])

        def file_joint(r: str = root, b: int = bodies[root]) -> int:
            if r in world_joint:
                return _usd_joint(self, u, *world_joint[r], -1, b, base, joint_drive_gains_scaling, what)
            return self.add_joint_free(b, label=f"{prefix}{r}/free_joint")

        joints = [self._add_root_joint(bodies[root], root_pose, floating, base_joint, file_joint, prefix + root,
                                       what)]
        for path in order[1:]:
            name, b0, _, jp = triples[tree.parent_joint[path]]
            joints.append(_usd_joint(self, u, *jp, bodies[b0], bodies[path], None, joint_drive_gains_scaling, what))
        self.add_articulation(joints, label=prefix + root)
    for prim in u.prims:  # static colliders
        if prim.HasAPI(P.CollisionAPI) and u.owner(prim, {n: 0 for n in names}) < 0:
            _usd_shape(self, u, prim, -1, base, what)
    if not enable_self_collisions:
        self._disable_self_collisions(first_shape)


def _usd_shape(self: ImportBuilder, u: _UsdImport, prim: Any, body: int, frame: Pose, what: str) -> None:
    """Add the collider ``prim`` to ``body`` (-1: static) whose stage pose is ``frame`` (for a static
    collider: the import's base transform)."""
    G = u.UsdGeom
    where = f"{what}: collider {str(prim.GetPath())!r}"
    stage_pose, scale = u.world(prim)
    pose = _mul(_inv(frame), stage_pose) if body >= 0 else _mul(frame, stage_pose)
    m = u.meters
    mass_api = u.UsdPhysics.MassAPI(prim) if prim.HasAPI(u.UsdPhysics.MassAPI) else None
    density = _usd_get(mass_api.GetDensityAttr(), 0.0) if mass_api else 0.0
    cfg = self._import_cfg(density=density if density > 0.0 else None)
    label = str(prim.GetPath())

    def axis_to_z(axis: str) -> Pose:
        return np.zeros(3), _qbetween(np.array([0.0, 0.0, 1.0]), np.asarray(_USD_AXES[axis]))

    if prim.IsA(G.Cube):
        h = 0.5 * float(_usd_get(G.Cube(prim).GetSizeAttr(), 2.0)) * scale * m
        self._import_primitive(body, "box", pose, {"hx": h[0], "hy": h[1], "hz": h[2]}, cfg, label, where)
    elif prim.IsA(G.Sphere):
        r = float(_usd_get(G.Sphere(prim).GetRadiusAttr(), 1.0)) * float(scale.max()) * m
        self._import_primitive(body, "sphere", pose, {"radius": r}, cfg, label, where)
    elif prim.IsA(G.Capsule) or prim.IsA(G.Cylinder):
        g = G.Capsule(prim) if prim.IsA(G.Capsule) else G.Cylinder(prim)
        axis = str(_usd_get(g.GetAxisAttr(), "Z"))
        s = scale * m
        r = float(_usd_get(g.GetRadiusAttr(), 0.5)) * float(np.delete(s, "XYZ".index(axis)).max())
        hh = 0.5 * float(_usd_get(g.GetHeightAttr(), 1.0)) * float(s["XYZ".index(axis)])
        kind = "capsule" if prim.IsA(G.Capsule) else "cylinder"
        self._import_primitive(body, kind, _mul(pose, axis_to_z(axis)), {"radius": r, "half_height": hh}, cfg,
                               label, where)
    elif prim.IsA(G.Plane):
        axis = str(_usd_get(G.Plane(prim).GetAxisAttr(), "Z"))
        self._import_primitive(body, "plane", _mul(pose, axis_to_z(axis)), {}, cfg, label, where)
    elif prim.IsA(G.Mesh):
        mesh = G.Mesh(prim)
        points = np.asarray(_usd_get(mesh.GetPointsAttr(), []), dtype=np.float64).reshape(-1, 3) * scale * m
        counts = np.asarray(_usd_get(mesh.GetFaceVertexCountsAttr(), []), dtype=np.int64)
        idx = np.asarray(_usd_get(mesh.GetFaceVertexIndicesAttr(), []), dtype=np.int64)
        tris, k = [], 0
        for c in counts:  # fan-triangulate each polygon
            tris.extend((idx[k], idx[k + i], idx[k + i + 1]) for i in range(1, c - 1))
            k += c
        if not tris:
            raise ValueError(f"{where}: the mesh has no faces")
        self._import_primitive(body, "mesh", pose, {}, cfg, label, where, mesh=Mesh(points, np.asarray(tris)))
    else:
        raise ValueError(f"{where}: unsupported collision geometry {prim.GetTypeName()!r}")


def _usd_mass(self: ImportBuilder, u: _UsdImport, prim: Any, body: int, what: str) -> None:
    """Apply a body's MassAPI: mass (rescaling shape-derived inertia when no inertia is given), center of mass,
    diagonal inertia on principal axes."""
    if not prim.HasAPI(u.UsdPhysics.MassAPI):
        return
    api = u.UsdPhysics.MassAPI(prim)
    mass = float(_usd_get(api.GetMassAttr(), 0.0))
    if mass <= 0.0:
        return
    com_attr = _usd_get(api.GetCenterOfMassAttr())
    com = np.asarray(com_attr, dtype=np.float64) * u.meters if com_attr is not None else np.asarray(self.body_com[body])
    diag = _usd_get(api.GetDiagonalInertiaAttr())
    if diag is not None and np.any(np.asarray(diag) > 0.0):
        rot = np.asarray(wp.quat_to_matrix(wp.quat(*_usd_quat(_usd_get(api.GetPrincipalAxesAttr())))),
                         dtype=np.float64).reshape(3, 3)
        inertia = rot @ np.diag(np.asarray(diag, dtype=np.float64) * u.meters ** 2) @ rot.T
    else:
        old = self.body_mass[body]
        inertia = np.asarray(self.body_inertia[body]).reshape(3, 3) * (mass / old if old > 0.0 else 0.0)
    self._set_inertial(body, mass, com, inertia)


def _usd_joint(self: ImportBuilder, u: _UsdImport, prim: Any, swapped: bool, parent: int, child: int,
               base: Pose | None, gains: float, what: str) -> int:
    P = u.UsdPhysics
    j = P.Joint(prim)
    path = str(prim.GetPath())
    where = f"{what}: joint {path!r}"
    # Local positions are in each body's own (possibly scaled) space.
    scales = [u.world(u.stage.GetPrimAtPath(rel.GetTargets()[0]))[1] if rel.GetTargets() else np.ones(3)
              for rel in (j.GetBody0Rel(), j.GetBody1Rel())]
    ends = [(np.asarray(_usd_get(j.GetLocalPos0Attr(), (0, 0, 0)), dtype=np.float64) * scales[0] * u.meters,
             _usd_quat(_usd_get(j.GetLocalRot0Attr()))),
            (np.asarray(_usd_get(j.GetLocalPos1Attr(), (0, 0, 0)), dtype=np.float64) * scales[1] * u.meters,
             _usd_quat(_usd_get(j.GetLocalRot1Attr())))]
    x_p, x_c = (ends[1], ends[0]) if swapped else (ends[0], ends[1])
    if parent < 0 and base is not None:
        x_p = _mul(base, x_p)
    common = {"parent_xform": _tf(x_p), "child_xform": _tf(x_c), "label": path}
    if prim.IsA(P.FixedJoint):
        return self.add_joint_fixed(parent, child, **common)
    if prim.IsA(P.SphericalJoint):
        return self.add_joint_ball(parent, child, **common)
    if prim.IsA(P.DistanceJoint):
        dj = P.DistanceJoint(prim)
        bounds = [_usd_get(attr, -1.0) for attr in (dj.GetMinDistanceAttr(), dj.GetMaxDistanceAttr())]
        lo, hi = (float(b) * u.meters if b is not None and np.isfinite(b) and b >= 0.0 else -1.0 for b in bounds)
        return self.add_joint_distance(parent, child, min_distance=lo, max_distance=hi, **common)

    def dof(limit: tuple[float, float] | None, drive: str, kind: str, axis: str) -> JointDofConfig:
        """A dof along `axis` with the prim's limits (degrees for angles) and the DriveAPI instance `drive`."""
        unit = math.pi / 180.0 if kind == "angular" else u.meters
        values: dict[str, float] = {}
        if limit is not None:
            values.update(limit_lower=limit[0] * unit, limit_upper=limit[1] * unit)
        if prim.HasAPI(P.DriveAPI, drive):
            d = P.DriveAPI(prim, drive)
            per = 180.0 / math.pi if kind == "angular" else 1.0  # USD angular gains are per degree; ours per radian
            values["target_ke"] = float(_usd_get(d.GetStiffnessAttr(), 0.0)) * per * gains
            values["target_kd"] = float(_usd_get(d.GetDampingAttr(), 0.0)) * per * gains
            values["target_q"] = float(_usd_get(d.GetTargetPositionAttr(), 0.0)) * unit
        return self._dof_cfg(_USD_AXES[axis], values)

    def finite(lo: Any, hi: Any) -> tuple[float, float] | None:
        ok = lo is not None and hi is not None and np.isfinite(lo) and np.isfinite(hi) and lo <= hi
        return (float(lo), float(hi)) if ok else None

    for schema, kind, drive in ((P.RevoluteJoint, "angular", "angular"), (P.PrismaticJoint, "linear", "linear")):
        if prim.IsA(schema):
            typed = schema(prim)
            cfg = dof(finite(_usd_get(typed.GetLowerLimitAttr()), _usd_get(typed.GetUpperLimitAttr())), drive, kind,
                      str(_usd_get(typed.GetAxisAttr(), "X")))
            if kind == "angular":
                return self.add_joint_revolute(parent, child, axis=cfg, **common)
            return self.add_joint_prismatic(parent, child, axis=cfg, **common)
    if prim.GetTypeName() == "PhysicsJoint":  # the generic (D6) joint: each axis free unless its LimitAPI says
        axes: dict[str, list] = {"linear": [], "angular": []}
        for name, kind, axis in (("transX", "linear", "X"), ("transY", "linear", "Y"), ("transZ", "linear", "Z"),
                                 ("rotX", "angular", "X"), ("rotY", "angular", "Y"), ("rotZ", "angular", "Z")):
            limit = None
            if prim.HasAPI(P.LimitAPI, name):
                api = P.LimitAPI(prim, name)
                lo, hi = _usd_get(api.GetLowAttr()), _usd_get(api.GetHighAttr())
                if lo is not None and hi is not None and lo > hi:  # USD's way of locking the axis
                    continue
                limit = finite(lo, hi)
            axes[kind].append(dof(limit, name, kind, axis))
        return self.add_joint_d6(parent, child, linear_axes=axes["linear"], angular_axes=axes["angular"], **common)
    raise ValueError(f"{where}: unsupported joint type {prim.GetTypeName()!r} (expected revolute, prismatic, "
                     f"spherical, fixed, distance or a generic PhysicsJoint)")
