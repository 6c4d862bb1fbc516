"""Tiled rendering (OpenGLRenderer's `setup_tiled_rendering`): viewports that each draw their own shape
instances from their own camera, cut out again by `get_pixels(split_up_tiles=True)`."""

import numpy as np
import pytest

import loomwork as wp
from loomwork.render import ImageRenderer


def _scene(r: ImageRenderer) -> None:
    """Three shape instances (ids 0, 1, 2 in drawing order) and a point cloud drawn in every tile."""
    r.begin_frame(0.0)
    r.render_sphere("left", (-1.5, 0.0, 0.0), (0.0, 0.0, 0.0, 1.0), 0.6, color=(1.0, 0.0, 0.0))
    r.render_box("middle", (0.0, 0.0, 0.0), (0.0, 0.0, 0.0, 1.0), (0.5, 0.5, 0.5), color=(0.0, 1.0, 0.0))
    r.render_cylinder("right", (1.5, 0.0, 0.0), (0.0, 0.0, 0.0, 1.0), 0.5, 0.5, color=(0.0, 0.0, 1.0))
    r.render_points("dots", np.array([[0.0, 1.5, 0.0]]), 0.2, colors=(1.0, 1.0, 1.0))
    r.end_frame()


def _renderer(w: int = 96, h: int = 64) -> ImageRenderer:
    return ImageRenderer(screen_width=w, screen_height=h, camera_pos=(0.0, 0.0, 8.0), background_color=(0, 0, 0))


def test_each_tile_shows_its_instances_as_an_untiled_frame_of_its_size_would():
    """A tile listing instances {0, 2} equals a plain frame of the tile's size with instance 1 hidden;
    points appear in every tile; tiles sit on a column-major grid from the bottom-left."""
    tiled = _renderer(192, 128)
    tiled.setup_tiled_rendering([[0, 2], [1], [0, 1, 2], []])
    assert (tiled.num_tiles, tiled.tile_width, tiled.tile_height) == (4, 96, 64)
    _scene(tiled)
    tiles = wp.zeros((4, 64, 96, 3), dtype=float)
    assert tiled.get_pixels(tiles, split_up_tiles=True)
    tiles = tiles.numpy()

    plain = _renderer()
    _scene(plain)
    np.testing.assert_allclose(tiles[2], plain.image, atol=1e-6)  # all three instances
    plain._items["middle"].visible = False
    plain.end_frame()
    np.testing.assert_allclose(tiles[0], plain.image, atol=1e-6)
    assert tiles[1][32, 48, 1] > 0.3 and tiles[1][32, 48, [0, 2]].max() == 0.0 and tiles[1][32, 20].max() == 0.0
    assert tiles[3][32, 48].max() == 0.0 and tiles[3][:32].max() > 0.5  # only the dots
    # tile 0 is the bottom-left quarter of the frame, tile 1 the top-left (viewports count rows upwards)
    np.testing.assert_array_equal(tiled.image[64:, :96], tiles[0])
    np.testing.assert_array_equal(tiled.image[:64, :96], tiles[1])
    np.testing.assert_array_equal(tiled.image[:64, 96:], tiles[3])


def test_view_and_projection_matrices_give_tiles_their_own_cameras():
    """An OpenGL view matrix (column-major) equal to the renderer's camera reproduces the default tile;
    one looking from the side sees the spheres in a line; a projection matrix sets the field of view."""
    look_side = np.array([[0, 0, -1, 0], [0, 1, 0, 0], [1, 0, 0, -8], [0, 0, 0, 1]], dtype=float)  # eye at +x
    same = np.array([[1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, -8], [0, 0, 0, 1]], dtype=float)
    fov, near, far, aspect = 90.0, 0.5, 50.0, 96 / 64
    f = 1.0 / np.tan(np.radians(fov) / 2)
    proj = np.array([[f / aspect, 0, 0, 0], [0, f, 0, 0],
                     [0, 0, (far + near) / (near - far), 2 * far * near / (near - far)], [0, 0, -1, 0]])
    r = _renderer(96, 192)
    r.setup_tiled_rendering([[0, 1, 2]] * 3, tile_positions=[(0, 0), (0, 64), (0, 128)], tile_sizes=[(96, 64)] * 3,
                            view_matrices=[same.T.reshape(-1), look_side.T, same.T],
                            projection_matrices=[None, None, proj.T])
    _scene(r)
    tiles = wp.zeros((3, 64, 96, 3), dtype=float)
    r.get_pixels(tiles, split_up_tiles=True)
    tiles = tiles.numpy()
    plain = _renderer()
    _scene(plain)
    np.testing.assert_allclose(tiles[0], plain.image, atol=1e-5)
    side = tiles[1].max(axis=2) > 0.05
    assert side[:, 40:56].any() and not side[:, :20].any()  # the row of shapes seen end-on
    wide = tiles[2].max(axis=2) > 0.05
    assert wide.sum() < (plain.image.max(axis=2) > 0.05).sum() / 2  # 90 degrees: everything smaller
    depth = wp.zeros((3, 64, 96, 1), dtype=float)
    r.get_pixels(depth, split_up_tiles=True, mode="depth")
    assert depth.numpy()[0, 32, 48, 0] == pytest.approx(7.5, abs=0.05)


def test_update_tile_and_bad_input():
    r = _renderer(192, 128)
    r.setup_tiled_rendering([[0], [1]])
    r.update_tile(1, instances=[2])
    _scene(r)
    tiles = wp.zeros((2, 128, 96, 3), dtype=float)
    r.get_pixels(tiles, split_up_tiles=True)
    pure = tiles.numpy()[1].reshape(-1, 3)
    pure = pure[pure.min(axis=1) == 0.0]  # not the white dots drawn in every tile
    assert pure[:, 2].max() > 0.3 and pure[:, :2].max() == 0.0  # only the blue cylinder, instance 2
    with pytest.raises(IndexError, match="tile_id 2"):
        r.update_tile(2, instances=[0])
    with pytest.raises(ValueError, match=r"shape \(2, 64, 96, 3\).*\(2, 128, 96, 3\)"):
        r.get_pixels(wp.zeros((2, 64, 96, 3), dtype=float), split_up_tiles=True)
    r.update_tile(0, instances=[7])
    with pytest.raises(ValueError, match="tile 0 lists instance ids \\[7\\].*3 shape instances"):
        r.end_frame()
    with pytest.raises(TypeError, match=r"instances\[1\] must be a list"):
        r.setup_tiled_rendering([[0], 1])
    with pytest.raises(ValueError, match="16 values"):
        r.setup_tiled_rendering([[0]], view_matrices=[np.eye(3)])
    r.setup_tiled_rendering([[0], [1]], tile_positions=[(0, 0), (96, 0)], tile_sizes=[(96, 64), (50, 64)])
    assert r.tile_width is None
    with pytest.raises(RuntimeError, match="tiles of one size"):
        r.get_pixels(wp.zeros((2, 64, 96, 3), dtype=float), split_up_tiles=True)
    r.setup_tiled_rendering([[0, 1, 2], [0, 1, 2]], tile_positions=[(0, 0), (150, 100)],
                            tile_sizes=[(96, 64)] * 2)  # the second tile hangs off the top right corner
    r.end_frame()
    tiles = wp.zeros((2, 64, 96, 3), dtype=float)
    r.get_pixels(tiles, split_up_tiles=True)
    clipped = tiles.numpy()[1]
    np.testing.assert_array_equal(clipped[36:, :42], r.image[:28, 150:])  # the part on screen
    assert clipped[:36].max() == 0.0 and clipped[:, 42:].max() == 0.0  # off screen: zeros, as Warp's
    fresh = _renderer()
    with pytest.raises(RuntimeError, match="setup_tiled_rendering"):
        fresh.tiled_rendering = True
