"""ModelBuilder: assembles particles, cloth, bodies, shapes and joints, for one or many worlds, into a
:class:`~loomwork.sim.Model`. One mixin per domain (one file each); this module composes them and holds
what spans domains: worlds, appending one builder to another and finalizing."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

import loomwork as wp

from ..enums import Axis
from ..model import Model
from .bodies import BodyBuilder, JointDofConfig
from .cloth import ClothBuilder
from .importers import ImportBuilder
from .particles import ParticleBuilder
from .shapes import ShapeBuilder, ShapeConfig

__all__ = ["ModelBuilder"]


class ModelBuilder(ParticleBuilder, ClothBuilder, BodyBuilder, ShapeBuilder, ImportBuilder):
    """Collects a scene on the host and turns it into a :class:`Model` with :meth:`finalize`.

    Each domain mixin declares ``_lists``: its per-entity list attributes, mapped to the entity kind their
    values index (offset when one builder is appended to another), or ``None``. Entity kinds are counted by
    ``_COUNTERS``."""

    ShapeConfig = ShapeConfig
    JointDofConfig = JointDofConfig

    _COUNTERS = {"particle": "particle_q", "body": "body_q", "shape": "shape_type", "joint": "joint_type",
                 "joint_q": "joint_q", "joint_qd": "joint_qd", "tri": "tri_indices", "edge": "edge_indices",
                 "spring": "spring_indices", "articulation": "articulation_start"}

    def __init__(self, up_axis: Axis | int | str = Axis.Z, gravity: float | Sequence[float] | None = None):
        self.up_axis = Axis.from_any(up_axis)
        if gravity is None:
            gravity = -9.81
        g = np.asarray(gravity, dtype=np.float64)
        self._gravity = (np.asarray(self.up_axis.to_vector()) * float(g)) if g.ndim == 0 else g.reshape(3)
        self.world_count = 0
        self._current_world = -1
        self._world_gravity: dict[int, np.ndarray] = {}
        for cls in type(self).__mro__:
            init = cls.__dict__.get("_init_domain")
            if init is not None:
                init(self)

    # --- worlds ---------------------------------------------------------------------------------
    @property
    def up_vector(self) -> tuple[float, float, float]:
        """Unit vector of the up axis."""
        return self.up_axis.to_vector()

    @property
    def gravity(self) -> wp.vec3:
        """Gravity [m/s^2] of worlds that do not set their own."""
        return wp.vec3(*self._gravity)

    @gravity.setter
    def gravity(self, value: float | Sequence[float]) -> None:
        g = np.asarray(value, dtype=np.float64)
        self._gravity = (np.asarray(self.up_vector) * float(g)) if g.ndim == 0 else g.reshape(3)

    @property
    def current_world(self) -> int:
        """World that entities added now belong to (-1: global, shared by all worlds)."""
        return self._current_world

    def begin_world(self, label: str | None = None, attributes: dict[str, Any] | None = None,
                    gravity: Sequence[float] | None = None) -> int:
        """Start a new world; entities added until :meth:`end_world` belong to it. Returns its index."""
        if self._current_world != -1:
            raise RuntimeError(f"begin_world: world {self._current_world} is still open; call end_world() first")
        self._current_world = self.world_count
        self.world_count += 1
        if gravity is not None:
            self._world_gravity[self._current_world] = np.asarray(gravity, dtype=np.float64).reshape(3)
        return self._current_world

    def end_world(self) -> None:
        """Close the world opened by :meth:`begin_world`."""
        if self._current_world == -1:
            raise RuntimeError("end_world: no world is open")
        self._current_world = -1

    def add_world(self, builder: ModelBuilder, xform: Any = None, label_prefix: str | None = None) -> int:
        """Append ``builder`` as a new world of its own. Returns the world's index."""
        world = self.begin_world()
        try:
            self.add_builder(builder, xform=xform, label_prefix=label_prefix)
        finally:
            self.end_world()
        return world

    def replicate(self, builder: ModelBuilder, copy_count: int | None = None,
                  spacing: Sequence[float] = (0.0, 0.0, 0.0), *, separate_worlds: bool = True,
                  xforms: Sequence[Any] | None = None, world_count: int | None = None, **_: Any) -> None:
        """Append ``copy_count`` copies of ``builder``, each its own world (so copies never collide) unless
        ``separate_worlds`` is False, laid out on a grid with ``spacing`` [m] or placed by ``xforms``."""
        count = copy_count if copy_count is not None else world_count
        if count is None:
            count = len(xforms) if xforms is not None else 1
        if count < 0:
            raise ValueError(f"replicate: copy_count must be >= 0, got {count}")
        if xforms is not None and len(xforms) != count:
            raise ValueError(f"replicate: {len(xforms)} xforms for {count} copies")
        offsets = _grid_offsets(count, spacing, self.up_axis)
        for i in range(count):
            xform = xforms[i] if xforms is not None else wp.transform(wp.vec3(*offsets[i]), wp.quat_identity())
            if separate_worlds:
                self.add_world(builder, xform=xform)
            else:
                self.add_builder(builder, xform=xform)

    def add_builder(self, builder: ModelBuilder, xform: Any = None, label_prefix: str | None = None) -> None:
        """Append every entity of ``builder`` (indices offset, frames moved by ``xform``) into the current
        world, or keep ``builder``'s worlds when no world is open here and it has some."""
        if builder is self:
            raise ValueError("add_builder: cannot append a builder to itself")
        starts = {kind: len(getattr(self, attr)) for kind, attr in self._COUNTERS.items()}
        world_offset = self.world_count
        keep_worlds = self._current_world == -1 and builder.world_count > 0
        for cls in type(self).__mro__:
            for name, kind in cls.__dict__.get("_lists", {}).items():
                values = getattr(builder, name)
                if kind is None:
                    getattr(self, name).extend(values)
                elif kind == "world":
                    if keep_worlds:
                        getattr(self, name).extend(w + world_offset if w >= 0 else -1 for w in values)
                    else:
                        getattr(self, name).extend([self._current_world] * len(values))
                elif kind == "label":
                    getattr(self, name).extend(f"{label_prefix}/{v}" if (label_prefix and v) else v
                                               for v in values)
                else:
                    getattr(self, name).extend(_offset(v, starts[kind]) for v in values)
        if keep_worlds:
            for w, g in builder._world_gravity.items():
                self._world_gravity[w + world_offset] = g
            self.world_count += builder.world_count
        if xform is not None:
            xform = _as_transform(xform)
            for cls in type(self).__mro__:
                hook = cls.__dict__.get("_transform_appended")
                if hook is not None:
                    hook(self, starts, xform)

    # --- finalize -------------------------------------------------------------------------------
    def finalize(self, device: Any = None, *, requires_grad: bool = False, **_: Any) -> Model:
        """Validate the scene and copy it to ``device`` as a :class:`Model`; with ``requires_grad`` the
        model's and its states' arrays record gradients for ``wp.Tape``."""
        if self._current_world != -1:
            raise RuntimeError(f"finalize: world {self._current_world} is still open; call end_world() first")
        model = Model(device)
        model.requires_grad = bool(requires_grad)
        model.world_count = max(self.world_count, 1)
        model.up_axis = int(self.up_axis)
        model.up_vector = np.asarray(self.up_vector, dtype=np.float32)
        g = np.tile(self._gravity.astype(np.float32), (model.world_count, 1))
        for w, gw in self._world_gravity.items():
            g[w] = gw
        with wp.ScopedDevice(model.device):
            model.gravity = wp.array(g, dtype=wp.vec3)
            for cls in reversed(type(self).__mro__):
                fin = cls.__dict__.get("_finalize_domain")
                if fin is not None:
                    fin(self, model, bool(requires_grad))
        return model


def _offset(value: Any, start: int) -> Any:
    """Offset every non-negative index in ``value`` (an int or a tuple of ints) by ``start``."""
    if start == 0:
        return value
    if isinstance(value, tuple | list):
        return type(value)(v + start if v >= 0 else v for v in value)
    return value + start if value >= 0 else value


def _as_transform(xform: Any) -> Any:
    if isinstance(xform, wp.transform):
        return xform
    v = np.asarray(xform, dtype=np.float32).reshape(-1)
    if v.shape != (7,):
        raise ValueError(f"expected a transform (p, q) of 7 values, got {v.shape[0]}")
    return wp.transform(wp.vec3(*v[:3]), wp.quat(*v[3:]))


def _grid_offsets(count: int, spacing: Sequence[float], up_axis: Axis) -> np.ndarray:
    """Offsets of ``count`` copies on the smallest near-square grid in the axes with nonzero spacing."""
    spacing = np.asarray(spacing, dtype=np.float64)
    axes = [i for i in range(3) if spacing[i] != 0.0]
    out = np.zeros((count, 3))
    if not axes or count == 0:
        return out
    side = int(np.ceil(count ** (1.0 / len(axes))))
    for i in range(count):
        rem = i
        for a in axes:
            out[i, a] = (rem % side) * spacing[a]
            rem //= side
    out -= out.mean(axis=0) * (np.asarray([a != up_axis for a in range(3)]))
    return out
