"""wp.HashGrid: neighbour queries in kernels against brute force, built as an extension of the kernel layer."""

import numpy as np
import pytest

import loomwork as wp


@wp.kernel
def count_neighbors(grid: wp.uint64, radius: float, points: wp.array(dtype=wp.vec3), counts: wp.array(dtype=int),
                    visited: wp.array(dtype=int)):
    tid = wp.tid()
    i = wp.hash_grid_point_id(grid, tid)
    p = points[i]
    count = 0
    seen = 0
    index = 0
    query = wp.hash_grid_query(grid, p, radius)
    while wp.hash_grid_query_next(query, index):
        seen += 1
        if wp.length(p - points[index]) <= radius:
            count += 1
    counts[i] = count
    visited[i] = seen


@wp.kernel
def point_ids(grid: wp.uint64, ids: wp.array(dtype=int)):
    tid = wp.tid()
    ids[tid] = wp.hash_grid_point_id(grid, tid)


def brute_force(points: np.ndarray, radius: float) -> np.ndarray:
    d = np.linalg.norm(points[:, None, :] - points[None, :, :], axis=-1)
    return (d <= radius).sum(axis=1)


@pytest.mark.parametrize("dims", [(16, 16, 16), (3, 5, 2)])
def test_neighbour_counts_match_brute_force(dims):
    """Counts of points within the radius agree with NumPy, also when cells wrap around a small grid."""
    rng = np.random.default_rng(3)
    pts = (rng.random((700, 3)) * 4.0 - 1.0).astype(np.float32)
    radius = 0.3
    grid = wp.HashGrid(*dims)
    points = wp.array(pts, dtype=wp.vec3)
    grid.build(points, radius)
    counts = wp.zeros(len(pts), dtype=int)
    visited = wp.zeros(len(pts), dtype=int)
    wp.launch(count_neighbors, dim=len(pts), inputs=[grid.id, radius, points, counts, visited])
    np.testing.assert_array_equal(counts.numpy(), brute_force(pts, radius))
    assert (visited.numpy() >= counts.numpy()).all()
    assert visited.numpy().mean() < len(pts) / 4 or dims == (3, 5, 2)  # the grid prunes candidates


def test_point_ids_are_a_permutation_in_cell_order():
    """hash_grid_point_id maps thread indices onto every point once; the grid object itself passes as its id."""
    pts = np.random.default_rng(0).random((257, 3)).astype(np.float32)
    grid = wp.HashGrid(8, 8, 8)
    grid.build(wp.array(pts, dtype=wp.vec3), 0.125)
    ids = wp.zeros(len(pts), dtype=int)
    wp.launch(point_ids, dim=len(pts), inputs=[grid, ids])
    assert sorted(ids.numpy().tolist()) == list(range(len(pts)))


def test_empty_grid_and_rebuild():
    """An unbuilt grid answers no candidates; a rebuild after moving the points sees the new positions."""
    grid = wp.HashGrid(4, 4, 4)
    pts = np.zeros((2, 3), dtype=np.float32)
    pts[1] = (5.0, 0.0, 0.0)
    points = wp.array(pts, dtype=wp.vec3)
    grid.build(points, 1.0)
    counts, visited = wp.zeros(2, dtype=int), wp.zeros(2, dtype=int)
    wp.launch(count_neighbors, dim=2, inputs=[grid.id, 1.0, points, counts, visited])
    assert counts.numpy().tolist() == [1, 1]
    points.numpy()[1] = (0.5, 0.0, 0.0)
    grid.build(points, 1.0)
    wp.launch(count_neighbors, dim=2, inputs=[grid.id, 1.0, points, counts, visited])
    assert counts.numpy().tolist() == [2, 2]


def test_bad_grids_are_clear_errors():
    """Bad dimensions, radii, point arrays and devices raise exceptions that say what is wrong."""
    with pytest.raises(RuntimeError, match="dimensions"):  # RuntimeError, as in Warp
        wp.HashGrid(0, 4, 4)
    grid = wp.HashGrid(4, 4, 4)
    with pytest.raises(ValueError, match="radius"):
        grid.build(wp.zeros(3, dtype=wp.vec3), 0.0)
    with pytest.raises(TypeError, match="vec3f"):
        grid.build(wp.zeros(3, dtype=float), 1.0)
    with pytest.raises(TypeError, match="must have type vec3d"):
        wp.HashGrid(4, 4, 4, dtype=wp.float64).build(wp.zeros(3, dtype=wp.vec3), 1.0)
    with pytest.raises(TypeError, match="dtype must be float16, float32 or float64"):
        wp.HashGrid(4, 4, 4, dtype=wp.int32)
    with pytest.raises(TypeError, match="integers"):
        wp.HashGrid(4.5, 4, 4)
    with pytest.raises(RuntimeError, match="cell count exceeds"):
        wp.HashGrid(2048, 2048, 1024)
    with pytest.raises(ValueError, match="same length"):
        grid.build(wp.zeros(3, dtype=wp.vec3), 1.0, groups=wp.zeros(2, dtype=wp.int32))
    with pytest.raises(TypeError, match="HashGridQuery"):
        wp.HashGridQuery[wp.int32]
    with pytest.raises(wp.DeviceError):
        wp.HashGrid(4, 4, 4, device="cuda")


def test_output_arguments_must_be_variables():
    """An out parameter given a value, or an in-out one not defined yet, is a clear error at the call."""

    def k_value(grid: wp.uint64):
        q = wp.hash_grid_query(grid, wp.vec3(0.0), 1.0)
        wp.hash_grid_query_next(q, 3)

    def k_undefined(grid: wp.uint64):
        i = 0
        wp.hash_grid_query_next(q, i)  # noqa: F821 - the error under test

    with pytest.raises(TypeError, match="is an output: pass a variable"):
        wp.launch(wp.kernel(k_value, module="unique"), dim=1, inputs=[0])
    with pytest.raises(NameError, match="must be a variable defined before the call"):
        wp.launch(wp.kernel(k_undefined, module="unique"), dim=1, inputs=[0])


@wp.func
def nearest(query: wp.HashGridQuery[wp.float64], p: wp.vec3d, points: wp.array(dtype=wp.vec3d), r: wp.float64):
    best = -1
    best_d = r
    for j in query:
        d = wp.length(points[j] - p)
        if d <= best_d:
            best_d = d
            best = j
    return best


@wp.kernel
def neighbours_f64(grid: wp.uint64, r: wp.float64, points: wp.array(dtype=wp.vec3d), group: int,
                   counts: wp.array(dtype=int), grouped: wp.array(dtype=int), nearest_other: wp.array(dtype=int)):
    i = wp.tid()
    p = points[i]
    for j in wp.hash_grid_query(grid, p, r):
        if wp.length(points[j] - p) <= r:
            counts[i] += 1
    for j in wp.hash_grid_query(grid, p, r, group):
        if wp.length(points[j] - p) <= r:
            grouped[i] += 1
    nearest_other[i] = nearest(wp.hash_grid_query(grid, p + wp.vec3d(0.01, 0.0, 0.0), r), p, points, r)


@wp.kernel
def neighbours_f16(grid: wp.uint64, r: wp.float16, points: wp.array(dtype=wp.vec3h), counts: wp.array(dtype=int)):
    i = wp.tid()
    for j in wp.hash_grid_query(grid, points[i], r):
        if wp.length(wp.vec3(points[j]) - wp.vec3(points[i])) <= float(r):
            counts[i] += 1


def test_precisions_groups_and_for_loops():
    """float64 and float16 grids; `for j in query` loops (also over a query passed to a function annotated
    wp.HashGridQuery[dtype]); grouped queries visit only their group."""
    rng = np.random.default_rng(5)
    pts = rng.random((300, 3)) * 3.0 - 1.5
    groups = rng.integers(-3, 3, 300).astype(np.int32)
    r = 0.35
    points = wp.array(pts, dtype=wp.vec3d)
    grid = wp.HashGrid(7, 5, 3, dtype=wp.float64)
    grid.build(points, r, groups=wp.array(groups))
    outs = [wp.zeros(300, dtype=int) for _ in range(3)]
    wp.launch(neighbours_f64, 300, inputs=[grid.id, r, points, 2, *outs])
    d = np.linalg.norm(pts[:, None] - pts[None], axis=-1)
    np.testing.assert_array_equal(outs[0].numpy(), (d <= r).sum(1))
    np.testing.assert_array_equal(outs[1].numpy(), ((d <= r) & (groups[None] == 2)).sum(1))
    np.testing.assert_array_equal(outs[2].numpy(), np.arange(300))  # each point is nearest to itself
    grid.build(points, r)  # without groups a grouped query visits everything
    outs[1].zero_()
    wp.launch(neighbours_f64, 300, inputs=[grid.id, r, points, 2, *outs])
    np.testing.assert_array_equal(outs[1].numpy(), (d <= r).sum(1))

    half = pts.astype(np.float16)
    hpoints = wp.array(half, dtype=wp.vec3h)
    hgrid = wp.HashGrid(8, 8, 8, dtype=wp.float16)
    hgrid.build(hpoints, 0.5)
    counts = wp.zeros(300, dtype=int)
    wp.launch(neighbours_f16, 300, inputs=[hgrid.id, 0.5, hpoints, counts])
    dh = np.linalg.norm(half.astype(np.float32)[:, None] - half.astype(np.float32)[None], axis=-1)
    np.testing.assert_array_equal(counts.numpy(), (dh <= np.float32(np.float16(0.5))).sum(1))


@pytest.mark.parametrize("coord", [-0.3, 2.0**21 + 0.25, -(2.0**21), 1e20, -1e20, np.inf, -np.inf, np.nan])
def test_far_negative_and_nonfinite_coordinates(coord):
    """Points far outside the grid's span, at negative coordinates, at infinity or NaN land in the cell the
    queries look in (cells clamp to the int32 range, NaN to cell 0), each found exactly once."""
    pts = np.array([[coord, 0.0, 0.0], [coord, 0.0, 0.0], [0.7, 0.7, 0.7]], dtype=np.float32)
    points = wp.array(pts, dtype=wp.vec3)
    for dims in ((1, 1, 1), (3, 5, 7)):
        grid = wp.HashGrid(*dims)
        grid.build(points, 1.0)
        counts, visited = wp.zeros(3, dtype=int), wp.zeros(3, dtype=int)
        wp.launch(count_neighbors, dim=3, inputs=[grid.id, 1.0, points, counts, visited])
        finite = np.isfinite(coord)
        assert counts.numpy()[0] == (2 if finite else 0) and counts.numpy()[2] == 1, (dims, counts.numpy())
        if dims == (1, 1, 1):  # one bucket: every candidate is visited once, never twice
            assert visited.numpy()[2] == 3


def expected_candidates(pts: np.ndarray, radius: float, dims: tuple) -> np.ndarray:
    """How many points lie in the buckets a query around each point covers (each bucket once)."""
    cell = lambda x: np.floor(x / np.float32(radius)).astype(np.int64)  # noqa: E731
    buckets = cell(pts) % dims
    out = []
    for p in pts:
        lo, hi = cell(p - np.float32(radius)), cell(p + np.float32(radius))
        inside = np.ones(len(pts), bool)
        for a in range(3):
            covered = {int(c) % dims[a] for c in range(lo[a], lo[a] + min(hi[a] - lo[a] + 1, dims[a]))}
            inside &= np.isin(buckets[:, a], sorted(covered))
        out.append(int(inside.sum()))
    return np.array(out)


@pytest.mark.parametrize("dims", [(32, 4, 4), (5, 3, 3)])
def test_rows_of_cells_are_scanned_as_ranges_after_rebuilds_with_fewer_points(dims):
    """A query reads each row of cells as one range of sorted positions (empty buckets hold empty ranges in
    place, wrapping rows split in two): counts are exact and every candidate is visited exactly once, also
    after rebuilding with fewer points (no bucket keeps a range from the bigger build) and with none."""
    rng = np.random.default_rng(11)
    grid = wp.HashGrid(*dims)
    radius = 0.25
    for n in (900, 40, 0, 300):
        pts = (rng.random((max(n, 1), 3)) * 3.0 - 1.5).astype(np.float32)[:n]
        points = wp.array(pts, dtype=wp.vec3)
        grid.build(points, radius)
        if not n:
            continue
        counts, visited = wp.zeros(n, dtype=int), wp.zeros(n, dtype=int)
        wp.launch(count_neighbors, dim=n, inputs=[grid.id, radius, points, counts, visited])
        np.testing.assert_array_equal(counts.numpy(), brute_force(pts, radius))
        np.testing.assert_array_equal(visited.numpy(), expected_candidates(pts, radius, dims))


@wp.kernel
def _count_in_group(grid: wp.uint64, radius: float, points: wp.array(dtype=wp.vec3), groups: wp.array(dtype=int),
                    counts: wp.array(dtype=int)):
    tid = wp.tid()
    p = points[tid]
    c = 0
    for index in wp.hash_grid_query(grid, p, radius, groups[tid]):
        if wp.length(points[index] - p) <= radius:
            c += 1
    counts[tid] = c


def test_a_captured_build_sorts_the_current_points_on_every_replay():
    """A build inside a graph capture is replayed whole, its sorts included (they ran at capture time before,
    on keys not computed yet): replays see points and groups assigned in between, and a grid with no room
    yet grows on the first replay; an explicit reserve inside a capture is refused, as in Warp."""
    near = np.array([[0.0, 0, 0], [0.1, 0, 0], [0.0, 0, 0], [0.1, 0, 0]], np.float32)
    apart = np.array([[0.0, 0, 0], [2.0, 0, 0], [4.0, 0, 0], [6.0, 0, 0]], np.float32)
    points = wp.array(near.reshape(2, 2, 3), dtype=wp.vec3)
    groups = wp.array(np.array([[0, 0], [1, 1]], np.int32), dtype=int)
    counts = wp.zeros(4, dtype=int)
    grid = wp.HashGrid(16, 16, 16)
    grid.reserve(4, with_groups=True)
    wp.load_module(device="cpu")
    with wp.ScopedCapture(device="cpu") as capture:
        grid.build(points, 0.25, groups=groups)
        wp.launch(_count_in_group, dim=4, inputs=[wp.uint64(grid.id), 0.25, points.flatten(), groups.flatten(),
                                                  counts])
        with pytest.raises(NotImplementedError, match="reserve before capture"):
            grid.reserve(64)
    wp.capture_launch(capture.graph)
    np.testing.assert_array_equal(counts.numpy(), [2, 2, 2, 2])
    points.assign(apart.reshape(2, 2, 3))
    groups.assign(np.full((2, 2), 3, np.int32))
    wp.capture_launch(capture.graph)
    np.testing.assert_array_equal(counts.numpy(), [1, 1, 1, 1])
    points.assign(near.reshape(2, 2, 3))
    groups.assign(np.array([[5, 2], [5, 2]], np.int32))  # keys of more bits than at capture time
    wp.capture_launch(capture.graph)
    np.testing.assert_array_equal(counts.numpy(), [2, 2, 2, 2])

    fresh = wp.HashGrid(16, 16, 16)  # never reserved: the first replay makes room, as Warp's does
    with wp.ScopedCapture(device="cpu") as capture:
        fresh.build(points, 0.25, groups=groups)
        wp.launch(_count_in_group, dim=4, inputs=[wp.uint64(fresh.id), 0.25, points.flatten(), groups.flatten(),
                                                  counts])
    counts.zero_()
    wp.capture_launch(capture.graph)
    np.testing.assert_array_equal(counts.numpy(), [2, 2, 2, 2])
