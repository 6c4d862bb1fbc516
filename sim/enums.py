"""Closed sets of loomwork.sim, with Newton 1.8's names and values."""

from __future__ import annotations

from enum import IntEnum, IntFlag


class Axis(IntEnum):
    """A coordinate axis; the up axis of a model is one of these."""

    X = 0
    Y = 1
    Z = 2

    @classmethod
    def from_any(cls, value: Axis | int | str) -> Axis:
        """Accept an ``Axis``, an index 0..2 or a letter ``"x"/"y"/"z"`` (any case)."""
        if isinstance(value, str):
            try:
                return cls("XYZ".index(value.upper()))
            except ValueError:
                raise ValueError(f"unknown axis {value!r}: expected 'X', 'Y' or 'Z'") from None
        if isinstance(value, int) and 0 <= int(value) <= 2:
            return cls(int(value))
        raise ValueError(f"unknown axis {value!r}: expected Axis.X/Y/Z, 0..2 or 'X'/'Y'/'Z'")

    def to_vector(self) -> tuple[float, float, float]:
        """The unit vector along this axis."""
        return tuple(1.0 if i == self.value else 0.0 for i in range(3))


class GeoType(IntEnum):
    """Collision shape types (``Model.shape_type``)."""

    NONE = 0
    PLANE = 1
    HFIELD = 2
    SPHERE = 3
    CAPSULE = 4
    ELLIPSOID = 5
    CYLINDER = 6
    BOX = 7
    MESH = 8
    CONE = 9
    CONVEX_MESH = 10
    SDF = 11


class JointType(IntEnum):
    """Joint types (``Model.joint_type``); the number of coordinates and dofs follows from the type."""

    PRISMATIC = 0
    REVOLUTE = 1
    BALL = 2
    FIXED = 3
    FREE = 4
    DISTANCE = 5
    D6 = 6


class JointTargetMode(IntEnum):
    """Which drive inputs a dof's actuator follows (``Model.joint_target_mode``). The solvers here apply the
    PD drive from ``joint_target_ke``/``kd`` whatever the mode; it records what an importer found."""

    NONE = 0
    """No actuator: the dof is passive."""
    POSITION = 1
    """A position servo toward ``joint_target_q``."""
    VELOCITY = 2
    """A velocity servo toward ``joint_target_qd``."""
    POSITION_VELOCITY = 3
    """Servos on both ``joint_target_q`` and ``joint_target_qd``."""
    EFFORT = 4
    """An actuator without gains: its force comes from ``control.joint_f``."""

    @staticmethod
    def from_gains(target_ke: float, target_kd: float, force_position_velocity: bool = False,
                   has_drive: bool = False) -> JointTargetMode:
        """The mode gains imply: NONE without ``has_drive``, else POSITION when ``target_ke`` is nonzero
        (POSITION_VELOCITY with ``force_position_velocity`` and a nonzero ``target_kd``), VELOCITY when only
        ``target_kd`` is, EFFORT when neither is."""
        if not has_drive:
            return JointTargetMode.NONE
        if target_ke != 0.0:
            if force_position_velocity and target_kd != 0.0:
                return JointTargetMode.POSITION_VELOCITY
            return JointTargetMode.POSITION
        if target_kd != 0.0:
            return JointTargetMode.VELOCITY
        return JointTargetMode.EFFORT


class ParticleFlags(IntFlag):
    """Per-particle flags (``Model.particle_flags``); an inactive particle is pinned in place."""

    ACTIVE = 1 << 0


class ShapeFlags(IntFlag):
    """Per-shape flags (``Model.shape_flags``)."""

    VISIBLE = 1 << 0
    COLLIDE_SHAPES = 1 << 1
    COLLIDE_PARTICLES = 1 << 2
    SITE = 1 << 3
