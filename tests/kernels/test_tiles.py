"""Tiles: launch_tiled, construction, load/store, maps, reductions, scans, tile_matmul and their adjoints."""

import numpy as np
import pytest

import loomwork as wp

TM, TK, TN = 4, 8, 16
rng = np.random.default_rng(7)


@wp.kernel
def k_block_index(out: wp.array2d(dtype=int)):
    i, j = wp.tid()
    out[i, j] = i * 10 + j + wp.block_dim() * 100


@wp.kernel
def k_load_store(a: wp.array2d(dtype=float), b: wp.array2d(dtype=float)):
    i, j = wp.tid()
    t = wp.tile_load(a, shape=(TM, TN), offset=(i * TM - 1, j * TN + 3))
    wp.tile_store(b, t * 2.0 - t + 1.0, offset=(i * TM, j * TN))


@wp.kernel
def k_construct(out: wp.array2d(dtype=float), ints: wp.array(dtype=int)):
    z = wp.tile_zeros(shape=(2, 8), dtype=float)
    o = wp.tile_ones(shape=(2, 8), dtype=float)
    f = wp.tile_full(shape=(2, 8), value=2.5, dtype=float)
    r = wp.tile_arange(1.0, 17.0, 1.0, dtype=float)
    g = wp.tile_reshape(r, shape=(2, 8))
    wp.tile_store(out, z + o * f + g)
    wp.tile_store(ints, wp.tile_arange(8, dtype=int))


@wp.kernel
def k_shapes(a: wp.array2d(dtype=float), t_out: wp.array2d(dtype=float), v_out: wp.array2d(dtype=float),
             b_out: wp.array2d(dtype=float), e_out: wp.array(dtype=float)):
    t = wp.tile_load(a, shape=(TM, TN))
    wp.tile_store(t_out, wp.tile_transpose(t))
    wp.tile_store(v_out, wp.tile_view(t, offset=(1, 2), shape=(2, 4)))
    row = wp.tile_load(a[0], shape=TN)
    wp.tile_store(b_out, wp.tile_broadcast(row, shape=(TM, TN)) + t)
    e_out[0] = t[1, 2] + wp.tile_extract(t, 3, 15)
    x = wp.tile(e_out[0])
    e_out[1] = wp.untile(x * 2.0)


@wp.func
def sq_plus(x: float, y: float) -> float:
    return x * x + y


@wp.kernel
def k_reduce(a: wp.array2d(dtype=float), out: wp.array(dtype=float), axis0: wp.array(dtype=float),
             args: wp.array(dtype=int), scans: wp.array2d(dtype=float), mapped: wp.array2d(dtype=float)):
    t = wp.tile_load(a, shape=(TM, TN))
    out[0] = wp.tile_sum(t)[0]
    out[1] = wp.tile_min(t)[0]
    out[2] = wp.tile_max(t)[0]
    out[3] = wp.tile_reduce(wp.mul, wp.tile_load(a[0], shape=4))[0]
    wp.tile_store(axis0, wp.tile_sum(t, axis=0))
    args[0] = wp.tile_argmin(t)[0]
    args[1] = wp.tile_argmax(t)[0]
    flat = wp.tile_reshape(t, shape=TM * TN)
    wp.tile_store(scans[0], wp.tile_scan_inclusive(flat))
    wp.tile_store(scans[1], wp.tile_scan_exclusive(flat))
    wp.tile_store(scans[2], wp.tile_scan_max_inclusive(flat))
    wp.tile_store(scans[3], wp.tile_scan_min_inclusive(flat))
    wp.tile_store(mapped, wp.tile_map(sq_plus, t, wp.tile_map(wp.cos, t)))


@wp.kernel
def k_matmul(a: wp.array2d(dtype=float), b: wp.array2d(dtype=float), c: wp.array2d(dtype=float),
             d: wp.array2d(dtype=float)):
    x = wp.tile_load(a, shape=(TM, TK))
    y = wp.tile_load(b, shape=(TK, TN))
    wp.tile_store(c, wp.tile_matmul(x, y))
    acc = wp.tile_ones(shape=(TM, TN), dtype=float)
    wp.tile_matmul(x, y, acc, alpha=0.5, beta=2.0)
    wp.tile_store(d, acc)


@wp.kernel
def k_big_gemm(a: wp.array2d(dtype=float), b: wp.array2d(dtype=float), c: wp.array2d(dtype=float)):
    i, j = wp.tid()
    acc = wp.tile_zeros(shape=(32, 32), dtype=float)
    for k in range(a.shape[1] // 16):
        x = wp.tile_load(a, shape=(32, 16), offset=(i * 32, k * 16))
        y = wp.tile_load(b, shape=(16, 32), offset=(k * 16, j * 32))
        wp.tile_matmul(x, y, acc)
    wp.tile_store(c, acc, offset=(i * 32, j * 32))


@wp.kernel
def k_atomic(a: wp.array(dtype=float), out: wp.array(dtype=float)):
    i = wp.tid()
    t = wp.tile_load(a, shape=8, offset=i * 8)
    wp.tile_atomic_add(out, t)


@wp.kernel
def k_loss(a: wp.array2d(dtype=float), b: wp.array2d(dtype=float), loss: wp.array(dtype=float)):
    x = wp.tile_load(a, shape=(TM, TK))
    y = wp.tile_load(b, shape=(TK, TN))
    z = wp.tile_map(wp.sin, wp.tile_matmul(x, y))
    w = wp.tile_transpose(z * 0.5 + wp.tile_broadcast(wp.tile_load(b[0], shape=TN), shape=(TM, TN)) * 0.1)
    wp.tile_atomic_add(loss, wp.tile_sum(w * w) + wp.tile_sum(x, axis=1)[1] * 0.25 + wp.tile_scan_inclusive(
        wp.tile_reshape(x, shape=TM * TK))[5])


def test_launch_tiled_gives_block_indices():
    """launch_tiled(dim, block_dim=...) runs one task per block; tid() gives the block index, block_dim() is 1."""
    out = wp.zeros((3, 2), dtype=int)
    wp.launch_tiled(k_block_index, dim=(3, 2), inputs=[out], block_dim=64)
    np.testing.assert_array_equal(out.numpy(), np.arange(3)[:, None] * 10 + np.arange(2)[None, :] + 100)


def test_load_store_offsets_and_out_of_bounds():
    """Elements outside the array load as zero; stores outside it are skipped."""
    A = rng.standard_normal((2 * TM, 2 * TN)).astype(np.float32)
    a, b = wp.array(A), wp.zeros((2 * TM, 2 * TN), dtype=float)
    wp.launch_tiled(k_load_store, dim=(2, 2), inputs=[a, b], block_dim=32)
    pad = np.zeros((2 * TM + 2, 2 * TN + 2 * TN + 3), dtype=np.float32)
    pad[1:1 + 2 * TM, :2 * TN] = A
    expect = np.zeros_like(A)
    for i in range(2):
        for j in range(2):
            expect[i * TM:(i + 1) * TM, j * TN:(j + 1) * TN] = pad[i * TM:(i + 1) * TM, j * TN + 3:j * TN + 3 + TN] + 1
    np.testing.assert_allclose(b.numpy(), expect, rtol=1e-6)


def test_construction():
    """tile_zeros/ones/full/arange/reshape build the values NumPy would."""
    out, ints = wp.zeros((2, 8), dtype=float), wp.zeros(8, dtype=int)
    wp.launch_tiled(k_construct, dim=1, inputs=[out, ints], block_dim=16)
    np.testing.assert_allclose(out.numpy(), 2.5 + np.arange(1, 17).reshape(2, 8))
    np.testing.assert_array_equal(ints.numpy(), np.arange(8))


def test_transpose_view_broadcast_extract_untile():
    """Shape operations match NumPy's transpose, slicing and broadcasting."""
    A = rng.standard_normal((TM, TN)).astype(np.float32)
    t_out, v_out = wp.zeros((TN, TM), dtype=float), wp.zeros((2, 4), dtype=float)
    b_out, e_out = wp.zeros((TM, TN), dtype=float), wp.zeros(2, dtype=float)
    wp.launch_tiled(k_shapes, dim=1, inputs=[wp.array(A), t_out, v_out, b_out, e_out], block_dim=16)
    np.testing.assert_allclose(t_out.numpy(), A.T)
    np.testing.assert_allclose(v_out.numpy(), A[1:3, 2:6])
    np.testing.assert_allclose(b_out.numpy(), A + A[0][None, :], rtol=1e-6)
    np.testing.assert_allclose(e_out.numpy(), [A[1, 2] + A[3, 15], 2 * (A[1, 2] + A[3, 15])], rtol=1e-6)


def test_reductions_scans_and_maps():
    """Sums, extrema, arg-extrema, custom reductions, scans and maps agree with NumPy."""
    A = rng.standard_normal((TM, TN)).astype(np.float32)
    out, axis0, args = wp.zeros(4, dtype=float), wp.zeros(TN, dtype=float), wp.zeros(2, dtype=int)
    scans, mapped = wp.zeros((4, TM * TN), dtype=float), wp.zeros((TM, TN), dtype=float)
    wp.launch_tiled(k_reduce, dim=1, inputs=[wp.array(A), out, axis0, args, scans, mapped], block_dim=64)
    f = A.ravel()
    np.testing.assert_allclose(out.numpy(), [A.sum(), A.min(), A.max(), np.prod(A[0, :4])], rtol=1e-5)
    np.testing.assert_allclose(axis0.numpy(), A.sum(axis=0), rtol=1e-5)
    np.testing.assert_array_equal(args.numpy(), [f.argmin(), f.argmax()])
    np.testing.assert_allclose(scans.numpy(), [np.cumsum(f), np.cumsum(f) - f, np.maximum.accumulate(f),
                                               np.minimum.accumulate(f)], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(mapped.numpy(), A * A + np.cos(A), rtol=1e-5)


def test_matmul_forms():
    """tile_matmul(a, b) and tile_matmul(a, b, out, alpha, beta) match NumPy; a tiled GEMM uses the blocked kernel."""
    A = rng.standard_normal((TM, TK)).astype(np.float32)
    Bm = rng.standard_normal((TK, TN)).astype(np.float32)
    c, d = wp.zeros((TM, TN), dtype=float), wp.zeros((TM, TN), dtype=float)
    wp.launch_tiled(k_matmul, dim=1, inputs=[wp.array(A), wp.array(Bm), c, d], block_dim=64)
    np.testing.assert_allclose(c.numpy(), A @ Bm, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(d.numpy(), 0.5 * A @ Bm + 2.0, rtol=1e-5, atol=1e-5)
    X = rng.standard_normal((64, 48)).astype(np.float32)
    Y = rng.standard_normal((48, 96)).astype(np.float32)
    out = wp.zeros((64, 96), dtype=float)
    wp.launch_tiled(k_big_gemm, dim=(2, 3), inputs=[wp.array(X), wp.array(Y), out], block_dim=64)
    np.testing.assert_allclose(out.numpy(), X @ Y, rtol=1e-4, atol=1e-4)


def test_tile_atomic_add():
    """tile_atomic_add accumulates every block's tile into the same region."""
    A = rng.standard_normal(32).astype(np.float32)
    out = wp.zeros(8, dtype=float)
    wp.launch_tiled(k_atomic, dim=4, inputs=[wp.array(A), out], block_dim=8)
    np.testing.assert_allclose(out.numpy(), A.reshape(4, 8).sum(axis=0), rtol=1e-5)


def test_adjoints_match_finite_differences():
    """Gradients through load, matmul, map, transpose, broadcast, arithmetic, sums, scans and atomic add match
    central differences."""
    A = (rng.standard_normal((TM, TK)) * 0.5).astype(np.float64)
    Bm = (rng.standard_normal((TK, TN)) * 0.5).astype(np.float64)

    def loss(x: np.ndarray, y: np.ndarray, grad: bool = False):
        a = wp.array(x.astype(np.float32), requires_grad=True)
        b = wp.array(y.astype(np.float32), requires_grad=True)
        out = wp.zeros(1, dtype=float, requires_grad=True)
        tape = wp.Tape()
        with tape:
            wp.launch_tiled(k_loss, dim=1, inputs=[a, b, out], block_dim=32)
        if not grad:
            return float(out.numpy()[0])
        tape.backward(loss=out)
        return a.grad.numpy(), b.grad.numpy()

    ga, gb = loss(A, Bm, grad=True)
    eps = 1e-2
    for g, which in ((ga, 0), (gb, 1)):
        base = (A, Bm)[which]
        for idx in [(0, 0), (1, 3), (3, 7)]:
            plus, minus = base.copy(), base.copy()
            plus[idx] += eps
            minus[idx] -= eps
            args_p = (plus, Bm) if which == 0 else (A, plus)
            args_m = (minus, Bm) if which == 0 else (A, minus)
            fd = (loss(*args_p) - loss(*args_m)) / (2 * eps)
            assert g[idx] == pytest.approx(fd, rel=2e-2, abs=2e-3)


def test_errors_name_the_problem():
    """Bad tile calls are TypeErrors that say what is wrong."""
    @wp.kernel
    def bad(a: wp.array2d(dtype=float)):
        x = wp.tile_load(a, shape=(4, 4))
        y = wp.tile_load(a, shape=(3, 4))
        wp.tile_store(a, wp.tile_matmul(x, y))

    with pytest.raises(TypeError, match="tile_matmul"):
        wp.launch_tiled(bad, dim=1, inputs=[wp.zeros((4, 4), dtype=float)], block_dim=16)
