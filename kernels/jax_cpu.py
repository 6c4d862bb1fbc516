"""The XLA FFI targets: the handler library (native/jax_ffi.cpp) that runs packed kernel launches on the CPU
runtime's thread pool, and on the stream XLA hands over on CUDA devices; built by the host compiler against
`jax.ffi.include_dir()` on first use (cached on disk by content, jaxlib's version included) and registered as
target `loomwork_launch` of XLA's CPU platform, and of its CUDA platform where a CUDA driver is present."""

from __future__ import annotations

import ctypes
from functools import cache
from typing import Any

from . import build, config, cuda
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
    lib.lw_jax_stream.argtypes, lib.lw_jax_stream.restype = [ctypes.c_void_p], ctypes.c_void_p
    jax.ffi.register_ffi_target(TARGET, jax.ffi.pycapsule(lib.lw_jax_launch), platform="cpu")
    drv = cuda.driver()
    if drv is not None and cuda.device_count():
        lib.lw_jax_init_cuda.argtypes = [ctypes.c_void_p] * 5
        lib.lw_jax_init_cuda(_address(rt.lw_cuda_launch), _address(drv.cuMemsetD8Async),
                             _address(drv.cuMemcpyDtoHAsync_v2), _address(drv.cuStreamSynchronize),
                             _address(drv.cuStreamGetCtx))
        jax.ffi.register_ffi_target(TARGET, jax.ffi.pycapsule(lib.lw_jax_launch_cuda), platform="CUDA")
    return lib
