"""SolverVBD: stiff cloth at large steps, resting contact, gradients, refusals."""

import numpy as np
import pytest

import loomwork as wp
import loomwork.sim as newton


def area_ratio(m, q):
    t = m.tri_indices.numpy()
    a = 0.5 * np.linalg.norm(np.cross(q[t[:, 1]] - q[t[:, 0]], q[t[:, 2]] - q[t[:, 0]]), axis=1)
    return a / m.tri_areas.numpy()


def step_n(m, solver, n, dt):
    s0, s1 = m.state(), m.state()
    for _ in range(n):
        s0.clear_forces()
        solver.step(s0, s1, None, None, dt)
        s0, s1 = s1, s0
    return s0


def test_stiff_cloth_hangs_at_frame_sized_steps_without_stretching():
    b = newton.ModelBuilder()
    b.add_cloth_grid(pos=(0.0, 0.0, 1.0), rot=wp.quat_rpy(np.pi / 2, 0.0, 0.0), vel=(0.0, 0.0, 0.0), dim_x=8,
                     dim_y=8, cell_x=0.1, cell_y=0.1, mass=0.02, fix_top=True, tri_ke=1.0e5, tri_ka=1.0e5,
                     tri_kd=1.0e-3, edge_ke=1.0e-2, particle_radius=0.01)
    m = b.finalize()
    s = step_n(m, newton.solvers.SolverVBD(m, iterations=20), 60, 1.0 / 60.0)  # one step per frame
    q = s.particle_q.numpy()
    assert np.isfinite(q).all()
    r = area_ratio(m, q)
    assert 0.97 < r.min() and r.max() < 1.05, (r.min(), r.max())
    assert np.abs(s.particle_qd.numpy()).max() < 1.0  # it has come (nearly) to rest


def test_cloth_lands_flat_on_the_ground():
    b = newton.ModelBuilder()
    b.add_cloth_grid(pos=(-0.4, -0.4, 0.3), rot=wp.quat_identity(), vel=(0.0, 0.0, 0.0), dim_x=8, dim_y=8,
                     cell_x=0.1, cell_y=0.1, mass=0.02, tri_ke=1.0e4, tri_ka=1.0e4, tri_kd=1.0e-3, particle_radius=0.02)
    b.add_ground_plane(cfg=newton.ModelBuilder.ShapeConfig(ke=1.0e5, mu=0.5))
    m = b.finalize()
    m.soft_contact_ke = 1.0e5
    s = step_n(m, newton.solvers.SolverVBD(m, iterations=10), 120, 1.0 / 120.0)
    z = s.particle_q.numpy()[:, 2]
    assert np.all(np.abs(z - 0.02) < 0.005), (z.min(), z.max())


@wp.kernel
def _loss(q: wp.array(dtype=wp.vec3), loss: wp.array(dtype=float)):
    wp.atomic_add(loss, 0, q[wp.tid()][0] * q[wp.tid()][2])


def test_gradient_through_vbd_matches_finite_differences():
    def run(vx, with_grad):
        b = newton.ModelBuilder()
        b.add_cloth_grid(pos=(0.0, 0.0, 1.0), rot=wp.quat_identity(), vel=(vx, 0.0, 0.5), dim_x=2, dim_y=2,
                         cell_x=0.1, cell_y=0.1, mass=0.05, fix_left=True, tri_ke=100.0, tri_ka=100.0, tri_kd=0.0,
                         particle_radius=0.01)
        m = b.finalize(requires_grad=True)
        solver = newton.solvers.SolverVBD(m, iterations=4)
        states = [m.state() for _ in range(11)]
        loss = wp.zeros(1, dtype=float, requires_grad=True)
        tape = wp.Tape()
        with tape:
            for t in range(10):
                solver.step(states[t], states[t + 1], None, None, 1.0 / 60.0)
            wp.launch(_loss, dim=m.particle_count, inputs=[states[-1].particle_q, loss])
        if with_grad:
            tape.backward(loss)
            g = states[0].particle_qd.grad.numpy()
            return float(g[m.particle_inv_mass.numpy() > 0, 0].sum())
        return float(loss.numpy()[0])

    g = run(0.3, True)
    fd = (run(0.3 + 1e-3, False) - run(0.3 - 1e-3, False)) / 2e-3
    assert abs(g - fd) < 0.03 * abs(fd) + 1e-3, (g, fd)


def test_dynamic_bodies_are_refused():
    b = newton.ModelBuilder()
    body = b.add_body()
    b.add_shape_sphere(body, radius=0.1)
    with pytest.raises(ValueError, match="dynamic rigid bodies"):
        newton.solvers.SolverVBD(b.finalize())


def test_gradient_through_bending_and_sliding_contact_matches_finite_differences():
    """Bending and a sliding ground contact with friction: the initial-velocity gradient matches central FD."""
    def run(vx, with_grad):
        b = newton.ModelBuilder()
        # Tilted so that it lands on one side and bends; every particle ends on the ground, sliding.
        b.add_cloth_grid(pos=(0.0, 0.0, 0.015), rot=wp.quat_rpy(0.15, 0.0, 0.0), vel=(vx, 0.0, 0.0), dim_x=2,
                         dim_y=2, cell_x=0.1, cell_y=0.1, mass=0.05, tri_ke=100.0, tri_ka=100.0, tri_kd=0.0,
                         edge_ke=0.5, particle_radius=0.02)
        b.add_ground_plane(cfg=newton.ModelBuilder.ShapeConfig(ke=1.0e3, mu=0.4))
        m = b.finalize(requires_grad=True)
        m.soft_contact_ke = 1.0e3
        solver = newton.solvers.SolverVBD(m, iterations=4)
        states = [m.state() for _ in range(11)]
        loss = wp.zeros(1, dtype=float, requires_grad=True)
        tape = wp.Tape()
        with tape:
            for t in range(10):
                solver.step(states[t], states[t + 1], None, None, 1.0 / 120.0)
            wp.launch(_loss, dim=m.particle_count, inputs=[states[-1].particle_q, loss])
        if with_grad:
            tape.backward(loss)
            return float(states[0].particle_qd.grad.numpy()[:, 0].sum())
        return float(loss.numpy()[0])

    g = run(1.0, True)
    fd = (run(1.0 + 1e-3, False) - run(1.0 - 1e-3, False)) / 2e-3
    assert abs(g - fd) < 0.03 * abs(fd) + 1e-3, (g, fd)
