"""A geometry-processing pipeline: mesh -> signed distance field -> isosurface -> image and USD.

    python -m loomwork.apps.geometry_pipeline [--mesh FILE] [--res 96] [--image 384] [--out DIR]

Loads a mesh with trimesh (a torus made by trimesh when no file is given), samples its signed distance on a
dense grid with winding-number closest-point queries (`wp.mesh_query_point_sign_winding_number`), extracts
the zero isosurface with marching cubes, ray-casts a depth and normal image of that surface to PNG, and writes
the surface to USD. It checks its own result: the extracted vertices lie within a voxel of the input
surface and the enclosed volumes agree.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

import loomwork as wp
from loomwork.geometry import IsoSurfaceMarchingCubes, io


@wp.kernel
def signed_distance(mesh: wp.uint64, lower: wp.vec3, h: float, max_dist: float, field: wp.array3d(dtype=float)):
    """Signed distance at grid node (i, j, k): negative inside (fast winding numbers decide the side)."""
    i, j, k = wp.tid()
    p = lower + wp.vec3(float(i), float(j), float(k)) * h
    q = wp.mesh_query_point_sign_winding_number(mesh, p, max_dist)
    if q.result:
        field[i, j, k] = wp.length(p - wp.mesh_eval_position(mesh, q.face, q.u, q.v)) * q.sign
    else:
        field[i, j, k] = max_dist


@wp.kernel
def distance_to_surface(mesh: wp.uint64, points: wp.array(dtype=wp.vec3), max_dist: float,
                        dist: wp.array(dtype=float)):
    """Unsigned distance from each point to the mesh (max_dist when farther)."""
    i = wp.tid()
    p = points[i]
    q = wp.mesh_query_point_no_sign(mesh, p, max_dist)
    dist[i] = max_dist
    if q.result:
        dist[i] = wp.length(p - wp.mesh_eval_position(mesh, q.face, q.u, q.v))


@wp.kernel
def cast_rays(mesh: wp.uint64, eye: wp.vec3, forward: wp.vec3, right: wp.vec3, up: wp.vec3, tan_half_fov: float,
              depth: wp.array2d(dtype=float), normal: wp.array2d(dtype=wp.vec3)):
    """One primary ray per pixel (row 0 at the top): the hit distance and the face normal there."""
    y, x = wp.tid()
    h = depth.shape[0]
    w = depth.shape[1]
    sx = (2.0 * (float(x) + 0.5) / float(w) - 1.0) * tan_half_fov * float(w) / float(h)
    sy = (1.0 - 2.0 * (float(y) + 0.5) / float(h)) * tan_half_fov
    d = wp.normalize(forward + sx * right + sy * up)
    q = wp.mesh_query_ray(mesh, eye, d, 1.0e6)
    depth[y, x] = 0.0
    normal[y, x] = wp.vec3(0.0)
    if q.result:
        depth[y, x] = q.t
        normal[y, x] = q.normal


def signed_distance_field(mesh: wp.Mesh, res: int, pad: float = 0.1) -> tuple[wp.array, np.ndarray, np.ndarray]:
    """The signed distance on res^3 nodes over the mesh's bounds grown by `pad` of their largest side."""
    pts = mesh.points.numpy()
    lo, hi = pts.min(axis=0), pts.max(axis=0)
    margin = pad * float((hi - lo).max())
    h = float((hi - lo).max() + 2 * margin) / (res - 1)
    lower = (lo + hi) / 2 - h * (res - 1) / 2
    upper = lower + h * (res - 1)
    field = wp.empty((res, res, res), dtype=float)
    wp.launch(signed_distance, (res, res, res), inputs=[mesh.id, wp.vec3(*lower), h, 4.0 * h * res, field])
    return field, lower.astype(np.float32), upper.astype(np.float32)


def render(mesh: wp.Mesh, size: int) -> tuple[np.ndarray, np.ndarray]:
    """Depth (0 where rays miss) and face normals of the mesh seen from above and in front."""
    pts = mesh.points.numpy()
    center = (pts.min(axis=0) + pts.max(axis=0)) / 2
    radius = float(np.linalg.norm(pts.max(axis=0) - pts.min(axis=0))) / 2
    eye = center + radius * 2.2 * np.array([0.0, -0.8, 0.6]) / np.linalg.norm([0.0, -0.8, 0.6])
    forward = (center - eye) / np.linalg.norm(center - eye)
    right = np.cross(forward, [0.0, 0.0, 1.0])
    right /= np.linalg.norm(right)
    up = np.cross(right, forward)
    depth = wp.empty((size, size), dtype=float)
    normal = wp.empty((size, size), dtype=wp.vec3)
    wp.launch(cast_rays, (size, size), inputs=[mesh.id, *(wp.vec3(*v) for v in (eye, forward, right, up)),
                                               float(np.tan(np.radians(25.0))), depth, normal])
    return depth.numpy(), normal.numpy()


def image(depth: np.ndarray, normal: np.ndarray) -> np.ndarray:
    """An RGB picture: the depth in grey (near is bright) beside the normals as colours."""
    hit = depth > 0
    grey = np.zeros(depth.shape, np.float32)
    if hit.any():
        near, far = depth[hit].min(), depth[hit].max()
        grey[hit] = 1.0 - 0.8 * (depth[hit] - near) / max(far - near, 1e-6)
    left = np.repeat(grey[..., None], 3, axis=2)
    right = np.where(hit[..., None], 0.5 * normal + 0.5, 0.0)
    return (np.concatenate([left, right], axis=1) * 255).clip(0, 255).astype(np.uint8)


def main(argv: list[str] | None = None) -> dict:
    """Run the pipeline; return its figures and checks."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mesh", type=Path, help="a mesh file trimesh or USD reads (default: a torus)")
    ap.add_argument("--res", type=int, default=96, help="grid nodes per axis of the distance field")
    ap.add_argument("--image", type=int, default=384, help="image height and width per panel, in pixels")
    ap.add_argument("--out", type=Path, default=Path("loomwork_geometry"), help="output folder")
    args = ap.parse_args(argv)
    trimesh = io.require("trimesh", "trimesh", "the geometry pipeline")
    from PIL import Image

    t0 = time.perf_counter()
    source = trimesh.creation.torus(1.0, 0.35) if args.mesh is None else None
    mesh = io.mesh_from_trimesh(source, support_winding_number=True) if source is not None else io.load_mesh(
        args.mesh, support_winding_number=True)
    t1 = time.perf_counter()
    field, lower, upper = signed_distance_field(mesh, args.res)
    t2 = time.perf_counter()
    verts, indices = IsoSurfaceMarchingCubes.extract(field, 0.0, lower=lower, upper=upper)
    if indices.shape[0] == 0:
        raise SystemExit("the distance field has no zero crossing: is the mesh closed?")
    surface = wp.Mesh(verts, indices)
    t3 = time.perf_counter()
    depth, normal = render(surface, args.image)
    t4 = time.perf_counter()
    args.out.mkdir(parents=True, exist_ok=True)
    Image.fromarray(image(depth, normal)).save(args.out / "surface.png")
    usd_path = None
    try:
        io.mesh_to_usd(surface, args.out / "surface.usda", "/World/surface")
        usd_path = args.out / "surface.usda"
    except ImportError as e:
        print(f"(no USD output: {e})")

    h = float((upper - lower).max()) / (args.res - 1)
    dist = wp.empty(verts.shape[0], dtype=float)
    wp.launch(distance_to_surface, verts.shape[0], inputs=[mesh.id, verts, 10.0 * h, dist])
    volume_in = io.mesh_to_trimesh(mesh).volume
    volume_out = io.mesh_to_trimesh(surface).volume
    r = {"triangles_in": mesh.indices.shape[0] // 3, "triangles_out": indices.shape[0] // 3, "voxel": h,
         "max_vertex_distance": float(dist.numpy().max()), "volume_in": float(volume_in),
         "volume_out": float(volume_out), "hit_fraction": float((depth > 0).mean()),
         "times_s": {"load": t1 - t0, "distance_field": t2 - t1, "marching_cubes": t3 - t2, "render": t4 - t3},
         "png": str(args.out / "surface.png"), "usd": str(usd_path) if usd_path else None}
    print(f"{r['triangles_in']} triangles in -> {args.res}^3 distance field ({1e3 * (t2 - t1):.1f} ms) -> "
          f"{r['triangles_out']} triangles ({1e3 * (t3 - t2):.1f} ms) -> {args.image}x{args.image} image "
          f"({1e3 * (t4 - t3):.1f} ms)")
    print(f"surface within {r['max_vertex_distance'] / h:.2f} voxels of the input; volume {volume_out:.4f} vs "
          f"{volume_in:.4f}; wrote {r['png']}" + (f" and {usd_path}" if usd_path else ""))
    return r


if __name__ == "__main__":
    main()
