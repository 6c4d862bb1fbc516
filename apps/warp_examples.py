"""Run Warp's own example programs unmodified against loomwork (`import warp` resolves to loomwork), and
optionally with real Warp, and compare what both produce.

    python -m loomwork.apps.warp_examples [EXAMPLES_DIR] [--warp-python PY] [--only NAME,...] [--frames N]
                                          [--timeout S] [--keep DIR]

EXAMPLES_DIR is the `examples` folder of an installed warp-lang (never copied into this project); without
it, the warp-lang 1.19.0 wheel is downloaded with pip and only its examples are unpacked, into
~/.cache/loomwork-warp-examples (`fetch_examples`). Its `core` and `optim` programs run, each in its own interpreter and
temporary folder, with the options it accepts among `--device cpu`, `--headless`, `--stage-path`,
`--num-frames`/`--num-steps` and `--train-iters`. The table lists each run (ok / the first error) and,
with `--warp-python` (an interpreter that has warp-lang), whether the two agree: the last time sample of
every point-based prim of the USD stages they write, and the numbers on the last printed line that
mentions a loss.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import re
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

WARP_VERSION = "1.19.0"

# Run in the child interpreter: `warp` and `warp.<x>` become loomwork and loomwork.<x>, Warp's example
# assets are read from the examples folder, then the example runs as __main__.
_BOOT = """
import importlib, importlib.abc, importlib.util, runpy, sys
import loomwork, loomwork.examples

class _Alias(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, name, path, target=None):
        if name != "warp" and not name.startswith("warp."):
            return None
        if importlib.util.find_spec("loomwork" + name[4:]) is None:
            return None
        return importlib.util.spec_from_loader(name, self)
    def create_module(self, spec):
        return importlib.import_module("loomwork" + spec.name[4:])
    def exec_module(self, module):
        pass

sys.meta_path.insert(0, _Alias())
loomwork.examples.get_asset_directory = lambda: {assets!r}
sys.argv = {argv!r}
runpy.run_path(sys.argv[0], run_name="__main__")
"""

_LOSS = re.compile(r"loss", re.IGNORECASE)
_NUMBER = re.compile(r"[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?|nan|inf", re.IGNORECASE)
_ERROR = re.compile(r"^\s*(?:[\w.]+(?:Error|Exception|Exit)|AssertionError|Segmentation fault)\b.*")


@dataclasses.dataclass
class Run:
    """One example run by one implementation."""

    ok: bool
    seconds: float
    error: str = ""
    stage: Path | None = None
    stdout: str = ""


def fetch_examples(version: str = WARP_VERSION, cache: Path | None = None) -> Path:
    """The `examples` folder of warp-lang `version`: its wheel is fetched with pip (no dependencies, no
    install) and only `warp/examples/` unpacked, once, under `cache` (default ~/.cache/loomwork-warp-examples,
    apart from the kernel cache, which `wp.clear_kernel_cache()` empties).
    Raises RuntimeError with pip's message when the wheel cannot be had (offline, say)."""
    root = cache or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "loomwork-warp-examples"
    target = root / f"warp-lang-{version}"
    if (target / "warp" / "examples" / "core").is_dir():
        return target / "warp" / "examples"
    root.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=root) as tmp:
        proc = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
                               "-q", f"warp-lang=={version}", "-d", tmp],
                              capture_output=True, text=True, timeout=900)
        wheels = list(Path(tmp).glob("warp_lang-*.whl"))
        if proc.returncode != 0 or not wheels:
            reason = (proc.stderr.strip().splitlines() or ["no wheel"])[-1]
            raise RuntimeError(f"could not download warp-lang {version} for its examples: {reason}")
        unpacked = Path(tmp) / "unpacked"
        with zipfile.ZipFile(wheels[0]) as wheel:
            wheel.extractall(unpacked, [n for n in wheel.namelist() if n.startswith("warp/examples/")])
        try:
            unpacked.rename(target)  # atomic: a concurrent fetch either wins or finds the folder complete
        except OSError:
            if not (target / "warp" / "examples" / "core").is_dir():
                raise
    return target / "warp" / "examples"


def find_examples(root: Path) -> list[Path]:
    """The example programs under `root`'s `core` and `optim` folders (or in `root` itself)."""
    folders = [root / "core", root / "optim"] if (root / "core").is_dir() else [root]
    return sorted(p for folder in folders if folder.is_dir() for p in folder.glob("example_*.py"))


def example_args(source: str, workdir: Path, frames: int | None) -> list[str]:
    """The command-line options this example's parser declares, among the ones the harness sets."""
    args = []
    if '"--device"' in source:
        args += ["--device", "cpu"]
    if '"--headless"' in source:
        args.append("--headless")
    for opt in ('"--stage-path"', '"--stage_path"'):
        if opt in source:
            args += [opt.strip('"'), str(workdir / "stage.usd")]
    if frames is not None:
        for opt in ('"--num-frames"', '"--num_frames"', '"--num-steps"', '"--train-iters"', '"--train_iters"'):
            if opt in source:
                args += [opt.strip('"'), str(frames)]
    return args


def first_error(stderr: str, returncode: int) -> str:
    """The first line of stderr naming an exception, else its last line, else the exit status."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    for line in lines:
        if _ERROR.match(line):
            return line[:200]
    return (lines[-1][:200] if lines else "") or f"exit status {returncode}"


def loss_numbers(stdout: str) -> list[float]:
    """The numbers on the last line of `stdout` that mentions a loss (empty when none does)."""
    lines = [line for line in stdout.splitlines() if _LOSS.search(line)]
    return [float(x) for x in _NUMBER.findall(lines[-1])] if lines else []


def stage_points(path: Path) -> dict[str, object]:
    """{prim path: points or positions at the stage's last time code} of a USD stage (needs usd-core)."""
    import numpy as np
    from pxr import Usd, UsdGeom

    stage = Usd.Stage.Open(str(path))
    t = stage.GetEndTimeCode()
    out = {}
    for prim in stage.Traverse():
        if prim.IsA(UsdGeom.PointBased):
            value = UsdGeom.PointBased(prim).GetPointsAttr().Get(t)
        elif prim.IsA(UsdGeom.PointInstancer):
            value = UsdGeom.PointInstancer(prim).GetPositionsAttr().Get(t)
        else:
            continue
        if value is not None:
            out[str(prim.GetPath())] = np.array(value, dtype=np.float64)
    return out


def compare(ours: Run, theirs: Run) -> str:
    """How closely two runs agree: the largest relative difference of stage points and losses."""
    import numpy as np

    notes = []
    if ours.stage and theirs.stage and ours.stage.exists() and theirs.stage.exists():
        try:
            a, b = stage_points(ours.stage), stage_points(theirs.stage)
        except ImportError:
            notes.append("stage: usd-core missing")
        else:
            if set(a) != set(b):
                notes.append(f"stage prims differ: {sorted(set(a) ^ set(b))[:3]}")
            worst = 0.0
            for key in set(a) & set(b):
                if a[key].shape != b[key].shape:
                    notes.append(f"{key}: shape {a[key].shape} vs {b[key].shape}")
                    continue
                scale = max(float(np.ptp(b[key])) if b[key].size else 0.0, 1e-12)
                worst = max(worst, float(np.max(np.abs(a[key] - b[key]), initial=0.0)) / scale)
            notes.append(f"stage max rel diff {worst:.2e}")
    la, lb = loss_numbers(ours.stdout), loss_numbers(theirs.stdout)
    if la and lb:
        if len(la) != len(lb):
            notes.append(f"loss line differs: {la} vs {lb}")
        else:
            rel = max(abs(x - y) / max(abs(y), 1e-12) for x, y in zip(la, lb, strict=True))
            notes.append(f"loss max rel diff {rel:.2e}")
    return "; ".join(notes) or "nothing to compare"


def run_one(example: Path, python: str, workdir: Path, frames: int | None, timeout: float,
            alias_assets: Path | None) -> Run:
    """Run `example` in `workdir` with `python`: through the loomwork alias when `alias_assets` is given
    (the examples' asset folder), else as is (real Warp)."""
    workdir.mkdir(parents=True, exist_ok=True)
    argv = [str(example), *example_args(example.read_text(), workdir, frames)]
    if alias_assets is not None:
        cmd = [python, "-c", _BOOT.format(assets=str(alias_assets), argv=argv)]
    else:
        cmd = [python, *argv]
    env = dict(os.environ, MPLBACKEND="Agg", PYTHONUNBUFFERED="1")
    start = time.perf_counter()
    try:
        proc = subprocess.run(cmd, cwd=workdir, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return Run(False, time.perf_counter() - start, f"timed out after {timeout:.0f} s")
    seconds = time.perf_counter() - start
    stage = workdir / "stage.usd"
    if proc.returncode != 0:
        return Run(False, seconds, first_error(proc.stderr, proc.returncode), stdout=proc.stdout)
    return Run(True, seconds, stage=stage if stage.exists() else None, stdout=proc.stdout)


def main(argv: list[str] | None = None) -> dict[str, tuple[Run, Run | None]]:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("examples", type=Path, nargs="?",
                   help=f"the examples folder of an installed warp-lang (default: warp-lang {WARP_VERSION}'s, "
                        "downloaded once by fetch_examples)")
    p.add_argument("--warp-python", help="an interpreter with warp-lang installed, to run each example with Warp")
    p.add_argument("--only", help="comma-separated example names (e.g. example_wave,example_sph)")
    p.add_argument("--frames", type=int, help="frames / steps / training iterations, where the example takes them")
    p.add_argument("--timeout", type=float, default=600.0, help="seconds per run")
    p.add_argument("--keep", type=Path, help="keep each run's folder (stages, images) under this folder")
    args = p.parse_args(argv)
    if args.examples is None:
        args.examples = fetch_examples()
    examples = find_examples(args.examples)
    if args.only:
        wanted = {name.removesuffix(".py") for name in args.only.split(",")}
        examples = [e for e in examples if e.stem in wanted]
    if not examples:
        p.error(f"no example_*.py programs found under {args.examples}")
    assets = args.examples / "assets"
    results: dict[str, tuple[Run, Run | None]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        base = args.keep or Path(tmp)
        for example in examples:
            ours = run_one(example, sys.executable, base / example.stem / "loomwork", args.frames, args.timeout,
                           assets)
            theirs = None
            if args.warp_python:
                theirs = run_one(example, args.warp_python, base / example.stem / "warp", args.frames,
                                 args.timeout, None)
            results[example.stem] = (ours, theirs)
            print(_row(example.stem, ours, theirs), flush=True)
    ran = sum(ours.ok for ours, _ in results.values())
    print(f"\nloomwork ran {ran} of {len(results)} examples")
    return results


def _row(name: str, ours: Run, theirs: Run | None) -> str:
    def cell(run: Run) -> str:
        return f"ran {run.seconds:6.1f} s" if run.ok else f"FAILED ({run.seconds:.1f} s): {run.error}"

    row = f"{name:44s} loomwork: {cell(ours)}"
    if theirs is not None:
        row += f" | warp: {cell(theirs)}"
        if ours.ok and theirs.ok:
            row += f" | {compare(ours, theirs)}"
    return row


if __name__ == "__main__":
    main()
