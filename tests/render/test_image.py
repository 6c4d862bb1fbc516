"""ImageRenderer: ray-cast frames compared with the analytic projections of the shapes drawn."""

import math

import numpy as np
import pytest

import loomwork as wp
from loomwork.render import ImageRenderer

H, W, FOV = 96, 128, 40.0


def _renderer(**kw) -> ImageRenderer:
    args = dict(screen_width=W, screen_height=H, camera_fov=FOV, camera_pos=(0.0, 0.0, 6.0),
                background_color=(0.0, 0.0, 0.0), light_direction=(0.0, 0.0, 1.0), ambient=0.2)
    args.update(kw)
    return ImageRenderer(**args)


def _mask(r: ImageRenderer) -> np.ndarray:
    return r.image.max(axis=2) > 1e-3


def _pixels(length: float, dist: float) -> float:
    """The on-screen size in pixels of `length` across the view at distance `dist`."""
    return length / dist / math.tan(math.radians(FOV) / 2.0) * H / 2.0


def test_sphere_is_a_disk_of_the_projected_radius():
    """A sphere renders as a disk whose area gives the radius of its silhouette cone, centred, with its
    depth at the centre equal to the distance to its surface."""
    r = _renderer()
    r.render_sphere("ball", (0.0, 0.0, 0.0), (0.0, 0.0, 0.0, 1.0), 1.0, color=(1.0, 0.5, 0.25))
    r.end_frame()
    mask = _mask(r)
    expect = H / 2.0 * math.tan(math.asin(1.0 / 6.0)) / math.tan(math.radians(FOV) / 2.0)
    assert math.sqrt(mask.sum() / math.pi) == pytest.approx(expect, abs=0.5)
    rows, cols = np.nonzero(mask)
    assert rows.mean() == pytest.approx((H - 1) / 2.0, abs=0.1) and cols.mean() == pytest.approx((W - 1) / 2.0, abs=0.1)
    assert r.depth[H // 2, W // 2] == pytest.approx(5.0, abs=1e-3)
    assert r.depth[0, 0] == pytest.approx(r.far_plane)
    # lit head-on, the centre shows the full colour; the rim only the ambient part
    np.testing.assert_allclose(r.image[H // 2, W // 2], (1.0, 0.5, 0.25), rtol=0.01)


@pytest.mark.parametrize("light", [(1.0, 0.0, 0.0), (-1.0, 0.0, 0.0), (0.0, 1.0, 0.0)])
def test_lambert_shading_follows_the_light(light):
    """Each pixel of a sphere is colour * (ambient + (1 - ambient) max(n . l, 0)) with n the analytic normal."""
    r = _renderer(light_direction=light)
    r.render_sphere("ball", (0.0, 0.0, 0.0), (0.0, 0.0, 0.0, 1.0), 1.0, color=(1.0, 1.0, 1.0))
    r.end_frame()
    rows, cols = np.nonzero(_mask(r))
    t = math.tan(math.radians(FOV) / 2.0)
    x = (2.0 * (cols + 0.5) / W - 1.0) * t * W / H
    y = (1.0 - 2.0 * (rows + 0.5) / H) * t
    d = np.stack([x, y, -np.ones_like(x)], 1)
    d /= np.linalg.norm(d, axis=1, keepdims=True)
    o = np.array([0.0, 0.0, 6.0])
    b = d @ o
    hit = o + (-b - np.sqrt(b * b - (o @ o - 1.0)))[:, None] * d
    expect = 0.2 + 0.8 * np.maximum(hit @ np.array(light), 0.0)
    np.testing.assert_allclose(r.image[rows, cols, 0], expect, atol=2e-3)


def test_box_and_capsule_silhouettes():
    """A box facing the camera covers its projected rectangle; a capsule its rounded slot."""
    r = _renderer(camera_pos=(0.0, 0.0, 10.0))
    r.render_box("crate", (0.0, 0.0, 0.0), (0.0, 0.0, 0.0, 1.0), (1.0, 0.5, 0.5), color=(0.0, 1.0, 0.0))
    r.end_frame()
    rows, cols = np.nonzero(_mask(r))
    assert cols.max() - cols.min() + 1 == pytest.approx(_pixels(2.0, 9.5), abs=1.0)
    assert rows.max() - rows.min() + 1 == pytest.approx(_pixels(1.0, 9.5), abs=1.0)
    assert r.depth[H // 2, W // 2] == pytest.approx(9.5, abs=1e-3)
    r = _renderer(camera_pos=(0.0, 0.0, 10.0))
    r.render_capsule("pill", (0.0, 0.0, 0.0), (0.0, 0.0, 0.0, 1.0), 0.5, 1.0, up_axis=0, color=(1.0, 1.0, 1.0))
    r.end_frame()
    rows, cols = np.nonzero(_mask(r))
    assert cols.max() - cols.min() + 1 == pytest.approx(_pixels(3.0, 10.0), abs=1.5)
    assert rows.max() - rows.min() + 1 == pytest.approx(_pixels(1.0, 9.5), abs=1.5)
    assert r.depth[H // 2, W // 2] == pytest.approx(9.5, abs=5e-3)  # half a pixel off the axis


def test_mesh_vertex_colors_and_rotated_box():
    """A mesh's per-vertex colours are interpolated (pure near each corner); a box turned 45 degrees
    about the view axis shows its diagonal."""
    r = _renderer(camera_pos=(0.0, 0.0, 5.0), light_direction=(0.0, 0.0, 1.0), ambient=0.0)
    pts = [(-2.0, -1.5, 0.0), (2.0, -1.5, 0.0), (0.0, 1.5, 0.0)]
    r.render_mesh("tri", pts, [0, 1, 2], colors=np.eye(3))
    r.end_frame()

    def pixel(p):
        t = math.tan(math.radians(FOV) / 2.0)
        col = ((p[0] / 5.0) / (t * W / H) + 1.0) / 2.0 * W - 0.5
        row = (1.0 - (p[1] / 5.0) / t) / 2.0 * H - 0.5
        return int(round(row)), int(round(col))

    for k, p in enumerate(pts):
        inward = np.array(p) * 0.9 + np.array([0.0, -0.05, 0.0]) * 0.1  # just inside the corner
        assert np.argmax(r.image[pixel(inward)]) == k
    centre = r.image[pixel((0.0, -0.5, 0.0))]
    np.testing.assert_allclose(centre, (1 / 3, 1 / 3, 1 / 3), atol=0.05)
    r = _renderer(camera_pos=(0.0, 0.0, 10.0))
    half_turn = math.pi / 8.0  # 45 degrees about z
    turn = (0.0, 0.0, math.sin(half_turn), math.cos(half_turn))
    r.render_box("crate", (0.0, 0.0, 0.0), turn, (1.0, 1.0, 0.5), color=(1.0, 1.0, 1.0))
    r.end_frame()
    rows, cols = np.nonzero(_mask(r))
    assert rows.max() - rows.min() + 1 == pytest.approx(_pixels(2.0 * math.sqrt(2.0), 9.5), abs=1.5)


def test_up_axis_and_scaling_turn_the_scene():
    """With up_axis Z the scene's +Z shows upward; scaling enlarges it about the origin."""
    r = _renderer(up_axis="Z")
    r.render_sphere("ball", (0.0, 0.0, 1.5), (0.0, 0.0, 0.0, 1.0), 0.5, color=(1.0, 1.0, 1.0))
    r.end_frame()
    rows, _ = np.nonzero(_mask(r))
    assert rows.mean() < H / 2.0 - _pixels(1.5, 6.0) * 0.9
    small = _renderer()
    small.render_sphere("ball", (0.0, 0.0, 0.0), (0.0, 0.0, 0.0, 1.0), 0.5, color=(1.0, 1.0, 1.0))
    small.end_frame()
    big = _renderer(scaling=2.0)
    big.render_sphere("ball", (0.0, 0.0, 0.0), (0.0, 0.0, 0.0, 1.0), 0.5, color=(1.0, 1.0, 1.0))
    big.end_frame()
    assert big.depth[H // 2, W // 2] == pytest.approx(5.0, abs=1e-3)
    assert _mask(big).sum() > 3.5 * _mask(small).sum()


def test_frames_persist_update_by_name_and_write_pngs(tmp_path):
    """Shapes persist across frames and move when drawn again; each frame lands in a PNG equal to the image."""
    PIL = pytest.importorskip("PIL.Image")
    r = _renderer(output_dir=str(tmp_path))
    r.render_points("pts", wp.array([(-1.0, 0.0, 0.0)], dtype=wp.vec3), 0.3, colors=(1.0, 0.0, 0.0))
    r.render_line_list("seg", [(0.0, 1.0, 0.0), (1.0, 1.0, 0.0)], [0, 1], color=(0.0, 1.0, 0.0), radius=0.1)
    for i in range(2):
        r.begin_frame(i / 60.0)
        r.render_sphere("ball", (1.0 + i, -1.0, 0.0), (0.0, 0.0, 0.0, 1.0), 0.3, color=(0.0, 0.0, 1.0))
        r.end_frame()
        saved = np.asarray(PIL.open(tmp_path / f"frame_{i:05d}.png"))
        np.testing.assert_array_equal(saved, r.rgb8())
        blue = r.image[..., 2] > 0.1
        assert np.nonzero(blue)[1].mean() > W / 2 + i * 5
        assert (r.image[..., 0] > 0.1).any() and (r.image[..., 1] > 0.1).any()  # the points and the line stay
    target = wp.zeros((H, W, 3), dtype=float)
    assert r.get_pixels(target)
    np.testing.assert_allclose(target.numpy(), r.image)
    depth = wp.zeros((H, W, 1), dtype=float)
    r.get_pixels(depth, mode="depth")
    np.testing.assert_allclose(depth.numpy()[..., 0], r.depth)
    r.render_ref("copy", "ball", (-2.0, 2.0, 0.0), (0.0, 0.0, 0.0, 1.0), None)
    r.end_frame()
    assert (r.image[: H // 2, : W // 2, 2] > 0.1).any()


def test_bad_input_is_named():
    """Bad sizes, unknown references, bodies and wrong targets raise errors naming what is wrong."""
    r = _renderer()
    with pytest.raises(ValueError, match="render_ref: no shape named 'nothing'"):
        r.render_ref("x", "nothing", (0, 0, 0), (0, 0, 0, 1), None)
    with pytest.raises(ValueError, match="parent_body"):
        r.render_sphere("s", (0, 0, 0), (0, 0, 0, 1), 1.0, parent_body="arm")
    with pytest.raises(ValueError, match="render_mesh 'm': an index is out of range"):
        r.render_mesh("m", np.zeros((3, 3)), [0, 1, 3])
    with pytest.raises(RuntimeError, match="no frame has been rendered"):
        r.get_pixels(wp.zeros((H, W, 3), dtype=float))
    with pytest.raises(ValueError, match="camera_fov"):
        _renderer(camera_fov=0.0)
    r.render_points("none", np.zeros((0, 3)), 0.1)  # an empty set draws nothing
    r.end_frame()
    assert not _mask(r).any()
    with pytest.raises(ValueError, match="target_image has shape"):
        r.get_pixels(wp.zeros((2, 2, 3), dtype=float))
