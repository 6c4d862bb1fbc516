"""Settings users change as `wp.config.<name> = value`; read where a build or launch starts and passed on.
Each assignment is checked (SETTINGS): a misspelt value raises at once instead of meaning something else."""

from __future__ import annotations

import os
import sys
import types
from collections.abc import Callable
from numbers import Integral
from typing import Any

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

#: CPU worker threads (None: one per core); a change resizes the pool at the next launch
cpu_threads: int | None = None

#: range loops with constant bounds and at most this many iterations (nested: in all) are unrolled, so the
#: loop variable is a constant in each copy and the adjoint runs straight-line code; 0 turns it off
max_unroll: int = 16

#: build each kernel's adjoint (reverse-mode) kernel too; a kernel's own enable_backward overrides this
enable_backward: bool = True


def _int_at_least(low: int) -> Callable[[Any], bool]:
    return lambda v: isinstance(v, Integral) and not isinstance(v, bool) and v >= low


def _is_bool(v: Any) -> bool:
    return isinstance(v, bool)


#: name -> (what it takes, whether a value is allowed); module options (wp.set_module_options) use these too
SETTINGS: dict[str, tuple[str, Callable[[Any], bool]]] = {
    "kernel_cache_dir": ("a folder path (str or os.PathLike)",
                         lambda v: isinstance(v, str | os.PathLike) and os.fspath(v) != ""),
    "mode": ('"release" or "debug"', lambda v: isinstance(v, str) and v in ("release", "debug")),
    "verbose": ("True or False", _is_bool),
    "print_ir": ("True or False", _is_bool),
    "print_source": ("True or False", _is_bool),
    "verify_cuda": ("True or False", _is_bool),
    "verify_cuda_arch": ("a compute capability x 10 (an int such as 75 or 90)", _int_at_least(10)),
    "fast_math": ("True or False", _is_bool),
    "cpu_serial_threshold": ("an int >= 0", _int_at_least(0)),
    "cpu_threads": ("None (one per core) or an int >= 1", lambda v: v is None or _int_at_least(1)(v)),
    "max_unroll": ("an int >= 0", _int_at_least(0)),
    "enable_backward": ("True or False", _is_bool),
}


class _Config(types.ModuleType):
    """This module's type: checks each assignment to a known setting."""

    def __setattr__(self, name: str, value: Any) -> None:
        spec = SETTINGS.get(name)
        if spec is not None and not spec[1](value):
            raise ValueError(f"wp.config.{name} takes {spec[0]}, got {value!r}")
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Config
