"""The quadruped app: articulated legs under PD control stand on the ground under SolverFeatherstone."""

from __future__ import annotations

import glob

import numpy as np
import pytest

from loomwork.apps import sim_quadruped

URDF = next(iter(glob.glob("/tmp/newtonvenv/lib/python3*/site-packages/newton/examples/assets/quadruped.urdf")),
            None)


def test_quadruped_built_in_code_stands_in_replicated_worlds():
    """Two replicated quadruped worlds settle onto their feet and keep the base height in a 5 cm band, alike."""
    result = sim_quadruped.main(["--worlds", "2", "--seconds", "2"])
    assert result["in_band"], result
    assert 0.35 < result["base_height_min"] < result["base_height_max"] < 0.6
    np.testing.assert_allclose(result["final_heights"][0], result["final_heights"][1], atol=1e-4)


def test_stance_is_held_by_the_pd_drives():
    """After a second standing, every leg joint is within 0.05 rad of its PD target."""
    sim = sim_quadruped.QuadrupedSim(1)
    sim.run(1.0)
    np.testing.assert_allclose(sim.state_0.joint_q.numpy()[7:], sim_quadruped.STANCE, atol=0.05)


@pytest.mark.skipif(URDF is None, reason="Newton's quadruped.urdf is not installed in /tmp/newtonvenv")
def test_quadruped_from_newtons_urdf_stands():
    """Newton's quadruped.urdf, imported with add_urdf, stands as well."""
    result = sim_quadruped.main(["--worlds", "1", "--seconds", "2", "--urdf", URDF])
    assert result["in_band"] and result["base_height_min"] > 0.35, result
