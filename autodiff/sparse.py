"""Block sparse row (BSR) matrices (`loomwork.sparse`, Warp's `warp.sparse` names): a matrix of
`nrow` x `ncol` blocks, each a scalar (CSR) or a fixed-size matrix type, stored row by row as
`offsets` (nrow + 1 int32: row r's blocks are offsets[r]:offsets[r+1]), `columns` (the block column of
each stored block, sorted within a row) and `values` (the blocks).

`bsr_set_from_triplets` builds the topology on the host with NumPy (sort, merge of duplicates, row
counts), then sums the triplets' values into their blocks with a kernel; `bsr_mv` is a kernel with one
thread per scalar row, `bsr_get_diag` one thread per diagonal block. `bsr_row_index` and
`bsr_block_index` are functions kernels can call.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from loomwork.kernels import builtins as B
from loomwork.kernels import types as T
from loomwork.kernels.array import array, empty, zeros
from loomwork.kernels.device import get_device
from loomwork.kernels.functions import func
from loomwork.kernels.launch import launch
from loomwork.kernels.module import kernel

from .components import cast_like, scalar_count, scalar_view

tid, lower_bound, atomic_add = B.BUILTINS["tid"], B.BUILTINS["lower_bound"], B.BUILTINS["atomic_add"]


class BsrMatrix:
    """A BSR matrix; made by `bsr_zeros`, `bsr_from_triplets` (see the module docstring for the layout)."""

    def __init__(self, nrow: int, ncol: int, offsets: array, columns: array, values: array) -> None:
        self.nrow, self.ncol = nrow, ncol
        self.offsets, self.columns, self.values = offsets, columns, values
        self.nnz = int(values.shape[0])

    @property
    def dtype(self) -> Any:
        """The type of one block (a scalar type for CSR matrices)."""
        return self.values.dtype

    @property
    def scalar_type(self) -> Any:
        return T.elem_scalar(self.values.dtype)

    @property
    def block_shape(self) -> tuple[int, int]:
        return tuple(getattr(self.values.dtype, "_shape_", (1, 1)))

    @property
    def block_size(self) -> int:
        return scalar_count(self.values.dtype)

    @property
    def shape(self) -> tuple[int, int]:
        """The matrix's shape in scalars."""
        br, bc = self.block_shape
        return (self.nrow * br, self.ncol * bc)

    @property
    def device(self) -> Any:
        return self.values.device

    @property
    def row_counts(self) -> None:
        """None: the storage is always compact (row r's blocks end where row r + 1's begin)."""
        return None

    @property
    def requires_grad(self) -> bool:
        return self.values.requires_grad

    def nnz_sync(self) -> int:
        """The number of stored blocks (exact here: the topology is built on the host)."""
        return self.nnz

    def uncompress_rows(self) -> array:
        """The block row of each stored block (int32, length nnz)."""
        counts = np.diff(self.offsets.numpy()[: self.nrow + 1])
        return array(np.repeat(np.arange(self.nrow, dtype=np.int32), counts), dtype=T.int32, device=self.device)

    def __matmul__(self, x: array) -> array:
        return bsr_mv(self, x)


def _block_type(block_type: Any) -> Any:
    t = T.normalize_dtype(block_type)
    if not (T.is_float(t) or (T.is_matrix(t) and T.elem_scalar(t).is_float)):
        raise TypeError(f"BSR blocks must be a float scalar or matrix type, got {T.type_name(t)}")
    return t


def bsr_zeros(rows_of_blocks: int, cols_of_blocks: int, block_type: Any, device: Any = None) -> BsrMatrix:
    """An empty (all-zero) BSR matrix of `rows_of_blocks` x `cols_of_blocks` blocks of `block_type`."""
    if rows_of_blocks < 0 or cols_of_blocks < 0:
        raise ValueError(f"bsr_zeros: negative block counts ({rows_of_blocks}, {cols_of_blocks})")
    dev = get_device(device)
    return BsrMatrix(int(rows_of_blocks), int(cols_of_blocks), zeros(rows_of_blocks + 1, dtype=T.int32, device=dev),
                     zeros(0, dtype=T.int32, device=dev), zeros(0, dtype=_block_type(block_type), device=dev))


def bsr_set_zero(bsr: BsrMatrix, rows_of_blocks: int | None = None, cols_of_blocks: int | None = None) -> None:
    """Remove every block of `bsr` (and resize it, when given new block counts)."""
    z = bsr_zeros(bsr.nrow if rows_of_blocks is None else rows_of_blocks,
                  bsr.ncol if cols_of_blocks is None else cols_of_blocks, bsr.dtype, bsr.device)
    bsr.__dict__.update(z.__dict__)


@kernel(enable_backward=False)
def _scatter_blocks(src: array(dtype=T.Float), block_of: array(dtype=T.int32), dst: array(dtype=T.Float),
                    size: int):
    # one thread per scalar of the triplets' values: added into the block its triplet maps to
    t = tid()
    b = block_of[t // size]
    if b >= 0:
        atomic_add(dst, b * size + t % size, src[t])


def _host_ints(a: Any, what: str) -> np.ndarray:
    v = a.numpy() if isinstance(a, array) else np.asarray(a)
    if v.ndim != 1 or not np.issubdtype(v.dtype, np.integer):
        raise TypeError(f"bsr_set_from_triplets: {what} must be a 1-D integer array, got {v.dtype} of shape {v.shape}")
    return v.astype(np.int64)


def bsr_set_from_triplets(dest: BsrMatrix, rows: Any, columns: Any, values: array | None = None,
                          count: Any = None, prune_numerical_zeros: bool = True) -> None:
    """Make `dest` the sum of the blocks given as (row, column, value) triplets: duplicates add up, triplets
    outside the matrix are ignored, and so are blocks whose values are all zero when
    `prune_numerical_zeros`. `values` holds blocks of dest's type (or a (n, rows, cols) array of its
    scalars); None leaves the blocks zero. `count` (a 1-element array or an int) uses only the first
    triplets."""
    r, c = _host_ints(rows, "rows"), _host_ints(columns, "columns")
    n = min(r.size, c.size)
    if count is not None:
        n = min(n, int(count.numpy()[0]) if isinstance(count, array) else int(count))
    r, c = r[:n], c[:n]
    flat = None
    if values is not None:
        if not isinstance(values, array) or T.elem_scalar(values.dtype) != dest.scalar_type:
            raise TypeError(f"bsr_set_from_triplets: values must be a wp.array of {T.type_name(dest.dtype)} blocks "
                            f"(or of {T.type_name(dest.scalar_type)} scalars)")
        flat = scalar_view(values).flatten()
        if flat.size < n * dest.block_size:
            raise ValueError(f"bsr_set_from_triplets: {n} triplets need {n * dest.block_size} values, got {flat.size}")
    keep = (r >= 0) & (r < dest.nrow) & (c >= 0) & (c < dest.ncol)
    if prune_numerical_zeros and flat is not None:
        keep &= flat.numpy()[: n * dest.block_size].reshape(n, dest.block_size).any(axis=1)
    key = r * dest.ncol + c
    blocks, where = np.unique(key[keep], return_inverse=True)  # sorted by row, then column
    block_of = np.full(n, -1, dtype=np.int32)
    block_of[keep] = where
    dev = dest.device
    offsets = np.zeros(dest.nrow + 1, dtype=np.int32)
    np.cumsum(np.bincount(blocks // max(dest.ncol, 1), minlength=dest.nrow), out=offsets[1:])
    dest.offsets = array(offsets, dtype=T.int32, device=dev)
    dest.columns = array((blocks % max(dest.ncol, 1)).astype(np.int32), dtype=T.int32, device=dev)
    dest.values = zeros(blocks.size, dtype=dest.dtype, device=dev)
    dest.nnz = int(blocks.size)
    if flat is not None and n and blocks.size:
        size = dest.block_size
        launch(_scatter_blocks, n * size, inputs=[flat[: n * size], array(block_of, dtype=T.int32, device=dev),
                                                 scalar_view(dest.values), size], device=dev)


def bsr_from_triplets(rows_of_blocks: int, cols_of_blocks: int, rows: Any, columns: Any, values: array,
                      prune_numerical_zeros: bool = True) -> BsrMatrix:
    """A new BSR matrix from triplets (see `bsr_set_from_triplets`); its block type is that of `values`: a 1-D
    array of scalars makes a CSR matrix, a (n, rows, cols) array of scalars blocks of rows x cols."""
    block = values.dtype
    if isinstance(values, array) and values.ndim == 3 and not T.is_composite(values.dtype):
        block = T.matrix(tuple(values.shape[1:]), values.dtype)
    A = bsr_zeros(rows_of_blocks, cols_of_blocks, block, values.device)
    bsr_set_from_triplets(A, rows, columns, values, prune_numerical_zeros=prune_numerical_zeros)
    return A


@kernel(enable_backward=False)
def _mv(offsets: array(dtype=T.int32), columns: array(dtype=T.int32), values: array(dtype=T.Float),
        x: array(dtype=T.Float), y: array(dtype=T.Float), alpha: T.Float, beta: T.Float, br: int, bc: int):
    r = tid()  # one scalar row
    row = r // br
    i = r - row * br
    s = cast_like(0.0, alpha)
    if alpha != 0.0:
        for k in range(offsets[row], offsets[row + 1]):
            col = columns[k]
            for j in range(bc):
                s = s + values[(k * br + i) * bc + j] * x[col * bc + j]
        s = alpha * s
    if beta != 0.0:
        s = s + beta * y[r]
    y[r] = s


def _vector_type(n: int, st: Any) -> Any:
    return st if n == 1 else T.vector(n, st)


def bsr_mv(A: BsrMatrix, x: array, y: array | None = None, alpha: float = 1.0, beta: float = 0.0) -> array:
    """y = alpha * A @ x + beta * y, returned (a new y when none is given; then beta is ignored). x and y are
    1-D arrays of the block rows/columns: scalars for 1 x 1 blocks, else vectors of the block's extents (or
    scalars, as many as A's scalar columns/rows). x and y may be the same array."""
    st = A.scalar_type
    br, bc = A.block_shape
    if y is None:
        y = empty(A.nrow, dtype=_vector_type(br, st), device=A.device)
        beta = 0.0
    for v, n, what in ((x, A.shape[1], "x"), (y, A.shape[0], "y")):
        if not isinstance(v, array) or T.elem_scalar(v.dtype) != st or v.size * scalar_count(v.dtype) != n:
            raise ValueError(f"bsr_mv: {what} must be a wp.array of {n} {T.type_name(st)} values (as blocks or "
                             f"scalars) for a matrix of shape {A.shape}, got {v!r}")
    xs, ys = scalar_view(x), scalar_view(y)
    if x.ptr is not None and x.ptr == y.ptr:  # aliased: read a copy of x
        xs = scalar_view(x.clone(requires_grad=False))
    launch(_mv, A.shape[0], inputs=[A.offsets, A.columns, scalar_view(A.values), xs, ys, st(alpha), st(beta), br, bc],
           device=A.device)
    return y


@func
def bsr_row_index(offsets: array(dtype=T.int32), row_count: int, block_index: int) -> int:
    """The block row that stored block `block_index` belongs to (-1 when it is past the last row's end)."""
    if block_index < 0 or block_index >= offsets[row_count]:
        return -1
    return lower_bound(offsets, 0, row_count + 1, block_index + 1) - 1


@func
def bsr_block_index(row: int, col: int, bsr_offsets: array(dtype=T.int32), bsr_columns: array(dtype=T.int32)) -> int:
    """The index of the stored block at (row, col) in block coordinates, or -1 when there is none."""
    if row < 0:
        return -1
    beg = bsr_offsets[row]
    end = bsr_offsets[row + 1]
    k = lower_bound(bsr_columns, beg, end, col)
    if k < end:
        if bsr_columns[k] == col:
            return k
    return -1


@kernel(enable_backward=False)
def _get_diag(offsets: array(dtype=T.int32), columns: array(dtype=T.int32), values: array(dtype=T.Float),
              out: array(dtype=T.Float), size: int):
    row = tid()
    k = bsr_block_index(row, row, offsets, columns)
    for j in range(size):
        out[row * size + j] = cast_like(0.0, out[row * size + j])
        if k >= 0:
            out[row * size + j] = values[k * size + j]


def bsr_get_diag(A: BsrMatrix, out: array | None = None) -> array:
    """The diagonal blocks of `A` (min(nrow, ncol) of them, zero where none is stored), in `out` when given (an
    array of A's block type with at least that many entries) or a new array."""
    if not isinstance(A, BsrMatrix):
        raise TypeError(f"bsr_get_diag: A must be a BsrMatrix, got {type(A).__name__}")
    n = min(A.nrow, A.ncol)
    if out is None:
        out = empty(n, dtype=A.dtype, device=A.device)
    elif not isinstance(out, array) or out.dtype != A.dtype or out.ndim != 1 or out.shape[0] < n:
        raise ValueError(f"bsr_get_diag: out must be a 1-D array of at least {n} {T.type_name(A.dtype)} blocks, got "
                         f"{out!r}")
    elif out.device != A.device:
        raise ValueError(f"bsr_get_diag: out is on {out.device}, A on {A.device}")
    if n:
        launch(_get_diag, n, inputs=[A.offsets, A.columns, scalar_view(A.values), scalar_view(out), A.block_size],
               device=A.device)
    return out


def bsr_identity(rows_of_blocks: int, block_type: Any, device: Any = None) -> BsrMatrix:
    """The identity as a square BSR matrix of `rows_of_blocks` blocks of the square `block_type`."""
    t = _block_type(block_type)
    b = getattr(t, "_shape_", (1, 1))
    if b[0] != b[1]:
        raise ValueError(f"bsr_identity: block_type must be square, got {T.type_name(t)}")
    n, dev = int(rows_of_blocks), get_device(device)
    eye = np.broadcast_to(np.eye(b[0]), (n, *b)) if b[0] > 1 else np.ones(n)
    idx = np.arange(n, dtype=np.int32)
    return BsrMatrix(n, n, array(np.arange(n + 1, dtype=np.int32), dtype=T.int32, device=dev),
                     array(idx, dtype=T.int32, device=dev),
                     array(np.ascontiguousarray(eye).astype(T.dtype_to_numpy(T.elem_scalar(t))), dtype=t, device=dev))


def bsr_copy(A: BsrMatrix, scalar_type: Any = None, block_shape: tuple[int, int] | None = None,
             structure_only: bool = False) -> BsrMatrix:
    """A copy of `A`, with another scalar type and/or block shape (each extent a multiple or a divider of A's,
    dividing A's shape): every stored block's scalars land in the new blocks covering them, which are
    stored even where zero. `structure_only` leaves the new values zero. Built on the host."""
    if not isinstance(A, BsrMatrix):
        raise TypeError(f"bsr_copy: A must be a BsrMatrix, got {type(A).__name__}")
    st = A.scalar_type if scalar_type is None else T.normalize_dtype(scalar_type)
    (br, bc), (nr, nc) = A.block_shape, tuple(block_shape or A.block_shape)
    for old, new, n in ((br, nr, A.shape[0]), (bc, nc, A.shape[1])):
        if new < 1 or (old % new and new % old) or n % new:
            raise ValueError(f"bsr_copy: block_shape {(nr, nc)} must divide A's shape {A.shape}, each extent a "
                             f"multiple or a divider of A's blocks' {A.block_shape}")
    t = _block_type(st if (nr, nc) == (1, 1) else T.matrix((nr, nc), st))
    rows = np.repeat(np.arange(A.nrow), np.diff(A.offsets.numpy()[: A.nrow + 1]))
    r = (rows[:, None, None] * br + np.arange(br)[None, :, None]).repeat(bc, axis=2).ravel()
    c = (A.columns.numpy()[: A.nnz, None, None] * bc + np.arange(bc)[None, None, :]).repeat(br, axis=1).ravel()
    ncol = A.shape[1] // nc
    blocks, where = np.unique((r // nr) * ncol + c // nc, return_inverse=True)
    nrow, dev = A.shape[0] // nr, A.device
    values = np.zeros((blocks.size, nr, nc), dtype=T.dtype_to_numpy(st))
    if not structure_only:
        values[where, r % nr, c % nc] = A.values.numpy().reshape(-1)[: r.size]
    offsets = np.zeros(nrow + 1, dtype=np.int32)
    np.cumsum(np.bincount(blocks // ncol, minlength=nrow), out=offsets[1:])
    return BsrMatrix(nrow, ncol, array(offsets, dtype=T.int32, device=dev),
                     array((blocks % ncol).astype(np.int32), dtype=T.int32, device=dev),
                     array(values.reshape(-1) if (nr, nc) == (1, 1) else values, dtype=t, device=dev))
