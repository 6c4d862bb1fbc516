"""A granular pile: a block of particles poured onto the ground settles into a heap (SolverXPBD with
particle-particle contacts through the HashGrid, positional friction), ray-cast to a PNG.

    python -m loomwork.apps.sim_granular [--side 8] [--frames 120] [--out pile.png]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

import loomwork as wp
import loomwork.sim as newton


def pour(side: int, frames: int, png_path: Path | None = None, substeps: int = 8) -> np.ndarray:
    """Drop a ``side``^3 block of 5 cm grains and let it settle; returns the final positions."""
    b = newton.ModelBuilder()
    b.add_particle_grid(pos=(-0.05 * side, -0.05 * side, 0.3), rot=wp.quat_identity(), vel=(0.0, 0.0, 0.0),
                        dim_x=side, dim_y=side, dim_z=side, cell_x=0.1, cell_y=0.1, cell_z=0.1, mass=0.1, jitter=0.02,
                        radius_mean=0.05)
    b.add_ground_plane(cfg=newton.ModelBuilder.ShapeConfig(mu=0.6))
    model = b.finalize()
    model.particle_mu = 0.6
    solver = newton.solvers.SolverXPBD(model, iterations=2)
    pipeline = newton.CollisionPipeline(model, soft_contact_gap=0.02)
    contacts = pipeline.contacts()
    s0, s1 = model.state(), model.state()
    dt = 1.0 / 60.0 / substeps
    for _ in range(frames * substeps):
        pipeline.collide(s0, contacts)
        s0.clear_forces()
        solver.step(s0, s1, None, contacts, dt)
        s0, s1 = s1, s0
    if png_path is not None:
        from loomwork.render import ViewerImage

        view = ViewerImage(None, width=480, height=360, camera_pos=(0.0, 1.5, 2.5), camera_front=(0.0, -0.5, -1.0))
        view.set_model(model)
        view.snapshot(s0, png_path)
    return s0.particle_q.numpy()


def main(argv: list[str] | None = None) -> int:
    """Pour the pile and describe it."""
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--side", type=int, default=8, help="grains per side of the poured block")
    p.add_argument("--frames", type=int, default=120, help="frames (60 per second)")
    p.add_argument("--out", default="pile.png", help="the PNG to write")
    a = p.parse_args(argv)
    if a.side < 1 or a.frames < 1:
        p.error("--side and --frames must be >= 1")
    q = pour(a.side, a.frames, Path(a.out))
    r = np.linalg.norm(q[:, :2], axis=1)
    print(f"{len(q)} grains: heap {q[:, 2].max():.2f} m high, 90% within {np.percentile(r, 90):.2f} m of the "
          f"center; wrote {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
