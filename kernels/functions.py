"""`@wp.func` and its companions: functions kernels call, with overloads by argument type, custom
adjoints and replays (`@wp.func_grad`, `@wp.func_replay`) and C++ bodies (`wp.func_native`).

A function is compiled per call site's argument types when a module that uses it is built;
`GENERATION` counts changes to any function, so modules that may call a changed one rebuild.
"""

from __future__ import annotations

import inspect
import itertools
from collections.abc import Callable
from typing import Any, ParamSpec, TypeVar, overload

import numpy as np

from . import types as T
from .annotations import annotations, remember_source
from .builtins import Builtin

GENERATION = [0]  # bumped whenever any @wp.func changes, so dependent modules rebuild
#: called with each function (overload) as it is defined: the front end evaluates its wp.static expressions
DEFINITION_HOOKS: list[Callable[[Any], None]] = []


class Function:
    """A `@wp.func`: callable from kernels and other functions, with overloads by argument types."""

    def __init__(self, func: Any) -> None:
        self.key = func.__qualname__
        self.__name__ = func.__name__
        self.__qualname__ = func.__qualname__
        self.__doc__ = func.__doc__
        self.__module__ = func.__module__
        self.overloads: list[Any] = []
        self.native_snippets: tuple | None = None  # wp.func_native: (snippet, adjoint snippet, replay snippet)
        self.custom_grad: list = []  # Python functions given by @wp.func_grad (one per overload)
        self.custom_replay: list = []  # Python functions given by @wp.func_replay (one per overload)
        self.add_overload(func)

    def add_overload(self, func: Any) -> None:
        remember_source(func)
        for hook in DEFINITION_HOOKS:
            hook(func)
        sig = _annotation_key(func)
        self.overloads = [f for f in self.overloads if _annotation_key(f) != sig] + [func]
        GENERATION[0] += 1

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Python scope: run the Python body of the last overload whose annotated parameters the arguments
        match (see _python_arg_matches; exact types first), directly; none matching raises RuntimeError, as
        in Warp."""
        for promote in (False, True):
            for pyf in reversed(self.overloads):
                try:
                    bound = inspect.signature(pyf).bind(*args, **kwargs)
                except TypeError:
                    continue
                hints = annotations(pyf)
                if all(_python_arg_matches(v, hints.get(n), promote) for n, v in bound.arguments.items()):
                    return pyf(*args, **kwargs)
        raise RuntimeError(f"Error calling function '{self.__name__}', no overload found for arguments {args}")

    @property
    def __signature__(self) -> inspect.Signature:
        """What `inspect.signature` reports: the parameters of the first definition (as for Warp's functions)."""
        return inspect.signature(self.overloads[0])

    def __repr__(self) -> str:
        return f"<loomwork function {self.key}>"


def _python_arg_matches(v: Any, hint: Any, promote: bool) -> bool:
    """Whether a Python-scope argument fits a parameter annotated `hint` (a concrete vector, matrix or
    scalar type; other annotations, generic ones included, take anything): a vector, matrix or scalar of
    ours only its own type, a vector or matrix also a list, tuple or ndarray, a Python float only float32
    (Warp's `float`), a Python int any integer type; a NumPy scalar its own type. With `promote` (tried
    second), also integers for float types and NumPy floats for any float type."""
    if hint in (int, float, bool):
        hint = T.normalize_dtype(hint)
    if hint is None or not (T.is_composite(hint) or T.is_scalar(hint)):
        return True
    if isinstance(v, T._CompositeMixin | T.ScalarType):
        return type(v) is hint
    if T.is_composite(hint):
        return isinstance(v, list | tuple | np.ndarray)
    if isinstance(v, np.generic):
        own = T.dtype_from_numpy(v.dtype)
        return own is hint or (promote and hint.is_float and (own.is_float or own.is_int))
    if isinstance(v, bool):
        return hint is T.bool_
    if isinstance(v, int):
        return hint.is_int or (promote and hint.is_float)
    if isinstance(v, float):
        return hint is T.float32
    return False


def _annotation_key(func: Any) -> tuple:
    hints = annotations(func)
    return tuple((n, repr(hints.get(n))) for n in inspect.signature(func).parameters)


_functions: dict[tuple[str, str], Function] = {}


class GradWrapper:
    """What `wp.grad(f)` returns: called inside a kernel or function with f's arguments, it gives the
    gradient of f's (float) result with respect to each argument (a tuple for several), by f's adjoint
    seeded with 1. Forward-only: no gradient flows back through it in a kernel's backward pass."""

    def __init__(self, func: Function | Builtin) -> None:
        self.func = func
        self.key = func.key if isinstance(func, Function) else func.name

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError(f"wp.grad({self.key})(...) can only be called inside kernels and functions")

    def __repr__(self) -> str:
        return f"GradWrapper({self.key})"


def grad(func: Any) -> GradWrapper:
    """`wp.grad(f)`: the gradient of a @wp.func or builtin, to call in kernels and functions (see GradWrapper)."""
    if not isinstance(func, Function | Builtin):
        raise TypeError(f"wp.grad() takes a @wp.func function or a builtin, got {type(func).__name__}")
    return GradWrapper(func)


_P = ParamSpec("_P")
_R = TypeVar("_R")


@overload
def func(f: Callable[_P, _R]) -> Callable[_P, _R]: ...


@overload
def func(f: None = None, *, name: str | None = None, module: Any = None,
         inline: bool | None = None) -> Callable[[Callable[_P, _R]], Callable[_P, _R]]: ...


def func(f: Any = None, *, name: str | None = None, module: Any = None, inline: bool | None = None) -> Any:
    """Decorator: make `f` a function kernels can call. Redefining a name with other argument types adds an
    overload; with the same types, replaces it. `name` and `module` (a name, or "unique" for a function
    of its own) choose where it registers, so which definitions are overloads of one function;
    `inline` is Warp's hint to inline it (or not), left to the C++ compiler here."""
    if name is not None and not (isinstance(name, str) and name.isidentifier()):
        raise ValueError(f"wp.func name must be a valid identifier, got {name!r}")
    if inline not in (None, True, False):
        raise TypeError(f"wp.func inline must be None, True or False, got {inline!r}")

    def wrap(f: Any) -> Function:
        where = f.__module__ if module is None else f"{f.__module__}.unique{next(_unique_functions)}" if (
            module == "unique") else getattr(module, "name", module)
        key = (where, name or f.__qualname__)
        fn = _functions.get(key)
        if fn is None:
            fn = _functions[key] = Function(f)
            fn.key = name or fn.key
        else:
            fn.add_overload(f)
        return fn

    return wrap(f) if f is not None else wrap


_unique_functions = itertools.count()


def func_native(snippet: str, adj_snippet: str | None = None, replay_snippet: str | None = None) -> Any:
    """Decorator: a function whose body is C++ `snippet` (parameters by their Python names; the
    Python body is not compiled). `adj_snippet` accumulates into `adj_<name>` (arrays: gradient views,
    so `adj_out[tid]` reads an output's adjoint) from `adj_ret`; `replay_snippet` replaces the forward
    snippet in the backward pass."""
    if not isinstance(snippet, str) or (adj_snippet is not None and not isinstance(adj_snippet, str)):
        raise TypeError("wp.func_native takes C++ source strings")

    def wrap(f: Any) -> Function:
        fn = func(f)
        fn.native_snippets = (snippet, adj_snippet, replay_snippet)
        GENERATION[0] += 1
        return fn

    return wrap


def _attach(f: Function, attr: str, decorator: str) -> Any:
    if not isinstance(f, Function):
        raise TypeError(f"@wp.{decorator} takes a @wp.func, got {type(f).__name__}")

    def wrap(pyfunc: Any) -> Any:
        key = _annotation_key(pyfunc)
        kept = [g for g in getattr(f, attr) if _annotation_key(g) != key]
        setattr(f, attr, [*kept, pyfunc])  # one per overload: a new one with the same parameters replaces it
        GENERATION[0] += 1  # modules that call f rebuild
        return pyfunc

    return wrap


def func_grad(f: Function) -> Any:
    """Decorator: give @wp.func `f` a hand-written adjoint. It takes f's parameters plus `adj_ret`
    (when f returns a value; `adj_ret0, adj_ret1, ...` when it returns several) and accumulates into
    `wp.adjoint[param]`. An overloaded `f` takes one per overload, matched by parameter annotations."""
    return _attach(f, "custom_grad", "func_grad")


def func_replay(f: Function) -> Any:
    """Decorator: give @wp.func `f` the function its backward pass calls instead of re-running it
    (same parameters and return type; for functions with side effects such as atomics)."""
    return _attach(f, "custom_replay", "func_replay")
