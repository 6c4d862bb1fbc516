"""Cloth throw optimisation: the initial velocity of a cloth sheet is optimised by gradient descent through
a differentiable SolverSemiImplicit rollout (membrane and bending forces) so its center lands on a target.

    python -m loomwork.apps.sim_cloth_throw [--iterations 20]
"""

from __future__ import annotations

import argparse
import sys

import loomwork as wp
import loomwork.sim as newton


@wp.kernel
def center_miss(q: wp.array(dtype=wp.vec3), target: wp.vec3, scale: float, loss: wp.array(dtype=float)):
    wp.atomic_add(loss, 0, wp.dot(q[wp.tid()] - target, q[wp.tid()] - target) * scale)


@wp.kernel
def shared_velocity(v: wp.vec3, qd: wp.array(dtype=wp.vec3)):
    qd[wp.tid()] = v


@wp.kernel
def sum_grad(grad: wp.array(dtype=wp.vec3), out: wp.array(dtype=wp.vec3)):
    wp.atomic_add(out, 0, grad[wp.tid()])


def throw_cloth(iterations: int, steps: int = 120, dt: float = 1.0 / 240.0) -> list[float]:
    """Optimise one launch velocity shared by all particles of an 8x8 sheet; returns the losses (mean squared
    distance of the particles to the target [m^2])."""
    b = newton.ModelBuilder(gravity=-9.81)
    b.add_cloth_grid(pos=(0.0, 0.0, 1.0), rot=wp.quat_identity(), vel=(0.0, 0.0, 0.0), dim_x=8, dim_y=8,
                     cell_x=0.05, cell_y=0.05, mass=0.01, tri_ke=5.0, tri_ka=5.0, tri_kd=0.01, edge_ke=1.0e-3,
                     particle_radius=0.005)
    model = b.finalize(requires_grad=True)
    model.particle_grid = None  # a flat sheet in flight: no contacts, self-contact included
    solver = newton.solvers.SolverSemiImplicit(model, enable_tri_contact=False)
    states = [model.state() for _ in range(steps + 1)]
    target = wp.vec3(1.5, 0.5, 1.0)
    v = [1.0, 0.0, 2.0]
    loss = wp.zeros(1, dtype=float, requires_grad=True)
    total = wp.zeros(1, dtype=wp.vec3)
    losses = []
    n = model.particle_count
    for _ in range(iterations):
        wp.launch(shared_velocity, dim=n, inputs=[wp.vec3(*v)], outputs=[states[0].particle_qd])
        loss.zero_()
        tape = wp.Tape()
        with tape:
            for t in range(steps):
                states[t].clear_forces()
                solver.step(states[t], states[t + 1], None, None, dt)
            wp.launch(center_miss, dim=n, inputs=[states[-1].particle_q, target, 1.0 / n, loss])
        tape.backward(loss)
        losses.append(float(loss.numpy()[0]))
        total.zero_()
        wp.launch(sum_grad, dim=n, inputs=[states[0].particle_qd.grad, total])
        g = total.numpy()[0]
        v = [v[k] - 0.3 * float(g[k]) for k in range(3)]
        tape.zero()
    return losses


def main(argv: list[str] | None = None) -> int:
    """Optimise the throw and print the losses."""
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--iterations", type=int, default=20, help="gradient steps")
    a = p.parse_args(argv)
    if a.iterations < 1:
        p.error("--iterations must be >= 1")
    losses = throw_cloth(a.iterations)
    print("mean squared miss [m^2]: " + " -> ".join(f"{x:.4f}" for x in losses[:: max(len(losses) // 8, 1)]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
