"""Annotations -> kernel types: what a parameter, field or local annotation names, and the evaluated
annotations and closure values of a Python function (string annotations resolve in its scope)."""

from __future__ import annotations

import linecache
import typing
import weakref
from typing import Any

from . import types as T
from .array import array, fixedarray, indexedarray
from .ir import ArrayType


def arg_type(ann: Any) -> Any:
    """The kernel type an annotation names (an array annotation, a scalar, vector, matrix or record type)."""
    if isinstance(ann, fixedarray):
        if ann.fixed_shape is None:
            raise TypeError("wp.fixedarray annotations need a shape, e.g. wp.fixedarray(shape=(2, 3), dtype=int)")
        return T.local_array_type(ann.fixed_shape, ann.dtype)
    if isinstance(ann, indexedarray):
        return ArrayType(ann.dtype, ann.ndim, indexed=True)
    if isinstance(ann, array):
        if ann.dtype is None:
            raise TypeError("array annotations need a dtype, e.g. wp.array(dtype=float)")
        return ArrayType(ann.dtype, ann.ndim)
    if T.is_generic(ann) or T.is_record(ann) or T.is_composite(ann):
        return ann
    if getattr(ann, "kernel_value_type", False):  # a type instance of the kernel layer (wp.tile[float, 8, 8])
        return ann
    if typing.get_origin(ann) is tuple:  # tuple[int, float] / tuple[int, ...]: tuples of those element types
        args = typing.get_args(ann)
        variadic = len(args) == 2 and args[1] is ...
        want = [arg_type(a) for a in (args[:1] if variadic else args)]

        def fits(t: Any) -> bool:
            got = list(getattr(t, "fields", {}).values()) if getattr(t, "is_tuple", False) else None
            return got is not None and (all(g == want[0] for g in got) if variadic else got == want)

        return T.GenericType(T.type_name(ann), fits)
    if isinstance(ann, type) and issubclass(ann, array):
        raise TypeError(f"{ann.__name__} needs a dtype, e.g. {ann.__name__}(dtype=float)")
    try:
        return T.scalar_type(ann)
    except TypeError:
        raise TypeError(f"{ann!r} is not a type kernels understand") from None


_SOURCE_LINES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def remember_source(func: Any) -> None:
    """Keep the lines of the file `func` is defined in, as they were at its definition: kernels and functions
    still compile after that file is removed (code written to a temporary file and imported, as generators
    of kernels do). linecache holds the same list already, so this costs a reference."""
    filename = getattr(getattr(func, "__code__", None), "co_filename", None)
    lines = linecache.getlines(filename) if filename else None
    if lines:
        _SOURCE_LINES[func] = lines


def remembered_source(func: Any) -> list[str] | None:
    """The file lines `remember_source` kept for `func` (None: none)."""
    return _SOURCE_LINES.get(func)


def closure_values(func: Any) -> dict:
    """The values a function closes over (cells not yet assigned are left out)."""
    out = {}
    for n, c in zip(func.__code__.co_freevars, func.__closure__ or (), strict=False):
        try:
            out[n] = c.cell_contents
        except ValueError:
            pass
    return out


def annotations(func: Any) -> dict:
    """A function's annotations with strings (`from __future__ import annotations`) evaluated."""
    ann = dict(getattr(func, "__annotations__", {}))
    for k, v in ann.items():
        if isinstance(v, str):
            ann[k] = eval(v, func.__globals__, closure_values(func))  # noqa: S307 - the user's own annotation
    return ann
