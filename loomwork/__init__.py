"""loomwork: differentiable parallel kernels in typed Python, JIT-compiled for CPUs and NVIDIA GPUs.

`import loomwork as wp` gives NVIDIA Warp's public names. This file only re-exports.
"""

from . import types, utils  # wp.types.vector / wp.types.matrix, wp.utils.array_sum, ...
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
    fixedarray,
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
from .kernels.capture import (
    Graph,
    ScopedCapture,
    capture_begin,
    capture_end,
    capture_if,
    capture_launch,
    capture_while,
    is_conditional_graph_supported,
)
from .kernels.config import DeterministicMode
from .kernels.device import (
    Device,
    ScopedDevice,
    get_cuda_device_count,
    get_cuda_devices,
    get_cuda_driver_version,
    get_cuda_supported_archs,
    get_cuda_toolkit_version,
    get_device,
    get_devices,
    is_cpu_available,
    is_cuda_available,
    set_device,
)
from .kernels.errors import (
    CacheError,
    CaptureError,
    CompileError,
    DeviceError,
    KernelError,
    KernelRuntimeError,
    KernelSyntaxError,
    KernelTypeError,
    LaunchError,
    WarpCodegenAttributeError,
    WarpCodegenError,
    WarpCodegenIndexError,
    WarpCodegenKeyError,
    WarpCodegenTypeError,
    WarpCodegenValueError,
)
from .kernels.extensions import publish_into as _publish_into
from .kernels.frontend import adjoint
from .kernels.functions import Function, GradWrapper, func, func_grad, func_native, func_replay, grad
from .kernels.interop import from_dlpack, to_dlpack
from .kernels.jax_bridge import GraphMode as JaxCallableGraphMode
from .kernels.jax_bridge import (
    device_from_jax,
    device_to_jax,
    dtype_from_jax,
    dtype_to_jax,
    from_jax,
    jax_callable,
    jax_kernel,
    to_jax,
)
from .kernels.launch import Launch, launch, launch_tiled, synchronize, synchronize_device
from .kernels.logger import (
    LOG_DEBUG,
    LOG_ERROR,
    LOG_INFO,
    LOG_WARNING,
    Logger,
    ScopedLogger,
    ScopedLogLevel,
    get_logger,
    set_logger,
)
from .kernels.mapping import map  # Warp's name; importing it gives arrays their arithmetic operators
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
from .kernels.memory import Allocator, MemoryKind, ScopedMemoryTracker, print_memory_report
from .kernels.module import (
    Kernel,
    Module,
    force_load,
    get_module,
    get_module_options,
    kernel,
    load_module,
    overload,
    set_module_options,
)
from .kernels.runtime import (
    ScopedAllocator,
    ScopedMempool,
    ScopedMempoolAccess,
    ScopedPeerAccess,
    clear_kernel_cache,
    clear_lto_cache,
    get_device_allocator,
    get_mempool_release_threshold,
    get_mempool_used_mem_current,
    get_mempool_used_mem_high,
    init,
    is_mempool_access_enabled,
    is_mempool_access_supported,
    is_mempool_enabled,
    is_mempool_supported,
    is_peer_access_enabled,
    is_peer_access_supported,
    set_cuda_allocator,
    set_device_allocator,
    set_mempool_access_enabled,
    set_mempool_enabled,
    set_mempool_release_threshold,
    set_peer_access_enabled,
)
from .kernels.stream import (
    TIMING_ALL,
    TIMING_GRAPH,
    TIMING_KERNEL,
    TIMING_KERNEL_BUILTIN,
    TIMING_MEMCPY,
    TIMING_MEMSET,
    Event,
    ScopedStream,
    Stream,
    get_event_elapsed_time,
    get_stream,
    record_event,
    set_stream,
    synchronize_event,
    synchronize_stream,
    wait_event,
    wait_stream,
)
from .kernels.structs import struct
from .kernels.timing import (
    ScopedTimer,
    TimingResult,
    timing_begin,
    timing_end,
    timing_print,
)
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
    "config", "DeterministicMode",
    "array", "array1d", "array2d", "array3d", "array4d", "clone", "copy", "empty", "empty_like",
    "from_numpy", "from_ptr", "full", "full_like", "ones", "ones_like", "zeros", "zeros_like", "Device", "ScopedDevice",
    "get_cuda_device_count", "get_cuda_driver_version", "get_cuda_supported_archs", "get_cuda_toolkit_version",
    "get_device", "get_devices", "is_cpu_available", "is_cuda_available",
    "set_device", "CacheError", "CompileError", "DeviceError", "KernelError", "KernelRuntimeError", "KernelSyntaxError",
    "KernelTypeError", "LaunchError", "launch", "launch_tiled", "synchronize", "synchronize_device", "Function",
    "Kernel", "force_load", "func",
    "kernel", "load_module", "constant", "dtype_from_numpy", "dtype_to_numpy", "quaternion", "transformation",
    "fixedarray", "indexedarray", "indexedarray1d", "indexedarray2d", "indexedarray3d", "indexedarray4d",
    "struct", "overload", "Float", "Int", "Scalar", "set_module_options", "get_module_options", "types",
    "pi", "e", "tau", "inf", "nan", "PI", "HALF_PI", "E", "TAU", "LOG2E", "LOG10E", "LN2", "LN10", "PHI", "INF",
    "NAN", "Tape", "OverwriteError", "adjoint", "func_grad", "func_replay", "grad", "GradWrapper",
    "func_native", "identity", "vector", "matrix", "quat_from_matrix", "quat_slerp", "quat_to_rpy",
    "transform_from_matrix", "transform_to_matrix", "quat_from_euler", "quat_to_euler", "quat_twist",
    "quat_twist_angle", "quat_twist_angle_signed", "transform_compose", "transform_decompose", "transform_twist",
    "transform_wrench", "velocity_at_point", "HashGrid", "hash_grid_query_t", "from_dlpack", "to_dlpack",
    "from_torch", "to_torch", "device_from_torch", "device_to_torch", "dtype_from_torch", "dtype_to_torch",
    "stream_from_torch", "stream_to_torch", "map", "Launch", "from_jax", "to_jax", "device_from_jax", "device_to_jax",
    "dtype_from_jax", "dtype_to_jax", "jax_kernel", "jax_callable", "JaxCallableGraphMode",
    # runtime: graph capture, streams and events, timers, logging, memory, caches, errors under Warp's names
    "Graph", "ScopedCapture", "capture_begin", "capture_end", "capture_if", "capture_launch", "capture_while",
    "is_conditional_graph_supported", "CaptureError", "Stream", "Event", "ScopedStream", "get_stream", "set_stream",
    "synchronize_stream", "synchronize_event", "record_event", "wait_event", "wait_stream", "get_event_elapsed_time",
    "ScopedTimer", "TimingResult", "timing_begin", "timing_end", "timing_print", "TIMING_ALL", "TIMING_GRAPH",
    "TIMING_KERNEL", "TIMING_KERNEL_BUILTIN", "TIMING_MEMCPY", "TIMING_MEMSET", "LOG_DEBUG", "LOG_INFO",
    "LOG_WARNING", "LOG_ERROR", "Logger", "get_logger", "set_logger", "ScopedLogger", "ScopedLogLevel",
    "ScopedMemoryTracker", "print_memory_report", "init", "clear_kernel_cache", "clear_lto_cache",
    "is_mempool_supported", "is_mempool_enabled", "set_mempool_enabled", "set_mempool_release_threshold",
    "get_mempool_release_threshold", "get_mempool_used_mem_current", "get_mempool_used_mem_high",
    "is_mempool_access_supported", "is_mempool_access_enabled", "set_mempool_access_enabled",
    "is_peer_access_supported", "is_peer_access_enabled", "set_peer_access_enabled", "ScopedMempool",
    "ScopedMempoolAccess", "ScopedPeerAccess", "get_module", "Module", "utils", "WarpCodegenError",
    "Allocator", "MemoryKind", "ScopedAllocator", "get_device_allocator", "set_device_allocator",
    "set_cuda_allocator", "get_cuda_devices",
    "WarpCodegenTypeError", "WarpCodegenValueError", "WarpCodegenAttributeError", "WarpCodegenIndexError",
    "WarpCodegenKeyError",
    *_PUBLIC_TYPES,
    *(name for name in _BUILTINS if not name.startswith("_") and name != "print"),  # `import *` keeps Python's
]
_publish_into(globals())  # names extensions export (now and later): wp.<name>, listed in __all__
