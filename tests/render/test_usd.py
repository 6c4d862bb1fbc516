"""UsdRenderer: stages written by loomwork.render, read back with pxr."""

import numpy as np
import pytest

import loomwork as wp
from loomwork.render import UsdRenderer

pxr = pytest.importorskip("pxr", reason="usd-core is not installed")
from pxr import Usd, UsdGeom  # noqa: E402


def _stage(path):
    return Usd.Stage.Open(str(path))


def test_points_time_samples_and_extents(tmp_path):
    """Points written over frames come back per time code with their radii, colours and extents."""
    rng = np.random.default_rng(0)
    frames = [rng.random((6, 3)).astype(np.float32) for _ in range(3)]
    r = UsdRenderer(str(tmp_path / "p.usda"), fps=24)
    for i, pts in enumerate(frames):
        r.begin_frame(i / 24.0)
        r.render_points("balls", wp.array(pts, dtype=wp.vec3), 0.05, colors=(1.0, 0.0, 0.0))
        r.render_points("dots", pts, np.linspace(0.1, 0.6, 6), as_spheres=False)
        r.end_frame()
    assert r.save()
    stage = _stage(tmp_path / "p.usda")
    assert stage.GetEndTimeCode() == 2.0 and stage.GetFramesPerSecond() == 24.0
    balls = UsdGeom.PointInstancer.Get(stage, "/root/balls")
    dots = UsdGeom.Points.Get(stage, "/root/dots")
    assert balls.GetPositionsAttr().GetTimeSamples() == [0.0, 1.0, 2.0]
    for i, pts in enumerate(frames):
        np.testing.assert_allclose(np.array(balls.GetPositionsAttr().Get(i)), pts, rtol=1e-6)
        np.testing.assert_allclose(np.array(balls.GetScalesAttr().Get(i)), np.full((6, 3), 0.05), rtol=1e-6)
        lo, hi = np.array(balls.GetExtentAttr().Get(i))
        np.testing.assert_allclose(lo, pts.min(axis=0) - 0.05, rtol=1e-5)
        np.testing.assert_allclose(hi, pts.max(axis=0) + 0.05, rtol=1e-5)
        np.testing.assert_allclose(np.array(dots.GetPointsAttr().Get(i)), pts, rtol=1e-6)
        np.testing.assert_allclose(np.array(dots.GetWidthsAttr().Get(i)), 2 * np.linspace(0.1, 0.6, 6), rtol=1e-6)
        bound = dots.ComputeExtent(dots.GetPointsAttr().Get(i), dots.GetWidthsAttr().Get(i))
        np.testing.assert_allclose(np.array(dots.GetExtentAttr().Get(i)), np.array(bound), rtol=1e-5)
    color = UsdGeom.PrimvarsAPI(balls).GetPrimvar("displayColor").Get(0)
    assert tuple(color[0]) == (1.0, 0.0, 0.0)


def test_point_colors_may_start_on_a_later_frame():
    """Points first drawn without colours take per-point colours on a later frame."""
    r = UsdRenderer(Usd.Stage.CreateInMemory())
    r.begin_frame(0.0)
    r.render_points("p", np.zeros((2, 3)), 0.1)
    r.begin_frame(1.0 / 60.0)
    r.render_points("p", np.ones((2, 3)), 0.1, colors=[(1, 0, 0), (0, 1, 0)])
    color = UsdGeom.PrimvarsAPI(UsdGeom.PointInstancer.Get(r.stage, "/root/p")).GetPrimvar("displayColor")
    assert color.GetInterpolation() == "vertex"
    np.testing.assert_allclose(np.array(color.Get(1)), [(1, 0, 0), (0, 1, 0)])


def test_mesh_points_topology_and_colors(tmp_path):
    """A mesh keeps its topology, writes its points and per-vertex colours each frame, and its transform."""
    pts = np.array([[0, 0, 0], [1, 0, 0], [1, 1, 0], [0, 1, 0]], dtype=np.float32)
    cols = np.eye(4, 3, dtype=np.float32)
    r = UsdRenderer(str(tmp_path / "m.usda"), up_axis="Z", scaling=2.0)
    for i in range(2):
        r.begin_frame(i / 60.0)
        r.render_mesh("quad", pts + i, [0, 1, 2, 0, 2, 3], colors=cols, pos=(i, 0, 0), rot=(0, 0, 0.6, 0.8))
    r.save()
    stage = _stage(tmp_path / "m.usda")
    assert UsdGeom.GetStageUpAxis(stage) == "Z"
    mesh = UsdGeom.Mesh.Get(stage, "/root/quad")
    assert list(mesh.GetFaceVertexIndicesAttr().Get(0)) == [0, 1, 2, 0, 2, 3]
    assert list(mesh.GetFaceVertexCountsAttr().Get(0)) == [3, 3]
    np.testing.assert_allclose(np.array(mesh.GetPointsAttr().Get(1)), pts + 1)
    np.testing.assert_allclose(np.array(mesh.GetExtentAttr().Get(1)), [[1, 1, 1], [2, 2, 1]])
    np.testing.assert_allclose(np.array(mesh.GetDisplayColorAttr().Get(1)), cols)
    world = np.array(mesh.ComputeLocalToWorldTransform(1.0))  # row-vector convention: p @ M
    rot = np.array([[0.28, 0.96, 0], [-0.96, 0.28, 0], [0, 0, 1]])  # z-rotation of q = (0, 0, 0.6, 0.8)
    expect = (np.array([1.0, 0.0, 0.0]) @ rot + [1.0, 0.0, 0.0]) * 2.0  # then /root's scaling
    np.testing.assert_allclose(np.append([1.0, 0.0, 0.0], 1.0) @ world, np.append(expect, 1.0), atol=1e-5)


def test_shapes_lines_and_visibility(tmp_path):
    """Analytic shapes take their sizes and axes, lines become instanced segments of the right length and
    direction, and visibility is sampled per frame."""
    r = UsdRenderer(str(tmp_path / "s.usda"))
    r.begin_frame(0.0)
    r.render_sphere("ball", (1, 2, 3), (0, 0, 0, 1), 0.5, color=(0, 1, 0))
    r.render_box("crate", (0, 0, 0), (0, 0, 0, 1), (1, 2, 3))
    r.render_capsule("pill", (0, 0, 0), (0, 0, 0, 1), 0.25, 1.0, up_axis=0)
    r.render_cone("cone", (0, 0, 0), (0, 0, 0, 1), 0.3, 0.5)
    r.render_arrow("arrow", (0, 0, 0), (0, 0, 0, 1), 0.1, 2.0, 0.2, 0.5, up_axis=2)
    r.render_line_strip("rope", [(0, 0, 0), (0, 0, 2), (3, 0, 2)], color=(1, 1, 0), radius=0.05)
    r.begin_frame(1.0 / 60.0)
    r.render_sphere("ball", (1, 2, 3), (0, 0, 0, 1), 0.5, visible=False)
    r.save()
    stage = _stage(tmp_path / "s.usda")
    ball = UsdGeom.Sphere.Get(stage, "/root/ball")
    assert ball.GetRadiusAttr().Get(0) == 0.5
    assert ball.GetVisibilityAttr().Get(0) == "inherited" and ball.GetVisibilityAttr().Get(1) == "invisible"
    np.testing.assert_allclose(np.array(ball.ComputeLocalToWorldTransform(0).ExtractTranslation()), [1, 2, 3])
    cube = UsdGeom.Cube.Get(stage, "/root/crate")
    bbox = UsdGeom.BBoxCache(0, ["default"]).ComputeWorldBound(cube.GetPrim()).ComputeAlignedRange()
    np.testing.assert_allclose(np.array(bbox.GetMin()), [-1, -2, -3])
    pill = UsdGeom.Capsule.Get(stage, "/root/pill")
    assert pill.GetAxisAttr().Get() == "X" and pill.GetHeightAttr().Get(0) == 2.0
    np.testing.assert_allclose(np.array(pill.GetExtentAttr().Get(0)), [[-1.25, -0.25, -0.25], [1.25, 0.25, 0.25]])
    cap = UsdGeom.Cone.Get(stage, "/root/arrow/cap")
    assert cap.GetAxisAttr().Get() == "Z" and cap.GetHeightAttr().Get(0) == 0.5
    np.testing.assert_allclose(np.array(cap.ComputeLocalToWorldTransform(0).ExtractTranslation()), [0, 0, 2.25])
    rope = UsdGeom.PointInstancer.Get(stage, "/root/rope")
    np.testing.assert_allclose(np.array(rope.GetPositionsAttr().Get(0)), [[0, 0, 1], [1.5, 0, 2]])
    np.testing.assert_allclose(np.array(rope.GetScalesAttr().Get(0))[:, 2], [2, 3])
    xforms = rope.ComputeInstanceTransformsAtTime(0, 0)
    for xf, (a, b) in zip(xforms, [((0, 0, 0), (0, 0, 2)), ((0, 0, 2), (3, 0, 2))], strict=True):
        m = np.array(xf)
        np.testing.assert_allclose(np.array([0, 0, 0.5, 1]) @ m, [*b, 1], atol=1e-2)  # float16 orientations
        np.testing.assert_allclose(np.array([0, 0, -0.5, 1]) @ m, [*a, 1], atol=1e-2)


def test_ground_and_ref(tmp_path):
    """The ground lies across the up axis (or on a given plane), and render_ref references another file."""
    asset = UsdRenderer(str(tmp_path / "asset.usda"))
    asset.render_sphere("ball", (0, 0, 0), (0, 0, 0, 1), 1.0)
    asset.save()
    r = UsdRenderer(str(tmp_path / "g.usda"), up_axis="Z")
    r.render_ground(size=10.0)
    r.render_ref("copy", str(tmp_path / "asset.usda"), (5, 0, 0), (0, 0, 0, 1), (2, 2, 2), color=(0, 0, 1))
    r.save()
    stage = _stage(tmp_path / "g.usda")
    ground = np.array(UsdGeom.Mesh.Get(stage, "/root/ground").GetPointsAttr().Get())
    np.testing.assert_allclose(ground[:, 2], 0.0)
    np.testing.assert_allclose(np.abs(ground[:, :2]), 10.0)
    ball = UsdGeom.Sphere.Get(stage, "/root/copy/ball")
    assert ball and tuple(ball.GetDisplayColorAttr().Get(0)[0]) == (0.0, 0.0, 1.0)
    np.testing.assert_allclose(np.array(ball.ComputeLocalToWorldTransform(0).ExtractTranslation()), [5, 0, 0])
    mesh = UsdGeom.Mesh.Get(stage, "/root/ground")
    corners = ground[list(mesh.GetFaceVertexIndicesAttr().Get())]
    assert np.cross(corners[1] - corners[0], corners[2] - corners[1])[2] > 0  # counter-clockwise from above
    tilted = UsdRenderer(Usd.Stage.CreateInMemory())
    tilted.render_ground(size=1.0, plane=(1.0, 1.0, 0.0, 2.0 * np.sqrt(2.0)))  # (x + y) / sqrt(2) = 2
    tilted_points = np.array(UsdGeom.Mesh.Get(tilted.stage, "/root/ground").GetPointsAttr().Get())
    np.testing.assert_allclose(tilted_points[:, :2].sum(axis=1), 4.0 / np.sqrt(2.0), rtol=1e-6)
    centre = np.array([np.sqrt(2.0), np.sqrt(2.0), 0.0])
    np.testing.assert_allclose(np.linalg.norm(tilted_points - centre, axis=1), np.sqrt(2.0), rtol=1e-6)


def test_bad_input_is_named(tmp_path):
    """Wrong shapes of points, indices and radii raise errors naming the call and the prim."""
    r = UsdRenderer(Usd.Stage.CreateInMemory())
    with pytest.raises(ValueError, match="render_points 'p'.*shape"):
        r.render_points("p", np.zeros((4, 2)), 0.1)
    with pytest.raises(ValueError, match="render_points 'p'.*3 radii for 4 points"):
        r.render_points("p", np.zeros((4, 3)), [0.1, 0.2, 0.3])
    with pytest.raises(ValueError, match="render_mesh 'm'.*out of range"):
        r.render_mesh("m", np.zeros((3, 3)), [0, 1, 5])
    with pytest.raises(ValueError, match="up_axis"):
        UsdRenderer(Usd.Stage.CreateInMemory(), up_axis="W")
    with pytest.raises(TypeError, match="file path or a Usd.Stage"):
        UsdRenderer(42)
