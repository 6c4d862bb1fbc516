"""The CUDA snippets of the user's interoperability document (shared/seeds/003_*: CuPy, PyTorch CUDA tensors,
streams, the optimisation examples, CuPy/Numba, DLPack, JAX), run as written with `import loomwork as wp` on
a GPU; each skips without one (or without the framework's CUDA build)."""

import numpy as np
import pytest

import loomwork as wp

pytestmark = pytest.mark.skipif(not wp.is_cuda_available(),
                                reason="no CUDA device on this machine (CUDA code is still compiled by NVRTC)")

n = 1024


@wp.kernel
def saxpy(x: wp.array(dtype=float), y: wp.array(dtype=float), a: float):
    i = wp.tid()
    y[i] = a * x[i] + y[i]


@wp.kernel()
def loss(xs: wp.array(dtype=float, ndim=2), l: wp.array(dtype=float)):  # noqa: E741 - the document's name
    tid = wp.tid()
    wp.atomic_add(l, 0, xs[tid, 0] ** 2.0 + xs[tid, 1] ** 2.0)


@wp.kernel
def triple_kernel(input: wp.array(dtype=float), output: wp.array(dtype=float)):  # noqa: A002 - the document's
    tid = wp.tid()
    output[tid] = 3.0 * input[tid]


def _torch_cuda():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("this PyTorch build has no CUDA")
    return torch


def test_cupy_arrays_in_a_cuda_launch():
    cp = pytest.importorskip("cupy")
    with cp.cuda.Device(0):
        x = cp.arange(n, dtype=cp.float32)
        y = cp.ones(n, dtype=cp.float32)

    wp.launch(saxpy, dim=n, inputs=[x, y, 1.0], device="cuda:0")
    np.testing.assert_array_equal(cp.asnumpy(y), np.arange(n) + 1.0)


def test_torch_tensors_on_either_device():
    torch = _torch_cuda()
    for device in ("cpu", "cuda:0"):
        x = torch.arange(n, dtype=torch.float32, device=device)
        y = torch.ones(n, dtype=torch.float32, device=device)

        wp.launch(saxpy, dim=n, inputs=[x, y, 1.0], device=device)
        np.testing.assert_array_equal(y.cpu().numpy(), np.arange(n) + 1.0)


def test_return_ctype_and_direct_tensor_loops_on_the_gpu():
    torch = _torch_cuda()
    device = "cuda:0"
    for n in range(1, 10):
        x_t = torch.arange(n, dtype=torch.float32, device=device)
        y_t = torch.ones(n, dtype=torch.float32, device=device)
        x_ctype = wp.from_torch(x_t, return_ctype=True)
        y_ctype = wp.from_torch(y_t, return_ctype=True)
        wp.launch(saxpy, dim=n, inputs=[x_ctype, y_ctype, 1.0], device=device)
        assert y_t.tolist() == [i + 1.0 for i in range(n)]
    x = torch.arange(n, dtype=torch.float32, device=device)
    y = torch.ones(n, dtype=torch.float32, device=device)
    for _ in range(10):
        wp.launch(saxpy, dim=n, inputs=[x, y, 1.0], device=device)
    assert y.tolist() == [10.0 * i + 1.0 for i in range(n)]


def test_optimisation_through_from_torch_on_the_gpu():
    torch = _torch_cuda()
    xs = torch.randn(100, 2, requires_grad=True, device="cuda")
    l = torch.zeros(1, requires_grad=True, device="cuda")  # noqa: E741 - the document's name
    opt = torch.optim.Adam([xs], lr=0.1)
    wp_xs = wp.from_torch(xs)
    wp_l = wp.from_torch(l)
    tape = wp.Tape()
    with tape:
        wp.launch(loss, dim=len(xs), inputs=[wp_xs], outputs=[wp_l], device=wp_xs.device)
    first = l.item()
    for _ in range(300):
        tape.zero()
        tape.backward(loss=wp_l)
        opt.step()
        wp_l.zero_()
        wp.launch(loss, dim=len(xs), inputs=[wp_xs], outputs=[wp_l], device=wp_xs.device)
    assert l.item() < 1e-3 * first


def test_optimisation_through_to_torch_on_the_gpu():
    torch = _torch_cuda()
    xs = wp.array(np.random.randn(100, 2), dtype=wp.float32, requires_grad=True, device="cuda:0")
    l = wp.zeros(1, dtype=wp.float32, requires_grad=True, device="cuda:0")  # noqa: E741 - the document's name
    opt = torch.optim.Adam([wp.to_torch(xs)], lr=0.1)
    tape = wp.Tape()
    with tape:
        wp.launch(loss, dim=len(xs), inputs=[xs], outputs=[l], device=xs.device)
    first = l.numpy()[0]
    for _ in range(300):
        tape.zero()
        tape.backward(loss=l)
        opt.step()
        l.zero_()
        wp.launch(loss, dim=len(xs), inputs=[xs], outputs=[l], device=xs.device)
    assert l.numpy()[0] < 1e-3 * first


def test_numba_and_cupy_views_of_loomwork_arrays():
    cp = pytest.importorskip("cupy")
    a = wp.array(np.arange(8, dtype=np.float32), device="cuda:0")
    c = cp.asarray(a)  # a view: CuPy writes loomwork's memory
    c *= 2
    np.testing.assert_array_equal(a.numpy(), 2.0 * np.arange(8))
    numba_cuda = pytest.importorskip("numba.cuda")
    d = numba_cuda.as_cuda_array(a)
    assert d.__cuda_array_interface__["data"][0] == a.ptr
    b = wp.array(d, dtype=float, device="cuda:0")
    assert b.ptr == a.ptr and b.numpy().tolist() == (2.0 * np.arange(8)).tolist()


def test_dlpack_both_ways_on_the_gpu():
    torch = _torch_cuda()
    torch_tensor = torch.arange(6, dtype=torch.float32, device="cuda")
    warp_array = wp.from_dlpack(torch_tensor)
    assert warp_array.device == "cuda:0" and warp_array.ptr == torch_tensor.data_ptr()
    warp_array2 = wp.from_dlpack(torch.utils.dlpack.to_dlpack(torch_tensor))
    assert warp_array2.ptr == torch_tensor.data_ptr()
    t2 = torch.utils.dlpack.from_dlpack(warp_array)
    t3 = torch.utils.dlpack.from_dlpack(wp.to_dlpack(warp_array))
    assert t2.data_ptr() == t3.data_ptr() == torch_tensor.data_ptr()
    jax = pytest.importorskip("jax")
    try:
        gpu = jax.devices("cuda")[0]
    except RuntimeError:
        return
    jax_array = jax.device_put(jax.numpy.arange(5, dtype=jax.numpy.float32), gpu)
    w = wp.from_jax(jax_array)
    assert w.device == "cuda:0" and w.numpy().tolist() == [0.0, 1.0, 2.0, 3.0, 4.0]
    back = jax.dlpack.from_dlpack(warp_array)
    assert back.devices() == {gpu} and np.asarray(back).tolist() == list(range(6))
    assert np.asarray(wp.to_jax(warp_array)).tolist() == list(range(6))


def test_jax_triple_kernel_on_the_gpu():
    jax = pytest.importorskip("jax")
    try:
        jax.devices("cuda")
    except RuntimeError:
        pytest.skip("this JAX build has no CUDA backend")
    import jax.numpy as jp

    from loomwork.jax_experimental import jax_kernel

    jax_triple = jax_kernel(triple_kernel)

    @jax.jit
    def f():
        x = jp.arange(0, 64, dtype=jp.float32)
        return jax_triple(x)

    out = f()
    assert next(iter(out[0].devices())).platform == "gpu"
    np.testing.assert_array_equal(np.asarray(out[0]), 3.0 * np.arange(64))
