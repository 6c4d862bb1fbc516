"""The benchmarks run end to end on small sizes (their figures are for the note, never asserted here)."""

import pytest

from loomwork.apps import bench_autodiff, bench_kernels


def test_autodiff_benchmark_runs_and_its_gradient_is_right():
    """bench_autodiff on 2^16 elements runs both shapes; da matches the float64 reference in each."""
    r = bench_autodiff.main(["--n", "65536", "--reps", "2"])
    assert r["a_grad_rel_error"] < 1e-5 and r["per_element"]["a_grad_rel_error"] < 1e-5


def test_kernel_benchmark_runs():
    """bench_kernels on a small saxpy with one build repetition runs and reports every figure."""
    r = bench_kernels.main(["--n", "65536", "--repeats", "1"])
    assert r["loomwork_s"] > 0 and r["launch_s"] > 0 and set(r["build"]) == {"first", "edit", "cached", "import"}
    assert r["eager_s"] > 0 and r["replay_s"] > 0


def test_tiles_benchmark_runs_and_its_gemm_is_right(monkeypatch):
    """bench_tiles on a 128^3 GEMM and 2^16 floats, one thread timed by CPU time, gets both right."""
    import loomwork as wp
    from loomwork.apps import bench_tiles

    monkeypatch.delenv("WARP_PYTHON", raising=False)
    monkeypatch.setattr(wp.config, "cpu_threads", wp.config.cpu_threads)  # restored after the test
    r = bench_tiles.main(["--n", "128", "--m", "65536", "--threads", "1", "--cpu-time"])
    assert r["gemm_rel_error"] < 1e-5 and r["sum_rel_error"] < 1e-6 and r["gemm_s"] > 0 and r["numpy_s"] > 0


def test_utils_benchmark_runs():
    """bench_utils on small sizes runs and its float32 sum is accurate."""
    from loomwork.apps import bench_utils

    r = bench_utils.main(["--n", "65536", "--m", "65536"])
    assert r["sum_rel_error"] < 1e-7


def test_nbody_benchmark_runs_and_is_accurate():
    """bench_nbody on 512 bodies runs, its forces match a float64 NumPy evaluation, and the SIMD-lane build
    gives the one-thread build's bits."""
    from loomwork.apps import bench_nbody

    r = bench_nbody.main(["--n", "512"])
    assert r["rel_error"] < 1e-4 and r["bitwise"]


def test_geometry_benchmark_runs_and_its_answers_are_right():
    """bench_geometry on a small icosphere runs; hits and closest distances agree with the sphere."""
    from loomwork.apps import bench_geometry

    r = bench_geometry.main(["--subdiv", "3", "--res", "64", "--points", "2000"])
    assert r["triangles"] == 1280 and 0.3 < r["hit_fraction"] < 0.5
    assert r["closest_max_error"] < 0.02  # within the facets' sagitta of the unit sphere


def test_interop_benchmark_runs():
    """bench_interop with a few iterations runs and reports every conversion and DLPack figure."""
    pytest.importorskip("torch", reason="PyTorch is not installed (pip install torch)")
    from loomwork.apps import bench_interop

    r = bench_interop.main(["--iters", "50", "--rounds", "1"])
    ours = r["loomwork"]
    assert len(ours) == 16 and all(v > 0 for v in ours.values())


def test_optim_benchmark_runs_and_solves():
    """bench_optim on small sizes runs; its dense CG solve meets the tolerance; on its sparse systems FSAI takes
    CG fewer iterations than Jacobi."""
    from loomwork.apps import bench_optim

    r = bench_optim.main(["--n", "4096", "--m", "64", "--grid", "16", "--rounds", "1", "--warp-python", ""])
    assert r["dense_residual"] < 1e-4 and all(r[k] > 0 for k in ("adam_step_s", "cg_iteration_s"))
    ours = r["sparse"]["loomwork"]
    for system in ("poisson", "elasticity"):
        assert ours[f"{system}/fsai/2"] < ours[f"{system}/diag/2"]


def test_pool_benchmark_runs():
    """bench_pool with a short load runs both configurations at both loads and reports their ratio."""
    from loomwork.apps import bench_pool

    r = bench_pool.main(["--sizes", "16384", "--load", "1", "--seconds", "0.05", "--rounds", "1", "--kernels", "light"])
    assert [(f["load"], f["ratio"] > 0) for f in r["figures"]] == [(0, True), (1, True)]


def test_geometry_pipeline_runs_and_its_surface_matches_the_mesh(tmp_path):
    """The mesh -> distance field -> marching cubes -> image/USD pipeline on a 40^3 grid: the surface lies
    within a voxel of the torus, encloses its volume within 3%, and the files are written."""
    pytest.importorskip("trimesh", reason="trimesh is not installed (pip install trimesh)")
    from loomwork.apps import geometry_pipeline

    r = geometry_pipeline.main(["--res", "40", "--image", "64", "--out", str(tmp_path)])
    assert r["max_vertex_distance"] < r["voxel"]
    assert abs(r["volume_out"] - r["volume_in"]) < 0.03 * r["volume_in"]
    assert 0.1 < r["hit_fraction"] < 0.9 and (tmp_path / "surface.png").stat().st_size > 0
    if r["usd"]:
        assert io_mesh_volume(r["usd"]) == pytest.approx(r["volume_out"], rel=1e-5)


def io_mesh_volume(path: str) -> float:
    from loomwork.geometry import io

    return io.mesh_to_trimesh(io.load_mesh(path)).volume


def test_hash_grid_benchmark_runs_and_counts_like_scipy():
    """bench_hash_grid on 4096 points runs; every neighbour count equals cKDTree's."""
    from loomwork.apps import bench_hash_grid

    r = bench_hash_grid.main(["--n", "4096", "--rounds", "1"])
    assert r["mismatched_points"] == 0 and 20 < r["mean_neighbours"] < 40


def test_jax_benchmark_runs_and_its_saxpy_is_right():
    """bench_jax with a few calls and a small saxpy runs, reports every figure, and its saxpy is exact."""
    pytest.importorskip("jax", reason="JAX is not installed (pip install 'jax[cpu]')")
    from loomwork.apps import bench_jax

    r = bench_jax.main(["--iters", "20", "--n", "4096", "--rounds", "1"])
    ours = r["loomwork"]
    assert ours.pop("saxpy max error") < 1e-6
    assert len(ours) == 8 and all(v > 0 for v in ours.values())


def test_sim_benchmark_runs():
    """bench_sim on a few steps runs its scenes and the differentiated rollout (no Newton needed)."""
    from loomwork.apps import bench_sim

    r = bench_sim.main(["--steps", "4", "--rollout", "4", "--rounds", "1", "--newton-python", "/nonexistent"])
    assert set(r["loomwork"]) == {"cloth 64x64", "pile 512", "cloth 64x64 VBD", "rigid pile 512"}
    assert all(v is not None and v > 0 for v in r["loomwork"].values())
    assert r["forward_s"] > 0 and r["backward_s"] > 0 and isinstance(r["newton"], str)
    assert r["vbd_forward_s"] > 0 and r["vbd_backward_s"] > 0
