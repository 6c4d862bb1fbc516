"""Settings users change as `wp.config.<name> = value`; read where a build or launch starts and passed on."""

from __future__ import annotations

import os

#: where compiled modules are kept; the environment variable LOOMWORK_CACHE_DIR overrides it
kernel_cache_dir: str = os.environ.get("LOOMWORK_CACHE_DIR") or os.path.join(
    os.path.expanduser("~"), ".cache", "loomwork"
)

#: "release" (optimized) or "debug" (bounds-checked array indexing that raises in Python)
mode: str = "release"

#: print what is built and loaded, and how long it took
verbose: bool = False

#: print each kernel's typed IR and each module's generated source when it is built
print_ir: bool = False
print_source: bool = False

#: compile every module's CUDA source with NVRTC too, even where no GPU runs it (the test suite sets this)
verify_cuda: bool = False

#: the GPU architecture NVRTC targets when there is no device to ask (compute capability x 10)
verify_cuda_arch: int = 75

#: let the C++ compiler reorder floating-point math (-ffast-math)
fast_math: bool = False

#: CPU launches with fewer threads than this run on the calling thread only
cpu_serial_threshold: int = 8192

#: CPU worker threads (None: one per core); set before the first launch
cpu_threads: int | None = None

#: range loops with constant bounds and at most this many iterations (nested: in all) are unrolled, so the
#: loop variable is a constant in each copy and the adjoint runs straight-line code; 0 turns it off
max_unroll: int = 16

#: build each kernel's adjoint (reverse-mode) kernel too; a kernel's own enable_backward overrides this
enable_backward: bool = True
