"""The pond example is a program users run and a test: a few frames, then checks of the result."""

import subprocess
import sys

import numpy as np
from PIL import Image

from loomwork.apps import pond as demo


def test_waves_spread_and_stay_bounded():
    """Drops make waves that spread out while the energy stays bounded (a stable step)."""
    height, rgb = demo.simulate(size=64, frames=120, seed=1)
    assert np.isfinite(height).all()
    assert 1e-4 < np.abs(height).max() < 1.0
    assert (np.abs(height) > 1e-4).mean() > 0.2  # the waves reached a good part of the pond
    assert rgb.shape == (64, 64, 3) and rgb.dtype == np.uint8 and rgb.std() > 1.0


def test_main_command_writes_a_png(tmp_path):
    """`python -m loomwork.apps.pond` writes the PNG and says where."""
    out = tmp_path / "pond.png"
    r = subprocess.run([sys.executable, "-m", "loomwork.apps.pond", "--size", "48", "--frames", "50",
                        "--out", str(out)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert f"wrote {out.resolve()}" in r.stdout
    img = np.asarray(Image.open(out))
    assert img.shape == (48, 48, 3)


def test_bad_arguments_are_refused(capsys):
    """A grid too small for the stencil is refused with a usage message."""
    r = subprocess.run([sys.executable, "-m", "loomwork.apps.pond", "--size", "2"], capture_output=True, text=True)
    assert r.returncode == 2 and "--size must be at least 8" in r.stderr
