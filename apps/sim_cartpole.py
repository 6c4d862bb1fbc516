"""A batch of cartpole worlds for reinforcement learning on SolverFeatherstone.

    python -m loomwork.apps.sim_cartpole [--worlds 256] [--steps 200] [--swingup]

Each world is a cart on a rail (prismatic joint along X) carrying a pole (revolute joint about Y).
Observations (cart position, pole angle, their velocities) and rewards are computed by kernels and
handed to PyTorch with ``wp.to_torch`` without copies; worlds whose pole fell (or whose episode ran
out) are reset by a kernel that reads a mask. ``--swingup`` starts the pole hanging down and rewards
height instead (the pendulum swing-up task).
"""

from __future__ import annotations

import argparse
from typing import Any

import numpy as np

import loomwork as wp
import loomwork.sim as newton


@wp.kernel
def observe_kernel(joint_q: wp.array(dtype=float), joint_qd: wp.array(dtype=float), swingup: int,
                   obs_out: wp.array2d(dtype=float), reward_out: wp.array(dtype=float),
                   done_out: wp.array(dtype=wp.int32)):
    w = wp.tid()
    x = joint_q[2 * w]
    th = joint_q[2 * w + 1]
    xd = joint_qd[2 * w]
    thd = joint_qd[2 * w + 1]
    obs_out[w, 0] = x
    obs_out[w, 1] = th
    obs_out[w, 2] = xd
    obs_out[w, 3] = thd
    if swingup != 0:
        reward_out[w] = wp.cos(th) - 0.01 * x * x - 0.001 * thd * thd
        done_out[w] = wp.where(wp.abs(x) > 2.4, 1, 0)
    else:
        reward_out[w] = 1.0 - th * th - 0.01 * x * x
        done_out[w] = wp.where(wp.abs(x) > 2.4 or wp.abs(th) > 0.4, 1, 0)


@wp.kernel
def act_kernel(actions: wp.array(dtype=float), max_force: float, joint_f_out: wp.array(dtype=float)):
    w = wp.tid()
    joint_f_out[2 * w] = wp.clamp(actions[w], -1.0, 1.0) * max_force
    joint_f_out[2 * w + 1] = 0.0


@wp.kernel
def reset_kernel(mask: wp.array(dtype=wp.int32), seed: int, swingup: int, joint_q: wp.array(dtype=float),
                 joint_qd: wp.array(dtype=float)):
    w = wp.tid()
    if mask[w] == 0:
        return
    state = wp.rand_init(seed, w)
    angle = wp.randf(state, -0.05, 0.05)
    if swingup != 0:
        angle = angle + wp.pi
    joint_q[2 * w] = wp.randf(state, -0.1, 0.1)
    joint_q[2 * w + 1] = angle
    joint_qd[2 * w] = 0.0
    joint_qd[2 * w + 1] = 0.0


def cartpole_builder(*, cart_mass: float = 1.0, pole_mass: float = 0.1, pole_length: float = 1.0,
                     rail_limit: float = 3.0) -> newton.ModelBuilder:
    """One cartpole: cart on a prismatic joint along X (limited to +-``rail_limit`` [m]), pole of length
    ``pole_length`` [m] on a revolute joint about Y, 0 rad upright."""
    b = newton.ModelBuilder()
    inertia_cart = wp.mat33(np.diag([0.01, 0.01, 0.01]))
    pole_i = pole_mass * pole_length ** 2 / 12.0
    cart = b.add_link(mass=cart_mass, inertia=inertia_cart, label="cart")
    pole = b.add_link(mass=pole_mass, com=wp.vec3(0.0, 0.0, 0.5 * pole_length),
                      inertia=wp.mat33(np.diag([pole_i, pole_i, 1e-5])), label="pole")
    j0 = b.add_joint_prismatic(-1, cart, axis=(1.0, 0.0, 0.0), limit_lower=-rail_limit, limit_upper=rail_limit,
                               limit_ke=1e4, limit_kd=1e2, label="slider")
    j1 = b.add_joint_revolute(cart, pole, axis=(0.0, 1.0, 0.0), label="hinge")
    b.add_articulation([j0, j1], label="cartpole")
    return b


class CartpoleEnv:
    """``worlds`` cartpoles stepped together; :meth:`step` takes actions in [-1, 1] per world and returns
    PyTorch views (no copies) of observations (worlds, 4), rewards (worlds,) and done flags (worlds,)."""

    def __init__(self, worlds: int = 256, *, dt: float = 1.0 / 60.0, substeps: int = 4, swingup: bool = False,
                 max_force: float = 20.0, seed: int = 0, device: Any = None) -> None:
        scene = newton.ModelBuilder()
        scene.replicate(cartpole_builder(), worlds, spacing=(0.0, 4.0, 0.0))
        self.model = scene.finalize(device)
        self.solver = newton.solvers.SolverFeatherstone(self.model, angular_damping=0.0)
        self.state_0, self.state_1 = self.model.state(), self.model.state()
        self.control = self.model.control()
        self.worlds, self.dt, self.substeps = worlds, dt, substeps
        self.swingup, self.max_force, self.seed = int(swingup), float(max_force), seed
        device = self.model.device
        self.obs = wp.zeros((worlds, 4), dtype=float, device=device)
        self.reward = wp.zeros(worlds, dtype=float, device=device)
        self.done = wp.zeros(worlds, dtype=wp.int32, device=device)
        self.actions = wp.zeros(worlds, dtype=float, device=device)
        self.reset(np.ones(worlds, dtype=np.int32))

    def torch_views(self) -> tuple[Any, Any, Any, Any]:
        """(actions, observations, rewards, done) as torch tensors sharing memory with the kernels' arrays."""
        return (wp.to_torch(self.actions), wp.to_torch(self.obs), wp.to_torch(self.reward),
                wp.to_torch(self.done))

    def reset(self, mask: Any) -> None:
        """Reset the worlds where ``mask`` (int32, shape (worlds,), array or anything array-like) is nonzero."""
        if not isinstance(mask, wp.array):
            mask = wp.array(np.asarray(mask, dtype=np.int32), dtype=wp.int32, device=self.model.device)
        self.seed += 1
        s = self.state_0
        wp.launch(reset_kernel, dim=self.worlds, inputs=[mask, self.seed, self.swingup],
                  outputs=[s.joint_q, s.joint_qd], device=self.model.device)
        newton.eval_fk(self.model, s.joint_q, s.joint_qd, s)
        self._observe()

    def _observe(self) -> None:
        wp.launch(observe_kernel, dim=self.worlds,
                  inputs=[self.state_0.joint_q, self.state_0.joint_qd, self.swingup],
                  outputs=[self.obs, self.reward, self.done], device=self.model.device)

    def step(self) -> None:
        """Apply ``self.actions``, advance one control period, update observations, rewards and done flags,
        and reset the worlds that are done."""
        wp.launch(act_kernel, dim=self.worlds, inputs=[self.actions, self.max_force],
                  outputs=[self.control.joint_f], device=self.model.device)
        h = self.dt / self.substeps
        for _ in range(self.substeps):
            self.solver.step(self.state_0, self.state_1, self.control, None, h)
            self.state_0, self.state_1 = self.state_1, self.state_0
        self._observe()
        if self.done.numpy().any():
            self.reset(self.done)


def main(argv: list[str] | None = None) -> dict:
    """Run a PD policy (through torch) on a batch of cartpoles; print and return the mean reward."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--worlds", type=int, default=256)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--swingup", action="store_true")
    args = parser.parse_args(argv)
    env = CartpoleEnv(args.worlds, swingup=args.swingup)
    actions, obs, reward, done = env.torch_views()
    total = 0.0
    resets = 0
    for _ in range(args.steps):
        # Balance: push the cart under the pole; swing-up: pump energy (a simple heuristic policy).
        if args.swingup:
            energy = 0.5 * obs[:, 3] ** 2 + 9.81 * (obs[:, 1].cos() - 1.0)
            actions[:] = (energy * obs[:, 3] * obs[:, 1].cos()).clamp(-1.0, 1.0)
        else:
            actions[:] = (2.0 * obs[:, 1] + 0.5 * obs[:, 3] + 0.05 * obs[:, 0] + 0.1 * obs[:, 2]).clamp(-1.0, 1.0)
        env.step()
        total += float(reward.mean())
        resets += int(done.sum())
    result = {"worlds": args.worlds, "steps": args.steps, "mean_reward": total / args.steps, "resets": resets,
              "task": "swingup" if args.swingup else "balance"}
    print(result)
    return result


if __name__ == "__main__":
    main()
