"""Extension points the upper layers fill in when they are imported (the kernel layer never imports them).

`registry.adjoint_source` generates the reverse-mode part of a module's source (set by loomwork.autodiff),
and `registry.local.recorders` lists the tapes recording the calling thread's launches (outermost first):
`wp.launch` reports to each of them (`start_recording` / `stop_recording` maintain it): `before_launch` (it
may refuse the launch by raising) and, once the launch ran, `record_launch`.

A package above the kernel layer (geometry, for one) adds native code from its own files:
- `register_header(path)`: a C++ header its builtins and value types are declared in. Every module
  that uses one of them `#include`s it, and its content (with the other headers of its folder) is
  part of that module's cache key, so editing it rebuilds exactly the modules that use it.
- `register_value_type(...)`: a C++ record type the header declares (codegen never redeclares it),
  with a ctypes layout for Python scope and the fields kernels may read (`q.face`).
- `register_handle_type(cls)`: Python objects a kernel receives as their `uint64` id (`mesh.id`).
- `add_builtin(...)`: builtin overloads, with an explicit adjoint symbol or `differentiable=False`,
  and out / in-out parameters (`Out(...)`, `InOut(...)` from kernels.builtins).
- `export(name, obj)`: a public name, visible as `wp.<name>` and listed in `wp.__all__`.
"""

from __future__ import annotations

import ctypes
import hashlib
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import builtins as B
from . import types as T

_HEADER_SUFFIXES = (".h", ".hpp", ".cuh")


@dataclass(frozen=True)
class NativeHeader:
    """A C++ header of an extension: included by modules that use its builtins or value types."""

    path: Path

    @property
    def folder(self) -> Path:
        return self.path.parent

    def digest(self) -> str:
        """A hash of this header and its folder's other headers (what an `#include` of it may read)."""
        h = hashlib.sha256()
        for f in sorted(p for p in self.folder.iterdir() if p.suffix in _HEADER_SUFFIXES):
            h.update(f.name.encode())
            h.update(f.read_bytes())
        return h.hexdigest()[:20]


class ThreadState(threading.local):
    """What the registry holds for each Python thread."""

    def __init__(self) -> None:
        self.recorders: list[Any] = []


class Registry:
    def __init__(self) -> None:
        self.adjoint_source: Callable[[list, list, bool, dict, int], str] | None = None
        self.gradient_source: Callable[[list, list, bool, dict], tuple[str, str]] | None = None  # wp.grad(f)
        self.local = ThreadState()
        self.recording = 0  # recorders active in all threads: launches look at their thread's list only if any
        self._recording_lock = threading.Lock()
        self.headers: dict[Path, NativeHeader] = {}
        self.handle_types: tuple[type, ...] = ()
        self.exports: dict[str, Any] = {}
        self.export_listeners: list[Callable[[str, Any], None]] = []

    def start_recording(self, recorder: Any) -> None:
        """`recorder.record_launch` is called for each launch the calling thread makes from now on."""
        with self._recording_lock:
            self.local.recorders.append(recorder)
            self.recording += 1

    def stop_recording(self, recorder: Any) -> None:
        """Undo `start_recording` (for the calling thread; nothing if `recorder` is not recording there)."""
        recorders = self.local.recorders
        for i, r in enumerate(recorders):
            if r is recorder:
                with self._recording_lock:
                    del recorders[i]
                    self.recording -= 1
                return

    def include_dirs(self) -> list[Path]:
        """The folders of every registered header (compilers search them for `#include`s)."""
        return sorted({h.folder for h in self.headers.values()})


registry = Registry()


def register_header(path: str | Path) -> NativeHeader:
    """Register a C++ header (by path) that builtins and value types can name as theirs."""
    p = Path(path).resolve()
    if not p.is_file():
        raise FileNotFoundError(f"native header {p} does not exist")
    if p.suffix not in _HEADER_SUFFIXES:
        raise ValueError(f"native header {p}: expected one of {', '.join(_HEADER_SUFFIXES)}")
    return registry.headers.setdefault(p, NativeHeader(p))


def register_value_type(name: str, cname: str, layout: list[tuple[str, Any]], *, header: NativeHeader,
                        readable: tuple[str, ...] = (), iterate: str | None = None) -> type:
    """A record type declared by `header` as C++ `cname`. `layout` lists every member as (name, kernel
    type) in declaration order (it fixes the ctypes layout, which must match the C++ one); kernels may
    read the members named in `readable`. Values of it are locals and function arguments in kernels.
    `iterate` names a builtin `(InOut(this type), Out(int32)) -> bool` that makes `for i in value:` loop
    over what it yields (a query's results), like `while iterate(value, i):`."""
    members = {n: t if isinstance(t, type) and issubclass(t, T.RecordType) else T.normalize_dtype(t)
               for n, t in layout}  # a member may be another value type
    unknown = set(readable) - set(members)
    if unknown:
        raise ValueError(f"value type {name}: readable fields {sorted(unknown)} are not in its layout")
    ctype = type(f"{name}_ctype", (ctypes.Structure,), {
        "_fields_": [(n, t if T.is_composite(t) else t._ctype) for n, t in members.items()]})
    attrs = {"fields": {n: members[n] for n in readable}, "cname": cname, "_ctype": ctype, "header": header,
             "iterate": iterate, "__doc__": f"The native value type {cname} (declared in {header.path.name})."}
    return type(name, (T.RecordType,), attrs)


def register_handle_type(cls: type) -> None:
    """Let instances of `cls` (which have an integer `.id`) be passed where a kernel takes a uint64."""
    if not isinstance(cls, type):
        raise TypeError(f"register_handle_type takes a class, got {cls!r}")
    if cls not in registry.handle_types:
        registry.handle_types += (cls,)


def add_builtin(name: str, params: tuple, ret: Any, native: str, *, header: NativeHeader, group: str, doc: str,
                adjoint: str | None = None, differentiable: bool = True, export: bool = True,
                reads_state: bool = False) -> B.Overload:
    """Add an overload of builtin `name` implemented by C++ function `native` of `header`.

    `params` are patterns from kernels.builtins (`Exact(wp.vec3)`, `Scalar("float")`, `Out(wp.int32)`,
    `InOut(query_type)`, ...); `ret` is a type, a type-variable name or a rule on the bindings (None: the
    call returns nothing). Out and in-out parameters are C++ references the function assigns. A
    differentiable overload names its adjoint, called with the non-array inputs as
    `adjoint(inputs..., adj_inputs&..., adj_ret)`; with out or in-out parameters the inputs are followed by
    the in-out values and `adj_ret` is a record of the adjoints of the return value (field f0, if any) and
    of each output in order (`adj_ret.f1`, ...), so write the adjoint as a template on its type.
    `reads_state=True`: the result depends on differentiable memory a handle argument names (a mesh's
    points), so the adjoint runs even when no argument is differentiable, to send gradients there."""
    if not isinstance(header, NativeHeader):
        raise TypeError(f"builtin {name}: header must come from register_header()")
    special = B.BUILTINS.get(name)
    if special is not None and name in B.SPECIAL_FORMS:
        raise ValueError(f"builtin {name}: the name is a special form of the kernel language")
    ov = B.add(name, tuple(params), ret, native, group=group, doc=doc, differentiable=differentiable,
               adjoint=adjoint, header=header, reads_state=reads_state)
    if export:
        export_name(name, B.BUILTINS[name])
    return ov


def publish_into(namespace: dict) -> None:
    """Keep `namespace` (the loomwork package's) and its `__all__` in step with the exported names."""
    def publish(name: str, obj: Any) -> None:
        namespace[name] = obj
        if name not in namespace["__all__"]:
            namespace["__all__"].append(name)

    registry.export_listeners.append(publish)
    for name, obj in registry.exports.items():
        publish(name, obj)


def export_name(name: str, obj: Any) -> None:
    """Make `obj` the public name `wp.<name>` (now, or as soon as loomwork is imported)."""
    registry.exports[name] = obj
    for listener in registry.export_listeners:
        listener(name, obj)
