"""Settings users change as `wp.config.<name> = value`; read where a build or launch starts and passed on.

Every name Warp 1.19's `warp.config` has exists here, beside loomwork's own. Each assignment is checked
(SETTINGS): a misspelt value raises at once instead of meaning something else, and so does a name that is
not a setting (with the closest one). A Warp setting that means nothing on loomwork's runtime is accepted
and ignored; NO_EFFECT says why for each."""

from __future__ import annotations

import difflib
import os
import sys
import types
from collections.abc import Callable
from enum import IntEnum
from numbers import Integral
from typing import Any

#: log levels (`wp.config.log_level`; exported as wp.LOG_DEBUG... by kernels/logger.py), as Warp's
LOG_DEBUG, LOG_INFO, LOG_WARNING, LOG_ERROR = 10, 20, 30, 40


class DeterministicMode(IntEnum):
    """How reproducible atomic updates must be (`wp.config.deterministic`)."""

    NOT_GUARANTEED = 0  # threads apply atomics in whatever order they run
    RUN_TO_RUN = 1  # the same results on every run on this machine
    GPU_TO_GPU = 2  # also across GPU architectures (on the CPU: as RUN_TO_RUN)


class LaunchArrayAccessMode(IntEnum):
    """How launches check the device of array arguments (`wp.config.launch_array_access_mode`)."""

    RELAXED = 0
    CHECKED = 1
    STRICT = 2


#: the Warp release whose API this follows (what programs compare to gate features); loomwork.__version__
#: is loomwork's own
version: str = "1.19.0"

#: where compiled modules are kept; the environment variable LOOMWORK_CACHE_DIR overrides it
kernel_cache_dir: str = os.environ.get("LOOMWORK_CACHE_DIR") or os.path.join(
    os.path.expanduser("~"), ".cache", "loomwork"
)

#: reuse builds cached by earlier runs; False builds each module afresh once per process
cache_kernels: bool = True

#: "release" (optimized) or "debug" (bounds-checked array indexing that raises in Python)
mode: str = "release"

#: the compilers' optimization level 0-3 (None: -O3 in release builds, -O1 in debug builds; for CUDA it goes
#: to ptxas)
optimization_level: int | None = None

#: more flags for the CPU compiler (the system g++ or clang++), split like a shell would; "" drops -march=native
#: (a build for any CPU of this architecture); None: the defaults only
cpu_compiler_flags: str | None = None

#: print what is built and loaded, and how long it took (log_level = LOG_DEBUG does the same)
verbose: bool = False

#: messages below this level are not printed: LOG_DEBUG prints what `verbose` prints
log_level: int = LOG_INFO

#: print each launch: kernel, grid, device and arguments
print_launches: bool = False

#: check that every float in the arrays a launch reads is finite before it and in those it writes after it;
#: a NaN or infinity raises KernelRuntimeError naming the kernel and the argument (host-accessible arrays)
verify_fp: bool = False

#: print each kernel's typed IR and each module's generated source when it is built
print_ir: bool = False
print_source: bool = False

#: keep `#line` directives (Python file:line) in generated code, so compiler errors, debuggers and CUDA line
#: information point at Python
line_directives: bool = True

#: compile every module's CUDA source with NVRTC too, even where no GPU runs it (the test suite sets this)
verify_cuda: bool = False

#: the GPU architecture NVRTC targets when there is no device to ask (compute capability x 10)
verify_cuda_arch: int = 75

#: what NVRTC produces: "cubin" (None: the default) or "ptx"
cuda_output: str | None = None

#: the architecture PTX is generated for (None: verify_cuda_arch)
ptx_target_arch: int | None = None

#: appended to the NVRTC architecture: "a" (architecture-specific features, sm_90 and up) or "f" (family,
#: sm_100 and up)
cuda_arch_suffix: str | None = None

#: NVRTC's --generate-line-info (CUDA line numbers without debug mode)
lineinfo: bool = False

#: NVRTC writes a Trace Event Format file of each CUDA build into its cache entry (module.trace.json)
compile_time_trace: bool = False

#: let the C++ compiler reorder floating-point math (-ffast-math)
fast_math: bool = False

#: CPU kernels run W consecutive threads per call across SIMD lanes (same results as one at a time) where the
#: kernel allows; False: one thread at a time. `verbose` says which kernels stay scalar, and why
cpu_simd: bool = True

#: CPU launches with fewer threads than this run on the calling thread only (tiled kernels: fewer than two blocks)
cpu_serial_threshold: int = 8192

#: CPU worker threads (None: one per core); a change resizes the pool at the next launch
cpu_threads: int | None = None

#: NOT_GUARANTEED, or a mode in which atomics give the same results every run: CPU launches then run on one
#: thread, in index order
deterministic: DeterministicMode = DeterministicMode.NOT_GUARANTEED

#: range loops with constant bounds and at most this many iterations (nested: in all) are unrolled, so the
#: loop variable is a constant in each copy and the adjoint runs straight-line code; 0 turns it off
max_unroll: int = 16

#: build each kernel's adjoint (reverse-mode) kernel too; a kernel's own enable_backward overrides this
enable_backward: bool = True

#: worker threads wp.force_load builds modules with (0: one at a time; None: up to 4)
load_module_max_workers: int | None = 0

#: set before wp.init(): track every array allocation for the rest of the process (wp.ScopedMemoryTracker)
track_memory: bool = False

#: CPU launches with block_dim > 1 run the threads of each block of a kernel with tiles together, as lanes
#: (x86-64): wp.tid() and wp.block_dim() are a GPU's and tile operations are the block's (wp.tile gathers the
#: lanes' values); False: every block has one lane (Warp's default CPU model)
enable_cpu_blocks: bool = False

# Warp settings loomwork accepts and ignores (NO_EFFECT says why)
quiet: bool = False
verbose_warnings: bool = False
verify_autograd_array_access: bool = False
enable_vector_component_overwrites: bool = False
legacy_scalar_return_types: bool = False
launch_array_access_mode: LaunchArrayAccessMode = LaunchArrayAccessMode.RELAXED
default_grid_stride: bool = True
enable_mathdx_gemm: bool = True
enable_mathdx_solver: bool = True
enable_mathdx_fft: bool = True
enable_tiles_in_stack_memory: bool | None = True
use_precompiled_headers: bool = True
legacy_cpu_linker: bool = False
llvm_cuda: bool = False
enable_graph_capture_module_load_by_default: bool = True
enable_mempools_at_init: bool = True
deterministic_max_records: int = 0
deterministic_debug: bool = False

NO_EFFECT: dict[str, str] = {
    "quiet": "Warp's old switch for its start-up banner; loomwork prints none",
    "verbose_warnings": "loomwork's warnings always name the source location",
    "verify_autograd_array_access": "a wp.Tape always checks for overwritten inputs (Tape(check_overwrites=...))",
    "enable_vector_component_overwrites": "the adjoint handles repeated writes to vector components always",
    "legacy_scalar_return_types": "builtins called from Python return Python int/float/bool (the legacy types) "
                                  "either way",
    "launch_array_access_mode": "every launch refuses an array of another device (STRICT)",
    "default_grid_stride": "generated CUDA entries always loop grid-stride",
    "enable_mathdx_gemm": "tile_matmul is loomwork's own blocked GEMM; MathDx is not used",
    "enable_mathdx_solver": "the tile factorizations and solves are loomwork's own code; MathDx is not used",
    "enable_mathdx_fft": "tile_fft is loomwork's own transform; MathDx is not used",
    "enable_tiles_in_stack_memory": "on the CPU every tile is a value in its block's task (on its stack)",
    "use_precompiled_headers": "CPU builds use no precompiled header",
    "legacy_cpu_linker": "CPU modules are shared libraries the system loader opens, with no JIT linker",
    "llvm_cuda": "CUDA code is compiled with NVRTC only",
    "enable_graph_capture_module_load_by_default": "a module builds at its first launch, inside a graph capture "
                                                   "too (capture_begin(force_module_load=True) builds all first)",
    "enable_mempools_at_init": "no loomwork device allocates from a memory pool",
    "deterministic_max_records": "a bound for the GPU's deterministic record buffers; CPU runs need none",
    "deterministic_debug": "diagnostics of the GPU's deterministic record buffers; CPU runs have none",
}


def _int_at_least(low: int, high: int | None = None) -> Callable[[Any], bool]:
    return lambda v: isinstance(v, Integral) and not isinstance(v, bool) and v >= low and (high is None or v <= high)


def _is_bool(v: Any) -> bool:
    return isinstance(v, bool)


def _one_of(*values: Any) -> Callable[[Any], bool]:
    return lambda v: any(v is x or (isinstance(v, str) and v == x) for x in values)


def _or_none(check: Callable[[Any], bool]) -> Callable[[Any], bool]:
    return lambda v: v is None or check(v)


_BOOL = ("True or False", _is_bool)

#: name -> (what it takes, whether a value is allowed); module options (wp.set_module_options) use these too
SETTINGS: dict[str, tuple[str, Callable[[Any], bool]]] = {
    "version": ("a version string", lambda v: isinstance(v, str)),
    "kernel_cache_dir": ("a folder path (str or os.PathLike)",
                         lambda v: isinstance(v, str | os.PathLike) and os.fspath(v) != ""),
    "cache_kernels": _BOOL,
    "mode": ('"release" or "debug"', _one_of("release", "debug")),
    "optimization_level": ("None or an int from 0 to 3", _or_none(_int_at_least(0, 3))),
    "cpu_compiler_flags": ("None or a string of compiler flags", _or_none(lambda v: isinstance(v, str))),
    "verbose": _BOOL,
    "log_level": ("an int (wp.LOG_DEBUG, wp.LOG_INFO, wp.LOG_WARNING or wp.LOG_ERROR)", _int_at_least(0)),
    "print_launches": _BOOL,
    "verify_fp": _BOOL,
    "print_ir": _BOOL,
    "print_source": _BOOL,
    "line_directives": _BOOL,
    "verify_cuda": _BOOL,
    "verify_cuda_arch": ("a compute capability x 10 (an int such as 75 or 90)", _int_at_least(10)),
    "cuda_output": ('None, "cubin" or "ptx"', _one_of(None, "cubin", "ptx")),
    "ptx_target_arch": ("None or a compute capability x 10 (an int such as 75)", _or_none(_int_at_least(10))),
    "cuda_arch_suffix": ('None, "a" or "f"', _one_of(None, "a", "f")),
    "lineinfo": _BOOL,
    "compile_time_trace": _BOOL,
    "fast_math": _BOOL,
    "cpu_simd": _BOOL,
    "cpu_serial_threshold": ("an int >= 0", _int_at_least(0)),
    "cpu_threads": ("None (one per core) or an int >= 1", _or_none(_int_at_least(1))),
    "deterministic": ("a wp.DeterministicMode", lambda v: isinstance(v, DeterministicMode)),
    "max_unroll": ("an int >= 0", _int_at_least(0)),
    "enable_backward": _BOOL,
    "load_module_max_workers": ("None or an int >= 0", _or_none(_int_at_least(0))),
    "track_memory": _BOOL,
    "enable_cpu_blocks": _BOOL,
    "launch_array_access_mode": ("a wp.config.LaunchArrayAccessMode",
                                 lambda v: isinstance(v, LaunchArrayAccessMode)),
    "enable_tiles_in_stack_memory": ("None, True or False", _or_none(_is_bool)),
    "deterministic_max_records": ("an int >= 0", _int_at_least(0)),
    **{name: _BOOL for name in NO_EFFECT if name not in (
        "launch_array_access_mode", "enable_tiles_in_stack_memory", "deterministic_max_records")},
}

#: the settings a module's build depends on: changing one makes the next launch look for another build
BUILD_SETTINGS = frozenset({
    "kernel_cache_dir", "cache_kernels", "mode", "optimization_level", "cpu_compiler_flags", "line_directives",
    "verify_cuda", "verify_cuda_arch", "cuda_output", "ptx_target_arch", "cuda_arch_suffix", "lineinfo",
    "compile_time_trace", "fast_math", "cpu_simd", "max_unroll", "enable_backward",
})

# Derived from the settings (kept up to date by every assignment), so a launch reads one value, not several:
#: bumped by every assignment to a BUILD_SETTINGS name
build_generation: int = 0
#: what a CPU launch record carries: (serial threshold, pool size (0: one per core)); deterministic mode makes
#: every launch serial (on the calling thread, in index order)
cpu_launch: tuple[int, int] = (cpu_serial_threshold, 0)
#: whether a launch has anything to print or check (print_launches, verify_fp)
launch_hooks: bool = False

_ALWAYS_SERIAL = 1 << 62  # a serial threshold no launch reaches


def _derive() -> None:
    global cpu_launch, launch_hooks
    cpu_launch = (_ALWAYS_SERIAL if deterministic else cpu_serial_threshold, cpu_threads or 0)
    launch_hooks = print_launches or verify_fp


def reports_builds() -> bool:
    """Whether builds and loads are reported (`verbose`, or log_level at LOG_DEBUG)."""
    return verbose or log_level <= LOG_DEBUG


class _Config(types.ModuleType):
    """This module's type: checks each assignment to a setting, and refuses names that are not settings."""

    def __setattr__(self, name: str, value: Any) -> None:
        spec = SETTINGS.get(name)
        if spec is None:
            close = difflib.get_close_matches(name, SETTINGS, n=1)
            hint = f"; did you mean '{close[0]}'?" if close else ""
            raise AttributeError(f"wp.config has no setting '{name}'{hint} (the settings are listed in the "
                                 "README's Settings section)", name=name, obj=self)
        if not spec[1](value):
            raise ValueError(f"wp.config.{name} takes {spec[0]}, got {value!r}")
        super().__setattr__(name, value)
        if name in BUILD_SETTINGS:
            super().__setattr__("build_generation", self.build_generation + 1)
        _derive()


sys.modules[__name__].__class__ = _Config
