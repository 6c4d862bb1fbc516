"""Rigid bodies, joints and articulations of a ModelBuilder."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

import loomwork as wp

from ..enums import Axis, JointTargetMode, JointType

MAXVAL = 1.0e10
"""Limit value meaning 'unlimited'."""

# (coordinates, dofs) of each joint type whose count does not depend on its axes.
_FIXED_DIMS = {JointType.FIXED: (0, 0), JointType.FREE: (7, 6), JointType.DISTANCE: (7, 6), JointType.BALL: (4, 3)}


def _axis_vector(axis: Any) -> tuple[float, float, float]:
    if isinstance(axis, Axis | str) or (isinstance(axis, int) and not isinstance(axis, bool)):
        return Axis.from_any(axis).to_vector()
    v = np.asarray(axis, dtype=np.float64).reshape(-1)
    n = float(np.linalg.norm(v)) if v.shape == (3,) else 0.0
    if n == 0.0 or not np.isfinite(n):
        raise ValueError(f"joint axis must be a nonzero 3-vector or an Axis, got {axis!r}")
    return tuple(float(x) for x in v / n)


def _transform_tuple(xform: Any) -> tuple[float, ...]:
    if xform is None:
        return (0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0)
    v = np.asarray(xform, dtype=np.float64).reshape(-1)
    if v.shape != (7,) or not np.all(np.isfinite(v)):
        raise ValueError(f"expected a finite transform (p, q) of 7 values, got {xform!r}")
    q = v[3:] / np.linalg.norm(v[3:])
    return (*(float(x) for x in v[:3]), *(float(x) for x in q))


class JointDofConfig:
    """One degree of freedom of a joint: its axis, limits, drive (PD target) and actuator settings."""

    def __init__(self, axis: Any = Axis.X, limit_lower: float = -MAXVAL, limit_upper: float = MAXVAL,
                 limit_ke: float = 1.0e4, limit_kd: float = 1.0e1, target_q: float | None = None,
                 target_qd: float | None = None, target_ke: float = 0.0, target_kd: float = 0.0,
                 armature: float = 0.0, effort_limit: float = 1.0e6, velocity_limit: float = 1.0e6,
                 friction: float = 0.0, damping: float = 0.0, stiffness: float = 0.0,
                 actuator_mode: JointTargetMode | None = None, **_: Any) -> None:
        if limit_lower > limit_upper:
            raise ValueError(f"JointDofConfig: limit_lower {limit_lower} > limit_upper {limit_upper}")
        self.axis = _axis_vector(axis)
        self.limit_lower = float(limit_lower)
        self.limit_upper = float(limit_upper)
        self.limit_ke = float(limit_ke)
        self.limit_kd = float(limit_kd)
        self.target_q = 0.0 if target_q is None else float(target_q)
        self.target_qd = 0.0 if target_qd is None else float(target_qd)
        self.target_ke = float(target_ke)
        self.target_kd = float(target_kd)
        self.armature = float(armature)
        self.effort_limit = float(effort_limit)
        self.velocity_limit = float(velocity_limit)
        self.friction = float(friction)
        self.damping = float(damping)
        self.stiffness = float(stiffness)
        self.actuator_mode = None if actuator_mode is None else JointTargetMode(actuator_mode)
        """The dof's ``joint_target_mode``; None: inferred from the gains (NONE without any, as Newton)."""

    @classmethod
    def create_unlimited(cls, axis: Any) -> JointDofConfig:
        """A dof along ``axis`` with no limits, drive or armature."""
        return cls(axis=axis, limit_ke=0.0, limit_kd=0.0)


class BodyBuilder:
    """Rigid bodies (links), the joints between them and articulations (trees of joints)."""

    _DOF_FIELDS = ("limit_lower", "limit_upper", "limit_ke", "limit_kd", "target_qd", "target_ke", "target_kd",
                   "armature", "effort_limit", "velocity_limit", "friction", "damping")

    _lists = {"body_q": None, "body_qd": None, "body_com": None, "body_inertia": None, "body_mass": None,
              "body_lock_inertia": None, "body_kinematic": None, "body_world": "world", "body_label": "label",
              "joint_type": None, "joint_parent": "body", "joint_child": "body", "joint_X_p": None,
              "joint_X_c": None, "joint_q_start": "joint_q", "joint_qd_start": "joint_qd",
              "joint_dof_dim": None, "joint_enabled": None, "joint_world": "world", "joint_label": "label",
              "joint_articulation": "articulation", "joint_q": None, "joint_qd": None, "joint_f": None,
              "joint_act": None, "joint_axis": None, "joint_target_mode": None, "joint_target_q": None,
              **{f"joint_{f}": None for f in _DOF_FIELDS},
              "articulation_start": "joint", "articulation_world": "world", "articulation_label": "label",
              "body_filter_pairs": "body"}

    def _init_domain(self) -> None:
        for name in BodyBuilder._lists:
            setattr(self, name, [])
        self.default_joint_cfg = JointDofConfig()

    @property
    def body_count(self) -> int:
        """Number of bodies added so far."""
        return len(self.body_q)

    @property
    def joint_count(self) -> int:
        """Number of joints added so far."""
        return len(self.joint_type)

    @property
    def articulation_count(self) -> int:
        """Number of articulations added so far."""
        return len(self.articulation_start)

    @property
    def joint_coord_count(self) -> int:
        """Number of joint coordinates (``joint_q`` entries)."""
        return len(self.joint_q)

    @property
    def joint_dof_count(self) -> int:
        """Number of joint degrees of freedom (``joint_qd`` entries)."""
        return len(self.joint_qd)

    # --- bodies -------------------------------------------------------------------------------
    def add_link(self, *, xform: Any = None, com: Any = None, inertia: Any = None, mass: float = 0.0,
                 label: str | None = None, lock_inertia: bool = False, is_kinematic: bool = False,
                 **_: Any) -> int:
        """Add a rigid body with no joint (connect it with an ``add_joint_*``). ``xform`` places its frame in
        the world, ``com`` [m] is its center of mass in that frame, ``inertia`` [kg m^2] is about the center
        of mass; shapes added with a density add to both. Returns its index."""
        if not np.isfinite(mass) or mass < 0.0:
            raise ValueError(f"add_link{f' {label!r}' if label else ''}: mass must be finite and >= 0, got {mass}")
        inertia_m = np.zeros((3, 3)) if inertia is None else np.asarray(inertia, dtype=np.float64).reshape(3, 3)
        if not np.all(np.isfinite(inertia_m)) or np.any(np.linalg.eigvalsh(0.5 * (inertia_m + inertia_m.T)) < -1e-9):
            raise ValueError(f"add_link{f' {label!r}' if label else ''}: inertia must be a finite symmetric "
                             f"positive semi-definite 3x3 matrix")
        self.body_q.append(_transform_tuple(xform))
        self.body_qd.append((0.0,) * 6)
        self.body_com.append((0.0, 0.0, 0.0) if com is None else tuple(float(c) for c in np.reshape(com, 3)))
        self.body_inertia.append(tuple(inertia_m.reshape(-1)))
        self.body_mass.append(float(mass))
        self.body_lock_inertia.append(bool(lock_inertia))
        self.body_kinematic.append(bool(is_kinematic))
        self.body_world.append(self.current_world)
        self.body_label.append(label or f"body_{len(self.body_q) - 1}")
        return len(self.body_q) - 1

    def add_body(self, *, xform: Any = None, com: Any = None, inertia: Any = None, mass: float = 0.0,
                 label: str | None = None, lock_inertia: bool = False, is_kinematic: bool = False,
                 **_: Any) -> int:
        """Add a free-floating rigid body: a link with a free joint to the world, as its own articulation.
        Returns the body's index."""
        body = self.add_link(xform=xform, com=com, inertia=inertia, mass=mass, label=label,
                             lock_inertia=lock_inertia, is_kinematic=is_kinematic)
        joint = self.add_joint_free(body, label=f"{label}_free_joint" if label else None)
        self.add_articulation([joint], label=f"{label}_articulation" if label else None)
        return body

    def _add_body_mass(self, body: int, mass: float, com: np.ndarray, inertia: np.ndarray) -> None:
        """Merge a part of ``mass`` [kg] centered at ``com`` (body frame) with ``inertia`` about its own
        center into ``body`` (parallel-axis theorem)."""
        if self.body_lock_inertia[body] or mass <= 0.0:
            return
        m0 = self.body_mass[body]
        c0 = np.asarray(self.body_com[body])
        i0 = np.asarray(self.body_inertia[body]).reshape(3, 3)
        m = m0 + mass
        c = (m0 * c0 + mass * com) / m

        def shifted(i: np.ndarray, mm: float, d: np.ndarray) -> np.ndarray:
            return i + mm * (np.dot(d, d) * np.eye(3) - np.outer(d, d))

        self.body_mass[body] = m
        self.body_com[body] = tuple(c)
        self.body_inertia[body] = tuple((shifted(i0, m0, c0 - c) + shifted(inertia, mass, com - c)).reshape(-1))

    # --- joints -------------------------------------------------------------------------------
    def _check_body(self, what: str, name: str, body: int, allow_world: bool) -> None:
        lo = -1 if allow_world else 0
        if not lo <= body < len(self.body_q):
            raise IndexError(f"{what}: {name} body {body} out of range [{lo}, {len(self.body_q)})")

    def add_joint(self, joint_type: JointType, parent: int, child: int, *,
                  linear_axes: Sequence[JointDofConfig] | None = None,
                  angular_axes: Sequence[JointDofConfig] | None = None, label: str | None = None,
                  parent_xform: Any = None, child_xform: Any = None, collision_filter_parent: bool | None = None,
                  enabled: bool = True, **_: Any) -> int:
        """Add a joint of ``joint_type`` from ``parent`` (-1: the world) to ``child``, whose frames are
        ``parent_xform`` and ``child_xform`` in the two bodies; dofs along ``linear_axes`` then
        ``angular_axes``. A body has at most one joint to its parent. Returns the joint's index."""
        what = f"add_joint({JointType(joint_type).name}{f', {label!r}' if label else ''})"
        self._check_body(what, "parent", parent, True)
        self._check_body(what, "child", child, False)
        if parent == child:
            raise ValueError(f"{what}: parent and child are the same body {child}")
        if child in self.joint_child:
            other = self.joint_child.index(child)
            raise ValueError(f"{what}: body {child} already has joint {other} to its parent; a second one would "
                             f"close a loop (articulations are trees)")
        lin = list(linear_axes or [])
        ang = list(angular_axes or [])
        jt = JointType(joint_type)
        if jt == JointType.FREE or (jt == JointType.DISTANCE and (len(lin), len(ang)) != (3, 3)):
            lin = [JointDofConfig.create_unlimited(a) for a in (Axis.X, Axis.Y, Axis.Z)]
            ang = [JointDofConfig.create_unlimited(a) for a in (Axis.X, Axis.Y, Axis.Z)]
        elif jt == JointType.BALL:
            lin = []
            ang = ang if len(ang) == 3 else [JointDofConfig.create_unlimited(a) for a in (Axis.X, Axis.Y, Axis.Z)]
        elif jt == JointType.FIXED:
            lin, ang = [], []
        elif jt == JointType.REVOLUTE and (lin or len(ang) != 1):
            raise ValueError(f"{what}: a revolute joint has exactly one angular axis")
        elif jt == JointType.PRISMATIC and (ang or len(lin) != 1):
            raise ValueError(f"{what}: a prismatic joint has exactly one linear axis")
        elif jt == JointType.D6 and len(lin) > 3 or len(ang) > 3:
            raise ValueError(f"{what}: at most 3 linear and 3 angular axes")
        ncoord, ndof = _FIXED_DIMS.get(jt, (len(lin) + len(ang), len(lin) + len(ang)))
        x_p, x_c = _transform_tuple(parent_xform), _transform_tuple(child_xform)
        self.joint_type.append(int(jt))
        self.joint_parent.append(parent)
        self.joint_child.append(child)
        self.joint_X_p.append(x_p)
        self.joint_X_c.append(x_c)
        self.joint_q_start.append(len(self.joint_q))
        self.joint_qd_start.append(len(self.joint_qd))
        self.joint_dof_dim.append((len(lin), len(ang)))
        self.joint_enabled.append(bool(enabled))
        self.joint_world.append(self.current_world)
        self.joint_label.append(label or f"joint_{len(self.joint_type) - 1}")
        self.joint_articulation.append(-1)
        for dof in lin + ang:
            self.joint_axis.append(dof.axis)
            mode = dof.actuator_mode
            if mode is None:
                mode = JointTargetMode.from_gains(dof.target_ke, dof.target_kd,
                                                  has_drive=dof.target_ke != 0.0 or dof.target_kd != 0.0)
            self.joint_target_mode.append(int(mode))
            for f in self._DOF_FIELDS:
                getattr(self, f"joint_{f}").append(getattr(dof, f))
            self.joint_qd.append(0.0)
            self.joint_f.append(0.0)
            self.joint_act.append(0.0)
        self.joint_target_q.extend(_coordinate_targets(jt, lin, ang))
        if jt in (JointType.FREE, JointType.DISTANCE):
            # The child's current pose, expressed as its joint frame relative to the parent's joint frame.
            rel = wp.transform_multiply(
                wp.transform_multiply(wp.transform_inverse(self._joint_parent_world(parent, x_p)),
                                      wp.transform(*_split(self.body_q[child]))),
                wp.transform(*_split(x_c)))
            self.joint_q.extend(float(v) for v in rel)
        elif jt == JointType.BALL:
            self.joint_q.extend((0.0, 0.0, 0.0, 1.0))
        else:
            self.joint_q.extend([0.0] * ncoord)
        if collision_filter_parent is None:
            collision_filter_parent = parent >= 0
        if collision_filter_parent and parent >= 0:
            self.body_filter_pairs.append((parent, child))
        return len(self.joint_type) - 1

    def _joint_parent_world(self, parent: int, x_p: tuple) -> Any:
        xp = wp.transform(*_split(x_p))
        if parent < 0:
            return xp
        return wp.transform_multiply(wp.transform(*_split(self.body_q[parent])), xp)

    def _single_axis_joint(self, jt: JointType, parent: int, child: int, axis: Any, kw: dict) -> int:
        dof_kw = {k: v for k, v in kw.items() if k in JointDofConfig.__init__.__code__.co_varnames and v is not None}
        if isinstance(axis, JointDofConfig):
            dof = axis
        else:
            # Unset settings come from default_joint_cfg, as in Newton.
            d = self.default_joint_cfg
            defaults = {f: getattr(d, f) for f in ("limit_lower", "limit_upper", "limit_ke", "limit_kd", "target_ke",
                                                   "target_kd", "armature", "effort_limit", "velocity_limit",
                                                   "friction", "damping", "stiffness")}
            dof = JointDofConfig(axis=Axis.X if axis is None else axis, **{**defaults, **dof_kw})
        joint_kw = {k: kw[k] for k in ("parent_xform", "child_xform", "label", "collision_filter_parent", "enabled")
                    if k in kw}
        axes = {"linear_axes": [dof]} if jt == JointType.PRISMATIC else {"angular_axes": [dof]}
        return self.add_joint(jt, parent, child, **axes, **joint_kw)

    def add_joint_revolute(self, parent: int, child: int, *, axis: Any = None, **kw: Any) -> int:
        """Add a hinge about ``axis`` (in the joint frame); keywords as :class:`JointDofConfig` (limits
        [rad], drive ``target_q``/``target_ke``/``target_kd``, ...) and :meth:`add_joint`."""
        return self._single_axis_joint(JointType.REVOLUTE, parent, child, axis, kw)

    def add_joint_prismatic(self, parent: int, child: int, *, axis: Any = None, **kw: Any) -> int:
        """Add a slider along ``axis`` (in the joint frame); keywords as :meth:`add_joint_revolute`, limits
        in [m]."""
        return self._single_axis_joint(JointType.PRISMATIC, parent, child, axis, kw)

    def add_joint_ball(self, parent: int, child: int, **kw: Any) -> int:
        """Add a ball (spherical) joint: three rotational dofs, coordinates a quaternion (xyzw)."""
        return self.add_joint(JointType.BALL, parent, child, **kw)

    def add_joint_fixed(self, parent: int, child: int, **kw: Any) -> int:
        """Weld ``child`` to ``parent`` at the joint frames."""
        return self.add_joint(JointType.FIXED, parent, child, **kw)

    def add_joint_free(self, child: int, *, parent: int = -1, **kw: Any) -> int:
        """Let ``child`` move freely relative to ``parent``: coordinates position then quaternion (xyzw),
        dofs linear then angular velocity."""
        return self.add_joint(JointType.FREE, parent, child, **kw)

    def add_joint_distance(self, parent: int, child: int, *, min_distance: float = -1.0,
                           max_distance: float = 1.0, **kw: Any) -> int:
        """Keep the distance [m] between the joint frames' origins on ``parent`` and ``child`` within
        [``min_distance``, ``max_distance``] (a negative bound: none); otherwise the child moves freely, with
        FREE coordinates. Enforced by SolverXPBD; the other solvers treat it as FREE, as Newton's do. Keywords
        as :meth:`add_joint`."""
        if 0.0 <= max_distance < min_distance:
            raise ValueError(f"add_joint_distance: min_distance {min_distance} > max_distance {max_distance}")
        # The first dof's limits hold the distance bounds, where a negative one means none (so not lower <= upper).
        dist = JointDofConfig.create_unlimited(Axis.X)
        dist.limit_lower, dist.limit_upper = float(min_distance), float(max_distance)
        lin = [dist, *(JointDofConfig.create_unlimited(a) for a in (Axis.Y, Axis.Z))]
        ang = [JointDofConfig.create_unlimited(a) for a in (Axis.X, Axis.Y, Axis.Z)]
        return self.add_joint(JointType.DISTANCE, parent, child, linear_axes=lin, angular_axes=ang, **kw)

    def add_joint_d6(self, parent: int, child: int, linear_axes: Sequence[Any] = (),
                     angular_axes: Sequence[Any] = (), **kw: Any) -> int:
        """Add a joint with up to three linear and three angular dofs, each a :class:`JointDofConfig`."""
        lin = [a if isinstance(a, JointDofConfig) else JointDofConfig(axis=a) for a in linear_axes]
        ang = [a if isinstance(a, JointDofConfig) else JointDofConfig(axis=a) for a in angular_axes]
        return self.add_joint(JointType.D6, parent, child, linear_axes=lin, angular_axes=ang, **kw)

    def add_articulation(self, joints: Sequence[int], label: str | None = None, **_: Any) -> int:
        """Group ``joints`` (consecutive indices, each after the joint of its parent body) into one
        articulation, a tree solved together by reduced-coordinate solvers. Returns its index."""
        joints = list(joints)
        what = f"add_articulation{f'({label!r})' if label else ''}"
        if not joints:
            raise ValueError(f"{what}: no joints")
        if joints != list(range(joints[0], joints[0] + len(joints))):
            raise ValueError(f"{what}: joints must be consecutive indices, got {joints}")
        n = len(self.joint_type)
        for j in joints:
            if not 0 <= j < n:
                raise IndexError(f"{what}: joint {j} out of range [0, {n})")
            if self.joint_articulation[j] >= 0:
                raise ValueError(f"{what}: joint {j} already belongs to articulation {self.joint_articulation[j]}")
        seen_children = set()
        for j in joints:
            parent = self.joint_parent[j]
            if parent >= 0 and parent not in seen_children and parent in (self.joint_child[k] for k in joints):
                raise ValueError(f"{what}: joint {j} comes before the joint of its parent body {parent}; "
                                 f"order joints from the root outwards")
            seen_children.add(self.joint_child[j])
        index = len(self.articulation_start)
        for j in joints:
            self.joint_articulation[j] = index
        self.articulation_start.append(joints[0])
        self.articulation_world.append(self.current_world)
        self.articulation_label.append(label or f"articulation_{index}")
        return index

    def _transform_appended(self, starts: dict[str, int], xform: Any) -> None:
        for b in range(starts["body"], len(self.body_q)):
            moved = wp.transform_multiply(xform, wp.transform(*_split(self.body_q[b])))
            self.body_q[b] = tuple(float(v) for v in moved)
        for j in range(starts["joint"], len(self.joint_type)):
            if self.joint_parent[j] >= 0:
                continue
            jt = self.joint_type[j]
            if jt in (JointType.FREE, JointType.DISTANCE):
                # The pose lives in joint_q: move it, keep the joint frame.
                q0 = self.joint_q_start[j]
                xp = wp.transform(*_split(self.joint_X_p[j]))
                world = wp.transform_multiply(xp, wp.transform(*_split(tuple(self.joint_q[q0:q0 + 7]))))
                moved = wp.transform_multiply(wp.transform_multiply(wp.transform_inverse(xp), xform), world)
                self.joint_q[q0:q0 + 7] = [float(v) for v in moved]
            else:
                x = wp.transform_multiply(xform, wp.transform(*_split(self.joint_X_p[j])))
                self.joint_X_p[j] = tuple(float(v) for v in x)

    def _finalize_domain(self, model: Any, requires_grad: bool) -> None:
        nb = len(self.body_q)
        mass = np.asarray(self.body_mass, dtype=np.float64).reshape(nb)
        inertia = np.asarray(self.body_inertia, dtype=np.float64).reshape(nb, 3, 3)
        incoming = {c: self.joint_type[j] for j, c in enumerate(self.joint_child)}
        for b in range(nb):
            static = self.body_kinematic[b] or incoming.get(b) == JointType.FIXED
            if mass[b] <= 0.0 and not static:
                raise ValueError(f"finalize: body {b} ({self.body_label[b]!r}) has zero mass; give it mass or shapes "
                                 f"with density, mark it is_kinematic, or attach it with a fixed joint")
        inv_mass = np.where(mass > 0.0, 1.0 / np.where(mass > 0.0, mass, 1.0), 0.0)
        inv_inertia = np.zeros_like(inertia)
        for b in range(nb):
            if mass[b] > 0.0 and abs(np.linalg.det(inertia[b])) > 1e-30:
                inv_inertia[b] = np.linalg.inv(inertia[b])
        kin = np.asarray(self.body_kinematic, dtype=bool).reshape(nb)
        inv_mass[kin] = 0.0
        inv_inertia[kin] = 0.0
        f32 = np.float32
        model.body_count = nb
        model.body_q = wp.array(np.asarray(self.body_q, dtype=f32).reshape(nb, 7), dtype=wp.transform,
                                requires_grad=requires_grad)
        model.body_qd = wp.array(np.asarray(self.body_qd, dtype=f32).reshape(nb, 6), dtype=wp.spatial_vector,
                                 requires_grad=requires_grad)
        model.body_com = wp.array(np.asarray(self.body_com, dtype=f32).reshape(nb, 3), dtype=wp.vec3,
                                  requires_grad=requires_grad)
        model.body_mass = wp.array(mass.astype(f32), dtype=wp.float32, requires_grad=requires_grad)
        model.body_inv_mass = wp.array(inv_mass.astype(f32), dtype=wp.float32, requires_grad=requires_grad)
        model.body_inertia = wp.array(inertia.astype(f32), dtype=wp.mat33, requires_grad=requires_grad)
        model.body_inv_inertia = wp.array(inv_inertia.astype(f32), dtype=wp.mat33, requires_grad=requires_grad)
        model.body_world = wp.array(np.asarray(self.body_world, dtype=np.int32).reshape(nb), dtype=wp.int32)
        model.body_label = list(self.body_label)
        model.body_flags = wp.array(kin.astype(np.int32), dtype=wp.int32)

        nj, nd, nq = len(self.joint_type), len(self.joint_qd), len(self.joint_q)
        model.joint_count, model.joint_dof_count, model.joint_coord_count = nj, nd, nq
        i32 = np.int32
        model.joint_type = wp.array(np.asarray(self.joint_type, dtype=i32).reshape(nj), dtype=wp.int32)
        model.joint_parent = wp.array(np.asarray(self.joint_parent, dtype=i32).reshape(nj), dtype=wp.int32)
        model.joint_child = wp.array(np.asarray(self.joint_child, dtype=i32).reshape(nj), dtype=wp.int32)
        model.joint_X_p = wp.array(np.asarray(self.joint_X_p, dtype=f32).reshape(nj, 7), dtype=wp.transform,
                                   requires_grad=requires_grad)
        model.joint_X_c = wp.array(np.asarray(self.joint_X_c, dtype=f32).reshape(nj, 7), dtype=wp.transform,
                                   requires_grad=requires_grad)
        model.joint_q_start = wp.array(np.asarray([*self.joint_q_start, nq], dtype=i32), dtype=wp.int32)
        model.joint_qd_start = wp.array(np.asarray([*self.joint_qd_start, nd], dtype=i32), dtype=wp.int32)
        model.joint_dof_dim = wp.array(np.asarray(self.joint_dof_dim, dtype=i32).reshape(nj, 2), dtype=wp.int32)
        model.joint_enabled = wp.array(np.asarray(self.joint_enabled, dtype=i32).reshape(nj), dtype=wp.int32)
        model.joint_world = wp.array(np.asarray(self.joint_world, dtype=i32).reshape(nj), dtype=wp.int32)
        model.joint_articulation = wp.array(np.asarray(self.joint_articulation, dtype=i32).reshape(nj),
                                            dtype=wp.int32)
        model.joint_label = list(self.joint_label)
        model.joint_axis = wp.array(np.asarray(self.joint_axis, dtype=f32).reshape(nd, 3), dtype=wp.vec3,
                                    requires_grad=requires_grad)
        model.joint_target_mode = wp.array(np.asarray(self.joint_target_mode, dtype=i32).reshape(nd), dtype=wp.int32)
        for name in ("joint_q", "joint_qd", "joint_f", "joint_act", "joint_target_q",
                     *(f"joint_{f}" for f in self._DOF_FIELDS)):
            values = np.asarray(getattr(self, name), dtype=f32)
            setattr(model, name, wp.array(values, dtype=wp.float32, requires_grad=requires_grad))
        na = len(self.articulation_start)
        model.articulation_count = na
        model.articulation_start = wp.array(np.asarray([*self.articulation_start, nj], dtype=i32), dtype=wp.int32)
        model.articulation_world = wp.array(np.asarray(self.articulation_world, dtype=i32).reshape(na),
                                            dtype=wp.int32)
        model.articulation_label = list(self.articulation_label)


def _coordinate_targets(jt: JointType, lin: list[JointDofConfig], ang: list[JointDofConfig]) -> list[float]:
    """A joint's entries of ``joint_target_q``, laid out as its coordinates: per dof, but BALL, FREE and DISTANCE
    joints hold the rotation of their angular targets (angles about x, then y, then z of the joint frame,
    composed as Newton does: q = qx qy qz) as an xyzw quaternion after any linear targets."""
    if jt == JointType.FIXED:
        return []
    if jt not in (JointType.BALL, JointType.FREE, JointType.DISTANCE):
        return [d.target_q for d in lin + ang]
    q = np.array([0.0, 0.0, 0.0, 1.0])
    for k, d in enumerate(ang):
        half = 0.5 * d.target_q
        r = np.zeros(4)
        r[k], r[3] = np.sin(half), np.cos(half)
        # Hamilton product q r (xyzw), appending the rotation about axis k on the right.
        q = np.array([q[3] * r[0] + q[0] * r[3] + q[1] * r[2] - q[2] * r[1],
                      q[3] * r[1] - q[0] * r[2] + q[1] * r[3] + q[2] * r[0],
                      q[3] * r[2] + q[0] * r[1] - q[1] * r[0] + q[2] * r[3],
                      q[3] * r[3] - q[0] * r[0] - q[1] * r[1] - q[2] * r[2]])
    return [d.target_q for d in lin] + [float(v) for v in q]


def _split(t: Sequence[float]) -> tuple[Any, Any]:
    return wp.vec3(t[0], t[1], t[2]), wp.quat(t[3], t[4], t[5], t[6])
