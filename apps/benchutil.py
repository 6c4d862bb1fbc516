"""Helpers the benchmarks share: best-of timing, and running a peer framework's script in its own interpreter."""

from __future__ import annotations

import ctypes
import json
import os
import shutil
import subprocess
import time
from collections.abc import Callable
from pathlib import Path


def best_time(fn: Callable[[], object], reps: int, clock: Callable[[], float] = time.perf_counter) -> float:
    """The fastest of `reps` timed calls (after one warm-up call), in seconds of `clock` (wall time; or
    time.process_time: the CPU time of all the process's threads, which other processes' load does not add to)."""
    fn()
    best = float("inf")
    for _ in range(reps):
        t0 = clock()
        fn()
        best = min(best, clock() - t0)
    return best


def best_times(fns: dict[str, Callable[[], object]], rounds: int = 6, reps: int = 3,
               clock: Callable[[], float] = time.perf_counter) -> dict[str, float]:
    """Best-of timings of several calls taken in alternation, `rounds` times `reps` each, so that a burst of
    load from elsewhere on a shared machine slows them alike and their ratios stay meaningful."""
    best = dict.fromkeys(fns, float("inf"))
    for _ in range(rounds):
        for name, fn in fns.items():
            best[name] = min(best[name], best_time(fn, reps, clock))
    return best


def alternate_best(pythons: dict[str, str | None], measure: Callable[[str, str], dict[str, float]],
                   rounds: int) -> dict[str, dict[str, float]]:
    """{name: {figure: best value}} for each named interpreter (None: skipped), `measure(name, python)` taken
    in alternation `rounds` times so that load from elsewhere slows them alike. A peer whose measurement
    fails is reported and left out; a failure of loomwork's own raises."""
    best: dict[str, dict[str, float]] = {name: {} for name in pythons}
    for _ in range(rounds):
        for name, python in pythons.items():
            if python is None:
                continue
            try:
                for key, value in measure(name, python).items():
                    best[name][key] = min(best[name].get(key, float("inf")), value)
            except Exception as e:  # a broken peer install must not hide our own figures
                print(f"({name} measurement failed: {e})")
                if name == "loomwork":
                    raise
    return best


def run_json(python: str, script: str, workdir: Path) -> dict:
    """Run `script` as a file (Warp reads kernel source from files) in a new process; parse its last JSON line."""
    path = workdir / f"bench_script_{abs(hash(script))}.py"
    path.write_text(script)
    r = subprocess.run([python, str(path)], capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        raise RuntimeError(r.stderr.strip()[-2000:])
    return json.loads(r.stdout.strip().splitlines()[-1])


def find_python(arg: str | None, env_var: str) -> str | None:
    """An interpreter given on the command line or in `env_var`, if it exists."""
    cand = arg or os.environ.get(env_var)
    return cand if cand and Path(cand).exists() else None


def build_openmp(workdir: Path, name: str, source: str, extra_flags: tuple[str, ...] = ()) -> ctypes.CDLL | None:
    """Compile C `source` with gcc -O3 -march=native -fopenmp into a library (None, with a message, when it
    cannot be built): the machine's reference loops the benchmarks compare against."""
    cc = shutil.which("gcc") or shutil.which("cc")
    if cc is None:
        print("(no C compiler for the OpenMP reference)")
        return None
    src, lib = workdir / f"{name}.c", workdir / f"lib{name}.so"
    src.write_text(source)
    cmd = [cc, "-O3", "-march=native", "-fopenmp", *extra_flags, "-shared", "-fPIC", str(src), "-o", str(lib), "-lm"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        print(f"(could not build the C OpenMP reference: {r.stderr.strip()[:200]})")
        return None
    return ctypes.CDLL(str(lib))
