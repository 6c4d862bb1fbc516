"""Kernels, user functions and modules: what `@wp.kernel` / `@wp.func` make, and how they are built.

Kernels and functions are captured lazily: decoration only records them in the module of the
Python file that defines them. The first launch (or `wp.load_module`) builds the whole module:
front end for every kernel, one C++ source, one shared library, cached on disk by content hash.
"""

from __future__ import annotations

import inspect
import itertools
import os
import re
import sys
import threading
import time
import typing
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from . import build, callforms, codegen, config, functions, ir  # noqa: F401 (callforms registers the call forms)
from . import types as T
from .annotations import annotations, arg_type
from .backend import BuildOptions, Launcher, Program
from .errors import KernelTypeError
from .extensions import registry
from .frontend import Builder, Source, call_kind
from .functions import Function
from .ir import ArrayType, Const
from .structs import is_struct


def _sanitize(name: str) -> str:
    return re.sub(r"\W", "_", name)


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

    def __init__(self, debug: bool, max_unroll: int = 0) -> None:
        self.debug = debug
        self.max_unroll = max_unroll
        self.instances: dict[tuple, FuncInstance] = {}
        self.order: list[ir.Function] = []
        self.sites: list[tuple[str, str, str, int]] = []
        self.in_progress: set[tuple] = set()
        self.custom: dict[str, tuple] = {}  # function cname -> (custom adjoint IR | None, custom replay IR | None)

    def add_site(self, owner: str, text: str, filename: str, line: int) -> int:
        self.sites.append((owner, text, filename, line))
        return len(self.sites) - 1

    def build_custom(self, fn: Function, cname: str, types: dict, ret: Any) -> tuple:
        """The IR of a function's custom adjoint and/or replay, checked against its signature."""
        grad_ir = replay_ir = None
        if fn.custom_grad is not None:
            names = list(inspect.signature(fn.custom_grad).parameters)
            expect = list(types) + (["adj_ret"] if ret is not None else [])
            if names != expect:
                raise KernelTypeError(f"@wp.func_grad of '{fn.key}' must take ({', '.join(expect)}), "
                                      f"got ({', '.join(names)})")
            grad_types = dict(types)
            if ret is not None:
                grad_types["adj_ret"] = ret
            adjoints = {n: ir.Var(f"adjref_v_{n}", t) for n, t in types.items() if not isinstance(t, ArrayType)}
            grad_ir = Builder(Source(fn.custom_grad), f"{fn.key} (custom gradient)", f"adj_{cname}", grad_types,
                              is_kernel=False, ctx=self, adjoints=adjoints).build()
        if fn.custom_replay is not None:
            names = list(inspect.signature(fn.custom_replay).parameters)
            if names != list(types):
                raise KernelTypeError(f"@wp.func_replay of '{fn.key}' must take ({', '.join(types)}), "
                                      f"got ({', '.join(names)})")
            replay_ir = Builder(Source(fn.custom_replay), f"{fn.key} (custom replay)", f"rep_{cname}", dict(types),
                                is_kernel=False, ctx=self).build()
            if replay_ir.ret != ret:
                raise KernelTypeError(f"@wp.func_replay of '{fn.key}' returns {T.type_name(replay_ir.ret)}, "
                                      f"the function returns {T.type_name(ret)}")
        return grad_ir, replay_ir

    def instantiate(self, fn: Function, args: list, kwargs: dict) -> tuple[FuncInstance | None, str]:
        """The instance of `fn` that takes these arguments, building it on first use."""
        errors = []
        for pyf in reversed(fn.overloads):
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
                if fn.native_snippets is not None:  # wp.func_native: the C++ snippet is the body
                    ret_ann = hints.get("return")
                    inst.ir = ir.Function(cname, tuple(ir.Var(f"v_{n}", t) for n, t in types.items()),
                                          arg_type(ret_ann) if ret_ann is not None else None, (), (), False,
                                          native_code=fn.native_snippets)
                else:
                    inst.ir = Builder(Source(pyf), fn.key, cname, types, is_kernel=False, ctx=self).build()
                if config.print_ir:
                    print(inst.ir.dump(), file=sys.stderr)
                self.in_progress.discard(key)
                self.instances[key] = inst
                self.order.append(inst.ir)
                if fn.custom_grad is not None or fn.custom_replay is not None:
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
        self.enable_backward = (options or {}).get("enable_backward", enable_backward)
        self.__name__ = func.__name__
        self.__qualname__ = func.__qualname__
        self.__doc__ = func.__doc__
        self.module = module or get_module(func.__module__)
        self.key, self.cname = self.module.add_kernel(self, key or func.__qualname__)
        self._signature: tuple[tuple[str, ...], tuple[Any, ...]] | None = None
        self._generic: bool | None = None
        self._overloads: dict[tuple, Kernel] = {}

    @property
    def is_generic(self) -> bool:
        """Whether some parameter is generic (Any, wp.Scalar, wp.Float, wp.Int, array(dtype=Any))."""
        if self._generic is None:
            self._generic = any(T.is_generic(t) for t in self.signature()[1])
        return self._generic

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


def kernel(f: Any = None, *, enable_backward: bool | None = None, module: Any = None,
           module_options: dict | None = None) -> Any:
    """Decorator: make `f` a kernel launched with `wp.launch`. Usable as `@wp.kernel` or `@wp.kernel(...)`.
    `module` names the module to build it in (default: its Python module's); "unique" gives it a module of
    its own, whose build options `module_options` sets (see `set_module_options`)."""

    def wrap(func: Any) -> Kernel:
        name = module
        if module == "unique":
            name = f"{func.__module__}.{func.__qualname__}.unique{next(_unique_modules)}"
        k = Kernel(func, enable_backward=enable_backward, module=get_module(name) if name else None)
        if module_options:
            k.module.set_options(module_options)
        return k

    return wrap(f) if f is not None else wrap


_unique_modules = itertools.count()


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
    plan: Any = None


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

    def adjoint(self, key: str) -> Launcher | None:
        """The launcher of kernel `key`'s adjoint (None without a backward pass). Adjoints compile on
        first use: most launches never need them, and they are most of a module's compile time."""
        if not self.kernels[key].has_backward:
            return None
        if self.adjoints is None:
            self.adj_program = self.build_adjoint()
            self.adjoints = {k: self.adj_program.kernel(f"{lk.kernel.cname}_adj")
                             for k, lk in self.kernels.items() if lk.has_backward}
        return self.adjoints[key]


class Module:
    """All kernels of one Python module, built together into one native library."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.kernels: dict[str, Kernel] = {}
        self.version = 0
        self.options: dict[str, Any] = {}  # set_module_options: these override wp.config for this module
        self.loaded: dict[tuple, LoadedModule] = {}
        self._last: tuple | None = None  # (device, config.build_generation, version, function generation, loaded)
        self._lock = threading.RLock()  # one build at a time: threads that need the module wait for it

    def add_kernel(self, k: Kernel, key: str) -> tuple[str, str]:
        """Register `k` under `key` (made unique in the module); returns the key and the kernel's C++ name.
        The C++ name starts with the kernel's number in the module, so keys that sanitize alike
        (`make.<locals>.k`, `make__locals__k`) and the entries derived from it (`_cpu`, `_adj_cpu`...)
        never clash."""
        base, n = key, 1
        while key in self.kernels:
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

    def options_key(self) -> tuple:
        """The options a build depends on: the module's own four first, then the other build settings."""
        return (self.option("mode") == "debug", bool(self.option("fast_math")), bool(self.option("enable_backward")),
                int(self.option("max_unroll")), *(getattr(config, n) for n in _OTHER_BUILD_SETTINGS))

    def load(self, device: Any) -> LoadedModule:
        """Build (or find in the cache) and load this module for `device`; cached per options."""
        last = self._last
        if (last is not None and last[0] is device and last[1] == config.build_generation
                and last[2] == self.version and last[3] == functions.GENERATION[0]):
            return last[4]
        with self._lock:
            generation = config.build_generation
            lm = self._load(device)
            self._last = (device, generation, self.version, functions.GENERATION[0], lm)
        return lm

    def _load(self, device: Any) -> LoadedModule:
        version = (self.version, functions.GENERATION[0])
        key = (str(device),) + self.options_key()
        lm = self.loaded.get(key)
        if lm is not None and lm.version == version:
            return lm
        backend = device.backend
        t0 = time.perf_counter()
        debug, fast_math, _, max_unroll = self.options_key()[:4]
        ctx = BuildContext(debug, max_unroll)
        kernel_irs = []
        kernels = [k for k in self.kernels.values() if not k.is_generic]  # generic ones build per overload
        for k in kernels:
            k.signature()
            builder = Builder(Source(k.func), k.key, k.cname, dict(zip(*k.signature(), strict=True)),
                              is_kernel=True, ctx=ctx)
            fn = builder.build()
            if config.print_ir:
                print(fn.dump(), file=sys.stderr)
            kernel_irs.append(fn)
        source = codegen.module_source(ctx.order, kernel_irs, debug)
        if not config.line_directives:
            source = build.without_line_directives(source)
        backward = [fn for k, fn in zip(kernels, kernel_irs, strict=True) if k.backward_enabled]
        if registry.adjoint_source is None:
            backward = []

        def adjoint_source() -> str:
            adjoints = registry.adjoint_source(ctx.order, backward, debug, ctx.custom)
            return source + (adjoints if config.line_directives else build.without_line_directives(adjoints))

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
        if config.verify_cuda:  # the complete source, adjoints included, must compile for the GPU
            ptx = config.cuda_output == "ptx"
            build.build_cuda(adjoint_source() if backward else source, name, config.kernel_cache_dir,
                             (ptx and config.ptx_target_arch) or config.verify_cuda_arch, debug, fast_math, verbose,
                             what, opt_level=config.optimization_level, output=config.cuda_output,
                             arch_suffix=config.cuda_arch_suffix, lineinfo=config.lineinfo,
                             trace=config.compile_time_trace, reuse=config.cache_kernels)
        program = backend.load(artifact)
        loaded = {}
        for k, fn in zip(kernels, kernel_irs, strict=True):
            entry = program.kernel(k.cname)
            reads, writes = ir.array_effects(fn, effects)
            loaded[k.key] = LoadedKernel(k, entry.header, entry.launch, fn in backward, fn.tid_count, reads, writes,
                                         ir.null_tests(fn, null_tests), ir.in_place(fn, effects), fn.filename)

        def build_adjoint() -> Program:
            return backend.load(backend.compile(adjoint_source(), f"{name}-adj", options, f"the adjoints of {what}"))

        lm = LoadedModule(program, loaded, ctx.sites, debug, artifact, version, build_adjoint)
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


MODULE_OPTIONS = {name: config.SETTINGS[name] for name in ("mode", "fast_math", "enable_backward", "max_unroll")}
_OTHER_BUILD_SETTINGS = tuple(sorted(config.BUILD_SETTINGS - set(MODULE_OPTIONS)))


def set_module_options(options: dict, module: Any = None) -> None:
    """Set build options of one module (default: the caller's): "mode" ("release"/"debug"), "fast_math",
    "enable_backward" and "max_unroll". They override wp.config for that module; the next launch rebuilds it."""
    if module is None:
        module = inspect.currentframe().f_back.f_globals["__name__"]
    get_module(module).set_options(options)


def get_module_options(module: Any = None) -> dict:
    """The build options in force for a module (its own, completed from wp.config)."""
    if module is None:
        module = inspect.currentframe().f_back.f_globals["__name__"]
    m = get_module(module)
    return {name: m.option(name) for name in MODULE_OPTIONS}


def overload(kernel: Kernel, arg_types: Any) -> Kernel:
    """Instantiate a generic kernel for concrete argument types (a list in order, or a dict by name)."""
    if not isinstance(kernel, Kernel):
        raise TypeError(f"wp.overload takes a @wp.kernel, got {type(kernel).__name__}")
    return kernel.overload(arg_types)


def load_module(module: Any = None, device: Any = None) -> None:
    """Build a module now instead of at its first launch (default: the caller's module)."""
    from .device import get_device

    if module is None:
        module = inspect.currentframe().f_back.f_globals["__name__"]
    get_module(module).load(get_device(device))


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
            m.load(dev)
        return
    with ThreadPoolExecutor(max_workers=workers) as pool:
        for done in [pool.submit(m.load, dev) for m in mods]:
            done.result()  # raises the first build error


__all__ = ["Kernel", "kernel", "load_module", "force_load", "get_module", "set_module_options", "get_module_options",
           "overload"]
