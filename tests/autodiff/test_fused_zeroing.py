"""Tape.backward lets an adjoint zero the gradients it owns element by element (one pass over the memory)
instead of zeroing them first: the gradients must be those of the plain path in every case, and the fused
path must be taken only where it is exact."""

import numpy as np
import pytest

import loomwork as wp
from loomwork.autodiff.tape import fused_zeroing


@wp.kernel
def per_element(x: wp.array(dtype=float), a: wp.array(dtype=float), b: wp.array(dtype=float),
                y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = a[i] * x[i] + b[i]


@wp.kernel
def squares(y: wp.array(dtype=float), x: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, y[i] * y[i] + 3.0 * x[i])


@wp.kernel
def squares_2d(m: wp.array2d(dtype=wp.vec2), loss: wp.array(dtype=float)):
    i, j = wp.tid()
    v = m[i, j]
    wp.atomic_add(loss, 0, wp.dot(v, v) * float(i + 1))


@wp.kernel
def gather_pairs(x: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, x[i] * x[(i + 1) % x.shape[0]])


def _arrays(n: int, seed: int = 0) -> list:
    rng = np.random.default_rng(seed)
    return [wp.array(rng.standard_normal(n).astype(np.float32), requires_grad=True) for _ in range(3)]


def _record(x, a, b, y, loss) -> wp.Tape:
    tape = wp.Tape()
    with tape:
        wp.launch(per_element, x.shape[0], inputs=[x, a, b, y])
        wp.launch(squares, x.shape[0], inputs=[y, x, loss])
    return tape


def test_two_stages_give_exact_gradients_from_garbage_and_twice():
    """x feeds both launches, y links them: y's gradient (an intermediate, written by the first launch) is
    zeroed by its store's adjoint, so it is exact from garbage and again on a second backward; the inputs'
    gradients accumulate, as Warp's do (y is made with retain_grad, so its gradient stays readable)."""
    n = 10_000
    x, a, b = _arrays(n)
    y = wp.zeros(n, dtype=float, requires_grad=True, retain_grad=True)
    loss = wp.zeros(1, dtype=float, requires_grad=True)
    tape = _record(x, a, b, y, loss)
    masks, fused = fused_zeroing(tape.launches, {id(loss): (loss, 1.0)})
    assert fused == {id(y)}
    xn, an, bn = x.numpy().astype(np.float64), a.numpy().astype(np.float64), b.numpy().astype(np.float64)
    yn = an * xn + bn
    y.grad.fill_(123.0)
    for k in (1, 2):
        tape.backward(loss=loss)
        np.testing.assert_allclose(y.grad.numpy(), 2 * yn, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(x.grad.numpy(), k * (2 * yn * an + 3.0), rtol=1e-5, atol=1e-4)
        np.testing.assert_allclose(a.grad.numpy(), k * 2 * yn * xn, rtol=1e-5, atol=1e-4)
        np.testing.assert_allclose(b.grad.numpy(), k * 2 * yn, rtol=1e-5, atol=1e-4)
        y.grad.fill_(123.0)


@wp.kernel
def copy_2d(src: wp.array2d(dtype=wp.vec2), m: wp.array2d(dtype=wp.vec2)):
    i, j = wp.tid()
    m[i, j] = src[i, j]


def test_a_2d_launch_over_a_vector_array():
    """A 2-D launch over exactly a 2-D intermediate array of vec2 zeroes its gradient in place (garbage in
    it does not reach the input's gradient), including strided rows."""
    base = np.random.default_rng(1).standard_normal((6, 10, 2)).astype(np.float32)
    for m in (wp.zeros((6, 10), dtype=wp.vec2, requires_grad=True),
              wp.zeros((6, 10), dtype=wp.vec2, requires_grad=True)[:, 2:7]):
        src = wp.array(base[:, :m.shape[1]], dtype=wp.vec2, requires_grad=True)
        loss = wp.zeros(1, dtype=float, requires_grad=True)
        tape = wp.Tape()
        with tape:
            wp.launch(copy_2d, m.shape, inputs=[src, m])
            wp.launch(squares_2d, m.shape, inputs=[m, loss])
        assert id(m) in fused_zeroing(tape.launches, {id(loss): (loss, 1.0)})[1]
        m.grad.fill_(7.0)
        tape.backward(loss=loss)
        weight = np.arange(1, m.shape[0] + 1, dtype=np.float32)[:, None, None]
        np.testing.assert_allclose(src.grad.numpy(), 2 * src.numpy() * weight, rtol=1e-6)


def test_what_is_not_fused_still_starts_from_zero():
    """Intermediates not fused are zeroed up front instead (a launch over part of the array, views of one
    storage, arrays before a recorded function); inputs' gradients accumulate from what they held."""
    x, a, b = _arrays(64, seed=2)
    y = wp.zeros(64, dtype=float, requires_grad=True)
    loss = wp.zeros(1, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(per_element, 32, inputs=[x, a, b, y])  # half of each array
        wp.launch(gather_pairs, 64, inputs=[x, loss])  # x[i + 1]: not this thread's own element
    masks, fused = fused_zeroing(tape.launches, {id(loss): (loss, 1.0)})
    assert fused == set()
    for g in (x.grad, a.grad, b.grad, y.grad):
        g.fill_(5.0)
    tape.backward(loss=loss)
    xn = x.numpy()
    np.testing.assert_allclose(x.grad.numpy(), 5.0 + np.roll(xn, 1) + np.roll(xn, -1), rtol=1e-6)
    assert (a.grad.numpy() == 5.0).all() and not y.grad.numpy().any()

    whole = wp.zeros(8, dtype=float, requires_grad=True)
    src = wp.array(np.arange(8, dtype=np.float32), requires_grad=True)
    lo, hi = whole[:4], whole[4:]
    loss.zero_()
    tape = wp.Tape()
    with tape:
        wp.copy(whole, src)
        wp.launch(squares, 4, inputs=[lo, hi, loss])
    assert fused_zeroing(tape.launches, {id(loss): (loss, 1.0)})[1] == set()  # two views of one storage
    whole.grad.fill_(9.0)
    tape.backward(loss=loss)  # the garbage in whole.grad was zeroed up front: src gets the exact gradient
    np.testing.assert_allclose(src.grad.numpy(), [0, 2, 4, 6, 3, 3, 3, 3])

    x, a, b = _arrays(16, seed=3)
    y = wp.zeros(16, dtype=float, requires_grad=True)
    loss = wp.zeros(1, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(per_element, 16, inputs=[x, a, b, y])
        tape.record_func(lambda: None, [y])
        wp.launch(squares, 16, inputs=[y, x, loss])
    assert fused_zeroing(tape.launches, {id(loss): (loss, 1.0)})[1] == {id(y)}  # after the function; x accumulates


def test_a_torch_owned_gradient_is_accumulated_into_not_zeroed():
    """A gradient the caller owns (from_torch sharing t.grad) is never zeroed, fused or not."""
    torch = pytest.importorskip("torch", reason="PyTorch is not installed")
    t = torch.ones(8, requires_grad=True)
    t.grad = torch.full((8,), 2.0)
    x = wp.from_torch(t)
    a = wp.array(np.full(8, 3.0, np.float32), requires_grad=True)
    b = wp.zeros(8, dtype=float, requires_grad=True)
    y = wp.zeros(8, dtype=float, requires_grad=True)
    loss = wp.zeros(1, dtype=float, requires_grad=True)
    tape = _record(x, a, b, y, loss)
    assert id(x) not in fused_zeroing(tape.launches, {id(loss): (loss, 1.0)})[1]
    tape.backward(loss=loss)
    np.testing.assert_allclose(t.grad.numpy(), 2.0 + 2 * 3.0 * 3.0 + 3.0)
