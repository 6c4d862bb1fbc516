"""Tiles, fifth part: accumulating matmuls built in place, tile stacks, scatters into tiles, in-place
factorizations and solves, NaN in running extrema, partial tiles, extrema of structs, len() of tiles; with
finite-difference checks of the differentiable ones."""

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
