"""A Newton diffsim program runs as written with `import loomwork as wp` and `import loomwork.sim as newton`:
the ball example's flow (a captured forward+backward graph replayed, then a gradient step)."""

import numpy as np

import loomwork as wp
import loomwork.sim as newton


@wp.kernel
def loss_kernel(pos: wp.array(dtype=wp.vec3), target: wp.vec3, loss: wp.array(dtype=float)):
    delta = pos[0] - target
    loss[0] = wp.dot(delta, delta)


@wp.kernel
def step_kernel(x: wp.array(dtype=wp.vec3), grad: wp.array(dtype=wp.vec3), alpha: float):
    tid = wp.tid()
    x[tid] = x[tid] - grad[tid] * alpha


def test_diffsim_ball_flow_with_a_captured_graph():
    scene = newton.ModelBuilder(up_axis=newton.Axis.Z)
    scene.add_particle(pos=wp.vec3(0.0, -0.5, 1.0), vel=wp.vec3(0.0, 5.0, -5.0), mass=1.0)
    cfg = newton.ModelBuilder.ShapeConfig(ke=1.0e4, kf=0.0, kd=1.0e1, mu=0.2)
    scene.add_shape_box(body=-1, xform=wp.transform(wp.vec3(0.0, 2.0, 1.0), wp.quat_identity()), hx=1.0, hy=0.25,
                        hz=1.0, cfg=cfg)
    scene.add_ground_plane(cfg=cfg)
    model = scene.finalize(requires_grad=True)
    model.soft_contact_ke, model.soft_contact_kf, model.soft_contact_kd, model.soft_contact_mu = 1.0e4, 0.0, 10.0, 0.2
    model.soft_contact_restitution = 1.0
    solver = newton.solvers.SolverSemiImplicit(model)
    steps = 36 * 8
    states = [model.state() for _ in range(steps + 1)]
    control = model.control()
    pipeline = newton.CollisionPipeline(model, broad_phase="explicit", soft_contact_gap=10.0, requires_grad=True)
    contacts = pipeline.contacts()
    pipeline.collide(states[0], contacts)
    loss = wp.zeros(1, dtype=wp.float32, requires_grad=True)
    tapes = []

    def forward_backward():
        tape = wp.Tape()
        with tape:
            for t in range(steps):
                states[t].clear_forces()
                solver.step(states[t], states[t + 1], control, contacts, 1.0 / 60.0 / 8)
            wp.launch(loss_kernel, dim=1, inputs=[states[-1].particle_q, (0.0, -2.0, 1.5), loss])
        tape.backward(loss)
        tapes.append(tape)

    with wp.ScopedCapture() as capture:
        forward_backward()
    history = []
    for _ in range(5):
        wp.capture_launch(capture.graph)
        x = states[0].particle_qd
        history.append(float(loss.numpy()[0]))
        wp.launch(step_kernel, dim=len(x), inputs=[x, x.grad, 0.02])
        tapes[-1].zero()
    assert np.all(np.diff(history) < 0.0), history


def test_box_pyramid_example_settles_by_its_own_criteria():
    """Newton 1.8's box-pyramid contact example (its test mode: no wrecking ball), scaled to 6 rows: boxes
    stacked 0.04 m apart on a plane under XPBD with 2 iterations and relaxed contacts, found each substep
    through the "sap" broad phase; the example's own check: the top cube moves under 0.5 m sideways and
    settles less than the rows' gaps plus 0.1 m (it settles exactly the gaps: the stack closes)."""
    half, spacing, rows = 0.4, 0.84, 6
    builder = newton.ModelBuilder()
    builder.add_shape_plane(xform=wp.transform_identity(), width=0.0, length=0.0)
    for level in range(rows):
        n = rows - level
        for i in range(n):
            body = builder.add_body(xform=wp.transform(p=wp.vec3(-(n - 1) * spacing / 2 + i * spacing, 15.0,
                                                                 level * spacing + half), q=wp.quat_identity()))
            builder.add_shape_box(body, hx=half, hy=half, hz=half)
    model = builder.finalize()
    pipeline = newton.CollisionPipeline(model, broad_phase="sap")
    solver = newton.solvers.SolverXPBD(model, iterations=2, rigid_contact_relaxation=0.8)
    contacts = pipeline.contacts()
    state_0, state_1, control = model.state(), model.state(), model.control()
    newton.eval_fk(model, model.joint_q, model.joint_qd, state_0)
    start = state_0.body_q.numpy()[:, :3].copy()
    for _ in range(60 * 10):  # 60 frames of 10 substeps at 100 fps
        state_0.clear_forces()
        pipeline.collide(state_0, contacts)
        solver.step(state_0, state_1, control, contacts, 1.0 / 1000)
        state_0, state_1 = state_1, state_0
    q = state_0.body_q.numpy()
    top = model.body_count - 1
    assert np.linalg.norm(q[top, :2] - start[top, :2]) < 0.5
    gaps = (rows - 1) * (spacing - 2 * half)
    assert start[top, 2] - q[top, 2] < gaps + 0.1
    np.testing.assert_allclose(q[:, 2], start[:, 2] - (start[:, 2] - half) / spacing * (spacing - 2 * half),
                               atol=5e-3)  # every row rests on the one below
    assert np.abs(q[:, :2] - start[:, :2]).max() < 0.01
