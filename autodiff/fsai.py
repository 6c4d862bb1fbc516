"""Adaptive factorized sparse approximate inverse (`FSAI`, Warp's `warp.optim.linear.FSAI`): a lower
triangular sparse G with G^T G close to the inverse of a symmetric positive definite BSR matrix A,
applied as two sparse products.

Blocks are expanded into scalars: row i of G lives on a support S of columns j <= i of A's scalar rows.
The support grows from {i} on the graph of the equilibrated matrix Ah = D A D (D = diag(A)^-1/2, so
Ah has a unit diagonal): each step scans the columns c < i of the rows already in S, scores each by
|Ah[c, S] z| (the residual of the current local solution z), and adds the `max_step_size` best (ties
to the lower column) while `max_row_size` allows, bordering the Cholesky factor of Ah[S, S]. A pivot
at or below `pivot_floor` stops the row there (a truncated row); the growth also stops once the local
energy 1 / z[0] improves by no more than `kap_tolerance`. Then Ah[S, S] z = e_0 and
G[i, S] = D z / sqrt(z[0]), i.e. A[S, S] y = e_i with G[i, S] = y / sqrt(y_i).

Each row is one thread of a kernel with local work of `max_row_size` squared (a kernel per width, built
on first use, each in a module of its own, its short loops left rolled: it compiles in a few seconds);
the rows are packed into BSR storage (sorted columns, diagonal last) on the host, where
the transpose G^T is also indexed. With `reuse_pattern`, `update` refits the values on the same
supports on the device (in their growth order, so the pivots are construction's).
"""

from collections.abc import Callable
from functools import cache
from typing import Any

import numpy as np

from loomwork.kernels import builtins as B
from loomwork.kernels import types as T
from loomwork.kernels.array import array, clone, empty, zeros
from loomwork.kernels.functions import func
from loomwork.kernels.launch import launch
from loomwork.kernels.module import kernel

from .components import matvec_views, scalar_view
from .linear_operator import LinearOperator
from .sparse import BsrMatrix, bsr_block_index, bsr_copy

tid, sqrt, isfinite, atomic_add = (B.BUILTINS[n] for n in ("tid", "sqrt", "isfinite", "atomic_add"))

_PIVOT_FLOOR = {T.float16: 1.0e-3, T.float32: 1.0e-6, T.float64: 1.0e-12}

_ROLLED = {"max_unroll": 1}  # unrolling the few-iteration loops of the row kernels triples their build time

# slots of update_status: topology mismatches, invalid diagonals, failed local factors, regularized rows
TOPOLOGY, DIAGONAL, FAILED, REGULARIZED = range(4)


def _module(kind: str, *params: Any) -> str:
    """A module of its own for each specialized kernel, named by what it is specialized for: a new row width
    or type builds only its kernel, and the name (so the cache entry) is the same in every process."""
    return ".".join([__name__, kind, *(str(p) if isinstance(p, int) else T.type_name(p) for p in params)])


@cache
def _entry(st: Any) -> Callable:
    """A function reading A's scalar entry (r, c) from BSR storage with b x b blocks (0 where not stored)."""

    @func
    def entry(offsets: array(dtype=T.int32), columns: array(dtype=T.int32), values: array(dtype=st), b: int,
              r: int, c: int) -> st:
        k = bsr_block_index(r // b, c // b, offsets, columns)
        v = st(0.0)
        if k >= 0:
            v = values[(k * b + r % b) * b + c % b]
        return v

    return entry


@cache
def _scale_kernel(st: Any) -> Any:
    entry = _entry(st)

    @kernel(enable_backward=False, module=_module("scale", st))
    def diagonal_scale(offsets: array(dtype=T.int32), columns: array(dtype=T.int32), values: array(dtype=st), b: int,
                       scale: array(dtype=st), status: array(dtype=T.int32), slot: int):
        # scale = diag(A)^-1/2; a diagonal that is not finite and positive gets 0 and is counted in status[slot]
        i = tid()
        d = entry(offsets, columns, values, b, i, i)
        scale[i] = st(0.0)
        if d > st(0.0) and isfinite(d):
            scale[i] = st(1.0) / sqrt(d)
        else:
            atomic_add(status, slot, 1)

    return diagonal_scale


@cache
def _select_kernel(st: Any, width: int, step: int) -> Any:
    entry = _entry(st)
    ints, local = T.vector(width, T.int32), T.vector(width, st)
    square = T.matrix((width, width), st)
    best_ints, best_scores = T.vector(step, T.int32), T.vector(step, st)

    @kernel(enable_backward=False, module=_module("select", st, width, step), module_options=_ROLLED)
    def select(offsets: array(dtype=T.int32), columns: array(dtype=T.int32), values: array(dtype=st), b: int,
               scale: array(dtype=st), tolerance: st, floor: st, support: array(dtype=T.int32),
               factor: array(dtype=st), status: array(dtype=T.int32)):
        # row i's support (growth order) and G's values on it into support/factor[i width:(i + 1) width];
        # status[1] counts rows truncated at a pivot, status[2] rows whose factor is not finite or positive
        i = tid()
        S = ints(-1)
        L = square(st(0.0))  # Cholesky factor of Ah[S, S], lower
        y = local(st(0.0))  # L y = e_0
        z = local(st(0.0))  # L^T z = y
        S[0] = i
        L[0, 0] = st(1.0)
        y[0] = st(1.0)
        z[0] = st(1.0)
        size = 1
        while size < width:
            found = best_ints(-1)
            score = best_scores(st(0.0))
            for p in range(size):
                row = S[p] // b
                for e in range(offsets[row], offsets[row + 1]):
                    for k in range(b):
                        c = columns[e] * b + k
                        seen = c >= i
                        for q in range(size):
                            if S[q] == c:
                                seen = True
                        for q in range(step):
                            if found[q] == c:
                                seen = True
                        if not seen:
                            res = st(0.0)
                            for q in range(size):
                                res += entry(offsets, columns, values, b, c, S[q]) * scale[c] * scale[S[q]] * z[q]
                            res = abs(res)
                            slot = -1
                            for q in range(step):
                                if slot < 0 and (res > score[q] or (res == score[q] and c < found[q])):
                                    slot = q
                            if slot >= 0:  # insert, shifting the lower scores down
                                for qq in range(step - 1 - slot):
                                    q = step - 1 - qq
                                    found[q] = found[q - 1]
                                    score[q] = score[q - 1]
                                found[slot] = c
                                score[slot] = res
            if found[0] < 0:
                break
            energy = z[0]
            truncated = False
            for q in range(step):
                c = found[q]
                if c >= 0 and size < width and not truncated:
                    w = local(st(0.0))  # L w = Ah[S, c]: the new row of L, then its pivot
                    pivot = st(1.0)
                    for p in range(size):
                        a = entry(offsets, columns, values, b, c, S[p]) * scale[c] * scale[S[p]]
                        for t in range(p):
                            a -= L[p, t] * w[t]
                        w[p] = a / L[p, p]
                        pivot -= w[p] * w[p]
                    if pivot <= floor or not isfinite(pivot):
                        atomic_add(status, 1, 1)
                        truncated = True
                    else:
                        S[size] = c
                        a = st(0.0)
                        for p in range(size):
                            L[size, p] = w[p]
                            a -= w[p] * y[p]
                        L[size, size] = sqrt(pivot)
                        y[size] = a / L[size, size]
                        size += 1
            for pp in range(size):
                p = size - 1 - pp
                a = y[p]
                for t in range(p + 1, size):
                    a -= L[t, p] * z[t]
                z[p] = a / L[p, p]
            if truncated or (tolerance > st(0.0) and st(1.0) - energy / z[0] <= tolerance):
                break
        norm = sqrt(z[0])
        valid = True
        for p in range(width):
            support[i * width + p] = -1
            factor[i * width + p] = st(0.0)
            if p < size:
                v = z[p] / norm * scale[S[p]]
                support[i * width + p] = S[p]
                factor[i * width + p] = v
                if not isfinite(v) or (p == 0 and v <= st(0.0)):
                    valid = False
        if not valid:
            atomic_add(status, 2, 1)

    return select


@cache
def _refit_kernel(st: Any, storage: Any, width: int) -> Any:
    entry = _entry(st)
    ints, local = T.vector(width, T.int32), T.vector(width, st)
    square = T.matrix((width, width), st)

    @kernel(enable_backward=False, module=_module("refit", st, storage, width), module_options=_ROLLED)
    def refit(offsets: array(dtype=T.int32), columns: array(dtype=T.int32), values: array(dtype=st), b: int,
              g_offsets: array(dtype=T.int32), g_columns: array(dtype=T.int32), rank: array(dtype=T.int32),
              scale: array(dtype=st), floor: st, regularize: int, out: array(dtype=storage),
              status: array(dtype=T.int32)):
        # G's row i anew on its support, factorized in growth order (rank); status[2] counts rows that failed
        # (with `regularize`, set to their scaled diagonal), status[3] rows whose pivots were raised to floor
        i = tid()
        start = g_offsets[i]
        size = g_offsets[i + 1] - start
        S = ints(-1)
        for p in range(size):
            S[rank[start + p]] = g_columns[start + p]
        L = square(st(0.0))
        valid = True
        raised = False
        for k in range(size):
            for m in range(k + 1):
                a = st(1.0)
                if k != m:
                    a = entry(offsets, columns, values, b, S[k], S[m]) * scale[S[k]] * scale[S[m]]
                for t in range(m):
                    a -= L[k, t] * L[m, t]
                if k == m:
                    if not isfinite(a):
                        valid = False
                        a = st(1.0)
                    elif a <= floor:
                        if regularize != 0:
                            raised = True
                            a = floor
                        else:
                            valid = False
                            a = st(1.0)
                    L[k, k] = sqrt(a)
                else:
                    L[k, m] = a / L[m, m]
        z = local(st(0.0))
        for k in range(size):
            a = st(0.0)
            if k == 0:
                a = st(1.0)
            for t in range(k):
                a -= L[k, t] * z[t]
            z[k] = a / L[k, k]
        for kk in range(size):
            k = size - 1 - kk
            a = z[k]
            for t in range(k + 1, size):
                a -= L[t, k] * z[t]
            z[k] = a / L[k, k]
        norm = sqrt(z[0])
        for p in range(size):
            v = storage(z[rank[start + p]] / norm * scale[g_columns[start + p]])
            out[start + p] = v
            if not isfinite(v) or (p == size - 1 and v <= storage(0.0)):  # sorted storage: the diagonal is last
                valid = False
        if not valid:
            atomic_add(status, 2, 1)
            if regularize != 0:  # the row falls back to its scaled diagonal (1 where that is unusable)
                d = storage(scale[i])
                if not (d > storage(0.0) and isfinite(d)):
                    d = storage(1.0)
                for p in range(size):
                    out[start + p] = storage(0.0)
                out[start + size - 1] = d
        elif raised:
            atomic_add(status, 3, 1)

    return refit


@cache
def _commit_kernel(storage: Any) -> Any:
    @kernel(enable_backward=False, module=_module("commit", storage))
    def commit(candidate: array(dtype=storage), status: array(dtype=T.int32), regularize: int,
               transpose_of: array(dtype=T.int32), values: array(dtype=storage), transposed: array(dtype=storage)):
        # the refit values into G and G^T, unless the update was rejected (the previous factor stays)
        e = tid()
        accepted = status[0] == 0
        if regularize == 0:
            accepted = accepted and status[1] == 0 and status[2] == 0
        if accepted:
            values[e] = candidate[e]
            transposed[transpose_of[e]] = candidate[e]

    return commit


@kernel(enable_backward=False)
def _count_mismatches(a: array(dtype=T.int32), b: array(dtype=T.int32), status: array(dtype=T.int32)):
    i = tid()
    if a[i] != b[i]:
        atomic_add(status, 0, 1)


@cache
def _mv_kernel(storage: Any, st: Any) -> Any:
    @kernel(enable_backward=False, module=_module("mv", storage, st))
    def mv(offsets: array(dtype=T.int32), columns: array(dtype=T.int32), values: array(dtype=storage),
           x: array(dtype=st), y: array(dtype=st), z: array(dtype=st), alpha: st, beta: st):
        # z = alpha G x + beta y for a CSR factor, accumulated in the system's scalar type
        row = tid()
        s = st(0.0)
        if alpha != st(0.0):
            for e in range(offsets[row], offsets[row + 1]):
                s += st(values[e]) * x[columns[e]]
            s = alpha * s
        if beta != st(0.0):
            s += beta * y[row]
        z[row] = s

    return mv


def _pack(n: int, width: int, support: np.ndarray, factor: np.ndarray, storage: Any, device: Any
          ) -> tuple[BsrMatrix, BsrMatrix, array, array]:
    """G and G^T as CSR matrices from the rows' supports in growth order (-1 past each row's end), with each
    entry's growth rank in its row and the index of each G entry in G^T's storage."""
    support = support.reshape(n, width)
    rows, ranks = np.nonzero(support >= 0)
    cols = support[rows, ranks].astype(np.int64)
    order = np.argsort(rows * (n + 1) + cols, kind="stable")
    rows, cols, ranks = rows[order], cols[order], ranks[order]
    vals = factor.reshape(n, width)[rows, ranks] if factor is not None else np.zeros(rows.size)
    counts = np.bincount(rows, minlength=n)
    offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int32)
    t_order = np.argsort(cols * (n + 1) + rows, kind="stable")
    t_offsets = np.concatenate([[0], np.cumsum(np.bincount(cols, minlength=n))]).astype(np.int32)
    transpose_of = np.empty(rows.size, dtype=np.int32)
    transpose_of[t_order] = np.arange(rows.size, dtype=np.int32)
    npt = T.dtype_to_numpy(storage)

    def csr(off: np.ndarray, c: np.ndarray, v: np.ndarray) -> BsrMatrix:
        return BsrMatrix(n, n, array(off, dtype=T.int32, device=device),
                         array(c.astype(np.int32), dtype=T.int32, device=device),
                         array(v.astype(npt), dtype=storage, device=device))

    G = csr(offsets, cols, vals)
    GT = csr(t_offsets, rows[t_order], vals[t_order])
    return G, GT, array(ranks.astype(np.int32), dtype=T.int32, device=device), array(
        transpose_of, dtype=T.int32, device=device)


def _check_int(name: str, v: Any) -> int:
    if isinstance(v, bool) or not isinstance(v, int | np.integer) or not 1 <= v <= 64:
        raise ValueError(f"FSAI: {name} must be an integer in [1, 64], got {v!r}")
    return int(v)


class FSAI(LinearOperator):
    """An adaptive factorized sparse approximate inverse of a symmetric positive definite BsrMatrix `A`
    (square, with square blocks of float16, float32 or float64, both triangles stored): the operator
    G^T G, to pass as `M` to `cg`, `cr`, `bicgstab` or `gmres` (see the module docstring for how G grows).

    `max_row_size` (1..64) caps the entries of a row of G (1 is Jacobi); `max_step_size` (1..64) how
    many entries one growth step adds; `kap_tolerance` (in [0, 1), 0: off) stops a row's growth when its
    local energy improves by no more; `pivot_floor` (in (0, 1), default 1e-3, 1e-6, 1e-12 by precision)
    truncates a row before a smaller pivot; `factor_dtype` stores G in A's scalar type or float32 for a
    float64 A. `reuse_pattern` keeps what `update` needs to refit the values for new values of A on
    the same supports; there `regularize_refit` raises small pivots to the floor (and sets a row that
    still fails to its scaled diagonal) instead of rejecting the update, and `validate_topology` checks
    that A's sparsity is the original's. `defer_pattern` (with `reuse_pattern`) reads only A's
    topology here: G is the identity until the first successful `update` selects the supports.

    Attributes: `G` and `GT` (CSR BsrMatrix factor and its transpose), `truncated_rows` (rows stopped
    at a pivot; None with `defer_pattern`), `source` (the matrix of the last construction or update),
    `update_status` (int32 array: topology mismatches, invalid diagonals, failed rows, regularized rows
    of the last update; None without `reuse_pattern`), `pattern_ready` and `pattern_status` (with
    `defer_pattern`: 1 once the supports are chosen; truncated rows at index 1, rows with a bad factor at
    index 2, of that selection).

    Raises TypeError for an unsupported scalar type, ValueError for a bad shape or option, a missing,
    non-positive or non-finite diagonal, or a factor that is not finite with a positive diagonal."""

    def __init__(self, A: BsrMatrix, max_row_size: int = 8, kap_tolerance: float = 1.0e-3,
                 pivot_floor: float | None = None, factor_dtype: Any = None, reuse_pattern: bool = False,
                 max_step_size: int = 1, regularize_refit: bool = False, validate_topology: bool = True,
                 defer_pattern: bool = False) -> None:
        if not isinstance(A, BsrMatrix):
            raise ValueError(f"FSAI: A must be a square loomwork.sparse BsrMatrix with square blocks, got "
                             f"{type(A).__name__}")
        if A.shape[0] != A.shape[1] or A.block_shape[0] != A.block_shape[1]:
            raise ValueError(f"FSAI: A must be square with square blocks, got shape {A.shape} with "
                             f"{A.block_shape[0]}x{A.block_shape[1]} blocks")
        if A.row_counts is not None:  # padded row storage: the factor is built from a compact copy
            if reuse_pattern:
                raise ValueError("FSAI: reuse_pattern needs A with compact rows (row_counts None), got padded row "
                                 "storage; compact it first with loomwork.sparse.bsr_compress(A)")
            A = bsr_copy(A)
        st = A.scalar_type
        if st not in _PIVOT_FLOOR:
            raise TypeError(f"FSAI: A's scalars must be float16, float32 or float64, got {T.type_name(st)}")
        width = _check_int("max_row_size", max_row_size)
        step = _check_int("max_step_size", max_step_size)
        if not 0.0 <= kap_tolerance < 1.0:
            raise ValueError(f"FSAI: kap_tolerance must be in [0, 1), got {kap_tolerance!r}")
        floor = _PIVOT_FLOOR[st] if pivot_floor is None else pivot_floor
        if not 0.0 < floor < 1.0:
            raise ValueError(f"FSAI: pivot_floor must be in (0, 1), got {pivot_floor!r}")
        storage = st if factor_dtype is None else T.normalize_dtype(factor_dtype)
        if storage is not st and not (st is T.float64 and storage is T.float32):
            raise ValueError(f"FSAI: factor_dtype must be A's scalar type ({T.type_name(st)}) or float32 for a "
                             f"float64 A, got {T.type_name(storage)}")
        if defer_pattern and not reuse_pattern:
            raise ValueError("FSAI: defer_pattern requires reuse_pattern=True")
        super().__init__(A.shape, A.dtype, A.device, self._apply)
        n, dev = A.shape[0], A.device
        self.max_row_size, self.max_step_size, self.factor_dtype = width, step, storage
        self.source = A
        self._tolerance, self._floor, self._regularize = kap_tolerance, floor, bool(regularize_refit)
        self._tmp = empty(n, dtype=st, device=dev)
        self.pattern_ready = self.pattern_status = self.update_status = self.truncated_rows = None
        self._reuse = bool(reuse_pattern)
        if reuse_pattern:
            self.update_status = zeros(4, dtype=T.int32, device=dev)
            self._topology = None
            stored = int(A.offsets.numpy()[A.nrow])  # A.nnz is only an upper bound
            if validate_topology:
                self._topology = (clone(A.offsets[:A.nrow + 1]), clone(A.columns[:stored]))
            self._signature = (A.shape, A.dtype, A.device, stored)
        if defer_pattern:
            self.pattern_ready = zeros(1, dtype=T.int32, device=dev)
            self.pattern_status = zeros(3, dtype=T.int32, device=dev)
            diagonal = np.arange(n)
            support = np.full((n, width), -1, dtype=np.int32)
            support[:, 0] = diagonal
            self.G, self.GT, self._rank, self._transpose_of = _pack(n, width, support, np.ones(n * width), storage,
                                                                    dev)
            return
        status = zeros(3, dtype=T.int32, device=dev)
        support, factor = self._select(A, status, status, 0)
        bad_diagonals, truncated, bad_rows = (int(v) for v in status.numpy())
        if bad_diagonals:
            raise ValueError(f"FSAI: A needs finite positive diagonals ({bad_diagonals} rows have none)")
        if bad_rows:
            raise ValueError(f"FSAI: the factor lost finite entries or a positive diagonal in {bad_rows} rows")
        self.truncated_rows = truncated
        factor = factor.numpy()
        if storage is not st:
            stored = factor.astype(T.dtype_to_numpy(storage))
            diag = support.numpy().reshape(n, width)[:, 0]
            if not np.isfinite(stored).all() or (stored.reshape(n, width)[:, 0][diag >= 0] <= 0).any():
                raise ValueError(f"FSAI: the factor in factor_dtype={T.type_name(storage)} lost finite entries or a "
                                 "positive diagonal")
        self.G, self.GT, self._rank, self._transpose_of = _pack(n, width, support.numpy(), factor, storage, dev)

    def _select(self, A: BsrMatrix, scale_status: array, status: array, scale_slot: int) -> tuple[array, array]:
        """Scale A's diagonal (bad diagonals counted at scale_status[scale_slot]) and choose every row's
        support; returns the supports and the factor's values on them, rows of max_row_size."""
        st, n, dev, width, b = A.scalar_type, A.shape[0], A.device, self.max_row_size, A.block_shape[0]
        topology = [A.offsets, A.columns, scalar_view(A.values), b]
        self._scale = empty(n, dtype=st, device=dev)
        launch(_scale_kernel(st), n, inputs=[*topology, self._scale, scale_status, scale_slot], device=dev)
        support = empty(n * width, dtype=T.int32, device=dev)
        factor = empty(n * width, dtype=st, device=dev)
        launch(_select_kernel(st, width, self.max_step_size), n,
               inputs=[*topology, self._scale, st(self._tolerance), st(self._floor), support, factor, status],
               device=dev)
        return support, factor

    def update(self, A: BsrMatrix | None = None) -> "FSAI":
        """Refit G for new values of A (default: `source`, whose values changed) on the supports chosen at
        construction (with `defer_pattern`, the first successful update chooses them). A rejected update
        leaves the previous factor. Returns self.

        Raises ValueError without `reuse_pattern`, for a matrix of another shape, type, device or number
        of blocks, and (outside graph capture) for changed sparsity (with `validate_topology`) or, without
        `regularize_refit`, a diagonal or local factor that is not positive definite."""
        if not self._reuse:
            raise ValueError("FSAI.update: construct FSAI with reuse_pattern=True to update it")
        A = self.source if A is None else A
        if not isinstance(A, BsrMatrix):
            raise ValueError(f"FSAI.update: A must be a BSR matrix (loomwork.sparse BsrMatrix), got "
                             f"{type(A).__name__}")
        if A.row_counts is not None:
            raise ValueError("FSAI.update: A must have compact rows (row_counts None), got padded row storage; "
                             "compact it first with loomwork.sparse.bsr_compress(A)")
        if (A.shape, A.dtype, A.device) != self._signature[:3] or A.columns.shape[0] < self._signature[3]:
            raise ValueError(f"FSAI.update: A must have the original's shape, dtype, device (and room for its "
                             f"blocks); got ({A.shape}, {T.type_name(A.dtype)} blocks, {A.columns.shape[0]} slots, on "
                             f"{A.device}), the original has ({self._signature[0]}, "
                             f"{T.type_name(self._signature[1])} blocks, {self._signature[3]} stored, on "
                             f"{self._signature[2]})")
        st, n, dev, status = A.scalar_type, A.shape[0], A.device, self.update_status
        capturing = dev.is_capturing
        status.zero_()
        if self._topology is not None:
            for a, b in zip((A.offsets, A.columns), self._topology, strict=True):
                if b.size:
                    launch(_count_mismatches, b.size, inputs=[a, b, status], device=dev)
        topology = [A.offsets, A.columns, scalar_view(A.values), A.block_shape[0]]
        G, GT, rank, transpose_of = self.G, self.GT, self._rank, self._transpose_of
        if self.pattern_ready is not None and not self.pattern_ready.numpy()[0]:
            if capturing:
                raise RuntimeError("FSAI.update: with defer_pattern the first update chooses the supports on the "
                                   "host; run it once before capturing a graph")
            self.pattern_status.zero_()
            support, _ = self._select(A, status, self.pattern_status, DIAGONAL)
            G, GT, rank, transpose_of = _pack(n, self.max_row_size, support.numpy(), None, self.factor_dtype, dev)
        else:
            launch(_scale_kernel(st), n, inputs=[*topology, self._scale, status, DIAGONAL], device=dev)
        candidate = empty(G.nnz, dtype=self.factor_dtype, device=dev)
        launch(_refit_kernel(st, self.factor_dtype, self.max_row_size), n,
               inputs=[*topology, G.offsets, G.columns, rank, self._scale, st(self._floor), int(self._regularize),
                       candidate, status], device=dev)
        launch(_commit_kernel(self.factor_dtype), G.nnz,
               inputs=[candidate, status, int(self._regularize), transpose_of, G.values, GT.values], device=dev)
        if not capturing:
            topology_bad, diagonal_bad, failed, _ = (int(v) for v in status.numpy())
            accepted = not topology_bad and (self._regularize or not (diagonal_bad or failed))
            if accepted and G is not self.G:
                self.G, self.GT, self._rank, self._transpose_of = G, GT, rank, transpose_of
                self.pattern_ready.fill_(1)
            if topology_bad:
                raise ValueError(f"FSAI.update: A's sparsity differs from the original's in {topology_bad} places; "
                                 "construct a new FSAI for a new sparsity")
            if not accepted:
                raise ValueError(f"FSAI.update: refit needs finite positive diagonals ({diagonal_bad} bad) and SPD "
                                 f"local systems ({failed} rows failed); the previous factor is kept")
        self.source = A
        return self

    def _apply(self, x: array, y: array, z: array, alpha: float, beta: float) -> None:
        st, n = self.scalar_type, self.shape[0]
        xs, ys, zs = matvec_views("FSAI", st, n, x, y, z)
        mv = _mv_kernel(self.factor_dtype, st)
        dev = self.device
        if alpha != 0.0:  # tmp = G x first: x is read whole before z is written, so they may alias
            launch(mv, n, inputs=[self.G.offsets, self.G.columns, self.G.values, xs, self._tmp, self._tmp, st(1.0),
                                  st(0.0)], device=dev)
        launch(mv, n, inputs=[self.GT.offsets, self.GT.columns, self.GT.values, self._tmp, ys, zs, st(alpha),
                              st(beta)], device=dev)
