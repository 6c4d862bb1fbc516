"""SolverSemiImplicit: forces (springs, membrane triangles, bending, penalty contacts, joints) then a
symplectic Euler step. Cheap per step, needs small steps for stiff materials; differentiable."""

from __future__ import annotations

from typing import Any

from ...contacts import Contacts
from ...model import Control, Model, State
from ..forces import eval_contact_forces, eval_particle_contact_forces, eval_particle_forces
from ..joints import apply_joint_forces
from ..self_contact import eval_edge_contact_forces, eval_triangle_contact_forces
from ..solver import SolverBase


class SolverSemiImplicit(SolverBase):
    """Explicit (semi-implicit Euler) solver for particles, cloth and rigid bodies in maximal coordinates.
    With ``check_finite`` every step checks the new state and names the first non-finite entry.

    ``angular_damping`` [1/s] damps body spin; ``enable_tri_contact`` pushes particles out of the cloth
    triangles they do not belong to (self-contact, with the particle-particle contact parameters), and
    ``enable_edge_contact`` pushes apart cloth edges that come closer than their particles' mean radius (for
    edges that cross with every vertex clear of the other triangles; off by default: a second BVH search
    per step, and Newton's solver has none)."""

    def __init__(self, model: Model, angular_damping: float = 0.05, friction_smoothing: float = 1.0,
                 joint_attach_ke: float = 1.0e4, joint_attach_kd: float = 1.0e2, enable_tri_contact: bool = True,
                 enable_edge_contact: bool = False, check_finite: bool = False, **_: Any) -> None:
        super().__init__(model, check_finite)
        self.angular_damping = float(angular_damping)
        self.joint_attach_ke = float(joint_attach_ke)
        self.joint_attach_kd = float(joint_attach_kd)
        self.enable_tri_contact = bool(enable_tri_contact)
        self.enable_edge_contact = bool(enable_edge_contact)

    def step(self, state_in: State, state_out: State, control: Control | None, contacts: Contacts | None,
             dt: float) -> None:
        """Advance by ``dt`` [s]: forces accumulate into ``state_in.particle_f``/``body_f`` (clear them
        before each step with ``State.clear_forces``), then integrate into ``state_out``."""
        self._check_step(state_in, state_out, dt)
        model = self.model
        particle_f = state_in.particle_f
        body_f = state_in.body_f
        if model.particle_count:
            eval_particle_forces(model, state_in, particle_f)
            eval_particle_contact_forces(model, state_in, particle_f)
            if self.enable_tri_contact and model.tri_count:
                eval_triangle_contact_forces(model, state_in, particle_f)
            if self.enable_edge_contact and model.edge_count:
                eval_edge_contact_forces(model, state_in, particle_f)
        eval_contact_forces(model, state_in, contacts, particle_f, body_f)
        if model.joint_count:
            apply_joint_forces(model, state_in, control, body_f, joint_attach_ke=self.joint_attach_ke,
                               joint_attach_kd=self.joint_attach_kd)
        self.integrate_particles(model, state_in, state_out, dt)
        self.integrate_bodies(model, state_in, state_out, dt, self.angular_damping)
        self._finish_step(state_out)
