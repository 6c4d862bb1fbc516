"""Native builds: the system C++ compiler for the CPU, NVRTC for CUDA, each artifact kept in the cache.

Every artifact lives in `<cache>/<name>-<hash>/`, where the hash covers everything that affects
the binary (source text, native header, flags, compiler identity). `cache.py` decides whether an
entry can be trusted and used, and publishes new ones whole.
"""

from __future__ import annotations

import hashlib
import os
import platform
import shutil
import subprocess
import sys
import time
from functools import cache
from pathlib import Path

from . import cache as kernel_cache
from .errors import CompileError
from .extensions import registry

NATIVE_DIR = Path(__file__).parent / "native"


@cache
def header_hash() -> str:
    """The hash of the native headers generated code includes (the .cpp runtimes hash as sources)."""
    h = hashlib.sha256()
    for name in sorted(n for n in os.listdir(NATIVE_DIR) if n.endswith(".h")):
        h.update(name.encode())
        h.update((NATIVE_DIR / name).read_bytes())
    return h.hexdigest()


@cache
def find_compiler() -> str:
    """The C++ compiler: $CXX, else g++, else clang++."""
    cxx = os.environ.get("CXX")
    candidates = [cxx] if cxx else ["g++", "clang++", "c++"]
    for c in candidates:
        path = shutil.which(c)
        if path:
            return path
    raise CompileError(
        "no C++ compiler found: loomwork compiles CPU kernels with the system compiler. "
        "Install one (Debian/Ubuntu: 'apt install g++'; Fedora: 'dnf install gcc-c++'; "
        "macOS: 'xcode-select --install') or point the CXX environment variable at it."
        + (f" (CXX={cxx!r} was not found)" if cxx else "")
    )


@cache
def compiler_identity() -> str:
    """Identifies the compiler binary and the machine without running anything."""
    path = os.path.realpath(find_compiler())
    st = os.stat(path)
    return f"{path}:{st.st_size}:{st.st_mtime_ns}:{platform.machine()}:{_cpu_model()}"


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith(("model name", "flags")):
                    return hashlib.sha256(line.encode()).hexdigest()[:12]
    except OSError:
        pass
    return platform.processor()


def cpu_flags(debug: bool, fast_math: bool) -> list[str]:
    flags = ["-std=c++17", "-shared", "-fPIC", "-fvisibility=hidden", "-pthread", "-w"]
    if debug:
        flags += ["-O1", "-g"]
    else:
        flags += ["-O3", "-march=native", "-fno-math-errno", "-fno-trapping-math", "-fopenmp-simd"]
        if platform.machine().lower() in ("x86_64", "amd64"):
            # 256-bit vectors, as GCC's own tuning picks for most x86 targets: with 512-bit ones GCC 12.2's
            # SLP vectorizer miscompiled chained float64 matrix products on an AVX-512 CPU
            # (tests/kernels/test_linalg.py::test_chained_float64_matrix_products)
            flags.append("-mprefer-vector-width=256")
    if fast_math:
        flags.append("-ffast-math")
    return flags


def content_hash(*parts: str) -> str:
    h = hashlib.sha256()
    for p in parts:
        h.update(p.encode())
        h.update(b"\0")
    return h.hexdigest()[:20]


def source_key(source: str, debug: bool) -> str:
    """The part of a source that decides a build: release builds carry no line information, so their
    `#line` directives (Python files and lines) are left out, and moving a kernel in its file or editing
    a comment above it finds the cached build."""
    if debug:
        return source
    return "\n".join(line for line in source.split("\n") if not line.startswith("#line "))


def build_cpu(source: str, name: str, cache_dir: str, debug: bool, fast_math: bool, verbose: bool,
              what: str) -> Path:
    """Compile `source` to a shared library (or find it cached) and return its path."""
    flags = cpu_flags(debug, fast_math)
    digest = content_hash(kernel_cache.FORMAT, source_key(source, debug), header_hash(), " ".join(flags),
                          compiler_identity())

    def compile_into(folder: Path) -> None:
        t0 = time.perf_counter()
        (folder / "module.cpp").write_text(source)
        includes = [f"-I{d}" for d in (NATIVE_DIR, *registry.include_dirs())]
        cmd = [find_compiler(), *flags, *includes, "module.cpp", "-o", "module.so"]
        proc = subprocess.run(cmd, cwd=folder, capture_output=True, text=True)
        if proc.returncode != 0:
            raise CompileError(
                f"the C++ compiler failed on {what}:\n{_trim(proc.stderr)}\n"
                f"command: {' '.join(cmd)}\n(set wp.config.print_source = True to see the generated code)"
            )
        if verbose:
            print(f"loomwork: built {what} for cpu in {(time.perf_counter() - t0) * 1e3:.0f} ms", file=sys.stderr)

    return kernel_cache.cached(cache_dir, f"{name}-{digest}", "module.so", compile_into, what)


def _trim(text: str, limit: int = 4000) -> str:
    return text if len(text) <= limit else text[:limit] + "\n... (truncated)"


# -- CUDA through NVRTC ---------------------------------------------------------------------------


def _nvrtc():
    try:
        from cuda.bindings import nvrtc
    except ImportError:
        try:
            from cuda import nvrtc  # older cuda-python layout
        except ImportError:
            raise CompileError(
                "compiling CUDA kernels needs NVRTC: pip install cuda-python nvidia-cuda-nvrtc"
            ) from None
    return nvrtc


def nvrtc_available() -> bool:
    try:
        _nvrtc()
        return True
    except CompileError:
        return False


def build_cuda(source: str, name: str, cache_dir: str, arch: int, debug: bool, fast_math: bool,
               verbose: bool, what: str) -> Path:
    """Compile `source` with NVRTC to a cubin for sm_`arch` (or find it cached) and return its path."""
    nvrtc = _nvrtc()
    opts = [f"--gpu-architecture=sm_{arch}", "--std=c++17", f"--include-path={NATIVE_DIR}", "-default-device", "-w"]
    if debug:
        opts.append("--device-debug")
    if fast_math:
        opts.append("--use_fast_math")
    err, version_major, version_minor = nvrtc.nvrtcVersion()
    digest = content_hash(kernel_cache.FORMAT, source_key(source, debug), header_hash(), " ".join(opts),
                          f"nvrtc{version_major}.{version_minor}")
    artifact = f"module.sm_{arch}.cubin"

    def compile_into(folder: Path) -> None:
        t0 = time.perf_counter()
        err, prog = nvrtc.nvrtcCreateProgram(source.encode(), b"module.cu", 0, [], [])
        _nvrtc_check(nvrtc, err, "nvrtcCreateProgram")
        try:
            # extension headers are hashed through their digests in the source's include lines
            args = opts + [f"--include-path={d}" for d in registry.include_dirs()]
            (err,) = nvrtc.nvrtcCompileProgram(prog, len(args), [o.encode() for o in args])
            if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
                raise CompileError(f"NVRTC failed to compile {what} for sm_{arch}:\n{_trim(_nvrtc_log(nvrtc, prog))}")
            err, size = nvrtc.nvrtcGetCUBINSize(prog)
            _nvrtc_check(nvrtc, err, "nvrtcGetCUBINSize")
            binary = b" " * size
            (err,) = nvrtc.nvrtcGetCUBIN(prog, binary)
            _nvrtc_check(nvrtc, err, "nvrtcGetCUBIN")
        finally:
            nvrtc.nvrtcDestroyProgram(prog)
        (folder / "module.cu").write_text(source)
        (folder / artifact).write_bytes(binary)
        if verbose:
            print(f"loomwork: built {what} for sm_{arch} in {(time.perf_counter() - t0) * 1e3:.0f} ms",
                  file=sys.stderr)

    return kernel_cache.cached(cache_dir, f"{name}-cuda-{digest}", artifact, compile_into, what)


def _nvrtc_log(nvrtc, prog) -> str:
    err, n = nvrtc.nvrtcGetProgramLogSize(prog)
    log = b" " * n
    nvrtc.nvrtcGetProgramLog(prog, log)
    return log.decode(errors="replace").rstrip("\x00 \n")


def _nvrtc_check(nvrtc, err, call: str) -> None:
    if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
        raise CompileError(f"{call} failed: {err}")
