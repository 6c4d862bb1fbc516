"""Reverse-mode benchmark: loss = sum((a*x + b)^2) over n float32, gradients for a, x and b.

    python -m loomwork.apps.bench_autodiff [--n 4194304] [--warp-python PATH] [--jax-python PATH]

Times the forward launch and `Tape.backward` (which includes zeroing the gradients it owns), beside
NVIDIA Warp's Tape and `jax.jit(jax.grad(...))` of the same function in jax.numpy, each run in its
own interpreter when given (or found at LOOMWORK_WARP_PYTHON / LOOMWORK_JAX_PYTHON).
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import numpy as np

import loomwork as wp
from loomwork.apps.benchutil import best_time, find_python, run_json


@wp.kernel
def loss_kernel(x: wp.array(dtype=float), a: wp.array(dtype=float), b: wp.array(dtype=float),
                loss: wp.array(dtype=float)):
    i = wp.tid()
    v = a[0] * x[i] + b[0]
    wp.atomic_add(loss, 0, v * v)


WARP_SCRIPT = """
import json, time, numpy as np, warp as wp
wp.config.quiet = True
wp.init()

@wp.kernel
def loss_kernel(x: wp.array(dtype=float), a: wp.array(dtype=float), b: wp.array(dtype=float),
                loss: wp.array(dtype=float)):
    i = wp.tid()
    v = a[0] * x[i] + b[0]
    wp.atomic_add(loss, 0, v * v)

n = {n}
x = wp.array(np.random.default_rng(0).standard_normal(n).astype(np.float32), requires_grad=True, device="cpu")
a = wp.array([0.5], dtype=float, requires_grad=True, device="cpu")
b = wp.array([0.25], dtype=float, requires_grad=True, device="cpu")
l = wp.zeros(1, dtype=float, requires_grad=True, device="cpu")
fwd, bwd, grads = [], [], []
for _ in range({reps} + 1):
    l.zero_()
    tape = wp.Tape()
    t0 = time.perf_counter()
    with tape:
        wp.launch(loss_kernel, n, inputs=[x, a, b, l], device="cpu")
    wp.synchronize()
    t1 = time.perf_counter()
    tape.backward(loss=l)
    wp.synchronize()
    t2 = time.perf_counter()
    fwd.append(t1 - t0); bwd.append(t2 - t1)
    grads.append(float(a.grad.numpy()[0]))
    tape.zero()
print(json.dumps({{"forward_s": min(fwd[1:]), "backward_s": min(bwd[1:]), "a_grad": grads[-1]}}))
"""

JAX_SCRIPT = """
import json, time, numpy as np, jax, jax.numpy as jnp
jax.config.update("jax_platforms", "cpu")

def loss(a, x, b):
    return jnp.sum((a * x + b) ** 2)

grad = jax.jit(jax.grad(loss, argnums=(0, 1, 2)))
x = jnp.asarray(np.random.default_rng(0).standard_normal({n}).astype(np.float32))
a, b = jnp.float32(0.5), jnp.float32(0.25)
jax.block_until_ready(grad(a, x, b))
best = 1e9
for _ in range({reps}):
    t0 = time.perf_counter()
    ga, gx, gb = jax.block_until_ready(grad(a, x, b))
    best = min(best, time.perf_counter() - t0)
print(json.dumps({{"grad_s": best, "a_grad": float(ga), "jax": jax.__version__}}))
"""


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--n", type=int, default=1 << 22)
    p.add_argument("--reps", type=int, default=10)
    p.add_argument("--warp-python", default=None, help="a Python interpreter with warp-lang installed")
    p.add_argument("--jax-python", default=None, help="a Python interpreter with jax installed")
    args = p.parse_args(argv)
    n = args.n
    x = wp.array(np.random.default_rng(0).standard_normal(n).astype(np.float32), requires_grad=True)
    a = wp.array([0.5], dtype=float, requires_grad=True)
    b = wp.array([0.25], dtype=float, requires_grad=True)
    loss = wp.zeros(1, dtype=float, requires_grad=True)
    tapes = []

    def forward() -> None:  # a new Tape per step, as in Warp's examples
        loss.zero_()
        tapes[:] = [wp.Tape()]
        with tapes[0]:
            wp.launch(loss_kernel, n, inputs=[x, a, b, loss])

    forward()
    t_fwd = best_time(forward, args.reps)
    t_bwd = best_time(lambda: tapes[0].backward(loss=loss), args.reps)
    xv = x.numpy().astype(np.float64)
    expect_a = float((2 * (0.5 * xv + 0.25) * xv).sum())
    err = abs(float(a.grad.numpy()[0]) - expect_a) / abs(expect_a)
    print(f"loss = sum((a*x + b)^2), n = {n} float32, gradients for a, x, b ({wp.get_device('cpu').name})")
    print(f"  loomwork:   forward {t_fwd * 1e3:6.2f} ms  backward {t_bwd * 1e3:6.2f} ms  "
          f"total {(t_fwd + t_bwd) * 1e3:6.2f} ms  backward/forward {t_bwd / t_fwd:4.1f}   "
          f"(relative error of da: {err:.1e})")
    result = {"forward_s": t_fwd, "backward_s": t_bwd, "a_grad_rel_error": err}
    with tempfile.TemporaryDirectory() as tmp:
        warp_python = find_python(args.warp_python, "LOOMWORK_WARP_PYTHON")
        if warp_python:
            w = run_json(warp_python, WARP_SCRIPT.format(n=n, reps=args.reps), Path(tmp))
            tw = w["forward_s"] + w["backward_s"]
            werr = abs(w["a_grad"] - expect_a) / abs(expect_a)
            print(f"  Warp 1.19:  forward {w['forward_s'] * 1e3:6.2f} ms  backward {w['backward_s'] * 1e3:6.2f} ms  "
                  f"total {tw * 1e3:6.2f} ms  backward/forward {w['backward_s'] / w['forward_s']:4.1f}   "
                  f"(relative error of da: {werr:.1e})")
            print(f"  loomwork total / Warp total = {(t_fwd + t_bwd) / tw:.2f}")
            result["warp"] = w
        jax_python = find_python(args.jax_python, "LOOMWORK_JAX_PYTHON")
        if jax_python:
            j = run_json(jax_python, JAX_SCRIPT.format(n=n, reps=args.reps), Path(tmp))
            jerr = abs(j["a_grad"] - expect_a) / abs(expect_a)
            print(f"  jax.grad (jit, JAX {j['jax']}): {j['grad_s'] * 1e3:6.2f} ms   "
                  f"(relative error of da: {jerr:.1e})")
            print(f"  loomwork total / jax.grad = {(t_fwd + t_bwd) / j['grad_s']:.2f}")
            result["jax"] = j
        if not warp_python or not jax_python:
            print("  (pass --warp-python / --jax-python to measure Warp and JAX in the same run)")
    return result


if __name__ == "__main__":
    main()
