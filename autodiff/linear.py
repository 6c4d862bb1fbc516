"""Iterative linear solvers (`loomwork.optim.linear`), as in Warp: `cg`, `cr`, `bicgstab`, `gmres` on
`LinearOperator`s made from dense 2-D arrays, diagonals (1-D arrays), `loomwork.sparse` BSR matrices or
the user's own `matvec`, with the preconditioners of `preconditioner` (Jacobi here; block Jacobi in
`block_jacobi`, FSAI in `fsai`).

Everything runs as kernels on the operator's device. Vectors are 1-D arrays of a float type or of
vectors of one; the solver's kernels see their scalars as one flat array (`scalar_view`: simple 1-D
loops), and a strided `x` or `b` is solved through a contiguous copy (`x` written back at the end).
Inner products are reduced in float64 in two launches, per-chunk partial sums then one sum per
product, into a small array of solver scalars of the system's scalar type. The step sizes are
computed from those scalars inside the update kernels, so an iteration never waits for the host;
the host reads the residual only every `check_every` iterations (never with `check_every=0`, where
the iteration count and residual stay in device arrays).

Batched systems (Warp's `aslinearoperator(A, batch_offsets=...)`) solve independent subproblems, each a
range of b's scalar dofs, in one solve: every solver scalar is kept per subproblem (one column each),
each subproblem steps with its own products and stops at its own tolerance, and the solve ends when all
have converged. Dofs outside every range are left as they are.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable
from functools import cache
from types import SimpleNamespace
from typing import Any

import numpy as np

from loomwork.kernels import builtins as B
from loomwork.kernels import types as T
from loomwork.kernels.array import array, array2d, copy, empty, zeros
from loomwork.kernels.device import Device
from loomwork.kernels.functions import func
from loomwork.kernels.ir import ArrayType
from loomwork.kernels.launch import launch
from loomwork.kernels.module import Kernel, kernel, overload

from .block_jacobi import block_jacobi_operator, bsr_inverse_diagonal
from .components import cast_like, repeat_view, scalar_count, scalar_view
from .fsai import FSAI
from .linear_operator import LinearOperator
from .sparse import BsrMatrix, bsr_mv

tid, sqrt = B.BUILTINS["tid"], B.BUILTINS["sqrt"]


# ---- kernels (generic over the scalar type; float32 and float64 are built ahead, see _kernels) ----

@kernel(enable_backward=False)
def _dense_mv(A: array2d(dtype=T.Float), x: array(dtype=T.Float), y: array(dtype=T.Float), z: array(dtype=T.Float),
              alpha: T.Float, beta: T.Float):
    row = tid()
    s = cast_like(0.0, alpha)
    if alpha != 0.0:
        for col in range(A.shape[1]):
            s = s + A[row, col] * x[col]
        s = alpha * s
    if beta != 0.0:
        s = s + beta * y[row]
    z[row] = s


@kernel(enable_backward=False)
def _diag_mv(A: array(dtype=T.Float), x: array(dtype=T.Float), y: array(dtype=T.Float), z: array(dtype=T.Float),
             alpha: T.Float, beta: T.Float, per_entry: int):
    # per_entry > 1: a diagonal of scalars scaling each entry's per_entry components alike
    i = tid()
    s = cast_like(0.0, alpha)
    if alpha != 0.0:
        a = A[i]
        if per_entry > 1:
            a = A[i // per_entry]
        s = alpha * a * x[i]
    if beta != 0.0:
        s = s + beta * y[i]
    z[i] = s


@kernel(enable_backward=False)
def _inverse_diagonal(A: array2d(dtype=T.Float), inv: array(dtype=T.Float), use_abs: int):
    i = tid()
    d = A[i, i]
    if use_abs != 0:
        d = abs(d)
    inv[i] = cast_like(1.0, d)
    if d != 0.0:
        inv[i] = 1.0 / d


@func
def _batch(bmap: array(dtype=T.int32), i: int) -> int:
    # the subproblem of scalar dof i: 0 in an unbatched solve (empty map), -1 outside every batch
    if bmap.shape[0] == 0:
        return 0
    return bmap[i]


@kernel(enable_backward=False)
def _partial_dots(a: array2d(dtype=T.Float), b: array2d(dtype=T.Float), chunks: array2d(dtype=T.int32),
                  partial: array2d(dtype=T.float64)):
    col, chunk = tid()
    s = T.float64(0.0)
    for i in range(chunks[chunk, 0], chunks[chunk, 1]):
        s = s + T.float64(a[col, i]) * T.float64(b[col, i])
    partial[col, chunk] = s


@kernel(enable_backward=False)
def _sum_partials(partial: array2d(dtype=T.float64), batch_chunks: array(dtype=T.int32),
                  out: array2d(dtype=T.Float), first: int):
    col, batch = tid()
    s = T.float64(0.0)
    for k in range(batch_chunks[batch], batch_chunks[batch + 1]):
        s = s + partial[col, k]
    out[first + col, batch] = cast_like(s, out[first + col, batch])


# Rows of a solver's scalars array (one column per subproblem): the squared residual norm first, then
# the products an iteration uses (two products computed in one launch land in adjacent rows), then the
# tolerance.
RR, S0, S1, S2, S3, BB, ATOL_SQ = range(7)


@kernel(enable_backward=False)
def _init_tolerance(s: array2d(dtype=T.Float), rtol: T.Float, atol: T.Float):
    batch = tid()
    a = max(rtol * sqrt(s[BB, batch]), atol)
    s[ATOL_SQ, batch] = a * a


@kernel(enable_backward=False)
def _count_cycle(s: array2d(dtype=T.Float), cycle: int, maxiter: int, state: array(dtype=T.int32)):
    # state = (iterations done, still running): a cycle counts only while the solve had not stopped; the
    # solve runs on while any subproblem is above its tolerance
    if state[1] != 0:
        state[0] = state[0] + cycle
    running = 0
    for batch in range(s.shape[1]):
        if s[RR, batch] > s[ATOL_SQ, batch]:
            running = 1
    state[1] = 0
    if running != 0 and state[0] < maxiter:
        state[1] = 1


@kernel(enable_backward=False)
def _add_vec(src: array(dtype=T.Float), dst: array(dtype=T.Float), bmap: array(dtype=T.int32)):
    i = tid()
    if _batch(bmap, i) >= 0:
        dst[i] = dst[i] + src[i]


@kernel(enable_backward=False)
def _step(s: array2d(dtype=T.Float), num: int, den: int, keep: int, x: array(dtype=T.Float),
          p: array(dtype=T.Float), r: array(dtype=T.Float), q: array(dtype=T.Float), z: array(dtype=T.Float),
          y: array(dtype=T.Float), update_z: int, bmap: array(dtype=T.int32)):
    # x += a p, r -= a q (and z -= a y) with a = s[num] / s[den] of the dof's subproblem while its residual
    # is above tolerance and s[den] > 0; threads below the subproblem count also keep s[num] in s[keep] for
    # the next direction update (the launch covers max(dofs, subproblems))
    i = tid()
    if keep >= 0 and i < s.shape[1]:
        s[keep, i] = s[num, i]
    if i < x.shape[0]:
        batch = _batch(bmap, i)
        if batch >= 0:
            a = cast_like(0.0, s[RR, batch])
            if s[RR, batch] > s[ATOL_SQ, batch] and s[den, batch] > 0.0:
                a = s[num, batch] / s[den, batch]
            x[i] = x[i] + a * p[i]
            r[i] = r[i] - a * q[i]
            if update_z != 0:
                z[i] = z[i] - a * y[i]


@kernel(enable_backward=False)
def _bicgstab_step(s: array2d(dtype=T.Float), num: int, den: int, x: array(dtype=T.Float), p: array(dtype=T.Float),
                   r: array(dtype=T.Float), q: array(dtype=T.Float), bmap: array(dtype=T.int32)):
    # x += a p, r -= a q with a = s[num] / s[den] (alpha = rho / <r0, v>, then omega = <s, t> / <t, t>)
    i = tid()
    batch = _batch(bmap, i)
    if batch >= 0:
        a = cast_like(0.0, s[RR, batch])
        if s[RR, batch] > s[ATOL_SQ, batch] and s[den, batch] != 0.0:
            a = s[num, batch] / s[den, batch]
        x[i] = x[i] + a * p[i]
        r[i] = r[i] - a * q[i]


@kernel(enable_backward=False)
def _direction(s: array2d(dtype=T.Float), num: int, den: int, z: array(dtype=T.Float), p: array(dtype=T.Float),
               az: array(dtype=T.Float), ap: array(dtype=T.Float), update_ap: int, bmap: array(dtype=T.int32)):
    # p = z + b p (and ap = az + b ap) with b = s[num] / s[den] while the residual is above tolerance
    i = tid()
    batch = _batch(bmap, i)
    if batch >= 0:
        b = cast_like(0.0, s[RR, batch])
        if s[RR, batch] > s[ATOL_SQ, batch] and s[den, batch] > 0.0:
            b = s[num, batch] / s[den, batch]
        p[i] = z[i] + b * p[i]
        if update_ap != 0:
            ap[i] = az[i] + b * ap[i]


@kernel(enable_backward=False)
def _bicgstab_direction(s: array2d(dtype=T.Float), p: array(dtype=T.Float), r: array(dtype=T.Float),
                        v: array(dtype=T.Float), bmap: array(dtype=T.int32)):
    # p = r + beta (p - omega v), beta = (rho_new / rho) (alpha / omega) = rho_new <t, t> / (<r0, v> <s, t>)
    i = tid()
    batch = _batch(bmap, i)
    if batch >= 0:
        b = cast_like(0.0, s[RR, batch])
        bo = b
        if s[RR, batch] > s[ATOL_SQ, batch] and s[S1, batch] != 0.0 and s[S2, batch] != 0.0:
            b = s[S0, batch] * s[S3, batch] / (s[S1, batch] * s[S2, batch])
            bo = s[S0, batch] / s[S1, batch]
        p[i] = r[i] + b * p[i] - bo * v[i]


@kernel(enable_backward=False)
def _normalize(src: array(dtype=T.Float), dst: array(dtype=T.Float), s: array2d(dtype=T.Float), slot: int,
               norms: array2d(dtype=T.Float), at: int, bmap: array(dtype=T.int32)):
    # dst = src / sqrt(s[slot]) per subproblem (src itself where that is 0, 0 outside every subproblem);
    # threads below the subproblem count store the norms in norms[at] (the launch covers both counts)
    i = tid()
    if i < s.shape[1]:
        norms[at, i] = sqrt(s[slot, i])
    if i < dst.shape[0]:
        batch = _batch(bmap, i)
        v = cast_like(0.0, src[i])
        if batch >= 0:
            n = sqrt(s[slot, batch])
            v = src[i]
            if n > 0.0:
                v = src[i] / n
        dst[i] = v


@kernel(enable_backward=False)
def _subtract_combination(V: array2d(dtype=T.Float), h: array2d(dtype=T.Float), first: int, count: int,
                          w: array(dtype=T.Float), bmap: array(dtype=T.int32)):
    # w -= sum over k < count of h[first + k] V[k], with the dof's subproblem's coefficients
    i = tid()
    batch = _batch(bmap, i)
    if batch >= 0:
        acc = w[i]
        for k in range(count):
            acc = acc - h[first + k, batch] * V[k, i]
        w[i] = acc


@kernel(enable_backward=False)
def _combination(V: array2d(dtype=T.Float), y: array2d(dtype=T.Float), count: int, accumulate: int,
                 out: array(dtype=T.Float), bmap: array(dtype=T.int32)):
    # out = sum over k < count of y[k] V[k], added to out when `accumulate` (outside every subproblem:
    # left alone when accumulating, else 0)
    i = tid()
    batch = _batch(bmap, i)
    acc = cast_like(0.0, out[i])
    if accumulate != 0:
        acc = out[i]
    if batch >= 0:
        for k in range(count):
            acc = acc + y[k, batch] * V[k, i]
    out[i] = acc


@kernel(enable_backward=False)
def _least_squares(Ht: array2d(dtype=T.Float), k: int, s: array2d(dtype=T.Float), pivot: T.Float,
                   y: array2d(dtype=T.Float)):
    # One subproblem per thread: min |beta e1 - H y| for the (k+1) x k Hessenberg H stored by columns
    # (Ht[j (k+1) + i] = H[i, j]) and beta = s[S0]: Givens rotations make H upper triangular (in place),
    # then back substitution. A pivot below `pivot` means the Krylov space was exhausted: the columns from
    # there on are left out.
    bt = tid()
    rhs = s[S0, bt]
    stride = k + 1
    used = k
    for i in range(k):
        a = Ht[i * stride + i, bt]
        b = Ht[i * stride + i + 1, bt]
        rho2 = a * a + b * b
        if rho2 < pivot:
            used = i
            break
        rho = sqrt(rho2)
        cs = a / rho
        sn = b / rho
        for j in range(i, k):
            hi = Ht[j * stride + i, bt]
            hj = Ht[j * stride + i + 1, bt]
            Ht[j * stride + i, bt] = cs * hi + sn * hj
            Ht[j * stride + i + 1, bt] = cs * hj - sn * hi
        y[i, bt] = cs * rhs
        rhs = -sn * rhs
    for i in range(used, k):
        y[i, bt] = cast_like(0.0, rhs)
    for ii in range(used):
        i = used - 1 - ii
        acc = y[i, bt]
        for j in range(i + 1, used):
            acc = acc - Ht[j * stride + i, bt] * y[j, bt]
        y[i, bt] = acc / Ht[i * stride + i, bt]


_GENERIC = (_dense_mv, _diag_mv, _inverse_diagonal, _partial_dots, _sum_partials, _init_tolerance, _count_cycle,
            _add_vec, _step, _bicgstab_step, _direction, _bicgstab_direction, _normalize,
            _subtract_combination, _combination, _least_squares)


@cache
def _kernels(st: Any) -> SimpleNamespace:
    """The kernels for scalar type `st`, instantiated once: a launch of a concrete kernel skips the
    per-launch type resolution of a generic one, and the solvers launch many."""
    def concrete(t: Any) -> Any:
        if isinstance(t, ArrayType) and t.dtype is T.Float:
            return ArrayType(st, t.ndim)
        return st if t is T.Float else t

    return SimpleNamespace(**{k.__name__.lstrip("_"): overload(k, [concrete(t) for t in k.arg_types])
                              for k in _GENERIC})


for _st in (T.float32, T.float64):  # built with the module's first launch: one build for both precisions
    _kernels(_st)


# ---- operators and preconditioners ----

def aslinearoperator(A: Any, batch_offsets: array | None = None, max_batch_length: int | None = None
                     ) -> LinearOperator | None:
    """`A` as a LinearOperator: a 2-D array is a dense matrix, a 1-D array a diagonal (of scalars, or of
    vectors scaling each component), a BsrMatrix a sparse one, a LinearOperator is returned as it is, None
    stays None. `batch_offsets` makes the system a batch of independent subproblems (see
    `LinearOperator.batch_offsets`); A is then expected to be block diagonal over them."""
    if A is None or isinstance(A, LinearOperator):
        return A
    if isinstance(A, array) and A.ndim == 2 and T.is_float(A.dtype):
        ks = _kernels(A.dtype)

        def dense_mv(x: array, y: array, z: array, alpha: float, beta: float) -> None:
            for name, v in (("x", x), ("y", y), ("z", z)):
                if not isinstance(v, array) or v.dtype != A.dtype or v.ndim != 1:
                    raise TypeError(f"dense matvec: {name} must be a 1-D array of {T.type_name(A.dtype)} (the "
                                    f"matrix's dtype), got {_describe(v)}")
            if x.shape[0] != A.shape[1] or z.shape[0] != A.shape[0] or y.shape[0] != A.shape[0]:
                raise ValueError(f"dense matvec: a {A.shape[0]}x{A.shape[1]} matrix takes x of {A.shape[1]} and "
                                 f"y, z of {A.shape[0]} entries, got {x.shape[0]}, {y.shape[0]}, {z.shape[0]}")
            launch(ks.dense_mv, A.shape[0], inputs=[A, x, y, z, A.dtype(alpha), A.dtype(beta)], device=A.device)

        return LinearOperator(A.shape, A.dtype, A.device, dense_mv, batch_offsets, max_batch_length)
    if isinstance(A, array) and A.ndim == 1 and T.is_float(T.elem_scalar(A.dtype)):
        st = T.elem_scalar(A.dtype)
        ks = _kernels(st)
        diag = scalar_view(A)

        def diag_mv(x: array, y: array, z: array, alpha: float, beta: float) -> None:
            for name, v in zip("xyz", (x, y, z), strict=True):
                if not isinstance(v, array) or T.elem_scalar(v.dtype) is not st or not _fits_diagonal(A, v):
                    raise TypeError(f"diagonal matvec: {name} must be an array of {A.shape[0]} entries matching "
                                    f"the diagonal's {T.type_name(A.dtype)}, got {_describe(v)}")
            views = [scalar_view(v) for v in (x, y, z)]
            per_entry = scalar_count(x.dtype) if scalar_count(A.dtype) == 1 and x.shape == A.shape else 1
            launch(ks.diag_mv, views[2].shape[0], inputs=[diag, *views, st(alpha), st(beta), per_entry],
                   device=A.device)

        return LinearOperator(A.shape, A.dtype, A.device, diag_mv, batch_offsets, max_batch_length)
    if isinstance(A, BsrMatrix):
        def bsr_matvec(x: array, y: array, z: array, alpha: float, beta: float) -> None:
            if beta != 0.0 and z.ptr != y.ptr:
                copy(z, y)
            bsr_mv(A, x, z, alpha, beta)

        return LinearOperator(A.shape, A.dtype, A.device, bsr_matvec, batch_offsets, max_batch_length)
    raise ValueError(f"cannot make a LinearOperator from {_describe(A)}: give a 2-D array of floats (dense), a 1-D "
                     "array (diagonal), a loomwork.sparse BsrMatrix or a LinearOperator")


_PTYPES = ("diag", "diag_abs", "block_jacobi_direct", "block_jacobi_sequential", "block_jacobi_tile", "fsai", "id")


def preconditioner(A: Any, ptype: str = "diag") -> LinearOperator | None:
    """A preconditioner for matrix `A` (a dense 2-D array or a loomwork.sparse BsrMatrix):

    - "diag" (Jacobi): the inverse of A's diagonal coefficients, 1 where one is 0; "diag_abs" the same
      with |coefficient|. For a BSR matrix with blocks, the diagonal coefficients of the diagonal blocks.
    - "block_jacobi_direct", "block_jacobi_sequential", "block_jacobi_tile": the inverse of each diagonal
      block of a square BsrMatrix with square blocks, by QR (a singular block becomes the identity), by
      L D L^T or Cholesky (for symmetric positive definite blocks; one that is not becomes the identity;
      "tile" takes float32 and float64 only). 1x1 blocks give "diag".
    - "fsai": `FSAI(A)` with its default settings (construct `FSAI` to choose them).
    - "id": None (no preconditioning)."""
    if not isinstance(ptype, str) or ptype not in _PTYPES:
        raise ValueError(f"unsupported preconditioner type {ptype!r}; supported: "
                         f"{', '.join(repr(p) for p in _PTYPES)}")
    if ptype == "id":
        return None
    if ptype == "fsai":
        return FSAI(A)
    if ptype != "diag" and ptype != "diag_abs":
        return aslinearoperator(block_jacobi_operator(A, ptype))
    if isinstance(A, BsrMatrix):
        return aslinearoperator(bsr_inverse_diagonal(A, ptype == "diag_abs", ptype))
    if not (isinstance(A, array) and A.ndim == 2 and T.is_float(A.dtype)):
        raise ValueError(f"preconditioner(ptype={ptype!r}) needs A to be a dense matrix (a 2-D array of floats) or "
                         f"a loomwork.sparse BsrMatrix, got {_describe(A)}")
    if A.shape[0] != A.shape[1]:
        raise ValueError(f"preconditioner(ptype={ptype!r}): the matrix is not square ({A.shape})")
    inv = empty(A.shape[0], dtype=A.dtype, device=A.device)
    launch(_kernels(A.dtype).inverse_diagonal, A.shape[0], inputs=[A, inv, int(ptype == "diag_abs")],
           device=A.device)
    return aslinearoperator(inv)


def _fits_diagonal(A: array, v: array) -> bool:
    """Whether a diagonal A scales v: entry by entry (each of v's components alike for a diagonal of
    scalars), or v's scalars one by one (as many as the diagonal's)."""
    k = scalar_count(A.dtype)
    if v.ndim != 1:
        return False
    return v.shape == A.shape and k in (1, scalar_count(v.dtype)) or v.shape[0] * scalar_count(v.dtype) == A.size * k


def _describe(v: Any) -> str:
    if isinstance(v, array):
        return f"a {v.ndim}-D array of {T.type_name(v.dtype)} with shape {v.shape}"
    return type(v).__name__


# ---- solver machinery ----

class _Layout:
    """How a solve splits the scalar dofs of b into independent subproblems (the operator's
    `batch_offsets`; one subproblem over every dof without them): the subproblem count, each dof's
    subproblem as a device map (empty for one subproblem over every dof, -1 for a dof outside every
    subproblem), and the chunks inner products reduce over, each within one subproblem."""

    def __init__(self, name: str, op: LinearOperator, scalars: int, device: Device) -> None:
        offsets = op.batch_offsets
        host = np.array([0, scalars]) if offsets is None else _host_offsets(name, op, scalars)
        lengths = np.diff(host)
        self.count = len(lengths)
        bmap = np.zeros(0, dtype=np.int32)
        if offsets is not None:
            bmap = np.full(scalars, -1, dtype=np.int32)
            bmap[host[0]:host[-1]] = np.repeat(np.arange(self.count, dtype=np.int32), lengths)
        self.bmap = array(bmap, dtype=T.int32, device=device)
        per_chunk = max(1024, -(-int(lengths.sum()) // 1024))
        pieces = -(-lengths // per_chunk)
        first = np.concatenate([[0], np.cumsum(pieces)])
        owner = np.repeat(np.arange(self.count), pieces)
        lo = host[owner] + (np.arange(first[-1]) - first[owner]) * per_chunk
        chunks = np.stack([lo, np.minimum(lo + per_chunk, host[owner + 1])], axis=1)
        self.chunks = array(chunks if len(chunks) else np.zeros((1, 2)), dtype=T.int32, device=device)
        self.batch_chunks = array(first, dtype=T.int32, device=device)


def _host_offsets(name: str, op: LinearOperator, scalars: int) -> np.ndarray:
    """The operator's `batch_offsets` on the host, checked against the system's `scalars` dofs."""
    offsets = op.batch_offsets
    if not isinstance(offsets, array) or offsets.ndim != 1 or offsets.dtype is not T.int32 or offsets.shape[0] < 2:
        raise TypeError(f"{name}: A.batch_offsets must be a 1-D wp.array of int32 with at least 2 entries (the "
                        f"first scalar dof of each subproblem, then the end of the last), got {_describe(offsets)}")
    host = offsets.numpy().astype(np.int64)
    if host[0] < 0 or (np.diff(host) < 0).any() or host[-1] > scalars:
        raise ValueError(f"{name}: A.batch_offsets must be non-decreasing scalar dof indices in [0, {scalars}] "
                         f"(b's scalar dofs), got {host.tolist() if len(host) <= 16 else host}")
    longest = int(np.diff(host).max())
    if op.max_batch_length is not None and longest > op.max_batch_length:
        raise ValueError(f"{name}: A.max_batch_length is {op.max_batch_length}, but a subproblem of A.batch_offsets "
                         f"has {longest} dofs")
    return host


class _Dots:
    """Inner products of scalar views per subproblem, reduced in float64 into the columns of a solver's
    scalars: one launch of per-chunk partial sums (`columns` products at once), one launch summing each
    product's chunks per subproblem."""

    def __init__(self, st: Any, device: Device, columns: int, layout: _Layout) -> None:
        self.layout = layout
        self.partial = empty((columns, layout.chunks.shape[0]), dtype=T.float64, device=device)
        self.kernels = _kernels(st)
        self.device = device

    def __call__(self, a: array, b: array, out: array, first: int) -> None:
        """out[first + k, batch] = <a[k], b[k]> over each subproblem, for 2-D views a, b of shape (products,
        scalars)."""
        ks, cols, layout = self.kernels, a.shape[0], self.layout
        launch(ks.partial_dots, (cols, layout.chunks.shape[0]), inputs=[a, b, layout.chunks, self.partial],
               device=self.device)
        launch(ks.sum_partials, (cols, layout.count), inputs=[self.partial, layout.batch_chunks, out, first],
               device=self.device)

    def one(self, a: array, b: array, out: array, slot: int) -> None:
        """out[slot, batch] = <a, b> over each subproblem, for 1-D scalar views."""
        self(repeat_view(a, 1), repeat_view(b, 1), out, slot)


def _dtype_epsilon(st: Any) -> float:
    return {T.float64: 1.0e-16, T.float16: 1.0e-4, T.bfloat16: 1.0e-3}.get(st, 1.0e-8)


def _tolerances(st: Any, tol: float | None, atol: float | None) -> tuple[float, float]:
    """(rtol, atol) as Warp picks them: both default to eps^(3/4) of the type, one given sets the other,
    and atol is at least eps^(9/4)."""
    eps = _dtype_epsilon(st)
    if tol is None and atol is None:
        tol = atol = eps ** 0.75
    elif tol is None:
        tol = atol
    elif atol is None:
        atol = tol
    return tol, max(atol, eps ** 2.25)


class LinearSolverState:
    """A solver with its work buffers allocated for one system: call it to solve, optionally with another
    `A`, `b`, `x` or `M` of the same shape, dtype and device (no new allocation). Made by the solver
    functions with `run=False`, or by the classes `CG`, `CR`, `BiCGSTAB`, `GMRES`."""

    _name = "solver"

    def __init__(self, A: Any, b: array, x: array, tol: float | None = None, atol: float | None = None,
                 maxiter: float | None = 0, M: Any = None, callback: Callable | None = None,
                 check_every: int = 10, use_cuda_graph: bool = True) -> None:
        self._A = aslinearoperator(A)
        self._M = aslinearoperator(M)
        self._check_system(self._A, b, x, self._M)
        self._b, self._x = b, x
        self._tol, self._atol = tol, atol
        self._callback = callback
        if isinstance(check_every, bool) or not isinstance(check_every, int) or check_every < 0:
            raise ValueError(f"{self._name}: check_every must be a non-negative int, got {check_every!r}")
        if check_every == 0 and callback is not None and not isinstance(callback, Kernel):
            raise TypeError(f"{self._name}: with check_every=0 the residual stays on the device, so the callback "
                            "must be a kernel taking (cur_iter, r_norm_sq, atol_sq) arrays; pass check_every > 0 "
                            "for a Python callback")
        self._check_every = check_every
        self._use_cuda_graph = use_cuda_graph  # accepted for Warp's API; launches run one by one
        self._device = self._A.device
        self._st = self._A.scalar_type
        scalars = b.shape[0] * scalar_count(b.dtype)
        self._layout = _Layout(self._name, self._A, scalars, self._device)
        self._bmap = self._layout.bmap
        self._wide = max(scalars, self._layout.count)  # launches also writing a scalar per subproblem
        self._maxiter = int(maxiter) if maxiter else scalars // self._layout.count
        self._cycle = 1
        self._s = zeros((ATOL_SQ + 1, self._layout.count), dtype=self._st, device=self._device)
        self._state = zeros(2, dtype=T.int32, device=self._device)
        self._dots = _Dots(self._st, self._device, self._dot_columns(), self._layout)
        self._k = _kernels(self._st)
        self._allocate()

    def _dot_columns(self) -> int:
        return 2

    def _allocate(self) -> None:
        raise NotImplementedError

    def _iterate(self, A: LinearOperator, b: array, x: array, M: LinearOperator | None) -> Callable[[], None]:
        """Start a solve (residual, tolerance) and return the function doing one cycle of iterations."""
        raise NotImplementedError

    def _buffers(self, count: int) -> tuple[list[array], list[array], array]:
        """`count` work vectors like b and their scalar views, all rows of one (count, n) array (so
        neighbours form one 2-D view for `_Dots`), and the 2-D scalar view of that array."""
        work = zeros((count, self._b.shape[0]), dtype=self._b.dtype, device=self._device)
        wc = scalar_view(work)
        return [work[i] for i in range(count)], [wc[i] for i in range(count)], wc

    def _check_system(self, A: LinearOperator, b: Any, x: Any, M: LinearOperator | None) -> None:
        name = self._name
        for what, op in (("A", A), ("M", M)):
            if op is None:
                continue
            if len(op.shape) == 2 and op.shape[0] != op.shape[1]:
                raise ValueError(f"{name}: {what} must be square, got shape {op.shape}")
            if op.scalar_type is not A.scalar_type or op.device != A.device:
                raise TypeError(f"{name}: M ({T.type_name(op.dtype)} on {op.device}) does not match A "
                                f"({T.type_name(A.dtype)} on {A.device})")
        for what, v in (("b", b), ("x", x)):
            if not isinstance(v, array) or v.ndim != 1:
                raise TypeError(f"{name}: {what} must be a 1-D wp.array, got {_describe(v)}")
            if T.elem_scalar(v.dtype) is not A.scalar_type:
                raise TypeError(f"{name}: {what} has dtype {T.type_name(v.dtype)}, but A's scalars are "
                                f"{T.type_name(A.scalar_type)}")
            if v.device != A.device:
                raise ValueError(f"{name}: {what} is on {v.device}, A on {A.device}")
        if x.dtype != b.dtype or x.shape != b.shape:
            raise ValueError(f"{name}: x ({T.type_name(x.dtype)}, shape {x.shape}) and b ({T.type_name(b.dtype)}, "
                             f"shape {b.shape}) must have the same dtype and shape")
        entries, scalars = b.shape[0], b.shape[0] * scalar_count(b.dtype)
        for what, op in (("A", A), ("M", M)):
            # a 1-D shape is a diagonal's: of vectors, it scales as many scalars as they hold
            if op is not None and op.shape[0] * (scalar_count(op.dtype) if len(op.shape) == 1 else 1) not in (
                    entries, scalars):
                raise ValueError(f"{name}: {what} has shape {op.shape}, but b has {entries} entries "
                                 f"({scalars} scalars)")

    def __call__(self, A: Any = None, b: array | None = None, x: array | None = None, M: Any = None) -> tuple:
        """Solve, with the operands given at construction unless replaced here."""
        A = aslinearoperator(A) if A is not None else self._A
        M = aslinearoperator(M) if M is not None else self._M
        b = b if b is not None else self._b
        x = x if x is not None else self._x
        self._check_compatible(A, b, x, M)
        x_run = x.contiguous()  # a strided x is solved in a copy, written back at the end
        cycle = self._iterate(A, b.contiguous(), x_run, M)
        result = self._run_checked(cycle) if self._check_every > 0 else self._run_on_device(cycle)
        if x_run is not x:
            x.assign(x_run)
        return result

    def _check_compatible(self, A: LinearOperator, b: array, x: array, M: LinearOperator | None) -> None:
        self._check_system(A, b, x, M)
        if A is not self._A and (A.batch_offsets is not self._A.batch_offsets
                                 or A.max_batch_length != self._A.max_batch_length):
            raise ValueError(f"{self._name}: the new A must have the batch_offsets array (the same array) and "
                             "max_batch_length of the A the solver was made for")
        for what, new, old in (("A", A, self._A), ("b", b, self._b), ("M", M, self._M)):
            if new is None or old is None or new is old:
                continue
            if new.shape != old.shape or new.dtype != old.dtype or new.device != old.device:
                raise ValueError(f"{self._name}: the new {what} ({T.type_name(new.dtype)}, shape {new.shape}, on "
                                 f"{new.device}) does not match the one the solver was made for "
                                 f"({T.type_name(old.dtype)}, shape {old.shape}, on {old.device})")

    def _start(self, A: LinearOperator, b: array, x: array, r: array) -> None:
        """r = b - A x, the tolerance from |b|, and s[RR] = |r|^2."""
        rtol, atol = _tolerances(self._st, self._tol, self._atol)
        bc = scalar_view(b)
        self._dots.one(bc, bc, self._s, BB)
        launch(self._k.init_tolerance, self._layout.count, inputs=[self._s, self._st(rtol), self._st(atol)],
               device=self._device)
        A.matvec(x, b, r, alpha=-1.0, beta=1.0)

    def _run_checked(self, cycle: Callable[[], None]) -> tuple[int, float, float]:
        """Cycles until every subproblem's residual is below its tolerance (read every `check_every`
        iterations) or `maxiter`: (iterations, largest residual norm, largest absolute tolerance)."""
        s = self._s.numpy()  # host memory here; a device would copy
        atol = math.sqrt(float(s[ATOL_SQ].max()))
        check_every = max(self._check_every, self._cycle)
        n, err = 0, math.sqrt(float(s[RR].max()))
        if self._callback is not None:
            self._callback(n, err, atol)
        if (s[RR] <= s[ATOL_SQ]).all():
            return n, err, atol
        while True:
            cycle()
            n += self._cycle
            if n >= self._maxiter:
                break
            if n % check_every < self._cycle:
                s = self._s.numpy()
                if (s[RR] <= s[ATOL_SQ]).all():
                    break
                if self._callback is not None:
                    self._callback(n, math.sqrt(float(s[RR].max())), atol)
        err = math.sqrt(float(self._s.numpy()[RR].max()))
        if self._callback is not None:
            self._callback(n, err, atol)
        return n, err, atol

    def _run_on_device(self, cycle: Callable[[], None]) -> tuple[array, array, array]:
        """Cycles with no host check (Warp's check_every=0): a kernel keeps the iteration count and whether
        to go on; the host stops early only where it reads that without waiting for a device. Returns
        device arrays: (iterations, squared residual norms, squared absolute tolerances), the last two
        with one entry per subproblem."""
        state, s, dev = self._state, self._s, self._device
        outputs = (state[0:1], s[RR], s[ATOL_SQ])
        host = dev.backend.host_accessible

        def update() -> None:
            launch(self._k.count_cycle, 1, inputs=[s, self._cycle, self._maxiter, state], device=dev)
            if self._callback is not None:
                launch(self._callback, 1, inputs=list(outputs), device=dev)

        state.zero_()
        update()  # state[1] is 0 here, so this only says whether to start
        for _ in range(0, self._maxiter, self._cycle):
            if host and state.numpy()[1] == 0:
                break
            cycle()
            update()
        return outputs


def _restart_arg(restart: Any) -> int | None:
    if restart is None:
        return None
    if isinstance(restart, bool):
        raise TypeError("restart must be an integer or None")
    try:
        restart = operator.index(restart)
    except TypeError:
        raise TypeError(f"restart must be an integer or None, got {type(restart).__name__}") from None
    if restart < 1:
        raise ValueError(f"restart must be positive, got {restart}")
    return restart


class _Restartable(LinearSolverState):
    """CG and CR: optionally restarted every `restart` iterations from the true residual b - A x."""

    def __init__(self, A: Any, b: array, x: array, tol: float | None = None, atol: float | None = None,
                 maxiter: float | None = 0, M: Any = None, callback: Callable | None = None, check_every: int = 10,
                 use_cuda_graph: bool = True, *, restart: int | None = None) -> None:
        self._restart = _restart_arg(restart)
        super().__init__(A, b, x, tol, atol, maxiter, M, callback, check_every, use_cuda_graph)

    def _restarting(self, iteration: Callable[[bool], None], restart_from: Callable[[], None]) -> Callable[[], None]:
        if self._restart is None:
            return lambda: iteration(True)
        n = self._cycle = max(1, min(self._restart, self._maxiter))

        def cycle() -> None:
            for _ in range(n - 1):
                iteration(True)
            iteration(False)
            restart_from()

        return cycle



class CG(_Restartable):
    """Conjugate gradients for symmetric positive definite systems (with a symmetric positive definite
    preconditioner `M` approximating A's inverse)."""

    _name = "cg"

    def _allocate(self) -> None:
        self._work = self._buffers(4)  # r, z, p, A p

    def _iterate(self, A: LinearOperator, b: array, x: array, M: LinearOperator | None) -> Callable[[], None]:
        s, k, dots, dev, bm, wide = self._s, self._k, self._dots, self._device, self._bmap, self._wide
        (r, z, p, ap), (rc, zc, pc, apc), wc = self._work
        xc = scalar_view(x)
        r_and_z = wc[0:2] if M is not None else repeat_view(rc, 2)
        if M is None:
            z, zc = r, rc

        def restart_from_residual() -> None:  # z = M r, <r, r> and <r, z>, p = z
            if M is not None:
                M.matvec(r, z, z, alpha=1.0, beta=0.0)
            dots(repeat_view(rc, 2), r_and_z, s, RR)
            copy(p, z)

        def restart() -> None:
            A.matvec(x, b, r, alpha=-1.0, beta=1.0)
            restart_from_residual()

        def iteration(update_direction: bool) -> None:
            A.matvec(p, ap, ap, alpha=1.0, beta=0.0)
            dots.one(pc, apc, s, S1)
            launch(k.step, wide, inputs=[s, S0, S1, S2, xc, pc, rc, apc, rc, rc, 0, bm], device=dev)
            if update_direction:  # s[S2] keeps the last <r, z>
                if M is not None:
                    M.matvec(r, z, z, alpha=1.0, beta=0.0)
                dots(repeat_view(rc, 2), r_and_z, s, RR)
                launch(k.direction, rc.shape[0], inputs=[s, S0, S2, zc, pc, zc, pc, 0, bm], device=dev)

        self._start(A, b, x, r)
        restart_from_residual()
        return self._restarting(iteration, restart)


class CR(_Restartable):
    """Conjugate residuals for symmetric (possibly indefinite) systems, with an optional preconditioner."""

    _name = "cr"

    def _allocate(self) -> None:
        self._work = self._buffers(6)  # r, z, p, A z, A p, y = M A p

    def _iterate(self, A: LinearOperator, b: array, x: array, M: LinearOperator | None) -> Callable[[], None]:
        s, k, dots, dev, bm, wide = self._s, self._k, self._dots, self._device, self._bmap, self._wide
        (r, z, p, az, ap, y), (rc, zc, pc, azc, apc, yc), _ = self._work
        xc = scalar_view(x)
        if M is None:
            z, zc, y, yc = r, rc, ap, apc

        def restart_from_residual() -> None:  # z = M r, A z, <r, r>, <z, A z>, p = z, A p = A z
            if M is not None:
                M.matvec(r, z, z, alpha=1.0, beta=0.0)
            A.matvec(z, az, az, alpha=1.0, beta=0.0)
            dots.one(rc, rc, s, RR)
            dots.one(zc, azc, s, S0)
            copy(p, z)
            copy(ap, az)

        def restart() -> None:
            A.matvec(x, b, r, alpha=-1.0, beta=1.0)
            restart_from_residual()

        def iteration(update_direction: bool) -> None:
            if M is not None:
                M.matvec(ap, y, y, alpha=1.0, beta=0.0)
            dots.one(apc, yc, s, S1)
            launch(k.step, wide, inputs=[s, S0, S1, S2, xc, pc, rc, apc, zc, yc, int(M is not None), bm],
                   device=dev)
            if update_direction:  # s[S2] keeps the last <z, A z>
                A.matvec(z, az, az, alpha=1.0, beta=0.0)
                dots.one(rc, rc, s, RR)
                dots.one(zc, azc, s, S0)
                launch(k.direction, rc.shape[0], inputs=[s, S0, S2, zc, pc, azc, apc, 1, bm], device=dev)

        self._start(A, b, x, r)
        restart_from_residual()
        return self._restarting(iteration, restart)


class BiCGSTAB(LinearSolverState):
    """Biconjugate gradients stabilized for general (nonsymmetric) systems; `M` preconditions on the right
    unless `is_left_preconditioner`."""

    _name = "bicgstab"

    def __init__(self, A: Any, b: array, x: array, tol: float | None = None, atol: float | None = None,
                 maxiter: float | None = 0, M: Any = None, callback: Callable | None = None, check_every: int = 10,
                 use_cuda_graph: bool = True, is_left_preconditioner: bool = False) -> None:
        self._left = bool(is_left_preconditioner)
        super().__init__(A, b, x, tol, atol, maxiter, M, callback, check_every, use_cuda_graph)

    def _allocate(self) -> None:
        self._work = self._buffers(8)  # r, r0, p, v, t, y = M p, z = M r, M t

    def _check_compatible(self, A: LinearOperator, b: array, x: array, M: LinearOperator | None) -> None:
        super()._check_compatible(A, b, x, M)
        if (M is None) != (self._M is None):
            raise ValueError("bicgstab: give a preconditioner M on every call or on none, as at construction")

    def _iterate(self, A: LinearOperator, b: array, x: array, M: LinearOperator | None) -> Callable[[], None]:
        s, k, dots, dev, bm = self._s, self._k, self._dots, self._device, self._bmap
        (r, r0, p, v, t, y, z, mt), (rc, r0c, pc, vc, tc, yc, zc, mtc), wc = self._work
        xc = scalar_view(x)
        if M is None:
            y, yc, z, zc = p, pc, r, rc
        if M is None or not self._left:
            mt, mtc = t, tc
        left = M is not None and self._left

        def iteration() -> None:
            if M is not None:
                M.matvec(p, y, y, alpha=1.0, beta=0.0)
            A.matvec(y, v, v, alpha=1.0, beta=0.0)
            dots.one(r0c, vc, s, S1)
            launch(k.bicgstab_step, rc.shape[0], inputs=[s, S0, S1, xc, yc, rc, vc, bm], device=dev)
            dots.one(rc, rc, s, RR)
            if M is not None:
                M.matvec(r, z, z, alpha=1.0, beta=0.0)
            A.matvec(z, t, t, alpha=1.0, beta=0.0)
            if left:  # omega minimizes the preconditioned residual |M (s - omega t)|
                M.matvec(t, mt, mt, alpha=1.0, beta=0.0)
                dots.one(zc, mtc, s, S2)
            else:
                dots.one(rc, tc, s, S2)
            dots.one(mtc, mtc, s, S3)
            launch(k.bicgstab_step, rc.shape[0], inputs=[s, S2, S3, xc, zc, rc, tc, bm], device=dev)
            dots(repeat_view(rc, 2), wc[0:2], s, RR)  # <r, r> and rho = <r, r0>
            launch(k.bicgstab_direction, rc.shape[0], inputs=[s, pc, rc, vc, bm], device=dev)

        self._start(A, b, x, r)
        copy(r0, r)
        copy(p, r)
        dots(repeat_view(rc, 2), wc[0:2], s, RR)
        return iteration


class GMRES(LinearSolverState):
    """Restarted GMRES(k) for general systems: each cycle builds a `restart`-dimensional Krylov basis
    and takes the combination that minimizes the residual; `M` preconditions on the right unless
    `is_left_preconditioner`."""

    _name = "gmres"

    def __init__(self, A: Any, b: array, x: array, tol: float | None = None, atol: float | None = None,
                 restart: int = 31, maxiter: float | None = 0, M: Any = None, callback: Callable | None = None,
                 check_every: int = 31, use_cuda_graph: bool = True, is_left_preconditioner: bool = False) -> None:
        self._restart = _restart_arg(restart)
        if self._restart is None:
            raise TypeError("gmres: restart must be a positive integer")
        self._left = bool(is_left_preconditioner)
        super().__init__(A, b, x, tol, atol, maxiter, M, callback, check_every, use_cuda_graph)

    def _dot_columns(self) -> int:
        return min(self._restart, self._maxiter) + 1

    def _allocate(self) -> None:
        n = self._cycle = min(self._restart, self._maxiter)
        if self._check_every > 0:
            self._check_every = max(n, self._check_every)
        self._work = self._buffers(n + 3)  # the basis v_0..v_n, then r and w
        # per subproblem: H's column j at rows j (n + 1) ..., the least-squares solution
        self._H = zeros((n * (n + 1), self._layout.count), dtype=self._st, device=self._device)
        self._y = zeros((n, self._layout.count), dtype=self._st, device=self._device)

    def _iterate(self, A: LinearOperator, b: array, x: array, M: LinearOperator | None) -> Callable[[], None]:
        s, k, dots, dev, n = self._s, self._k, self._dots, self._device, self._cycle
        bm, wide = self._bmap, self._wide
        (*V, r, w), (*Vcs, rc, wcv), wc = self._work
        Vc, xc, H = wc[0:n + 1], scalar_view(x), self._H
        w_repeated = repeat_view(wcv, n + 1)
        pivot = self._st(_dtype_epsilon(self._st) ** 2)
        left = M is not None and self._left

        def arnoldi(j: int) -> None:  # w = A v_j (preconditioned), orthogonalized against v_0..v_j
            if M is None:
                A.matvec(V[j], w, w, alpha=1.0, beta=0.0)
            elif left:
                A.matvec(V[j], V[j + 1], V[j + 1], alpha=1.0, beta=0.0)
                M.matvec(V[j + 1], w, w, alpha=1.0, beta=0.0)
            else:
                M.matvec(V[j], V[j + 1], V[j + 1], alpha=1.0, beta=0.0)
                A.matvec(V[j + 1], w, w, alpha=1.0, beta=0.0)
            column = j * (n + 1)
            dots(Vc[0:j + 1], w_repeated[0:j + 1], H, column)
            launch(k.subtract_combination, rc.shape[0], inputs=[Vc, H, column, j + 1, wcv, bm], device=dev)
            dots.one(wcv, wcv, s, S1)
            launch(k.normalize, wide, inputs=[wcv, Vcs[j + 1], s, S1, H, column + j + 1, bm], device=dev)

        def cycle() -> None:
            rh = rc
            if left:
                M.matvec(r, w, w, alpha=1.0, beta=0.0)
                rh = wcv
            dots.one(rh, rh, s, S1)
            launch(k.normalize, wide, inputs=[rh, Vcs[0], s, S1, s, S0, bm], device=dev)
            for j in range(n):
                arnoldi(j)
            launch(k.least_squares, self._layout.count, inputs=[H, n, s, pivot, self._y], device=dev)
            if M is None or left:
                launch(k.combination, rc.shape[0], inputs=[Vc, self._y, n, 1, xc, bm], device=dev)
            else:  # x += M (V y)
                launch(k.combination, rc.shape[0], inputs=[Vc, self._y, n, 0, wcv, bm], device=dev)
                M.matvec(w, r, r, alpha=1.0, beta=0.0)
                launch(k.add_vec, rc.shape[0], inputs=[rc, xc, bm], device=dev)
            A.matvec(x, b, r, alpha=-1.0, beta=1.0)
            dots.one(rc, rc, s, RR)

        self._start(A, b, x, r)
        dots.one(rc, rc, s, RR)
        return cycle


def _solve(state: LinearSolverState, run: bool) -> Any:
    return state() if run else state


def cg(A: Any, b: array, x: array, tol: float | None = None, atol: float | None = None, maxiter: float | None = 0,
       M: Any = None, callback: Callable | None = None, check_every: int = 10, use_cuda_graph: bool = True,
       run: bool = True, *, restart: int | None = None) -> Any:
    """Solve the symmetric positive definite system A x = b by conjugate gradients, from the initial guess
    in `x` (updated in place). Stops when |b - A x| <= max(atol, tol |b|) (both default to the dtype's
    eps^(3/4)) or after `maxiter` iterations (default: the system size).

    Returns (iterations, residual norm, absolute tolerance); with `check_every=0`, device arrays of the
    iteration count, squared residual and squared tolerance; with `run=False`, the `CG` solver to call.
    A batched `A` (`aslinearoperator(A, batch_offsets=...)`) solves its subproblems together, each to
    its own tolerance (from its part of b): the figures are then the largest over the subproblems, and the
    device arrays have one entry per subproblem; `maxiter` defaults to the dofs per subproblem.
    `callback(iteration, residual, atol)` is called every `check_every` iterations (a kernel taking
    the three arrays when `check_every=0`); `restart` restarts from the true residual every so many
    iterations. `use_cuda_graph` is accepted for Warp's API and has no effect."""
    return _solve(CG(A, b, x, tol, atol, maxiter, M, callback, check_every, use_cuda_graph, restart=restart), run)


def cr(A: Any, b: array, x: array, tol: float | None = None, atol: float | None = None, maxiter: float | None = 0,
       M: Any = None, callback: Callable | None = None, check_every: int = 10, use_cuda_graph: bool = True,
       run: bool = True, *, restart: int | None = None) -> Any:
    """Solve the symmetric system A x = b by conjugate residuals; arguments and results as `cg`."""
    return _solve(CR(A, b, x, tol, atol, maxiter, M, callback, check_every, use_cuda_graph, restart=restart), run)


def bicgstab(A: Any, b: array, x: array, tol: float | None = None, atol: float | None = None,
             maxiter: float | None = 0, M: Any = None, callback: Callable | None = None, check_every: int = 10,
             use_cuda_graph: bool = True, is_left_preconditioner: bool = False, run: bool = True) -> Any:
    """Solve the general system A x = b by BiCGSTAB; `M` preconditions on the right unless
    `is_left_preconditioner`. Other arguments and results as `cg`."""
    return _solve(BiCGSTAB(A, b, x, tol, atol, maxiter, M, callback, check_every, use_cuda_graph,
                           is_left_preconditioner), run)


def gmres(A: Any, b: array, x: array, tol: float | None = None, atol: float | None = None, restart: int = 31,
          maxiter: float | None = 0, M: Any = None, callback: Callable | None = None, check_every: int = 31,
          use_cuda_graph: bool = True, is_left_preconditioner: bool = False, run: bool = True) -> Any:
    """Solve the general system A x = b by GMRES restarted every `restart` iterations (whole cycles: it may
    run up to `restart - 1` iterations past `maxiter`); `M` preconditions on the right unless
    `is_left_preconditioner`. Other arguments and results as `cg`."""
    return _solve(GMRES(A, b, x, tol, atol, restart, maxiter, M, callback, check_every, use_cuda_graph,
                        is_left_preconditioner), run)
