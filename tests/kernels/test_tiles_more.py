"""Tiles, third part: gathers and scatters through index tiles (tile_load_indexed, tile_store_indexed,
tile_atomic_add_indexed, t[idx, :]), FFTs, with finite-difference checks of their adjoints."""

import numpy as np
import pytest

import loomwork as wp
from loomwork.autodiff.gradcheck import gradcheck

rng = np.random.default_rng(11)


@wp.kernel
def k_indexed(a: wp.array2d(dtype=float), ind: wp.array(dtype=int), rows: wp.array2d(dtype=float),
              scattered: wp.array2d(dtype=float), added: wp.array2d(dtype=float), cols: wp.array2d(dtype=float)):
    i = wp.tile_load(ind, shape=3)
    t = wp.tile_load_indexed(a, indices=i, shape=(3, 4), offset=(0, 1), axis=0)
    wp.tile_store(rows, t)
    wp.tile_store_indexed(scattered, indices=i, t=t * 2.0, axis=0)
    wp.tile_atomic_add_indexed(added, i, t, offset=(0, 0), axis=0)
    wp.tile_atomic_add_indexed(added, i, t, offset=(0, 0), axis=0)
    full = wp.tile_load(a, shape=(4, 5))
    wp.tile_store(cols, full[:, i])


@wp.kernel
def k_indexed_axis1(a: wp.array2d(dtype=float), ind: wp.array(dtype=int), out: wp.array2d(dtype=float)):
    i = wp.tile_load(ind, shape=3)
    t = wp.tile_load_indexed(a, indices=i, shape=(2, 3), offset=(1, 0), axis=1)
    wp.tile_store_indexed(out, indices=i, t=t, offset=(0, 1), axis=1)


@wp.kernel
def k_fft(x: wp.array2d(dtype=wp.vec2d), y: wp.array2d(dtype=wp.vec2d), z: wp.array2d(dtype=wp.vec2d)):
    t = wp.tile_load(x, shape=(2, 8))
    wp.tile_fft(t)
    wp.tile_store(y, t)
    u = wp.tile_load(x, shape=(2, 6))  # not a power of two: the direct transform
    wp.tile_ifft(u)
    wp.tile_store(z, u * 2.0)


def _launch_indexed(a: wp.array, ind: wp.array, rows: wp.array, scattered: wp.array, added: wp.array,
                    cols: wp.array) -> None:
    wp.launch_tiled(k_indexed, dim=1, inputs=[a, ind, rows, scattered, added, cols], block_dim=1)


def test_indexed_loads_stores_and_gathers_follow_numpy():
    """Gathers read a at offset + indices (outside the array: zero), scatters write and add there, and
    t[idx, :] picks rows of a tile with negative indices counting from the end."""
    an = rng.standard_normal((4, 5)).astype(np.float32)
    ind = np.array([3, 0, -1], np.int32)
    outs = [wp.zeros(s, dtype=float) for s in ((3, 4), (4, 4), (4, 4), (4, 3))]
    _launch_indexed(wp.array(an), wp.array(ind), *outs)
    rows, scattered, added, cols = (o.numpy() for o in outs)
    expect = np.stack([an[3, 1:], an[0, 1:], np.zeros(4, np.float32)])
    np.testing.assert_allclose(rows, expect)
    np.testing.assert_allclose(scattered[[3, 0]], 2 * expect[:2])
    np.testing.assert_allclose(added[[3, 0]], 2 * expect[:2])
    assert not scattered[1:3].any() and not added[1:3].any()
    np.testing.assert_allclose(cols, an[:, [3, 0, 4]])
    out = wp.zeros((3, 5), dtype=float)
    wp.launch_tiled(k_indexed_axis1, dim=1, inputs=[wp.array(an), wp.array(np.array([4, 1, 2], np.int32)), out],
                    block_dim=1)
    expect = np.zeros((3, 5), np.float32)
    expect[:2, [1 + 4, 1 + 1, 1 + 2][1:]] = an[1:3, [1, 2]]  # index 4 + offset 1 falls outside: skipped
    np.testing.assert_allclose(out.numpy(), expect)


def test_indexed_adjoints_match_finite_differences():
    """Gradients through tile_load_indexed, the scatters and t[idx, :] match central differences."""
    a = wp.array(rng.standard_normal((4, 5)).astype(np.float32), requires_grad=True)
    ind = wp.array(np.array([3, 0, -1], np.int32))
    outs = [wp.zeros(s, dtype=float, requires_grad=True) for s in ((3, 4), (4, 4), (4, 4), (4, 3))]
    assert gradcheck(_launch_indexed, None, [a, ind], outs, eps=1e-2, atol=1e-2)


def test_indexed_errors():
    """Index tiles of the wrong length or rank are ValueErrors/TypeErrors that say so."""
    @wp.kernel
    def bad(a: wp.array2d(dtype=float), ind: wp.array(dtype=int)):
        i = wp.tile_load(ind, shape=2)
        t = wp.tile_load_indexed(a, indices=i, shape=(3, 4), axis=0)
        wp.tile_store(a, t)

    with pytest.raises(ValueError, match="2 indices for a tile with 3"):
        wp.launch_tiled(bad, dim=1, inputs=[wp.zeros((4, 4), dtype=float), wp.zeros(2, dtype=int)], block_dim=1)


def _complex(a: np.ndarray) -> np.ndarray:
    return a[..., 0] + 1j * a[..., 1]


def test_fft_follows_numpy_and_finite_differences():
    """tile_fft is NumPy's fft along the last axis, tile_ifft its unnormalized inverse; their adjoints match
    central differences."""
    xn = rng.standard_normal((2, 8, 2))
    x = wp.array(xn, dtype=wp.vec2d, requires_grad=True)
    y = wp.zeros((2, 8), dtype=wp.vec2d, requires_grad=True)
    z = wp.zeros((2, 6), dtype=wp.vec2d, requires_grad=True)
    wp.launch_tiled(k_fft, dim=1, inputs=[x, y, z], block_dim=1)
    np.testing.assert_allclose(_complex(y.numpy()), np.fft.fft(_complex(xn), axis=-1), atol=1e-12)
    np.testing.assert_allclose(_complex(z.numpy()), np.fft.ifft(_complex(xn[:, :6]), axis=-1) * 12, atol=1e-12)

    def run(x: wp.array, y: wp.array, z: wp.array) -> None:
        wp.launch_tiled(k_fft, dim=1, inputs=[x, y, z], block_dim=1)

    assert gradcheck(run, None, [x], [y, z], eps=1e-6, atol=1e-6)


@wp.kernel
def k_arange(i64: wp.array(dtype=wp.int64), f32: wp.array(dtype=float), partial: wp.array(dtype=int)):
    wp.tile_store(i64, wp.tile_arange(0, 2**53 + 1, 2**53, dtype=wp.int64))  # exact integer count: 2
    wp.tile_store(f32, wp.tile_arange(0.0, 0.3, 0.1))  # counted in float32: 3 elements, not 4
    wp.tile_store(partial, wp.tile_arange(0, 10, 3, dtype=int))


def test_tile_arange_counts_and_errors():
    """tile_arange counts its elements at the output type and rejects bad ranges in Warp's words."""
    i64, f32, part = wp.full(3, -1, dtype=wp.int64), wp.full(4, -1.0, dtype=float), wp.full(5, -1, dtype=int)
    wp.launch_tiled(k_arange, dim=1, inputs=[i64, f32, part], block_dim=1)
    np.testing.assert_array_equal(i64.numpy(), [0, 2**53, -1])
    np.testing.assert_allclose(f32.numpy(), [0.0, 0.1, 0.2, -1.0], rtol=1e-6)
    np.testing.assert_array_equal(part.numpy(), [0, 3, 6, 9, -1])

    @wp.kernel
    def empty():
        wp.tile_arange(5, 5, dtype=int)

    @wp.kernel
    def too_big():
        wp.tile_arange(0, 2**40, dtype=wp.int32)

    with pytest.raises(ValueError, match="non-empty range"):
        wp.launch_tiled(empty, dim=1, inputs=[], block_dim=1)
    with pytest.raises(ValueError, match="stop=1099511627776 is out of range"):
        wp.launch_tiled(too_big, dim=1, inputs=[], block_dim=1)


@wp.kernel
def k_lanes(seed: int, x: wp.array2d(dtype=int), y: wp.array2d(dtype=float), z: wp.array2d(dtype=float)):
    i = wp.tid()
    rng = wp.rand_init(seed, i)
    wp.tile_store(x, wp.tile_randi(shape=(1, 64), rng=rng, min=-5, max=5), offset=(i, 0))
    wp.tile_store(y, wp.tile_randf(shape=(1, 64), rng=rng), offset=(i, 0))
    wp.tile_store(z, wp.tile_from_thread(shape=(1, 64), value=float(i) * 2.5, thread_idx=0), offset=(i, 0))


def test_random_tiles_and_tile_from_thread():
    """tile_randi/tile_randf draw in range, a stream per block that repeats for the same seed;
    tile_from_thread fills a tile with the (single CPU) lane's value."""
    outs = [wp.zeros((3, 64), dtype=t) for t in (int, float, float)]
    wp.launch_tiled(k_lanes, dim=3, inputs=[7, *outs], block_dim=1)
    x, y, z = (o.numpy() for o in outs)
    assert x.min() >= -5 and x.max() < 5 and len(np.unique(x)) == 10
    assert y.min() >= 0.0 and y.max() < 1.0 and abs(y.mean() - 0.5) < 0.1
    assert not np.array_equal(y[0], y[1])
    np.testing.assert_array_equal(z, np.repeat([[0.0], [2.5], [5.0]], 64, axis=1))
    again = wp.zeros((3, 64), dtype=float)
    wp.launch_tiled(k_lanes, dim=3, inputs=[7, outs[0], again, outs[2]], block_dim=1)
    np.testing.assert_array_equal(again.numpy(), y)


def test_tile_squeeze_names_an_axis_out_of_range():
    """tile_squeeze(t, axis) with an axis outside the tile's dimensions says so (Warp's words), apart from an
    axis whose length is not 1."""
    def squeeze_axis_3():
        a = wp.tile_zeros(shape=(1, 2, 1), dtype=float)
        wp.tile_squeeze(a, axis=(3,))

    def squeeze_axis_1():
        a = wp.tile_zeros(shape=(1, 2, 1), dtype=float)
        wp.tile_squeeze(a, axis=(1,))

    for f, words in ((squeeze_axis_3, "axis 3 is out of bounds for tile with 3 dimensions"),
                     (squeeze_axis_1, r"axis \(1,\) is not an axis of length 1")):
        with pytest.raises(ValueError, match=words):
            wp.launch_tiled(wp.kernel(f, module=f"test_tiles_more_{f.__name__}"), dim=1, inputs=[], block_dim=1)
