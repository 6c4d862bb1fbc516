"""Passive joint damping (``Model.joint_damping``): exponential decay of a spinning hinge and ball and of a
sliding prismatic joint under SolverFeatherstone, SolverSemiImplicit and SolverXPBD; gradients with
respect to the damping."""

import math

import numpy as np
import pytest

import loomwork as wp
import loomwork.sim as newton

SOLVERS = {"featherstone": newton.solvers.SolverFeatherstone,
           "semi_implicit": lambda m: newton.solvers.SolverSemiImplicit(m, angular_damping=0.0),
           "xpbd": lambda m: newton.solvers.SolverXPBD(m, iterations=4)}
MASS, I_ZZ, V0, RATE = 1.0, 0.05, 4.0, 0.4  # [kg], about the hinge [kg m^2], initial speed, damping / inertia [1/s]


def moving_joint(kind, rate, requires_grad=False):
    """A body moving at V0 on a REVOLUTE or BALL joint (spinning about the vertical axis through its center)
    or a PRISMATIC joint (sliding along x) to the world, without gravity, with damping ``rate`` times its
    inertia."""
    b = newton.ModelBuilder(gravity=0.0)
    body = b.add_link(mass=MASS, inertia=wp.mat33(np.diag([0.04, 0.03, I_ZZ]).astype(np.float32)))
    if kind == "revolute":
        j = b.add_joint_revolute(-1, body, axis=(0.0, 0.0, 1.0), damping=rate * I_ZZ)
        b.joint_qd[0] = V0
    elif kind == "prismatic":
        j = b.add_joint_prismatic(-1, body, axis=(1.0, 0.0, 0.0), damping=rate * MASS)
        b.joint_qd[0] = V0
    else:
        j = b.add_joint_ball(-1, body)
        b.joint_damping[0:3] = [rate * I_ZZ] * 3
        b.joint_qd[0:3] = [0.0, 0.0, V0]
    b.add_articulation([j])
    m = b.finalize(requires_grad=requires_grad)
    newton.eval_fk(m, m.joint_q, m.joint_qd, m)
    return m


def speed(kind, qd):
    """The joint's speed and the largest other velocity component in body_qd (linear, angular)."""
    i = 0 if kind == "prismatic" else 5
    return qd[i], np.abs(np.delete(qd, i)).max()


def run(m, solver, steps, dt):
    states = [m.state() for _ in range(steps + 1)]
    for t in range(steps):
        states[t].clear_forces()
        solver.step(states[t], states[t + 1], None, None, dt)
    return states


@pytest.mark.parametrize("solver", SOLVERS)
@pytest.mark.parametrize("kind", ["revolute", "ball", "prismatic"])
def test_damping_slows_a_moving_joint_exponentially(solver, kind):
    """The speed decays as V0 exp(-RATE t), nothing else moves; the undamped joint keeps its speed."""
    dt, steps = 1.0e-3, 500
    m = moving_joint(kind, RATE)
    v, other = speed(kind, run(m, SOLVERS[solver](m), steps, dt)[-1].body_qd.numpy()[0])
    expected = V0 * math.exp(-RATE * steps * dt)
    assert abs(v - expected) < 0.01 * V0, (v, expected)
    assert other < 1e-3
    m = moving_joint(kind, 0.0)
    v, _ = speed(kind, run(m, SOLVERS[solver](m), 50, dt)[-1].body_qd.numpy()[0])
    assert abs(v - V0) < 1e-3 * V0


@wp.kernel
def _spin(qd: wp.array(dtype=wp.spatial_vector), loss: wp.array(dtype=float)):
    loss[0] = qd[0][5]


@pytest.mark.parametrize("solver", SOLVERS)
def test_gradient_of_the_final_spin_wrt_the_damping_matches_finite_differences(solver):
    """d(final spin)/d(joint_damping) through a Tape matches central differences of the same rollout."""
    dt, steps = 1.0e-3, 40

    def final(c, with_grad):
        m = moving_joint("revolute", 0.0, requires_grad=True)
        m.joint_damping.assign(np.array([c], np.float32))
        solver_ = SOLVERS[solver](m)
        loss = wp.zeros(1, dtype=float, requires_grad=True)
        tape = wp.Tape()
        with tape:
            states = run(m, solver_, steps, dt)
            wp.launch(_spin, dim=1, inputs=[states[-1].body_qd, loss])
        if with_grad:
            tape.backward(loss)
            return float(m.joint_damping.grad.numpy()[0])
        return float(loss.numpy()[0])

    c, h = RATE * I_ZZ, 2.0e-3
    g = final(c, True)
    fd = (final(c + h, False) - final(c - h, False)) / (2.0 * h)
    assert abs(fd - (-V0 * steps * dt / I_ZZ)) < 0.1 * abs(fd)  # the rollout is sensitive to c at all
    assert abs(g - fd) < 0.02 * abs(fd) + 1e-3, (g, fd)
