"""The showcase: differentiable simulation on geometry, rendered to a picture and a USD stage.

    python -m loomwork.apps.demo [--cloth 32] [--frames 90] [--iterations 16] [--out loomwork_demo]

1. A cloth sheet falls onto a triangle mesh (a torus built here, a ``loomwork.sim.Mesh`` collision
   shape found through its BVH) and the ground: SolverSemiImplicit with membrane, bending and contact
   forces. Every frame is recorded into ``<out>.usda`` (when usd-core is installed) and the last one is
   ray-cast into ``<out>.png``.
2. A ball is thrown so that, after bouncing on the ground (penalty contact with friction), it lands on
   a target: ``wp.Tape`` differentiates the whole rollout, contacts included, and gradient descent on
   the throw's velocity brings the miss distance down.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from loomwork.apps.sim_bounce_optim import throw
from loomwork.apps.sim_cloth_drape import drape


def main(argv: list[str] | None = None) -> int:
    """Run the showcase and say where its files are."""
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--cloth", type=int, default=32, help="cloth cells per side")
    p.add_argument("--frames", type=int, default=90, help="frames of the drape (30 per second)")
    p.add_argument("--iterations", type=int, default=16, help="gradient steps of the throw")
    p.add_argument("--out", default="loomwork_demo", help="output path without extension")
    a = p.parse_args(argv)
    if a.cloth < 2 or a.frames < 1 or a.iterations < 1:
        p.error("--cloth must be >= 2 and --frames, --iterations >= 1")
    out = Path(a.out)
    t0 = time.perf_counter()
    print(f"1. cloth {a.cloth}x{a.cloth} draping over a torus mesh, {a.frames} frames ...")
    q = drape(a.cloth, a.frames, out.with_suffix(".usda"), out.with_suffix(".png"))
    print(f"   cloth rests between z = {q[:, 2].min():.3f} and {q[:, 2].max():.3f} m "
          f"({time.perf_counter() - t0:.1f} s so far)")
    print(f"2. differentiating a bounce: {a.iterations} gradient steps on the throw velocity ...")
    losses = throw(a.iterations)
    print("   squared miss distance [m^2]: " + " -> ".join(f"{x:.4f}" for x in losses[:: max(len(losses) // 6, 1)]))
    print(f"wrote {out.with_suffix('.png')}" + (f" and {out.with_suffix('.usda')}" if out.with_suffix(".usda").exists()
                                                  else "") + f" in {time.perf_counter() - t0:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
