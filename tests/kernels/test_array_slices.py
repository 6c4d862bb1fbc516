"""Slicing arrays inside kernels: a[i:j], a[i, j:k:s], a[::-1], views of views, tile loads and stores
through slices, and gradients that reach the sliced array."""

import numpy as np
import pytest

import loomwork as wp
from loomwork.autodiff.gradcheck import gradcheck


@wp.kernel
def k_views(a: wp.array2d(dtype=float), out: wp.array2d(dtype=float), n: int):
    i = wp.tid()
    row = a[i, 1:5:2]  # two elements, strided
    col = a[::2, i]  # a column: the innermost axis indexed away
    rev = a[1:, ::-1]
    tail = a[i, n:]  # runtime bound
    clamp = a[i, -2:100]  # Python's clamping and negative bounds
    sub = rev[2:][0]  # a view of a view, then a row of it
    out[i, 0] = row[0] + 10.0 * row[1]
    out[i, 1] = col[1] + float(col.shape[0])
    out[i, 2] = rev[0, 0] + float(rev.shape[0] * 10 + rev.shape[1])
    out[i, 3] = tail[0] + float(tail.shape[0])
    out[i, 4] = clamp[1] + float(clamp.shape[0])
    out[i, 5] = sub[i]


@wp.kernel
def k_write(a: wp.array2d(dtype=float)):
    i = wp.tid()
    even = a[i, ::2]
    even[1] = -1.0
    a[i, 3:][0] = 7.0


@wp.kernel
def k_tiles(src: wp.array2d(dtype=float), dst: wp.array2d(dtype=float)):
    t = wp.tile_load(src[::2, 1::2], shape=(3, 3))
    wp.tile_store(dst[1:, ::-2], t * 2.0)


@wp.kernel
def k_grad(x: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    s = x[i:i + 3]
    r = x[::-1]
    y[i] = s[0] * s[1] + s[2] * s[2] + r[i] * 0.5


def test_slices_follow_numpy():
    """Views made by slicing in a kernel read what NumPy's slices of the same array read."""
    an = np.arange(36, dtype=np.float32).reshape(6, 6)
    out = wp.zeros((6, 6), dtype=float)
    wp.launch(k_views, 6, [wp.array(an), out, 4])
    o = out.numpy()
    for i in range(6):
        assert o[i, 0] == an[i, 1:5:2][0] + 10 * an[i, 1:5:2][1]
        assert o[i, 1] == an[::2, i][1] + 3
        assert o[i, 2] == an[1:, ::-1][0, 0] + 56
        assert o[i, 3] == an[i, 4:][0] + 2
        assert o[i, 4] == an[i, -2:100][1] + 2
        assert o[i, 5] == an[1:, ::-1][2:][0][i]


def test_writes_through_slices():
    """Stores into a sliced view land in the array."""
    a = wp.zeros((3, 6), dtype=float)
    wp.launch(k_write, 3, [a])
    expect = np.zeros((3, 6), np.float32)
    expect[:, 2] = -1.0
    expect[:, 3] = 7.0
    np.testing.assert_array_equal(a.numpy(), expect)


def test_tile_load_and_store_through_slices():
    """tile_load / tile_store of strided and reversed views."""
    src = np.arange(36, dtype=np.float32).reshape(6, 6)
    dst = wp.zeros((4, 6), dtype=float)
    wp.launch_tiled(k_tiles, dim=1, inputs=[wp.array(src), dst], block_dim=1)
    expect = np.zeros((4, 6), np.float32)
    expect[1:, ::-2] = src[::2, 1::2] * 2
    np.testing.assert_array_equal(dst.numpy(), expect)


def test_gradients_reach_the_sliced_array():
    """The adjoint of loads through slices accumulates into the array's gradient (finite differences)."""
    x = wp.array(np.linspace(-1.0, 1.0, 8, dtype=np.float32), requires_grad=True)
    y = wp.zeros(6, dtype=float, requires_grad=True)
    assert gradcheck(k_grad, 6, [x], [y], eps=1e-3, atol=2e-3)


def test_slice_errors():
    """A zero step and a slice of every axis away are errors that say so."""
    @wp.kernel
    def zero_step(a: wp.array(dtype=float)):
        b = a[::0]
        b[0] = 1.0

    @wp.kernel
    def float_bound(a: wp.array(dtype=float)):
        b = a[0.5:]
        b[0] = 1.0

    with pytest.raises(ValueError, match="step cannot be zero"):
        wp.launch(zero_step, 1, [wp.zeros(4, dtype=float)])
    with pytest.raises(TypeError, match="slice bounds must be integers"):
        wp.launch(float_bound, 1, [wp.zeros(4, dtype=float)])


def test_a_strided_slice_replaces_a_contiguous_array_only_in_straight_line_code():
    """Straight-line code rebinds a name to a strided slice; inside a branch the name keeps its kind."""
    @wp.kernel
    def reassign(a: wp.array(dtype=float), out: wp.array(dtype=float)):
        v = a
        v = a[::2]
        out[0] = v[1]

    @wp.kernel
    def reassign_in_branch(a: wp.array(dtype=float), out: wp.array(dtype=float)):
        v = a
        if out[0] == 0.0:
            v = a[::2]
        out[0] = v[1]

    a, out = wp.array(np.arange(8, dtype=np.float32)), wp.zeros(1, dtype=float)
    wp.launch(reassign, dim=1, inputs=[a, out])
    assert out.numpy()[0] == 2.0
    with pytest.raises(TypeError, match="strided slice cannot be assigned"):
        wp.launch(reassign_in_branch, dim=1, inputs=[a, out])
