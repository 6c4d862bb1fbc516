"""`LinearOperator`, the linear map the solvers of `loomwork.optim.linear` take (Warp's class): a shape, a
coefficient type, a device and a `matvec`. Matrices become operators in `linear.aslinearoperator`;
preconditioners (`block_jacobi`, `fsai`) are operators too."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from loomwork.kernels import types as T
from loomwork.kernels.array import array
from loomwork.kernels.device import Device, get_device


class LinearOperator:
    """A linear map for the solvers: `matvec(x, y, z, alpha, beta)` stores `alpha * (A @ x) + beta * y`
    in `z`. `shape` is (rows, columns), `dtype` the type of its coefficients, `device` where it runs."""

    def __init__(self, shape: tuple[int, int], dtype: Any, device: Device, matvec: Callable,
                 batch_offsets: array | None = None, max_batch_length: int | None = None) -> None:
        if max_batch_length is not None:
            if batch_offsets is None:
                raise ValueError("LinearOperator: max_batch_length requires batch_offsets")
            if max_batch_length < 0:
                raise ValueError("LinearOperator: max_batch_length must be non-negative")
        self._shape = tuple(shape)
        self._dtype = dtype
        self._device = get_device(device)
        self._matvec = matvec
        self._batch_offsets = batch_offsets
        self._max_batch_length = max_batch_length

    @property
    def shape(self) -> tuple[int, ...]:
        """(rows, columns); an operator made from a 1-D array of diagonal values keeps that array's 1-D shape."""
        return self._shape

    @property
    def dtype(self) -> Any:
        return self._dtype

    @property
    def device(self) -> Device:
        return self._device

    @property
    def matvec(self) -> Callable:
        """`matvec(x, y, z, alpha, beta)`: z = alpha * (A @ x) + beta * y."""
        return self._matvec

    @property
    def scalar_type(self) -> Any:
        """The scalar type of the coefficients (the dtype itself for scalars)."""
        return T.elem_scalar(self._dtype)

    @property
    def batch_offsets(self) -> array | None:
        """Independent subproblems the solvers treat apart (int32, B + 1 entries): subproblem i is the scalar
        dofs batch_offsets[i] to batch_offsets[i + 1]; dofs outside every range are left alone. None for one
        system."""
        return self._batch_offsets

    @property
    def batch_count(self) -> int:
        """The number of subproblems (1 without `batch_offsets`)."""
        return 1 if self._batch_offsets is None else self._batch_offsets.shape[0] - 1

    @property
    def max_batch_length(self) -> int | None:
        """An upper bound on the dofs of any subproblem, if given (checked by the solvers)."""
        return self._max_batch_length
