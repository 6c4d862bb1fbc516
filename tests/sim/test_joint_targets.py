"""Drive targets laid out as Newton 1.8 lays them out: ``joint_target_q`` per coordinate (as ``joint_q``; a
BALL joint's target is a quaternion), ``joint_target_qd`` per dof; and XPBD drives whose stiffness does not
depend on the number of sweeps."""

import math

import numpy as np
import pytest

import loomwork as wp
import loomwork.sim as newton

SOLVERS = {"featherstone": (lambda m: newton.solvers.SolverFeatherstone(m, angular_damping=0.0), 1.0 / 500),
           "xpbd": (lambda m: newton.solvers.SolverXPBD(m, iterations=4), 1.0 / 240),
           "semi_implicit": (lambda m: newton.solvers.SolverSemiImplicit(m, angular_damping=0.0), 1.0 / 2000)}


def ball_and_hinge(gravity=-9.81, hinge_target=0.0):
    """A 1 kg link hanging from the world by a BALL joint, and a 0.5 kg link hinged (about y, drive ke 50,
    kd 5) below it; both 1 m long along z."""
    b = newton.ModelBuilder(gravity=gravity)
    inertia = np.diag([0.02, 0.02, 0.005])
    l1 = b.add_link(xform=wp.transform((0.0, 0.0, 1.5), wp.quat_identity()), mass=1.0, inertia=inertia)
    l2 = b.add_link(xform=wp.transform((0.0, 0.0, 1.0), wp.quat_identity()), mass=0.5, inertia=inertia)
    j0 = b.add_joint_ball(-1, l1, parent_xform=wp.transform((0.0, 0.0, 2.0), wp.quat_identity()),
                          child_xform=wp.transform((0.0, 0.0, 0.5), wp.quat_identity()))
    j1 = b.add_joint_revolute(l1, l2, axis=(0.0, 1.0, 0.0), target_ke=50.0, target_kd=5.0, target_q=hinge_target,
                              parent_xform=wp.transform((0.0, 0.0, -0.5), wp.quat_identity()),
                              child_xform=wp.transform((0.0, 0.0, 0.5), wp.quat_identity()))
    b.add_articulation([j0, j1])
    return b


def test_joint_target_q_has_the_coordinates_layout():
    """A ball then a hinge: 5 coordinates, 4 dofs; the ball's slots hold a quaternion (identity by default,
    the rotation of its per-axis targets composed x then y then z, as Newton's builder), the hinge's its angle;
    Control.clear(model) restores the quaternion that a plain clear zeroes."""
    b = ball_and_hinge(hinge_target=0.25)
    assert b.joint_target_q == [0.0, 0.0, 0.0, 1.0, 0.25]
    m = b.finalize()
    assert m.joint_target_q.shape == (m.joint_coord_count,) == (5,)
    assert m.joint_target_qd.shape == (m.joint_dof_count,) == (4,)
    assert m.joint_target_q_start.numpy().tolist() == m.joint_q_start.numpy().tolist() == [0, 4, 5]
    c = m.control()
    c.clear()
    assert not c.joint_target_q.numpy().any()
    c.clear(m)
    np.testing.assert_array_equal(c.joint_target_q.numpy(), [0.0, 0.0, 0.0, 1.0, 0.25])
    cfg = newton.ModelBuilder.JointDofConfig
    b2 = newton.ModelBuilder()
    body = b2.add_link(mass=1.0, inertia=np.eye(3))
    b2.add_joint_ball(-1, body, angular_axes=[cfg(axis=a, target_q=t) for a, t in
                                              (((1, 0, 0), 0.1), ((0, 1, 0), 0.2), ((0, 0, 1), 0.3))])
    # Newton 1.8: ModelBuilder._quat_from_axis_targets(0.1, 0.2, 0.3).
    np.testing.assert_allclose(b2.joint_target_q, [0.064071348, 0.091157549, 0.153439302, 0.981856173], atol=1e-8)


def test_featherstone_follows_newton_on_a_ball_and_driven_hinge_chain():
    """The ball starts turned 0.3 rad about y; the hinge's target 0.7 sits in joint_target_q[4] (after the ball's
    quaternion). joint_q every 100 steps of dt 1/500 as Newton 1.8's SolverFeatherstone (angular_damping 0)
    gives them, from the same program run with `import newton` on the CPU:"""
    newton_q = np.array([[0.0, 0.043301, 0.0, 0.999062, 0.602649],
                         [0.0, -0.026385, 0.0, 0.999652, 0.668865],
                         [0.0, -0.101372, 0.0, 0.994849, 0.672242],
                         [0.0, -0.162486, 0.0, 0.986711, 0.671029]])
    m = ball_and_hinge().finalize()
    q = m.joint_q.numpy()
    q[:4] = [0.0, math.sin(0.15), 0.0, math.cos(0.15)]
    m.joint_q.assign(q)
    s0, s1 = m.state(), m.state()
    newton.eval_fk(m, m.joint_q, m.joint_qd, s0)
    control = m.control()
    target = control.joint_target_q.numpy()
    target[4] = 0.7
    control.joint_target_q.assign(target)
    solver = newton.solvers.SolverFeatherstone(m, angular_damping=0.0)
    got = []
    for n in range(400):
        s0.clear_forces()
        solver.step(s0, s1, control, None, 1.0 / 500)
        s0, s1 = s1, s0
        if (n + 1) % 100 == 0:
            got.append(s0.joint_q.numpy().copy())
    np.testing.assert_allclose(np.asarray(got), newton_q, atol=1e-5)  # 4.5e-7 here: the stored digits


@pytest.mark.parametrize("solver", sorted(SOLVERS))
def test_a_hinge_after_a_ball_reaches_its_coordinate_indexed_target(solver):
    """Without gravity the hinge's drive brings it to joint_target_q[4] = 0.7 (its coordinate, not its dof 3,
    which is the ball's quaternion w) in every solver; the undriven ball only turns in reaction."""
    m = ball_and_hinge(gravity=0.0).finalize()
    newton.eval_fk(m, m.joint_q, m.joint_qd, m)
    control = m.control()
    control.joint_target_q.assign(np.array([0.0, 0.0, 0.0, 1.0, 0.7], np.float32))
    make, dt = SOLVERS[solver]
    step = make(m)
    s0, s1 = m.state(), m.state()
    for _ in range(int(3.0 / dt)):
        s0.clear_forces()
        step.step(s0, s1, control, None, dt)
        s0, s1 = s1, s0
    q = wp.zeros(m.joint_coord_count, dtype=float)
    qd = wp.zeros(m.joint_dof_count, dtype=float)
    newton.eval_ik(m, s0, q, qd)
    assert q.numpy()[4] == pytest.approx(0.7, abs=5e-3)
    assert abs(qd.numpy()[3]) < 1e-2


@pytest.mark.parametrize("iterations", [1, 2, 8, 32])
def test_xpbd_drive_stiffness_does_not_depend_on_the_iterations(iterations):
    """A hinge servo (ke 200, kd 20) holds a 1 kg arm (center of mass 0.2 m out) against gravity at its static
    equilibrium ke (q - 0.5) = m g 0.2 cos q (0.50857 rad) whatever the number of sweeps: the drive's impulse
    accumulates over them (XPBD's compliance 1/ke) and is not relaxed. Before, each sweep pulled toward the
    target afresh, relaxed by 0.4: 0.542, 0.508, 0.500 rad at 2, 8, 32 sweeps."""
    b = newton.ModelBuilder(gravity=-9.81)
    arm = b.add_link(xform=wp.transform((0.0, 0.0, 1.0), wp.quat_identity()), com=(0.2, 0.0, 0.0), mass=1.0,
                     inertia=np.diag([1e-4, 0.4 ** 2 / 12.0, 0.4 ** 2 / 12.0]))
    j = b.add_joint_revolute(-1, arm, axis=(0.0, 1.0, 0.0), target_ke=200.0, target_kd=20.0, target_q=0.5,
                             parent_xform=wp.transform((0.0, 0.0, 1.0), wp.quat_identity()))
    b.add_articulation([j])
    m = b.finalize()
    solver = newton.solvers.SolverXPBD(m, iterations=iterations)
    s0, s1 = m.state(), m.state()
    dt = 1.0 / 240
    for _ in range(int(3.0 / dt)):
        s0.clear_forces()
        solver.step(s0, s1, None, None, dt)
        s0, s1 = s1, s0
    q = wp.zeros(1, dtype=float)
    qd = wp.zeros(1, dtype=float)
    newton.eval_ik(m, s0, q, qd)
    rest = 0.5
    for _ in range(50):  # the equilibrium by fixed-point iteration
        rest = 0.5 + 9.81 * 0.2 * math.cos(rest) / 200.0
    assert q.numpy()[0] == pytest.approx(rest, abs=1e-4)
    assert abs(qd.numpy()[0]) < 1e-3
