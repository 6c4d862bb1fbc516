"""Reverse-mode benchmark: loss = sum((a*x + b)^2) over n float32, gradients for a, x and b.

    python -m loomwork.apps.bench_autodiff [--n 4194304] [--warp-python PATH] [--jax-python PATH]

Two shapes users run: scalar parameters a and b (one value each, shared by every element), and
per-element parameters (a, x and b all n long: each element its own parameter, as in differentiable
simulation). Times the forward launch and `Tape.backward` from zeroed gradients (`tape.zero()` untimed, as
in Warp's loop; backward zeroes the intermediates' gradients itself),
beside NVIDIA Warp's Tape and `jax.jit(jax.grad(...))` of the same function in jax.numpy, each run in its
own interpreter when given (or found at LOOMWORK_WARP_PYTHON / LOOMWORK_JAX_PYTHON). For the per-element
shape a C loop built here reads and writes the bytes forward + backward must move at least (read a, x, b;
read them again and write three gradients): the memory-traffic time the total is compared with.
"""

from __future__ import annotations

import argparse
import ctypes
import inspect
import tempfile
import time
from pathlib import Path

import numpy as np

import loomwork as wp
from loomwork.apps.benchutil import best_time, build_openmp, find_python, run_json


@wp.kernel
def loss_kernel(x: wp.array(dtype=float), a: wp.array(dtype=float), b: wp.array(dtype=float),
                loss: wp.array(dtype=float)):
    i = wp.tid()
    v = a[0] * x[i] + b[0]
    wp.atomic_add(loss, 0, v * v)


@wp.kernel
def loss_per_element(x: wp.array(dtype=float), a: wp.array(dtype=float), b: wp.array(dtype=float),
                     loss: wp.array(dtype=float)):
    i = wp.tid()
    v = a[i] * x[i] + b[i]
    wp.atomic_add(loss, 0, v * v)


SHAPES = {"scalar a, b": loss_kernel, "per-element a, x, b": loss_per_element}

C_TRAFFIC = r"""
float forward(const float* a, const float* x, const float* b, long n, int threads) {
    double s = 0;
    #pragma omp parallel for reduction(+:s) schedule(static) num_threads(threads)
    for (long i = 0; i < n; ++i) { float v = a[i] * x[i] + b[i]; s += v * v; }
    return (float)s;
}
void backward(const float* a, const float* x, const float* b, float* ga, float* gx, float* gb, long n,
              int threads) {
    #pragma omp parallel for schedule(static) num_threads(threads)
    for (long i = 0; i < n; ++i) {
        float g = 2.0f * (a[i] * x[i] + b[i]);
        ga[i] = g * x[i]; gx[i] = g * a[i]; gb[i] = g;
    }
}
"""

WARP_SCRIPT = """
import json, time, numpy as np, warp as wp
wp.config.quiet = True
wp.init()

{kernel}
n, m = {n}, {m}
rng = np.random.default_rng(0)
x = wp.array(rng.standard_normal(n).astype(np.float32), requires_grad=True, device="cpu")
a = wp.array(np.full(m, 0.5, np.float32), requires_grad=True, device="cpu")
b = wp.array(np.full(m, 0.25, np.float32), requires_grad=True, device="cpu")
l = wp.zeros(1, dtype=float, requires_grad=True, device="cpu")
fwd, bwd, grads = [], [], []
for _ in range({reps} + 1):
    l.zero_()
    tape = wp.Tape()
    t0 = time.perf_counter()
    with tape:
        wp.launch({name}, n, inputs=[x, a, b, l], device="cpu")
    wp.synchronize()
    t1 = time.perf_counter()
    tape.backward(loss=l)
    wp.synchronize()
    t2 = time.perf_counter()
    fwd.append(t1 - t0); bwd.append(t2 - t1)
    grads.append(float(a.grad.numpy().sum()))
    tape.zero()
print(json.dumps({{"forward_s": min(fwd[1:]), "backward_s": min(bwd[1:]), "a_grad": grads[-1]}}))
"""

JAX_SCRIPT = """
import json, time, numpy as np, jax, jax.numpy as jnp
jax.config.update("jax_platforms", "cpu")

def loss(a, x, b):
    return jnp.sum((a * x + b) ** 2)

grad = jax.jit(jax.grad(loss, argnums=(0, 1, 2)))
n, m = {n}, {m}
x = jnp.asarray(np.random.default_rng(0).standard_normal(n).astype(np.float32))
a, b = jnp.full(m, 0.5, jnp.float32), jnp.full(m, 0.25, jnp.float32)
if m == 1:
    a, b = a[0], b[0]
jax.block_until_ready(grad(a, x, b))
best = 1e9
for _ in range({reps}):
    t0 = time.perf_counter()
    ga, gx, gb = jax.block_until_ready(grad(a, x, b))
    best = min(best, time.perf_counter() - t0)
print(json.dumps({{"grad_s": best, "a_grad": float(jnp.sum(ga)), "jax": jax.__version__}}))
"""


def measure(kernel: wp.Kernel, n: int, m: int, reps: int) -> dict:
    """Forward and backward times of `kernel` over n elements with a, b of length m, and da's error."""
    x = wp.array(np.random.default_rng(0).standard_normal(n).astype(np.float32), requires_grad=True)
    a = wp.array(np.full(m, 0.5, np.float32), requires_grad=True)
    b = wp.array(np.full(m, 0.25, np.float32), requires_grad=True)
    loss = wp.zeros(1, dtype=float, requires_grad=True)
    tapes = []

    def forward() -> None:  # a new Tape per step, as in Warp's examples
        loss.zero_()
        tapes[:] = [wp.Tape()]
        with tapes[0]:
            wp.launch(kernel, n, inputs=[x, a, b, loss])

    forward()
    t_fwd = best_time(forward, reps)
    bwd = []
    for _ in range(reps + 1):  # from zeroed gradients each time (they accumulate), zeroing untimed as in Warp's loop
        tapes[0].zero()
        t0 = time.perf_counter()
        tapes[0].backward(loss=loss)
        bwd.append(time.perf_counter() - t0)
    t_bwd = min(bwd[1:])
    xv = x.numpy().astype(np.float64)
    expect_a = float((2 * (0.5 * xv + 0.25) * xv).sum())
    err = abs(float(a.grad.numpy().astype(np.float64).sum()) - expect_a) / abs(expect_a)
    return {"forward_s": t_fwd, "backward_s": t_bwd, "a_grad_rel_error": err, "expect_a": expect_a}


def c_traffic(n: int, reps: int, workdir: Path) -> float | None:
    """Forward + backward time of the C loops that move exactly the bytes the per-element shape needs, on
    one thread or on every core, whichever is faster (OpenMP's barrier waits out a thread that lost its
    core on a busy machine, which would flatter us)."""
    lib = build_openmp(workdir, "autodiff_traffic", C_TRAFFIC)
    if lib is None:
        return None
    lib.forward.restype = ctypes.c_float
    arrays = [np.random.default_rng(k).standard_normal(n).astype(np.float32) for k in range(6)]
    p = [ctypes.c_void_p(v.ctypes.data) for v in arrays]
    best = float("inf")
    for threads in sorted({1, wp.kernels.cpu.cpu_count()}):
        t_f = best_time(lambda t=threads: lib.forward(*p[:3], ctypes.c_long(n), t), reps)
        t_b = best_time(lambda t=threads: lib.backward(*p, ctypes.c_long(n), t), reps)
        best = min(best, t_f + t_b)
    return best


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--n", type=int, default=1 << 22)
    p.add_argument("--reps", type=int, default=10)
    p.add_argument("--warp-python", default=None, help="a Python interpreter with warp-lang installed")
    p.add_argument("--jax-python", default=None, help="a Python interpreter with jax installed")
    args = p.parse_args(argv)
    n = args.n
    warp_python = find_python(args.warp_python, "LOOMWORK_WARP_PYTHON")
    jax_python = find_python(args.jax_python, "LOOMWORK_JAX_PYTHON")
    print(f"loss = sum((a*x + b)^2), n = {n} float32, gradients for a, x, b ({wp.get_device('cpu').name})")
    results: dict = {}
    with tempfile.TemporaryDirectory() as tmp:
        for shape, kernel in SHAPES.items():
            m = 1 if kernel is loss_kernel else n
            r = measure(kernel, n, m, args.reps)
            total = r["forward_s"] + r["backward_s"]
            print(f"  {shape}:")
            print(f"    loomwork:   forward {r['forward_s'] * 1e3:6.2f} ms  backward {r['backward_s'] * 1e3:6.2f} ms  "
                  f"total {total * 1e3:6.2f} ms   (relative error of da: {r['a_grad_rel_error']:.1e})")
            if m == n:
                t_c = c_traffic(n, args.reps, Path(tmp))
                if t_c is not None:
                    r["c_traffic_s"] = t_c
                    print(f"    C loops over the same bytes (forward + backward): {t_c * 1e3:6.2f} ms   "
                          f"loomwork total / memory-traffic time = {total / t_c:.2f}")
            if warp_python:
                src = inspect.getsource(kernel.func)
                w = run_json(warp_python, WARP_SCRIPT.format(kernel=src, name=kernel.key.split(".")[-1], n=n, m=m,
                                                             reps=args.reps), Path(tmp))
                tw = w["forward_s"] + w["backward_s"]
                werr = abs(w["a_grad"] - r["expect_a"]) / abs(r["expect_a"])
                print(f"    Warp 1.19:  forward {w['forward_s'] * 1e3:6.2f} ms  backward "
                      f"{w['backward_s'] * 1e3:6.2f} ms  total {tw * 1e3:6.2f} ms   (relative error of da: "
                      f"{werr:.1e})   loomwork / Warp = {total / tw:.2f}")
                r["warp"] = w
            if jax_python:
                j = run_json(jax_python, JAX_SCRIPT.format(n=n, m=m, reps=args.reps), Path(tmp))
                jerr = abs(j["a_grad"] - r["expect_a"]) / abs(r["expect_a"])
                print(f"    jax.grad (jit, JAX {j['jax']}): {j['grad_s'] * 1e3:6.2f} ms   (relative error of da: "
                      f"{jerr:.1e})   loomwork / jax.grad = {total / j['grad_s']:.2f}")
                r["jax"] = j
            results[shape] = r
    if not warp_python or not jax_python:
        print("  (pass --warp-python / --jax-python to measure Warp and JAX in the same run)")
    scalar = results["scalar a, b"]
    return {**scalar, "per_element": results["per-element a, x, b"]}


if __name__ == "__main__":
    main()
