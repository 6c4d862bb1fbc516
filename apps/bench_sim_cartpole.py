"""Cartpole batch on SolverFeatherstone: steps per second on the CPU, loomwork beside Newton 1.8.

    python -m loomwork.apps.bench_sim_cartpole [--worlds 4096] [--steps 200] [--newton-python PATH]
                                               [--mujoco-python PATH]

Both build the same cartpole (cart on a prismatic joint, pole on a revolute joint) replicated into
``--worlds`` worlds and time ``--steps`` solver steps of 1/240 s (best of 3). Newton runs in its own
interpreter (``--newton-python`` or $NEWTON_PYTHON, e.g. /tmp/newtonvenv/bin/python) on its CPU device.
MuJoCo (``--mujoco-python`` or $MUJOCO_PYTHON, an interpreter with ``mujoco`` installed) runs the same
cartpole written in MJCF through ``mujoco.rollout`` with one thread per core, the batch as its trajectories.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from loomwork.apps.benchutil import find_python, run_json

SCRIPT = r'''
import json, sys, time
import numpy as np
if {newton}:
    import warp as wp, newton
    wp.config.quiet = True
else:
    import loomwork as wp, loomwork.sim as newton
WORLDS, STEPS = {worlds}, {steps}
b = newton.ModelBuilder()
cart = b.add_link(mass=1.0, inertia=wp.mat33(np.diag([0.01, 0.01, 0.01]).astype(np.float32)))
pole = b.add_link(mass=0.1, com=wp.vec3(0.0, 0.0, 0.5),
                  inertia=wp.mat33(np.diag([0.1 / 12, 0.1 / 12, 1e-5]).astype(np.float32)))
j0 = b.add_joint_prismatic(-1, cart, axis=(1.0, 0.0, 0.0), limit_lower=-3.0, limit_upper=3.0)
j1 = b.add_joint_revolute(cart, pole, axis=(0.0, 1.0, 0.0))
b.add_articulation([j0, j1])
b.joint_q[1] = 0.1
scene = newton.ModelBuilder()
scene.replicate(b, WORLDS)
model = scene.finalize("cpu")
solver = newton.solvers.SolverFeatherstone(model)
s0, s1 = model.state(), model.state()
control = model.control()
newton.eval_fk(model, s0.joint_q, s0.joint_qd, s0)
for _ in range(3):
    solver.step(s0, s1, control, None, 1.0 / 240.0)
    s0, s1 = s1, s0
wp.synchronize()
best = float("inf")
for _ in range(3):
    t = time.perf_counter()
    for _ in range(STEPS):
        solver.step(s0, s1, control, None, 1.0 / 240.0)
        s0, s1 = s1, s0
    wp.synchronize()
    best = min(best, time.perf_counter() - t)
q = s0.joint_q.numpy()
print(json.dumps({{"steps_per_s": STEPS / best, "pole_angle_0": float(q[1])}}))
'''


MUJOCO_SCRIPT = r'''
import json, os, time
import numpy as np
import mujoco
from mujoco import rollout
WORLDS, STEPS = {worlds}, {steps}
xml = """<mujoco><option timestep="0.0041666667" integrator="Euler" gravity="0 0 -9.81"/>
<worldbody><body name="cart"><joint name="slide" type="slide" axis="1 0 0" range="-3 3" limited="true"/>
<inertial pos="0 0 0" mass="1" diaginertia="0.01 0.01 0.01"/>
<body name="pole"><joint name="hinge" type="hinge" axis="0 1 0"/>
<inertial pos="0 0 0.5" mass="0.1" diaginertia="0.0083333 0.0083333 0.00001"/></body></body></worldbody></mujoco>"""
model = mujoco.MjModel.from_xml_string(xml)
threads = os.cpu_count() or 1
datas = [mujoco.MjData(model) for _ in range(threads)]
d = datas[0]
d.qpos[:] = [0.0, 0.1]
nstate = mujoco.mj_stateSize(model, mujoco.mjtState.mjSTATE_FULLPHYSICS)
state0 = np.empty(nstate)
mujoco.mj_getState(model, d, state0, mujoco.mjtState.mjSTATE_FULLPHYSICS)
init = np.tile(state0, (WORLDS, 1))
out = np.empty((WORLDS, STEPS, nstate))
rollout.rollout(model, datas, init, nstep=3, persistent_pool=True)
best = float("inf")
for _ in range(3):
    t = time.perf_counter()
    rollout.rollout(model, datas, init, nstep=STEPS, state=out, persistent_pool=True)
    best = min(best, time.perf_counter() - t)
print(json.dumps({{"steps_per_s": STEPS / best, "threads": threads, "pole_angle_0": float(out[0, -1, 2])}}))
'''


def measure(python: str, newton: bool, worlds: int, steps: int, workdir: Path) -> dict:
    """Steps per second of one implementation, run in ``python``."""
    return run_json(python, SCRIPT.format(newton=newton, worlds=worlds, steps=steps), workdir)


def main(argv: list[str] | None = None) -> dict:
    """Print and return steps/s of loomwork and (when its interpreter is found) Newton, and their ratio."""
    import sys

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--worlds", type=int, default=4096)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--newton-python", default=None)
    parser.add_argument("--mujoco-python", default=None)
    args = parser.parse_args(argv)
    results: dict = {"worlds": args.worlds, "steps": args.steps}
    with tempfile.TemporaryDirectory() as tmp:
        t = time.perf_counter()
        results["loomwork"] = measure(sys.executable, False, args.worlds, args.steps, Path(tmp))
        results["loomwork_wall_s"] = time.perf_counter() - t
        peer = find_python(args.newton_python, "NEWTON_PYTHON")
        if peer is not None:
            results["newton"] = measure(peer, True, args.worlds, args.steps, Path(tmp))
            results["speedup"] = results["loomwork"]["steps_per_s"] / results["newton"]["steps_per_s"]
        mj = find_python(args.mujoco_python, "MUJOCO_PYTHON")
        if mj is not None:
            results["mujoco"] = run_json(mj, MUJOCO_SCRIPT.format(worlds=args.worlds, steps=args.steps), Path(tmp))
            results["vs_mujoco"] = results["loomwork"]["steps_per_s"] / results["mujoco"]["steps_per_s"]
    print(results)
    return results


if __name__ == "__main__":
    main()
