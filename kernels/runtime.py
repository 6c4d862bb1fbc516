"""The CPU runtime library: a process-wide thread pool that runs kernel launches (built once, cached)."""

from __future__ import annotations

import ctypes
from functools import cache

from . import build, config
from .device import cpu_count


def runtime_loaded() -> bool:
    """Whether the runtime is already loaded in this process."""
    return cpu_runtime.cache_info().currsize > 0


@cache
def cpu_runtime() -> ctypes.CDLL:
    """Build (first use only) and load the runtime; its `lw_launch` runs a kernel's range function."""
    source = (build.NATIVE_DIR / "runtime.cpp").read_text()
    lib_path = build.build_cpu(source, "runtime", config.kernel_cache_dir, debug=False, fast_math=False,
                               verbose=config.verbose, what="the loomwork CPU runtime")
    lib = ctypes.CDLL(str(lib_path))
    lib.lw_launch.restype = None  # no argtypes: its one argument is a bytes object, passed as char*
    lib.lw_set_num_threads.argtypes = [ctypes.c_int]
    lib.lw_get_num_threads.restype = ctypes.c_int
    lib.lw_zero.argtypes = [ctypes.c_void_p, ctypes.c_longlong]
    lib.lw_zero.restype = None
    lib.lw_set_num_threads(int(config.cpu_threads or cpu_count()))
    return lib


@cache
def utils_library() -> ctypes.CDLL:
    """The native loomwork.utils routines (built on first use), running on the runtime's thread pool."""
    rt = cpu_runtime()
    source = (build.NATIVE_DIR / "utils.cpp").read_text()
    lib_path = build.build_cpu(source, "utils", config.kernel_cache_dir, debug=False, fast_math=False,
                               verbose=config.verbose, what="the loomwork.utils routines")
    lib = ctypes.CDLL(str(lib_path))
    parallel_for = ctypes.cast(rt.lw_parallel_for, ctypes.c_void_p).value
    lib.lw_utils_init.argtypes = [ctypes.c_void_p, ctypes.c_int]
    lib.lw_utils_init(parallel_for, rt.lw_get_num_threads())
    p, n = ctypes.c_void_p, ctypes.c_longlong
    for name in ("lw_sum_f32", "lw_sum_f64"):
        getattr(lib, name).argtypes, getattr(lib, name).restype = [p, n], ctypes.c_double
    for name in ("lw_dot_f32", "lw_dot_f64"):
        getattr(lib, name).argtypes, getattr(lib, name).restype = [p, p, n], ctypes.c_double
    for name in ("lw_scan_f32", "lw_scan_f64", "lw_scan_i32"):
        getattr(lib, name).argtypes, getattr(lib, name).restype = [p, p, n, ctypes.c_int], None
    for name in ("lw_radix_sort_i32", "lw_radix_sort_f32"):
        getattr(lib, name).argtypes, getattr(lib, name).restype = [p, p, p, p, n], None
    return lib
