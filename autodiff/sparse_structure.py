"""The structure side of `loomwork.sparse` (sparse.py), on the host with NumPy: which blocks a matrix
holds (`_active_blocks`), where a set of blocks goes in a destination under a topology policy
(`_place`), and how source scalars land in destination blocks (`_project`, `_assemble`); the values then
move on the device through the `_gather` kernel (sparse_kernels.py). Also the product structure of
`bsr_mm` (`_mm_structure`).

Matrices are duck-typed `BsrMatrix` objects (nrow, ncol, nnz, offsets, row_counts, columns, values).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from loomwork.kernels import types as T
from loomwork.kernels.array import array, zeros
from loomwork.kernels.launch import launch

from .sparse_kernels import _gather

if TYPE_CHECKING:
    from .sparse import BsrMatrix

BSR_STATUS_SUCCESS = 0
"""Status code of a sparse operation that succeeded."""
BSR_STATUS_ROW_CAPACITY_EXCEEDED = 1
"""Status code of a padded operation that found a row's capacity too small (the row was truncated)."""
_I32 = T.int32



def _upload(dst: array, host: np.ndarray, start: int = 0) -> None:
    if host.size:
        dst[start:start + host.size].assign(np.ascontiguousarray(host, dtype=np.int32))


def _storage_end(A: BsrMatrix) -> int:
    return int(A.offsets[A.nrow:A.nrow + 1].numpy()[0])


def _row_ranges(A: BsrMatrix) -> tuple[np.ndarray, np.ndarray]:
    off = A.offsets.numpy()[:A.nrow + 1].astype(np.int64)
    starts = off[:-1]
    ends = off[1:] if A.row_counts is None else starts + A.row_counts.numpy()[:A.nrow]
    return starts, np.maximum(ends, starts)


def _active_slots(A: BsrMatrix) -> tuple[np.ndarray, np.ndarray]:
    """The storage slot and row of every active block, row by row."""
    starts, ends = _row_ranges(A)
    counts = ends - starts
    rows = np.repeat(np.arange(A.nrow, dtype=np.int64), counts)
    first = np.cumsum(counts) - counts
    return np.arange(rows.size, dtype=np.int64) + np.repeat(starts - first, counts), rows


def _active_blocks(A: BsrMatrix) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(slot, row, column) of every active block whose column lies in the matrix, row by row."""
    slots, rows = _active_slots(A)
    cols = A.columns.numpy()[slots].astype(np.int64)
    keep = (cols >= 0) & (cols < A.ncol)
    return slots[keep], rows[keep], cols[keep]


def _ensure_fits(A: BsrMatrix, nnz: int | None = None, capacity: int | None = None) -> None:
    if nnz is not None:
        A.nnz = int(nnz)
    capacity = A.nnz if capacity is None else int(capacity)
    if capacity < A.nnz:
        raise ValueError(f"capacity must be at least nnz, got {capacity} and {A.nnz}")
    if A.columns.shape[0] < capacity:
        A.columns = zeros(capacity, dtype=_I32, device=A.device)
    if A.values.shape[0] < capacity:
        A.values = zeros(capacity, dtype=A.dtype, device=A.device, requires_grad=A.values.requires_grad)


def _set_status(A: BsrMatrix, status: int) -> None:
    A._ensure_status().fill_(status)


def _place(dest: BsrMatrix, keys: np.ndarray, topology: str, nnz_bound: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Give `dest` the blocks `keys` (row * ncol + column, sorted, unique) under `topology`; returns each
    key's storage slot (-1 where masked or beyond a row's capacity) and the slots of all active blocks."""
    ncol = max(dest.ncol, 1)
    rows, cols = np.divmod(keys, ncol)
    if topology == "masked":
        slots, r, c = _active_blocks(dest)
        have = r * ncol + c
        order = np.argsort(have, kind="stable")
        have, at = have[order], slots[order]
        pos = np.minimum(np.searchsorted(have, keys), max(have.size - 1, 0))
        found = (have[pos] == keys) if have.size else np.zeros(keys.size, dtype=bool)
        return np.where(found, at[pos] if have.size else -1, -1), slots
    counts = np.bincount(rows, minlength=dest.nrow)[:dest.nrow]
    if topology == "padded":
        off = dest.offsets.numpy()[:dest.nrow + 1].astype(np.int64)
        if dest.row_counts is None or dest.row_counts.shape[0] < dest.nrow:
            dest.row_counts = zeros(dest.nrow, dtype=_I32, device=dest.device)
        capacity = np.diff(off)
        rank = np.arange(keys.size) - (np.cumsum(counts) - counts)[rows]
        fits = rank < capacity[rows]
        if not fits.all():
            _set_status(dest, BSR_STATUS_ROW_CAPACITY_EXCEEDED)
        _upload(dest.row_counts, np.minimum(counts, capacity))
        slots = np.where(fits, off[rows] + rank, -1)
        if fits.any():
            host = dest.columns.numpy().copy()
            host[slots[fits]] = cols[fits]
            dest.columns.assign(host)
        dest._topology_changed()
        return slots, slots[fits]
    offsets = np.zeros(dest.nrow + 1, dtype=np.int64)
    np.cumsum(counts, out=offsets[1:])
    _upload(dest.offsets, offsets)
    dest.row_counts = None
    _ensure_fits(dest, max(keys.size, nnz_bound))
    _upload(dest.columns, cols)
    dest._topology_changed()
    slots = np.arange(keys.size, dtype=np.int64)
    return slots, slots


@dataclass
class _Part:
    """Source blocks for `_assemble`: block `slots[i]` of `values` (flat scalars; None for structure only)
    sits at block (rows[i], cols[i]) of a matrix of `block_shape` blocks (seen transposed when `transpose`)."""

    slots: np.ndarray
    rows: np.ndarray
    cols: np.ndarray
    block_shape: tuple[int, int]
    values: array | None
    transpose: bool = False


def _project(p: _Part, dshape: tuple[int, int], ncol: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The destination keys `p` touches (for the structure), then per source scalar: its index in p.values,
    its destination key and its place in that block."""
    br, bc = p.block_shape
    i, j = np.divmod(np.arange(br * bc), bc)
    rows, cols, sbr, sbc = p.rows, p.cols, br, bc
    if p.transpose:
        rows, cols, sbr, sbc, i, j = cols, rows, bc, br, j, i
    src = (p.slots[:, None] * (br * bc) + np.arange(br * bc)[None, :]).ravel()
    dbr, dbc = dshape
    if (sbr, sbc) == dshape:
        keys = rows * ncol + cols
        return keys, src, np.repeat(keys, br * bc), np.tile(i * dbc + j, keys.size)
    R = (rows[:, None] * sbr + i[None, :]).ravel()
    C = (cols[:, None] * sbc + j[None, :]).ravel()
    keys = (R // dbr) * ncol + C // dbc
    return keys, src, keys, (R % dbr) * dbc + C % dbc


def _assemble(dest: BsrMatrix, parts: list[_Part], topology: str, weights: tuple = (1.0, 1.0), nnz_bound: int = 0,
              with_values: bool = True) -> np.ndarray:
    """Make `dest` hold the sum of the parts (weighted by `weights`, at most two parts with values) under
    `topology`; returns the storage slot of each key the parts touch (see `_place`)."""
    ncol = max(dest.ncol, 1)
    projected = [_project(p, dest.block_shape, ncol) for p in parts]
    touched = [k for k, *_ in projected]
    keys = np.unique(np.concatenate(touched)) if touched else np.zeros(0, dtype=np.int64)
    slot_of_key, active = _place(dest, keys, topology, nnz_bound)
    if with_values:
        contributions = []
        for p, (_, src, key, inblock) in zip(parts, projected, strict=True):
            if p.values is None:
                continue
            slot = slot_of_key[np.searchsorted(keys, key)] if key.size else key
            ok = slot >= 0
            contributions.append((p.values, src[ok], slot[ok] * dest.block_size + inblock[ok]))
        _gather_values(dest, active, contributions, weights)
    return slot_of_key


def _gather_values(dest: BsrMatrix, active: np.ndarray, contributions: list, weights: tuple) -> None:
    """dest's active blocks := the weighted sums of their contributions (values, source scalar, destination
    scalar), zero where none; a destination sharing memory with a source gets new values."""
    bs = dest.block_size
    if any(v._storage is dest.values._storage for v, *_ in contributions):
        dest.values = zeros(dest.values.shape[0], dtype=dest.dtype, device=dest.device,
                            requires_grad=dest.values.requires_grad)
    targets = (np.sort(active)[:, None] * bs + np.arange(bs)[None, :]).ravel()
    if not targets.size:
        return
    a = contributions[0][0] if contributions else _flat(dest.values)
    b = contributions[1][0] if len(contributions) > 1 else a
    split = a.shape[0]
    src = np.concatenate([c[1] + (split if n else 0) for n, c in enumerate(contributions)] or [np.zeros(0, np.int64)])
    dst = np.concatenate([c[2] for c in contributions] or [np.zeros(0, np.int64)])
    order = np.argsort(dst, kind="stable")
    starts = np.append(np.searchsorted(dst[order], targets), dst.size)
    st, dev = dest.scalar_type, dest.device
    launch(_gather, targets.size, inputs=[_flat(dest.values), array(targets.astype(np.int32), dtype=_I32, device=dev),
                                          array(starts.astype(np.int32), dtype=_I32, device=dev),
                                          array(src[order].astype(np.int32), dtype=_I32, device=dev), a, b, split,
                                          st(weights[0]), st(weights[1])], device=dev)


def _flat(a: array) -> array:
    """A contiguous array's scalars as one flat array (same memory, with the gradient)."""
    v = a.view(T.elem_scalar(a.dtype)) if T.is_composite(a.dtype) else a
    return v if v.ndim == 1 else v.flatten()


def _matrix_part(A: BsrMatrix, with_values: bool = True, transpose: bool = False) -> _Part:
    return _Part(*_active_blocks(A), A.block_shape, _flat(A.values) if with_values else None, transpose)


def _index_array(host: np.ndarray, device: Any) -> array:
    return array(np.ascontiguousarray(host, dtype=np.int32), dtype=_I32, device=device)


def _mm_structure(x: BsrMatrix, y: BsrMatrix, z: BsrMatrix, beta: Any, topology: str,
                  max_new_nnz: int | None) -> tuple:
    """Place the structure of x @ y (+ z's when beta != 0) in z; returns the device plan of the `_mm` kernel:
    per result block its range of (x block, y block) pairs, its slot, its old slot in z, and z's old values."""
    ncol = max(z.ncol, 1)
    xslot, xrow, xcol = _active_blocks(x)
    yslot, yrow, ycol = _active_blocks(y)
    zslot, zrow, zcol = _active_blocks(z)
    ystart = np.searchsorted(yrow, np.arange(y.nrow))
    per = np.bincount(yrow, minlength=y.nrow)[xcol] if xcol.size else np.zeros(0, np.int64)
    px = np.repeat(np.arange(xslot.size), per)
    py = np.arange(px.size) - np.repeat(np.cumsum(per) - per, per) + np.repeat(ystart[xcol], per)
    pkey = xrow[px] * ncol + ycol[py]
    zkey = zrow * ncol + zcol
    keep_z = beta != 0.0 or topology == "masked"
    product = np.unique(pkey)
    if max_new_nnz is not None and topology != "masked":
        new = np.setdiff1d(product, zkey) if keep_z else product
        if new.size > max_new_nnz:
            print(f"bsr_mm: the product has {new.size} new blocks, which exceeded max_new_nnz ({max_new_nnz}); the "
                  "blocks past the limit are dropped", flush=True)
            product = np.union1d(np.setdiff1d(product, new), new[:max_new_nnz])
    if topology == "masked":
        keys = np.unique(zkey)
    else:
        keys = np.union1d(product, zkey) if keep_z else product
    old = _flat(z.values.clone()) if beta != 0.0 else _flat(z.values)
    slot_of_key, _ = _place(z, keys, topology)
    placed = slot_of_key >= 0
    keys, dst = keys[placed], slot_of_key[placed]
    order = np.argsort(pkey, kind="stable")
    pkey, px, py = pkey[order], px[order], py[order]
    lo, hi = np.searchsorted(pkey, keys), np.searchsorted(pkey, keys, side="right")
    take = np.concatenate([np.arange(a, b) for a, b in zip(lo, hi, strict=True)] or [np.zeros(0, np.int64)])
    starts = np.concatenate([[0], np.cumsum(hi - lo)])
    zorder = np.argsort(zkey, kind="stable")
    pos = np.minimum(np.searchsorted(zkey[zorder], keys), max(zkey.size - 1, 0))
    found = zkey[zorder][pos] == keys if zkey.size else np.zeros(keys.size, dtype=bool)
    old_slot = np.where(found, zslot[zorder][pos] if zkey.size else -1, -1)
    dev = z.device
    return (_index_array(starts, dev), _index_array(xslot[px[take]], dev), _index_array(yslot[py[take]], dev),
            _index_array(dst, dev), _index_array(old_slot, dev), old)
