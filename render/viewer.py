"""Viewers of simulations with Newton's viewer API (``set_model``, ``begin_frame``, ``log_state``,
``end_frame``, ``close``): ``ViewerUSD`` records a USD stage with one time sample per frame,
``ViewerImage`` ray-casts PNG frames. Both draw a model's shapes at the bodies' poses, its particles
as spheres and its cloth as a mesh."""

from __future__ import annotations

from typing import Any

import numpy as np

from loomwork.sim import GeoType, Model, ShapeFlags, State

from . import tessellate
from .image import ImageRenderer
from .usd import UsdRenderer

_SHAPE_COLOR = (0.8, 0.55, 0.35)
_CLOTH_COLOR = (0.25, 0.45, 0.85)
_PARTICLE_COLOR = (0.85, 0.3, 0.3)
_Y_TO_Z = np.array([0.0, 0.0, 0.0, 0.70710678, 0.0, 0.0, 0.70710678])  # a quarter turn about X


def _compose(body_q: np.ndarray, shape_x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """World position and quaternion (xyzw) of a shape frame on a body frame (both as 7 floats)."""
    def rotate(q: np.ndarray, v: np.ndarray) -> np.ndarray:
        u, w = q[:3], q[3]
        return v + 2.0 * np.cross(u, np.cross(u, v) + w * v)

    def multiply(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return np.array([*(a[3] * b[:3] + b[3] * a[:3] + np.cross(a[:3], b[:3])), a[3] * b[3] - a[:3] @ b[:3]])

    return body_q[:3] + rotate(body_q[3:], shape_x[:3]), multiply(body_q[3:], shape_x[3:])


class _Viewer:
    """Draws a model's state through one of loomwork.render's renderers."""

    def __init__(self, renderer: Any) -> None:
        self.renderer = renderer
        self.model: Model | None = None
        self.time = 0.0
        self.show_particles = True

    def set_model(self, model: Model) -> None:
        """The model whose states :meth:`log_state` draws."""
        if not isinstance(model, Model):
            raise TypeError(f"set_model: expected a loomwork.sim.Model, got {type(model).__name__}")
        self.model = model
        m = model
        self._shape = dict(type=m.shape_type.numpy(), body=m.shape_body.numpy(), x=m.shape_transform.numpy(),
                           scale=m.shape_scale.numpy(),
                           visible=(m.shape_flags.numpy() & int(ShapeFlags.VISIBLE)) != 0) if m.shape_count else None
        self._tris = m.tri_indices.numpy() if m.tri_count else None
        self._cloth_particles = np.unique(self._tris) if self._tris is not None else np.zeros(0, np.int64)

    def begin_frame(self, time: float) -> None:
        """Start the frame at ``time`` [s]."""
        self.time = float(time)
        self.renderer.begin_frame(self.time)

    def log_state(self, state: State) -> None:
        """Draw ``state``: visible shapes at their bodies' poses, particles, cloth."""
        if self.model is None:
            raise RuntimeError("log_state: call set_model(model) first")
        r, m = self.renderer, self.model
        body_q = state.body_q.numpy() if m.body_count else np.zeros((0, 7))
        ident = np.array([0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0])
        if self._shape is not None:
            for s, (t, b, x, sc, visible) in enumerate(zip(*self._shape.values(), strict=True)):
                if not visible:
                    continue
                pos, rot = _compose(body_q[b] if b >= 0 else ident, x)
                pos, rot, name = tuple(pos), tuple(rot), f"shape_{s}"
                if t == GeoType.SPHERE:
                    r.render_sphere(name, pos, rot, float(sc[0]), color=_SHAPE_COLOR)
                elif t == GeoType.BOX:
                    r.render_box(name, pos, rot, tuple(map(float, sc)), color=_SHAPE_COLOR)
                elif t == GeoType.CAPSULE:
                    r.render_capsule(name, pos, rot, float(sc[0]), float(sc[1]), up_axis=2, color=_SHAPE_COLOR)
                elif t == GeoType.CYLINDER:
                    r.render_cylinder(name, pos, rot, float(sc[0]), float(sc[1]), up_axis=2, color=_SHAPE_COLOR)
                elif t == GeoType.CONE:
                    r.render_cone(name, pos, rot, float(sc[0]), float(sc[1]), up_axis=2, color=_SHAPE_COLOR)
                elif t == GeoType.ELLIPSOID:
                    points, tris = tessellate.sphere()
                    r.render_mesh(name, points * sc, tris, colors=_SHAPE_COLOR, pos=pos, rot=rot)
                elif t == GeoType.PLANE:
                    # The renderers' planes lie in their XZ plane; ours have normal +Z.
                    _, rot = _compose(np.array([0.0, 0.0, 0.0, *rot]), _Y_TO_Z)
                    r.render_plane(name, pos, tuple(rot), float(sc[0]) or 10.0, float(sc[1]) or 10.0,
                                   color=(0.7, 0.7, 0.7))
                elif t == GeoType.MESH or t == GeoType.HFIELD:
                    src = m.shape_source[s]
                    r.render_mesh(name, src.vertices * sc, src.indices, colors=_SHAPE_COLOR, pos=pos, rot=rot)
        if m.particle_count:
            q = state.particle_q.numpy()
            if self._tris is not None:
                r.render_mesh("cloth", q, self._tris, colors=_CLOTH_COLOR, update_topology=False)
            if self.show_particles:
                loose = np.setdiff1d(np.arange(m.particle_count), self._cloth_particles)
                if len(loose):
                    r.render_points("particles", q[loose], m.particle_radius.numpy()[loose], colors=_PARTICLE_COLOR)

    def end_frame(self) -> None:
        """Finish the frame."""
        self.renderer.end_frame()

    def close(self) -> None:
        """Write what was recorded."""
        self.renderer.save()


class ViewerUSD(_Viewer):
    """Records a simulation into the USD stage ``output_path`` (needs usd-core)."""

    def __init__(self, output_path: str, fps: int = 60, up_axis: str = "Z", num_frames: int | None = None,
                 scaling: float = 1.0) -> None:
        super().__init__(UsdRenderer(output_path, up_axis=up_axis, fps=fps, scaling=scaling))
        self.output_path = output_path


class ViewerImage(_Viewer):
    """Ray-casts each frame into a PNG in ``output_dir`` (``frame_00000.png``, ...; needs pillow); the last
    frame's pixels are ``renderer.image``. With ``gif_path`` the frames also become an animated GIF, written
    by :meth:`close`."""

    def __init__(self, output_dir: str | None, width: int = 640, height: int = 480, up_axis: str = "Z",
                 camera_pos: tuple = (0.0, 2.0, 6.0), camera_front: tuple = (0.0, -0.3, -1.0), fps: int = 60,
                 gif_path: str | None = None) -> None:
        super().__init__(ImageRenderer(output_dir, up_axis=up_axis, screen_width=width, screen_height=height,
                                       camera_pos=camera_pos, camera_front=camera_front, fps=fps))
        self.gif_path = gif_path
        self.fps = fps
        self._frames: list[np.ndarray] = []

    def end_frame(self) -> None:
        """Finish the frame (and keep it for the GIF)."""
        super().end_frame()
        if self.gif_path is not None:
            self._frames.append(self.renderer.rgb8())

    def snapshot(self, state: State, path: str) -> None:
        """Draw ``state`` as one frame and write it to ``path`` as a PNG."""
        self.begin_frame(self.time)
        self.log_state(state)
        self.end_frame()
        self.renderer.write_png(str(path))

    def close(self) -> None:
        """Write the GIF, when one was asked for and frames were drawn."""
        super().close()
        if self.gif_path is None or not self._frames:
            return
        try:
            from PIL import Image
        except ImportError as e:
            raise ImportError("ViewerImage writes GIFs with pillow: pip install pillow") from e
        first, *rest = (Image.fromarray(f) for f in self._frames)
        first.save(self.gif_path, save_all=True, append_images=rest, duration=max(int(1000 / self.fps), 20), loop=0)
