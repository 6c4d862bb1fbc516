"""Tile benchmark: a tiled GEMM (1024^3 float32, tile_matmul) and a tiled sum of 2^24 floats.

    python -m loomwork.apps.bench_tiles [--warp-python PATH] [--threads N] [--cpu-time]

The GEMM is compared with NumPy's BLAS (numpy.matmul) and the sum with loomwork's own `array_sum`, in the
same run; Warp 1.19's CPU backend runs the same kernels when an interpreter with warp-lang is given
(`--warp-python` or $WARP_PYTHON), else it is skipped with a message. On a machine others load, compare one
core with one core by CPU time: `OPENBLAS_NUM_THREADS=1 python -m loomwork.apps.bench_tiles --threads 1
--cpu-time`.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np

import loomwork as wp
from loomwork.apps.benchutil import best_times, find_python, run_json
from loomwork.utils import array_sum

TILE_M, TILE_N, TILE_K = 64, 64, 64
TILE_SUM = 1024


@wp.kernel
def gemm(a: wp.array2d(dtype=float), b: wp.array2d(dtype=float), c: wp.array2d(dtype=float)):
    i, j = wp.tid()
    acc = wp.tile_zeros(shape=(TILE_M, TILE_N), dtype=float)
    for k in range(a.shape[1] // TILE_K):
        x = wp.tile_load(a, shape=(TILE_M, TILE_K), offset=(i * TILE_M, k * TILE_K))
        y = wp.tile_load(b, shape=(TILE_K, TILE_N), offset=(k * TILE_K, j * TILE_N))
        wp.tile_matmul(x, y, acc)
    wp.tile_store(c, acc, offset=(i * TILE_M, j * TILE_N))


@wp.kernel
def tiled_sum(x: wp.array(dtype=float), out: wp.array(dtype=float)):
    i = wp.tid()
    t = wp.tile_load(x, shape=TILE_SUM, offset=i * TILE_SUM)
    wp.tile_atomic_add(out, wp.tile_sum(t))


WARP_SCRIPT = """
import json, time, numpy as np, warp as wp
wp.config.quiet = True
wp.init()
TILE_M, TILE_N, TILE_K, TILE_SUM = {tm}, {tn}, {tk}, {ts}

@wp.kernel
def gemm(a: wp.array2d(dtype=float), b: wp.array2d(dtype=float), c: wp.array2d(dtype=float)):
    i, j = wp.tid()
    acc = wp.tile_zeros(shape=(TILE_M, TILE_N), dtype=float)
    for k in range(a.shape[1] // TILE_K):
        x = wp.tile_load(a, shape=(TILE_M, TILE_K), offset=(i * TILE_M, k * TILE_K))
        y = wp.tile_load(b, shape=(TILE_K, TILE_N), offset=(k * TILE_K, j * TILE_N))
        wp.tile_matmul(x, y, acc)
    wp.tile_store(c, acc, offset=(i * TILE_M, j * TILE_N))

@wp.kernel
def tiled_sum(x: wp.array(dtype=float), out: wp.array(dtype=float)):
    i = wp.tid()
    t = wp.tile_load(x, shape=TILE_SUM, offset=i * TILE_SUM)
    wp.tile_atomic_add(out, wp.tile_sum(t))

def best(f, reps):
    f(); t = 1e9
    for _ in range(reps):
        t0 = time.perf_counter(); f(); wp.synchronize(); t = min(t, time.perf_counter() - t0)
    return t

n, m = {n}, {m}
rng = np.random.default_rng(0)
a = wp.array(rng.standard_normal((n, n)).astype(np.float32), device="cpu")
b = wp.array(rng.standard_normal((n, n)).astype(np.float32), device="cpu")
c = wp.zeros((n, n), dtype=float, device="cpu")
x = wp.array(rng.standard_normal(m).astype(np.float32), device="cpu")
out = wp.zeros(1, dtype=float, device="cpu")
g = lambda: wp.launch_tiled(gemm, dim=(n // TILE_M, n // TILE_N), inputs=[a, b, c], block_dim=64, device="cpu")
s = lambda: (out.zero_(), wp.launch_tiled(tiled_sum, dim=m // TILE_SUM, inputs=[x, out], block_dim=64, device="cpu"))
print(json.dumps({{"gemm_s": best(g, 2), "sum_s": best(s, 5)}}))
"""


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--n", type=int, default=1024, help="GEMM size (a multiple of 64)")
    p.add_argument("--m", type=int, default=1 << 24, help="floats to sum (a multiple of 1024)")
    p.add_argument("--warp-python", default=None, help="a Python interpreter with warp-lang installed")
    p.add_argument("--threads", type=int, default=None, help="loomwork's CPU threads (wp.config.cpu_threads)")
    p.add_argument("--cpu-time", action="store_true",
                   help="time by the process's CPU time, not wall time (a loaded machine; one thread each)")
    args = p.parse_args(argv)
    if args.threads is not None:
        wp.config.cpu_threads = args.threads
    n, m = args.n, args.m
    rng = np.random.default_rng(0)
    A = rng.standard_normal((n, n)).astype(np.float32)
    B = rng.standard_normal((n, n)).astype(np.float32)
    X = rng.standard_normal(m).astype(np.float32)
    a, b, c = wp.array(A), wp.array(B), wp.zeros((n, n), dtype=float)
    x, out = wp.array(X), wp.zeros(1, dtype=float)

    def run_gemm() -> None:
        wp.launch_tiled(gemm, dim=(n // TILE_M, n // TILE_N), inputs=[a, b, c], block_dim=64)

    def run_sum() -> None:
        out.zero_()
        wp.launch_tiled(tiled_sum, dim=m // TILE_SUM, inputs=[x, out], block_dim=64)

    run_gemm()
    err = np.abs(c.numpy() - A @ B).max() / np.abs(A @ B).max()
    run_sum()
    sum_err = abs(float(out.numpy()[0]) - float(X.astype(np.float64).sum())) / np.abs(X).sum()
    t = best_times({"gemm": run_gemm, "numpy": lambda: np.matmul(A, B), "sum": run_sum,
                    "array_sum": lambda: array_sum(x)}, rounds=4, reps=3,
                   clock=time.process_time if args.cpu_time else time.perf_counter)
    flops = 2.0 * n ** 3
    result = {f"{k}_s": v for k, v in t.items()} | {"gemm_rel_error": err, "sum_rel_error": sum_err}
    print(f"GEMM {n}^3 float32 (tile_matmul, {TILE_M}x{TILE_N}x{TILE_K} tiles): {t['gemm'] * 1e3:8.2f} ms "
          f"{flops / t['gemm'] / 1e9:7.1f} GFLOP/s  (relative error {err:.1e})")
    print(f"  numpy.matmul (BLAS):                        {t['numpy'] * 1e3:8.2f} ms "
          f"{flops / t['numpy'] / 1e9:7.1f} GFLOP/s  -> tiles at {t['numpy'] / t['gemm'] * 100:.0f}% of BLAS")
    gbytes = m * 4 / 1e9
    print(f"tiled sum of {m} floats (tile_load + tile_sum + tile_atomic_add): {t['sum'] * 1e3:7.2f} ms "
          f"{gbytes / t['sum']:6.1f} GB/s  (relative error {sum_err:.1e})")
    print(f"  wp.utils.array_sum:                                          {t['array_sum'] * 1e3:7.2f} ms "
          f"{gbytes / t['array_sum']:6.1f} GB/s  -> tiles at {t['array_sum'] / t['sum'] * 100:.0f}%")
    warp = find_python(args.warp_python, "WARP_PYTHON")
    if warp is None:
        print("Warp 1.19 CPU: skipped (pass --warp-python PATH or set $WARP_PYTHON to an interpreter with warp-lang)")
    else:
        with tempfile.TemporaryDirectory() as tmp:
            try:
                w = run_json(warp, WARP_SCRIPT.format(tm=TILE_M, tn=TILE_N, tk=TILE_K, ts=TILE_SUM, n=n, m=m),
                             Path(tmp))
                print(f"Warp 1.19 CPU: GEMM {w['gemm_s'] * 1e3:.1f} ms ({flops / w['gemm_s'] / 1e9:.1f} GFLOP/s), "
                      f"tiled sum {w['sum_s'] * 1e3:.2f} ms ({gbytes / w['sum_s']:.1f} GB/s)")
                result.update({f"warp_{k}": v for k, v in w.items()})
            except Exception as e:
                print(f"Warp 1.19 CPU: failed ({e})")
    return result


if __name__ == "__main__":
    main()
