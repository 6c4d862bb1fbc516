"""wp.Volume: NanoVDB-layout sparse volumes against NumPy oracles (lookups, trilinear samples and their
gradients, stores, index grids, world/index maps), .nvdb round trips, files written by Warp 1.19 (NanoVDB's
own builder) and bad files."""

import io
import json
import os
import struct
import subprocess
from pathlib import Path

import numpy as np
import pytest

import loomwork as wp

DATA = Path(__file__).parent / "data"


@wp.kernel
def lookup_f(vid: wp.uint64, ijk: wp.array(dtype=wp.vec3i), out: wp.array(dtype=float)):
    t = wp.tid()
    p = ijk[t]
    out[t] = wp.volume_lookup(vid, p[0], p[1], p[2], dtype=float)


@wp.kernel
def lookup_v(vid: wp.uint64, ijk: wp.array(dtype=wp.vec3i), out: wp.array(dtype=wp.vec3)):
    t = wp.tid()
    p = ijk[t]
    out[t] = wp.volume_lookup_v(vid, p[0], p[1], p[2])


@wp.kernel
def lookup_i(vid: wp.uint64, ijk: wp.array(dtype=wp.vec3i), out: wp.array(dtype=int)):
    t = wp.tid()
    p = ijk[t]
    out[t] = wp.volume_lookup(vid, p[0], p[1], p[2], wp.int32)


@wp.kernel
def lookup_index(vid: wp.uint64, ijk: wp.array(dtype=wp.vec3i), out: wp.array(dtype=int)):
    t = wp.tid()
    p = ijk[t]
    out[t] = wp.volume_lookup_index(vid, p[0], p[1], p[2])


@wp.kernel
def sample_f(vid: wp.uint64, uvw: wp.array(dtype=wp.vec3), mode: int, out: wp.array(dtype=float)):
    t = wp.tid()
    out[t] = wp.volume_sample(vid, uvw[t], mode, dtype=float)


@wp.kernel
def sample_v(vid: wp.uint64, uvw: wp.array(dtype=wp.vec3), out: wp.array(dtype=wp.vec3)):
    t = wp.tid()
    out[t] = wp.volume_sample_v(vid, uvw[t], wp.Volume.LINEAR)


@wp.kernel
def sample_grad_f(vid: wp.uint64, uvw: wp.array(dtype=wp.vec3), out: wp.array(dtype=float),
                  grads: wp.array(dtype=wp.vec3)):
    t = wp.tid()
    g = wp.vec3()
    out[t] = wp.volume_sample_grad(vid, uvw[t], wp.Volume.LINEAR, g, dtype=float)
    grads[t] = g


@wp.kernel
def sample_grad_v(vid: wp.uint64, uvw: wp.array(dtype=wp.vec3), jac: wp.array(dtype=wp.mat33)):
    t = wp.tid()
    g = wp.mat33()
    wp.volume_sample_grad(vid, uvw[t], wp.Volume.LINEAR, g, dtype=wp.vec3)
    jac[t] = g


@wp.kernel
def loss_sample(vid: wp.uint64, uvw: wp.array(dtype=wp.vec3), w: wp.vec3, loss: wp.array(dtype=float)):
    t = wp.tid()
    s = wp.volume_sample_f(vid, uvw[t], wp.Volume.LINEAR)
    v = wp.volume_sample(vid, uvw[t] * 0.5, wp.Volume.LINEAR, dtype=wp.vec3)
    g = wp.vec3()
    s2 = wp.volume_sample_grad_f(vid, uvw[t], wp.Volume.LINEAR, g)
    wp.atomic_add(loss, 0, s * s + wp.dot(v, w) + wp.dot(g, w) + s2)


@wp.kernel
def store_f(vid: wp.uint64, ijk: wp.array(dtype=wp.vec3i), values: wp.array(dtype=float)):
    t = wp.tid()
    p = ijk[t]
    wp.volume_store(vid, p[0], p[1], p[2], values[t])


@wp.kernel
def store_v(vid: wp.uint64, ijk: wp.array(dtype=wp.vec3i), values: wp.array(dtype=wp.vec3)):
    t = wp.tid()
    p = ijk[t]
    wp.volume_store_v(vid, p[0], p[1], p[2], values[t])


@wp.kernel
def maps(vid: wp.uint64, pts: wp.array(dtype=wp.vec3), out: wp.array(dtype=wp.vec3, ndim=2)):
    t = wp.tid()
    out[t, 0] = wp.volume_index_to_world(vid, pts[t])
    out[t, 1] = wp.volume_world_to_index(vid, pts[t])
    out[t, 2] = wp.volume_index_to_world_dir(vid, pts[t])
    out[t, 3] = wp.volume_world_to_index_dir(vid, pts[t])


@wp.kernel
def maps_d(vid: wp.uint64, pts: wp.array(dtype=wp.vec3d), out: wp.array(dtype=wp.vec3d, ndim=2)):
    t = wp.tid()
    out[t, 0] = wp.volume_index_to_world(vid, pts[t])
    out[t, 1] = wp.volume_world_to_index(vid, pts[t])


@wp.kernel
def world_loss(vid: wp.uint64, pts: wp.array(dtype=wp.vec3), w: wp.vec3, loss: wp.array(dtype=float)):
    t = wp.tid()
    a = wp.volume_world_to_index(vid, pts[t])
    b = wp.volume_index_to_world_dir(vid, pts[t])
    wp.atomic_add(loss, 0, wp.dot(a, w) + wp.dot(b, b))


@wp.kernel
def sample_index(vid: wp.uint64, uvw: wp.array(dtype=wp.vec3), data: wp.array(dtype=float), bg: float,
                 out: wp.array(dtype=float), grads: wp.array(dtype=wp.vec3)):
    t = wp.tid()
    g = wp.vec3()
    out[t] = wp.volume_sample_index(vid, uvw[t], wp.Volume.LINEAR, data, bg)
    wp.volume_sample_grad_index(vid, uvw[t], wp.Volume.LINEAR, data, bg, g)
    grads[t] = g


@wp.kernel
def index_loss(vid: wp.uint64, uvw: wp.array(dtype=wp.vec3), data: wp.array(dtype=float), bg: wp.array(dtype=float),
               loss: wp.array(dtype=float)):
    t = wp.tid()
    s = wp.volume_sample_index(vid, uvw[t], wp.Volume.LINEAR, data, bg[0])
    wp.atomic_add(loss, 0, s * s)


@wp.kernel
def voxel_count(vid: wp.uint64, out: wp.array(dtype=int)):
    out[0] = wp.volume_voxel_count(vid)


def box(shape, pad=3):
    """Every integer point of the box grown by `pad` voxels on each side."""
    axes = [np.arange(-pad, s + pad) for s in shape]
    return np.stack(np.meshgrid(*axes, indexing="ij"), -1).reshape(-1, 3).astype(np.int32)


def dense_oracle(a: np.ndarray, bg, ijk: np.ndarray) -> np.ndarray:
    """What a volume of `a` (padded to whole tiles with bg) holds at the points ijk: bg outside."""
    inside = (ijk >= 0).all(1) & (ijk < a.shape[:3]).all(1)
    out = np.empty((len(ijk),) + a.shape[3:], a.dtype)
    out[...] = bg
    out[inside] = a[tuple(ijk[inside].T)]
    return out


def trilinear(lookup, uvw: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Trilinear interpolation of scalar voxel values `lookup(ijk)` at points uvw, and its gradient (NumPy)."""
    base = np.floor(uvw).astype(np.int64)
    f = uvw - base
    val, grad = np.zeros(len(uvw)), np.zeros((len(uvw), 3))
    for q in range(8):
        d = np.array([(q >> 2) & 1, (q >> 1) & 1, q & 1])
        c = lookup((base + d).astype(np.int32)).astype(np.float64)
        w = np.where(d, f, 1 - f)
        val += w.prod(1) * c
        for ax in range(3):
            grad[:, ax] += np.prod([w[:, e] if e != ax else np.full(len(uvw), 2.0 * d[ax] - 1) for e in range(3)],
                                   axis=0) * c
    return val, grad


def run(kernel, n, *inputs, out_dtype=float, shape=None):
    out = wp.zeros(shape or n, dtype=out_dtype)
    wp.launch(kernel, n, inputs=[*inputs, out])
    return out.numpy()


RNG = np.random.default_rng(16)
A = RNG.random((11, 6, 9)).astype(np.float32)  # the values of tests/geometry/data/warp_float.nvdb
V3 = RNG.random((4, 9, 5, 3)).astype(np.float32)  # ... warp_vec3.nvdb
AI = RNG.integers(-50, 50, (7, 10, 3)).astype(np.int32)  # ... warp_int.nvdb
PTS = RNG.integers(-40, 40, (60, 3)).astype(np.int32)  # ... the voxels of warp_index.nvdb


def check_float(v, a, bg):
    ijk = box(a.shape)
    got = run(lookup_f, len(ijk), v.id, wp.array(ijk, dtype=wp.vec3i))
    np.testing.assert_array_equal(got, dense_oracle(a, bg, ijk))


def check_vec3(v, a, bg):
    ijk = box(a.shape[:3])
    got = run(lookup_v, len(ijk), v.id, wp.array(ijk, dtype=wp.vec3i), out_dtype=wp.vec3)
    np.testing.assert_array_equal(got, dense_oracle(a, np.float32(bg), ijk))


def check_int(v, a, bg):
    ijk = box(a.shape)
    got = run(lookup_i, len(ijk), v.id, wp.array(ijk, dtype=wp.vec3i), out_dtype=int)
    np.testing.assert_array_equal(got, dense_oracle(a, bg, ijk))


def test_load_from_numpy_lookups_match_the_array():
    """Float, vec3 and int grids from dense arrays: every voxel reads back, the background outside and in
    the padding of partial tiles."""
    v = wp.Volume.load_from_numpy(A, min_world=(1, 2, 3), voxel_size=0.5, bg_value=-1.0)
    assert v.dtype is wp.float32 and not v.is_index
    assert v.get_tile_count() == 2 * 1 * 2 and v.get_voxel_count() == 512 * 4
    check_float(v, A, -1.0)
    vv = wp.Volume.load_from_numpy(V3, bg_value=(1.0, 2.0, 3.0))
    assert vv.dtype is wp.vec3
    check_vec3(vv, V3, (1.0, 2.0, 3.0))
    vi = wp.Volume.load_from_numpy(AI, bg_value=7)
    assert vi.dtype is wp.int32
    check_int(vi, AI, 7)


def test_wrong_dtype_reads_zero_and_unknown_dtype_is_a_compile_error():
    """A lookup with another value type than the grid's reads zeros; an unsupported dtype= fails to compile."""
    vi = wp.Volume.load_from_numpy(AI, bg_value=7)
    ijk = box(AI.shape, pad=0)[:5]
    assert (run(lookup_f, 5, vi.id, wp.array(ijk, dtype=wp.vec3i)) == 0).all()

    @wp.kernel
    def bad(vid: wp.uint64, out: wp.array(dtype=float)):
        out[0] = wp.volume_sample(vid, wp.vec3(0.0), wp.Volume.LINEAR, dtype=wp.mat22)

    with pytest.raises(TypeError, match="unsupported volume type"):
        wp.launch(bad, 1, inputs=[vi.id, wp.zeros(1, dtype=float)])


def test_linear_and_closest_samples_match_numpy():
    """LINEAR is NumPy's trilinear interpolation (background beyond the data), CLOSEST the rounded voxel."""
    v = wp.Volume.load_from_numpy(A, voxel_size=0.5, bg_value=-1.0)
    uvw = (RNG.random((400, 3)) * (np.array(A.shape) + 4) - 2).astype(np.float32)
    uvw[:5] = [[0, 0, 0], [1.5, 2.5, 3.5], [-0.5, 0.5, 0.5], [10.5, 5.5, 8.5], [3, 4, 5]]
    look = lambda ijk: dense_oracle(A, -1.0, ijk)  # noqa: E731
    want, _ = trilinear(look, uvw.astype(np.float64))
    got = run(sample_f, len(uvw), v.id, wp.array(uvw, dtype=wp.vec3), wp.Volume.LINEAR)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    closest = np.where(uvw < 0, -np.floor(0.5 - uvw), np.floor(uvw + 0.5)).astype(np.int32)
    got = run(sample_f, len(uvw), v.id, wp.array(uvw, dtype=wp.vec3), wp.Volume.CLOSEST)
    np.testing.assert_array_equal(got, look(closest))


def test_vec3_samples_and_jacobians_match_numpy():
    """vec3 grids interpolate per component; volume_sample_grad gives the 3 x 3 Jacobian."""
    v = wp.Volume.load_from_numpy(V3, bg_value=(1.0, 2.0, 3.0))
    uvw = (RNG.random((200, 3)) * (np.array(V3.shape[:3]) + 2) - 1).astype(np.float32)
    parts = [trilinear(lambda ijk, c=c: dense_oracle(V3[..., c], np.float32(c + 1), ijk), uvw.astype(np.float64))
             for c in range(3)]
    got = run(sample_v, len(uvw), v.id, wp.array(uvw, dtype=wp.vec3), out_dtype=wp.vec3)
    np.testing.assert_allclose(got, np.stack([p[0] for p in parts], 1), rtol=1e-5, atol=1e-5)
    jac = run(sample_grad_v, len(uvw), v.id, wp.array(uvw, dtype=wp.vec3), out_dtype=wp.mat33)
    np.testing.assert_allclose(jac, np.stack([p[1] for p in parts], 1), rtol=1e-4, atol=1e-4)


def test_sample_grad_matches_numpy():
    """volume_sample_grad returns the sampled value and the trilinear gradient in index space."""
    v = wp.Volume.load_from_numpy(A, bg_value=0.25)
    uvw = (RNG.random((300, 3)) * (np.array(A.shape) + 2) - 1).astype(np.float32)
    want, grad = trilinear(lambda ijk: dense_oracle(A, 0.25, ijk), uvw.astype(np.float64))
    vals = wp.zeros(len(uvw), dtype=float)
    grads = wp.zeros(len(uvw), dtype=wp.vec3)
    wp.launch(sample_grad_f, len(uvw), inputs=[v.id, wp.array(uvw, dtype=wp.vec3), vals, grads])
    np.testing.assert_allclose(vals.numpy(), want, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(grads.numpy(), grad, rtol=1e-4, atol=1e-4)


def test_sampling_adjoints_match_finite_differences():
    """The gradient of samples (scalar, vec3 and through volume_sample_grad's gradient) with respect to the
    position agrees with central differences in float64."""
    smooth = np.fromfunction(lambda i, j, k: np.sin(0.7 * i) * np.cos(0.4 * j) + 0.1 * i * k, (12, 12, 12))
    vf = wp.Volume.load_from_numpy(smooth.astype(np.float32), bg_value=0.0)
    vec = np.stack([smooth, smooth ** 2, -smooth], -1).astype(np.float32)
    vv = wp.Volume.load_from_numpy(vec, bg_value=(0.0, 0.0, 0.0))
    # loss_sample reads both a float and a vec3 sample: on each grid, the other type reads zero
    w = wp.vec3(0.3, -0.7, 0.5)
    uvw0 = (RNG.random((6, 3)) * 8 + 2).astype(np.float32)
    uvw0 = np.floor(uvw0) + 0.2 + 0.6 * (uvw0 - np.floor(uvw0))  # away from the voxel planes

    def loss_of(p: np.ndarray, vid: int) -> float:
        pts = wp.array(p.astype(np.float32), dtype=wp.vec3)
        out = wp.zeros(1, dtype=float)
        wp.launch(loss_sample, len(p), inputs=[vid, pts, w, out])
        return float(out.numpy()[0])

    for vid in (vf.id, vv.id):
        pts = wp.array(uvw0, dtype=wp.vec3, requires_grad=True)
        loss = wp.zeros(1, dtype=float, requires_grad=True)
        tape = wp.Tape()
        with tape:
            wp.launch(loss_sample, len(uvw0), inputs=[vid, pts, w, loss])
        tape.backward(loss)
        g = pts.grad.numpy()
        h = 1e-2
        fd = np.zeros_like(uvw0)
        for i in range(len(uvw0)):
            for d in range(3):
                e = np.zeros_like(uvw0)
                e[i, d] = h
                fd[i, d] = (loss_of(uvw0 + e, vid) - loss_of(uvw0 - e, vid)) / (2 * h)
        np.testing.assert_allclose(g, fd, rtol=2e-2, atol=2e-2)


def test_store_writes_allocated_voxels_only():
    """volume_store writes voxels with tile storage (later lookups see them); elsewhere nothing happens."""
    v = wp.Volume.allocate(min=[-4, 0, 0], max=[10, 5, 7], voxel_size=1.0, bg_value=0.5)
    assert v.get_tile_count() == 3 * 1 * 1
    np.testing.assert_array_equal(np.unique(v.get_tiles().numpy(), axis=0), [[-8, 0, 0], [0, 0, 0], [8, 0, 0]])
    ijk = np.array([[-8, 0, 0], [3, 4, 5], [15, 7, 7], [16, 0, 0], [0, 8, 0], [-9, 0, 0]], np.int32)
    wp.launch(store_f, len(ijk), inputs=[v.id, wp.array(ijk, dtype=wp.vec3i), wp.array(np.arange(6.0) + 10,
                                                                                          dtype=float)])
    got = run(lookup_f, len(ijk), v.id, wp.array(ijk, dtype=wp.vec3i))
    np.testing.assert_array_equal(got, [10, 11, 12, 0.5, 0.5, 0.5])
    vv = wp.Volume.allocate(min=[0, 0, 0], max=[1, 1, 1], voxel_size=1.0, bg_value=wp.vec3(1.0, 2.0, 3.0))
    wp.launch(store_v, 1, inputs=[vv.id, wp.array(ijk[1:2], dtype=wp.vec3i), wp.array([[4, 5, 6]], dtype=wp.vec3)])
    got = run(lookup_v, 2, vv.id, wp.array(ijk[:2] * 0 + [[0, 0, 0], [3, 4, 5]], dtype=wp.vec3i), out_dtype=wp.vec3)
    np.testing.assert_array_equal(got, [[1, 2, 3], [4, 5, 6]])


def test_world_index_maps_with_translation_and_voxel_size():
    """index -> world is x = s * ijk + t, world -> index its inverse; the _dir forms skip t; float64 too;
    their adjoints are the maps' transposes."""
    s, t = np.array([0.5, 2.0, 0.25]), np.array([1.0, -2.0, 3.0])
    v = wp.Volume.allocate_by_tiles(wp.array([[0, 0, 0]], dtype=wp.vec3i), voxel_size=tuple(s), bg_value=0.0,
                                    translation=tuple(t))
    assert v.get_voxel_size() == tuple(s)
    p = RNG.normal(size=(50, 3))
    got = run(maps, len(p), v.id, wp.array(p, dtype=wp.vec3), out_dtype=wp.vec3, shape=(len(p), 4))
    np.testing.assert_allclose(got[:, 0], p * s + t, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got[:, 1], (p - t) / s, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got[:, 2], p * s, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got[:, 3], p / s, rtol=1e-5, atol=1e-6)
    got = run(maps_d, len(p), v.id, wp.array(p, dtype=wp.vec3d), out_dtype=wp.vec3d, shape=(len(p), 2))
    np.testing.assert_allclose(got[:, 0], p * s + t, rtol=1e-13)
    np.testing.assert_allclose(got[:, 1], (p - t) / s, rtol=1e-13)
    pts = wp.array(p, dtype=wp.vec3, requires_grad=True)
    loss = wp.zeros(1, dtype=float, requires_grad=True)
    w = np.array([0.3, -0.2, 0.9])
    tape = wp.Tape()
    with tape:
        wp.launch(world_loss, len(p), inputs=[v.id, pts, wp.vec3(*w), loss])
    tape.backward(loss)
    np.testing.assert_allclose(pts.grad.numpy(), w / s + 2 * p * s * s, rtol=1e-4, atol=1e-5)


def test_allocate_by_tiles_from_index_and_world_points():
    """Tiles around index-space points (floored to multiples of 8) and world-space points (rounded to the
    nearest voxel first); get_voxels lists every voxel of every tile."""
    v = wp.Volume.allocate_by_tiles(wp.array([[1, 2, 3], [7, 7, 7], [-1, 0, 0], [20, 0, 0]], dtype=wp.vec3i),
                                    voxel_size=1.0, bg_value=2)
    assert v.dtype is wp.int32
    np.testing.assert_array_equal(np.unique(v.get_tiles().numpy(), axis=0), [[-8, 0, 0], [0, 0, 0], [16, 0, 0]])
    vox = v.get_voxels().numpy()
    assert v.get_voxel_count() == len(vox) == 3 * 512
    assert len(np.unique(vox, axis=0)) == len(vox) and set(map(tuple, vox >> 3 << 3)) == {(-8, 0, 0), (0, 0, 0),
                                                                                             (16, 0, 0)}
    w = wp.Volume.allocate_by_tiles(wp.array([[0.9, 0.1, -0.1], [4.1, 0.0, 0.0]], dtype=wp.vec3), voxel_size=0.5,
                                    bg_value=0.0, translation=(1.0, 0.0, 0.0))
    # x: (0.9 - 1) / 0.5 = -0.2 -> voxel 0 and (4.1 - 1) / 0.5 = 6.2 -> voxel 6; z: -0.2 -> 0: one tile
    np.testing.assert_array_equal(w.get_tiles().numpy(), [[0, 0, 0]])
    out = wp.zeros((1, 3), dtype=wp.int32)
    assert v.get_tiles(out=wp.zeros((5, 3), dtype=wp.int32)).shape == (5, 3)
    with pytest.raises(ValueError, match="out must be"):
        v.get_tiles(out=out)
    with pytest.raises(ValueError, match="voxel_size"):
        wp.Volume.allocate_by_tiles(wp.array([[0, 0, 0]], dtype=wp.vec3i), voxel_size=-1.0)
    with pytest.raises(wp.GeometryError, match="NaN or infinite"):
        wp.Volume.allocate_by_tiles(wp.array([[0, np.nan, 0]], dtype=wp.vec3), voxel_size=1.0)
    with pytest.raises(wp.GeometryError, match="int32 range"):
        wp.Volume.allocate_by_voxels(wp.array([[0, 3e9, 0]], dtype=wp.vec3), voxel_size=1.0)
    with pytest.raises(TypeError, match="unsupported grid type"):
        wp.Volume.allocate_by_tiles(wp.array([[0, 0, 0]], dtype=wp.vec3i), voxel_size=1.0, bg_value=wp.mat22())


def test_index_grid_lookups_and_samples_match_numpy():
    """allocate_by_voxels numbers the active voxels (get_voxels in index order); volume_sample_index reads
    an array through those numbers, background elsewhere; its adjoint reaches the array and the background."""
    v = wp.Volume.allocate_by_voxels(wp.array(PTS, dtype=wp.vec3i), voxel_size=1.0)
    unique = np.unique(PTS, axis=0)
    assert v.is_index and v.dtype is None and v.get_voxel_count() == len(unique)
    assert run(voxel_count, 1, v.id, out_dtype=int)[0] == len(unique)
    vox = v.get_voxels().numpy()
    np.testing.assert_array_equal(np.unique(vox, axis=0), unique)
    idx = run(lookup_index, len(vox), v.id, wp.array(vox, dtype=wp.vec3i), out_dtype=int)
    np.testing.assert_array_equal(idx, np.arange(len(vox)))
    others = box((4, 4, 4), pad=2)
    others = others[~(others[:, None] == unique[None]).all(-1).any(1)]
    assert (run(lookup_index, len(others), v.id, wp.array(others, dtype=wp.vec3i), out_dtype=int) == -1).all()

    data = RNG.random(len(vox)).astype(np.float32)
    table = {tuple(p): data[i] for i, p in enumerate(vox)}
    look = lambda ijk: np.array([table.get(tuple(p), -0.5) for p in ijk], np.float32)  # noqa: E731
    uvw = (vox[RNG.integers(0, len(vox), 100)] + RNG.random((100, 3)) * 1.6 - 0.3).astype(np.float32)
    want, grad = trilinear(look, uvw.astype(np.float64))
    out, grads = wp.zeros(len(uvw), dtype=float), wp.zeros(len(uvw), dtype=wp.vec3)
    wp.launch(sample_index, len(uvw), inputs=[v.id, wp.array(uvw, dtype=wp.vec3), wp.array(data, dtype=float), -0.5,
                                               out, grads])
    np.testing.assert_allclose(out.numpy(), want, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(grads.numpy(), grad, rtol=1e-4, atol=1e-4)

    d = wp.array(data, dtype=float, requires_grad=True)
    bg = wp.array([-0.5], dtype=float, requires_grad=True)
    loss = wp.zeros(1, dtype=float, requires_grad=True)
    pts = wp.array(uvw, dtype=wp.vec3, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(index_loss, len(uvw), inputs=[v.id, pts, d, bg, loss])
    tape.backward(loss)
    # d loss / d data[n] = sum over samples of 2 s * weight of voxel n; the same with the background's weight
    base = np.floor(uvw).astype(np.int64)
    f = uvw - base
    gd, gbg = np.zeros(len(vox)), 0.0
    index = {tuple(p): i for i, p in enumerate(vox)}
    for t in range(len(uvw)):
        for q in range(8):
            dq = np.array([(q >> 2) & 1, (q >> 1) & 1, q & 1])
            wq = np.prod(np.where(dq, f[t], 1 - f[t]))
            n = index.get(tuple(base[t] + dq))
            if n is None:
                gbg += 2 * want[t] * wq
            else:
                gd[n] += 2 * want[t] * wq
    np.testing.assert_allclose(d.grad.numpy(), gd, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(bg.grad.numpy()[0], gbg, rtol=1e-4)
    np.testing.assert_allclose(pts.grad.numpy(), 2 * want[:, None] * grad, rtol=1e-3, atol=1e-4)


@pytest.mark.parametrize("codec", ["none", "zip"])
def test_nvdb_round_trip(tmp_path, codec):
    """save_to_nvdb then load_from_nvdb (a path, a file object or bytes) gives the same grid, byte for byte."""
    kinds = [wp.Volume.load_from_numpy(A, min_world=(1, 2, 3), voxel_size=0.5, bg_value=-1.0),
             wp.Volume.load_from_numpy(V3, bg_value=(1.0, 2.0, 3.0)),
             wp.Volume.load_from_numpy(AI, bg_value=7),
             wp.Volume.allocate_by_voxels(wp.array(PTS, dtype=wp.vec3i), voxel_size=0.5)]
    for n, v in enumerate(kinds):
        path = tmp_path / f"v{n}.nvdb"
        assert v.save_to_nvdb(path, codec) == path
        raw = path.read_bytes()
        assert struct.unpack_from("<QIHH", raw)[3] == {"none": 0, "zip": 1}[codec]
        for src in (path, str(path), io.BytesIO(raw), raw):
            back = wp.Volume.load_from_nvdb(src)
            np.testing.assert_array_equal(back.array().numpy(), v.array().numpy())
            assert back.dtype == v.dtype and back.get_voxel_size() == v.get_voxel_size()
    check_float(wp.Volume.load_from_nvdb(tmp_path / "v0.nvdb"), A, -1.0)


def test_reads_files_written_by_warp():
    """Grids NanoVDB's own builder wrote (through Warp 1.19, codec zip) read back: float with a map, vec3,
    int, and an OnIndex grid whose numbering follows the file."""
    v = wp.Volume.load_from_nvdb(DATA / "warp_float.nvdb")
    assert v.dtype is wp.float32 and v.get_voxel_size() == (0.25, 0.25, 0.25)
    np.testing.assert_allclose(np.array(v.get_grid_info().translation), [-1.0, 0.5, 2.0])
    check_float(v, A, -2.0)
    check_vec3(wp.Volume.load_from_nvdb(DATA / "warp_vec3.nvdb"), V3, (1.0, -1.0, 0.5))
    check_int(wp.Volume.load_from_nvdb(DATA / "warp_int.nvdb"), AI, 9)
    vi = wp.Volume.load_from_nvdb(DATA / "warp_index.nvdb")
    unique = np.unique(PTS, axis=0)
    vox = vi.get_voxels().numpy()
    assert vi.is_index and vi.get_voxel_count() == len(unique)
    np.testing.assert_array_equal(np.unique(vox, axis=0), unique)
    idx = run(lookup_index, len(vox), vi.id, wp.array(vox, dtype=wp.vec3i), out_dtype=int)
    np.testing.assert_array_equal(idx, np.arange(len(vox)))


def test_bad_files_raise_geometry_errors(tmp_path):
    """Truncated files, other magic numbers and versions, unsupported grid types, unknown codecs and corrupt
    node references are clear GeometryErrors (ValueErrors), never crashes."""
    path = tmp_path / "v.nvdb"
    wp.Volume.load_from_numpy(A, bg_value=0.0).save_to_nvdb(path)
    raw = bytearray(path.read_bytes())
    header = 16 + 176 + 1  # file header, metadata, the empty name's terminator

    def fails(data, match):
        with pytest.raises(wp.GeometryError, match=match):
            wp.Volume.load_from_nvdb(bytes(data))
        with pytest.raises(ValueError):
            wp.Volume.load_from_nvdb(bytes(data))

    for cut in (0, 10, 100, header + 500, len(raw) - 1):
        fails(raw[:cut], "truncated")
    bad = raw.copy()
    bad[0:8] = b"NotAVDB!"
    fails(bad, "not a NanoVDB file")
    bad = raw.copy()
    struct.pack_into("<I", bad, 8, 31 << 21)
    fails(bad, "version 31.0.0 is not supported")
    bad = raw.copy()
    struct.pack_into("<I", bad, header + 636, 15)  # Fp16
    fails(bad, "'Fp16' is not supported")
    bad = raw.copy()
    struct.pack_into("<H", bad, 14, 9)
    fails(bad, "unknown NanoVDB codec")
    bad = raw.copy()
    root = header + 672 + struct.unpack_from("<q", raw, header + 672 + 24)[0]
    struct.pack_into("<q", bad, root + 64 + 8, 12345)  # the first root tile's child
    fails(bad, "corrupt NanoVDB grid")
    zipped = tmp_path / "z.nvdb"
    wp.Volume.load_from_numpy(A, bg_value=0.0).save_to_nvdb(zipped, "zip")
    bad = bytearray(zipped.read_bytes())
    bad[header + 8 + 20:header + 8 + 30] = b"0123456789"
    fails(bad, "corrupt zip")
    with pytest.raises(wp.GeometryError, match="codec"):
        wp.Volume.load_from_numpy(A, bg_value=0.0).save_to_nvdb(tmp_path / "x.nvdb", "lz4")


def test_freed_volume_reads_nothing():
    """A kernel given the id of a freed volume reads zeros instead of freed memory."""
    v = wp.Volume.load_from_numpy(A, bg_value=3.0)
    vid = v.id
    del v
    ijk = box(A.shape, pad=0)[:4]
    assert (run(lookup_f, 4, vid, wp.array(ijk, dtype=wp.vec3i)) == 0).all()


def rotated_map_volume(a: np.ndarray, rot: np.ndarray, t: np.ndarray) -> wp.Volume:
    """A float volume of `a` whose index-to-world map is x = rot @ ijk + t (patched into NanoVDB's map)."""
    raw = wp.Volume.load_from_numpy(a, bg_value=0.0).array().numpy().copy()
    inv = np.linalg.inv(rot)
    struct.pack_into("<9f9f3f", raw, 296, *rot.ravel(), *inv.ravel(), *t)
    struct.pack_into("<9d9d3d", raw, 384, *rot.ravel(), *inv.ravel(), *t)
    return wp.Volume(wp.array(raw, dtype=wp.uint8))


def test_general_maps_and_their_adjoints():
    """With a rotated, scaled map the transforms match NumPy and their gradients are the transposed maps
    (checked against finite differences)."""
    c, s = np.cos(0.6), np.sin(0.6)
    rot = np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]]) @ np.diag([0.5, 2.0, 1.5])
    t = np.array([1.0, -2.0, 0.5])
    v = rotated_map_volume(A, rot, t)
    p = RNG.normal(size=(20, 3))
    got = run(maps, len(p), v.id, wp.array(p, dtype=wp.vec3), out_dtype=wp.vec3, shape=(len(p), 4))
    np.testing.assert_allclose(got[:, 0], p @ rot.T + t, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got[:, 1], (p - t) @ np.linalg.inv(rot).T, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got[:, 2], p @ rot.T, rtol=1e-5, atol=1e-5)
    w = np.array([0.3, -0.2, 0.9])

    def loss_of(q):
        out = wp.zeros(1, dtype=float)
        wp.launch(world_loss, len(q), inputs=[v.id, wp.array(q, dtype=wp.vec3), wp.vec3(*w), out])
        return float(out.numpy()[0])

    pts = wp.array(p, dtype=wp.vec3, requires_grad=True)
    loss = wp.zeros(1, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(world_loss, len(p), inputs=[v.id, pts, wp.vec3(*w), loss])
    tape.backward(loss)
    want = np.linalg.inv(rot).T @ w + 2 * (p @ rot.T) @ rot
    np.testing.assert_allclose(pts.grad.numpy(), want, rtol=1e-4, atol=1e-4)
    e = np.zeros_like(p)
    e[3, 1] = 1e-2
    fd = (loss_of(p + e) - loss_of(p - e)) / 2e-2
    np.testing.assert_allclose(pts.grad.numpy()[3, 1], fd, rtol=1e-2)


@wp.kernel
def sample_i2(vid: wp.uint64, uvw: wp.array(dtype=wp.vec3), out: wp.array(dtype=int)):
    t = wp.tid()
    out[t] = wp.volume_sample_i(vid, uvw[t])


def test_volume_sample_i_takes_the_closest_voxel_and_grad_types_are_checked():
    """volume_sample_i(id, uvw) reads the nearest voxel; a gradient variable of the wrong shape is refused by
    name."""
    vi = wp.Volume.load_from_numpy(AI, bg_value=7)
    uvw = np.array([[0.4, 1.6, 1.5], [-0.6, 0, 0], [6.2, 9.4, 1.49]], np.float32)
    got = run(sample_i2, 3, vi.id, wp.array(uvw, dtype=wp.vec3), out_dtype=int)
    np.testing.assert_array_equal(got, [AI[0, 2, 2], 7, AI[6, 9, 1]])

    mat34 = wp.types.matrix((3, 4), wp.float32)

    @wp.kernel
    def transposed(vid: wp.uint64, out: wp.array(dtype=wp.vec4)):
        g = mat34()
        out[0] = wp.volume_sample_grad(vid, wp.vec3(0.0), wp.Volume.LINEAR, g, dtype=wp.vec4)

    with pytest.raises(RuntimeError, match="Incompatible gradient type, expected mat43f, got mat34f"):
        wp.launch(transposed, 1, inputs=[vi.id, wp.zeros(1, dtype=wp.vec4)])


def nvdb_file(grids: list[bytes]) -> bytes:
    """A NanoVDB file (codec none) of several grid buffers, built from their headers by hand."""
    head = struct.pack("<QIHH", 0x324244566F6E614E, 32 << 21 | 8 << 10, len(grids), 0)
    metas, body = b"", b""
    for n, g in enumerate(grids):
        g = bytearray(g)
        struct.pack_into("<II", g, 24, n, len(grids))
        metas += struct.pack("<QQ", len(g), len(g)) + bytes(120) + struct.pack("<I", 1) + bytes(36) + b"\0"
        body += bytes(g)
    return head + metas + body


def test_files_of_several_grids_and_blind_data():
    """load_next_grid walks the grids of a file; blind data arrays appended to a grid read back as arrays."""
    g1 = wp.Volume.load_from_numpy(A, bg_value=-1.0).array().numpy().tobytes()
    g2 = wp.Volume.load_from_numpy(AI, bg_value=7).array().numpy().tobytes()
    first = wp.Volume.load_from_nvdb(nvdb_file([g1, g2]))
    check_float(first, A, -1.0)
    second = first.load_next_grid()
    assert second is not None and second.get_grid_info().grid_index == 1 and second.get_grid_info().grid_count == 2
    check_int(second, AI, 7)
    assert second.load_next_grid() is None

    # blind data: one record (288 bytes) and its 5 uint64 values after the nodes
    values = np.arange(5, dtype=np.uint64) * 3
    meta_at = len(g1)
    record = struct.pack("<qQIIII", 288, len(values), 8, 0, 0, 0) + b"weights".ljust(256, b"\0")
    raw = bytearray(g1) + record + values.tobytes()
    struct.pack_into("<Q", raw, 32, len(raw))
    struct.pack_into("<qI", raw, 640, meta_at, 1)
    v = wp.Volume(np.frombuffer(bytes(raw), np.uint8))
    assert v.get_feature_array_count() == 1
    info = v.get_feature_array_info(0)
    assert (info.name, info.value_size, info.value_count) == ("weights", 8, 5)
    np.testing.assert_array_equal(v.feature_array(0, dtype=wp.uint64).numpy(), values)
    assert v.feature_array(0, dtype=wp.uint8).shape == (40,)
    check_float(wp.Volume.load_from_nvdb(nvdb_file([bytes(raw)])), A, -1.0)
    struct.pack_into("<qQ", raw, meta_at, 288, 10**6)  # more values than the grid holds
    with pytest.raises(wp.GeometryError, match="blind data 'weights' lies outside"):
        wp.Volume(np.frombuffer(bytes(raw), np.uint8))


def test_point_masks_skip_points():
    """Points whose point_mask entry is zero allocate nothing."""
    pts = wp.array([[0, 0, 0], [100, 0, 0], [0, 50, 0]], dtype=wp.vec3i)
    mask = wp.array([1, 0, 1], dtype=wp.int32)
    v = wp.Volume.allocate_by_tiles(pts, voxel_size=1.0, bg_value=0.0, point_mask=mask)
    np.testing.assert_array_equal(np.unique(v.get_tiles().numpy(), axis=0), [[0, 0, 0], [0, 48, 0]])
    vi = wp.Volume.allocate_by_voxels(pts, voxel_size=1.0, point_mask=mask)
    np.testing.assert_array_equal(vi.get_voxels().numpy(), [[0, 0, 0], [0, 50, 0]])


def test_empty_volumes_read_the_background(tmp_path):
    """A volume without tiles (every point masked out) is a valid grid: lookups read the background and it
    survives a file round trip."""
    pts = wp.array([[0, 0, 0]], dtype=wp.vec3i)
    v = wp.Volume.allocate_by_tiles(pts, voxel_size=1.0, bg_value=4.5, point_mask=wp.array([0], dtype=wp.int32))
    assert v.get_tile_count() == 0 and v.get_voxel_count() == 0 and v.get_voxels().shape == (0, 3)
    back = wp.Volume.load_from_nvdb(io.BytesIO(Path(v.save_to_nvdb(tmp_path / "v.nvdb", "zip")).read_bytes()))
    ijk = box((2, 2, 2), pad=1)
    assert (run(lookup_f, len(ijk), back.id, wp.array(ijk, dtype=wp.vec3i)) == 4.5).all()
    vi = wp.Volume.allocate_by_voxels(pts, voxel_size=1.0, point_mask=wp.array([0], dtype=wp.int32))
    assert (run(lookup_index, len(ijk), vi.id, wp.array(ijk, dtype=wp.vec3i), out_dtype=int) == -1).all()



WARP_READER = '''
import json, sys
import numpy as np
import warp as wp
wp.config.quiet = True

@wp.kernel
def look(v: wp.uint64, ijk: wp.array(dtype=wp.vec3i), f: wp.array(dtype=float), g: wp.array(dtype=wp.vec3),
         i: wp.array(dtype=int), x: wp.array(dtype=int)):
    t = wp.tid()
    p = ijk[t]
    f[t] = wp.volume_lookup_f(v, p[0], p[1], p[2])
    g[t] = wp.volume_lookup_v(v, p[0], p[1], p[2])
    i[t] = wp.volume_lookup_i(v, p[0], p[1], p[2])
    x[t] = wp.volume_lookup_index(v, p[0], p[1], p[2])

ijk = np.array(json.loads(sys.argv[1]), np.int32)
out = {}
for path in sys.argv[2:]:
    v = wp.Volume.load_from_nvdb(open(path, "rb"), device="cpu")
    arrs = [wp.zeros(len(ijk), dtype=d, device="cpu") for d in (float, wp.vec3, int, int)]
    wp.launch(look, len(ijk), inputs=[v.id, wp.array(ijk, dtype=wp.vec3i, device="cpu"), *arrs], device="cpu")
    out[path] = [a.numpy().tolist() for a in arrs] + [v.get_voxel_count(), list(v.get_voxel_size())]
print(json.dumps(out))
'''


@pytest.mark.skipif(not os.environ.get("LOOMWORK_WARP_PYTHON"), reason="set LOOMWORK_WARP_PYTHON to a Python with "
                    "NVIDIA Warp 1.19 installed to check that Warp (NanoVDB's reader) loads the files written here")
def test_files_written_here_load_in_warp(tmp_path):
    """Warp 1.19 loads the files written here (both codecs) and reads the same voxels."""
    files = {"f": wp.Volume.load_from_numpy(A, min_world=(1, 2, 3), voxel_size=0.5, bg_value=-1.0),
             "v": wp.Volume.load_from_numpy(V3, bg_value=(1.0, 2.0, 3.0)),
             "i": wp.Volume.load_from_numpy(AI, bg_value=7),
             "x": wp.Volume.allocate_by_voxels(wp.array(PTS, dtype=wp.vec3i), voxel_size=1.0)}
    paths = {k: str(v.save_to_nvdb(tmp_path / f"{k}.nvdb", "zip" if k in "fx" else "none")) for k, v in files.items()}
    ijk = np.concatenate([box(A.shape, pad=2), PTS])
    script = tmp_path / "warp_reader.py"  # Warp reads its kernels' source from a file
    script.write_text(WARP_READER)
    proc = subprocess.run([os.environ["LOOMWORK_WARP_PYTHON"], str(script), json.dumps(ijk.tolist()),
                           *paths.values()], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    np.testing.assert_array_equal(got[paths["f"]][0], dense_oracle(A, -1.0, ijk))
    np.testing.assert_array_equal(got[paths["v"]][1], dense_oracle(V3, np.float32((1, 2, 3)), ijk))
    np.testing.assert_array_equal(got[paths["i"]][2], dense_oracle(AI, 7, ijk))
    idx = run(lookup_index, len(ijk), files["x"].id, wp.array(ijk, dtype=wp.vec3i), out_dtype=int)
    np.testing.assert_array_equal(got[paths["x"]][3], idx)
    assert got[paths["f"]][5] == [0.5, 0.5, 0.5] and got[paths["x"]][4] == len(np.unique(PTS, axis=0))


def test_index_sampling_checks_value_types():
    """volume_sample_index needs a background of the array's dtype, one a grid can hold."""
    v = wp.Volume.allocate_by_voxels(wp.array(PTS, dtype=wp.vec3i), voxel_size=1.0)

    @wp.kernel
    def mixed(vid: wp.uint64, data: wp.array(dtype=wp.float64), out: wp.array(dtype=float)):
        out[0] = float(wp.volume_sample_index(vid, wp.vec3(0.0), wp.Volume.LINEAR, data, wp.float32(0.0)))

    @wp.kernel
    def matrices(vid: wp.uint64, data: wp.array(dtype=wp.mat22), out: wp.array(dtype=wp.mat22)):
        out[0] = wp.volume_sample_index(vid, wp.vec3(0.0), wp.Volume.LINEAR, data, wp.mat22())

    with pytest.raises(TypeError, match="no overload of volume_sample_index"):
        wp.launch(mixed, 1, inputs=[v.id, wp.zeros(3, dtype=wp.float64), wp.zeros(1, dtype=float)])
    with pytest.raises(TypeError, match="no overload of volume_sample_index"):
        wp.launch(matrices, 1, inputs=[v.id, wp.zeros(3, dtype=wp.mat22), wp.zeros(1, dtype=wp.mat22)])


def test_bounding_boxes_cover_the_active_voxels():
    """The root's index bounding box and each leaf's (min corner and extent) are those of the active voxels."""
    v = wp.Volume.allocate_by_voxels(wp.array(PTS, dtype=wp.vec3i), voxel_size=1.0)
    raw = v.array().numpy()
    root = 672 + struct.unpack_from("<q", raw, 672 + 24)[0]
    lo, hi = np.array(struct.unpack_from("<3i", raw, root)), np.array(struct.unpack_from("<3i", raw, root + 12))
    np.testing.assert_array_equal(lo, PTS.min(0))
    np.testing.assert_array_equal(hi, PTS.max(0))
    leaves = 672 + struct.unpack_from("<q", raw, 672)[0]
    for n, origin in enumerate(v.get_tiles().numpy()):
        at = leaves + 96 * n
        inside = PTS[((PTS >> 3) << 3 == origin).all(1)]
        np.testing.assert_array_equal(struct.unpack_from("<3i", raw, at), inside.min(0))
        np.testing.assert_array_equal(np.frombuffer(raw[at + 12:at + 15], np.uint8), inside.max(0) - inside.min(0))


def test_rebuildable_volumes_replace_their_topology_in_place():
    """A volume allocated with capacity keeps its id and memory across `rebuild`: the new tiles hold the
    background fixed at allocation (a list mutated afterwards does not leak in), masked points are skipped,
    world-space points round to voxels, and a topology over capacity leaves the volume as it was with the
    capacity flags in `status`. Counts follow Warp: tile and voxel counts report the capacity."""
    status = wp.zeros(1, dtype=wp.uint32)
    bg = [1.0, 2.0, 3.0]
    vol = wp.Volume.allocate_by_tiles(wp.array([[0, 0, 0]], dtype=wp.int32), voxel_size=1.0, bg_value=bg,
                                      rebuildable=True, max_tiles=4, status=status)
    bg[0] = 10.0
    assert vol.is_rebuildable and vol.get_rebuild_info() == wp.Volume.RebuildInfo("tiles", 4 * 512, 4, 4, 4)
    assert status.numpy()[0] == wp.Volume.REBUILD_SUCCESS and vol.get_tile_count() == 4
    vid, grid = vol.id, vol.array().ptr
    points = wp.array([[8, 0, 0], [8, 1, 0], [0, 16, 0], [0, 0, 128], [128, 0, 0]], dtype=wp.int32)
    assert vol.rebuild(points, status=status, point_mask=wp.array([1, 0, 1, 0, 1], dtype=wp.int32)) is status
    assert status.numpy()[0] == wp.Volume.REBUILD_SUCCESS and (vol.id, vol.array().ptr) == (vid, grid)
    assert vol.get_active_stats() == wp.Volume.ActiveStats(3 * 512, 3, 2, 1)
    tiles = wp.full((4, 3), -999, dtype=wp.int32)
    vol.get_tiles(out=tiles)
    assert sorted(map(tuple, tiles.numpy()[:3])) == [(0, 16, 0), (8, 0, 0), (128, 0, 0)]
    assert (tiles.numpy()[3] == -999).all()
    ijk = wp.array([(9, 1, 2), (0, 17, 7), (0, 0, 0), (0, 0, 130)], dtype=wp.vec3i)
    out = wp.zeros(4, dtype=wp.vec3)
    wp.launch(lookup_v, 4, inputs=[vid, ijk, out])
    np.testing.assert_array_equal(out.numpy(), [[1.0, 2.0, 3.0]] * 4)  # the old tile at 0 is gone: background

    assert vol.rebuild(wp.array([[8 * k, 0, 0] for k in range(5)], dtype=wp.int32), status=status) is status
    assert status.numpy()[0] & wp.Volume.REBUILD_LEAF_CAPACITY_EXCEEDED
    assert vol.get_active_stats().leaf_node_count == 3  # unchanged

    index = wp.Volume.allocate_by_voxels(wp.array([[0, 0, 0]], dtype=wp.int32), voxel_size=(0.25, 0.5, 1.0),
                                         translation=(-1.0, 2.0, -3.0), max_active_voxels=2)
    assert index.get_rebuild_info() == wp.Volume.RebuildInfo("voxels", 2, 2, 2, 2)
    world = np.array([[1, 2, 3], [40, 5, 6]]) * (0.25, 0.5, 1.0) + (-1.0, 2.0, -3.0)
    index.rebuild(wp.array(world, dtype=wp.vec3))
    got = wp.zeros(3, dtype=int)
    wp.launch(lookup_index, 3, inputs=[index.id, wp.array([(1, 2, 3), (40, 5, 6), (0, 0, 0)], dtype=wp.vec3i), got])
    assert sorted(got.numpy()[:2]) == [0, 1] and got.numpy()[2] == -1
    index.rebuild(wp.array([[1, 2, 3], [4, 5, 6], [7, 8, 9]], dtype=wp.int32), status=status)
    assert status.numpy()[0] & wp.Volume.REBUILD_VOXEL_CAPACITY_EXCEEDED

    over = wp.Volume.allocate_by_voxels(wp.array([[1, 2, 3], [4, 5, 6]], dtype=wp.int32), voxel_size=1.0,
                                        max_active_voxels=1, status=status)  # too many at once: left empty
    assert status.numpy()[0] & wp.Volume.REBUILD_VOXEL_CAPACITY_EXCEEDED and over.get_active_stats().voxel_count == 0

    plain = wp.Volume.allocate_by_tiles(wp.array([[0, 0, 0]], dtype=wp.int32), voxel_size=1.0)
    assert not plain.is_rebuildable and plain.get_rebuild_info() == wp.Volume.RebuildInfo(None, 0, 0, 0, 0)
    with pytest.raises(wp.GeometryError, match="not rebuildable"):
        plain.rebuild(wp.array([[0, 0, 0]], dtype=wp.int32))
    with pytest.raises(wp.GeometryError, match="status must be a wp.array of uint32"):
        vol.rebuild(points, status=wp.zeros(1, dtype=wp.int32))
    with pytest.raises(ValueError, match="max_tiles must be positive"):
        wp.Volume.allocate_by_tiles(wp.array([[0, 0, 0]], dtype=wp.int32), voxel_size=1.0, max_tiles=0)
