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
