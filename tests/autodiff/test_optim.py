"""`loomwork.optim`: Adam and SGD against NumPy references of Warp's update rules, and small optimisations."""

import numpy as np
import pytest

import loomwork as wp
import loomwork.optim
from loomwork.optim import SGD, Adam

# (loomwork dtype, NumPy storage dtype, parameter shape, tolerance against a float64 reference)
DTYPES = {
    "float32": (wp.float32, np.float32, (4, 5), 1e-5),
    "float64": (wp.float64, np.float64, (20,), 1e-12),
    "vec3": (wp.vec3, np.float32, (7, 3), 1e-5),
    "float16": (wp.float16, np.float16, (9,), 2e-2),
}


def _adam_reference(p, grads, lr, beta1, beta2, eps):
    p, m, v = p.astype(np.float64), np.zeros(p.shape), np.zeros(p.shape)
    for t, g in enumerate(grads):
        m = beta1 * m + (1 - beta1) * g
        v = beta2 * v + (1 - beta2) * g * g
        mhat, vhat = m / (1 - beta1 ** (t + 1)), v / (1 - beta2 ** (t + 1))
        p = p - lr * mhat / (np.sqrt(vhat) + eps)
    return p


def _sgd_reference(p, grads, lr, momentum, dampening, weight_decay, nesterov):
    p, b = p.astype(np.float64), np.zeros(p.shape)
    for t, g in enumerate(grads):
        g = g + weight_decay * p
        if momentum != 0:
            b = g if t == 0 else momentum * b + (1 - dampening) * g
            g = g + momentum * b if nesterov else b
        p = p - lr * g
    return p


def _problem(name, steps=5):
    dtype, np_dtype, shape, tol = DTYPES[name]
    rng = np.random.default_rng(11)
    p0 = rng.standard_normal(shape).astype(np_dtype)
    grads = [rng.standard_normal(shape).astype(np_dtype) for _ in range(steps)]
    return dtype, p0, grads, tol


@pytest.mark.parametrize("name", list(DTYPES))
def test_adam_matches_reference(name):
    """Five Adam steps equal the NumPy reference of Warp's rule (bias-corrected moments) for float32 (2-D
    array), float64, vec3 and float16 (float32 moments) parameters."""
    dtype, p0, grads, tol = _problem(name)
    p = wp.array(p0, dtype=dtype)
    opt = Adam([p], lr=0.05, betas=(0.8, 0.99), eps=1e-6)
    for g in grads:
        opt.step([wp.array(g, dtype=dtype)])
    ref = _adam_reference(p0, [g.astype(np.float64) for g in grads], 0.05, 0.8, 0.99, 1e-6)
    np.testing.assert_allclose(p.numpy().astype(np.float64).reshape(ref.shape), ref, atol=tol, rtol=tol)
    assert opt.t == len(grads)
    assert opt.m[0].dtype == (wp.float32 if dtype is wp.float16 else dtype)


SGD_SETTINGS = [dict(momentum=0.0, dampening=0.0, weight_decay=0.0, nesterov=False),
                dict(momentum=0.9, dampening=0.1, weight_decay=0.01, nesterov=False),
                dict(momentum=0.8, dampening=0.0, weight_decay=0.0, nesterov=True)]


@pytest.mark.parametrize("settings", SGD_SETTINGS, ids=["plain", "momentum", "nesterov"])
@pytest.mark.parametrize("name", ["float32", "float64", "vec3"])
def test_sgd_matches_reference(name, settings):
    """Five SGD steps (plain, with momentum/dampening/weight decay, Nesterov) equal the NumPy reference."""
    dtype, p0, grads, tol = _problem(name)
    p = wp.array(p0, dtype=dtype)
    opt = SGD([p], lr=0.1, **settings)
    for g in grads:
        opt.step([wp.array(g, dtype=dtype)])
    ref = _sgd_reference(p0, [g.astype(np.float64) for g in grads], 0.1, **settings)
    np.testing.assert_allclose(p.numpy().astype(np.float64).reshape(ref.shape), ref, atol=tol, rtol=tol)


@wp.kernel
def distance_loss(x: wp.array(dtype=wp.vec3), target: wp.array(dtype=wp.vec3), loss: wp.array(dtype=float)):
    i = wp.tid()
    d = x[i] - target[i]
    wp.atomic_add(loss, 0, wp.dot(d, d))


@pytest.mark.parametrize("make", [lambda p: Adam(p, lr=0.05), lambda p: SGD(p, lr=0.1, momentum=0.5)],
                         ids=["adam", "sgd"])
def test_optimisation_converges(make):
    """Minimising a distance through a Tape, each optimizer brings vec3 points onto their targets
    (the Warp examples' loop: backward, step with the gradients, zero the tape)."""
    rng = np.random.default_rng(5)
    target = wp.array(rng.uniform(-1, 1, (16, 3)), dtype=wp.vec3)
    x = wp.zeros(16, dtype=wp.vec3, requires_grad=True)
    opt = make([x])
    for _ in range(300):
        loss = wp.zeros(1, dtype=float, requires_grad=True)
        tape = wp.Tape()
        with tape:
            wp.launch(distance_loss, 16, inputs=[x, target, loss])
        tape.backward(loss)
        opt.step([x.grad])
        tape.zero()
    np.testing.assert_allclose(x.numpy(), target.numpy(), atol=1e-3)


def test_set_params_reset_and_views():
    """set_params keeps moments that still fit; reset_internal_state restarts the optimizer exactly; a
    strided 2-D view is updated in place without touching the entries between its elements."""
    p0 = np.linspace(-1.0, 1.0, 8).astype(np.float32)
    g = wp.array(np.full(8, 0.5, dtype=np.float32))
    p = wp.array(p0)
    opt = Adam([p], lr=0.1)
    opt.step([g])
    m = opt.m[0]
    opt.set_params([p])
    assert opt.m[0] is m and m.numpy().any()
    opt.reset_internal_state()
    assert opt.t == 0 and not opt.m[0].numpy().any() and not opt.v[0].numpy().any()
    p.assign(p0)
    opt.step([g])
    first = p.numpy().copy()
    fresh = wp.array(p0)
    Adam([fresh], lr=0.1).step([g])
    np.testing.assert_array_equal(first, fresh.numpy())

    storage = wp.array(p0.reshape(2, 4))
    view = storage[:, ::2]
    SGD([view], lr=1.0).step([wp.array(np.ones((2, 2), dtype=np.float32))])
    np.testing.assert_allclose(storage.numpy(), p0.reshape(2, 4) - np.tile([1.0, 0.0], (2, 2)), rtol=1e-6)
    assert loomwork.optim.Adam is Adam and wp.optim.linear.cg is not None


def test_bad_input_is_refused_clearly():
    """Mismatched gradients, parameters that are not float arrays and steps without parameters raise
    errors naming the argument."""
    p = wp.zeros(4, dtype=wp.float32)
    opt = Adam([p])
    with pytest.raises(TypeError, match=r"dtype must match parameter dtype float32, got float64 \(grad\[0\]\)"):
        opt.step([wp.zeros(4, dtype=wp.float64)])
    with pytest.raises(ValueError, match=r"gradient shape must match parameter shape \(4,\), got \(5,\)"):
        opt.step([wp.zeros(5, dtype=wp.float32)])
    with pytest.raises(ValueError, match="1 gradient array"):
        opt.step([p, p])
    with pytest.raises(TypeError, match=r"params\[1\] has dtype int32"):
        SGD([p, wp.zeros(3, dtype=int)])
    with pytest.raises(RuntimeError, match=r"parameters must be set before calling step\(\)"):
        SGD().step([p])
    assert opt.t == 0 and not p.numpy().any()
