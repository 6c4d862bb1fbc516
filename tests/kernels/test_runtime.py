"""Runtime helpers under Warp's names: init, timers and activity timing, logging, streams and events,
memory tracking, caches, memory pools, module lookup and the WarpCodegen* error names."""

import logging
import re

import numpy as np
import pytest

import loomwork as wp


@wp.kernel
def bump(a: wp.array(dtype=float)):
    i = wp.tid()
    a[i] = a[i] + 1.0


def test_init_and_the_names_warp_programs_use():
    """wp.init() is idempotent; wp.utils, wp.get_module, wp.Module and wp.clear_lto_cache exist at the top."""
    wp.init()
    wp.init()
    assert wp.utils.array_sum(wp.ones(3, dtype=float)) == 3.0 and wp.utils.ScopedTimer is wp.ScopedTimer
    m = wp.get_module(__name__)
    assert isinstance(m, wp.Module) and m is bump.module
    wp.clear_lto_cache()


def test_scoped_timer_reports_as_warp(capsys):
    """ScopedTimer prints "<name> took <ms> ms" (nested timers indented, extra_msg appended), fills `dict`,
    stays quiet with print=False, does nothing with active=False or ScopedTimer.enabled = False."""
    times = {}
    with wp.ScopedTimer("outer", dict=times) as outer:
        with wp.ScopedTimer("inner") as inner:
            inner.extra_msg = "(42 steps)"
    out = capsys.readouterr().out.splitlines()
    assert re.fullmatch(r"    inner took \d+\.\d\d ms \(42 steps\)", out[0]), out
    assert re.fullmatch(r"outer took \d+\.\d\d ms", out[1]), out
    assert times == {"outer": [outer.elapsed]} and outer.elapsed >= inner.elapsed > 0
    with wp.ScopedTimer("quiet", print=False) as quiet:
        pass
    with wp.ScopedTimer("off", active=False) as off:
        pass
    wp.ScopedTimer.enabled = False
    try:
        with wp.ScopedTimer("disabled") as disabled:
            pass
    finally:
        wp.ScopedTimer.enabled = True
    assert capsys.readouterr().out == "" and quiet.elapsed > 0 and off.elapsed == disabled.elapsed == 0.0


def test_scoped_timer_activity_timing_tape_scopes_and_profile(capsys):
    """cuda_filter times each activity inside (kept in timing_results, printed by report_func); detailed
    prints cProfile's statistics; open Tapes name the launches inside after the timer."""
    a = wp.zeros(4, dtype=float)
    reports = []
    tape = wp.Tape()
    with tape, wp.ScopedTimer("step", cuda_filter=wp.TIMING_KERNEL, report_func=lambda r, indent: reports.append(r),
                              detailed=True) as t:
        wp.launch(bump, dim=4, inputs=[a])
        a.zero_()  # a memset: not in the filter
    assert [r.name for r in t.timing_results] == ["forward kernel bump"] and reports == [t.timing_results]
    assert t.timing_results[0].filter == wp.TIMING_KERNEL and t.timing_results[0].device == "cpu"
    assert len(tape.launches_in_scope("step")) == 1
    assert "function calls" in capsys.readouterr().out


def test_timing_sessions_filter_nest_and_print(capsys):
    """timing_begin/timing_end report each launch, copy, memset and graph launch their filter takes, in
    order; sessions nest; timing_print prints a timeline and totals; timing_end without a session raises."""
    a = wp.zeros(4, dtype=float)
    b = wp.zeros(4, dtype=float)
    with wp.ScopedCapture() as capture:
        wp.launch(bump, dim=4, inputs=[a])
    wp.timing_begin()
    wp.launch(bump, dim=4, inputs=[a])
    wp.timing_begin(wp.TIMING_MEMCPY | wp.TIMING_GRAPH)
    wp.copy(b, a)
    wp.capture_launch(capture.graph)
    inner = wp.timing_end()
    a.fill_(3.0)
    outer = wp.timing_end()
    assert [(r.name, r.filter) for r in inner] == [("memcpy cpu -> cpu", wp.TIMING_MEMCPY), ("graph", wp.TIMING_GRAPH)]
    assert [r.filter for r in outer] == [wp.TIMING_KERNEL, wp.TIMING_MEMCPY, wp.TIMING_GRAPH, wp.TIMING_MEMSET]
    assert all(isinstance(r, wp.TimingResult) and r.elapsed >= 0 for r in outer)
    wp.timing_print(outer, indent="  ")
    out = capsys.readouterr().out
    assert "  Activity timeline:" in out and "forward kernel bump" in out and "Device summary" in out
    wp.timing_print([])
    assert capsys.readouterr().out == "No activity\n"
    with pytest.raises(RuntimeError, match="timing_begin"):
        wp.timing_end()


def test_loggers_and_log_levels(capsys):
    """set_logger takes Warp's logger protocol or a logging.Logger (None restores the default); ScopedLogger
    and ScopedLogLevel apply inside a block; at LOG_DEBUG a timer also says when it starts."""
    class Collect:
        def __init__(self):
            self.lines = []

        def debug(self, message):
            self.lines.append(("debug", message))

        def info(self, message):
            self.lines.append(("info", message))

        def warning(self, message, category=None, stacklevel=1):
            self.lines.append(("warning", message))

        def error(self, message):
            self.lines.append(("error", message))

    mine = Collect()
    with wp.ScopedLogger(mine), wp.ScopedLogLevel(wp.LOG_DEBUG), wp.ScopedTimer("t"):
        pass
    assert [k for k, _ in mine.lines] == ["debug", "info"] and mine.lines[0][1] == "t ..."
    assert capsys.readouterr().out == "" and wp.get_logger() is not mine
    with pytest.raises(TypeError, match="logging.Logger"):
        wp.set_logger(object())
    records = []
    handler = logging.Handler()
    handler.emit = records.append
    py = logging.getLogger("loomwork-test")
    py.addHandler(handler)
    py.setLevel(logging.INFO)
    wp.set_logger(py)
    try:
        with wp.ScopedTimer("via logging"):
            pass
    finally:
        wp.set_logger(None)
    assert records and records[0].getMessage().startswith("via logging took")
    assert isinstance(wp.get_logger(), wp.Logger) and wp.LOG_INFO == 20


def test_streams_and_events_on_the_cpu():
    """Streams and events work on the CPU, in order: the current stream, ScopedStream (None changes nothing),
    events recorded in order with elapsed times, waits and synchronizes that return at once, clear errors."""
    default = wp.get_stream()
    assert wp.get_stream("cpu") is default and default.device == "cpu" and default.is_complete
    s = wp.Stream(priority=-5)
    assert s.priority == -1 and not s.is_capturing
    with wp.ScopedStream(s) as current:
        assert current is s and wp.get_stream() is s
        start = wp.record_event(wp.Event(enable_timing=True))
        wp.launch(bump, dim=4, inputs=[wp.zeros(4, dtype=float)])
        end = s.record_event(wp.Event(enable_timing=True))
        wp.wait_event(end)
        wp.wait_stream(default)
        wp.synchronize_stream(s)
        wp.synchronize_event(end)
    with wp.ScopedStream(None) as nothing:
        assert nothing is None and wp.get_stream() is default
    assert wp.get_stream() is default and end.is_complete
    assert wp.get_event_elapsed_time(start, end) >= 0.0
    with wp.ScopedCapture() as capture:  # an event recorded in a capture is reached when the graph runs
        late = wp.record_event(wp.Event(enable_timing=True))
    with pytest.raises(RuntimeError, match="not been recorded"):
        wp.get_event_elapsed_time(end, late)
    wp.capture_launch(capture.graph)
    assert wp.get_event_elapsed_time(end, late) > 0.0
    wp.set_stream(s)
    assert wp.get_stream() is s
    wp.set_stream(default, device="cpu")
    with pytest.raises(ValueError, match="enable_timing"):
        wp.get_event_elapsed_time(wp.record_event(), end)
    with pytest.raises(RuntimeError, match="not been recorded"):
        wp.get_event_elapsed_time(wp.Event(enable_timing=True), end)
    with pytest.raises(wp.DeviceError, match="CUDA"):
        wp.Stream(cuda_stream=1234)
    with pytest.raises(wp.DeviceError, match="interprocess"):
        wp.Event(interprocess=True)
    with pytest.raises(TypeError, match="wp.Stream"):
        wp.set_stream("cpu")
    with pytest.raises(wp.LaunchError, match="wp.Stream"):
        wp.launch(bump, dim=1, inputs=[wp.zeros(1, dtype=float)], stream="cpu")


def test_memory_tracker_reports_live_allocations(capsys):
    """ScopedMemoryTracker reports the tracked allocations still live, with size, scope and the line that
    made them; clear() forgets earlier ones; print_memory_report needs a tracker on."""
    with wp.ScopedMemoryTracker("outer") as outer:
        outer.clear()
        kept = wp.zeros(1000, dtype=float)
        with wp.ScopedMemoryTracker("inner", print=False):
            freed = wp.zeros(10, dtype=float)
            inner_kept = wp.zeros(300, dtype=float)
            del freed
            wp.print_memory_report(sort="chronological")
    out = capsys.readouterr().out
    first, last = out.split("Memory report: ")[1:]
    assert first.startswith("2 live allocation(s), 5.1 KiB") and last.startswith("2 live allocation(s)")
    lines = [line for line in first.splitlines() if "test_runtime.py" in line]
    assert "scope outer " in lines[0] and "scope outer/inner " in lines[1] and "3.9 KiB" in lines[0]
    assert kept.size + inner_kept.size == 1300
    with pytest.raises(RuntimeError, match="track_memory"):
        wp.print_memory_report()


def test_clear_kernel_cache_deletes_builds_and_loaded_kernels_keep_running(tmp_path):
    """clear_kernel_cache empties wp.config.kernel_cache_dir; a module already loaded keeps running."""
    def _twice(a: wp.array(dtype=float)):
        i = wp.tid()
        a[i] = 2.0 * a[i]

    saved = wp.config.kernel_cache_dir
    wp.config.kernel_cache_dir = str(tmp_path)
    try:
        k = wp.kernel(_twice, module="unique")
        a = wp.ones(3, dtype=float)
        wp.launch(k, dim=3, inputs=[a])
        assert any("_twice_unique" in p.name for p in tmp_path.iterdir())
        wp.clear_kernel_cache()
        assert [p.name for p in tmp_path.iterdir()] == [".locks"]
        wp.launch(k, dim=3, inputs=[a])
    finally:
        wp.config.kernel_cache_dir = saved
    np.testing.assert_array_equal(a.numpy(), 4.0)


def test_memory_pools_and_peer_access_are_off():
    """The CPU has no memory pool and no peer access: queries say False, turning them off is a no-op, and
    turning them on (or asking a pool's figures) raises ValueError, as Warp does on its CPU."""
    assert not wp.is_mempool_supported("cpu") and not wp.is_mempool_enabled("cpu")
    assert not wp.is_mempool_access_supported("cpu", "cpu") and not wp.is_peer_access_enabled("cpu", "cpu")
    wp.set_mempool_enabled("cpu", False)
    with wp.ScopedMempool("cpu", False), wp.ScopedPeerAccess("cpu", "cpu", False):
        pass
    for call in (lambda: wp.set_mempool_enabled("cpu", True), lambda: wp.get_mempool_used_mem_current("cpu"),
                 lambda: wp.set_mempool_release_threshold("cpu", 0.5), lambda: wp.set_peer_access_enabled(
                     "cpu", "cpu", True)):
        with pytest.raises(ValueError, match="cpu"):
            call()


def test_warp_codegen_error_names_catch_kernel_errors():
    """`except wp.WarpCodegenTypeError` catches loomwork's kernel type errors; Warp's hierarchy holds."""
    for name, base in (("Type", TypeError), ("Value", ValueError), ("Attribute", AttributeError),
                       ("Index", IndexError), ("Key", KeyError)):
        cls = getattr(wp, f"WarpCodegen{name}Error")
        assert issubclass(cls, wp.WarpCodegenError) and issubclass(cls, base)

    def _bad(a: wp.array(dtype=float)):
        a[0] = wp.vec3(1.0, 2.0, 3.0) + 1.0

    k = wp.kernel(_bad, module="unique")
    with pytest.raises(wp.WarpCodegenTypeError):
        wp.launch(k, dim=1, inputs=[wp.zeros(1, dtype=float)])


def test_cuda_versions_are_tuples_or_none():
    """get_cuda_driver_version / get_cuda_toolkit_version give (major, minor) or None, as Warp's do: no
    driver here gives None, NVRTC gives the toolkit it belongs to."""
    for v in (wp.get_cuda_driver_version(), wp.get_cuda_toolkit_version()):
        assert v is None or (isinstance(v, tuple) and len(v) == 2 and all(isinstance(x, int) for x in v) and v[0] >= 9)
    from loomwork.kernels.build import nvrtc_available

    assert (wp.get_cuda_toolkit_version() is not None) == nvrtc_available()


def test_cuda_supported_archs_are_nvrtcs():
    """get_cuda_supported_archs lists the compute capabilities NVRTC targets, ascending ([] without NVRTC)."""
    from loomwork.kernels.build import nvrtc_available

    archs = wp.get_cuda_supported_archs()
    assert archs == sorted(archs) and all(isinstance(a, int) and a >= 50 for a in archs)
    assert bool(archs) == nvrtc_available()


def test_custom_allocators_give_arrays_their_memory_and_take_it_back():
    """wp.set_device_allocator / ScopedAllocator route array allocations through any object with allocate /
    deallocate (here a logging wrapper of the device's default_allocator, as Warp's example writes one); the
    memory goes back when the arrays are garbage, and arrays made before keep theirs. Works on the CPU too
    (Warp's is CUDA-only). Objects without the two methods are refused."""
    import gc

    class Logging:
        def __init__(self, device):
            self.inner, self.log = device.default_allocator, []

        def allocate(self, n):
            self.log.append(("allocate", n))
            return self.inner.allocate(n)

        def deallocate(self, ptr, n):
            self.log.append(("deallocate", n))
            self.inner.deallocate(ptr, n)

    cpu = wp.get_device("cpu")
    logging = Logging(cpu)
    before = wp.full(4, 2.0)
    assert wp.get_device_allocator(cpu) is cpu.default_allocator and isinstance(logging, wp.Allocator)
    assert cpu.default_allocator.memory_kind == wp.MemoryKind.HOST
    with wp.ScopedAllocator(cpu, logging):
        assert wp.get_device_allocator(cpu) is logging
        a = wp.zeros(1000, dtype=float)
        b = wp.full(10, 3.0)
        assert a.numpy().sum() == 0.0 and b.numpy().sum() == 30.0
    c = wp.ones(3)
    assert logging.log == [("allocate", 4000), ("allocate", 40)] and wp.get_device_allocator(cpu) is not logging
    del a, b, c
    gc.collect()
    assert logging.log[2:] == [("deallocate", 4000), ("deallocate", 40)] and before.numpy().sum() == 8.0
    with pytest.raises(TypeError, match="Allocator protocol"):
        wp.set_device_allocator(cpu, object())
    with pytest.raises(ValueError, match="was not allocated by it"):
        cpu.default_allocator.deallocate(12345, 8)
