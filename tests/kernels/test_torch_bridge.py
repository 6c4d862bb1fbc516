"""The PyTorch bridge: zero-copy views both ways, dtypes and devices, tensors straight to launches, gradients
shared and never counted twice, gradcheck through a kernel, and kernels as torch.compile-able operators."""

import numpy as np
import pytest

import loomwork as wp
from loomwork.kernels import device as device_module
from loomwork.kernels.cpu import CpuBackend

torch = pytest.importorskip("torch", reason="PyTorch is not installed (pip install torch)")
torch.set_num_threads(1)  # the suite's workers share the machine's cores

pvec2 = wp.types.vector(length=2, dtype=wp.float32)


@wp.kernel
def scale(x: wp.array(dtype=float), y: wp.array(dtype=float), s: float):
    i = wp.tid()
    y[i] = s * x[i]


@wp.kernel
def norms(v: wp.array(dtype=pvec2), out: wp.array(dtype=float)):
    i = wp.tid()
    out[i] = wp.dot(v[i], v[i])


@wp.kernel
def square_sum(x: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, x[i] * x[i])


@wp.kernel
def cube64(x: wp.array(dtype=wp.float64), y: wp.array(dtype=wp.float64)):
    i = wp.tid()
    y[i] = x[i] * x[i] * x[i] + wp.sin(x[i])


@wp.kernel
def rosenbrock(xs: wp.array(dtype=pvec2), z: wp.array(dtype=float)):
    i = wp.tid()
    x = xs[i]
    z[i] = (1.0 - x[0]) ** 2.0 + 100.0 * (x[1] - x[0] ** 2.0) ** 2.0


@wp.kernel
def mix(x: wp.array(dtype=float), w: wp.array(dtype=float), s: float, y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = wp.tanh(w[i] * x[i]) * s


def test_views_share_memory_both_ways():
    """from_torch and to_torch copy nothing: writes through either are seen by the other."""
    t = torch.arange(4, dtype=torch.float32)
    a = wp.from_torch(t)
    assert a.ptr == t.data_ptr() and a.dtype is wp.float32 and a.device == "cpu"
    a.numpy()[0] = 7.0
    assert t[0] == 7.0
    w = wp.array([1.0, 2.0, 3.0], dtype=float)
    back = wp.to_torch(w)
    back[2] = 9.0
    assert back.data_ptr() == w.ptr and w.numpy()[2] == 9.0
    s = wp.from_torch(torch.zeros(6, 5)[:, 1])  # a strided view
    assert s.shape == (6,) and s.strides == (20,)


def test_dtypes_and_devices_convert():
    """dtype_from/to_torch map every shared scalar type; device_from/to_torch map the CPU; streams need CUDA."""
    for td in (torch.bool, torch.int8, torch.uint8, torch.int16, torch.int32, torch.int64, torch.float16,
               torch.bfloat16, torch.float32, torch.float64):
        assert wp.dtype_to_torch(wp.dtype_from_torch(td)) == td
    assert wp.dtype_to_torch(float) == torch.float32
    with pytest.raises(TypeError, match="complex64 has no loomwork scalar type"):
        wp.dtype_from_torch(torch.complex64)
    with pytest.raises(TypeError, match="vec3f has no torch dtype"):
        wp.dtype_to_torch(wp.vec3)
    assert wp.device_from_torch("cpu") is wp.get_device("cpu")
    assert wp.device_from_torch(torch.device("cpu")) is wp.get_device("cpu")
    assert wp.device_to_torch("cpu") == "cpu" and wp.device_to_torch(wp.get_device()) == "cpu"
    with pytest.raises(wp.DeviceError):
        wp.device_from_torch("meta")
    for fn in (wp.stream_from_torch, wp.stream_to_torch):
        with pytest.raises(wp.DeviceError):
            fn()


def test_vector_views_and_their_errors():
    """A float tensor of shape (n, 2) is an array of vec2 (also a custom wp.types.vector); shapes that do not
    fit, non-contiguous components, complex data and wrong dtypes are clear errors."""
    t = torch.arange(8, dtype=torch.float32).reshape(4, 2)
    v = wp.from_torch(t, dtype=wp.vec2)
    assert v.shape == (4,) and v[1] == wp.vec2(2.0, 3.0)
    out = torch.zeros(4)
    wp.launch(norms, dim=4, inputs=[wp.from_torch(t, dtype=pvec2), out])
    torch.testing.assert_close(out, (t * t).sum(1))
    m = wp.from_torch(torch.zeros(3, 2, 2), dtype=wp.mat22)
    assert m.shape == (3,)
    with pytest.raises(ValueError, match=r"torch.Tensor of shape \(4, 2\) does not hold vec3f"):
        wp.from_torch(t, dtype=wp.vec3)
    with pytest.raises(ValueError, match="components of the torch.Tensor are not contiguous"):
        wp.from_torch(torch.zeros(2, 4).t(), dtype=wp.vec2)
    with pytest.raises(TypeError, match="complex64 has no loomwork scalar type"):
        wp.from_torch(torch.zeros(3, dtype=torch.complex64))
    with pytest.raises(wp.LaunchError, match=r"argument 'x' expects array\(dtype=float32, ndim=1\), got a "
                                             "torch.Tensor of bool"):
        wp.launch(scale, dim=3, inputs=[torch.ones(3, dtype=torch.bool), torch.zeros(3), 1.0])
    with pytest.raises(wp.LaunchError, match="argument 'v' expects .*got a torch.Tensor of float64"):
        wp.launch(norms, dim=4, inputs=[t.double(), out])
    with pytest.raises(wp.LaunchError, match="lazy negation"):
        wp.launch(scale, dim=3, inputs=[torch.ones(3)._neg_view(), torch.zeros(3), 1.0])


def test_layouts_are_remembered_but_every_view_is_the_tensor_now():
    """from_torch keeps what it checked per layout (dtype, shape, strides, device), never per tensor: a
    tensor resized in place, a new tensor of the same layout, a lazily negated one and a sparse one are each
    seen as they are now, for arrays and for return_ctype descriptors alike."""
    t = torch.arange(6, dtype=torch.float32)
    for ctype in (False, True):
        a = wp.from_torch(t, return_ctype=ctype)
        u = torch.full((6,), 7.0)
        b = wp.from_torch(u, return_ctype=ctype)
        ptr = (lambda x: x.desc.data) if ctype else (lambda x: x.ptr)
        assert ptr(a) == t.data_ptr() and ptr(b) == u.data_ptr()
    r = torch.zeros(4, 3)
    assert wp.from_torch(r, dtype=wp.vec3).shape == (4,)
    r.resize_(2, 3)
    assert wp.from_torch(r, dtype=wp.vec3).shape == (2,)
    with pytest.raises(TypeError, match="lazy negation"):
        wp.from_torch(t._neg_view(), return_ctype=True)
    with pytest.raises(TypeError, match="has no strided memory"):
        wp.from_torch(t.to_sparse(), return_ctype=True)


def test_tensors_go_straight_to_launches():
    """Tensors are kernel arguments as they are, and descriptors from return_ctype=True too (checked)."""
    x = torch.arange(5, dtype=torch.float32)
    y = torch.zeros(5)
    wp.launch(scale, dim=5, inputs=[x, y, 3.0])
    torch.testing.assert_close(y, 3.0 * x)
    wp.launch(scale, dim=5, inputs=[wp.from_torch(x, return_ctype=True), wp.from_torch(y, return_ctype=True), 2.0])
    torch.testing.assert_close(y, 2.0 * x)
    with pytest.raises(wp.LaunchError, match="argument 'x' expects .*got a descriptor of float64"):
        wp.launch(scale, dim=5, inputs=[wp.from_torch(x.double(), return_ctype=True), y, 1.0])


@pytest.fixture
def other_device(monkeypatch):
    """A second device kind whose memory the host cannot read (standing in for a GPU)."""

    class DeviceMemory(CpuBackend):
        name = "devmem"
        host_accessible = False

    monkeypatch.setattr(device_module, "_kinds", dict(device_module._kinds))
    monkeypatch.setattr(device_module, "_devices", dict(device_module._devices))
    device_module.register_backend("torchdev", lambda ordinal: DeviceMemory(), lambda: 1)
    return wp.get_device("torchdev")


def test_a_tensor_on_the_wrong_device_is_named(other_device):
    """A CPU tensor passed to a launch on another device is a DeviceError naming the argument."""
    y = wp.zeros(3, dtype=float, device=other_device)
    with pytest.raises(wp.DeviceError, match=f"argument 'x': a Tensor in host memory was passed to a launch on "
                                             f"{other_device}"):
        wp.launch(scale, dim=3, inputs=[torch.ones(3), y, 1.0], device=other_device)


def test_gradients_are_shared_both_ways():
    """from_torch(t) with t.requires_grad shares t.grad (made when missing); to_torch(a) gives a tensor whose
    .grad views a.grad: the .grad of one is the .grad of the other."""
    t = torch.zeros(3, requires_grad=True)
    a = wp.from_torch(t)
    assert a.requires_grad and t.grad is not None and a.grad.ptr == t.grad.data_ptr()
    w = wp.zeros(3, dtype=float, requires_grad=True)
    tw = wp.to_torch(w)
    assert tw.requires_grad and tw.grad.data_ptr() == w.grad.ptr
    assert not wp.to_torch(w, requires_grad=False).requires_grad
    g = torch.ones(3)
    assert wp.from_torch(torch.zeros(3), grad=g).grad.ptr == g.data_ptr()


def test_tape_gradients_land_in_torch_grad_and_caller_buffers_are_kept():
    """A Tape fills the torch leaf's .grad once per backward (not accumulated by its own zeroing, never
    doubled), and a torch-owned seed in grads= is neither zeroed nor consumed: backward twice agrees."""
    x = torch.tensor([1.0, -2.0, 3.0], requires_grad=True)
    wx = wp.from_torch(x)
    out = torch.zeros(3)
    wout = wp.from_torch(out, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(scale, dim=3, inputs=[wx, wout, 2.0])
    seed = torch.tensor([1.0, 10.0, 100.0])
    tape.backward(grads={wout: wp.from_torch(seed)})
    torch.testing.assert_close(x.grad, 2.0 * seed)
    tape.zero()
    tape.backward(grads={wout: wp.from_torch(seed)})
    torch.testing.assert_close(x.grad, 2.0 * seed)
    torch.testing.assert_close(seed, torch.tensor([1.0, 10.0, 100.0]))


def test_a_tensor_that_needs_grad_is_not_lost_on_a_tape():
    """A tensor requiring grad passed directly to a launch a Tape records has no gradient buffer: a LaunchError
    pointing to from_torch. Outside a tape it is just data."""
    x = torch.ones(3, requires_grad=True)
    y = wp.zeros(3, dtype=float, requires_grad=True)
    wp.launch(scale, dim=3, inputs=[x, y, 1.0])
    with wp.Tape():
        with pytest.raises(wp.LaunchError, match=r"argument 'x': a Tensor that requires grad .*wp.from_torch\(x\)"):
            wp.launch(scale, dim=3, inputs=[x, y, 1.0])


class Rosenbrock(torch.autograd.Function):
    """The documents' Rosenbrock function (adjoint launch in backward)."""

    @staticmethod
    def forward(ctx, xy, num_points):
        ctx.xy = wp.from_torch(xy, dtype=pvec2, requires_grad=True)
        ctx.num_points = num_points
        ctx.z = wp.zeros(num_points, requires_grad=True)
        wp.launch(kernel=rosenbrock, dim=num_points, inputs=[ctx.xy], outputs=[ctx.z])
        return wp.to_torch(ctx.z)

    @staticmethod
    def backward(ctx, adj_z):
        ctx.z.grad = wp.from_torch(adj_z)
        wp.launch(kernel=rosenbrock, dim=ctx.num_points, inputs=[ctx.xy], outputs=[ctx.z],
                  adj_inputs=[ctx.xy.grad], adj_outputs=[ctx.z.grad], adjoint=True)
        return (wp.to_torch(ctx.xy.grad), None)


@pytest.mark.parametrize("set_to_none", [True, False])
def test_leaf_gradients_are_not_counted_twice(set_to_none):
    """Inside an autograd.Function, from_torch(requires_grad=True) gets a gradient buffer of its own: torch adds
    what backward returns into xy.grad exactly once, whether xy.grad existed before (zero_grad(set_to_none=False))
    or not."""
    xy = torch.tensor([[0.5, 0.2], [-1.0, 1.5]], requires_grad=True)
    x, y = xy.detach()[:, 0], xy.detach()[:, 1]
    expect = torch.stack([-2 * (1 - x) - 400 * x * (y - x * x), 200 * (y - x * x)], dim=1)
    opt = torch.optim.SGD([xy], lr=0.0)
    for _ in range(3):
        opt.zero_grad(set_to_none=set_to_none)
        z = Rosenbrock.apply(xy, 2)
        seed = torch.ones_like(z)
        z.backward(seed)
        torch.testing.assert_close(xy.grad, expect)
        assert (seed == 1.0).all()  # torch's grad_output is read, not consumed


class Cube(torch.autograd.Function):
    """y = x^3 + sin x by a kernel, differentiated with a Tape (float64)."""

    @staticmethod
    def forward(ctx, x):
        ctx.x = wp.from_torch(x, requires_grad=True)
        ctx.y = wp.zeros(len(x), dtype=wp.float64, requires_grad=True)
        ctx.tape = wp.Tape()
        with ctx.tape:
            wp.launch(cube64, dim=len(x), inputs=[ctx.x], outputs=[ctx.y])
        return wp.to_torch(ctx.y, requires_grad=False).clone()

    @staticmethod
    def backward(ctx, adj_y):
        ctx.tape.zero()  # gradients accumulate across backward calls, as in Warp; torch may call this many times
        ctx.tape.backward(grads={ctx.y: wp.from_torch(adj_y.contiguous())})
        return wp.to_torch(ctx.x.grad).clone()


def test_gradcheck_passes_through_a_kernel():
    """torch.autograd.gradcheck (which calls backward many times on one forward) passes on a Function wrapping
    a float64 kernel: each backward, after tape.zero(), gives the gradient and leaves torch's grad_output alone."""
    x = torch.linspace(-1.0, 1.0, 5, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(Cube.apply, (x,))


def test_custom_op_differentiates_and_compiles():
    """loomwork.torch.custom_op makes a kernel a torch operator: gradcheck passes on it (float64), and a model
    using it trains under torch.compile(fullgraph=True) on the CPU, as it does eagerly."""
    from loomwork.torch import custom_op

    cube_op = custom_op(cube64, "loomwork_test::cube64")
    x = torch.linspace(-1.0, 1.0, 4, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(cube_op, (x,))
    mix_op = custom_op(mix, "loomwork_test::mix")

    def train(compiled: bool) -> list[float]:
        w = torch.nn.Parameter(torch.full((16,), 0.5))
        data = torch.linspace(-2.0, 2.0, 16)
        target = torch.tanh(1.5 * data)
        opt = torch.optim.SGD([w], lr=0.5)

        def loss_fn(w: torch.Tensor) -> torch.Tensor:
            return ((mix_op(data, w, 1.0) - target) ** 2).mean()

        run = torch.compile(loss_fn, fullgraph=True) if compiled else loss_fn
        losses = []
        for _ in range(20):
            opt.zero_grad()
            loss = run(w)
            loss.backward()
            opt.step()
            losses.append(loss.item())
        return losses

    eager, compiled = train(False), train(True)
    assert compiled[-1] < 0.5 * compiled[0]
    np.testing.assert_allclose(compiled, eager, rtol=1e-5)


@wp.kernel
def affine(x: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = 0.5 - x[i] * 2.0


@wp.kernel
def square64(x: wp.array(dtype=wp.float64), y: wp.array(dtype=wp.float64)):
    i = wp.tid()
    y[i] = x[i] * x[i]


def test_adjoints_laid_out_otherwise_than_their_arrays():
    """Explicit adjoints from torch need not share the arrays' strides (Warp's arrays carry their own): the
    broadcast ones of `y.sum().backward()` are read, a strided view of a gradient is written back; a
    non-contiguous tensor's own .grad is made with its strides; tape gradients may be strided views."""

    class Affine(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            y = torch.empty_like(x)
            ctx.x, ctx.y = x.detach(), y.detach()
            wp.launch(affine, dim=len(x), inputs=[wp.from_torch(ctx.x)], outputs=[wp.from_torch(ctx.y)])
            return y

        @staticmethod
        def backward(ctx, adj_y):
            assert adj_y.stride() == (0,)  # torch hands the sum's gradient over as a broadcast
            adj_x = torch.zeros(2 * len(ctx.x))[::2]  # written through a strided view
            wp.launch(affine, dim=len(ctx.x), inputs=[wp.from_torch(ctx.x)], outputs=[wp.from_torch(ctx.y)],
                      adj_inputs=[adj_x], adj_outputs=[adj_y], adjoint=True)
            return adj_x

    x = torch.ones(16, requires_grad=True)
    Affine.apply(x).sum().backward()
    torch.testing.assert_close(x.grad, torch.full((16,), -2.0))

    base = torch.arange(12.0, dtype=torch.float64).reshape(4, 3)
    xs = base[:3, 1].detach().requires_grad_(True)
    xa = wp.from_torch(xs, requires_grad=True)  # a strided view: its gradient keeps the strides
    assert xs.grad.stride() == xs.stride()
    ya = wp.zeros(3, dtype=wp.float64, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(square64, dim=3, inputs=[xa], outputs=[ya])
    seed = torch.ones(6, dtype=torch.float64)[::2]
    tape.backward(grads={ya: wp.from_torch(seed, dtype=wp.float64)})
    torch.testing.assert_close(xs.grad, 2.0 * xs.detach())
    torch.testing.assert_close(seed, torch.ones(3, dtype=torch.float64))  # the caller's seed is kept
    with torch.no_grad():  # as inside an autograd.Function's forward: a gradient buffer of our own, as strided
        assert wp.from_torch(base[:3, 1], requires_grad=True).grad.strides == (24,)


def test_warp_spellings_of_the_bridge():
    """Warp's forms: return_ctype descriptors expose data/grad/shape/strides, integer tensors are read as
    the other signedness, unsigned types map to torch's signed ones, tensors assign into vector slices."""
    t = torch.arange(10, dtype=torch.int64)
    d = wp.from_torch(t, dtype=wp.uint64, return_ctype=True)
    assert (d.data, d.grad, d.ndim, d.shape[0], d.strides[0]) == (t.data_ptr(), 0, 1, 10, 8)
    assert wp.from_torch(t, dtype=wp.uint64).numpy().dtype == np.uint64
    assert wp.from_torch(torch.ones(3, dtype=torch.bool), dtype=wp.uint8).numpy().tolist() == [1, 1, 1]
    assert [wp.dtype_to_torch(x) for x in (wp.uint16, wp.uint32, wp.uint64, wp.uint8)] == [
        torch.int16, torch.int32, torch.int64, torch.uint8]
    v = wp.vec4()
    v[1:] = torch.tensor([1.0, 2.0, 3.0])
    assert list(v) == [0.0, 1.0, 2.0, 3.0]
    assert list(wp.transform(torch.tensor([1.0, 2.0, 3.0]), torch.tensor([0.0, 0.0, 0.0, 1.0]))) == [
        1.0, 2.0, 3.0, 0.0, 0.0, 0.0, 1.0]
    g = torch.zeros(3, 2)
    d = wp.from_torch(torch.zeros(3, 2), dtype=wp.vec2, grad=g, return_ctype=True)
    assert d.grad == g.data_ptr()  # the flag a caller's buffer carries is not part of the pointer
    t = torch.zeros(4, requires_grad=True)
    assert wp.from_torch(t, retain_grad=True).retain_grad and not wp.from_torch(t).retain_grad
    with pytest.raises(TypeError, match="expects float32 data"):
        wp.from_torch(torch.zeros(3, dtype=torch.int32), dtype=wp.float32)
