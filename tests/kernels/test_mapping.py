"""wp.map and the arrays' arithmetic operators: results against NumPy, broadcasting, tuples, gradients, errors."""

import numpy as np
import pytest

import loomwork as wp


@wp.func
def sum_and_product(u: float, v: float):
    return u + v, u * v


def squared(u: float):
    return u * u


def test_array_operators_match_numpy():
    """Arithmetic operators on arrays (and scalars of either side) are elementwise kernels; Python numbers take
    the array's scalar type; integers wrap as in kernels; shapes broadcast as in NumPy."""
    a = wp.array([1.0, 2.0, 3.0], dtype=wp.float64)
    b = wp.array(np.arange(6, dtype=np.float64).reshape(2, 3))
    an, bn = a.numpy().copy(), b.numpy()
    for got, want in (((a + 5), an + 5), ((5 - a), 5 - an), ((a * b), an * bn), ((b / a), bn / an), ((-a), -an),
                      ((a ** 2), an ** 2), ((+a), an), ((b // a), bn // an)):
        assert got.dtype == wp.float64
        np.testing.assert_allclose(got.numpy(), want)
    x, s = wp.array([1, 2, 3], dtype=wp.int16), wp.int16(5)
    assert (x + s).numpy().tolist() == [6, 7, 8] and (s % x).numpy().tolist() == [0, 1, 2]
    assert (wp.array([30000], dtype=wp.int16) * 2).numpy().tolist() == [-5536]
    v = wp.array([wp.vec3(1.0, 2.0, 3.0)], dtype=wp.vec3)
    np.testing.assert_allclose((v * 2.0).numpy(), [[2.0, 4.0, 6.0]])
    a += 1.0
    np.testing.assert_allclose(a.numpy(), an + 1)


def test_map_functions_tuples_and_out():
    """A @wp.func returning two values gives two arrays; a plain Python function is made a @wp.func; `out=`
    receives the result; `return_kernel=True` gives the kernel without launching."""
    p, q = wp.array([1.0, 2.0], dtype=float), wp.array([3.0, 4.0], dtype=float)
    s, m = wp.map(sum_and_product, p, q)
    assert s.numpy().tolist() == [4.0, 6.0] and m.numpy().tolist() == [3.0, 8.0]
    out = wp.zeros(2)
    assert wp.map(squared, p, out=out) is out and out.numpy().tolist() == [1.0, 4.0]
    assert isinstance(wp.map(squared, p, return_kernel=True), wp.Kernel)


def test_map_gradients_through_broadcasting():
    """Launches of wp.map are recorded on a Tape; a broadcast operand's gradient sums over the broadcast axis."""
    a = wp.array([1.0, 2.0, 3.0], dtype=float, requires_grad=True)
    b = wp.array(np.ones((2, 3), dtype=np.float32) * 2.0, requires_grad=True)
    tape = wp.Tape()
    with tape:
        y = a * b
    tape.backward(grads={y: np.ones((2, 3), dtype=np.float32)})
    np.testing.assert_allclose(a.grad.numpy(), [4.0, 4.0, 4.0])
    np.testing.assert_allclose(b.grad.numpy(), [[1.0, 2.0, 3.0]] * 2)


def test_broadcast_gradients_add_up_under_many_threads():
    """A broadcast operand's gradient elements are shared by threads: the adjoint adds atomically there (the
    own-element fast path would lose updates), here over enough rows to run on every CPU thread."""
    rows = 200_000
    a = wp.array(np.array([1.0, 2.0, 3.0, 4.0], np.float32), requires_grad=True)
    b = wp.array(np.full((rows, 4), 0.5, np.float32), requires_grad=True)
    tape = wp.Tape()
    with tape:
        y = a * b
    tape.backward(grads={y: np.ones((rows, 4), dtype=np.float32)})
    np.testing.assert_allclose(a.grad.numpy(), [0.5 * rows] * 4, rtol=1e-5)
    np.testing.assert_allclose(b.grad.numpy()[-1], [1.0, 2.0, 3.0, 4.0])


def test_map_errors():
    """No array input, shapes that do not broadcast, a function that does not take the types, a wrong `out`."""
    with pytest.raises(TypeError, match="at least one input"):
        wp.map(wp.add, 1.0, 2.0)
    with pytest.raises(ValueError, match="do not broadcast"):
        wp.map(wp.add, wp.zeros(3), wp.zeros(4))
    with pytest.raises(TypeError, match="no overload of length"):
        wp.map(wp.length, wp.zeros(3))
    with pytest.raises(ValueError, match="out must be"):
        wp.map(wp.add, wp.zeros(3), wp.zeros(3), out=wp.zeros(4))
