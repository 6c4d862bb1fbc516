"""URDF, MJCF and USD importers: bodies, joints, shapes and masses as the files say, and as Newton imports them."""

from __future__ import annotations

import glob
import math
import os

import numpy as np
import pytest

import loomwork as wp
import loomwork.sim as newton
from loomwork.sim import GeoType, JointType

CARTPOLE_URDF = """<?xml version="1.0"?>
<robot name="cartpole">
  <link name="cart">
    <collision><geometry><box size="0.4 0.2 0.2"/></geometry></collision>
    <inertial><mass value="2.0"/><inertia ixx="0.02" ixy="0" ixz="0" iyy="0.03" iyz="0" izz="0.04"/></inertial>
  </link>
  <joint name="slider" type="prismatic">
    <parent link="world_anchor"/><child link="cart"/>
    <axis xyz="1 0 0"/><limit lower="-2.5" upper="2.5" effort="100" velocity="10"/>
  </joint>
  <link name="world_anchor"/>
  <joint name="hinge" type="continuous">
    <parent link="cart"/><child link="pole"/>
    <origin xyz="0 0 0.1" rpy="0 0 0"/><axis xyz="0 1 0"/>
    <dynamics damping="0.05"/>
  </joint>
  <link name="pole">
    <collision><origin xyz="0 0 0.5"/><geometry><cylinder radius="0.02" length="1.0"/></geometry></collision>
    <inertial><origin xyz="0 0 0.5"/><mass value="0.5"/>
      <inertia ixx="0.04" ixy="0" ixz="0" iyy="0.04" iyz="0" izz="0.0001"/></inertial>
  </link>
</robot>
"""

TWO_LINK_MJCF = """<mujoco model="twolink">
  <compiler angle="degree"/>
  <default>
    <joint damping="0.2" armature="0.01"/>
    <geom density="500"/>
    <default class="limb"><geom type="capsule" size="0.05"/><joint range="-90 45"/></default>
  </default>
  <worldbody>
    <geom name="floor" type="plane" size="0 0 1"/>
    <body name="base" pos="0 0 1" euler="0 0 90">
      <freejoint/>
      <geom type="box" size="0.1 0.2 0.3"/>
      <body name="arm" pos="0 0 -0.3" childclass="limb">
        <joint name="shoulder" type="hinge" axis="0 1 0"/>
        <geom fromto="0 0 0 0 0 -0.4"/>
      </body>
    </body>
  </worldbody>
</mujoco>
"""

ASSETS = next(iter(glob.glob("/tmp/newtonvenv/lib/python3*/site-packages/newton/examples/assets")), None)


def test_urdf_cartpole_string_gives_bodies_joints_axes_limits_and_masses():
    """A cartpole URDF string: three links, the anchor fixed to the world, a prismatic and a revolute joint."""
    b = newton.ModelBuilder()
    b.add_urdf(CARTPOLE_URDF, xform=((0.0, 0.0, 2.0), (0.0, 0.0, 0.0, 1.0)))
    assert b.body_count == 3 and b.joint_count == 3 and b.articulation_count == 1
    assert [b.body_label[i] for i in range(3)] == ["cartpole/world_anchor", "cartpole/cart", "cartpole/pole"]
    assert b.joint_type == [JointType.FIXED, JointType.PRISMATIC, JointType.REVOLUTE]
    np.testing.assert_allclose(b.joint_axis, [(1, 0, 0), (0, 1, 0)])
    assert (b.joint_limit_lower[0], b.joint_limit_upper[0]) == (-2.5, 2.5)
    assert b.joint_limit_lower[1] == -newton.MAXVAL and b.joint_damping[1] == pytest.approx(0.05)
    assert b.joint_effort_limit[0] == 100.0
    np.testing.assert_allclose(b.body_mass, [0.0, 2.0, 0.5])
    np.testing.assert_allclose(np.reshape(b.body_inertia[1], (3, 3)), np.diag([0.02, 0.03, 0.04]))
    np.testing.assert_allclose(b.body_com[2], (0.0, 0.0, 0.5))
    np.testing.assert_allclose(b.body_q[2][:3], (0.0, 0.0, 2.1), atol=1e-12)
    assert [b.shape_type[s] for s in range(b.shape_count)] == [GeoType.BOX, GeoType.CYLINDER]
    np.testing.assert_allclose(b.shape_scale[1], (0.02, 0.5, 0.0))
    model = b.finalize()
    assert model.joint_dof_count == 2


def test_urdf_floating_root_and_massless_collision_masses():
    """floating=True gives the root a free joint; a link without <inertial> takes its mass from its shapes."""
    b = newton.ModelBuilder()
    b.add_urdf(CARTPOLE_URDF.replace('<link name="world_anchor"/>',
                                     '<link name="world_anchor"><collision><geometry><sphere radius="0.1"/>'
                                     '</geometry></collision></link>'), floating=True)
    assert b.joint_type[0] == JointType.FREE
    assert b.body_mass[0] == pytest.approx(4.0 / 3.0 * math.pi * 0.1 ** 3 * 1000.0)


@pytest.mark.parametrize("bad, message", [
    ('type="continuous"', "unknown joint type 'screw'"),
    ('<parent link="cart"/><child link="pole"/>', "names child link 'nowhere'"),
    ('<link name="world_anchor"/>', "closed loop"),
])
def test_urdf_bad_input_raises_naming_the_element(bad, message):
    """An unknown joint type, a joint naming a missing link and a loop of joints raise a ValueError that names them."""
    replacement = {
        'type="continuous"': 'type="screw"',
        '<parent link="cart"/><child link="pole"/>': '<parent link="cart"/><child link="nowhere"/>',
        '<link name="world_anchor"/>': ('<link name="world_anchor"/><joint name="back" type="fixed">'
                                        '<parent link="pole"/><child link="world_anchor"/></joint>'),
    }[bad]
    with pytest.raises(ValueError, match=message):
        newton.ModelBuilder().add_urdf(CARTPOLE_URDF.replace(bad, replacement))


def test_mjcf_two_links_with_a_free_root_defaults_and_fromto():
    """A 2-link MJCF: free root, hinge child with default-class range (degrees), damping and armature;
    geom masses from the default density; the floor a static plane."""
    b = newton.ModelBuilder()
    b.add_mjcf(TWO_LINK_MJCF)
    assert b.body_count == 2 and b.joint_type == [JointType.FREE, JointType.REVOLUTE]
    assert b.shape_body[0] == -1 and b.shape_type[0] == GeoType.PLANE
    np.testing.assert_allclose(b.body_q[0], (0, 0, 1, 0, 0, math.sin(math.pi / 4), math.cos(math.pi / 4)),
                               atol=1e-9)
    np.testing.assert_allclose(b.joint_q[:3], (0.0, 0.0, 1.0), atol=1e-9)
    i = 6  # the hinge's dof after the six of the free joint
    np.testing.assert_allclose(b.joint_axis[i], (0.0, 1.0, 0.0))
    np.testing.assert_allclose((b.joint_limit_lower[i], b.joint_limit_upper[i]), (-math.pi / 2, math.pi / 4))
    assert b.joint_damping[i] == pytest.approx(0.2) and b.joint_armature[i] == pytest.approx(0.01)
    assert b.body_mass[0] == pytest.approx(0.2 * 0.4 * 0.6 * 500.0)
    r, h = 0.05, 0.2
    assert b.body_mass[1] == pytest.approx((math.pi * r * r * 2 * h + 4 / 3 * math.pi * r ** 3) * 500.0)
    np.testing.assert_allclose(b.body_com[1], (0.0, 0.0, -0.2), atol=1e-9)
    b.finalize()


def test_mjcf_include_merges_files_as_mujoco_does(tmp_path):
    """A scene file that includes the robot (menagerie's layout): the robot's defaults, compiler angle and
    worldbody merge with the scene's floor; a self-include is refused by name."""
    (tmp_path / "arm.xml").write_text(
        '<mujoco model="arm"><compiler angle="degree"/>'
        '<default><joint damping="0.3"/><geom density="1000"/></default>'
        '<worldbody><body name="link" pos="0 0 1"><joint name="hinge" type="hinge" axis="0 1 0" range="-30 60"/>'
        '<geom type="capsule" fromto="0 0 0 0 0 -0.4" size="0.05"/></body></worldbody></mujoco>')
    (tmp_path / "scene.xml").write_text(
        '<mujoco model="scene"><include file="arm.xml"/><worldbody><geom name="floor" type="plane" size="0 0 0.05"/>'
        '</worldbody></mujoco>')
    b = newton.ModelBuilder()
    b.add_mjcf(str(tmp_path / "scene.xml"))
    assert b.body_count == 1 and b.joint_type == [JointType.REVOLUTE]
    assert sorted(b.shape_type) == sorted([GeoType.PLANE, GeoType.CAPSULE])
    np.testing.assert_allclose((b.joint_limit_lower[0], b.joint_limit_upper[0]), (-math.pi / 6, math.pi / 3))
    assert b.joint_damping[0] == pytest.approx(0.3)
    assert b.body_mass[0] == pytest.approx((math.pi * 0.05 ** 2 * 0.4 + 4 / 3 * math.pi * 0.05 ** 3) * 1000.0)
    (tmp_path / "loop.xml").write_text('<mujoco><include file="loop.xml"/></mujoco>')
    with pytest.raises(ValueError, match="includes itself"):
        newton.ModelBuilder().add_mjcf(str(tmp_path / "loop.xml"))


def test_mjcf_unknown_joint_type_and_class_raise():
    """An unknown joint type or default class raises a ValueError naming it."""
    with pytest.raises(ValueError, match="joint 'shoulder' has unknown type 'screw'"):
        newton.ModelBuilder().add_mjcf(TWO_LINK_MJCF.replace('type="hinge"', 'type="screw"'))
    with pytest.raises(ValueError, match="'nope'"):
        newton.ModelBuilder().add_mjcf(TWO_LINK_MJCF.replace('childclass="limb"', 'childclass="nope"'))


# Read once from Newton 1.8's own import of its example assets (body count, joint types, masses [kg]).
NEWTON_REFERENCE = {
    "cartpole.urdf": ("add_urdf", 4, [3, 0, 1, 1], [7.2, 1.0, 0.25, 0.25]),
    "quadruped.urdf": ("add_urdf", 13, [3] + [1] * 12, [6.222] + [2.04] * 12),
    "nv_ant.xml": ("add_mjcf", 9, [4] + [1] * 8, [0.48388] + [0.03916, 0.06759] * 4),
}


def test_usd_generic_and_distance_joints():
    """A generic PhysicsJoint becomes a D6 joint whose axes are free unless a LimitAPI bounds them (degrees for
    angles) or locks them (low > high), with per-axis DriveAPI gains; a PhysicsDistanceJoint keeps its bounds."""
    pytest.importorskip("pxr", reason="usd-core is not installed")
    d6 = """    def PhysicsJoint "hinge" (prepend apiSchemas = ["PhysicsLimitAPI:transX", "PhysicsLimitAPI:transY",
            "PhysicsLimitAPI:transZ", "PhysicsLimitAPI:rotX", "PhysicsLimitAPI:rotY", "PhysicsDriveAPI:rotZ"])
    {
        rel physics:body0 = </arm/base>
        rel physics:body1 = </arm/link>
        point3f physics:localPos0 = (0, 0, 0.5)
        float limit:transX:physics:low = 1
        float limit:transX:physics:high = -1
        float limit:transY:physics:low = 1
        float limit:transY:physics:high = -1
        float limit:transZ:physics:low = -0.1
        float limit:transZ:physics:high = 0.2
        float limit:rotX:physics:low = 1
        float limit:rotX:physics:high = -1
        float limit:rotY:physics:low = -30
        float limit:rotY:physics:high = 60
        float drive:rotZ:physics:stiffness = 2
        float drive:rotZ:physics:targetPosition = 90
    }
"""
    start = ARM_USDA.index('    def PhysicsRevoluteJoint "hinge"')
    end = ARM_USDA.index("}\ndef Cube", start)
    b = newton.ModelBuilder()
    b.add_usd(ARM_USDA[:start] + d6 + ARM_USDA[end:])
    assert b.joint_type[1] == JointType.D6 and b.joint_dof_dim[1] == (1, 2)
    np.testing.assert_allclose(b.joint_axis[0:3], [(0, 0, 1), (0, 1, 0), (0, 0, 1)])  # (the anchor has no dofs)
    np.testing.assert_allclose(b.joint_limit_lower[0:2], (-0.1, -math.pi / 6), rtol=1e-6)
    np.testing.assert_allclose(b.joint_limit_upper[0:2], (0.2, math.pi / 3), rtol=1e-6)
    assert b.joint_target_ke[2] == pytest.approx(2 * 180 / math.pi)
    assert b.joint_target_q[2] == pytest.approx(math.pi / 2)
    b.finalize()
    rope = """    def PhysicsDistanceJoint "hinge"
    {
        rel physics:body0 = </arm/base>
        rel physics:body1 = </arm/link>
        float physics:minDistance = 0.25
        float physics:maxDistance = 0.75
    }
"""
    b = newton.ModelBuilder()
    b.add_usd(ARM_USDA[:start] + rope + ARM_USDA[end:])
    assert b.joint_type[1] == JointType.DISTANCE
    assert (b.joint_limit_lower[0], b.joint_limit_upper[0]) == pytest.approx((0.25, 0.75))


@pytest.mark.skipif(ASSETS is None, reason="Newton's example assets are not installed in /tmp/newtonvenv")
@pytest.mark.parametrize("name", sorted(NEWTON_REFERENCE))
def test_newton_example_assets_import_as_newton_imports_them(name):
    """Newton's cartpole.urdf, quadruped.urdf and nv_ant.xml give Newton's bodies, joint types and masses."""
    method, bodies, types, masses = NEWTON_REFERENCE[name]
    b = newton.ModelBuilder()
    getattr(b, method)(os.path.join(ASSETS, name))
    assert b.body_count == bodies and b.articulation_count == 1
    assert [int(t) for t in b.joint_type] == types
    np.testing.assert_allclose(b.body_mass, masses, rtol=1e-4)
    b.finalize()


ARM_USDA = """#usda 1.0
(
    upAxis = "Z"
    metersPerUnit = 1
)
def Xform "arm"
{
    def Xform "base" (prepend apiSchemas = ["PhysicsRigidBodyAPI"])
    {
        double3 xformOp:translate = (0, 0, 1)
        uniform token[] xformOpOrder = ["xformOp:translate"]
        def Cube "box" (prepend apiSchemas = ["PhysicsCollisionAPI"])
        {
            double size = 0.2
        }
    }
    def Xform "link" (prepend apiSchemas = ["PhysicsRigidBodyAPI", "PhysicsMassAPI"])
    {
        double3 xformOp:translate = (0, 0, 1.5)
        uniform token[] xformOpOrder = ["xformOp:translate"]
        float physics:mass = 2
        float3 physics:diagonalInertia = (0.1, 0.2, 0.3)
        point3f physics:centerOfMass = (0, 0, 0.1)
        def Capsule "rod" (prepend apiSchemas = ["PhysicsCollisionAPI"])
        {
            double radius = 0.05
            double height = 0.8
            uniform token axis = "X"
        }
    }
    def PhysicsFixedJoint "anchor"
    {
        rel physics:body1 = </arm/base>
        point3f physics:localPos0 = (0, 0, 1)
    }
    def PhysicsRevoluteJoint "hinge" (prepend apiSchemas = ["PhysicsDriveAPI:angular"])
    {
        rel physics:body0 = </arm/base>
        rel physics:body1 = </arm/link>
        uniform token physics:axis = "Y"
        point3f physics:localPos0 = (0, 0, 0.5)
        float physics:lowerLimit = -90
        float physics:upperLimit = 45
        float drive:angular:physics:stiffness = 10
        float drive:angular:physics:damping = 1
        float drive:angular:physics:targetPosition = 30
    }
}
def Cube "ground" (prepend apiSchemas = ["PhysicsCollisionAPI"])
{
    double size = 1
}
"""


def test_usd_arm_with_fixed_base_revolute_limits_drive_and_mass():
    """A USD Physics arm: fixed anchor, a revolute joint about Y with limits and drive in degrees, MassAPI
    mass and inertia, a capsule turned from X onto Z, and a static collider outside every body."""
    pytest.importorskip("pxr", reason="usd-core is not installed")
    b = newton.ModelBuilder()
    b.add_usd(ARM_USDA)
    assert b.body_count == 2 and b.joint_type == [JointType.FIXED, JointType.REVOLUTE]
    np.testing.assert_allclose(b.joint_axis[0], (0.0, 1.0, 0.0))
    np.testing.assert_allclose((b.joint_limit_lower[0], b.joint_limit_upper[0]), (-math.pi / 2, math.pi / 4),
                               rtol=1e-6)
    assert b.joint_target_ke[0] == pytest.approx(10 * 180 / math.pi)
    assert b.joint_target_q[0] == pytest.approx(math.pi / 6)
    assert b.body_mass[1] == 2.0 and b.body_com[1] == pytest.approx((0.0, 0.0, 0.1))
    np.testing.assert_allclose(np.reshape(b.body_inertia[1], (3, 3)), np.diag([0.1, 0.2, 0.3]), atol=1e-7)
    assert b.body_mass[0] == pytest.approx(0.2 ** 3 * 1000.0)
    rod = b.shape_label.index("/arm/link/rod")
    assert b.shape_type[rod] == GeoType.CAPSULE and b.shape_scale[rod] == pytest.approx((0.05, 0.4, 0.0))
    tip = np.asarray(b.shape_transform[rod])
    np.testing.assert_allclose(abs(tip[4]), math.sqrt(0.5), atol=1e-6)  # a quarter turn about Y
    assert b.shape_body[b.shape_label.index("/ground")] == -1
    np.testing.assert_allclose(b.joint_X_p[1][:3], (0.0, 0.0, 0.5))
    b.finalize()


def test_usd_joint_to_a_missing_body_raises():
    """A joint whose body is not a rigid body raises a ValueError naming the joint."""
    pytest.importorskip("pxr", reason="usd-core is not installed")
    with pytest.raises(ValueError, match="joint '/arm/hinge' names body1 '/arm/nothing'"):
        newton.ModelBuilder().add_usd(ARM_USDA.replace("rel physics:body1 = </arm/link>",
                                                       "rel physics:body1 = </arm/nothing>"))


@pytest.mark.skipif(ASSETS is None, reason="Newton's example assets are not installed in /tmp/newtonvenv")
def test_newton_cartpole_usda_matches_its_urdf_twin():
    """Newton's cartpole.usda gives the bodies, joint types and masses of its cartpole.urdf."""
    pytest.importorskip("pxr", reason="usd-core is not installed")
    b = newton.ModelBuilder()
    b.add_usd(os.path.join(ASSETS, "cartpole.usda"))
    method, bodies, types, masses = NEWTON_REFERENCE["cartpole.urdf"]
    assert b.body_count == bodies and [int(t) for t in b.joint_type] == types
    np.testing.assert_allclose(b.body_mass, masses, rtol=1e-4)
    b.finalize()


SERVO_MJCF = """<mujoco model="servo">
  <compiler angle="degree"/>
  <default><position kp="30"/></default>
  <worldbody>
    <body name="arm" pos="0 0 1">
      <joint name="hinge" axis="0 1 0" actuatorfrcrange="-40 60"/>
      <geom type="capsule" fromto="0 0 0 0.5 0 0" size="0.04" mass="1"/>
      <body name="hand" pos="0.5 0 0">
        <joint name="wrist_x" axis="1 0 0"/><joint name="wrist_z" axis="0 0 1"/>
        <geom type="sphere" size="0.05" mass="0.2"/>
        <body name="finger" pos="0.1 0 0">
          <joint name="knuckle" type="ball" range="0 30"/>
          <geom type="sphere" size="0.02" mass="0.05"/>
        </body>
      </body>
    </body>
  </worldbody>
  <actuator>
    <position name="servo" joint="hinge" kv="3" forcerange="-20 20"/>
    <velocity joint="wrist_x" kv="2"/>
    <position joint="wrist_x" kp="5" kv="9"/>
    <motor joint="wrist_z" gear="4" ctrlrange="-1 1"/>
    <general joint="knuckle" gainprm="8" biasprm="0 -8 -0.5" biastype="affine"/>
  </actuator>
</mujoco>
"""


def test_mjcf_actuators_become_joint_drives_as_newton_sets_them():
    """position/velocity set gains and modes as Newton's importer does (the default class's kp, a later
    position actuator keeps the velocity actuator's kd), a motor marks its dof EFFORT with its gear times
    ctrlrange as effort limit, a servo-shaped general drives the ball's dofs, forcerange caps the joint's
    actuatorfrcrange, and a ball range limits each rotation-vector component to 30 degrees."""
    b = newton.ModelBuilder()
    b.add_mjcf(SERVO_MJCF)
    mode = newton.JointTargetMode
    assert [int(t) for t in b.joint_type] == [JointType.REVOLUTE, JointType.D6, JointType.BALL]
    assert b.joint_target_mode == [mode.POSITION, mode.POSITION_VELOCITY, mode.EFFORT] + [mode.POSITION] * 3
    np.testing.assert_allclose(b.joint_target_ke, [30.0, 5.0, 0.0, 8.0, 8.0, 8.0])
    np.testing.assert_allclose(b.joint_target_kd, [3.0, 2.0, 0.0, 0.5, 0.5, 0.5])
    np.testing.assert_allclose(b.joint_effort_limit[:3], [20.0, 1.0e6, 4.0])
    np.testing.assert_allclose(b.joint_limit_upper[3:], [math.radians(30.0)] * 3)
    np.testing.assert_allclose(b.joint_limit_lower[3:], [-math.radians(30.0)] * 3)
    m = b.finalize()
    assert m.joint_target_mode.numpy().tolist() == [1, 3, 4, 1, 1, 1]
    # Without the servo's forcerange the joint's own actuatorfrcrange is the effort limit (as Newton).
    b2 = newton.ModelBuilder()
    b2.add_mjcf(SERVO_MJCF.replace(' forcerange="-20 20"', ""))
    assert b2.joint_effort_limit[0] == 60.0


def test_mjcf_actuator_on_an_unknown_joint_raises_and_a_tendon_actuator_warns():
    with pytest.raises(ValueError, match="'servo'.*'elbow' is not defined"):
        newton.ModelBuilder().add_mjcf(SERVO_MJCF.replace('joint="hinge" kv', 'joint="elbow" kv'))
    with pytest.warns(UserWarning, match="without a joint transmission"):
        newton.ModelBuilder().add_mjcf(SERVO_MJCF.replace('<motor joint="wrist_z"', '<motor tendon="t"'))
    with pytest.warns(UserWarning, match="no position, velocity or effort drive"):
        newton.ModelBuilder().add_mjcf(SERVO_MJCF.replace('biastype="affine"', 'biastype="affine" gaintype="user"'))


HINGE_SERVO_MJCF = """<mujoco>
  <worldbody>
    <body name="arm" pos="0 0 1">
      <joint name="hinge" axis="0 1 0" damping="0.1"/>
      <geom type="capsule" fromto="0 0 0 0.4 0 0" size="0.03" mass="1"/>
    </body>
  </worldbody>
  <actuator><position joint="hinge" kp="200" kv="20"/></actuator>
</mujoco>
"""


@pytest.mark.parametrize("solver", ["SolverFeatherstone", "SolverXPBD", "SolverSemiImplicit"])
def test_mjcf_position_actuator_drives_its_hinge_to_the_control_target(solver):
    """An imported position servo (kp 200, kv 20) holds a 1 kg, 0.4 m arm against gravity at the target
    0.5 rad up to the static sag m g l cos(q) / (2 kp) (about 0.0086 rad), and comes to rest."""
    g = -9.81
    b = newton.ModelBuilder(gravity=g)
    b.add_mjcf(HINGE_SERVO_MJCF)
    m = b.finalize()
    newton.eval_fk(m, m.joint_q, m.joint_qd, m)
    control = m.control()
    control.joint_target_q.assign(np.array([0.5], np.float32))
    s0, s1 = m.state(), m.state()
    step = getattr(newton.solvers, solver)(m)
    dt = 1.0 / 240 if solver != "SolverSemiImplicit" else 1.0 / 2000
    for _ in range(int(3.0 / dt)):
        s0.clear_forces()
        step.step(s0, s1, control, None, dt)
        s0, s1 = s1, s0
    q = wp.zeros(1, dtype=float)
    qd = wp.zeros(1, dtype=float)
    newton.eval_ik(m, s0, q, qd)
    # Gravity (-z) turns the arm (+x) about +y positively, so the arm rests past the target.
    sag = 1.0 * -g * 0.2 * math.cos(0.5) / 200.0
    assert q.numpy()[0] == pytest.approx(0.5 + sag, abs=2e-3)
    assert abs(qd.numpy()[0]) < 1e-2
