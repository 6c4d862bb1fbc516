"""wp.config: every Warp 1.19 setting exists, unknown names raise, and the settings that mean something here
do what they say."""

import contextlib

import numpy as np
import pytest

import loomwork as wp
from loomwork.kernels import build, cache, config

# warp/config.py of Warp 1.19, public names (its settings and the two enums)
WARP_1_19 = [
    "launch_array_access_mode", "version", "verify_fp", "verify_cuda", "print_launches", "mode", "optimization_level",
    "verbose_warnings", "log_level", "verify_autograd_array_access", "enable_vector_component_overwrites",
    "legacy_scalar_return_types", "cache_kernels", "kernel_cache_dir", "cuda_output", "ptx_target_arch",
    "cuda_arch_suffix", "lineinfo", "line_directives", "compile_time_trace", "enable_backward", "enable_cpu_blocks",
    "default_grid_stride", "enable_mathdx_gemm", "enable_mathdx_solver", "enable_mathdx_fft", "cpu_compiler_flags",
    "llvm_cuda", "enable_graph_capture_module_load_by_default", "enable_mempools_at_init", "track_memory",
    "max_unroll", "enable_tiles_in_stack_memory", "use_precompiled_headers", "legacy_cpu_linker",
    "load_module_max_workers", "deterministic", "deterministic_max_records", "deterministic_debug",
]


@contextlib.contextmanager
def settings(**values):
    saved = {n: getattr(wp.config, n) for n in values}
    try:
        for n, v in values.items():
            setattr(wp.config, n, v)
        yield
    finally:
        for n, v in saved.items():
            setattr(wp.config, n, v)


def test_every_warp_setting_exists_and_takes_its_own_value():
    """Each Warp 1.19 setting (and Warp's older `quiet`) exists, is checked and takes its default back; each one
    that has no effect here says why."""
    assert wp.config.LaunchArrayAccessMode.STRICT == 2 and wp.DeterministicMode.RUN_TO_RUN == 1
    for name in [*WARP_1_19, "quiet"]:
        assert name in config.SETTINGS, name
        setattr(wp.config, name, getattr(wp.config, name))
    for name, why in config.NO_EFFECT.items():
        assert name in WARP_1_19 + ["quiet"] and len(why) > 20, name
    with pytest.raises(ValueError, match="wp.config.deterministic takes a wp.DeterministicMode, got 1"):
        wp.config.deterministic = 1
    with pytest.raises(ValueError, match='wp.config.cuda_output takes None, "cubin" or "ptx", got \'elf\''):
        wp.config.cuda_output = "elf"
    with pytest.raises(ValueError, match="optimization_level takes None or an int from 0 to 3, got 4"):
        wp.config.optimization_level = 4


@pytest.mark.parametrize(("name", "close"), [("enable_mempool_access_on_init", "enable_mempools_at_init"),
                                             ("qiet", "quiet"), ("cpu_thread", "cpu_threads"), ("frobnicate", None)])
def test_unknown_setting_raises_with_the_closest_name(name, close):
    """Setting a name wp.config does not have raises AttributeError naming it (and the closest setting), and
    creates nothing."""
    with pytest.raises(AttributeError, match=f"wp.config has no setting '{name}'") as info:
        setattr(wp.config, name, True)
    assert (f"did you mean '{close}'?" in str(info.value)) == (close is not None)
    assert not hasattr(wp.config, name)


@wp.func_native("""
#ifdef LW_TEST_VALUE
return LW_TEST_VALUE;
#elif defined(__OPTIMIZE__)
return 1;
#else
return 0;
#endif
""")
def compiled_with() -> int:
    ...


@wp.kernel
def report(out: wp.array(dtype=int)):
    out[0] = compiled_with()


@wp.kernel
def reciprocal(x: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = 1.0 / x[i]


def test_optimization_level_and_cpu_compiler_flags_reach_the_compiler():
    """optimization_level 0 builds without optimization (__OPTIMIZE__ undefined), the default optimizes, and
    cpu_compiler_flags are passed to the compiler."""
    def value():
        out = wp.zeros(1, dtype=int)
        wp.launch(report, 1, inputs=[out])
        return int(out.numpy()[0])

    assert value() == 1
    with settings(optimization_level=0):
        assert value() == 0
    with settings(cpu_compiler_flags="-DLW_TEST_VALUE=7 -O2"):
        assert value() == 7
    assert build.cpu_flags(False, False, None, "").count("-march=native") == 0
    assert build.cpu_flags(False, False, 2, None)[6] == "-O2"


def test_print_launches_log_level_and_line_directives(capsys):
    """print_launches prints each launch with its arguments; log_level = LOG_DEBUG reports builds as verbose
    does; line_directives = False builds generated code without #line directives."""
    x = wp.full(3, 2.0, dtype=float)
    with settings(print_launches=True):
        wp.launch(reciprocal, 3, inputs=[x, wp.zeros(3, dtype=float)])
    out = capsys.readouterr().out
    assert "launch: kernel 'reciprocal'" in out and "dim=(3,)" in out and "x=array(shape=(3,), dtype=float32" in out
    with settings(log_level=wp.LOG_DEBUG, line_directives=False, print_source=True):  # a new build
        wp.launch(reciprocal, 3, inputs=[x, wp.zeros(3, dtype=float)])
    err = capsys.readouterr().err
    assert "loomwork: module 'tests.kernels.test_config' ready" in err
    assert "void k" in err and "reciprocal" in err and "#line" not in err


def test_verify_fp_names_the_array_with_a_nan_or_infinity():
    """verify_fp checks the float arrays a launch reads before it and those it writes after it."""
    y = wp.zeros(2, dtype=float)
    with settings(verify_fp=True):
        wp.launch(reciprocal, 2, inputs=[wp.full(2, 4.0, dtype=float), y])
        np.testing.assert_array_equal(y.numpy(), [0.25, 0.25])
        with pytest.raises(wp.KernelRuntimeError, match="'reciprocal' .*: array 'x' holds a NaN or an infinity before"):
            wp.launch(reciprocal, 2, inputs=[np.array([1.0, np.nan], dtype=np.float32), y])
        with pytest.raises(wp.KernelRuntimeError, match="array 'y' holds a NaN or an infinity after the launch"):
            wp.launch(reciprocal, 2, inputs=[wp.zeros(2, dtype=float), y])
    wp.launch(reciprocal, 2, inputs=[wp.zeros(2, dtype=float), y])  # off: no check


@wp.kernel
def take_tickets(counter: wp.array(dtype=int), order: wp.array(dtype=int)):
    i = wp.tid()
    order[i] = wp.atomic_add(counter, 0, 1)


def test_deterministic_runs_cpu_launches_in_index_order():
    """With a deterministic mode, atomics on the CPU apply in index order (one thread), so the order in which
    threads take tickets is the index order, even with a pool of two threads."""
    n = 200_000

    def tickets():
        order = wp.zeros(n, dtype=int)
        wp.launch(take_tickets, n, inputs=[wp.zeros(1, dtype=int), order])
        return order.numpy()

    with settings(cpu_threads=2):
        with settings(deterministic=wp.DeterministicMode.RUN_TO_RUN):
            np.testing.assert_array_equal(tickets(), np.arange(n))
        np.testing.assert_array_equal(np.sort(tickets()), np.arange(n))


def test_cache_kernels_off_rebuilds_what_an_earlier_process_built(tmp_path):
    """With cache_kernels off, an entry this process did not build is built again (once); on, it is reused."""
    builds = []

    def produce(folder):
        builds.append(folder)
        (folder / "a.bin").write_bytes(b"x")

    def get(reuse):
        return cache.cached(str(tmp_path), "entry", "a.bin", produce, "a test entry", reuse)

    get(True)
    cache._built.discard(tmp_path / "entry")  # as if an earlier process had built it
    get(True)
    assert len(builds) == 1
    get(False)
    get(False)
    assert len(builds) == 2 and (tmp_path / "entry" / "a.bin").read_bytes() == b"x"
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".tmp")]

    modules = tmp_path / "modules"
    args = [wp.full(1, 2.0, dtype=float), wp.zeros(1, dtype=float)]
    with settings(kernel_cache_dir=str(modules), verify_cuda=False):
        wp.launch(reciprocal, 1, inputs=args)
        (library,) = modules.glob("tests_kernels_test_config-*/module.so")
        first = library.stat().st_ino
        cache._built.discard(library.parent)  # as if an earlier process had built it
        with settings(cache_kernels=False):
            wp.launch(reciprocal, 1, inputs=args)
    assert library.stat().st_ino != first


def test_force_load_builds_modules_on_worker_threads():
    """force_load(max_workers=2) (or load_module_max_workers) builds several modules; a build error surfaces."""
    def body(a: wp.array(dtype=float)):
        a[0] = 5.0

    kernels = [wp.kernel(body, module=f"test_config_workers_{i}") for i in range(2)]
    with settings(load_module_max_workers=2):
        wp.force_load(modules=[k.module for k in kernels])
    assert all(k.module._last is not None for k in kernels)

    def broken(a: wp.array(dtype=float)):
        a[0] = undefined_name  # noqa: F821

    bad = wp.kernel(broken, module="test_config_workers_bad")
    with pytest.raises(NameError, match="undefined_name"):
        wp.force_load(modules=[kernels[0].module, bad.module], max_workers=2)


@pytest.mark.skipif(not build.nvrtc_available(), reason="needs NVRTC")
def test_cuda_settings_reach_nvrtc(tmp_path):
    """cuda_output "ptx" gives PTX for ptx_target_arch, lineinfo adds line information, cuda_arch_suffix picks
    architecture-specific code (and needs a recent enough one), compile_time_trace writes a trace."""
    src = '#include "loomwork.h"\nextern "C" __global__ void k(float* x) { x[threadIdx.x] = lw::sqrt(2.0f); }\n'
    ptx = build.build_cuda(src, "ptx", str(tmp_path), 80, False, False, False, "k", output="ptx", lineinfo=True)
    assert ptx.name == "module.compute_80.ptx" and ".target sm_80" in ptx.read_text() and ".loc" in ptx.read_text()
    plain = build.build_cuda(src, "ptx", str(tmp_path), 80, False, False, False, "k", output="ptx")
    assert ".loc" not in plain.read_text()
    cubin = build.build_cuda(src, "sfx", str(tmp_path), 90, False, False, False, "k", arch_suffix="a", trace=True,
                             opt_level=1)
    assert cubin.name == "module.sm_90a.cubin" and (cubin.parent / "module.trace.json").stat().st_size > 0
    with pytest.raises(wp.CompileError, match='cuda_arch_suffix = "f" needs sm_100 or higher; this build targets'):
        build.build_cuda(src, "sfx", str(tmp_path), 90, False, False, False, "k", arch_suffix="f")
    with settings(kernel_cache_dir=str(tmp_path), verify_cuda=True, cuda_output="ptx", ptx_target_arch=86):
        wp.launch(reciprocal, 1, inputs=[wp.full(1, 2.0, dtype=float), wp.zeros(1, dtype=float)])
    assert [p.name for p in tmp_path.glob("*-cuda-*/*.ptx") if "test_config" in p.parent.name] == \
        ["module.compute_86.ptx"]
