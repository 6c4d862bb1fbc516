"""JAX bridge benchmark on the CPU: kernels called from jitted JAX functions, beside jax.numpy and Warp.

    python -m loomwork.apps.bench_jax [--warp-python PATH] [--iters 2000] [--n 16777216] [--rounds 3]

Per-call overhead: a jitted function that calls a trivial `jax_kernel` (out[i] = x[i] over 16 elements),
beside the same function in `jax.numpy`, in microseconds per call (each call waits for its result). Saxpy
(out = a * x + y, a static) over n elements: through `jax_kernel` under `jax.jit`, the same kernel launched
directly with `wp.launch` on preallocated arrays, and `jax.jit` of the `jax.numpy` expression, in
milliseconds; XLA allocates (and the OS page-faults in) a fresh output each call there, so the same three run
in place too: y an in-out argument of a kernel `y = a * x + y` donated to the jitted function
(`donate_argnums`), which lets XLA reuse its buffer as `wp.launch` reuses its arrays. Every figure is the
best of several rounds; the same script runs under Warp 1.19 (its CPU `jax_kernel`) in its own process when
`--warp-python` names an interpreter with warp-lang and jax (or one is found at LOOMWORK_WARP_PYTHON),
alternating with ours.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from loomwork.apps.benchutil import alternate_best, find_python, run_json

# Runs under either framework; prints one JSON line: per-call microseconds, saxpy milliseconds.
SCRIPT = """
import json, time
import numpy as np
import jax, jax.numpy as jnp
import {lib} as wp
from {lib} import jax_kernel
{init}


@wp.kernel
def copy_kernel(x: wp.array(dtype=float), out: wp.array(dtype=float)):
    i = wp.tid()
    out[i] = x[i]


@wp.kernel
def saxpy_kernel(x: wp.array(dtype=float), y: wp.array(dtype=float), a: float, out: wp.array(dtype=float)):
    i = wp.tid()
    out[i] = a * x[i] + y[i]


@wp.kernel
def saxpy_inplace(x: wp.array(dtype=float), a: float, y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = a * x[i] + y[i]


ITERS, N = {iters}, {n}


def best(fn, iters, reps=3):
    fn()
    t = 1e9
    for _ in range(reps):
        t0 = time.perf_counter()
        for _ in range(iters):
            fn()
        t = min(t, (time.perf_counter() - t0) / iters)
    return t


out = {{}}
jax_copy = jax_kernel(copy_kernel)
small = jnp.arange(16, dtype=jnp.float32)
kernel_call = jax.jit(lambda x: jax_copy(x)[0])
numpy_call = jax.jit(lambda x: x * 1.0)
out["call jax_kernel (us)"] = best(lambda: kernel_call(small).block_until_ready(), ITERS) * 1e6
out["call jax.numpy (us)"] = best(lambda: numpy_call(small).block_until_ready(), ITERS) * 1e6

rng = np.random.default_rng(0)
xh, yh = rng.random(N, dtype=np.float32), rng.random(N, dtype=np.float32)
x, y = jnp.asarray(xh), jnp.asarray(yh)
jax_saxpy = jax_kernel(saxpy_kernel)
saxpy_kernel_jit = jax.jit(lambda x, y: jax_saxpy(x, y, 2.0)[0])
saxpy_numpy_jit = jax.jit(lambda x, y: 2.0 * x + y)
xw, yw, ow = wp.array(xh, device="cpu"), wp.array(yh, device="cpu"), wp.zeros(N, dtype=float, device="cpu")
reps = max(3, min(20, int(2e8 // N)))
out["saxpy jax_kernel (ms)"] = best(lambda: saxpy_kernel_jit(x, y).block_until_ready(), reps) * 1e3
out["saxpy wp.launch (ms)"] = best(lambda: wp.launch(saxpy_kernel, dim=N, inputs=[xw, yw, 2.0], outputs=[ow],
                                                      device="cpu"), reps) * 1e3
out["saxpy jax.numpy (ms)"] = best(lambda: saxpy_numpy_jit(x, y).block_until_ready(), reps) * 1e3
# in place: y donated to an in-out argument, so XLA reuses its buffer as wp.launch reuses its arrays
jax_inplace = jax_kernel(saxpy_inplace, in_out_argnames=["y"])
inplace_jit = jax.jit(lambda x, y: jax_inplace(x, 2.0, y)[0], donate_argnums=1)
numpy_inplace_jit = jax.jit(lambda x, y: 2.0 * x + y, donate_argnums=1)
state = {{"k": jnp.asarray(yh), "n": jnp.asarray(yh)}}


def step(key, fn):
    state[key] = fn(x, state[key])
    state[key].block_until_ready()


out["in-place jax_kernel (ms)"] = best(lambda: step("k", inplace_jit), reps) * 1e3
out["in-place wp.launch (ms)"] = best(lambda: wp.launch(saxpy_inplace, dim=N, inputs=[xw, 2.0, yw], device="cpu"),
                                      reps) * 1e3
out["in-place jax.numpy (ms)"] = best(lambda: step("n", numpy_inplace_jit), reps) * 1e3
err = float(np.max(np.abs(np.asarray(saxpy_kernel_jit(x, y)) - (2.0 * xh + yh))))
out["saxpy max error"] = err
print(json.dumps(out))
"""


def measure(python: str, lib: str, workdir: Path, iters: int, n: int) -> dict:
    init = "wp.config.quiet = True\nwp.init()" if lib == "warp" else ""
    return run_json(python, SCRIPT.format(lib=lib, init=init, iters=iters, n=n), workdir)


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--iters", type=int, default=2000, help="calls per timed loop of the per-call overhead")
    p.add_argument("--n", type=int, default=1 << 24, help="saxpy elements")
    p.add_argument("--rounds", type=int, default=3, help="alternating rounds of both frameworks (best kept)")
    p.add_argument("--warp-python", default=None, help="a Python interpreter with warp-lang and jax installed")
    args = p.parse_args(argv)
    warp_python = find_python(args.warp_python, "LOOMWORK_WARP_PYTHON")
    with tempfile.TemporaryDirectory() as tmp:
        figures = alternate_best({"loomwork": sys.executable, "warp": warp_python},
                                 lambda lib, python: measure(python, lib, Path(tmp), args.iters, args.n), args.rounds)
    ours, warp = figures["loomwork"], figures["warp"]

    print(f"JAX on the CPU (saxpy n = {args.n}):")
    for key, value in ours.items():
        line = f"  {key:24s} loomwork {value:10.3f}"
        if key in warp:
            line += f"   Warp {warp[key]:10.3f}"
            if warp[key] > 0:
                line += f"   (loomwork/Warp = {value / warp[key]:.2f})"
        print(line)
    ratios = {
        "call: jax_kernel / jax.numpy": ours["call jax_kernel (us)"] / ours["call jax.numpy (us)"],
        "saxpy: jax_kernel / wp.launch": ours["saxpy jax_kernel (ms)"] / ours["saxpy wp.launch (ms)"],
        "saxpy: jax_kernel / jax.numpy": ours["saxpy jax_kernel (ms)"] / ours["saxpy jax.numpy (ms)"],
        "in-place: jax_kernel / wp.launch": ours["in-place jax_kernel (ms)"] / ours["in-place wp.launch (ms)"],
        "in-place: jax_kernel / jax.numpy": ours["in-place jax_kernel (ms)"] / ours["in-place jax.numpy (ms)"],
    }
    for key, value in ratios.items():
        print(f"  {key:32s} {value:.2f}")
    if not warp_python:
        print("\n(Warp not measured: pass --warp-python /path/to/python-with-warp-lang-and-jax)")
    return {"loomwork": ours, "warp": warp or None, "ratios": ratios}


if __name__ == "__main__":
    main()
