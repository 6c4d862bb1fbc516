"""The CPU backend's XLA FFI target: the handler library (native/jax_ffi.cpp) that runs packed kernel launches
on the runtime's thread pool, built by the host compiler against `jax.ffi.include_dir()` on first use (cached on
disk by content, jaxlib's version included) and registered as XLA CPU target `loomwork_launch`."""

from __future__ import annotations

import ctypes
from functools import cache
from typing import Any

from . import build, config
from .cpu import cpu_runtime

TARGET = "loomwork_launch"


def _address(fn: Any) -> int:
    return ctypes.cast(fn, ctypes.c_void_p).value


@cache
def handler_library() -> ctypes.CDLL:
    """The FFI handler library (built on first use, cached on disk by content), initialized with the
    runtime's entries, its launch target registered with XLA's CPU platform."""
    import jax
    import jaxlib

    rt = cpu_runtime()
    source = f"// jaxlib {jaxlib.__version__}\n" + (build.NATIVE_DIR / "jax_ffi.cpp").read_text()
    path = build.build_cpu(source, "jax_ffi", config.kernel_cache_dir, debug=False, fast_math=False,
                           verbose=config.reports_builds(), what="the loomwork XLA FFI handler",
                           extra_flags=f"-I{jax.ffi.include_dir()}")
    lib = ctypes.CDLL(str(path))
    lib.lw_jax_init.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
    lib.lw_jax_init(_address(rt.lw_launch), _address(rt.lw_zero))
    lib.lw_jax_answer_metadata.argtypes, lib.lw_jax_answer_metadata.restype = [ctypes.c_void_p], ctypes.c_int
    lib.lw_jax_error.argtypes, lib.lw_jax_error.restype = [ctypes.c_void_p, ctypes.c_char_p], ctypes.c_void_p
    jax.ffi.register_ffi_target(TARGET, jax.ffi.pycapsule(lib.lw_jax_launch), platform="cpu")
    return lib
