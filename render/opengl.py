"""`OpenGLRenderer`: Warp's interactive renderer name. Frames are ray-cast by ImageRenderer and shown in a
pyglet window where a display exists; with `headless=True` no window is opened and frames are read
back with `get_pixels`. Without a display (or pyglet) constructing a windowed one raises an error
naming the headless alternatives."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from typing import Any

from .image import ImageRenderer

_ALTERNATIVES = ("use loomwork.render.ImageRenderer(output_dir=...) for PNG frames, "
                 "loomwork.render.UsdRenderer(path) for a USD stage, or OpenGLRenderer(headless=True) to read "
                 "frames with get_pixels()")


def _no_display_reason() -> str | None:
    """Why no window can be opened here (None when a display looks available)."""
    if sys.platform.startswith("linux") and not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")):
        return "no display is available (neither DISPLAY nor WAYLAND_DISPLAY is set)"
    return None


def _pyglet() -> Any:
    """pyglet, or None when it is not installed."""
    try:
        import pyglet
    except ImportError:
        return None
    return pyglet


class OpenGLRenderer(ImageRenderer):
    """Warp's `OpenGLRenderer` signature. Each `end_frame()` ray-casts the scene (see ImageRenderer)
    and, unless headless, shows it in a pyglet window titled `title` (`render_depth` shows depth).
    `draw_grid`, `draw_sky`, `draw_axis`, `show_info`, `render_wireframe`, `axis_scale`, `vsync`,
    `enable_backface_culling`, the interaction switches and `use_legacy_opengl` are accepted for
    compatibility; the ray caster draws no grid, sky, axes or overlay, and the camera is fixed.
    `clock_time` is the wall-clock time since construction (the default frame time, as in Warp), and the
    functions in `render_2d_callbacks` run after each frame is shown (for overlays such as ImGui)."""

    def __init__(self, title: str = "Warp", scaling: float = 1.0, fps: int = 60, up_axis: str = "Y",
                 screen_width: int = 1024, screen_height: int = 768, near_plane: float = 1.0,
                 far_plane: float = 100.0, camera_fov: float = 45.0, camera_pos: tuple = (0.0, 2.0, 10.0),
                 camera_front: tuple = (0.0, 0.0, -1.0), camera_up: tuple = (0.0, 1.0, 0.0),
                 background_color: tuple = (0.53, 0.8, 0.92), draw_grid: bool = True, draw_sky: bool = True,
                 draw_axis: bool = True, show_info: bool = True, render_wireframe: bool = False,
                 render_depth: bool = False, axis_scale: float = 1.0, vsync: bool = False,
                 headless: bool | None = None, enable_backface_culling: bool = True,
                 enable_mouse_interaction: bool = True, enable_keyboard_interaction: bool = True,
                 device: Any = None, use_legacy_opengl: bool | None = None) -> None:
        pyglet = _pyglet()
        if headless is None:
            headless = bool(pyglet is not None and pyglet.options.get("headless", False))
        self.headless = bool(headless)
        self.window = None
        self._closed = False
        if not self.headless:
            reason = _no_display_reason()
            if reason is None and pyglet is None:
                reason = "pyglet is not installed (pip install 'pyglet>=2')"
            if reason is not None:
                raise RuntimeError(f"OpenGLRenderer cannot open a window: {reason}; {_ALTERNATIVES}")
        super().__init__(None, scaling=scaling, fps=fps, up_axis=up_axis, screen_width=screen_width,
                         screen_height=screen_height, near_plane=near_plane, far_plane=far_plane,
                         camera_fov=camera_fov, camera_pos=camera_pos, camera_front=camera_front,
                         camera_up=camera_up, background_color=background_color, device=device)
        self.title = title
        self.render_depth = render_depth
        self.render_2d_callbacks: list[Callable[[], None]] = []
        self.paused = False
        self._start_time = time.time()
        self.clock_time = 0.0
        if not self.headless:
            self.window = pyglet.window.Window(width=self.screen_width, height=self.screen_height, caption=title,
                                               vsync=vsync, visible=True)

    @property
    def camera_near_plane(self) -> float:
        """The near clipping distance (Warp's name)."""
        return self.near_plane

    @property
    def camera_far_plane(self) -> float:
        """The far clipping distance (Warp's name)."""
        return self.far_plane

    def begin_frame(self, t: float | None = None) -> None:
        """Start a frame at time `t` (default: the wall-clock `clock_time`, as Warp's renderer)."""
        self.update()
        super().begin_frame(self.clock_time if t is None else t)

    def update(self) -> None:
        """Advance `clock_time` and process the window's events."""
        self.clock_time = time.time() - self._start_time
        if self.window is not None and not self.has_exit:
            self.window.switch_to()
            self.window.dispatch_events()

    def _resize(self, width: int, height: int) -> None:
        super()._resize(width, height)
        if self.window is not None:
            self.window.set_size(self.screen_width, self.screen_height)

    @property
    def has_exit(self) -> bool:
        """Whether the renderer was closed, or its window closed by the user."""
        return self._closed or (self.window is not None and self.window.has_exit)

    def is_running(self) -> bool:
        """False once the renderer or its window was closed."""
        return not self.has_exit

    def end_frame(self) -> None:
        """Ray-cast the frame and, with a window, show it."""
        super().end_frame()
        if self.window is None or self.has_exit:
            return
        import pyglet

        if self.render_depth:
            near, far = self.near_plane, self.far_plane
            shade = 1.0 - (self.depth.clip(near, far) - near) / (far - near)
            rgb = (shade[..., None].repeat(3, axis=2) * 255.0).astype("uint8")
        else:
            rgb = self.rgb8()
        picture = pyglet.image.ImageData(self.screen_width, self.screen_height, "RGB",
                                         rgb[::-1].tobytes())  # pyglet's rows run bottom-up
        self.window.switch_to()
        self.window.dispatch_events()
        self.window.clear()
        picture.blit(0, 0)
        for callback in self.render_2d_callbacks:
            callback()
        self.window.flip()

    def clear(self) -> None:
        """Forget every shape drawn so far."""
        self._items.clear()

    def close(self) -> None:
        """Close the window (if any); the renderer stops running."""
        if self.window is not None:
            self.window.close()
        self._closed = True
