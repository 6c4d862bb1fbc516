"""CUDA figures on the GPU at hand, beside PyTorch and CuPy measured in the same run (when installed).

    python -m loomwork.apps.bench_cuda [--n-log2 26] [--bodies 8192]

- saxpy at n = 2^26 as a fraction of the device-to-device copy bandwidth measured in the same run
  (bytes read plus written; device time from CUDA events, median of the repetitions);
- launch overhead: host microseconds per launch of a one-thread kernel, 20000 launches back to back;
- graph replay: 100 small launches captured once and replayed, against the same 100 launched one by one;
- n-body with `--bodies` bodies (vec3 float32, softening 0.01): billions of pair interactions per second,
  the same kernel as apps/bench_nbody.py, beside the same computation written with PyTorch tensors.
Warp 1.19's wheel (150 MB) cannot be carried to the GPU machine this was written on; its figures are
quoted from Warp's documentation where the issue names them, not measured here.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import numpy as np

import loomwork as wp
from loomwork.apps.bench_nbody import forces_of

forces = wp.kernel(forces_of, module="loomwork.apps.bench_cuda.nbody")


@wp.kernel
def saxpy(x: wp.array(dtype=float), y: wp.array(dtype=float), a: float):
    i = wp.tid()
    y[i] = a * x[i] + y[i]


@wp.kernel
def tiny(x: wp.array(dtype=float)):
    x[wp.tid()] += 1.0


def device_ms(fn: Callable[[], object], reps: int, device: str) -> float:
    """Median milliseconds of `fn`'s device work, timed with CUDA events."""
    fn()
    times = []
    for _ in range(reps):
        start, end = wp.Event(device, enable_timing=True), wp.Event(device, enable_timing=True)
        wp.record_event(start)
        fn()
        wp.record_event(end)
        times.append(wp.get_event_elapsed_time(start, end))
    return statistics.median(times)


def host_us(fn: Callable[[], object], count: int, sync: Callable[[], object]) -> float:
    """Microseconds of host time per call of `fn`, over `count` calls (then waiting for the device)."""
    fn()
    sync()
    t0 = time.perf_counter()
    for _ in range(count):
        fn()
    sync()
    return (time.perf_counter() - t0) / count * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n-log2", type=int, default=26)
    parser.add_argument("--bodies", type=int, default=8192)
    args = parser.parse_args()
    if not wp.is_cuda_available():
        raise SystemExit("bench_cuda needs a CUDA GPU; none was found on this machine")
    dev = "cuda:0"
    wp.set_device(dev)
    print(f"device: {wp.get_device(dev).name} (sm_{wp.get_device(dev).arch}), driver {wp.get_cuda_driver_version()}")
    try:
        import torch
        torch = torch if torch.cuda.is_available() else None
    except ImportError:
        torch = None
    try:
        import cupy
    except ImportError:
        cupy = None
    rows: list[tuple[str, str]] = []

    n = 1 << args.n_log2
    rng = np.random.default_rng(0)
    x = wp.array(rng.standard_normal(n).astype(np.float32), device=dev)
    y = wp.array(rng.standard_normal(n).astype(np.float32), device=dev)
    dst = wp.empty_like(x)
    copy_ms = device_ms(lambda: wp.copy(dst, x), 20, dev)
    copy_gbs = 2 * 4 * n / copy_ms / 1e6
    saxpy_ms = device_ms(lambda: wp.launch(saxpy, n, inputs=[x, y, 0.5]), 20, dev)
    saxpy_gbs = 3 * 4 * n / saxpy_ms / 1e6
    rows.append(("device-to-device copy", f"{copy_gbs:8.0f} GB/s  ({copy_ms:.3f} ms)"))
    rows.append((f"saxpy n=2^{args.n_log2}", f"{saxpy_gbs:8.0f} GB/s  ({saxpy_ms:.3f} ms) = "
                 f"{saxpy_gbs / copy_gbs:.1%} of copy bandwidth"))
    if torch is not None:
        tx, ty = wp.to_torch(x), wp.to_torch(y)
        t_ms = device_ms(lambda: ty.add_(tx, alpha=0.5), 20, dev)
        rows.append(("  PyTorch y.add_(x, alpha)", f"{3 * 4 * n / t_ms / 1e6:8.0f} GB/s  ({t_ms:.3f} ms); "
                     f"loomwork/PyTorch time {saxpy_ms / t_ms:.2f}x"))

    t = wp.zeros(1, dtype=float, device=dev)
    ours = host_us(lambda: wp.launch(tiny, 1, inputs=[t]), 20000, wp.synchronize)
    rows.append(("launch overhead, loomwork", f"{ours:6.2f} us per launch"))
    if torch is not None:
        tt = torch.zeros(1, device="cuda")
        us = host_us(lambda: tt.add_(1.0), 20000, torch.cuda.synchronize)
        rows.append(("launch overhead, PyTorch add_", f"{us:6.2f} us"))
    if cupy is not None:
        inc = cupy.ElementwiseKernel("", "float32 x", "x += 1.0f", "inc")
        ct = cupy.zeros(1, dtype=cupy.float32)
        rows.append(("launch overhead, CuPy ElementwiseKernel",
                     f"{host_us(lambda: inc(ct), 20000, cupy.cuda.Device().synchronize):6.2f} us"))

    small = wp.zeros(1024, dtype=float, device=dev)

    def hundred() -> None:
        for _ in range(100):
            wp.launch(tiny, 1024, inputs=[small])

    with wp.ScopedCapture(dev) as capture:
        hundred()
    direct = host_us(hundred, 200, wp.synchronize)
    replay = host_us(lambda: wp.capture_launch(capture.graph), 200, wp.synchronize)
    rows.append(("100 small launches, one by one", f"{direct:8.1f} us"))
    rows.append(("  the same, graph replay", f"{replay:8.1f} us = {direct / replay:.1f}x faster"))

    nb = args.bodies
    pos_np = rng.standard_normal((nb, 3)).astype(np.float32)
    mass_np = rng.uniform(0.5, 1.5, nb).astype(np.float32)
    pos, mass = wp.array(pos_np, dtype=wp.vec3, device=dev), wp.array(mass_np, device=dev)
    acc = wp.zeros(nb, dtype=wp.vec3, device=dev)
    nb_ms = device_ms(lambda: wp.launch(forces, nb, inputs=[pos, mass, acc]), 20, dev)
    rows.append((f"n-body {nb} bodies, loomwork", f"{nb * nb / nb_ms / 1e6:8.1f} G pairs/s ({nb_ms:.3f} ms)"))
    got = acc.numpy()
    r = pos_np[None, :, :] - pos_np[:, None, :]
    inv = 1.0 / np.sqrt((r.astype(np.float64) ** 2).sum(-1) + 1e-4)
    ref = (r * (mass_np[None, :] * inv ** 3)[..., None]).sum(1)
    err = np.linalg.norm(got - ref) / np.linalg.norm(ref)
    rows.append(("  relative error vs float64", f"{err:.1e}"))
    if torch is not None:
        tp, tm = wp.to_torch(pos), wp.to_torch(mass)

        def torch_forces() -> object:
            d = tp[None, :, :] - tp[:, None, :]
            s = tm[None, :] * torch.rsqrt((d * d).sum(-1) + 1e-4) ** 3
            return (d * s[..., None]).sum(1)

        t_ms = device_ms(torch_forces, 10, dev)
        rows.append(("  PyTorch (broadcast tensors)", f"{nb * nb / t_ms / 1e6:8.1f} G pairs/s ({t_ms:.3f} ms)"))

    width = max(len(k) for k, _ in rows)
    for k, v in rows:
        print(f"{k:<{width}}  {v}")


if __name__ == "__main__":
    main()
