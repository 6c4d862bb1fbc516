"""Block-diagonal preconditioners of BSR matrices for `loomwork.optim.linear.preconditioner`: the inverse
of each diagonal block (block Jacobi) and the inverse of each diagonal coefficient (Jacobi).

One thread per diagonal block factorizes it in place, in flat scalar arrays (any block size, any float
type), and stores the block's explicit inverse; applying the preconditioner is then one small dense
product per block. Warp's three spellings are three factorizations, with Warp's guards: "direct"
(Householder QR; a numerically singular block becomes the identity), "sequential" (L D L^T) and "tile"
(Cholesky, float32 and float64 only) both for symmetric positive definite blocks, a block that is
not symmetric or not positive definite becoming the identity. A block is singular where a pivot is
not finite or at most `rel_tol` times the block's largest pivot (QR) or largest diagonal entry
(L D L^T, Cholesky); symmetric where its entries mirror within `rel_tol` times the largest diagonal.
"""

from __future__ import annotations

from typing import Any

from loomwork.kernels import builtins as B
from loomwork.kernels import types as T
from loomwork.kernels.array import array, empty
from loomwork.kernels.launch import launch
from loomwork.kernels.module import kernel

from .components import cast_like, matvec_views, scalar_view
from .linear_operator import LinearOperator
from .sparse import BsrMatrix, bsr_get_diag

tid, sqrt, isfinite = B.BUILTINS["tid"], B.BUILTINS["sqrt"], B.BUILTINS["isfinite"]

STRATEGIES = {"block_jacobi_direct": 0, "block_jacobi_sequential": 1, "block_jacobi_tile": 2}
DIRECT, SEQUENTIAL, TILE = 0, 1, 2

# relative pivot tolerance per scalar type (about eps^(3/4)), below which a block counts as singular
_PIVOT_REL_TOL = {T.float16: 1.0e-3, T.float32: 1.0e-6, T.float64: 1.0e-12}


@kernel(enable_backward=False)
def _inverse_diagonal_entries(diag: array(dtype=T.Float), inv: array(dtype=T.Float), size: int, use_abs: int):
    # one thread per scalar row: 1 / d (or 1 / |d|) for the diagonal coefficient d of its block, 1 where d is 0
    r = tid()
    blk = r // size
    i = r - blk * size
    d = diag[(blk * size + i) * size + i]
    if use_abs != 0:
        d = abs(d)
    inv[r] = cast_like(1.0, d)
    if d != 0.0:
        inv[r] = 1.0 / d


@kernel(enable_backward=False)
def _invert_blocks(diag: array(dtype=T.Float), work: array(dtype=T.Float), qt: array(dtype=T.Float),
                   inv: array(dtype=T.Float), b: int, strategy: int, rel_tol: T.Float):
    # one thread per diagonal block (b x b, row major at i b^2): its inverse in inv, the identity where the
    # strategy's guard refuses the block; work holds R (QR) or the triangular factor, qt Q^T (QR only)
    base = tid() * b * b
    zero = cast_like(0.0, rel_tol)
    one = cast_like(1.0, rel_tol)
    for e in range(b * b):
        work[base + e] = diag[base + e]
    ok = True
    if strategy == 0:
        for r in range(b):
            for c in range(b):
                qt[base + r * b + c] = zero
            qt[base + r * b + r] = one
        for k in range(b):  # reflect column k onto e_k: v = x - a e_k, a = -sign(x_k) |x|, kept in inv's row 0
            norm = zero
            for r in range(k, b):
                norm = norm + work[base + r * b + k] * work[base + r * b + k]
            norm = sqrt(norm)
            a = norm
            if work[base + k * b + k] >= 0.0:
                a = -norm
            vv = zero
            for r in range(k, b):
                v = work[base + r * b + k]
                if r == k:
                    v = v - a
                inv[base + r] = v
                vv = vv + v * v
            if vv > 0.0:  # apply I - 2 v v^T / |v|^2 to R's columns k.. and to Q^T
                for c in range(k, b):
                    s = zero
                    for r in range(k, b):
                        s = s + inv[base + r] * work[base + r * b + c]
                    s = 2.0 * s / vv
                    for r in range(k, b):
                        work[base + r * b + c] = work[base + r * b + c] - s * inv[base + r]
                for c in range(b):
                    s = zero
                    for r in range(k, b):
                        s = s + inv[base + r] * qt[base + r * b + c]
                    s = 2.0 * s / vv
                    for r in range(k, b):
                        qt[base + r * b + c] = qt[base + r * b + c] - s * inv[base + r]
        largest = zero
        for k in range(b):
            largest = max(largest, abs(work[base + k * b + k]))
        for k in range(b):
            p = work[base + k * b + k]
            if not isfinite(p) or abs(p) <= rel_tol * largest:
                ok = False
    else:
        largest = zero
        for k in range(b):
            largest = max(largest, abs(work[base + k * b + k]))
        for r in range(b):
            for c in range(r):
                if abs(work[base + r * b + c] - work[base + c * b + r]) > rel_tol * largest:
                    ok = False
        for j in range(b):  # L D L^T (unit L below, D on the diagonal) or L L^T, in the lower triangle
            if ok:
                d = work[base + j * b + j]
                for k in range(j):
                    lk = work[base + j * b + k]
                    if strategy == 1:
                        lk = lk * lk * work[base + k * b + k]
                    else:
                        lk = lk * lk
                    d = d - lk
                if not isfinite(d) or d <= rel_tol * largest:
                    ok = False
                else:
                    if strategy != 1:
                        d = sqrt(d)
                    work[base + j * b + j] = d
                    for i in range(j + 1, b):
                        t = work[base + i * b + j]
                        for k in range(j):
                            lik = work[base + i * b + k] * work[base + j * b + k]
                            if strategy == 1:
                                lik = lik * work[base + k * b + k]
                            t = t - lik
                        work[base + i * b + j] = t / d
    if not ok:
        for r in range(b):
            for c in range(b):
                inv[base + r * b + c] = zero
            inv[base + r * b + r] = one
    else:
        for c in range(b):  # column c of the inverse: solve the factored system for e_c
            if strategy == 0:  # R x = Q^T e_c
                for kk in range(b):
                    k = b - 1 - kk
                    s = qt[base + k * b + c]
                    for m in range(k + 1, b):
                        s = s - work[base + k * b + m] * inv[base + m * b + c]
                    inv[base + k * b + c] = s / work[base + k * b + k]
            else:  # L y = e_c, then L^T x = y (D^-1 y for L D L^T)
                for k in range(b):
                    s = zero
                    if k == c:
                        s = one
                    for m in range(k):
                        s = s - work[base + k * b + m] * inv[base + m * b + c]
                    if strategy != 1:
                        s = s / work[base + k * b + k]
                    inv[base + k * b + c] = s
                for kk in range(b):
                    k = b - 1 - kk
                    s = inv[base + k * b + c]
                    if strategy == 1:
                        s = s / work[base + k * b + k]
                    for m in range(k + 1, b):
                        s = s - work[base + m * b + k] * inv[base + m * b + c]
                    if strategy != 1:
                        s = s / work[base + k * b + k]
                    inv[base + k * b + c] = s


@kernel(enable_backward=False)
def _block_mv(inv: array(dtype=T.Float), x: array(dtype=T.Float), y: array(dtype=T.Float), z: array(dtype=T.Float),
              alpha: T.Float, beta: T.Float, b: int):
    # one thread per scalar row: z = alpha (inverse block) x + beta y
    r = tid()
    blk = r // b
    i = r - blk * b
    s = cast_like(0.0, alpha)
    if alpha != 0.0:
        for j in range(b):
            s = s + inv[(blk * b + i) * b + j] * x[blk * b + j]
        s = alpha * s
    if beta != 0.0:
        s = s + beta * y[r]
    z[r] = s


def _check_square_bsr(A: Any, ptype: str) -> None:
    if not isinstance(A, BsrMatrix):
        raise ValueError(f"preconditioner(ptype={ptype!r}) needs A to be a loomwork.sparse BsrMatrix, got "
                         f"{type(A).__name__}")
    if not T.is_float(A.scalar_type):
        raise TypeError(f"preconditioner(ptype={ptype!r}): A's scalars must be floats, got "
                        f"{T.type_name(A.scalar_type)}")
    br, bc = A.block_shape
    if br != bc:
        raise ValueError(f"preconditioner(ptype={ptype!r}) needs square matrix blocks, A's are {br}x{bc}")
    if A.nrow != A.ncol:
        raise ValueError(f"preconditioner(ptype={ptype!r}) needs as many block rows as block columns, A has "
                         f"{A.nrow} x {A.ncol} blocks (shape {A.shape})")


def bsr_inverse_diagonal(A: BsrMatrix, use_abs: bool, ptype: str) -> array:
    """The inverses of A's diagonal coefficients (1 where one is 0; of |coefficient| with `use_abs`): one
    scalar per row for a CSR matrix, one vector per block row for blocks."""
    _check_square_bsr(A, ptype)
    b, st = A.block_shape[0], A.scalar_type
    inv = empty(A.nrow, dtype=st if b == 1 else T.vector(b, st), device=A.device)
    if A.nrow:
        launch(_inverse_diagonal_entries, A.shape[0],
               inputs=[scalar_view(bsr_get_diag(A)), scalar_view(inv), b, int(use_abs)], device=A.device)
    return inv


def block_jacobi_operator(A: BsrMatrix, ptype: str) -> LinearOperator | array:
    """The block-Jacobi preconditioner `ptype` of A as an operator; for 1x1 blocks, the inverse diagonal to
    make a Jacobi operator of (as Warp, which falls back to "diag" there)."""
    _check_square_bsr(A, ptype)
    st, b, dev = A.scalar_type, A.block_shape[0], A.device
    strategy = STRATEGIES[ptype]
    if strategy == TILE and st not in (T.float32, T.float64):
        raise ValueError(f"preconditioner(ptype={ptype!r}) factorizes float32 or float64 blocks, A's scalars are "
                         f"{T.type_name(st)}")
    if b == 1:
        return bsr_inverse_diagonal(A, False, ptype)
    n = A.nrow
    diag = scalar_view(bsr_get_diag(A))
    inv = empty(n * b * b, dtype=st, device=dev)
    if n:
        work = empty(n * b * b, dtype=st, device=dev)
        qt = empty(n * b * b if strategy == DIRECT else 1, dtype=st, device=dev)
        launch(_invert_blocks, n, inputs=[diag, work, qt, inv, b, strategy, st(_PIVOT_REL_TOL.get(st, 1.0e-6))],
               device=dev)
    size = n * b

    def block_mv(x: array, y: array, z: array, alpha: float, beta: float) -> None:
        xs, ys, zs = matvec_views(ptype, st, size, x, y, z)
        if x.ptr is not None and x.ptr == z.ptr:  # aliased: read a copy of x
            xs = scalar_view(x.clone(requires_grad=False))
        launch(_block_mv, size, inputs=[inv, xs, ys, zs, st(alpha), st(beta), b], device=dev)

    return LinearOperator(A.shape, A.dtype, dev, block_mv)
