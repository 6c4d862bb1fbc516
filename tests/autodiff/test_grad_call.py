"""wp.grad(f)(args) inside kernels and functions: f's gradient from its adjoint, checked analytically."""

import numpy as np
import pytest

import loomwork as wp


@wp.func
def potential(d: wp.vec3) -> float:
    return 0.5 * wp.dot(d, d) * wp.length(d)


@wp.func
def angle(a: float, b: float) -> float:
    return wp.atan2(a, b)


@wp.func
def force(d: wp.vec3) -> wp.vec3:
    return -wp.grad(potential)(d)


@wp.func
def not_float(d: wp.vec3) -> wp.vec3:
    return d


@wp.func
def with_array(a: wp.array(dtype=float), x: float) -> float:
    return a[0] * x


@wp.kernel
def gradients(x: wp.array(dtype=wp.vec3), g: wp.array(dtype=wp.vec3), f: wp.array(dtype=wp.vec3),
              ga: wp.array(dtype=float), gb: wp.array(dtype=float), gc: wp.array(dtype=float),
              gd: wp.array(dtype=float)):
    i = wp.tid()
    g[i] = wp.grad(potential)(x[i])
    f[i] = force(x[i])
    da, db = wp.grad(angle)(x[i][0], x[i][1])
    ea, eb = wp.grad(wp.atan2)(x[i][0], x[i][1])
    ga[i] = da
    gb[i] = db
    gc[i] = ea + wp.grad(wp.sin)(x[i][2])
    gd[i] = eb


@wp.kernel
def energy(x: wp.array(dtype=wp.vec3), out: wp.array(dtype=float)):
    i = wp.tid()
    g = wp.grad(potential)(x[i])
    wp.atomic_add(out, 0, potential(x[i]) + wp.dot(g, wp.vec3(1.0, 1.0, 1.0)))


@wp.kernel
def bad_return(x: wp.array(dtype=wp.vec3)):
    x[0] = wp.grad(not_float)(x[0])


@wp.kernel
def bad_params(a: wp.array(dtype=float)):
    a[0] = wp.grad(with_array)(a, 1.0)


@wp.kernel
def bad_builtin(a: wp.array(dtype=float)):
    a[0] = wp.grad(wp.floor)(a[0])


def _points() -> np.ndarray:
    return np.random.default_rng(3).uniform(0.2, 1.0, (5, 3)).astype(np.float32)


def test_grad_of_functions_in_kernels_and_functions():
    """wp.grad gives d/dd (|d|^3 / 2) = 1.5 |d| d, in a kernel and inside a @wp.func, the pair of partial
    derivatives of atan2 for a two-parameter function, and the same for the builtins atan2 and sin."""
    xn = _points()
    x = wp.array(xn, dtype=wp.vec3)
    g, f = wp.zeros(5, dtype=wp.vec3), wp.zeros(5, dtype=wp.vec3)
    ga, gb, gc, gd = (wp.zeros(5, dtype=float) for _ in range(4))
    wp.launch(gradients, dim=5, inputs=[x, g, f, ga, gb, gc, gd])
    expect = 1.5 * np.linalg.norm(xn, axis=1, keepdims=True) * xn
    np.testing.assert_allclose(g.numpy(), expect, rtol=1e-5)
    np.testing.assert_allclose(f.numpy(), -expect, rtol=1e-5)
    a, b = xn[:, 0], xn[:, 1]
    np.testing.assert_allclose(ga.numpy(), b / (a * a + b * b), rtol=1e-5)
    np.testing.assert_allclose(gb.numpy(), -a / (a * a + b * b), rtol=1e-5)
    np.testing.assert_allclose(gc.numpy(), b / (a * a + b * b) + np.cos(xn[:, 2]), rtol=1e-5)  # builtins too
    np.testing.assert_allclose(gd.numpy(), -a / (a * a + b * b), rtol=1e-5)


def test_grad_is_a_constant_in_the_backward_pass():
    """On a Tape, a wp.grad value passes no gradient back (as in Warp): d/dx of potential(x) + sum(grad) is
    the potential's gradient alone."""
    xn = _points()
    x = wp.array(xn, dtype=wp.vec3, requires_grad=True)
    out = wp.zeros(1, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(energy, dim=5, inputs=[x, out])
    tape.backward(out)
    np.testing.assert_allclose(x.grad.numpy(), 1.5 * np.linalg.norm(xn, axis=1, keepdims=True) * xn, rtol=1e-5)


def test_grad_misuse_is_named():
    """wp.grad refuses non-functions, functions returning non-floats or taking arrays, and calls from Python."""
    with pytest.raises(TypeError, match="takes a @wp.func function or a builtin"):
        wp.grad(np.sin)
    with pytest.raises(RuntimeError, match="only be called inside kernels"):
        wp.grad(potential)(wp.vec3(1.0, 2.0, 3.0))
    with pytest.raises(wp.KernelTypeError, match="needs not_float to return a float scalar; it returns vec3f"):
        wp.launch(bad_return, dim=1, inputs=[wp.zeros(1, dtype=wp.vec3)])
    with pytest.raises(wp.KernelTypeError, match="value parameters; with_array has array parameters"):
        wp.launch(bad_params, dim=1, inputs=[wp.zeros(1)])
    with pytest.raises(wp.KernelTypeError, match=r"wp.grad\(floor\): floor\(Float\) is not differentiable"):
        wp.launch(bad_builtin, dim=1, inputs=[wp.zeros(1)])
