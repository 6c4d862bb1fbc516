"""apps/warp_examples: the harness that runs Warp's example programs against loomwork."""

import os
import subprocess
import zipfile
from pathlib import Path

import numpy as np
import pytest

from loomwork.apps import warp_examples as wx

EXAMPLES = os.environ.get("LOOMWORK_WARP_EXAMPLES")


def test_example_args_follow_the_parser():
    """Only the options an example's parser declares are passed, with the harness's values."""
    source = 'p.add_argument("--device")\np.add_argument("--stage-path")\np.add_argument("--num-frames")'
    args = wx.example_args(source, Path("/w"), 3)
    assert args == ["--device", "cpu", "--stage-path", "/w/stage.usd", "--num-frames", "3"]
    assert wx.example_args('p.add_argument("--headless")', Path("/w"), None) == ["--headless"]


def test_first_error_and_losses_are_read_from_the_output():
    """The first exception line of stderr is the error; the last loss line gives the numbers to compare."""
    stderr = "Traceback (most recent call last):\n  File x\n    y\nKeyError: 'rot'\nDuring handling\nValueError: z\n"
    assert wx.first_error(stderr, 1) == "KeyError: 'rot'"
    assert wx.first_error("", -11) == "exit status -11"
    out = "Iter: 0 Loss: 1.5\nsomething\nIter: 10 Loss: 2.5e-3\nSaved\n"
    assert wx.loss_numbers(out) == [10.0, 2.5e-3]
    assert wx.loss_numbers("no numbers here") == []


def test_compare_reports_stage_and_loss_differences(tmp_path):
    """Two runs' stages and losses are compared by their largest relative difference."""
    pytest.importorskip("pxr", reason="usd-core is not installed")
    from loomwork.render import UsdRenderer

    pts = np.random.default_rng(1).random((5, 3))
    for name, shift in (("a.usd", 0.0), ("b.usd", 0.01)):
        r = UsdRenderer(str(tmp_path / name))
        r.begin_frame(0.0)
        r.render_points("p", pts + shift, 0.1)
        r.save()
    ours = wx.Run(True, 1.0, stage=tmp_path / "a.usd", stdout="Loss: 1.0")
    theirs = wx.Run(True, 1.0, stage=tmp_path / "b.usd", stdout="Loss: 1.1")
    note = wx.compare(ours, theirs)
    diff = float(note.split("stage max rel diff ")[1].split(";")[0])
    assert diff == pytest.approx(0.01 / np.ptp(pts + 0.01), rel=1e-2)  # printed to 3 digits
    assert "loss max rel diff 9.09e-02" in note


@pytest.fixture(scope="module")
def warp_examples() -> str:
    """Warp's examples folder: LOOMWORK_WARP_EXAMPLES, else warp-lang 1.19.0's, fetched once with pip."""
    if EXAMPLES:
        return EXAMPLES
    try:
        return str(wx.fetch_examples())
    except (RuntimeError, OSError, subprocess.TimeoutExpired) as e:
        pytest.skip(str(e))


# One of each kind: grids (wave, fluid, fdtd), graph capture, tiles (FFT), a NanoVDB volume, a mesh.
CI_EXAMPLES = ("example_wave", "example_fluid", "example_fdtd_3d", "example_graph_capture",
               "example_fft_poisson_navier_stokes_2d", "example_nvdb", "example_sample_mesh")


def test_warp_examples_run_unmodified(warp_examples, tmp_path):
    """A fast subset of Warp 1.19's own example programs runs with `import warp` aliased to loomwork,
    and the wave example's USD stage holds its surface."""
    results = wx.main([warp_examples, "--only", ",".join(CI_EXAMPLES), "--frames", "2", "--timeout", "300",
                       "--keep", str(tmp_path)])
    assert set(results) == set(CI_EXAMPLES)
    for name, (ours, _) in results.items():
        assert ours.ok, f"{name}: {ours.error}"
    pytest.importorskip("pxr", reason="usd-core is not installed")
    points = wx.stage_points(tmp_path / "example_wave" / "loomwork" / "stage.usd")
    assert "/root/surface" in points and np.isfinite(points["/root/surface"]).all()


def test_fetch_examples_unpacks_only_the_examples(tmp_path, monkeypatch):
    """fetch_examples unpacks warp/examples/ from the wheel pip downloads, once; a failed download is named."""
    wheel_dir = tmp_path / "wheel"
    wheel_dir.mkdir()
    with zipfile.ZipFile(wheel_dir / "warp_lang-9.9.9-py3-none-any.whl", "w") as z:
        z.writestr("warp/examples/core/example_x.py", "print('x')\n")
        z.writestr("warp/native/warp.so", "binary")
    calls = []

    def fake_run(cmd, **kw):
        calls.append(cmd)
        dest = Path(cmd[cmd.index("-d") + 1])
        if "warp-lang==9.9.9" in cmd:
            (dest / "warp_lang-9.9.9-py3-none-any.whl").write_bytes((wheel_dir / "warp_lang-9.9.9-py3-none-any.whl")
                                                                     .read_bytes())
            return subprocess.CompletedProcess(cmd, 0, "", "")
        return subprocess.CompletedProcess(cmd, 1, "", "ERROR: No matching distribution found for warp-lang==0.0.1")

    monkeypatch.setattr(wx.subprocess, "run", fake_run)
    folder = wx.fetch_examples("9.9.9", cache=tmp_path / "cache")
    assert (folder / "core" / "example_x.py").read_text() == "print('x')\n"
    assert not (folder.parent / "native").exists()
    assert wx.fetch_examples("9.9.9", cache=tmp_path / "cache") == folder and len(calls) == 1
    with pytest.raises(RuntimeError, match="could not download warp-lang 0.0.1.*No matching distribution"):
        wx.fetch_examples("0.0.1", cache=tmp_path / "cache")
