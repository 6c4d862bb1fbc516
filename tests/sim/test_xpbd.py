"""SolverXPBD: resting contact, a settling pile, springs, gradients against finite differences, refusals."""

import numpy as np
import pytest

import loomwork as wp
import loomwork.sim as newton


def run(model, solver, steps, dt, pipeline=None, states=None):
    contacts = pipeline.contacts() if pipeline is not None else None
    states = states or [model.state() for _ in range(steps + 1)]
    for t in range(steps):
        if pipeline is not None:
            pipeline.collide(states[t], contacts)
        states[t].clear_forces()
        solver.step(states[t], states[t + 1], None, contacts, dt)
    return states


def test_box_and_pile_come_to_rest_on_the_ground():
    b = newton.ModelBuilder()
    b.add_particle_grid(pos=(0.0, 0.0, 0.3), rot=wp.quat_identity(), vel=(0.0, 0.0, 0.0), dim_x=4, dim_y=4, dim_z=4,
                        cell_x=0.1, cell_y=0.1, cell_z=0.1, mass=0.1, jitter=0.005, radius_mean=0.05)
    body = b.add_body(xform=wp.transform((2.0, 0.0, 0.5), wp.quat_rpy(0.3, 0.2, 0.1)))
    b.add_shape_box(body, hx=0.2, hy=0.2, hz=0.2)
    b.add_ground_plane()
    m = b.finalize()
    s = run(m, newton.solvers.SolverXPBD(m, iterations=4), 480, 1.0 / 480, newton.CollisionPipeline(m))[-1]
    q = s.particle_q.numpy()
    assert q[:, 2].min() > 0.045  # nothing sinks below its radius
    d = np.linalg.norm(q[:, None] - q[None], axis=-1) + np.eye(len(q))
    assert d.min() > 0.09  # neighbours overlap by less than 10% of a diameter
    box = s.body_q.numpy()[0]
    assert abs(box[2] - 0.2) < 5e-3 and abs(abs(box[6]) ** 2 + box[5] ** 2 - 1.0) < 1e-2  # flat on a face
    assert np.abs(s.body_qd.numpy()[0]).max() < 0.05


def test_spring_holds_its_length_under_gravity():
    b = newton.ModelBuilder()
    b.add_particle((0.0, 0.0, 1.0), (0.0, 0.0, 0.0), 0.0)
    b.add_particle((0.5, 0.0, 1.0), (0.0, 0.0, 0.0), 1.0)
    b.add_spring(0, 1, 1.0e6, 0.0, 0.0)
    m = b.finalize()
    m.particle_grid = None
    s = run(m, newton.solvers.SolverXPBD(m, iterations=8), 600, 1.0 / 600)[-1]
    q = s.particle_q.numpy()
    assert abs(np.linalg.norm(q[1] - q[0]) - 0.5) < 5e-3  # a stiff pendulum rod
    assert q[1, 2] < 0.9  # it swung down


@wp.kernel
def _loss(q: wp.array(dtype=wp.vec3), target: wp.vec3, loss: wp.array(dtype=float)):
    d = q[0] - target
    loss[0] = wp.dot(d, d)


def test_gradient_through_xpbd_contact_matches_finite_differences():
    def loss_of(v0, with_grad):
        b = newton.ModelBuilder()
        b.add_particle((0.0, 0.0, 0.3), tuple(v0), 1.0, radius=0.05)
        b.add_ground_plane(cfg=newton.ModelBuilder.ShapeConfig(mu=0.2))
        m = b.finalize(requires_grad=True)
        pipe = newton.CollisionPipeline(m, soft_contact_gap=10.0)
        contacts = pipe.contacts()
        solver = newton.solvers.SolverXPBD(m, iterations=2)
        states = [m.state() for _ in range(121)]
        pipe.collide(states[0], contacts)
        loss = wp.zeros(1, dtype=float, requires_grad=True)
        tape = wp.Tape()
        with tape:
            for t in range(120):
                solver.step(states[t], states[t + 1], None, contacts, 1.0 / 240)
            wp.launch(_loss, dim=1, inputs=[states[-1].particle_q, wp.vec3(1.0, 0.5, 0.2), loss])
        if with_grad:
            tape.backward(loss)
            return states[0].particle_qd.grad.numpy()[0]
        return float(loss.numpy()[0])

    v0 = np.array([1.0, 0.3, -1.0])
    g = loss_of(v0, True)
    fd = [(loss_of(v0 + 1e-3 * e, False) - loss_of(v0 - 1e-3 * e, False)) / 2e-3 for e in np.eye(3)]
    np.testing.assert_allclose(g, fd, rtol=0.03, atol=3e-3)


def test_unsupported_features_are_refused_by_name():
    b = newton.ModelBuilder()
    b.add_cloth_grid(pos=(0, 0, 1), rot=wp.quat_identity(), vel=(0, 0, 0), dim_x=2, dim_y=2, cell_x=0.1, cell_y=0.1,
                     mass=0.1)
    with pytest.raises(ValueError, match="triangles with membrane stiffness"):
        newton.solvers.SolverXPBD(b.finalize())
    b = newton.ModelBuilder()
    b.add_particle((0, 0, 0), (0, 0, 0), 1.0)
    with pytest.raises(ValueError, match="iterations"):
        newton.solvers.SolverXPBD(b.finalize(), iterations=0)


@wp.kernel
def _weighted_x(q: wp.array(dtype=wp.vec3), loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, q[i][0] * float(i + 1))


def test_gradient_through_particle_particle_contacts_uses_each_steps_neighbours():
    def run(vx, with_grad):
        b = newton.ModelBuilder(gravity=0.0)
        b.add_particle((0.0, 0.0, 0.0), (vx, 0.0, 0.0), 1.0, radius=0.1)
        b.add_particle((0.5, 0.02, 0.0), (0.0, 0.0, 0.0), 1.0, radius=0.1)
        b.add_particle((0.0, 0.5, 0.0), (0.0, 0.0, 0.0), 1.0, radius=0.1)
        m = b.finalize(requires_grad=True)
        m.particle_mu = 0.0
        solver = newton.solvers.SolverXPBD(m)
        states = [m.state() for _ in range(101)]
        loss = wp.zeros(1, dtype=float, requires_grad=True)
        tape = wp.Tape()
        with tape:
            for t in range(100):
                solver.step(states[t], states[t + 1], None, None, 1.0e-2)
            wp.launch(_weighted_x, dim=3, inputs=[states[-1].particle_q, loss])
        if with_grad:
            tape.backward(loss)
            return float(states[0].particle_qd.grad.numpy()[0, 0])
        return float(loss.numpy()[0])

    g = run(1.0, True)
    fd = (run(1.001, False) - run(0.999, False)) / 0.002
    assert abs(g - fd) < 0.02 * abs(fd), (g, fd)


def bounce_apex(restitution, enable):
    """Highest center height after the first bounce of a ball (radius 0.1) dropped from 0.6 m on the ground."""
    b = newton.ModelBuilder()
    cfg = newton.ModelBuilder.ShapeConfig(restitution=restitution, mu=0.0)
    body = b.add_body(xform=wp.transform((0.0, 0.0, 0.6), wp.quat_identity()))
    b.add_shape_sphere(body, radius=0.1, cfg=cfg)
    b.add_ground_plane(cfg=cfg)
    m = b.finalize()
    solver = newton.solvers.SolverXPBD(m, iterations=4, enable_restitution=enable)
    pipe = newton.CollisionPipeline(m)
    contacts = pipe.contacts()
    s0, s1 = m.state(), m.state()
    bounced, apex = False, 0.0
    for _ in range(900):
        pipe.collide(s0, contacts)
        s0.clear_forces()
        solver.step(s0, s1, None, contacts, 1.0 / 600)
        s0, s1 = s1, s0
        zi = s0.body_q.numpy()[0, 2]
        bounced = bounced or zi < 0.101
        if bounced:
            apex = max(apex, zi)
    return apex


def test_restitution_bounces_to_the_squared_coefficient_of_the_drop_height():
    """Dropped 0.5 m onto the ground with restitution e, the ball rises e^2 0.5 m; without it, it stays."""
    for e in (0.5, 0.8):
        rise = bounce_apex(e, True) - 0.1
        assert abs(rise - e * e * 0.5) < 0.05 * e * e * 0.5, (e, rise)
    assert bounce_apex(0.5, False) - 0.1 < 0.01


@wp.kernel
def _body_z(q: wp.array(dtype=wp.transform), loss: wp.array(dtype=float)):
    loss[0] = q[0][2]


def test_gradient_through_a_restitution_bounce_matches_finite_differences():
    """d(height after a bounce with restitution 0.5)/d(initial downward speed): Tape against central FD."""
    def height(vz, with_grad):
        b = newton.ModelBuilder()
        cfg = newton.ModelBuilder.ShapeConfig(restitution=0.5, mu=0.0, gap=0.2)
        body = b.add_body(xform=wp.transform((0.0, 0.0, 0.15), wp.quat_identity()))
        b.add_shape_sphere(body, radius=0.1, cfg=cfg)
        b.add_ground_plane(cfg=cfg)
        m = b.finalize(requires_grad=True)
        pipe = newton.CollisionPipeline(m)
        contacts = pipe.contacts()
        solver = newton.solvers.SolverXPBD(m, iterations=4, enable_restitution=True)
        states = [m.state() for _ in range(61)]
        states[0].body_qd.assign(np.array([[0.0, 0.0, vz, 0.0, 0.0, 0.0]], np.float32))
        pipe.collide(states[0], contacts)  # found once: the sphere-plane contact stays valid as it moves up and down
        loss = wp.zeros(1, dtype=float, requires_grad=True)
        tape = wp.Tape()
        with tape:
            for t in range(60):
                solver.step(states[t], states[t + 1], None, contacts, 1.0 / 600)
            wp.launch(_body_z, dim=1, inputs=[states[-1].body_q, loss])
        if with_grad:
            tape.backward(loss)
            return float(states[0].body_qd.grad.numpy()[0, 2])
        return float(loss.numpy()[0])

    g = height(-2.0, True)
    fd = (height(-2.0 + 1e-2, False) - height(-2.0 - 1e-2, False)) / 2e-2
    assert height(-2.0, False) > 0.1  # it has bounced and is rising
    assert abs(fd) > 1e-3
    assert abs(g - fd) < 0.05 * abs(fd) + 1e-3, (g, fd)


def particle_bounce_apex(restitution, enable, body=False):
    """Highest height after the first bounce of a particle (radius 0.05) dropped 0.5 m on the ground, or on a
    0.1 m box (``body``: a dynamic body held in place by a fixed joint), measured from the surface."""
    b = newton.ModelBuilder()
    b.add_particle((0.0, 0.0, 0.65 if body else 0.55), (0.0, 0.0, 0.0), 0.1, radius=0.05)
    if body:
        link = b.add_link(xform=wp.transform((0.0, 0.0, 0.05), wp.quat_identity()))
        b.add_shape_box(link, hx=0.2, hy=0.2, hz=0.05)
        b.add_articulation([b.add_joint_fixed(-1, link, parent_xform=wp.transform((0.0, 0.0, 0.05),
                                                                                  wp.quat_identity()))])
    else:
        b.add_ground_plane()
    m = b.finalize()
    m.soft_contact_restitution = restitution
    m.soft_contact_mu = 0.0
    m.particle_grid = None
    solver = newton.solvers.SolverXPBD(m, iterations=4, enable_restitution=enable)
    pipe = newton.CollisionPipeline(m)
    contacts = pipe.contacts()
    s0, s1 = m.state(), m.state()
    bounced, apex = False, 0.0
    for _ in range(900):
        pipe.collide(s0, contacts)
        s0.clear_forces()
        solver.step(s0, s1, None, contacts, 1.0 / 600)
        s0, s1 = s1, s0
        zi = s0.particle_q.numpy()[0, 2] - (0.1 if body else 0.0)
        bounced = bounced or zi < 0.051
        if bounced:
            apex = max(apex, zi)
    return apex


@pytest.mark.parametrize("body", [False, True])
def test_particle_restitution_bounces_to_the_squared_coefficient_of_the_drop_height(body):
    """A particle dropped 0.5 m on the ground (or a body's box) with soft_contact_restitution e rises e^2 0.5 m;
    without enable_restitution it stays down."""
    for e in (0.5, 0.8):
        rise = particle_bounce_apex(e, True, body) - 0.05
        assert abs(rise - e * e * 0.5) < 0.05 * e * e * 0.5, (e, rise)
    assert particle_bounce_apex(0.5, False, body) - 0.05 < 0.01


def test_gradient_through_a_particle_bounce_matches_finite_differences():
    """d(height after a particle's bounce with restitution 0.5)/d(initial downward speed): Tape against FD."""
    def height(vz, with_grad):
        b = newton.ModelBuilder()
        b.add_particle((0.0, 0.0, 0.1), (0.0, 0.0, 0.0), 0.1, radius=0.05)
        b.add_ground_plane()
        m = b.finalize(requires_grad=True)
        m.soft_contact_restitution = 0.5
        m.particle_grid = None
        pipe = newton.CollisionPipeline(m, soft_contact_gap=10.0)
        contacts = pipe.contacts()
        solver = newton.solvers.SolverXPBD(m, iterations=4, enable_restitution=True)
        states = [m.state() for _ in range(61)]
        states[0].particle_qd.assign(np.array([[0.0, 0.0, vz]], np.float32))
        pipe.collide(states[0], contacts)
        loss = wp.zeros(1, dtype=float, requires_grad=True)
        tape = wp.Tape()
        with tape:
            for t in range(60):
                solver.step(states[t], states[t + 1], None, contacts, 1.0 / 600)
            wp.launch(_particle_z, dim=1, inputs=[states[-1].particle_q, loss])
        if with_grad:
            tape.backward(loss)
            return float(states[0].particle_qd.grad.numpy()[0, 2])
        return float(loss.numpy()[0])

    g = height(-2.0, True)
    fd = (height(-2.0 + 1e-2, False) - height(-2.0 - 1e-2, False)) / 2e-2
    assert height(-2.0, False) > 0.05  # it has bounced and is rising
    assert abs(fd) > 1e-3
    assert abs(g - fd) < 0.05 * abs(fd) + 1e-3, (g, fd)


@wp.kernel
def _particle_z(q: wp.array(dtype=wp.vec3), loss: wp.array(dtype=float)):
    loss[0] = q[0][2]


def test_edges_touch_where_no_probe_point_does():
    """Crossed capsules and a box lying edge-down across a wider box touch only along edges (every probe point
    is outside the other shape): the probe edges find the contact at the deepest point, and under XPBD the
    upper shape comes to rest on the lower one instead of falling through it."""
    import math

    def scene(kind: str) -> newton.ModelBuilder:
        b = newton.ModelBuilder()
        if kind == "capsules":
            b.add_shape_capsule(-1, xform=wp.transform((0.0, 0.0, 0.0), wp.quat_from_axis_angle(
                wp.vec3(0.0, 1.0, 0.0), math.pi / 2)), radius=0.1, half_height=1.0)
            top = b.add_body(xform=wp.transform((0.0, 0.0, 0.19), wp.quat_from_axis_angle(
                wp.vec3(1.0, 0.0, 0.0), math.pi / 2)))
            b.add_shape_capsule(top, radius=0.1, half_height=1.0)
        else:
            b.add_shape_box(-1, hx=0.5, hy=0.5, hz=0.5)
            top = b.add_body(xform=wp.transform((0.0, 0.0, 0.5 + 0.3 * math.sqrt(2.0) - 0.01),
                                                wp.quat_from_axis_angle(wp.vec3(1.0, 0.0, 0.0), math.pi / 4)))
            b.add_shape_box(top, hx=1.0, hy=0.3, hz=0.3)
        return b

    # (the box balanced on its edge tips onto a face: it ends 0.3 above the lower box's top, or 0.42 on its edge;
    # without edge contacts it sank half a meter into the lower box before any corner met the other)
    for kind, lowest in (("capsules", 0.18), ("boxes", 0.78)):
        b = scene(kind)
        b.body_qd[0] = (0.0, 0.0, -0.5, 0.0, 0.0, 0.0)  # moving down onto the lower shape
        m = b.finalize()
        pipeline = newton.CollisionPipeline(m)
        contacts = pipeline.contacts()
        pipeline.collide(m.state(), contacts)
        n = int(contacts.rigid_contact_count.numpy()[0])
        normals = contacts.rigid_contact_normal.numpy()[:n]
        assert n >= 1 and np.any(np.abs(normals[:, 2]) > 0.99), kind  # the edge contact pushes up (or down)
        s = run(m, newton.solvers.SolverXPBD(m, iterations=8), 600, 1.0 / 240, pipeline)[-1]
        assert lowest < s.body_q.numpy()[0][2] < lowest + 0.2, kind
        assert np.abs(s.body_qd.numpy()[0][:3]).max() < 0.1, kind
