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
    with pytest.raises(ValueError, match="dimensions"):
        wp.HashGrid(0, 4, 4)
    grid = wp.HashGrid(4, 4, 4)
    with pytest.raises(ValueError, match="radius"):
        grid.build(wp.zeros(3, dtype=wp.vec3), 0.0)
    with pytest.raises(TypeError, match="wp.vec3"):
        grid.build(wp.zeros(3, dtype=float), 1.0)
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
