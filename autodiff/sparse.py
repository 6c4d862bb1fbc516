"""Block sparse row (BSR) matrices: `loomwork.sparse`, Warp's `warp.sparse` API.

A `BsrMatrix` holds `nrow` x `ncol` blocks, each a float scalar (CSR) or a float matrix type, in:
- `offsets` (at least nrow + 1 int32): row r's storage is `offsets[r]:offsets[r + 1]`;
- `row_counts` (None, or at least nrow int32): None for compact storage, where all of a row's storage is
  active; otherwise row r's active blocks are `offsets[r]:offsets[r] + row_counts[r]` and the rest is
  slack ("padded" storage with a row capacity);
- `columns` and `values`: each block's column (sorted within a row) and value; both hold at least `nnz`
  entries, `nnz` being a host-side upper bound on the storage in use (`nnz_sync()` makes it exact).

Operations take a `topology` policy: "compact" rebuilds the destination's structure, "masked" keeps the
destination's blocks and drops the rest, "padded" writes into the destination's existing row capacity
and flags overflow in its status (`status_sync()`). The structure (which blocks exist, where they go) is
worked out on the host with NumPy (sparse_structure.py); values move on the device with the kernels of
sparse_kernels.py, the value moves differentiable (a Tape sends gradients from result blocks back to
triplets and sources).
Matrix products (`bsr_mv`, `bsr_mm`) have no adjoint, as in Warp.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from loomwork.kernels import types as T
from loomwork.kernels.array import array, empty, zeros
from loomwork.kernels.device import get_device
from loomwork.kernels.launch import launch
from loomwork.kernels.structs import struct

from .sparse_kernels import _gather, _get_diag, _mm, _mv, _mv_transpose, _scale, bsr_block_index, bsr_row_index
from .sparse_structure import (
    _I32,
    BSR_STATUS_ROW_CAPACITY_EXCEEDED,
    BSR_STATUS_SUCCESS,
    _active_blocks,
    _active_slots,
    _assemble,
    _ensure_fits,
    _flat,
    _index_array,
    _matrix_part,
    _mm_structure,
    _Part,
    _storage_end,
    _upload,
)

_STATUS_MESSAGES = {BSR_STATUS_SUCCESS: "success", BSR_STATUS_ROW_CAPACITY_EXCEEDED: "row capacity exceeded"}
_TOPOLOGIES = ("compact", "masked", "padded")

__all__ = ["BSR_STATUS_ROW_CAPACITY_EXCEEDED", "BSR_STATUS_SUCCESS", "BsrMatrix", "BsrTripletMap", "bsr_assign",
           "bsr_axpy", "bsr_axpy_work_arrays", "bsr_block_index", "bsr_compress", "bsr_copy", "bsr_diag",
           "bsr_from_triplets", "bsr_get_diag", "bsr_identity", "bsr_matrix_t", "bsr_mm", "bsr_mm_work_arrays",
           "bsr_mv", "bsr_row_index", "bsr_scale", "bsr_set_diag", "bsr_set_from_mapped_values",
           "bsr_set_from_triplets", "bsr_set_identity", "bsr_set_transpose", "bsr_set_zero", "bsr_transposed",
           "bsr_zeros"]


class BsrMatrix:
    """A BSR matrix (see the module docstring for its fields); made by `bsr_zeros`, `bsr_from_triplets`,
    `bsr_diag`, `bsr_copy`... Supports `+`, `-`, `*` and `/` by scalars (lazily, as a scaled expression),
    `@` with arrays (`bsr_mv`) and matrices (`bsr_mm`)."""

    def __init__(self, nrow: int, ncol: int, offsets: array, columns: array, values: array,
                 row_counts: array | None = None, nnz: int | None = None) -> None:
        self.nrow, self.ncol = int(nrow), int(ncol)
        self.offsets, self.row_counts, self.columns, self.values = offsets, row_counts, columns, values
        self.nnz = int(values.shape[0]) if nnz is None else int(nnz)
        self._status: array | None = None
        self._nnz_pending: int | None = None  # offsets[nrow] as copy_nnz_async read it, until nnz_sync

    @property
    def scalar_type(self) -> Any:
        """The scalar type of the block coefficients (the block type itself for CSR matrices)."""
        return T.elem_scalar(self.values.dtype)

    @property
    def block_shape(self) -> tuple[int, int]:
        """The shape of one block."""
        return tuple(getattr(self.values.dtype, "_shape_", (1, 1)))

    @property
    def block_size(self) -> int:
        """The number of scalars in one block."""
        br, bc = self.block_shape
        return br * bc

    @property
    def shape(self) -> tuple[int, int]:
        """The matrix's shape in scalars."""
        br, bc = self.block_shape
        return (self.nrow * br, self.ncol * bc)

    @property
    def dtype(self) -> Any:
        """The type of one block."""
        return self.values.dtype

    @property
    def device(self) -> Any:
        return self.offsets.device

    @property
    def requires_grad(self) -> bool:
        """Whether the values carry gradients."""
        return self.values.requires_grad

    @property
    def scalar_values(self) -> array:
        """`values` as a (capacity, rows, cols) array of scalars (same memory, with the gradient)."""
        v = self.values.view(self.scalar_type) if T.is_composite(self.dtype) else self.values
        return v.reshape((self.values.shape[0], *self.block_shape))

    def uncompress_rows(self, out: array | None = None) -> array:
        """The block row of each of the first `nnz` storage slots (-1 for slots outside every row's active
        range), in `out` (int32, at least nnz entries, its other entries left alone) or a new array."""
        host = np.full(self.nnz, -1, dtype=np.int32)
        slots, rows = _active_slots(self)
        inside = slots < self.nnz
        host[slots[inside]] = rows[inside]
        if out is None:
            return array(host, dtype=_I32, device=self.device)
        if not isinstance(out, array) or out.dtype != _I32 or out.ndim != 1 or out.shape[0] < self.nnz:
            raise ValueError(f"uncompress_rows: out must be a 1-D int32 array of at least {self.nnz} entries, "
                             f"got {out!r}")
        _upload(out, host)
        return out

    def nnz_sync(self) -> int:
        """Read `offsets[nrow]` back to the host, make it `nnz` and return it (for padded matrices, the size of
        the row-capacity storage)."""
        if self.device.is_capturing and not self.device.is_cpu:
            raise RuntimeError("BsrMatrix.nnz_sync() reads offsets[nrow] back to the host, which a live CUDA graph "
                               "capture cannot do; query the count outside the capture")
        pending, self._nnz_pending = self._nnz_pending, None
        self.nnz = _storage_end(self) if pending is None else pending
        return self.nnz

    def notify_nnz_changed(self, nnz: int | None = None, nnz_capacity: int | None = None) -> None:
        """Tell the matrix its `offsets` (or its `nnz` bound) changed outside loomwork.sparse: `nnz` becomes
        the given bound (else `nnz_capacity`, else `offsets[nrow]`), and `columns` and `values` grow to at
        least `nnz_capacity` (default: nnz) entries."""
        self._topology_changed()
        if nnz is None:
            if nnz_capacity is None:
                self.nnz_sync()
            else:
                self.nnz = int(nnz_capacity)
        _ensure_fits(self, nnz, nnz_capacity)

    def copy_nnz_async(self) -> None:
        """Deprecated (as in Warp): read `offsets[nrow]` now for a later `nnz_sync` (topology changes made by
        loomwork.sparse refresh it); prefer `nnz_sync`."""
        warnings.warn("BsrMatrix.copy_nnz_async is deprecated; call nnz_sync to update the host-side block count",
                      DeprecationWarning, stacklevel=2)
        self._nnz_pending = _storage_end(self)

    def status_sync(self) -> int:
        """The sticky status of the padded operations on this matrix (BSR_STATUS_SUCCESS or
        BSR_STATUS_ROW_CAPACITY_EXCEEDED); `clear_status` resets it."""
        if self._status is None:
            return BSR_STATUS_SUCCESS
        if self.device.is_capturing and not self.device.is_cpu:
            raise RuntimeError("BsrMatrix.status_sync() cannot read sparse status during a live CUDA graph capture; "
                               "query the status outside the capture")
        return int(self._status.numpy()[0])

    def status_message(self) -> str:
        """`status_sync()` in words."""
        return _STATUS_MESSAGES.get(self.status_sync(), "unknown status")

    def clear_status(self) -> None:
        """Reset the status to BSR_STATUS_SUCCESS."""
        if self._status is not None:
            self._status.zero_()

    def _ensure_status(self) -> array:
        if self._status is None or self._status.device != self.device:
            self._status = zeros(1, dtype=_I32, device=self.device)
        return self._status

    def _as_struct(self, t: type) -> Any:
        """This matrix as a value of `t` when `t` is `bsr_matrix_t` of its block type (for a kernel argument),
        else None (the launch then names the mismatch)."""
        if t is not bsr_matrix_t(self.dtype):
            return None
        return t(nrow=self.nrow, ncol=self.ncol, nnz=self.nnz, offsets=self.offsets, row_counts=self.row_counts,
                 columns=self.columns, values=self.values)

    def _topology_changed(self) -> None:
        if self._nnz_pending is not None:
            self._nnz_pending = _storage_end(self)

    def __add__(self, y: Any) -> BsrMatrix:
        return bsr_axpy(y, bsr_copy(self))

    def __radd__(self, x: Any) -> BsrMatrix:
        return bsr_axpy(x, bsr_copy(self))

    def __iadd__(self, y: Any) -> BsrMatrix:
        return bsr_axpy(y, self)

    def __sub__(self, y: Any) -> BsrMatrix:
        return bsr_axpy(y, bsr_copy(self), alpha=-1.0)

    def __rsub__(self, x: Any) -> BsrMatrix:
        return bsr_axpy(x, bsr_copy(self), beta=-1.0)

    def __isub__(self, y: Any) -> BsrMatrix:
        return bsr_axpy(y, self, alpha=-1.0)

    def __mul__(self, y: Any) -> _BsrScalingExpression:
        return _BsrScalingExpression(self, y)

    def __rmul__(self, x: Any) -> _BsrScalingExpression:
        return _BsrScalingExpression(self, x)

    def __imul__(self, y: Any) -> BsrMatrix:
        return bsr_scale(self, y)

    def __truediv__(self, y: Any) -> _BsrScalingExpression:
        return _BsrScalingExpression(self, 1.0 / y)

    def __neg__(self) -> _BsrScalingExpression:
        return _BsrScalingExpression(self, -1.0)

    def __matmul__(self, y: Any) -> Any:
        return bsr_mv(self, y) if isinstance(y, array) else bsr_mm(self, y)

    def __rmatmul__(self, x: Any) -> Any:
        return bsr_mv(self, x, transpose=True) if isinstance(x, array) else bsr_mm(x, self)

    def __imatmul__(self, y: Any) -> BsrMatrix:
        return bsr_mm(self, y, self)

    def transpose(self) -> BsrMatrix:
        """A transposed copy."""
        return bsr_transposed(self)


class _BsrScalingExpression:
    """`scale * mat`, evaluated only when used (operations fold the scale into their own factors)."""

    def __init__(self, mat: BsrMatrix, scale: Any) -> None:
        self.mat, self.scale = mat, scale

    def eval(self) -> BsrMatrix:
        """The scaled matrix, as a new BsrMatrix."""
        return bsr_copy(self)

    def __getattr__(self, name: str) -> Any:
        if name in ("nrow", "ncol", "nnz", "offsets", "row_counts", "columns", "scalar_type", "block_shape",
                    "block_size", "shape", "dtype", "requires_grad", "device"):
            return getattr(self.mat, name)
        raise AttributeError(f"a scaled BSR expression has no attribute '{name}'")

    def __add__(self, y: Any) -> BsrMatrix:
        return bsr_axpy(y, bsr_copy(self.mat), beta=self.scale)

    def __radd__(self, x: Any) -> BsrMatrix:
        return bsr_axpy(x, bsr_copy(self.mat), beta=self.scale)

    def __sub__(self, y: Any) -> BsrMatrix:
        return bsr_axpy(y, bsr_copy(self.mat), alpha=-1.0, beta=self.scale)

    def __rsub__(self, x: Any) -> BsrMatrix:
        return bsr_axpy(x, bsr_copy(self.mat), beta=-self.scale)

    def __mul__(self, y: Any) -> _BsrScalingExpression:
        return _BsrScalingExpression(self.mat, y * self.scale)

    def __rmul__(self, x: Any) -> _BsrScalingExpression:
        return _BsrScalingExpression(self.mat, x * self.scale)

    def __truediv__(self, y: Any) -> _BsrScalingExpression:
        return _BsrScalingExpression(self.mat, self.scale / y)

    def __neg__(self) -> _BsrScalingExpression:
        return _BsrScalingExpression(self.mat, -self.scale)

    def __matmul__(self, y: Any) -> Any:
        return bsr_mv(self.mat, y, alpha=self.scale) if isinstance(y, array) else bsr_mm(self.mat, y, alpha=self.scale)

    def __rmatmul__(self, x: Any) -> Any:
        if isinstance(x, array):
            return bsr_mv(self.mat, x, alpha=self.scale, transpose=True)
        return bsr_mm(x, self.mat, alpha=self.scale)

    def transpose(self) -> _BsrScalingExpression:
        return _BsrScalingExpression(self.mat.transpose(), self.scale)


def _as_matrix(A: Any) -> tuple[BsrMatrix, Any]:
    if isinstance(A, BsrMatrix):
        return A, 1.0
    if isinstance(A, _BsrScalingExpression):
        return A.mat, A.scale
    raise ValueError(f"Argument cannot be interpreted as a BsrMatrix: got {type(A).__name__}")


_struct_types: dict[Any, type] = {}


def bsr_matrix_t(dtype: Any) -> type:
    """The struct type (`@wp.struct`) of a BSR matrix of `dtype` blocks in kernels (fields nrow, ncol, nnz,
    offsets, row_counts, columns, values): a kernel parameter of this type takes a BsrMatrix."""
    t = _block_type(dtype)
    if t not in _struct_types:
        fields = {"nrow": int, "ncol": int, "nnz": int, "offsets": array(dtype=_I32), "row_counts": array(dtype=_I32),
                  "columns": array(dtype=_I32), "values": array(dtype=t)}
        name = f"BsrMatrix_{T.type_name(t)}".replace("(", "_").replace(")", "").replace(",", "_").replace(" ", "")
        _struct_types[t] = struct(type(name, (), {"__annotations__": fields, "__module__": __name__}))
    return _struct_types[t]


def _block_type(block_type: Any) -> Any:
    t = T.normalize_dtype(block_type)
    if not ((T.is_scalar(t) or T.is_matrix(t)) and T.elem_scalar(t).is_float):
        raise ValueError(f"BsrMatrix block type must be either warp matrix or scalar (of floats here); got "
                         f"{T.type_name(t)}")
    return t


# -- construction -------------------------------------------------------------------------------------------------

def _resize(A: BsrMatrix, nrow: int | None, ncol: int | None, preserve_offsets: bool = False) -> None:
    old_nrow, old_offsets = A.nrow, A.offsets
    A.nrow = A.nrow if nrow is None else int(nrow)
    A.ncol = A.ncol if ncol is None else int(ncol)
    if A.offsets.shape[0] < A.nrow + 1:
        A.offsets = zeros(A.nrow + 1, dtype=_I32, device=old_offsets.device)
    if preserve_offsets and A.nrow > old_nrow:
        host = old_offsets.numpy()[:old_nrow + 1]
        _upload(A.offsets, np.concatenate([host, np.full(A.nrow - old_nrow, host[-1])]))


def _set_zero_topology(A: BsrMatrix, topology: str, row_capacity: Any, nnz_capacity: int | None,
                       preserve_capacity: bool) -> None:
    if nnz_capacity is not None and int(nnz_capacity) < 0:
        raise ValueError(f"nnz_capacity must be nonnegative, got {nnz_capacity}")
    if row_capacity is not None and topology != "padded":
        raise ValueError("row_capacity requires topology='padded'")
    nnz: int | None = 0
    if topology == "padded":
        if isinstance(row_capacity, array):
            if row_capacity.ndim != 1 or row_capacity.shape[0] != A.nrow:
                raise ValueError(f"row_capacity array must have shape ({A.nrow},), got {row_capacity.shape}")
            if row_capacity.dtype != _I32:
                raise TypeError("row_capacity array must have dtype int32")
            if row_capacity.device != A.device:
                raise ValueError(f"row_capacity array must reside on the destination matrix device, got "
                                 f"{row_capacity.device} and {A.device}")
            capacity = row_capacity.numpy().astype(np.int64)
            if (capacity < 0).any():
                raise ValueError("row_capacity entries must be nonnegative")
            _upload(A.offsets, np.concatenate([[0], np.cumsum(capacity)]))
            nnz = None
        elif row_capacity is not None:
            if int(row_capacity) < 0:
                raise ValueError(f"row_capacity must be nonnegative, got {row_capacity}")
            _upload(A.offsets, np.arange(A.nrow + 1) * int(row_capacity))
            nnz = A.nrow * int(row_capacity)
        elif preserve_capacity:
            nnz = A.nnz
        else:
            A.offsets.zero_()
        if A.row_counts is None or A.row_counts.shape[0] < A.nrow:
            A.row_counts = zeros(A.nrow, dtype=_I32, device=A.device)
        else:
            A.row_counts.zero_()
        A._ensure_status()
    else:
        A.offsets.zero_()
        A.row_counts = None
    A.notify_nnz_changed(nnz=nnz, nnz_capacity=nnz_capacity)


def bsr_zeros(rows_of_blocks: int, cols_of_blocks: int, block_type: Any, device: Any = None, *,
              topology: str | None = None, row_capacity: int | array | None = None,
              nnz_capacity: int | None = None) -> BsrMatrix:
    """An empty matrix of `rows_of_blocks` x `cols_of_blocks` blocks of `block_type` (a float scalar for CSR,
    a float matrix type for BSR). `row_capacity` (an int, or an int32 array with one entry a row) reserves
    padded row storage and makes `topology` default to "padded"; `nnz_capacity` preallocates columns and
    values."""
    if topology is None:
        topology = "padded" if row_capacity is not None else "compact"
    elif topology not in ("compact", "padded"):
        raise ValueError(f"Unsupported topology policy: {topology!r} (compact or padded)")
    if int(rows_of_blocks) < 0 or int(cols_of_blocks) < 0:
        raise ValueError(f"bsr_zeros: negative block counts ({rows_of_blocks}, {cols_of_blocks})")
    dev = get_device(device)
    A = BsrMatrix(rows_of_blocks, cols_of_blocks, zeros(int(rows_of_blocks) + 1, dtype=_I32, device=dev),
                  zeros(0, dtype=_I32, device=dev), zeros(0, dtype=_block_type(block_type), device=dev), nnz=0)
    _set_zero_topology(A, topology, row_capacity, nnz_capacity, False)
    return A


def bsr_set_zero(bsr: BsrMatrix, rows_of_blocks: int | None = None, cols_of_blocks: int | None = None, *,
                 topology: str = "compact", row_capacity: int | array | None = None,
                 nnz_capacity: int | None = None) -> None:
    """Make `bsr` all zero, resized when given new block counts. "compact" drops all storage structure,
    "padded" keeps (or sets, from `row_capacity`) the row capacity with every row empty, "masked" keeps the
    blocks and zeroes their values."""
    if topology not in _TOPOLOGIES:
        raise ValueError(f"Unsupported topology policy: {topology!r} (one of {_TOPOLOGIES})")
    if row_capacity is not None and topology != "padded":
        raise ValueError("row_capacity requires topology='padded'")
    if topology == "masked":
        if rows_of_blocks is not None or cols_of_blocks is not None:
            raise ValueError("Cannot resize a matrix with topology='masked'")
        bsr.values.zero_()
        return
    preserve = topology == "padded" and row_capacity is None
    _resize(bsr, rows_of_blocks, cols_of_blocks, preserve_offsets=preserve)
    _set_zero_topology(bsr, topology, row_capacity, nnz_capacity, preserve)


def _topology(name: str | None, allowed: tuple = _TOPOLOGIES) -> str:
    t = "compact" if name is None else name
    if t not in allowed:
        raise ValueError(f"Unsupported topology policy: {name!r} (one of {allowed})")
    return t


def _block_values(values: Any, dest: BsrMatrix, what: str) -> array:
    """`values` (1-D of dest's block type, or (n, rows, cols) of its scalar type) as flat scalars."""
    if not isinstance(values, array):
        raise TypeError(f"{what}: values must be a wp.array, got {type(values).__name__}")
    if values.ndim == 1:
        if values.dtype != dest.dtype:
            raise ValueError(f"{what}: Values array type must correspond to that of the destination matrix, got "
                             f"{T.type_name(values.dtype)} and {T.type_name(dest.dtype)}")
    elif values.ndim == 3:
        if tuple(values.shape[1:]) != dest.block_shape:
            raise ValueError(f"{what}: Last two dimensions in values array ({tuple(values.shape[1:])}) should match "
                             f"block shape {dest.block_shape}")
        if values.dtype != dest.scalar_type:
            raise ValueError(f"{what}: Scalar type of values array ({T.type_name(values.dtype)}) should match "
                             f"destination matrix scalar type ({T.type_name(dest.scalar_type)})")
    else:
        raise ValueError(f"{what}: Number of dimensions for values array should be 1 or 3, got {values.ndim}")
    if not values.is_contiguous:
        raise ValueError(f"{what}: Values array must be contiguous")
    return _flat(values)


class BsrTripletMap:
    """A reusable map from COO triplets to the blocks of the matrix they built: `bsr_set_from_triplets(...,
    build_mapping=True or a map)` fills it, `bsr_set_from_mapped_values` then sets new values for the same
    triplets without redoing the structure. `capacity` preallocates storage for that many triplets."""

    def __init__(self, capacity: int = 0, device: Any = None) -> None:
        self.triplet_count = 0
        """The number of triplets the map was last built for."""
        self._storage = self._allocate(int(capacity), get_device(device))
        self._dest: tuple | None = None  # what the map was built against: (nrow, ncol, offsets/columns/row_counts ptrs)
        self._blocks = np.zeros(0, dtype=np.int64)  # host copy of _triplet_blocks
        self._plans: dict[int, tuple] = {}

    @staticmethod
    def _allocate(capacity: int, device: Any) -> tuple[array, array, array]:
        return tuple(zeros(capacity, dtype=_I32, device=device) for _ in range(3))

    @property
    def device(self) -> Any:
        return self._storage[0].device

    @property
    def capacity(self) -> int:
        """How many triplets the map can be built for without growing its storage."""
        return self._storage[0].shape[0]

    @property
    def _block_ends(self) -> array:
        """The end, in `_triplet_indices`, of each destination block's triplets."""
        return self._storage[0][:self.triplet_count]

    @property
    def _triplet_indices(self) -> array:
        """The triplets grouped by destination block, in the order their values are summed."""
        return self._storage[1][:self.triplet_count]

    @property
    def _triplet_blocks(self) -> array:
        """The destination block of each triplet (-1 for dropped ones)."""
        return self._storage[2][:self.triplet_count]

    def _signature(self, dest: BsrMatrix) -> tuple:
        return (dest.nrow, dest.ncol, dest.offsets.ptr, dest.columns.ptr,
                None if dest.row_counts is None else dest.row_counts.ptr)

    def _build(self, dest: BsrMatrix, blocks: np.ndarray) -> None:
        n = blocks.size
        if n > self.capacity:
            self._storage = self._allocate(n, self.device)
        valid = blocks >= 0
        grouped = np.concatenate([np.flatnonzero(valid)[np.argsort(blocks[valid], kind="stable")],
                                  np.flatnonzero(~valid)])
        ends = np.cumsum(np.bincount(blocks[valid], minlength=0)) if valid.any() else np.zeros(0, np.int64)
        ends = np.concatenate([ends, np.full(n - ends.size, ends[-1] if ends.size else 0)])
        for dst, host in zip(self._storage, (ends, grouped, blocks), strict=True):
            _upload(dst, host)
        self.triplet_count, self._blocks, self._plans = n, blocks, {}
        self._dest = self._signature(dest)

    def validate(self, dest: BsrMatrix) -> None:
        """Raise a ValueError when `dest`'s dimensions or structure arrays differ from those the map was built
        for (contents changed in place go unnoticed)."""
        if self._dest is None:
            raise ValueError("The triplet map has not been built; pass it to bsr_set_from_triplets() first")
        if self._signature(dest) != self._dest:
            raise ValueError("Destination BSR topology storage differs from that used to build the triplet map")


def bsr_set_from_triplets(dest: BsrMatrix, rows: array, columns: array, values: array | None = None,
                          count: array | None = None, prune_numerical_zeros: bool = True, topology: str | None = None,
                          build_mapping: BsrTripletMap | bool | None = None) -> BsrTripletMap | None:
    """Make `dest` the sum of the blocks given as (row, column, value) triplets: duplicates add up, triplets
    outside the matrix are dropped, and so are all-zero input blocks when `prune_numerical_zeros`. `values`
    is contiguous, 1-D of dest's block type or (n, rows, cols) of its scalar type; None leaves the values
    unset. `count` (a 1-element array) uses only the first triplets. "compact" (default) rebuilds dest's
    structure (`nnz` becomes the triplet count, an upper bound), "masked" keeps dest's blocks, "padded" fits
    rows into dest's row capacity. `build_mapping` (True or a BsrTripletMap, compact and unpruned only)
    returns the map for `bsr_set_from_mapped_values`."""
    topology = _topology(topology)
    if not isinstance(dest, BsrMatrix):
        raise TypeError(f"bsr_set_from_triplets: dest must be a BsrMatrix, got {type(dest).__name__}")
    for a in (rows, columns):
        if not isinstance(a, array) or a.dtype != _I32:
            raise TypeError("Rows and columns arrays must be of type int32")
    mapping = None
    if build_mapping is not None and build_mapping is not False:
        if build_mapping is True:
            mapping = BsrTripletMap(device=dest.device)
        elif isinstance(build_mapping, BsrTripletMap):
            mapping = build_mapping
        else:
            raise TypeError(f"build_mapping must be a bool or a BsrTripletMap, got {type(build_mapping).__name__}")
        if topology != "compact":
            raise ValueError("build_mapping requires topology='compact'")
        if prune_numerical_zeros:
            raise ValueError("build_mapping requires prune_numerical_zeros=False")
        if mapping.device != dest.device:
            raise ValueError(f"build_mapping: the map must be on the same device as dest, got {mapping.device} and "
                             f"{dest.device}")
    n = min(rows.shape[0], columns.shape[0])
    flat = None
    if values is not None:
        flat = _block_values(values, dest, "bsr_set_from_triplets")
        n = min(n, values.shape[0])
    used = n if count is None else min(n, int(count.numpy()[0]) if isinstance(count, array) else int(count))
    r, c = rows.numpy()[:used].astype(np.int64), columns.numpy()[:used].astype(np.int64)
    keep = (r >= 0) & (r < dest.nrow) & (c >= 0) & (c < dest.ncol)
    if prune_numerical_zeros and flat is not None and used:
        keep &= flat.numpy()[:used * dest.block_size].reshape(used, dest.block_size).any(axis=1)
    idx = np.flatnonzero(keep)
    part = _Part(idx, r[idx], c[idx], dest.block_shape, flat)
    slot_of_key = _assemble(dest, [part], topology, nnz_bound=n, with_values=flat is not None)
    if mapping is not None:
        blocks = np.full(n, -1, dtype=np.int64)
        if idx.size:
            keys = np.unique(r[idx] * max(dest.ncol, 1) + c[idx])
            blocks[idx] = slot_of_key[np.searchsorted(keys, r[idx] * max(dest.ncol, 1) + c[idx])]
        mapping._build(dest, blocks)
    return mapping


def bsr_set_from_mapped_values(dest: BsrMatrix, mapping: BsrTripletMap, values: array,
                               reduction: str = "gather") -> None:
    """Set `dest`'s values from new values of the triplets `mapping` was built from (same structure, no host
    work after the first call): "gather" sums each block's triplets in bsr_set_from_triplets' order,
    "atomic" gives the same sums."""
    if reduction not in ("gather", "atomic"):
        raise ValueError(f"bsr_set_from_mapped_values: reduction must be 'gather' or 'atomic', got {reduction!r}")
    if not isinstance(mapping, BsrTripletMap):
        raise TypeError(f"bsr_set_from_mapped_values: mapping must be a BsrTripletMap, got {type(mapping).__name__}")
    mapping.validate(dest)
    flat = _block_values(values, dest, "bsr_set_from_mapped_values")
    if values.shape[0] < mapping.triplet_count:
        raise ValueError(f"bsr_set_from_mapped_values: {mapping.triplet_count} mapped triplets need as many values, "
                         f"got {values.shape[0]}")
    bs, dev = dest.block_size, dest.device
    plan = mapping._plans.get(bs)
    if plan is None:
        blocks = mapping._blocks
        valid = np.flatnonzero(blocks >= 0)
        order = valid[np.argsort(blocks[valid], kind="stable")]
        targets = np.unique(blocks[valid])
        e = np.arange(bs)
        src = (order[:, None] * bs + e).ravel()
        dst = (blocks[order][:, None] * bs + e).ravel()
        perm = np.argsort(dst, kind="stable")
        scalars = (targets[:, None] * bs + e).ravel()
        starts = np.append(np.searchsorted(dst[perm], scalars), dst.size)
        plan = tuple(array(x.astype(np.int32), dtype=_I32, device=dev) for x in (scalars, starts, src[perm]))
        mapping._plans[bs] = plan
    if plan[0].shape[0]:
        st = dest.scalar_type
        launch(_gather, plan[0].shape[0],
               inputs=[_flat(dest.values), *plan, flat, flat, flat.shape[0], st(1.0), st(1.0)], device=dev)


def bsr_from_triplets(rows_of_blocks: int, cols_of_blocks: int, rows: array, columns: array, values: array,
                      prune_numerical_zeros: bool = True) -> BsrMatrix:
    """A new compact matrix from triplets (see `bsr_set_from_triplets`); its block type is that of `values`:
    1-D values give their dtype, (n, rows, cols) scalars a rows x cols matrix type. `nnz` starts as the
    triplet count (`nnz_sync()` gives the block count)."""
    if not isinstance(values, array):
        raise TypeError(f"bsr_from_triplets: values must be a wp.array, got {type(values).__name__}")
    block = T.matrix(tuple(values.shape[1:]), values.dtype) if values.ndim == 3 else values.dtype
    A = bsr_zeros(rows_of_blocks, cols_of_blocks, block, values.device)
    A.values.requires_grad = values.requires_grad
    bsr_set_from_triplets(A, rows, columns, values, prune_numerical_zeros=prune_numerical_zeros)
    return A


def bsr_compress(src: BsrMatrix, prune_numerical_zeros: bool = True, inplace: bool = False,
                 topology: str | None = None, structure_only: bool = False) -> BsrMatrix:
    """Sort and merge `src`'s active blocks within each row (blocks with a column outside the matrix are
    dropped, all-zero ones too when `prune_numerical_zeros`) and return `src`: "compact" packs the rows,
    "padded" keeps the row capacity. Values are summed into new storage (differentiable) unless `inplace`;
    `structure_only` sorts and merges the columns alone, leaving `values` untouched."""
    topology = _topology(topology, ("compact", "padded"))
    slots, rows, cols = _active_blocks(src)
    if structure_only:
        _assemble(src, [_Part(slots, rows, cols, src.block_shape, None)], topology, with_values=False)
        return src
    values = src.values.clone() if inplace else src.values
    flat = _flat(values)
    if prune_numerical_zeros and slots.size:
        host = flat.numpy().reshape(-1, src.block_size)
        nonzero = host[slots].any(axis=1)
        slots, rows, cols = slots[nonzero], rows[nonzero], cols[nonzero]
    _assemble(src, [_Part(slots, rows, cols, src.block_shape, flat)], topology)
    return src


def _reblock_shape(src: BsrMatrix, shape: tuple[int, int]) -> tuple[int, int]:
    """`src`'s block counts with blocks of `shape` (each extent a multiple or divider of src's)."""
    for s, d in zip(src.block_shape, shape, strict=True):
        if d < 1 or (s % d and d % s):
            raise ValueError(f"Incompatible dest and src block shapes: {tuple(shape)} and {src.block_shape} (each "
                             "extent must be a multiple or a divider of the other)")
    if src.shape[0] % shape[0] or src.shape[1] % shape[1]:
        raise ValueError(f"The requested block shape {tuple(shape)} does not evenly divide the source matrix of "
                         f"total size {src.shape}")
    return src.shape[0] // shape[0], src.shape[1] // shape[1]


def bsr_assign(dest: BsrMatrix, src: Any, structure_only: bool = False, topology: str | None = None) -> None:
    """Copy `src` (a matrix or scaled expression) into `dest`, converting the scalar type and block shape
    (each extent of dest's blocks a multiple or divider of src's) as needed. "compact" takes src's
    structure (resizing dest), "masked" keeps dest's blocks, "padded" fits src's rows into dest's row
    capacity. `structure_only` copies the structure alone."""
    topology = _topology(topology)
    mat, scale = _as_matrix(src)
    nrow, ncol = _reblock_shape(mat, dest.block_shape)
    if topology == "compact":
        _resize(dest, nrow, ncol)
    elif (dest.nrow, dest.ncol) != (nrow, ncol):
        raise ValueError(f"bsr_assign: with topology={topology!r} dest must have {nrow} x {ncol} blocks, it has "
                         f"{dest.nrow} x {dest.ncol}")
    _assemble(dest, [_matrix_part(mat, not structure_only)], topology, (scale, 1.0), with_values=not structure_only)


def bsr_copy(A: Any, scalar_type: Any = None, block_shape: tuple[int, int] | None = None,
             structure_only: bool = False, topology: str = "compact") -> BsrMatrix:
    """A copy of `A` (a matrix or scaled expression), with another scalar type and/or block shape when given.
    "padded" keeps A's row capacity (or, with another block shape, gives each row exactly its blocks)."""
    topology = _topology(topology, ("compact", "padded"))
    mat, _ = _as_matrix(A)
    st = mat.scalar_type if scalar_type is None else T.normalize_dtype(scalar_type)
    shape = mat.block_shape if block_shape is None else tuple(block_shape)
    nrow, ncol = _reblock_shape(mat, shape)
    block = st if shape == (1, 1) else T.matrix(shape, st)
    if topology == "padded" and shape == mat.block_shape:
        capacity = np.diff(mat.offsets.numpy()[:mat.nrow + 1]).astype(np.int32)
        dest = bsr_zeros(nrow, ncol, block, mat.device, row_capacity=array(capacity, dtype=_I32, device=mat.device))
    else:
        dest = bsr_zeros(nrow, ncol, block, mat.device)
    dest.values.requires_grad = mat.requires_grad
    bsr_assign(dest, A, structure_only, topology="padded" if dest.row_counts is not None else "compact")
    if topology == "padded" and dest.row_counts is None:
        dest.row_counts = array(np.diff(dest.offsets.numpy()[:nrow + 1]).astype(np.int32), dtype=_I32,
                                device=dest.device)
        dest._ensure_status()
    return dest


def bsr_set_transpose(dest: BsrMatrix, src: Any, topology: str | None = None) -> None:
    """Make `dest` the transpose of `src` (a matrix or scaled expression); dest's blocks must have src's
    block shape transposed. Topology policies as in `bsr_assign`."""
    topology = _topology(topology)
    mat, scale = _as_matrix(src)
    br, bc = mat.block_shape
    if dest.block_shape != (bc, br):
        raise ValueError(f"Destination block shape must be {(bc, br)}, got {dest.block_shape}")
    if topology == "compact":
        _resize(dest, mat.ncol, mat.nrow)
    elif (dest.nrow, dest.ncol) != (mat.ncol, mat.nrow):
        raise ValueError(f"bsr_set_transpose: with topology={topology!r} dest must have {mat.ncol} x {mat.nrow} "
                         f"blocks, it has {dest.nrow} x {dest.ncol}")
    _assemble(dest, [_matrix_part(mat, transpose=True)], topology, (scale, 1.0))


def bsr_transposed(A: Any) -> BsrMatrix:
    """A new matrix, the transpose of `A` (a matrix or scaled expression)."""
    mat, _ = _as_matrix(A)
    br, bc = mat.block_shape
    block = mat.scalar_type if (bc, br) == (1, 1) else T.matrix((bc, br), mat.scalar_type)
    dest = bsr_zeros(mat.ncol, mat.nrow, block, mat.device)
    dest.values.requires_grad = mat.requires_grad
    bsr_set_transpose(dest, A)
    return dest


# -- diagonals ----------------------------------------------------------------------------------------------------

def bsr_get_diag(A: Any, out: array | None = None) -> array:
    """The diagonal blocks of `A` (min(nrow, ncol) of them, zero where none is stored), in `out` when given
    (an array of A's block type with at least that many entries) or a new array."""
    mat, scale = _as_matrix(A)
    n = min(mat.nrow, mat.ncol)
    if out is None:
        out = empty(n, dtype=mat.dtype, device=mat.device)
    elif not isinstance(out, array) or out.dtype != mat.dtype or out.ndim != 1 or out.shape[0] < n:
        raise ValueError(f"bsr_get_diag: out must be a 1-D array of at least {n} {T.type_name(mat.dtype)} blocks, "
                         f"got {out!r}")
    elif out.device != mat.device:
        raise ValueError(f"bsr_get_diag: out is on {out.device}, A on {mat.device}")
    if n:
        launch(_get_diag, n, inputs=[mat.offsets, mat.row_counts, mat.columns, _flat(mat.values), _flat(out),
                                     mat.block_size, mat.scalar_type(scale)], device=mat.device)
    return out


def bsr_set_diag(A: BsrMatrix, diag: Any, rows_of_blocks: int | None = None, cols_of_blocks: int | None = None) -> None:
    """Make `A` block diagonal: `diag` is an array of A's block type (one block per diagonal entry), one
    block value for all of them, or None (values left unset). The shape is (rows_of_blocks, cols_of_blocks)
    (either one giving both), else diag's length (square), else A's."""
    if rows_of_blocks is None:
        rows_of_blocks = cols_of_blocks
    if cols_of_blocks is None:
        cols_of_blocks = rows_of_blocks
    if rows_of_blocks is None:
        rows_of_blocks, cols_of_blocks = (diag.shape[0],) * 2 if isinstance(diag, array) else (A.nrow, A.ncol)
    n = min(int(rows_of_blocks), int(cols_of_blocks))
    if isinstance(diag, array) and (diag.dtype != A.dtype or diag.ndim != 1 or diag.shape[0] < n):
        raise ValueError(f"bsr_set_diag: diag must be a 1-D array of at least {n} {T.type_name(A.dtype)} blocks, got "
                         f"{diag!r}")
    bsr_set_zero(A, rows_of_blocks, cols_of_blocks)
    offsets = np.minimum(np.arange(A.nrow + 1), n)
    _upload(A.offsets, offsets)
    _ensure_fits(A, n)
    _upload(A.columns, np.arange(n))
    A._topology_changed()
    if isinstance(diag, array):
        if n:
            A.values[:n].assign(diag[:n])
    elif diag is not None and n:
        A.values[:n].fill_(diag)


def bsr_diag(diag: Any = None, rows_of_blocks: int | None = None, cols_of_blocks: int | None = None,
             block_type: Any = None, device: Any = None) -> BsrMatrix:
    """A new block-diagonal matrix from an array of blocks (its type and device give the matrix's) or one
    block value repeated (see `bsr_set_diag` for the shape); `block_type` when diag is None."""
    if isinstance(diag, array):
        block_type, device = diag.dtype, diag.device
    elif diag is not None:
        block_type = T.python_value_type(diag) if not isinstance(diag, float) else T.float32
    elif block_type is None:
        raise ValueError("bsr_diag: give diag or block_type")
    if rows_of_blocks is None and cols_of_blocks is None and not isinstance(diag, array):
        raise ValueError("bsr_diag: rows_of_blocks is needed when diag is not an array")
    A = bsr_zeros(0, 0, block_type, device)
    A.values.requires_grad = isinstance(diag, array) and diag.requires_grad
    bsr_set_diag(A, diag, rows_of_blocks, cols_of_blocks)
    return A


def _identity_block(A: BsrMatrix) -> Any:
    br, bc = A.block_shape
    if br != bc:
        raise ValueError(f"the identity needs square blocks, got {T.type_name(A.dtype)}")
    return 1.0 if not T.is_matrix(A.dtype) else A.dtype(*np.eye(br).ravel())


def bsr_set_identity(A: BsrMatrix, rows_of_blocks: int | None = None) -> None:
    """Make `A` the identity (square, of `rows_of_blocks` blocks when given)."""
    bsr_set_diag(A, _identity_block(A), rows_of_blocks, rows_of_blocks)


def bsr_identity(rows_of_blocks: int, block_type: Any, device: Any = None) -> BsrMatrix:
    """The identity as a square matrix of `rows_of_blocks` blocks of the square `block_type`."""
    A = bsr_zeros(0, 0, block_type, device)
    bsr_set_identity(A, rows_of_blocks)
    return A


# -- arithmetic ---------------------------------------------------------------------------------------------------

def bsr_scale(x: Any, alpha: Any) -> BsrMatrix:
    """x := alpha * x (a scaled expression's matrix, scale folded in), returned."""
    mat, scale = _as_matrix(x)
    alpha = alpha * scale
    if mat.nnz and alpha != 1.0:
        launch(_scale, mat.nnz * mat.block_size, inputs=[_flat(mat.values), mat.scalar_type(alpha)],
               device=mat.device)
    return mat


class _WorkArrays:
    """Device buffers an operation keeps between calls."""

    def __init__(self) -> None:
        self._plan: tuple | None = None


class bsr_axpy_work_arrays(_WorkArrays):  # noqa: N801 - Warp's name
    """Storage `bsr_axpy` may reuse between calls."""


class bsr_mm_work_arrays(_WorkArrays):  # noqa: N801 - Warp's name
    """Storage `bsr_mm` reuses between calls: with `reuse_topology=True`, the product structure of the
    previous call."""


def bsr_axpy(x: Any, y: BsrMatrix | None = None, alpha: Any = 1.0, beta: Any = 1.0,
             work_arrays: bsr_axpy_work_arrays | None = None, topology: str | None = None) -> BsrMatrix:
    """y := alpha * x + beta * y (a new y, treated as zero, when none is given), returned; x (a matrix or
    scaled expression) and y may alias. Topology policies as in `bsr_assign`; `work_arrays` is accepted for
    Warp's signature (the structure is rebuilt each call)."""
    topology = _topology(topology)
    mat, scale = _as_matrix(x)
    alpha = alpha * scale
    if y is None:
        y = bsr_zeros(mat.nrow, mat.ncol, mat.dtype, mat.device)
        y.values.requires_grad = mat.requires_grad
        beta = 0.0
    if (y.nrow, y.ncol) != (mat.nrow, mat.ncol):
        raise ValueError(f"Matrices must have the same number of rows and columns, got {mat.nrow} x {mat.ncol} and "
                         f"{y.nrow} x {y.ncol} blocks")
    if y.block_shape != mat.block_shape:
        raise ValueError(f"Matrices must have the same block shape, got {mat.block_shape} and {y.block_shape}")
    _assemble(y, [_matrix_part(mat), _matrix_part(y)], topology, (alpha, beta))
    return y


def bsr_mm(x: Any, y: Any, z: BsrMatrix | None = None, alpha: Any = 1.0, beta: Any = 0.0,
           work_arrays: bsr_mm_work_arrays | None = None, reuse_topology: bool = False, tile_size: int = 0,
           max_new_nnz: int | None = None, topology: str | None = None) -> BsrMatrix:
    """z := alpha * x @ y + beta * z (a new z, treated as zero, when none is given), returned; x, y (matrices
    or scaled expressions) and z may alias. `max_new_nnz` caps the blocks the product adds to z (extra ones
    are dropped, with a message); `reuse_topology` reuses the structure `work_arrays` kept from a previous
    call on structurally identical matrices. `tile_size` is accepted for Warp's signature. Topology policies
    as in `bsr_assign`."""
    topology = _topology(topology)
    xm, xs = _as_matrix(x)
    ym, ys = _as_matrix(y)
    alpha = alpha * xs * ys
    if xm.block_shape[1] != ym.block_shape[0]:
        raise ValueError(f"Incompatible block sizes for matrix multiplication: {xm.block_shape} and {ym.block_shape}")
    if xm.ncol != ym.nrow:
        raise ValueError(f"Incompatible number of rows/columns for matrix multiplication: {xm.nrow} x {xm.ncol} and "
                         f"{ym.nrow} x {ym.ncol} blocks")
    if xm.scalar_type != ym.scalar_type:
        raise ValueError(f"bsr_mm: x and y must have the same scalar type, got {T.type_name(xm.scalar_type)} and "
                         f"{T.type_name(ym.scalar_type)}")
    shape, st = (xm.block_shape[0], ym.block_shape[1]), xm.scalar_type
    if z is None:
        z = bsr_zeros(xm.nrow, ym.ncol, st if shape == (1, 1) else T.matrix(shape, st), xm.device)
        z.values.requires_grad = xm.requires_grad or ym.requires_grad
        beta = 0.0
    if z.block_shape != shape or (z.nrow, z.ncol) != (xm.nrow, ym.ncol) or z.scalar_type != st:
        raise ValueError(f"bsr_mm: z must have {xm.nrow} x {ym.ncol} blocks of {shape} {T.type_name(st)}, got "
                         f"{z.nrow} x {z.ncol} blocks of {z.block_shape} {T.type_name(z.scalar_type)}")
    if reuse_topology:
        if topology != "compact":
            raise ValueError("bsr_mm: reuse_topology is only supported with topology='compact'")
        if work_arrays is None or work_arrays._plan is None:
            raise ValueError("bsr_mm: reuse_topology=True needs the work_arrays of a previous bsr_mm call")
        pair_starts, pair_x, pair_y, dst_slot = work_arrays._plan
        old_slot = dst_slot
        old = _flat(z.values.clone()) if beta != 0.0 else _flat(z.values)
    else:
        pair_starts, pair_x, pair_y, dst_slot, old_slot, old = _mm_structure(xm, ym, z, beta, topology, max_new_nnz)
        if work_arrays is not None:
            work_arrays._plan = (pair_starts, pair_x, pair_y, dst_slot)
    if beta == 0.0:
        old_slot = _index_array(np.full(dst_slot.shape[0], -1), z.device)
    xv, yv = _flat(xm.values), _flat(ym.values)
    if any(v._storage is z.values._storage for v in (xv, yv)):
        z.values = zeros(z.values.shape[0], dtype=z.dtype, device=z.device, requires_grad=z.values.requires_grad)
    count = dst_slot.shape[0] * z.block_size
    if count:
        launch(_mm, count, inputs=[xv, yv, pair_starts, pair_x, pair_y, old, old_slot, dst_slot, _flat(z.values),
                                   st(alpha), st(beta), shape[0], xm.block_shape[1], shape[1]], device=z.device)
    return z


def _vector_view(v: Any, count: int, st: Any, which: str) -> array:
    if not isinstance(v, array) or T.elem_scalar(v.dtype) != st or v.size * (
            int(np.prod(v.dtype._shape_)) if T.is_composite(v.dtype) else 1) != count or v.ndim > 2:
        raise ValueError(f"Incompatible '{which}' vector for bsr_mv: expected {count} {T.type_name(st)} values (as "
                         f"scalars or vectors), got {v!r}")
    if not v.is_contiguous and (v.ndim != 1 or T.is_composite(v.dtype)):
        raise ValueError(f"Incompatible '{which}' vector for bsr_mv: the array must be contiguous")
    return _flat(v) if v.is_contiguous else v


def bsr_mv(A: Any, x: array, y: array | None = None, alpha: Any = 1.0, beta: Any = 0.0, transpose: bool = False,
           work_buffer: array | None = None, tile_size: int = 0) -> array:
    """y := alpha * A @ x + beta * y (A transposed when `transpose`), returned (a new y when none is given;
    then beta is ignored). x and y are 1-D arrays of scalars or of vectors of the block extents; they may
    alias (x is then first copied to `work_buffer`, or a temporary). `tile_size` is accepted for Warp's
    signature."""
    mat, scale = _as_matrix(A)
    alpha = alpha * scale
    br, bc = mat.block_shape
    nrow, ncol, ybr, xbc = (mat.ncol, mat.nrow, bc, br) if transpose else (mat.nrow, mat.ncol, br, bc)
    st, dev = mat.scalar_type, mat.device
    if y is None:
        y = empty(nrow, dtype=st if ybr == 1 else T.vector(ybr, st), device=dev,
                  requires_grad=isinstance(x, array) and x.requires_grad)
        beta = 0.0
    for v, which in ((x, "x"), (y, "y")):
        if isinstance(v, array) and v.device != dev:
            raise ValueError(f"bsr_mv: A, x and y must be on the same device, got {dev} and {v.device} ({which})")
    yv = _vector_view(y, nrow * ybr, st, "y")
    if isinstance(x, array) and x.ptr is not None and x.ptr == y.ptr:
        if work_buffer is None:
            work_buffer = empty(y.shape, dtype=y.dtype, device=dev)
        elif work_buffer.dtype != y.dtype or work_buffer.size < y.size:
            raise ValueError(f"bsr_mv: work_buffer must hold at least {y.size} {T.type_name(y.dtype)}, got "
                             f"{work_buffer!r}")
        xv = _flat(work_buffer)[:yv.shape[0]]
        xv.assign(yv)
        if xv.shape[0] != ncol * xbc:
            raise ValueError(f"Incompatible 'x' vector for bsr_mv: expected {ncol * xbc} values, got {xv.shape[0]}")
    else:
        xv = _vector_view(x, ncol * xbc, st, "x")
    if transpose:
        if beta == 0.0:
            yv.zero_()
        elif beta != 1.0:
            launch(_scale, yv.shape[0], inputs=[yv, st(beta)], device=dev)
        if alpha != 0.0 and mat.nnz:
            launch(_mv_transpose, mat.nnz * bc, inputs=[mat.nrow, mat.offsets, mat.row_counts, mat.columns,
                                                        _flat(mat.values), xv, yv, st(alpha), br, bc], device=dev)
    elif nrow * br:
        launch(_mv, nrow * br, inputs=[mat.offsets, mat.row_counts, mat.columns, _flat(mat.values), xv, yv, st(alpha),
                                       st(beta), br, bc], device=dev)
    return y
