"""The simulation examples are programs users run and tests: a few frames, then checks of the result."""

import subprocess
import sys

import numpy as np
import pytest

from loomwork.apps import sim_bounce_optim, sim_cloth_drape, sim_cloth_throw, sim_granular


def test_cloth_drapes_over_a_trimesh_sphere():
    pytest.importorskip("trimesh", reason="trimesh is not installed (pip install trimesh)")
    sphere = sim_cloth_drape.load_obstacle(None)
    q = sim_cloth_drape.drape(8, 30, None, None, mesh=sphere)
    assert np.isfinite(q).all() and q[:, 2].min() > 0.0
    middle = np.linalg.norm(q[:, :2], axis=1) < 0.2
    assert 0.95 < q[middle, 2].min() < 1.05  # the middle lies on the top of the sphere (resting on the ground)


def test_a_mesh_file_is_loaded_scaled_and_set_on_the_ground(tmp_path):
    pytest.importorskip("trimesh", reason="trimesh is not installed (pip install trimesh)")
    obj = tmp_path / "tet.obj"
    obj.write_text("v 0 0 0\nv 2 0 0\nv 0 2 0\nv 0 0 2\nf 1 3 2\nf 1 2 4\nf 1 4 3\nf 2 3 4\n")
    m = sim_cloth_drape.load_obstacle(str(obj))
    assert np.allclose(m.vertices.max(axis=0) - m.vertices.min(axis=0), 1.2, atol=1e-5)
    r = subprocess.run([sys.executable, "-m", "loomwork.apps.sim_cloth_drape", "--mesh", str(obj), "--cloth", "4",
                        "--frames", "2", "--out", str(tmp_path / "d")], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "d.png").exists()


def test_granular_pile_settles_without_interpenetration():
    q = sim_granular.pour(side=4, frames=45)
    assert q[:, 2].min() > 0.045
    d = np.linalg.norm(q[:, None] - q[None], axis=-1) + np.eye(len(q))
    assert d.min() > 0.085
    assert q[:, 2].max() < 0.45  # it fell and spread from its 0.3-0.6 m block


def test_bounce_and_cloth_throw_optimisations_converge():
    losses = sim_bounce_optim.throw(6)
    assert losses[-1] < 0.7 * losses[0], losses
    losses = sim_cloth_throw.throw_cloth(6)
    assert all(b < a for a, b in zip(losses, losses[1:], strict=False)), losses
    assert losses[-1] < 0.4 * losses[0]
