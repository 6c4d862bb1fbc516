"""Library routines on arrays (`loomwork.utils`): reductions, scans, sorting, run-length encoding, casts.
The heavy ones run natively on every core; sums accumulate in float64, so a float32 sum of millions of
values is accurate to about 1e-9 relative. Called while their arrays' device is being captured into a
graph, they are recorded and run when the graph does, as launches are. Arrays in device memory (a GPU's)
are copied to the host for the routine and the arrays it writes copied back: correct, at the cost of the
transfers (no GPU-native versions yet)."""

from __future__ import annotations

import functools
import inspect
import operator
from collections.abc import Callable
from typing import Any

import numpy as np

from . import types as T
from .array import array, copy, empty
from .cpu import utils_library
from .errors import CaptureError
from .stream import capturing_graph
from .stream import runtime as streams


def _capturable(*written: str, result: str | None = None) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorator: a routine called while the device of its first array argument is being captured is
    recorded into the graph (with the arrays named in `written` as what it writes) instead of run. One
    that returns its result to Python cannot be replayed: unless the parameter `result` names is given
    (the array that receives it instead), it raises CaptureError."""
    def wrap(fn: Callable[..., Any]) -> Callable[..., Any]:
        sig = inspect.signature(fn)

        @functools.wraps(fn)
        def call(*args: Any, **kwargs: Any) -> Any:
            if streams.capturing:
                bound = sig.bind(*args, **kwargs)
                first = next((v for v in bound.arguments.values() if isinstance(v, array)), None)
                graph = capturing_graph(first.device) if first is not None else None
                if graph is not None:
                    if result is not None and bound.arguments.get(result) is None:
                        raise CaptureError(f"{fn.__name__} returns its result to Python, which a graph replay "
                                           f"cannot do; pass {result}= (an array that receives it) to capture it")
                    outs = [bound.arguments.get(n) for n in written]
                    writes = [(a._storage, f"{fn.__name__}()") for a in outs if isinstance(a, array)]
                    graph.record(functools.partial(fn, *args, **kwargs), (), writes, (args, kwargs))
                    return None
            return fn(*args, **kwargs)
        return call
    return wrap

_FLOAT_SUFFIX = {T.float32: "f32", T.float64: "f64"}


def _on_host(*written: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorator: a routine given arrays the host cannot read runs on host copies of them, and the arrays named
    in `written` get the copies' new contents back (the native routines run on the CPU's thread pool)."""
    def wrap(fn: Callable[..., Any]) -> Callable[..., Any]:
        sig = inspect.signature(fn)

        @functools.wraps(fn)
        def call(*args: Any, **kwargs: Any) -> Any:
            bound = sig.bind(*args, **kwargs)
            remote = {n: v for n, v in bound.arguments.items()
                      if isinstance(v, array) and v.ptr is not None and not v.device.backend.host_accessible}
            if not remote:
                return fn(*args, **kwargs)
            for n, v in remote.items():  # read now, also while the CPU is being captured (not a CPU copy to record)
                bound.arguments[n] = array(v.numpy(), dtype=v.dtype, device="cpu")
            result = fn(*bound.args, **bound.kwargs)
            for n in written:
                if n in remote:
                    copy(remote[n], bound.arguments[n])
            for n, original in remote.items():
                if result is bound.arguments[n]:
                    return original  # an `out=` given: the caller's array, now written
            if isinstance(result, array) and result.device != (dev := next(iter(remote.values())).device):
                result = result.to(dev)  # a new array (a reduction along an axis) goes where its input was
            return result
        return call
    return wrap


def _flat_input(a: Any, what: str, count: int | None = None) -> np.ndarray:
    """A contiguous 1-D NumPy view of the scalar components of `a` (copied only when `a` is strided)."""
    if not isinstance(a, array):
        raise TypeError(f"{what}: expected a wp.array, got {type(a).__name__}")
    v = np.ascontiguousarray(a.numpy())
    comps = int(np.prod(a.dtype._shape_)) if T.is_composite(a.dtype) else 1
    v = v.reshape(-1)
    if count is not None:
        if not 0 <= count <= a.size:
            raise ValueError(f"{what}: count {count} is out of range for an array of {a.size}")
        v = v[: count * comps]
    return v


def _reduce(kind: str, arrays: list, dtype: Any, out: Any, axis: Any, what: str, count: int | None) -> Any:
    """A sum (`kind` "sum") or inner product ("dot") as Warp 1.19 returns it: over everything, a NumPy scalar
    of the result type (an ndarray of the components for a vector or matrix sum); along `axis` (negative
    counts from the end), an array with that axis kept at length 1; with `out`, written there and `out`
    returned. `count` limits it to the first elements (along `axis` when given)."""
    st = T.elem_scalar(dtype)
    if not (st.is_float or st.is_int):
        raise TypeError(f"{what}: unsupported dtype {T.type_name(dtype)}")
    rtype = dtype if kind == "sum" else st  # an inner product of vectors is a scalar
    wide = np.float64 if st.is_float else np.int64
    if axis is not None:  # reduce along one axis of a multi-dimensional array
        a0 = arrays[0]
        ax = operator.index(axis)
        if not -a0.ndim <= ax < a0.ndim:
            raise IndexError(f"{what}() axis {axis} is out of bounds for an array of {a0.ndim} dimensions")
        ax %= a0.ndim
        n = a0.shape[ax] if count is None else count
        if not 0 <= n <= a0.shape[ax]:
            raise ValueError(f"{what}: count {n} is out of range for an axis of length {a0.shape[ax]}")
        vals = [np.take(T.from_storage(st, a.numpy()).astype(wide), np.arange(n), axis=ax) for a in arrays]
        r = vals[0] if kind == "sum" else vals[0] * vals[1]
        r = r.sum(axis=ax, keepdims=True)
        if kind == "dot" and T.is_composite(dtype):
            r = r.sum(axis=tuple(range(a0.ndim, r.ndim)))
        shape = tuple(1 if d == ax else s for d, s in enumerate(a0.shape))
        if out is None:
            out = empty(shape, rtype, a0.device)
        elif out.shape != shape or out.dtype != rtype:
            raise ValueError(f"{what}: out must have shape {shape} and dtype {T.type_name(rtype)}, got "
                             f"{out.shape} and {T.type_name(out.dtype)}")
        out.assign(r)
        return out
    flats = [_flat_input(a, what, count) for a in arrays]
    comps = int(np.prod(dtype._shape_)) if T.is_composite(dtype) else 1
    if st in _FLOAT_SUFFIX and comps == 1:
        rt, suffix = utils_library(), _FLOAT_SUFFIX[st]
        if kind == "sum":
            total = getattr(rt, f"lw_sum_{suffix}")(flats[0].ctypes.data, flats[0].size)
        else:
            total = getattr(rt, f"lw_dot_{suffix}")(flats[0].ctypes.data, flats[1].ctypes.data, flats[0].size)
    else:  # integers, 16-bit floats and vector components: exact or per-component sums with NumPy
        vals = T.from_storage(st, flats[0]).reshape(-1, comps).astype(wide)
        if kind == "dot":
            vals = (vals * T.from_storage(st, flats[1]).reshape(-1, comps).astype(wide)).sum(axis=1, keepdims=True)
        total = vals.sum(axis=0)
    result = np.asarray(total, dtype=np.dtype(st.value_dtype))
    result = result.reshape(dtype._shape_) if rtype is not st else result.reshape(-1)[0]
    if out is not None:
        out.assign(result.reshape((1, *np.shape(result))))
        return out
    return result


@_capturable("out", result="out")
@_on_host("out")
def array_sum(values: array, out: array | None = None, value_count: int | None = None, axis: int | None = None) -> Any:
    """The sum of `values` (its first `value_count` elements; or along `axis`), returned or written to `out`
    (see _reduce for what each form returns)."""
    return _reduce("sum", [values], values.dtype, out, axis, "array_sum", value_count)


@_capturable("out", result="out")
@_on_host("out")
def array_inner(a: array, b: array, out: array | None = None, count: int | None = None, axis: int | None = None) -> Any:
    """The inner product of `a` and `b` (dot products summed for vector arrays), returned or written to `out`."""
    if not isinstance(a, array) or not isinstance(b, array) or a.dtype != b.dtype or a.shape != b.shape:
        raise TypeError("array_inner: a and b must be wp.arrays of the same dtype and shape")
    return _reduce("dot", [a, b], a.dtype, out, axis, "array_inner", count)


@_capturable("out_array")
@_on_host("out_array")
def array_scan(in_array: array, out_array: array, inclusive: bool = True) -> None:
    """Prefix sums of `in_array` into `out_array` (inclusive, or exclusive starting at 0)."""
    src = _flat_input(in_array, "array_scan")
    if not isinstance(out_array, array) or out_array.dtype != in_array.dtype or out_array.size != in_array.size:
        raise TypeError("array_scan: out_array must be a wp.array of the input's dtype and size")
    if not out_array.is_contiguous or T.is_composite(in_array.dtype):
        raise TypeError("array_scan: scalar arrays only, with a contiguous output")
    suffix = {T.float32: "f32", T.float64: "f64", T.int32: "i32"}.get(in_array.dtype)
    if suffix is None:
        raise TypeError(f"array_scan: supports float32, float64 and int32, got {T.type_name(in_array.dtype)}")
    getattr(utils_library(), f"lw_scan_{suffix}")(src.ctypes.data, out_array.ptr, src.size, int(inclusive))
    out_array._storage.bump("array_scan()")


@_capturable("keys", "values")
@_on_host("keys", "values")
def radix_sort_pairs(keys: array, values: array, count: int) -> None:
    """Sort the first `count` (key, value) pairs by key, in place and stably (int32 or float32 keys,
    int32 values). Warp's arrays of twice the length are accepted; the second half is not needed."""
    sort_pairs(keys, values, count, tail_scratch=False)


@_capturable("keys", "values")
@_on_host("keys", "values")
def sort_pairs(keys: array, values: array, count: int, *, tail_scratch: bool) -> None:
    """`radix_sort_pairs`; with `tail_scratch` (for owners of arrays of twice the length, such as HashGrid)
    the second halves serve as the sort's scratch instead of two fresh allocations. Recorded, not run, while
    a graph of the keys' device is being captured (a HashGrid build inside a capture sorts on each replay)."""
    if not isinstance(keys, array) or not isinstance(values, array):
        raise TypeError("radix_sort_pairs: keys and values must be wp.arrays")
    if keys.dtype not in (T.int32, T.float32) or values.dtype is not T.int32:
        raise TypeError(f"radix_sort_pairs: keys must be int32 or float32 and values int32, got "
                        f"{T.type_name(keys.dtype)} and {T.type_name(values.dtype)}")
    if not (keys.is_contiguous and values.is_contiguous) or count > min(keys.size, values.size) or count < 0:
        raise ValueError(f"radix_sort_pairs: count {count} must fit contiguous arrays of {keys.size} and {values.size}")
    spare = None
    if tail_scratch and keys.size >= 2 * count and values.size >= 2 * count:
        scratch_k, scratch_v = keys.ptr + 4 * count, values.ptr + 4 * count
    else:
        spare = (empty(max(count, 1), dtype=keys.dtype, device=keys.device),
                 empty(max(count, 1), dtype=T.int32, device=keys.device))
        scratch_k, scratch_v = spare[0].ptr, spare[1].ptr
    fn = utils_library().lw_radix_sort_i32 if keys.dtype is T.int32 else utils_library().lw_radix_sort_f32
    fn(keys.ptr, values.ptr, scratch_k, scratch_v, count)
    del spare  # the scratch lives until the sort has returned
    keys._storage.bump("radix_sort_pairs()")
    values._storage.bump("radix_sort_pairs()")


@_capturable("keys", "values")
@_on_host("keys", "values")
def segmented_sort_pairs(keys: array, values: array, count: int, segment_start_indices: array,
                         segment_end_indices: array | None = None) -> None:
    """Sort (key, value) pairs by key within each segment [start[i], end[i]) (end defaults to the next start)."""
    k = keys.numpy()[:count]
    v = values.numpy()[:count]
    order_keys = T.from_storage(T.elem_scalar(keys.dtype), k)  # bfloat16 keys sort by value, not by bits
    starts = np.asarray(segment_start_indices.numpy(), dtype=np.int64)
    ends = np.asarray(segment_end_indices.numpy(), dtype=np.int64) if segment_end_indices is not None else np.r_[
        starts[1:], count]
    for s, e in zip(starts, ends, strict=True):
        if not 0 <= s <= e <= count:
            raise ValueError(f"segmented_sort_pairs: segment [{s}, {e}) is out of range for {count} pairs")
        order = np.argsort(order_keys[s:e], kind="stable")
        k[s:e], v[s:e] = k[s:e][order], v[s:e][order]
    keys._storage.bump("segmented_sort_pairs()")
    values._storage.bump("segmented_sort_pairs()")


@_capturable("run_values", "run_lengths", "run_count", result="run_count")
@_on_host("run_values", "run_lengths", "run_count")
def runlength_encode(values: array, run_values: array, run_lengths: array, run_count: array | None = None,
                     value_count: int = 0) -> int | None:
    """Runs of equal consecutive values: their values and lengths; the number of runs is returned, or
    written to `run_count[0]` when given."""
    v = values.numpy().reshape(-1)[: value_count or values.size]
    if v.size == 0:
        n = 0
    else:
        starts = np.flatnonzero(np.r_[True, v[1:] != v[:-1]])
        n = starts.size
        if n > run_values.size or n > run_lengths.size:
            raise ValueError(f"runlength_encode: {n} runs do not fit outputs of {run_values.size} / {run_lengths.size}")
        run_values.numpy()[:n] = v[starts]
        run_lengths.numpy()[:n] = np.diff(np.r_[starts, v.size])
    if run_count is not None:
        run_count.numpy()[0] = n
        return None
    return n


@_capturable("out_array")
@_on_host("out_array")
def array_cast(in_array: array, out_array: array, count: int | None = None) -> None:
    """Copy `in_array` into `out_array` converting the scalar type (for example float64 -> float32)."""
    src = in_array.numpy().reshape(-1)
    dst = out_array.numpy().reshape(-1)
    n = count if count is not None else src.size
    if n > dst.size or n > src.size:
        raise ValueError(f"array_cast: {n} elements do not fit arrays of {src.size} and {dst.size}")
    values = T.from_storage(T.elem_scalar(in_array.dtype), src[:n])
    dst[:n] = T.to_storage(T.elem_scalar(out_array.dtype), values)
    out_array._storage.bump("array_cast()")

