"""Timers with Warp's names: `ScopedTimer` (the wall time of a block, reported as Warp reports it) and
activity timing (`timing_begin` / `timing_end`: every kernel launch, copy, memset and graph launch issued
meanwhile, timed as it runs).

Activity timing costs nothing while off; while on, each piece of work is timed around its call
(kernels/stream.py `submit`). Work on the CPU completes inside that call, so the times are those of the
work itself (plus a microsecond of call overhead); work on a GPU is timed by CUDA events recorded around
it on its stream, read at `timing_end`. Sessions nest: each `timing_begin` starts one that
the matching `timing_end` closes, and work is reported to every open session whose filter takes it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from .device import Device
from .extensions import registry
from .launch import synchronize as _synchronize_all
from .logger import get_logger, log_debug
from .stream import TIMING_ALL, GpuInterval, runtime


class TimingResult:
    """One timed activity: its device, name, kind (a TIMING_* flag) and `elapsed` milliseconds."""

    def __init__(self, device: Device, name: str, filter: int, elapsed: float) -> None:  # noqa: A002 - Warp's name
        self.device, self.name, self.filter, self.elapsed = device, name, filter, elapsed

    def __repr__(self) -> str:
        return f"TimingResult({self.device}, {self.name!r}, {self.filter}, {self.elapsed:.6f} ms)"


def timing_begin(cuda_filter: int = TIMING_ALL, synchronize: bool = True) -> None:
    """Start timing the activities whose kind is in `cuda_filter` (TIMING_* flags or'ed together)."""
    if synchronize:
        _synchronize_all()
    with runtime.lock:
        runtime.timing.append((int(cuda_filter), []))
        runtime.timing_filter |= int(cuda_filter)
        runtime.update()


def timing_end(synchronize: bool = True) -> list[TimingResult]:
    """End the innermost timing session and return what it timed, in order."""
    if synchronize:
        _synchronize_all()
    with runtime.lock:
        if not runtime.timing:
            raise RuntimeError("timing_end: no activity timing is in progress (call timing_begin first)")
        _, results = runtime.timing.pop()
        runtime.timing_filter = 0
        for flt, _ in runtime.timing:
            runtime.timing_filter |= flt
        runtime.update()
    return [TimingResult(d, name, kind, ms.ms() if isinstance(ms, GpuInterval) else ms)
            for d, name, kind, ms in results]


def timing_print(results: list[TimingResult], indent: str = "") -> None:
    """Print a timeline of `results`, then totals per activity and per device."""
    if not results:
        print("No activity")
        return
    width = max(len("Activity"), *(len(r.name) for r in results)) + 1
    rule = f"{indent}----------------+---------+{'-' * width}"
    per_activity: dict[str, list] = {}
    per_device: dict[str, list] = {}
    print(f"{indent}Activity timeline:")
    print(rule)
    print(f"{indent}Time            | Device  | Activity")
    print(rule)
    for r in results:
        for table, key in ((per_activity, r.name), (per_device, str(r.device))):
            total = table.setdefault(key, [0, 0.0])
            total[0] += 1
            total[1] += r.elapsed
        print(f"{indent}{r.elapsed:12.6f} ms | {str(r.device):7s} | {r.name}")
    for title, column, table in (("Activity summary", "Activity", per_activity),
                                 ("Device summary", "Device", per_device)):
        print()
        print(f"{indent}{title}:")
        print(rule)
        print(f"{indent}Total time      | Count   | {column}")
        print(rule)
        for key, (count, elapsed) in table.items():
            print(f"{indent}{elapsed:12.6f} ms | {count:7d} | {key}")


class ScopedTimer:
    """`with wp.ScopedTimer("step"):` measures the block's wall time; `.elapsed` is in milliseconds.

    With `print`, "<name> took <ms> ms" (and `extra_msg`) goes to the logger when the block ends,
    indented by nesting; `dict` collects the times under `name`; `synchronize` waits for outstanding
    device work at both ends; `cuda_filter` (TIMING_* flags) also times each activity inside, kept in
    `timing_results` and printed with `report_func` (default `timing_print`); `detailed` profiles the
    block with cProfile; `use_nvtx` marks an NVTX range (needs the `nvtx` package). Open Tapes of this
    thread name the launches inside after the timer (`Tape.launches_in_scope`), unless `skip_tape`.
    Setting `ScopedTimer.enabled = False` turns every timer off."""

    enabled = True
    _local = threading.local()

    def __init__(self, name: str, active: bool = True, print: bool = True, detailed: bool = False,  # noqa: A002
                 dict: dict[str, list[float]] | None = None, use_nvtx: bool = False, color: int | str = "rapids",
                 synchronize: bool = False, cuda_filter: int = 0,
                 report_func: Callable[[list[TimingResult], str], None] | None = None,
                 skip_tape: bool = False) -> None:
        self.name, self.active, self.print, self.detailed = name, active and self.enabled, print, detailed
        self.dict, self.use_nvtx, self.color, self.synchronize = dict, use_nvtx, color, synchronize
        self.cuda_filter, self.report_func, self.skip_tape = cuda_filter, report_func or timing_print, skip_tape
        self.elapsed = 0.0
        self.extra_msg = ""
        self.timing_results: list[TimingResult] = []
        self._tapes: list[Any] = []
        if dict is not None:
            dict.setdefault(name, [])

    @classmethod
    def _indent(cls, step: int) -> int:
        depth = getattr(cls._local, "depth", -1) + step
        cls._local.depth = depth
        return depth

    def __enter__(self) -> ScopedTimer:
        if self.active:
            if self.synchronize:
                _synchronize_all()
            if self.cuda_filter:
                timing_begin(self.cuda_filter, synchronize=not self.synchronize)
            if self.detailed:
                import cProfile

                self._profile = cProfile.Profile()
                self._profile.enable()
            if self.use_nvtx:
                self._nvtx = _nvtx()
                self._nvtx_range = self._nvtx.start_range(self.name, color=self.color)
            if self.print:
                log_debug(f"{'    ' * self._indent(+1)}{self.name} ...")
            self._start = time.perf_counter_ns()
        if not self.skip_tape:
            self._tapes = [t for t in registry.local.recorders if hasattr(t, "record_scope_begin")]
            for tape in self._tapes:
                tape.record_scope_begin(self.name)
        return self

    def __exit__(self, *exc: Any) -> None:
        for tape in self._tapes:
            tape.record_scope_end()
        self._tapes = []
        if not self.active:
            return
        if self.synchronize:
            _synchronize_all()
        self.elapsed = (time.perf_counter_ns() - self._start) / 1e6
        if self.use_nvtx:
            self._nvtx.end_range(self._nvtx_range)
        if self.detailed:
            self._profile.disable()
            self._profile.print_stats(sort="tottime")
        if self.cuda_filter:
            self.timing_results = timing_end(synchronize=not self.synchronize)
        if self.dict is not None:
            self.dict[self.name].append(self.elapsed)
        if self.print:
            indent = "    " * getattr(self._local, "depth", 0)
            if self.timing_results:
                self.report_func(self.timing_results, indent=indent)
            extra = f" {self.extra_msg}" if self.extra_msg else ""
            get_logger().info(f"{indent}{self.name} took {self.elapsed:.2f} ms{extra}")
            self._indent(-1)


def _nvtx() -> Any:
    try:
        import nvtx
    except ImportError:
        raise ImportError("ScopedTimer(use_nvtx=True) needs the nvtx package (pip install nvtx)") from None
    return nvtx
