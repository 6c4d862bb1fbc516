"""Blocks whose lanes run together on the CPU (wp.config.enable_cpu_blocks, native/lanes.h): wp.tid() and
wp.block_dim() as on a GPU, wp.tile() gathering the lanes' values, per-lane reads and writes around block-wide
tile operations, partial blocks, per-lane random streams and the adjoints of all of it. The expected values
were checked against Warp 1.19 on the CPU with enable_cpu_blocks (the random draws are Warp's)."""

import platform
from typing import Any

import numpy as np
import pytest

import loomwork as wp
from loomwork.kernels.errors import KernelRuntimeError

pytestmark = pytest.mark.skipif(platform.machine().lower() not in ("x86_64", "amd64") or platform.system() != "Linux",
                                reason="CPU blocks run their lanes together on x86-64 Linux only")

B = wp.constant(8)
B2 = wp.constant(16)


@pytest.fixture
def cpu_blocks():
    saved = wp.config.enable_cpu_blocks
    wp.config.enable_cpu_blocks = True
    yield
    wp.config.enable_cpu_blocks = saved


@wp.kernel
def gather(x: wp.array[float], own: wp.array[float], total: wp.array[float], dims: wp.array[int]):
    i = wp.tid()
    t = wp.tile(x[i] * 2.0)
    s = wp.tile_sum(t)
    own[i] = wp.untile(t)
    total[i] = s[0]
    dims[i] = wp.block_dim()


def test_tile_gathers_each_lanes_value_and_untile_gives_it_back(cpu_blocks):
    x = wp.array(np.arange(2 * B, dtype=np.float32) + 1.0)
    own, total, dims = wp.zeros(2 * B, dtype=float), wp.zeros(2 * B, dtype=float), wp.zeros(2 * B, dtype=int)
    wp.launch(gather, dim=2 * B, inputs=[x, own, total, dims], block_dim=B)
    xs = x.numpy() * 2.0
    np.testing.assert_array_equal(own.numpy(), xs)
    np.testing.assert_array_equal(total.numpy(), np.repeat(xs.reshape(2, B).sum(axis=1), B))
    np.testing.assert_array_equal(dims.numpy(), np.full(2 * B, B))


def test_without_cpu_blocks_a_block_has_one_lane():
    assert not wp.config.enable_cpu_blocks
    x = wp.array(np.arange(4, dtype=np.float32))
    own, total, dims = wp.zeros(4, dtype=float), wp.zeros(4, dtype=float), wp.zeros(4, dtype=int)
    wp.launch(gather, dim=4, inputs=[x, own, total, dims], block_dim=B)
    np.testing.assert_array_equal(total.numpy(), x.numpy() * 2.0)  # each thread its own block
    np.testing.assert_array_equal(dims.numpy(), np.ones(4))


@wp.kernel
def lanes2d(out: wp.array2d[float], lanes_out: wp.array2d[int], first: wp.array[int]):
    i, lane = wp.tid()
    v = wp.vec3(float(lane), float(i), 1.0)
    t = wp.tile(v)  # shape (3, B): lane `lane`'s vector down column `lane`
    wp.tile_store(out[i], wp.tile_sum(t, axis=1))
    lanes_out[i, lane] = lane
    first[i * B + lane] = wp.tid()  # one index: the first coordinate, the block's


def test_launch_tiled_gives_each_lane_its_index_and_tiles_of_vectors(cpu_blocks):
    out, lanes_out, first = wp.zeros((3, 3), dtype=float), wp.zeros((3, B), dtype=int), wp.zeros(3 * B, dtype=int)
    wp.launch_tiled(lanes2d, dim=[3], inputs=[out, lanes_out, first], block_dim=B)
    lane_sum = float(sum(range(B)))
    np.testing.assert_array_equal(out.numpy(), [[lane_sum, B * i, B] for i in range(3)])
    np.testing.assert_array_equal(lanes_out.numpy(), np.tile(np.arange(B), (3, 1)))
    np.testing.assert_array_equal(first.numpy(), np.repeat(np.arange(3), B))


@wp.kernel
def from_thread(out: wp.array[float]):
    i = wp.tid()
    b = wp.tile_from_thread(shape=(4,), value=float(i) * 3.0, thread_idx=5)
    out[i] = wp.tile_sum(b)[0]


def test_tile_from_thread_broadcasts_one_lanes_value(cpu_blocks):
    out = wp.zeros(2 * B, dtype=float)
    wp.launch(from_thread, dim=2 * B, inputs=[out], block_dim=B)
    np.testing.assert_array_equal(out.numpy(), np.repeat([4 * 5 * 3.0, 4 * (B + 5) * 3.0], B))


@wp.kernel
def partial(a: wp.array2d[float], sums: wp.array[float], scans: wp.array2d[float], mx: wp.array[float]):
    blk = wp.tid() // B
    t = wp.tile_load(a[blk], shape=(B2,))
    s = wp.tile_sum(t)
    wp.tile_store(scans[blk], wp.tile_scan_inclusive(t))
    m = wp.tile_max(t)
    if wp.tid() % B == 0:
        sums[blk] = s[0]
        mx[blk] = m[0]


def test_a_partial_block_reduces_and_scans_only_its_lanes_elements(cpu_blocks):
    """Launch B + 3 threads: the second block has 3 lanes, which hold elements 0-2 and B..B+2 of its tile."""
    rows = np.stack([np.full(2 * B, 100.0), np.arange(2 * B) + 1.0]).astype(np.float32)
    a = wp.array(rows)
    sums, scans, mx = wp.zeros(2, dtype=float), wp.zeros((2, 2 * B), dtype=float), wp.zeros(2, dtype=float)
    wp.launch(partial, dim=B + 3, inputs=[a, sums, scans, mx], block_dim=B)
    held = (np.arange(2 * B) % B) < 3
    np.testing.assert_array_equal(sums.numpy(), [100.0 * 2 * B, rows[1][held].sum()])
    np.testing.assert_array_equal(mx.numpy(), [100.0, rows[1][held].max()])
    np.testing.assert_array_equal(scans.numpy()[1][held], np.cumsum(rows[1][held]))


@wp.func
def times(a: float, b: float):
    return a * b


@wp.kernel
def empty_slices(a: wp.array2d[float], prod: wp.array[float], lo: wp.array[float], custom: wp.array[float]):
    t = wp.tile_load(a, shape=(4, 2))
    wp.tile_store(prod, wp.tile_reduce(wp.mul, t, axis=1))
    wp.tile_store(lo, wp.tile_reduce(wp.min, t, axis=1))
    wp.tile_store(custom, wp.tile_reduce(times, t, axis=1))


def test_an_empty_slice_of_a_partial_block_gives_the_identity_or_an_error(cpu_blocks):
    """Two lanes of four hold elements 0, 1, 4, 5 (rows 0 and 2 of a 4x2 tile): rows 1 and 3 are empty. A
    builtin operator gives its identity there; a user's function has none, and the launch raises."""
    a = wp.array(np.full((4, 2), 2.0, dtype=np.float32))
    prod, lo, custom = wp.zeros(4, dtype=float), wp.zeros(4, dtype=float), wp.zeros(4, dtype=float)
    with pytest.raises(KernelRuntimeError, match="no declared identity"):
        wp.launch(empty_slices, dim=2, inputs=[a, prod, lo, custom], block_dim=4)
    np.testing.assert_array_equal(prod.numpy(), [4.0, 1.0, 4.0, 1.0])
    np.testing.assert_array_equal(lo.numpy(), [2.0, np.inf, 2.0, np.inf])


@wp.kernel
def rand(seed: int, x: wp.array2d[int], y: wp.array2d[float]):
    i = wp.tid()
    rng = wp.rand_init(seed, i)
    wp.tile_store(x, wp.tile_randi(shape=(2, 6), rng=rng), offset=(i * 2, 0))
    wp.tile_store(y, wp.tile_randf(shape=(2, 6), rng=rng, min=-1.0, max=1.0), offset=(i * 2, 0))


def test_random_tiles_draw_a_stream_per_lane(cpu_blocks):
    x, y = wp.zeros((4, 6), dtype=int), wp.zeros((4, 6), dtype=float)
    wp.launch_tiled(rand, dim=[2], inputs=[7, x, y], block_dim=4)
    warp = [[1939624728, 1899309475, -1491179144, -4490581, -1481845, 1994933631],
            [1248427647, 302937105, 978789544, -1631219672, -1854846882, 113660691],
            [-2113510971, -617918070, 1642580171, 2093523619, 859588398, -788405735],
            [-1271610748, -1022214184, 2046381940, 1467121081, 489700937, 352194272]]
    np.testing.assert_array_equal(x.numpy(), warp)
    np.testing.assert_allclose(y.numpy()[0, :4], [-0.09679186, -0.11556518, 0.30561554, 0.99790883], rtol=1e-6)


@wp.kernel
def lane_writes(out: wp.array[wp.vec3]):
    i = wp.tid()
    t = wp.tile_zeros(shape=(B,), dtype=wp.vec3)
    t[i][1] = 5.0 + float(i)
    wp.tile_store(out, t)


def test_each_lane_writes_its_element_before_the_store(cpu_blocks):
    out = wp.zeros(B, dtype=wp.vec3)
    wp.launch(lane_writes, dim=B, inputs=[out], block_dim=B)
    expected = np.zeros((B, 3), dtype=np.float32)
    expected[:, 1] = 5.0 + np.arange(B)
    np.testing.assert_array_equal(out.numpy(), expected)


@wp.kernel
def loop(x: wp.array[float], out: wp.array[float]):
    i = wp.tid()
    v = x[i]
    for _k in range(3):
        s = wp.tile_sum(wp.tile(v))
        if i % 2 == 0:
            v = v + s[0] * 0.5
        else:
            v = v - 1.0
    out[i] = v


def test_lane_code_branches_between_block_operations(cpu_blocks):
    out = wp.zeros(B, dtype=float)
    wp.launch(loop, dim=B, inputs=[wp.array(np.arange(B, dtype=np.float32)), out], block_dim=B)
    v = np.arange(B, dtype=np.float64)
    for _ in range(3):
        s = v.sum()
        v = np.where(np.arange(B) % 2 == 0, v + s * 0.5, v - 1.0)
    np.testing.assert_array_equal(out.numpy(), v)


@wp.kernel
def grad_gather(x: wp.array[float], y: wp.array[float]):
    i = wp.tid()
    v = x[i]
    t = wp.tile(v * v)
    s = wp.tile_sum(t)
    y[i] = wp.untile(t) * s[0] + v


@wp.kernel
def grad_partial(a: wp.array2d[float], out: wp.array[float]):
    blk = wp.tid() // B
    t = wp.tile_load(a[blk], shape=(B2,))
    wp.tile_store(out, wp.tile_sum(t * t), offset=(blk,))


def test_adjoints_follow_the_lanes(cpu_blocks):
    """y_i = x_i^2 S + x_i with S the sum of x^2 over i's block: dy/dx_j = 2 x_j (S [i == j] + x_i^2) + [i == j];
    a partial block's loads get gradients only where its lanes are."""
    x = wp.array(np.arange(2 * B, dtype=np.float32) * 0.25 + 0.5, requires_grad=True)
    y = wp.zeros(2 * B, dtype=float, requires_grad=True)
    with wp.Tape() as tape:
        wp.launch(grad_gather, dim=2 * B, inputs=[x, y], block_dim=B)
    w = np.linspace(1.0, 2.0, 2 * B, dtype=np.float32)
    y.grad = wp.array(w)
    tape.backward()
    xs, ws = x.numpy().reshape(2, B).astype(np.float64), w.reshape(2, B)
    s = (xs * xs).sum(axis=1, keepdims=True)
    expected = ws * (2 * xs * s + 1.0) + 2 * xs * (ws * xs * xs).sum(axis=1, keepdims=True)
    np.testing.assert_allclose(x.grad.numpy(), expected.ravel(), rtol=1e-5)

    a = wp.array(np.arange(32, dtype=np.float32).reshape(2, 16) * 0.1, requires_grad=True)
    out = wp.zeros(2, dtype=float, requires_grad=True)
    with wp.Tape() as tape:
        wp.launch(grad_partial, dim=B + 3, inputs=[a, out], block_dim=B)
    out.grad = wp.array(np.array([1.0, 2.0], dtype=np.float32))
    tape.backward()
    held = (np.arange(2 * B) % B) < 3
    expected = 2 * a.numpy() * np.array([[1.0], [2.0]]) * np.stack([np.ones(2 * B), held])
    np.testing.assert_allclose(a.grad.numpy(), expected, rtol=1e-6)


@wp.kernel
def scale_rows(a: wp.array2d[float], out: wp.array2d[float]):
    i = wp.tid()
    t = wp.tile_load(a[i], shape=(B,))
    wp.tile_store(out[i], t * wp.tile_sum(t)[0])


def test_a_kernel_alike_in_every_lane_keeps_one_lane_a_block(cpu_blocks):
    """Tile code with nothing lane-dependent (the GEMM's shape) gives the same with one lane a block, so a tiled
    launch keeps that path; a kernel that reads a lane's value, or unpacks the lane index, does not."""
    cpu = wp.get_device("cpu")
    assert scale_rows.module.load(cpu).kernel(scale_rows.key).lane_free
    assert not gather.module.load(cpu).kernel(gather.key).lane_free
    a = wp.array(np.arange(3 * B, dtype=np.float32).reshape(3, B))
    out = wp.zeros((3, B), dtype=float)
    wp.launch_tiled(scale_rows, dim=[3], inputs=[a, out], block_dim=B)
    np.testing.assert_array_equal(out.numpy(), a.numpy() * a.numpy().sum(axis=1, keepdims=True))


@wp.kernel
def rewrites_what_its_block_loads(x: wp.array[float], buf: wp.array[float], y: wp.array[float]):
    i = wp.tid()
    v = x[i]
    for _k in range(3):
        buf[i] = v * v
        s = wp.tile_sum(wp.tile_load(buf, shape=B, offset=(i // B) * B))
        v = v + s[0] * 0.1 * v
    y[i] = v


def test_a_tile_load_of_an_array_the_lanes_rewrite_in_a_loop_is_refused_under_a_tape(cpu_blocks):
    """Each lane overwrites its element of an array a block load then reads, in a loop: the adjoint cannot
    replay those reads, so a Tape refuses the launch (it gave wrong gradients silently)."""
    x = wp.array(np.linspace(0.3, 0.9, 2 * B).astype(np.float32), requires_grad=True)
    buf, y = wp.zeros(2 * B, requires_grad=True), wp.zeros(2 * B, requires_grad=True)
    with pytest.raises(wp.OverwriteError, match="reads array 'buf'"), wp.Tape():
        wp.launch(rewrites_what_its_block_loads, dim=2 * B, inputs=[x, buf, y], block_dim=B)


@wp.func
def gathered_sum(x: float) -> float:
    return wp.tile_sum(wp.tile(x))[0]  # a fill in a function whose result is a lane's own value


@wp.func
def lanes_tile(x: float):
    return wp.tile(x)


@wp.func
def second_lanes(x: float):
    return wp.tile_from_thread(shape=(3,), value=x, thread_idx=1)


@wp.func
def random_ints(rng: wp.uint32):
    return wp.tile_randi(shape=(2, 6), rng=rng)


@wp.func
def random_floats(rng: wp.uint32):
    return wp.tile_randf(shape=(2, 6), rng=rng, min=-1.0, max=1.0)


@wp.kernel
def fills_in_functions(x: wp.array[float], sums: wp.array[float], own: wp.array[float], bcast: wp.array[float],
                       ri: wp.array2d[int], rf: wp.array2d[float]):
    i = wp.tid()
    sums[i] = gathered_sum(x[i])
    rng = wp.rand_init(7, i // 4)  # as the kernel `rand` seeds each block
    own[i] = wp.untile(lanes_tile(x[i]))
    wp.tile_store(bcast, second_lanes(x[i]), offset=(i // 4) * 3)
    wp.tile_store(ri, random_ints(rng), offset=((i // 4) * 2, 0))
    wp.tile_store(rf, random_floats(rng), offset=((i // 4) * 2, 0))


def test_fills_in_functions_gather_every_lane(cpu_blocks):
    """wp.tile, tile_from_thread and tile_randi/f in a @wp.func give what they give in the kernel (the random
    draws as the kernel `rand` above); a partial block (six threads in blocks of four) gathers only its lanes."""
    x = wp.array(np.arange(6, dtype=np.float32) + 1.0)
    sums, own, bcast = wp.zeros(6, dtype=float), wp.zeros(6, dtype=float), wp.zeros(6, dtype=float)
    ri, rf = wp.zeros((4, 6), dtype=int), wp.zeros((4, 6), dtype=float)
    wp.launch(fills_in_functions, dim=6, inputs=[x, sums, own, bcast, ri, rf], block_dim=4)
    np.testing.assert_array_equal(sums.numpy(), [10.0] * 4 + [11.0] * 2)
    np.testing.assert_array_equal(own.numpy(), x.numpy())
    np.testing.assert_array_equal(bcast.numpy(), [2.0] * 3 + [6.0] * 3)
    x2, y2 = wp.zeros((4, 6), dtype=int), wp.zeros((4, 6), dtype=float)
    wp.launch_tiled(rand, dim=[2], inputs=[7, x2, y2], block_dim=4)
    np.testing.assert_array_equal(ri.numpy()[:2], x2.numpy()[:2])
    np.testing.assert_array_equal(rf.numpy()[:2], y2.numpy()[:2])


@wp.func
def scaled(x: float, t: Any):
    return t * wp.tile_sum(wp.tile(x * x))[0]


@wp.kernel
def scaled_in_function(x: wp.array[float], w: wp.array[float], out: wp.array[float]):
    i = wp.tid()
    wp.tile_store(out, scaled(x[i], wp.tile_load(w, shape=B)))


def test_adjoints_of_fills_in_functions(cpu_blocks):
    """Through a function that fills a tile: each lane's value gets its element's adjoint, and a tile argument
    gets the adjoint once (every lane runs the function; the leader's is kept)."""
    xn, wn, gn = np.arange(1, B + 1, dtype=np.float32), np.linspace(0.5, 2.0, B, dtype=np.float32), \
        np.arange(B, dtype=np.float32) + 1.0
    x, w = wp.array(xn, requires_grad=True), wp.array(wn, requires_grad=True)
    out = wp.zeros(B, dtype=float, requires_grad=True)
    with wp.Tape() as tape:
        wp.launch(scaled_in_function, dim=B, inputs=[x, w, out], block_dim=B)
    tape.backward(grads={out: wp.array(gn)})
    s = float(np.sum(xn * xn))
    np.testing.assert_allclose(out.numpy(), wn * s, rtol=1e-6)
    np.testing.assert_allclose(w.grad.numpy(), gn * s, rtol=1e-6)
    np.testing.assert_allclose(x.grad.numpy(), 2.0 * xn * np.sum(wn * gn), rtol=1e-6)
