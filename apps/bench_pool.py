"""The CPU thread pool on a busy machine: launches timed one thread against the pool, idle and under load.

Next to PyTorch, JAX or a test runner the cores are rarely free. This benchmark starts its own competing load
(processes that spin for a bounded time) and times the same launches with `wp.config.cpu_threads = 1` and with
the default pool, taken in alternation so that both see the same load. A pool that spins against a descheduled
peer, or waits for a worker that never got a core, shows up as pooled launches slower than single-threaded ones.

    python -m loomwork.apps.bench_pool [--sizes 16384 1048576] [--load 2] [--seconds 1] [--kernels light heavy]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time

import numpy as np

import loomwork as wp


@wp.kernel
def _poly(x: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    v = x[i]
    y[i] = ((0.5 * v + 1.25) * v - 0.75) * v + wp.sqrt(v * v + 1.0)


@wp.kernel
def _poly_heavy(x: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    v = x[i]
    acc = 0.0
    for _k in range(32):
        acc = wp.sqrt(acc * acc + v) * 0.5 + v
    y[i] = acc


KERNELS = {"light": _poly, "heavy": _poly_heavy}  # memory-bound / compute-bound per element

_SPIN = "import time, sys\nend = time.time() + float(sys.argv[1])\nwhile time.time() < end:\n    pass\n"


def _start_load(processes: int, seconds: float) -> list[subprocess.Popen]:
    """`processes` busy Python processes that each spin for `seconds` and then exit by themselves."""
    return [subprocess.Popen([sys.executable, "-c", _SPIN, str(seconds)]) for _ in range(processes)]


def _launch_times(kernel: wp.Kernel, x: wp.array, y: wp.array, threads: int | None, seconds: float) -> list[float]:
    """Per-launch wall times (s) of `kernel` over x with the pool sized `threads`, launched for about `seconds`."""
    wp.config.cpu_threads = threads
    wp.launch(kernel, x.shape[0], inputs=[x, y])  # resizes the pool outside the timed launches
    times: list[float] = []
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        t0 = time.perf_counter()
        wp.launch(kernel, x.shape[0], inputs=[x, y])
        times.append(time.perf_counter() - t0)
    return times


def _summary(times: list[float]) -> dict[str, float]:
    """Median, 90th percentile and mean of launch times, in microseconds."""
    us = sorted(t * 1e6 for t in times)
    return {"median_us": statistics.median(us), "p90_us": us[int(0.9 * (len(us) - 1))],
            "mean_us": statistics.fmean(us), "launches": len(us)}


def measure(kernel: wp.Kernel, n: int, load: int, seconds: float, rounds: int) -> dict[str, dict[str, float]]:
    """Launch times of `kernel` over n elements with one thread and with the default pool, under `load` busy
    processes (0: idle), the two taken in alternation `rounds` times."""
    x = wp.array(np.random.default_rng(0).random(n, dtype=np.float32))
    y = wp.empty(n, dtype=float)
    procs = _start_load(load, rounds * 2 * seconds + 3.0) if load else []
    try:
        if procs:
            time.sleep(0.3)  # let the load start spinning
        got: dict[str, list[float]] = {"one thread": [], "pool": []}
        for _ in range(rounds):
            got["one thread"] += _launch_times(kernel, x, y, 1, seconds)
            got["pool"] += _launch_times(kernel, x, y, None, seconds)
    finally:
        for p in procs:
            p.kill()
            p.wait()
        wp.config.cpu_threads = None
    return {name: _summary(t) for name, t in got.items()}


def main(argv: list[str] | None = None) -> dict:
    """Run the benchmark, print a table, and return its figures."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[16384, 1 << 20])
    ap.add_argument("--load", type=int, default=2, help="competing busy processes")
    ap.add_argument("--seconds", type=float, default=1.0, help="timed seconds per configuration and round")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--kernels", nargs="+", choices=sorted(KERNELS), default=sorted(KERNELS))
    args = ap.parse_args(argv)
    cores = wp.kernels.cpu.cpu_count()
    print(f"loomwork CPU pool benchmark, {cores} cores; load = {args.load} busy processes")
    results: dict = {"cores": cores, "load": args.load, "figures": []}
    for name, n in ((k, n) for k in args.kernels for n in args.sizes):
        for load in (0, args.load):
            r = measure(KERNELS[name], n, load, args.seconds, args.rounds)
            one, pool = r["one thread"], r["pool"]
            ratio = pool["mean_us"] / one["mean_us"]
            print(f"  {name:5} n={n:>8}  load={load}  one thread: median {one['median_us']:8.1f} us  mean "
                  f"{one['mean_us']:8.1f}  p90 {one['p90_us']:8.1f}   pool: median {pool['median_us']:8.1f} us  "
                  f"mean {pool['mean_us']:8.1f}  p90 {pool['p90_us']:8.1f}   pool/one (mean) {ratio:5.2f}x")
            results["figures"].append({"kernel": name, "n": n, "load": load, **r, "ratio": ratio})
    return results


if __name__ == "__main__":
    main()
