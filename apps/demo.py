"""The showcase: differentiable simulation on geometry, rendered to a picture and a USD stage.

    python -m loomwork.apps.demo [--cloth 32] [--frames 90] [--iterations 16] [--out loomwork_demo]

1. A cloth sheet falls onto a triangle mesh (a torus built here, a ``loomwork.sim.Mesh`` collision
   shape found through its BVH) and the ground: SolverSemiImplicit with membrane, bending and contact
   forces. Every frame is recorded into ``<out>.usda`` (when usd-core is installed) and the last one is
   ray-cast into ``<out>.png``.
2. A ball is thrown so that, after bouncing on the ground (penalty contact with friction), it lands on
   a target: ``wp.Tape`` differentiates the whole rollout, contacts included, and gradient descent on
   the throw's velocity brings the miss distance down.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

import loomwork as wp
import loomwork.sim as newton


def torus_mesh(major: float = 0.6, minor: float = 0.25, n_major: int = 32, n_minor: int = 16) -> newton.Mesh:
    """A closed torus around the Z axis, outward-wound."""
    u = np.linspace(0.0, 2.0 * np.pi, n_major, endpoint=False)
    v = np.linspace(0.0, 2.0 * np.pi, n_minor, endpoint=False)
    uu, vv = np.meshgrid(u, v, indexing="ij")
    verts = np.stack([(major + minor * np.cos(vv)) * np.cos(uu), (major + minor * np.cos(vv)) * np.sin(uu),
                      minor * np.sin(vv)], axis=-1).reshape(-1, 3)
    tris = []
    for i in range(n_major):
        for j in range(n_minor):
            a, b = i * n_minor + j, ((i + 1) % n_major) * n_minor + j
            c, d = ((i + 1) % n_major) * n_minor + (j + 1) % n_minor, i * n_minor + (j + 1) % n_minor
            tris += [(a, b, c), (a, c, d)]
    return newton.Mesh(verts, np.asarray(tris).reshape(-1))


def drape(cloth: int, frames: int, usd_path: Path | None, png_path: Path | None) -> np.ndarray:
    """Drop a ``cloth`` x ``cloth`` sheet onto a torus; returns the final particle positions."""
    b = newton.ModelBuilder()
    size = 2.0
    b.add_cloth_grid(pos=(-size / 2, -size / 2, 1.2), rot=wp.quat_identity(), vel=(0.0, 0.0, 0.0), dim_x=cloth,
                     dim_y=cloth, cell_x=size / cloth, cell_y=size / cloth, mass=0.01, tri_ke=2.0e2, tri_ka=2.0e2,
                     tri_kd=1.0e-2, edge_ke=1.0e-3, particle_radius=0.015)
    surface = newton.ModelBuilder.ShapeConfig(ke=1.0e3, kd=1.0, kf=1.0e2, mu=0.5)
    b.add_shape_mesh(-1, xform=wp.transform((0.0, 0.0, 0.25), wp.quat_identity()), mesh=torus_mesh(), cfg=surface)
    b.add_ground_plane(cfg=surface)
    model = b.finalize()
    model.soft_contact_ke, model.soft_contact_kd, model.soft_contact_kf = 1.0e3, 1.0, 1.0e2
    model.particle_grid = None  # the sheet's own particles do not need to collide here
    solver = newton.solvers.SolverSemiImplicit(model)
    pipeline = newton.CollisionPipeline(model, soft_contact_gap=0.05)
    contacts = pipeline.contacts()
    s0, s1 = model.state(), model.state()
    viewer = None
    if usd_path is not None:
        try:
            from loomwork.render import ViewerUSD
            viewer = ViewerUSD(str(usd_path), fps=30)
            viewer.set_model(model)
        except ImportError as e:
            print(f"  (no USD file: {e})")
            viewer = None
    substeps = 32
    dt = 1.0 / 30.0 / substeps
    for frame in range(frames):
        for k in range(substeps):
            if k % 4 == 0:
                pipeline.collide(s0, contacts)
            s0.clear_forces()
            solver.step(s0, s1, None, contacts, dt)
            s0, s1 = s1, s0
        if viewer is not None:
            viewer.begin_frame(frame / 30.0)
            viewer.log_state(s0)
            viewer.end_frame()
    if viewer is not None:
        viewer.close()
    if png_path is not None:
        from loomwork.render import ViewerImage
        image = ViewerImage(None, width=640, height=400, camera_pos=(0.0, 1.9, 2.6), camera_front=(0.0, -0.65, -1.0))
        image.set_model(model)
        image.begin_frame(0.0)
        image.log_state(s0)
        image.end_frame()
        image.renderer.write_png(str(png_path))
    return s0.particle_q.numpy()


@wp.kernel
def miss_distance(q: wp.array(dtype=wp.vec3), target: wp.vec3, loss: wp.array(dtype=float)):
    d = q[0] - target
    loss[0] = wp.dot(d, d)


@wp.kernel
def descend(v: wp.array(dtype=wp.vec3), grad: wp.array(dtype=wp.vec3), rate: float, max_step: float):
    # Gradient descent with the step length capped: contact makes the loss steep in places.
    i = wp.tid()
    g = grad[i]
    v[i] = v[i] - g * wp.min(rate, max_step / wp.max(wp.length(g), 1.0e-12))


def throw(iterations: int, steps: int = 90) -> list[float]:
    """Optimize a throw's velocity so the ball lands on a target after a bounce; returns the losses."""
    b = newton.ModelBuilder()
    b.add_particle((0.0, 0.0, 0.5), (1.0, 0.0, 0.0), 1.0, radius=0.05)
    b.add_ground_plane(cfg=newton.ModelBuilder.ShapeConfig(ke=1.0e4, kd=5.0, kf=50.0, mu=0.3))
    model = b.finalize(requires_grad=True)
    model.soft_contact_ke, model.soft_contact_kd, model.soft_contact_kf, model.soft_contact_mu = 1.0e4, 5.0, 50.0, 0.3
    solver = newton.solvers.SolverSemiImplicit(model)
    pipeline = newton.CollisionPipeline(model, soft_contact_gap=10.0)
    contacts = pipeline.contacts()
    states = [model.state() for _ in range(steps + 1)]
    pipeline.collide(states[0], contacts)  # the ground does not move: one set of contacts serves the rollout
    target = wp.vec3(2.0, 0.5, 0.3)
    loss = wp.zeros(1, dtype=float, requires_grad=True)
    losses = []
    for _ in range(iterations):
        tape = wp.Tape()
        with tape:
            for t in range(steps):
                states[t].clear_forces()
                solver.step(states[t], states[t + 1], None, contacts, 1.0 / 120.0)
            wp.launch(miss_distance, dim=1, inputs=[states[-1].particle_q, target, loss])
        tape.backward(loss)
        losses.append(float(loss.numpy()[0]))
        v = states[0].particle_qd
        wp.launch(descend, dim=1, inputs=[v, v.grad, 0.2, 0.6])
        tape.zero()
    return losses


def main(argv: list[str] | None = None) -> int:
    """Run the showcase and say where its files are."""
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--cloth", type=int, default=32, help="cloth cells per side")
    p.add_argument("--frames", type=int, default=90, help="frames of the drape (30 per second)")
    p.add_argument("--iterations", type=int, default=16, help="gradient steps of the throw")
    p.add_argument("--out", default="loomwork_demo", help="output path without extension")
    a = p.parse_args(argv)
    if a.cloth < 2 or a.frames < 1 or a.iterations < 1:
        p.error("--cloth must be >= 2 and --frames, --iterations >= 1")
    out = Path(a.out)
    t0 = time.perf_counter()
    print(f"1. cloth {a.cloth}x{a.cloth} draping over a torus mesh, {a.frames} frames ...")
    q = drape(a.cloth, a.frames, out.with_suffix(".usda"), out.with_suffix(".png"))
    print(f"   cloth rests between z = {q[:, 2].min():.3f} and {q[:, 2].max():.3f} m "
          f"({time.perf_counter() - t0:.1f} s so far)")
    print(f"2. differentiating a bounce: {a.iterations} gradient steps on the throw velocity ...")
    losses = throw(a.iterations)
    print("   squared miss distance [m^2]: " + " -> ".join(f"{x:.4f}" for x in losses[:: max(len(losses) // 6, 1)]))
    print(f"wrote {out.with_suffix('.png')}" + (f" and {out.with_suffix('.usda')}" if out.with_suffix(".usda").exists()
                                                  else "") + f" in {time.perf_counter() - t0:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
