"""The kernels behind `loomwork.sparse` (sparse.py) and the kernel functions it exports.

Values are handled as flat scalar arrays: block `k` of a matrix with `br` x `bc` blocks holds scalars
`k * br * bc .. (k + 1) * br * bc`, row-major inside the block. Every kernel that reads a matrix's rows
takes `offsets` and `row_counts`; a null `row_counts` means compact storage (row r's blocks end where row
r + 1's begin), otherwise row r's active blocks are `offsets[r] .. offsets[r] + row_counts[r]`.

`_gather` moves values between layouts (triplets to blocks, copies, transposes, sums): one thread per
destination scalar sums its contributions, in a fixed order, so results are deterministic, a single
contribution is copied bit for bit, and the adjoint sends each destination gradient back to its sources.
"""

from __future__ import annotations

from loomwork.kernels import builtins as B
from loomwork.kernels import types as T
from loomwork.kernels.array import array
from loomwork.kernels.functions import func
from loomwork.kernels.module import kernel

from .components import cast_like

tid, lower_bound, atomic_add = B.BUILTINS["tid"], B.BUILTINS["lower_bound"], B.BUILTINS["atomic_add"]


@func
def _row_end(offsets: array(dtype=T.int32), row_counts: array(dtype=T.int32), row: int) -> int:
    if row_counts:
        return offsets[row] + row_counts[row]
    return offsets[row + 1]


@func
def bsr_row_index(offsets: array(dtype=T.int32), row_count: int, block_index: int) -> int:
    """The block row whose storage range `offsets[row]:offsets[row + 1]` holds block `block_index` (-1 when
    none does)."""
    if block_index < 0 or block_index >= offsets[row_count]:
        return -1
    return lower_bound(offsets, 0, row_count + 1, block_index + 1) - 1


@func
def bsr_row_index(offsets: array(dtype=T.int32), row_count: int, block_index: int,  # noqa: F811 - an overload
                  row_counts: array(dtype=T.int32)) -> int:
    """The block row whose active range `offsets[row]:offsets[row] + row_counts[row]` holds block
    `block_index` (-1 when none does, as for slack storage); a null `row_counts` means compact rows."""
    row = bsr_row_index(offsets, row_count, block_index)
    if row >= 0 and block_index >= _row_end(offsets, row_counts, row):
        return -1
    return row


@func
def bsr_block_index(row: int, col: int, bsr_offsets: array(dtype=T.int32), bsr_columns: array(dtype=T.int32)) -> int:
    """The index of the stored block at (row, col) in block coordinates, or -1 when there is none (the
    columns of each row's storage range must be sorted)."""
    if row < 0:
        return -1
    end = bsr_offsets[row + 1]
    k = lower_bound(bsr_columns, bsr_offsets[row], end, col)
    if k < end:
        if bsr_columns[k] == col:
            return k
    return -1


@func
def bsr_block_index(row: int, col: int, bsr_offsets: array(dtype=T.int32),  # noqa: F811 - an overload
                    bsr_columns: array(dtype=T.int32), bsr_row_counts: array(dtype=T.int32)) -> int:
    """The index of the active block at (row, col), searching `offsets[row]:offsets[row] + row_counts[row]`
    only (a null `bsr_row_counts` means compact rows); -1 when there is none."""
    if row < 0:
        return -1
    end = _row_end(bsr_offsets, bsr_row_counts, row)
    k = lower_bound(bsr_columns, bsr_offsets[row], end, col)
    if k < end:
        if bsr_columns[k] == col:
            return k
    return -1


@kernel
def _gather(dst: array(dtype=T.Float), dst_index: array(dtype=T.int32), starts: array(dtype=T.int32),
            src_index: array(dtype=T.int32), a: array(dtype=T.Float), b: array(dtype=T.Float), split: int,
            alpha: T.Float, beta: T.Float):
    # dst[dst_index[t]] = sum of alpha * a[i] (i < split) and beta * b[i - split] over its contributions i
    t = tid()
    beg = starts[t]
    s = cast_like(0.0, alpha)
    for k in range(beg, starts[t + 1]):
        i = src_index[k]
        v = cast_like(0.0, alpha)
        if i < split:
            v = alpha * cast_like(a[i], alpha)
        else:
            v = beta * cast_like(b[i - split], beta)
        if k == beg:
            s = v
        else:
            s = s + v
    dst[dst_index[t]] = s  # alpha and beta have dst's scalar type


@kernel
def _scale(values: array(dtype=T.Float), alpha: T.Float):
    i = tid()
    values[i] = alpha * values[i]


@kernel(enable_backward=False)
def _mv(offsets: array(dtype=T.int32), row_counts: array(dtype=T.int32), columns: array(dtype=T.int32),
        values: array(dtype=T.Float), x: array(dtype=T.Float), y: array(dtype=T.Float), alpha: T.Float,
        beta: T.Float, br: int, bc: int):
    r = tid()  # one scalar row of y
    row = r // br
    i = r - row * br
    s = cast_like(0.0, alpha)
    if alpha != 0.0:
        for k in range(offsets[row], _row_end(offsets, row_counts, row)):
            col = columns[k]
            base = (k * br + i) * bc
            for j in range(bc):
                s = s + values[base + j] * x[col * bc + j]
        s = alpha * s
    if beta != 0.0:
        s = s + beta * y[r]
    y[r] = s


@kernel(enable_backward=False)
def _mv_transpose(nrow: int, offsets: array(dtype=T.int32), row_counts: array(dtype=T.int32),
                  columns: array(dtype=T.int32), values: array(dtype=T.Float), x: array(dtype=T.Float),
                  y: array(dtype=T.Float), alpha: T.Float, br: int, bc: int):
    t = tid()  # one column j of one stored block k: adds alpha * block[:, j] . x[row] to y[col * bc + j]
    k = t // bc
    j = t - k * bc
    row = bsr_row_index(offsets, nrow, k, row_counts)
    if row >= 0:
        s = cast_like(0.0, alpha)
        for i in range(br):
            s = s + values[(k * br + i) * bc + j] * x[row * br + i]
        atomic_add(y, columns[k] * bc + j, alpha * s)


@kernel(enable_backward=False)
def _mm(xv: array(dtype=T.Float), yv: array(dtype=T.Float), pair_starts: array(dtype=T.int32),
        pair_x: array(dtype=T.int32), pair_y: array(dtype=T.int32), old: array(dtype=T.Float),
        old_slot: array(dtype=T.int32), dst_slot: array(dtype=T.int32), dst: array(dtype=T.Float), alpha: T.Float,
        beta: T.Float, br: int, bk: int, bc: int):
    # one scalar (i, j) of result block b: alpha * sum over its block pairs of x_block @ y_block, + beta * old
    t = tid()
    size = br * bc
    b = t // size
    e = t - b * size
    i = e // bc
    j = e - i * bc
    s = cast_like(0.0, alpha)
    for p in range(pair_starts[b], pair_starts[b + 1]):
        xb = (pair_x[p] * br + i) * bk
        yb = pair_y[p] * bk * bc + j
        for k in range(bk):
            s = s + xv[xb + k] * yv[yb + k * bc]
    s = alpha * s
    o = old_slot[b]
    if o >= 0:
        s = s + beta * old[o * size + e]
    dst[dst_slot[b] * size + e] = s


@kernel(enable_backward=False)
def _get_diag(offsets: array(dtype=T.int32), row_counts: array(dtype=T.int32), columns: array(dtype=T.int32),
              values: array(dtype=T.Float), out: array(dtype=T.Float), size: int, scale: T.Float):
    row = tid()
    k = bsr_block_index(row, row, offsets, columns, row_counts)
    for j in range(size):
        v = cast_like(0.0, scale)
        if k >= 0:
            v = scale * values[k * size + j]
        out[row * size + j] = v
