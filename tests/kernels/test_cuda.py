"""The CUDA backend on a real GPU: devices, memory, transfers, launches, adjoints, streams and events,
memory pools, errors, and the bridges to PyTorch and CuPy. Without a GPU every test here skips (the
CUDA sources of every module still compile with NVRTC, tests/conftest.py)."""

import subprocess
import sys
import textwrap

import numpy as np
import pytest

import loomwork as wp

pytestmark = pytest.mark.skipif(not wp.is_cuda_available(),
                                reason="no CUDA device on this machine (CUDA code is still compiled by NVRTC)")

GPU = "cuda:0"


@wp.kernel
def saxpy(x: wp.array(dtype=float), y: wp.array(dtype=float), a: float):
    i = wp.tid()
    y[i] = a * x[i] + y[i]


@wp.kernel
def grid_index(out: wp.array4d(dtype=int)):
    i, j, k, l = wp.tid()
    out[i, j, k, l] = ((i * 10 + j) * 10 + k) * 10 + l


@wp.kernel
def grid_index2(out: wp.array2d(dtype=wp.vec2)):
    i, j = wp.tid()
    out[i, j] = wp.vec2(float(i), float(j))


@wp.kernel
def sum_squares(x: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, x[i] * x[i])


@wp.kernel
def transform_points(m: wp.mat33, t: wp.vec3, p: wp.array(dtype=wp.vec3), out: wp.array(dtype=wp.vec3)):
    i = wp.tid()
    out[i] = m @ p[i] + t


@wp.struct
class Particle:
    pos: wp.vec3
    mass: float
    tag: wp.int8


@wp.kernel
def move(ps: wp.array(dtype=Particle), dt: float):
    i = wp.tid()
    p = ps[i]
    p.pos = p.pos + wp.vec3(dt, 0.0, 0.0) * p.mass
    ps[i] = p


def test_device_facts():
    dev = wp.get_device(GPU)
    assert dev.is_cuda and not dev.is_cpu and str(dev) == "cuda:0" and wp.get_device("cuda") is dev
    assert dev in wp.get_devices() and wp.get_cuda_device_count() >= 1
    assert dev.arch >= 50 and dev.sm_count > 0 and dev.is_uva
    assert 0 < dev.free_memory <= dev.total_memory
    assert dev.name and wp.get_cuda_driver_version() >= (11, 0)
    with wp.ScopedDevice(GPU):
        assert wp.get_device() is dev
        assert wp.zeros(3).device is dev


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int8, np.uint16, np.int64])
def test_arrays_round_trip(dtype):
    host = (np.arange(1000) % 100).astype(dtype)
    a = wp.array(host, device=GPU)
    assert a.device == GPU and a.ptr
    np.testing.assert_array_equal(a.numpy(), host)
    assert a[7] == host[7]
    a[7] = 42
    assert a.numpy()[7] == 42 and a.list()[7] == 42


def test_vector_matrix_and_struct_arrays():
    pts = np.random.default_rng(0).standard_normal((100, 3)).astype(np.float32)
    p = wp.array(pts, dtype=wp.vec3, device=GPU)
    out = wp.empty_like(p)
    m = wp.mat33(0.0, -1.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 2.0)
    wp.launch(transform_points, 100, inputs=[m, wp.vec3(1.0, 2.0, 3.0), p, out], device=GPU)
    expect = pts @ np.array(m).reshape(3, 3).T + [1.0, 2.0, 3.0]
    np.testing.assert_allclose(out.numpy(), expect, rtol=1e-6, atol=1e-6)
    ps = wp.array([Particle(pos=wp.vec3(1.0, 2.0, 3.0), mass=2.0, tag=5)] * 4, dtype=Particle, device=GPU)
    wp.launch(move, 4, inputs=[ps, 0.5], device=GPU)
    got = ps.list()
    assert [tuple(q.pos) for q in got] == [(2.0, 2.0, 3.0)] * 4 and got[0].tag == 5


@wp.struct
class Weights:
    w: wp.array(dtype=float)
    scale: float


@wp.kernel
def weighted(p: Weights, x: wp.indexedarray(dtype=float), out: wp.array(dtype=float)):
    i = wp.tid()
    out[i] = p.scale * p.w[i] * x[i]


def test_structs_holding_device_arrays_and_indexed_arrays():
    """Structs carry device arrays into GPU launches (a launch elsewhere names the field); indexed arrays
    of device memory launch, read back and assign."""
    data = wp.array(np.arange(10, dtype=np.float32), device=GPU)
    x = wp.indexedarray(data, [wp.array(np.array([9, 0, 4], np.int32), device=GPU)])
    p = Weights(w=wp.array(np.array([1.0, 2.0, 3.0], np.float32), device=GPU), scale=2.0)
    out = wp.zeros(3, dtype=float, device=GPU)
    wp.launch(weighted, 3, inputs=[p, x, out], device=GPU)
    assert out.numpy().tolist() == [18.0, 0.0, 24.0]
    assert x.numpy().tolist() == [9.0, 0.0, 4.0] and x.contiguous().device == GPU
    x.assign([1.0, 2.0, 3.0])
    assert data.numpy().tolist() == [2.0, 1, 2, 3, 3.0, 5, 6, 7, 8, 1.0]
    with pytest.raises(wp.DeviceError, match="argument 'p': field 'w' is an array on cuda:0, launch is on cpu"):
        wp.launch(weighted, 3, inputs=[p, wp.indexedarray(wp.zeros(3, device="cpu")), wp.zeros(3, device="cpu")],
                  device="cpu")


def test_saxpy_matches_numpy_at_scale():
    n = 1 << 22
    rng = np.random.default_rng(1)
    x, y = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    xd, yd = wp.array(x, device=GPU), wp.array(y, device=GPU)
    wp.launch(saxpy, n, inputs=[xd, yd, 2.5], device=GPU)
    np.testing.assert_allclose(yd.numpy(), 2.5 * x + y, rtol=1e-6, atol=1e-6)  # the GPU fuses multiply-adds


def test_block_dim_and_max_blocks():
    """Any block size and a cap on the blocks give the same result (the threads loop over the grid)."""
    n = 10007
    x = wp.array(np.arange(n, dtype=np.float32), device=GPU)
    for block_dim, max_blocks in ((32, 0), (64, 3), (1024, 1), (256, 0), (128, 100000)):
        y = wp.zeros(n, dtype=float, device=GPU)
        wp.launch(saxpy, n, inputs=[x, y, 2.0], device=GPU, block_dim=block_dim, max_blocks=max_blocks)
        np.testing.assert_array_equal(y.numpy(), 2.0 * np.arange(n, dtype=np.float32), err_msg=str(block_dim))
    out = wp.full((3, 4, 5, 6), -1, dtype=int, device=GPU)
    wp.launch(grid_index, (3, 4, 5, 6), inputs=[out], device=GPU, block_dim=64, max_blocks=2)
    i, j, k, l = np.indices((3, 4, 5, 6))
    np.testing.assert_array_equal(out.numpy(), ((i * 10 + j) * 10 + k) * 10 + l)
    with pytest.raises(ValueError, match="block_dim must be an int from 1 to 1024"):
        wp.launch(saxpy, n, inputs=[x, y, 2.0], device=GPU, block_dim=2048)
    wp.launch(saxpy, n, inputs=[x, y, 2.0], device=GPU, max_blocks=-1)  # as Warp: no cap


def test_multidimensional_grids():
    out = wp.full((3, 4, 5, 6), -1, dtype=int, device=GPU)
    wp.launch(grid_index, (3, 4, 5, 6), inputs=[out], device=GPU)
    i, j, k, l = np.indices((3, 4, 5, 6))
    np.testing.assert_array_equal(out.numpy(), ((i * 10 + j) * 10 + k) * 10 + l)
    v = wp.zeros((70, 33), dtype=wp.vec2, device=GPU)
    wp.launch(grid_index2, (70, 33), inputs=[v], device=GPU)
    np.testing.assert_array_equal(v.numpy()[..., 0], np.indices((70, 33))[0])


def test_tape_gradients_on_the_gpu():
    x = wp.array(np.linspace(-1.0, 1.0, 5000, dtype=np.float32), requires_grad=True, device=GPU)
    loss = wp.zeros(1, dtype=float, requires_grad=True, device=GPU)
    tape = wp.Tape()
    with tape:
        wp.launch(sum_squares, x.size, inputs=[x, loss], device=GPU)
    tape.backward(loss)
    np.testing.assert_allclose(loss.numpy()[0], np.sum(x.numpy() ** 2), rtol=1e-4)
    np.testing.assert_allclose(x.grad.numpy(), 2.0 * x.numpy(), rtol=1e-6)
    tape.zero()
    assert not x.grad.numpy().any()


def test_copies_between_devices():
    host = np.arange(64, dtype=np.float32)
    c = wp.array(host)
    g = wp.zeros(64, dtype=float, device=GPU)
    wp.copy(g, c)
    g2 = wp.empty(64, dtype=float, device=GPU)
    wp.copy(g2, g, dest_offset=4, src_offset=8, count=16)
    back = wp.zeros(64, dtype=float)
    wp.copy(back, g)
    np.testing.assert_array_equal(back.numpy(), host)
    np.testing.assert_array_equal(g2.numpy()[4:20], host[8:24])
    np.testing.assert_array_equal(g.to("cpu").numpy(), host)
    np.testing.assert_array_equal(c.to(GPU).numpy(), host)
    strided = g[::2]  # not contiguous: copied element by element through the host
    np.testing.assert_array_equal(strided.numpy(), host[::2])
    np.testing.assert_array_equal(strided.clone().numpy(), host[::2])
    dst = wp.zeros(32, dtype=float)
    wp.copy(dst, strided)
    np.testing.assert_array_equal(dst.numpy(), host[::2])
    wp.copy(g[1::2], wp.array(-host[:32]))
    np.testing.assert_array_equal(g.numpy()[1::2], -host[:32])
    np.testing.assert_array_equal(g.numpy()[::2], host[::2])


def test_fill_zero_and_assign():
    for dtype, value in ((float, 3.5), (wp.int8, -3), (wp.float16, 1.5), (wp.float64, 2.25), (wp.vec3, (1.0, 2.0, 3.0)),
                         (wp.vec3, 7.0), (wp.uint64, 2**40 + 5)):
        a = wp.empty(1001, dtype=dtype, device=GPU)
        a.fill_(value)
        expect = np.broadcast_to(np.asarray(value, dtype=a.numpy().dtype), a.numpy().shape)
        np.testing.assert_array_equal(a.numpy(), expect, err_msg=str(dtype))
        a.zero_()
        assert not a.numpy().any()
    a = wp.zeros(5, dtype=float, device=GPU)
    a.assign(np.arange(5.0))
    np.testing.assert_array_equal(a.numpy(), np.arange(5.0))
    a.assign(wp.array(np.ones(5, np.float32)))
    np.testing.assert_array_equal(a.numpy(), np.ones(5))
    b = wp.full(5, 9.0, dtype=float, device=GPU)
    np.testing.assert_array_equal(b.numpy(), np.full(5, 9.0))


def test_streams_and_events():
    dev = wp.get_device(GPU)
    s1, s2 = wp.Stream(dev), wp.Stream(dev, priority=-1)
    assert s1.cuda_stream and s1.cuda_stream != s2.cuda_stream and wp.get_stream(dev).cuda_stream
    n = 1 << 20
    x = wp.full(n, 1.0, dtype=float, device=dev)
    y = wp.zeros(n, dtype=float, device=dev)
    start, end = wp.Event(dev, enable_timing=True), wp.Event(dev, enable_timing=True)
    s1.wait_stream(wp.get_stream(dev))  # x and y were written on the device's stream
    s1.record_event(start)
    for _ in range(20):
        wp.launch(saxpy, n, inputs=[x, y, 1.0], stream=s1)
    s1.record_event(end)
    s2.wait_event(end)
    with wp.ScopedStream(s2):
        assert wp.get_stream() is s2
        wp.launch(saxpy, n, inputs=[x, y, 1.0])  # ordered after s1's twenty launches
    wp.synchronize_stream(s2)
    assert s1.is_complete and s2.is_complete and end.is_complete
    assert wp.get_event_elapsed_time(start, end) > 0.0
    np.testing.assert_array_equal(y.numpy(), np.full(n, 21.0, np.float32))
    wp.synchronize_device(dev)
    wp.synchronize()


def test_activity_timing_uses_gpu_events():
    n = 1 << 24
    x, y = wp.full(n, 1.0, dtype=float, device=GPU), wp.zeros(n, dtype=float, device=GPU)
    wp.timing_begin()
    wp.launch(saxpy, n, inputs=[x, y, 1.0], device=GPU)
    y.zero_()
    results = wp.timing_end()
    assert [r.filter for r in results] == [wp.TIMING_KERNEL, wp.TIMING_MEMSET]
    assert all(r.elapsed > 0.0 and r.device == GPU for r in results)
    assert results[0].elapsed > 0.02  # 200 MB through memory: device time, not the microseconds of the host call


def test_a_problem_split_over_streams():
    """The multi-device pattern (a part per device, then a join), on one GPU's two streams: each half of
    the problem runs on its own stream, the join waits for both."""
    n = 1 << 20
    host = np.random.default_rng(2).standard_normal(n).astype(np.float32)
    x = wp.array(host, device=GPU)
    y = wp.zeros(n, dtype=float, device=GPU)
    streams = [wp.Stream(GPU), wp.Stream(GPU)]
    main = wp.get_stream(GPU)
    half = n // 2
    for k, s in enumerate(streams):
        s.wait_stream(main)
        wp.launch(saxpy, half, inputs=[x[k * half:(k + 1) * half], y[k * half:(k + 1) * half], 3.0], stream=s)
    for s in streams:
        main.wait_stream(s)
    np.testing.assert_allclose(y.numpy(), 3.0 * host)
    gpus = [d for d in wp.get_devices() if d.is_cuda]
    parts = np.array_split(host, len(gpus))  # and over every GPU this machine has
    results = []
    for dev, part in zip(gpus, parts, strict=True):
        xd, yd = wp.array(part, device=dev), wp.zeros(len(part), dtype=float, device=dev)
        wp.launch(saxpy, len(part), inputs=[xd, yd, 2.0], device=dev)
        results.append(yd)
    np.testing.assert_allclose(np.concatenate([r.numpy() for r in results]), 2.0 * host)


def test_memory_pool_and_peer_queries():
    dev = wp.get_device(GPU)
    if not wp.is_mempool_supported(dev):
        pytest.skip("this driver has no stream-ordered memory pools")
    assert wp.is_mempool_enabled(dev)
    a = wp.zeros(1 << 24, dtype=wp.uint8, device=dev)
    wp.synchronize_device(dev)
    assert wp.get_mempool_used_mem_current(dev) >= a.size
    assert wp.get_mempool_used_mem_high(dev) >= a.size
    saved = wp.get_mempool_release_threshold(dev)
    wp.set_mempool_release_threshold(dev, 1 << 30)
    assert wp.get_mempool_release_threshold(dev) == 1 << 30
    wp.set_mempool_release_threshold(dev, saved)
    with wp.ScopedMempool(dev, False):
        b = wp.ones(10, dtype=float, device=dev)
        assert not wp.is_mempool_enabled(dev)
    assert wp.is_mempool_enabled(dev) and b.numpy().sum() == 10.0
    assert wp.is_peer_access_supported(dev, dev) and not wp.is_peer_access_supported("cpu", dev)
    with pytest.raises(ValueError, match="has no memory pool"):
        wp.get_mempool_release_threshold("cpu")


def test_errors_name_the_problem():
    with pytest.raises(wp.DeviceError, match="argument 'x': array is on cpu, launch is on cuda:0"):
        wp.launch(saxpy, 4, inputs=[wp.zeros(4, dtype=float), wp.zeros(4, dtype=float, device=GPU), 1.0], device=GPU)
    with pytest.raises(MemoryError, match=r"out of memory on cuda:0 .*could not allocate 1125899906842624 bytes"):
        wp.empty((1 << 25, 1 << 25), dtype=wp.uint8, device=GPU)  # beyond any GPU: refused at once
    with pytest.raises(wp.DeviceError, match="is not available: this machine has"):
        wp.get_device(f"cuda:{wp.get_cuda_device_count()}")


def test_debug_mode_reports_an_out_of_bounds_index():
    mod = "test_cuda_debug_bounds"

    def reads_past(a: wp.array(dtype=float)):
        a[0] = a[5]

    k = wp.kernel(reads_past, module=mod)
    wp.set_module_options({"mode": "debug"}, module=mod)
    with pytest.raises(wp.KernelRuntimeError, match="index 5 is out of bounds"):
        wp.launch(k, 1, inputs=[wp.zeros(2, dtype=float, device=GPU)], device=GPU)
    ok = wp.array(np.arange(8, dtype=np.float32), device=GPU)
    wp.launch(k, 1, inputs=[ok], device=GPU)
    assert ok.numpy()[0] == 5.0
    s = wp.Stream(GPU)  # a fault on another stream is read on that stream, and reported by its own launch
    with pytest.raises(wp.KernelRuntimeError, match="index 5 is out of bounds"):
        wp.launch(k, 1, inputs=[wp.zeros(2, dtype=float, device=GPU)], stream=s)
    wp.launch(k, 1, inputs=[ok], stream=s)


def test_a_kernel_fault_is_reported_not_hung_on(tmp_path):
    """An illegal address in a release build is a CudaError naming the fault (in a child process: the fault
    ends the CUDA context it happened in)."""
    program = textwrap.dedent("""
        import loomwork as wp

        @wp.kernel
        def poke(a: wp.array(dtype=float)):
            a[wp.tid()] = 1.0

        bogus = wp.array(ptr=1 << 40, dtype=float, shape=(1 << 20,), device="cuda:0")
        try:
            wp.launch(poke, bogus.size, inputs=[bogus], device="cuda:0")
            wp.synchronize_device("cuda:0")
        except wp.DeviceError as e:
            print("raised:", e)
    """)
    script = tmp_path / "fault.py"
    script.write_text(program)
    run = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300)
    assert "raised:" in run.stdout and "CUDA_ERROR_ILLEGAL_ADDRESS" in run.stdout, run.stdout + run.stderr


def test_printf_from_a_gpu_kernel(capfd):
    @wp.kernel
    def hello(n: int):
        wp.printf("gpu says %d\n", n + wp.tid())

    wp.launch(hello, 1, inputs=[41], device=GPU)
    wp.synchronize_device(GPU)
    assert "gpu says 41" in capfd.readouterr().out


def test_graph_capture_on_the_gpu():
    x = wp.full(1024, 1.0, dtype=float, device=GPU)
    y = wp.zeros(1024, dtype=float, device=GPU)
    with wp.ScopedCapture(GPU) as capture:
        for _ in range(10):
            wp.launch(saxpy, 1024, inputs=[x, y, 1.0], device=GPU)
    for _ in range(3):
        wp.capture_launch(capture.graph)
    np.testing.assert_array_equal(y.numpy(), np.full(1024, 30.0, np.float32))


@wp.kernel
def count_down(x: wp.array(dtype=float), n: wp.array(dtype=wp.int32)):
    x[0] = x[0] * 2.0
    n[0] = n[0] - 1


def test_conditional_graph_nodes_on_the_gpu():
    x = wp.array(np.ones(1, np.float32), device=GPU)
    n = wp.array(np.array([3], np.int32), device=GPU)
    with wp.ScopedCapture(GPU) as capture:
        wp.capture_while(n, lambda: wp.launch(count_down, 1, inputs=[x, n], device=GPU))
    wp.capture_launch(capture.graph)
    assert x.numpy()[0] == 8.0 and n.numpy()[0] == 0


def test_torch_shares_gpu_memory():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("this PyTorch build has no CUDA")
    a = wp.array(np.arange(10, dtype=np.float32), device=GPU)
    t = wp.to_torch(a)
    assert t.is_cuda and t.data_ptr() == a.ptr
    t.mul_(2.0)
    torch.cuda.synchronize()
    np.testing.assert_array_equal(a.numpy(), 2.0 * np.arange(10))
    src = torch.arange(6, dtype=torch.float32, device="cuda").reshape(2, 3)
    b = wp.from_torch(src)
    assert b.device == GPU and b.ptr == src.data_ptr() and b.shape == (2, 3)
    c = wp.from_dlpack(torch.utils.dlpack.to_dlpack(src))
    assert c.ptr == src.data_ptr()
    d = torch.from_dlpack(a)
    assert d.data_ptr() == a.ptr
    iface = a.__cuda_array_interface__
    assert iface["data"][0] == a.ptr and iface["stream"] == wp.get_stream(GPU).cuda_stream
    ts = torch.cuda.Stream()
    ws = wp.stream_from_torch(ts)
    assert ws.cuda_stream == ts.cuda_stream and ws.device == GPU
    assert wp.stream_to_torch(ws).cuda_stream == ts.cuda_stream
    with wp.ScopedStream(ws), torch.cuda.stream(ts):  # both frameworks queue on one stream
        z = torch.zeros(1000, device="cuda")
        wp.launch(saxpy, 1000, inputs=[wp.from_torch(torch.ones(1000, device="cuda")), wp.from_torch(z), 2.0])
    ts.synchronize()
    assert float(z.sum()) == 2000.0
    x = wp.from_torch(torch.ones(1000, device="cuda"))
    y = wp.from_torch(torch.zeros(1000, device="cuda"))
    wp.launch(saxpy, 1000, inputs=[x, y, 4.0], device=GPU)
    assert float(wp.to_torch(y).sum()) == 4000.0


def test_cupy_shares_gpu_memory():
    cp = pytest.importorskip("cupy")
    a = wp.array(np.arange(10, dtype=np.float32), device=GPU)
    v = cp.asarray(a)
    assert v.data.ptr == a.ptr
    w = cp.arange(5, dtype=cp.float32)
    b = wp.array(w, dtype=float, device=GPU)
    assert b.ptr == w.data.ptr and b.numpy().tolist() == [0.0, 1.0, 2.0, 3.0, 4.0]


def _jax_gpu():
    jax = pytest.importorskip("jax")
    try:
        return jax, jax.devices("cuda")[0]
    except RuntimeError:
        pytest.skip("this JAX build has no CUDA backend")


@wp.kernel
def scale_into(x: wp.array(dtype=float), s: float, y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = x[i] * s


def test_jax_kernel_runs_on_the_gpu():
    """jax_kernel inside jax.jit on a GPU: the launch runs on XLA's stream, traced scalars and the generated
    adjoint included."""
    jax, gpu = _jax_gpu()
    from loomwork.jax_experimental import jax_kernel

    jnp = jax.numpy
    k = jax_kernel(scale_into, enable_backward=True)
    x = jax.device_put(jnp.arange(1000, dtype=jnp.float32), gpu)
    f = jax.jit(lambda a, s: k(a, s)[0])
    for s in (2.0, -0.5):
        y = f(x, s)
        assert y.devices() == {gpu}
        np.testing.assert_allclose(np.asarray(y), np.arange(1000) * s)
    g = jax.grad(lambda a: jnp.sum(k(a, 3.0)[0] ** 2))(x)
    np.testing.assert_allclose(np.asarray(g), 18.0 * np.arange(1000), rtol=1e-6)
    batched = jax.vmap(lambda a: k(a, 2.0)[0])(jnp.stack([x, 2 * x]))
    np.testing.assert_allclose(np.asarray(batched)[1], 4.0 * np.arange(1000))
    a = wp.from_jax(x)
    assert a.device == GPU and a.ptr == x.unsafe_buffer_pointer()


def test_jax_callable_launches_on_xlas_stream():
    jax, gpu = _jax_gpu()
    from loomwork.jax_experimental import jax_callable

    def twice_then_scale(x: wp.array(dtype=float), s: float, y: wp.array(dtype=float)):
        assert x.device == GPU and wp.get_stream().cuda_stream is not None
        wp.launch(scale_into, x.shape[0], inputs=[x, 2.0 * s, y])

    c = jax_callable(twice_then_scale)
    x = jax.device_put(jax.numpy.ones(64, dtype=jax.numpy.float32), gpu)
    y = jax.jit(lambda a: c(a, 1.5)[0])(x)
    np.testing.assert_allclose(np.asarray(y), np.full(64, 3.0))
