"""`wp.Tape`: records launches, then runs their adjoints in reverse to compute gradients.

A tape records the launches made by the thread that entered it (`with tape:`), and only while it is
entered there; tapes nest, each recording every launch made inside it. A launch that raised (a
debug-mode bounds fault, a bad argument) is not recorded.

Every array carries a write version. A recorded launch remembers the version of each array it
read; if loomwork wrote that array before `backward` (a later kernel, `fill_`, `assign`, `wp.copy`),
backward raises an error naming both kernels and the array, because the adjoint would replay the kernel
on values it never saw. A kernel's updates of arrays it reads are classified when it is built
(`ir.in_place`): read, then updated (`a[i] = a[i] * 2.0`): the launch copies the array first and the
adjoint replays from the copy; only updated atomically (atomic_max), or only read after every store to it
(`y[i] = f(x[i]); z[i] = y[i]`): the adjoint reads what the launch left; read and then read again after a
write (or in a loop that writes it): refused before the launch runs (`before_launch`).
Writes loomwork does not
make (through a `.numpy()` view or `__array_interface__` it handed out, a wrapped NumPy array
(`wp.array(a, copy=False)`, or a NumPy array passed to `wp.launch`), a `from_ptr`/`ptr=` alias) are
caught by content instead: for such exposed arrays the launch also records a checksum of the memory
the array spans, compared again at `backward`. That costs one pass over those arrays at record time
and one at `backward`; arrays never exposed cost nothing. What is not caught: writes through exposed
memory that restore the exact bytes, and writes on devices whose backend has no checksum.
`check_overwrites` turns the check into a warning or off (off: no checksums either).

`backward` accumulates into the gradients of the arrays the recorded launches only read (inputs,
parameters), as Warp's and PyTorch's do: two backward passes (of one tape, or of two tapes sharing a
parameter) add up until `tape.zero()` or `grad.zero_()`. The gradients of the arrays the launches write
(intermediate results) are computed afresh each time: zeroed before seeding, or written first by the
adjoint that covers them (fused_zeroing). Gradient buffers the caller supplied (an array's `.grad` set by
hand or shared with another framework, or the adjoints in `grads=`) are never zeroed or consumed behind
the caller's back.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from loomwork.kernels import types as T
from loomwork.kernels.array import array, byte_span, indexedarray
from loomwork.kernels.errors import LoomworkError
from loomwork.kernels.extensions import registry
from loomwork.kernels.launch import launch
from loomwork.kernels.stream import capturing_graph
from loomwork.kernels.structs import is_struct

from .adjoint import differentiable


class OverwriteError(LoomworkError, RuntimeError):
    """An array a recorded launch read was overwritten before `Tape.backward`."""


@dataclass
class _Launch:
    kernel: Any
    dims: tuple
    params: list
    device: Any
    reads: list  # (parameter position, array, version when recorded or None, checksum or None)
    writes: set  # the memory (see _memory) of the arrays it may write
    scope: tuple = ()
    saved: dict | None = None  # position -> a copy, taken before the launch, of an array it read then updated
    fresh: list = field(default_factory=list)  # recorded in a graph capture: the reads each replay refreshes
    lanes: int = 0  # the lanes of a block that ran together (wp.config.enable_cpu_blocks), which its adjoint runs too

    def arrays(self) -> list[array]:
        return [a for p in self.params for a in _arrays_in(p)]

    def backward(self, zero_grads: int = 0) -> None:
        """Run the adjoint; `zero_grads` marks the parameters whose gradients it zeroes first (fused_zeroing)."""
        params = self.params
        if self.saved:  # the adjoint reads the values the launch read, and accumulates into the arrays' gradients
            params = list(params)
            for i, copy in self.saved.items():
                data, original = (copy.data, params[i].data) if isinstance(copy, indexedarray) else (copy, params[i])
                data.grad = original.grad
                params[i] = copy
        launch(self.kernel, self.dims, inputs=params, device=self.device, adjoint=True, record_tape=False,
               zero_grads=zero_grads, block_dim=self.lanes or None)

    def capture_ended(self) -> None:
        """The graph capture this launch was recorded in ended: the inputs nothing later in the capture
        overwrote are the ones each replay of the graph reads afresh (see `replayed`)."""
        self.fresh = [version is None or a._storage.version == version for _, a, version, _ in self.reads]

    def replayed(self) -> None:
        """The graph holding this launch ran again and read those inputs as they are now: later writes are
        measured from here (a graph replayed with new parameters gives their gradient at backward)."""
        for k, (i, a, version, digest) in enumerate(self.reads):
            if self.fresh[k]:
                if digest is not None:
                    digest = a._storage.digest() if isinstance(a, array) else _foreign_digest(a, self.device)
                self.reads[k] = (i, a, a._storage.version if version is not None else None, digest)


@dataclass
class _Func:
    backward_fn: Callable[[], Any]
    array_list: list
    scope: tuple = ()
    writes: tuple = ()  # the arrays the forward step wrote

    def arrays(self) -> list[array]:
        return [a for a in self.array_list if isinstance(a, array)]

    def backward(self) -> None:
        self.backward_fn()


def _arrays_in(p: Any) -> list[array]:
    """The arrays a launch parameter holds: itself, an indexedarray's data, a struct's array fields (nested)."""
    if isinstance(p, indexedarray):
        return [p.data]
    if isinstance(p, array):
        return [p]
    if is_struct(type(p)):
        return [a for name in type(p).fields for a in _arrays_in(getattr(p, name))]
    return []


def _gradient_struct(s: Any) -> Any:
    """A struct of `s`'s type whose array fields are the gradients of `s`'s (Warp's `tape.gradients[s]`)."""
    g = type(s)()
    for name in type(s).fields:
        v = getattr(s, name)
        if isinstance(v, array):
            setattr(g, name, v.grad)
        elif is_struct(type(v)):
            setattr(g, name, _gradient_struct(v))
    return g


@dataclass(eq=False)  # a tape is itself: two tapes never compare equal
class Tape:
    """Records the kernel launches of the thread in `with tape:` so `backward` can compute gradients of
    a loss (see the module docstring for nesting, threads and overwrite checks)."""

    check_overwrites: str = "error"  # "error", "warn" or "off"
    launches: list = field(default_factory=list)
    _scope: list = field(default_factory=list)
    # Warp's scope markers: (launch count, name, metadata) where a scope opens, (launch count, None, None)
    # where one closes; a scope that recorded nothing leaves no markers
    scopes: list = field(default_factory=list)
    # the gradients of the launches reset() forgot: still tape.gradients[a] (zeroed), as in Warp
    _kept: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.check_overwrites not in ("error", "warn", "off"):
            raise ValueError(f"check_overwrites must be 'error', 'warn' or 'off', got {self.check_overwrites!r}")

    def __enter__(self) -> Tape:
        if any(t is self for t in registry.local.recorders):
            raise RuntimeError("this Tape is already recording")
        registry.start_recording(self)
        return self

    def __exit__(self, *exc: Any) -> None:
        registry.stop_recording(self)

    # -- recording -------------------------------------------------------------------------------

    def before_launch(self, kernel: Any, loaded: Any, params: list) -> None:
        """Called by wp.launch inside `with tape:` before a launch of a kernel with a backward pass: a kernel
        that reads an array after writing it (or in a loop that writes it) cannot be differentiated, since
        its adjoint sees neither the values it read nor the ones it wrote; refused (or, with
        check_overwrites 'warn', warned about) before it runs. One that reads an array and then updates it
        is fine: wp.launch gives record_launch a copy taken before the launch, for the adjoint to replay."""
        if self.check_overwrites == "off":
            return
        for i, (read, write) in loaded.in_place.conflicts.items():
            if params[i] is None:
                continue
            msg = (f"kernel {kernel.label} reads array '{kernel.arg_names[i]}' at {loaded.filename}:{read} after "
                   f"writing it at line {write} (in place, or in a loop that writes it), so its adjoint cannot "
                   "replay the values it read and the gradients would be wrong. Read the array before any "
                   "write of it, or write the results to a separate array (out[i] = f(a[i])); or create the "
                   "Tape with check_overwrites='warn' or 'off', or launch the kernel outside the Tape.")
            if self.check_overwrites == "error":
                raise OverwriteError(f"wp.launch under a Tape: {msg}")
            warnings.warn(msg, RuntimeWarning, stacklevel=4)

    def record_launch(self, kernel: Any, loaded: Any, dims: tuple, params: list, device: Any,
                      saved: dict | None = None) -> None:
        """Called by wp.launch inside `with tape:` once the launch ran; remembers the arguments and, for
        each array it read, the version (and for exposed memory a checksum) to check at `backward`. A
        kernel built without its backward pass that writes no float arrays (sorting, counting, flags) has
        nothing to reverse and is left out; one that does write floats is kept, so backward names it.
        `saved` holds copies of the arrays the kernel read and then updated (its adjoint replays from
        them; None where one could not be made); the kernel's own writes to arrays it only updates
        atomically (atomic_max...) are the values its adjoint needs."""
        if not kernel.backward_enabled and not any(
                isinstance(params[i], array | indexedarray) and differentiable(params[i].dtype) for i in loaded.writes):
            return
        saved = {i: c for i, c in (saved or {}).items() if c is not None}
        in_place = loaded.in_place
        reads = []
        check = self.check_overwrites != "off"
        for i in loaded.reads:
            if i in saved or (in_place is not None and i in in_place.conflicts):  # a copy; refused or warned
                continue
            for a in _read_arrays(params[i]):
                if not isinstance(a, array):
                    if check:
                        reads.append((i, a, None, _foreign_digest(a, device)))
                    continue
                st = a._storage
                digest = None
                if check and st.exposed:
                    digest = st.digest()
                elif check:
                    st.watched = True  # a checksum is taken if the memory is exposed later
                version = st.version
                if in_place is not None and i in in_place.updated:  # as the launch leaves it
                    version += sum(b._storage is st for j in loaded.writes for b in _read_arrays(params[j])
                                   if isinstance(b, array))
                reads.append((i, a, version, digest))
        writes = {_memory(a) for i in loaded.writes for a in _read_arrays(params[i])}
        entry = _Launch(kernel, dims, list(params), device, reads, writes, tuple(self._scope), saved or None,
                        lanes=loaded.lanes)
        self.launches.append(entry)
        graph = capturing_graph(device)
        if graph is not None:  # replays of the graph re-run the launch: they refresh what it read
            graph.watch(entry)

    def record_func(self, backward: Callable[[], Any], arrays: list, *, writes: tuple = ()) -> None:
        """Record a Python function's backward step (it reads and writes the `.grad` of `arrays`). `writes`
        (loomwork's addition): those of the arrays the forward step wrote, whose gradients each backward then
        computes afresh, as for a launch's outputs; the others accumulate, as in Warp."""
        if not callable(backward):
            raise TypeError("Tape.record_func takes a callable backward function")
        self.launches.append(_Func(backward, list(arrays), tuple(self._scope), tuple(writes)))

    def record_scope_begin(self, name: str, metadata: dict | None = None) -> None:
        """Open a named scope: launches recorded until the matching end carry the name (and `scopes` gets
        an opening marker with `metadata`)."""
        self._scope.append(name)
        self.scopes.append((len(self.launches), name, {} if metadata is None else metadata))

    def record_scope_end(self, remove_scope_if_empty: bool = True) -> None:
        """Close the innermost open scope; its markers are dropped when it recorded nothing and
        `remove_scope_if_empty` is set."""
        if not self._scope:
            raise RuntimeError("ended tape scope, but scope not present: Tape.record_scope_end without a matching "
                               "record_scope_begin")
        self._scope.pop()
        last = self.scopes[-1] if self.scopes else None
        if remove_scope_if_empty and last is not None and last[1] is not None and last[0] == len(self.launches):
            self.scopes.pop()
        else:
            self.scopes.append((len(self.launches), None, None))

    @contextmanager
    def scope(self, name: str):
        """`with tape.scope("step"):` names the launches recorded inside."""
        self.record_scope_begin(name)
        try:
            yield self
        finally:
            self.record_scope_end()

    def launches_in_scope(self, name: str) -> list:
        """The recorded entries made inside scope `name` (at any depth)."""
        return [e for e in self.launches if name in e.scope]

    def visualize(self, filename: str | None = None, simplify_graph: bool = True, hide_readonly_arrays: bool = False,
                  array_labels: dict | None = None, graph_direction: str = "LR") -> str:
        """The recorded computation as GraphViz DOT source (also written to `filename` when given): a box per
        launch (or recorded Python function), an ellipse per array (tooltip: dtype and shape), edges from
        the arrays a launch reads and to those it writes, a cluster per scope. `simplify_graph` merges a run
        of identical launches into one box ("repeated Nx"); `hide_readonly_arrays` leaves out arrays no
        recorded launch writes; `array_labels` ({array: name}) overrides the argument names shown."""
        return _dot(self, filename, simplify_graph, hide_readonly_arrays, array_labels or {}, graph_direction)

    # -- gradients --------------------------------------------------------------------------------

    def arrays(self) -> list[array]:
        """Every array the recorded launches touched, once each."""
        seen: dict[int, array] = {}
        for e in self.launches:
            for a in e.arrays():
                seen.setdefault(id(a), a)
        return list(seen.values())

    @property
    def gradients(self) -> dict:
        """{array: its gradient array} for every array the recorded launches touched that has one
        (Warp's `tape.gradients[a]`)."""
        grads: dict = dict(self._kept)
        grads.update((a, a.grad) for a in self.arrays() if a.grad is not None)
        for e in self.launches:
            for p in getattr(e, "params", ()):
                if is_struct(type(p)):
                    grads[p] = _gradient_struct(p)
        return grads

    def get_adjoint(self, a: array) -> array | None:
        """The gradient buffer of `a` (None when it has none)."""
        return a.grad

    def zero(self) -> None:
        """Zero the gradients of every array on this tape (including caller-supplied buffers)."""
        for a in self.arrays():
            if a.grad is not None:
                a.grad.zero_()
        for g in self._kept.values():
            for a in _arrays_in(g):
                a.zero_()

    def reset(self) -> None:
        """Forget every recorded launch and zero the gradients (`gradients` keeps naming them)."""
        self.zero()
        self._kept = self.gradients
        self.launches.clear()
        self._scope.clear()
        self.scopes.clear()

    def backward(self, loss: array | None = None, grads: dict | None = None) -> None:
        """Propagate gradients from `loss` (a 1-element array, seeded with 1) or from `grads`
        ({array: adjoint}) back through every recorded launch, into the arrays' `.grad`. With neither, the
        gradients the arrays hold now are the seeds (Warp's form: set `y.grad`, then `tape.backward()`),
        and nothing is zeroed first."""
        if loss is None and not grads:
            self._check_overwrites()
            for entry in reversed(self.launches):
                entry.backward()
            return
        seeds: dict[int, tuple[array, Any]] = {}
        if loss is not None:
            if not isinstance(loss, array):
                raise TypeError(f"Tape.backward: loss must be a wp.array, got {type(loss).__name__}")
            if loss.size != 1:
                raise ValueError(f"Tape.backward: loss must hold exactly 1 element, it has shape {loss.shape}; "
                                 "reduce it first or pass grads={array: adjoint}")
            seeds[id(loss)] = (loss, 1.0)
        for a, adj in (grads or {}).items():
            if not isinstance(a, array):
                raise TypeError(f"Tape.backward: grads keys must be wp.arrays, got {type(a).__name__}")
            seeds[id(a)] = (a, adj)
        for a, _ in seeds.values():
            if a.grad is None and a is loss:
                raise ValueError(f"Tape.backward: {a!r} has no gradient buffer; create it with requires_grad=True")
            if a.grad is None:  # an output seeded through grads= gets a gradient buffer, as in Warp
                a.requires_grad = True
        self._check_overwrites()
        written = written_memory(self.launches)
        masks, fused = fused_zeroing(self.launches, seeds, written)
        for a in self.arrays():
            if (a.grad is not None and not a._grad_external and id(a) not in seeds and id(a) not in fused
                    and _memory(a) in written):
                a.grad.zero_()
        for a, adj in seeds.values():
            if adj is a.grad:
                continue
            if isinstance(adj, float):
                a.grad.fill_(adj)
            else:
                values = adj.numpy() if isinstance(adj, array) else np.asarray(adj)
                a.grad.assign(values)  # a copy: the caller's buffer is never touched
        for entry in reversed(self.launches):
            if isinstance(entry, _Launch):
                entry.backward(masks.get(id(entry), 0))
            else:
                entry.backward()

    def _check_overwrites(self) -> None:
        if self.check_overwrites == "off":
            return
        launches = [e for e in self.launches if isinstance(e, _Launch)]
        for k, e in enumerate(launches):
            for i, a, version, digest in e.reads:
                if version is not None and a._storage.version != version:
                    who = f"{a._storage.writer!r} overwrote"
                elif _untracked_change(a, version, digest, e.device) and _in_chain(launches, k, a):
                    who = ("a write loomwork does not track (through a .numpy() view, a wrapped NumPy array or a "
                           "from_ptr alias) changed")
                else:
                    continue
                name = e.kernel.arg_names[i]
                msg = (f"Tape.backward: kernel {e.kernel.label} read array '{name}', which {who} after the "
                       "launch was recorded, so its gradient would be computed from values the kernel never "
                       "saw. Write results to a new array (or wp.clone the input before changing it), or "
                       "create the Tape with check_overwrites='warn' or 'off'.")
                if self.check_overwrites == "error":
                    raise OverwriteError(msg)
                warnings.warn(msg, RuntimeWarning, stacklevel=3)


def written_memory(entries: list) -> set:
    """The memory (see _memory) of the arrays the recorded entries write: each launch's writes, a recorded
    Python function's declared `writes`. Gradients of arrays outside it accumulate (Tape.backward), those of
    a function's other arrays too: Warp accumulates into them (a custom adjoint adds to its inputs' `.grad`)."""
    written: set = set()
    for e in entries:
        if isinstance(e, _Launch):
            written |= e.writes
        else:
            written.update(_memory(a) for a in e.writes)
    return written


def fused_zeroing(entries: list, seeds: dict, written: set | None = None) -> tuple[dict[int, int], set[int]]:
    """Which gradients the adjoints can zero themselves instead of `Tape.backward` zeroing them first: an
    array's gradient is zeroed by the first adjoint to run that touches it (that of the last launch taking
    the array) when that launch covers it exactly, each thread owning one element (ir.zeroable_gradients,
    grid == the array's shape), so the memory is written once instead of zeroed and then read back. Only
    arrays in `written` (memory the entries write, default: written_memory) are zeroed at all: the others'
    gradients accumulate. Left to the up-front zeroing: seeds, gradients the caller owns, memory that other
    arrays (views) or other gradients share, arrays a recorded Python function touches, in-place launches'
    saved inputs, and every array once a launch after it takes handles or structs (uint64 ids, struct
    fields), whose hidden arrays' gradients the Tape cannot see. Returns ({id(launch entry): bit mask},
    {id(array) zeroed that way})."""
    if written is None:
        written = written_memory(entries)
    memory: dict[Any, set[int]] = {}
    for e in entries:
        for a in e.arrays():
            memory.setdefault(("data", _memory(a)), set()).add(id(a))
            if isinstance(a.grad, array):
                memory.setdefault(("grad", id(a.grad._storage)), set()).add(id(a))
    masks: dict[int, int] = {}
    fused: set[int] = set()
    seen: set[int] = set()  # arrays a launch after this one took: their gradients get contributions first
    for e in reversed(entries):
        if not isinstance(e, _Launch):
            return masks, fused  # a Python backward step may accumulate anywhere: earlier launches zero nothing
        lk = e.kernel.module.load(e.device).kernel(e.kernel.key)
        positions: dict[int, list[int]] = {}
        for i, p in enumerate(e.params):
            if isinstance(p, array):
                positions.setdefault(id(p), []).append(i)
        for aid, where in positions.items():
            a = e.params[where[0]]
            if (aid in seen or aid in seeds or _memory(a) not in written or len(where) != 1
                    or where[0] not in lk.zeroable or (e.saved and where[0] in e.saved)
                    or a.grad is None or a._grad_external
                    or not isinstance(a.grad, array) or tuple(a.shape) != tuple(e.dims)
                    or len(memory[("data", _memory(a))]) != 1 or len(memory[("grad", id(a.grad._storage))]) != 1):
                continue
            masks[id(e)] = masks.get(id(e), 0) | (1 << where[0])
            fused.add(aid)
        seen.update(id(a) for a in e.arrays())
        if lk.plan is None or any(T.is_struct_type(t) or t is T.uint64 for t in lk.plan.types):
            return masks, fused  # handles or structs: hidden arrays, whose gradients earlier launches may share
    return masks, fused


def _in_chain(launches: list, k: int, a: Any) -> bool:
    """Whether array `a`, read by launches[k], is a result of an earlier recorded launch, or launches[k]'s
    results are read by a later one. Only then does an untracked change of `a` make the recorded
    gradient inconsistent: changing a plain input of a last stage between backward passes (an optimizer
    stepping parameters through a NumPy or torch alias, as in Warp's documented examples) gives the
    gradient at the new values, which is what that workflow asks for."""
    memory = _memory(a)
    if any(memory in e.writes for e in launches[:k]):
        return True
    results = launches[k].writes
    return any(_memory(b) in results for e in launches[k + 1:] for _, b, _, _ in e.reads)


def _memory(a: Any) -> Any:
    """What identifies the memory behind array `a`: the storage its views share (a foreign array: its
    address)."""
    return id(a._storage) if isinstance(a, array) else np.asarray(a).ctypes.data


def _read_arrays(p: Any) -> list:
    """The memory a kernel reads through argument `p`: an array, an indexedarray's data and index
    arrays, or a foreign host array (a NumPy array passed to wp.launch); nothing for other values."""
    if isinstance(p, array):
        return [p]
    if isinstance(p, indexedarray):
        return [p.data, *(i for i in p.indices if i is not None)]
    if hasattr(p, "__array_interface__") or hasattr(p, "__array__"):
        return [p]
    return []


def _foreign_digest(a: Any, device: Any) -> int | None:
    """A checksum of the memory a foreign host array (a NumPy array passed to wp.launch) spans."""
    if not device.backend.host_accessible:
        return None
    v = np.asarray(a)
    lo, nbytes = byte_span(v.shape, v.strides, v.itemsize)
    return device.backend.digest(v.ctypes.data + lo, nbytes) if nbytes else None


def _untracked_change(a: Any, version: int | None, digest: int | None, device: Any) -> bool:
    """Whether the content of `a` differs from when a launch read it at `version` (checksum `digest`)."""
    if not isinstance(a, array):
        return digest is not None and _foreign_digest(a, device) != digest
    st = a._storage
    if digest is None and st.snapshot is not None and st.snapshot[0] == version:
        digest = st.snapshot[1]  # exposed after the launch, with the content it read
    return digest is not None and st.digest() != digest


def _dot(tape: Tape, filename: str | None, simplify: bool, hide_readonly: bool, labels: dict, direction: str) -> str:
    """Tape.visualize's DOT source."""
    runs: list[list] = []  # [entry, count]: a run of identical launches when simplifying
    for e in tape.launches:
        last = runs[-1][0] if runs else None
        same = (simplify and isinstance(e, _Launch) and isinstance(last, _Launch) and last.kernel is e.kernel
                and last.scope == e.scope and len(last.params) == len(e.params)
                and all(a is b for a, b in zip(last.params, e.params, strict=True)))
        if same:
            runs[-1][1] += 1
        else:
            runs.append([e, 1])
    arrays: dict[int, tuple[array, str]] = {}
    written: set[int] = set()
    edges: list[tuple[int, str]] = []  # (id of the array, the edge)
    tree: dict[tuple, list[str]] = {(): []}  # scope path -> node lines
    for k, (e, count) in enumerate(runs):
        node = f"launch{k}"
        if isinstance(e, _Launch):
            label = e.kernel.key + (f" (repeated {count}x)" if count > 1 else "")
            read_pos = {i for i, *_ in e.reads}
            for i, p in enumerate(e.params):
                for a in _arrays_in(p):
                    arrays.setdefault(id(a), (a, labels.get(a, e.kernel.arg_names[i])))
                    if _memory(a) in e.writes:
                        written.add(id(a))
                        edges.append((id(a), f"  {node} -> array{id(a)};"))
                    if i in read_pos or _memory(a) not in e.writes:
                        edges.append((id(a), f"  array{id(a)} -> {node};"))
        else:
            label = f"Python function {getattr(e.backward_fn, '__qualname__', 'backward')}"
            for a in e.arrays():
                arrays.setdefault(id(a), (a, labels.get(a, "array")))
                edges.append((id(a), f"  array{id(a)} -> {node};"))
        for d in range(len(e.scope) + 1):
            tree.setdefault(tuple(e.scope[:d]), [])
        tree[tuple(e.scope)].append(f'{node} [shape=box, label="{_dot_text(label)}"];')
    lines = ["digraph Tape {", f"  rankdir={direction};"]

    def emit(path: tuple, depth: int) -> None:
        pad = "  " * depth
        lines.extend(pad + n for n in tree[path])
        for child in [c for c in tree if len(c) == len(path) + 1 and c[:len(path)] == path]:
            lines.append(f'{pad}subgraph cluster_{list(tree).index(child)} {{ label="{_dot_text(child[-1])}";')
            emit(child, depth + 1)
            lines.append(pad + "}")

    emit((), 1)
    for aid, (a, name) in arrays.items():
        if hide_readonly and aid not in written:
            continue
        tip = f"array: dtype={T.type_name(a.dtype)}, shape={tuple(a.shape)}"
        lines.append(f'  array{aid} [shape=ellipse, label="{_dot_text(name)}", tooltip="{_dot_text(tip)}"];')
    lines += [e for aid, e in dict.fromkeys(edges) if not hide_readonly or aid in written]
    lines.append("}")
    code = "\n".join(lines) + "\n"
    if filename is not None:
        with open(filename, "w") as f:
            f.write(code)
    return code


def _dot_text(text: str) -> str:
    return str(text).replace("\\", "\\\\").replace('"', '\\"')
