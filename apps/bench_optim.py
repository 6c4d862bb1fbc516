"""Optimizer and linear-solver benchmark: an Adam step over 2^20 float32 parameters, one CG / BiCGSTAB /
GMRES iteration on a 2^20-unknown diagonal system (vector updates and inner products), and a
Jacobi-preconditioned CG solve of a dense 1000 x 1000 SPD system.

    python -m loomwork.apps.bench_optim [--n N] [--m M]
"""

from __future__ import annotations

import argparse

import numpy as np

import loomwork as wp
import loomwork.optim.linear as la
from loomwork.apps.benchutil import best_time
from loomwork.optim import Adam


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--n", type=int, default=1 << 20, help="parameters / unknowns of the diagonal system")
    p.add_argument("--m", type=int, default=1000, help="size of the dense system")
    args = p.parse_args(argv)
    rng = np.random.default_rng(0)
    n, m, iters, out = args.n, args.m, 30, {}

    params = wp.array(rng.standard_normal(n).astype(np.float32))
    grad = wp.array(rng.standard_normal(n).astype(np.float32))
    adam = Adam([params], lr=0.01)
    out["adam_step_s"] = best_time(lambda: adam.step([grad]), 20)
    print(f"Adam step, {n} float32: {out['adam_step_s'] * 1e3:.2f} ms")

    diag = wp.array(rng.uniform(1.0, 2.0, n).astype(np.float32))
    b = wp.array(rng.standard_normal(n).astype(np.float32))
    x = wp.zeros(n, dtype=wp.float32)
    for solver in (la.cg, la.bicgstab, la.gmres):
        def solve(solver=solver) -> None:
            x.zero_()
            extra = {"restart": 10} if solver is la.gmres else {}
            solver(diag, b, x, tol=0.0, atol=0.0, maxiter=iters, check_every=iters, **extra)

        out[f"{solver.__name__}_iteration_s"] = best_time(solve, 3) / iters
        print(f"{solver.__name__}, {n}-unknown diagonal system: "
              f"{out[f'{solver.__name__}_iteration_s'] * 1e3:.2f} ms/iteration")

    q = rng.standard_normal((m, m))
    dense = q @ q.T / m + 2.0 * np.eye(m)
    A = wp.array(dense.astype(np.float32))
    bd = wp.array(rng.standard_normal(m).astype(np.float32))
    xd = wp.zeros(m, dtype=wp.float32)
    result = []

    def solve_dense() -> None:
        xd.zero_()
        result[:] = la.cg(A, bd, xd, tol=1e-5, M=la.preconditioner(A))

    out["dense_cg_s"] = best_time(solve_dense, 5)
    out["dense_residual"] = float(np.linalg.norm(bd.numpy() - dense @ xd.numpy()) / np.linalg.norm(bd.numpy()))
    print(f"cg, dense {m} x {m} SPD with Jacobi preconditioner: {out['dense_cg_s'] * 1e3:.2f} ms "
          f"({result[0]} iterations, relative residual {out['dense_residual']:.1e})")
    return out


if __name__ == "__main__":
    main()
