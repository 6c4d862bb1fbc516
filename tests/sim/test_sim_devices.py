"""The simulation on a device whose memory the host cannot read in place (the `dev` fixture: a stand-in
in every run, the GPU when there is one): each solver, the collision pipeline with both broad phases and a
Tape through a rollout give what they give on the CPU."""

import math

import numpy as np

import loomwork as wp
import loomwork.sim as newton

# The stand-in runs the CPU's kernels (same numbers); a GPU rounds and orders atomics its own way.
TOL = {"rtol": 1e-3, "atol": 1e-4}


def cloth(device, requires_grad=False):
    b = newton.ModelBuilder()
    b.add_cloth_grid(pos=(-0.4, -0.4, 1.3), rot=wp.quat_identity(), vel=(0.0, 0.0, 0.0), dim_x=8, dim_y=8,
                     cell_x=0.1, cell_y=0.1, mass=0.02, tri_ke=1.0e3, tri_ka=1.0e3, tri_kd=1.0e-1, edge_ke=1.0e-2,
                     particle_radius=0.02)
    b.add_shape_sphere(-1, xform=wp.transform((0.0, 0.0, 0.8), wp.quat_identity()), radius=0.5)
    b.add_ground_plane()
    b.color()
    m = b.finalize(device=device, requires_grad=requires_grad)
    m.particle_kd = 1.0
    return m


def rigid(device):
    b = newton.ModelBuilder()
    shapes = (lambda body: b.add_shape_box(body, hx=0.2, hy=0.15, hz=0.1),
              lambda body: b.add_shape_capsule(body, radius=0.08, half_height=0.2),
              lambda body: b.add_shape_sphere(body, radius=0.12))
    for i in range(6):
        body = b.add_body(xform=wp.transform((0.15 * (i % 3), 0.1 * (i // 3), 0.15 + 0.25 * i),
                                             wp.quat_rpy(0.2 * i, 0.1, 0.3 * i)))
        shapes[i % 3](body)
    b.add_ground_plane()
    return b.finalize(device=device)


def chains(device):
    """Two worlds, each a three-link pendulum chain (revolute, ball, prismatic)."""
    world = newton.ModelBuilder()
    links = [world.add_link(mass=1.0, com=wp.vec3(0.0, 0.0, -0.3), inertia=wp.mat33(np.eye(3) * 0.01))
             for _ in range(3)]
    down = wp.transform((0.0, 0.0, -0.6), wp.quat_identity())
    joints = [world.add_joint_revolute(-1, links[0], axis=(0.0, 1.0, 0.0)),
              world.add_joint_ball(links[0], links[1], parent_xform=down),
              world.add_joint_prismatic(links[1], links[2], axis=(0.0, 0.0, 1.0), parent_xform=down,
                                        limit_lower=-0.1, limit_upper=0.1)]
    world.add_articulation(joints)
    world.joint_q[0] = 0.7
    b = newton.ModelBuilder()
    b.replicate(world, 2)
    return b.finalize(device=device)


def step_all(model, solver, steps, dt, pipeline=None):
    contacts = pipeline.contacts() if pipeline is not None else None
    s0, s1 = model.state(), model.state()
    newton.eval_fk(model, s0.joint_q, s0.joint_qd, s0)
    for _ in range(steps):
        if pipeline is not None:
            pipeline.collide(s0, contacts)
        s0.clear_forces()
        solver.step(s0, s1, None, contacts, dt)
        s0, s1 = s1, s0
    return s0, contacts


def on_both(dev, run):
    """run(device) on the CPU and on `dev`: the results agree."""
    cpu, other = run("cpu"), run(dev)
    for a, b in zip(cpu, other, strict=True):
        np.testing.assert_allclose(b, a, **TOL)
    return cpu


def test_cloth_on_a_sphere_semi_implicit_and_vbd(dev):
    def run(device):
        m = cloth(device)
        s, _ = step_all(m, newton.solvers.SolverSemiImplicit(m), 60, 1.0 / 60 / 16,
                        newton.CollisionPipeline(m, soft_contact_gap=0.02))
        v = cloth(device)
        t, _ = step_all(v, newton.solvers.SolverVBD(v, iterations=5), 10, 1.0 / 240,
                        newton.CollisionPipeline(v, soft_contact_gap=0.02))
        return s.particle_q.numpy(), t.particle_q.numpy()

    semi, vbd = on_both(dev, run)
    assert semi[:, 2].min() > 1.0 and vbd[:, 2].min() > 1.0  # held by the sphere's top (z = 1.3)


def test_rigid_shapes_through_both_broad_phases_under_xpbd(dev):
    def run(device):
        out = []
        for mode in ("explicit", "bvh"):
            m = rigid(device)
            s, contacts = step_all(m, newton.solvers.SolverXPBD(m, iterations=4), 40, 1.0 / 120,
                                   newton.CollisionPipeline(m, broad_phase=mode))
            out += [s.body_q.numpy(), contacts.rigid_contact_count.numpy()]
        return out

    q_explicit, n_explicit, q_bvh, n_bvh = on_both(dev, run)
    assert n_explicit[0] == n_bvh[0] > 0
    np.testing.assert_allclose(q_bvh, q_explicit, atol=1e-3)


def test_articulated_chains_under_featherstone(dev):
    def run(device):
        m = chains(device)
        s, _ = step_all(m, newton.solvers.SolverFeatherstone(m), 100, 1.0 / 240)
        return s.joint_q.numpy(), s.body_q.numpy()

    q, _ = on_both(dev, run)
    np.testing.assert_allclose(q[:6], q[6:], atol=1e-6)  # the two worlds swing alike (1 + 4 + 1 coordinates)
    assert abs(q[0] - 0.7) > 0.05 and np.all(np.isfinite(q))


def test_a_tape_through_a_rollout_with_contacts(dev):
    """d(mean height) / d(initial velocities) of a cloth falling onto the sphere, contacts found each step
    inside the Tape: the same gradient on both devices."""
    def run(device):
        m = cloth(device, requires_grad=True)
        solver = newton.solvers.SolverSemiImplicit(m)
        pipeline = newton.CollisionPipeline(m, soft_contact_gap=0.02)
        states = [m.state() for _ in range(31)]
        contacts = [pipeline.contacts() for _ in range(30)]
        loss = wp.zeros(1, dtype=float, requires_grad=True, device=device)
        tape = wp.Tape()
        with tape:
            for t in range(30):
                pipeline.collide(states[t], contacts[t])
                states[t].clear_forces()
                solver.step(states[t], states[t + 1], None, contacts[t], 1.0 / 60 / 16)
            wp.launch(_mean_height, dim=m.particle_count, inputs=[states[-1].particle_q, 1.0 / m.particle_count],
                      outputs=[loss], device=device)
        tape.backward(loss)
        return loss.numpy(), states[0].particle_qd.grad.numpy()

    _, grad = on_both(dev, run)
    assert np.abs(grad[:, 2]).min() > 1e-4 and math.isfinite(float(np.abs(grad).sum()))


@wp.kernel
def _mean_height(q: wp.array(dtype=wp.vec3), w: float, loss: wp.array(dtype=float)):
    wp.atomic_add(loss, 0, q[wp.tid()][2] * w)
