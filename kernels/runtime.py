"""The CPU runtime library: a process-wide thread pool that runs kernel launches (built once, cached)."""

from __future__ import annotations

import ctypes
from functools import cache

from . import build, config


@cache
def cpu_runtime() -> ctypes.CDLL:
    """Build (first use only) and load the runtime; its `lw_launch` runs a kernel's range function."""
    source = (build.NATIVE_DIR / "runtime.cpp").read_text()
    lib_path = build.build_cpu(source, "runtime", config.kernel_cache_dir, debug=False, fast_math=False,
                               verbose=config.verbose, what="the loomwork CPU runtime")
    lib = ctypes.CDLL(str(lib_path))
    lib.lw_launch.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_longlong, ctypes.c_longlong]
    lib.lw_launch.restype = None
    lib.lw_set_num_threads.argtypes = [ctypes.c_int]
    lib.lw_get_num_threads.restype = ctypes.c_int
    if config.cpu_threads:
        lib.lw_set_num_threads(int(config.cpu_threads))
    return lib
