"""All-pairs n-body gravity: one force evaluation for 8192 bodies (vec3 float32, softening 0.01).

    python -m loomwork.apps.bench_nbody [--n 8192] [--warp-python PATH] [--peers-python PATH]

Reports billions of pair interactions per second for loomwork's default build (threads across SIMD lanes,
IEEE math), the same kernel one thread at a time (module option cpu_simd=False) and with fast_math, beside
hand-written C loops built by this benchmark (gcc -O3 -march=native, OpenMP over the bodies on the same
number of threads, `omp simd` over the pairs): the IEEE reference with -fno-math-errno only, and one with
-ffast-math; and, when interpreters are given, Warp 1.19, Numba (parallel) and Taichi's CPU backend. The
loomwork and C timings are taken in alternating rounds (a burst of load elsewhere slows them alike).
"""

from __future__ import annotations

import argparse
import ctypes
import tempfile
from pathlib import Path

import numpy as np

import loomwork as wp
from loomwork.apps.benchutil import best_times, build_openmp, find_python, run_json
from loomwork.kernels.cpu import cpu_count

SOFTENING = wp.constant(0.01)


def forces_of(pos: wp.array(dtype=wp.vec3), mass: wp.array(dtype=float), acc: wp.array(dtype=wp.vec3)):
    i = wp.tid()
    pi = pos[i]
    ax = 0.0
    ay = 0.0
    az = 0.0
    for j in range(pos.shape[0]):
        r = pos[j] - pi
        d2 = wp.dot(r, r) + SOFTENING * SOFTENING
        inv = 1.0 / wp.sqrt(d2)
        s = mass[j] * inv * inv * inv
        ax += r[0] * s
        ay += r[1] * s
        az += r[2] * s
    acc[i] = wp.vec3(ax, ay, az)


# the same kernel in three modules, each with its own build options
forces = wp.kernel(forces_of, module="loomwork.apps.bench_nbody.default")
forces_scalar = wp.kernel(forces_of, module="loomwork.apps.bench_nbody.scalar", module_options={"cpu_simd": False})
forces_fast = wp.kernel(forces_of, module="loomwork.apps.bench_nbody.fast", module_options={"fast_math": True})

C_NBODY = r"""
#include <math.h>
void forces(const float* pos, const float* mass, float* acc, int n, int threads) {
    #pragma omp parallel for schedule(static) num_threads(threads)
    for (int i = 0; i < n; ++i) {
        float px = pos[3*i], py = pos[3*i+1], pz = pos[3*i+2], ax = 0, ay = 0, az = 0;
        #pragma omp simd reduction(+:ax,ay,az)
        for (int j = 0; j < n; ++j) {
            float rx = pos[3*j] - px, ry = pos[3*j+1] - py, rz = pos[3*j+2] - pz;
            float inv = 1.0f / sqrtf(rx*rx + ry*ry + rz*rz + 0.0001f);
            float s = mass[j] * inv * inv * inv;
            ax += rx * s; ay += ry * s; az += rz * s;
        }
        acc[3*i] = ax; acc[3*i+1] = ay; acc[3*i+2] = az;
    }
}
"""

WARP_SCRIPT = """
import json, time, numpy as np, warp as wp
wp.config.quiet = True
wp.init()

@wp.kernel
def forces(pos: wp.array(dtype=wp.vec3), mass: wp.array(dtype=float), acc: wp.array(dtype=wp.vec3)):
    i = wp.tid()
    pi = pos[i]
    a = wp.vec3(0.0)
    for j in range(pos.shape[0]):
        r = pos[j] - pi
        inv = 1.0 / wp.sqrt(wp.dot(r, r) + 0.0001)
        a += r * (mass[j] * inv * inv * inv)
    acc[i] = a

n = {n}
rng = np.random.default_rng(0)
pos = wp.array(rng.standard_normal((n, 3)).astype(np.float32), dtype=wp.vec3, device="cpu")
mass = wp.array(rng.uniform(0.5, 1.5, n).astype(np.float32), device="cpu")
acc = wp.zeros(n, dtype=wp.vec3, device="cpu")
wp.launch(forces, n, inputs=[pos, mass, acc], device="cpu")
t = 1e9
for _ in range(2):
    t0 = time.perf_counter(); wp.launch(forces, n, inputs=[pos, mass, acc], device="cpu"); wp.synchronize()
    t = min(t, time.perf_counter() - t0)
print(json.dumps({{"s": t}}))
"""

PEERS_SCRIPT = """
import json, time, numpy as np
n = {n}
rng = np.random.default_rng(0)
pos = rng.standard_normal((n, 3)).astype(np.float32)
mass = rng.uniform(0.5, 1.5, n).astype(np.float32)
out = {{}}

def best(f, reps=3):
    f(); t = 1e9
    for _ in range(reps):
        t0 = time.perf_counter(); f(); t = min(t, time.perf_counter() - t0)
    return t

try:
    import numba

    @numba.njit(parallel=True, fastmath=True)
    def nb(pos, mass, acc):
        for i in numba.prange(pos.shape[0]):
            ax = ay = az = np.float32(0)
            for j in range(pos.shape[0]):
                rx = pos[j, 0] - pos[i, 0]; ry = pos[j, 1] - pos[i, 1]; rz = pos[j, 2] - pos[i, 2]
                inv = np.float32(1) / np.sqrt(rx * rx + ry * ry + rz * rz + np.float32(0.0001))
                s = mass[j] * inv * inv * inv
                ax += rx * s; ay += ry * s; az += rz * s
            acc[i, 0] = ax; acc[i, 1] = ay; acc[i, 2] = az
    acc = np.zeros_like(pos)
    out["numba"] = best(lambda: nb(pos, mass, acc))
except Exception as e:
    out["numba_error"] = str(e)[:200]
try:
    import taichi as ti
    ti.init(arch=ti.cpu, log_level=ti.ERROR)
    p = ti.Vector.field(3, ti.f32, n); m = ti.field(ti.f32, n); a = ti.Vector.field(3, ti.f32, n)
    p.from_numpy(pos); m.from_numpy(mass)

    @ti.kernel
    def tk():
        for i in range(n):
            acc = ti.Vector([0.0, 0.0, 0.0])
            for j in range(n):
                r = p[j] - p[i]
                inv = 1.0 / ti.sqrt(r.dot(r) + 0.0001)
                acc += r * (m[j] * inv * inv * inv)
            a[i] = acc

    def run():
        tk(); ti.sync()
    out["taichi"] = best(run)
except Exception as e:
    out["taichi_error"] = str(e)[:200]
print(json.dumps(out))
"""


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.split("\\n")[0])
    p.add_argument("--n", type=int, default=8192)
    p.add_argument("--warp-python", default=None)
    p.add_argument("--peers-python", default=None, help="an interpreter with numba and/or taichi installed")
    args = p.parse_args(argv)
    n = args.n
    rng = np.random.default_rng(0)
    pos_np = rng.standard_normal((n, 3)).astype(np.float32)
    mass_np = rng.uniform(0.5, 1.5, n).astype(np.float32)
    pos, mass = wp.array(pos_np, dtype=wp.vec3), wp.array(mass_np)
    acc = wp.zeros(n, dtype=wp.vec3)
    pairs = n * n / 1e9
    threads = wp.config.cpu_threads or cpu_count()
    calls = {name: (lambda k=k: wp.launch(k, n, inputs=[pos, mass, acc]))
             for name, k in (("loomwork (default)", forces), ("loomwork (scalar)", forces_scalar),
                             ("loomwork (fast_math)", forces_fast))}
    with tempfile.TemporaryDirectory() as tmp:
        outs = {}
        for name, flags in (("c IEEE", ("-fno-math-errno",)), ("c fast-math", ("-ffast-math",))):
            c = build_openmp(Path(tmp), name.replace(" ", "_"), C_NBODY, flags)
            if c is not None:
                c.forces.argtypes = [ctypes.c_void_p] * 3 + [ctypes.c_int] * 2
                out = outs[name] = np.zeros_like(pos_np)
                calls[name] = lambda f=c.forces, o=out: f(pos_np.ctypes.data, mass_np.ctypes.data, o.ctypes.data, n,
                                                          threads)
        results: dict = best_times(calls, rounds=3, reps=2)
        # the default build (run first in each round) against the one-thread-at-a-time build, bit for bit
        calls["loomwork (default)"]()
        simd_acc = acc.numpy().copy()
        calls["loomwork (scalar)"]()
        bitwise = bool((simd_acc.view(np.uint32) == acc.numpy().view(np.uint32)).all())
        # check against a float64 NumPy evaluation of a few bodies
        r = pos_np[None, :8] * 0 + pos_np[:, None, :] - pos_np[None, :8, :]
        d = (r.astype(np.float64) ** 2).sum(-1) + 1e-4
        ref = (r * (mass_np[:, None] / d**1.5)[..., None]).sum(0)
        err = np.abs(simd_acc[:8] - ref).max() / np.abs(ref).max()
        warp_python = find_python(args.warp_python, "LOOMWORK_WARP_PYTHON")
        if warp_python:
            results["warp"] = run_json(warp_python, WARP_SCRIPT.format(n=n), Path(tmp))["s"]
        peers_python = find_python(args.peers_python, "LOOMWORK_PEERS_PYTHON")
        if peers_python:
            peers = run_json(peers_python, PEERS_SCRIPT.format(n=n), Path(tmp))
            results.update({k: v for k, v in peers.items() if not k.endswith("error")})
            for k, v in peers.items():
                if k.endswith("error"):
                    print(f"  ({k}: {v})")
    print(f"n-body, {n} bodies, one force evaluation ({wp.get_device('cpu').name}, {threads} threads); "
          f"max relative error {err:.1e}; SIMD lanes == one thread at a time bit for bit: {bitwise}")
    ieee = results.get("c IEEE")
    for name in ("loomwork (default)", "loomwork (scalar)", "loomwork (fast_math)", "c IEEE", "c fast-math",
                 "taichi", "numba", "warp"):
        if name in results:
            vs = f"  {ieee / results[name]:5.2f}x the C IEEE reference" if ieee else ""
            print(f"  {name:21s} {results[name] * 1e3:8.1f} ms  {pairs / results[name]:6.2f} G interactions/s{vs}")
    results["rel_error"] = float(err)
    results["bitwise"] = bitwise
    return results


if __name__ == "__main__":
    main()
