"""SolverXPBD joints: pendulum period, chain separation, limits, drives, gradient through a drive target."""

import math

import numpy as np
import pytest

import loomwork as wp
import loomwork.sim as newton


def simulate(model, solver, steps, dt, control=None, states=None):
    """Step ``steps`` times from ``model.state()``; every state is kept."""
    states = states or [model.state() for _ in range(steps + 1)]
    for t in range(steps):
        states[t].clear_forces()
        solver.step(states[t], states[t + 1], control, None, dt)
    return states


def finalize(b, requires_grad=False):
    """The model of ``b`` with its bodies posed by its joint coordinates."""
    m = b.finalize(requires_grad=requires_grad)
    newton.eval_fk(m, m.joint_q, m.joint_qd, m)
    return m


def pendulum_builder(length, angle, gravity=-9.81):
    """A box of mass 1 hanging ``length`` below a hinge about y at height 2, swung out by ``angle``."""
    b = newton.ModelBuilder(gravity=gravity)
    body = b.add_link(mass=1.0, inertia=wp.mat33(np.diag([0.02, 0.03, 0.01]).astype(np.float32)))
    j = b.add_joint_revolute(
        -1,
        body,
        axis=(0.0, 1.0, 0.0),
        parent_xform=wp.transform((0.0, 0.0, 2.0), wp.quat_identity()),
        child_xform=wp.transform((0.0, 0.0, length), wp.quat_identity()),
    )
    b.add_articulation([j])
    b.joint_q[0] = angle
    return b


def test_revolute_pendulum_swings_with_the_physical_pendulum_period():
    """Period of a small-amplitude physical pendulum matches 2 pi sqrt((I + m L^2) / (m g L))."""
    L, angle, dt = 0.5, 0.1, 1.0 / 600
    m = finalize(pendulum_builder(L, angle))
    solver = newton.solvers.SolverXPBD(m, iterations=4)
    period = 2.0 * math.pi * math.sqrt((0.03 + L * L) / (9.81 * L))
    states = simulate(m, solver, int(1.6 * period / dt), dt)
    x = np.array([st.body_q.numpy()[0, 0] for st in states])
    crossings = [i + x[i] / (x[i] - x[i + 1]) for i in range(len(x) - 1) if (x[i] > 0.0) != (x[i + 1] > 0.0)]
    assert len(crossings) >= 3, crossings
    measured = (crossings[2] - crossings[0]) * dt
    assert abs(measured - period) / period < 0.02, (measured, period)
    z = np.array([st.body_q.numpy()[0, 2] for st in states])
    r = np.hypot(x, z - 2.0)
    assert np.abs(r - L).max() < 2e-3  # the hinge holds


def test_chain_keeps_its_joints_together():
    """A falling five-link chain (revolute then ball joints) keeps every joint's two frames within 3 mm."""
    b = newton.ModelBuilder()
    parent = -1
    joints = []
    for i in range(5):
        body = b.add_link(mass=0.5, inertia=wp.mat33(np.diag([0.005, 0.005, 0.005]).astype(np.float32)))
        xp = (
            wp.transform((0.0, 0.0, 2.0), wp.quat_identity())
            if parent < 0
            else wp.transform((0.2, 0.0, 0.0), wp.quat_identity())
        )
        xc = wp.transform((-0.2, 0.0, 0.0), wp.quat_identity())
        if i % 2 == 0:
            joints.append(b.add_joint_revolute(parent, body, axis=(0.0, 1.0, 0.0), parent_xform=xp, child_xform=xc))
        else:
            joints.append(b.add_joint_ball(parent, body, parent_xform=xp, child_xform=xc))
        parent = body
    b.add_articulation(joints)
    m = b.finalize()
    newton.eval_fk(m, m.joint_q, m.joint_qd, m)
    dt = 1.0 / 480
    solver = newton.solvers.SolverXPBD(m, iterations=8, joint_linear_relaxation=1.0, joint_angular_relaxation=0.8)
    s0, s1 = m.state(), m.state()
    worst = 0.0
    xp = m.joint_X_p.numpy()
    xc = m.joint_X_c.numpy()
    for t in range(240):
        s0.clear_forces()
        solver.step(s0, s1, None, None, dt)
        s0, s1 = s1, s0
        if t % 20 == 19:
            q = s0.body_q.numpy()
            for k in range(5):
                pa = xp[k, :3] if k == 0 else _point(q[k - 1], xp[k, :3])
                pc = _point(q[k], xc[k, :3])
                worst = max(worst, float(np.linalg.norm(pa - pc)))
    assert worst < 3e-3, worst
    assert s0.body_q.numpy()[4, 2] < 1.5  # it did fall and swing
    assert np.isfinite(s0.body_q.numpy()).all()


def _point(tf, p):
    """World position of body-frame point ``p`` under transform ``tf`` (px py pz qx qy qz qw)."""
    x, y, z, w = tf[3:]
    v = np.array([x, y, z])
    p = np.asarray(p, dtype=float)
    return tf[:3] + p + 2.0 * w * np.cross(v, p) + 2.0 * np.cross(v, np.cross(v, p))


def slider_builder(**kw):
    """A 1 kg body on a vertical slider (prismatic along z) hanging from the world at height 1."""
    b = newton.ModelBuilder(**kw.pop("builder", {}))
    body = b.add_link(mass=1.0, inertia=wp.mat33(np.eye(3, dtype=np.float32) * 0.01))
    j = b.add_joint_prismatic(
        -1, body, axis=(0.0, 0.0, 1.0), parent_xform=wp.transform((0.0, 0.0, 1.0), wp.quat_identity()), **kw
    )
    b.add_articulation([j])
    return b


def test_prismatic_limit_holds_a_falling_slider():
    """A slider falling under gravity stops at its lower limit and stays on its axis."""
    m = finalize(slider_builder(limit_lower=-0.3, limit_upper=0.3))
    solver = newton.solvers.SolverXPBD(m, iterations=4)
    states = simulate(m, solver, 480, 1.0 / 240)
    z = np.array([st.body_q.numpy()[0, 2] for st in states])
    assert z.min() > 1.0 - 0.3 - 5e-3, z.min()
    assert abs(z[-1] - 0.7) < 5e-3
    q = states[-1].body_q.numpy()[0]
    assert np.abs(q[:2]).max() < 1e-4 and abs(abs(q[6]) - 1.0) < 1e-4  # no drift off the axis, no rotation


def test_revolute_drive_reaches_its_target():
    """A PD drive turns a hinge (no gravity) to the target angle of control.joint_target_q."""
    b = pendulum_builder(0.5, 0.0, gravity=0.0)
    b.joint_target_ke[0] = 50.0
    b.joint_target_kd[0] = 5.0
    m = finalize(b)
    control = m.control()
    control.joint_target_q.assign(np.array([0.6], dtype=np.float32))
    solver = newton.solvers.SolverXPBD(m, iterations=4)
    s = simulate(m, solver, 720, 1.0 / 240, control)[-1]
    q = wp.zeros(1, dtype=float)
    qd = wp.zeros(1, dtype=float)
    newton.eval_ik(m, s, q, qd)
    assert abs(float(q.numpy()[0]) - 0.6) < 1e-2, q.numpy()
    assert abs(float(qd.numpy()[0])) < 1e-2


def test_joint_force_pushes_a_slider():
    """control.joint_f along a frictionless slider (no gravity) accelerates it at f / m."""
    b = slider_builder(builder={"gravity": 0.0})
    m = finalize(b)
    control = m.control()
    control.joint_f.assign(np.array([2.0], dtype=np.float32))
    dt, steps = 1.0 / 240, 120
    s = simulate(m, newton.solvers.SolverXPBD(m, iterations=2), steps, dt, control)[-1]
    T = steps * dt
    assert abs(s.body_q.numpy()[0, 2] - (1.0 + 0.5 * 2.0 * T * T)) < 1e-2


@wp.kernel
def _height(q: wp.array(dtype=wp.transform), loss: wp.array(dtype=float)):
    loss[0] = wp.transform_get_translation(q[0])[2]


def test_gradient_of_position_wrt_drive_target_matches_finite_differences():
    """d(final height)/d(joint_target_q) of a driven slider through a Tape agrees with central differences."""
    b = slider_builder(target_ke=200.0, target_kd=5.0, builder={"gravity": 0.0})
    m = finalize(b, requires_grad=True)
    solver = newton.solvers.SolverXPBD(m, iterations=2)
    steps, dt = 12, 1.0 / 120

    def loss_of(target, with_grad):
        control = m.control(requires_grad=True)
        control.joint_target_q.assign(np.array([target], dtype=np.float32))
        states = [m.state() for _ in range(steps + 1)]
        loss = wp.zeros(1, dtype=float, requires_grad=True)
        tape = wp.Tape()
        with tape:
            simulate(m, solver, steps, dt, control, states)
            wp.launch(_height, dim=1, inputs=[states[-1].body_q], outputs=[loss])
        if with_grad:
            tape.backward(loss)
            return float(control.joint_target_q.grad.numpy()[0])
        return float(loss.numpy()[0])

    g = loss_of(0.2, True)
    fd = (loss_of(0.2 + 1e-2, False) - loss_of(0.2 - 1e-2, False)) / 2e-2
    assert 0.05 < fd < 1.0  # the drive moved the slider part of the way
    assert g == pytest.approx(fd, rel=0.03, abs=1e-3)


def test_fixed_joint_holds_a_tilted_body_against_gravity():
    """A body welded to the world at an offset and a tilt stays where the joint puts it."""
    b = newton.ModelBuilder()
    body = b.add_link(mass=2.0, inertia=wp.mat33(np.eye(3, dtype=np.float32) * 0.05))
    tilt = wp.quat_from_axis_angle(wp.vec3(1.0, 0.0, 0.0), 0.4)
    j = b.add_joint_fixed(-1, body, parent_xform=wp.transform((0.0, 0.0, 1.0), tilt),
                          child_xform=wp.transform((0.3, 0.0, 0.0), wp.quat_identity()))
    b.add_articulation([j])
    m = finalize(b)
    start = m.body_q.numpy()[0].copy()
    s = simulate(m, newton.solvers.SolverXPBD(m, iterations=4), 240, 1.0 / 240)[-1]
    q = s.body_q.numpy()[0]
    assert np.abs(q[:3] - start[:3]).max() < 2e-3
    assert abs(abs(np.dot(q[3:], start[3:])) - 1.0) < 1e-4


def test_d6_joint_slides_in_its_plane_only():
    """A D6 joint with linear x and y axes (no angular ones) moves under joint_f in x and holds z and rotation."""
    b = newton.ModelBuilder()
    body = b.add_link(mass=1.0, inertia=wp.mat33(np.eye(3, dtype=np.float32) * 0.01))
    cfg = newton.ModelBuilder.JointDofConfig
    j = b.add_joint_d6(-1, body, linear_axes=[cfg(axis=(1.0, 0.0, 0.0)), cfg(axis=(0.0, 1.0, 0.0))],
                       parent_xform=wp.transform((0.0, 0.0, 1.0), wp.quat_identity()))
    b.add_articulation([j])
    m = finalize(b)
    control = m.control()
    control.joint_f.assign(np.array([1.0, 0.0], dtype=np.float32))
    s = simulate(m, newton.solvers.SolverXPBD(m, iterations=4), 120, 1.0 / 240, control)[-1]
    q = s.body_q.numpy()[0]
    assert abs(q[0] - 0.5 * 1.0 * 0.5 ** 2) < 5e-3  # x = f t^2 / (2 m) after 0.5 s
    assert abs(q[1]) < 1e-4 and abs(q[2] - 1.0) < 2e-3 and abs(abs(q[6]) - 1.0) < 1e-4


def rope_builder(v0=(0.0, 0.0, 0.0), min_distance=-1.0, max_distance=0.5):
    """A ball hanging from the point (0, 0, 2) on a distance joint (a rope of ``max_distance``), started level
    with the anchor at 0.4 m from it, moving at ``v0``."""
    b = newton.ModelBuilder(gravity=-9.81)
    body = b.add_link(xform=wp.transform((0.4, 0.0, 2.0), wp.quat_identity()), mass=1.0,
                      inertia=wp.mat33(np.eye(3, dtype=np.float32) * 0.01))
    b.body_qd[body] = (*v0, 0.0, 0.0, 0.0)
    b.add_joint_distance(-1, body, parent_xform=wp.transform((0.0, 0.0, 2.0), wp.quat_identity()),
                         min_distance=min_distance, max_distance=max_distance)
    return b


def test_distance_joint_is_a_rope_that_goes_taut():
    """The ball falls freely until the rope is taut, then swings on it: never beyond its length."""
    dt = 1.0 / 600
    m = rope_builder().finalize()
    states = simulate(m, newton.solvers.SolverXPBD(m, iterations=4), 300, dt)
    p = np.array([st.body_q.numpy()[0, :3] for st in states])
    r = np.linalg.norm(p - [0.0, 0.0, 2.0], axis=1)
    # Free fall (symplectic Euler) while slack: 0.3 m below the anchor takes sqrt(2 0.3 / g).
    n = int(math.sqrt(2 * 0.3 / 9.81) / dt) - 5
    np.testing.assert_allclose(p[n, 2], 2.0 - 9.81 * dt * dt * n * (n + 1) / 2, atol=1e-3)
    assert r.max() < 0.5 + 2e-3, r.max()
    assert np.abs(r[-100:] - 0.5).max() < 2e-3  # taut, swinging
    assert p[-1, 0] < 0.3  # it swings toward the anchor's vertical


def test_distance_joint_keeps_a_minimum_distance():
    """Thrown at the anchor at 3 m/s, the ball stops at min_distance."""
    m = rope_builder(v0=(-3.0, 0.0, 0.0), min_distance=0.2, max_distance=-1.0).finalize()
    m.gravity.assign(np.zeros((1, 3), np.float32))
    states = simulate(m, newton.solvers.SolverXPBD(m, iterations=4), 200, 1.0 / 600)
    r = np.array([np.linalg.norm(st.body_q.numpy()[0, :3] - [0.0, 0.0, 2.0]) for st in states])
    assert 0.2 - 2e-3 < r.min() < 0.2 + 1e-3, r.min()
    assert abs(r[-1] - r[-2]) * 600 < 0.1  # stopped there (an inelastic stop, as XPBD's hard constraints)


@wp.kernel
def _body_x(q: wp.array(dtype=wp.transform), loss: wp.array(dtype=float)):
    loss[0] = q[0][0]


def test_gradient_through_a_taut_rope_matches_finite_differences():
    """d(final x)/d(initial vertical speed) of the ball on the rope: Tape against central differences."""
    def final_x(vz, with_grad):
        m = rope_builder(v0=(0.0, 0.0, vz)).finalize(requires_grad=True)
        solver = newton.solvers.SolverXPBD(m, iterations=4)
        states = [m.state() for _ in range(151)]
        loss = wp.zeros(1, dtype=float, requires_grad=True)
        tape = wp.Tape()
        with tape:
            simulate(m, solver, 150, 1.0 / 600, states=states)
            wp.launch(_body_x, dim=1, inputs=[states[-1].body_q, loss])
        if with_grad:
            tape.backward(loss)
            return float(states[0].body_qd.grad.numpy()[0, 2])
        return float(loss.numpy()[0])

    g = final_x(-1.0, True)
    fd = (final_x(-1.0 + 1e-2, False) - final_x(-1.0 - 1e-2, False)) / 2e-2
    assert abs(fd) > 1e-2
    assert abs(g - fd) < 0.05 * abs(fd) + 1e-3, (g, fd)


def swing_builder(kind, limit=None, gravity=-9.81, **dof):
    """A 1 kg body 0.4 m along +x from a joint at height 2 to the world: a BALL joint, or a D6 joint with the
    angular axes x, y, z (``kind`` 'd6') or y, z ('d6-2'); ``limit`` (lower, upper) [rad] on the y axis, the
    other ``dof`` settings (drive gains) on every axis."""
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


def joint_coordinates(m, state):
    q = wp.zeros(m.joint_coord_count, dtype=float)
    qd = wp.zeros(m.joint_dof_count, dtype=float)
    newton.eval_ik(m, state, q, qd)
    return q.numpy(), qd.numpy()


@pytest.mark.parametrize("kind", ["d6", "d6-2", "ball"])
def test_angular_limit_stops_a_swing_at_the_limit_angle(kind):
    """Gravity swings the body about +y; the y axis's upper limit of 0.3 rad stops it there (BALL: the rotation
    vector's y component), and the joint's origin stays put."""
    m = finalize(swing_builder(kind, limit=(-0.3, 0.3)))
    states = simulate(m, newton.solvers.SolverXPBD(m, iterations=6), 480, 1.0 / 480)
    pitch = []
    for st in states[::8]:
        q, _ = joint_coordinates(m, st)
        if kind == "ball":
            x, y, z, w = q
            angle = 2.0 * math.atan2(math.sqrt(x * x + y * y + z * z), w)
            pitch.append(y / max(math.sqrt(x * x + y * y + z * z), 1e-12) * angle)
        else:
            pitch.append(q[1] if kind == "d6" else q[0])
    assert max(pitch) < 0.3 + 5e-3, max(pitch)
    assert abs(pitch[-1] - 0.3) < 5e-3, pitch[-1]
    x = states[-1].body_q.numpy()[0]
    np.testing.assert_allclose(_point(x, (-0.4, 0.0, 0.0)), (0.0, 0.0, 2.0), atol=2e-3)
    # Where it rests: the arm turned by 0.3 rad about +y, tip down.
    np.testing.assert_allclose(x[:3], (0.4 * math.cos(0.3), 0.0, 2.0 - 0.4 * math.sin(0.3)), atol=5e-3)


@pytest.mark.parametrize("kind", ["d6-2", "ball"])
def test_compliant_angular_limit_gives_by_its_torque_times_the_compliance(kind):
    """With joint_angular_compliance c the swing rests past its 0.3 rad limit by the gravity torque times c, and
    the joint's origin sags by the weight times joint_linear_compliance."""
    m = finalize(swing_builder(kind, limit=(-0.3, 0.3)))
    solver = newton.solvers.SolverXPBD(m, iterations=8, joint_linear_compliance=1.0e-5, joint_angular_compliance=1.0e-3)
    x = simulate(m, solver, 1920, 1.0 / 480)[-1].body_q.numpy()[0]
    torque = 9.81 * 0.4 * math.cos(0.3)
    assert abs(2.0 * math.atan2(x[4], x[6]) - (0.3 + torque * 1.0e-3)) < 1e-5
    np.testing.assert_allclose(_point(x, (-0.4, 0.0, 0.0)), (0.0, 0.0, 2.0 - 9.81e-5), atol=3e-6)


def test_d6_with_two_angular_axes_locks_the_third():
    """Gravity about +y on a D6 with angular axes y and z: it swings about y, never about x (the locked axis)."""
    m = finalize(swing_builder("d6-2"))
    states = simulate(m, newton.solvers.SolverXPBD(m, iterations=6), 240, 1.0 / 480)
    q = states[-1].body_q.numpy()[0]
    assert q[2] < 1.9  # it swung down
    # A turn about x would tilt the body's y axis out of the horizontal plane.
    y_axis = _point(np.concatenate([[0.0, 0.0, 0.0], q[3:]]), (0.0, 1.0, 0.0))
    assert abs(y_axis[2]) < 1e-3, y_axis
    assert abs(q[1]) < 1e-3


@pytest.mark.parametrize("kind", ["d6", "d6-2", "ball"])
def test_angular_drive_reaches_its_target(kind):
    """Without gravity, PD drives on every angular axis bring the joint to control.joint_target_q and rest."""
    m = finalize(swing_builder(kind, gravity=0.0, target_ke=40.0, target_kd=4.0))
    target = np.array({"d6-2": [0.5, -0.4]}.get(kind, [0.3, -0.4, 0.5]), np.float32)
    control = m.control()
    # A BALL joint's target is a quaternion (its joint_q slots), driven toward as the rotation vector.
    control.joint_target_q.assign(_ball_target(target) if kind == "ball" else target)
    s = simulate(m, newton.solvers.SolverXPBD(m, iterations=4), 720, 1.0 / 240, control)[-1]
    q, qd = joint_coordinates(m, s)
    if kind == "ball":
        from scipy.spatial.transform import Rotation

        q = Rotation.from_quat(q).as_rotvec()  # a BALL joint's drive coordinates are the rotation vector
    np.testing.assert_allclose(q, target, atol=1e-2)
    assert np.abs(qd).max() < 1e-2


@pytest.mark.parametrize("kind,steps", [("d6", 20), ("ball", 14), ("ball", 40)])
def test_gradient_of_an_angular_drive_target_matches_finite_differences(kind, steps):
    """d(final y of the body)/d(drive target entry 2) of a D6 (Euler angle about z) or BALL (quaternion z) joint
    through a Tape agrees with central differences. Over longer rollouts the slope itself wobbles by 1-2% over
    target changes of ~0.02, a feature of the simulated function itself (the Tape follows it to 0.03% at 40
    steps), so the difference step must stay well below that: 1e-3."""
    m = finalize(swing_builder(kind, gravity=0.0, target_ke=40.0, target_kd=2.0), requires_grad=True)
    solver = newton.solvers.SolverXPBD(m, iterations=2)
    dt = 1.0 / 120

    # Entry 2 of joint_target_q: a D6 joint's angle about z, a BALL joint's quaternion z component.
    base = _ball_target([0.0, 0.1, 0.4]) if kind == "ball" else np.array([0.0, 0.1, 0.4], dtype=np.float32)

    def loss_of(shift, with_grad):
        control = m.control(requires_grad=True)
        control.joint_target_q.assign(base + np.array([0.0, 0.0, shift] + [0.0] * (len(base) - 3), np.float32))
        states = [m.state() for _ in range(steps + 1)]
        loss = wp.zeros(1, dtype=float, requires_grad=True)
        tape = wp.Tape()
        with tape:
            simulate(m, solver, steps, dt, control, states)
            wp.launch(_body_y, dim=1, inputs=[states[-1].body_q], outputs=[loss])
        if with_grad:
            tape.backward(loss)
            return float(control.joint_target_q.grad.numpy()[2])
        return float(loss.numpy()[0])

    g = loss_of(0.0, True)
    fd = (loss_of(1e-3, False) - loss_of(-1e-3, False)) / 2e-3
    assert 0.1 < fd  # the drive turned the arm part of the way toward +y
    assert g == pytest.approx(fd, rel=0.02, abs=1e-3)


def _ball_target(rotvec):
    """The xyzw quaternion of rotation vector ``rotvec``: a BALL joint's joint_target_q entries."""
    from scipy.spatial.transform import Rotation

    return Rotation.from_rotvec(rotvec).as_quat().astype(np.float32)


@wp.kernel
def _body_y(q: wp.array(dtype=wp.transform), loss: wp.array(dtype=float)):
    loss[0] = q[0][1]


def compliant_builder(kind):
    """A 2 kg body on a joint to the world at height 1 (gravity 9.81): welded ('fixed') with its center 0.3 m
    below the joint or ('fixed-arm') 0.3 m beside it, or on a vertical slider ('slider') resting on its lower
    limit at 0 m."""
    b = newton.ModelBuilder(gravity=-9.81)
    body = b.add_link(mass=2.0, inertia=wp.mat33(np.eye(3, dtype=np.float32) * 0.01))
    parent_xform = wp.transform((0.0, 0.0, 1.0), wp.quat_identity())
    if kind == "slider":
        j = b.add_joint_prismatic(-1, body, axis=(0.0, 0.0, 1.0), parent_xform=parent_xform, limit_lower=0.0,
                                  limit_upper=0.5)
    else:
        offset = (0.0, 0.0, 0.3) if kind == "fixed" else (-0.3, 0.0, 0.0)
        j = b.add_joint_fixed(-1, body, parent_xform=parent_xform,
                              child_xform=wp.transform(offset, wp.quat_identity()))
    b.add_articulation([j])
    return b


@pytest.mark.parametrize("kind", ["fixed", "slider", "fixed-arm"])
def test_compliant_joint_deflects_by_force_times_compliance_at_any_iteration_count(kind):
    """Under gravity a compliant joint comes to rest deflected by its load times its compliance, however many
    sweeps a step takes (each sweep carries the impulse of the earlier ones): the weld's sag m g c_lin, a slider
    pressing on its limit as far past it, a weld with the body beside it turned by m g L c_ang."""
    c_lin, c_ang, load = 1.0e-4, 1.0e-3, 2.0 * 9.81
    for iterations in (2, 8, 32):
        m = finalize(compliant_builder(kind))
        solver = newton.solvers.SolverXPBD(m, iterations=iterations, joint_linear_compliance=c_lin,
                                           joint_angular_compliance=c_ang)
        s = simulate(m, solver, 480, 1.0 / 240)[-1]
        q = s.body_q.numpy()[0]
        if kind == "fixed-arm":
            x, y, z, w = q[3:]
            np.testing.assert_allclose(2.0 * math.atan2(y, w), load * 0.3 * c_ang, rtol=2e-3)
        else:
            joint_z = q[2] + (0.3 if kind == "fixed" else 0.0)  # the child's joint frame, level at rest
            np.testing.assert_allclose(1.0 - joint_z, load * c_lin, rtol=2e-3)


@wp.kernel
def _body_z(q: wp.array(dtype=wp.transform), loss: wp.array(dtype=float)):
    loss[0] = q[0][2]


@pytest.mark.parametrize("kind", ["fixed-arm", "slider"])
def test_gradient_through_a_compliant_joint_matches_finite_differences(kind):
    """d(final height)/d(initial vertical speed) of a body on a compliant joint (weld with the body beside it,
    slider thrown onto its compliant limit): Tape against central differences."""
    m = finalize(compliant_builder(kind), requires_grad=True)
    solver = newton.solvers.SolverXPBD(m, iterations=4, joint_linear_compliance=1.0e-3,
                                       joint_angular_compliance=1.0e-2)
    steps = 40

    def final_z(vz, with_grad):
        states = [m.state(requires_grad=True) for _ in range(steps + 1)]
        states[0].body_qd.assign(np.array([[0.0, 0.0, vz, 0.0, 0.0, 0.0]], np.float32))
        loss = wp.zeros(1, dtype=float, requires_grad=True)
        tape = wp.Tape()
        with tape:
            simulate(m, solver, steps, 1.0 / 240, states=states)
            wp.launch(_body_z, dim=1, inputs=[states[-1].body_q], outputs=[loss])
        if with_grad:
            tape.backward(loss)
            return float(states[0].body_qd.grad.numpy()[0, 2])
        return float(loss.numpy()[0])

    vz = -1.0 if kind == "slider" else 0.5
    g = final_z(vz, True)
    fd = (final_z(vz + 1e-2, False) - final_z(vz - 1e-2, False)) / 2e-2
    assert abs(fd) > 1e-3
    assert g == pytest.approx(fd, rel=0.02, abs=1e-4), (g, fd)


def floating_chain(kind):
    """Four 0.5 kg links 0.4 m long in a row along x, joined end to end by hinges about y or ball joints, the
    first one free (no gravity); :func:`floating_chain_model` sets them spinning."""
    b = newton.ModelBuilder(gravity=0.0)
    parent = -1
    joints = []
    for _ in range(4):
        body = b.add_link(mass=0.5, inertia=wp.mat33(np.diag([0.005, 0.007, 0.009]).astype(np.float32)))
        if parent < 0:
            joints.append(b.add_joint_free(body))
        else:
            kw = {"parent_xform": wp.transform((0.2, 0.0, 0.0), wp.quat_identity()),
                  "child_xform": wp.transform((-0.2, 0.0, 0.0), wp.quat_identity())}
            joints.append(b.add_joint_revolute(parent, body, axis=(0.0, 1.0, 0.0), **kw) if kind == "revolute"
                          else b.add_joint_ball(parent, body, **kw))
        parent = body
    b.add_articulation(joints)
    return b


def floating_chain_model(kind):
    """The model of :func:`floating_chain` with every link at rest but spinning about y (and z) at its own rate."""
    m = finalize(floating_chain(kind))
    m.body_qd.assign(np.array([[0.0, 0.0, 0.0, 0.0, 1.0 + 2.0 * i, 0.3 * i] for i in range(4)], np.float32))
    return m


@pytest.mark.parametrize("kind", ["revolute", "ball"])
def test_joints_keep_a_floating_chains_momentum_at_two_sweeps(kind):
    """The joints' impulses are internal: a chain floating free keeps its linear momentum (its center of mass
    at rest) however far a two-sweep solve is from converged, and its joints hold. Averaging each body's
    impulses would give the inner links half a joint's impulse and the end links all of it, pushing the chain."""
    m = floating_chain_model(kind)
    s = m.state()
    solver = newton.solvers.SolverXPBD(m, iterations=2)
    start = s.body_q.numpy()[:, :3].mean(axis=0)
    states = simulate(m, solver, 240, 1.0 / 240)
    q = states[-1].body_q.numpy()
    momentum = 0.5 * states[-1].body_qd.numpy()[:, :3].sum(axis=0)
    assert np.abs(momentum).max() < 1e-3, momentum  # averaged impulses: 0.05 after one step
    np.testing.assert_allclose(q[:, :3].mean(axis=0), start, atol=5e-4)  # averaged: 2.6 cm
    xp, xc = m.joint_X_p.numpy(), m.joint_X_c.numpy()
    gaps = [np.linalg.norm(_point(q[k - 1], xp[k, :3]) - _point(q[k], xc[k, :3])) for k in range(1, 4)]
    assert max(gaps) < 1e-2, gaps
