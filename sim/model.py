"""Model (what does not change during a simulation), State (what a step changes) and Control (what a
controller sets), with Newton 1.8's attribute names, layouts and units."""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

import loomwork as wp


def _clone(arr: Any, requires_grad: bool) -> Any:
    if arr is None:
        return None
    return wp.clone(arr, requires_grad=requires_grad)


def _zeros_like(arr: Any, requires_grad: bool) -> Any:
    if arr is None:
        return None
    return wp.zeros_like(arr, requires_grad=requires_grad)


class State:
    """The time-varying part of a simulation, one per step (create it with :meth:`Model.state`)."""

    def __init__(self) -> None:
        self.particle_q: wp.array | None = None
        """Particle positions [m], shape (particle_count,), dtype vec3."""
        self.particle_qd: wp.array | None = None
        """Particle velocities [m/s], shape (particle_count,), dtype vec3."""
        self.particle_f: wp.array | None = None
        """Forces on particles [N], shape (particle_count,), dtype vec3 (cleared by :meth:`clear_forces`)."""
        self.body_q: wp.array | None = None
        """Body frames in world space [m, unit quaternion xyzw], shape (body_count,), dtype transform."""
        self.body_qd: wp.array | None = None
        """Body velocities, shape (body_count,), dtype spatial_vector: linear velocity of the center of mass
        [m/s] then angular velocity [rad/s], both in world frame."""
        self.body_f: wp.array | None = None
        """External wrenches on bodies, shape (body_count,), dtype spatial_vector: force [N] at the center of
        mass then torque [N m], both in world frame."""
        self.joint_q: wp.array | None = None
        """Generalized joint coordinates [m or rad], shape (joint_coord_count,), dtype float32."""
        self.joint_qd: wp.array | None = None
        """Generalized joint velocities [m/s or rad/s], shape (joint_dof_count,), dtype float32."""

    @property
    def requires_grad(self) -> bool:
        """Whether this state's arrays record gradients."""
        for arr in (self.particle_q, self.body_q):
            if arr is not None:
                return bool(arr.requires_grad)
        return False

    @property
    def particle_count(self) -> int:
        """Number of particles."""
        return 0 if self.particle_q is None else len(self.particle_q)

    @property
    def body_count(self) -> int:
        """Number of rigid bodies."""
        return 0 if self.body_q is None else len(self.body_q)

    def clear_forces(self) -> None:
        """Zero ``particle_f`` and ``body_f`` (call before each step that accumulates forces into them)."""
        for arr in (self.particle_f, self.body_f):
            if arr is not None and len(arr):
                arr.zero_()

    def assign(self, other: State) -> None:
        """Copy every array of ``other`` into this state's arrays (shapes must match)."""
        for name, arr in vars(self).items():
            src = getattr(other, name, None)
            if isinstance(arr, wp.array) and isinstance(src, wp.array):
                if arr.shape != src.shape:
                    raise ValueError(f"State.assign: {name} has shape {src.shape}, expected {arr.shape}")
                wp.copy(arr, src)


class Control:
    """Inputs of a step set by a controller or policy (create it with :meth:`Model.control`)."""

    def __init__(self) -> None:
        self.joint_f: wp.array | None = None
        """Generalized joint forces [N or N m], shape (joint_dof_count,), dtype float32."""
        self.joint_target_q: wp.array | None = None
        """Joint position targets of the drives [m or rad; BALL and FREE rotations as xyzw quaternions], laid out
        as ``State.joint_q``: shape (joint_coord_count,), dtype float32, indexed by ``Model.joint_target_q_start``."""
        self.joint_target_qd: wp.array | None = None
        """Joint velocity targets of the drives [m/s or rad/s], shape (joint_dof_count,), dtype float32."""
        self.joint_act: wp.array | None = None
        """Feed-forward actuation per dof [N or N m], shape (joint_dof_count,), dtype float32."""
        self.tri_activations: wp.array | None = None
        """Triangle activations (muscle-like area change), shape (tri_count,), dtype float32."""

    def clear(self, model: Model | None = None) -> None:
        """Zero every control input; with ``model``, ``joint_target_q`` takes the model's targets instead (zeros
        are no rotation for the quaternion slots of BALL and FREE joints)."""
        for name, arr in vars(self).items():
            if not isinstance(arr, wp.array) or not len(arr):
                continue
            if name == "joint_target_q" and model is not None and model.joint_target_q is not None:
                wp.copy(arr, model.joint_target_q)
            else:
                arr.zero_()


class Model:
    """Everything about a simulated system that stays fixed while it runs: particles, springs, cloth,
    bodies, shapes, joints and materials, for one or many worlds. Built by ``ModelBuilder.finalize``."""

    def __init__(self, device: Any = None) -> None:
        self.device = wp.get_device(device)
        self.requires_grad: bool = False
        """Whether states made by :meth:`state` record gradients."""
        self.world_count: int = 1
        """Number of worlds; entities of different worlds never interact."""
        self.up_axis: int = 2
        """Index of the up axis (0, 1, 2 for X, Y, Z)."""
        self.gravity: wp.array | None = None
        """Gravity [m/s^2] per world, shape (world_count,), dtype vec3."""
        self.particle_count = self.body_count = self.shape_count = self.joint_count = 0
        self.tri_count = self.edge_count = self.spring_count = self.articulation_count = 0
        self.joint_dof_count = self.joint_coord_count = 0
        self.soft_contact_ke: float = 1.0e3
        """Stiffness of particle-shape contacts [N/m]."""
        self.soft_contact_kd: float = 10.0
        """Damping of particle-shape contacts [N s/m]."""
        self.soft_contact_kf: float = 1.0e3
        """Friction stiffness of particle-shape contacts [N s/m]."""
        self.soft_contact_mu: float = 0.5
        """Friction coefficient of particle-shape contacts."""
        self.soft_contact_restitution: float = 0.0
        """Restitution of particle-shape contacts (position-based solvers)."""
        self.particle_ke: float = 1.0e3
        """Particle-particle contact stiffness [N/m]."""
        self.particle_kd: float = 1.0e2
        """Particle-particle contact damping [N s/m]."""
        self.particle_kf: float = 1.0e2
        """Particle-particle friction stiffness [N s/m]."""
        self.particle_mu: float = 0.5
        """Particle-particle friction coefficient."""
        self.particle_cohesion: float = 0.0
        """Extra distance [m] within which particles attract (position-based solvers)."""
        self.particle_adhesion: float = 0.0
        """Adhesion between particles and shapes."""
        self.particle_max_velocity: float = 1.0e5
        """Speed [m/s] particles are clamped to by the integrators."""
        self.particle_grid: Any = None
        """HashGrid the solvers rebuild each step for particle-particle contacts; None switches them off."""
        self.particle_max_radius: float = 0.0
        """Largest particle radius [m]."""
        self.particle_neighbor_overflow: wp.array | None = None
        """Most particles one particle touched when that exceeded the contacts kept per particle (0: never),
        shape (1,), int32; made by the first particle-particle contact pass."""
        self.particle_q: wp.array | None = None
        """Initial particle positions [m], shape (particle_count,), vec3."""
        self.particle_qd: wp.array | None = None
        """Initial particle velocities [m/s], shape (particle_count,), vec3."""
        self.particle_mass: wp.array | None = None
        """Particle masses [kg] (0: pinned), shape (particle_count,), float32."""
        self.particle_inv_mass: wp.array | None = None
        """Inverse particle masses [1/kg], shape (particle_count,), float32."""
        self.particle_radius: wp.array | None = None
        """Particle radii [m], shape (particle_count,), float32."""
        self.particle_flags: wp.array | None = None
        """ParticleFlags per particle (ACTIVE: integrated), shape (particle_count,), int32."""
        self.particle_world: wp.array | None = None
        """World of each particle (-1: all worlds), shape (particle_count,), int32."""
        self.spring_indices: wp.array | None = None
        """Particle pairs of the springs, flat (i0, j0, i1, j1, ...), shape (2 spring_count,), int32."""
        self.spring_rest_length: wp.array | None = None
        """Spring rest lengths [m], shape (spring_count,), float32."""
        self.spring_stiffness: wp.array | None = None
        """Spring stiffnesses [N/m], shape (spring_count,), float32."""
        self.spring_damping: wp.array | None = None
        """Spring damping [N s/m], shape (spring_count,), float32."""
        self.tri_indices: wp.array | None = None
        """Particle triples of the membrane triangles, shape (tri_count, 3), int32."""
        self.tri_poses: wp.array | None = None
        """Inverse rest-shape matrices of the triangles in their plane [1/m], shape (tri_count,), mat22."""
        self.tri_areas: wp.array | None = None
        """Rest areas [m^2], shape (tri_count,), float32."""
        self.tri_materials: wp.array | None = None
        """Per triangle (tri_ke [N/m], tri_ka [N/m], tri_kd [N s/m], drag, lift), shape (tri_count, 5)."""
        self.edge_indices: wp.array | None = None
        """Bending edges (opposite vertex 0, opposite vertex 1, edge start, edge end; -1 on a border), shape
        (edge_count, 4), int32."""
        self.edge_rest_angle: wp.array | None = None
        """Rest dihedral angles [rad], shape (edge_count,), float32."""
        self.edge_bending_properties: wp.array | None = None
        """Per edge (edge_ke [N m/rad], edge_kd [N m s/rad]), shape (edge_count, 2)."""
        self.body_q: wp.array | None = None
        """Initial body frames [m, quaternion xyzw], shape (body_count,), transform."""
        self.body_qd: wp.array | None = None
        """Initial body velocities (COM linear [m/s], angular [rad/s], world frame), shape (body_count,),
        spatial_vector."""
        self.body_com: wp.array | None = None
        """Centers of mass in the body frames [m], shape (body_count,), vec3."""
        self.body_mass: wp.array | None = None
        """Body masses [kg], shape (body_count,), float32."""
        self.body_inv_mass: wp.array | None = None
        """Inverse body masses [1/kg] (0: static or kinematic), shape (body_count,), float32."""
        self.body_inertia: wp.array | None = None
        """Inertia tensors about the COM in the body frame [kg m^2], shape (body_count,), mat33."""
        self.body_inv_inertia: wp.array | None = None
        """Their inverses [1/(kg m^2)], shape (body_count,), mat33."""
        self.body_world: wp.array | None = None
        """World of each body (-1: all worlds), shape (body_count,), int32."""
        self.shape_transform: wp.array | None = None
        """Shape frames in their body's frame (world frame for body -1) [m, xyzw], shape (shape_count,),
        transform."""
        self.shape_body: wp.array | None = None
        """Body of each shape (-1: static, in the world), shape (shape_count,), int32."""
        self.shape_type: wp.array | None = None
        """GeoType of each shape, shape (shape_count,), int32."""
        self.shape_scale: wp.array | None = None
        """Shape dimensions [m]: sphere (r), box (hx, hy, hz), capsule/cylinder (r, half height), plane (width,
        length; 0 infinite), mesh/SDF scale factors; shape (shape_count,), vec3."""
        self.shape_source_ptr: wp.array | None = None
        """wp.Mesh / wp.Volume ids of mesh and SDF shapes (0 otherwise), shape (shape_count,), uint64."""
        self.shape_material_ke: wp.array | None = None
        """Contact stiffness [N/m], shape (shape_count,), float32 (kd [N s/m], kf, ka, mu and restitution in the
        sibling shape_material_* arrays)."""
        self.joint_type: wp.array | None = None
        """JointType of each joint, shape (joint_count,), int32."""
        self.joint_parent: wp.array | None = None
        """Parent body of each joint (-1: the world), shape (joint_count,), int32."""
        self.joint_child: wp.array | None = None
        """Child body of each joint, shape (joint_count,), int32."""
        self.joint_X_p: wp.array | None = None
        """Joint frame in the parent body's frame [m, xyzw], shape (joint_count,), transform."""
        self.joint_X_c: wp.array | None = None
        """Joint frame in the child body's frame [m, xyzw], shape (joint_count,), transform."""
        self.joint_q: wp.array | None = None
        """Initial joint coordinates [m or rad; FREE: position then quaternion xyzw], shape (joint_coord_count,),
        float32."""
        self.joint_qd: wp.array | None = None
        """Initial joint velocities [m/s or rad/s], shape (joint_dof_count,), float32."""
        self.joint_axis: wp.array | None = None
        """Axis of each dof in the joint frame, shape (joint_dof_count,), vec3."""
        self.joint_q_start: wp.array | None = None
        """First coordinate of each joint, shape (joint_count + 1,), int32."""
        self.joint_qd_start: wp.array | None = None
        """First dof of each joint, shape (joint_count + 1,), int32."""
        self.joint_target_q: wp.array | None = None
        """Default drive position targets of ``Control.joint_target_q`` [m or rad; BALL and FREE rotations as xyzw
        quaternions], laid out as ``joint_q``: shape (joint_coord_count,), float32."""
        self.joint_target_qd: wp.array | None = None
        """Default drive velocity targets [m/s or rad/s], shape (joint_dof_count,), float32."""
        self.joint_target_ke: wp.array | None = None
        """Drive stiffness per dof [N/m or N m/rad], shape (joint_dof_count,), float32."""
        self.joint_target_kd: wp.array | None = None
        """Drive damping per dof [N s/m or N m s/rad], shape (joint_dof_count,), float32."""
        self.joint_target_mode: wp.array | None = None
        """JointTargetMode per dof (what its actuator follows), shape (joint_dof_count,), int32."""
        self.joint_effort_limit: wp.array | None = None
        """Largest force or torque an actuator may exert per dof [N or N m], shape (joint_dof_count,), float32
        (recorded from importers; the solvers here do not clamp drives to it, as Newton's do not)."""
        self.joint_limit_lower: wp.array | None = None
        """Lower limit per dof [m or rad], shape (joint_dof_count,), float32."""
        self.joint_limit_upper: wp.array | None = None
        """Upper limit per dof [m or rad], shape (joint_dof_count,), float32."""
        self.joint_damping: wp.array | None = None
        """Passive damping per dof [N s/m or N m s/rad], always active (force -damping qd), shape
        (joint_dof_count,), float32."""
        self.articulation_start: wp.array | None = None
        """First joint of each articulation, shape (articulation_count + 1,), int32."""
        self.rigid_contact_max: int | None = None
        """Rigid contact capacity a ``CollisionPipeline`` takes when given none (None: its own estimate)."""
        self.soft_contact_max: int | None = None
        """Particle-shape contact capacity a ``CollisionPipeline`` takes when given none (None: its own)."""
        self._shape_contact_pairs: wp.array | None = None
        self._shape_contact_pairs_made = False

    @property
    def joint_target_q_start(self) -> wp.array | None:
        """First entry of each joint in ``joint_target_q``, shape (joint_count + 1,): ``joint_q_start``, as the
        targets share the coordinates' layout."""
        return self.joint_q_start

    def state(self, requires_grad: bool | None = None) -> State:
        """A new State holding copies of the model's initial positions and velocities."""
        grad = self.requires_grad if requires_grad is None else requires_grad
        s = State()
        s.particle_q = _clone(self.particle_q, grad)
        s.particle_qd = _clone(self.particle_qd, grad)
        s.particle_f = _zeros_like(self.particle_q, grad)
        s.body_q = _clone(self.body_q, grad)
        s.body_qd = _clone(self.body_qd, grad)
        s.body_f = _zeros_like(self.body_qd, grad)
        s.joint_q = _clone(self.joint_q, grad)
        s.joint_qd = _clone(self.joint_qd, grad)
        return s

    def control(self, requires_grad: bool | None = None, clone_variables: bool = True) -> Control:
        """A new Control; with ``clone_variables`` its arrays are copies of the model's defaults, else the
        model's own arrays."""
        grad = self.requires_grad if requires_grad is None else requires_grad
        c = Control()
        take = (lambda a: _clone(a, grad)) if clone_variables else (lambda a: a)
        c.joint_f = take(self.joint_f)
        c.joint_target_q = take(self.joint_target_q)
        c.joint_target_qd = take(self.joint_target_qd)
        c.joint_act = take(self.joint_act)
        c.tri_activations = take(self.tri_activations)
        return c

    @property
    def shape_contact_pairs(self) -> wp.array | None:
        """Pairs of shapes that may collide (the explicit broad phase's list), shape (shape_contact_pair_count,),
        dtype vec2i: every pair of a world, or with a shared shape, on two bodies not both static, in groups
        that meet and not filtered. Made on first access; assign an array to change the pairs (None: none)."""
        if not self._shape_contact_pairs_made:
            from .collide import shape_pairs  # collide imports this module

            pairs = shape_pairs(self)
            self._shape_contact_pairs = wp.array(pairs, dtype=wp.vec2i, device=self.device) if len(pairs) else None
            self._shape_contact_pairs_made = True
        return self._shape_contact_pairs

    @shape_contact_pairs.setter
    def shape_contact_pairs(self, pairs: wp.array | None) -> None:
        self._shape_contact_pairs = pairs
        self._shape_contact_pairs_made = True

    @property
    def shape_contact_pair_count(self) -> int:
        """Number of pairs in ``shape_contact_pairs``."""
        pairs = self.shape_contact_pairs
        return 0 if pairs is None else len(pairs)

    def contacts(self, collision_pipeline: Any = None) -> Any:
        """Contact buffers from the model's default ``CollisionPipeline`` (made on first use, or the one given).

        Deprecated as in Newton 1.8: make a ``CollisionPipeline`` and call its ``contacts()``."""
        warnings.warn("Model.contacts() is deprecated; create a CollisionPipeline and call pipeline.contacts() "
                      "instead.", DeprecationWarning, stacklevel=2)
        return self._default_pipeline(collision_pipeline).contacts()

    def collide(self, state: State, contacts: Any = None, *, collision_pipeline: Any = None) -> Any:
        """The contacts of ``state`` through the model's default ``CollisionPipeline``, written into ``contacts``
        (new buffers when None) and returned.

        Deprecated as in Newton 1.8: make a ``CollisionPipeline`` and call its ``collide(state, contacts)``."""
        warnings.warn("Model.collide() is deprecated; create a CollisionPipeline and call "
                      "pipeline.collide(state, contacts) instead.", DeprecationWarning, stacklevel=2)
        pipeline = self._default_pipeline(collision_pipeline)
        if contacts is None:
            contacts = pipeline.contacts()
        pipeline.collide(state, contacts)
        return contacts

    def _default_pipeline(self, given: Any) -> Any:
        if given is not None:
            self._collision_pipeline = given
        elif getattr(self, "_collision_pipeline", None) is None:
            from .collide import CollisionPipeline  # collide imports this module

            self._collision_pipeline = CollisionPipeline(self)
        return self._collision_pipeline

    def set_gravity(self, gravity: Any, world: int | None = None) -> None:
        """Set gravity [m/s^2] of every world, or of one world when ``world`` is given."""
        g = np.asarray(gravity, dtype=np.float32)
        if g.shape != (3,):
            raise ValueError(f"set_gravity: expected a 3-vector, got shape {g.shape}")
        current = self.gravity.numpy()
        if world is None:
            current[:] = g
        else:
            if not 0 <= world < self.world_count:
                raise IndexError(f"set_gravity: world {world} out of range [0, {self.world_count})")
            current[world] = g
        self.gravity.assign(current)
