"""The PyTorch, CuPy and DLPack snippets of the documents' interoperability chapter, run as written with
`import loomwork as wp` on the CPU (the CUDA ones as their CPU equivalents; CuPy's needs a GPU)."""

import importlib.util
import random

import numpy as np
import pytest

import loomwork as wp

torch = pytest.importorskip("torch", reason="PyTorch is not installed (pip install torch)")
torch.set_num_threads(1)  # the suite's workers share the machine's cores

n = 1024


@wp.kernel
def saxpy(x: wp.array(dtype=float), y: wp.array(dtype=float), a: float):
    i = wp.tid()
    y[i] = a * x[i] + y[i]


@wp.kernel()
def loss(xs: wp.array(dtype=float, ndim=2), l: wp.array(dtype=float)):  # noqa: E741 - the documents' name
    tid = wp.tid()
    wp.atomic_add(l, 0, xs[tid, 0] ** 2.0 + xs[tid, 1] ** 2.0)


pvec2 = wp.types.vector(length=2, dtype=wp.float32)


# Define the Rosenbrock function
@wp.func
def rosenbrock(x: float, y: float):
    return (1.0 - x) ** 2.0 + 100.0 * (y - x**2.0) ** 2.0


@wp.kernel
def eval_rosenbrock(
    xs: wp.array(dtype=pvec2),
    # outputs
    z: wp.array(dtype=float),
):
    i = wp.tid()
    x = xs[i]
    z[i] = rosenbrock(x[0], x[1])


class Rosenbrock(torch.autograd.Function):
    @staticmethod
    def forward(ctx, xy, num_points):
        ctx.xy = wp.from_torch(xy, dtype=pvec2, requires_grad=True)
        ctx.num_points = num_points

        # allocate output
        ctx.z = wp.zeros(num_points, requires_grad=True)

        wp.launch(
            kernel=eval_rosenbrock,
            dim=ctx.num_points,
            inputs=[ctx.xy],
            outputs=[ctx.z]
        )

        return wp.to_torch(ctx.z)

    @staticmethod
    def backward(ctx, adj_z):
        # map incoming Torch grads to our output variables
        ctx.z.grad = wp.from_torch(adj_z)

        wp.launch(
            kernel=eval_rosenbrock,
            dim=ctx.num_points,
            inputs=[ctx.xy],
            outputs=[ctx.z],
            adj_inputs=[ctx.xy.grad],
            adj_outputs=[ctx.z.grad],
            adjoint=True
        )

        # return adjoint w.r.t. inputs
        return (wp.to_torch(ctx.xy.grad), None)


def test_tensors_on_either_device_go_to_launches():
    """The PyTorch launch snippet (CPU or CUDA chosen at random; CUDA runs only where there is a GPU)."""
    if random.choice([False, True]) or not wp.is_cuda_available():
        device = "cpu"
    else:
        device = "cuda:0"

    x = torch.arange(n, dtype=torch.float32, device=device)
    y = torch.ones(n, dtype=torch.float32, device=device)

    wp.launch(saxpy, dim=n, inputs=[x, y, 1.0], device=device)
    torch.testing.assert_close(y, x + 1.0)


@pytest.mark.skipif(importlib.util.find_spec("cupy") is None or wp.get_cuda_device_count() == 0,
                    reason="the CuPy snippet needs CuPy and a CUDA device; its path (__cuda_array_interface__) is "
                           "checked without a GPU in tests/kernels/test_launch_arguments.py")
def test_cupy_arrays_on_cuda():
    """The CuPy snippet."""
    import cupy as cp

    with cp.cuda.Device(0):
        x = cp.arange(n, dtype=cp.float32)
        y = cp.ones(n, dtype=cp.float32)

    wp.launch(saxpy, dim=n, inputs=[x, y, 1.0], device="cuda:0")


def test_to_torch_and_from_torch():
    """The helper functions snippet: no copies either way."""
    w = wp.array([1.0, 2.0, 3.0], dtype=float, device="cpu")

    # convert to Torch tensor
    t = wp.to_torch(w)

    # convert from Torch tensor
    w = wp.from_torch(t)
    assert w.ptr == t.data_ptr()
    np.testing.assert_array_equal(w.numpy(), [1.0, 2.0, 3.0])


def test_optimization_using_from_torch(capsys):
    """Adam on loomwork gradients through from_torch converges (the loss falls to ~0)."""
    # indicate requires_grad so that Warp can accumulate gradients in the grad buffers
    xs = torch.randn(100, 2, requires_grad=True)
    l = torch.zeros(1, requires_grad=True)  # noqa: E741
    opt = torch.optim.Adam([xs], lr=0.1)

    wp_xs = wp.from_torch(xs)
    wp_l = wp.from_torch(l)

    tape = wp.Tape()
    with tape:
        # record the loss function kernel launch on the tape
        wp.launch(loss, dim=len(xs), inputs=[wp_xs], outputs=[wp_l], device=wp_xs.device)

    for i in range(500):
        tape.zero()
        tape.backward(loss=wp_l)  # compute gradients
        # now xs.grad will be populated with the gradients computed by Warp
        opt.step()  # update xs (and thereby wp_xs)

        # these lines are only needed for evaluating the loss
        # (the optimization just needs the gradient, not the loss value)
        wp_l.zero_()
        wp.launch(loss, dim=len(xs), inputs=[wp_xs], outputs=[wp_l], device=wp_xs.device)
        print(f"{i}\tloss: {l.item()}")
    assert l.item() < 1e-6 and "499\tloss" in capsys.readouterr().out


def test_optimization_using_to_torch():
    """Adam on a loomwork array through a single to_torch converges."""
    # initialize the optimization variables in Warp
    xs = wp.array(np.random.randn(100, 2), dtype=wp.float32, requires_grad=True)
    l = wp.zeros(1, dtype=wp.float32, requires_grad=True)  # noqa: E741
    # just a single wp.to_torch call is needed, Adam optimizes using the Warp array gradients
    opt = torch.optim.Adam([wp.to_torch(xs)], lr=0.1)

    tape = wp.Tape()
    with tape:
        wp.launch(loss, dim=len(xs), inputs=[xs], outputs=[l], device=xs.device)

    for i in range(500):
        tape.zero()
        tape.backward(loss=l)
        opt.step()

        l.zero_()
        wp.launch(loss, dim=len(xs), inputs=[xs], outputs=[l], device=xs.device)
        print(f"{i}\tloss: {l.numpy()[0]}")
    assert l.numpy()[0] < 1e-6


def test_optimization_using_an_autograd_function():
    """The Rosenbrock torch.autograd.Function with an adjoint launch: Adam finds the minimum at (1, 1)."""
    num_points = 1500
    learning_rate = 5e-2

    torch_device = wp.device_to_torch(wp.get_device())

    rng = np.random.default_rng(42)
    xy = torch.tensor(rng.normal(size=(num_points, 2)), dtype=torch.float32, requires_grad=True, device=torch_device)
    opt = torch.optim.Adam([xy], lr=learning_rate)

    for _ in range(10000):
        # step
        opt.zero_grad()
        z = Rosenbrock.apply(xy, num_points)
        z.backward(torch.ones_like(z))

        opt.step()

    # minimum at (1, 1)
    xy_np = xy.numpy(force=True)
    print(np.mean(xy_np, axis=0))
    np.testing.assert_allclose(np.mean(xy_np, axis=0), [1.0, 1.0], atol=0.01)


def test_performance_notes_snippets():
    """The conversion patterns of the performance notes: convert per iteration, once, with return_ctype=True,
    and tensors passed straight to the launch."""
    device = "cpu"
    x_t = torch.arange(n, dtype=torch.float32, device=device)
    y_t = torch.ones(n, dtype=torch.float32, device=device)

    for i in range(10):  # noqa: B007
        x_w = wp.from_torch(x_t)
        y_w = wp.from_torch(y_t)
        wp.launch(saxpy, dim=n, inputs=[x_w, y_w, 1.0], device=device)

    x_w = wp.from_torch(x_t)
    y_w = wp.from_torch(y_t)

    for i in range(10):  # noqa: B007
        wp.launch(saxpy, dim=n, inputs=[x_w, y_w, 1.0], device=device)
    torch.testing.assert_close(y_t, 1.0 + 20.0 * x_t)

    for n_ in range(1, 10):
        # get Torch tensors for this iteration
        x_t = torch.arange(n_, dtype=torch.float32, device=device)
        y_t = torch.ones(n_, dtype=torch.float32, device=device)

        # get Warp array descriptors
        x_ctype = wp.from_torch(x_t, return_ctype=True)
        y_ctype = wp.from_torch(y_t, return_ctype=True)

        wp.launch(saxpy, dim=n_, inputs=[x_ctype, y_ctype, 1.0], device=device)
        torch.testing.assert_close(y_t, 1.0 + x_t)

    x = torch.arange(n, dtype=torch.float32, device=device)
    y = torch.ones(n, dtype=torch.float32, device=device)

    for i in range(10):  # noqa: B007
        wp.launch(saxpy, dim=n, inputs=[x, y, 1.0], device=device)
    torch.testing.assert_close(y, 1.0 + 10.0 * x)


def test_dlpack_snippets():
    """The DLPack section: from_dlpack of a PyTorch tensor and a JAX array, their from_dlpack of ours, and the
    capsule forms (JAX 0.5+ no longer takes or makes raw capsules, so its two capsule lines are left out)."""
    import torch.utils.dlpack

    external_array = torch.arange(4.0)
    warp_array = wp.from_dlpack(external_array)
    assert warp_array.ptr == external_array.data_ptr()

    torch_tensor = torch.utils.dlpack.from_dlpack(warp_array)
    assert torch_tensor.data_ptr() == warp_array.ptr

    warp_array2 = wp.from_dlpack(torch.utils.dlpack.to_dlpack(torch_tensor))
    torch_tensor = torch.utils.dlpack.from_dlpack(wp.to_dlpack(warp_array))
    assert warp_array2.ptr == torch_tensor.data_ptr() == external_array.data_ptr()

    jax = pytest.importorskip("jax", reason="JAX is not installed (pip install 'jax[cpu]')")
    import jax.dlpack  # noqa: F811 - the documents' spelling
    import jax.numpy as jnp

    warp_array = wp.from_dlpack(jnp.arange(4.0))
    jax_array = jax.dlpack.from_dlpack(warp_array)
    np.testing.assert_array_equal(np.asarray(jax_array), [0.0, 1.0, 2.0, 3.0])
    if hasattr(jax.dlpack, "to_dlpack"):  # JAX before 0.5
        warp_array1 = wp.from_dlpack(jax.dlpack.to_dlpack(jax_array))
        jax_array = jax.dlpack.from_dlpack(wp.to_dlpack(warp_array1))
