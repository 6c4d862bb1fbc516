"""Streams and events, and `submit`: the point every piece of device work passes through.

A `Stream` is an ordered queue of device work and an `Event` a point in one. On a device whose work
completes before the call that issued it returns (the CPU), every stream is already in order and
synchronized: waiting on a stream or an event returns at once, and an event records the time it was
reached, so `get_event_elapsed_time` measures host time between two events. Device-generic programs
(Warp's `ScopedStream`, `record_event` / `wait_event` pairs) therefore run unchanged.

Each device has a current stream (`get_stream` / `set_stream` / `ScopedStream`); work issued without a
stream goes to it. While a stream is being captured (kernels/capture.py), `submit` records the work it
is given into the stream's graph instead of running it; while activity timing is on (kernels/timing.py)
it times each piece of work. Neither costs a launch anything when off: `runtime.intercept` is the one
flag a launch looks at.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

from . import device as device_module
from .device import Device, ScopedDevice, get_device
from .errors import DeviceError

#: kinds of device work, as Warp's activity-timing flags
TIMING_KERNEL = 1
TIMING_KERNEL_BUILTIN = 2
TIMING_MEMCPY = 4
TIMING_MEMSET = 8
TIMING_GRAPH = 16
TIMING_ALL = 0xFFFFFFFF


class Runtime:
    """What the streams of this process share: each device's current stream, how many streams are being
    captured, and the open activity-timing sessions (kernels/timing.py), each a filter of TIMING_* flags and
    the (device, name, kind, milliseconds) it collected."""

    def __init__(self) -> None:
        self.current: dict[Device, Stream] = {}
        self.capturing = 0
        self.timing: list[tuple[int, list[tuple[Device, str, int, float]]]] = []
        self.timing_filter = 0  # the union of the open sessions' filters
        self.intercept = False  # a capture or timing is on: submitted work is looked at before it runs
        self.lock = threading.Lock()

    def update(self) -> None:
        self.intercept = bool(self.capturing or self.timing)


runtime = Runtime()


class Stream:
    """An ordered queue of work on one device (`priority`: -1 high, 0 default; values are clamped).

    On a CUDA device it is a driver stream (`cuda_stream`, its handle; `Stream(device, cuda_stream=h)` wraps
    one made elsewhere, which this object then does not destroy). On the CPU work completes in order before
    the call that issued it returns, so there is nothing to wait for."""

    def __init__(self, device: Any = None, priority: int = 0, **kwargs: Any) -> None:
        self.device = get_device(device)
        handle = kwargs.pop("cuda_stream", None)
        if kwargs:
            raise TypeError(f"Stream() got unexpected keyword argument(s) {', '.join(kwargs)}")
        if not isinstance(priority, int) or isinstance(priority, bool):
            raise TypeError(f"Stream priority must be an integer, got {priority!r}")
        self.priority = max(-1, min(priority, 0))
        self.graph: Any = None  # the graph being captured from this stream (kernels/capture.py)
        backend = self.device.backend
        self._owned = False
        if handle is not None:  # None: no stream to wrap (an FFI callback's context on the CPU)
            if not hasattr(backend, "create_stream"):
                raise DeviceError(f"Stream(cuda_stream=...) wraps an existing CUDA stream; {self.device} has no "
                                  "CUDA streams")
            self.cuda_stream = int(handle)
        elif hasattr(backend, "create_stream"):
            self.cuda_stream = backend.create_stream(self.priority)
            self._owned = True
        else:
            self.cuda_stream = None

    def __del__(self) -> None:
        if getattr(self, "_owned", False):
            try:
                self.device.backend.destroy_stream(self.cuda_stream)
            except Exception:  # noqa: BLE001 - the driver may be gone at interpreter exit
                pass

    @property
    def is_capturing(self) -> bool:
        """Whether a graph capture is recording this stream's work."""
        return self.graph is not None

    @property
    def is_complete(self) -> bool:
        """Whether all work issued to this stream has finished."""
        return self.cuda_stream is None or self.device.backend.stream_done(self.cuda_stream)

    @property
    def is_blocking(self) -> bool:
        return True

    def record_event(self, event: Event | None = None, external: bool = False) -> Event:
        """Mark the current end of this stream's work with `event` (a new Event when None) and return it."""
        if event is None:
            event = Event(self.device)
        elif not isinstance(event, Event):
            raise TypeError(f"record_event takes a wp.Event, got {type(event).__name__}")
        elif event.device != self.device:
            raise DeviceError(f"an event of device {event.device} cannot be recorded on a stream of {self.device}")
        if self.cuda_stream is not None:
            submit(self.device, self, self.device.backend.record, (event.cuda_event, self.cuda_stream))
            event._reached = 0.0
        else:
            submit(self.device, self, event._reach, ())
        return event

    def wait_event(self, event: Event, external: bool = False) -> None:
        """Make later work on this stream wait for `event`."""
        if not isinstance(event, Event):
            raise TypeError(f"wait_event takes a wp.Event, got {type(event).__name__}")
        if self.cuda_stream is not None and event.cuda_event is not None:
            submit(self.device, self, self.device.backend.stream_wait_event, (self.cuda_stream, event.cuda_event))
        elif event.cuda_event is not None:  # the CPU waits for a GPU event by waiting for it on the host
            synchronize_event(event)

    def wait_stream(self, other_stream: Stream, event: Event | None = None, external: bool = False) -> None:
        """Make later work on this stream wait for the work issued so far on `other_stream`."""
        if not isinstance(other_stream, Stream):
            raise TypeError(f"wait_stream takes a wp.Stream, got {type(other_stream).__name__}")
        if other_stream is self or other_stream.cuda_stream is None:
            return
        if self.cuda_stream is None:
            synchronize_stream(other_stream)
            return
        self.wait_event(other_stream.record_event(event))

    def __repr__(self) -> str:
        return f"Stream(device={self.device}, priority={self.priority})"


class Event:
    """A point in a stream's work; with `enable_timing`, it also keeps when that point was reached."""

    def __init__(self, device: Any = None, cuda_event: Any = None, enable_timing: bool = False,
                 interprocess: bool = False) -> None:
        self.device = get_device(device)
        if interprocess and enable_timing:
            raise ValueError("an Event cannot have both enable_timing=True and interprocess=True")
        backend = self.device.backend
        if not hasattr(backend, "create_event"):
            if cuda_event is not None or interprocess:
                raise DeviceError(f"{'interprocess events' if interprocess else 'Event(cuda_event=...)'} are CUDA "
                                  f"events; {self.device} has none")
            self.cuda_event = None
        elif interprocess:
            raise DeviceError("interprocess CUDA events are not supported by loomwork")
        self.enable_timing = enable_timing
        self._owned = False
        if hasattr(backend, "create_event"):
            self._owned = cuda_event is None
            self.cuda_event = int(cuda_event) if cuda_event is not None else backend.create_event(enable_timing)
        self._reached: float | None = None  # time.perf_counter() when last reached (CPU); 0.0 once recorded (CUDA)

    def __del__(self) -> None:
        if getattr(self, "_owned", False):
            try:
                self.device.backend.destroy_event(self.cuda_event)
            except Exception:  # noqa: BLE001 - the driver may be gone at interpreter exit
                pass

    def _reach(self) -> None:
        self._reached = time.perf_counter()

    @property
    def is_complete(self) -> bool:
        """Whether the work before this event's last recording has finished."""
        return self.cuda_event is None or self.device.backend.event_done(self.cuda_event)

    def __repr__(self) -> str:
        return f"Event(device={self.device}, enable_timing={self.enable_timing})"


def get_stream(device: Any = None) -> Stream:
    """The stream work on `device` (default: the current device) goes to when no stream is named."""
    dev = get_device(device)
    s = runtime.current.get(dev)
    if s is None:
        handle = getattr(dev.backend, "default_stream", None)  # the stream a CUDA backend made for itself
        with runtime.lock:
            s = runtime.current.setdefault(dev, Stream(dev, cuda_stream=handle))
    return s


def _capturing(device: Device) -> bool:
    return get_stream(device).graph is not None


device_module.capture_probe = _capturing


def set_stream(stream: Stream, device: Any = None, sync: bool = False) -> None:
    """Make `stream` the current stream of its device (`device`, when given, must be that device);
    with `sync`, it first waits for the work of the stream it replaces."""
    if not isinstance(stream, Stream):
        raise TypeError(f"set_stream takes a wp.Stream, got {type(stream).__name__}")
    if device is not None and get_device(device) != stream.device:
        raise DeviceError(f"a stream of {stream.device} cannot be the current stream of {get_device(device)}")
    if sync:
        stream.wait_stream(get_stream(stream.device))
    runtime.current[stream.device] = stream
    if stream.cuda_stream is not None:
        stream.device.backend.stream = stream.cuda_stream


class ScopedStream:
    """`with wp.ScopedStream(stream):` makes `stream` (and its device) current inside the block; None
    changes nothing. `sync_enter` / `sync_exit` order the new and the previous stream at the boundaries."""

    def __init__(self, stream: Stream | None, sync_enter: bool = True, sync_exit: bool = False) -> None:
        if stream is not None and not isinstance(stream, Stream):
            raise TypeError(f"ScopedStream takes a wp.Stream or None, got {type(stream).__name__}")
        self.stream, self.sync_enter, self.sync_exit = stream, sync_enter, sync_exit
        if stream is not None:
            self.device = stream.device
            self._device_scope = ScopedDevice(stream.device)

    def __enter__(self) -> Stream | None:
        if self.stream is not None:
            self._device_scope.__enter__()
            self.saved_stream = get_stream(self.device)
            set_stream(self.stream, sync=self.sync_enter)
        return self.stream

    def __exit__(self, *exc: Any) -> None:
        if self.stream is not None:
            set_stream(self.saved_stream, sync=self.sync_exit)
            self._device_scope.__exit__(*exc)


def _stream_of(stream_or_device: Any) -> Stream:
    return stream_or_device if isinstance(stream_or_device, Stream) else get_stream(stream_or_device)


def synchronize_stream(stream_or_device: Any = None) -> None:
    """Wait until the work issued to a stream (or to a device's current stream) is done."""
    s = _stream_of(stream_or_device)
    if s.cuda_stream is not None:
        s.device.backend.synchronize_stream(s.cuda_stream)


def synchronize_event(event: Event) -> None:
    """Wait until the work before `event` is done."""
    if not isinstance(event, Event):
        raise TypeError(f"synchronize_event takes a wp.Event, got {type(event).__name__}")
    if event.cuda_event is not None:
        event.device.backend.synchronize_event(event.cuda_event)


def record_event(event: Event | None = None, external: bool = False) -> Event:
    """`record_event` on the current device's current stream."""
    return get_stream().record_event(event, external)


def wait_event(event: Event, external: bool = False) -> None:
    """`wait_event` on the current device's current stream."""
    get_stream().wait_event(event, external)


def wait_stream(other_stream: Stream, event: Event | None = None, external: bool = False) -> None:
    """`wait_stream` on the current device's current stream."""
    get_stream().wait_stream(other_stream, event, external)


def get_event_elapsed_time(start_event: Event, end_event: Event, synchronize: bool = True) -> float:
    """Milliseconds between two recorded events made with `enable_timing=True`."""
    for name, e in (("start_event", start_event), ("end_event", end_event)):
        if not isinstance(e, Event):
            raise TypeError(f"get_event_elapsed_time: {name} must be a wp.Event, got {type(e).__name__}")
        if not e.enable_timing:
            raise ValueError(f"get_event_elapsed_time: {name} was created without enable_timing=True")
        if e._reached is None:
            raise RuntimeError(f"get_event_elapsed_time: {name} has not been recorded (record_event) yet")
    if synchronize:
        synchronize_event(end_event)
    if end_event.cuda_event is not None:
        return end_event.device.backend.elapsed_ms(start_event.cuda_event, end_event.cuda_event)
    return (end_event._reached - start_event._reached) * 1e3


def capturing_graph(device: Device, stream: Stream | None = None) -> Any:
    """The graph recording work issued on `stream` (None: `device`'s current stream), or None."""
    s = stream if stream is not None else runtime.current.get(device)
    return s.graph if s is not None else None


def submit(device: Device, stream: Stream | None, fn: Callable[..., Any], args: tuple,
           writes: Iterable[tuple[Any, str]] = (), name: str = "", kind: int = 0, keep: tuple = ()) -> None:
    """Run `fn(*args)`, a piece of work on `device` issued to `stream` (None: the device's current stream)
    that writes the array storages in `writes` ((storage, writer) pairs); or, while that stream is being
    captured, record it, with `keep` (objects its arguments point into), into the graph instead. Timing
    (when on and `kind` is among its flags) reports it as `name`. The caller bumps the storages' versions."""
    if runtime.intercept:
        graph = capturing_graph(device, stream)
        if graph is not None:
            graph.record(fn, args, writes, keep, kind)
            return
        if runtime.timing_filter & kind:
            s = stream if stream is not None else get_stream(device)
            if s.cuda_stream is not None:  # asynchronous work: timed by events around it on its stream
                ms: Any = GpuInterval(device)
                device.backend.record(ms.start.cuda_event, s.cuda_stream)
                run_on(s, fn, args)
                device.backend.record(ms.end.cuda_event, s.cuda_stream)
            else:
                t0 = time.perf_counter()
                fn(*args)
                ms = (time.perf_counter() - t0) * 1e3
            for flt, results in runtime.timing:
                if flt & kind:
                    results.append((device, name, kind, ms))
            return
    if stream is not None and stream.cuda_stream is not None:
        run_on(stream, fn, args)
    else:
        fn(*args)


class GpuInterval:
    """The device time of one piece of timed asynchronous work: two timing events around it, read once it
    is done (`ms()`)."""

    def __init__(self, device: Device) -> None:
        self.start, self.end = Event(device, enable_timing=True), Event(device, enable_timing=True)

    def ms(self) -> float:
        backend = self.end.device.backend
        backend.synchronize_event(self.end.cuda_event)
        return backend.elapsed_ms(self.start.cuda_event, self.end.cuda_event)


def run_on(stream: Stream, fn: Callable[..., Any], args: tuple) -> Any:
    """`fn(*args)` with `stream` as its device's current stream (device work `fn` issues goes there)."""
    if stream.cuda_stream is None:
        return fn(*args)
    backend = stream.device.backend
    saved = backend.stream
    if saved == stream.cuda_stream:
        return fn(*args)
    backend.stream = stream.cuda_stream
    try:
        return fn(*args)
    finally:
        backend.stream = saved
