"""The checking tools themselves, on kernels, Python functions and tapes; and the adjoints of
constructors, component access and casts."""

import numpy as np
import pytest

import loomwork as wp
from loomwork.autograd import gradcheck, gradcheck_tape, jacobian, jacobian_fd

f64 = wp.float64


@wp.kernel
def square(x: wp.array(dtype=f64), y: wp.array(dtype=f64)):
    i = wp.tid()
    y[i] = x[i] * x[i]


@wp.kernel
def weighted_sum(y: wp.array(dtype=f64), w: wp.array(dtype=f64), out: wp.array(dtype=f64)):
    i = wp.tid()
    wp.atomic_add(out, 0, y[i] * w[i])


@wp.kernel
def components(v: wp.array(dtype=wp.vec3d), m: wp.array(dtype=wp.mat22d), s: wp.array(dtype=wp.float32),
               out: wp.array(dtype=wp.vec3d)):
    i = wp.tid()
    a = v[i]
    M = m[i]
    row = M[1]
    w = wp.vec3d(a.z, a[0] * M[0, 1], row[0] + row[1])
    w += wp.vec3d(f64(s[i]))  # float32 -> float64 cast, then a broadcast constructor
    w = w + wp.vec3d(wp.vec3(wp.float32(a.y), 1.0, 2.0))  # a converting constructor
    out[i] = w


@wp.kernel
def wrong_gradient(x: wp.array(dtype=f64), y: wp.array(dtype=f64)):
    i = wp.tid()
    y[i] = wp.floor(x[i] * f64(1000.0))  # piecewise constant: zero gradient, but FD sees jumps


def two_launches(x, w, out):
    """A Python function of two launches, with an intermediate that carries a gradient."""
    y = wp.zeros(len(x), dtype=f64, requires_grad=True)
    wp.launch(square, len(x), inputs=[x, y])
    wp.launch(weighted_sum, len(x), inputs=[y, w, out])


def test_jacobian_of_a_python_function():
    """jacobian/gradcheck accept a Python function of launches: d(sum w*x^2)/dx = 2wx, /dw = x^2."""
    x = wp.array(np.array([0.5, -1.0, 2.0]))
    w = wp.array(np.array([1.0, 2.0, 3.0]))
    out = wp.zeros(1, dtype=f64)
    jac = jacobian(two_launches, None, [x, w], [out])
    np.testing.assert_allclose(jac[("x", "out")][0], 2 * w.numpy() * x.numpy())
    np.testing.assert_allclose(jac[("w", "out")][0], x.numpy() ** 2)
    assert gradcheck(two_launches, None, [x, w], [out], eps=1e-6, atol=1e-6, rtol=1e-6)
    assert x.grad is None  # the tools' temporary gradient buffers are removed again


def test_gradcheck_tape_checks_every_recorded_launch():
    """gradcheck_tape re-checks each launch of a recorded tape with its own arguments."""
    x = wp.array(np.array([0.5, 1.5]), requires_grad=True)
    y = wp.zeros(2, dtype=f64, requires_grad=True)
    w = wp.array(np.array([2.0, 3.0]), requires_grad=True)
    out = wp.zeros(1, dtype=f64, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(square, 2, inputs=[x, y])
        wp.launch(weighted_sum, 2, inputs=[y, w, out])
    assert gradcheck_tape(tape, eps=1e-6, atol=1e-6, rtol=1e-6)


def test_gradcheck_reports_a_mismatch():
    """A kernel whose adjoint disagrees with finite differences fails with a readable report."""
    x = wp.array(np.array([0.1234567, 0.5]))
    y = wp.zeros(2, dtype=f64)
    with pytest.raises(AssertionError, match="gradcheck of 'wrong_gradient' failed"):
        gradcheck(wrong_gradient, 2, [x], [y], eps=1e-3)
    assert not gradcheck(wrong_gradient, 2, [x], [y], eps=1e-3, raise_exception=False)


def test_constructors_components_and_casts():
    """Vector/matrix constructors, component and row access, float32<->float64 casts: adjoint == FD."""
    rng = np.random.default_rng(4)
    v = wp.array(rng.uniform(-1, 1, (3, 3)), dtype=wp.vec3d)
    m = wp.array(rng.uniform(-1, 1, (3, 2, 2)), dtype=wp.mat22d)
    s = wp.array(rng.uniform(-1, 1, 3).astype(np.float32))
    out = wp.zeros(3, dtype=wp.vec3d)
    analytic = jacobian(components, 3, [v, m, s], [out])
    numeric = jacobian_fd(components, 3, [v, m, s], [out], eps=1e-3)
    for key in (("v", "out"), ("m", "out")):
        np.testing.assert_allclose(analytic[key], numeric[key], atol=1e-3)
    np.testing.assert_allclose(analytic[("s", "out")], numeric[("s", "out")], atol=1e-2)


def test_tools_reject_bad_targets():
    """Not a kernel or function, no float arrays, or a non-contiguous array: clear errors."""
    with pytest.raises(TypeError):
        jacobian(42, 1, [], [])
    with pytest.raises(ValueError, match="at least one float array"):
        jacobian(square, 2, [wp.array(np.zeros(2)), wp.zeros(2, dtype=f64)], [])
    base = wp.array(np.zeros(4))
    with pytest.raises(ValueError, match="contiguous"):
        jacobian(square, 2, [base[::2]], [wp.zeros(2, dtype=f64)])
