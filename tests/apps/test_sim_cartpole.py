"""The cartpole apps: the balance and swing-up environments and the benchmark run and do what they say."""

from __future__ import annotations

import numpy as np

from loomwork.apps import bench_sim_cartpole, sim_cartpole


def test_cartpole_balance_keeps_poles_up():
    """A PD policy through torch keeps every pole upright (reward near 1, no resets)."""
    result = sim_cartpole.main(["--worlds", "8", "--steps", "60"])
    assert result["mean_reward"] > 0.95 and result["resets"] == 0


def test_cartpole_swingup_pumps_energy():
    """The swing-up heuristic lifts the hanging poles (mean reward rises above the hanging -1)."""
    result = sim_cartpole.main(["--worlds", "4", "--steps", "150", "--swingup"])
    assert result["mean_reward"] > -0.9


def test_reset_touches_only_masked_worlds_and_views_share_memory():
    """reset(mask) changes only the selected worlds; the torch views see kernel writes without copies."""
    env = sim_cartpole.CartpoleEnv(4)
    actions, obs, _, _ = env.torch_views()
    env.state_0.joint_q.assign(np.full(8, 0.3, np.float32))
    env.reset(np.array([0, 1, 0, 0], np.int32))
    q = env.state_0.joint_q.numpy().reshape(4, 2)
    np.testing.assert_allclose(q[[0, 2, 3]], 0.3)
    assert abs(q[1, 1]) <= 0.05 and abs(q[1, 0]) <= 0.1
    assert float(obs[1, 1]) == q[1, 1]
    actions[:] = 1.0
    assert env.actions.numpy().tolist() == [1.0] * 4


def test_bench_sim_cartpole_runs_small():
    """The benchmark measures loomwork on a small batch (Newton is left out without its interpreter)."""
    result = bench_sim_cartpole.main(["--worlds", "16", "--steps", "5", "--newton-python", "/nonexistent"])
    assert result["loomwork"]["steps_per_s"] > 0 and "newton" not in result
