"""Mesh query benchmark: BVH builds, primary rays and closest points on an icosphere.

    python -m loomwork.apps.bench_geometry [--subdiv 6] [--res 1024] [--points 1000000] [--trimesh-points 20000]
                                           [--warp-python PATH]

A subdivided icosahedron (subdivision 6: 81,920 triangles) is built into a wp.Mesh (SAH), then `res * res`
pinhole-camera rays (nearest hit: t, face, barycentrics, normal) and `points` closest-point queries
(mesh_query_point_no_sign, points within half the radius of the surface) run in kernels. With a Warp
interpreter (--warp-python or LOOMWORK_WARP_PYTHON) the same runs through Warp 1.19, and through Embree
(embreex, nearest hit with barycentrics and normal) when that interpreter has it; hits and distances are
compared with loomwork's. trimesh's closest points (an rtree of the faces) run on the first
`--trimesh-points` of the points, in this process.
"""

from __future__ import annotations

import argparse
import inspect
import tempfile
import time
from pathlib import Path

import numpy as np

import loomwork as wp
from loomwork.apps.benchutil import best_times, find_python, run_json


def icosphere(subdivisions: int) -> tuple[np.ndarray, np.ndarray]:
    """A unit sphere of 20 * 4^subdivisions triangles (outward winding), points shared between faces."""
    g = (1.0 + 5.0**0.5) / 2.0
    pts = [(-1, g, 0), (1, g, 0), (-1, -g, 0), (1, -g, 0), (0, -1, g), (0, 1, g), (0, -1, -g), (0, 1, -g),
           (g, 0, -1), (g, 0, 1), (-g, 0, -1), (-g, 0, 1)]
    faces = np.array([[0, 11, 5], [0, 5, 1], [0, 1, 7], [0, 7, 10], [0, 10, 11], [1, 5, 9], [5, 11, 4], [11, 10, 2],
                      [10, 7, 6], [7, 1, 8], [3, 9, 4], [3, 4, 2], [3, 2, 6], [3, 6, 8], [3, 8, 9], [4, 9, 5],
                      [2, 4, 11], [6, 2, 10], [8, 6, 7], [9, 8, 1]])
    p = np.array(pts, dtype=np.float64)
    for _ in range(subdivisions):
        edges = np.sort(np.concatenate([faces[:, [0, 1]], faces[:, [1, 2]], faces[:, [2, 0]]]), axis=1)
        uniq, inv = np.unique(edges, axis=0, return_inverse=True)
        mid = len(p) + inv.reshape(3, -1).T  # the midpoints of edges 01, 12, 20 of each face
        p = np.concatenate([p, 0.5 * (p[uniq[:, 0]] + p[uniq[:, 1]])])
        a, b, c = faces.T
        ab, bc, ca = mid.T
        faces = np.concatenate([np.stack(f, axis=1) for f in ((a, ab, ca), (b, bc, ab), (c, ca, bc), (ab, bc, ca))])
    p /= np.linalg.norm(p, axis=1, keepdims=True)
    return p.astype(np.float32), faces.astype(np.int32)


def camera_rays(res: int) -> tuple[np.ndarray, np.ndarray]:
    """A pinhole camera at (0, 0, 3) looking down -z at the unit sphere (about 40% of the rays hit)."""
    s = ((np.arange(res) + 0.5) / res * 2.0 - 1.0) * 0.5
    x, y = np.meshgrid(s, s)
    d = np.stack([x, y, -np.ones_like(x)], axis=-1).reshape(-1, 3)
    d /= np.linalg.norm(d, axis=1, keepdims=True)
    o = np.tile(np.array([0.0, 0.0, 3.0]), (res * res, 1))
    return o.astype(np.float32), d.astype(np.float32)


def query_points(n: int) -> np.ndarray:
    """Points at random directions, 0.5 to 1.5 from the center: within half the radius of the surface."""
    rng = np.random.default_rng(5)
    d = rng.normal(size=(n, 3))
    return (d / np.linalg.norm(d, axis=1, keepdims=True) * rng.uniform(0.5, 1.5, (n, 1))).astype(np.float32)


@wp.kernel
def cast(mesh: wp.uint64, o: wp.array(dtype=wp.vec3), d: wp.array(dtype=wp.vec3), t: wp.array(dtype=float),
         face: wp.array(dtype=int), normal: wp.array(dtype=wp.vec3)):
    i = wp.tid()
    q = wp.mesh_query_ray(mesh, o[i], d[i], 1.0e6)
    if q.result:
        t[i] = q.t
        face[i] = q.face
        normal[i] = q.normal
    else:
        t[i] = -1.0
        face[i] = -1


@wp.kernel
def nearest(mesh: wp.uint64, p: wp.array(dtype=wp.vec3), dist: wp.array(dtype=float)):
    i = wp.tid()
    q = wp.mesh_query_point_no_sign(mesh, p[i], 1.0e6)
    dist[i] = wp.length(p[i] - wp.mesh_eval_position(mesh, q.face, q.u, q.v))


PEER_SCRIPT = """
import json, time, numpy as np, warp as wp
wp.config.quiet = True
wp.init()
d = np.load({data!r})
pts, tris, o, dirs, qp = d["pts"], d["tris"], d["o"], d["d"], d["q"]

def best(f, reps):
    f(); t = 1e9
    for _ in range(reps):
        t0 = time.perf_counter(); f(); wp.synchronize(); t = min(t, time.perf_counter() - t0)
    return t

def best_cpu(f, reps):
    f(); t = 1e9
    for _ in range(reps):
        t0 = time.process_time(); f(); t = min(t, time.process_time() - t0)
    return t

{kernels}

dev = "cpu"
P = wp.array(pts, dtype=wp.vec3, device=dev)
I = wp.array(tris.reshape(-1), dtype=wp.int32, device=dev)
out = {{"build_s": best(lambda: wp.Mesh(P, I, bvh_constructor="sah"), 3)}}
mesh = wp.Mesh(P, I, bvh_constructor="sah")
O, D = wp.array(o, dtype=wp.vec3, device=dev), wp.array(dirs, dtype=wp.vec3, device=dev)
t = wp.zeros(len(o), dtype=float, device=dev); f = wp.zeros(len(o), dtype=int, device=dev)
n = wp.zeros(len(o), dtype=wp.vec3, device=dev)
out["rays_s"] = best(lambda: wp.launch(cast, dim=len(o), inputs=[mesh.id, O, D, t, f, n], device=dev), 3)
out["rays_cpu_s"] = best_cpu(lambda: wp.launch(cast, dim=len(o), inputs=[mesh.id, O, D, t, f, n], device=dev), 3)
Q = wp.array(qp, dtype=wp.vec3, device=dev); dist = wp.zeros(len(qp), dtype=float, device=dev)
out["closest_s"] = best(lambda: wp.launch(nearest, dim=len(qp), inputs=[mesh.id, Q, dist], device=dev), 3)
np.save({data!r} + ".warp_t.npy", t.numpy()); np.save({data!r} + ".warp_dist.npy", dist.numpy())
try:
    from embreex import rtcore_scene as rtcs
    from embreex.mesh_construction import TriangleMesh
    def build():
        scene = rtcs.EmbreeScene(); TriangleMesh(scene, pts, tris); return scene
    out["embree_build_s"] = best(build, 3)
    scene = build()
    out["embree_rays_s"] = best(lambda: scene.run(o, dirs, output=1), 3)
    out["embree_rays_cpu_s"] = best_cpu(lambda: scene.run(o, dirs, output=1), 3)
    out["embree_rays_primid_s"] = best(lambda: scene.run(o, dirs, output=0), 3)
    r = scene.run(o, dirs, output=1)
    np.save({data!r} + ".embree_t.npy", np.where(r["primID"] >= 0, r["tfar"], -1.0).astype(np.float32))
except ImportError:
    pass
print(json.dumps(out))
"""


def trimesh_closest(pts: np.ndarray, tris: np.ndarray, qp: np.ndarray, ours: np.ndarray) -> dict:
    """trimesh.proximity.closest_point (an rtree of the faces, then exact distances) on `qp`: the time, and
    how far its distances are from ours."""
    try:
        import trimesh

        mesh = trimesh.Trimesh(pts, tris, process=False)
        mesh.triangles_tree  # noqa: B018 - the rtree is built outside the timed query, as our BVH is
    except Exception as e:  # trimesh or rtree missing, or rtree's library
        return {"error": f"{type(e).__name__}: {e}"[:200]}
    t0 = time.perf_counter()
    _, d, _ = trimesh.proximity.closest_point(mesh, qp)
    return {"s": time.perf_counter() - t0, "points": len(qp), "max_diff": float(np.abs(d - ours).max())}


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--subdiv", type=int, default=6, help="icosphere subdivisions (6: 81,920 triangles)")
    p.add_argument("--res", type=int, default=1024, help="image width and height in rays")
    p.add_argument("--points", type=int, default=1_000_000, help="closest-point queries")
    p.add_argument("--warp-python", default=None, help="a Python interpreter with warp-lang (and embreex) installed")
    p.add_argument("--trimesh-points", type=int, default=20_000,
                   help="closest-point queries timed through trimesh (rtree): it is far slower, so fewer")
    args = p.parse_args(argv)
    pts, tris = icosphere(args.subdiv)
    o, d = camera_rays(args.res)
    qp = query_points(args.points)
    P, I = wp.array(pts, dtype=wp.vec3), wp.array(tris.reshape(-1), dtype=wp.int32)
    mesh = wp.Mesh(P, I)
    O, D = wp.array(o, dtype=wp.vec3), wp.array(d, dtype=wp.vec3)
    t, f, n = wp.zeros(len(o), dtype=float), wp.zeros(len(o), dtype=int), wp.zeros(len(o), dtype=wp.vec3)
    Q, dist = wp.array(qp, dtype=wp.vec3), wp.zeros(len(qp), dtype=float)
    timed = {"rays": lambda: wp.launch(cast, dim=len(o), inputs=[mesh.id, O, D, t, f, n]),
             "closest": lambda: wp.launch(nearest, dim=len(qp), inputs=[mesh.id, Q, dist]),
             "build": lambda: wp.Mesh(P, I), "build_median": lambda: wp.Mesh(P, I, bvh_constructor="median")}
    times = best_times(timed, rounds=2, reps=2)

    def rays_cpu() -> float:  # CPU seconds (all threads) of one launch: what the machine's load does not inflate
        c0 = time.process_time()
        timed["rays"]()
        return time.process_time() - c0

    t_cpu = min(rays_cpu() for _ in range(3))
    # the exact answers: rays against the sphere's facets are within the chord sagitta of the unit sphere
    hit = t.numpy() >= 0
    result = {"triangles": len(tris), "rays": len(o), "points": len(qp), "build_s": times["build"],
              "build_median_s": times["build_median"], "rays_s": times["rays"], "rays_cpu_s": t_cpu,
              "closest_s": times["closest"],
              "hit_fraction": float(hit.mean()),
              "closest_max_error": float(np.abs(dist.numpy() - np.abs(np.linalg.norm(qp, axis=1) - 1.0)).max())}
    result["trimesh"] = trimesh_closest(pts, tris, qp[:args.trimesh_points], dist.numpy()[:args.trimesh_points])
    peer = None
    warp_python = find_python(args.warp_python, "LOOMWORK_WARP_PYTHON")
    if warp_python:
        with tempfile.TemporaryDirectory() as tmp:
            data = str(Path(tmp) / "scene.npz")
            np.savez(data, pts=pts, tris=tris, o=o, d=d, q=qp)
            kernels = "\n\n".join(inspect.getsource(k.func) for k in (cast, nearest))  # the same kernels for Warp
            peer = run_json(warp_python, PEER_SCRIPT.format(data=data, kernels=kernels), Path(tmp))
            again = best_times(timed, rounds=1, reps=2)  # after the peers too: a load burst slows both alike
            times = {k: min(times[k], again[k]) for k in times}
            result.update(build_s=times["build"], build_median_s=times["build_median"], rays_s=times["rays"],
                          closest_s=times["closest"])
            warp_t, warp_dist = np.load(data + ".warp_t.npy"), np.load(data + ".warp_dist.npy")
            peer["hits_agree_warp"] = float(((warp_t >= 0) == hit).mean())
            peer["closest_max_diff_warp"] = float(np.abs(warp_dist - dist.numpy()).max())
            if Path(data + ".embree_t.npy").exists():
                et = np.load(data + ".embree_t.npy")
                both = (et >= 0) & hit
                peer["hits_agree_embree"] = float(((et >= 0) == hit).mean())
                peer["t_max_diff_embree"] = float(np.abs(et[both] - t.numpy()[both]).max()) if both.any() else 0.0
    result["peer"] = peer
    mrays = len(o) / times["rays"] / 1e6
    mq = len(qp) / times["closest"] / 1e6
    print(f"icosphere of {len(tris)} triangles, {args.res}x{args.res} primary rays ({hit.mean():.0%} hit), "
          f"{len(qp)} closest points ({wp.get_device('cpu').name})")
    print(f"  loomwork:  build {times['build'] * 1e3:6.1f} ms (median split {times['build_median'] * 1e3:.1f} ms)   "
          f"rays {mrays:6.2f} Mrays/s ({len(o) / t_cpu / 1e6:.2f} per CPU-second)   closest points {mq:6.2f} M/s "
          f"(max error vs the sphere {result['closest_max_error']:.1e})")
    tm = result["trimesh"]
    if "error" in tm:
        print(f"  (trimesh closest points not measured: {tm['error']})")
    else:
        print(f"  trimesh (rtree): closest points {tm['points'] / tm['s'] / 1e6:6.3f} M/s on {tm['points']} of the "
              f"points ({tm['s'] / tm['points'] * len(qp) / times['closest']:.0f}x loomwork's time per point; "
              f"distances within {tm['max_diff']:.1e})")
    if peer:
        print(f"  Warp 1.19: build {peer['build_s'] * 1e3:6.1f} ms   rays {len(o) / peer['rays_s'] / 1e6:6.2f} Mrays/s"
              f" ({len(o) / peer['rays_cpu_s'] / 1e6:.2f} per CPU-second)   closest points "
              f"{len(qp) / peer['closest_s'] / 1e6:6.2f} M/s   (hits agree "
              f"{peer['hits_agree_warp']:.4%}, distances within {peer['closest_max_diff_warp']:.1e})")
        if "embree_rays_s" in peer:
            print(f"  Embree (embreex, one thread): build {peer['embree_build_s'] * 1e3:6.1f} ms   rays "
                  f"{len(o) / peer['embree_rays_s'] / 1e6:6.2f} Mrays/s "
                  f"({len(o) / peer['embree_rays_cpu_s'] / 1e6:.2f} per CPU-second) with barycentrics and normals, "
                  f"{len(o) / peer['embree_rays_primid_s'] / 1e6:6.2f} Mrays/s face ids only   (hits agree "
                  f"{peer['hits_agree_embree']:.4%}, t within {peer['t_max_diff_embree']:.1e})")
    return result


if __name__ == "__main__":
    main()
