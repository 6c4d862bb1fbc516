"""Simulation steps per second on the CPU beside Newton 1.8 (its CPU device), same scenes, same run.

    python -m loomwork.apps.bench_sim [--newton-python /path/to/python] [--steps 200]

Scenes: a 64x64 cloth over a sphere (SolverSemiImplicit, contacts found every 8 steps), a
512-particle granular pile on the ground (particle-particle contacts through the HashGrid) and the
64x64 cloth stiffer (1e4) under SolverVBD at 4 steps a frame, 10 iterations, and 512 rigid spheres, boxes
and capsules dropped in one world onto the ground (SolverXPBD, 4 iterations, contacts every step through the
"sap" broad phase: Newton's sweep and prune, loomwork's Bvh). Newton
runs in its own interpreter (a venv with ``newton==1.8.0``; by default /tmp/newtonvenv); without one
its column says so. Last, loomwork's backward pass of a 100-step 32x32 cloth rollout (``wp.Tape``)
against its forward pass (target: at most 4x), under SemiImplicit and under VBD.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import textwrap
import time

import loomwork as wp
import loomwork.sim as newton


@wp.kernel
def _height_sum(q: wp.array(dtype=wp.vec3), loss: wp.array(dtype=float)):
    wp.atomic_add(loss, 0, q[wp.tid()][2])


# One script, run by both frameworks: `newton`/`wp` are loomwork's or Newton's.
SCENES = textwrap.dedent('''
    import json, sys, time

    def cloth(newton, wp):
        b = newton.ModelBuilder()
        b.add_cloth_grid(pos=(-1.0, -1.0, 2.0), rot=wp.quat_identity(), vel=(0.0, 0.0, 0.0), dim_x=64, dim_y=64,
                         cell_x=2.0 / 64, cell_y=2.0 / 64, mass=0.01, tri_ke=1.0e3, tri_ka=1.0e3, tri_kd=1.0e-1,
                         edge_ke=1.0e-2, particle_radius=0.01)
        b.add_shape_sphere(-1, xform=wp.transform((0.0, 0.0, 1.0), wp.quat_identity()), radius=0.5)
        b.add_ground_plane()
        model = b.finalize(device="cpu")
        model.particle_kd = 1.0  # the default (100 N s/m) is unstable on 10 g particles at this step
        return model, 1.0 / 60 / 32, 8

    def pile(newton, wp):
        b = newton.ModelBuilder()
        b.add_particle_grid(pos=(0.0, 0.0, 0.5), rot=wp.quat_identity(), vel=(0.0, 0.0, 0.0), dim_x=8, dim_y=8,
                            dim_z=8, cell_x=0.1, cell_y=0.1, cell_z=0.1, mass=0.1, jitter=0.01, radius_mean=0.05)
        b.add_ground_plane()
        return b.finalize(device="cpu"), 1.0 / 60 / 16, 1

    def cloth_vbd(newton, wp):
        b = newton.ModelBuilder()
        b.add_cloth_grid(pos=(-1.0, -1.0, 2.0), rot=wp.quat_identity(), vel=(0.0, 0.0, 0.0), dim_x=64, dim_y=64,
                         cell_x=2.0 / 64, cell_y=2.0 / 64, mass=0.01, tri_ke=1.0e4, tri_ka=1.0e4, tri_kd=1.0e-3,
                         edge_ke=1.0e-2, particle_radius=0.01)
        b.add_shape_sphere(-1, xform=wp.transform((0.0, 0.0, 1.0), wp.quat_identity()), radius=0.5)
        b.add_ground_plane()
        b.color()
        return b.finalize(device="cpu"), 1.0 / 60 / 4, 1

    def rigid_pile(newton, wp):
        b = newton.ModelBuilder()
        for i in range(512):
            x, y, z = i % 8, (i // 8) % 8, i // 64
            body = b.add_body(xform=wp.transform((0.25 * x + 0.02 * (z % 2), 0.25 * y, 0.2 + 0.25 * z),
                                                 wp.quat_rpy(0.3 * x, 0.2 * y, 0.1 * z)))
            if i % 3 == 0:
                b.add_shape_sphere(body, radius=0.1)
            elif i % 3 == 1:
                b.add_shape_box(body, hx=0.1, hy=0.08, hz=0.06)
            else:
                b.add_shape_capsule(body, radius=0.06, half_height=0.06)
        b.add_ground_plane()
        return b.finalize(device="cpu"), 1.0 / 120, 1

    def run(newton, wp, make, steps):
        model, dt, every = make(newton, wp)
        broad_phase = "explicit"
        if make is cloth_vbd:
            solver = newton.solvers.SolverVBD(model, iterations=10)
            steps = max(steps // 4, 1)
        elif make is rigid_pile:
            solver = newton.solvers.SolverXPBD(model, iterations=4)
            steps = max(steps // 4, 1)
            broad_phase = "sap"  # loomwork's "sap" is its Bvh broad phase
        else:
            solver = newton.solvers.SolverSemiImplicit(model)
            if make is pile:
                steps *= 4  # a fast scene: rounds long enough to time
        pipe = newton.CollisionPipeline(model, soft_contact_margin=0.05, broad_phase=broad_phase)
        contacts = pipe.contacts()
        s0, s1 = model.state(), model.state()

        def go(n):
            nonlocal s0, s1
            for i in range(n):
                if i % every == 0:
                    pipe.collide(s0, contacts)
                s0.clear_forces()
                solver.step(s0, s1, None, contacts, dt)
                s0, s1 = s1, s0
            wp.synchronize()

        go(10)
        best = 0.0
        for _ in range(3):
            t = time.perf_counter()
            go(steps)
            best = max(best, steps / (time.perf_counter() - t))
        return best

    def main(which, steps):
        if which == "newton":
            import warp as wp
            import newton
            wp.config.quiet = True
            wp.set_device("cpu")
        else:
            import loomwork as wp
            import loomwork.sim as newton
        scenes = (("cloth 64x64", cloth), ("pile 512", pile), ("cloth 64x64 VBD", cloth_vbd),
                  ("rigid pile 512", rigid_pile))
        out = {}
        for name, fn in scenes:
            try:
                out[name] = run(newton, wp, fn, steps)
            except Exception as e:  # a peer without a feature still reports the other scenes
                out[name] = None
                print(f"{name}: {type(e).__name__}: {e}", file=sys.stderr)
        print(json.dumps(out))
''')


def measure(python: str, which: str, steps: int) -> dict | str:
    """Steps per second of each scene under ``which`` ('loomwork' or 'newton'), or why there is none."""
    code = SCENES + f"\nmain({which!r}, {steps})\n"
    r = subprocess.run([python, "-c", code], capture_output=True, text=True, timeout=1800)
    if r.returncode != 0:
        return f"failed: {r.stderr.strip().splitlines()[-1] if r.stderr.strip() else r.returncode}"
    return json.loads(r.stdout.strip().splitlines()[-1])


def backward_ratio(steps: int = 100, rounds: int = 3, vbd: bool = False) -> tuple[float, float]:
    """Best forward and backward seconds of a differentiable ``steps``-step 32x32 cloth rollout falling onto a
    sphere: SolverSemiImplicit at 1/1920 s, or with ``vbd`` a stiffer cloth under SolverVBD (10 iterations)
    at 1/240 s."""
    b = newton.ModelBuilder()
    stiffness, damping = (1.0e4, 1.0e-3) if vbd else (1.0e3, 1.0e-1)
    b.add_cloth_grid(pos=(-1.0, -1.0, 2.0), rot=wp.quat_identity(), vel=(0.0, 0.0, 0.0), dim_x=32, dim_y=32,
                     cell_x=2.0 / 32, cell_y=2.0 / 32, mass=0.01, tri_ke=stiffness, tri_ka=stiffness, tri_kd=damping,
                     edge_ke=1.0e-2, particle_radius=0.01)
    b.add_shape_sphere(-1, xform=wp.transform((0.0, 0.0, 1.0), wp.quat_identity()), radius=0.5)
    b.add_ground_plane()
    b.color()
    m = b.finalize(requires_grad=True)
    m.particle_kd = 1.0
    solver = newton.solvers.SolverVBD(m, iterations=10) if vbd else newton.solvers.SolverSemiImplicit(m)
    dt = 1.0 / 240 if vbd else 1.0 / 60 / 32
    pipe = newton.CollisionPipeline(m, soft_contact_gap=1.0)
    contacts = pipe.contacts()
    states = [m.state() for _ in range(steps + 1)]
    pipe.collide(states[0], contacts)
    loss = wp.zeros(1, dtype=float, requires_grad=True)
    best_f = best_b = float("inf")
    for _ in range(rounds + 1):  # the first round compiles
        tape = wp.Tape()
        t0 = time.perf_counter()
        with tape:
            for t in range(steps):
                states[t].clear_forces()
                solver.step(states[t], states[t + 1], None, contacts, dt)
            wp.launch(_height_sum, dim=m.particle_count, inputs=[states[-1].particle_q, loss])
        t1 = time.perf_counter()
        tape.backward(loss)
        t2 = time.perf_counter()
        best_f, best_b = min(best_f, t1 - t0), min(best_b, t2 - t1)
        tape.zero()
        loss.zero_()
    return best_f, best_b

def main(argv: list[str] | None = None) -> dict:
    """Print steps/s of loomwork and Newton 1.8 for each scene, their ratio and the rollout's backward/forward;
    return the figures."""
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--newton-python", default=os.environ.get("LOOMWORK_NEWTON_PYTHON", "/tmp/newtonvenv/bin/python"))
    p.add_argument("--steps", type=int, default=200, help="steps per timed round of each scene")
    p.add_argument("--rollout", type=int, default=100, help="steps of the differentiated cloth rollout")
    p.add_argument("--rounds", type=int, default=3, help="timed rounds of the rollout")
    a = p.parse_args(argv)
    t0 = time.perf_counter()
    ours = measure(sys.executable, "loomwork", a.steps)
    theirs = measure(a.newton_python, "newton", a.steps) if os.path.exists(a.newton_python) else \
        f"no Newton interpreter at {a.newton_python} (pip install newton==1.8.0 in a venv, pass --newton-python)"
    if isinstance(ours, str):
        raise RuntimeError(f"loomwork {ours}")
    print(f"{'scene':<18}{'loomwork steps/s':>18}{'Newton 1.8 CPU':>16}{'ratio':>8}")
    for scene, v in ours.items():
        n = theirs.get(scene) if isinstance(theirs, dict) else None
        if v is None:
            print(f"{scene:<18}{'failed':>18}")
            continue
        print(f"{scene:<18}{v:>18.0f}{(f'{n:.0f}' if n else '-'):>16}{(f'{v / n:.1f}x' if n else '-'):>8}")
    if isinstance(theirs, str):
        print(f"Newton: {theirs}")
    fwd, bwd = backward_ratio(a.rollout, a.rounds)
    print(f"cloth 32x32, {a.rollout}-step rollout: forward {fwd * 1e3:.0f} ms, backward {bwd * 1e3:.0f} ms "
          f"({bwd / fwd:.1f}x the forward)")
    vbd_f, vbd_b = backward_ratio(a.rollout, 1, vbd=True)
    print(f"stiff cloth 32x32 under VBD, {a.rollout}-step rollout: forward {vbd_f * 1e3:.0f} ms, backward "
          f"{vbd_b * 1e3:.0f} ms ({vbd_b / vbd_f:.1f}x the forward)")
    print(f"({time.perf_counter() - t0:.0f} s)")
    return {"loomwork": ours, "newton": theirs, "forward_s": fwd, "backward_s": bwd, "vbd_forward_s": vbd_f,
            "vbd_backward_s": vbd_b}


if __name__ == "__main__":
    main()
    sys.exit(0)
