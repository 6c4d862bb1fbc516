"""loomwork: differentiable parallel kernels in typed Python, JIT-compiled for CPUs and NVIDIA GPUs.

`import loomwork as wp` gives NVIDIA Warp's public names. This file only re-exports.
"""

from . import types  # noqa: E402  (wp.types.vector / wp.types.matrix)
from .autodiff.tape import OverwriteError, Tape  # importing autodiff registers reverse mode
from .geometry import HashGrid, hash_grid_query_t  # registers the geometry builtins
from .kernels import config
from .kernels.array import (
    array,
    array1d,
    array2d,
    array3d,
    array4d,
    clone,
    copy,
    empty,
    empty_like,
    from_numpy,
    from_ptr,
    full,
    full_like,
    indexedarray,
    indexedarray1d,
    indexedarray2d,
    indexedarray3d,
    indexedarray4d,
    ones,
    ones_like,
    zeros,
    zeros_like,
)
from .kernels.builtins import BUILTINS as _BUILTINS
from .kernels.config import LOG_DEBUG, LOG_ERROR, LOG_INFO, LOG_WARNING, DeterministicMode
from .kernels.device import (
    Device,
    ScopedDevice,
    get_cuda_device_count,
    get_device,
    get_devices,
    is_cpu_available,
    is_cuda_available,
    set_device,
)
from .kernels.errors import (
    CacheError,
    CompileError,
    DeviceError,
    KernelError,
    KernelRuntimeError,
    KernelSyntaxError,
    KernelTypeError,
    LaunchError,
)
from .kernels.extensions import publish_into as _publish_into
from .kernels.frontend import adjoint
from .kernels.functions import Function, func, func_grad, func_native, func_replay
from .kernels.interop import from_dlpack, to_dlpack
from .kernels.launch import launch, synchronize, synchronize_device
from .kernels.mathlib import (
    quat_from_euler,
    quat_from_matrix,
    quat_slerp,
    quat_to_euler,
    quat_to_rpy,
    quat_twist,
    quat_twist_angle,
    quat_twist_angle_signed,
    transform_compose,
    transform_decompose,
    transform_from_matrix,
    transform_to_matrix,
    transform_twist,
    transform_wrench,
    velocity_at_point,
)
from .kernels.module import (
    Kernel,
    force_load,
    get_module_options,
    kernel,
    load_module,
    overload,
    set_module_options,
)
from .kernels.structs import struct
from .kernels.torch_bridge import (
    device_from_torch,
    device_to_torch,
    dtype_from_torch,
    dtype_to_torch,
    from_torch,
    stream_from_torch,
    stream_to_torch,
    to_torch,
)
from .kernels.types import (
    PUBLIC_TYPES as _PUBLIC_TYPES,
)
from .kernels.types import (
    Float,
    Int,
    Scalar,
    constant,
    dtype_from_numpy,
    dtype_to_numpy,
    identity,
    quaternion,
    transformation,
)
from .kernels.types import matrix_value as matrix
from .kernels.types import (
    public_type as _public_type,
)
from .kernels.types import vector_value as vector

__version__ = "0.1.0"

pi = PI = 3.141592653589793
HALF_PI = 1.5707963267948966
e = E = 2.718281828459045
tau = TAU = 6.283185307179586
LOG2E = 1.4426950408889634
LOG10E = 0.4342944819032518
LN2 = 0.6931471805599453
LN10 = 2.302585092994046
PHI = 1.618033988749895  # the golden ratio
inf = INF = float("inf")
nan = NAN = float("nan")

globals().update({name: _public_type(name) for name in _PUBLIC_TYPES})  # float32, vec3, quat, mat33d, ...
globals().update({name: b for name, b in _BUILTINS.items() if not name.startswith("_")})

__all__ = [
    "config", "LOG_DEBUG", "LOG_INFO", "LOG_WARNING", "LOG_ERROR", "DeterministicMode",
    "array", "array1d", "array2d", "array3d", "array4d", "clone", "copy", "empty", "empty_like",
    "from_numpy", "from_ptr", "full", "full_like", "ones", "ones_like", "zeros", "zeros_like", "Device", "ScopedDevice",
    "get_cuda_device_count", "get_device", "get_devices", "is_cpu_available", "is_cuda_available",
    "set_device", "CacheError", "CompileError", "DeviceError", "KernelError", "KernelRuntimeError", "KernelSyntaxError",
    "KernelTypeError", "LaunchError", "launch", "synchronize", "synchronize_device", "Function", "Kernel",
    "force_load", "func",
    "kernel", "load_module", "constant", "dtype_from_numpy", "dtype_to_numpy", "quaternion", "transformation",
    "indexedarray", "indexedarray1d", "indexedarray2d", "indexedarray3d", "indexedarray4d",
    "struct", "overload", "Float", "Int", "Scalar", "set_module_options", "get_module_options", "types",
    "pi", "e", "tau", "inf", "nan", "PI", "HALF_PI", "E", "TAU", "LOG2E", "LOG10E", "LN2", "LN10", "PHI", "INF",
    "NAN", "Tape", "OverwriteError", "adjoint", "func_grad", "func_replay",
    "func_native", "identity", "vector", "matrix", "quat_from_matrix", "quat_slerp", "quat_to_rpy",
    "transform_from_matrix", "transform_to_matrix", "quat_from_euler", "quat_to_euler", "quat_twist",
    "quat_twist_angle", "quat_twist_angle_signed", "transform_compose", "transform_decompose", "transform_twist",
    "transform_wrench", "velocity_at_point", "HashGrid", "hash_grid_query_t", "from_dlpack", "to_dlpack",
    "from_torch", "to_torch", "device_from_torch", "device_to_torch", "dtype_from_torch", "dtype_to_torch",
    "stream_from_torch", "stream_to_torch",
    *_PUBLIC_TYPES,
    *(name for name in _BUILTINS if not name.startswith("_")),
]
_publish_into(globals())  # names extensions export (now and later): wp.<name>, listed in __all__
