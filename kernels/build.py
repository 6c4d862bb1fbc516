"""Native builds: the system C++ compiler for the CPU, NVRTC for CUDA, each artifact kept in the cache.

Every artifact lives in `<cache>/<name>-<hash>/`, where the hash covers everything that affects
the binary (source text, native header, flags, compiler identity). `cache.py` decides whether an
entry can be trusted and used, and publishes new ones whole.
"""

from __future__ import annotations

import hashlib
import os
import platform
import shlex
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


def cpu_flags(debug: bool, fast_math: bool, opt_level: int | None = None, extra: str | None = None) -> list[str]:
    """The CPU compiler's flags: optimization level `opt_level` (None: -O3, debug -O1), then `extra`
    (wp.config.cpu_compiler_flags: split as a shell would; "" drops -march=native)."""
    flags = ["-std=c++17", "-shared", "-fPIC", "-fvisibility=hidden", "-pthread", "-w"]
    level = f"-O{opt_level}" if opt_level is not None else None
    if debug:
        flags += [level or "-O1", "-g"]
    else:
        flags += [level or "-O3", "-fno-math-errno", "-fno-trapping-math", "-fopenmp-simd"]
        if extra != "":
            flags.append("-march=native")
        if platform.machine().lower() in ("x86_64", "amd64"):
            # 256-bit vectors, as GCC's own tuning picks for most x86 targets: with 512-bit ones GCC 12.2's
            # SLP vectorizer miscompiled chained float64 matrix products on an AVX-512 CPU
            # (tests/kernels/test_linalg.py::test_chained_float64_matrix_products)
            flags.append("-mprefer-vector-width=256")
    if fast_math:
        flags.append("-ffast-math")
    else:
        # every a * b + c rounds twice, as written: results do not depend on where the compiler would fuse
        # (the SIMD-lane and one-thread bodies of a kernel give the same bits)
        flags.append("-ffp-contract=off")
    return flags + shlex.split(extra or "")


def content_hash(*parts: str) -> str:
    h = hashlib.sha256()
    for p in parts:
        h.update(p.encode())
        h.update(b"\0")
    return h.hexdigest()[:20]


def without_line_directives(source: str) -> str:
    """`source` without its `#line` directives (the Python file:line of each statement)."""
    return "\n".join(line for line in source.split("\n") if not line.startswith("#line "))


def source_key(source: str, debug: bool) -> str:
    """The part of a source that decides a build: release builds carry no line information, so their
    `#line` directives (Python files and lines) are left out, and moving a kernel in its file or editing
    a comment above it finds the cached build."""
    return source if debug else without_line_directives(source)


def build_cpu(source: str, name: str, cache_dir: str, debug: bool, fast_math: bool, verbose: bool,
              what: str, *, opt_level: int | None = None, extra_flags: str | None = None, reuse: bool = True) -> Path:
    """Compile `source` to a shared library (or find it cached; `reuse=False`: a build of an earlier process is
    replaced) and return its path."""
    flags = cpu_flags(debug, fast_math, opt_level, extra_flags)
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

    return kernel_cache.cached(cache_dir, f"{name}-{digest}", "module.so", compile_into, what, reuse)


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


def nvrtc_version() -> tuple[int, int] | None:
    """(major, minor) of the NVRTC that compiles CUDA modules (the CUDA toolkit loomwork builds with), or
    None without one."""
    try:
        err, major, minor = _nvrtc().nvrtcVersion()
    except CompileError:
        return None
    return (int(major), int(minor)) if int(err) == 0 else None


def nvrtc_archs() -> list[int]:
    """The compute capabilities NVRTC compiles for (75 for sm_75, ...), ascending; [] without NVRTC."""
    try:
        nvrtc = _nvrtc()
    except CompileError:
        return []
    err, archs = nvrtc.nvrtcGetSupportedArchs()
    return sorted(int(a) for a in archs) if int(err) == 0 else []


def nvrtc_available() -> bool:
    try:
        _nvrtc()
        return True
    except CompileError:
        return False


def build_cuda(source: str, name: str, cache_dir: str, arch: int, debug: bool, fast_math: bool,
               verbose: bool, what: str, *, opt_level: int | None = None, output: str | None = None,
               arch_suffix: str | None = None, lineinfo: bool = False, trace: bool = False,
               reuse: bool = True) -> Path:
    """Compile `source` with NVRTC for sm_`arch` (or find it cached) and return the path of its cubin, or of
    its PTX for compute_`arch` when `output` is "ptx". `arch_suffix` ("a", "f") selects architecture- or
    family-specific features, `opt_level` goes to ptxas, `lineinfo` adds line information, `trace` writes a
    time trace of the build beside it (module.trace.json)."""
    nvrtc = _nvrtc()
    if arch_suffix is not None and arch < (90 if arch_suffix == "a" else 100):
        raise CompileError(f'wp.config.cuda_arch_suffix = "{arch_suffix}" needs sm_{90 if arch_suffix == "a" else 100} '
                           f"or higher; this build targets sm_{arch}")
    kind = "compute" if output == "ptx" else "sm"
    target = f"{kind}_{arch}{arch_suffix or ''}"
    opts = [f"--gpu-architecture={target}", "--std=c++17", f"--include-path={NATIVE_DIR}", "-default-device", "-w"]
    if debug:
        opts.append("--device-debug")
    if fast_math:
        opts.append("--use_fast_math")
    if opt_level is not None:
        opts.append(f"--ptxas-options=-O{opt_level}")
    if lineinfo:
        opts.append("--generate-line-info")
    err, version_major, version_minor = nvrtc.nvrtcVersion()
    digest = content_hash(kernel_cache.FORMAT, source_key(source, debug or lineinfo), header_hash(), " ".join(opts),
                          f"nvrtc{version_major}.{version_minor}", "trace" if trace else "")
    artifact = f"module.{target}.{'ptx' if output == 'ptx' else 'cubin'}"
    get_size, get = (nvrtc.nvrtcGetPTXSize, nvrtc.nvrtcGetPTX) if output == "ptx" else \
        (nvrtc.nvrtcGetCUBINSize, nvrtc.nvrtcGetCUBIN)

    def compile_into(folder: Path) -> None:
        t0 = time.perf_counter()
        err, prog = nvrtc.nvrtcCreateProgram(source.encode(), b"module.cu", 0, [], [])
        _nvrtc_check(nvrtc, err, "nvrtcCreateProgram")
        try:
            # extension headers are hashed through their digests in the source's include lines
            args = opts + [f"--include-path={d}" for d in registry.include_dirs()]
            if trace:  # NVRTC adds ".json"
                args.append(f"--fdevice-time-trace={folder / 'module.trace'}")
            (err,) = nvrtc.nvrtcCompileProgram(prog, len(args), [o.encode() for o in args])
            if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
                raise CompileError(f"NVRTC failed to compile {what} for {target}:\n{_trim(_nvrtc_log(nvrtc, prog))}")
            err, size = get_size(prog)
            _nvrtc_check(nvrtc, err, get_size.__name__)
            binary = b" " * size
            (err,) = get(prog, binary)
            _nvrtc_check(nvrtc, err, get.__name__)
        finally:
            nvrtc.nvrtcDestroyProgram(prog)
        (folder / "module.cu").write_text(source)
        (folder / artifact).write_bytes(binary)
        if verbose:
            print(f"loomwork: built {what} for {target} in {(time.perf_counter() - t0) * 1e3:.0f} ms",
                  file=sys.stderr)

    return kernel_cache.cached(cache_dir, f"{name}-cuda-{digest}", artifact, compile_into, what, reuse)


def _nvrtc_log(nvrtc, prog) -> str:
    err, n = nvrtc.nvrtcGetProgramLogSize(prog)
    log = b" " * n
    nvrtc.nvrtcGetProgramLog(prog, log)
    return log.decode(errors="replace").rstrip("\x00 \n")


def _nvrtc_check(nvrtc, err, call: str) -> None:
    if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
        raise CompileError(f"{call} failed: {err}")
