"""Tiles, fifth part: accumulating matmuls built in place, tile stacks, scatters into tiles, in-place
factorizations and solves, NaN in running extrema, partial tiles, extrema of structs, len() of tiles; with
finite-difference checks of the differentiable ones."""

from typing import Any

import numpy as np

import loomwork as wp
from loomwork.autodiff.gradcheck import gradcheck

rng = np.random.default_rng(23)


@wp.kernel
def k_gemm_loop(a: wp.array2d(dtype=wp.float64), b: wp.array2d(dtype=wp.float64), c: wp.array2d(dtype=wp.float64)):
    i, j = wp.tid()
    acc = wp.tile_ones(shape=(8, 8), dtype=wp.float64)
    for k in range(a.shape[1] // 4):
        x = wp.tile_load(a, shape=(8, 4), offset=(i * 8, k * 4))
        y = wp.tile_load(b, shape=(4, 8), offset=(k * 4, j * 8))
        wp.tile_matmul(x, y, acc, alpha=0.5, beta=0.75)
    wp.tile_store(c, acc, offset=(i * 8, j * 8))


@wp.kernel
def k_matmul_self(a: wp.array2d(dtype=float), c: wp.array2d(dtype=float)):
    x = wp.tile_load(a, shape=(32, 32))
    acc = wp.tile_load(a, shape=(32, 32))
    wp.tile_matmul(acc, x, acc)  # out is also an operand: computed from the old value
    wp.tile_matmul(x, acc, acc)
    wp.tile_store(c, acc)


def test_accumulating_matmul_in_a_loop_matches_numpy_and_finite_differences():
    """out = alpha a b + beta out, repeated in a loop into the same tile (built in place), matches NumPy and its
    adjoint central differences; an accumulator that is also an operand reads its old value."""
    A = rng.standard_normal((16, 12))
    Bm = rng.standard_normal((12, 8))
    c = wp.zeros((16, 8), dtype=wp.float64)
    wp.launch_tiled(k_gemm_loop, dim=(2, 1), inputs=[wp.array(A), wp.array(Bm), c], block_dim=16)
    expect = np.ones((16, 8))
    for k in range(3):
        expect = 0.5 * A[:, 4 * k:4 * k + 4] @ Bm[4 * k:4 * k + 4] + 0.75 * expect
    np.testing.assert_allclose(c.numpy(), expect, rtol=1e-12)
    a = wp.array(A, requires_grad=True)
    b = wp.array(Bm, requires_grad=True)
    out = wp.zeros((16, 8), dtype=wp.float64, requires_grad=True)
    def run(a: wp.array, b: wp.array, out: wp.array) -> None:
        wp.launch_tiled(k_gemm_loop, dim=(2, 1), inputs=[a, b, out], block_dim=16)

    assert gradcheck(run, None, [a, b], [out], eps=1e-6, atol=1e-6)
    X = rng.standard_normal((32, 32)).astype(np.float32)
    d = wp.zeros((32, 32), dtype=float)
    wp.launch_tiled(k_matmul_self, dim=1, inputs=[wp.array(X), d], block_dim=32)
    acc = X @ X + X
    np.testing.assert_allclose(d.numpy(), X @ acc + acc, rtol=1e-4, atol=1e-3)


@wp.kernel
def k_matmul_mixed(a: wp.array2d(dtype=wp.float16), b: wp.array2d(dtype=float), c: wp.array2d(dtype=wp.float64),
                   d: wp.array2d(dtype=wp.float16)):
    x = wp.tile_load(a, shape=(4, 8))
    y = wp.tile_load(b, shape=(8, 6))
    out = wp.tile_load(c, shape=(4, 6))  # NaN: beta = 0 does not read it
    wp.tile_matmul(x, y, out, alpha=2.0, beta=0.0)
    wp.tile_store(c, out)
    wp.tile_store(d, wp.tile_matmul(x, wp.tile_astype(y, wp.float16)))


def test_matmul_of_mixed_float_types_and_beta_zero():
    """Operands of float16/32/64 multiply in out's dtype (a's without out); beta = 0 ignores out's contents."""
    A = rng.standard_normal((4, 8)).astype(np.float16)
    Bm = rng.standard_normal((8, 6)).astype(np.float32)
    c = wp.array(np.full((4, 6), np.nan))
    d = wp.zeros((4, 6), dtype=wp.float16)
    wp.launch_tiled(k_matmul_mixed, dim=1, inputs=[wp.array(A), wp.array(Bm), c, d], block_dim=8)
    np.testing.assert_allclose(c.numpy(), 2.0 * A.astype(np.float64) @ Bm.astype(np.float64), rtol=1e-6)
    np.testing.assert_allclose(d.numpy(), A.astype(np.float32) @ Bm.astype(np.float16).astype(np.float32),
                               rtol=2e-2, atol=2e-2)


CAP = wp.constant(4)


@wp.kernel
def k_stack(data: wp.array(dtype=int), out: wp.array(dtype=int), slots: wp.array(dtype=int),
            counts: wp.array(dtype=int)):
    s = wp.tile_stack(capacity=CAP, dtype=int)
    for i in range(data.shape[0]):
        slots[i] = wp.tile_stack_push(s, data[i], data[i] > 2)  # -1 when not kept or the stack is full
    counts[0] = wp.tile_stack_count(s)
    value, slot = wp.tile_stack_pop(s)
    out[0] = value
    out[1] = slot
    wp.tile_stack_clear(s)
    counts[1] = wp.tile_stack_count(s)
    value, slot = wp.tile_stack_pop(s)
    out[2] = slot
    v = wp.tile_stack(capacity=2, dtype=wp.vec2)
    wp.tile_stack_push(v, wp.vec2(1.0, 2.0), True)
    p, q = wp.tile_stack_pop(v)
    out[3] = int(p[1]) + q


def test_tile_stack_push_pop_count_clear():
    """A stack keeps the pushed values that fit (slot -1 for the rest), pops the last first, empties on clear."""
    data = wp.array(np.array([5, 1, 7, 3, 9, 4, 8], np.int32))
    out, slots, counts = wp.zeros(4, dtype=int), wp.zeros(7, dtype=int), wp.zeros(2, dtype=int)
    wp.launch_tiled(k_stack, dim=1, inputs=[data, out, slots, counts], block_dim=4)
    np.testing.assert_array_equal(slots.numpy(), [0, -1, 1, 2, 3, -1, -1])
    np.testing.assert_array_equal(counts.numpy(), [4, 0])
    np.testing.assert_array_equal(out.numpy(), [9, 3, -1, 2])


def test_tile_stack_errors():
    """A stack argument that is not a stack, or a value of another type, is a TypeError naming the call."""
    @wp.kernel
    def bad_value(out: wp.array(dtype=int)):
        s = wp.tile_stack(capacity=4, dtype=int)
        wp.tile_stack_push(s, wp.vec2(), True)

    @wp.kernel
    def bad_capacity(out: wp.array(dtype=int)):
        wp.tile_stack(capacity=0, dtype=int)

    for k, exc, msg in ((bad_value, TypeError, "tile_stack_push"), (bad_capacity, ValueError, "capacity")):
        with np.testing.assert_raises_regex(exc, msg):
            wp.launch_tiled(k, dim=1, inputs=[wp.zeros(1, dtype=int)], block_dim=1)


@wp.kernel
def k_scatter(x: wp.array(dtype=float), idx: wp.array(dtype=int), out: wp.array2d(dtype=float)):
    t = wp.tile_zeros(shape=(2, 4), dtype=float)
    for k in range(x.shape[0]):
        wp.tile_scatter_add(t, idx[k] // 4, idx[k] % 4, x[k] * x[k], True)
    wp.tile_scatter_add(t, 0, 0, 100.0, False)
    u = wp.tile_load(out, shape=(2, 4)) + t
    wp.tile_scatter_masked(u, 1, 3, x[0] * 3.0, True)
    wp.tile_scatter_masked(u, 0, 1, 50.0, False)
    wp.tile_store(out, u)


def test_scatter_add_and_masked_follow_numpy_and_finite_differences():
    """tile_scatter_add adds each value at its element (repeated indices accumulate), tile_scatter_masked writes
    one; has_value=False leaves the tile as it was; gradients reach the values and the tile."""
    X = rng.standard_normal(5)
    idx = np.array([0, 6, 6, 3, 7], np.int32)
    base = rng.standard_normal((2, 4)).astype(np.float32)
    out = wp.array(base.copy())
    wp.launch_tiled(k_scatter, dim=1, inputs=[wp.array(X.astype(np.float32)), wp.array(idx), out], block_dim=1)
    expect = base.copy().reshape(-1)
    np.add.at(expect, idx, (X * X).astype(np.float32))
    expect[7] = X[0] * 3.0
    np.testing.assert_allclose(out.numpy().reshape(-1), expect, rtol=1e-5)

    x = wp.array(X.astype(np.float32), requires_grad=True)
    o = wp.array(base.copy(), requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch_tiled(k_scatter, dim=1, inputs=[x, wp.array(idx), o], block_dim=1)
    tape.backward(grads={o: wp.array(np.arange(8, dtype=np.float32).reshape(2, 4) + 1.0)})
    w = np.arange(8, dtype=np.float64) + 1.0
    expect_grad = 2.0 * X * w[idx]
    expect_grad[4] = 0.0  # its element (7) is overwritten by the masked write
    expect_grad[0] += 3.0 * w[7]
    np.testing.assert_allclose(x.grad.numpy(), expect_grad, rtol=1e-4)


@wp.kernel
def k_inplace(a: wp.array2d(dtype=wp.float64), y: wp.array(dtype=wp.float64), x: wp.array(dtype=wp.float64),
              z: wp.array(dtype=wp.float64), f: wp.array2d(dtype=wp.float64)):
    m = wp.tile_load(a, shape=(4, 4))
    wp.tile_cholesky_inplace(m)
    wp.tile_store(f, m)
    r = wp.tile_load(y, shape=4)
    wp.tile_cholesky_solve_inplace(m, r)
    wp.tile_store(x, r)
    s = wp.tile_load(y, shape=4)
    wp.tile_lower_solve_inplace(m, s)
    wp.tile_upper_solve_inplace(wp.tile_transpose(m), s)
    wp.tile_store(z, s)


def test_inplace_factorization_and_solves_match_numpy():
    """tile_cholesky_inplace leaves the lower factor in its tile; the in-place solves leave the solution in the
    right-hand side's tile."""
    R = rng.standard_normal((4, 4))
    A = R @ R.T + 4 * np.eye(4)
    Y = rng.standard_normal(4)
    outs = [wp.zeros(4, dtype=wp.float64), wp.zeros(4, dtype=wp.float64), wp.zeros((4, 4), dtype=wp.float64)]
    wp.launch_tiled(k_inplace, dim=1, inputs=[wp.array(A), wp.array(Y), *outs], block_dim=1)
    x, z, f = (o.numpy() for o in outs)
    np.testing.assert_allclose(f, np.linalg.cholesky(A), rtol=1e-12)
    np.testing.assert_allclose(x, np.linalg.solve(A, Y), rtol=1e-10)
    np.testing.assert_allclose(z, np.linalg.solve(A, Y), rtol=1e-10)


@wp.kernel
def k_scan_nan(a: wp.array(dtype=float), hi: wp.array(dtype=float), lo: wp.array(dtype=float)):
    t = wp.tile_load(a, shape=8)
    wp.tile_store(hi, wp.tile_scan_max_inclusive(t))
    wp.tile_store(lo, wp.tile_scan_min_inclusive(t))


def test_running_extrema_skip_nan_as_numpy_fmax():
    """NaN is a missing element in tile_scan_max/min_inclusive (NumPy's fmax/fmin): NaN only while every element
    so far is NaN; infinities are values."""
    nan, inf = np.nan, np.inf
    A = np.array([nan, nan, 3.0, nan, -inf, 5.0, nan, inf], np.float32)
    hi, lo = wp.zeros(8, dtype=float), wp.zeros(8, dtype=float)
    wp.launch_tiled(k_scan_nan, dim=1, inputs=[wp.array(A), hi, lo], block_dim=1)
    np.testing.assert_array_equal(hi.numpy(), np.fmax.accumulate(A))
    np.testing.assert_array_equal(lo.numpy(), np.fmin.accumulate(A))


@wp.struct
class KeyValue:
    key: int
    value: float


@wp.func
def kv_max(a: KeyValue, b: KeyValue) -> KeyValue:
    return wp.where(a.value < b.value, b, a)


@wp.kernel
def k_struct_argmax(values: wp.array2d(dtype=KeyValue), res: wp.array(dtype=KeyValue), n: wp.array(dtype=int)):
    i = wp.tid()
    t = wp.tile_load(values, shape=(1, 16), offset=(i, 0))
    wp.tile_store(res, wp.tile_reduce(kv_max, t), offset=i)
    z = wp.tile_zeros(shape=(7, 2), dtype=float)
    n[i] = wp.static(len(t)) * 100 + wp.static(len(z))


def test_struct_reduction_and_static_len_of_tiles():
    """tile_reduce with a @wp.func on structs (wp.where picks a struct) finds the keyed maximum;
    wp.static(len(t)) is a tile's first extent."""
    vals = rng.random((3, 16)).astype(np.float32)
    kv = np.zeros((3, 16), dtype=[("key", np.int32), ("value", np.float32)])
    kv["key"] = np.arange(16)
    kv["value"] = vals
    values = wp.array(kv, dtype=KeyValue)
    res, n = wp.zeros(3, dtype=KeyValue), wp.zeros(3, dtype=int)
    wp.launch_tiled(k_struct_argmax, dim=3, inputs=[values, res, n], block_dim=16)
    np.testing.assert_array_equal([r[0] for r in res.numpy()], vals.argmax(axis=1))
    np.testing.assert_array_equal(n.numpy(), [107] * 3)


@wp.kernel
def k_slice_indexed(a: wp.array2d(dtype=float), ind: wp.array(dtype=int), rows: wp.array2d(dtype=float),
                    cols: wp.array2d(dtype=float)):
    t = wp.tile_load(a, shape=(4, 4))
    i = wp.tile_load(ind, shape=3)
    wp.tile_store(rows, wp.tile_slice_indexed(t, (i, slice(None))))
    wp.tile_store(cols, wp.tile_slice_indexed(t, (slice(None, None, None), i)))


def test_tile_slice_indexed_is_the_call_form_of_index_tiles():
    A = np.arange(16, dtype=np.float32).reshape(4, 4)
    rows, cols = wp.zeros((3, 4), dtype=float), wp.zeros((4, 3), dtype=float)
    wp.launch_tiled(k_slice_indexed, dim=1, inputs=[wp.array(A), wp.array(np.array([3, 0, -1], np.int32)), rows,
                                                    cols], block_dim=1)
    np.testing.assert_array_equal(rows.numpy(), A[[3, 0, -1]])
    np.testing.assert_array_equal(cols.numpy(), A[:, [3, 0, -1]])


@wp.kernel
def _square_tile_in_place(a: wp.array(dtype=float)):
    t = wp.tile_load(a, shape=4)
    wp.tile_store(a, t * t)


@wp.kernel
def _weighted_sum(a: wp.array(dtype=float), w: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, a[i] * w[i])


def test_tile_loads_and_stores_are_array_effects_the_tape_follows():
    """A Tape sees what tile_load reads and tile_store writes: an in-place tile update is differentiated from the
    values it read (the stored region's gradient not passed on to them), as element stores are."""
    lk = _square_tile_in_place.module.load(wp.get_device("cpu")).kernel(_square_tile_in_place.key)
    assert lk.reads == {0} and lk.writes == {0}
    a0 = np.array([0.5, 1.0, 1.5, 2.0], np.float32)
    w = np.array([1.0, 2.0, 3.0, 4.0], np.float32)
    a, loss = wp.array(a0, requires_grad=True), wp.zeros(1, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch_tiled(_square_tile_in_place, dim=1, inputs=[a], block_dim=4)
        wp.launch(_weighted_sum, 4, inputs=[a, wp.array(w), loss])
    tape.backward(loss=loss)
    np.testing.assert_allclose(a.grad.numpy(), 2.0 * a0 * w)


out = 0.5  # a global of the same name as the kernel's argument below, which must not stand in for it


@wp.kernel(module="unique")
def k_zeros_like_out(src: wp.array2d(dtype=Any), out: wp.array2d(dtype=Any)):
    row = wp.tile_load(src, shape=(1, 3))
    dest = wp.tile_zeros(shape=(2, 3), dtype=out.dtype)
    wp.tile_assign(dest, wp.tile_broadcast(row, shape=(2, 3)))
    wp.tile_store(out, dest)


def test_tile_dtype_from_an_argument_converts_values_and_adjoints():
    """dtype=out.dtype names the argument's element type (not a global of that name); assigning a tile of
    another float type converts the values and, backward, the adjoints (summed over the broadcast rows)."""
    for src_t, out_t in ((np.float64, np.float32), (np.float32, np.float64)):
        src_np = np.array([[1.1, 2.2, -3.3]], dtype=src_t)
        src = wp.array(src_np, requires_grad=True)
        dst = wp.zeros((2, 3), dtype=wp.dtype_from_numpy(out_t), requires_grad=True)
        with wp.Tape() as tape:
            wp.launch_tiled(k_zeros_like_out, dim=1, inputs=[src, dst], block_dim=4)
        np.testing.assert_array_equal(dst.numpy(), np.broadcast_to(src_np.astype(out_t), (2, 3)))
        dst.grad = wp.array(np.array([[0.25, 0.5, 1.0], [1.25, 2.5, 4.0]], dtype=out_t))
        tape.backward()
        np.testing.assert_array_equal(src.grad.numpy(), np.array([[1.5, 3.0, 5.0]], dtype=src_t))
