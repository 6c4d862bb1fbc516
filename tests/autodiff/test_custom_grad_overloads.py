"""@wp.func_grad per overload of a function, for functions returning several values, and adjoints of fields."""

import numpy as np

import loomwork as wp


@wp.func
def two_values(x: float, y: float):
    return x * 3.0 + y / 3.0, y * y


@wp.func_grad(two_values)
def two_values_grad(x: float, y: float, adj_ret0: float, adj_ret1: float):
    wp.adjoint[x] += adj_ret0 * 42.0 + adj_ret1 * 10.0
    wp.adjoint[y] += adj_ret1 * 3.0


@wp.struct
class Holder:
    scalar: float
    vec: wp.vec3


@wp.func
def two_values(h: Holder):  # noqa: F811 - a second overload
    return h.vec[0] * h.vec[1], h.scalar


@wp.func_grad(two_values)
def two_values_grad(h: Holder, adj_ret0: float, adj_ret1: float):  # noqa: F811 - the second overload's
    wp.adjoint[h.scalar] += adj_ret1 * 10.0
    wp.adjoint[h.vec][0] += adj_ret0 * 20.0


@wp.kernel
def call_floats(xs: wp.array(dtype=float), ys: wp.array(dtype=float), out: wp.array(dtype=float)):
    i = wp.tid()
    a, b = two_values(xs[i], ys[i])
    out[i] = a + b


@wp.kernel
def call_struct(hs: wp.array(dtype=Holder), out: wp.array(dtype=float)):
    i = wp.tid()
    a, b = two_values(hs[i])
    out[i] = a + b


def test_custom_gradients_per_overload_with_several_returns():
    """Each overload uses its own @wp.func_grad, which takes adj_ret0, adj_ret1... for the returned values and may
    accumulate into a field or component of a parameter's adjoint (`wp.adjoint[h.vec][0]`)."""
    xs = wp.array([1.0, 2.0], dtype=float, requires_grad=True)
    ys = wp.array([3.0, 4.0], dtype=float, requires_grad=True)
    out = wp.zeros(2, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(call_floats, 2, inputs=[xs, ys, out])
    tape.backward(grads={out: np.ones(2, dtype=np.float32)})
    assert xs.grad.numpy().tolist() == [52.0, 52.0] and ys.grad.numpy().tolist() == [3.0, 3.0]

    h = Holder()
    h.scalar, h.vec = 4.0, wp.vec3(1.0, 2.0, 3.0)
    hs, out1 = wp.array([h], dtype=Holder, requires_grad=True), wp.zeros(1, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(call_struct, 1, inputs=[hs, out1])
    tape.backward(loss=out1)
    assert out1.numpy()[0] == 6.0
    grad = hs.grad.numpy()[0]
    assert grad[0] == 10.0 and grad[1].tolist() == [20.0, 0.0, 0.0]
