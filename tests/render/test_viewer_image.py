"""ViewerImage: PNG frames of simulation states, and an animated GIF of them."""

import pytest

import loomwork.sim as newton
from loomwork.render import ViewerImage


def test_viewer_image_writes_an_animated_gif(tmp_path):
    pytest.importorskip("PIL", reason="pillow is not installed (pip install pillow)")
    from PIL import Image

    b = newton.ModelBuilder()
    b.add_particle((0.0, 0.0, 1.0), (0.0, 0.0, 0.0), 1.0, radius=0.2)
    b.add_ground_plane()
    m = b.finalize()
    solver = newton.solvers.SolverSemiImplicit(m)
    view = ViewerImage(None, width=64, height=48, camera_pos=(0.0, 1.0, 4.0), fps=10, gif_path=str(tmp_path / "a.gif"))
    view.set_model(m)
    s0, s1 = m.state(), m.state()
    for frame in range(4):
        for _ in range(10):
            s0.clear_forces()
            solver.step(s0, s1, None, None, 0.01)
            s0, s1 = s1, s0
        view.begin_frame(frame / 10)
        view.log_state(s0)
        view.end_frame()
    view.close()
    gif = Image.open(tmp_path / "a.gif")
    assert gif.n_frames == 4 and gif.size == (64, 48)
