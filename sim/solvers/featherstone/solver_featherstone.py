"""SolverFeatherstone: articulated rigid bodies in joint coordinates (composite-rigid-body algorithm with a
dense Cholesky solve per articulation): per step, three launches with a thread per articulation (bias
terms, solve and integrate, forward kinematics) for every articulation of every world."""

from __future__ import annotations

from typing import Any

import numpy as np

import loomwork as wp

from ...articulation import topology
from ...enums import JointType
from ...model import Control, Model, State
from ..forces import eval_contact_forces
from ..solver import SolverBase
from .kernels import bias_kernel, copy_bodies_kernel, fk_kernel, invert_transforms_kernel, solve_kernel


def _bucket(n: int) -> int:
    """The kernel size for ``n`` joints or dofs: the next power of two, at least 2."""
    size = 2
    while size < n:
        size *= 2
    return size


class SolverFeatherstone(SolverBase):
    """Semi-implicit Euler in generalized coordinates (``State.joint_q``/``joint_qd``) for articulations,
    after Featherstone's composite-rigid-body algorithm: per articulation, the joint-space mass matrix and
    the bias forces (gravity of each body's world, Coriolis, ``State.body_f`` wrenches) give the joint
    accelerations under ``control.joint_f``, the PD drives (``Model.joint_target_ke``/``kd`` toward
    ``control.joint_target_q``/``joint_target_qd``) and the limit penalties (``joint_limit_ke``/``kd``),
    with ``Model.joint_armature`` added to the diagonal, and the passive damping ``Model.joint_damping``
    (torque -damping qd, taken implicitly in the step). ``body_q``/``body_qd`` of the output state follow
    by forward kinematics. Drives and limits act per coordinate on PRISMATIC, REVOLUTE and D6 joints (a D6
    joint with two or three angular axes: its Euler angles, whose rates are its dofs; near gimbal lock, the
    middle angle at +-pi/2, its mass matrix turns singular) and on the rotation vector's components of BALL
    joints (as generalized forces through its covectors, toward the rotation vector of the target quaternion in
    the joint's ``joint_target_q`` entries, which are laid out as ``joint_q``); FREE joints take ``joint_f``
    only and must hang from the world. Differentiable with ``wp.Tape`` when the model was finalized with
    ``requires_grad=True``.

    ``angular_damping`` [1/s] damps the angular velocity of FREE joints (``w *= 1 - angular_damping dt``).
    With ``check_finite`` each step checks its output on the host and raises ``FloatingPointError`` naming
    the step and the first body (or joint) that is not finite."""

    def __init__(self, model: Model, *, angular_damping: float = 0.05, update_mass_matrix_interval: int = 1,
                 check_finite: bool = False, **_: Any) -> None:
        super().__init__(model, check_finite)
        self.angular_damping = float(angular_damping)
        self.update_mass_matrix_interval = int(update_mass_matrix_interval)
        self._setup(model)

    def _setup(self, model: Model) -> None:
        nj = model.joint_count
        self._kernel = None
        if nj == 0 or model.articulation_count == 0:
            self._free_bodies = None
            if model.body_count:
                self._free_bodies = wp.array(np.arange(model.body_count, dtype=np.int32), dtype=wp.int32,
                                             device=model.device)
            return
        topo = topology(model)
        jtype = model.joint_type.numpy()
        parent = model.joint_parent.numpy()
        art = model.joint_articulation.numpy()
        for j in range(nj):
            if jtype[j] in (JointType.FREE, JointType.DISTANCE) and parent[j] >= 0:
                raise ValueError(f"SolverFeatherstone: FREE joint {j} ({model.joint_label[j]!r}) has parent body "
                                 f"{parent[j]}; this solver takes free joints to the world only")
        starts = model.articulation_start.numpy()
        qd_start = model.joint_qd_start.numpy()
        joints_per = np.diff(starts)
        dofs_per = qd_start[starts[1:]] - qd_start[starts[:-1]]
        # Parent joint within the same articulation (global index), or -1.
        pj = np.full(nj, -1, dtype=np.int32)
        for j in range(nj):
            if parent[j] >= 0:
                k = topo.body_joint[parent[j]]
                if k >= 0 and art[k] == art[j] and art[j] >= 0:
                    pj[j] = k
        self._parent_joint = wp.array(pj, dtype=wp.int32, device=model.device)
        nj_max = _bucket(int(joints_per.max()))
        grad = bool(model.requires_grad)
        self._bias_kernel = bias_kernel(nj_max, grad)
        self._kernel = solve_kernel(nj_max, _bucket(max(int(dofs_per.max()), 1)), grad)
        self._fk_kernel = fk_kernel(nj_max, grad)
        self._terms = None if grad else self._bias_terms()
        # Each joint's child frame inverted once (the kernels compose child poses with it every step); on a
        # Tape, once per step so gradients reach model.joint_X_c.
        self._X_c_inv = None if grad else self._invert_child_frames()
        # Bodies no articulated joint moves keep their state.
        moved = np.zeros(model.body_count, dtype=bool)
        moved[model.joint_child.numpy()[art >= 0]] = True
        rest = np.flatnonzero(~moved).astype(np.int32)
        self._free_bodies = wp.array(rest, dtype=wp.int32, device=model.device) if len(rest) else None

    def step(self, state_in: State, state_out: State, control: Control | None, contacts: Any, dt: float) -> None:
        """Advance ``state_in`` by ``dt`` [s] into ``state_out`` (its ``joint_q``, ``joint_qd``, ``body_q``,
        ``body_qd``). Penalty contact wrenches from ``contacts`` (and particle contacts) are added to
        ``state_in.body_f`` first, so clear forces before each step."""
        self._check_step(state_in, state_out, dt)
        model = self.model
        eval_contact_forces(model, state_in, contacts, state_in.particle_f, state_in.body_f)
        self.integrate_particles(model, state_in, state_out, dt)
        if self._kernel is not None:
            src = control if control is not None else model

            def pick(name: str) -> Any:
                arr = getattr(src, name, None)
                return arr if arr is not None else getattr(model, name)

            terms = self._terms if self._terms is not None else self._bias_terms()
            X_c_inv = self._X_c_inv if self._X_c_inv is not None else self._invert_child_frames()
            size = model.articulation_count
            wp.launch(self._bias_kernel, dim=size,
                      inputs=[model.articulation_count, model.articulation_start, model.articulation_world,
                              model.gravity, model.joint_type, model.joint_parent, model.joint_child,
                              self._parent_joint, model.joint_q_start, model.joint_qd_start, model.joint_dof_dim,
                              model.joint_X_p, X_c_inv, model.joint_axis, model.body_com, model.body_mass,
                              model.body_inertia, state_in.joint_q, state_in.joint_qd, state_in.body_q,
                              state_in.body_qd, state_in.body_f],
                      outputs=terms, device=model.device)
            wp.launch(self._kernel, dim=size,
                      inputs=[model.articulation_count, model.articulation_start, model.joint_type,
                              model.joint_child, self._parent_joint, model.joint_q_start, model.joint_qd_start,
                              model.joint_X_c, model.joint_armature, model.joint_damping, model.joint_limit_lower,
                              model.joint_limit_upper, model.joint_limit_ke, model.joint_limit_kd,
                              model.joint_target_ke, model.joint_target_kd, model.body_com, state_in.joint_q,
                              state_in.joint_qd, pick("joint_f"), pick("joint_target_q"), pick("joint_target_qd"),
                              *terms, self.angular_damping, float(dt)],
                      outputs=[state_out.joint_q, state_out.joint_qd], device=model.device)
            wp.launch(self._fk_kernel, dim=size,
                      inputs=[model.articulation_count, model.articulation_start, model.joint_type, model.joint_parent,
                              model.joint_child, self._parent_joint, model.joint_q_start, model.joint_qd_start,
                              model.joint_dof_dim, model.joint_X_p, X_c_inv, model.joint_axis, model.body_com,
                              state_in.body_q, state_in.body_qd, state_out.joint_q, state_out.joint_qd],
                      outputs=[state_out.body_q, state_out.body_qd], device=model.device)
        if self._free_bodies is not None and len(self._free_bodies):
            wp.launch(copy_bodies_kernel, dim=len(self._free_bodies),
                      inputs=[self._free_bodies, state_in.body_q, state_in.body_qd],
                      outputs=[state_out.body_q, state_out.body_qd], device=model.device)
        self._finish_step(state_out)

    def _invert_child_frames(self) -> Any:
        m = self.model
        out = wp.empty_like(m.joint_X_c, requires_grad=bool(m.requires_grad))
        wp.launch(invert_transforms_kernel, dim=m.joint_count, inputs=[m.joint_X_c], outputs=[out], device=m.device)
        return out

    def _bias_terms(self) -> list[Any]:
        """Arrays :func:`bias_kernel` fills for :func:`solve_kernel`: motion subspace columns (per dof) and
        bias wrenches and inertias (per joint). One set serves every step, except on a Tape, where each
        step gets its own so the adjoints find the values of their step."""
        m = self.model
        d = m.device
        grad = bool(m.requires_grad)
        nd, nj = m.joint_dof_count, m.joint_count
        return [wp.empty(nd, dtype=wp.vec3, device=d, requires_grad=grad),
                wp.empty(nd, dtype=wp.vec3, device=d, requires_grad=grad),
                wp.empty(nj, dtype=wp.vec3, device=d, requires_grad=grad),
                wp.empty(nj, dtype=wp.vec3, device=d, requires_grad=grad),
                wp.empty(nj, dtype=float, device=d, requires_grad=grad),
                wp.empty(nj, dtype=wp.vec3, device=d, requires_grad=grad),
                wp.empty(nj, dtype=wp.mat33, device=d, requires_grad=grad)]

