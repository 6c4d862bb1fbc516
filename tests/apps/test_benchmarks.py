"""The benchmarks run end to end on small sizes (their figures are for the note, never asserted here)."""

import pytest

from loomwork.apps import bench_autodiff, bench_kernels


def test_autodiff_benchmark_runs_and_its_gradient_is_right():
    """bench_autodiff on 2^16 elements runs and its da matches the float64 reference."""
    r = bench_autodiff.main(["--n", "65536", "--reps", "2"])
    assert r["a_grad_rel_error"] < 1e-5


def test_kernel_benchmark_runs():
    """bench_kernels on a small saxpy with one build repetition runs and reports every figure."""
    r = bench_kernels.main(["--n", "65536", "--repeats", "1"])
    assert r["loomwork_s"] > 0 and r["launch_s"] > 0 and set(r["build"]) == {"first", "edit", "cached", "import"}
    assert r["eager_s"] > 0 and r["replay_s"] > 0


def test_utils_benchmark_runs():
    """bench_utils on small sizes runs and its float32 sum is accurate."""
    from loomwork.apps import bench_utils

    r = bench_utils.main(["--n", "65536", "--m", "65536"])
    assert r["sum_rel_error"] < 1e-7


def test_nbody_benchmark_runs_and_is_accurate():
    """bench_nbody on 512 bodies runs and its forces match a float64 NumPy evaluation."""
    from loomwork.apps import bench_nbody

    r = bench_nbody.main(["--n", "512"])
    assert r["rel_error"] < 1e-4


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
    """bench_optim on small sizes runs; its dense CG solve meets the tolerance."""
    from loomwork.apps import bench_optim

    r = bench_optim.main(["--n", "4096", "--m", "64"])
    assert r["dense_residual"] < 1e-4 and all(r[k] > 0 for k in ("adam_step_s", "cg_iteration_s"))


def test_jax_benchmark_runs_and_its_saxpy_is_right():
    """bench_jax with a few calls and a small saxpy runs, reports every figure, and its saxpy is exact."""
    pytest.importorskip("jax", reason="JAX is not installed (pip install 'jax[cpu]')")
    from loomwork.apps import bench_jax

    r = bench_jax.main(["--iters", "20", "--n", "4096", "--rounds", "1"])
    ours = r["loomwork"]
    assert ours.pop("saxpy max error") < 1e-6
    assert len(ours) == 8 and all(v > 0 for v in ours.values())
