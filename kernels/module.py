"""Kernels, user functions and modules: what `@wp.kernel` / `@wp.func` make, and how they are built.

Kernels and functions are captured lazily: decoration only records them in the module of the
Python file that defines them. The first launch (or `wp.load_module`) builds the whole module:
front end for every kernel, one C++ source, one shared library, cached on disk by content hash.
"""

from __future__ import annotations

import ast
import hashlib
import inspect
import itertools
import os
import re
import sys
import textwrap
import threading
import time
import typing
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Any

from . import (  # noqa: F401 (call forms register themselves)
    build,
    callforms,
    codegen,
    config,
    functions,
    ir,
    simd,
    tiles,
    tiles_block,
    tiles_fft,
    tiles_indexed,
    tiles_lanes,
)
from . import types as T
from .annotations import annotations, arg_type, closure_values, remember_source
from .backend import BuildOptions, Launcher, Program
from .errors import KernelError, KernelTypeError
from .extensions import registry
from .frontend import Builder, Source, call_kind, declare_statics
from .functions import Function
from .ir import ArrayType, Const
from .structs import is_struct, is_tuple

LARGE_ADJOINT_SOURCE = 200_000
TILED_SERIAL_THRESHOLD = 2  # tiled kernels: launches of two blocks or more run on the thread pool
"""Adjoint libraries with more C++ than this (characters) compile at -O1 unless wp.config.optimization_level
is set: a 545 KB articulated-body adjoint takes over two minutes at -O3 and about 20 s at -O1."""


def _sanitize(name: str) -> str:
    return re.sub(r"\W", "_", name)


def _has_generic_parameters(pyf: Any) -> bool:
    """Whether a function's parameter annotations leave types open (Any, generic vectors or arrays, none)."""
    hints = annotations(pyf)
    for n in inspect.signature(pyf).parameters:
        ann = hints.get(n, typing.Any)
        if ann is inspect.Parameter.empty or T.is_generic(arg_type(ann)):
            return True
    return False


_PLAIN = (int, float, complex, bool, str, bytes, type(None))


def _same_value(a: Any, b: Any) -> bool:
    """Whether two closure or default values are the same for a kernel's build: the same object, or equal
    plain values (numbers, strings, tuples of them)."""
    if a is b:
        return True
    if type(a) is not type(b):
        return False
    if isinstance(a, tuple):
        return len(a) == len(b) and all(_same_value(x, y) for x, y in zip(a, b, strict=True))
    return isinstance(a, _PLAIN) and a == b


def _same_definition(k: Kernel, g: Any) -> bool:
    """Whether the Python function `g` defines kernel `k` again: one code object and globals, closure values
    equal to those `k` was defined with (a loop variable's cell changes after), equal defaults and
    annotations (a kernel redefined in a loop or a factory with the same values)."""
    f = k.func
    if f.__code__ is not g.__code__ or f.__globals__ is not g.__globals__:
        return False
    cf, cg = k.defined_closure, closure_values(g)
    if (len(cf) != len(f.__code__.co_freevars) or cf.keys() != cg.keys()  # an empty cell: not comparable
            or not _same_value(tuple(cf.values()), tuple(cg.values()))
            or not _same_value(f.__defaults__, g.__defaults__)):
        return False
    fa, ga = f.__annotations__, g.__annotations__
    try:
        return f.__kwdefaults__ == g.__kwdefaults__ and fa.keys() == ga.keys() and all(
            fa[n] is ga[n] or fa[n] == ga[n] or arg_type(fa[n]) == arg_type(ga[n]) for n in fa)
    except Exception:  # annotations that cannot be compared (or are no types)
        return False


@dataclass
class FuncInstance:
    """One overload of a Function compiled for concrete argument types."""

    name: str
    native: str
    param_names: tuple[str, ...]
    defaults: dict
    ir: ir.Function | None = None

    def bind_args(self, args: list, kwargs: dict) -> list:
        out = list(args)
        for n in self.param_names[len(args):]:
            if n in kwargs:
                out.append(kwargs[n])
            else:
                d = self.defaults[n]
                out.append(Const(d, T.python_value_type(d), weak=isinstance(d, int | float)))
        return out


class BuildContext:
    """State of one module build: function instances, bounds-check sites, the build options."""

    def __init__(self, debug: bool, max_unroll: int = 0, lanes: int = 0) -> None:
        self.debug = debug
        self.max_unroll = max_unroll
        self.lanes = lanes  # lanes per block run together on the CPU (wp.config.enable_cpu_blocks); 0: none
        self.instances: dict[tuple, FuncInstance] = {}
        self.order: list[ir.Function] = []
        self.sites: list[tuple[str, str, str, int]] = []
        self.in_progress: set[tuple] = set()
        self.custom: dict[str, tuple] = {}  # function cname -> (custom adjoint IR | None, custom replay IR | None)
        self.gradients: dict[str, ir.Function] = {}  # functions called through wp.grad(f), by cname

    def add_site(self, owner: str, text: str, filename: str, line: int) -> int:
        self.sites.append((owner, text, filename, line))
        return len(self.sites) - 1

    @staticmethod
    def custom_for(candidates: list, types: dict) -> Any:
        """The custom adjoint or replay (of those given for a function) for the overload instantiated with
        `types`: the last whose annotated parameters name these types (unannotated ones fit any)."""
        for g in reversed(candidates):
            hints = annotations(g)
            if list(inspect.signature(g).parameters)[: len(types)] == list(types) and all(
                    n not in hints or T.is_generic(arg_type(hints[n])) or arg_type(hints[n]) == t
                    for n, t in types.items()):
                return g
        return candidates[-1] if len(candidates) == 1 else None

    def build_custom(self, fn: Function, cname: str, types: dict, ret: Any) -> tuple:
        """The IR of a function's custom adjoint and/or replay, checked against its signature."""
        grad_ir = replay_ir = None
        grad = self.custom_for(fn.custom_grad, types)
        if grad is not None:
            names = list(inspect.signature(grad).parameters)
            rets = list(ret.fields.values()) if is_tuple(ret) else [] if ret is None else [ret]
            adj_names = ["adj_ret"] if len(rets) == 1 else [f"adj_ret{k}" for k in range(len(rets))]
            expect = list(types) + adj_names
            if names[: len(types)] != list(types) or len(names) != len(expect):  # adjoints may be named freely
                raise KernelTypeError(f"@wp.func_grad of '{fn.key}' must take ({', '.join(expect)}), "
                                      f"got ({', '.join(names)})")
            grad_types = dict(types) | dict(zip(names[len(types):], rets, strict=True))
            # (an array parameter's adjoint is its gradient array: None here, the array's `_grad_of` when used)
            adjoints = {n: None if isinstance(t, ArrayType) else ir.Var(f"adjref_v_{n}", t) for n, t in types.items()}
            grad_ir = Builder(Source(grad), f"{fn.key} (custom gradient)", f"adj_{cname}", grad_types,
                              is_kernel=False, ctx=self, adjoints=adjoints).build()
        replay = self.custom_for(fn.custom_replay, types)
        if replay is not None:
            names = list(inspect.signature(replay).parameters)
            if names != list(types):
                raise KernelTypeError(f"@wp.func_replay of '{fn.key}' must take ({', '.join(types)}), "
                                      f"got ({', '.join(names)})")
            replay_ir = Builder(Source(replay), f"{fn.key} (custom replay)", f"rep_{cname}", dict(types),
                                is_kernel=False, ctx=self).build()
            if replay_ir.ret != ret:
                raise KernelTypeError(f"@wp.func_replay of '{fn.key}' returns {T.type_name(replay_ir.ret)}, "
                                      f"the function returns {T.type_name(ret)}")
        return grad_ir, replay_ir

    def instantiate(self, fn: Function, args: list, kwargs: dict) -> tuple[FuncInstance | None, str]:
        """The instance of `fn` that takes these arguments, building it on first use: the last defined overload
        with concrete parameter types that takes them, else the last generic one (as Warp prefers a concrete
        overload to a generic one)."""
        errors = []
        for pyf in sorted(reversed(fn.overloads), key=_has_generic_parameters):
            sig = inspect.signature(pyf)
            names = tuple(sig.parameters)
            starred = [p for p in sig.parameters.values() if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
            if starred:
                where = f"{inspect.getsourcefile(pyf)}:{pyf.__code__.co_firstlineno}"
                stars = "*" if starred[0].kind is starred[0].VAR_POSITIONAL else "**"
                return None, (f"function '{fn.key}' ({where}) has the parameter {stars}{starred[0].name}: "
                              "*args and **kwargs are not supported in kernel functions; name each parameter")
            try:
                bound = sig.bind(*args, **kwargs)
            except TypeError as e:
                errors.append(f"{fn.key}{sig}: {e}")
                continue
            hints = annotations(pyf)
            types: dict[str, Any] = {}
            ok = True
            for n, p in sig.parameters.items():
                value = bound.arguments.get(n)
                ann = hints.get(n, typing.Any)
                if value is None:  # a default
                    d = p.default
                    value = Const(d, T.python_value_type(d), weak=isinstance(d, int | float))
                t = typing.Any if ann is inspect.Parameter.empty else arg_type(ann)
                if T.is_generic(t):
                    concrete = value.type
                    if isinstance(t, ArrayType):
                        ok = isinstance(concrete, ArrayType) and concrete.ndim == t.ndim and T.generic_accepts(
                            t.dtype, concrete.dtype)
                    else:
                        ok = T.generic_accepts(t, concrete)
                    if not ok:
                        errors.append(f"{fn.key}{sig}: argument '{n}' expects {T.type_name(t)}, "
                                      f"got {T.type_name(concrete)}")
                        break
                    t = concrete
                else:
                    if not _accepts(t, value):
                        errors.append(f"{fn.key}{sig}: argument '{n}' expects {T.type_name(t)}, "
                                      f"got {T.type_name(value.type)}")
                        ok = False
                        break
                types[n] = t
            if not ok:
                continue
            key = (id(pyf), tuple(types.items()))
            inst = self.instances.get(key)
            if inst is None:
                if key in self.in_progress:
                    return None, f"recursive call of {fn.key}: recursion is not supported in kernels"
                self.in_progress.add(key)
                cname = f"f_{_sanitize(fn.key)}_{len(self.instances)}"
                defaults = {n: p.default for n, p in sig.parameters.items() if p.default is not p.empty}
                inst = FuncInstance(fn.key, cname, names, defaults)
                try:
                    if fn.native_snippets is not None:  # wp.func_native: the C++ snippet is the body
                        ret_ann = hints.get("return")
                        inst.ir = ir.Function(cname, tuple(ir.Var(f"v_{n}", t) for n, t in types.items()),
                                              arg_type(ret_ann) if ret_ann is not None else None, (), (), False,
                                              native_code=fn.native_snippets)
                    else:
                        inst.ir = Builder(Source(pyf), fn.key, cname, types, is_kernel=False, ctx=self).build()
                finally:
                    self.in_progress.discard(key)
                if config.print_ir:
                    print(inst.ir.dump(), file=sys.stderr)
                self.instances[key] = inst
                self.order.append(inst.ir)
                if fn.custom_grad or fn.custom_replay:
                    self.custom[cname] = self.build_custom(fn, cname, types, inst.ir.ret)
            return inst, ""
        got = ", ".join(T.type_name(a.type) for a in args)
        return None, f"no overload of {fn.key}() takes ({got}):\n    " + "\n    ".join(errors)


def _accepts(t: Any, value: Any) -> bool:
    if value.type == t:
        return True
    if isinstance(value, Const) and value.weak and T.is_scalar(t) and t is not T.bool_:
        return T.is_int(value.type) or t.is_float
    return False


class Kernel:
    """A `@wp.kernel`: a function run once per thread of a launch grid."""

    def __init__(self, func: Any, key: str | None = None, enable_backward: bool | None = None,
                 module: Module | None = None, options: dict | None = None) -> None:
        unknown = set(options or {}) - {"enable_backward"}
        if unknown:
            raise ValueError(f"kernel '{key or func.__qualname__}': per-kernel options are only 'enable_backward', got "
                             f"{sorted(unknown)}; build options belong to the module (module_options=, "
                             "wp.set_module_options)")
        self.func = func
        remember_source(func)
        declare_statics(func)
        # the closure's values now: a loop that defines kernels changes the cell they share afterwards
        self.defined_closure = closure_values(func)
        self.enable_backward = (options or {}).get("enable_backward", enable_backward)
        self.__name__ = func.__name__
        self.__qualname__ = func.__qualname__
        self.__doc__ = func.__doc__
        self.module = module or get_module(func.__module__)
        self.key, self.cname = self.module.add_kernel(self, key or func.__qualname__)
        self._signature: tuple[tuple[str, ...], tuple[Any, ...]] | None = None
        self._generic: bool | None = None
        self._overloads: dict[tuple, Kernel] = {}
        self._launch_overloads: dict[tuple, Kernel] = {}  # by the launch arguments' fingerprints
        self.launch_attributes: dict[str, Any] = {}

    @property
    def is_generic(self) -> bool:
        """Whether some parameter is generic (Any, wp.Scalar, wp.Float, wp.Int, array(dtype=Any))."""
        if self._generic is None:
            self._generic = any(T.is_generic(t) for t in self.signature()[1])
        return self._generic

    @property
    def overloads(self) -> list[Kernel]:
        """The concrete kernels made from this generic one so far (wp.overload, or launches with new types)."""
        return list(self._overloads.values())

    def overload(self, arg_types: Any) -> Kernel:
        """The concrete kernel for these argument types (a list in parameter order, or a dict by name)."""
        names, types = self.signature()
        if isinstance(arg_types, dict):
            unknown = set(arg_types) - set(names)
            if unknown:
                raise KernelTypeError(f"kernel '{self.key}' has no parameter(s) {sorted(unknown)}")
            given = [arg_types.get(n, t) for n, t in zip(names, types, strict=True)]
        else:
            given = list(arg_types)
            if len(given) != len(names):
                raise KernelTypeError(f"kernel '{self.key}' takes {len(names)} parameters, got {len(given)} types")
        concrete = []
        for n, t, g in zip(names, types, given, strict=True):
            c = g if isinstance(g, ArrayType) or T.is_scalar(g) or T.is_composite(g) or is_struct(g) else arg_type(g)
            if T.is_generic(c):
                raise KernelTypeError(f"kernel '{self.key}': the type given for '{n}' is still generic")
            ok = c == t if not T.is_generic(t) else (
                isinstance(c, ArrayType) and isinstance(t, ArrayType) and c.ndim == t.ndim
                and T.generic_accepts(t.dtype, c.dtype)) if isinstance(t, ArrayType) else T.generic_accepts(t, c)
            if not ok:
                raise KernelTypeError(f"kernel '{self.key}' parameter '{n}' is {T.type_name(t)}; "
                                      f"{T.type_name(c)} does not fit it")
            concrete.append(c)
        key = tuple(concrete)
        inst = self._overloads.get(key)
        if inst is None:
            inst = Kernel(self.func, key=f"{self.key}_{len(self._overloads)}", enable_backward=self.enable_backward,
                          module=self.module)
            inst._signature = (names, key)
            inst._generic = False
            self._overloads[key] = inst
        return inst

    @property
    def arg_names(self) -> tuple[str, ...]:
        return self.signature()[0]

    @property
    def arg_types(self) -> tuple[Any, ...]:
        return self.signature()[1]

    def signature(self) -> tuple[tuple[str, ...], tuple[Any, ...]]:
        if self._signature is None:
            hints = annotations(self.func)
            names, types = [], []
            for n, p in inspect.signature(self.func).parameters.items():
                if p.kind not in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
                    raise KernelTypeError(f"kernel '{self.key}': parameter '{n}' must be a plain positional parameter")
                if n not in hints:
                    raise KernelTypeError(
                        f"kernel '{self.key}' parameter '{n}' needs a type annotation, e.g. {n}: float "
                        f"or {n}: wp.array(dtype=float) ({inspect.getsourcefile(self.func)}:"
                        f"{self.func.__code__.co_firstlineno})"
                    )
                try:
                    types.append(arg_type(hints[n]))
                except TypeError as e:
                    raise KernelTypeError(f"kernel '{self.key}' parameter '{n}': {e}") from None
                names.append(n)
            self._signature = (tuple(names), tuple(types))
        return self._signature

    @property
    def label(self) -> str:
        """How messages name this kernel: its key and where it is defined."""
        try:
            where = f"{inspect.getsourcefile(self.func)}:{self.func.__code__.co_firstlineno}"
        except TypeError:
            where = "<unknown>"
        return f"'{self.key}' (defined at {where})"

    @property
    def options(self) -> dict:
        """The kernel's own options (Warp's `Kernel.options`): "enable_backward" when it was given."""
        return {} if self.enable_backward is None else {"enable_backward": bool(self.enable_backward)}

    @property
    def backward_enabled(self) -> bool:
        """Whether the module builds this kernel's adjoint: the kernel's option, else its module's, else wp.config's."""
        if self.enable_backward is not None:
            return bool(self.enable_backward)
        return bool(self.module.option("enable_backward"))

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise TypeError(f"kernel '{self.key}' is launched with wp.launch({self.__name__}, dim=..., inputs=[...])")

    def __repr__(self) -> str:
        return f"<loomwork kernel {self.key}>"


@call_kind(lambda obj: isinstance(obj, Kernel))
def _kernel_call(bld: Builder, node: Any, obj: Kernel) -> None:
    bld.error(node, KernelTypeError, f"kernel '{obj.key}' cannot be called from a kernel; make it a @wp.func")


def _check_launch_attributes(launch_bounds: Any, cuda_max_registers: Any, cluster_dim: Any,
                             entry_point_abi: Any, enable_backward: Any) -> None:
    """Warp's CUDA launch attributes, checked as Warp checks them (they shape CUDA builds only)."""
    bounds = launch_bounds if isinstance(launch_bounds, tuple) else (launch_bounds,)
    if launch_bounds is not None and not (1 <= len(bounds) <= 2 and all(
            isinstance(b, int) and not isinstance(b, bool) and b > 0 for b in bounds)):
        raise ValueError(f"launch_bounds must be a positive int or a tuple of 1-2 positive ints, got {launch_bounds!r}")
    if cuda_max_registers is not None:
        if not isinstance(cuda_max_registers, int) or isinstance(cuda_max_registers, bool) or cuda_max_registers < 1:
            raise ValueError(f"cuda_max_registers must be a positive int, got {cuda_max_registers!r}")
        if launch_bounds is not None:
            raise ValueError("cuda_max_registers cannot be combined with launch_bounds")
    if cluster_dim is not None and not (isinstance(cluster_dim, int) and 1 <= cluster_dim <= 16):
        raise ValueError(f"cluster_dim must be an int in [1, 16], got {cluster_dim!r}")
    if entry_point_abi not in (None, "warp", "external_constant_params"):
        raise ValueError(f"entry_point_abi must be 'warp' or 'external_constant_params', got {entry_point_abi!r}")
    if entry_point_abi == "external_constant_params" and enable_backward is not False:
        raise ValueError("entry_point_abi='external_constant_params' requires enable_backward=False")


def kernel(f: Any = None, *, name: str | None = None, enable_backward: bool | None = None,
           launch_bounds: tuple[int, ...] | int | None = None, cuda_max_registers: int | None = None,
           enable_cuda_smem_spilling: bool | None = None, cluster_dim: int | None = None, module: Any = None,
           module_options: dict | None = None, entry_point_abi: str | None = None,
           grid_stride: bool | None = None) -> Any:
    """Decorator: make `f` a kernel launched with `wp.launch`. Usable as `@wp.kernel` or `@wp.kernel(...)`.
    `name` replaces the kernel's key (a C++ identifier). `module` names the module to build it in (default:
    its Python module's); "unique" gives it a module of its own, whose build options `module_options` sets
    (see `set_module_options`). `launch_bounds`, `cuda_max_registers`, `enable_cuda_smem_spilling`,
    `cluster_dim`, `entry_point_abi` and `grid_stride` are CUDA launch attributes, checked here and
    kept on the kernel; CPU builds do not depend on them."""
    if name is not None and not (isinstance(name, str) and name.isidentifier()):
        raise ValueError(f"kernel name must be a valid C++ identifier, got {name!r}")
    _check_launch_attributes(launch_bounds, cuda_max_registers, cluster_dim, entry_point_abi, enable_backward)

    attributes = {"launch_bounds": launch_bounds, "cuda_max_registers": cuda_max_registers,
                  "enable_cuda_smem_spilling": enable_cuda_smem_spilling, "cluster_dim": cluster_dim,
                  "entry_point_abi": entry_point_abi or "warp", "grid_stride": grid_stride}

    def wrap(func: Any) -> Kernel:
        mod = module
        if module == "unique":
            for k in _unique_kernels.get(func.__code__, ()):  # the same definition again: the same kernel
                if (k.key == (name or func.__qualname__) and k.enable_backward == enable_backward
                        and k.module.options == (module_options or {}) and k.launch_attributes == attributes
                        and _same_definition(k, func)):
                    return k
            mod = f"{func.__module__}.{name or func.__qualname__}.unique{next(_unique_modules)}"
        k = Kernel(func, key=name, enable_backward=enable_backward, module=get_module(mod) if mod else None)
        k.launch_attributes = dict(attributes)
        same = k.module.kernels.get(k.key)
        if same is not k and same is not None and same.launch_attributes == k.launch_attributes:
            return same  # the same definition as a kernel the module has: that kernel
        if module == "unique":
            _unique_kernels.setdefault(func.__code__, []).append(k)
        if module_options:
            k.module.set_options(module_options)
        return k

    return wrap(f) if f is not None else wrap


_unique_modules = itertools.count()
_unique_kernels: dict[Any, list[Kernel]] = {}  # by code object: the kernels given a module of their own


@dataclass
class LoadedKernel:
    """A kernel ready to launch on one device: its backend's header and launch functions (see
    `backend.Launcher`), argument layout and array effects."""

    kernel: Kernel
    header: Any  # (size, dims) -> the launch header's values
    launch: Any  # (packed block) -> None
    has_backward: bool
    tid_count: int
    reads: frozenset  # positions of array parameters whose values the kernel reads
    writes: frozenset  # positions of array parameters the kernel may write
    null_tested: frozenset = frozenset()  # positions of array parameters it compares with null (wp.unot)
    in_place: ir.InPlace | None = None  # the array parameters it reads and writes (what its adjoint needs)
    filename: str = ""  # the Python file its source lines refer to
    accumulates: frozenset = frozenset()  # positions of array parameters whose old values matter (ir.accumulated)
    plan: Any = None
    zeroable: frozenset = frozenset()  # array parameters whose gradients its adjoint can zero (ir.zeroable_gradients)
    serial_threshold: int | None = None  # the launch size from which it (and its adjoint) use the thread pool
    lanes: int = 0  # lanes of a block that run together (the build's, for a kernel with block values), or 0
    lane_free: bool = False  # it does the same in every lane of a block (codegen.lane_free)


@dataclass
class LoadedModule:
    """A module built and loaded on one device."""

    program: Program
    kernels: dict[str, LoadedKernel]
    sites: list[tuple[str, str, str, int]]
    debug: bool
    path: Any
    version: tuple = field(default=())
    build_adjoint: Any = None  # builds and loads the adjoint program (forward + reverse source)
    adjoints: dict[str, Launcher] | None = None
    adj_program: Program | None = None
    failed: dict[str, KernelError] = field(default_factory=dict)  # kernels the front end rejected, by key
    # a build of only the kernels added since `base` was loaded: `base` keeps running (and differentiating) its own
    base: LoadedModule | None = None
    own: frozenset = frozenset()  # the keys of the kernels this build compiled (its adjoint program's)

    def kernel(self, key: str) -> LoadedKernel:
        """The loaded kernel `key`; a kernel the front end rejected raises its error here, at its own
        launch, so one bad kernel does not take its module's other kernels down."""
        lk = self.kernels.get(key)
        if lk is None:
            raise self.failed[key]
        return lk

    def adjoint(self, key: str) -> Launcher | None:
        """The launcher of kernel `key`'s adjoint (None without a backward pass). Adjoints compile on
        first use: most launches never need them, and they are most of a module's compile time."""
        if not self.kernels[key].has_backward:
            return None
        if self.base is not None and key not in self.own:
            return self.base.adjoint(key)
        if self.adjoints is None:
            self.adj_program = self.build_adjoint()
            self.adjoints = {k: self.adj_program.kernel(f"{lk.kernel.cname}_adj", lk.serial_threshold,
                                                        *((lk.lanes,) if lk.lanes else ()))
                             for k, lk in self.kernels.items() if lk.has_backward and k in self.own}
        return self.adjoints[key]


class _ModuleOptions(dict):
    """A module's own build options; an option it does not set reads as `wp.config`'s value."""

    def __missing__(self, name: str) -> Any:
        if name not in MODULE_OPTIONS:
            raise KeyError(name)
        return getattr(config, name)

    def get(self, name: str, default: Any = None) -> Any:
        return self[name] if name in self or name in MODULE_OPTIONS else default


class Module:
    """All kernels of one Python module, built together into one native library."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.kernels: dict[str, Kernel] = {}
        self.version = 0
        self.options = _ModuleOptions()  # set_module_options: these override wp.config for this module
        self.loaded: dict[tuple, LoadedModule] = {}
        # (device, config.build_generation, version, function generation, loaded, lanes)
        self._last: tuple | None = None
        self._lock = threading.RLock()  # one build at a time: threads that need the module wait for it

    def add_kernel(self, k: Kernel, key: str) -> tuple[str, str]:
        """Register `k` under `key` (made unique in the module); returns the key and the kernel's C++ name.
        The C++ name starts with the kernel's number in the module, so keys that sanitize alike
        (`make.<locals>.k`, `make__locals__k`) and the entries derived from it (`_cpu`, `_adj_cpu`...)
        never clash."""
        base, n = key, 1
        while key in self.kernels:
            same = self.kernels[key]
            if (same.enable_backward == k.enable_backward and not _has_generic_parameters(k.func)
                    and _same_definition(same, k.func)):
                return key, same.cname  # the same definition again: it shares that kernel's build
            key = f"{base}_{n}"
            n += 1
        self.kernels[key] = k
        self.version += 1
        return key, f"k{len(self.kernels)}_{_sanitize(key)}"

    def option(self, name: str) -> Any:
        return self.options[name] if name in self.options else getattr(config, name)

    def set_options(self, options: dict) -> None:
        """Set build options (checked against MODULE_OPTIONS); the next launch rebuilds the module."""
        for name, value in options.items():  # all checked before any is set
            spec = MODULE_OPTIONS.get(name)
            if spec is None:
                raise ValueError(f"unknown module option {name!r}; the options are {', '.join(MODULE_OPTIONS)}")
            if not spec[1](value):
                raise ValueError(f"module option {name!r} takes {spec[0]}, got {value!r}")
        self.options.update(options)
        self.version += 1

    def _holds(self, lm: LoadedModule) -> bool:
        """Whether every kernel `lm` built is still this module's, unchanged (then only new ones need a build)."""
        return all(self.kernels.get(k) is lk.kernel for k, lk in lm.kernels.items()) and all(
            k in self.kernels for k in lm.failed)

    def options_key(self) -> tuple:
        """The options a build depends on: the module's own four first, then the other build settings."""
        return (self.option("mode") == "debug", bool(self.option("fast_math")), bool(self.option("enable_backward")),
                int(self.option("max_unroll")), *(getattr(config, n) for n in _OTHER_BUILD_SETTINGS),
                bool(self.option("cpu_simd")))

    def hash_module(self) -> str:
        """A digest of what a build of this module would compile: the typed IR of its kernels and of the
        functions they call (so the values `wp.static` folded in), and its build options (Warp's
        `Module.hash_module`). Building nothing, it tells whether two definitions would compile alike."""
        options = self.options_key()
        digest = hashlib.sha256(repr(options).encode())
        ctx = BuildContext(options[0], options[3], 0)
        for k in self.kernels.values():
            if k.is_generic:
                continue
            try:
                fn = Builder(Source(k.func), k.key, k.cname, dict(zip(*k.signature(), strict=True)),
                             is_kernel=True, ctx=ctx, closure=k.defined_closure).build()
                digest.update(fn.dump().encode())
            except KernelError as e:
                digest.update(str(e).encode())
        for f in ctx.order:
            digest.update(f.dump().encode())
        return digest.hexdigest()

    def load(self, device: Any, lanes: int = 0) -> LoadedModule:
        """Build (or find in the cache) and load this module for `device`; cached per options. `lanes` > 1:
        the build whose tile kernels run the lanes of each block together (a CPU's wp.config.enable_cpu_blocks
        launch with that block_dim; wp.tile() then makes tiles of `lanes` elements)."""
        last = self._last
        if (last is not None and last[0] is device and last[1] == config.build_generation
                and last[2] == self.version and last[3] == functions.GENERATION[0] and last[5] == lanes):
            return last[4]
        with self._lock:
            generation = config.build_generation
            lm = self._load(device, lanes)
            self._last = (device, generation, self.version, functions.GENERATION[0], lm, lanes)
        return lm

    def _load(self, device: Any, lanes: int = 0) -> LoadedModule:
        version = (self.version, functions.GENERATION[0])
        key = (str(device),) + self.options_key() + ((lanes,) if lanes else ())
        lm = self.loaded.get(key)
        if lm is not None and lm.version == version:
            return lm
        # kernels added since the last build (as in a program that makes kernels as it goes): build those alone
        base = lm if lm is not None and lm.version[1] == version[1] and self._holds(lm) else None
        backend = device.backend
        t0 = time.perf_counter()
        debug, fast_math, _, max_unroll = self.options_key()[:4]
        ctx = BuildContext(debug, max_unroll, lanes)
        if base is not None:
            ctx.sites.extend(base.sites)  # fault sites keep one numbering across the builds
        kernel_irs = []
        kernels = []
        failed: dict[str, KernelError] = {}  # a kernel the front end rejects fails its own launches only
        for k in self.kernels.values():
            if k.is_generic:  # generic kernels build per overload
                continue
            if base is not None and (k.key in base.kernels or k.key in base.failed):
                continue
            try:
                builder = Builder(Source(k.func), k.key, k.cname, dict(zip(*k.signature(), strict=True)),
                                  is_kernel=True, ctx=ctx, closure=k.defined_closure)
                fn = builder.build()
            except KernelError as e:
                failed[k.key] = e
                continue
            if config.print_ir:
                print(fn.dump(), file=sys.stderr)
            kernels.append(k)
            kernel_irs.append(fn)
        if base is not None and not kernels:
            lm = replace(base, version=version, failed={**base.failed, **failed}, base=base, own=frozenset(),
                         adjoints=None, adj_program=None)
            self.loaded[key] = lm
            return lm
        if failed and not kernels:
            raise next(iter(failed.values()))
        # wp.grad(f) calls f's adjoint from forward code: the functions' adjoints then join the forward source
        declared, gradients = registry.gradient_source(ctx.order, list(ctx.gradients.values()), debug,
                                                       ctx.custom) if ctx.gradients else ("", "")
        report = (lambda line: print(line, file=sys.stderr)) if config.reports_builds() else None
        vectorize = simd.vectorizer(report) if self.option("cpu_simd") else None  # CUDA compiles none of it
        source = codegen.module_source(ctx.order, kernel_irs, debug, gradients, declared, vectorize=vectorize,
                                       lanes=lanes)
        if not config.line_directives:
            source = build.without_line_directives(source)
        backward = [fn for k, fn in zip(kernels, kernel_irs, strict=True) if k.backward_enabled]
        if registry.adjoint_source is None:
            backward = []

        def adjoint_source(forward: str = source) -> str:
            adjoints = registry.adjoint_source([] if gradients else ctx.order, backward, debug, ctx.custom, lanes)
            return forward + (adjoints if config.line_directives else build.without_line_directives(adjoints))

        effects = ir.function_effects(ctx.order)
        null_tests: dict[str, frozenset] = {}
        for f in ctx.order:
            null_tests[f.name] = ir.null_tests(f, null_tests)
        if config.print_source:
            print(adjoint_source() if backward else source, file=sys.stderr)
        what = f"module '{self.name}' (kernels: {', '.join(k.key for k in kernels)})"
        name = _sanitize(self.name)[-40:]
        verbose = config.reports_builds()
        options = BuildOptions(debug, fast_math, config.kernel_cache_dir, verbose, config.optimization_level,
                               config.cpu_compiler_flags, config.cache_kernels)
        artifact = backend.compile(source, name, options, what)
        if config.verify_cuda and not lanes:  # the complete source, adjoints included, must compile for the GPU
            ptx = config.cuda_output == "ptx"
            build.build_cuda(adjoint_source() if backward else source, name, config.kernel_cache_dir,
                             (ptx and config.ptx_target_arch) or config.verify_cuda_arch, debug, fast_math, verbose,
                             what, opt_level=config.optimization_level, output=config.cuda_output,
                             arch_suffix=config.cuda_arch_suffix, lineinfo=config.lineinfo,
                             trace=config.compile_time_trace, reuse=config.cache_kernels)
        program = backend.load(artifact)
        loaded = {}
        for k, fn in zip(kernels, kernel_irs, strict=True):
            # a tiled kernel's threads are blocks, each a whole tile computation: they use the thread pool from
            # two blocks on, unless the module sets its own threshold
            serial = self.options.get("cpu_serial_threshold")
            if "cpu_serial_threshold" not in self.options and any(codegen.is_tile_type(v.type) for v in fn.locals):
                serial = TILED_SERIAL_THRESHOLD
            k_lanes = lanes if any(codegen.is_block_value(v.type) for v in fn.locals) else 0
            # (the lanes only when there are: a registered backend's Program.kernel may predate them)
            entry = program.kernel(k.cname, serial, k_lanes) if k_lanes else program.kernel(k.cname, serial)
            reads, writes = ir.array_effects(fn, effects)
            loaded[k.key] = LoadedKernel(k, entry.header, entry.launch, fn in backward, fn.tid_count, reads, writes,
                                         ir.null_tests(fn, null_tests), ir.in_place(fn, effects), fn.filename,
                                         ir.accumulated(fn, effects), zeroable=ir.zeroable_gradients(fn),
                                         serial_threshold=serial, lanes=k_lanes,
                                         lane_free=codegen.lane_free(fn))

        def build_adjoint() -> Program:
            # the adjoint library needs the functions and the kernels' argument records, not their bodies
            base = codegen.module_source(ctx.order, kernel_irs, debug, gradients, declared, kernel_bodies=False,
                                         lanes=lanes)
            base = base if config.line_directives else build.without_line_directives(base)
            src = adjoint_source(base)
            opts = options
            if options.opt_level is None and len(src) > LARGE_ADJOINT_SOURCE:
                # Big fused kernels' adjoints take minutes at -O3 and seconds at -O1, for a modest cost per launch.
                opts = BuildOptions(debug, fast_math, config.kernel_cache_dir, verbose, 1, config.cpu_compiler_flags,
                                    config.cache_kernels)
            return backend.load(backend.compile(src, f"{name}-adj", opts, f"the adjoints of {what}"))

        if base is not None:
            lm = LoadedModule(program, {**base.kernels, **loaded}, ctx.sites, debug, artifact, version, build_adjoint,
                              failed={**base.failed, **failed}, base=base, own=frozenset(loaded))
        else:
            lm = LoadedModule(program, loaded, ctx.sites, debug, artifact, version, build_adjoint, failed=failed,
                              own=frozenset(loaded))
        self.loaded[key] = lm
        if verbose:
            print(f"loomwork: module '{self.name}' ready in {(time.perf_counter() - t0) * 1e3:.1f} ms "
                  f"({artifact.parent.name})", file=sys.stderr)
        return lm


_modules: dict[str, Module] = {}


def get_module(name: Any) -> Module:
    """The Module of a Python module name (or of a Python module object)."""
    if not isinstance(name, str):
        name = getattr(name, "__name__", str(name))
    m = _modules.get(name)
    if m is None:
        m = _modules[name] = Module(name)
    return m


MODULE_OPTIONS = {name: config.SETTINGS[name]
                  for name in ("mode", "fast_math", "enable_backward", "max_unroll", "cpu_serial_threshold",
                               "cpu_simd")}
_OTHER_BUILD_SETTINGS = tuple(sorted(config.BUILD_SETTINGS - set(MODULE_OPTIONS)))


def set_module_options(options: dict, module: Any = None) -> None:
    """Set build options of one module (default: the caller's): "mode" ("release"/"debug"), "fast_math",
    "enable_backward" and "max_unroll", which override wp.config for that module (the next launch rebuilds
    it), "cpu_serial_threshold": the launch size from which the module's kernels use the CPU's thread
    pool (lower it for kernels whose threads each do a lot of work), and "cpu_simd" (False: CPU kernels run
    one thread at a time instead of W threads across SIMD lanes)."""
    if module is None:
        module = inspect.currentframe().f_back.f_globals["__name__"]
    get_module(module).set_options(options)


def get_module_options(module: Any = None) -> dict:
    """The build options in force for a module (its own, completed from wp.config)."""
    if module is None:
        module = inspect.currentframe().f_back.f_globals["__name__"]
    m = get_module(module)
    return {name: m.option(name) for name in MODULE_OPTIONS}


def overload(kernel: Any, arg_types: Any = None) -> Kernel:
    """Instantiate a generic kernel for concrete argument types (a list in order, or a dict by name).
    As a decorator on a body-less function (`...`, `pass` or a docstring) of the kernel's name, the
    function's annotations are the types."""
    if callable(kernel) and not isinstance(kernel, Kernel):
        stub = kernel
        kernels = get_module(stub.__module__).kernels
        found = kernels.get(stub.__qualname__)
        if found is None:  # a kernel given another name (@wp.kernel(name=...)): by its Python function's name
            named = {id(k): k for k in kernels.values() if k.func.__qualname__ == stub.__qualname__ and k.is_generic}
            if len(named) > 1:
                raise KernelTypeError(f"wp.overload: Ambiguous kernel lookup for '{stub.__qualname__}': kernels "
                                      f"{', '.join(sorted(k.key for k in named.values()))} share that function; "
                                      "overload one with wp.overload(kernel, types)")
            found = next(iter(named.values()), None)
        if found is None:
            raise KernelTypeError(f"wp.overload: no kernel named '{stub.__qualname__}' in module {stub.__module__}")
        body = _function_body(stub)
        if body is not None and not all(isinstance(n, ast.Pass) or (isinstance(n, ast.Expr) and isinstance(
                n.value, ast.Constant) and (n.value.value is ... or isinstance(n.value.value, str))) for n in body):
            raise KernelTypeError(f"wp.overload of '{stub.__qualname__}': the overload's body may only be ..., pass "
                                  "or a docstring; the generic kernel's body is the one compiled")
        hints = annotations(stub)
        missing = [n for n in inspect.signature(stub).parameters if n not in hints]
        if missing:
            raise KernelTypeError(f"wp.overload of '{stub.__qualname__}': annotate every parameter (missing: "
                                  f"{', '.join(missing)})")
        if hints.get("return") not in (None, type(None)):
            raise TypeError(f"wp.overload of '{stub.__qualname__}': Return annotations are not allowed on "
                            "@wp.overload stubs")
        found.overload([hints[n] for n in inspect.signature(stub).parameters])
        return found  # the decorated name stays the generic kernel, as in Warp
    if not isinstance(kernel, Kernel):
        raise TypeError(f"wp.overload takes a @wp.kernel, got {type(kernel).__name__}")
    if not kernel.is_generic:
        raise KernelTypeError(f"wp.overload: kernel '{kernel.key}' is not generic; only generic kernels are overloaded")
    if not isinstance(arg_types, list | tuple | dict):
        raise TypeError(f"wp.overload: kernel overload types must be given in a list or a dict, got "
                        f"{type(arg_types).__name__}")
    return kernel.overload(arg_types)


def _function_body(f: Any) -> list | None:
    """The statements of `f`'s body, or None where its source cannot be read."""
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(f)))
    except (OSError, TypeError, SyntaxError):
        return None
    fn = tree.body[0] if tree.body else None
    return fn.body if isinstance(fn, ast.FunctionDef) else None


def load_module(module: Any = None, device: Any = None) -> None:
    """Build a module now instead of at its first launch (default: the caller's module)."""
    from .device import get_device

    if module is None:
        module = inspect.currentframe().f_back.f_globals["__name__"]
    _raise_failed(get_module(module).load(get_device(device)))


def _raise_failed(lm: LoadedModule) -> None:
    """An explicit build reports the first kernel the front end rejected (launches report their own)."""
    if lm.failed:
        raise next(iter(lm.failed.values()))


def force_load(device: Any = None, modules: list | None = None, *, max_workers: int | None = None) -> None:
    """Build every module with kernels now (or just `modules`), on `max_workers` threads (None:
    wp.config.load_module_max_workers; 0: one after the other). Compilers run as subprocesses, so the
    builds of several modules overlap."""
    from .device import get_device

    dev = get_device(device)
    mods = [m if isinstance(m, Module) else get_module(m) for m in (modules or list(_modules.values()))]
    mods = [m for m in mods if m.kernels]
    workers = config.load_module_max_workers if max_workers is None else max_workers
    if workers is None:
        workers = min(os.cpu_count() or 1, 4)
    if workers <= 1 or len(mods) <= 1:
        for m in mods:
            _raise_failed(m.load(dev))
        return
    with ThreadPoolExecutor(max_workers=workers) as pool:
        for done in [pool.submit(m.load, dev) for m in mods]:
            _raise_failed(done.result())  # raises the first build error


__all__ = ["Kernel", "kernel", "load_module", "force_load", "get_module", "set_module_options", "get_module_options",
           "overload"]
