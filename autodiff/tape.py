"""`wp.Tape`: records launches, then runs their adjoints in reverse to compute gradients.

Every array carries a write version. A recorded launch remembers the version of each array it
read; if anything wrote that array before `backward` (a later kernel, an in-place update by the
kernel itself, `fill_`, `assign`, `wp.copy`), backward raises an error naming both kernels and the
array, because the adjoint would replay the kernel on values it never saw. `check_overwrites`
turns this into a warning or off.

`backward` computes gradients afresh: it zeroes the gradient buffers it owns on this tape before
seeding, so calling it twice gives the same result. Gradient buffers the caller supplied (an
array's `.grad` set by hand or shared with another framework, or the adjoints in `grads=`) are
never zeroed or consumed behind the caller's back: those accumulate, as in PyTorch.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from loomwork.kernels.array import array, indexedarray
from loomwork.kernels.errors import LoomworkError
from loomwork.kernels.extensions import registry
from loomwork.kernels.launch import launch

from .adjoint import differentiable


class OverwriteError(LoomworkError, RuntimeError):
    """An array a recorded launch read was overwritten before `Tape.backward`."""


@dataclass
class _Launch:
    kernel: Any
    dims: tuple
    params: list
    device: Any
    reads: list  # (parameter position, array, version when recorded)
    scope: tuple = ()

    def arrays(self) -> list[array]:
        views = [p for p in self.params if isinstance(p, array | indexedarray)]
        return [p.data if isinstance(p, indexedarray) else p for p in views]

    def backward(self) -> None:
        launch(self.kernel, self.dims, inputs=self.params, device=self.device, adjoint=True, record_tape=False)


@dataclass
class _Func:
    backward_fn: Callable[[], Any]
    array_list: list
    scope: tuple = ()

    def arrays(self) -> list[array]:
        return [a for a in self.array_list if isinstance(a, array)]

    def backward(self) -> None:
        self.backward_fn()


@dataclass
class Tape:
    """Records kernel launches (`with tape:`) so `backward` can compute gradients of a loss."""

    check_overwrites: str = "error"  # "error", "warn" or "off"
    launches: list = field(default_factory=list)
    _scope: list = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.check_overwrites not in ("error", "warn", "off"):
            raise ValueError(f"check_overwrites must be 'error', 'warn' or 'off', got {self.check_overwrites!r}")

    def __enter__(self) -> Tape:
        if self in registry.recorders:
            raise RuntimeError("this Tape is already recording")
        registry.recorders.append(self)
        return self

    def __exit__(self, *exc: Any) -> None:
        registry.recorders.remove(self)

    # -- recording -------------------------------------------------------------------------------

    def record_launch(self, kernel: Any, loaded: Any, dims: tuple, params: list, device: Any) -> None:
        """Called by wp.launch inside `with tape:`; remembers the arguments and read versions. A kernel built
        without its backward pass that writes no float arrays (sorting, counting, flags) has nothing to
        reverse and is left out; one that does write floats is kept, so backward names it."""
        if not kernel.backward_enabled and not any(
                isinstance(params[i], array | indexedarray) and differentiable(params[i].dtype) for i in loaded.writes):
            return
        reads = [(i, params[i], params[i]._storage.version) for i in loaded.reads
                 if isinstance(params[i], array | indexedarray)]
        self.launches.append(_Launch(kernel, dims, list(params), device, reads, tuple(self._scope)))

    def record_func(self, backward: Callable[[], Any], arrays: list) -> None:
        """Record a Python function's backward step (it reads and writes the `.grad` of `arrays`)."""
        if not callable(backward):
            raise TypeError("Tape.record_func takes a callable backward function")
        self.launches.append(_Func(backward, list(arrays), tuple(self._scope)))

    def record_scope_begin(self, name: str) -> None:
        """Open a named scope: launches recorded until the matching end carry the name."""
        self._scope.append(name)

    def record_scope_end(self) -> None:
        if not self._scope:
            raise RuntimeError("Tape.record_scope_end without a matching record_scope_begin")
        self._scope.pop()

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

    # -- gradients --------------------------------------------------------------------------------

    def arrays(self) -> list[array]:
        """Every array the recorded launches touched, once each."""
        seen: dict[int, array] = {}
        for e in self.launches:
            for a in e.arrays():
                seen.setdefault(id(a), a)
        return list(seen.values())

    def get_adjoint(self, a: array) -> array | None:
        """The gradient buffer of `a` (None when it has none)."""
        return a.grad

    def zero(self) -> None:
        """Zero the gradients of every array on this tape (including caller-supplied buffers)."""
        for a in self.arrays():
            if a.grad is not None:
                a.grad.zero_()

    def reset(self) -> None:
        """Forget every recorded launch and zero the gradients."""
        self.zero()
        self.launches.clear()
        self._scope.clear()

    def backward(self, loss: array | None = None, grads: dict | None = None) -> None:
        """Propagate gradients from `loss` (a 1-element array, seeded with 1) or from `grads`
        ({array: adjoint}) back through every recorded launch, into the arrays' `.grad`."""
        if loss is None and not grads:
            raise ValueError("Tape.backward needs loss=<a 1-element array> or grads={array: adjoint}")
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
            if a.grad is None:
                raise ValueError(f"Tape.backward: {a!r} has no gradient buffer; create it with requires_grad=True")
        self._check_overwrites()
        for a in self.arrays():
            if a.grad is not None and not a._grad_external and id(a) not in seeds:
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
            entry.backward()

    def _check_overwrites(self) -> None:
        if self.check_overwrites == "off":
            return
        for e in self.launches:
            if not isinstance(e, _Launch):
                continue
            for i, a, version in e.reads:
                if a._storage.version != version:
                    name = e.kernel.arg_names[i]
                    msg = (f"Tape.backward: kernel {e.kernel.label} read array '{name}', which "
                           f"{a._storage.writer!r} overwrote after the launch was recorded, so its gradient "
                           "would be computed from values the kernel never saw. Write results to a new "
                           "array (or wp.clone the input before changing it), or create the Tape with "
                           "check_overwrites='warn' or 'off'.")
                    if self.check_overwrites == "error":
                        raise OverwriteError(msg)
                    warnings.warn(msg, RuntimeWarning, stacklevel=3)
