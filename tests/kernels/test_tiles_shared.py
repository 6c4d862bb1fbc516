"""Tiles, second part: views that write through, element and slice assignment, factorizations and solves,
tile_dot / tile_axpy / tile_diag_add, tile_sort, with finite-difference checks of the adjoints."""

import numpy as np
import pytest

import loomwork as wp

M, N, S = 4, 6, 4


@wp.kernel
def k_alias(src: wp.array2d(dtype=float), dst: wp.array2d(dtype=float), w_out: wp.array2d(dtype=float)):
    a = wp.tile_load(src, shape=(M, N))
    b = wp.tile_zeros(dtype=float, shape=(M, N))
    for i in range(M):
        row_dst = b[i]
        wp.tile_assign(row_dst, a[i])  # through the row view into b
    b[0, 1] = 100.0
    b[1, 2] += 10.0
    v = b[2]
    v[0] = -5.0  # a row view of b
    c = b
    c[3, 3] = 7.0  # the same tile under another name
    b[2:4, 4:6] = wp.tile_ones(shape=(2, 2), dtype=float) * 3.0
    w = wp.tile_view(b, offset=(0, 0), shape=(2, 2))
    b[0, 0] = 42.0  # seen by the earlier view w
    wp.tile_store(dst, b)
    wp.tile_store(w_out, w)


@wp.kernel
def k_slices(src: wp.array2d(dtype=float), rows: wp.array2d(dtype=float), rev: wp.array2d(dtype=float),
             col: wp.array(dtype=float), w_out: wp.array(dtype=float)):
    t = wp.tile_load(src, shape=(M, N))
    wp.tile_store(rows, t[1:3, ::2])
    wp.tile_store(rev, t[::-1, :])
    wp.tile_store(col, t[:, -1])
    w = t[0]
    t[0, 0] = 9.0
    wp.tile_store(w_out, w)


@wp.kernel
def k_solve(A: wp.array2d(dtype=wp.float64), y: wp.array(dtype=wp.float64), L_out: wp.array2d(dtype=wp.float64),
            x_out: wp.array(dtype=wp.float64), z_out: wp.array(dtype=wp.float64), u_out: wp.array(dtype=wp.float64),
            loss: wp.array(dtype=wp.float64)):
    a = wp.tile_load(A, shape=(S, S))
    b = wp.tile_load(y, shape=S)
    low = wp.tile_cholesky(a)
    up = wp.tile_cholesky(a, fill_mode="upper")
    x = wp.tile_cholesky_solve(low, b)
    x2 = wp.tile_cholesky_solve(up, b, fill_mode="upper")
    z = wp.tile_lower_solve(low, b)
    u = wp.tile_upper_solve(up, b)
    wp.tile_store(L_out, low)
    wp.tile_store(x_out, x)
    wp.tile_store(z_out, z)
    wp.tile_store(u_out, u)
    s = wp.tile_dot(x, x2) + wp.tile_sum(low * low) + wp.tile_dot(z, u) + wp.tile_sum(up)
    wp.tile_atomic_add(loss, s)


@wp.kernel
def k_misc(keys: wp.array(dtype=float), vals: wp.array(dtype=int), m: wp.array2d(dtype=float),
           d: wp.array(dtype=float), k_out: wp.array(dtype=float), v_out: wp.array(dtype=int),
           m_out: wp.array2d(dtype=float), loss: wp.array(dtype=float)):
    k = wp.tile_load(keys, shape=13)
    v = wp.tile_load(vals, shape=13)
    wp.tile_sort(k, v)
    wp.tile_store(k_out, k)
    wp.tile_store(v_out, v)
    t = wp.tile_load(m, shape=(3, 3))
    r = wp.tile_diag_add(t, wp.tile_load(d, shape=3))
    wp.tile_axpy(2.0, t, r)
    wp.tile_store(m_out, r)
    wp.tile_atomic_add(loss, wp.tile_dot(r, r))


def test_views_and_assignment_write_through():
    """Views, t[i, j] = v, t[i, j] += v, slice assignment and aliases reach the tile they view (NumPy as oracle)."""
    x = np.arange(M * N, dtype=np.float32).reshape(M, N)
    src, dst = wp.array(x, requires_grad=True), wp.zeros((M, N), dtype=float, requires_grad=True)
    w = wp.zeros((2, 2), dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch_tiled(k_alias, dim=1, inputs=[src, dst, w], block_dim=32)
    want = x.copy()
    want[0, 1] = 100.0
    want[1, 2] += 10.0
    want[2, 0] = -5.0
    want[3, 3] = 7.0
    want[2:4, 4:6] = 3.0
    want[0, 0] = 42.0
    np.testing.assert_array_equal(dst.numpy(), want)
    np.testing.assert_array_equal(w.numpy(), want[:2, :2])
    dst.grad.fill_(1.0)
    tape.backward()
    overwritten = np.zeros((M, N), dtype=bool)
    overwritten[0, 1] = overwritten[2, 0] = overwritten[3, 3] = overwritten[0, 0] = True
    overwritten[2:4, 4:6] = True
    np.testing.assert_array_equal(src.grad.numpy(), np.where(overwritten, 0.0, 1.0))


def test_slices_follow_numpy():
    """t[a:b, ::s], t[::-1], t[:, -1] read like NumPy; a row view sees a later write into its tile."""
    x = np.arange(M * N, dtype=np.float32).reshape(M, N)
    rows, rev = wp.zeros((2, 3), dtype=float), wp.zeros((M, N), dtype=float)
    col, w = wp.zeros(M, dtype=float), wp.zeros(N, dtype=float)
    wp.launch_tiled(k_slices, dim=1, inputs=[wp.array(x), rows, rev, col, w], block_dim=32)
    np.testing.assert_array_equal(rows.numpy(), x[1:3, ::2])
    np.testing.assert_array_equal(rev.numpy(), x[::-1, :])
    np.testing.assert_array_equal(col.numpy(), x[:, -1])
    want = x[0].copy()
    want[0] = 9.0
    np.testing.assert_array_equal(w.numpy(), want)


def _solve(A0: np.ndarray, y0: np.ndarray, grad: bool = False):
    A = wp.array(A0, dtype=wp.float64, requires_grad=True)
    y = wp.array(y0, dtype=wp.float64, requires_grad=True)
    outs = [wp.zeros((S, S), dtype=wp.float64)] + [wp.zeros(S, dtype=wp.float64) for _ in range(3)]
    loss = wp.zeros(1, dtype=wp.float64, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch_tiled(k_solve, dim=1, inputs=[A, y, *outs, loss], block_dim=32)
    if grad:
        loss.grad.fill_(1.0)
        tape.backward()
        return A.grad.numpy(), y.grad.numpy()
    return [o.numpy() for o in outs], loss.numpy()[0]


def test_cholesky_and_solves_match_numpy_and_finite_differences():
    """Cholesky (both fill modes), its solve and the triangular solves match NumPy; adjoints match FD."""
    rng = np.random.default_rng(3)
    B = rng.standard_normal((S, S))
    A0 = B @ B.T + S * np.eye(S)
    y0 = rng.standard_normal(S)
    (L, x, z, u), _ = _solve(A0, y0)
    Ln = np.linalg.cholesky(A0)
    np.testing.assert_allclose(L, Ln, atol=1e-12)
    np.testing.assert_allclose(x, np.linalg.solve(A0, y0), atol=1e-12)
    np.testing.assert_allclose(z, np.linalg.solve(Ln, y0), atol=1e-12)
    np.testing.assert_allclose(u, np.linalg.solve(Ln.T, y0), atol=1e-12)
    gA, gy = _solve(A0, y0, grad=True)
    eps = 1e-6
    fd_A = np.zeros((S, S))
    for i in range(S):
        for j in range(S):
            e = np.zeros((S, S))
            e[i, j] = eps
            fd_A[i, j] = (_solve(A0 + e, y0)[1] - _solve(A0 - e, y0)[1]) / (2 * eps)
    fd_y = np.array([(_solve(A0, y0 + eps * np.eye(S)[i])[1] - _solve(A0, y0 - eps * np.eye(S)[i])[1]) / (2 * eps)
                     for i in range(S)])
    np.testing.assert_allclose(gA, fd_A, atol=1e-6)
    np.testing.assert_allclose(gy, fd_y, atol=1e-6)


def test_sort_dot_axpy_diag_add():
    """tile_sort orders keys and carries values; tile_diag_add / tile_axpy / tile_dot match NumPy and FD."""
    rng = np.random.default_rng(5)
    keys = rng.standard_normal(13).astype(np.float32)
    M0 = rng.standard_normal((3, 3)).astype(np.float32)
    d0 = rng.standard_normal(3).astype(np.float32)

    def run(m0: np.ndarray, grad: bool = False):
        m, d = wp.array(m0, requires_grad=True), wp.array(d0, requires_grad=True)
        k_out, v_out, m_out = wp.zeros(13, dtype=float), wp.zeros(13, dtype=int), wp.zeros((3, 3), dtype=float)
        loss = wp.zeros(1, dtype=float, requires_grad=True)
        tape = wp.Tape()
        with tape:
            wp.launch_tiled(k_misc, dim=1, inputs=[wp.array(keys), wp.array(np.arange(13, dtype=np.int32)), m, d,
                                                    k_out, v_out, m_out, loss], block_dim=32)
        if grad:
            loss.grad.fill_(1.0)
            tape.backward()
            return m.grad.numpy()
        return k_out.numpy(), v_out.numpy(), m_out.numpy(), float(loss.numpy()[0])

    k, v, r, loss = run(M0)
    np.testing.assert_array_equal(k, np.sort(keys))
    np.testing.assert_array_equal(v, np.argsort(keys))
    want = 3.0 * M0 + np.diag(d0)
    np.testing.assert_allclose(r, want, rtol=1e-6)
    np.testing.assert_allclose(loss, (want * want).sum(), rtol=1e-5)
    np.testing.assert_allclose(run(M0, grad=True), 6.0 * want, rtol=1e-5)


@wp.kernel
def k_reshape_rows(a: wp.array2d(dtype=float), out: wp.array(dtype=float)):
    t = wp.tile_load(a, shape=(M, N))
    row = t[1]
    wp.tile_store(out, wp.tile_transpose(wp.tile_reshape(row, shape=(2, 3)))[0])  # a row of a tile is contiguous
    wp.tile_store(out, wp.tile_reshape(t[1:3, :], shape=2 * N), offset=2)  # so are whole rows
    wp.tile_store(out, wp.tile_reshape(t[::2, ::3] * 1.0, shape=4), offset=2 + 2 * N)  # a new tile


def test_tile_reshape_takes_contiguous_tiles_and_refuses_strided_views():
    """tile_reshape accepts tiles and views whose elements are contiguous in the tile they view; a stepped,
    partial-width or reversed view (directly, through a variable or a view of a view) is a ValueError."""
    an = np.arange(M * N, dtype=np.float32).reshape(M, N)
    out = wp.zeros(2 + 2 * N + 4, dtype=float)
    wp.launch_tiled(k_reshape_rows, dim=1, inputs=[wp.array(an), out], block_dim=4)
    np.testing.assert_array_equal(out.numpy(), np.concatenate([an[1].reshape(2, 3).T[0], an[1:3].ravel(),
                                                               an[::2, ::3].ravel()]))

    @wp.kernel(module="unique", enable_backward=False)
    def stepped(a: wp.array2d(dtype=float)):
        t = wp.tile_load(a, shape=(M, N))
        wp.tile_reshape(t[::2, ::2], shape=6)

    @wp.kernel(module="unique", enable_backward=False)
    def partial(a: wp.array2d(dtype=float)):
        t = wp.tile_load(a, shape=(M, N))
        v = wp.tile_view(t, offset=(0, 0), shape=(M, 3))
        w = v
        wp.tile_reshape(w, shape=M * 3)

    @wp.kernel(module="unique", enable_backward=False)
    def reversed_row(a: wp.array2d(dtype=float)):
        t = wp.tile_load(a, shape=(M, N))
        rows = t[1:3, :]
        wp.tile_reshape(rows[0, ::-1], shape=(2, 3))

    for k in (stepped, partial, reversed_row):
        with pytest.raises(ValueError, match=r"tile_reshape\(\) requires a contiguous tile"):
            wp.launch_tiled(k, dim=1, inputs=[wp.array(an)], block_dim=4)
