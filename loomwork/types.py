"""`wp.types`: the type factories and type classes under Warp's module name."""

from loomwork.kernels.array import array  # noqa: F401
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
