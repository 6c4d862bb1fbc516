"""Arrays seen as their scalars, for kernels that treat every scalar of an array alike.

An optimizer step or a Krylov update does the same thing to each scalar of an array, whatever the
array's dtype (float32, vec3d, mat22h...). `scalar_view` gives such kernels the scalars of a contiguous
array as one flat dimension, in the same memory (writes through it are the array's writes), so they run
as simple 1-D loops. `cast_like` converts a value to the scalar type of another inside generic kernels,
which have no `type(x)(...)` to spell it.
"""

from __future__ import annotations

import numpy as np

from loomwork.kernels import types as T
from loomwork.kernels.array import array
from loomwork.kernels.functions import func


def scalar_count(dtype: object) -> int:
    """The number of scalar components of one element of `dtype` (1 for a scalar)."""
    return int(np.prod(dtype._shape_)) if T.is_composite(dtype) else 1


def scalar_view(a: array) -> array:
    """A contiguous array's scalars: shape `a.shape[:-1] + (a.shape[-1] * components,)`, of `a`'s scalar
    type, sharing `a`'s memory. A strided 1-D array of scalars is returned as it is."""
    if not a.is_contiguous:
        if a.ndim == 1 and not T.is_composite(a.dtype):
            return a
        raise ValueError(f"expected a contiguous array, got a strided view of shape {a.shape} "
                         f"({T.type_name(a.dtype)})")
    shape = (*a.shape[:-1], a.shape[-1] * scalar_count(a.dtype)) if a.ndim else (scalar_count(a.dtype),)
    return array(ptr=a.ptr or 0, dtype=T.elem_scalar(a.dtype), shape=shape, device=a.device, owner=a)


def matvec_views(what: str, st: object, size: int, *vectors: object) -> list[array]:
    """The scalar views of a matvec's `x`, `y`, `z` (in that order): each must be a contiguous 1-D array of
    `size` scalars of type `st` (or of vectors holding as many); a ValueError names `what` and the argument."""
    views = []
    for name, v in zip("xyz", vectors, strict=True):
        if not isinstance(v, array) or T.elem_scalar(v.dtype) is not st or v.ndim != 1 or \
                not v.is_contiguous or scalar_view(v).size != size:
            raise ValueError(f"{what} matvec: {name} must be a contiguous 1-D array of {size} {T.type_name(st)} "
                             f"scalars (or of vectors holding as many), got {v!r}")
        views.append(scalar_view(v))
    return views


def repeat_view(a: array, count: int) -> array:
    """`a` repeated `count` times along a new outer dimension of stride 0 (no copy)."""
    return array(ptr=a.ptr or 0, dtype=a.dtype, shape=(count, *a.shape), strides=(0, *a.strides), device=a.device,
                 owner=a)


@func
def cast_like(x: T.Float, like: T.float16) -> T.float16:
    return T.float16(x)


@func
def cast_like(x: T.Float, like: T.bfloat16) -> T.bfloat16:  # noqa: F811 - an overload by argument type
    return T.bfloat16(x)


@func
def cast_like(x: T.Float, like: T.float32) -> T.float32:  # noqa: F811
    return T.float32(x)


@func
def cast_like(x: T.Float, like: T.float64) -> T.float64:  # noqa: F811
    return T.float64(x)
