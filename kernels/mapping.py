"""`wp.map`: apply a builtin or a function elementwise over arrays, and the arrays' Python operators.

Each (function, arity, which operands are arrays, dimension count, output count) gets one generic
kernel, generated as Python source and compiled like any other; its overloads follow the operand
types. Arrays broadcast as in NumPy (a broadcast dimension is a zero stride), other operands are
passed as kernel arguments, and the launches are ordinary ones: a Tape records them.
"""

from __future__ import annotations

import itertools
import linecache
from typing import Any

import numpy as np

from . import array as array_module
from . import builtins as B
from . import types as T
from .array import array
from .device import get_device
from .functions import Function, func
from .ir import ArrayType, Var
from .launch import launch
from .module import BuildContext, Kernel, get_module
from .structs import is_tuple

_kernels: dict[tuple, Kernel] = {}
_serial = itertools.count()


def _operand_type(x: Any, like: Any) -> tuple[Any, Any]:
    """The kernel type of a non-array operand and the value passed for it. Python numbers take the scalar
    type of the first array's elements (`a * 2` keeps a float64 array float64) where that is a number type."""
    if isinstance(x, bool | int | float) and not isinstance(x, T.ScalarType):
        st = T.elem_scalar(like) if like is not None else None
        if st is not None and st is not T.bool_ and (st.is_float or isinstance(x, int)) and not isinstance(x, bool):
            return st, st(x)
    t = T.python_value_type(x)
    if t is None:
        raise TypeError(f"wp.map: cannot pass a {type(x).__name__} to a kernel function")
    return t, x


def _return_type(fn: Any, types: list) -> Any:
    """What `fn` returns for arguments of `types` (the front end's answer, no compilation)."""
    if isinstance(fn, B.Builtin):
        found = B.resolve(fn.name, types)
        if found is None:
            got = ", ".join(T.type_name(t) for t in types)
            raise TypeError(f"wp.map: no overload of {fn.name}() takes ({got})")
        return found[0].ret(found[1])
    inst, err = BuildContext(debug=False).instantiate(fn, [Var(f"v_arg{i}", t) for i, t in enumerate(types)], {})
    if inst is None:
        raise TypeError(f"wp.map: {err}")
    return inst.ir.ret


def _kernel(fn: Any, is_array: tuple[bool, ...], ndim: int, n_out: int) -> Kernel:
    key = (id(fn), is_array, ndim, n_out)
    k = _kernels.get(key)
    if k is not None and k.func.__globals__["fn"] is fn:
        return k
    idx = ", ".join("ijkl"[:ndim])
    params = [f"a{n}: {'array(dtype=Any, ndim=' + str(ndim) + ')' if arr else 'Any'}" for n, arr in enumerate(is_array)]
    params += [f"out{n}: array(dtype=Any, ndim={ndim})" for n in range(n_out)]
    args = ", ".join(f"a{n}[{idx}]" if arr else f"a{n}" for n, arr in enumerate(is_array))
    results = ", ".join(f"r{n}" for n in range(n_out))
    n = next(_serial)
    name = f"map_{getattr(fn, '__name__', 'fn')}_{n}"
    source = (f"def {name}({', '.join(params)}):\n    {idx} = tid()\n    {results} = fn({args})\n"
              + "".join(f"    out{m}[{idx}] = r{m}\n" for m in range(n_out)))
    filename = f"<loomwork.map {n}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    namespace = {"fn": fn, "tid": B.BUILTINS["tid"], "array": array, "Any": Any, "__name__": "loomwork.map"}
    exec(compile(source, filename, "exec"), namespace)  # noqa: S102 - our own generated source
    k = _kernels[key] = Kernel(namespace[name], module=get_module(f"loomwork.map.{name}"))
    return k


def _broadcast(a: array, shape: tuple[int, ...]) -> array:
    """`a` seen with `shape` (NumPy broadcasting): broadcast dimensions get stride 0, gradients alike."""
    if a.shape == shape:
        return a
    lead = len(shape) - a.ndim
    strides = tuple(0 if d < lead or a.shape[d - lead] == 1 != shape[d] else a.strides[d - lead]
                    for d in range(len(shape)))
    view = array(ptr=a.ptr or 0, dtype=a.dtype, shape=shape, strides=strides, device=a.device, owner=a)
    if a.grad is not None:
        view._grad = _broadcast(a.grad, shape)
        view._requires_grad = a.requires_grad
    return view


def map(fn: Any, *inputs: Any, out: Any = None, return_kernel: bool = False, block_dim: int = 256,
        device: Any = None) -> Any:
    """Apply `fn` (a builtin such as `wp.add`, a `@wp.func`, or a plain Python function, made one) to the
    elements of the array `inputs` (broadcast as in NumPy; other inputs repeat) and return a new array of
    its results (a tuple of arrays for a function returning several values), or write them into `out`.
    `return_kernel=True` returns the generated kernel instead of launching it."""
    if not callable(fn):
        raise TypeError(f"wp.map: expected a builtin or a function, got {type(fn).__name__}")
    if not isinstance(fn, B.Builtin | Function):
        fn = func(fn)
    arrays = [x for x in inputs if isinstance(x, array)]
    if not arrays:
        raise TypeError("wp.map: at least one input must be a wp.array")
    try:
        shape = np.broadcast_shapes(*(a.shape for a in arrays))
    except ValueError:
        raise ValueError(f"wp.map: the input shapes {[a.shape for a in arrays]} do not broadcast together") from None
    if not 1 <= len(shape) <= 4:
        raise ValueError(f"wp.map: the result would have {len(shape)} dimensions; kernels take 1 to 4")
    dev = get_device(device) if device is not None else arrays[0].device
    for a in arrays:
        if a.device != dev:
            raise ValueError(f"wp.map: input arrays are on {a.device} and {dev}; move them to one device")
    types, values = [], []
    for x in inputs:
        if isinstance(x, array):
            types.append(ArrayType(x.dtype, len(shape)))
            values.append(_broadcast(x, shape))
        else:
            t, v = _operand_type(x, arrays[0].dtype)
            types.append(t)
            values.append(v)
    ret = _return_type(fn, [t.dtype if isinstance(t, ArrayType) else t for t in types])
    if ret is None:
        raise TypeError(f"wp.map: {getattr(fn, '__name__', fn)!r} returns nothing; it must return a value")
    rets = list(ret.fields.values()) if is_tuple(ret) else [ret]
    kernel = _kernel(fn, tuple(isinstance(x, array) for x in inputs), len(shape), len(rets))
    if return_kernel:
        return kernel
    if out is None:
        grad = any(a.requires_grad for a in arrays)
        outs = [array(shape=shape, dtype=t, device=dev, requires_grad=grad) for t in rets]
    else:
        outs = list(out) if isinstance(out, list | tuple) else [out]
        if len(outs) != len(rets):
            raise ValueError(f"wp.map: the function returns {len(rets)} value(s); out holds {len(outs)} array(s)")
        for o, t in zip(outs, rets, strict=True):
            if not isinstance(o, array) or o.shape != shape or o.dtype != t:
                raise ValueError(f"wp.map: out must be an array of shape {shape} and dtype {T.type_name(t)}, got "
                                 f"{o!r}")
    launch(kernel, shape, inputs=values, outputs=outs, device=dev, block_dim=block_dim)
    return outs[0] if len(outs) == 1 and not is_tuple(ret) else tuple(outs)


def _elementwise(name: str, *operands: Any, out: Any = None) -> array:
    return map(B.BUILTINS[name], *operands, out=out)


array_module.ELEMENTWISE[0] = _elementwise

__all__ = ["map"]
