"""SolverSemiImplicit and the CollisionPipeline against analytic answers, and their gradients against
central finite differences of the same rollout."""

import math

import numpy as np
import pytest

import loomwork as wp
import loomwork.sim as newton


def rollout(model, solver, steps, dt, contacts=None, pipeline=None, collide_every=0, states=None):
    states = states or [model.state() for _ in range(steps + 1)]
    for t in range(steps):
        if pipeline is not None and collide_every and t % collide_every == 0:
            pipeline.collide(states[t], contacts)
        states[t].clear_forces()
        solver.step(states[t], states[t + 1], None, contacts, dt)
    return states


def test_free_fall_matches_symplectic_euler():
    b = newton.ModelBuilder(gravity=-9.81)
    b.add_particle((0.0, 0.0, 10.0), (1.0, 0.0, 0.0), 1.0)
    body = b.add_body(xform=wp.transform((0.0, 0.0, 5.0), wp.quat_identity()))
    b.add_shape_sphere(body, radius=0.1)
    m = b.finalize()
    dt, n = 0.01, 100
    s = rollout(m, newton.solvers.SolverSemiImplicit(m), n, dt)[-1]
    # Symplectic Euler: z_n = z0 - g dt^2 n (n + 1) / 2.
    drop = 9.81 * dt * dt * n * (n + 1) / 2
    np.testing.assert_allclose(s.particle_q.numpy()[0], [1.0, 0.0, 10.0 - drop], rtol=1e-4)
    np.testing.assert_allclose(s.body_q.numpy()[0][:3], [0.0, 0.0, 5.0 - drop], rtol=1e-4)
    np.testing.assert_allclose(s.body_qd.numpy()[0][:3], [0.0, 0.0, -9.81 * n * dt], rtol=1e-4)


def test_particles_and_box_rest_on_the_ground():
    b = newton.ModelBuilder()
    cfg = newton.ModelBuilder.ShapeConfig(ke=1.0e5, kd=1.0e3, mu=0.5, density=100.0)
    b.add_particle((0.0, 0.0, 0.5), (0.0, 0.0, 0.0), 1.0, radius=0.05)
    body = b.add_body(xform=wp.transform((2.0, 0.0, 0.3), wp.quat_identity()))
    b.add_shape_box(body, hx=0.2, hy=0.2, hz=0.2, cfg=cfg)
    b.add_ground_plane(cfg=cfg)
    m = b.finalize()
    m.soft_contact_ke, m.soft_contact_kd = 1.0e4, 10.0
    pipe = newton.CollisionPipeline(m)
    contacts = pipe.contacts()
    s = rollout(m, newton.solvers.SolverSemiImplicit(m), 1500, 1.0e-3, contacts, pipe, collide_every=1)[-1]
    p = s.particle_q.numpy()[0]
    assert abs(p[2] - 0.05) < 0.01, p  # sits on its radius (penalty sag included)
    q = s.body_q.numpy()[0]
    assert abs(q[2] - 0.2) < 0.01, q
    assert np.abs(s.body_qd.numpy()[0]).max() < 0.05
    assert np.abs(q[3:] - [0, 0, 0, 1]).max() < 1e-2  # it did not tip over


def test_rolling_sphere_reaches_five_sevenths_of_its_speed():
    r, v0 = 0.2, 2.0
    b = newton.ModelBuilder()
    cfg = newton.ModelBuilder.ShapeConfig(ke=1.0e5, kd=1.0e2, kf=1.0e4, mu=0.8, density=500.0)
    body = b.add_body(xform=wp.transform((0.0, 0.0, r), wp.quat_identity()))
    b.add_shape_sphere(body, radius=r, cfg=cfg)
    b.add_ground_plane(cfg=cfg)
    m = b.finalize()
    qd = m.body_qd.numpy()
    qd[0, 0] = v0
    m.body_qd.assign(qd)
    pipe = newton.CollisionPipeline(m)
    contacts = pipe.contacts()
    solver = newton.solvers.SolverSemiImplicit(m, angular_damping=0.0)
    s = rollout(m, solver, 2000, 5.0e-4, contacts, pipe, collide_every=1)[-1]
    v = s.body_qd.numpy()[0]
    assert abs(v[0] - 5.0 / 7.0 * v0) < 0.03 * v0, v
    assert abs(v[4] * r - v[0]) < 0.03 * v0, v  # rolling without slipping: w_y r = v_x


def test_spring_pendulum_period():
    # A stiff spring holding a mass below a pinned particle: vertical oscillation with period 2 pi sqrt(m/k).
    k, mass = 400.0, 1.0
    b = newton.ModelBuilder(gravity=0.0)
    b.add_particle((0.0, 0.0, 0.0), (0.0, 0.0, 0.0), 0.0)
    b.add_particle((0.0, 0.0, -1.0), (0.0, 0.0, 0.0), mass)
    b.add_spring(0, 1, k, 0.0, 0.0)
    m = b.finalize()
    q = m.particle_q.numpy()
    q[1, 2] = -1.1
    m.particle_q.assign(q)
    dt = 1.0e-4
    period = 2.0 * math.pi * math.sqrt(mass / k)
    states = rollout(m, newton.solvers.SolverSemiImplicit(m), int(period / dt), dt)
    np.testing.assert_allclose(states[-1].particle_q.numpy()[1], [0.0, 0.0, -1.1], atol=2e-3)
    mid = states[int(period / dt / 2)].particle_q.numpy()[1]
    np.testing.assert_allclose(mid, [0.0, 0.0, -0.9], atol=2e-3)


def test_worlds_do_not_interact_and_replicas_match():
    one = newton.ModelBuilder()
    one.add_particle((0.0, 0.0, 0.3), (0.0, 0.0, 0.0), 1.0, radius=0.1)
    one.add_particle((0.0, 0.0, 0.1), (0.0, 0.0, 0.0), 1.0, radius=0.1)
    b = newton.ModelBuilder()
    b.replicate(one, 3, spacing=(0.0, 0.0, 0.0))  # all three worlds on top of each other
    b.add_ground_plane()
    m = b.finalize()
    assert m.world_count == 3 and m.particle_world.numpy().tolist() == [0, 0, 1, 1, 2, 2]
    pipe = newton.CollisionPipeline(m)
    contacts = pipe.contacts()
    s = rollout(m, newton.solvers.SolverSemiImplicit(m), 300, 1.0e-3, contacts, pipe, collide_every=1)[-1]
    q = s.particle_q.numpy().reshape(3, 2, 3)
    np.testing.assert_allclose(q[1], q[0], atol=1e-5)
    np.testing.assert_allclose(q[2], q[0], atol=1e-5)
    assert q[0, 0, 2] - q[0, 1, 2] > 0.15  # the pair inside a world did push apart


@wp.kernel
def _distance_loss(q: wp.array(dtype=wp.vec3), index: int, target: wp.vec3, loss: wp.array(dtype=float)):
    d = q[index] - target
    loss[0] = wp.dot(d, d)


def _grad_check(make_model, param, index, target, steps, dt, eps, rtol, collide=True):
    """d loss / d param by Tape against central finite differences of the same rollout."""

    def run(value, with_grad):
        model = make_model(value)
        solver = newton.solvers.SolverSemiImplicit(model)
        pipe = newton.CollisionPipeline(model, soft_contact_gap=10.0)
        contacts = pipe.contacts() if collide else None
        states = [model.state() for _ in range(steps + 1)]
        if collide:
            pipe.collide(states[0], contacts)
        loss = wp.zeros(1, dtype=float, requires_grad=True)
        tape = wp.Tape()
        with tape:
            for t in range(steps):
                states[t].clear_forces()
                solver.step(states[t], states[t + 1], None, contacts, dt)
            wp.launch(_distance_loss, dim=1, inputs=[states[-1].particle_q, index, wp.vec3(*target), loss])
        if with_grad:
            tape.backward(loss)
            return param(model, states).grad.numpy().copy()
        return float(loss.numpy()[0])

    return run


def test_gradient_of_a_bounce_with_friction_through_contact():
    def make(v0):
        b = newton.ModelBuilder()
        b.add_particle((0.0, 0.0, 0.5), tuple(v0), 1.0, radius=0.05)
        b.add_ground_plane(cfg=newton.ModelBuilder.ShapeConfig(ke=1.0e4, kd=10.0, kf=100.0, mu=0.3))
        m = b.finalize(requires_grad=True)
        m.soft_contact_ke, m.soft_contact_kd, m.soft_contact_kf, m.soft_contact_mu = 1.0e4, 10.0, 100.0, 0.3
        return m

    v0 = np.array([1.0, 0.5, -2.0])
    run = _grad_check(make, lambda m, s: s[0].particle_qd, 0, (1.0, 1.0, 0.5), 200, 2.0e-3, 1e-3, 0.02)
    g = run(v0, True)[0]
    fd = [(run(v0 + 1e-3 * e, False) - run(v0 - 1e-3 * e, False)) / 2e-3 for e in np.eye(3)]
    np.testing.assert_allclose(g, fd, rtol=0.03, atol=2e-3)


def test_gradient_of_spring_stiffness():
    def make(ke):
        b = newton.ModelBuilder(gravity=-9.81)
        b.add_particle((0.0, 0.0, 1.0), (0.0, 0.0, 0.0), 0.0)
        b.add_particle((0.3, 0.0, 1.0), (0.0, 0.0, 0.0), 0.5)
        b.add_spring(0, 1, float(ke), 0.5, 0.0)
        return b.finalize(requires_grad=True)

    run = _grad_check(make, lambda m, s: m.spring_stiffness, 1, (0.0, 0.0, 0.0), 150, 2.0e-3, 0, 0, collide=False)
    ke = 50.0
    g = run(ke, True)[0]
    fd = (run(ke + 0.05, False) - run(ke - 0.05, False)) / 0.1
    assert abs(g - fd) < 0.02 * abs(fd) + 1e-4, (g, fd)


def test_gradient_of_a_cloth_parameter():
    def make(tri_ke):
        b = newton.ModelBuilder()
        b.add_cloth_grid(pos=(0.0, 0.0, 1.0), rot=wp.quat_identity(), vel=(0.0, 0.0, 0.0), dim_x=3, dim_y=3,
                         cell_x=0.1, cell_y=0.1, mass=0.05, fix_left=True, tri_ke=float(tri_ke),
                         tri_ka=float(tri_ke), tri_kd=0.1, edge_ke=0.01, particle_radius=0.01)
        return b.finalize(requires_grad=True)

    run = _grad_check(make, lambda m, s: m.tri_materials, 15, (0.3, 0.3, 0.5), 100, 1.0e-3, 0, 0, collide=False)
    ke = 200.0
    g = run(ke, True)[:, :2].sum()  # d loss / d tri_ke plus d loss / d tri_ka, the same parameter in both
    fd = (run(ke + 0.5, False) - run(ke - 0.5, False)) / 1.0
    assert abs(g - fd) < 0.03 * abs(fd) + 1e-5, (g, fd)


def test_bending_forces_are_minus_the_gradient_of_the_bending_energy():
    from loomwork.sim.builder.cloth import dihedral_angle
    from loomwork.sim.solvers.forces import bending_forces_kernel

    b = newton.ModelBuilder()
    for p in [(0, 0, 0), (1, 0, 0), (0, 1, 0), (1, 1, 0.3)]:
        b.add_particle(p, (0, 0, 0), 1.0)
    b.add_edge(0, 3, 1, 2, edge_ke=1.5)
    m = b.finalize()
    x = m.particle_q.numpy().astype(np.float64) + np.random.default_rng(0).normal(size=(4, 3)) * 0.1
    f = wp.zeros(4, dtype=wp.vec3)
    wp.launch(bending_forces_kernel, dim=1, inputs=[wp.array(x.astype(np.float32), dtype=wp.vec3),
                                                    wp.zeros(4, dtype=wp.vec3), m.edge_indices, m.edge_rest_angle,
                                                    m.edge_bending_properties], outputs=[f])
    rest = float(m.edge_rest_angle.numpy()[0])

    def energy(y):
        return 0.75 * (dihedral_angle(y[0], y[3], y[1], y[2]) - rest) ** 2

    grad = np.zeros_like(x)
    for i in range(4):
        for k in range(3):
            d = np.zeros_like(x)
            d[i, k] = 1e-6
            grad[i, k] = (energy(x + d) - energy(x - d)) / 2e-6
    np.testing.assert_allclose(f.numpy(), -grad, atol=0.01 * np.abs(grad).max())


def test_bad_input_is_named():
    b = newton.ModelBuilder()
    with pytest.raises(ValueError, match="mass"):
        b.add_particle((0, 0, 0), (0, 0, 0), -1.0)
    with pytest.raises(ValueError, match="non-finite"):
        b.add_particle((0, float("nan"), 0), (0, 0, 0), 1.0)
    b.add_particle((0, 0, 0), (0, 0, 0), 1.0)
    with pytest.raises(IndexError, match="particle j=5"):
        b.add_spring(0, 5, 1.0, 0.0, 0.0)
    with pytest.raises(IndexError, match="body 3"):
        b.add_shape_sphere(3, radius=0.1)
    body = b.add_link()
    with pytest.raises(ValueError, match="zero mass"):
        b.finalize()
    b.add_shape_box(body, hx=0.1, hy=0.1, hz=0.1)
    b.add_joint_free(body)
    m = b.finalize()
    solver = newton.solvers.SolverSemiImplicit(m)
    s0, s1 = m.state(), m.state()
    with pytest.raises(ValueError, match="dt must be > 0"):
        solver.step(s0, s1, None, None, 0.0)
    with pytest.raises(ValueError, match="different states"):
        solver.step(s0, s0, None, None, 0.01)
    with pytest.raises(TypeError, match="Model"):
        newton.solvers.SolverSemiImplicit(b)


def test_check_finite_names_the_step_and_the_particle():
    b = newton.ModelBuilder()
    b.add_particle((0.0, 0.0, 1.0), (0.0, 0.0, 0.0), 1.0)
    b.add_particle((0.1, 0.0, 1.0), (0.0, 0.0, 0.0), 1.0)
    b.add_spring(0, 1, 1.0e9, 0.0, 0.0)  # far too stiff for the step: it blows up
    b.particle_max_velocity = float("inf")
    m = b.finalize()
    m.particle_grid = None
    q = m.particle_q.numpy()
    q[1, 0] = 0.2
    m.particle_q.assign(q)
    solver = newton.solvers.SolverSemiImplicit(m, check_finite=True)
    with pytest.raises(FloatingPointError, match=r"step \d+ made particle_q\[\d\] non-finite .* particle \d"):
        rollout(m, solver, 200, 0.01)


def test_particles_rest_on_an_sdf_volume_and_on_a_mesh():
    # A cube of half size 0.5 at the origin as a signed-distance volume, and a sphere of radius 0.5 as a mesh:
    # a particle dropped on either comes to rest 0.5 m plus its radius above the origin.
    h = 0.05
    g = np.arange(-0.8, 0.8 + 1e-9, h)
    x, y, z = np.meshgrid(g, g, g, indexing="ij")
    sdf = (np.maximum(np.maximum(np.abs(x), np.abs(y)), np.abs(z)) - 0.5).astype(np.float32)
    volume = wp.Volume.load_from_numpy(sdf, min_world=(g[0], g[0], g[0]), voxel_size=h, bg_value=1.0)
    u, v = np.meshgrid(np.linspace(0, np.pi, 24), np.linspace(0, 2 * np.pi, 48, endpoint=False), indexing="ij")
    verts = 0.5 * np.stack([np.sin(u) * np.cos(v), np.sin(u) * np.sin(v), np.cos(u)], -1).reshape(-1, 3)
    tris = []
    for i in range(23):
        for j in range(48):
            a, b, c, d = i * 48 + j, i * 48 + (j + 1) % 48, (i + 1) * 48 + (j + 1) % 48, (i + 1) * 48 + j
            tris += [(a, d, c), (a, c, b)]
    mesh = newton.Mesh(verts, np.asarray(tris).reshape(-1))
    for add in (lambda b: b.add_shape_sdf(-1, volume=volume), lambda b: b.add_shape_mesh(-1, mesh=mesh)):
        b = newton.ModelBuilder()
        b.add_particle((0.0, 0.0, 1.0), (0.0, 0.0, 0.0), 1.0, radius=0.05)
        add(b)
        m = b.finalize()
        m.soft_contact_ke, m.soft_contact_kd, m.soft_contact_mu = 1.0e4, 50.0, 1.0
        pipe = newton.CollisionPipeline(m, soft_contact_gap=0.02)
        s = rollout(m, newton.solvers.SolverSemiImplicit(m), 2000, 1.0e-3, pipe.contacts(), pipe, collide_every=1)[-1]
        p = s.particle_q.numpy()[0]
        np.testing.assert_allclose(p, [0.0, 0.0, 0.55], atol=5e-3)


def test_dropped_particle_contacts_are_reported_under_check_finite():
    b = newton.ModelBuilder(gravity=0.0)
    for k in range(20):  # twenty particles piled into one spot: each touches nineteen others
        b.add_particle((0.001 * k, 0.0, 0.0), (0.0, 0.0, 0.0), 1.0, radius=0.1)
    m = b.finalize()
    solver = newton.solvers.SolverSemiImplicit(m, check_finite=True)
    with pytest.raises(RuntimeError, match="touched 19 others"):
        rollout(m, solver, 1, 1.0e-4)


def test_cloth_self_contact_keeps_a_sheet_on_top_of_another():
    b = newton.ModelBuilder()
    for z in (0.3, 0.6):
        b.add_cloth_grid(pos=(-0.5, -0.5, z), rot=wp.quat_identity(), vel=(0.0, 0.0, 0.0), dim_x=10, dim_y=10,
                         cell_x=0.1, cell_y=0.1, mass=0.01, tri_ke=1.0e2, tri_ka=1.0e2, tri_kd=1.0e-2, edge_ke=1.0e-3,
                         particle_radius=0.02)
    b.add_ground_plane(cfg=newton.ModelBuilder.ShapeConfig(ke=1.0e3, kd=1.0))
    m = b.finalize()
    m.soft_contact_ke, m.soft_contact_kd, m.particle_ke, m.particle_kd = 1.0e3, 1.0, 1.0e3, 1.0
    pipe = newton.CollisionPipeline(m, soft_contact_gap=0.02)
    s = rollout(m, newton.solvers.SolverSemiImplicit(m), 1500, 1.0e-3, pipe.contacts(), pipe, collide_every=4)[-1]
    z = s.particle_q.numpy()[:, 2]
    lower, upper = z[:121], z[121:]
    assert abs(lower.mean() - 0.02) < 0.003
    assert abs(np.median(upper) - 0.04) < 0.003  # one radius above the lower sheet's particles' tops


def crossed_strips(requires_grad=False, vz=0.0):
    """A fixed strip along x at z = 0 and, 5 cm above it, a falling strip along y, each one 1 m x 0.3 m quad:
    their edges cross like a plus sign, and no vertex of either lies over the other's triangles (only
    edge-edge contact can hold it)."""
    b = newton.ModelBuilder(gravity=-9.81)
    b.add_cloth_grid(pos=(-0.5, -0.15, 0.0), rot=wp.quat_identity(), vel=(0.0, 0.0, 0.0), dim_x=1, dim_y=1,
                     cell_x=1.0, cell_y=0.3, mass=0.0, particle_radius=0.02)
    b.add_cloth_grid(pos=(-0.15, -0.5, 0.05), rot=wp.quat_identity(), vel=(0.0, 0.0, vz), dim_x=1, dim_y=1,
                     cell_x=0.3, cell_y=1.0, mass=0.01, tri_ke=1.0e2, tri_ka=1.0e2, tri_kd=1.0e-2,
                     particle_radius=0.02)
    m = b.finalize(requires_grad=requires_grad)
    m.particle_ke, m.particle_kd, m.particle_mu = 1.0e3, 1.0, 0.0
    return m


def test_edge_contact_holds_a_strip_lying_across_another():
    """With enable_edge_contact the upper strip comes to rest on the lower one's edges (about a radius
    above); without it, it falls through."""
    for edge_contact in (True, False):
        m = crossed_strips()
        solver = newton.solvers.SolverSemiImplicit(m, enable_edge_contact=edge_contact)
        z = rollout(m, solver, 500, 1.0e-3)[-1].particle_q.numpy()[4:, 2]
        if edge_contact:
            assert np.all(np.abs(z - 0.02) < 0.005), z
        else:
            assert np.all(z < -0.5), z


@wp.kernel
def _z_sum(q: wp.array(dtype=wp.vec3), loss: wp.array(dtype=float)):
    wp.atomic_add(loss, 0, q[wp.tid()][2])


def test_gradient_through_edge_contact_matches_finite_differences():
    """d(height of the upper strip after it lands on the lower one's edges)/d(its initial vertical speed)."""
    def height(vz, with_grad):
        m = crossed_strips(requires_grad=True, vz=vz)
        solver = newton.solvers.SolverSemiImplicit(m, enable_edge_contact=True)
        states = [m.state() for _ in range(121)]
        loss = wp.zeros(1, dtype=float, requires_grad=True)
        tape = wp.Tape()
        with tape:
            rollout(m, solver, 120, 1.0e-3, states=states)
            wp.launch(_z_sum, dim=m.particle_count, inputs=[states[-1].particle_q, loss])
        if with_grad:
            tape.backward(loss)
            return float(states[0].particle_qd.grad.numpy()[4:, 2].sum())
        return float(loss.numpy()[0])

    g = height(-0.5, True)
    fd = (height(-0.5 + 1e-3, False) - height(-0.5 - 1e-3, False)) / 2e-3
    assert abs(fd) > 1e-3
    assert abs(g - fd) < 0.05 * abs(fd) + 1e-3, (g, fd)


def cube_mesh(h):
    """A closed cube mesh of half-size ``h`` [m], outward winding."""
    v = np.array([[x, y, z] for z in (-h, h) for y in (-h, h) for x in (-h, h)], np.float32)
    quads = [(0, 2, 3, 1), (4, 5, 7, 6), (0, 1, 5, 4), (2, 6, 7, 3), (0, 4, 6, 2), (1, 3, 7, 5)]
    return newton.Mesh(v, np.array([[a, b, c, a, c, d] for a, b, c, d in quads], np.int32).reshape(-1))


@pytest.mark.parametrize("floor", ["plane", "mesh"])
def test_a_mesh_body_rests_on_the_ground_and_on_a_static_mesh(floor):
    """A cube mesh dropped on the ground plane or on a static mesh slab comes to rest on its face (its
    vertices probe the other shape, and a mesh probes a mesh)."""
    b = newton.ModelBuilder()
    cfg = newton.ModelBuilder.ShapeConfig(ke=1.0e5, kd=1.0e3, mu=0.5)
    body = b.add_body(xform=wp.transform((0.0, 0.0, 0.3), wp.quat_rpy(0.1, 0.05, 0.0)))
    b.add_shape_mesh(body, mesh=cube_mesh(0.1), cfg=cfg)
    if floor == "plane":
        b.add_ground_plane(cfg=cfg)
    else:
        b.add_shape_mesh(-1, xform=wp.transform((0.0, 0.0, -0.5), wp.quat_identity()), mesh=cube_mesh(0.5), cfg=cfg)
    m = b.finalize()
    pipe = newton.CollisionPipeline(m)
    s = rollout(m, newton.solvers.SolverSemiImplicit(m), 1200, 1.0e-3, pipe.contacts(), pipe, collide_every=1)[-1]
    q = s.body_q.numpy()[0]
    assert abs(q[2] - 0.1) < 3e-3, q
    x, y, z, w = q[3:]
    up = [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)]  # the third row of its rotation
    assert np.abs(up).max() > 1.0 - 1e-3, q  # flat on a face


def test_gradient_through_contacts_found_every_step_inside_the_tape():
    """A particle rolling off a static sphere: the contacts are found again each step inside the Tape (the normal
    turns as it rolls), and the gradient still matches central differences of the same rollout."""
    steps, dt = 150, 2.0e-3

    def run(v0, with_grad):
        b = newton.ModelBuilder()
        b.add_particle((0.05, 0.0, 0.56), tuple(v0), 1.0, radius=0.05)
        b.add_shape_sphere(-1, radius=0.5, cfg=newton.ModelBuilder.ShapeConfig(ke=1.0e4, kd=10.0, kf=10.0, mu=0.2))
        m = b.finalize(requires_grad=True)
        m.soft_contact_ke, m.soft_contact_kd, m.soft_contact_kf, m.soft_contact_mu = 1.0e4, 10.0, 10.0, 0.2
        solver = newton.solvers.SolverSemiImplicit(m)
        pipe = newton.CollisionPipeline(m, soft_contact_gap=0.02)
        states = [m.state() for _ in range(steps + 1)]
        contacts = [pipe.contacts() for _ in range(steps)]
        loss = wp.zeros(1, dtype=float, requires_grad=True)
        tape = wp.Tape()
        with tape:
            for t in range(steps):
                pipe.collide(states[t], contacts[t])
                states[t].clear_forces()
                solver.step(states[t], states[t + 1], None, contacts[t], dt)
            wp.launch(_distance_loss, dim=1, inputs=[states[-1].particle_q, 0, wp.vec3(1.0, 0.0, 0.0), loss])
        assert int(contacts[steps // 2].soft_contact_count.numpy()[0]) == 1  # still on the sphere half way
        if with_grad:
            tape.backward(loss)
            return states[0].particle_qd.grad.numpy()[0].copy()
        return float(loss.numpy()[0])

    v0 = np.array([0.8, 0.3, 0.0])
    g = run(v0, True)
    # (float32 rollouts: a step of 1e-3 in the vertical speed crosses a switch of the friction force and reads -0.22)
    fd = [(run(v0 + 2e-4 * e, False) - run(v0 - 2e-4 * e, False)) / 4e-4 for e in np.eye(3)]
    np.testing.assert_allclose(g, fd, rtol=0.05, atol=3e-3)
