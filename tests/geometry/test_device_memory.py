"""Geometry types on a device whose memory the host cannot read in place (as a GPU's): trees are built on
the host and their descriptors and arrays copied to the device, so kernels there give what they give on
the CPU. A stand-in device (host memory claiming otherwise, which records its allocations) runs this
without a GPU and checks that every address a published descriptor holds is device memory; the same tests
run on a real GPU when there is one (the stand-in and the `dev` fixture are in tests/conftest.py)."""

import ctypes
from typing import Any

import numpy as np

import loomwork as wp


def pointers_in_device_memory(backend: Any, handle: int, desc_type: type, fields: tuple) -> None:
    """The descriptor an id names lies in device memory, and so does every non-null address it holds (on the
    stand-in, whose memory the test can read)."""
    assert backend.owns(handle, ctypes.sizeof(desc_type))
    desc = desc_type.from_address(handle)
    for f in fields:
        value = getattr(desc, f)
        assert value == 0 or backend.owns(value), f"field {f} points outside device memory"


@wp.kernel
def closest_and_ray(mesh: wp.uint64, pts: wp.array(dtype=wp.vec3), dist: wp.array(dtype=float),
                    hit_t: wp.array(dtype=float)):
    i = wp.tid()
    q = wp.mesh_query_point_no_sign(mesh, pts[i], 1.0e6)
    # the distance, not the face: points nearest an edge or a corner have several equally near faces
    dist[i] = wp.length(wp.mesh_eval_position(mesh, q.face, q.u, q.v) - pts[i]) if q.result else -1.0
    r = wp.mesh_query_ray(mesh, pts[i], wp.normalize(-pts[i]), 1.0e6)
    hit_t[i] = r.t if r.result else -1.0


@wp.kernel
def box_counts(bvh: wp.uint64, lo: wp.array(dtype=wp.vec3), hi: wp.array(dtype=wp.vec3), count: wp.array(dtype=int)):
    i = wp.tid()
    q = wp.bvh_query_aabb(bvh, lo[i], hi[i])
    k = 0
    index = 0
    while wp.bvh_query_next(q, index):
        k += 1
    count[i] = k


@wp.kernel
def neighbour_counts(grid: wp.uint64, pts: wp.array(dtype=wp.vec3), r: float, count: wp.array(dtype=int)):
    i = wp.tid()
    p = pts[i]
    k = 0
    for j in wp.hash_grid_query(grid, p, r):
        if wp.length(pts[j] - p) <= r:
            k += 1
    count[i] = k


@wp.kernel
def sample_volume(vol: wp.uint64, pts: wp.array(dtype=wp.vec3), out: wp.array(dtype=float)):
    i = wp.tid()
    out[i] = wp.volume_sample_f(vol, pts[i], wp.Volume.LINEAR)


def _box_mesh(device):
    s = np.array([[x, y, z] for x in (-1, 1) for y in (-1, 1) for z in (-1, 1)], np.float32)
    tris = np.array([0, 1, 3, 0, 3, 2, 4, 6, 7, 4, 7, 5, 0, 4, 5, 0, 5, 1, 2, 3, 7, 2, 7, 6, 0, 2, 6, 0, 6, 4,
                     1, 5, 7, 1, 7, 3], np.int32)
    return wp.Mesh(points=wp.array(s, dtype=wp.vec3, device=device), indices=wp.array(tris, device=device),
                   support_winding_number=True)


def test_meshes_and_bvhs_query_device_copies(dev):
    from loomwork.geometry.bvh import BvhDesc
    from loomwork.geometry.mesh import MeshDesc

    rng = np.random.default_rng(3)
    pts = (rng.standard_normal((64, 3)) * 3).astype(np.float32)
    answers = []
    for d in ("cpu", dev):
        mesh = _box_mesh(d)
        if d is dev and not dev.is_cuda:
            pointers_in_device_memory(dev.backend, mesh.id, MeshDesc,
                                      ("bvh", "points", "indices", "moments", "leaf_corners"))
            pointers_in_device_memory(dev.backend, MeshDesc.from_address(mesh.id).bvh, BvhDesc,
                                      ("nodes", "parents", "order", "item_lowers", "item_uppers"))
        p = wp.array(pts, dtype=wp.vec3, device=d)
        dist, t = wp.zeros(64, dtype=float, device=d), wp.zeros(64, dtype=float, device=d)
        wp.launch(closest_and_ray, 64, inputs=[mesh.id, p, dist, t], device=d)
        moved = wp.array(_box_mesh("cpu").points.numpy() * 2.0, dtype=wp.vec3, device=d)
        mesh.points = moved  # a refit: the device copies follow
        if d is dev and not dev.is_cuda:  # new velocities: only the descriptor is copied
            before = dev.backend.uploaded
            mesh.velocities = wp.zeros(len(moved), dtype=wp.vec3, device=d)
            assert dev.backend.uploaded - before == ctypes.sizeof(MeshDesc)
            assert MeshDesc.from_address(mesh.id).velocities == mesh.velocities.ptr
        t2 = wp.zeros(64, dtype=float, device=d)
        wp.launch(closest_and_ray, 64, inputs=[mesh.id, p, dist, t2], device=d)
        lo = wp.array(pts - 0.5, dtype=wp.vec3, device=d)
        hi = wp.array(pts + 0.5, dtype=wp.vec3, device=d)
        bvh = wp.Bvh(lo, hi)
        count = wp.zeros(64, dtype=int, device=d)
        wp.launch(box_counts, 64, inputs=[bvh.id, lo, hi, count], device=d)
        answers.append((dist.numpy(), t.numpy(), t2.numpy(), count.numpy()))
    for cpu, other in zip(*answers, strict=True):
        np.testing.assert_allclose(other, cpu, rtol=1e-5, atol=1e-5)  # a GPU fuses multiply-adds
    assert (answers[0][1] > 0).any() and not np.array_equal(answers[0][1], answers[0][2])


def test_hash_grids_and_volumes_on_device_memory(dev):
    rng = np.random.default_rng(4)
    pts = rng.uniform(0, 4, (300, 3)).astype(np.float32)
    values = rng.standard_normal((8, 8, 8)).astype(np.float32)
    answers = []
    for d in ("cpu", dev):
        p = wp.array(pts, dtype=wp.vec3, device=d)
        grid = wp.HashGrid(16, 16, 16, device=d)
        grid.build(p, 0.5)
        count = wp.zeros(300, dtype=int, device=d)
        wp.launch(neighbour_counts, 300, inputs=[grid.id, p, 0.5, count], device=d)
        vol = wp.Volume.load_from_numpy(values, bg_value=0.0, device=d)
        if d is dev and not dev.is_cuda:
            assert dev.backend.owns(vol.id) and dev.backend.owns(vol.array().ptr)
        out = wp.zeros(300, dtype=float, device=d)
        wp.launch(sample_volume, 300, inputs=[vol.id, p, out], device=d)
        rebuilt = wp.Volume.allocate_by_tiles(wp.array([[0, 0, 0]], dtype=wp.int32, device=d), voxel_size=0.5,
                                              bg_value=2.0, device=d, max_tiles=2)
        where = rebuilt.array().ptr
        rebuilt.rebuild(wp.array([[8, 0, 0]], dtype=wp.int32, device=d))  # the device copy is rewritten in place
        assert rebuilt.array().ptr == where and (d == "cpu" or not not dev.is_cuda
                                                 or dev.backend.owns(where))
        moved = wp.zeros(300, dtype=float, device=d)
        wp.launch(sample_volume, 300, inputs=[rebuilt.id, p, moved], device=d)
        answers.append((count.numpy(), out.numpy(), vol.get_voxels().numpy(), moved.numpy(),
                        rebuilt.get_voxels().numpy()))
    for cpu, other in zip(*answers, strict=True):
        np.testing.assert_allclose(other, cpu, rtol=1e-5, atol=1e-5)  # a GPU fuses multiply-adds
    brute = (np.linalg.norm(pts[:, None] - pts[None], axis=-1) <= 0.5).sum(1)
    np.testing.assert_array_equal(answers[0][0], brute)


def test_device_work_runs_now_while_the_cpu_is_captured(dev):
    """A hash grid on device memory built while the CPU is being captured sorts its keys now: the host copies
    the sort works on are not CPU work for the capture to record (they were, and the grid read garbage)."""
    pts = np.random.default_rng(5).uniform(0, 4, (200, 3)).astype(np.float32)
    p = wp.array(pts, dtype=wp.vec3, device=dev)
    grid = wp.HashGrid(16, 16, 16, device=dev)
    count = wp.zeros(200, dtype=int, device=dev)
    wp.load_module(device="cpu")
    with wp.ScopedCapture(device="cpu"):
        grid.build(p, 0.5)
        wp.launch(neighbour_counts, 200, inputs=[grid.id, p, 0.5, count], device=dev)
    brute = (np.linalg.norm(pts[:, None] - pts[None], axis=-1) <= 0.5).sum(1)
    np.testing.assert_array_equal(count.numpy(), brute)
