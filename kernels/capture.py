"""Graph capture: record the device work a stretch of Python issues, then replay it with `capture_launch`.

Between `capture_begin` and `capture_end` (or inside `with wp.ScopedCapture() as capture:`), launches,
`wp.copy`, `fill_` / `zero_` / `assign`, recorded events and launches of other graphs issued to the
capturing stream are recorded instead of run, as CUDA graphs do (kernels/stream.py `submit` is where they
are diverted). A launch is recorded already packed: its arguments were checked and converted once, at
capture, so a replay only calls into the backend, and consecutive launches replay in one native call
(`Backend.batch`). Scalars are fixed at their capture-time values; arrays are recorded by address, and
the graph keeps every array, temporary and loaded module it points into alive.

`capture_if` / `capture_while` record branches and loops whose condition (element 0 of an int32 array)
is read when the graph runs: each body, a callable or a finished Graph, is captured once into a child
graph. Outside a capture they run the body directly.

What cannot be replayed faithfully raises `wp.CaptureError` (a RuntimeError): a capture begun on a stream
that is already capturing (captures do not nest; use `capture_if`/`capture_while` or launch a finished
graph inside), launching a graph from inside its own capture, ending a capture from inside a conditional
body, and Python reading (`.numpy()`, element access, `str`, `list`, DLPack and array-interface exports)
or writing elements of an array that a recorded operation writes, until the capture ends: the values
would be those from before the graph runs. Python code inside a capture runs once, at capture; only the
device work it issues is replayed.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable, Iterable
from typing import Any

from .array import array
from .device import Device, get_device
from .errors import CaptureError, DeviceError
from .module import force_load
from .stream import TIMING_GRAPH, TIMING_KERNEL, Stream, get_stream, runtime, submit
from .types import int32


class Graph:
    """Device work recorded by a capture; `wp.capture_launch(graph)` replays it."""

    def __init__(self, device: Device, parent: Graph | None = None) -> None:
        self.device = device
        self._root: Graph = parent._root if parent is not None else self
        self._ops: list[tuple[Callable[..., Any], tuple, int]] = []  # (function, arguments, kind) as recorded
        self._program: list[tuple[Callable[..., Any], tuple]] = []  # what a replay calls, in order
        self._writes: dict[Any, str] = {}  # array storage -> its last writer in this graph
        self._keep: list[Any] = []  # what the recorded arguments point into
        self._marked: list[Any] = []  # (root only) storages marked as written by the capture in progress
        self._watchers: list[Any] = []  # (root only) see `watch`
        self.capturing = True

    def record(self, fn: Callable[..., Any], args: tuple, writes: Iterable[tuple[Any, str]], keep: tuple,
               kind: int = 0) -> None:
        """Add `fn(*args)` to the graph (called by `stream.submit` for work issued to a capturing stream)."""
        self._ops.append((fn, args, kind))
        root = self._root
        for storage, writer in writes:
            self._writes[storage] = writer
            if storage.captured is None:
                storage.captured = root
                root._marked.append(storage)
        if keep:
            self._keep.append(keep)

    def watch(self, watcher: Any) -> None:
        """Tell `watcher` when this capture ends (`watcher.capture_ended()`) and after each replay
        (`watcher.replayed()`): a Tape's record of a launch captured here is re-read by every replay."""
        self._root._watchers.append(watcher)

    def refuse_host_access(self, what: str) -> None:
        """Raised for Python touching memory this capture has a pending write to (see the module docstring)."""
        raise CaptureError(f"{what}: the array is written by work recorded in a graph capture that is still in "
                           "progress; that work runs only when the graph is launched, so Python would see the "
                           "values from before it. End the capture (capture_end / leave ScopedCapture), run "
                           "wp.capture_launch(graph), then read the array")

    def _finish(self) -> None:
        """End recording: consecutive launches become one batch of the device's backend."""
        self.capturing = False
        program: list[tuple[Callable[..., Any], tuple]] = []
        run: list[tuple[Callable[[bytes], None], bytes]] = []
        for fn, args, kind in self._ops:
            if kind == TIMING_KERNEL:
                run.append((fn, args[0]))
                continue
            if run:
                program.append((self.device.backend.batch(run), ()))
                run = []
            program.append((fn, args))
        if run:
            program.append((self.device.backend.batch(run), ()))
        self._program = program
        if self._root is self:
            for storage in self._marked:
                if storage.captured is self:
                    storage.captured = None
            self._marked = []
            for watcher in self._watchers:
                watcher.capture_ended()

    def _replay(self) -> None:
        try:
            for fn, args in self._program:
                fn(*args)
        finally:
            for storage, writer in self._writes.items():
                storage.bump(writer)
        for watcher in self._watchers:
            watcher.replayed()

    @property
    def operation_count(self) -> int:
        """How many operations were recorded (launches, copies, memsets, conditionals, graph launches)."""
        return len(self._ops)

    def __repr__(self) -> str:
        state = "capturing" if self.capturing else "ready"
        return f"Graph(device={self.device}, {len(self._ops)} operation(s), {state})"


def _capture_stream(device: Any, stream: Stream | None) -> Stream:
    if stream is None:
        return get_stream(device)
    if not isinstance(stream, Stream):
        raise TypeError(f"stream must be a wp.Stream, got {type(stream).__name__}")
    if device is not None and get_device(device) != stream.device:
        raise DeviceError(f"device {get_device(device)} is not the device of the stream ({stream.device})")
    return stream


def capture_begin(device: Any = None, stream: Stream | None = None, force_module_load: bool | None = None,
                  external: bool = False, apic: bool = False, capture_mode: Any = None) -> None:
    """Start recording the work issued to `stream` (default: the current stream of `device`) into a Graph
    that `capture_end` returns. `force_module_load=True` builds every module first (modules also build
    during a capture); `capture_mode` concerns CUDA's capture-unsafe calls and is ignored here."""
    s = _capture_stream(device, stream)
    if external:
        raise CaptureError(f"capture_begin(external=True) continues a CUDA stream capture started outside "
                           f"loomwork; {s.device} has none to continue")
    if apic:
        raise CaptureError("capture_begin(apic=True) records a graph for wp.capture_save, which loomwork does "
                           "not have; capture without apic=True")
    if s.graph is not None:
        raise CaptureError(f"a graph capture is already in progress on {s} (captures do not nest: end it first, "
                           "or record the inner work with capture_if / capture_while, or launch a finished graph "
                           "inside the capture)")
    if force_module_load:
        force_load(s.device)
    with runtime.lock:
        s.graph = Graph(s.device)
        runtime.capturing += 1
        runtime.update()


def capture_end(device: Any = None, stream: Stream | None = None) -> Graph:
    """Stop the capture on `stream` (default: the current stream of `device`) and return its Graph."""
    s = _capture_stream(device, stream)
    graph = s.graph
    if graph is None:
        raise CaptureError(f"capture_end: no graph capture is in progress on {s}")
    if graph._root is not graph:
        raise CaptureError("capture_end was called inside a capture_if / capture_while body that is being "
                           "captured; end the capture after the conditional returns")
    with runtime.lock:
        s.graph = None
        runtime.capturing -= 1
        runtime.update()
    graph._finish()
    return graph


class ScopedCapture:
    """`with wp.ScopedCapture() as capture:` records the block's device work; `capture.graph` is the
    Graph once the block has ended (an exception leaving the block ends the capture too)."""

    def __init__(self, device: Any = None, stream: Stream | None = None, force_module_load: bool | None = None,
                 external: bool = False, apic: bool = False, capture_mode: Any = None) -> None:
        self.device, self.stream, self.force_module_load = device, stream, force_module_load
        self.external, self.apic, self.capture_mode = external, apic, capture_mode
        self.active = False
        self.graph: Graph | None = None

    def __enter__(self) -> ScopedCapture:
        capture_begin(self.device, self.stream, self.force_module_load, self.external, self.apic, self.capture_mode)
        self.active = True
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if not self.active:
            return
        self.active = False
        try:
            self.graph = capture_end(self.device, self.stream)
        except CaptureError:
            if exc_type is None:  # never hide the exception that ended the block
                raise


def capture_launch(graph: Graph, stream: Stream | None = None) -> None:
    """Run a captured graph's work in order (on `stream` when given; inside another capture, the
    launch of the graph is itself recorded)."""
    if not isinstance(graph, Graph):
        raise TypeError(f"capture_launch takes a wp.Graph, got {type(graph).__name__}")
    if graph.capturing:
        raise CaptureError("capture_launch: this graph is still being captured (a graph cannot launch itself "
                           "from inside its own capture); end the capture first")
    if stream is not None and (not isinstance(stream, Stream) or stream.device != graph.device):
        raise DeviceError(f"capture_launch: a graph of {graph.device} runs on a wp.Stream of that device, got "
                          f"{stream!r}")
    submit(graph.device, stream, graph._replay, (), graph._writes.items(), "graph", TIMING_GRAPH, (graph,))


def is_conditional_graph_supported() -> bool:
    """Whether captures can record `capture_if` / `capture_while` (they can, on every device loomwork runs)."""
    return True


class _DeviceFlag:
    """Element 0 of an int32 array in device memory: `value` reads it once the work queued before is done (a
    conditional on a GPU decides on the host, waiting for the device at each decision)."""

    def __init__(self, condition: array) -> None:
        self.condition = condition

    @property
    def value(self) -> int:
        out = ctypes.c_int32()
        self.condition.device.backend.download(ctypes.addressof(out), self.condition.ptr, 4)
        return out.value


def _condition(condition: Any, what: str) -> Any:
    """The int32 element 0 of `condition` (its `value`), read each time a conditional runs."""
    if not isinstance(condition, array) or condition.dtype is not int32 or condition.size < 1:
        raise TypeError(f"{what}: the condition must be a wp.array of int32 with one element, got "
                        f"{condition!r}")
    if not condition.device.backend.host_accessible:
        return _DeviceFlag(condition)
    return ctypes.c_int32.from_address(condition.ptr)


def _run(body: Any, kwargs: dict, stream: Stream | None, what: str) -> None:
    """Run a conditional's body now: a callable with `kwargs`, or a Graph."""
    if isinstance(body, Graph):
        capture_launch(body, stream)
    elif callable(body):
        body(**kwargs)
    else:
        raise TypeError(f"{what} must be a callable or a wp.Graph, got {type(body).__name__}")


def _capture_body(s: Stream, body: Any, kwargs: dict, what: str) -> Graph:
    """A conditional's body as a child graph of the capture on `s` (a finished Graph is used as it is)."""
    parent: Graph = s.graph
    if isinstance(body, Graph):
        if body.capturing:
            raise CaptureError(f"{what}: the graph is still being captured; a graph cannot run inside its own "
                               "capture")
        return body
    if not callable(body):
        raise TypeError(f"{what} must be a callable or a wp.Graph, got {type(body).__name__}")
    child = Graph(s.device, parent)
    s.graph = child
    try:
        body(**kwargs)
    finally:
        s.graph = parent
    child._finish()
    return child


def _replay_if(flag: Any, on_true: Graph | None, on_false: Graph | None) -> None:
    branch = on_true if flag.value else on_false
    if branch is not None:
        branch._replay()


def _replay_while(flag: Any, body: Graph) -> None:
    while flag.value:
        body._replay()


def _child_writes(*graphs: Graph | None) -> list[tuple[Any, str]]:
    return [w for g in graphs if g is not None for w in g._writes.items()]


def capture_if(condition: array, on_true: Any = None, on_false: Any = None, stream: Stream | None = None,
               **kwargs: Any) -> None:
    """Run `on_true` if element 0 of `condition` (an int32 array) is nonzero, else `on_false`; each is a
    callable (called with `kwargs`) or a Graph. Inside a capture, the branch is chosen when the graph runs."""
    if on_true is None and on_false is None:
        return
    flag = _condition(condition, "capture_if")
    s = _capture_stream(condition.device, stream)
    if s.graph is None:
        body = on_true if flag.value else on_false
        if body is not None:
            _run(body, kwargs, stream, "capture_if: on_true" if flag.value else "capture_if: on_false")
        return
    t = _capture_body(s, on_true, kwargs, "capture_if: on_true") if on_true is not None else None
    f = _capture_body(s, on_false, kwargs, "capture_if: on_false") if on_false is not None else None
    s.graph.record(_replay_if, (flag, t, f), _child_writes(t, f), (condition, t, f))


def capture_while(condition: array, while_body: Any, stream: Stream | None = None, **kwargs: Any) -> None:
    """Run `while_body` (a callable called with `kwargs`, or a Graph) while element 0 of `condition` (an
    int32 array the body updates) is nonzero. Inside a capture, the loop runs when the graph does."""
    flag = _condition(condition, "capture_while")
    s = _capture_stream(condition.device, stream)
    if s.graph is None:
        while flag.value:
            _run(while_body, kwargs, stream, "capture_while: while_body")
        return
    body = _capture_body(s, while_body, kwargs, "capture_while: while_body")
    s.graph.record(_replay_while, (flag, body), _child_writes(body), (condition, body))
