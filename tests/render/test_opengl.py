"""OpenGLRenderer: a clear error where no window can be opened, and a working headless mode."""

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
