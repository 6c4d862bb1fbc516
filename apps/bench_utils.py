"""Library routine benchmark: array_sum and array_scan of 2^24 floats, radix_sort_pairs of 2^22 int32 keys.

    python -m loomwork.apps.bench_utils [--warp-python PATH]

Sums and scans are compared with the machine's memory bandwidth, measured by C OpenMP loops this
benchmark builds (a reading loop for sums, a copying loop for scans, and a copy with streaming stores,
which array_scan uses for outputs beyond the cache), and with NumPy and Warp;
the sort with numpy.argsort(kind="stable") and Warp's radix sort.
"""

from __future__ import annotations

import argparse
import ctypes
import tempfile
from pathlib import Path

import numpy as np

import loomwork as wp
from loomwork.apps.benchutil import best_time, best_times, build_openmp, find_python, run_json
from loomwork.utils import array_scan, array_sum, radix_sort_pairs

C_REFERENCE = r"""
double read_sum(const float* x, long n) {
    double s = 0.0;
    #pragma omp parallel for simd reduction(+:s) schedule(static)
    for (long i = 0; i < n; ++i) s += x[i];
    return s;
}
void copy(const float* x, float* y, long n) {
    #pragma omp parallel for simd schedule(static)
    for (long i = 0; i < n; ++i) y[i] = x[i];
}
#if defined(__AVX__)
#include <immintrin.h>
#endif
/* A copy whose stores skip reading the destination (y 32-byte aligned, n a multiple of 8). */
int stream_copy(const float* x, float* y, long n) {
#if defined(__AVX__)
    #pragma omp parallel
    {
        #pragma omp for schedule(static)
        for (long i = 0; i < n; i += 8) _mm256_stream_ps(y + i, _mm256_loadu_ps(x + i));
        _mm_sfence();
    }
    return 1;
#else
    return 0;
#endif
}
"""

WARP_SCRIPT = """
import json, time, numpy as np, warp as wp
wp.config.quiet = True
wp.init()
from warp.utils import array_scan, array_sum, radix_sort_pairs

def best(f, reps=10):
    f(); t = 1e9
    for _ in range(reps):
        t0 = time.perf_counter(); f(); wp.synchronize(); t = min(t, time.perf_counter() - t0)
    return t

x = wp.array(np.random.default_rng(0).standard_normal({n}).astype(np.float32), device="cpu")
out = wp.zeros({n}, dtype=float, device="cpu")
total = float(array_sum(x))
keys = wp.array(np.random.default_rng(1).integers(-2**31, 2**31 - 1, 2 * {m}).astype(np.int32), device="cpu")
vals = wp.array(np.arange(2 * {m}, dtype=np.int32), device="cpu")
k0, v0 = keys.numpy().copy(), vals.numpy().copy()
def sort():
    keys.assign(k0); vals.assign(v0); radix_sort_pairs(keys, vals, {m})
print(json.dumps({{"sum_s": best(lambda: array_sum(x)), "scan_s": best(lambda: array_scan(x, out, inclusive=True)),
                  "sort_s": best(sort, 3), "sum": total}}))
"""


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.split("\\n")[0])
    p.add_argument("--n", type=int, default=1 << 24, help="elements to sum and scan")
    p.add_argument("--m", type=int, default=1 << 22, help="keys to sort")
    p.add_argument("--warp-python", default=None, help="a Python interpreter with warp-lang installed")
    args = p.parse_args(argv)
    n, m = args.n, args.m
    x = np.random.default_rng(0).standard_normal(n).astype(np.float32)
    xa, out = wp.array(x), wp.zeros(n, dtype=float)
    ref = x.astype(np.float64).sum()
    result: dict = {}
    with tempfile.TemporaryDirectory() as tmp:
        c = build_openmp(Path(tmp), "reference", C_REFERENCE)
        timed = {"sum": lambda: array_sum(xa), "scan": lambda: array_scan(xa, out)}
        if c is not None:
            c.read_sum.argtypes, c.read_sum.restype = [ctypes.c_void_p, ctypes.c_long], ctypes.c_double
            c.copy.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_long]
            c.stream_copy.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_long]
            y = np.empty_like(x)
            y_at, k = y.ctypes.data + (-y.ctypes.data % 32), (n - 8) // 8 * 8  # aligned, within y
            timed["read"] = lambda: c.read_sum(x.ctypes.data, n)
            timed["copy"] = lambda: c.copy(x.ctypes.data, y.ctypes.data, n)
            if c.stream_copy(x.ctypes.data, y_at, k):  # 0: built without AVX
                timed["stream"] = lambda: c.stream_copy(x.ctypes.data, y_at, k)
        times = best_times(timed)
        t_sum, t_scan, t_read, t_copy = times["sum"], times["scan"], times.get("read"), times.get("copy")
        t_stream = times["stream"] * n / k if "stream" in times else None
        t_np_sum = best_time(lambda: x.sum(), 5)
        t_np_scan = best_time(lambda: np.cumsum(x), 5)
        keys0 = np.random.default_rng(1).integers(-2**31, 2**31 - 1, m).astype(np.int32)
        keys, vals = wp.array(keys0), wp.array(np.arange(m, dtype=np.int32))

        def sort() -> None:
            keys.assign(keys0)
            vals.assign(np.arange(m, dtype=np.int32))
            radix_sort_pairs(keys, vals, m)

        t_sort = best_time(sort, 3)
        t_copy_in = best_time(lambda: (keys.assign(keys0), vals.assign(np.arange(m, dtype=np.int32))), 3)
        t_argsort = best_time(lambda: np.argsort(keys0, kind="stable"), 3)
        warp = None
        warp_python = find_python(args.warp_python, "LOOMWORK_WARP_PYTHON")
        if warp_python:
            warp = run_json(warp_python, WARP_SCRIPT.format(n=n, m=m), Path(tmp))
    err = abs(array_sum(xa) - ref) / abs(ref)
    exact = np.cumsum(x.astype(np.float64))
    array_scan(xa, out)
    scan_err = np.abs(out.numpy() - exact).max() / np.abs(exact).max()  # worst error, relative to the scale
    np_scan_err = np.abs(np.cumsum(x) - exact).max() / np.abs(exact).max()
    gb = 4 * n / 1e9
    print(f"array_sum / array_scan of {n} float32, radix_sort_pairs of {m} int32 keys ({wp.get_device('cpu').name})")
    if c is not None:
        line = f"  memory bandwidth (C OpenMP): read {gb / t_read:5.1f} GB/s, copy {2 * gb / t_copy:5.1f} GB/s"
        if t_stream:
            line += f", copy with streaming stores {2 * gb / t_stream:5.1f} GB/s"
        print(line)
    line = f"  array_sum:  {t_sum * 1e3:6.2f} ms  {gb / t_sum:5.1f} GB/s"
    if c is not None:
        line += f" = {t_read / t_sum:.0%} of the read loop"
    print(line + f"   relative error {err:.1e}   (NumPy {t_np_sum * 1e3:.2f} ms)")
    line = f"  array_scan: {t_scan * 1e3:6.2f} ms  {2 * gb / t_scan:5.1f} GB/s"
    if c is not None:
        line += f" = {t_copy / t_scan:.0%} of the copy loop"
        if t_stream:
            line += f" ({t_stream / t_scan:.0%} of the streaming copy)"
    print(line + f"   max error {scan_err:.1e}   (NumPy cumsum {t_np_scan * 1e3:.2f} ms, max error {np_scan_err:.1e})")
    t_sort_only = max(t_sort - t_copy_in, 1e-9)
    print(f"  radix_sort_pairs: {t_sort_only * 1e3:6.1f} ms   numpy.argsort(stable) {t_argsort * 1e3:6.1f} ms   "
          f"({t_argsort / t_sort_only:.1f}x faster)")
    if warp:
        werr = abs(warp["sum"] - ref) / abs(ref)
        print(f"  Warp 1.19: array_sum {warp['sum_s'] * 1e3:.2f} ms (relative error {werr:.1e}), "
              f"array_scan {warp['scan_s'] * 1e3:.2f} ms, radix_sort_pairs {warp['sort_s'] * 1e3:.1f} ms "
              "(including its reset copies)")
    result.update(sum_s=t_sum, scan_s=t_scan, sort_s=t_sort_only, argsort_s=t_argsort, sum_rel_error=err,
                  scan_max_error=scan_err, warp=warp)
    return result


if __name__ == "__main__":
    main()
