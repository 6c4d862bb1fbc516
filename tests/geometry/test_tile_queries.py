"""Block tree queries: tile_bvh_query_aabb/_ray and tile_mesh_query_aabb stepped by their _next builtins while
tile_query_valid holds report every overlap once (one result a step on the CPU's single lane)."""

import platform

import numpy as np
import pytest

import loomwork as wp


@wp.kernel
def k_bvh(bvh_id: wp.uint64, lo: wp.vec3, hi: wp.vec3, hits: wp.array(dtype=wp.int32),
          rays: wp.array(dtype=wp.int32), steps: wp.array(dtype=wp.int32)):
    query = wp.tile_bvh_query_aabb(bvh_id, lo, hi)
    while wp.tile_query_valid(query):
        bound = wp.untile(wp.tile_bvh_query_next(query))
        steps[0] += 1
        if bound >= 0:
            hits[bound] += 1
    r = wp.tile_bvh_query_ray(bvh_id, wp.vec3(-1.0, 0.5, 0.5), wp.vec3(1.0, 0.0, 0.0))
    while wp.tile_query_valid(r):
        b = wp.tile_bvh_query_next(r)[0]
        if b >= 0:
            rays[b] += 1


@wp.kernel
def k_mesh(mesh_id: wp.uint64, lo: wp.vec3, hi: wp.vec3, counts: wp.array(dtype=wp.int32)):
    query = wp.tile_mesh_query_aabb(mesh_id, lo, hi)
    while wp.tile_query_valid(query):
        face = wp.untile(wp.tile_mesh_query_aabb_next(query))
        if face >= 0:
            wp.atomic_add(counts, face, 1)


def test_tile_bvh_queries_report_each_overlap_once():
    """Box and ray block queries visit each overlapping box once, then one step that finds none ends them."""
    lowers = wp.array(np.array([[0, 0, 0], [2, 0, 0], [4, 0, 0]], np.float32), dtype=wp.vec3)
    uppers = wp.array(np.array([[1, 1, 1], [3, 1, 1], [5, 1, 1]], np.float32), dtype=wp.vec3)
    bvh = wp.Bvh(lowers=lowers, uppers=uppers)
    hits, rays, steps = wp.zeros(3, dtype=wp.int32), wp.zeros(3, dtype=wp.int32), wp.zeros(1, dtype=wp.int32)
    wp.launch_tiled(k_bvh, dim=1, inputs=[bvh.id, wp.vec3(-1.0, -1.0, -1.0), wp.vec3(2.5, 2.0, 2.0), hits, rays,
                                          steps], block_dim=4)
    np.testing.assert_array_equal(hits.numpy(), [1, 1, 0])
    np.testing.assert_array_equal(steps.numpy(), [3])
    np.testing.assert_array_equal(rays.numpy(), [1, 1, 1])


def test_tile_mesh_query_reports_faces_whose_boxes_overlap():
    points = wp.array(np.array([[0, 0, 0], [1, 0, 0], [0, 1, 0], [2, 0, 0], [3, 0, 0], [2, 1, 0]], np.float32),
                      dtype=wp.vec3)
    mesh = wp.Mesh(points=points, indices=wp.array(np.arange(6, dtype=np.int32)))
    counts = wp.zeros(2, dtype=wp.int32)
    wp.launch_tiled(k_mesh, dim=1, inputs=[mesh.id, wp.vec3(-1.0, -1.0, -1.0), wp.vec3(0.5, 2.0, 1.0), counts],
                    block_dim=4)
    np.testing.assert_array_equal(counts.numpy(), [1, 0])
    assert wp.BvhQueryTiled is not wp.MeshQueryAABBTiled


@wp.kernel
def k_old_spellings(bvh_id: wp.uint64, mesh_id: wp.uint64, lo: wp.vec3, hi: wp.vec3, boxes: wp.array(dtype=wp.int32),
                    faces: wp.array(dtype=wp.int32)):
    q = wp.bvh_query_aabb_tiled(bvh_id, lo, hi)
    while wp.tile_query_valid(q):
        b = wp.untile(wp.bvh_query_next_tiled(q))
        if b >= 0:
            boxes[b] += 1
    r = wp.bvh_query_ray_tiled(bvh_id, wp.vec3(-1.0, 0.5, 0.5), wp.vec3(1.0, 0.0, 0.0))
    while wp.tile_query_valid(r):
        b = wp.untile(wp.bvh_query_next_tiled(r))
        if b >= 0:
            boxes[b] += 10
    m = wp.mesh_query_aabb_tiled(mesh_id, lo, hi)
    while wp.tile_query_valid(m):
        f = wp.untile(wp.mesh_query_aabb_next_tiled(m))
        if f >= 0:
            faces[f] += 1


def test_warps_older_tiled_spellings_are_the_same_queries():
    """bvh_query_aabb_tiled, bvh_query_ray_tiled, bvh_query_next_tiled, mesh_query_aabb_tiled and
    mesh_query_aabb_next_tiled (Warp 1.19 keeps them as deprecated aliases) run the tile_* queries."""
    lowers = wp.array(np.array([[0, 0, 0], [2, 0, 0], [4, 0, 0]], np.float32), dtype=wp.vec3)
    uppers = wp.array(np.array([[1, 1, 1], [3, 1, 1], [5, 1, 1]], np.float32), dtype=wp.vec3)
    bvh = wp.Bvh(lowers=lowers, uppers=uppers)
    points = wp.array(np.array([[0, 0, 0], [1, 0, 0], [0, 1, 0], [4, 0, 0], [5, 0, 0], [4, 1, 0]], np.float32),
                      dtype=wp.vec3)
    mesh = wp.Mesh(points=points, indices=wp.array(np.arange(6, dtype=np.int32)))
    boxes, faces = wp.zeros(3, dtype=wp.int32), wp.zeros(2, dtype=wp.int32)
    wp.launch_tiled(k_old_spellings, dim=1, inputs=[bvh.id, mesh.id, wp.vec3(-1.0, -1.0, -1.0),
                                                    wp.vec3(2.5, 2.0, 2.0), boxes, faces], block_dim=4)
    np.testing.assert_array_equal(boxes.numpy(), [11, 11, 10])
    np.testing.assert_array_equal(faces.numpy(), [1, 0])


@pytest.mark.skipif(platform.machine().lower() not in ("x86_64", "amd64") or platform.system() != "Linux",
                    reason="CPU blocks run their lanes together on x86-64 Linux only")
def test_with_cpu_blocks_a_step_gives_one_result_per_lane():
    """With wp.config.enable_cpu_blocks the block's 4 lanes share the query: one step gives the 2 overlapping
    boxes to lanes 0 and 1 (-1 to the others) and ends the query; each lane counts that one step. The ray
    query's step gives all 3 boxes at once."""
    lowers = wp.array(np.array([[0, 0, 0], [2, 0, 0], [4, 0, 0]], np.float32), dtype=wp.vec3)
    uppers = wp.array(np.array([[1, 1, 1], [3, 1, 1], [5, 1, 1]], np.float32), dtype=wp.vec3)
    bvh = wp.Bvh(lowers=lowers, uppers=uppers)
    hits, rays, steps = wp.zeros(3, dtype=wp.int32), wp.zeros(3, dtype=wp.int32), wp.zeros(1, dtype=wp.int32)
    saved = wp.config.enable_cpu_blocks
    wp.config.enable_cpu_blocks = True
    try:
        wp.launch_tiled(k_bvh, dim=1, inputs=[bvh.id, wp.vec3(-1.0, -1.0, -1.0), wp.vec3(2.5, 2.0, 2.0), hits, rays,
                                              steps], block_dim=4)
    finally:
        wp.config.enable_cpu_blocks = saved
    np.testing.assert_array_equal(hits.numpy(), [1, 1, 0])
    np.testing.assert_array_equal(steps.numpy(), [4])
    # the ray loop reads element 0 of each step on every lane: the first box hit, four times, then the query ends
    assert sorted(rays.numpy()) == [0, 0, 4]
