"""Gradient-descent optimizers on arrays (`loomwork.optim.Adam`, `loomwork.optim.SGD`), as in Warp.

Each keeps its state in arrays beside the parameters and updates them with one kernel launch per
parameter array. The update treats every scalar component alike, so a parameter may have any float
dtype (float16/bfloat16/float32/float64 and the vectors and matrices of them) and any shape; a strided
view is updated through a contiguous copy written back. Adam keeps its moments of 16-bit parameters in
float32, as Warp does.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from loomwork.kernels import builtins as B
from loomwork.kernels import types as T
from loomwork.kernels.array import array, zeros
from loomwork.kernels.launch import launch
from loomwork.kernels.module import kernel

from .components import cast_like, scalar_count, scalar_view

tid, sqrt = B.BUILTINS["tid"], B.BUILTINS["sqrt"]


@kernel(enable_backward=False)
def _adam_step(g: array(dtype=T.Float), m: array(dtype=T.Float), v: array(dtype=T.Float), lr: T.Float,
               beta1: T.Float, beta2: T.Float, bias1: T.Float, bias2: T.Float, eps: T.Float,
               params: array(dtype=T.Float)):
    # bias1, bias2: the bias corrections 1 - beta^(t + 1) of the moments at this step
    i = tid()
    gi = cast_like(g[i], lr)
    mi = beta1 * m[i] + (1.0 - beta1) * gi
    vi = beta2 * v[i] + (1.0 - beta2) * gi * gi
    m[i] = mi
    v[i] = vi
    params[i] = params[i] - cast_like(lr * (mi / bias1) / (sqrt(vi / bias2) + eps), params[i])


@kernel(enable_backward=False)
def _sgd_step(g: array(dtype=T.Float), b: array(dtype=T.Float), lr: T.Float, momentum: T.Float,
              dampening: T.Float, weight_decay: T.Float, nesterov: int, t: int, params: array(dtype=T.Float)):
    i = tid()
    gt = g[i]
    if weight_decay != 0.0:
        gt = gt + weight_decay * params[i]
    if momentum != 0.0:
        bt = gt
        if t > 0:
            bt = momentum * b[i] + (1.0 - dampening) * gt
        b[i] = bt
        if nesterov != 0:
            gt = gt + momentum * bt
        else:
            gt = bt
    params[i] = params[i] - lr * gt


def _flat(a: array) -> array:
    """All the scalars of contiguous array `a`, as one 1-D array in the same memory."""
    return scalar_view(a.reshape(a.size))


def _update(kernel: Any, p: array, g: array, state: list, scalars: list) -> None:
    """Launch an update of parameter `p` over its scalars; a strided `p` is updated through a contiguous
    copy written back."""
    target = p.contiguous()
    launch(kernel, p.size * scalar_count(p.dtype), inputs=[_flat(g.contiguous()), *(_flat(a) for a in state),
                                                          *scalars, _flat(target)], device=p.device)
    if target is not p:
        p.assign(target)


def _check_param(owner: str, i: int, p: Any) -> None:
    if not isinstance(p, array):
        raise TypeError(f"{owner}: params[{i}] must be a wp.array, got {type(p).__name__}")
    if not T.is_float(T.elem_scalar(p.dtype)):
        raise TypeError(f"{owner}: params[{i}] has dtype {T.type_name(p.dtype)}; the optimizer updates arrays of "
                        "floats (float16, bfloat16, float32, float64 and vectors or matrices of them)")


def _check_grads(owner: str, params: list, grads: Any) -> list:
    if params is None:
        raise RuntimeError(f"{owner} parameters must be set before calling step(), got None (pass params= or "
                           "call set_params)")
    grads = list(grads) if isinstance(grads, Sequence) else None
    if grads is None or len(grads) != len(params):
        raise ValueError(f"{owner}.step takes a list of {len(params)} gradient array(s), one per parameter array")
    for i, (p, g) in enumerate(zip(params, grads, strict=True)):
        if not isinstance(g, array):
            raise TypeError(f"{owner}.step: grad[{i}] must be a wp.array, got {type(g).__name__}")
        if g.dtype != p.dtype:
            raise TypeError(f"{owner} gradient dtype must match parameter dtype {T.type_name(p.dtype)}, got "
                            f"{T.type_name(g.dtype)} (grad[{i}])")
        if g.shape != p.shape:
            raise ValueError(f"{owner} gradient shape must match parameter shape {p.shape}, got {g.shape} "
                             f"(grad[{i}])")
        if g.device != p.device:
            raise ValueError(f"{owner}.step: grad[{i}] is on {g.device}, its parameter on {p.device}")
    return grads


def _state_array(p: array, scalar: Any, old: array | None) -> array:
    """Zeroed optimizer state for parameter `p` with components of type `scalar` (the old array when it fits)."""
    if scalar is T.elem_scalar(p.dtype):
        shape, dtype = p.shape, p.dtype
    else:  # 16-bit parameters keep float32 state, one value per scalar component
        shape, dtype = (p.shape if not T.is_composite(p.dtype) else (*p.shape, scalar_count(p.dtype))), scalar
    if old is not None and old.shape == shape and old.dtype == dtype:
        return old if old.device == p.device else old.to(p.device)
    return zeros(shape, dtype=dtype, device=p.device)


class _Optimizer:
    """What Adam and SGD share: the parameter list and per-parameter state arrays (the lists named in
    `_states`), kept across `set_params` where they still fit."""

    _name = "optimizer"
    _states: tuple[str, ...] = ()

    def _state_scalar(self, scalar: Any) -> Any:
        """The scalar type of the state kept for parameters of scalar type `scalar`."""
        return scalar

    def set_params(self, params: list | None) -> None:
        """Set the arrays to optimize; state buffers are kept where shape and dtype still fit, else zeroed."""
        self.params = list(params) if params is not None else None
        if not self.params:
            return
        for i, p in enumerate(self.params):
            _check_param(self._name, i, p)
        for name in self._states:
            old = getattr(self, name)
            setattr(self, name, [_state_array(p, self._state_scalar(T.elem_scalar(p.dtype)),
                                              old[i] if i < len(old) else None) for i, p in enumerate(self.params)])

    def reset_internal_state(self) -> None:
        """Zero the state buffers and the step count."""
        for name in self._states:
            for a in getattr(self, name):
                a.zero_()
        self.t = 0


class Adam(_Optimizer):
    """Adam (adaptive moment estimation), Warp's `warp.optim.Adam`: `step(grad)` updates each parameter
    array in place by `lr * mhat / (sqrt(vhat) + eps)` from bias-corrected running moments of the gradient.

    `params` is a list of arrays (or None, then `set_params` later); `betas` the decay rates of the first
    and second moments (`m`, `v`).
    """

    _name = "Adam"
    _states = ("m", "v")

    def __init__(self, params: list | None = None, lr: float = 0.001, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-08) -> None:
        self.m: list[array] = []
        self.v: list[array] = []
        self.set_params(params)
        self.lr = lr
        self.beta1, self.beta2 = betas
        self.eps = eps
        self.t = 0

    def _state_scalar(self, scalar: Any) -> Any:
        return T.float32 if scalar in (T.float16, T.bfloat16) else scalar

    def step(self, grad: list) -> None:
        """One Adam update of every parameter array from its gradient `grad[i]` (same dtype and shape)."""
        grads = _check_grads("Adam", self.params, grad)
        bias1, bias2 = 1.0 - self.beta1 ** (self.t + 1), 1.0 - self.beta2 ** (self.t + 1)
        for p, g, m, v in zip(self.params, grads, self.m, self.v, strict=True):
            st = T.elem_scalar(m.dtype)
            _update(_adam_step, p, g, [m, v], [st(self.lr), st(self.beta1), st(self.beta2), st(bias1), st(bias2),
                                               st(self.eps)])
        self.t += 1


class SGD(_Optimizer):
    """Stochastic gradient descent with optional momentum, dampening, Nesterov momentum and weight decay
    (L2), Warp's `warp.optim.SGD`: `step(grad)` updates each parameter array in place (momentum buffers `b`)."""

    _name = "SGD"
    _states = ("b",)

    def __init__(self, params: list | None = None, lr: float = 0.001, momentum: float = 0.0,
                 dampening: float = 0.0, weight_decay: float = 0.0, nesterov: bool = False) -> None:
        self.b: list[array] = []
        self.set_params(params)
        self.lr = lr
        self.momentum = momentum
        self.dampening = dampening
        self.weight_decay = weight_decay
        self.nesterov = nesterov
        self.t = 0

    def step(self, grad: list) -> None:
        """One SGD update of every parameter array from its gradient `grad[i]` (same dtype and shape)."""
        grads = _check_grads("SGD", self.params, grad)
        for p, g, b in zip(self.params, grads, self.b, strict=True):
            st = T.elem_scalar(p.dtype)
            _update(_sgd_step, p, g, [b], [st(self.lr), st(self.momentum), st(self.dampening),
                                           st(self.weight_decay), int(bool(self.nesterov)), self.t])
        self.t += 1
