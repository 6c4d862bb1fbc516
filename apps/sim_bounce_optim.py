"""Trajectory optimisation through contact: a ball is thrown so that, after bouncing on the ground (penalty
contact with friction, SolverSemiImplicit), it lands on a target; ``wp.Tape`` differentiates the rollout and
gradient descent on the throw's velocity brings the miss distance down.

    python -m loomwork.apps.sim_bounce_optim [--iterations 16]
"""

from __future__ import annotations

import argparse
import sys

import loomwork as wp
import loomwork.sim as newton


@wp.kernel
def miss_distance(q: wp.array(dtype=wp.vec3), target: wp.vec3, loss: wp.array(dtype=float)):
    d = q[0] - target
    loss[0] = wp.dot(d, d)


@wp.kernel
def descend(v: wp.array(dtype=wp.vec3), grad: wp.array(dtype=wp.vec3), rate: float, max_step: float):
    # Gradient descent with the step length capped: contact makes the loss steep in places.
    i = wp.tid()
    g = grad[i]
    v[i] = v[i] - g * wp.min(rate, max_step / wp.max(wp.length(g), 1.0e-12))


def throw(iterations: int, steps: int = 90) -> list[float]:
    """Optimize a throw's velocity so the ball lands on a target after a bounce; returns the losses."""
    b = newton.ModelBuilder()
    b.add_particle((0.0, 0.0, 0.5), (1.0, 0.0, 0.0), 1.0, radius=0.05)
    b.add_ground_plane(cfg=newton.ModelBuilder.ShapeConfig(ke=1.0e4, kd=5.0, kf=50.0, mu=0.3))
    model = b.finalize(requires_grad=True)
    model.soft_contact_ke, model.soft_contact_kd, model.soft_contact_kf, model.soft_contact_mu = 1.0e4, 5.0, 50.0, 0.3
    solver = newton.solvers.SolverSemiImplicit(model)
    pipeline = newton.CollisionPipeline(model, soft_contact_gap=10.0)
    contacts = pipeline.contacts()
    states = [model.state() for _ in range(steps + 1)]
    pipeline.collide(states[0], contacts)  # the ground does not move: one set of contacts serves the rollout
    target = wp.vec3(2.0, 0.5, 0.3)
    loss = wp.zeros(1, dtype=float, requires_grad=True)
    losses = []
    for _ in range(iterations):
        tape = wp.Tape()
        with tape:
            for t in range(steps):
                states[t].clear_forces()
                solver.step(states[t], states[t + 1], None, contacts, 1.0 / 120.0)
            wp.launch(miss_distance, dim=1, inputs=[states[-1].particle_q, target, loss])
        tape.backward(loss)
        losses.append(float(loss.numpy()[0]))
        v = states[0].particle_qd
        wp.launch(descend, dim=1, inputs=[v, v.grad, 0.2, 0.6])
        tape.zero()
    return losses


def main(argv: list[str] | None = None) -> int:
    """Optimise the throw and print the losses."""
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--iterations", type=int, default=16, help="gradient steps")
    a = p.parse_args(argv)
    if a.iterations < 1:
        p.error("--iterations must be >= 1")
    losses = throw(a.iterations)
    print("squared miss distance [m^2]: " + " -> ".join(f"{x:.4f}" for x in losses))
    return 0


if __name__ == "__main__":
    sys.exit(main())
