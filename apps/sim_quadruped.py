"""An articulated quadruped standing on the ground under PD control, on SolverFeatherstone.

    python -m loomwork.apps.sim_quadruped [--worlds 4] [--seconds 3] [--urdf quadruped.urdf] [--usd out.usda]

Each world holds one quadruped: a floating base and four legs of three revolute joints (hip abduction, hip
flexion, knee). Built in code, or read from a URDF with ``--urdf`` (Newton's ``quadruped.urdf`` has the
same layout). Every joint is driven toward a crouched stance by PD gains (``joint_target_ke``/``kd``
toward ``control.joint_target_q``); the feet touch the ground through penalty contacts that a
``CollisionPipeline`` finds each step. The run reports the base height over time, which should settle
and stay in a narrow band.
"""

from __future__ import annotations

import argparse
from typing import Any

import numpy as np

import loomwork as wp
import loomwork.sim as newton

STANCE = [0.2, 0.4, -0.6, -0.2, -0.4, 0.6, -0.2, 0.4, -0.6, 0.2, -0.4, 0.6]
"""Joint angles [rad] of the standing pose (hip abduction, hip flexion, knee; legs LF, RF, LH, RH)."""

LEGS = (("LF", 1.0, 1.0), ("RF", 1.0, -1.0), ("LH", -1.0, 1.0), ("RH", -1.0, -1.0))
"""Leg name, fore/aft sign, left/right sign."""


def _configure(b: newton.ModelBuilder, ke: float, kd: float) -> None:
    b.default_joint_cfg.armature = 0.01
    b.default_joint_cfg.target_ke = ke
    b.default_joint_cfg.target_kd = kd
    b.default_shape_cfg.ke = 1.0e4
    b.default_shape_cfg.kd = 1.0e2
    b.default_shape_cfg.mu = 1.0


def quadruped_builder(urdf: str | None = None, *, height: float = 0.7, ke: float = 200.0,
                      kd: float = 5.0) -> newton.ModelBuilder:
    """One quadruped with its base ``height`` [m] above the ground, joints at :data:`STANCE` and driven there
    with stiffness ``ke`` [N m/rad] and damping ``kd`` [N m s/rad]; from ``urdf`` when given."""
    b = newton.ModelBuilder()
    _configure(b, ke, kd)
    root = ((0.0, 0.0, height), (0.0, 0.0, 0.0, 1.0))
    if urdf is not None:
        b.add_urdf(urdf, xform=root, floating=True, enable_self_collisions=False)
    else:
        _build_in_code(b, root)
    if b.joint_dof_count != 18:
        raise ValueError(f"quadruped_builder: expected a floating base and 12 leg joints (18 dofs), got "
                         f"{b.joint_dof_count} dofs")
    b.joint_q[-12:] = STANCE
    b.joint_target_q[-12:] = STANCE
    return b


def _build_in_code(b: newton.ModelBuilder, root: Any) -> None:
    """A base box and four legs (hip block, thigh and shank capsules, 0.25 m each) joined by revolute joints."""
    base = b.add_link(xform=wp.transform(root[0], root[1]), label="base")
    b.add_shape_box(base, hx=0.35, hy=0.1, hz=0.08, cfg=newton.ModelBuilder.ShapeConfig(density=400.0))
    joints = [b.add_joint_free(base, label="floating_base")]
    limb_cfg = b.default_shape_cfg.copy()
    limb_cfg.density = 1000.0
    for name, fore, side in LEGS:
        hip_at = (0.3 * fore, 0.104 * side, 0.0)
        hip = b.add_link(label=f"{name}_HIP")
        b.add_shape_sphere(hip, radius=0.045, cfg=limb_cfg)
        thigh = b.add_link(label=f"{name}_THIGH")
        b.add_shape_capsule(thigh, xform=wp.transform((0.0, 0.0, -0.125), wp.quat_identity()), radius=0.025,
                            half_height=0.1, cfg=limb_cfg)
        shank = b.add_link(label=f"{name}_SHANK")
        b.add_shape_capsule(shank, xform=wp.transform((0.0, 0.0, -0.125), wp.quat_identity()), radius=0.02,
                            half_height=0.1, cfg=limb_cfg)
        b.add_shape_sphere(shank, xform=wp.transform((0.0, 0.0, -0.25), wp.quat_identity()), radius=0.03,
                           cfg=limb_cfg)
        # Hind legs face backwards, right legs mirror left ones: a half turn about Z for the hind hips.
        turn = wp.quat_identity() if fore > 0 else wp.quat_from_axis_angle(wp.vec3(0.0, 0.0, 1.0), np.pi)
        joints.append(b.add_joint_revolute(base, hip, axis=(1.0, 0.0, 0.0), label=f"{name}_HAA",
                                           parent_xform=wp.transform(hip_at, turn)))
        # Flexion and knee axes point sideways: the leg frame is the hip's turned a quarter about Z.
        quarter = wp.quat_from_axis_angle(wp.vec3(0.0, 0.0, 1.0), 0.5 * np.pi * side)
        joints.append(b.add_joint_revolute(hip, thigh, axis=(1.0, 0.0, 0.0), label=f"{name}_HFE",
                                           parent_xform=wp.transform((0.0, 0.05 * side * fore, 0.0), quarter)))
        joints.append(b.add_joint_revolute(thigh, shank, axis=(1.0, 0.0, 0.0), label=f"{name}_KFE",
                                           parent_xform=wp.transform((0.0, 0.0, -0.25), wp.quat_identity())))
    b.add_articulation(joints, label="quadruped")
    for i in range(b.shape_count):  # legs may cross the base: no self-collisions, as with the URDF
        for k in range(i + 1, b.shape_count):
            if b.shape_body[i] != b.shape_body[k]:
                b.add_shape_collision_filter_pair(i, k)


class QuadrupedSim:
    """``worlds`` quadrupeds on one ground plane (each its own world), stepped by SolverFeatherstone with
    contacts from a CollisionPipeline; :meth:`run` returns the base heights [m] over time."""

    def __init__(self, worlds: int = 1, *, urdf: str | None = None, dt: float = 2.0e-3, device: Any = None) -> None:
        one = quadruped_builder(urdf)
        scene = newton.ModelBuilder()
        scene.replicate(one, worlds, spacing=(2.0, 2.0, 0.0))
        scene.add_ground_plane(cfg=one.default_shape_cfg)
        self.model = scene.finalize(device)
        self.bodies_per_world = one.body_count
        newton.eval_fk(self.model, self.model.joint_q, self.model.joint_qd, self.model)
        self.solver = newton.solvers.SolverFeatherstone(self.model)
        self.pipeline = newton.CollisionPipeline(self.model)
        self.contacts = self.pipeline.contacts()
        self.state_0, self.state_1 = self.model.state(), self.model.state()
        self.control = self.model.control()
        self.worlds, self.dt, self.time = worlds, dt, 0.0

    def step(self) -> None:
        """Advance every world by ``dt``."""
        self.pipeline.collide(self.state_0, self.contacts)
        self.state_0.clear_forces()
        self.solver.step(self.state_0, self.state_1, self.control, self.contacts, self.dt)
        self.state_0, self.state_1 = self.state_1, self.state_0
        self.time += self.dt

    def base_heights(self) -> np.ndarray:
        """Height [m] of each world's base frame."""
        return self.state_0.body_q.numpy()[:: self.bodies_per_world, 2].copy()

    def run(self, seconds: float, *, sample_every: float = 0.05, viewer: Any = None) -> np.ndarray:
        """Step for ``seconds``; returns base heights, shape (samples, worlds), every ``sample_every`` [s]
        (logging each sample to ``viewer`` when given)."""
        steps = int(round(seconds / self.dt))
        every = max(1, int(round(sample_every / self.dt)))
        samples = []
        for i in range(steps):
            self.step()
            if (i + 1) % every == 0:
                samples.append(self.base_heights())
                if viewer is not None:
                    viewer.begin_frame(self.time)
                    viewer.log_state(self.state_0)
                    viewer.end_frame()
        return np.asarray(samples)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Run the example; returns the base-height band after the first second and whether it held."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--worlds", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--urdf", default=None, help="a quadruped URDF (e.g. Newton's quadruped.urdf)")
    parser.add_argument("--usd", default=None, help="record the run into this USD file")
    parser.add_argument("--band", type=float, default=0.05, help="allowed spread of the base height [m]")
    args = parser.parse_args(argv)
    sim = QuadrupedSim(args.worlds, urdf=args.urdf)
    viewer = None
    if args.usd:
        from loomwork.render import ViewerUSD

        viewer = ViewerUSD(args.usd, fps=20)
        viewer.set_model(sim.model)
    heights = sim.run(args.seconds, viewer=viewer)
    if viewer is not None:
        viewer.close()
    settled = heights[int(len(heights) * min(1.0, 1.0 / args.seconds)):] if len(heights) > 1 else heights
    low, high = float(settled.min()), float(settled.max())
    result = {"worlds": args.worlds, "seconds": args.seconds, "base_height_min": low, "base_height_max": high,
              "final_heights": heights[-1].tolist(), "in_band": bool(high - low < args.band and low > 0.2)}
    print(f"{args.worlds} quadrupeds, {args.seconds:g} s: base height after 1 s in [{low:.3f}, {high:.3f}] m "
          f"({'steady' if result['in_band'] else 'NOT steady'})")
    return result


if __name__ == "__main__":
    main()
