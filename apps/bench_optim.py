"""Optimizer and linear-solver benchmark: an Adam step over 2^20 float32 parameters, and the cost of one
CG / BiCGSTAB / GMRES iteration on a 2^20-unknown diagonal system (vector updates and inner products only)
and of a whole CG solve of a dense 1000 x 1000 SPD system.

    python -m loomwork.apps.bench_optim
"""

from __future__ import annotations

import numpy as np

import loomwork as wp
import loomwork.optim.linear as la
from loomwork.apps.benchutil import best_time
from loomwork.optim import Adam


def main() -> None:
    rng = np.random.default_rng(0)
    n = 1 << 20
    p = wp.array(rng.standard_normal(n).astype(np.float32))
    g = wp.array(rng.standard_normal(n).astype(np.float32))
    adam = Adam([p], lr=0.01)
    t = best_time(lambda: adam.step([g]), 20)
    print(f"Adam step, 2^20 float32: {t * 1e3:.2f} ms ({5 * 4 * n / t / 1e9:.1f} GB/s of parameter, gradient "
          "and moment traffic)")

    diag = wp.array(rng.uniform(1.0, 2.0, n).astype(np.float32))
    b = wp.array(rng.standard_normal(n).astype(np.float32))
    x = wp.zeros(n, dtype=wp.float32)
    iters = 30
    for solver in (la.cg, la.bicgstab, la.gmres):
        def solve(solver=solver) -> None:
            x.zero_()
            solver(diag, b, x, tol=0.0, atol=0.0, maxiter=iters, check_every=iters, **(
                {"restart": 10} if solver is la.gmres else {}))
        print(f"{solver.__name__}, 2^20-unknown diagonal system: {best_time(solve, 3) / iters * 1e3:.2f} ms/iteration")

    m = 1000
    q = rng.standard_normal((m, m)).astype(np.float32)
    A = wp.array(q @ q.T / m + 2.0 * np.eye(m, dtype=np.float32))
    bd = wp.array(rng.standard_normal(m).astype(np.float32))
    xd = wp.zeros(m, dtype=wp.float32)
    result = []

    def solve_dense() -> None:
        xd.zero_()
        result[:] = la.cg(A, bd, xd, tol=1e-5, M=la.preconditioner(A))

    t = best_time(solve_dense, 5)
    print(f"cg, dense 1000 x 1000 SPD with Jacobi preconditioner: {t * 1e3:.2f} ms ({result[0]} iterations, "
          f"residual {result[1]:.2e})")


if __name__ == "__main__":
    main()
