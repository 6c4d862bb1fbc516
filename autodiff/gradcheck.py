"""Gradient checking: Jacobians of a kernel by its adjoint and by finite differences, and their comparison.

`jacobian(kernel, dim, inputs, outputs)` runs the kernel's adjoint once per output component (seeding
that component's gradient with 1); `jacobian_fd` perturbs each input component by +-eps and reruns
the kernel with freshly zeroed outputs. Both return `{(input name, output name): matrix}` with one row
per output component and one column per input component (vector and matrix elements flattened).
"""

from __future__ import annotations

from collections.abc import Callable
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


def _float_arrays(kernel: Kernel, params: list, names: tuple) -> list[tuple[int, str, array]]:
    found = []
    for i, (p, t) in enumerate(zip(params, kernel.arg_types, strict=True)):
        if isinstance(t, ArrayType) and isinstance(p, array) and T.elem_scalar(t.dtype).is_float:
            if not p.is_contiguous:
                raise ValueError(f"jacobian: argument '{names[i]}' must be contiguous")
            found.append((i, names[i], p))
    return found


def _flat(a: array) -> np.ndarray:
    return a.numpy().reshape(-1)


def _prepare(kernel: Kernel, inputs: list, outputs: list, input_output_mask: list | None):
    if not isinstance(kernel, Kernel):
        raise TypeError(f"expected a @wp.kernel, got {type(kernel).__name__}")
    names = kernel.arg_names
    params = _as_arrays([*inputs, *outputs])
    if len(params) != len(names):
        raise ValueError(f"kernel '{kernel.key}' takes {len(names)} arguments, got {len(params)}")
    n_in = len(inputs)
    ins = [x for x in _float_arrays(kernel, params, names) if x[0] < n_in]
    outs = [x for x in _float_arrays(kernel, params, names) if x[0] >= n_in]
    if input_output_mask:
        pairs = set(input_output_mask)
        ins = [x for x in ins if any(p[0] == x[1] for p in pairs)]
        outs = [x for x in outs if any(p[1] == x[1] for p in pairs)]
    if not ins or not outs:
        raise ValueError(f"kernel '{kernel.key}': need at least one float array among the inputs and the outputs")
    return params, ins, outs


def jacobian(kernel: Kernel, dim: Any, inputs: list, outputs: list, input_output_mask: list | None = None,
             device: Any = None, max_outputs_per_var: int = -1) -> dict[tuple[str, str], np.ndarray]:
    """The Jacobian of `kernel`'s float outputs with respect to its float array inputs, by the adjoint."""
    params, ins, outs = _prepare(kernel, inputs, outputs, input_output_mask)
    for _, _, out in outs:  # the adjoint replays reads of outputs, so they must hold the forward values
        out.zero_()
    launch(kernel, dim, inputs=params, device=device, record_tape=False)
    grads = [zeros_like(p, requires_grad=False) if isinstance(p, array) else None for p in params]
    result = {}
    for oi, oname, out in outs:
        n_rows = out.size * (T.type_size(out.dtype) // T.elem_scalar(out.dtype).size)
        if max_outputs_per_var > 0:
            n_rows = min(n_rows, max_outputs_per_var)
        rows: dict[str, list] = {name: [] for _, name, _ in ins}
        for r in range(n_rows):
            for g in grads:
                if g is not None:
                    g.zero_()
            _flat(grads[oi])[r] = 1.0
            launch(kernel, dim, inputs=params, device=device, adjoint=True, adj_inputs=grads, record_tape=False)
            for ii, iname, _ in ins:
                rows[iname].append(_flat(grads[ii]).astype(np.float64).copy())
        for _, iname, _ in ins:
            if input_output_mask and (iname, oname) not in set(input_output_mask):
                continue
            result[(iname, oname)] = np.array(rows[iname])
    return result


def jacobian_fd(kernel: Kernel, dim: Any, inputs: list, outputs: list, input_output_mask: list | None = None,
                device: Any = None, eps: float = 1e-4,
                max_inputs_per_var: int = -1) -> dict[tuple[str, str], np.ndarray]:
    """The same Jacobian by central finite differences (outputs are zeroed before every evaluation)."""
    params, ins, outs = _prepare(kernel, inputs, outputs, input_output_mask)

    def evaluate() -> dict[str, np.ndarray]:
        for _, _, out in outs:
            out.zero_()
        launch(kernel, dim, inputs=params, device=device, record_tape=False)
        return {name: _flat(out).astype(np.float64).copy() for _, name, out in outs}

    result = {}
    for _, iname, arr in ins:
        flat = _flat(arr)
        n_cols = flat.size if max_inputs_per_var < 0 else min(flat.size, max_inputs_per_var)
        cols: dict[str, list] = {name: [] for _, name, _ in outs}
        for c in range(n_cols):
            orig = flat[c].copy()
            flat[c] = orig + eps
            hi = float(flat[c])  # the perturbation as stored, after rounding to the array's precision
            plus = evaluate()
            flat[c] = orig - eps
            lo = float(flat[c])
            minus = evaluate()
            flat[c] = orig
            step = hi - lo
            for _, oname, _ in outs:
                cols[oname].append((plus[oname] - minus[oname]) / step)
        for _, oname, _ in outs:
            if input_output_mask and (iname, oname) not in set(input_output_mask):
                continue
            result[(iname, oname)] = np.array(cols[oname]).T
    evaluate()  # leave the outputs as the unperturbed inputs give them
    return result


def gradcheck(kernel: Kernel, dim: Any, inputs: list, outputs: list, eps: float = 1e-4, atol: float = 1e-3,
              rtol: float = 1e-2, raise_exception: bool = True, input_output_mask: list | None = None,
              device: Any = None) -> bool:
    """Compare the adjoint Jacobian with finite differences; raise (or return False) on a mismatch."""
    analytic = jacobian(kernel, dim, inputs, outputs, input_output_mask, device)
    numeric = jacobian_fd(kernel, dim, inputs, outputs, input_output_mask, device, eps)
    problems = []
    for key, a in analytic.items():
        n = numeric[key]
        if not np.allclose(a, n, atol=atol, rtol=rtol, equal_nan=True):
            worst = np.unravel_index(np.nanargmax(np.abs(a - n)), a.shape)
            problems.append(f"d{key[1]}/d{key[0]}: adjoint {a[worst]:.6g} vs finite difference {n[worst]:.6g} "
                            f"at (output {worst[0]}, input {worst[1]}); max abs error {np.nanmax(np.abs(a - n)):.3g}")
    if problems and raise_exception:
        raise AssertionError(f"gradcheck of kernel '{kernel.key}' failed:\n  " + "\n  ".join(problems))
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
        loaded = k.module.load(entry.device).kernels[k.key]
        order = sorted(range(len(entry.params)), key=lambda i: (i in loaded.writes and i not in loaded.reads, i))
        if order != list(range(len(order))):
            raise ValueError(f"gradcheck_tape: kernel '{k.key}' interleaves inputs and outputs; check it with "
                             "gradcheck() and explicit inputs/outputs instead")
        n_in = sum(1 for i in order if not (i in loaded.writes and i not in loaded.reads))
        ok &= gradcheck(k, entry.dims, entry.params[:n_in], entry.params[n_in:], eps, atol, rtol, raise_exception,
                        input_output_mask, entry.device)
    return ok


def function_jacobian(fn: Callable[..., array], inputs: list[array],
                      output_size: int | None = None) -> list[np.ndarray]:
    """Jacobians of a Python function made of kernel launches (recorded on a Tape) w.r.t. `inputs`."""
    with Tape() as tape:
        out = fn(*inputs)
    if not isinstance(out, array) or out.grad is None:
        raise ValueError("function_jacobian: the function must return an array created with requires_grad=True")
    n = output_size or out.size
    jac = [np.zeros((n, x.size)) for x in inputs]
    for r in range(n):
        seed = np.zeros(out.size, dtype=T.elem_scalar(out.dtype).np_dtype)
        seed[r] = 1.0
        tape.backward(grads={out: seed.reshape(out.numpy().shape)})
        for j, x in zip(jac, inputs, strict=True):
            j[r] = x.grad.numpy().reshape(-1)
    return jac
