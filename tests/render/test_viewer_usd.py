"""ViewerUSD: a rollout of an articulated model becomes time samples of its shapes on the body frames."""

import math

import numpy as np
import pytest

import loomwork as wp
import loomwork.sim as newton
from loomwork.render import ViewerUSD

pytest.importorskip("pxr", reason="usd-core is not installed")
from pxr import Usd, UsdGeom  # noqa: E402

ARM = """<robot name="arm">
  <link name="base"><visual><geometry><box size="0.2 0.2 0.2"/></geometry></visual>
    <collision><geometry><box size="0.2 0.2 0.2"/></geometry></collision></link>
  <joint name="shoulder" type="revolute"><parent link="base"/><child link="upper"/>
    <origin xyz="0 0 0.1"/><axis xyz="0 1 0"/><limit lower="-3" upper="3"/></joint>
  <link name="upper"><visual><origin xyz="0 0 0.25"/><geometry><box size="0.05 0.05 0.5"/></geometry></visual>
    <inertial><mass value="1"/><inertia ixx="0.02" iyy="0.02" izz="0.001" ixy="0" ixz="0" iyz="0"/></inertial></link>
  <joint name="elbow" type="revolute"><parent link="upper"/><child link="fore"/>
    <origin xyz="0 0 0.5"/><axis xyz="0 1 0"/><limit lower="-3" upper="3"/></joint>
  <link name="fore"><visual><origin xyz="0 0 0.2"/><geometry><sphere radius="0.05"/></geometry></visual>
    <inertial><mass value="1"/><inertia ixx="0.01" iyy="0.01" izz="0.01" ixy="0" ixz="0" iyz="0"/></inertial></link>
</robot>"""


def test_articulated_shapes_follow_their_body_frames_over_time(tmp_path):
    """Two frames of an arm at different joint angles: each shape's world position in the stage is the
    forward-kinematics answer worked out by hand, and the invisible collider under a visual is not drawn."""
    b = newton.ModelBuilder()
    b.add_urdf(ARM, xform=((1.0, 0.0, 0.0), (0.0, 0.0, 0.0, 1.0)))
    model = b.finalize()
    state = model.state()
    viewer = ViewerUSD(str(tmp_path / "arm.usda"), fps=10)
    viewer.set_model(model)
    angles = [(0.0, 0.0), (0.5, -0.8)]
    for frame, (a, c) in enumerate(angles):
        q = wp.array(np.array([a, c], np.float32), dtype=float)
        newton.eval_fk(model, q, model.joint_qd, state)
        viewer.begin_frame(frame / 10.0)
        viewer.log_state(state)
        viewer.end_frame()
    viewer.close()
    stage = Usd.Stage.Open(str(tmp_path / "arm.usda"))
    labels = model.shape_label
    prims = {label: stage.GetPrimAtPath(f"/root/shape_{s}") for s, label in enumerate(labels)}
    assert not prims["arm/base/collision_0"].IsValid() and prims["arm/base/visual_0"].IsValid()
    for frame, (a, c) in enumerate(angles):
        shoulder = np.array([1.0, 0.0, 0.1])
        # A rotation by t about +Y takes +Z to (sin t, 0, cos t).
        upper = shoulder + 0.25 * np.array([math.sin(a), 0.0, math.cos(a)])
        elbow = shoulder + 0.5 * np.array([math.sin(a), 0.0, math.cos(a)])
        fore = elbow + 0.2 * np.array([math.sin(a + c), 0.0, math.cos(a + c)])
        time = Usd.TimeCode(frame)
        for label, expected in (("arm/upper/visual_0", upper), ("arm/fore/visual_0", fore)):
            xf = UsdGeom.Xformable(prims[label]).ComputeLocalToWorldTransform(time)
            np.testing.assert_allclose(np.array(xf.ExtractTranslation()), expected, atol=1e-5)
        # The box's long (local Z) axis points along the upper arm.
        m = np.array(UsdGeom.Xformable(prims["arm/upper/visual_0"]).ComputeLocalToWorldTransform(time))
        along = (np.array([0.0, 0.0, 1.0, 1.0]) @ m)[:3] - upper
        np.testing.assert_allclose(along / np.linalg.norm(along), [math.sin(a), 0.0, math.cos(a)], atol=1e-5)

