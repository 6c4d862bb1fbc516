"""Cloth draping over a triangle mesh: a mesh file loaded with trimesh (or a trimesh primitive), a cloth sheet
falling onto it under SolverSemiImplicit, recorded to USD and ray-cast to a PNG.

    python -m loomwork.apps.sim_cloth_drape [--mesh bunny.obj] [--cloth 32] [--frames 90] [--out drape]

A mesh file is scaled to fit a 1.2 m box and set on the ground; without one, a trimesh icosphere.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

import loomwork as wp
import loomwork.sim as newton
from loomwork.geometry import load_mesh


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


def drape(cloth: int, frames: int, usd_path: Path | None, png_path: Path | None,
          mesh: newton.Mesh | None = None) -> np.ndarray:
    """Drop a ``cloth`` x ``cloth`` sheet onto ``mesh`` (default: a torus) resting on the ground; returns the
    final particle positions."""
    b = newton.ModelBuilder()
    size = 2.0
    b.add_cloth_grid(pos=(-size / 2, -size / 2, 1.2), rot=wp.quat_identity(), vel=(0.0, 0.0, 0.0), dim_x=cloth,
                     dim_y=cloth, cell_x=size / cloth, cell_y=size / cloth, mass=0.01, tri_ke=2.0e2, tri_ka=2.0e2,
                     tri_kd=1.0e-2, edge_ke=1.0e-3, particle_radius=0.015)
    surface = newton.ModelBuilder.ShapeConfig(ke=1.0e3, kd=1.0, kf=1.0e2, mu=0.5)
    b.add_shape_mesh(-1, xform=wp.transform((0.0, 0.0, 0.25), wp.quat_identity()), mesh=mesh or torus_mesh(),
                     cfg=surface)
    b.add_ground_plane(cfg=surface)
    model = b.finalize()
    model.soft_contact_ke, model.soft_contact_kd, model.soft_contact_kf = 1.0e3, 1.0, 1.0e2
    model.particle_grid = None  # the sheet does not fold onto itself here: no self-contact needed
    solver = newton.solvers.SolverSemiImplicit(model, enable_tri_contact=False)
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
        image.snapshot(s0, png_path)
    return s0.particle_q.numpy()


def load_obstacle(path: str | None) -> newton.Mesh:
    """The mesh at ``path`` (any format trimesh or usd-core reads), scaled into a 1.2 m box with its base at
    z = 0 and centered in x and y; without a path, a trimesh icosphere of radius 0.5 m on the ground. (``drape``
    places the mesh 0.25 m up, as the default torus needs.)"""
    if path is None:
        try:
            import trimesh
        except ImportError as e:
            raise ImportError("sim_cloth_drape: pip install trimesh (or pass --mesh with a USD file)") from e
        sphere = trimesh.creation.icosphere(subdivisions=3, radius=0.5)
        return newton.Mesh(sphere.vertices + (0.0, 0.0, 0.25), sphere.faces.reshape(-1))
    m = load_mesh(path)
    v = m.points.numpy().astype(np.float64)
    lo, hi = v.min(axis=0), v.max(axis=0)
    v = (v - [(lo[0] + hi[0]) / 2, (lo[1] + hi[1]) / 2, lo[2]]) * (1.2 / max(float((hi - lo).max()), 1e-9))
    return newton.Mesh(v - (0.0, 0.0, 0.25), m.indices.numpy())


def main(argv: list[str] | None = None) -> int:
    """Run the drape and say where its files are."""
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--mesh", default=None, help="a mesh file (OBJ, STL, PLY, GLB, USD, ...)")
    p.add_argument("--cloth", type=int, default=32, help="cloth cells per side")
    p.add_argument("--frames", type=int, default=90, help="frames (30 per second)")
    p.add_argument("--out", default="drape", help="output path without extension")
    a = p.parse_args(argv)
    if a.cloth < 2 or a.frames < 1:
        p.error("--cloth must be >= 2 and --frames >= 1")
    out = Path(a.out)
    q = drape(a.cloth, a.frames, out.with_suffix(".usda"), out.with_suffix(".png"), load_obstacle(a.mesh))
    print(f"cloth rests between z = {q[:, 2].min():.3f} and {q[:, 2].max():.3f} m; wrote {out.with_suffix('.png')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
