"""Point-cloud neighbours: build a hash grid over 2^18 random points and count each point's neighbours.

    python -m loomwork.apps.bench_hash_grid [--n 262144] [--neighbours 30] [--warp-python PATH]
                                            [--peers-python PATH]

The radius is chosen so that a point has about `--neighbours` others within it (uniform points in the unit
cube). Times the grid build plus one counting launch (threads in cell order, as `hash_grid_point_id` gives),
beside SciPy's cKDTree (build + `query_ball_point(return_length=True)` on every core) and, when
interpreters are given, Warp 1.19's HashGrid and a Taichi cell list (counting sort into cells, 27-cell
search), all in the same run. Every count is checked against cKDTree's.
"""

from __future__ import annotations

import argparse
import inspect
import tempfile
from pathlib import Path

import numpy as np

import loomwork as wp
from loomwork.apps.benchutil import best_times, find_python, run_json


@wp.kernel
def count_neighbours(grid: wp.uint64, points: wp.array(dtype=wp.vec3), radius: float,
                     counts: wp.array(dtype=wp.int32)):
    tid = wp.tid()
    i = wp.hash_grid_point_id(grid, tid)
    p = points[i]
    r2 = radius * radius
    c = int(0)  # noqa: UP018 - Warp, which compiles this kernel too, needs a typed counter in a loop
    for j in wp.hash_grid_query(grid, p, radius):
        d = points[j] - p
        if wp.dot(d, d) < r2:
            c += 1
    counts[i] = c - 1  # not itself


WARP_SCRIPT = """
import json, time, numpy as np, warp as wp
wp.config.quiet = True
wp.init()

{kernel}
pts = np.load({points!r})
radius = {radius}
points = wp.array(pts, dtype=wp.vec3, device="cpu")
counts = wp.zeros(len(pts), dtype=wp.int32, device="cpu")
grid = wp.HashGrid({dims}, {dims}, {dims}, device="cpu")
def run():
    grid.build(points, radius)
    wp.launch(count_neighbours, len(pts), inputs=[grid.id, points, radius, counts], device="cpu")
    wp.synchronize()
run()
t = 1e9
for _ in range(3):
    t0 = time.perf_counter(); run(); t = min(t, time.perf_counter() - t0)
print(json.dumps({{"s": t, "total": int(counts.numpy().sum())}}))
"""

TAICHI_SCRIPT = """
import json, time, numpy as np
import taichi as ti
ti.init(arch=ti.cpu, log_level=ti.ERROR)
pts = np.load({points!r})
n = len(pts)
radius = {radius}
dims = {dims}
cells = dims ** 3
pos = ti.Vector.field(3, ti.f32, n)
sorted_pos = ti.Vector.field(3, ti.f32, n)
cell_of = ti.field(ti.i32, n)
cell_count = ti.field(ti.i32, cells)
cell_start = ti.field(ti.i32, cells)
cursor = ti.field(ti.i32, cells)
counts = ti.field(ti.i32, n)
pos.from_numpy(pts)

@ti.func
def cell_index(c):
    return ((c[2] % dims) * dims + (c[1] % dims)) * dims + (c[0] % dims)

@ti.kernel
def bin_points():
    for c in cell_count:
        cell_count[c] = 0
    for i in pos:
        c = cell_index(ti.floor(pos[i] / radius, ti.i32))
        cell_of[i] = c
        ti.atomic_add(cell_count[c], 1)

@ti.kernel
def scatter():
    for i in pos:
        c = cell_of[i]
        sorted_pos[ti.atomic_add(cursor[c], 1)] = pos[i]

@ti.kernel
def count():
    r2 = radius * radius
    for i in pos:
        p = pos[i]
        base = ti.floor(p / radius, ti.i32)
        c = 0
        for dz, dy, dx in ti.static(ti.ndrange((-1, 2), (-1, 2), (-1, 2))):
            b = cell_index(base + ti.Vector([dx, dy, dz]))
            for k in range(cell_start[b], cell_start[b] + cell_count[b]):
                d = sorted_pos[k] - p
                if d.dot(d) < r2:
                    c += 1
        counts[i] = c - 1

def run():
    bin_points()
    start = np.cumsum(cell_count.to_numpy()) - cell_count.to_numpy()
    cell_start.from_numpy(start.astype(np.int32))
    cursor.from_numpy(start.astype(np.int32))
    scatter()
    count()
    ti.sync()
run()
t = 1e9
for _ in range(3):
    t0 = time.perf_counter(); run(); t = min(t, time.perf_counter() - t0)
print(json.dumps({{"s": t, "total": int(counts.to_numpy().sum())}}))
"""


def main(argv: list[str] | None = None) -> dict:
    """Run the benchmark, print its table, and return the figures."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1 << 18)
    ap.add_argument("--neighbours", type=float, default=30.0)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--warp-python", default=None)
    ap.add_argument("--peers-python", default=None, help="an interpreter with taichi installed")
    args = ap.parse_args(argv)
    n = args.n
    pts = np.random.default_rng(0).random((n, 3), dtype=np.float32)
    radius = float((3.0 * args.neighbours / (4.0 * np.pi * n)) ** (1.0 / 3.0))
    dims = 128
    points = wp.array(pts, dtype=wp.vec3)
    counts = wp.zeros(n, dtype=wp.int32)
    grid = wp.HashGrid(dims, dims, dims)

    def ours() -> None:
        grid.build(points, radius)
        wp.launch(count_neighbours, n, inputs=[grid.id, points, radius, counts])

    from scipy.spatial import cKDTree

    def kdtree() -> np.ndarray:
        return cKDTree(pts).query_ball_point(pts, radius, return_length=True, workers=-1) - 1

    ours()
    expect = kdtree()
    times = best_times({"loomwork": ours, "scipy cKDTree": kdtree}, rounds=args.rounds, reps=2)
    results: dict = {"n": n, "radius": radius, "mean_neighbours": float(expect.mean()),
                     "mismatched_points": int((counts.numpy() != expect).sum()), "s": times}
    kernel = inspect.getsource(count_neighbours.func)  # the same kernel for Warp
    with tempfile.TemporaryDirectory() as tmp:
        path = str(Path(tmp) / "points.npy")
        np.save(path, pts)
        for name, script, arg, env in (("warp", WARP_SCRIPT, args.warp_python, "LOOMWORK_WARP_PYTHON"),
                                       ("taichi", TAICHI_SCRIPT, args.peers_python, "LOOMWORK_PEERS_PYTHON")):
            python = find_python(arg, env)
            if python:
                try:
                    r = run_json(python, script.format(points=path, radius=radius, dims=dims, kernel=kernel),
                                 Path(tmp))
                except RuntimeError as e:
                    print(f"  ({name} failed: {str(e)[-300:]})")
                    continue
                times[name] = r["s"]
                results[f"{name}_total_vs_scipy"] = r["total"] / float(expect.sum())
    print(f"hash grid: {n} points, radius {radius:.4f}, {expect.mean():.1f} neighbours on average "
          f"({results['mismatched_points']} points whose count differs from cKDTree's)")
    for name, t in times.items():
        print(f"  {name:14s} build + count {t * 1e3:8.1f} ms   {t / times['loomwork']:5.2f}x loomwork's time")
    return results


if __name__ == "__main__":
    main()
