"""SolverBase: the step interface every solver implements, and the explicit integrators they share."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any

import numpy as np

import loomwork as wp

from ..model import Control, Model, State
from .forces import MAX_NEIGHBORS


@wp.kernel
def integrate_particles_kernel(x: wp.array(dtype=wp.vec3), v: wp.array(dtype=wp.vec3), f: wp.array(dtype=wp.vec3),
                               inv_mass: wp.array(dtype=float), flags: wp.array(dtype=wp.int32),
                               world: wp.array(dtype=wp.int32), gravity: wp.array(dtype=wp.vec3), dt: float,
                               v_max: float, x_out: wp.array(dtype=wp.vec3), v_out: wp.array(dtype=wp.vec3)):
    i = wp.tid()
    x0 = x[i]
    v0 = v[i]
    if (flags[i] & 1) == 0 or inv_mass[i] == 0.0:
        x_out[i] = x0
        v_out[i] = v0
        return
    g = gravity[wp.max(world[i], 0)]
    v1 = v0 + (f[i] * inv_mass[i] + g) * dt
    speed = wp.length(v1)
    if speed > v_max:
        v1 = v1 * (v_max / speed)
    x_out[i] = x0 + v1 * dt
    v_out[i] = v1


@wp.kernel
def integrate_bodies_kernel(q: wp.array(dtype=wp.transform), qd: wp.array(dtype=wp.spatial_vector),
                            f: wp.array(dtype=wp.spatial_vector), com: wp.array(dtype=wp.vec3),
                            inertia: wp.array(dtype=wp.mat33), inv_mass: wp.array(dtype=float),
                            inv_inertia: wp.array(dtype=wp.mat33), world: wp.array(dtype=wp.int32),
                            gravity: wp.array(dtype=wp.vec3), angular_damping: float, dt: float,
                            q_out: wp.array(dtype=wp.transform), qd_out: wp.array(dtype=wp.spatial_vector)):
    i = wp.tid()
    tf = q[i]
    p = wp.transform_get_translation(tf)
    r = wp.transform_get_rotation(tf)
    v0 = wp.spatial_top(qd[i])
    w0 = wp.spatial_bottom(qd[i])
    if inv_mass[i] == 0.0:
        q_out[i] = tf
        qd_out[i] = qd[i]
        return
    x_com = p + wp.quat_rotate(r, com[i])
    v1 = v0 + (wp.spatial_top(f[i]) * inv_mass[i] + gravity[wp.max(world[i], 0)]) * dt
    # Angular update in the body frame, gyroscopic term included.
    wb = wp.quat_rotate_inv(r, w0)
    tb = wp.quat_rotate_inv(r, wp.spatial_bottom(f[i]))
    wb1 = wb + inv_inertia[i] * (tb - wp.cross(wb, inertia[i] * wb)) * dt
    w1 = wp.quat_rotate(r, wb1) * (1.0 - angular_damping * dt)
    r1 = wp.normalize(r + wp.quat(w1, 0.0) * r * (0.5 * dt))
    x_com1 = x_com + v1 * dt
    q_out[i] = wp.transform(x_com1 - wp.quat_rotate(r1, com[i]), r1)
    qd_out[i] = wp.spatial_vector(v1, w1)


class SolverBase(ABC):
    """Base of all solvers: holds the model and advances a state by ``step``."""

    def __init__(self, model: Model, check_finite: bool = False) -> None:
        if not isinstance(model, Model):
            raise TypeError(f"{type(self).__name__}: expected a loomwork.sim.Model, got {type(model).__name__}")
        self.model = model
        self.check_finite = bool(check_finite)
        """After every step, look for NaN/inf in the new state and raise naming the step, array and entry."""
        self.steps_taken = 0
        """Steps this solver has taken."""

    @property
    def device(self) -> Any:
        """Device the model lives on."""
        return self.model.device

    @abstractmethod
    def step(self, state_in: State, state_out: State, control: Control | None, contacts: Any, dt: float) -> None:
        """Advance ``state_in`` by ``dt`` [s] into ``state_out``."""

    def _check_step(self, state_in: State, state_out: State, dt: float) -> None:
        if not (dt > 0.0) or dt != dt:
            raise ValueError(f"{type(self).__name__}.step: dt must be > 0, got {dt}")
        if state_in is state_out:
            raise ValueError(f"{type(self).__name__}.step: state_in and state_out must be different states")

    def _finish_step(self, state_out: State) -> None:
        self.steps_taken += 1
        if not self.check_finite:
            return
        most = self.model.particle_neighbor_overflow
        if most is not None and int(most.numpy()[0]) > 0:
            raise RuntimeError(f"{type(self).__name__}: by step {self.steps_taken} a particle touched "
                               f"{int(most.numpy()[0])} others, more than the {MAX_NEIGHBORS} contacts kept per "
                               f"particle; the extra contacts were dropped (particles overlap: lower dt or raise "
                               f"particle_ke)")
        for name in ("particle_q", "particle_qd", "body_q", "body_qd", "joint_q", "joint_qd"):
            arr = getattr(state_out, name, None)
            if arr is None or not len(arr):
                continue
            values = arr.numpy().reshape(len(arr), -1)
            bad = np.flatnonzero(~np.isfinite(values).all(axis=1))
            if len(bad):
                raise FloatingPointError(f"{type(self).__name__}: step {self.steps_taken} made {name}[{bad[0]}] "
                                         f"non-finite ({values[bad[0]].tolist()}) for {self._owner(name, bad[0])} "
                                         f"({len(bad)} entries in all); lower dt or stiffness, or check the inputs")

    def _owner(self, name: str, index: int) -> str:
        """The particle, body or joint (with its label) entry ``index`` of state array ``name`` belongs to."""
        m = self.model
        if name.startswith("particle"):
            return f"particle {index}"
        if name.startswith("body"):
            return f"body {index} ({m.body_label[index]!r})"
        starts = (m.joint_q_start if name == "joint_q" else m.joint_qd_start).numpy()
        j = int(np.searchsorted(starts, index, side="right") - 1)
        return f"joint {j} ({m.joint_label[j]!r})"

    def integrate_particles(self, model: Model, state_in: State, state_out: State, dt: float) -> None:
        """Symplectic Euler for particles: gravity plus ``state_in.particle_f``, speed clamped."""
        if model.particle_count == 0:
            return
        wp.launch(integrate_particles_kernel, dim=model.particle_count,
                  inputs=[state_in.particle_q, state_in.particle_qd, state_in.particle_f, model.particle_inv_mass,
                          model.particle_flags, model.particle_world, model.gravity, dt,
                          model.particle_max_velocity],
                  outputs=[state_out.particle_q, state_out.particle_qd], device=model.device)

    def integrate_bodies(self, model: Model, state_in: State, state_out: State, dt: float,
                         angular_damping: float = 0.0) -> None:
        """Symplectic Euler for rigid bodies under ``state_in.body_f`` and gravity (gyroscopic torque
        included); bodies with zero inverse mass stay put."""
        if model.body_count == 0:
            return
        wp.launch(integrate_bodies_kernel, dim=model.body_count,
                  inputs=[state_in.body_q, state_in.body_qd, state_in.body_f, model.body_com, model.body_inertia,
                          model.body_inv_mass, model.body_inv_inertia, model.body_world, model.gravity,
                          angular_damping, dt],
                  outputs=[state_out.body_q, state_out.body_qd], device=model.device)
