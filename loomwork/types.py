"""`wp.types`: the type factories, type classes and type queries under Warp's module name.

`type_is_*` ask about a type (`wp.vec3`, `float`, `wp.array(dtype=float)`); `is_*` about a value
(`wp.vec3()`, `1.0`, an array).
"""

from __future__ import annotations

import builtins
from typing import Any

import numpy as np

from loomwork.kernels import types as _T
from loomwork.kernels.array import array, indexedarray
from loomwork.kernels.types import (  # noqa: F401
    MatrixType,
    QuaternionType,
    ScalarType,
    TransformType,
    VectorType,
    matrix,
    quaternion,
    scalar_types,
    transformation,
    vector,
)

_PY_SCALARS = {builtins.float: _T.float32, builtins.int: _T.int32, builtins.bool: _T.bool_}


def _normalized(t: Any) -> Any:
    return _PY_SCALARS.get(t, t) if isinstance(t, type) else t


def type_is_scalar(t: Any) -> bool:
    """Whether `t` is a scalar type (`float`, `int`, `bool` or a loomwork scalar class)."""
    return _T.is_scalar(_normalized(t))


def type_is_int(t: Any) -> bool:
    """Whether `t` is an integer scalar type (`int`, `wp.int8` ... `wp.uint64`; not `bool`)."""
    return _T.is_int(_normalized(t))


def type_is_float(t: Any) -> bool:
    """Whether `t` is a floating-point scalar type (`float`, `wp.float16`, `wp.bfloat16`, ...)."""
    return _T.is_float(_normalized(t))


def type_is_vector(t: Any) -> bool:
    """Whether `t` is a vector type (quaternions and transforms are their own kinds)."""
    return _T.is_vector(t) and not (_T.is_quat(t) or _T.is_transform(t))


def type_is_matrix(t: Any) -> bool:
    return _T.is_matrix(t)


def type_is_quaternion(t: Any) -> bool:
    return _T.is_quat(t)


def type_is_transformation(t: Any) -> bool:
    return _T.is_transform(t)


def type_is_composite(t: Any) -> bool:
    """Whether `t` is a vector, matrix, quaternion or transform type."""
    return _T.is_composite(t)


def type_is_struct(t: Any) -> bool:
    return bool(_T.is_struct_type(t))


def type_is_value(t: Any) -> bool:
    """Whether values of `t` are passed by value in kernels: scalars and composites."""
    return type_is_scalar(t) or type_is_composite(t)


def type_is_array(t: Any) -> bool:
    """Whether `t` is an array type: the class, or an annotation such as `wp.array(dtype=float)`."""
    return isinstance(t, array | indexedarray) or (isinstance(t, type) and issubclass(t, array | indexedarray))


def type_is_tile(t: Any) -> bool:
    """Always False: loomwork has no tile types."""
    return False


def type_size(t: Any) -> int:
    """Scalar components in one value of `t` (9 for `mat33`, 1 for scalars and structs)."""
    return int(np.prod(t._shape_)) if _T.is_composite(t) else 1


def type_size_in_bytes(t: Any) -> int:
    """Bytes one value of `t` occupies in an array."""
    return _T.type_size(_T.normalize_dtype(t))


def type_ctype(t: Any) -> Any:
    """The ctypes type of a scalar type; composites are their own ctypes layout."""
    t = _normalized(t)
    return t if _T.is_composite(t) or _T.is_struct_type(t) else t._ctype


def type_repr(t: Any) -> str:
    """A type's name as written in code (`float`, `vec3f`, `array(ndim=2, dtype=float32)`, `module.Struct`)."""
    if t in _PY_SCALARS:
        return t.__name__
    if isinstance(t, array | indexedarray):
        kind = "indexedarray" if isinstance(t, indexedarray) else "array"
        return f"{kind}(ndim={t.ndim}, dtype={type_repr(t.dtype)})"
    if _T.is_struct_type(t):
        return f"{t.__module__}.{t.__qualname__}"
    return _T.type_name(t)


def types_equal(a: Any, b: Any) -> bool:
    """Whether two types are the same kernel type (`float` and `wp.float32`; arrays by kind, dtype and ndim)."""
    if type_is_array(a) or type_is_array(b):
        return (isinstance(a, array | indexedarray) and isinstance(b, array | indexedarray) and type(a) is type(b)
                and a.ndim == b.ndim and types_equal(a.dtype, b.dtype))
    return _normalized(a) is _normalized(b)


def is_scalar(x: Any) -> bool:
    """Whether `x` is a scalar value (a Python or NumPy number or a loomwork scalar; not a bool)."""
    return is_int(x) or is_float(x)


def is_int(x: Any) -> bool:
    return (isinstance(x, int | np.integer) and not isinstance(x, builtins.bool)) or (
        isinstance(x, ScalarType) and type(x).is_int)


def is_float(x: Any) -> bool:
    return isinstance(x, builtins.float | np.floating) or (isinstance(x, ScalarType) and type(x).is_float)


def is_value(x: Any) -> bool:
    """Whether `x` is a value a kernel takes by value: a scalar, a bool or a composite."""
    return isinstance(x, builtins.bool | np.bool_) or is_scalar(x) or isinstance(x, ScalarType) or is_composite(x)


def is_vector(x: Any) -> bool:
    return type_is_vector(type(x))


def is_matrix(x: Any) -> bool:
    return type_is_matrix(type(x))


def is_quaternion(x: Any) -> bool:
    return type_is_quaternion(type(x))


def is_transformation(x: Any) -> bool:
    return type_is_transformation(type(x))


def is_composite(x: Any) -> bool:
    return type_is_composite(type(x))


def is_struct(x: Any) -> bool:
    return type_is_struct(type(x))


def is_array(x: Any) -> bool:
    return isinstance(x, array | indexedarray)


def is_tile(x: Any) -> bool:
    """Always False: loomwork has no tiles."""
    return False

