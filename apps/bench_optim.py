"""Optimizer and linear-solver benchmark: an Adam step over 2^20 float32 parameters, one CG / BiCGSTAB /
GMRES iteration on a 2^20-unknown diagonal system (vector updates and inner products), a
Jacobi-preconditioned CG solve of a dense 1000 x 1000 SPD system, and preconditioned CG on sparse BSR
systems (a 2-D Poisson matrix, a 3x3-block elasticity-like one): iterations, setup and solve time with
no, Jacobi, block-Jacobi and FSAI preconditioning, beside Warp 1.19 running the same script in
alternation (`--warp-python` or LOOMWORK_WARP_PYTHON).

    python -m loomwork.apps.bench_optim [--n N] [--m M] [--grid G] [--warp-python PATH]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np

import loomwork as wp
import loomwork.optim.linear as la
from loomwork.apps.benchutil import alternate_best, best_time, find_python, run_json
from loomwork.optim import Adam


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--n", type=int, default=1 << 20, help="parameters / unknowns of the diagonal system")
    p.add_argument("--m", type=int, default=1000, help="size of the dense system")
    p.add_argument("--grid", type=int, default=128, help="grid side of the sparse systems (Poisson: grid^2 unknowns)")
    p.add_argument("--rounds", type=int, default=2, help="alternating rounds of the sparse preconditioner runs")
    p.add_argument("--warp-python", default=None, help="an interpreter with warp-lang 1.19")
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
    out["sparse"] = sparse_preconditioners(args.grid, args.rounds, find_python(args.warp_python,
                                                                               "LOOMWORK_WARP_PYTHON"))
    return out


# The same script for loomwork and Warp (their names agree): per system and preconditioner, CG's iterations
# to a relative residual of 1e-8, the preconditioner's setup time and the solve time (float64).
SPARSE_SCRIPT = """
import json, time
import numpy as np
import {module} as wp
import {module}.optim.linear as la
import {module}.sparse as sp
wp.config.quiet = True
data = np.load({path!r})
out = {{}}
for name in ("poisson", "elasticity"):
    b, nb = int(data[name + "_b"]), int(data[name + "_nb"])
    block = wp.float64 if b == 1 else wp.types.matrix((b, b), dtype=wp.float64)
    rows, cols = (wp.array(data[name + k], dtype=wp.int32) for k in ("_rows", "_cols"))
    A = sp.bsr_from_triplets(nb, nb, rows, cols, wp.array(data[name + "_values"], dtype=block))
    rhs = wp.array(data[name + "_rhs"], dtype=wp.float64)
    x = wp.zeros_like(rhs)
    for ptype in ("id", "diag", "block_jacobi_direct", "fsai"):
        if b == 1 and ptype == "block_jacobi_direct":
            continue
        la.cg(A, rhs, x, tol=1e-8, M=la.preconditioner(A, ptype), maxiter=20000)  # builds the kernels
        wp.synchronize()
        t0 = time.perf_counter()
        M = la.preconditioner(A, ptype)
        wp.synchronize()
        setup = time.perf_counter() - t0
        x.zero_()
        t0 = time.perf_counter()
        iters, err, atol = la.cg(A, rhs, x, tol=1e-8, M=M, maxiter=20000)
        wp.synchronize()
        out[name + "/" + ptype] = [setup, time.perf_counter() - t0, int(iters)]
print(json.dumps(out))
"""


def _poisson_triplets(g: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The 5-point Laplacian on a g x g grid as (rows, columns, values)."""
    idx = np.arange(g * g).reshape(g, g)
    rows, cols, vals = [idx.ravel()], [idx.ravel()], [np.full(g * g, 4.0)]
    for a, b in ((idx[:, :-1], idx[:, 1:]), (idx[:-1, :], idx[1:, :])):
        rows += [a.ravel(), b.ravel()]
        cols += [b.ravel(), a.ravel()]
        vals += [np.full(a.size, -1.0)] * 2
    return np.concatenate(rows), np.concatenate(cols), np.concatenate(vals)


def sparse_preconditioners(grid: int, rounds: int, warp_python: str | None) -> dict:
    """CG on a grid^2 Poisson matrix and a (grid/2)^2-node 3x3-block elasticity-like one (each node's block
    couples its components), with each preconditioner, for loomwork and Warp in alternation."""
    rng = np.random.default_rng(1)
    systems = {}
    rows, cols, vals = _poisson_triplets(grid)
    systems.update(poisson_b=1, poisson_nb=grid * grid, poisson_rows=rows, poisson_cols=cols, poisson_values=vals,
                   poisson_rhs=rng.standard_normal(grid * grid))
    half = max(2, grid // 2)
    rows, cols, vals = _poisson_triplets(half)
    q = rng.standard_normal((3, 3))
    coupling = 0.3 * q @ q.T + np.eye(3)
    blocks = vals[:, None, None] * coupling + np.where(rows == cols, 0.1, 0.0)[:, None, None] * np.eye(3)
    systems.update(elasticity_b=3, elasticity_nb=half * half, elasticity_rows=rows, elasticity_cols=cols,
                   elasticity_values=blocks, elasticity_rhs=rng.standard_normal(3 * half * half))
    with tempfile.TemporaryDirectory() as tmp:
        path = str(Path(tmp) / "systems.npz")
        np.savez(path, **systems)
        pythons = {"loomwork": sys.executable, "warp": warp_python}
        best = alternate_best(pythons, lambda name, python: {
            f"{key}/{i}": v for key, r in run_json(python, SPARSE_SCRIPT.format(module=name, path=path),
                                                   Path(tmp)).items() for i, v in enumerate(r)}, rounds)
    print(f"cg to 1e-8 on sparse float64 systems: Poisson {grid}x{grid} ({grid * grid} unknowns), 3x3-block "
          f"elasticity-like {half}x{half} ({3 * half * half} unknowns)")
    print(f"  {'system / preconditioner':34s} {'iters':>6s} {'setup ms':>9s} {'solve ms':>9s}"
          + (f" {'warp iters':>10s} {'setup ms':>9s} {'solve ms':>9s} {'warp/ours':>9s}" if best["warp"] else ""))
    for key in sorted({k.rsplit("/", 1)[0] for k in best["loomwork"]}):
        ours = [best["loomwork"][f"{key}/{i}"] for i in range(3)]
        line = f"  {key:34s} {int(ours[2]):6d} {ours[0] * 1e3:9.2f} {ours[1] * 1e3:9.2f}"
        if f"{key}/0" in best["warp"]:
            theirs = [best["warp"][f"{key}/{i}"] for i in range(3)]
            line += (f" {int(theirs[2]):10d} {theirs[0] * 1e3:9.2f} {theirs[1] * 1e3:9.2f} "
                     f"{(theirs[0] + theirs[1]) / (ours[0] + ours[1]):8.2f}x")
        print(line)
    return best


if __name__ == "__main__":
    main()
