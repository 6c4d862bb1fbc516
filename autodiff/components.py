"""Arrays seen component by component, for kernels that treat every scalar of an array alike.

An optimizer step or a Krylov update does the same thing to each scalar of an array, whatever the
array's dtype (float32, vec3d, mat22h...). `component_view` gives such kernels one shape to index: the
array's own dimensions followed by one dimension over the dtype's scalar components, in the same memory
(any strides; writes through it are the array's writes). `cast_like` converts a value to the scalar
type of another inside generic kernels, which have no `type(x)(...)` to spell it.
"""

from __future__ import annotations

import numpy as np

from loomwork.kernels import types as T
from loomwork.kernels.array import array
from loomwork.kernels.functions import func


def scalar_count(dtype: object) -> int:
    """The number of scalar components of one element of `dtype` (1 for a scalar)."""
    return int(np.prod(dtype._shape_)) if T.is_composite(dtype) else 1


def component_view(a: array) -> array:
    """`a` with one more, innermost dimension over its dtype's scalar components: an array of shape
    `a.shape + (components,)` and of `a`'s scalar type, sharing `a`'s memory."""
    st = T.elem_scalar(a.dtype)
    return array(ptr=a.ptr or 0, dtype=st, shape=(*a.shape, scalar_count(a.dtype)),
                 strides=(*a.strides, T.type_size(st)), device=a.device, owner=a)


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
