"""Different solvers on the same model agree: contacts under Featherstone, joints under SemiImplicit."""

import math

import numpy as np

import loomwork as wp
import loomwork.sim as newton


def settle(model, solver, steps, dt, pipeline=None):
    contacts = pipeline.contacts() if pipeline else None
    s0, s1 = model.state(), model.state()
    for _ in range(steps):
        if pipeline:
            pipeline.collide(s0, contacts)
        s0.clear_forces()
        solver.step(s0, s1, None, contacts, dt)
        s0, s1 = s1, s0
    return s0


def test_a_tumbling_box_comes_to_rest_on_a_face_under_featherstone_as_under_semi_implicit():
    b = newton.ModelBuilder()
    cfg = newton.ModelBuilder.ShapeConfig(ke=1.0e5, kd=1.0e3, mu=0.5)
    body = b.add_body(xform=wp.transform((0.0, 0.0, 0.6), wp.quat_rpy(0.2, 0.1, 0.0)))
    b.add_shape_box(body, hx=0.2, hy=0.2, hz=0.2, cfg=cfg)
    b.add_ground_plane(cfg=cfg)
    m = b.finalize()
    poses = [settle(m, S(m), 1500, 1.0e-3, newton.CollisionPipeline(m)).body_q.numpy()[0]
             for S in (newton.solvers.SolverFeatherstone, newton.solvers.SolverSemiImplicit)]
    np.testing.assert_allclose(poses[0], poses[1], atol=2e-3)
    assert abs(poses[0][2] - 0.2) < 5e-3


def test_revolute_pendulum_under_semi_implicit_swings_with_the_analytic_period():
    length, dt = 1.0, 2.0e-4
    b = newton.ModelBuilder(gravity=-9.81)
    link = b.add_link(xform=wp.transform((0.0, 0.0, -length), wp.quat_identity()), mass=1.0,
                      inertia=np.eye(3) * 0.1)
    joint = b.add_joint_revolute(-1, link, axis=newton.Axis.Y,
                                 child_xform=wp.transform((0.0, 0.0, length), wp.quat_identity()))
    b.add_articulation([joint])
    m = b.finalize()
    q = m.joint_q.numpy()
    q[0] = 0.1
    m.joint_q.assign(q)
    state = m.state()
    newton.eval_fk(m, m.joint_q, m.joint_qd, state)
    m.body_q.assign(state.body_q.numpy())
    solver = newton.solvers.SolverSemiImplicit(m, angular_damping=0.0, joint_attach_ke=1.0e5, joint_attach_kd=1.0e1)
    period = 2.0 * math.pi * math.sqrt((0.1 + length**2) / (9.81 * length))  # a physical pendulum
    s0, s1 = m.state(), m.state()
    xs = []
    for _ in range(int(1.5 * period / dt)):
        s0.clear_forces()
        solver.step(s0, s1, None, None, dt)
        s0, s1 = s1, s0
        xs.append(s0.body_q.numpy()[0][0])
    xs = np.asarray(xs)
    assert xs[0] < -0.09  # a turn of +0.1 rad about +Y swings the bob toward -x
    up = np.flatnonzero((xs[:-1] < 0.0) & (xs[1:] >= 0.0)) * dt
    down = np.flatnonzero((xs[:-1] > 0.0) & (xs[1:] <= 0.0)) * dt
    # It first passes the bottom a quarter period in, and again half a period later.
    assert abs(up[0] - 0.25 * period) < 0.02 * period and abs(down[0] - 0.75 * period) < 0.02 * period, (
        up, down, period)
    assert abs(xs.min() + 0.0998) < 0.005 and abs(xs.max() - 0.0998) < 0.005  # no energy gained or lost
