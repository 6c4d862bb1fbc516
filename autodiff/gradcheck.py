"""Gradient checking: Jacobians by the reverse pass and by finite differences, and their comparison.

`jacobian(f, dim, inputs, outputs)` seeds one output component at a time and runs the reverse pass
(a kernel's adjoint, or a Tape for a Python function of launches); `jacobian_fd` perturbs each input
component by +-eps and reruns with freshly zeroed outputs. Both return
`{(input name, output name): matrix}`, one row per output component and one column per input
component (vector and matrix elements flattened).
"""

from __future__ import annotations

import inspect
from typing import Any

import numpy as np

from loomwork.kernels import types as T
from loomwork.kernels.array import array, zeros_like
from loomwork.kernels.ir import ArrayType
from loomwork.kernels.launch import launch
from loomwork.kernels.module import Kernel

from .tape import Tape


def _as_arrays(args: list) -> list:
    """NumPy arrays become zero-copy wp arrays so gradients can be attached; scalars stay as they are."""
    return [array(a, copy=False) if isinstance(a, np.ndarray) else a for a in args]


class _Target:
    """What the Jacobian tools differentiate: a kernel launch, or a Python function `fn(*inputs, *outputs)`
    made of launches. Knows its float array inputs and outputs, how to run forward, and how to get one
    row of the Jacobian (the gradient of one output component) from the reverse pass."""

    def __init__(self, fn: Any, dim: Any, inputs: list, outputs: list, mask: list | None, device: Any) -> None:
        self.fn, self.dim, self.device = fn, dim, device
        self.params = _as_arrays([*inputs, *outputs])
        if isinstance(fn, Kernel):
            names = fn.arg_names
            if len(self.params) != len(names):
                raise ValueError(f"kernel '{fn.key}' takes {len(names)} arguments, got {len(self.params)}")
            floats = [isinstance(t, ArrayType) and T.elem_scalar(t.dtype).is_float for t in fn.arg_types]
            self.label = f"kernel '{fn.key}'"
        elif callable(fn):
            names = tuple(inspect.signature(fn).parameters)[: len(self.params)]
            if len(names) != len(self.params):
                raise ValueError(f"function '{fn.__name__}' takes fewer parameters than inputs + outputs")
            floats = [isinstance(p, array) and T.elem_scalar(p.dtype).is_float for p in self.params]
            self.label = f"function '{fn.__name__}'"
        else:
            raise TypeError(f"expected a @wp.kernel or a Python function, got {type(fn).__name__}")
        n_in = len(inputs)
        found = []
        for i, (p, is_float) in enumerate(zip(self.params, floats, strict=True)):
            if is_float and isinstance(p, array):
                if not p.is_contiguous:
                    raise ValueError(f"jacobian: argument '{names[i]}' must be contiguous")
                found.append((i, names[i], p))
        self.ins = [x for x in found if x[0] < n_in]
        self.outs = [x for x in found if x[0] >= n_in]
        self.mask = set(mask) if mask else None
        if self.mask:
            self.ins = [x for x in self.ins if any(m[0] == x[1] for m in self.mask)]
            self.outs = [x for x in self.outs if any(m[1] == x[1] for m in self.mask)]
        if not self.ins or not self.outs:
            raise ValueError(f"{self.label}: need at least one float array among the inputs and the outputs")
        self.grads = [zeros_like(p, requires_grad=False) if isinstance(p, array) else None for p in self.params]
        self.tape: Tape | None = None

    def wanted(self, iname: str, oname: str) -> bool:
        return self.mask is None or (iname, oname) in self.mask

    def forward(self) -> None:
        for _, _, out in self.outs:
            out.zero_()
        if isinstance(self.fn, Kernel):
            launch(self.fn, self.dim, inputs=self.params, device=self.device, record_tape=False)
        else:
            self.fn(*self.params)

    def adjoint_row(self, oi: int, r: int) -> None:
        """Fill self.grads with the gradient of output parameter `oi`'s component `r`."""
        for g in self.grads:
            if g is not None:
                g.zero_()
        _set(self.grads[oi], r, 1.0)
        if isinstance(self.fn, Kernel):
            launch(self.fn, self.dim, inputs=self.params, device=self.device, adjoint=True, adj_inputs=self.grads,
                   record_tape=False)
            return
        if self.tape is None:  # record the function once, with our gradient buffers attached
            saved = [(p, p.grad) for p in self.params if isinstance(p, array)]
            for p, g in zip(self.params, self.grads, strict=True):
                if isinstance(p, array):
                    p.grad = g
            self.tape = Tape()
            with self.tape:
                self.forward()
            self._saved = saved
        seed = self.grads[oi].numpy().copy()
        self.tape.backward(grads={self.params[oi]: seed})

    def restore(self) -> None:
        for p, g in getattr(self, "_saved", []):
            p.grad = g


def _flat(a: array) -> np.ndarray:
    return a.numpy().reshape(-1)


def _set(a: array, r: int, value: float) -> float:
    """Set flat component `r` of `a` (in place on the host, through a copy of device memory) and return
    the value as stored, rounded to the array's precision."""
    host = a.numpy()
    flat = host.reshape(-1)
    flat[r] = value
    if not a.device.backend.host_accessible:
        a.assign(host)
    return float(flat[r])


def jacobian(function: Any, dim: Any = None, inputs: list | None = None, outputs: list | None = None,
             input_output_mask: list | None = None, device: Any = None,
             max_outputs_per_var: int = -1) -> dict[tuple[str, str], np.ndarray]:
    """The Jacobian of the float outputs with respect to the float array inputs, by the reverse pass.

    `function` is a kernel (launched over `dim`) or a Python function called as `function(*inputs,
    *outputs)`. Returns `{(input name, output name): matrix}`, a row per output component."""
    tgt = _Target(function, dim, inputs or [], outputs or [], input_output_mask, device)
    tgt.forward()  # the reverse pass replays reads of outputs, so they must hold the forward values
    result = {}
    try:
        for oi, oname, out in tgt.outs:
            n_rows = out.size * (T.type_size(out.dtype) // T.elem_scalar(out.dtype).size)
            if max_outputs_per_var > 0:
                n_rows = min(n_rows, max_outputs_per_var)
            rows: dict[str, list] = {name: [] for _, name, _ in tgt.ins}
            for r in range(n_rows):
                tgt.adjoint_row(oi, r)
                for ii, iname, _ in tgt.ins:
                    rows[iname].append(_flat(tgt.grads[ii]).astype(np.float64).copy())
            for _, iname, _ in tgt.ins:
                if tgt.wanted(iname, oname):
                    result[(iname, oname)] = np.array(rows[iname])
    finally:
        tgt.restore()
    return result


def jacobian_fd(function: Any, dim: Any = None, inputs: list | None = None, outputs: list | None = None,
                input_output_mask: list | None = None, device: Any = None, eps: float = 1e-4,
                max_inputs_per_var: int = -1) -> dict[tuple[str, str], np.ndarray]:
    """The same Jacobian by central finite differences (outputs are zeroed before every evaluation)."""
    tgt = _Target(function, dim, inputs or [], outputs or [], input_output_mask, device)

    def evaluate() -> dict[str, np.ndarray]:
        tgt.forward()
        return {name: _flat(out).astype(np.float64).copy() for _, name, out in tgt.outs}

    result = {}
    for _, iname, arr in tgt.ins:
        flat = _flat(arr)
        n_cols = flat.size if max_inputs_per_var < 0 else min(flat.size, max_inputs_per_var)
        cols: dict[str, list] = {name: [] for _, name, _ in tgt.outs}
        for c in range(n_cols):
            orig = flat[c].copy()
            hi = _set(arr, c, orig + eps)  # the perturbations as stored, after rounding to the array's precision
            plus = evaluate()
            lo = _set(arr, c, orig - eps)
            minus = evaluate()
            _set(arr, c, orig)
            for _, oname, _ in tgt.outs:
                cols[oname].append((plus[oname] - minus[oname]) / (hi - lo))
        for _, oname, _ in tgt.outs:
            if tgt.wanted(iname, oname):
                result[(iname, oname)] = np.array(cols[oname]).T
    evaluate()  # leave the outputs as the unperturbed inputs give them
    return result


def gradcheck(function: Any, dim: Any = None, inputs: list | None = None, outputs: list | None = None,
              eps: float = 1e-4, atol: float = 1e-3, rtol: float = 1e-2, raise_exception: bool = True,
              input_output_mask: list | None = None, device: Any = None) -> bool:
    """Compare the reverse-pass Jacobian with finite differences; raise (or return False) on a mismatch.
    `function` is a kernel or a Python function of kernel launches (see `jacobian`)."""
    analytic = jacobian(function, dim, inputs, outputs, input_output_mask, device)
    numeric = jacobian_fd(function, dim, inputs, outputs, input_output_mask, device, eps)
    problems = []
    for key, a in analytic.items():
        n = numeric[key]
        if not np.allclose(a, n, atol=atol, rtol=rtol, equal_nan=True):
            worst = np.unravel_index(np.nanargmax(np.abs(a - n)), a.shape)
            problems.append(f"d{key[1]}/d{key[0]}: adjoint {a[worst]:.6g} vs finite difference {n[worst]:.6g} "
                            f"at (output {worst[0]}, input {worst[1]}); max abs error {np.nanmax(np.abs(a - n)):.3g}")
    if problems and raise_exception:
        name = getattr(function, "key", getattr(function, "__name__", "function"))
        raise AssertionError(f"gradcheck of '{name}' failed:\n  " + "\n  ".join(problems))
    return not problems


def gradcheck_tape(tape: Tape, eps: float = 1e-4, atol: float = 1e-3, rtol: float = 1e-2,
                   raise_exception: bool = True, input_output_mask: list | None = None) -> bool:
    """gradcheck every kernel launch recorded on `tape`, with the arguments it was recorded with.

    Each launch's parameters are split into inputs (arrays it reads, and scalars) and outputs (arrays
    it writes but does not read)."""
    ok = True
    for entry in tape.launches:
        if not hasattr(entry, "kernel"):
            continue
        k = entry.kernel
        loaded = k.module.load(entry.device).kernel(k.key)
        order = sorted(range(len(entry.params)), key=lambda i: (i in loaded.writes and i not in loaded.reads, i))
        if order != list(range(len(order))):
            raise ValueError(f"gradcheck_tape: kernel '{k.key}' interleaves inputs and outputs; check it with "
                             "gradcheck() and explicit inputs/outputs instead")
        n_in = sum(1 for i in order if not (i in loaded.writes and i not in loaded.reads))
        ok &= gradcheck(k, entry.dims, entry.params[:n_in], entry.params[n_in:], eps, atol, rtol, raise_exception,
                        input_output_mask, entry.device)
    return ok
