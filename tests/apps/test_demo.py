"""The showcase behind the README's main command: a program users run and a test of its results."""

import subprocess
import sys

import numpy as np

from loomwork.apps import demo


def test_cloth_drapes_over_the_mesh_and_rests_above_the_ground():
    q = demo.drape(cloth=8, frames=30, usd_path=None, png_path=None)
    assert np.isfinite(q).all()
    assert q[:, 2].min() > 0.0  # nothing fell through the ground
    center = np.linalg.norm(q[:, :2], axis=1) < 0.4
    assert q[center, 2].max() < 0.55  # the sheet's middle lies on the torus (top at z = 0.5) ...
    assert q[:, 2].max() < 0.6  # ... and nothing was flung away


def test_gradient_descent_through_contact_brings_the_miss_down():
    losses = demo.throw(iterations=8)
    assert losses[-1] < 0.5 * losses[0], losses


def test_main_writes_the_picture_and_the_stage(tmp_path):
    r = subprocess.run([sys.executable, "-m", "loomwork.apps.demo", "--cloth", "6", "--frames", "4", "--iterations",
                        "2", "--out", str(tmp_path / "show")], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "show.png").stat().st_size > 1000
    assert (tmp_path / "show.usda").exists()
    assert "wrote" in r.stdout
    bad = subprocess.run([sys.executable, "-m", "loomwork.apps.demo", "--cloth", "1"], capture_output=True, text=True)
    assert bad.returncode != 0 and "--cloth" in bad.stderr
