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
    assert A.nnz == A.nnz_sync() == ref.indices.size
    np.testing.assert_array_equal(A.offsets.numpy(), ref.indptr)
    np.testing.assert_array_equal(A.columns.numpy(), ref.indices)
    np.testing.assert_allclose(A.values.numpy(), ref.data, rtol=1e-6, atol=1e-6)
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
    n = A.nnz + 2
    row_of, index_of = wp.zeros(n, dtype=wp.int32), wp.zeros((n, 6), dtype=wp.int32)
    wp.launch(_lookups, (n, 6), inputs=[A.offsets, A.columns, 5, 6, row_of, index_of])
    np.testing.assert_array_equal(row_of.numpy(), [*A.uncompress_rows().numpy(), -1, -1])
    expect = np.full((5, 6), -1)
    for k, (r, c) in enumerate(zip(A.uncompress_rows().numpy(), A.columns.numpy(), strict=True)):
        expect[r, c] = k
    np.testing.assert_array_equal(index_of.numpy()[:5], expect)
    assert list(inspect.signature(sp.bsr_row_index).parameters) == ["offsets", "row_count", "block_index"]


def test_bad_inputs_are_named():
    """Values of another scalar type, vectors of the wrong size and non-float blocks raise clear errors;
    bsr_set_zero empties a matrix."""
    A = sp.bsr_zeros(2, 3, mat32)
    with pytest.raises(TypeError, match="values must be"):
        sp.bsr_set_from_triplets(A, wp.array([0]), wp.array([0]), wp.zeros(1, dtype=wp.mat22d))
    with pytest.raises(ValueError, match="x must be"):
        sp.bsr_mv(A, wp.zeros(4, dtype=wp.vec2))
    with pytest.raises(TypeError, match="float scalar or matrix"):
        sp.bsr_zeros(2, 2, wp.int32)
    sp.bsr_set_from_triplets(A, wp.array([1]), wp.array([2]), wp.ones(1, dtype=mat32))
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
    with pytest.raises(ValueError, match="block_shape .5, 5. must divide"):
        sp.bsr_copy(A, block_shape=(5, 5))


def test_triplets_of_scalar_blocks_make_matrix_blocks():
    """bsr_from_triplets with a (n, rows, cols) array of scalars makes blocks of rows x cols, as Warp."""
    v = np.random.default_rng(0).standard_normal((3, 2, 3))
    A = sp.bsr_from_triplets(2, 2, wp.array([0, 1, 1], dtype=int), wp.array([0, 1, 0], dtype=int), wp.array(v))
    assert A.block_shape == (2, 3) and A.shape == (4, 6) and A.scalar_type == wp.float64
    np.testing.assert_array_equal(A.values.numpy(), v[[0, 2, 1]])
