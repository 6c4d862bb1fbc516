"""OpenGLRenderer: a clear error where no window can be opened, and a working headless mode."""

import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

import loomwork as wp
from loomwork.render import OpenGLRenderer


def test_no_display_names_the_headless_alternatives(monkeypatch):
    """Without a display, a windowed OpenGLRenderer refuses with the reason and the headless renderers."""
    monkeypatch.setattr(sys, "platform", "linux")
    monkeypatch.delenv("DISPLAY", raising=False)
    monkeypatch.delenv("WAYLAND_DISPLAY", raising=False)
    with pytest.raises(RuntimeError, match="no display") as info:
        OpenGLRenderer(headless=False)
    for name in ("ImageRenderer", "UsdRenderer", "headless=True"):
        assert name in str(info.value)


def test_missing_pyglet_is_named(monkeypatch):
    """With a display but no pyglet, the error says to install pyglet and names the alternatives."""
    monkeypatch.setenv("DISPLAY", ":0")
    monkeypatch.setitem(sys.modules, "pyglet", None)  # makes `import pyglet` fail
    with pytest.raises(RuntimeError, match=r"pyglet is not installed.*ImageRenderer"):
        OpenGLRenderer()


def test_headless_renders_without_a_window():
    """headless=True needs no display: frames are ray-cast and read back with get_pixels (rgb and depth)."""
    r = OpenGLRenderer(headless=True, screen_width=64, screen_height=48, camera_pos=(0.0, 0.0, 5.0),
                       background_color=(0.0, 0.0, 0.0))
    assert r.window is None and r.is_running()
    r.begin_frame(0.0)
    r.render_sphere("ball", (0.0, 0.0, 0.0), (0.0, 0.0, 0.0, 1.0), 1.0, color=(1.0, 0.0, 0.0))
    r.end_frame()
    pixels = wp.zeros((48, 64, 3), dtype=float)
    r.get_pixels(pixels)
    image = pixels.numpy()
    assert image[24, 32, 0] > 0.5 and image[0, 0].max() == 0.0
    depth = wp.zeros((48, 64, 1), dtype=float)
    r.get_pixels(depth, mode="depth")
    assert depth.numpy()[24, 32, 0] == pytest.approx(4.0, abs=0.01)
    r.clear()
    r.end_frame()
    assert np.all(r.image == 0.0)


@pytest.fixture
def display(monkeypatch, tmp_path):
    """A display for a real window: the session's own, else a private Xvfb server (skips without either)."""
    pytest.importorskip("pyglet", reason="pyglet is not installed")
    if os.environ.get("DISPLAY"):
        yield os.environ["DISPLAY"]
        return
    xvfb = shutil.which("Xvfb")
    if xvfb is None:
        pytest.skip("no display and no Xvfb to make one (apt install xvfb) for the windowed OpenGLRenderer")
    read_fd, write_fd = os.pipe()
    server = subprocess.Popen([xvfb, "-displayfd", str(write_fd), "-screen", "0", "320x240x24", "-nolisten", "tcp"],
                              pass_fds=(write_fd,), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    os.close(write_fd)
    try:
        with os.fdopen(read_fd) as f:
            number = f.readline().strip()
        if not number:
            pytest.skip("Xvfb did not start")
        monkeypatch.setenv("DISPLAY", f":{number}")
        yield f":{number}"
    finally:
        server.terminate()
        server.wait(timeout=10)


def test_window_shows_the_ray_cast_frame(display):
    """With a display, end_frame() blits the frame into a pyglet window (read back from its framebuffer),
    then runs the 2-D callbacks; clock_time advances; close() ends is_running()."""
    code = """
import numpy as np, pyglet
from loomwork.render import OpenGLRenderer
r = OpenGLRenderer(screen_width=64, screen_height=48, camera_pos=(0.0, 0.0, 5.0), background_color=(0.0, 0.0, 0.0))
assert r.window is not None and r.is_running()
calls = []
r.render_2d_callbacks.append(lambda: calls.append(r.clock_time))
r.begin_frame()
r.render_sphere("ball", (0.0, 0.0, 0.0), (0.0, 0.0, 0.0, 1.0), 1.0, color=(1.0, 0.0, 0.0))
r.end_frame()
shown = pyglet.image.get_buffer_manager().get_color_buffer().get_image_data()
rgba = np.frombuffer(shown.get_data("RGBA", 64 * 4), dtype=np.uint8).reshape(48, 64, 4)[::-1]
print("max diff", int(np.abs(rgba[..., :3].astype(int) - r.rgb8()).max()), "calls", len(calls))
r.close()
print("running", r.is_running())
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    # the window shows the frame that was ray-cast (the last frame, read back before the buffer swap)
    assert "max diff 0 calls 1" in out.stdout or "max diff 1 calls 1" in out.stdout, out.stdout
    assert "running False" in out.stdout
