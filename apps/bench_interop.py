"""PyTorch and DLPack interop benchmark on the CPU: the conversion paths of the user's documents, beside Warp.

    python -m loomwork.apps.bench_interop [--warp-python PATH] [--iters 20000] [--rounds 3]

The documents' conversion benchmark (Warp's `benchmark_interop_torch`) on the CPU: each iteration converts five
tensors with `from_torch(t)`, or `from_torch(t, return_ctype=True)`, or passes them straight to `launch`, then
launches a kernel of five array parameters; for float32 arrays and for vec3 arrays made of (n, 3) tensors.
Then DLPack import and export of a 1-element and a 2^24-element array, beside `torch.from_dlpack` of a
tensor. Every figure is the processor time of one call in microseconds (the process's CPU time, so that load
from other processes on a shared machine counts less than in wall time), the best of several rounds. Both
frameworks run the same script, each in its own process, in alternation; Warp 1.19 when `--warp-python`
names an interpreter with warp-lang and torch (or one is found at LOOMWORK_WARP_PYTHON).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from loomwork.apps.benchutil import alternate_best, find_python, run_json

# Runs under either framework; prints one JSON line of microseconds per call.
SCRIPT = """
import json, time, torch, torch.utils.dlpack
import {lib} as wp
{init}
torch.set_num_threads(1)


@wp.kernel
def k_float(a: wp.array(dtype=float), b: wp.array(dtype=float), c: wp.array(dtype=float),
            d: wp.array(dtype=float), e: wp.array(dtype=float)):
    i = wp.tid()


@wp.kernel
def k_vec3(a: wp.array(dtype=wp.vec3), b: wp.array(dtype=wp.vec3), c: wp.array(dtype=wp.vec3),
           d: wp.array(dtype=wp.vec3), e: wp.array(dtype=wp.vec3)):
    i = wp.tid()


ITERS, REPS = {iters}, {reps}


def per_call(fn, calls=1):
    fn()
    best = 1e9
    for _ in range(REPS):
        t0 = time.process_time()
        for _ in range(ITERS):
            fn()
        best = min(best, (time.process_time() - t0) / ITERS)
    return best / calls * 1e6


out = {{}}
for label, kernel, dtype, shape in (("float32", k_float, None, (10,)), ("vec3", k_vec3, wp.vec3, (10, 3))):
    ts = [torch.zeros(shape) for _ in range(5)]
    wp.launch(kernel, dim=10, inputs=[wp.from_torch(t, dtype=dtype) for t in ts], device="cpu")
    out[label + " from_torch"] = per_call(
        lambda: wp.launch(kernel, dim=10, inputs=[wp.from_torch(t, dtype=dtype) for t in ts], device="cpu"))
    out[label + " return_ctype"] = per_call(
        lambda: wp.launch(kernel, dim=10, inputs=[wp.from_torch(t, dtype=dtype, return_ctype=True) for t in ts],
                          device="cpu"))
    out[label + " direct"] = per_call(lambda: wp.launch(kernel, dim=10, inputs=ts, device="cpu"))
for n in (1, 1 << 24):
    t = torch.zeros(n)
    a = wp.from_torch(t)
    out[f"{{n}} wp.from_dlpack(tensor)"] = per_call(lambda: wp.from_dlpack(t))
    fresh = iter([torch.utils.dlpack.to_dlpack(t) for _ in range(ITERS * REPS + 1)])  # a capsule is read once
    out[f"{{n}} wp.from_dlpack(capsule)"] = per_call(lambda: wp.from_dlpack(next(fresh)))
    out[f"{{n}} wp.to_dlpack(array)"] = per_call(lambda: wp.to_dlpack(a))
    out[f"{{n}} torch.from_dlpack(array)"] = per_call(lambda: torch.from_dlpack(a))
    out[f"{{n}} torch.from_dlpack(tensor)"] = per_call(lambda: torch.from_dlpack(t))
print(json.dumps(out))
"""

CONVERSIONS = ["from_torch", "return_ctype", "direct"]


def measure(python: str, lib: str, workdir: Path, iters: int) -> dict:
    init = "wp.config.quiet = True\nwp.init()" if lib == "warp" else ""
    return run_json(python, SCRIPT.format(lib=lib, init=init, iters=iters, reps=3), workdir)


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--iters", type=int, default=20000, help="calls per timed loop")
    p.add_argument("--rounds", type=int, default=3, help="alternating rounds of both frameworks (best kept)")
    p.add_argument("--warp-python", default=None, help="a Python interpreter with warp-lang and torch installed")
    args = p.parse_args(argv)
    warp_python = find_python(args.warp_python, "LOOMWORK_WARP_PYTHON")
    with tempfile.TemporaryDirectory() as tmp:
        figures = alternate_best({"loomwork": sys.executable, "warp": warp_python},
                                 lambda lib, python: measure(python, lib, Path(tmp), args.iters), args.rounds)
    ours, warp = figures["loomwork"], figures["warp"]

    print("PyTorch conversions on the CPU, microseconds per iteration (5 tensors converted, 1 launch):")
    for key in ours:
        if key.split(" ")[1] not in CONVERSIONS:
            continue
        line = f"  {key:24s} loomwork {ours[key]:7.2f}"
        if key in warp:
            line += f"   Warp {warp[key]:7.2f}   (loomwork/Warp = {ours[key] / warp[key]:.2f})"
        print(line)
    print("\nDLPack, microseconds per call (n = elements):")
    for key in ours:
        if key.split(" ")[1] in CONVERSIONS:
            continue
        line = f"  {key:34s} loomwork {ours[key]:7.2f}"
        if key in warp:
            line += f"   Warp {warp[key]:7.2f}"
        print(line)
    if not warp_python:
        print("\n(Warp not measured: pass --warp-python /path/to/python-with-warp-lang-and-torch)")
    return {"loomwork": ours, "warp": warp or None}


if __name__ == "__main__":
    main()
