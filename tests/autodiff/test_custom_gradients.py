"""Custom gradients: @wp.func_grad replaces a function's adjoint, @wp.func_replay its replay."""

import numpy as np
import pytest

import loomwork as wp


@wp.func
def safe_sqrt(x: float):
    return wp.sqrt(x)


@wp.func_grad(safe_sqrt)
def adj_safe_sqrt(x: float, adj_ret: float):
    if x > 0.0:
        wp.adjoint[x] += 1.0 / (2.0 * wp.sqrt(x)) * adj_ret


@wp.func
def clipped_identity(x: float):
    return x


@wp.func_grad(clipped_identity)
def adj_clipped_identity(x: float, adj_ret: float):
    wp.adjoint[x] += wp.clamp(adj_ret, -1.0, 1.0)


@wp.func
def reversible_increment(counter: wp.array(dtype=int), saved: wp.array(dtype=int), tid: int):
    slot = wp.atomic_add(counter, 0, 1)
    saved[tid] = slot
    return slot


@wp.func_replay(reversible_increment)
def replay_reversible_increment(counter: wp.array(dtype=int), saved: wp.array(dtype=int), tid: int):
    return saved[tid]  # the slot this thread got going forward; the counter is not touched again


@wp.kernel
def compact_squares(x: wp.array(dtype=float), counter: wp.array(dtype=int), saved: wp.array(dtype=int),
                    out: wp.array(dtype=float)):
    i = wp.tid()
    slot = reversible_increment(counter, saved, i)
    out[slot] = x[i] * x[i]


@wp.kernel
def uses_safe_sqrt(x: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = safe_sqrt(x[i])


@wp.kernel
def uses_clip(x: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = clipped_identity(x[i]) * 10.0


def test_func_grad_replaces_the_adjoint():
    """safe_sqrt's custom adjoint gives 0 at x = 0 (the generated one would divide by zero there)."""
    x = wp.array(np.array([0.0, 4.0], dtype=np.float32), requires_grad=True)
    y = wp.zeros(2, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(uses_safe_sqrt, 2, inputs=[x, y])
    tape.backward(grads={y: np.ones(2, dtype=np.float32)})
    np.testing.assert_allclose(x.grad.numpy(), [0.0, 0.25])


def test_gradient_clipping_by_a_custom_adjoint():
    """A custom adjoint may change the gradient (here: clip the incoming adjoint to [-1, 1])."""
    x = wp.array(np.array([1.0, 2.0], dtype=np.float32), requires_grad=True)
    y = wp.zeros(2, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(uses_clip, 2, inputs=[x, y])
    tape.backward(grads={y: np.ones(2, dtype=np.float32)})
    np.testing.assert_allclose(x.grad.numpy(), [1.0, 1.0])


def test_custom_gradient_signature_is_checked():
    """A @wp.func_grad whose parameters do not match the function's is a TypeError at build time."""

    @wp.func
    def f(x: float):
        return x

    @wp.func_grad(f)
    def adj_f(y: float, adj_ret: float):
        wp.adjoint[y] += adj_ret

    def k(a: wp.array(dtype=float)):
        a[0] = f(a[0])

    kern = wp.kernel(k, module="test_custom_gradients_bad_signature")
    with pytest.raises(TypeError, match=r"must take \(x, adj_ret\)"):
        wp.launch(kern, 1, inputs=[np.zeros(1, np.float32)])


def test_adjoint_outside_a_custom_gradient_is_rejected():
    """wp.adjoint[...] in an ordinary kernel is a clear error."""

    def k(a: wp.array(dtype=float)):
        wp.adjoint[a] += 1.0

    kern = wp.kernel(k, module="test_custom_gradients_misuse")
    with pytest.raises(SyntaxError, match="only be used in a @wp.func_grad"):
        wp.launch(kern, 1, inputs=[np.zeros(1, np.float32)])
    with pytest.raises(TypeError):
        wp.func_grad(lambda x: x)


def test_func_replay_supplies_the_forward_value():
    """With a custom replay, the backward pass sees each thread's slot from the forward pass."""
    n = 257
    x = wp.array(np.linspace(-1, 1, n).astype(np.float32), requires_grad=True)
    counter = wp.zeros(1, dtype=int)
    saved = wp.zeros(n, dtype=int)
    out = wp.zeros(n, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(compact_squares, n, inputs=[x, counter, saved, out])
    seed = np.arange(n, dtype=np.float32)  # a different adjoint per slot
    tape.backward(grads={out: seed})
    np.testing.assert_allclose(x.grad.numpy(), 2 * x.numpy() * seed[saved.numpy()], rtol=1e-6)


@wp.func
def _halve_into(i: int, xs: wp.array(dtype=float), ys: wp.array(dtype=float)):
    ys[i] = 0.5 * xs[i] * xs[i]


@wp.func_grad(_halve_into)
def _adj_halve_into(i: int, xs: wp.array(dtype=float), ys: wp.array(dtype=float)):
    wp.adjoint[xs][i] += 3.0 * wp.adjoint[ys][i]  # deliberately not the true derivative: shows this one ran


@wp.kernel
def _halve_kernel(xs: wp.array(dtype=float), ys: wp.array(dtype=float)):
    _halve_into(wp.tid(), xs, ys)


def test_custom_gradient_of_a_function_writing_arrays_uses_their_gradient_arrays():
    """In a @wp.func_grad, `wp.adjoint[a]` of an array parameter is its gradient array, indexed like the
    array (Warp's form for functions that write arrays and return nothing)."""
    xs = wp.array(np.arange(4, dtype=np.float32), requires_grad=True)
    ys = wp.zeros(4, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(_halve_kernel, 4, inputs=[xs, ys])
    tape.backward(grads={ys: wp.array(np.full(4, 2.0, np.float32))})
    np.testing.assert_allclose(xs.grad.numpy(), np.full(4, 6.0))
