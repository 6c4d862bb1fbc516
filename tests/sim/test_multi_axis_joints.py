"""Multi-axis joints (D6 with two or three angular axes, BALL) under SolverFeatherstone and SolverSemiImplicit:
Featherstone's Euler-angle dynamics against a BALL joint and a chain of hinges, per-coordinate limits and
drives in both solvers, and a gradient through a drive target."""

import math

import numpy as np
import pytest

import loomwork as wp
import loomwork.sim as newton


def swing_builder(kind, limit=None, gravity=-9.81, **dof):
    """A 1 kg body 0.4 m along +x from a joint at height 2 to the world: a BALL joint, or a D6 joint with the
    angular axes x, y, z (``kind`` 'd6') or y, z ('d6-2'); ``limit`` (lower, upper) [rad] on the y axis, the
    other ``dof`` settings on every axis."""
    b = newton.ModelBuilder(gravity=gravity)
    body = b.add_link(mass=1.0, inertia=wp.mat33(np.diag([0.01, 0.02, 0.02]).astype(np.float32)))
    cfg = newton.ModelBuilder.JointDofConfig
    axes = {"d6-2": [(0.0, 1.0, 0.0), (0.0, 0.0, 1.0)]}.get(kind, [(1.0, 0.0, 0.0), (0.0, 1.0, 0.0), (0.0, 0.0, 1.0)])
    ang = []
    for ax in axes:
        lo, hi = limit if (limit is not None and ax[1] == 1.0) else (-1.0e6, 1.0e6)
        ang.append(cfg(axis=ax, limit_lower=lo, limit_upper=hi, **dof))
    kw = {"parent_xform": wp.transform((0.0, 0.0, 2.0), wp.quat_identity()),
          "child_xform": wp.transform((-0.4, 0.0, 0.0), wp.quat_identity()), "angular_axes": ang}
    j = b.add_joint_ball(-1, body, **kw) if kind == "ball" else b.add_joint_d6(-1, body, **kw)
    b.add_articulation([j])
    return b


SOLVERS = {"featherstone": (lambda m: newton.solvers.SolverFeatherstone(m, angular_damping=0.0), 1.0 / 480),
           "semi_implicit": (lambda m: newton.solvers.SolverSemiImplicit(m, angular_damping=0.0), 1.0 / 4000)}


def simulate(m, solver, steps, dt, control=None):
    s0, s1 = m.state(), m.state()
    newton.eval_fk(m, s0.joint_q, s0.joint_qd, s0)
    for _ in range(steps):
        s0.clear_forces()
        solver.step(s0, s1, control, None, dt)
        s0, s1 = s1, s0
    return s0


def coordinates(m, state):
    """Joint coordinates and velocities from the bodies (a BALL joint's: its rotation vector)."""
    q = wp.zeros(m.joint_coord_count, dtype=float)
    qd = wp.zeros(m.joint_dof_count, dtype=float)
    newton.eval_ik(m, state, q, qd)
    q, qd = q.numpy(), qd.numpy()
    if m.joint_type.numpy()[0] == newton.JointType.BALL:
        from scipy.spatial.transform import Rotation

        q = Rotation.from_quat(q).as_rotvec()
    return q, qd


def test_featherstone_d6_with_three_angular_axes_moves_as_a_ball_joint():
    """From the same tilted, spinning start, a body on a three-axis D6 joint (Euler angle coordinates) and on a
    BALL joint (quaternion) trace the same motion under gravity."""
    ball = swing_builder("ball").finalize()
    d6 = swing_builder("d6").finalize()
    from scipy.spatial.transform import Rotation

    ball.joint_q.assign(Rotation.from_rotvec([0.3, -0.5, 0.4]).as_quat().astype(np.float32))
    ball.joint_qd.assign(np.array([1.5, 0.8, -2.0], np.float32))
    newton.eval_fk(ball, ball.joint_q, ball.joint_qd, ball)
    newton.eval_ik(d6, ball, d6.joint_q, d6.joint_qd)
    assert np.abs(d6.joint_qd.numpy()).min() > 0.05  # every Euler rate moves
    dt = 1.0 / 2000
    solve = SOLVERS["featherstone"][0]
    a = simulate(ball, solve(ball), 1000, dt).body_q.numpy()[0]
    b = simulate(d6, solve(d6), 1000, dt).body_q.numpy()[0]
    assert np.linalg.norm(a[:3] - (0.0, 0.0, 2.0)) > 0.1  # it moved
    np.testing.assert_allclose(b[:3], a[:3], atol=2e-3)
    assert abs(np.dot(a[3:], b[3:])) > 1.0 - 1e-5


def test_featherstone_d6_with_two_angular_axes_moves_as_two_hinges():
    """A two-axis D6 joint (y, then z turned by it) moves as a hinge about y carrying a nearly massless link
    with a hinge about z."""
    d6 = swing_builder("d6-2").finalize()
    b = newton.ModelBuilder()
    mid = b.add_link(mass=1e-6, inertia=wp.mat33(np.eye(3, dtype=np.float32) * 1e-9))
    body = b.add_link(mass=1.0, inertia=wp.mat33(np.diag([0.01, 0.02, 0.02]).astype(np.float32)))
    j0 = b.add_joint_revolute(-1, mid, axis=(0.0, 1.0, 0.0),
                              parent_xform=wp.transform((0.0, 0.0, 2.0), wp.quat_identity()))
    j1 = b.add_joint_revolute(mid, body, axis=(0.0, 0.0, 1.0),
                              child_xform=wp.transform((-0.4, 0.0, 0.0), wp.quat_identity()))
    b.add_articulation([j0, j1])
    chain = b.finalize()
    start = np.array([0.4, -0.7], np.float32)
    rates = np.array([1.0, 2.5], np.float32)
    for m in (d6, chain):
        m.joint_q.assign(start)
        m.joint_qd.assign(rates)
    dt = 1.0 / 2000
    solve = SOLVERS["featherstone"][0]
    a = simulate(d6, solve(d6), 1000, dt)
    c = simulate(chain, solve(chain), 1000, dt)
    np.testing.assert_allclose(a.joint_q.numpy(), c.joint_q.numpy(), atol=2e-3)
    np.testing.assert_allclose(a.body_q.numpy()[0], c.body_q.numpy()[1], atol=2e-3)


@pytest.mark.parametrize("solver", sorted(SOLVERS))
@pytest.mark.parametrize("kind", ["d6", "d6-2", "ball"])
def test_angular_limit_stops_a_swing_near_the_limit_angle(solver, kind):
    """Gravity swings the body about +y; the penalty limit (ke 1e4, kd 10) on the y coordinate at 0.3 rad
    stops it there (BALL: the rotation vector's y component), overshooting by at most sqrt(2 E / ke) for the
    energy E the fall gathers (about 0.015 rad)."""
    m = swing_builder(kind, limit=(-0.3, 0.3)).finalize()
    make, dt = SOLVERS[solver]
    s = m.state()
    newton.eval_fk(m, s.joint_q, s.joint_qd, s)
    step = make(m)
    s1 = m.state()
    pitch = []
    steps = int(1.0 / dt)
    for n in range(steps):
        s.clear_forces()
        step.step(s, s1, None, None, dt)
        s, s1 = s1, s
        if n % (steps // 60) == 0 or n == steps - 1:
            q, _ = coordinates(m, s)
            pitch.append(q[0] if kind == "d6-2" else q[1])
    assert max(pitch) < 0.3 + 0.02, max(pitch)
    assert abs(pitch[-1] - 0.3) < 5e-3, pitch[-1]
    x = s.body_q.numpy()[0]
    np.testing.assert_allclose(x[:3], (0.4 * math.cos(0.3), 0.0, 2.0 - 0.4 * math.sin(0.3)), atol=5e-3)


@pytest.mark.parametrize("solver", sorted(SOLVERS))
@pytest.mark.parametrize("kind", ["d6", "d6-2", "ball"])
def test_angular_drive_reaches_its_target(solver, kind):
    """Without gravity, PD drives (ke 40, kd 4) on every angular coordinate bring the joint to
    control.joint_target_q and rest there; a two-axis D6 joint keeps its middle angle at 0."""
    m = swing_builder(kind, gravity=0.0, target_ke=40.0, target_kd=4.0).finalize()
    target = np.array({"d6-2": [0.5, -0.4]}.get(kind, [0.3, -0.4, 0.5]), np.float32)
    control = m.control()
    # A BALL joint's target is a quaternion (its joint_q slots), driven toward as the rotation vector.
    control.joint_target_q.assign(_ball_target(target) if kind == "ball" else target)
    make, dt = SOLVERS[solver]
    s = simulate(m, make(m), int(3.0 / dt), dt, control)
    q, qd = coordinates(m, s)
    np.testing.assert_allclose(q, target, atol=5e-3)
    assert np.abs(qd).max() < 1e-2
    if kind == "d6-2":
        # The body turned by 0.5 about y, then -0.4 about the turned z, and not about the locked middle axis.
        from scipy.spatial.transform import Rotation

        want = Rotation.from_rotvec([0.0, 0.5, 0.0]) * Rotation.from_rotvec([0.0, 0.0, -0.4])
        assert abs(np.dot(want.as_quat(), s.body_q.numpy()[0][3:])) > 1.0 - 1e-5


def _ball_target(rotvec):
    """The xyzw quaternion of rotation vector ``rotvec``: a BALL joint's joint_target_q entries."""
    from scipy.spatial.transform import Rotation

    return Rotation.from_rotvec(rotvec).as_quat().astype(np.float32)


@wp.kernel
def _body_y(q: wp.array(dtype=wp.transform), loss: wp.array(dtype=float)):
    loss[0] = q[0][1]


@pytest.mark.parametrize("solver,kind", [("featherstone", "d6"), ("featherstone", "ball"), ("semi_implicit", "d6")])
def test_gradient_of_an_angular_drive_target_matches_finite_differences(solver, kind):
    """d(final y of the body)/d(drive target of the third angular coordinate) through a Tape agrees with
    central differences (D6: Euler angle about z; BALL: the target quaternion's z component)."""
    m = swing_builder(kind, gravity=0.0, target_ke=40.0, target_kd=2.0).finalize(requires_grad=True)
    newton.eval_fk(m, m.joint_q, m.joint_qd, m)
    solver, dt, steps = (newton.solvers.SolverFeatherstone(m, angular_damping=0.0), 1.0 / 120, 20) \
        if solver == "featherstone" else (newton.solvers.SolverSemiImplicit(m, angular_damping=0.0), 1.0 / 1000, 160)

    # Entry 2 of joint_target_q: a D6 joint's angle about z, a BALL joint's quaternion z component.
    base = _ball_target([0.0, 0.1, 0.4]) if kind == "ball" else np.array([0.0, 0.1, 0.4], dtype=np.float32)

    def loss_of(shift, with_grad):
        control = m.control(requires_grad=True)
        control.joint_target_q.assign(base + np.array([0.0, 0.0, shift] + [0.0] * (len(base) - 3), np.float32))
        states = [m.state() for _ in range(steps + 1)]
        loss = wp.zeros(1, dtype=float, requires_grad=True)
        tape = wp.Tape()
        with tape:
            for t in range(steps):
                states[t].clear_forces()
                solver.step(states[t], states[t + 1], control, None, dt)
            wp.launch(_body_y, dim=1, inputs=[states[-1].body_q], outputs=[loss])
        if with_grad:
            tape.backward(loss)
            return float(control.joint_target_q.grad.numpy()[2])
        return float(loss.numpy()[0])

    g = loss_of(0.0, True)
    fd = (loss_of(1e-3, False) - loss_of(-1e-3, False)) / 2e-3
    assert 0.05 < fd  # the drive turned the arm part of the way toward +y
    assert g == pytest.approx(fd, rel=0.02, abs=1e-3)
