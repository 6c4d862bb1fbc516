"""Gradients through control flow: every loop pattern and branch form against finite differences (float64)."""

import numpy as np
import pytest

import loomwork as wp
from loomwork.autograd import gradcheck, jacobian

f64 = wp.float64


@wp.func
def clamp_early(x: f64):
    if x < f64(0.0):
        return f64(0.0) * x
    if x > f64(1.0):
        return f64(1.0) + f64(0.1) * x
    return x * x


@wp.func
def poly_loop(x: f64, n: int):
    acc = f64(1.0)
    for _ in range(n):
        acc = acc * x + f64(0.5)
    return acc


@wp.kernel
def accumulator(x: wp.array(dtype=f64), n: int, out: wp.array(dtype=f64)):
    i = wp.tid()
    s = f64(0.0)
    for j in range(n):
        s += x[i] * x[i] * f64(j + 1)
    out[i] = s


@wp.kernel
def state_in_place(x: wp.array(dtype=f64), n: int, out: wp.array(dtype=f64)):
    i = wp.tid()
    v = x[i]
    for _ in range(n):
        v = wp.sin(v) * v + x[i]
    out[i] = v


@wp.kernel
def nested(x: wp.array(dtype=f64), out: wp.array(dtype=f64)):
    i = wp.tid()
    s = f64(0.0)
    p = f64(1.0)
    for j in range(x.shape[0]):
        for k in range(j + 1):
            p = p * f64(0.9) + x[j] * x[k] * f64(0.1)
            s += p * x[i]
    out[i] = s


@wp.kernel
def break_continue(x: wp.array(dtype=f64), out: wp.array(dtype=f64)):
    i = wp.tid()
    v = x[i]
    for j in range(10):
        if j % 3 == 1:
            continue
        v = v * f64(1.1) + wp.cos(v)
        if v > f64(4.0):
            break
        v = v - f64(0.05) * v * v
    out[i] = v


@wp.kernel
def data_dependent_while(x: wp.array(dtype=f64), out: wp.array(dtype=f64)):
    i = wp.tid()
    v = x[i]
    count = 0
    while v < f64(10.0):
        v = v * f64(1.7) + f64(0.3)
        count += 1
    out[i] = v * f64(count)


@wp.kernel
def funcs_with_branches_and_loops(x: wp.array(dtype=f64), out: wp.array(dtype=f64)):
    i = wp.tid()
    out[i] = clamp_early(x[i]) + poly_loop(x[i], 4)


@wp.kernel
def vector_matrix_loop(v: wp.array(dtype=wp.vec3d), m: wp.array(dtype=wp.mat33d), out: wp.array(dtype=f64)):
    i = wp.tid()
    w = v[i]
    M = m[0]
    for _ in range(3):
        w = wp.normalize(M * w + w)
        w[1] = w[1] * f64(2.0)
    out[i] = wp.dot(w, v[i]) + wp.length(w)


@wp.kernel
def branches(x: wp.array(dtype=f64), out: wp.array(dtype=f64)):
    i = wp.tid()
    v = x[i]
    r = f64(0.0)
    if v > f64(0.5) and v < f64(2.0):
        r = v * v
    elif v <= f64(0.5):
        r = wp.exp(v)
    else:
        r = f64(3.0) * v
    r = r if r > f64(1.0) else r * f64(2.0)
    out[i] = r


@wp.kernel
def write_then_read(x: wp.array(dtype=f64), y: wp.array(dtype=f64), z: wp.array(dtype=f64)):
    i = wp.tid()
    y[i] = x[i] * f64(2.0)
    z[i] = y[i] * y[i] + x[i]


@wp.struct
class Frame:
    pos: wp.vec3d
    scale: f64


@wp.kernel
def part_stores(x: wp.array(dtype=f64), v: wp.array(dtype=wp.vec3d), m: wp.array(dtype=wp.mat22d)):
    i = wp.tid()
    v[i].y = x[i] * x[i]
    v[i][0] = f64(5.0) * x[i]
    v[i][0] = wp.sin(x[i])  # overwritten: the first value gets no gradient
    v[i][2] += f64(3.0) * x[i]
    m[i][1][0] = f64(2.0) * x[i]
    m[i][0] = wp.vec2d(x[i], x[i] * x[i] * x[i])


@wp.kernel
def struct_part_stores(x: wp.array(dtype=f64), s: wp.array(dtype=Frame)):
    i = wp.tid()
    s[i].pos = wp.vec3d(x[i], x[i], x[i] * x[i] * x[i])
    s[i].pos.z = x[i] * x[i]  # replaces what the line above wrote: that value gets no gradient
    s[i].scale -= f64(4.0) * x[i]


@wp.kernel
def set_y(x: wp.array(dtype=f64), v: wp.array(dtype=wp.vec3d)):
    i = wp.tid()
    v[i].y = f64(3.0) * x[i]


@wp.kernel
def early_return_kernel(x: wp.array(dtype=f64), out: wp.array(dtype=f64)):
    i = wp.tid()
    if x[i] < f64(0.0):
        out[i] = -x[i]
        return
    out[i] = x[i] * x[i] * x[i]


@wp.kernel
def atomic_reduction(x: wp.array(dtype=f64), total: wp.array(dtype=f64)):
    i = wp.tid()
    wp.atomic_add(total, 0, x[i] * x[i])
    total[1] -= wp.sin(x[i])


X = np.array([0.3, 0.7, 1.2, -0.4, 2.5], dtype=np.float64)


@pytest.mark.parametrize("kernel,extra", [
    (accumulator, [7]), (state_in_place, [6]), (break_continue, []), (data_dependent_while, []),
    (funcs_with_branches_and_loops, []), (branches, []), (early_return_kernel, []),
], ids=lambda p: getattr(p, "key", str(p)))
def test_loop_and_branch_patterns(kernel, extra):
    """One kernel per pattern: its adjoint matches central differences."""
    x = wp.array(X)
    out = wp.zeros(len(X), dtype=f64)
    gradcheck(kernel, len(X), [x, *extra], [out], eps=1e-6, atol=1e-6, rtol=1e-5)


def test_nested_loops_over_all_elements():
    """Nested loops with a carried product and an accumulator (every output depends on every input)."""
    x = wp.array(np.array([0.3, 0.5, 0.8, 0.2]))
    out = wp.zeros(4, dtype=f64)
    gradcheck(nested, 4, [x], [out], eps=1e-6, atol=1e-6, rtol=1e-5)


def test_vectors_and_matrices_in_a_loop():
    """A vec3/mat33 recurrence with component assignment inside the loop."""
    rng = np.random.default_rng(5)
    v = wp.array(rng.uniform(0.5, 1.0, (4, 3)), dtype=wp.vec3d)
    m = wp.array(rng.uniform(-0.3, 0.3, (1, 3, 3)), dtype=wp.mat33d)
    out = wp.zeros(4, dtype=f64)
    gradcheck(vector_matrix_loop, 4, [v, m], [out], eps=1e-6, atol=1e-6, rtol=1e-5)


def test_array_written_then_read_in_one_kernel():
    """z depends on x directly and through y, written and read back by the same thread."""
    x = wp.array(X)
    y = wp.zeros(len(X), dtype=f64)
    z = wp.zeros(len(X), dtype=f64)
    jac = jacobian(write_then_read, len(X), [x], [y, z])
    np.testing.assert_allclose(np.diag(jac[("x", "z")]), 8 * X + 1)
    np.testing.assert_allclose(np.diag(jac[("x", "y")]), 2.0)


def test_stores_into_parts_of_array_elements():
    """v[i].y = f(x), m[i][1][0] = f(x), v[i][2] += f(x), a part overwritten (in the kernel, or by a later
    launch): each component's gradient flows to x as finite differences say; struct fields likewise."""
    x = wp.array(X)
    v, m = wp.zeros(len(X), dtype=wp.vec3d), wp.zeros(len(X), dtype=wp.mat22d)
    gradcheck(part_stores, len(X), [x], [v, m], eps=1e-6, atol=1e-6, rtol=1e-5)
    x = wp.array(X, requires_grad=True)
    s = wp.zeros(len(X), dtype=Frame, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(struct_part_stores, len(X), inputs=[x, s])
    seed = np.zeros(len(X), dtype=s.numpy().dtype)
    seed["pos"][:, 2] = 1.0
    seed["scale"] = 0.5
    tape.backward(grads={s: wp.array(seed, dtype=Frame)})
    np.testing.assert_allclose(x.grad.numpy(), 2 * X - 2.0)
    v = wp.zeros(len(X), dtype=wp.vec3d, requires_grad=True)
    x.grad.zero_()
    tape = wp.Tape()
    with tape:
        wp.launch(part_stores, len(X), inputs=[x, v, wp.zeros(len(X), dtype=wp.mat22d)])  # v.y = x * x ...
        wp.launch(set_y, len(X), inputs=[x, v])  # ... replaced by 3x
    tape.backward(grads={v: np.ones((len(X), 3))})
    np.testing.assert_allclose(x.grad.numpy(), np.cos(X) + 3.0 + 3.0)


def test_atomic_reduction_gradients():
    """atomic_add and `-=` reductions into one element give every thread its own gradient."""
    x = wp.array(X)
    total = wp.zeros(2, dtype=f64)
    jac = jacobian(atomic_reduction, len(X), [x], [total])[("x", "total")]
    np.testing.assert_allclose(jac[0], 2 * X)
    np.testing.assert_allclose(jac[1], -np.cos(X))


def test_loop_with_many_iterations_is_linear_for_accumulators():
    """An accumulator loop of 2000 iterations differentiates exactly (its reverse is O(N), not O(N^2))."""
    x = wp.array(np.array([0.5, 1.5]))
    out = wp.zeros(2, dtype=f64)
    jac = jacobian(accumulator, 2, [x, 2000], [out])[("x", "out")]
    np.testing.assert_allclose(np.diag(jac), 2 * np.array([0.5, 1.5]) * 2000 * 2001 / 2)
