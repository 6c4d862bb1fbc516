"""The build pipeline: lazy builds, the content-hashed cache, concurrency, and compiler failures."""

import os
import re
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import numpy as np
import pytest

import loomwork as wp
from loomwork.kernels import build

PROGRAM = textwrap.dedent("""
    import sys, numpy as np, loomwork as wp
    VALUE = {value}

    @wp.kernel
    def fill(a: wp.array(dtype=float)):
        a[wp.tid()] = float(VALUE)

    a = wp.zeros(4, dtype=float)
    wp.launch(fill, dim=4, inputs=[a])
    assert (a.numpy() == VALUE).all(), a.numpy()
    print("ok")
""")


def run_program(tmp_path, cache, value=3, env_extra=None, name="prog.py"):
    script = tmp_path / name
    script.write_text(PROGRAM.format(value=value))
    env = dict(os.environ, LOOMWORK_CACHE_DIR=str(cache), **(env_extra or {}))
    return subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=300)


def module_folders(cache):
    return sorted(p.name for p in cache.iterdir() if p.name.startswith("__main__-"))


def test_cache_dir_from_environment_and_content_hash(tmp_path):
    """LOOMWORK_CACHE_DIR picks the cache; an edit gives a new entry; a re-run reuses the old one."""
    cache = tmp_path / "cache"
    assert run_program(tmp_path, cache, 3).stdout.strip() == "ok"
    first = module_folders(cache)
    assert len(first) == 1 and (cache / first[0] / "module.so").exists()
    assert run_program(tmp_path, cache, 3).returncode == 0
    assert module_folders(cache) == first
    assert run_program(tmp_path, cache, 4).returncode == 0
    assert len(module_folders(cache)) == 2
    assert not [p for p in cache.iterdir() if p.name.startswith(".tmp")]


def test_concurrent_processes_build_the_same_module(tmp_path):
    """Several processes building one module into an empty cache all succeed and leave one entry."""
    cache = tmp_path / "cache"
    results = [None] * 4

    def worker(i):
        results[i] = run_program(tmp_path, cache, 7, name="same.py")

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for r in results:
        assert r.returncode == 0, r.stderr
    assert len(module_folders(cache)) == 1
    assert not [p for p in cache.iterdir() if p.name.startswith(".tmp")]


def test_missing_compiler_names_what_to_install(tmp_path):
    """With no usable C++ compiler, the error says what to install."""
    r = run_program(tmp_path, tmp_path / "cache", env_extra={"CXX": "/nonexistent/g++"})
    assert r.returncode != 0
    assert "no C++ compiler found" in r.stderr and "apt install g++" in r.stderr


def test_failed_build_leaves_nothing_in_the_cache(tmp_path):
    """A compiler error raises CompileError with the compiler's message and caches nothing."""
    with pytest.raises(wp.CompileError, match="the C\\+\\+ compiler failed on test module") as info:
        build.build_cpu("this is not C++;", "broken", str(tmp_path), False, False, False, "test module")
    assert "error" in str(info.value)
    assert [p.name for p in tmp_path.iterdir()] == [".locks"]  # no entry, no temporary
    assert list((tmp_path / ".locks").iterdir()) == []  # and no lock file


def test_nvrtc_compiles_cuda_source_without_a_gpu(tmp_path):
    """The generated CUDA source compiles to a cubin with NVRTC, and NVRTC errors are CompileErrors."""
    src = '#include "loomwork.h"\nextern "C" __global__ void k(float* x) { x[threadIdx.x] = lw::sqrt(2.0f); }\n'
    cubin = build.build_cuda(src, "nvrtc_check", str(tmp_path), 75, False, False, False, "a test kernel")
    assert cubin.exists() and cubin.stat().st_size > 0
    with pytest.raises(wp.CompileError, match="NVRTC failed"):
        build.build_cuda("garbage", "nvrtc_bad", str(tmp_path), 75, False, False, False, "a bad kernel")


def test_test_suite_compiles_every_module_with_nvrtc():
    """The suite runs with verify_cuda on: NVRTC must be installed (it is in the test extras)."""
    assert build.nvrtc_available(), "install the test extras: pip install -e '.[test]'"
    assert wp.config.verify_cuda


def test_decoration_is_lazy_and_redefinition_rebuilds():
    """@wp.kernel does no work; adding a kernel to a loaded module rebuilds it on the next launch."""
    mod = f"test_build_lazy_{os.getpid()}"

    def first(a: wp.array(dtype=float)):
        a[0] = 1.0

    k1 = wp.kernel(first, module=mod)
    assert not k1.module.loaded
    a = wp.zeros(1, dtype=float)
    wp.launch(k1, dim=1, inputs=[a])
    assert a.numpy()[0] == 1.0

    def second(a: wp.array(dtype=float)):
        a[0] = 2.0

    k2 = wp.kernel(second, module=mod)
    wp.launch(k2, dim=1, inputs=[a])
    assert a.numpy()[0] == 2.0
    wp.launch(k1, dim=1, inputs=[a])
    assert a.numpy()[0] == 1.0


def test_kernels_added_after_a_build_compile_alone():
    """A kernel made after its module was built compiles by itself (programs that make kernels as they go pay
    for each once, not for the whole module again): the earlier kernels keep running and differentiating, and
    a debug build's out-of-bounds report names the new kernel's own source line."""
    mod = f"test_build_incremental_{os.getpid()}"

    def double(x: wp.array(dtype=float), y: wp.array(dtype=float)):
        i = wp.tid()
        y[i] = 2.0 * x[i]

    k1 = wp.kernel(double, module=mod, module_options={"mode": "debug"})
    x = wp.array(np.arange(4, dtype=np.float32), requires_grad=True)
    y = wp.zeros(4, dtype=float, requires_grad=True)
    wp.launch(k1, 4, inputs=[x, y])
    first = k1.module.load(wp.get_device("cpu"))

    def shifted(x: wp.array(dtype=float), y: wp.array(dtype=float)):
        i = wp.tid()
        y[i] = x[i + 1] * x[i + 1]

    k2 = wp.kernel(shifted, module=mod)
    with pytest.raises(wp.KernelRuntimeError, match="shifted' .*index 4 is out of bounds.*`x\\[i \\+ 1\\]`"):
        wp.launch(k2, 4, inputs=[x, y])
    second = k1.module.load(wp.get_device("cpu"))
    assert second.base is first and second.own == {k2.key} and set(second.kernels) == {k1.key, k2.key}
    z = wp.zeros(4, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(k2, 3, inputs=[x, y])
        wp.launch(k1, 4, inputs=[y, z])
    tape.backward(grads={z: np.ones(4, np.float32)})
    np.testing.assert_array_equal(x.grad.numpy(), [0.0, 4.0, 8.0, 12.0])  # d(2 x[i+1]^2) = 4 x[i+1]


def test_the_same_definition_again_is_the_same_kernel():
    """A kernel defined again with the same code and the same closure values (in a loop, a factory, or
    wp.Kernel(func, key) per call, as Warp's gradient checks do) is the kernel already built: no new build;
    other values make another kernel, with a module of its own too (module="unique")."""
    mod = f"test_build_same_{os.getpid()}"

    def make(c, module=mod):
        def add_c(a: wp.array(dtype=float)):
            a[0] = a[0] + wp.static(c * 2.0)

        return wp.kernel(add_c, module=module)

    k1, k2 = make(1.0), make(2.0)
    assert make(1.0) is k1 and k2 is not k1 and make(1.0, "unique") is make(1.0, "unique")
    a = wp.zeros(1, dtype=float)
    for k in (k1, k2, make(1.0, "unique")):
        wp.launch(k, 1, inputs=[a])
    assert a.numpy()[0] == 2.0 + 4.0 + 2.0
    built = k1.module.load(wp.get_device("cpu"))
    again = wp.Kernel(func=k1.func, key=k1.key)  # Warp's spelling makes a new object that shares the build
    wp.launch(again, 1, inputs=[a])
    assert again.key == k1.key and k1.module.load(wp.get_device("cpu")) is built and a.numpy()[0] == 10.0


@wp.func
def _plus(a: float, b: float):
    return a + b


@wp.func
def _minus(a: float, b: float):
    return a - b


def test_kernels_defined_in_a_loop_keep_the_values_they_were_defined_with():
    """Kernels defined in a loop share the loop variable's cell; each is built with the value it had when
    the kernel was defined (as Warp evaluates wp.static there), also when built after the loop moved on."""
    kernels = []
    for op in (_plus, _minus):
        @wp.kernel(module="unique")
        def apply(out: wp.array(dtype=float)):
            out[0] = wp.static(op)(3.0, 2.0)  # noqa: B023 - the value at definition is the point

        kernels.append(apply)
    out = wp.zeros(1)
    results = []
    for k in kernels:
        wp.launch(k, 1, inputs=[out])
        results.append(float(out.numpy()[0]))
    assert results == [5.0, 1.0] and kernels[0] is not kernels[1]


def test_kernels_from_a_factory_close_over_constants():
    """Kernels made by a Python factory capture their closure's constants, one kernel each."""

    def make(k):
        def add_k(a: wp.array(dtype=int)):
            a[wp.tid()] = a[wp.tid()] + k

        return wp.kernel(add_k, module="test_build_factory")

    kernels = [make(k) for k in (1, 10, 100)]
    a = wp.zeros(2, dtype=int)
    for k in kernels:
        wp.launch(k, dim=2, inputs=[a])
    np.testing.assert_array_equal(a.numpy(), [111, 111])


def test_print_source_and_ir(capsys):
    """wp.config.print_ir / print_source show the typed IR and the generated C++."""
    def shown(a: wp.array(dtype=float)):
        a[0] = 2.0 * a[0]

    k = wp.kernel(shown, module="test_build_print")
    wp.config.print_ir = wp.config.print_source = True
    try:
        wp.launch(k, dim=1, inputs=[wp.zeros(1, dtype=float)])
    finally:
        wp.config.print_ir = wp.config.print_source = False
    err = capsys.readouterr().err
    assert "shown(%v_a: array(dtype=float32, ndim=1)) -> None" in err
    assert "shown_cpu" in err and "__global__" in err


def test_module_options_override_config():
    """set_module_options changes one module's build (debug bounds checks, backward) and rejects bad options."""
    mod = "test_build_module_options"

    def reads_past(a: wp.array(dtype=float)):
        a[0] = a[5]

    k = wp.kernel(reads_past, module=mod)
    wp.set_module_options({"mode": "debug", "enable_backward": False}, module=mod)
    assert wp.get_module_options(mod) == {"mode": "debug", "fast_math": False, "enable_backward": False,
                                          "max_unroll": wp.config.max_unroll,
                                          "cpu_serial_threshold": wp.config.cpu_serial_threshold,
                                          "cpu_simd": wp.config.cpu_simd}
    with pytest.raises(wp.KernelRuntimeError, match="index 5 is out of bounds"):
        wp.launch(k, 1, inputs=[wp.zeros(2, dtype=float)])
    with pytest.raises(wp.LaunchError, match="enable_backward=False"):
        wp.launch(k, 1, inputs=[wp.zeros(8, dtype=float)], adjoint=True)
    wp.set_module_options({"mode": "release", "enable_backward": True}, module=mod)
    a = wp.array(np.arange(8, dtype=np.float32))
    wp.launch(k, 1, inputs=[a])
    assert a.numpy()[0] == 5.0
    with pytest.raises(ValueError, match="unknown module option 'speed'"):
        wp.set_module_options({"speed": 11}, module=mod)
    with pytest.raises(ValueError, match="takes \"release\" or \"debug\""):
        wp.set_module_options({"mode": "fast"}, module=mod)


def test_max_unroll_unrolls_constant_loops_without_changing_results(capsys):
    """Constant range loops up to max_unroll iterations become straight-line code (loop variable a
    constant, so it may index vector components); results and gradients are the same either way."""
    from loomwork.autograd import gradcheck

    def carried(x: wp.array(dtype=float), v: wp.array(dtype=wp.vec3), out: wp.array(dtype=float)):
        i = wp.tid()
        y = x[i]
        for k in range(6):
            y = wp.sin(y) * 1.5 + v[i][k % 3]
        out[i] = y + float(k)

    outs = {}
    for unroll in (0, 16):
        mod = f"test_build_max_unroll_{unroll}"
        k = wp.kernel(carried, module=mod)
        wp.set_module_options({"max_unroll": unroll}, module=mod)
        x = wp.array(np.linspace(-1, 1, 4, dtype=np.float32), requires_grad=True)
        v = wp.array(np.arange(12, dtype=np.float32).reshape(4, 3) * 0.1, dtype=wp.vec3, requires_grad=True)
        out = wp.zeros(4, dtype=float, requires_grad=True)
        wp.config.print_source = True
        try:
            wp.launch(k, 4, inputs=[x, v, out])
        finally:
            wp.config.print_source = False
        source = capsys.readouterr().err
        assert ("for (int32_t lw_i" in source) == (unroll == 0)
        gradcheck(k, 4, [x, v], [out], eps=1e-3, atol=1e-2, rtol=1e-2)
        outs[unroll] = out.numpy()
    assert np.allclose(outs[0], outs[16], rtol=1e-6)
    with pytest.raises(ValueError, match="an int >= 0"):
        wp.set_module_options({"max_unroll": -1}, module="test_build_max_unroll_0")


def test_long_bodies_with_reductions_are_called_once_per_cpu_loop(capsys):
    """A kernel body of more than codegen.LARGE_BODY statements keeps one set of private accumulators, so its
    CPU entry calls (inlines) it once per loop instead of UNROLL times: large kernels compile several times
    faster, with the same sums, contiguous or strided, for any thread count."""
    from loomwork.kernels import codegen

    def long_sum(x: wp.array(dtype=float), total: wp.array(dtype=float)):
        i = wp.tid()
        s = 0.0
        for k in wp.static(range(60)):
            s += wp.sin(x[i] * float(k))
        wp.atomic_add(total, 0, s)

    k = wp.kernel(long_sum, module="test_build_long_body")
    wp.config.print_source = True
    try:
        for n in (7, 9):
            xs = np.linspace(-1, 1, 2 * n, dtype=np.float32)
            for x in (wp.array(xs[:n]), wp.array(xs)[::2]):
                total = wp.zeros(1, dtype=float)
                wp.launch(k, n, inputs=[x, total])
                expect = sum(np.sin(x.numpy().astype(np.float64) * j) for j in range(60)).sum()
                np.testing.assert_allclose(total.numpy()[0], expect, rtol=1e-5)
    finally:
        wp.config.print_source = False
    source = capsys.readouterr().err
    cpu_entry = source[source.index("long_sum_cpu("):]
    cpu_entry = cpu_entry[:cpu_entry.index("#else")]
    assert cpu_entry.count("long_sum_body<") == 2 and codegen.UNROLL > 1  # contiguous and strided


def test_release_cache_keys_ignore_line_directives():
    """Moving a kernel within its file changes only #line directives: release builds keep their cache entry,
    debug builds (whose line tables name the Python lines) are rebuilt."""
    from loomwork.kernels.build import source_key

    a = '#line 10 "k.py"\nx = 1;\n#line 11\ny = 2;\n'
    b = '#line 14 "k.py"\nx = 1;\n#line 15\ny = 2;\n'
    assert source_key(a, debug=False) == source_key(b, debug=False)
    assert source_key(a, debug=True) != source_key(b, debug=True)


def test_kernels_whose_names_sanitize_alike_build_together():
    """Keys that become the same C identifier (`make.<locals>.k`, `make__locals__k`), or that collide with
    another kernel's derived entries (`x` has `..._adj_cpu`, so does a kernel `x_adj`), share one module."""
    mod = "test_build_name_clash"

    def make(value):
        def k(a: wp.array(dtype=float)):
            a[wp.tid()] = a[wp.tid()] * value

        return k

    nested, plain = make(2.0), make(3.0)
    nested.__qualname__, plain.__qualname__ = "make.<locals>.k", "make__locals__k"  # as if made at module level
    kernels = [wp.kernel(nested, module=mod), wp.kernel(plain, module=mod)]

    def x(a: wp.array(dtype=float), out: wp.array(dtype=float)):
        out[wp.tid()] = a[wp.tid()] * a[wp.tid()]

    def x_adj(a: wp.array(dtype=float)):
        a[wp.tid()] = a[wp.tid()] + 1.0

    square, shift = wp.kernel(x, module=mod), wp.kernel(x_adj, module=mod)
    a = wp.full(2, 1.0, dtype=float)
    for k in kernels:
        wp.launch(k, dim=2, inputs=[a])
    wp.launch(shift, dim=2, inputs=[a])
    np.testing.assert_array_equal(a.numpy(), [7.0, 7.0])
    x_in = wp.full(2, 3.0, dtype=float, requires_grad=True)
    out = wp.zeros(2, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(square, dim=2, inputs=[x_in, out])
    tape.backward(grads={out: wp.ones(2, dtype=float)})
    np.testing.assert_array_equal(x_in.grad.numpy(), [6.0, 6.0])


@pytest.mark.parametrize(("name", "value"), [("mode", "Debug"), ("mode", None), ("cpu_threads", -3), ("cpu_threads", 0),
                                             ("fast_math", "yes"), ("max_unroll", -1), ("cpu_serial_threshold", 1.5),
                                             ("verify_cuda_arch", "sm_75"), ("kernel_cache_dir", ""),
                                             ("enable_backward", 1)])
def test_config_rejects_bad_values(name, value):
    """wp.config checks every assignment: a misspelt or out-of-range value raises and changes nothing."""
    before = getattr(wp.config, name)
    with pytest.raises(ValueError, match=f"wp.config.{name} takes .*, got {re.escape(repr(value))}"):
        setattr(wp.config, name, value)
    assert getattr(wp.config, name) == before


def test_config_accepts_good_values():
    """Valid settings are taken as given (numpy ints count as ints, paths as folders)."""
    saved = {n: getattr(wp.config, n) for n in ("cpu_threads", "cpu_serial_threshold", "kernel_cache_dir", "mode")}
    try:
        wp.config.cpu_threads = None
        wp.config.cpu_threads = 2
        wp.config.cpu_serial_threshold = np.int64(100)
        wp.config.kernel_cache_dir = Path(saved["kernel_cache_dir"])
        wp.config.mode = "debug"
        assert wp.config.cpu_serial_threshold == 100 and wp.config.mode == "debug"
    finally:
        for n, v in saved.items():
            setattr(wp.config, n, v)


def test_module_options_use_the_config_checks():
    """set_module_options checks values with the same rules as wp.config, before setting any."""
    mod = "test_build_option_checks"
    with pytest.raises(ValueError, match='module option \'mode\' takes "release" or "debug", got \'Debug\''):
        wp.set_module_options({"fast_math": True, "mode": "Debug"}, module=mod)
    assert wp.get_module_options(mod)["fast_math"] is False


_GENERATED = '''
import loomwork as wp

C = {value}


@wp.kernel
def k(out: wp.array(dtype=float)):
    out[0] = float(wp.static(C))
'''


def _import_generated(tmp_path, name: str, value: str):
    """Write a kernel module to a file, import it, then remove the file (as kernel generators do)."""
    import importlib.util

    path = tmp_path / f"{name}.py"
    path.write_text(_GENERATED.format(value=value))
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    path.unlink()
    return mod


def test_kernels_from_a_removed_file_compile_and_hash_module_tells_builds_apart(tmp_path):
    """A kernel whose file was removed after import still compiles (its source is kept at definition), and
    Module.hash_module() digests what a build would compile: equal for equal definitions, different when a
    wp.static value differs."""
    a = _import_generated(tmp_path, "lw_gen_hash_a", "17")
    b = _import_generated(tmp_path, "lw_gen_hash_b", "42")
    c = _import_generated(tmp_path, "lw_gen_hash_c", "17")
    ha, hb, hc = (wp.get_module(m.__name__).hash_module() for m in (a, b, c))
    assert ha == hc and ha != hb
    out = wp.zeros(1)
    wp.launch(b.k, 1, inputs=[out])
    assert out.numpy()[0] == 42.0
