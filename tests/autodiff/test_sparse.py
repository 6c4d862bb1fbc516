"""loomwork.sparse: BSR matrices from triplets and their products, checked against SciPy."""

import inspect

import numpy as np
import pytest
import scipy.sparse as sps
from scipy.sparse.linalg import spsolve

import loomwork as wp
import loomwork.sparse as sp

mat32 = wp.types.matrix((3, 2), dtype=wp.float32)


def _triplets(seed: int, n: int, nrow: int, ncol: int, block: tuple[int, int]):
    rng = np.random.default_rng(seed)
    rows, cols = rng.integers(-1, nrow + 1, n), rng.integers(0, ncol, n)
    values = rng.standard_normal((n, *block))
    values[::7] = 0.0  # all-zero blocks: pruned
    return rows.astype(np.int32), cols.astype(np.int32), values


def _dense(rows, cols, values, nrow, ncol, block):
    br, bc = block
    d = np.zeros((nrow * br, ncol * bc))
    for r, c, v in zip(rows, cols, values, strict=True):
        if 0 <= r < nrow and 0 <= c < ncol:
            d[r * br:(r + 1) * br, c * bc:(c + 1) * bc] += v
    return d


def test_triplets_give_scipys_bsr_layout():
    """Duplicates add up, out-of-range triplets and zero blocks are dropped; offsets, columns and blocks are
    SciPy's BSR indptr, indices and data of the same matrix."""
    rows, cols, values = _triplets(0, 60, 6, 5, (3, 2))
    A = sp.bsr_from_triplets(6, 5, wp.array(rows), wp.array(cols), wp.array(values.astype(np.float32), dtype=mat32))
    dense = _dense(rows, cols, values, 6, 5, (3, 2))
    ref = sps.bsr_matrix(dense, blocksize=(3, 2))
    ref.sort_indices()
    assert A.shape == (18, 10) and A.block_shape == (3, 2) and A.scalar_type == wp.float32
    assert A.nnz == 60 and A.row_counts is None  # as in Warp: nnz starts as the triplet count, an upper bound
    np.testing.assert_array_equal(A.uncompress_rows().numpy()[ref.indices.size:], -1)
    assert A.nnz_sync() == A.nnz == ref.indices.size
    np.testing.assert_array_equal(A.offsets.numpy(), ref.indptr)
    np.testing.assert_array_equal(A.columns.numpy()[:A.nnz], ref.indices)
    np.testing.assert_allclose(A.values.numpy()[:A.nnz], ref.data, rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(A.uncompress_rows().numpy(), np.repeat(np.arange(6), np.diff(ref.indptr)))


@pytest.mark.parametrize("alpha,beta", [(1.0, 0.0), (-0.5, 2.0)])
def test_mv_matches_scipy(alpha, beta):
    """y = alpha A x + beta y for a block matrix (vector x and y) and a float64 CSR matrix (scalars)."""
    rows, cols, values = _triplets(1, 50, 4, 7, (3, 2))
    A = sp.bsr_from_triplets(4, 7, wp.array(rows), wp.array(cols), wp.array(values.astype(np.float32), dtype=mat32))
    S = sps.csr_matrix(_dense(rows, cols, values, 4, 7, (3, 2)))
    rng = np.random.default_rng(2)
    x, y0 = rng.standard_normal(14), rng.standard_normal(12)
    y = wp.array(y0.reshape(4, 3).astype(np.float32), dtype=wp.vec3)
    assert sp.bsr_mv(A, wp.array(x.reshape(7, 2).astype(np.float32), dtype=wp.vec2), y, alpha, beta) is y
    np.testing.assert_allclose(y.numpy().reshape(-1), alpha * (S @ x) + beta * y0, rtol=1e-5, atol=1e-5)
    r, c = rng.integers(0, 9, 40).astype(np.int32), rng.integers(0, 9, 40).astype(np.int32)
    v = rng.standard_normal(40)
    C = sp.bsr_from_triplets(9, 9, wp.array(r), wp.array(c), wp.array(v))
    ref = sps.coo_matrix((v, (r, c)), shape=(9, 9)).tocsr()
    xs = wp.array(rng.standard_normal(9))
    expect = alpha * (ref @ xs.numpy()) + beta * xs.numpy()
    sp.bsr_mv(C, xs, xs, alpha, beta)  # x and y alias
    np.testing.assert_allclose(xs.numpy(), expect, rtol=1e-12)
    np.testing.assert_allclose((C @ wp.array(np.ones(9))).numpy(), ref @ np.ones(9), rtol=1e-12)


@wp.kernel
def _lookups(offsets: wp.array(dtype=wp.int32), columns: wp.array(dtype=wp.int32), nrow: int, ncol: int,
             row_of: wp.array(dtype=wp.int32), index_of: wp.array2d(dtype=wp.int32)):
    i, j = wp.tid()
    if j == 0:
        row_of[i] = sp.bsr_row_index(offsets, nrow, i)
    if i < nrow and j < ncol:
        index_of[i, j] = sp.bsr_block_index(i, j, offsets, columns)


def test_row_and_block_index_in_kernels():
    """bsr_row_index gives each stored block's row (-1 past the end), bsr_block_index each (row, col)'s
    block (-1 where none is stored); inspect.signature sees their parameters."""
    rows, cols, values = _triplets(3, 30, 5, 6, (1, 1))
    A = sp.bsr_from_triplets(5, 6, wp.array(rows), wp.array(cols), wp.array(values[:, 0, 0].astype(np.float32)))
    n = A.nnz_sync() + 2
    row_of, index_of = wp.zeros(n, dtype=wp.int32), wp.zeros((n, 6), dtype=wp.int32)
    wp.launch(_lookups, (n, 6), inputs=[A.offsets, A.columns, 5, 6, row_of, index_of])
    np.testing.assert_array_equal(row_of.numpy(), [*A.uncompress_rows().numpy(), -1, -1])
    expect = np.full((5, 6), -1)
    for k, (r, c) in enumerate(zip(A.uncompress_rows().numpy(), A.columns.numpy()[:A.nnz], strict=True)):
        expect[r, c] = k
    np.testing.assert_array_equal(index_of.numpy()[:5], expect)
    assert list(inspect.signature(sp.bsr_row_index).parameters) == ["offsets", "row_count", "block_index"]


def test_bad_inputs_are_named():
    """Values of another scalar type, vectors of the wrong size and non-float blocks raise clear errors;
    bsr_set_zero empties a matrix."""
    A = sp.bsr_zeros(2, 3, mat32)
    with pytest.raises(ValueError, match="Values array type must correspond"):
        sp.bsr_set_from_triplets(A, wp.array([0], dtype=int), wp.array([0], dtype=int), wp.zeros(1, dtype=wp.mat22d))
    with pytest.raises(TypeError, match="must be of type int32"):
        sp.bsr_set_from_triplets(A, wp.array([0.0]), wp.array([0]), wp.zeros(1, dtype=mat32))
    with pytest.raises(ValueError, match="Incompatible 'x' vector"):
        sp.bsr_mv(A, wp.zeros(4, dtype=wp.vec2))
    with pytest.raises(ValueError, match="block type must be either warp matrix or scalar"):
        sp.bsr_zeros(2, 2, wp.int32)
    with pytest.raises(ValueError, match="Incompatible block sizes"):
        sp.bsr_mm(A, A)
    with pytest.raises(ValueError, match="same number of rows and columns"):
        sp.bsr_axpy(A, sp.bsr_zeros(3, 3, mat32))
    sp.bsr_set_from_triplets(A, wp.array([1], dtype=int), wp.array([2], dtype=int), wp.ones(1, dtype=mat32))
    assert A.nnz == 1
    sp.bsr_set_zero(A)
    assert A.nnz == 0 and A.offsets.numpy().tolist() == [0, 0, 0]
    np.testing.assert_array_equal(sp.bsr_mv(A, wp.ones(3, dtype=wp.vec2)).numpy(), np.zeros((2, 3)))


def test_cg_solves_a_bsr_system():
    """A BsrMatrix is a linear operator for the iterative solvers: CG on a sparse SPD system matches SciPy's
    direct solve."""
    import loomwork.optim.linear as la

    n = 30
    rng = np.random.default_rng(4)
    r, c = rng.integers(0, n, 80), rng.integers(0, n, 80)
    v = rng.standard_normal(80) * 0.1
    rows = np.concatenate([r, c, np.arange(n)]).astype(np.int32)
    cols = np.concatenate([c, r, np.arange(n)]).astype(np.int32)
    vals = np.concatenate([v, v, np.full(n, 4.0)])  # symmetric, diagonally dominant
    A = sp.bsr_from_triplets(n, n, wp.array(rows), wp.array(cols), wp.array(vals))
    b = rng.standard_normal(n)
    x = wp.zeros(n, dtype=wp.float64)
    la.cg(A, wp.array(b), x, tol=1e-12, maxiter=200)
    ref = spsolve(sps.coo_matrix((vals, (rows, cols)), shape=(n, n)).tocsc(), b)
    np.testing.assert_allclose(x.numpy(), ref, rtol=1e-8, atol=1e-10)


def test_solvers_take_padded_and_block_matrices():
    """CG with a block-Jacobi preconditioner solves a 3x3-block system stored with padded rows as it does
    the compact one; FSAI takes it too, but asks for compact rows to reuse its pattern."""
    import loomwork.optim.linear as la

    rng = np.random.default_rng(5)
    q = rng.standard_normal((12, 12)) * (rng.random((12, 12)) < 0.3)
    d = q @ q.T + 12.0 * np.eye(12)
    r, c = np.nonzero(d)
    csr = sp.bsr_from_triplets(12, 12, wp.array(r.astype(np.int32)), wp.array(c.astype(np.int32)), wp.array(d[r, c]))
    padded = sp.bsr_zeros(4, 4, wp.mat33d, row_capacity=5)
    padded.values.fill_(wp.mat33d(*[np.nan] * 9))  # slack storage is never read
    sp.bsr_assign(padded, csr, topology="padded")
    assert padded.nnz == 20 and padded.row_counts.numpy().max() < 5
    b = rng.standard_normal(12)
    x = wp.zeros(4, dtype=wp.vec3d)
    la.cg(padded, wp.array(b.reshape(4, 3), dtype=wp.vec3d), x, tol=1e-12, maxiter=100,
          M=la.preconditioner(padded, "diag"))
    np.testing.assert_allclose(x.numpy().ravel(), np.linalg.solve(d, b), rtol=1e-9, atol=1e-11)
    fsai = la.FSAI(padded, max_row_size=4)  # built from a compact copy, as the same matrix stored compact
    np.testing.assert_allclose(_to_dense(fsai.G),
                               _to_dense(la.FSAI(sp.bsr_copy(csr, block_shape=(3, 3)), max_row_size=4).G), atol=1e-12)
    with pytest.raises(ValueError, match="compact rows"):
        la.FSAI(padded, reuse_pattern=True)


def test_copy_changes_block_shape_and_scalar_type_and_identity():
    """bsr_copy regroups a matrix's scalars into blocks of another shape (multiples or dividers of the
    original) and casts them; bsr_identity is the identity; bsr_get_diag reads zero for a missing block;
    bad block shapes raise ValueError."""
    rng = np.random.default_rng(2)
    d = rng.standard_normal((12, 12)) * (rng.random((12, 12)) < 0.3)
    d[6:9, 6:9] = 0.0
    r, c = np.nonzero(d)
    A = sp.bsr_from_triplets(12, 12, wp.array(r.astype(np.int32)), wp.array(c.astype(np.int32)), wp.array(d[r, c]))
    for shape in ((3, 3), (2, 4), (6, 2), (1, 1)):
        B = sp.bsr_copy(A, block_shape=shape)
        assert B.block_shape == shape and B.shape == (12, 12)
        np.testing.assert_array_equal(sps.bsr_matrix((B.values.numpy().reshape(-1, *shape), B.columns.numpy(),
                                                      B.offsets.numpy()), shape=(12, 12)).toarray(), d)
        C = sp.bsr_copy(B, scalar_type=wp.float32, block_shape=(1, 1))
        assert C.scalar_type == wp.float32
        np.testing.assert_allclose(sps.csr_matrix((C.values.numpy(), C.columns.numpy(), C.offsets.numpy()),
                                                  shape=(12, 12)).toarray(), d, rtol=1e-6)
    diag = sp.bsr_get_diag(sp.bsr_copy(A, block_shape=(3, 3))).numpy()
    for i in range(4):
        np.testing.assert_array_equal(diag[i], d[3 * i:3 * i + 3, 3 * i:3 * i + 3])
    eye = sp.bsr_identity(4, wp.mat33f)
    assert eye.nnz == 4 and A.row_counts is None
    np.testing.assert_array_equal(eye.values.numpy(), np.broadcast_to(np.eye(3), (4, 3, 3)))
    with pytest.raises(ValueError, match="Incompatible dest and src block shapes"):
        sp.bsr_copy(sp.bsr_copy(A, block_shape=(3, 3)), block_shape=(2, 2))
    with pytest.raises(ValueError, match="does not evenly divide"):
        sp.bsr_copy(A, block_shape=(5, 5))


def test_triplets_of_scalar_blocks_make_matrix_blocks():
    """bsr_from_triplets with a (n, rows, cols) array of scalars makes blocks of rows x cols, as Warp."""
    v = np.random.default_rng(0).standard_normal((3, 2, 3))
    A = sp.bsr_from_triplets(2, 2, wp.array([0, 1, 1], dtype=int), wp.array([0, 1, 0], dtype=int), wp.array(v))
    assert A.block_shape == (2, 3) and A.shape == (4, 6) and A.scalar_type == wp.float64
    np.testing.assert_array_equal(A.values.numpy(), v[[0, 2, 1]])


def _to_dense(A) -> np.ndarray:
    """A's active blocks (row_counts respected) as a dense NumPy matrix, built from its arrays by SciPy."""
    offsets, columns = A.offsets.numpy()[:A.nrow + 1], A.columns.numpy()
    counts = np.diff(offsets) if A.row_counts is None else A.row_counts.numpy()[:A.nrow]
    slots = np.concatenate([np.arange(b, b + n) for b, n in zip(offsets[:-1], counts, strict=True)] or [[]]).astype(int)
    blocks = A.values.numpy().reshape(-1, *A.block_shape)[slots]
    indptr = np.concatenate([[0], np.cumsum(counts)])
    return sps.bsr_matrix((blocks, columns[slots], indptr), shape=A.shape).toarray()


def _random_bsr(seed: int, nrow: int, ncol: int, block: tuple[int, int], n: int = 12, dtype=wp.float64):
    rng = np.random.default_rng(seed)
    rows, cols = rng.integers(0, nrow, n).astype(np.int32), rng.integers(0, ncol, n).astype(np.int32)
    values = rng.standard_normal((n, *block))
    return sp.bsr_from_triplets(nrow, ncol, wp.array(rows), wp.array(cols), wp.array(values, dtype=dtype)), \
        _dense(rows, cols, values, nrow, ncol, block)


@pytest.mark.parametrize("block", [(1, 1), (3, 2)])
def test_mm_axpy_transpose_and_operators_match_numpy(block):
    """bsr_mm (alpha, beta, aliasing, reused structure), bsr_axpy, transposes, scaled expressions and the
    operators give NumPy's dense results."""
    x, dx = _random_bsr(10, 4, 5, block)
    y, dy = _random_bsr(11, 5, 3, block[::-1])
    z, dz = _random_bsr(12, 4, 3, (block[0], block[0]))
    work = sp.bsr_mm_work_arrays()
    sp.bsr_mm(x, y, z, alpha=-0.5, beta=2.0, work_arrays=work)
    np.testing.assert_allclose(_to_dense(z), -0.5 * dx @ dy + 2.0 * dz, atol=1e-12)
    dz = _to_dense(z)
    sp.bsr_mm(x, y, z, alpha=1.5, beta=1.0, work_arrays=work, reuse_topology=True)
    np.testing.assert_allclose(_to_dense(z), 1.5 * dx @ dy + dz, atol=1e-12)
    np.testing.assert_allclose(_to_dense((2.0 * x) @ y), 2.0 * dx @ dy, atol=1e-12)
    sq, dsq = _random_bsr(13, 4, 4, (block[0], block[0]))
    sp.bsr_mm(sq, sq, sq, alpha=1.0, beta=-1.0)  # z = z @ z - z, all three aliased
    np.testing.assert_allclose(_to_dense(sq), dsq @ dsq - dsq, atol=1e-12)
    w, dw = _random_bsr(14, 4, 5, block)
    sp.bsr_axpy(x, w, alpha=3.0, beta=-2.0)
    np.testing.assert_allclose(_to_dense(w), 3.0 * dx - 2.0 * dw, atol=1e-12)
    np.testing.assert_allclose(_to_dense(x + w), dx + 3.0 * dx - 2.0 * dw, atol=1e-12)
    np.testing.assert_allclose(_to_dense(x - 0.5 * x), 0.5 * dx, atol=1e-12)
    np.testing.assert_allclose(_to_dense((-x / 4.0).eval()), -dx / 4.0, atol=1e-12)
    t = sp.bsr_transposed(x)
    assert t.block_shape == block[::-1] and t.shape == dx.T.shape
    np.testing.assert_allclose(_to_dense(t), dx.T, atol=0)
    np.testing.assert_allclose(_to_dense((3.0 * x).transpose().eval()), 3.0 * dx.T, atol=1e-12)
    v = np.random.default_rng(15).standard_normal(dx.shape[0])
    xt = wp.array(v.reshape(-1, block[0]) if block[0] > 1 else v, dtype=wp.vec3d if block[0] > 1 else wp.float64)
    np.testing.assert_allclose((xt @ (x * 2.0)).numpy().ravel(), 2.0 * v @ dx, atol=1e-12)
    out = sp.bsr_mv(x, xt, transpose=True, alpha=-1.0)
    np.testing.assert_allclose(out.numpy().ravel(), -v @ dx, atol=1e-12)
    x *= 2.0
    np.testing.assert_allclose(_to_dense(x), 2.0 * dx, atol=1e-12)


def test_padded_masked_and_status():
    """Padded storage keeps each row's capacity and flags overflow (the row is cut to its capacity);
    masked operations keep the destination's blocks; set_zero and notify_nnz_changed manage the bound."""
    A = sp.bsr_zeros(3, 4, wp.float64, row_capacity=wp.array([2, 0, 3], dtype=wp.int32))
    assert A.nnz == 5 and A.offsets.numpy().tolist() == [0, 2, 2, 5]
    rows, cols = wp.array([2, 0, 2, 0], dtype=int), wp.array([3, 1, 0, 1], dtype=int)
    sp.bsr_set_from_triplets(A, rows, cols, wp.array([1.0, 2.0, 3.0, 4.0]), topology="padded")
    assert A.row_counts.numpy().tolist() == [1, 0, 2] and A.status_sync() == sp.BSR_STATUS_SUCCESS
    ref = np.zeros((3, 4))
    ref[0, 1], ref[2, 3], ref[2, 0] = 6.0, 1.0, 3.0
    np.testing.assert_array_equal(_to_dense(A), ref)
    np.testing.assert_array_equal(A.uncompress_rows().numpy(), [0, -1, 2, 2, -1])
    np.testing.assert_array_equal(sp.bsr_mv(A, wp.array(np.arange(4.0))).numpy(), ref @ np.arange(4.0))
    small = sp.bsr_zeros(3, 4, wp.float64, row_capacity=1)
    sp.bsr_assign(small, A, topology="padded")
    assert small.status_sync() == sp.BSR_STATUS_ROW_CAPACITY_EXCEEDED and "capacity" in small.status_message()
    np.testing.assert_array_equal(_to_dense(small), [[0, 6, 0, 0], [0, 0, 0, 0], [3, 0, 0, 0]])
    small.clear_status()
    assert small.status_sync() == sp.BSR_STATUS_SUCCESS
    mask = sp.bsr_diag(wp.zeros(3, dtype=wp.float64), rows_of_blocks=3, cols_of_blocks=4)
    full = sp.bsr_from_triplets(3, 4, wp.array([0, 1, 2, 2], dtype=int), wp.array([0, 1, 2, 3], dtype=int),
                                wp.array([5.0, 6.0, 7.0, 8.0]))
    sp.bsr_assign(mask, full, topology="masked")
    np.testing.assert_array_equal(_to_dense(mask), np.diag([5.0, 6.0, 7.0], k=0) @ np.eye(3, 4))
    sp.bsr_set_zero(A, topology="padded")
    assert A.nnz == 5 and A.row_counts.numpy().tolist() == [0, 0, 0] and not _to_dense(A).any()
    B = sp.bsr_zeros(2, 2, wp.float32)
    B.notify_nnz_changed(10)
    assert B.nnz == 10 and B.values.shape[0] >= 10 and B.nnz_sync() == 0


def test_compress_reblock_and_diag():
    """bsr_compress merges duplicate and drops out-of-range and zero blocks of raw storage; bsr_assign
    converts block shapes; bsr_diag, bsr_set_identity and bsr_get_diag of a scaled matrix agree with NumPy."""
    A = sp.bsr_zeros(2, 3, wp.float64)
    A.nnz = 6
    A.offsets = wp.array([0, 4, 6], dtype=int)
    A.columns = wp.array([2, 0, 2, 7, 1, -1], dtype=int)
    A.values = wp.array([1.0, 2.0, 3.0, 4.0, 0.0, 5.0])
    sp.bsr_compress(A)
    assert A.nnz_sync() == 2 and A.offsets.numpy().tolist() == [0, 2, 2]
    np.testing.assert_array_equal(_to_dense(A), [[2.0, 0.0, 4.0], [0.0, 0.0, 0.0]])
    x, dx = _random_bsr(20, 4, 6, (2, 3))
    fine = sp.bsr_zeros(1, 1, wp.float32)
    sp.bsr_assign(fine, x)
    assert fine.shape == dx.shape and fine.scalar_type == wp.float32
    np.testing.assert_allclose(_to_dense(fine), dx, rtol=1e-6)
    coarse = sp.bsr_copy(x, block_shape=(4, 6))
    np.testing.assert_allclose(_to_dense(coarse), dx, atol=0)
    D = sp.bsr_diag(wp.array(np.arange(1.0, 5.0)))
    np.testing.assert_array_equal(_to_dense(D), np.diag(np.arange(1.0, 5.0)))
    np.testing.assert_array_equal(sp.bsr_get_diag(-2.0 * D).numpy(), -2.0 * np.arange(1.0, 5.0))
    sp.bsr_set_identity(D, 2)
    np.testing.assert_array_equal(_to_dense(D), np.eye(2))
    E = sp.bsr_identity(2, wp.mat22d)
    np.testing.assert_array_equal(_to_dense(E), np.eye(4))


def test_gradients_reach_triplet_values_through_transpose_and_axpy():
    """A Tape carries gradients from a matrix's blocks back through bsr_axpy, scaled transposes and
    bsr_from_triplets to the triplet values (duplicates share their block's gradient)."""
    rows, cols = wp.array([0, 1, 0, 1], dtype=int), wp.array([1, 0, 1, 1], dtype=int)
    v = wp.array(np.arange(1.0, 5.0), requires_grad=True)
    with wp.Tape() as tape:
        A = sp.bsr_from_triplets(2, 2, rows, cols, v)
        B = sp.bsr_axpy(3.0 * sp.bsr_transposed(A), sp.bsr_copy(A), alpha=1.0, beta=2.0)
    n = B.nnz_sync()
    np.testing.assert_array_equal(_to_dense(B), 2.0 * _to_dense(A) + 3.0 * _to_dense(A).T)
    weights = np.arange(1.0, n + 1.0)
    tape.backward(grads={B.values: wp.array(np.concatenate([weights, np.zeros(B.values.shape[0] - n)]))})
    # dL/dA[r, c] = 2 W[r, c] + 3 W[c, r] with W the dense weights on B's blocks
    W = _to_dense(sp.BsrMatrix(2, 2, B.offsets, B.columns, wp.array(np.concatenate([weights, np.zeros(
        B.values.shape[0] - n)]))))
    G = 2.0 * W + 3.0 * W.T
    np.testing.assert_array_equal(v.grad.numpy(), G[rows.numpy(), cols.numpy()])


def test_mapped_values_equal_triplets():
    """A triplet map rebuilds the values of the same triplets without the structure pass, by gather or
    atomic reduction, and is checked against the matrix it was built for."""
    rng = np.random.default_rng(30)
    rows, cols = wp.array(rng.integers(0, 5, 40).astype(np.int32)), wp.array(rng.integers(0, 4, 40).astype(np.int32))
    A = sp.bsr_zeros(5, 4, wp.mat22d)
    first = wp.array(rng.standard_normal((40, 2, 2)), dtype=wp.mat22d)
    mapping = sp.bsr_set_from_triplets(A, rows, cols, first, prune_numerical_zeros=False, build_mapping=True)
    assert mapping.triplet_count == 40
    second = rng.standard_normal((40, 2, 2))
    expect = sp.bsr_from_triplets(5, 4, rows, cols, wp.array(second, dtype=wp.mat22d), prune_numerical_zeros=False)
    for reduction in ("gather", "atomic"):
        sp.bsr_set_from_mapped_values(A, mapping, wp.array(second, dtype=wp.mat22d), reduction=reduction)
        np.testing.assert_allclose(_to_dense(A), _to_dense(expect), atol=1e-12)
    with pytest.raises(ValueError, match="has not been built"):
        sp.bsr_set_from_mapped_values(A, sp.BsrTripletMap(), first)
    with pytest.raises(ValueError, match="prune_numerical_zeros=False"):
        sp.bsr_set_from_triplets(A, rows, cols, first, build_mapping=True)


def test_public_names_match_warp():
    """loomwork.sparse exports the names of Warp 1.19's warp.sparse; bsr_matrix_t gives a struct type."""
    names = {"BSR_STATUS_ROW_CAPACITY_EXCEEDED", "BSR_STATUS_SUCCESS", "BsrMatrix", "BsrTripletMap", "bsr_assign",
             "bsr_axpy", "bsr_axpy_work_arrays", "bsr_block_index", "bsr_compress", "bsr_copy", "bsr_diag",
             "bsr_from_triplets", "bsr_get_diag", "bsr_identity", "bsr_matrix_t", "bsr_mm", "bsr_mm_work_arrays",
             "bsr_mv", "bsr_row_index", "bsr_scale", "bsr_set_diag", "bsr_set_from_mapped_values",
             "bsr_set_from_triplets", "bsr_set_identity", "bsr_set_transpose", "bsr_set_zero", "bsr_transposed",
             "bsr_zeros"}
    assert set(sp.__all__) == names and all(hasattr(sp, n) for n in names)
    t = sp.bsr_matrix_t(wp.mat33d)
    assert t is sp.bsr_matrix_t(wp.mat33d) and list(t.fields) == ["nrow", "ncol", "nnz", "offsets", "row_counts",
                                                                  "columns", "values"]
    with pytest.raises(ValueError, match="block type must be either warp matrix or scalar"):
        sp.bsr_matrix_t(wp.vec3)
    A = sp.bsr_from_triplets(3, 3, wp.array([0, 2, 2], dtype=int), wp.array([1, 0, 2], dtype=int),
                             wp.array([1.0, 2.0, 3.0]))
    out = wp.zeros(3, dtype=wp.float64)
    wp.launch(_row_sums, 3, inputs=[A, out])  # a BsrMatrix is passed where its struct type is taken
    np.testing.assert_array_equal(out.numpy(), [1.0, 0.0, 5.0])
    with pytest.raises(TypeError, match="argument 'A' expects BsrMatrix_float64"):
        wp.launch(_row_sums, 2, inputs=[sp.bsr_identity(2, wp.mat22d), out])


@wp.kernel
def _row_sums(A: sp.bsr_matrix_t(wp.float64), out: wp.array(dtype=wp.float64)):
    r = wp.tid()
    s = wp.float64(0.0)
    for k in range(A.offsets[r], A.offsets[r + 1]):
        s += A.values[k]
    out[r] = s
