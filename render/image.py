"""`ImageRenderer`: the drawing API of Warp's renderers, ray-cast on the kernel layer into images
(PNG frames with pillow), with no display or OpenGL needed.

Spheres (and points), capsules (and lines) and boxes are intersected analytically through a `wp.Bvh`
over their bounds; meshes, and the shapes drawn as meshes (cylinders, cones, arrows, planes, the
ground), through `wp.Mesh` and `mesh_query_ray`. Shading is Lambertian under one directional light
plus an ambient term, both sides of a surface lit alike."""

from __future__ import annotations

import dataclasses
import math
import os
from typing import Any

import numpy as np

import loomwork as wp

from . import tessellate
from .common import (
    AXES,
    as_numpy,
    axis_index,
    line_segments,
    name_color,
    points_or_raise,
    quat_rotate,
    vec_or_raise,
)

SPHERE, CAPSULE, BOX = 0, 1, 2
_UP_TO_Y = {  # rotations taking the scene's up axis onto the view's +Y
    "X": np.array([[0.0, -1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, 1.0]]),
    "Y": np.eye(3),
    "Z": np.array([[1.0, 0.0, 0.0], [0.0, 0.0, 1.0], [0.0, -1.0, 0.0]]),
}


@wp.func
def _hit_sphere(o: wp.vec3, d: wp.vec3, c: wp.vec3, r: float) -> wp.vec4:
    """(t, normal) of the ray o + t d (|d| = 1) entering the sphere; t < 0 for a miss."""
    oc = o - c
    b = wp.dot(oc, d)
    h = b * b - (wp.dot(oc, oc) - r * r)
    if h < 0.0:
        return wp.vec4(-1.0, 0.0, 0.0, 0.0)
    t = -b - wp.sqrt(h)
    if t < 0.0:
        t = -b + wp.sqrt(h)
    n = (o + t * d - c) / r
    return wp.vec4(t, n[0], n[1], n[2])


@wp.func
def _hit_capsule(o: wp.vec3, d: wp.vec3, a: wp.vec3, b: wp.vec3, r: float) -> wp.vec4:
    """(t, normal) of the first hit on the capsule: the nearest of its cylinder and its two end spheres."""
    best = _hit_sphere(o, d, a, r)
    end = _hit_sphere(o, d, b, r)
    if end[0] >= 0.0 and (best[0] < 0.0 or end[0] < best[0]):
        best = end
    ba = b - a
    oa = o - a
    baba = wp.dot(ba, ba)
    bard = wp.dot(ba, d)
    baoa = wp.dot(ba, oa)
    qa = baba - bard * bard
    if baba > 0.0 and qa > 1.0e-12 * baba:
        qb = baba * wp.dot(d, oa) - baoa * bard
        qc = baba * wp.dot(oa, oa) - baoa * baoa - r * r * baba
        h = qb * qb - qa * qc
        if h >= 0.0:
            t = (-qb - wp.sqrt(h)) / qa
            y = baoa + t * bard
            if t >= 0.0 and y > 0.0 and y < baba and (best[0] < 0.0 or t < best[0]):
                p = o + t * d
                n = (p - (a + ba * (y / baba))) / r
                best = wp.vec4(t, n[0], n[1], n[2])
    return best


@wp.func
def _slab(o: float, d: float, h: float) -> wp.vec2:
    """Entry and exit t of the ray through the slab [-h, h] along one axis."""
    if wp.abs(d) < 1.0e-20:
        if wp.abs(o) <= h:
            return wp.vec2(-1.0e30, 1.0e30)
        return wp.vec2(1.0e30, -1.0e30)
    t0 = (-h - o) / d
    t1 = (h - o) / d
    return wp.vec2(wp.min(t0, t1), wp.max(t0, t1))


@wp.func
def _hit_box(o: wp.vec3, d: wp.vec3, c: wp.vec3, half: wp.vec3, q: wp.quat) -> wp.vec4:
    """(t, normal) of the first hit on the box of half-extents `half` centred at c, rotated by q."""
    lo = wp.quat_rotate_inv(q, o - c)
    ld = wp.quat_rotate_inv(q, d)
    sx = _slab(lo[0], ld[0], half[0])
    sy = _slab(lo[1], ld[1], half[1])
    sz = _slab(lo[2], ld[2], half[2])
    near = wp.max(sx[0], wp.max(sy[0], sz[0]))
    far = wp.min(sx[1], wp.min(sy[1], sz[1]))
    if near > far or far < 0.0:
        return wp.vec4(-1.0, 0.0, 0.0, 0.0)
    n = wp.vec3(0.0, 0.0, 0.0)
    if near == sx[0]:
        n = wp.vec3(-wp.sign(ld[0]), 0.0, 0.0)
    elif near == sy[0]:
        n = wp.vec3(0.0, -wp.sign(ld[1]), 0.0)
    else:
        n = wp.vec3(0.0, 0.0, -wp.sign(ld[2]))
    t = near
    if t < 0.0:
        t = far
    n = wp.quat_rotate(q, n)
    return wp.vec4(t, n[0], n[1], n[2])


@wp.kernel
def _cast_rays(origin: wp.vec3, front: wp.vec3, right: wp.vec3, up: wp.vec3, tan_half_fov: float, aspect: float,
               t_near: float, t_far: float, bvh: wp.uint64, kinds: wp.array(dtype=wp.int32),
               pa: wp.array(dtype=wp.vec3), pb: wp.array(dtype=wp.vec3), prot: wp.array(dtype=wp.quat),
               pr: wp.array(dtype=float), pcolor: wp.array(dtype=wp.vec3),
               pinstance: wp.array(dtype=wp.int32), meshes: wp.array(dtype=wp.uint64),
               mesh_instance: wp.array(dtype=wp.int32), shown: wp.array(dtype=wp.int32),
               mesh_color: wp.array(dtype=wp.vec3), mesh_tri_offset: wp.array(dtype=wp.int32),
               mesh_vertex_offset: wp.array(dtype=wp.int32), tri_indices: wp.array(dtype=wp.int32),
               vertex_colors: wp.array(dtype=wp.vec3), light: wp.vec3, ambient: float, background: wp.vec3,
               image: wp.array2d(dtype=wp.vec3), depth: wp.array2d(dtype=float)):
    i, j = wp.tid()
    height = image.shape[0]
    width = image.shape[1]
    x = (2.0 * (float(j) + 0.5) / float(width) - 1.0) * tan_half_fov * aspect
    y = (1.0 - 2.0 * (float(i) + 0.5) / float(height)) * tan_half_fov
    d = wp.normalize(front + x * right + y * up)
    best = t_far
    normal = wp.vec3(0.0, 0.0, 0.0)
    color = background
    if kinds.shape[0] > 0:
        query = wp.bvh_query_ray(bvh, origin, d)
        k = 0
        while wp.bvh_query_next(query, k, best):
            h = wp.vec4(-1.0, 0.0, 0.0, 0.0)
            if pinstance[k] >= 0 and shown[pinstance[k]] == 0:
                continue
            if kinds[k] == 0:
                h = _hit_sphere(origin, d, pa[k], pr[k])
            elif kinds[k] == 1:
                h = _hit_capsule(origin, d, pa[k], pb[k], pr[k])
            else:
                h = _hit_box(origin, d, pa[k], pb[k], prot[k])
            if h[0] >= t_near and h[0] < best:
                best = h[0]
                normal = wp.vec3(h[1], h[2], h[3])
                color = pcolor[k]
    for m in range(meshes.shape[0]):
        if mesh_instance[m] >= 0 and shown[mesh_instance[m]] == 0:
            continue
        hit = wp.mesh_query_ray(meshes[m], origin, d, best)
        if hit.result and hit.t >= t_near:
            best = hit.t
            normal = hit.normal
            color = mesh_color[m]
            if mesh_vertex_offset[m] >= 0:
                base = mesh_tri_offset[m] + 3 * hit.face
                off = mesh_vertex_offset[m]
                w = 1.0 - hit.u - hit.v
                color = (hit.u * vertex_colors[off + tri_indices[base]]
                         + hit.v * vertex_colors[off + tri_indices[base + 1]]
                         + w * vertex_colors[off + tri_indices[base + 2]])
    if best < t_far:
        n = wp.normalize(normal)
        if wp.dot(n, d) > 0.0:
            n = -n
        color = color * (ambient + (1.0 - ambient) * wp.max(wp.dot(n, light), 0.0))
        depth[i, j] = best
    else:
        depth[i, j] = t_far
    image[i, j] = color


@dataclasses.dataclass
class _Item:
    """One named thing drawn: its geometry in its own frame and its pose."""

    kind: str  # "sphere", "capsule", "box" (analytic, arrays of many) or "mesh"
    data: dict
    pos: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros(3))
    rot: np.ndarray = dataclasses.field(default_factory=lambda: np.array([0.0, 0.0, 0.0, 1.0]))
    scale: np.ndarray = dataclasses.field(default_factory=lambda: np.ones(3))
    visible: bool = True
    template: bool = False
    shape: bool = True  # a shape instance (numbered for tiled rendering); points and lines are not
    mesh: Any = None  # the wp.Mesh of a mesh item at its current pose (built when drawn)

    def to_world(self, p: np.ndarray) -> np.ndarray:
        return (quat_rotate(self.rot, np.asarray(p, dtype=np.float64) * self.scale) + self.pos).astype(np.float32)


class ImageRenderer:
    """Draws with Warp's renderer API and ray-casts each frame into an RGB image on `end_frame()`,
    written as `frame_00000.png`, ... into `output_dir` when one is given (needs pillow); the last
    frame is also `image` / `depth` (NumPy) and `get_pixels(array)`.

    Shapes persist between frames and are updated by name, as in OpenGLRenderer. The camera works in a
    Y-up view space: the scene's `up_axis` is turned onto +Y and scaled by `scaling` first.

    Tiled rendering (`setup_tiled_rendering`, as OpenGLRenderer's) splits the frame into viewports, each
    drawing its own list of shape instances from its own camera; shape instances are numbered in the order
    their names were first drawn (templates excepted), and points and lines are drawn in every tile.
    """

    def __init__(self, output_dir: str | None = None, scaling: float = 1.0, fps: int = 60, up_axis: str = "Y",
                 screen_width: int = 1024, screen_height: int = 768, near_plane: float = 0.01,
                 far_plane: float = 1000.0, camera_fov: float = 45.0, camera_pos: tuple = (0.0, 2.0, 10.0),
                 camera_front: tuple = (0.0, 0.0, -1.0), camera_up: tuple = (0.0, 1.0, 0.0),
                 background_color: tuple = (0.53, 0.8, 0.92), light_direction: tuple = (0.4, 1.0, 0.6),
                 ambient: float = 0.25, device: Any = None) -> None:
        if int(screen_width) <= 0 or int(screen_height) <= 0:
            raise ValueError(f"ImageRenderer: the image size must be positive, got {screen_width} x {screen_height}")
        if not 0.0 < camera_fov < 180.0:
            raise ValueError(f"ImageRenderer: camera_fov must lie in (0, 180) degrees, got {camera_fov}")
        if not 0.0 <= near_plane < far_plane:
            raise ValueError(f"ImageRenderer: need 0 <= near_plane < far_plane, got {near_plane}, {far_plane}")
        self.output_dir = output_dir
        if output_dir is not None:
            os.makedirs(output_dir, exist_ok=True)
        self.scaling = float(scaling)
        self.fps = fps
        self.up_axis = AXES[axis_index(up_axis, "ImageRenderer")]
        self.screen_width, self.screen_height = int(screen_width), int(screen_height)
        self.near_plane, self.far_plane = float(near_plane), float(far_plane)
        self.camera_fov = float(camera_fov)
        self.camera_pos = vec_or_raise(camera_pos, 3, "camera_pos")
        self.camera_front = vec_or_raise(camera_front, 3, "camera_front")
        self.camera_up = vec_or_raise(camera_up, 3, "camera_up")
        self.background_color = vec_or_raise(background_color, 3, "background_color")
        self.light_direction = vec_or_raise(light_direction, 3, "light_direction")
        self.ambient = float(ambient)
        self.device = wp.get_device(device)
        self.time = 0.0
        self.frame = 0  # frames ended so far: the number of the next PNG
        self.image: np.ndarray | None = None
        self.depth: np.ndarray | None = None
        self._items: dict[str, _Item] = {}
        self._tile_instances: list[list[int]] | None = None
        self._tile_viewports: list[tuple[int, int, int, int]] | None = None
        self._tile_projection_matrices: list[np.ndarray | None] = []
        self._tile_view_matrices: list[np.ndarray | None] = []
        self._tile_width: int | None = None
        self._tile_height: int | None = None
        self._tiled_rendering = False

    # -- frames --------------------------------------------------------------------------------------
    def begin_frame(self, t: float | None = None) -> None:
        """Start a frame at time `t` (seconds; default: one 1/fps step after the last)."""
        self.time = self.time + 1.0 / self.fps if t is None else float(t)

    def end_frame(self) -> None:
        """Ray-cast the scene into `image` / `depth`, and write the PNG frame when an output_dir is set."""
        self.image, self.depth = self._render_tiles() if self._tiled_rendering else self._cast()
        if self.output_dir is not None:
            self.write_png(os.path.join(self.output_dir, f"frame_{self.frame:05d}.png"))
        self.frame += 1

    def save(self) -> bool:
        """Frames are written as they end; nothing is pending (kept so renderers are interchangeable)."""
        return True

    def write_png(self, path: str) -> None:
        """Write the last frame to `path` as an 8-bit RGB PNG."""
        if self.image is None:
            raise RuntimeError("ImageRenderer.write_png: no frame has been rendered yet (call end_frame first)")
        try:
            from PIL import Image
        except ImportError as e:
            raise ImportError("ImageRenderer writes PNG files with pillow: pip install pillow") from e
        Image.fromarray(self.rgb8()).save(path)

    def rgb8(self) -> np.ndarray:
        """The last frame as (height, width, 3) uint8."""
        return (np.clip(self.image, 0.0, 1.0) * 255.0 + 0.5).astype(np.uint8)

    def get_pixels(self, target_image: Any, split_up_tiles: bool = False, mode: str = "rgb",
                   use_uint8: bool = False) -> bool:
        """Copy the last frame into `target_image`: (height, width, 3) for mode "rgb" (float32 in [0, 1], or
        uint8 with use_uint8) or (height, width, 1) float32 for mode "depth"; with `split_up_tiles`,
        (num_tiles, tile_height, tile_width, channels), each tile's viewport cut out of the frame."""
        if self.image is None:
            raise RuntimeError("ImageRenderer.get_pixels: no frame has been rendered yet (call end_frame first)")
        if mode == "rgb":
            pixels = self.rgb8() if use_uint8 else self.image
        elif mode == "depth":
            pixels = self.depth[..., None]
        else:
            raise ValueError(f"ImageRenderer.get_pixels: mode must be 'rgb' or 'depth', got {mode!r}")
        if split_up_tiles:
            pixels = self._split_tiles(pixels)
        if tuple(target_image.shape) != pixels.shape:
            raise ValueError(f"ImageRenderer.get_pixels: target_image has shape {tuple(target_image.shape)}, "
                             f"the {mode} {'tiles are' if split_up_tiles else 'frame is'} {pixels.shape}")
        wp.copy(target_image, wp.array(np.ascontiguousarray(pixels, dtype=wp.dtype_to_numpy(target_image.dtype)),
                                       dtype=target_image.dtype, device=target_image.device))
        return True

    # -- tiled rendering -----------------------------------------------------------------------------
    def setup_tiled_rendering(self, instances: list[list[int]], rescale_window: bool = False,
                              tile_width: int | None = None, tile_height: int | None = None,
                              tile_ncols: int | None = None, tile_nrows: int | None = None,
                              tile_positions: list[tuple[int, int]] | None = None,
                              tile_sizes: list[tuple[int, int]] | None = None,
                              projection_matrices: list[Any] | None = None,
                              view_matrices: list[Any] | None = None) -> None:
        """Split the frame into one viewport per list of shape instance ids (Warp's arguments): a grid of
        `tile_ncols` x `tile_nrows` tiles of `tile_width` x `tile_height` pixels (by default the
        squarest grid filling the screen), or explicit `tile_positions` (x, y from the bottom-left, as in
        OpenGL) and `tile_sizes`. `projection_matrices` / `view_matrices` (OpenGL's column-major 16
        floats or 4 x 4) give tiles their own cameras; None follows the renderer's camera."""
        if not isinstance(instances, list) or not instances:
            raise ValueError(f"setup_tiled_rendering: instances must be a non-empty list of lists of shape "
                             f"instance ids, got {instances!r}")
        for index, item in enumerate(instances):
            if not isinstance(item, list):
                raise TypeError(f"setup_tiled_rendering: instances[{index}] must be a list, got {type(item).__name__}")
        n = len(instances)
        if tile_positions is None or tile_sizes is None:
            if tile_ncols is None or tile_nrows is None:
                tile_ncols = int(np.ceil(np.sqrt(n)))
                tile_nrows = int(np.ceil(n / tile_ncols))
            if tile_ncols * tile_nrows < n:
                raise ValueError(f"setup_tiled_rendering: {tile_ncols} x {tile_nrows} tiles cannot hold "
                                 f"{n} instance lists")
            width = int(tile_width or max(32, self.screen_width // tile_ncols))
            height = int(tile_height or max(32, self.screen_height // tile_nrows))
            viewports = [(i * width, j * height, width, height) for i in range(tile_ncols) for j in range(tile_nrows)]
            if rescale_window:
                self._resize(width * tile_ncols, height * tile_nrows)
        else:
            if len(tile_positions) != n or len(tile_sizes) != n:
                raise ValueError(f"setup_tiled_rendering: tile_positions and tile_sizes must each hold {n} entries, "
                                 f"got {len(tile_positions)} and {len(tile_sizes)}")
            viewports = [(int(x), int(y), int(w), int(h))
                         for (x, y), (w, h) in zip(tile_positions, tile_sizes, strict=True)]
            width = viewports[0][2] if all(v[2] == viewports[0][2] for v in viewports) else None
            height = viewports[0][3] if all(v[3] == viewports[0][3] for v in viewports) else None
        for v in viewports[:n]:
            if v[2] <= 0 or v[3] <= 0:
                raise ValueError(f"setup_tiled_rendering: a tile has size {v[2]} x {v[3]}; sizes must be positive")
        self._tile_instances = [list(map(int, item)) for item in instances]
        self._tile_viewports = viewports[:n]
        self._tile_width, self._tile_height = width, height
        self._tile_projection_matrices = [None if m is None else _gl_matrix(m, "projection matrix")
                                          for m in (projection_matrices or [None] * n)]
        self._tile_view_matrices = [None if m is None else _gl_matrix(m, "view matrix")
                                    for m in (view_matrices or [None] * n)]
        if len(self._tile_projection_matrices) != n or len(self._tile_view_matrices) != n:
            raise ValueError(f"setup_tiled_rendering: give one projection and view matrix (or None) per tile ({n})")
        self._tiled_rendering = True

    def update_tile(self, tile_id: int, instances: list[int] | None = None, projection_matrix: Any = None,
                    view_matrix: Any = None, tile_size: tuple[int, int] | None = None,
                    tile_position: tuple[int, int] | None = None) -> None:
        """Change one tile's instances, matrices, size or position."""
        if self._tile_instances is None:
            raise RuntimeError("update_tile: call setup_tiled_rendering() first")
        if not 0 <= tile_id < len(self._tile_instances):
            raise IndexError(f"update_tile: tile_id {tile_id} is out of range for {len(self._tile_instances)} tiles")
        if instances is not None:
            self._tile_instances[tile_id] = list(map(int, instances))
        if projection_matrix is not None:
            self._tile_projection_matrices[tile_id] = _gl_matrix(projection_matrix, "projection matrix")
        if view_matrix is not None:
            self._tile_view_matrices[tile_id] = _gl_matrix(view_matrix, "view matrix")
        x, y, w, h = self._tile_viewports[tile_id]
        if tile_size is not None:
            w, h = map(int, tile_size)
        if tile_position is not None:
            x, y = map(int, tile_position)
        self._tile_viewports[tile_id] = (x, y, w, h)

    @property
    def tiled_rendering(self) -> bool:
        """Whether frames are drawn as tiles (set up by setup_tiled_rendering)."""
        return self._tiled_rendering

    @tiled_rendering.setter
    def tiled_rendering(self, value: bool) -> None:
        if value and self._tile_instances is None:
            raise RuntimeError("tiled_rendering: call setup_tiled_rendering() first")
        self._tiled_rendering = bool(value)

    @property
    def num_tiles(self) -> int:
        """The number of tiles set up (0 without tiled rendering)."""
        return 0 if self._tile_instances is None else len(self._tile_instances)

    @property
    def tile_width(self) -> int | None:
        """The tiles' common width in pixels (None when they differ)."""
        return self._tile_width

    @property
    def tile_height(self) -> int | None:
        """The tiles' common height in pixels (None when they differ)."""
        return self._tile_height

    @property
    def num_instances(self) -> int:
        """The number of shape instances drawn so far (the ids tiles refer to)."""
        return sum(1 for item in self._items.values() if item.shape and not item.template)

    def _resize(self, width: int, height: int) -> None:
        self.screen_width, self.screen_height = int(width), int(height)

    def _split_tiles(self, pixels: np.ndarray) -> np.ndarray:
        """The tiles cut out of a full frame, (num_tiles, tile_height, tile_width, channels)."""
        if self._tile_viewports is None:
            raise RuntimeError("get_pixels(split_up_tiles=True) needs setup_tiled_rendering() first")
        if self._tile_width is None or self._tile_height is None or any(
                (v[2], v[3]) != (self._tile_width, self._tile_height) for v in self._tile_viewports):
            raise RuntimeError("get_pixels(split_up_tiles=True) needs tiles of one size, got "
                               f"{sorted({(v[2], v[3]) for v in self._tile_viewports})}")
        th, tw = self._tile_height, self._tile_width
        out = np.zeros((len(self._tile_viewports), th, tw, pixels.shape[-1]), dtype=pixels.dtype)
        for k, (x, y, _, _) in enumerate(self._tile_viewports):
            frame, tile = self._viewport(x, y, tw, th)
            out[k][tile] = pixels[frame]
        return out

    def _viewport(self, x: int, y: int, w: int, h: int) -> tuple[tuple[slice, slice], tuple[slice, slice]]:
        """The part of the frame a viewport covers and the same part of the tile's own image, as slices
        (empty where the viewport lies off screen). Viewports count rows from the bottom, images from the top."""
        top = self.screen_height - y - h
        r0, r1 = max(top, 0), max(min(top + h, self.screen_height), max(top, 0))
        c0, c1 = max(x, 0), max(min(x + w, self.screen_width), max(x, 0))
        return (slice(r0, r1), slice(c0, c1)), (slice(r0 - top, r1 - top), slice(c0 - x, c1 - x))

    # -- the scene -----------------------------------------------------------------------------------
    def _put(self, name: str, kind: str, data: dict, pos: Any = (0.0, 0.0, 0.0), rot: Any = (0.0, 0.0, 0.0, 1.0),
             scale: Any = (1.0, 1.0, 1.0), parent_body: str | None = None, is_template: bool = False,
             visible: bool = True, shape: bool = True) -> str:
        if parent_body is not None:
            raise ValueError(f"ImageRenderer: {name!r} has parent_body={parent_body!r}; this renderer draws in world "
                             "space (pass world poses)")
        self._items[name] = _Item(kind, data, vec_or_raise(pos, 3, f"{name!r} pos"),
                                  vec_or_raise(rot, 4, f"{name!r} rot (x, y, z, w)"),
                                  vec_or_raise(scale, 3, f"{name!r} scale"), bool(visible), bool(is_template),
                                  shape)
        return name

    @staticmethod
    def _color(color: Any, name: str, n: int = 1) -> np.ndarray:
        if color is None:
            return np.tile(np.asarray(name_color(name), dtype=np.float32), (n, 1))
        c = as_numpy(color, f"{name!r} color").reshape(-1, 3)
        if len(c) not in (1, n):
            raise ValueError(f"{name!r}: {len(c)} colors for {n} items (give 1 or one each)")
        return np.broadcast_to(c, (n, 3)).astype(np.float32)

    def render_sphere(self, name: str, pos: tuple, rot: tuple, radius: float, parent_body: str | None = None,
                      is_template: bool = False, color: tuple | None = None, visible: bool = True) -> str:
        """A sphere of `radius` at `pos`."""
        data = {"a": np.zeros((1, 3)), "r": np.array([float(radius)]), "color": self._color(color, name)}
        return self._put(name, "sphere", data, pos, rot, (1, 1, 1), parent_body, is_template, visible)

    def render_capsule(self, name: str, pos: tuple, rot: tuple, radius: float, half_height: float,
                       parent_body: str | None = None, is_template: bool = False, up_axis: int = 1,
                       color: tuple | None = None, visible: bool = True) -> str:
        """A capsule: a segment of 2 * `half_height` along local `up_axis`, inflated by `radius`."""
        tip = np.zeros(3)
        tip[axis_index(up_axis, "render_capsule")] = half_height
        data = {"a": -tip[None], "b": tip[None], "r": np.array([float(radius)]), "color": self._color(color, name)}
        return self._put(name, "capsule", data, pos, rot, (1, 1, 1), parent_body, is_template, visible)

    def render_box(self, name: str, pos: tuple, rot: tuple, extents: tuple, parent_body: str | None = None,
                   is_template: bool = False, color: tuple | None = None, visible: bool = True) -> str:
        """A box of half-extents `extents`."""
        data = {"a": np.zeros((1, 3)), "half": vec_or_raise(extents, 3, f"{name!r} extents")[None],
                "q": np.array([[0.0, 0.0, 0.0, 1.0]]), "color": self._color(color, name)}
        return self._put(name, "box", data, pos, rot, (1, 1, 1), parent_body, is_template, visible)

    def _put_mesh(self, name: str, mesh: tuple, color: Any, pos: Any, rot: Any, scale: Any,
                  parent_body: str | None, is_template: bool, visible: bool, vertex_colors: Any = None) -> str:
        data = {"points": mesh[0], "indices": mesh[1], "color": self._color(color, name)[0],
                "vertex_colors": vertex_colors}
        return self._put(name, "mesh", data, pos, rot, scale, parent_body, is_template, visible)

    def render_cylinder(self, name: str, pos: tuple, rot: tuple, radius: float, half_height: float,
                        parent_body: str | None = None, is_template: bool = False, up_axis: int = 1,
                        color: tuple | None = None, visible: bool = True) -> str:
        """A closed cylinder of height 2 * `half_height` along local `up_axis`."""
        mesh = tessellate.frustum(radius, radius, -half_height, half_height, axis_index(up_axis, "render_cylinder"))
        return self._put_mesh(name, mesh, color, pos, rot, (1, 1, 1), parent_body, is_template, visible)

    def render_cone(self, name: str, pos: tuple, rot: tuple, radius: float, half_height: float,
                    parent_body: str | None = None, is_template: bool = False, up_axis: int = 1,
                    color: tuple | None = None, visible: bool = True) -> str:
        """A cone of height 2 * `half_height` along local `up_axis`, its base at -half_height."""
        mesh = tessellate.frustum(radius, 0.0, -half_height, half_height, axis_index(up_axis, "render_cone"))
        return self._put_mesh(name, mesh, color, pos, rot, (1, 1, 1), parent_body, is_template, visible)

    def render_arrow(self, name: str, pos: tuple, rot: tuple, base_radius: float, base_height: float,
                     cap_radius: float | None = None, cap_height: float | None = None,
                     parent_body: str | None = None, is_template: bool = False, up_axis: int = 1,
                     color: tuple | None = None, visible: bool = True) -> str:
        """An arrow along local `up_axis` from `pos`: a shaft of `base_height` and a cone head
        (`cap_radius` defaults to 1.8 * base_radius, `cap_height` to 0.18 * base_height)."""
        cap_radius = 1.8 * base_radius if cap_radius is None else cap_radius
        cap_height = 0.18 * base_height if cap_height is None else cap_height
        axis = axis_index(up_axis, "render_arrow")
        mesh = tessellate.merge(tessellate.frustum(base_radius, base_radius, 0.0, base_height, axis),
                                tessellate.frustum(cap_radius, 0.0, base_height, base_height + cap_height, axis))
        return self._put_mesh(name, mesh, color, pos, rot, (1, 1, 1), parent_body, is_template, visible)

    def render_plane(self, name: str, pos: tuple, rot: tuple, width: float, length: float,
                     color: tuple = (1.0, 1.0, 1.0), color2: Any = None, parent_body: str | None = None,
                     is_template: bool = False, u_scaling: float = 1.0, v_scaling: float = 1.0,
                     visible: bool = True) -> str:
        """A quad of half-sizes `width` (x) and `length` (z) in its local XZ plane, in `color`
        (`color2`, `u_scaling`, `v_scaling` shade a checker in OpenGLRenderer and are not drawn here)."""
        w, h = (width if width > 0 else 100.0), (length if length > 0 else 100.0)
        mesh = tessellate.quad([(-w, 0, -h), (w, 0, -h), (w, 0, h), (-w, 0, h)])
        return self._put_mesh(name, mesh, color, pos, rot, (1, 1, 1), parent_body, is_template, visible)

    def render_ground(self, size: float = 1000.0, plane: Any = None) -> str:
        """A square ground of half-size `size` across the up axis through the origin, or on the plane
        (nx, ny, nz, d) with points x where n . x = d."""
        up = np.zeros(3)
        up[AXES.index(self.up_axis)] = 1.0
        normal, offset = up, 0.0
        if plane is not None:
            p = vec_or_raise(plane, 4, "render_ground plane (nx, ny, nz, d)")
            if not np.linalg.norm(p[:3]) > 0:
                raise ValueError("render_ground: the plane's normal is zero")
            normal, offset = p[:3] / np.linalg.norm(p[:3]), p[3] / np.linalg.norm(p[:3])
        u = np.cross(normal, up if abs(normal @ up) < 0.9 else np.roll(up, 1))
        u /= np.linalg.norm(u)
        v = np.cross(normal, u)
        c = normal * offset
        corners = [c + size * (su * u + sv * v) for su, sv in ((-1, -1), (1, -1), (1, 1), (-1, 1))]
        return self._put_mesh("ground", tessellate.quad(corners), (0.6, 0.6, 0.6), (0, 0, 0), (0, 0, 0, 1),
                              (1, 1, 1), None, False, True)

    def render_mesh(self, name: str, points: Any, indices: Any, colors: Any = None, pos: tuple = (0.0, 0.0, 0.0),
                    rot: tuple = (0.0, 0.0, 0.0, 1.0), scale: tuple = (1.0, 1.0, 1.0), update_topology: bool = False,
                    parent_body: str | None = None, is_template: bool = False, smooth_shading: bool = True,
                    visible: bool = True) -> str:
        """A triangle mesh (`indices`: three per triangle, kept from the first call unless
        `update_topology`), in one colour or one per point; shaded per face."""
        pts = points_or_raise(points, f"render_mesh {name!r} points")
        old = self._items.get(name)
        if old is not None and old.kind == "mesh" and not update_topology and len(old.data["points"]) == len(pts):
            tris = old.data["indices"]
        else:
            tris = as_numpy(indices, f"render_mesh {name!r} indices", dtype=np.int32).reshape(-1)
            if tris.size % 3 or tris.size == 0:
                raise ValueError(f"render_mesh {name!r}: indices must hold three entries per triangle, got {tris.size}")
            if tris.min() < 0 or tris.max() >= len(pts):
                raise ValueError(f"render_mesh {name!r}: an index is out of range for {len(pts)} points")
        cols = None if colors is None else as_numpy(colors, f"render_mesh {name!r} colors").reshape(-1, 3)
        per_vertex = cols is not None and len(cols) == len(pts) and len(pts) > 1
        if cols is not None and not per_vertex and len(cols) != 1:
            raise ValueError(f"render_mesh {name!r}: {len(cols)} colors for {len(pts)} points (give 1 or one each)")
        return self._put_mesh(name, (pts, tris), None if per_vertex else cols, pos, rot, scale, parent_body,
                              is_template, visible, cols if per_vertex else None)

    def render_ref(self, name: str, path: str, pos: tuple, rot: tuple, scale: tuple | None,
                   color: tuple | None = None) -> None:
        """Draw another copy of the shape or template named `path` under `name`, at a new pose."""
        if path not in self._items:
            raise ValueError(f"ImageRenderer.render_ref: no shape named {path!r} was drawn before (render_ref copies "
                             "a shape or template rendered earlier, as OpenGLRenderer's does)")
        src = self._items[path]
        data = dict(src.data)
        if color is not None:
            data["color"] = self._color(color, name, len(np.atleast_2d(data["color"])))
            data["vertex_colors"] = None
            if src.kind == "mesh":
                data["color"] = data["color"][0]
        self._put(name, src.kind, data, pos, rot, src.scale if scale is None else scale, shape=src.shape)

    def render_points(self, name: str, points: Any, radius: Any, colors: Any = None, as_spheres: bool = True,
                      visible: bool = True) -> str:
        """Points drawn as spheres of `radius` (one, or one per point), `colors` one RGB or one per point
        (a ray caster has no flat point sprites, so `as_spheres=False` draws spheres too)."""
        pts = points_or_raise(points, f"render_points {name!r} points")
        radii = as_numpy(radius, f"render_points {name!r} radius").reshape(-1)
        if radii.size not in (1, len(pts)):
            raise ValueError(f"render_points {name!r}: {radii.size} radii for {len(pts)} points")
        data = {"a": pts, "r": np.broadcast_to(radii, (len(pts),)), "color": self._color(colors, name, len(pts))}
        return self._put(name, "sphere", data, visible=visible, shape=False)

    def _render_lines(self, name: str, starts: np.ndarray, ends: np.ndarray, color: Any, radius: float,
                      visible: bool) -> str:
        data = {"a": starts, "b": ends, "r": np.full(len(starts), float(radius)),
                "color": self._color(color, name, len(starts))}
        return self._put(name, "capsule", data, visible=visible, shape=False)

    def render_line_list(self, name: str, vertices: Any, indices: Any, color: tuple | None = None,
                         radius: float = 0.01, visible: bool = True) -> str:
        """Segments vertices[indices[2i]] -> vertices[indices[2i + 1]], drawn as capsules of `radius`."""
        starts, ends = line_segments(vertices, indices, f"render_line_list {name!r}")
        return self._render_lines(name, starts, ends, color, radius, visible)

    def render_line_strip(self, name: str, vertices: Any, color: tuple | None = None, radius: float = 0.01,
                          visible: bool = True) -> str:
        """The polyline through `vertices`, drawn as capsules of `radius`."""
        starts, ends = line_segments(vertices, None, f"render_line_strip {name!r}")
        return self._render_lines(name, starts, ends, color, radius, visible)

    # -- ray casting ---------------------------------------------------------------------------------
    def _instance_ids(self) -> dict[str, int]:
        """Each shape instance's id (-1 for points and lines, drawn in every tile)."""
        ids, n = {}, 0
        for name, item in self._items.items():
            if item.template:
                continue
            ids[name] = n if item.shape else -1
            n += item.shape
        return ids

    def _analytic(self, ids: dict[str, int]) -> dict:
        """The spheres, capsules and boxes to draw, in world space, as flat arrays."""
        rows = {"kind": [], "a": [], "b": [], "q": [], "r": [], "color": [], "instance": []}
        for name, item in self._items.items():
            if not item.visible or item.template or item.kind == "mesh" or len(item.data["color"]) == 0:
                continue
            d, n = item.data, len(item.data["color"])
            mean_scale = float(np.mean(np.abs(item.scale)))
            a = item.to_world(d["a"])
            if item.kind == "sphere":
                b, r, q = a, d["r"] * mean_scale, np.tile([0.0, 0.0, 0.0, 1.0], (n, 1))
            elif item.kind == "capsule":
                b, r, q = item.to_world(d["b"]), d["r"] * mean_scale, np.tile([0.0, 0.0, 0.0, 1.0], (n, 1))
            else:
                b, r = np.abs(d["half"] * item.scale), np.zeros(n)
                q = np.array([_quat_mul(item.rot, qi) for qi in d["q"]])
            rows["kind"].append(np.full(n, {"sphere": SPHERE, "capsule": CAPSULE, "box": BOX}[item.kind]))
            rows["instance"].append(np.full(n, ids[name]))
            for key, value in (("a", a), ("b", b), ("q", q), ("color", d["color"])):
                rows[key].append(np.asarray(value, dtype=np.float32).reshape(n, -1))
            rows["r"].append(np.asarray(r, dtype=np.float32).reshape(n))
        return {k: (np.concatenate(v) if v else None) for k, v in rows.items()}

    @staticmethod
    def _bounds(p: dict) -> tuple:
        kind, a, b, r = p["kind"], p["a"], p["b"], p["r"][:, None]
        lower = np.minimum(a, b) - r
        upper = np.maximum(a, b) + r
        boxes = kind == BOX
        if boxes.any():  # a rotated box lies within the sphere through its corners
            reach = np.linalg.norm(b[boxes], axis=1, keepdims=True)
            lower[boxes], upper[boxes] = a[boxes] - reach, a[boxes] + reach
        return lower, upper

    def _scene(self) -> tuple[list, list, int]:
        """The kernel's scene arguments (primitives, then meshes), the objects keeping them alive, and
        the number of shape instances."""
        dev = self.device
        ids = self._instance_ids()
        prims = self._analytic(ids)
        keep: list = []
        fields = (("kind", wp.int32, np.int32), ("a", wp.vec3, np.float32), ("b", wp.vec3, np.float32),
                  ("q", wp.quat, np.float32), ("r", float, np.float32), ("color", wp.vec3, np.float32),
                  ("instance", wp.int32, np.int32))
        if prims["kind"] is not None:
            lower, upper = self._bounds(prims)
            bvh = wp.Bvh(wp.array(lower, dtype=wp.vec3, device=dev), wp.array(upper, dtype=wp.vec3, device=dev))
            keep.append(bvh)
            arrays = [wp.array(prims[k].astype(npt), dtype=wt, device=dev) for k, wt, npt in fields]
        else:
            bvh = None
            arrays = [wp.zeros(0, dtype=wt, device=dev) for _, wt, _ in fields]
        meshes = [(name, it) for name, it in self._items.items()
                  if it.kind == "mesh" and it.visible and not it.template]
        mesh_ids, instances, colors, tri_off, vert_off, tris, vcols = [], [], [], [], [], [], []
        n_tri = n_vert = 0
        for name, item in meshes:
            world = item.to_world(item.data["points"])
            item.mesh = wp.Mesh(wp.array(world, dtype=wp.vec3, device=dev),
                                wp.array(item.data["indices"], dtype=wp.int32, device=dev))
            mesh_ids.append(item.mesh.id)
            instances.append(ids[name])
            colors.append(item.data["color"])
            tri_off.append(n_tri)
            tris.append(item.data["indices"])
            n_tri += len(item.data["indices"])
            if item.data["vertex_colors"] is None:
                vert_off.append(-1)
            else:
                vert_off.append(n_vert)
                vcols.append(item.data["vertex_colors"])
                n_vert += len(item.data["vertex_colors"])

        def arr(values: list, dtype: Any, np_dtype: Any, width: int = 0) -> Any:
            """Scalars, or rows of `width`, joined into one device array (empty when there are none)."""
            parts = [np.asarray(v, dtype=np_dtype).reshape((-1, width) if width else -1) for v in values]
            data = np.concatenate(parts) if parts else np.zeros((0, width) if width else 0, dtype=np_dtype)
            return wp.array(data, dtype=dtype, device=dev)

        prim_args = [wp.uint64(bvh.id if bvh is not None else 0), *arrays]
        mesh_args = [arr([np.uint64(i) for i in mesh_ids], wp.uint64, np.uint64),
                     arr(instances, wp.int32, np.int32)]
        rest = [arr(colors, wp.vec3, np.float32, 3), arr(tri_off, wp.int32, np.int32),
                arr(vert_off, wp.int32, np.int32), arr(tris, wp.int32, np.int32), arr(vcols, wp.vec3, np.float32, 3)]
        return [prim_args, mesh_args, rest], keep, sum(v >= 0 for v in ids.values())

    def _camera(self, view: np.ndarray | None) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The camera's position, front, right and up in the Y-up view space, from the renderer's camera
        or an OpenGL view matrix (world-to-camera, looking down -z)."""
        if view is not None:
            rot, t = view[:3, :3], view[:3, 3]
            return -rot.T @ t, -rot[2], rot[0], rot[1]
        front = self.camera_front / np.linalg.norm(self.camera_front)
        right = np.cross(front, self.camera_up)
        if not np.linalg.norm(right) > 1e-9:
            raise ValueError("ImageRenderer: camera_front and camera_up are parallel")
        right /= np.linalg.norm(right)
        return self.camera_pos, front, right, np.cross(right, front)

    def _cast_view(self, scene: list, width: int, height: int, shown: Any, view: np.ndarray | None = None,
                   projection: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """One image (and depth) of `width` x `height` of the instances `shown` marks."""
        dev = self.device
        to_view = _UP_TO_Y[self.up_axis]
        pos, front, right, up = self._camera(view)
        tan_half, aspect = math.tan(math.radians(self.camera_fov) / 2.0), width / height
        near, far = self.near_plane, self.far_plane
        if projection is not None:  # a perspective matrix: P00 = 1 / (aspect tan), P11 = 1 / tan
            tan_half, aspect = 1.0 / projection[1, 1], projection[1, 1] / projection[0, 0]
            c, d = projection[2, 2], projection[2, 3]
            near, far = d / (c - 1.0), d / (c + 1.0)

        def world(v: np.ndarray) -> Any:
            """A view-space vector in the scene's frame."""
            return wp.vec3(*(to_view.T @ v))

        light = to_view.T @ (self.light_direction / np.linalg.norm(self.light_direction))
        prim_args, mesh_args, rest = scene
        image = wp.zeros((height, width), dtype=wp.vec3, device=dev)
        depth = wp.zeros((height, width), dtype=float, device=dev)
        wp.launch(_cast_rays, dim=(height, width), device=dev, inputs=[
            world(pos / self.scaling), world(front), world(right), world(up), tan_half, aspect,
            near / self.scaling, far / self.scaling, *prim_args, *mesh_args, shown, *rest, wp.vec3(*light),
            self.ambient, wp.vec3(*self.background_color), image, depth])
        return image.numpy(), depth.numpy() * self.scaling

    def _cast(self) -> tuple[np.ndarray, np.ndarray]:
        """The whole frame from the renderer's camera, every instance shown."""
        scene, _keep, n = self._scene()
        shown = wp.full(max(n, 1), 1, dtype=wp.int32, device=self.device)
        return self._cast_view(scene, self.screen_width, self.screen_height, shown)

    def _render_tiles(self) -> tuple[np.ndarray, np.ndarray]:
        """The frame as tiles: each viewport ray-cast from its camera with its instances; background elsewhere."""
        scene, _keep, n = self._scene()
        height, width = self.screen_height, self.screen_width
        image = np.broadcast_to(self.background_color.astype(np.float32), (height, width, 3)).copy()
        depth = np.full((height, width), self.far_plane, dtype=np.float32)
        for k, (x, y, w, h) in enumerate(self._tile_viewports):
            mask = np.zeros(max(n, 1), dtype=np.int32)
            ids = np.asarray(self._tile_instances[k], dtype=np.int64)
            if ids.size and (ids.min() < 0 or ids.max() >= n):
                raise ValueError(f"tiled rendering: tile {k} lists instance ids {sorted(set(ids.tolist()))}, but "
                                 f"there are {n} shape instances (ids 0..{n - 1})")
            mask[ids] = 1
            tile_rgb, tile_depth = self._cast_view(scene, w, h, wp.array(mask, dtype=wp.int32, device=self.device),
                                                   self._tile_view_matrices[k], self._tile_projection_matrices[k])
            frame, tile = self._viewport(x, y, w, h)
            image[frame] = tile_rgb[tile]
            depth[frame] = tile_depth[tile]
        return image, depth


def _gl_matrix(m: Any, what: str) -> np.ndarray:
    """A 4 x 4 matrix from OpenGL's column-major 16 floats (a 4 x 4 input is read the same way, as Warp does)."""
    flat = np.asarray(m, dtype=np.float64).reshape(-1)
    if flat.size != 16:
        raise ValueError(f"tiled rendering: a {what} needs 16 values (4 x 4), got {flat.size}")
    return flat.reshape(4, 4).T


def _quat_mul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The product a * b of quaternions in (x, y, z, w) order."""
    av, aw, bv, bw = np.asarray(a[:3]), a[3], np.asarray(b[:3]), b[3]
    return np.append(aw * bv + bw * av + np.cross(av, bv), aw * bw - av @ bv)
