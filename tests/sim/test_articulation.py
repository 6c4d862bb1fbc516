"""Articulations: kinematics (eval_fk / eval_ik), SolverFeatherstone and joint forces for maximal-coordinate
solvers, against analytic answers and finite differences."""

from __future__ import annotations

import math

import numpy as np
import pytest

import loomwork as wp
import loomwork.sim as newton
from loomwork.sim.solvers.joints import apply_joint_forces

G = 9.81


def pendulum(length: float = 1.0, mass: float = 1.0, angle: float = 0.0, **joint_kw) -> newton.ModelBuilder:
    """A point-like bob on a massless rod swinging about +Y from a pivot at the origin (Z up)."""
    b = newton.ModelBuilder()
    body = b.add_link(mass=mass, com=wp.vec3(0.0, 0.0, -length), inertia=wp.mat33(np.eye(3) * 1e-6))
    j = b.add_joint_revolute(-1, body, axis=(0.0, 1.0, 0.0), **joint_kw)
    b.add_articulation([j])
    b.joint_q[0] = angle
    return b


def run(model, steps: int, dt: float, control=None, solver=None, record=None):
    solver = solver or newton.solvers.SolverFeatherstone(model, angular_damping=0.0)
    s0, s1 = model.state(), model.state()
    newton.eval_fk(model, s0.joint_q, s0.joint_qd, s0)
    out = []
    for _ in range(steps):
        solver.step(s0, s1, control, None, dt)
        s0, s1 = s1, s0
        if record is not None:
            out.append(record(s0))
    return s0, out


def random_tree(rng) -> newton.ModelBuilder:
    """An articulation with every supported joint type, random frames, centers and inertias."""
    def tf():
        q = rng.normal(size=4)
        return wp.transform(wp.vec3(*(0.3 * rng.normal(size=3))), wp.quat(*(q / np.linalg.norm(q))))

    def inertia():
        a = rng.normal(size=(3, 3))
        return wp.mat33(*(a @ a.T * 0.05 + 0.05 * np.eye(3)).reshape(-1))

    b = newton.ModelBuilder()
    links = [b.add_link(mass=0.5 + i * 0.2, com=wp.vec3(*(0.2 * rng.normal(size=3))), inertia=inertia())
             for i in range(6)]
    cfg = newton.ModelBuilder.JointDofConfig
    joints = [b.add_joint_free(links[0], parent_xform=tf(), child_xform=tf()),
              b.add_joint_revolute(links[0], links[1], axis=(0.0, 0.6, 0.8), parent_xform=tf(), child_xform=tf()),
              b.add_joint_prismatic(links[1], links[2], axis=(1.0, 0.0, 0.0), parent_xform=tf(), child_xform=tf()),
              b.add_joint_ball(links[0], links[3], parent_xform=tf(), child_xform=tf()),
              b.add_joint_d6(links[3], links[4], linear_axes=[cfg.create_unlimited((1.0, 0.0, 0.0))],
                             angular_axes=[cfg.create_unlimited((0.0, 0.0, 1.0))], parent_xform=tf(),
                             child_xform=tf()),
              b.add_joint_fixed(links[4], links[5], parent_xform=tf(), child_xform=tf())]
    b.add_articulation(joints)
    return b


def energy(model, state) -> float:
    """Kinetic plus potential energy [J] of all bodies (gravity along -Z)."""
    from scipy.spatial.transform import Rotation

    q, qd = state.body_q.numpy(), state.body_qd.numpy()
    mass, com, inertia = model.body_mass.numpy(), model.body_com.numpy(), model.body_inertia.numpy()
    e = 0.0
    for i in range(len(q)):
        r = Rotation.from_quat(q[i, 3:]).as_matrix()
        c = q[i, :3] + r @ com[i]
        v, w = qd[i, :3], qd[i, 3:]
        e += 0.5 * mass[i] * v @ v + 0.5 * w @ (r @ inertia[i] @ r.T) @ w + mass[i] * G * c[2]
    return float(e)


# --- kinematics -------------------------------------------------------------------------------------------------

def test_fk_of_pendulum_matches_geometry():
    """A revolute joint at angle a about +Y puts the bob at (-L sin a, 0, -L cos a) moving at L qd."""
    b = pendulum(length=2.0, angle=0.3)
    b.joint_qd[0] = 1.5
    m = b.finalize("cpu")
    s = m.state()
    newton.eval_fk(m, m.joint_q, m.joint_qd, s)
    q, qd = s.body_q.numpy()[0], s.body_qd.numpy()[0]
    np.testing.assert_allclose(q[3:], [0.0, math.sin(0.15), 0.0, math.cos(0.15)], atol=1e-6)
    np.testing.assert_allclose(qd[3:], [0.0, 1.5, 0.0], atol=1e-6)
    # The COM's velocity: w x r with r = R (0, 0, -2).
    r = np.array([-2.0 * math.sin(0.3), 0.0, -2.0 * math.cos(0.3)])
    np.testing.assert_allclose(qd[:3], np.cross([0.0, 1.5, 0.0], r), atol=1e-5)


def test_fk_ik_round_trip_every_joint_type():
    """eval_ik recovers the coordinates and velocities eval_fk was given, for every supported joint type."""
    rng = np.random.default_rng(3)
    m = random_tree(rng).finalize("cpu")
    q = rng.uniform(-1.0, 1.0, m.joint_coord_count).astype(np.float32)
    q[3:7] /= np.linalg.norm(q[3:7])  # free joint quaternion
    q[9:13] /= np.linalg.norm(q[9:13])  # ball joint
    if q[6] < 0:
        q[3:7] *= -1
    if q[12] < 0:
        q[9:13] *= -1
    qd = rng.normal(size=m.joint_dof_count).astype(np.float32)
    s = m.state()
    newton.eval_fk(m, wp.array(q), wp.array(qd), s)
    q2, qd2 = wp.zeros_like(m.joint_q), wp.zeros_like(m.joint_qd)
    newton.eval_ik(m, s, q2, qd2)
    q2 = q2.numpy()
    for sl in (slice(3, 7), slice(9, 13)):  # q and -q are the same rotation
        if np.dot(q2[sl], q[sl]) < 0:
            q2[sl] *= -1
    np.testing.assert_allclose(q2, q, atol=2e-5)
    np.testing.assert_allclose(qd2.numpy(), qd, atol=2e-5)


def test_fk_ik_of_d6_with_two_and_three_angular_axes():
    """D6 angular coordinates are intrinsic Euler angles about the joint's axes (scipy's intrinsic 'XZY' for
    axes x, z, y, a left-handed triple); eval_ik recovers angles and rates; two axes lock the middle turn."""
    from scipy.spatial.transform import Rotation

    b = newton.ModelBuilder()
    cfg = newton.ModelBuilder.JointDofConfig
    a, c = b.add_link(mass=1.0), b.add_link(mass=1.0)
    x, y, z = (1.0, 0.0, 0.0), (0.0, 1.0, 0.0), (0.0, 0.0, 1.0)
    j0 = b.add_joint_d6(-1, a, angular_axes=[cfg.create_unlimited(ax) for ax in (x, z, y)])
    j1 = b.add_joint_d6(a, c, linear_axes=[cfg.create_unlimited(y)],
                        angular_axes=[cfg.create_unlimited(y), cfg.create_unlimited(z)],
                        parent_xform=wp.transform((0.3, 0.0, 0.0), wp.quat_identity()))
    b.add_articulation([j0, j1])
    m = b.finalize("cpu")
    q = np.array([0.4, -0.7, 1.1, 0.2, -0.5, 0.9], np.float32)
    qd = np.array([0.3, -1.2, 0.8, 0.5, 0.7, -0.4], np.float32)
    s = m.state()
    newton.eval_fk(m, wp.array(q), wp.array(qd), s)
    body_q = s.body_q.numpy()
    r0 = Rotation.from_euler("XZY", q[:3])
    np.testing.assert_allclose(abs(np.dot(body_q[0, 3:], r0.as_quat())), 1.0, atol=1e-6)
    r1 = r0 * Rotation.from_euler("YZ", q[4:])  # the locked turn (about y x z = x) is between them
    np.testing.assert_allclose(abs(np.dot(body_q[1, 3:], r1.as_quat())), 1.0, atol=1e-6)
    np.testing.assert_allclose(body_q[1, :3], r0.apply([0.3, q[3], 0.0]), atol=1e-6)
    q2, qd2 = wp.zeros_like(m.joint_q), wp.zeros_like(m.joint_qd)
    newton.eval_ik(m, s, q2, qd2)
    np.testing.assert_allclose(q2.numpy(), q, atol=2e-5)
    np.testing.assert_allclose(qd2.numpy(), qd, atol=2e-5)


def test_fk_mask_updates_only_selected_articulations():
    """With a mask, unselected articulations keep their body state."""
    world = pendulum(angle=0.5)
    b = newton.ModelBuilder()
    b.replicate(world, 3)
    m = b.finalize("cpu")
    s = m.state()
    before = s.body_q.numpy().copy()
    newton.eval_fk(m, m.joint_q, m.joint_qd, s, mask=wp.array(np.array([False, True, False])))
    after = s.body_q.numpy()
    np.testing.assert_array_equal(after[[0, 2]], before[[0, 2]])
    assert not np.allclose(after[1], before[1])


def test_fk_rejects_wrong_lengths():
    """eval_fk names the array whose length does not match the model."""
    m = pendulum().finalize("cpu")
    with pytest.raises(ValueError, match="joint_qd must have length 1"):
        newton.eval_fk(m, m.joint_q, wp.zeros(3, dtype=float), m.state())


# --- dynamics --------------------------------------------------------------------------------------------------

def test_pendulum_small_angle_period():
    """A small swing has period 2 pi sqrt(L / g) (to 1% with dt = 1 ms)."""
    length = 0.8
    m = pendulum(length=length, angle=0.05).finalize("cpu")
    dt = 1e-3
    _, angles = run(m, 4000, dt, record=lambda s: s.joint_q.numpy()[0])
    angles = np.asarray(angles)
    ups = np.flatnonzero((angles[:-1] < 0.0) & (angles[1:] >= 0.0))
    period = (ups[-1] - ups[0]) * dt / (len(ups) - 1)
    assert period == pytest.approx(2 * math.pi * math.sqrt(length / G), rel=0.01)


def test_double_pendulum_conserves_energy():
    """A double pendulum started at 1 rad keeps its energy within 0.5% over 1 s at dt = 0.5 ms."""
    b = newton.ModelBuilder()
    inertia = wp.mat33(np.eye(3) * 0.01)
    a = b.add_link(mass=1.0, com=wp.vec3(0.0, 0.0, -0.5), inertia=inertia)
    c = b.add_link(mass=0.7, com=wp.vec3(0.0, 0.0, -0.4), inertia=inertia)
    j0 = b.add_joint_revolute(-1, a, axis=(0.0, 1.0, 0.0))
    j1 = b.add_joint_revolute(a, c, axis=(0.0, 1.0, 0.0), parent_xform=wp.transform(wp.vec3(0.0, 0.0, -1.0),
                                                                                   wp.quat_identity()))
    b.add_articulation([j0, j1])
    b.joint_q[:] = [1.0, -0.5]
    m = b.finalize("cpu")
    s0, _ = run(m, 0, 1e-3)
    e0 = energy(m, s0)
    s, _ = run(m, 2000, 5e-4)
    swing = abs(e0 - (-G * (1.0 * 0.5 + 0.7 * 1.4)))  # energy above the lowest configuration
    assert abs(energy(m, s) - e0) < 0.005 * swing


def test_tree_with_every_joint_type_conserves_energy():
    """The energy error of a free-floating tree (free, revolute, prismatic, ball, D6, fixed) shrinks with dt."""
    rng = np.random.default_rng(5)
    b = random_tree(rng)
    b.joint_qd[:] = list(rng.normal(size=len(b.joint_qd)))
    m = b.finalize("cpu")
    e0 = energy(m, run(m, 0, 1e-3)[0])
    err = [abs(energy(m, run(m, n, 0.2 / n)[0]) - e0) for n in (400, 1600)]
    assert err[1] < 0.4 * err[0] + 1e-4


def test_joint_limit_holds():
    """A pendulum falling onto a limit at -0.2 rad stays near it (limit_ke 1e4)."""
    m = pendulum(angle=0.0, limit_lower=-0.2, limit_upper=0.2, limit_ke=1e4, limit_kd=50.0)
    m.joint_q[0] = 0.1
    model = m.finalize("cpu")
    model.set_gravity((G, 0.0, 0.0))  # pushes the bob toward -X: a negative angle... and past the limit
    s, angles = run(model, 2000, 1e-3, record=lambda s: s.joint_q.numpy()[0])
    assert min(angles) > -0.2 - 0.02 and max(angles) < 0.2 + 0.02
    assert s.joint_q.numpy()[0] == pytest.approx(-0.2, abs=0.01) or s.joint_q.numpy()[0] == pytest.approx(0.2, abs=0.01)


def test_pd_drive_reaches_target():
    """A PD drive holds a pendulum at its target angle against gravity (to within the static sag mgL sin/ke)."""
    m = pendulum(angle=0.0, target_ke=400.0, target_kd=40.0).finalize("cpu")
    control = m.control()
    control.joint_target_q.assign(np.array([0.6], np.float32))
    s, _ = run(m, 3000, 1e-3, control=control)
    q = float(s.joint_q.numpy()[0])
    sag = G * math.sin(q) / 400.0  # gravity torque m g L sin q balanced by ke (target - q)
    assert q == pytest.approx(0.6 - sag, abs=2e-3)
    assert abs(s.joint_qd.numpy()[0]) < 1e-2


def test_replicated_worlds_are_independent():
    """Worlds started differently evolve exactly as they would alone."""
    world = pendulum(length=0.5, angle=0.4)
    b = newton.ModelBuilder()
    b.replicate(world, 3, spacing=(2.0, 0.0, 0.0))
    b.joint_q[1] = -0.7
    m = b.finalize("cpu")
    s, _ = run(m, 300, 1e-3)
    single = pendulum(length=0.5, angle=-0.7).finalize("cpu")
    s1, _ = run(single, 300, 1e-3)
    q = s.joint_q.numpy()
    assert q[0] == pytest.approx(q[2], abs=1e-6)
    assert q[1] == pytest.approx(s1.joint_q.numpy()[0], abs=1e-6)


def test_gradient_of_final_angle_wrt_drive_target():
    """d(final angle)/d(drive target) through 100 steps matches central finite differences."""
    m = pendulum(angle=0.2, target_ke=20.0, target_kd=2.0).finalize("cpu", requires_grad=True)
    solver = newton.solvers.SolverFeatherstone(m, angular_damping=0.0)
    steps, dt = 100, 5e-3

    def simulate(target: float, tape=None):
        control = m.control()
        control.joint_target_q = wp.array(np.array([target], np.float32), requires_grad=True)
        states = [m.state() for _ in range(steps + 1)]
        for i in range(steps):
            solver.step(states[i], states[i + 1], control, None, dt)
        return states[-1], control

    tape = wp.Tape()
    with tape:
        final, control = simulate(0.5)
    tape.backward(grads={final.joint_q: wp.array(np.array([1.0], np.float32))})
    grad = float(control.joint_target_q.grad.numpy()[0])
    eps = 1e-2
    fd = (simulate(0.5 + eps)[0].joint_q.numpy()[0] - simulate(0.5 - eps)[0].joint_q.numpy()[0]) / (2 * eps)
    assert grad == pytest.approx(float(fd), rel=2e-2, abs=1e-3)
    assert abs(grad) > 0.05


# --- bad input -------------------------------------------------------------------------------------------------

def test_builder_rejects_unknown_bodies_loops_and_massless_bodies():
    """Unknown body indices, a second parent joint (a loop) and a zero-mass dynamic body are refused."""
    b = newton.ModelBuilder()
    a = b.add_link(mass=1.0, inertia=wp.mat33(np.eye(3)))
    c = b.add_link(mass=1.0, inertia=wp.mat33(np.eye(3)))
    with pytest.raises(IndexError, match="child body 7"):
        b.add_joint_revolute(a, 7)
    b.add_joint_revolute(-1, a)
    b.add_joint_revolute(a, c)
    with pytest.raises(ValueError, match="loop"):
        b.add_joint_revolute(-1, c)
    b.add_link(mass=0.0)
    with pytest.raises(ValueError, match="zero mass"):
        b.finalize("cpu")


def test_step_rejects_zero_dt():
    """dt = 0 is refused before anything runs."""
    m = pendulum().finalize("cpu")
    solver = newton.solvers.SolverFeatherstone(m)
    with pytest.raises(ValueError, match="dt must be > 0"):
        solver.step(m.state(), m.state(), None, None, 0.0)


def test_check_finite_names_step_and_body():
    """A NaN in the input state surfaces at that step, naming the body."""
    m = pendulum().finalize("cpu")
    solver = newton.solvers.SolverFeatherstone(m, check_finite=True)
    s0, s1 = m.state(), m.state()
    solver.step(s0, s1, None, None, 1e-3)
    s1.joint_qd.assign(np.array([np.nan], np.float32))
    with pytest.raises(FloatingPointError, match=r"step 2 made body_q\[0\] non-finite .* body 0 \('body_0'\)"):
        solver.step(s1, s0, None, None, 1e-3)


# --- maximal coordinates ---------------------------------------------------------------------------------------

def test_joint_forces_pull_separated_frames_together_and_drive():
    """apply_joint_forces: a revolute child displaced by d gets -ke d; a drive's torque is ke (target - q)."""
    b = newton.ModelBuilder()
    body = b.add_link(mass=1.0, inertia=wp.mat33(np.eye(3)))
    b.add_joint_revolute(-1, body, axis=(0.0, 0.0, 1.0), target_ke=10.0, target_kd=0.0)
    m = b.finalize("cpu")
    s = m.state()
    s.body_q.assign(np.array([[0.01, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0]], np.float32))
    control = m.control()
    control.joint_target_q.assign(np.array([0.5], np.float32))
    f = wp.zeros(1, dtype=wp.spatial_vector)
    apply_joint_forces(m, s, control, f, joint_attach_ke=1e4)
    np.testing.assert_allclose(f.numpy()[0], [-100.0, 0.0, 0.0, 0.0, 0.0, 5.0], atol=1e-3)
