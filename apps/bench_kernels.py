"""Kernel-layer benchmark on the CPU: saxpy bandwidth, launch overhead, graph replay, build and load times.

    python -m loomwork.apps.bench_kernels [--warp-python PATH] [--n 16777216] [--repeats 3]

Prints each figure beside a C OpenMP saxpy built by this benchmark (the machine's limit), NumPy,
and, when `--warp-python` names an interpreter with warp-lang installed (or one is found at
LOOMWORK_WARP_PYTHON), NVIDIA Warp measured in the same run. Each build/load figure is measured
in a fresh process, as a user meets it.
"""

from __future__ import annotations

import argparse
import ctypes
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

import loomwork as wp
from loomwork.apps.benchutil import best_time, build_openmp, find_python, run_json

C_SAXPY = r"""
#include <omp.h>
void saxpy(const float* x, float* y, float a, long n, int threads) {
    #pragma omp parallel for num_threads(threads) schedule(static)
    for (long i = 0; i < n; ++i) y[i] = a * x[i] + y[i];
}
"""

KERNEL_MODULE = """
import {lib} as wp

SCALE = wp.constant({value})


@wp.kernel
def saxpy_edit(x: wp.array(dtype=float), y: wp.array(dtype=float), a: float):
    i = wp.tid()
    y[i] = a * x[i] + y[i] * SCALE
"""

# issue 3's rebuild figure: eight kernels of vec3 / mat33 / quat / transform math and a struct
BIG_MODULE = """
import {lib} as wp

SCALE = wp.constant({value})


@wp.struct
class Body:
    mass: float
    com: wp.vec3
    inertia: wp.mat33


@wp.func
def world_point(t: wp.transform, p: wp.vec3):
    return wp.transform_point(t, p) * SCALE


@wp.kernel
def k_rotate(q: wp.array(dtype=wp.quat), v: wp.array(dtype=wp.vec3), out: wp.array(dtype=wp.vec3)):
    i = wp.tid()
    out[i] = wp.quat_rotate(q[i], v[i]) + wp.quat_rotate_inv(q[i], v[i])


@wp.kernel
def k_transform(t: wp.array(dtype=wp.transform), p: wp.array(dtype=wp.vec3), out: wp.array(dtype=wp.vec3)):
    i = wp.tid()
    out[i] = world_point(t[i], p[i]) + wp.transform_vector(wp.transform_inverse(t[i]), p[i])


@wp.kernel
def k_inertia(b: Body, q: wp.array(dtype=wp.quat), out: wp.array(dtype=wp.mat33)):
    i = wp.tid()
    r = wp.quat_to_matrix(q[i])
    out[i] = r * b.inertia * wp.transpose(r) * b.mass
@wp.kernel
def k_compose(a: wp.array(dtype=wp.transform), b: wp.array(dtype=wp.transform), out: wp.array(dtype=wp.transform)):
    i = wp.tid()
    out[i] = wp.transform_multiply(a[i], b[i])


@wp.kernel
def k_cross(a: wp.array(dtype=wp.vec3), b: wp.array(dtype=wp.vec3), out: wp.array(dtype=float)):
    i = wp.tid()
    c = wp.cross(a[i], b[i])
    out[i] = wp.length(c) + wp.dot(wp.normalize(a[i]), b[i])


@wp.kernel
def k_matvec(m: wp.array(dtype=wp.mat33), v: wp.array(dtype=wp.vec3), out: wp.array(dtype=wp.vec3)):
    i = wp.tid()
    out[i] = m[i] * v[i] + wp.transpose(m[i]) * v[i] * SCALE


@wp.kernel
def k_axis_angle(axis: wp.array(dtype=wp.vec3), angle: wp.array(dtype=float), out: wp.array(dtype=wp.quat)):
    i = wp.tid()
    out[i] = wp.quat_from_axis_angle(wp.normalize(axis[i]), angle[i]) * wp.quat_rpy(0.1, 0.2, angle[i])


@wp.kernel
def k_body(b: Body, p: wp.array(dtype=wp.vec3), out: wp.array(dtype=wp.vec3)):
    i = wp.tid()
    r = p[i] - b.com
    out[i] = b.inertia * r * b.mass + wp.cross(b.com, r)
"""

# Runs in a fresh process under either framework: import, (Warp: init), load one module, report times.
LOAD_SCRIPT = """
import json, sys, time
t0 = time.perf_counter()
import {lib} as wp
wp.config.kernel_cache_dir = {cache!r}
{init}
t1 = time.perf_counter()
sys.path.insert(0, {moddir!r})
import bench_module
wp.load_module(bench_module, device="cpu")
t2 = time.perf_counter()
print(json.dumps({{"import": t1 - t0, "load": t2 - t1}}))
"""

# Runs under the Warp interpreter: saxpy and launch overhead, measured like ours.
WARP_RUNTIME_SCRIPT = """
import json, time, numpy as np, warp as wp
wp.config.quiet = True
wp.init()

@wp.kernel
def saxpy(x: wp.array(dtype=float), y: wp.array(dtype=float), a: float):
    i = wp.tid()
    y[i] = a * x[i] + y[i]

@wp.kernel
def noop(a: wp.array(dtype=float)):
    i = wp.tid()

n = {n}
x = wp.array(np.arange(n, dtype=np.float32), device="cpu")
y = wp.ones(n, dtype=float, device="cpu")
wp.launch(saxpy, dim=n, inputs=[x, y, 2.0], device="cpu")
best = 1e9
for _ in range({reps}):
    t0 = time.perf_counter(); wp.launch(saxpy, dim=n, inputs=[x, y, 2.0], device="cpu"); wp.synchronize()
    best = min(best, time.perf_counter() - t0)
a = wp.zeros(1, dtype=float, device="cpu")
wp.launch(noop, dim=1, inputs=[a], device="cpu")
per = []
for _ in range(5):
    t0 = time.perf_counter()
    for _ in range(20000):
        wp.launch(noop, dim=1, inputs=[a], device="cpu")
    per.append((time.perf_counter() - t0) / 20000)
with wp.ScopedCapture(device="cpu") as capture:
    for _ in range({graph_launches}):
        wp.launch(noop, dim=1, inputs=[a], device="cpu")
wp.capture_launch(capture.graph)
replay = 1e9
for _ in range(200):
    t0 = time.perf_counter(); wp.capture_launch(capture.graph); replay = min(replay, time.perf_counter() - t0)
print(json.dumps({{"saxpy_s": best, "launch_s": min(per), "replay_s": replay}}))
"""

GRAPH_LAUNCHES = 100  # launches in the captured graph whose replay is timed


@wp.kernel
def saxpy(x: wp.array(dtype=float), y: wp.array(dtype=float), a: float):
    i = wp.tid()
    y[i] = a * x[i] + y[i]


@wp.kernel
def noop(a: wp.array(dtype=float)):
    i = wp.tid()  # noqa: F841


def graph_replay(a: wp.array, launches: int = GRAPH_LAUNCHES) -> tuple[float, float]:
    """Seconds to launch a trivial kernel `launches` times one by one, and to replay those launches captured
    in a graph (best of 200 each)."""
    def one_by_one() -> None:
        for _ in range(launches):
            wp.launch(noop, dim=1, inputs=[a])

    with wp.ScopedCapture() as capture:
        one_by_one()
    return best_time(one_by_one, 200), best_time(lambda: wp.capture_launch(capture.graph), 200)


def c_openmp_saxpy(workdir: Path, threads: int):
    """The reference saxpy (gcc -O3 -march=native -fopenmp); None when it cannot be built."""
    dll = build_openmp(workdir, "saxpy", C_SAXPY)
    if dll is None:
        return None
    dll.saxpy.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_float, ctypes.c_long, ctypes.c_int]
    return lambda x, y, a: dll.saxpy(x.ctypes.data, y.ctypes.data, a, x.size, threads)


def load_times(python: str, lib: str, workdir: Path, repeats: int, template: str = KERNEL_MODULE) -> dict:
    """First build in an empty cache, rebuild after an edit, and load from cache; each in a new process."""
    init = "wp.init()" if lib == "warp" else ""
    moddir = workdir / f"{lib}_mod_{abs(hash(template))}"
    moddir.mkdir(exist_ok=True)
    out: dict[str, list[float]] = {"first": [], "edit": [], "cached": [], "import": []}
    for rep in range(repeats):
        cache = workdir / f"{lib}_cache_{rep}"
        script = LOAD_SCRIPT.format(lib=lib, cache=str(cache), init=init, moddir=str(moddir))
        (moddir / "bench_module.py").write_text(template.format(lib=lib, value=1.0))
        out["first"].append(run_json(python, script, workdir)["load"])
        (moddir / "bench_module.py").write_text(template.format(lib=lib, value=2.0 + rep))
        out["edit"].append(run_json(python, script, workdir)["load"])
        r = run_json(python, script, workdir)
        out["cached"].append(r["load"])
        out["import"].append(r["import"])
    return {k: statistics.median(v) for k, v in out.items()}


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--n", type=int, default=1 << 24, help="saxpy length")
    p.add_argument("--repeats", type=int, default=3, help="fresh-process repetitions of each build figure")
    p.add_argument("--warp-python", default=None, help="a Python interpreter with warp-lang installed")
    args = p.parse_args(argv)
    n = args.n
    threads = wp.kernels.cpu.cpu_count()
    warp_python = find_python(args.warp_python, "LOOMWORK_WARP_PYTHON")
    results: dict = {"n": n, "threads": threads}
    print(f"loomwork kernel benchmark on {wp.get_device('cpu').name} ({threads} threads), saxpy n = {n}")

    x = np.arange(n, dtype=np.float32)
    y = np.ones(n, dtype=np.float32)
    gb = 3 * 4 * n / 1e9  # read x, read y, write y
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        ref = c_openmp_saxpy(tmp, threads)
        t_c = best_time(lambda: ref(x, y, 2.0), 10) if ref else float("nan")
        xa, ya = wp.array(x), wp.array(y)
        t_lw = best_time(lambda: wp.launch(saxpy, dim=n, inputs=[xa, ya, 2.0]), 10)
        t_np = best_time(lambda: np.add(y, np.float32(2.0) * x, out=y), 5)
        a = wp.zeros(1, dtype=float)
        wp.launch(noop, dim=1, inputs=[a])
        launch = []
        for _ in range(5):
            t0 = time.perf_counter()
            for _ in range(20000):
                wp.launch(noop, dim=1, inputs=[a])
            launch.append((time.perf_counter() - t0) / 20000)
        t_launch = min(launch)
        t_eager, t_replay = graph_replay(a)
        warp_rt = None
        if warp_python:
            try:
                script = WARP_RUNTIME_SCRIPT.format(n=n, reps=10, graph_launches=GRAPH_LAUNCHES)
                warp_rt = run_json(warp_python, script, tmp)
            except Exception as e:  # a broken Warp install must not hide our own figures
                print(f"(Warp runtime measurement failed: {e})")
        ours_build = load_times(sys.executable, "loomwork", tmp, args.repeats)
        ours_big = load_times(sys.executable, "loomwork", tmp, args.repeats, BIG_MODULE)
        warp_build = warp_big = None
        if warp_python:
            try:
                warp_build = load_times(warp_python, "warp", tmp, args.repeats)
                warp_big = load_times(warp_python, "warp", tmp, args.repeats, BIG_MODULE)
            except Exception as e:
                print(f"(Warp build measurement failed: {e})")

    print("\nsaxpy (y = a*x + y), best of 10:")
    print(f"  C OpenMP (gcc -O3 -march=native, {threads} threads): {t_c * 1e3:7.2f} ms  {gb / t_c:6.1f} GB/s")
    print(f"  loomwork:                                  {t_lw * 1e3:7.2f} ms  {gb / t_lw:6.1f} GB/s"
          f"  = {t_c / t_lw:.0%} of C OpenMP")
    print(f"  NumPy:                                     {t_np * 1e3:7.2f} ms  {gb / t_np:6.1f} GB/s"
          f"  (loomwork {t_np / t_lw:.1f}x faster)")
    if warp_rt:
        tw = warp_rt["saxpy_s"]
        print(f"  Warp 1.19:                                 {tw * 1e3:7.2f} ms  {gb / tw:6.1f} GB/s"
              f"  (loomwork {tw / t_lw:.1f}x faster)")
    print("\nlaunch overhead of a trivial kernel (dim=1), best of 5 x 20000:")
    print(f"  loomwork: {t_launch * 1e6:6.2f} us")
    if warp_rt:
        ratio = t_launch / warp_rt["launch_s"]
        print(f"  Warp:     {warp_rt['launch_s'] * 1e6:6.2f} us   (loomwork/Warp = {ratio:.2f})")
    print(f"\n{GRAPH_LAUNCHES} launches of that kernel, best of 200:")
    print(f"  loomwork: one by one {t_eager * 1e6:7.1f} us, replayed from a captured graph {t_replay * 1e6:6.2f} us "
          f"({t_eager / t_replay:.0f}x)")
    if warp_rt:
        print(f"  Warp:     replayed from a captured graph {warp_rt['replay_s'] * 1e6:6.2f} us   "
              f"(loomwork/Warp = {t_replay / warp_rt['replay_s']:.2f})")
    print(f"\nbuilds of a one-kernel module, each in a new process (median of {args.repeats}):")
    rows = [("first build in an empty cache", "first"), ("rebuild after an edit", "edit"),
            ("load from the cache", "cached"), ("import of the package", "import")]
    for label, key in rows:
        line = f"  {label:32s} loomwork {ours_build[key] * 1e3:8.1f} ms"
        if warp_build:
            line += f"   Warp {warp_build[key] * 1e3:8.1f} ms   (ratio {ours_build[key] / warp_build[key]:.2f})"
        print(line)
    line = f"  {'8 kernels (vec/mat/quat/transform, a struct): rebuild after an edit':32s}\n" \
           f"  {'':32s} loomwork {ours_big['edit'] * 1e3:8.1f} ms"
    if warp_big:
        line += f"   Warp {warp_big['edit'] * 1e3:8.1f} ms   (ratio {ours_big['edit'] / warp_big['edit']:.2f})"
    print(line)
    if not warp_python:
        print("\n(Warp not measured: pass --warp-python /path/to/python-with-warp-lang)")
    results.update(c_s=t_c, loomwork_s=t_lw, numpy_s=t_np, launch_s=t_launch, eager_s=t_eager, replay_s=t_replay,
                   build=ours_build, big=ours_big,
                   warp_runtime=warp_rt, warp_build=warp_build, warp_big=warp_big)
    return results


if __name__ == "__main__":
    main()
