"""The front end: a kernel's or function's Python AST -> typed IR (`ir.Function`).

One handler per AST node type (`_stmt_<Node>` / `_expr_<Node>`); anything without a handler is
rejected with a message naming the construct and a caret under its source span. Names resolve
through locals, then the function's closure, its globals and Python's builtins; Python objects
(modules, types, builtins, user functions) live at compile time as `PyObj` and are never code.
"""

from __future__ import annotations

import ast
import builtins as pybuiltins
import enum
import inspect
import itertools
import linecache
import math
import textwrap
import types as pytypes
import typing
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from . import builtins as B
from . import ir
from . import types as T
from .annotations import annotations, arg_type, closure_values, remembered_source
from .array import MAX_DIMS
from .array import array as array_cls
from .builtin_params import param_names
from .errors import (
    KernelAttributeError,
    KernelError,
    KernelIndexError,
    KernelNameError,
    KernelSyntaxError,
    KernelTypeError,
    KernelValueError,
)
from .functions import DEFINITION_HOOKS, GradWrapper
from .functions import Function as UserFunction
from .ir import ArrayType, Const, Operand, Var
from .structs import is_struct, is_tuple, tuple_type

if TYPE_CHECKING:
    from .functions import Function
    from .module import BuildContext

# A call form handles a call itself: handler(builder, call node, callee) -> the call's value (or None).
CallForm = Callable[["Builder", ast.Call, Any], Any]
CALL_FORMS: dict[Any, CallForm] = {}  # by builtin name, or by the Python object called (len, wp.identity, ...)
CALL_KINDS: list[tuple[Callable[[Any], bool], CallForm]] = []  # (predicate on the callee, handler), in order
# value types with their own indexing: type class -> handler(builder, subscript node, base operand) (tiles)
SUBSCRIPT_KINDS: dict[type, Callable[[Builder, ast.Subscript, Any], Any]] = {}
# value types whose variables alias others (tiles and their views): type class -> hooks
#   assigned(builder, variable, value, in_place): after `var = value` (in_place: `var op= x`)
#   store(builder, subscript target, value or None, augmented op or None): `var[...] = value` / `var[...] op= x`
ASSIGN_HOOKS: dict[type, Callable[[Builder, Var, Any, bool], None]] = {}
STORE_KINDS: dict[type, Callable[[Builder, ast.Subscript, Any, str | None, ast.AST], None]] = {}


def call_form(*keys: Any) -> Callable[[CallForm], CallForm]:
    """Decorator: `handler` builds calls of the builtins named by `keys` (strings) or of the Python objects
    `keys` (anything else)."""
    def register(handler: CallForm) -> CallForm:
        for key in keys:
            CALL_FORMS[key] = handler
        return handler
    return register


def call_kind(predicate: Callable[[Any], bool]) -> Callable[[CallForm], CallForm]:
    """Decorator: `handler` builds calls of every callee for which `predicate` holds (types, Functions...)."""
    def register(handler: CallForm) -> CallForm:
        CALL_KINDS.append((predicate, handler))
        return handler
    return register


def call_form_of(obj: Any) -> CallForm | None:
    """The registered handler for calls of `obj`, if any."""
    key = obj.name if isinstance(obj, B.Builtin) else obj
    try:
        form = CALL_FORMS.get(key)
    except TypeError:  # an unhashable callee
        form = None
    if form is None and not isinstance(obj, B.Builtin):
        form = next((h for pred, h in CALL_KINDS if pred(obj)), None)
    return form

_OPS = {
    ast.Add: "add", ast.Sub: "sub", ast.Mult: "mul", ast.Div: "div", ast.FloorDiv: "floordiv",
    ast.Mod: "mod", ast.Pow: "pow", ast.MatMult: "mul", ast.BitAnd: "bit_and", ast.BitOr: "bit_or",
    ast.BitXor: "bit_xor", ast.LShift: "lshift", ast.RShift: "rshift",
}
_CMP = {ast.Lt: "lt", ast.LtE: "le", ast.Gt: "gt", ast.GtE: "ge", ast.Eq: "eq", ast.NotEq: "ne"}
_PY_FOLD = {
    "add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b,
    "pow": lambda a, b: a**b,
}
# folded only for two integer literals (with Python's unbounded integers, so 1 << 40 is 2**40, not 0)
_PY_INT_FOLD = {
    "lshift": lambda a, b: a << b, "rshift": lambda a, b: a >> b, "bit_and": lambda a, b: a & b,
    "bit_or": lambda a, b: a | b, "bit_xor": lambda a, b: a ^ b,
}
_KERNEL_RETURNS = ("Warp kernels cannot return values. Write results to output arguments, and omit the return "
                   "annotation or use `-> None`.")
_UNSUPPORTED_ADVICE = {  # what to write instead, in the words Warp's own tests expect
    "List": "List constructs are not supported in kernels. Use vectors like `wp.vec3()` for small fixed-size "
            "collections, or `wp.zeros(shape=N, dtype=...)` for stack-allocated arrays.",
    "Dict": "Construct `ast.Dict` not supported in kernels. Use a @wp.struct for named values.",
}
_UNSUPPORTED_HINT = {
    "ListComp": "list comprehensions", "SetComp": "set comprehensions", "DictComp": "dict comprehensions",
    "GeneratorExp": "generator expressions", "Lambda": "lambdas", "Try": "exceptions (try)",
    "TryStar": "exceptions (try)", "Raise": "exceptions (raise)", "With": "with blocks",
    "AsyncFunctionDef": "async functions", "FunctionDef": "nested function definitions",
    "ClassDef": "class definitions", "Global": "global declarations", "Nonlocal": "nonlocal declarations",
    "Import": "imports", "ImportFrom": "imports", "Delete": "del", "List": "lists", "Dict": "dicts",
    "Set": "sets", "Yield": "generators (yield)", "YieldFrom": "generators (yield)", "Await": "await",
    "Starred": "starred expressions", "JoinedStr": "f-strings", "Slice": "slices",
    "NamedExpr": "assignment expressions (:=)", "Assert": "assert", "Match": "match statements",
}


class _Adjoint:
    """`wp.adjoint[x]`: inside a @wp.func_grad function, the adjoint of parameter `x` (accumulate with +=)."""

    def __repr__(self) -> str:
        return "wp.adjoint"

    def __getitem__(self, key: Any) -> Any:
        raise TypeError("wp.adjoint[...] is only meaningful inside a @wp.func_grad function")


adjoint = _Adjoint()


@dataclass(frozen=True)
class PyObj:
    """A Python object known at compile time (a module, type, builtin or function)."""

    value: Any


@dataclass(frozen=True)
class ShapeOf:
    """`array.shape`, waiting for its `[dim]`."""

    array: Operand


@dataclass(frozen=True)
class Place:
    """Where an assignment writes: a local variable (`indices` None) or the array element `root[indices]`,
    and the fields and components `path` leads to within it; `type` is the type of what is written."""

    root: Operand
    indices: tuple[Operand, ...] | None
    site: int
    path: tuple[ir.Part, ...]
    type: Any

    def then(self, part: ir.Part) -> Place:
        """The place one step further in."""
        return Place(self.root, self.indices, self.site, (*self.path, part), part.type)


class Source:
    """A Python function's parsed source and the location data error messages need."""

    def __init__(self, func: Any) -> None:
        self.func = func
        self.file_lines: list[str] | None = None  # the file as at the definition, when it is gone now
        try:
            self.filename = inspect.getsourcefile(func) or "<unknown>"
            lines, first = inspect.getsourcelines(func)
        except (OSError, TypeError):
            kept = remembered_source(func)
            if kept is None:
                raise KernelError(
                    f"cannot read the source of '{func.__qualname__}': kernels and functions are compiled from "
                    "their Python source, so define them in a file (not in `python -c`, exec() or a REPL line)"
                ) from None
            self.filename, self.file_lines = func.__code__.co_filename, kept
            first = func.__code__.co_firstlineno
            lines = inspect.getblock(kept[first - 1:])
        text = "".join(lines)
        dedented = textwrap.dedent(text)
        self.indent = _indent_removed(text, dedented)
        self.first_line = first
        tree = ast.parse(dedented)
        self.node = next(n for n in tree.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef))

    def location(self, node: ast.AST) -> tuple[int, str]:
        line = getattr(node, "lineno", 1) + self.first_line - 1
        if self.file_lines is not None:
            text = self.file_lines[line - 1].rstrip("\n") if 0 < line <= len(self.file_lines) else ""
        else:
            text = linecache.getline(self.filename, line).rstrip("\n")
        col = getattr(node, "col_offset", 0) + self.indent
        end_line = getattr(node, "end_lineno", None)
        end = getattr(node, "end_col_offset", None)
        end_col = end + self.indent if end is not None and end_line == node.lineno else len(text)
        caret = " " * col + "^" * max(1, end_col - col)
        return line, f"    {text}\n    {caret}" if text else ""

    def line(self, node: ast.AST) -> int:
        return getattr(node, "lineno", 1) + self.first_line - 1


_DECLARED_STATICS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def declare_statics(func: Any) -> None:
    """Evaluate `func`'s `wp.static(...)` expressions now, at its definition, as Warp does: the values of the
    globals and closure cells it reads then are the ones built in (a global rebound later, or `wp.static`'s own
    name rebound, changes nothing), and each is evaluated once. Expressions that read the function's own
    variables (a static loop's variable, a local's length) or that fail now are evaluated when it is built.
    Nested statics are part of the outer one's value."""
    code = func.__code__
    names = set(code.co_names) | set(code.co_freevars)
    closure = closure_values(func)
    scope = {**func.__globals__, **closure}
    if not any(n == "static" or _is_static(scope.get(n)) for n in names):
        return  # (the cheap test: a function that never names wp.static or an alias of it)
    try:
        src = Source(func)
    except KernelError:
        return
    local = _assigned_names(src.node.body) | {a.arg for a in ast.walk(src.node.args) if isinstance(a, ast.arg)}
    found: dict[tuple, Any] = {}
    pending = list(reversed(list(ast.iter_child_nodes(src.node))))  # in source order: side effects as written
    while pending:
        node = pending.pop()
        if isinstance(node, ast.Call) and len(node.args) == 1 and not node.keywords and _is_static(
                _lookup(node.func, scope)):
            arg = node.args[0]
            if not {n.id for n in ast.walk(arg) if isinstance(n, ast.Name)} & local:
                try:
                    code_ = compile(ast.Expression(arg), f"<static expression at {src.filename}:{src.line(node)}>",
                                    "eval")
                    found[_node_key(node)] = eval(code_, func.__globals__, closure)  # noqa: S307
                except Exception:  # left to the build, which reports it at its line
                    pass
                continue
        pending.extend(reversed(list(ast.iter_child_nodes(node))))
    if found:
        _DECLARED_STATICS[func] = found


DEFINITION_HOOKS.append(declare_statics)


def _node_key(node: ast.AST) -> tuple:
    """Where a node is in its function's source: the same in every parse of it (a call and the call of its
    result start at one place, so the end counts too)."""
    return node.lineno, node.col_offset, node.end_lineno, node.end_col_offset


def _is_static(obj: Any) -> bool:
    return isinstance(obj, B.Builtin) and obj.name == "static"


def _lookup(node: ast.expr, scope: dict) -> Any:
    """What a name or an attribute chain (`wp.static`) names in `scope`, without calling anything (None)."""
    if isinstance(node, ast.Name):
        return scope.get(node.id)
    if isinstance(node, ast.Attribute):
        base = _lookup(node.value, scope)
        return getattr(base, node.attr, None) if isinstance(base, pytypes.ModuleType) else None
    return None


_ENTRY_TEST_NODES = (ast.Expression, ast.Compare, ast.BoolOp, ast.UnaryOp, ast.BinOp, ast.Constant, ast.Name,
                     ast.Load, ast.cmpop, ast.boolop, ast.unaryop, ast.operator)


def _assigned_names(stmts: list[ast.stmt]) -> set[str]:
    """The names statements (and the blocks inside them) assign."""
    return {n.id for s in stmts for n in ast.walk(s) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}


def _has_slice(node: ast.Subscript) -> bool:
    return any(isinstance(e, ast.Slice) for e in (node.slice.elts if isinstance(node.slice, ast.Tuple)
                                                   else [node.slice]))


def _indent_removed(text: str, dedented: str) -> int:
    for a, b in zip(text.splitlines(), dedented.splitlines(), strict=False):
        if a.strip():
            return len(a) - len(b)
    return 0


class Scope:
    """The state of one function body while it is built: the blocks being filled, named variables and
    temporaries, the return type, and where the builder is (loops, unrolled loops, wp.tid() use)."""

    def __init__(self, arg_types: dict[str, Any], closure: dict, adjoints: dict[str, Var] | None) -> None:
        self.blocks: list[list[ir.Stmt]] = [[]]
        self.params = tuple(Var(f"v_{n}", t) for n, t in arg_types.items())
        self.vars: dict[str, Var] = dict(zip(arg_types, self.params, strict=True))
        self.defined: set[str] = set(arg_types)  # names assigned on every path to the point being built
        self.undefined_why: dict[str, str] = {}  # for a name assigned on some paths only: where the others go
        self.breaks: list[list[set[str]]] = []  # per enclosing loop: `defined` at each of its breaks
        self.continues: list[list[set[str]]] = []  # and at each of its continues
        self.locals: list[Var] = []
        self.ret_type: Any = None
        self.ret_declared = False  # a return annotation fixed ret_type (None: the function returns nothing)
        self.loop_depth = 0
        self.unroll_factor = 1  # product of the iteration counts of the unrolled loops around this point
        self.tid_count = 0
        self.ntemps = 0
        self.closure = closure
        self.adjoints = adjoints  # in a @wp.func_grad, wp.adjoint[x] is the adjoint of parameter x (else None)
        self.static_locals: dict[str, Any] = {}  # loop variables of wp.static-unrolled loops: constants
        self.constants: dict[str, Any] = {}  # locals holding a literal, assigned outside any branch or loop
        self.known: dict[str, Any] = {}  # locals whose literal value is known at this point of the code


class Builder:
    """Builds the typed IR of one kernel, or of one instance of a user function. Statements and
    expressions have one handler per AST node type; calls of special forms go through `CALL_FORMS`."""

    def __init__(self, source: Source, qualname: str, cname: str, arg_types: dict[str, Any],
                 is_kernel: bool, ctx: BuildContext, adjoints: dict[str, Var] | None = None,
                 closure: dict | None = None) -> None:
        self.src = source
        self.qualname = qualname
        self.cname = cname
        self.is_kernel = is_kernel
        self.callee: ast.expr | None = None  # the callee expression of the call being built
        self.ctx = ctx
        self.cur_line = source.first_line
        # `closure`: values the function closed over when it was defined, over those its cells hold now
        self.scope = Scope(arg_types, {**closure_values(source.func), **(closure or {})}, adjoints)
        self.declared_statics = _DECLARED_STATICS.get(source.func, {})
        if not is_kernel:
            self.declare_return()
        elif annotations(source.func).get("return", None) not in (None, type(None)):
            self.error(source.node.returns or source.node, KernelTypeError, f"kernel {source.func.__name__!r} has a "
                       f"return annotation: {_KERNEL_RETURNS}")

    # -- entry ---------------------------------------------------------------------------

    def build(self) -> ir.Function:
        node = self.src.node
        if isinstance(node, ast.AsyncFunctionDef):
            self.error(node, KernelSyntaxError, "async functions are not supported")
        for stmt in node.body:
            self.stmt(stmt)
        rt = self.scope.ret_type
        if rt is not None and not _always_returns(self.scope.blocks[0]):
            self.error(node.body[-1], KernelTypeError, f"this function returns {T.type_name(rt)}, but it can reach "
                       "its end without a return (which would return 0): return a value on every path")
        return ir.Function(
            name=self.cname, params=self.scope.params, ret=self.scope.ret_type, locals=tuple(self.scope.locals),
            body=tuple(self.scope.blocks[0]), is_kernel=self.is_kernel, tid_count=self.scope.tid_count,
            filename=self.src.filename,
        )

    def declare_return(self) -> None:
        """A function's return annotation, when it has one, fixes its return type (`-> None`: no value)."""
        ann = annotations(self.src.func).get("return", _UNSET)
        if ann is _UNSET or ann is Any or T.is_generic(ann):  # a generic return type: inferred from the returns
            return
        self.scope.ret_declared = True
        node = self.src.node.returns or self.src.node
        try:
            if typing.get_origin(ann) is tuple:
                self.scope.ret_type = tuple_type(tuple(arg_type(a) for a in typing.get_args(ann)))
            elif ann is not None and ann is not type(None):
                self.scope.ret_type = arg_type(ann)
        except TypeError as e:
            self.error(node, KernelTypeError, f"return annotation: {e}")

    # -- errors --------------------------------------------------------------------------

    def error(self, node: ast.AST, cls: type[KernelError], msg: str) -> None:
        line, snippet = self.src.location(node)
        kind = "kernel" if self.is_kernel else "function"
        # where first, then what (as Warp and Python's own syntax errors put it): the message ends the text
        text = f"in {kind} '{self.qualname}' at {self.src.filename}:{line}:\n{snippet}\n{msg}"
        raise cls(text)

    # -- emission helpers ------------------------------------------------------------------

    def emit(self, stmt: ir.Stmt) -> None:
        self.scope.blocks[-1].append(stmt)

    def temp(self, t: Any) -> Var:
        self.scope.ntemps += 1
        v = Var(f"t{self.scope.ntemps}", t)
        self.scope.locals.append(v)
        return v

    def assign_temp(self, expr: ir.Expr, t: Any) -> Var:
        v = self.temp(t)
        self.emit(ir.Assign(v, expr, line=self.cur_line))
        return v

    def sub_block(self, stmts: list[ast.stmt]) -> tuple[ir.Stmt, ...]:
        known = dict(self.scope.known)  # each branch or body starts from the values known before it
        self.scope.blocks.append([])
        for s in stmts:
            self.stmt(s)
        self.scope.known = known
        return tuple(self.scope.blocks.pop())

    # -- statements ------------------------------------------------------------------------

    def stmt(self, node: ast.stmt) -> None:
        self.cur_line = self.src.line(node)
        handler = getattr(self, f"_stmt_{type(node).__name__}", None)
        if handler is None:
            self.unsupported(node)
        handler(node)
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)):
            for name in _assigned_names([node]):  # (a plain `x = ...` records what x now holds itself)
                self.scope.known.pop(name, None)

    def unsupported(self, node: ast.AST) -> None:
        if type(node).__name__ in _UNSUPPORTED_ADVICE:
            self.error(node, KernelSyntaxError, _UNSUPPORTED_ADVICE[type(node).__name__])
        what = _UNSUPPORTED_HINT.get(type(node).__name__, f"'{type(node).__name__}'")
        self.error(node, KernelSyntaxError, f"{what} are not supported in kernels" if what[-1] == "s"
                   else f"{what} is not supported in kernels")

    def _stmt_Pass(self, node: ast.Pass) -> None:
        pass

    def _stmt_Expr(self, node: ast.Expr) -> None:
        if isinstance(node.value, ast.Constant) and (isinstance(node.value.value, str) or node.value.value is ...):
            return  # a docstring, or `...` as a body
        value = self.expr(node.value, allow_void=True)
        if isinstance(value, PyObj | ShapeOf):
            self.error(node, KernelSyntaxError, "this expression has no effect")

    def _stmt_Assign(self, node: ast.Assign) -> None:
        if len(node.targets) != 1:
            self.error(node, KernelSyntaxError, "chained assignment (a = b = c) is not supported")
        target = node.targets[0]
        if isinstance(target, ast.Tuple):
            self.assign_tuple(target, node.value)
            return
        r = self.expr(node.value)
        if (isinstance(target, ast.Name) and isinstance(r, PyObj) and callable(r.value)
                and not isinstance(r.value, type)):
            # `f = some_func`: a compile-time binding; calls through f are calls of the function
            if target.id in self.scope.vars:
                self.error(target, KernelTypeError, f"'{target.id}' is a variable; it cannot be rebound to "
                           f"{_describe(r.value)}")
            self.check_rebinding(target, r.value)
            self.scope.static_locals[target.id] = r.value
            return
        if isinstance(target, ast.Name):
            self.check_rebinding(target, None)
        self.assign_to(target, self.checked_value(r, node.value), node)

    def check_rebinding(self, target: ast.Name, new: Any) -> None:
        """`f = some_func` made `f` a compile-time name of that function (kernels have no function pointers):
        it cannot later name another function (`new`), nor a value (`new` None)."""
        old = self.scope.static_locals.get(target.id)
        if not callable(old) or new is old:
            return
        if isinstance(old, GradWrapper):
            self.error(target, KernelTypeError, f"Cannot reassign local '{target.id}': it holds wp.grad("
                       f"{old.key}), a compile-time function, not a value")
        what = "a non-function value" if new is None else _describe(new)
        self.error(target, KernelTypeError, f"'{target.id}' names a function here ({_describe(old)}): rebinding "
                   f"function-valued local '{target.id}' to {what} is not supported (kernels have no function "
                   "pointers)")

    def _stmt_AnnAssign(self, node: ast.AnnAssign) -> None:
        if not isinstance(node.target, ast.Name) or node.value is None:
            self.error(node, KernelSyntaxError, "annotated assignment needs a plain name and a value")
        t = self.annotation_type(node.annotation, node)
        value = self.convert(self.value(node.value), t, node.value)
        self.assign_to(node.target, value, node, declared=t)

    def assign_tuple(self, target: ast.Tuple, value_node: ast.expr) -> None:
        names = target.elts
        if isinstance(value_node, ast.Call) and self.is_special(value_node.func, "tid"):
            if value_node.args or value_node.keywords:
                self.error(value_node, KernelTypeError, "wp.tid() takes no arguments")
            if not self.is_kernel:
                self.error(value_node, KernelSyntaxError, "wp.tid() can only be used in kernels")
            if not 1 <= len(names) <= 4:
                self.error(target, KernelTypeError, "wp.tid() unpacks into 1 to 4 indices")
            self.check_tid_count(len(names), value_node)
            for d, name in enumerate(names):
                self.assign_to(name, self.assign_temp(ir.Tid(d, len(names)), T.int32), value_node)
            return
        if isinstance(value_node, ast.Tuple):
            if len(value_node.elts) != len(names):
                self.error(value_node, KernelTypeError,
                           f"cannot unpack {len(value_node.elts)} values into {len(names)} names")
            values = [self.materialize(self.value(v)) for v in value_node.elts]
            copies = [self.assign_temp(ir.Copy(v), v.type) for v in values]
            for name, v in zip(names, copies, strict=True):
                self.assign_to(name, v, value_node)
            return
        value = self.value(value_node)
        if is_tuple(value.type):
            fields = value.type.fields
            if len(fields) != len(names):
                self.error(value_node, KernelTypeError, f"cannot unpack {len(fields)} values into {len(names)} names")
            for (fname, ft), name in zip(fields.items(), names, strict=True):
                self.assign_to(name, self.assign_temp(ir.Field(value, fname), ft), value_node)
            return
        if T.is_vector(value.type) and value.type._length_ == len(names):
            for i, name in enumerate(names):
                self.assign_to(name, self.assign_temp(ir.Extract(value, (Const(i, T.int32),)),
                                                      value.type._wp_scalar_type_), value_node)
            return
        self.error(value_node, KernelSyntaxError, "tuple assignment needs wp.tid(), a tuple, a vector or a call "
                   "returning several values on the right")

    def check_tid_count(self, n: int, node: ast.AST) -> None:
        if self.scope.tid_count and self.scope.tid_count != n and n > 1 and self.scope.tid_count > 1:
            self.error(node, KernelTypeError,
                       f"wp.tid() unpacked into {n} indices here but {self.scope.tid_count} before")
        self.scope.tid_count = max(self.scope.tid_count, n)

    def assign_to(self, target: ast.expr, value: Operand, node: ast.AST, declared: Any = None) -> None:
        if isinstance(target, ast.Name):
            self.check_rebinding(target, None)
            name = target.id
            existing = self.scope.vars.get(name)
            if (existing is not None and isinstance(existing.type, ArrayType) and isinstance(value.type, ArrayType)
                    and (existing.type.ndim, existing.type.strided) != (value.type.ndim, value.type.strided)
                    and len(self.scope.blocks) == 1 and declared is None):
                # straight-line code rebinds an array name to an array of another shape (as Warp, whose arrays of
                # one dtype share a type): from here on the name is a new variable
                value = self.materialize(value)
                var = Var(f"v_{name}__r{len(self.scope.locals)}", value.type)
                self.scope.locals.append(var)
                self.scope.vars[name] = var
            elif existing is None:
                value = self.materialize(value)
                var = Var(f"v_{name}", declared or value.type)
                if var in self.scope.locals:  # a name reused after a scope: same C++ variable
                    pass
                else:
                    self.scope.locals.append(var)
                self.scope.vars[name] = var
            else:
                var = existing
                if (isinstance(var.type, ArrayType) and isinstance(value.type, ArrayType)
                        and value.type.strided and not var.type.strided):
                    self.error(node, KernelTypeError,
                               f"variable '{name}' holds an array with unit inner stride; a strided slice cannot be "
                               f"assigned to it (its accesses are compiled for the first kind): give the slice a "
                               f"new name")
                value = self.convert(value, var.type, target, what=f"variable '{name}'")
            self.emit(ir.Assign(var, ir.Copy(value), line=self.cur_line))
            hook = ASSIGN_HOOKS.get(type(var.type))
            if hook is not None:
                hook(self, var, value, getattr(self, "in_place", False))
            self.scope.defined.add(name)
            if isinstance(value, Const) and len(self.scope.blocks) == 1 and T.is_scalar(value.type):
                self.scope.constants[name] = value.value  # wp.static() may read it (as Warp's constant locals)
            else:
                self.scope.constants.pop(name, None)
            if isinstance(value, Const) and T.is_scalar(value.type):
                self.scope.known[name] = value.value
            else:
                self.scope.known.pop(name, None)
            return
        kind = self.subscript_root_kind(target)
        if kind is not None:
            STORE_KINDS[kind](self, target, value, None, node)
            return
        if isinstance(target, ast.Subscript) and _has_slice(target):
            self.assign_slice(target, value)
            return
        if isinstance(target, ast.Attribute) and target.attr in _TRANSFORM_PARTS:
            base = self.place_or_object(target.value)
            if isinstance(base, Place) and T.is_transform(base.type):
                self.store_transform_part(base, target.attr, value, target)
                return
            if isinstance(base, Place):
                self.store(self.field_place(base, target), value, target)
                return
        self.store(self.place(target), value, target)

    def subscript_root_kind(self, target: ast.expr) -> type | None:
        """For `x[...]` (or `x[...][...]`) whose variable x has a type with its own stores, that type's class."""
        root = target
        while isinstance(root, ast.Subscript):
            root = root.value
        if root is target or not isinstance(root, ast.Name):
            return None
        var = self.scope.vars.get(root.id)
        return type(var.type) if var is not None and type(var.type) in STORE_KINDS else None

    def store_transform_part(self, base: Place, attr: str, value: Operand, node: ast.AST,
                             atomic_op: str | None = None) -> None:
        """`t.p = v` / `t.q = r` on a transform variable or array element: its translation (components 0-2) or
        rotation (3-6), component by component; `atomic_op` ("add"/"sub") updates an array element's part
        atomically (`a[i].p += v`), as Warp does for parts of array elements."""
        t = base.type
        first, n = _TRANSFORM_PARTS[attr]
        st = t._wp_scalar_type_
        want = T.vector(3, st) if attr == "p" else T.quaternion(st)
        value = self.convert(self.materialize(value), want, node, what=f"transform.{attr}")
        for k in range(n):
            comp = self.assign_temp(ir.Extract(value, (Const(k, T.int32),)), st)
            part = ir.Part(t, indices=(Const(first + k, T.int32),), site=self.site(node, base.root))
            if atomic_op is not None:
                self.emit(ir.Atomic(atomic_op, base.root, base.indices, comp, None, base.site,
                                    path=(*base.path, part), line=self.cur_line))
            else:
                self.store(base.then(part), comp, node)

    def assign_slice(self, target: ast.Subscript, value: Operand) -> None:
        """`v[1:3] = w`, `m[0, :2] = w`, `m[:2] = rows`: component by component; `value` has the slice's shape
        (or is a scalar, given to every component)."""
        base = self.place(target.value)
        t = base.type
        if not T.is_composite(t):
            self.error(target, KernelSyntaxError, f"slices are assigned only in vectors and matrices, not in a "
                       f"{T.type_name(t)}")
        picks, kept = self.slice_picks(t, target)
        combos = list(itertools.product(*picks))
        value = self.materialize(value)
        vt = value.type
        self.check_slice_value(target, t, kept, value)
        if T.is_composite(vt):
            cols = vt._shape_[-1]
            parts = [self.assign_temp(ir.Extract(value, (Const(k // cols, T.int32), Const(k % cols, T.int32))
                                                 if T.is_matrix(vt) else (Const(k, T.int32),)), vt._wp_scalar_type_)
                     for k in range(len(combos))]
        else:
            parts = [value] * len(combos)
        for combo, part in zip(combos, parts, strict=True):
            self.store(base.then(ir.Part(t, indices=combo, site=self.site(target, base.root))), part, target)

    def check_slice_value(self, target: ast.Subscript, t: Any, kept: list[int], value: Operand) -> None:
        """A value for a slice of `t` with extents `kept`: a vector or matrix of that shape and of `t`'s scalar
        type, or a scalar of that type or a literal (given to every component); else a ValueError in our words,
        then Warp's."""
        st, shape, vt = t._wp_scalar_type_, tuple(kept), value.type
        if isinstance(value, Const) and value.weak and T.is_scalar(vt):
            return
        kind = "vector" if len(kept) == 1 else "matrix"
        size = f"length {kept[0]}" if len(kept) == 1 else f"shape {shape}"
        same_kind = T.is_vector(vt) if len(kept) == 1 else T.is_matrix(vt)
        if vt == st or (same_kind and tuple(vt._shape_) == shape and vt._wp_scalar_type_ == st):
            return
        if not same_kind:
            warp = f"The provided value is expected to be a {kind} of {size}, with dtype {st.__name__}."
        elif vt._wp_scalar_type_ != st:
            warp = f"The provided {kind} is expected to be of {size} with dtype {st.__name__}."
        elif len(kept) == 1:
            warp = f"The length of the provided vector ({vt._length_}) isn't compatible with the given slice " \
                   f"(expected {kept[0]})."
        else:
            warp = f"The shape of the provided matrix ({tuple(vt._shape_)}) isn't compatible with the given slice " \
                   f"(expected {shape})."
        self.error(target, KernelValueError, f"this slice of {T.type_name(t)} has shape {shape}; the value is a "
                   f"{T.type_name(vt)}: {warp}")

    def slice_picks(self, t: Any, node: ast.Subscript) -> tuple[list, list[int]]:
        """For each dimension of vector or matrix type `t`, the indices `node`'s subscript picks (constant
        slices, or one index), and the extents of the sliced dimensions."""
        st = t._wp_scalar_type_
        elts = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        if len(elts) > len(t._shape_):
            self.error(node, KernelIndexError, f"{len(elts)} indices for {T.type_name(t)}")
        picks: list = []
        kept: list[int] = []
        for e, n in zip(elts, t._shape_, strict=False):
            if isinstance(e, ast.Slice):
                bounds = [None if x is None else self.eval_static(x, "a slice bound")
                          for x in (e.lower, e.upper, e.step)]
                if any(b is not None and not isinstance(b, int) for b in bounds) or bounds[2] == 0:
                    self.error(e, KernelIndexError, "slice bounds in kernels must be constant integers (step not 0)")
                picks.append([Const(i, T.int32) for i in range(n)[slice(*bounds)]])
                kept.append(len(picks[-1]))
            else:
                (idx,) = self.component_indices(T.vector(n, st), self.indices(e), node)
                picks.append([idx])
        for n in t._shape_[len(elts):]:
            picks.append([Const(i, T.int32) for i in range(n)])
            kept.append(n)
        if 0 in kept:  # an empty slice: a zero-length vector, or a matrix empty in every dimension
            kept = [0] * len(kept)
        return picks, kept

    # -- places: where an assignment to a subscript or attribute writes ---------------------------

    def place(self, node: ast.expr) -> Place:
        """The place an assignment target names: a local variable or an array element, and the fields and
        components within it. A part of anything else (a call's result, an expression) is not a place."""
        found = self.place_or_object(node)
        if not isinstance(found, Place):
            self.not_a_place(node, found)
        return found

    def place_or_object(self, node: ast.expr) -> Place | Any:
        """`place()`, or the compile-time object (module, constant...) `node` names instead."""
        if isinstance(node, ast.Name):
            var = self.scope.vars.get(node.id) if node.id not in self.scope.static_locals else None
            if var is None:
                return self.expr(node)
            self.check_defined(node)
            return Place(var, None, 0, (), var.type)
        if not isinstance(node, ast.Attribute | ast.Subscript):
            self.not_a_place(node, None)
        base = self.place_or_object(node.value)
        if isinstance(node, ast.Attribute):
            if not isinstance(base, Place):
                return self.expr(node)  # an attribute of a module or class
            return self.field_place(base, node)
        if isinstance(base, PyObj) and base.value is adjoint:
            return self.adjoint_place(node)
        if not isinstance(base, Place):
            self.not_a_place(node, base)
        return self.index_place(base, node)

    def not_a_place(self, node: ast.expr, found: Any) -> None:
        if isinstance(found, PyObj | Const):
            self.error(node, KernelSyntaxError, f"cannot assign into {_describe(getattr(found, 'value', found))}: "
                       "only local variables, their components and array elements can be assigned")
        self.error(node, KernelSyntaxError, "cannot assign into a part of a temporary value (the result of a call "
                   "or an expression): assign the value to a variable first, e.g. v = ...; v[2] = x")

    def field_place(self, base: Place, node: ast.Attribute) -> Place:
        t = base.type
        if T.is_record(t):
            if node.attr not in t.fields:
                kind = "struct" if is_struct(t) else "value type"
                self.error(node, KernelAttributeError, f"{kind} {t.__name__} has no field '{node.attr}'")
            return base.then(ir.Part(t, name=node.attr))
        if T.is_vector(t):
            idx = _SWIZZLE.get(node.attr)
            if idx is None or idx >= t._length_:
                self.error(node, KernelAttributeError, f"{T.type_name(t)} has no component '{node.attr}'")
            return base.then(ir.Part(t, indices=(Const(idx, T.int32),)))
        self.error(node, KernelSyntaxError, f"cannot assign to attribute '{node.attr}' of a {T.type_name(t)}")

    def index_place(self, base: Place, node: ast.Subscript) -> Place:
        t = base.type
        if isinstance(t, ArrayType):
            arr = self.place_value(base)
            if _has_slice(node):  # a[i:j][k] = v: an element of the slice
                view = self.array_slice(arr, node)
                return Place(view, None, 0, (), view.type)
            indices = self.indices(node.slice)
            if len(indices) > t.ndim:
                self.error(node, KernelIndexError, f"{len(indices)} indices for a {t.ndim}-D array")
            for i in indices:
                if isinstance(i, Const) and i.value < 0:
                    self.error(node.slice, KernelIndexError, "negative array indices are not supported in kernels")
            if len(indices) < t.ndim:  # a[i][j] on a 2-D array: the view a[i], then its element j
                view = self.assign_temp(ir.View(arr, indices, self.site(node, arr)),
                                        ArrayType(t.dtype, t.ndim - len(indices), indexed=t.indexed,
                                                  strided=t.strided))
                return Place(view, None, 0, (), view.type)
            return Place(arr, indices, self.site(node, arr), (), t.dtype)
        if T.is_composite(t):
            indices = self.component_indices(t, self.indices(node.slice), node)
            last = base.path[-1] if base.path else None
            if last is not None and T.is_matrix(last.of) and len(last.indices) == 1 and len(indices) == 1:
                # m[i][j]: one element of the matrix rather than a component of its row
                merged = ir.Part(last.of, indices=(*last.indices, *indices), site=self.site(node, base.root))
                return Place(base.root, base.indices, base.site, base.path[:-1] + (merged,), merged.type)
            return base.then(ir.Part(t, indices=indices, site=self.site(node, base.root)))
        self.error(node.value, KernelTypeError, f"a {T.type_name(t)} cannot be assigned by index")

    def place_value(self, p: Place) -> Operand:
        """The current value at place `p`."""
        v = p.root
        if p.indices is not None:
            v = self.assign_temp(ir.Load(p.root, p.indices, p.site), p.root.type.dtype)
        for part in p.path:
            expr = ir.Field(v, part.name) if part.name is not None else ir.Extract(v, part.indices, part.site)
            v = self.assign_temp(expr, part.type)
        return v

    def store(self, p: Place, value: Operand, node: ast.AST) -> None:
        """Write `value` at place `p`: an array element or a part of one is stored in memory; a part of a
        local is set in place, through copies of the enclosing parts when it is nested (`s.pos.x = v`)."""
        what = "array element" if p.indices is not None and not p.path else "value"
        value = self.convert(value, p.type, node, what=what)
        if p.indices is not None:
            self.emit(ir.Store(p.root, p.indices, value, p.site, p.path, line=self.cur_line))
            return
        if not p.path:  # wp.adjoint[x]
            self.emit(ir.Assign(p.root, ir.Copy(value), line=self.cur_line))
            return
        containers = [p.root]
        for part in p.path[:-1]:
            expr = ir.Field(containers[-1], part.name) if part.name is not None else ir.Extract(
                containers[-1], part.indices, part.site)
            containers.append(self.assign_temp(expr, part.type))
        for var, part in zip(reversed(containers), reversed(p.path), strict=True):
            if part.name is not None:
                self.emit(ir.SetField(var, part.name, value, line=self.cur_line))
            else:
                self.emit(ir.SetComponent(var, part.indices, value, part.site, line=self.cur_line))
            value = var

    def _stmt_AugAssign(self, node: ast.AugAssign) -> None:
        op = _OPS.get(type(node.op))
        if op is None:
            self.unsupported(node.op)
        target = node.target
        if isinstance(target, ast.Name):
            self.check_rebinding(target, None)
            current = self.value(target)
            self.in_place = True
            try:
                self.assign_to(target, self.binop(op, current, self.value(node.value), node), node)
            finally:
                self.in_place = False
            return
        kind = self.subscript_root_kind(target)
        if kind is not None:
            STORE_KINDS[kind](self, target, self.value(node.value), op, node)
            return
        if isinstance(target, ast.Subscript) and _has_slice(target):  # v[1:3] += w
            self.assign_slice(target, self.binop(op, self.value(target), self.value(node.value), node))
            return
        if isinstance(target, ast.Attribute) and target.attr in _TRANSFORM_PARTS:
            base = self.place_or_object(target.value)
            if isinstance(base, Place) and T.is_transform(base.type):
                if base.indices is not None and op in ("add", "sub"):
                    self.store_transform_part(base, target.attr, self.value(node.value), node, atomic_op=op)
                    return
                getter = "transform_get_translation" if target.attr == "p" else "transform_get_rotation"
                current = self.call_builtin(getter, [self.place_value(base)], node)
                self.store_transform_part(base, target.attr, self.binop(op, current, self.value(node.value), node),
                                          node)
                return
            p = self.field_place(base, target) if isinstance(base, Place) else self.place(target)
        else:
            p = self.place(target)
        rhs = self.value(node.value)
        if p.indices is not None and op in ("add", "sub") and (not p.path or T.is_composite(p.type) or (
                T.is_scalar(p.type) and p.type is not T.bool_)) and self.operator_instance(
                op, [ir.Var("slot", p.type), rhs]) is None:
            # a[i] += v, a[i].y -= v: an atomic update of the element or of its part, as in Warp (unless a
            # @wp.func overloads the operator for these types: then a read, the call and a store)
            value = self.convert(rhs, p.type, node.value, what="array element")
            self.emit(ir.Atomic(op, p.root, p.indices, value, None, p.site, path=p.path, line=self.cur_line))
            return
        if p.indices is not None and op in _ATOMIC_BITS and (T.is_scalar(p.type) or T.is_vector(p.type) or T.is_matrix(
                p.type)) and T.elem_scalar(p.type) in (T.int32, T.uint32, T.int64, T.uint64):
            # a[i] &= v, a[i] |= v, a[i] ^= v on 32/64-bit integers: atomic too, as in Warp
            value = self.convert(rhs, p.type, node.value, what="array element")
            self.emit(ir.Atomic(_ATOMIC_BITS[op], p.root, p.indices, value, None, p.site, path=p.path,
                                line=self.cur_line))
            return
        result = self.binop(op, self.place_value(p), rhs, node)
        self.store(p, result, target)

    def _stmt_If(self, node: ast.If) -> None:
        cond = self.condition(node.test)
        if isinstance(cond, Const):  # a compile-time condition (e.g. wp.static): only the taken branch exists
            for s in node.body if cond.value else node.orelse:
                self.stmt(s)
            return
        before = self.scope.defined
        reaching = []  # the names defined at the end of each branch that carries on after the if
        blocks = []
        for branch in (node.body, node.orelse):
            self.scope.defined = set(before)
            blocks.append(self.sub_block(branch))
            if not _leaves(branch):
                reaching.append(self.scope.defined)
        self.merge_paths(reaching, before, "it is assigned only in some branches of an if above; assign it on "
                         "every path (or before the if)")
        self.emit(ir.If(cond, *blocks, line=self.src.line(node)))

    def merge_paths(self, paths: list[set[str]], unreachable: set[str], why: str, seen: tuple = ()) -> None:
        """`defined` where control paths join: the names every path assigned (`unreachable` when no path gets
        there). A name some paths (or the `seen` states on the way) assigned and others did not gets `why`
        for the error reading it raises."""
        self.scope.defined = set.intersection(*paths) if paths else unreachable
        for name in set().union(*paths, *seen) - self.scope.defined:
            self.scope.undefined_why[name] = why

    def loop_body(self, stmts: list[ast.stmt], runs_once: bool, exits_normally: bool = True) -> tuple[ir.Stmt, ...]:
        """A loop body; afterwards `defined` holds the names assigned on every way out of the loop: each
        break, and the end of an iteration (the last one's end, or a continue) when the loop surely runs at
        least once, or else the state before the loop (it may run zero times). So a name first assigned in
        the loop can be read after it only when every way out assigned it, as in Python; Warp reads an
        uninitialized value when a loop ran zero times."""
        before = set(self.scope.defined)
        self.scope.breaks.append([])
        self.scope.continues.append([])
        self.scope.loop_depth += 1
        for name in _assigned_names(stmts):  # from the second iteration on they hold other values
            self.scope.known.pop(name, None)
        body = self.sub_block(stmts)
        self.scope.loop_depth -= 1
        exits = self.scope.breaks.pop()
        ends = self.scope.continues.pop() + ([] if _leaves(stmts) else [self.scope.defined])
        if exits_normally:
            if not runs_once:
                exits.append(before)
            elif ends:
                exits.append(set.intersection(*ends))
        self.merge_paths(exits, before, "it is assigned only inside a loop above, which may run zero times or "
                         "leave it before the assignment (Warp would read an uninitialized value); assign it "
                         "before the loop too", seen=(*ends, self.scope.defined))
        return body

    def _stmt_For(self, node: ast.For) -> None:
        if node.orelse:
            self.error(node, KernelSyntaxError, "for ... else is not supported in kernels")
        it = node.iter
        if isinstance(it, ast.Call) and self.is_special(it.func, "static"):
            self.unrolled_for(node, self.static_value(it))
            return
        backwards = self.calls(it, reversed)
        if backwards:
            if it.keywords or len(it.args) != 1 or not self.calls(it.args[0], range):
                self.error(it, KernelSyntaxError, "kernels loop over reversed(range(...)) only")
            it = it.args[0]
        if not self.calls(it, range):
            self.iterator_for(node)
            return
        if not isinstance(node.target, ast.Name):
            self.error(node.target, KernelSyntaxError, "the loop variable must be a plain name")
        if it.keywords or not 1 <= len(it.args) <= 3:
            self.error(it, KernelTypeError, "range() takes 1 to 3 positional arguments")
        args = [self.value(a) for a in it.args]
        # a constant bool (wp.static(True)) counts as the integer it is in Python
        args = [Const(int(a.value), T.int32, weak=True) if isinstance(a, Const) and a.type is T.bool_ else a
                for a in args]
        for a, n in zip(args, it.args, strict=True):
            if not T.is_int(a.type):
                self.error(n, KernelTypeError, f"range() takes integers, got {T.type_name(a.type)}")
        t = T.int64 if any(a.type in (T.int64, T.uint64) and not getattr(a, "weak", False) for a in args) else T.int32
        args = [self.convert(a, t, n) for a, n in zip(args, it.args, strict=True)]
        if len(args) == 1:
            start, stop, step = Const(0, t), args[0], Const(1, t)
        elif len(args) == 2:
            start, stop, step = args[0], args[1], Const(1, t)
        else:
            start, stop, step = args
        if isinstance(step, Const) and step.value == 0:
            self.error(it.args[2], KernelTypeError, "range() step must not be zero")
        if backwards:
            start, stop, step = self.reversed_range(start, stop, step, it)
        name = node.target.id
        if all(isinstance(a, Const) for a in (start, stop, step)) and self.unrollable(node):
            values = range(start.value, stop.value, step.value)
            # a body whose wp.static() reads the loop variable needs its values: unrolled whatever max_unroll says
            if 0 < len(values) and (len(values) * self.scope.unroll_factor <= self.ctx.max_unroll
                                    or self.static_reads(node.body, name)):
                self.scope.unroll_factor *= len(values)
                self.unrolled_for(node, [t(v) for v in values])  # typed like the loop variable would be
                self.scope.unroll_factor //= len(values)
                self.assign_to(node.target, Const(values[-1], t), node)  # Python leaves i at its last value
                return
        var = self.scope.vars.get(name)
        if var is None:
            var = Var(f"v_{name}", t)
            self.scope.vars[name] = var
            self.scope.locals.append(var)
        elif var.type != t:
            self.error(node.target, KernelTypeError, f"loop variable '{name}' was {T.type_name(var.type)} before")
        self.scope.defined.add(name)
        runs_once = all(isinstance(a, Const) for a in (start, stop, step)) and \
            len(range(start.value, stop.value, step.value)) > 0
        body = self.loop_body(node.body, runs_once)
        self.emit(ir.For(var, start, stop, step, body, line=self.src.line(node)))

    def static_reads(self, body: list[ast.stmt], name: str) -> bool:
        """Whether a wp.static() expression in `body` reads the variable `name`."""
        return any(isinstance(n, ast.Call) and self.is_special(n.func, "static")
                   and any(isinstance(m, ast.Name) and m.id == name for a in n.args for m in ast.walk(a))
                   for stmt in body for n in ast.walk(stmt))

    def calls(self, node: ast.expr, fn: Any) -> bool:
        """Whether `node` is a call of the Python object `fn` (range, reversed...)."""
        if not isinstance(node, ast.Call):
            return False
        f = self.expr_or_none(node.func)
        return isinstance(f, PyObj) and f.value is fn

    def reversed_range(self, start: Operand, stop: Operand, step: Operand, node: ast.Call) -> tuple:
        """The (start, stop, step) of reversed(range(start, stop, step)): its n values backwards,
        n = max((stop - start + step - sign(step)) // step, 0)."""
        t = step.type
        if isinstance(step, Const):
            toward = Const(step.value - (1 if step.value > 0 else -1), t)
        else:
            toward = self.call_builtin("sub", [step, self.call_builtin("sign", [step], node)], node)
        n = self.call_builtin("floordiv", [self.call_builtin("add", [self.call_builtin("sub", [stop, start], node),
                                                                    toward], node), step], node)
        n = self.call_builtin("max", [n, Const(0, t)], node)
        last = self.call_builtin("add", [start, self.call_builtin("mul", [self.call_builtin(
            "sub", [n, Const(1, t)], node), step], node)], node)
        back = Const(-step.value, t) if isinstance(step, Const) else self.call_builtin("neg", [step], node)
        return last, self.call_builtin("sub", [start, step], node), back

    def iterator_for(self, node: ast.For) -> None:
        """`for i in query:` over a value whose type names an `iterate` builtin: the loop
        `while iterate(query_copy, i): ...` (the query is copied, so the loop leaves it as it was)."""
        value = self.expr(node.iter)
        step = getattr(getattr(value, "type", None), "iterate", None)
        if not isinstance(value, Operand) or step is None:
            self.error(node.iter, KernelSyntaxError, "kernels loop only over range(...), wp.static(...) or a "
                       "geometry query value")
        if not isinstance(node.target, ast.Name):
            self.error(node.target, KernelSyntaxError, "the loop variable must be a plain name")
        query = self.temp(value.type)
        self.emit(ir.Assign(query, ir.Copy(value), line=self.cur_line))
        hidden = f"<iter {len(self.scope.locals)}>"  # not a Python identifier: no clash with the kernel's names
        self.scope.vars[hidden] = query
        self.scope.defined.add(hidden)
        self.scope.static_locals[hidden + "_next"] = B.BUILTINS[step]
        test = ast.Call(func=ast.Name(hidden + "_next", ast.Load()), keywords=[],
                        args=[ast.Name(hidden, ast.Load()), ast.Name(node.target.id, ast.Store())])
        loop = ast.While(test=test, body=node.body, orelse=[])
        for n in (test, test.func, *test.args, loop):
            ast.copy_location(n, node)
        self._stmt_While(loop)
        del self.scope.static_locals[hidden + "_next"]

    @staticmethod
    def unrollable(node: ast.For) -> bool:
        """A loop whose body neither jumps out (break/continue) nor assigns its own loop variable."""
        target = node.target.id
        for n in ast.walk(ast.Module(body=node.body, type_ignores=[])):
            if isinstance(n, ast.Break | ast.Continue) or (
                    isinstance(n, ast.Name) and n.id == target and isinstance(n.ctx, ast.Store)):
                return False
        return True

    def unrolled_for(self, node: ast.For, values: Any) -> None:
        """`for i in wp.static(iterable)`: the body once per value, with i a constant each time."""
        if not isinstance(node.target, ast.Name):
            self.error(node.target, KernelSyntaxError, "the loop variable must be a plain name")
        try:
            values = list(values)
        except TypeError:
            self.error(node.iter, KernelTypeError, "wp.static() in a for loop must give an iterable")
        if any(isinstance(s, ast.Break | ast.Continue) for s in ast.walk(ast.Module(body=node.body, type_ignores=[]))):
            self.error(node, KernelSyntaxError, "break and continue are not supported in loops unrolled by wp.static")
        name = node.target.id
        saved = self.scope.static_locals.get(name, _UNSET)
        for v in values:
            self.scope.static_locals[name] = v
            for s in node.body:
                self.stmt(s)
        if saved is _UNSET:
            self.scope.static_locals.pop(name, None)
        else:
            self.scope.static_locals[name] = saved

    def _stmt_While(self, node: ast.While) -> None:
        if node.orelse:
            self.error(node, KernelSyntaxError, "while ... else is not supported in kernels")
        self.scope.blocks.append([])
        cond = self.condition(node.test)
        cond_body = tuple(self.scope.blocks.pop())
        always = isinstance(cond, Const) and bool(cond.value)  # `while True`: left only by break (or return)
        # a condition true with the values its names hold on entry (`l = 0.0` then `while l < eps:`, the
        # do-while idiom) runs the body at least once
        body = self.loop_body(node.body, runs_once=always or self.true_on_entry(node.test),
                              exits_normally=not always)
        self.emit(ir.While(cond_body, cond, body, line=self.src.line(node)))

    def true_on_entry(self, test: ast.expr) -> bool:
        """Whether `test`, made of literals, comparisons and arithmetic on locals whose literal values are
        known here (straight-line assignments), is true with those values."""
        names = {n.id for n in ast.walk(test) if isinstance(n, ast.Name)}
        if not names <= set(self.scope.known) or not all(isinstance(n, _ENTRY_TEST_NODES) for n in ast.walk(test)):
            return False
        try:
            return bool(eval(compile(ast.Expression(test), "<entry test>", "eval"), {"__builtins__": {}},  # noqa: S307
                             dict(self.scope.known)))
        except Exception:
            return False

    def _stmt_Break(self, node: ast.Break) -> None:
        if not self.scope.loop_depth:
            self.error(node, KernelSyntaxError, "'break' outside a loop")
        self.scope.breaks[-1].append(set(self.scope.defined))
        self.emit(ir.Break(line=self.cur_line))

    def _stmt_Continue(self, node: ast.Continue) -> None:
        if not self.scope.loop_depth:
            self.error(node, KernelSyntaxError, "'continue' outside a loop")
        self.scope.continues[-1].append(set(self.scope.defined))
        self.emit(ir.Continue(line=self.cur_line))

    def _stmt_Return(self, node: ast.Return) -> None:
        if node.value is None:
            if self.scope.ret_type not in (None, type(None)) and not self.is_kernel:
                self.error(node, KernelTypeError, f"'return' without a value in a function returning "
                           f"{T.type_name(self.scope.ret_type)}")
            self.emit(ir.Return(None, line=self.cur_line))
            return
        if self.is_kernel:
            self.error(node, KernelTypeError, f"this kernel returns a value: {_KERNEL_RETURNS}")
        rt = self.scope.ret_type
        declared = rt is not None and self.scope.ret_declared
        if declared:
            self.check_return_count(node, rt)
        if isinstance(node.value, ast.Tuple):
            value = self.tuple_value(node.value, node if declared else None)
        else:
            value = self.value(node.value)
            if declared and not _converts(value, rt):
                self.error(node, KernelTypeError, f"{self.annotated_return()} a value of type "
                           f"`{T.type_name(value.type)}`.")
        if rt is None and self.scope.ret_declared:
            self.error(node, KernelTypeError, "this function is annotated '-> None' but returns a value here")
        if rt is None:
            if self.returns_void:
                self.error(node, KernelTypeError, "this function returns a value here and nothing elsewhere")
            value = self.materialize(value)
            self.scope.ret_type = value.type
        else:
            what = f"the return value of a function annotated -> {T.type_name(rt)}" if self.scope.ret_declared \
                else "return value"
            value = self.convert(value, rt, node.value, what=what)
        self.emit(ir.Return(value, line=self.cur_line))

    def annotated_return(self) -> str:
        return (f"The function `{self.src.func.__name__}` has its return type annotated as "
                f"`{_annotation_text(annotations(self.src.func).get('return'))}` but the code returns")

    def check_return_count(self, node: ast.Return, rt: Any) -> None:
        """A return of more or fewer values than the function's return annotation `rt` has, refused in the
        words Warp uses."""
        count = len(node.value.elts) if isinstance(node.value, ast.Tuple) else 1
        if is_tuple(rt) and count != len(rt.fields):
            self.error(node, KernelTypeError, f"The function `{self.src.func.__name__}` has its return type annotated "
                       f"as a tuple of {len(rt.fields)} elements but the code returns {count} values.")
        if not is_tuple(rt) and count > 1:
            self.error(node, KernelTypeError, f"{self.annotated_return()} {count} values.")

    def tuple_value(self, node: ast.Tuple, declared: ast.Return | None = None) -> Var:
        """`return a, b, ...`: the values packed into a tuple record the caller unpacks (`declared`: the return
        statement of a function whose annotation gives the tuple's types, which the values must have)."""
        if any(isinstance(e, ast.Starred) for e in node.elts) or len(node.elts) < 2:
            self.error(node, KernelSyntaxError, "return a tuple of two or more values, without *")
        values = [self.value(e) for e in node.elts]
        rt = self.scope.ret_type
        if declared is not None and not all(map(_converts, values, rt.fields.values())):
            found = ", ".join(T.type_name(v.type) for v in values)
            self.error(declared, KernelTypeError, f"{self.annotated_return()} a tuple with types `({found})`.")
        values = [self.materialize(v) for v in values]
        if isinstance(rt, type) and is_tuple(rt) and len(rt.fields) == len(values):
            types = tuple(rt.fields.values())  # later returns convert to the first one's types
        else:
            types = tuple(v.type for v in values)
        return self.pack_tuple(values, types, node.elts, "return value")

    @property
    def returns_void(self) -> bool:
        return _has_bare_return(self.scope.blocks[0])

    # -- expressions ---------------------------------------------------------------------

    def expr(self, node: ast.expr, allow_void: bool = False) -> Any:
        handler = getattr(self, f"_expr_{type(node).__name__}", None)
        if handler is None:
            self.unsupported(node)
        r = handler(node)
        if r is None and not allow_void:
            self.error(node, KernelTypeError, "this call returns nothing, so its value cannot be used")
        return r

    def expr_or_none(self, node: ast.expr) -> Any:
        try:
            return self.expr(node)
        except KernelError:
            return None

    def value(self, node: ast.expr) -> Operand:
        """Evaluate `node` to a runtime operand (rejecting modules, types, shapes...)."""
        return self.checked_value(self.expr(node), node)

    def checked_value(self, r: Any, node: ast.expr) -> Operand:
        if isinstance(r, PyObj):
            self.error(node, KernelTypeError, f"{_describe(r.value)} is not a value a kernel can use")
        if isinstance(r, ShapeOf):
            self.error(node, KernelTypeError, "use array.shape[i] to read one extent")
        return r

    def _expr_Constant(self, node: ast.Constant) -> Any:
        v = node.value
        if isinstance(v, bool):
            return Const(v, T.bool_)
        if isinstance(v, int):
            return self.int_literal(v, node)
        if isinstance(v, float):
            return Const(v, T.float32, weak=True)
        if v is None:
            return PyObj(None)
        self.error(node, KernelTypeError, f"constants of type {type(v).__name__} are not supported in kernels")

    def _expr_Name(self, node: ast.Name) -> Any:
        if node.id in self.scope.static_locals:
            return self.from_python(self.scope.static_locals[node.id], node)
        var = self.scope.vars.get(node.id)
        if var is not None:
            self.check_defined(node)
            return var
        for scope in (self.scope.closure, self.src.func.__globals__, pybuiltins.__dict__):
            if node.id in scope:
                return self.from_python(scope[node.id], node)
        if node.id in B.BUILTINS and not node.id.startswith("_"):  # a builtin's bare name, as Warp resolves it
            return PyObj(B.BUILTINS[node.id])
        named = getattr(T, node.id, None) if not node.id.startswith("_") else None
        if isinstance(named, type) and T.is_composite(named):  # `mat22(...)`: Warp's constructors are builtins too
            return PyObj(named)
        self.error(node, KernelNameError, f"name '{node.id}' is not defined (Referencing undefined symbol: {node.id})")

    def from_python(self, obj: Any, node: ast.AST) -> Any:
        if isinstance(obj, int) and not isinstance(obj, bool):
            return self.int_literal(obj, node)
        if isinstance(obj, bool | float) and not isinstance(obj, T.ScalarType):
            return Const(obj, T.python_value_type(obj), weak=not isinstance(obj, bool))
        t = T.python_value_type(obj)
        if t is not None:
            value = obj.value if isinstance(obj, T.ScalarType) else obj
            return Const(value, t)
        if isinstance(obj, array_cls) and obj.ptr is not None:
            self.error(node, KernelTypeError, "arrays from Python scope must be passed to the kernel as arguments")
        if is_struct(type(obj)) and not is_tuple(type(obj)):  # a struct value (e.g. from wp.static): its fields
            return self.struct_constant(obj, node)
        return PyObj(obj)

    def struct_constant(self, obj: Any, node: ast.AST) -> Operand:
        t = type(obj)
        var = self.assign_temp(ir.Construct(t, ()), t)
        for name, ft in t.fields.items():
            if isinstance(ft, ArrayType):
                self.error(node, KernelTypeError, f"a {t.__name__} value with an array field ('{name}') cannot be "
                           "a kernel constant; pass the struct as a kernel argument")
            value = self.from_python(getattr(obj, name), node)
            self.emit(ir.SetField(var, name, self.convert(value, ft, node), line=self.cur_line))
        return var

    def _expr_Attribute(self, node: ast.Attribute) -> Any:
        if node.attr == "value" and isinstance(node.value, ast.Attribute):  # MyEnum.B.value: the member's value
            try:
                member = self.eval_static(node.value, "an enum member")
            except KernelError:
                member = None
            if isinstance(member, enum.Enum):
                return self.from_python(member.value, node)
        base = self.expr(node.value)
        if isinstance(base, PyObj):
            vt = base.value
            if node.attr in ("dtype", "length") and (T.is_composite(vt) or T.is_scalar(vt)):
                return self.type_attribute(vt, node.attr)
            try:
                obj = getattr(vt, node.attr)
            except AttributeError:
                if node.attr in ("float", "int") and getattr(vt, "__name__", None) == "loomwork":
                    return self.from_python(float if node.attr == "float" else int, node)  # wp.float(x) in Warp
                where = ""
                if isinstance(vt, pytypes.ModuleType) and _is_dotted_name(node):
                    where = (f": Could not find function {ast.unparse(node)}" if node is self.callee else
                             f": `{node.attr}` is not an attribute of {ast.unparse(node.value)}")
                self.error(node, KernelAttributeError, f"{_describe(base.value)} has no attribute '{node.attr}'{where}")
            return self.from_python(obj, node)
        if isinstance(base, Operand):
            t = base.type
            if isinstance(t, ArrayType):
                if node.attr == "shape":
                    return ShapeOf(base)
                if node.attr == "ndim":
                    return Const(t.ndim, T.int32)
                if node.attr == "dtype":  # a type: `a.dtype(x)` converts, as in generic kernels
                    return PyObj(t.dtype)
                if node.attr == "ptr" and not t.indexed:  # the data's address, as wp.array(ptr=...) takes it
                    ov = B.Overload("ptr", (B.Exact(t),), lambda b: T.uint64, "lw::array_address", "Utility", "",
                                    False)
                    return self.assign_temp(ir.Call(ov, (base,)), T.uint64)
                self.error(node, KernelAttributeError, f"arrays in kernels have no attribute '{node.attr}'")
            if T.is_record(t):
                if node.attr not in t.fields:
                    kind = "struct" if is_struct(t) else "value type"
                    self.error(node, KernelAttributeError, f"{kind} {t.__name__} has no field '{node.attr}'"
                               + (f" (fields: {', '.join(t.fields)})" if t.fields else ""))
                field_t = t.fields[node.attr]
                return self.assign_temp(ir.Field(base, node.attr), field_t)
            if node.attr in ("dtype", "length") and (T.is_composite(t) or T.is_scalar(t)):  # as of its type
                return self.type_attribute(t, node.attr)
            if T.is_transform(t) and node.attr in ("p", "q"):
                name = "transform_get_translation" if node.attr == "p" else "transform_get_rotation"
                return self.call_builtin(name, [base], node)
            if T.is_composite(t) and node.attr == "shape":  # a local array's: extents, then zeros, as Warp's
                return PyObj(tuple(t._shape_) + (0,) * (4 - len(t._shape_)))
            if T.is_vector(t):
                idx = _SWIZZLE.get(node.attr)
                if idx is not None and idx < t._length_:
                    return self.assign_temp(ir.Extract(base, (Const(idx, T.int32),)), t._wp_scalar_type_)
            self.error(node, KernelAttributeError, f"{T.type_name(t)} has no attribute '{node.attr}'")
        self.error(node, KernelAttributeError, f"no attribute '{node.attr}' here")

    @staticmethod
    def type_attribute(t: Any, attr: str) -> Any:
        """`.dtype` (the scalar type) and `.length` (the component count) of a value type, or of a value of
        that type, as Warp's kernels read them: `wp.identity(n=v.length, dtype=v.dtype)` in generic code."""
        if attr == "dtype":
            return PyObj(t._wp_scalar_type_ if T.is_composite(t) else t)
        return Const(math.prod(t._shape_) if T.is_composite(t) else 1, T.int32)

    def check_defined(self, node: ast.Name) -> None:
        """A local read must follow an assignment on every path: one made in only one branch of an `if`, or
        only in a loop that may run zero times, would leave the other paths reading a value no statement
        wrote."""
        if node.id not in self.scope.defined:
            why = self.scope.undefined_why.get(node.id, "it is assigned only further down")
            self.error(node, KernelNameError, f"local variable '{node.id}' may be read here before it is assigned: "
                       f"{why}")

    def adjoint_place(self, node: ast.Subscript) -> Place:
        """`wp.adjoint[x]`, `wp.adjoint[s.vec]`, `wp.adjoint[v[0]]`: the adjoint of a differentiable parameter
        of a @wp.func_grad function, or of a field or component of one."""
        if self.scope.adjoints is None:
            self.error(node, KernelSyntaxError, "wp.adjoint[...] can only be used in a @wp.func_grad function")
        chain, root = [], node.slice
        while isinstance(root, ast.Attribute | ast.Subscript):
            chain.append(root)
            root = root.value
        if not isinstance(root, ast.Name) or root.id not in self.scope.adjoints:
            self.error(node.slice, KernelNameError, "wp.adjoint[...] takes the name of a differentiable parameter "
                       f"of the function (or a field or component of one): one of "
                       f"{', '.join(sorted(self.scope.adjoints))}")
        var = self.scope.adjoints[root.id]
        if var is None:  # an array parameter: its gradient, seen as an array
            if chain:
                self.error(node.slice, KernelSyntaxError, f"wp.adjoint[...] of the array '{root.id}' is the whole "
                           f"gradient array: index it outside (wp.adjoint[{root.id}][i])")
            var = self.call_builtin("_grad_of", [self.value(root)], node)
        p = Place(var, None, 0, (), var.type)
        for part in reversed(chain):
            p = self.field_place(p, part) if isinstance(part, ast.Attribute) else self.index_place(p, part)
        return p

    def _expr_Subscript(self, node: ast.Subscript) -> Any:
        base = self.expr(node.value)
        if isinstance(base, PyObj) and base.value is adjoint:
            return self.place_value(self.adjoint_place(node))
        if isinstance(base, ShapeOf):
            idx = self.expr(node.slice)
            if not isinstance(idx, Const) or not T.is_int(idx.type):
                self.error(node.slice, KernelTypeError, "array.shape takes a constant integer index")
            nd = base.array.type.ndim
            if nd <= idx.value < MAX_DIMS:  # as in Warp, the extents past an array's dimensions read 0
                return Const(0, T.int32)
            if not -nd <= idx.value < nd:
                self.error(node.slice, KernelIndexError, f"shape index {idx.value} out of range for a {nd}-D array")
            return self.assign_temp(ir.Shape(base.array, idx.value % nd), T.int32)
        if isinstance(base, PyObj) and isinstance(base.value, list | tuple):  # a compile-time sequence
            idx = self.expr(node.slice)
            if not isinstance(idx, Const) or not T.is_int(idx.type):
                self.error(node.slice, KernelTypeError, "a Python list or tuple in a kernel takes a constant index "
                           "(e.g. the variable of a wp.static loop)")
            try:
                return self.from_python(base.value[idx.value], node)
            except IndexError:
                self.error(node, KernelIndexError,
                           f"index {idx.value} out of range for a sequence of {len(base.value)}")
        if not isinstance(base, Operand):
            self.error(node.value, KernelTypeError, f"{_describe(getattr(base, 'value', base))} cannot be indexed")
        if type(base.type) in SUBSCRIPT_KINDS:
            return SUBSCRIPT_KINDS[type(base.type)](self, node, base)
        if T.is_composite(base.type) and _has_slice(node):
            return self.composite_slice(base, node)
        if is_tuple(base.type):
            n = len(base.type.fields)
            idx = self.expr(node.slice)
            if not isinstance(idx, Const) or not T.is_int(idx.type) or not -n <= idx.value < n:
                self.error(node.slice, KernelIndexError, f"a tuple of {n} values takes a constant index in "
                           f"[{-n}, {n})")
            fname = f"f{idx.value % n}"
            return self.assign_temp(ir.Field(base, fname), base.type.fields[fname])
        t = base.type
        if isinstance(t, ArrayType) and _has_slice(node):
            return self.array_slice(base, node)
        indices = self.indices(node.slice)
        if isinstance(t, ArrayType):
            if len(indices) > t.ndim:
                self.error(node, KernelIndexError, f"{len(indices)} indices for a {t.ndim}-D array")
            for i in indices:
                if isinstance(i, Const) and i.value < 0:
                    self.error(node.slice, KernelIndexError, "negative array indices are not supported in kernels")
            if len(indices) == t.ndim:
                return self.assign_temp(ir.Load(base, indices, self.site(node, base)), t.dtype)
            view = ir.View(base, indices, self.site(node, base))
            return self.assign_temp(view, ArrayType(t.dtype, t.ndim - len(indices), indexed=t.indexed,
                                                    strided=t.strided))
        if T.is_composite(t):
            indices = self.component_indices(t, indices, node)
            extract = ir.Extract(base, indices, self.site(node, base))
            return self.assign_temp(extract, self.component_type(t, len(indices)))
        self.error(node.value, KernelTypeError, f"values of type {T.type_name(t)} cannot be indexed")

    def array_slice(self, base: Operand, node: ast.Subscript) -> Operand:
        """a[i:j], a[i, j:k:s], a[:, 2]: a view of an array with its sliced axes kept and its indexed axes
        dropped (runtime bounds, Python's slice rules); it shares the array's data and gradient."""
        t = base.type
        if t.indexed:
            self.error(node, KernelIndexError, "an indexedarray cannot be sliced in a kernel")
        elts = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        if len(elts) > t.ndim:
            self.error(node, KernelIndexError, f"{len(elts)} indices for a {t.ndim}-D array")

        def bound(e: ast.expr | None) -> Operand | None:
            if e is None:
                return None
            v = self.value(e)
            if not T.is_int(v.type):
                self.error(e, KernelTypeError, f"slice bounds must be integers, got {T.type_name(v.type)}")
            return v

        bounds, sliced = [], []
        for e in elts:
            if isinstance(e, ast.Slice):
                step = bound(e.step)
                if isinstance(step, Const) and step.value == 0:
                    self.error(e, KernelValueError, "Slice step cannot be zero")
                bounds.append((bound(e.lower), bound(e.upper), step))
                sliced.append(True)
            else:
                bounds.append((bound(e), None, None))
                sliced.append(False)
        kept = sum(sliced) + t.ndim - len(elts)
        if kept == 0:
            self.error(node, KernelIndexError, "a slice of an array keeps at least one axis")
        last = sliced[-1] if len(elts) == t.ndim else True  # the innermost axis stays innermost
        unit = len(elts) < t.ndim or (last and (bounds[-1][2] is None or (
            isinstance(bounds[-1][2], Const) and bounds[-1][2].value == 1)))
        rt = ArrayType(t.dtype, kept, strided=t.strided or not unit)
        return self.assign_temp(ir.SliceView(base, tuple(bounds), tuple(sliced)), rt)

    def composite_slice(self, base: Operand, node: ast.Subscript) -> Operand:
        """v[a:b:c], m[i, :], m[:, j], m[a:b, c:d]: constant slices of a vector or matrix, copied into a
        new vector (one sliced dimension) or matrix (two)."""
        t = base.type
        st = t._wp_scalar_type_
        picks, kept = self.slice_picks(t, node)
        comps = tuple(self.assign_temp(ir.Extract(base, combo), st) for combo in itertools.product(*picks))
        rt = T.vector(kept[0], st) if len(kept) == 1 else T.matrix(tuple(kept), st)
        return self.assign_temp(ir.Construct(rt, comps), rt)

    def indices(self, node: ast.expr) -> tuple[Operand, ...]:
        elts = node.elts if isinstance(node, ast.Tuple) else [node]
        out = []
        for e in elts:
            if isinstance(e, ast.Slice):
                self.error(e, KernelSyntaxError, "slices are not supported in kernels")
            v = self.value(e)
            if not T.is_int(v.type):
                self.error(e, KernelTypeError, f"indices must be integers, got {T.type_name(v.type)}")
            out.append(v)
        return tuple(out)

    def component_indices(self, t: Any, indices: tuple, node: ast.AST) -> tuple:
        """Component indices checked against the shape; constant negative ones count from the end."""
        shape = t._shape_
        if len(indices) > len(shape):
            self.error(node, KernelIndexError, f"{len(indices)} indices for {T.type_name(t)}")
        out = []
        for i, n in zip(indices, shape, strict=False):
            if isinstance(i, Const):
                if not -n <= i.value < n:
                    self.error(node, KernelIndexError, f"index {i.value} out of range for {T.type_name(t)} (size {n})")
                i = Const(i.value % n, i.type)
            out.append(i)
        return tuple(out)

    @staticmethod
    def component_type(t: Any, nidx: int) -> Any:
        if T.is_matrix(t) and nidx == 1:
            return T.vector(t._shape_[1], t._wp_scalar_type_)
        return t._wp_scalar_type_

    def _expr_Tuple(self, node: ast.Tuple) -> Any:
        """`(a, b, ...)` as a value: a tuple record, indexed by constants, unpacked, passed and returned."""
        if any(isinstance(e, ast.Starred) for e in node.elts) or not node.elts:
            self.error(node, KernelSyntaxError, "a tuple value needs one or more elements, without *")
        values = [self.materialize(self.value(e)) for e in node.elts]
        return self.pack_tuple(values, tuple(v.type for v in values), node.elts, "element")

    def pack_tuple(self, values: list, types: tuple, elts: list, what: str) -> Var:
        for v, e in zip(values, elts, strict=True):
            if is_tuple(v.type):
                self.error(e, KernelTypeError, "tuples cannot be nested")
        tt = tuple_type(types)
        var = self.assign_temp(ir.Construct(tt, ()), tt)
        for i, (v, ft, e) in enumerate(zip(values, types, elts, strict=True)):
            self.emit(ir.SetField(var, f"f{i}", self.convert(v, ft, e, what=f"{what} {i}"), line=self.cur_line))
        return var

    def _expr_BinOp(self, node: ast.BinOp) -> Operand:
        op = _OPS.get(type(node.op))
        if op is None:
            self.unsupported(node.op)
        return self.binop(op, self.value(node.left), self.value(node.right), node)

    def binop(self, op: str, a: Operand, b: Operand, node: ast.AST) -> Operand:
        if isinstance(a, Const) and isinstance(b, Const) and a.weak and b.weak:
            folded = self.fold(op, a.value, b.value, node)
            if folded is not None:
                return folded
        if op == "pow" and T.is_float(getattr(a, "type", None)) and isinstance(b, Const) and b.weak:
            b = Const(float(b.value), a.type)
        user = self.user_operator(op, [a, b], node)
        return user if user is not None else self.call_builtin(op, [a, b], node)

    def user_operator(self, op: str, args: list[Operand], node: ast.AST) -> Operand | None:
        """An operator on values a @wp.func named after it takes (`add` for +, `mul` for *...), found where the
        kernel's names are: Warp's operator overloading, for structs say. None: no such function takes them."""
        inst = self.operator_instance(op, args)
        if inst is None:
            return None
        if inst.ir.ret is None:
            self.error(node, KernelTypeError, f"the @wp.func '{op}' that overloads this operator returns nothing")
        return self.call_instance(inst, args, {}, node)

    def operator_instance(self, op: str, args: list[Operand]) -> Any:
        """The instance of the @wp.func overloading operator `op` that takes `args` (by their types), or None."""
        fn = self.scope.closure.get(op, self.src.func.__globals__.get(op))
        if not isinstance(fn, UserFunction):
            return None
        return self.ctx.instantiate(fn, args, {})[0]

    def fold(self, op: str, a: Any, b: Any, node: ast.AST) -> Const | None:
        """Two literals combined at compile time, as Python would (None: left to the kernel)."""
        ints = isinstance(a, int) and isinstance(b, int)
        fn = _PY_FOLD.get(op) or (_PY_INT_FOLD.get(op) if ints else None)
        if fn is None or (op in ("lshift", "rshift") and b < 0):
            return None
        if ints and op in ("pow", "lshift") and b > 0 and abs(a) > 1:  # huge results: rejected before computing
            least_bits = (a.bit_length() - 1) * b + 1 if op == "pow" else a.bit_length() + b
            if least_bits > 64:
                self.error(node, KernelTypeError, f"this integer constant has at least {least_bits} bits: it does "
                           "not fit in 64 bits")
        try:
            v = fn(a, b)
        except (ArithmeticError, ValueError):  # e.g. a float power that overflows: computed by the kernel
            return None
        if isinstance(v, int):
            return self.int_literal(v, node)
        return Const(v, T.python_value_type(v), weak=True) if isinstance(v, float) else None

    def int_literal(self, v: int, node: ast.AST) -> Const:
        """An integer literal: int32 when it fits, else int64, else uint64; one wider than 64 bits is an error."""
        for t in (T.int32, T.int64, T.uint64):
            if _fits(v, t):
                return Const(v, t, weak=True)
        self.error(node, KernelTypeError, f"the integer constant {v} does not fit in 64 bits")

    def coerce(self, value: Any, t: Any, node: ast.AST, explicit: bool = False) -> Any:
        """A constant as type `t`; an error when an integer does not fit (see `_coerce`)."""
        out = _coerce(value, t, explicit)
        if out is None:
            how = "" if explicit else "; use a type it fits in (e.g. wp.int64) or an explicit cast"
            self.error(node, KernelTypeError, f"the constant {value!r} does not fit in {T.type_name(t)}{how}")
        return out

    def _expr_UnaryOp(self, node: ast.UnaryOp) -> Operand:
        v = self.value(node.operand)
        if isinstance(node.op, ast.Not):
            return self.call_builtin("invert", [self.truth(v, node.operand)], node)
        if isinstance(v, Const) and v.weak and isinstance(node.op, ast.USub | ast.UAdd):
            value = -v.value if isinstance(node.op, ast.USub) else v.value
            return self.int_literal(value, node) if T.is_int(v.type) else Const(value, v.type, weak=True)
        name = {ast.USub: "neg", ast.UAdd: "pos", ast.Invert: "invert"}[type(node.op)]
        return self.call_builtin(name, [v], node)

    def _expr_Compare(self, node: ast.Compare) -> Operand:
        left = self.value(node.left)
        right = self.value(node.comparators[0])
        first = self.compare(node.ops[0], left, right, node)
        if len(node.ops) == 1:
            return first
        res = self.temp(T.bool_)
        self.emit(ir.Assign(res, ir.Copy(first), line=self.cur_line))
        self._compare_rest(res, node, 1, right)
        return res

    def _compare_rest(self, res: Var, node: ast.Compare, i: int, left: Operand) -> None:
        """`a < b < c`: each further comparison runs only while the previous ones held."""
        if i == len(node.ops):
            return
        self.scope.blocks.append([])
        right = self.value(node.comparators[i])
        self.emit(ir.Assign(res, ir.Copy(self.compare(node.ops[i], left, right, node)), line=self.cur_line))
        self._compare_rest(res, node, i + 1, right)
        self.emit_if_popped(res)

    def emit_if_popped(self, cond: Operand, negate: bool = False) -> None:
        block = tuple(self.scope.blocks.pop())
        self.emit(ir.If(cond, (), block, line=self.cur_line) if negate else ir.If(cond, block, (), line=self.cur_line))

    def compare(self, op: ast.cmpop, left: Operand, right: Operand, node: ast.AST) -> Operand:
        name = _CMP.get(type(op))
        if name is None:
            self.error(node, KernelSyntaxError, f"'{type(op).__name__}' comparisons are not supported in kernels")
        lt, rt = left.type, right.type
        if (T.is_scalar(lt) and T.is_scalar(rt) and lt != rt and T.bool_ not in (lt, rt)
                and not (isinstance(left, Const) and left.weak) and not (isinstance(right, Const) and right.weak)):
            # scalars of two types compare by value, as in Warp (and C++): in the float type when there is
            # one, else in int64
            common = max((t for t in (lt, rt) if t.is_float), key=lambda t: t.size, default=T.int64)
            left, right = (v if v.type == common else self.assign_temp(ir.Construct(common, (v,)), common)
                           for v in (left, right))
        return self.call_builtin(name, [left, right], node)

    def _expr_BoolOp(self, node: ast.BoolOp) -> Operand:
        is_and = isinstance(node.op, ast.And)
        res = self.temp(T.bool_)
        first = self.truth(self.value(node.values[0]), node.values[0])
        self.emit(ir.Assign(res, ir.Copy(first), line=self.cur_line))
        self._bool_rest(res, node.values[1:], is_and)
        return res

    def _bool_rest(self, res: Var, values: list[ast.expr], is_and: bool) -> None:
        if not values:
            return
        self.scope.blocks.append([])
        v = self.truth(self.value(values[0]), values[0])
        self.emit(ir.Assign(res, ir.Copy(v), line=self.cur_line))
        self._bool_rest(res, values[1:], is_and)
        self.emit_if_popped(res, negate=not is_and)

    def _expr_IfExp(self, node: ast.IfExp) -> Operand:
        cond = self.condition(node.test)
        self.scope.blocks.append([])
        a = self.value(node.body)
        body = self.scope.blocks.pop()
        self.scope.blocks.append([])
        b = self.value(node.orelse)
        orelse = self.scope.blocks.pop()
        a, b = self.unify([a, b], node)
        if a.type != b.type:
            self.error(node, KernelTypeError, f"the two branches have different types: {T.type_name(a.type)} "
                       f"and {T.type_name(b.type)}")
        res = self.temp(a.type)
        body.append(ir.Assign(res, ir.Copy(a), line=self.cur_line))
        orelse.append(ir.Assign(res, ir.Copy(b), line=self.cur_line))
        self.emit(ir.If(cond, tuple(body), tuple(orelse), line=self.cur_line))
        return res

    def condition(self, node: ast.expr) -> Operand:
        return self.truth(self.value(node), node)

    def truth(self, v: Operand, node: ast.AST) -> Operand:
        if v.type == T.bool_:
            return v
        if isinstance(v, Const):
            return Const(bool(v.value), T.bool_)
        if isinstance(v.type, ArrayType) and not v.type.indexed:  # an array is true unless null, as in Warp
            return self.call_builtin("invert", [self.call_builtin("unot", [v], node)], node)
        if not T.is_scalar(v.type):
            self.error(node, KernelTypeError, f"a {T.type_name(v.type)} has no truth value; compare it explicitly")
        return self.call_builtin("truth", [v], node)

    # -- calls ---------------------------------------------------------------------------------

    def expand_starred(self, node: ast.Call) -> ast.Call:
        """`f(*v)`: the call with `v`'s components (a vector's or quaternion's, a matrix's rows), or the elements
        of a slice with constant bounds (`*v[1:3]`, `*arr[:3]`), as separate arguments."""
        args: list[ast.expr] = []
        for a in node.args:
            if not isinstance(a, ast.Starred):
                args.append(a)
                continue
            base, sl = (a.value.value, a.value.slice) if isinstance(a.value, ast.Subscript) and isinstance(
                a.value.slice, ast.Slice) else (a.value, None)
            t = getattr(self.expr(base), "type", None)
            if isinstance(t, ArrayType):
                if t.ndim != 1 or sl is None:
                    self.error(a, KernelTypeError, "*array unpacks a slice with constant bounds of a 1-D array, "
                               "e.g. *arr[:3]")
                positions = self.static_slice(sl, None, a)
            elif T.is_vector(t) or T.is_matrix(t):
                n = t._shape_[0]
                positions = self.static_slice(sl, n, a) if sl is not None else range(n)
            else:
                self.error(a, KernelTypeError, "Starred expressions are only supported for vectors, matrices, "
                           f"quaternions and slices of arrays, not {T.type_name(t)}")
            for i in positions:
                args.append(ast.copy_location(ast.Subscript(value=base, slice=ast.Constant(i), ctx=ast.Load()), a))
        return ast.copy_location(ast.Call(func=node.func, args=args, keywords=node.keywords), node)

    def static_slice(self, sl: ast.Slice, n: int | None, node: ast.AST) -> range:
        """The positions a slice with compile-time bounds selects from a length-`n` value (n None: an array,
        whose length is unknown here: the stop must be given, and nothing may be negative)."""
        parts = []
        for part in (sl.lower, sl.upper, sl.step):
            v = None if part is None else self.value(part)
            if v is not None and not (isinstance(v, Const) and T.is_int(v.type)):
                self.error(part, KernelValueError, "Slice component must be a compile-time constant integer")
            parts.append(None if v is None else int(v.value))
        start, stop, step = parts
        if n is not None:
            return range(*slice(start, stop, step).indices(n))
        if stop is None:
            self.error(node, KernelValueError, "unpacking an array slice requires explicit upper bound")
        if any(p is not None and p < 0 for p in (start, stop)):
            self.error(node, KernelValueError, "slice bounds cannot be negative for arrays")
        if step is not None and step <= 0:
            self.error(node, KernelValueError, "slice step cannot be negative or zero for arrays")
        return range(start or 0, stop, step or 1)

    def is_special(self, func_node: ast.expr, name: str) -> bool:
        f = self.expr_or_none(func_node)
        return isinstance(f, PyObj) and isinstance(f.value, B.Builtin) and f.value.name == name

    def _expr_Call(self, node: ast.Call) -> Any:
        if _node_key(node) in self.declared_statics:  # whatever the name of wp.static names now
            return self.from_python(self.static_value(node), node)
        if any(isinstance(a, ast.Starred) for a in node.args):
            node = self.expand_starred(node)
        self.callee = node.func  # an attribute missing from a module here names a function (wp.nonexistent())
        f = self.expr(node.func)
        if not isinstance(f, PyObj):
            self.error(node.func, KernelTypeError, "this value is not callable")
        obj = f.value
        form = call_form_of(obj)
        if form is not None:
            return form(self, node, obj)
        if isinstance(obj, B.Builtin):
            return self.builtin_call(obj, node)
        alias = _python_alias(obj)
        if alias is not None:
            self.no_keywords(node, alias)
            return self.call_builtin(alias, [self.value(a) for a in node.args], node)
        self.error(node.func, KernelTypeError, f"cannot call {_describe(obj)} from a kernel; "
                   "kernels call builtins and @wp.func functions")

    def builtin_call(self, bi: B.Builtin, node: ast.Call) -> Any:
        """A call of a table builtin. Arguments in out positions name variables (or fields or elements) the
        call assigns; an in-out argument that is a variable is updated too, while any other value (an array
        element, an expression) passes a copy the call advances, as in Warp."""
        node = self.by_position(bi.name, node)
        shape = next((ov for ov in bi.overloads if len(ov.params) == len(node.args) and ov.outputs), None)
        if shape is None:
            if any(len(ov.params) > len(node.args) and ov.outputs == tuple(range(len(node.args), len(ov.params)))
                   and not any(ov.params[p].inout for p in ov.outputs) for ov in bi.overloads) and not any(
                    len(ov.params) == len(node.args) for ov in bi.overloads):
                return self.returned_outputs(bi, node)
            return self.call_builtin(bi.name, [self.value(a) for a in node.args], node)
        outs: dict[int, Any] = {}
        current: dict[int, Operand] = {}
        copied: set[int] = set()
        for pos in shape.outputs:
            target = node.args[pos]
            inout = shape.params[pos].inout
            place = isinstance(target, ast.Name | ast.Attribute | ast.Subscript)
            if not place and not inout:
                self.error(target, KernelTypeError, f"argument {pos + 1} of {bi.name}() is an output: pass a "
                           "variable (or a field or element) for the call to assign")
            if isinstance(target, ast.Name) and target.id not in self.scope.vars:
                if inout:
                    self.error(target, KernelNameError, f"argument {pos + 1} of {bi.name}() is read and written: "
                               "it must be a variable defined before the call")
                outs[pos] = None
                continue
            if inout and not (place and self.is_local_place(target)):
                copy = self.temp(self.value(target).type)
                self.emit(ir.Assign(copy, ir.Copy(self.value(target)), line=self.cur_line))
                current[pos] = copy
                copied.add(pos)
            else:
                current[pos] = self.value(target)
            outs[pos] = current[pos].type
        inputs = [self.value(a) for i, a in enumerate(node.args) if i not in outs]
        found, inputs = self.resolve_literals(bi.name, inputs, node, outs)
        if found is None:
            fresh, _ = self.resolve_literals(bi.name, inputs, node, dict.fromkeys(outs))
            if fresh is not None:  # the inputs fit: an output variable has another type than the call gives
                ov, bindings = fresh
                for pos, t in zip(ov.outputs, ov.output_types(bindings), strict=True):
                    if outs[pos] is not None and outs[pos] != t:
                        kind = "an in-out" if ov.params[pos].inout else "an output"
                        self.error(node.args[pos], KernelTypeError, f"argument {pos + 1} of {bi.name}() is {kind} "
                                   f"{T.type_name(t)}, but {ast.unparse(node.args[pos])} is a "
                                   f"{T.type_name(outs[pos])}")
            got = ", ".join("?" if t is None else T.type_name(t) for t in self.layout(
                [a.type for a in inputs], outs))
            cands = "\n".join(f"      {ov.signature()}" for ov in B.candidates(bi.name))
            self.error(node, KernelTypeError, f"no overload of {bi.name}() takes ({got}); these do:\n{cands}")
        ov, bindings = found
        ret = ov.ret(bindings)
        kinds = ov.output_types(bindings)
        record = tuple_type(((ret,) if ret is not None else ()) + kinds)
        passed = [*inputs, *(current[pos] for pos in ov.outputs if ov.params[pos].inout)]
        result = self.assign_temp(ir.Call(ov, tuple(passed), type=record), record)
        first = 1 if ret is not None else 0
        for k, (pos, t) in enumerate(zip(ov.outputs, kinds, strict=True)):
            if pos not in copied:
                self.assign_to(node.args[pos], self.assign_temp(ir.Field(result, f"f{first + k}"), t), node)
        return self.assign_temp(ir.Field(result, "f0"), ret) if ret is not None else None

    def returned_outputs(self, bi: B.Builtin, node: ast.Call) -> Operand:
        """`U, sigma, V = wp.svd3(A)`: a builtin whose trailing parameters are outputs, called without them,
        returns them (a tuple when there are several)."""
        inputs = [self.value(a) for a in node.args]
        n = len(node.args)
        outs = {pos: None for ov in bi.overloads for pos in range(n, len(ov.params))}
        found, inputs = self.resolve_literals(bi.name, inputs, node, outs)
        if found is None:
            got = ", ".join(T.type_name(a.type) for a in inputs)
            cands = "\n".join(f"      {ov.signature()}" for ov in B.candidates(bi.name))
            self.error(node, KernelTypeError, f"no overload of {bi.name}() takes ({got}); these do:\n{cands}")
        ov, bindings = found
        ret = ov.ret(bindings)
        record = tuple_type(((ret,) if ret is not None else ()) + ov.output_types(bindings))
        result = self.assign_temp(ir.Call(ov, tuple(inputs), type=record), record)
        if len(record.fields) == 1:
            return self.assign_temp(ir.Field(result, "f0"), record.fields["f0"])
        return result

    def is_local_place(self, target: ast.expr) -> bool:
        """Whether `target` is a variable or a field or component of one (not an array element)."""
        while isinstance(target, ast.Attribute | ast.Subscript):
            if isinstance(target, ast.Subscript) and isinstance(self.value(target.value).type, ArrayType):
                return False
            target = target.value
        return isinstance(target, ast.Name) and target.id in self.scope.vars

    @staticmethod
    def layout(values: list, outs: dict[int, Any]) -> list:
        """Input values with the out / in-out positions' entries put back in argument order."""
        it = iter(values)
        return [outs[i] if i in outs else next(it) for i in range(len(values) + len(outs))]

    def by_position(self, name: str, node: ast.Call) -> ast.Call:
        """A builtin call that passes arguments by keyword, as the same call with every argument in its place
        (the keywords must name the parameters right after the positional arguments, in any order)."""
        if not node.keywords:
            return node
        if any(k.arg is None for k in node.keywords):
            self.error(node, KernelTypeError, f"{name}() takes no **keyword arguments in kernels")
        given = {k.arg: k.value for k in node.keywords}
        n = len(node.args)
        arities = param_names(name)
        for names in arities:
            if set(names[n:n + len(given)]) == set(given):
                call = ast.Call(func=node.func, args=[*node.args, *(given[p] for p in names[n:n + len(given)])],
                                keywords=[])
                return ast.copy_location(call, node)
        takes = " or ".join(f"{name}({', '.join(names)})" for names in arities)
        self.error(node, KernelTypeError, f"{name}() got keyword argument(s) {', '.join(given)} that do not name the "
                   f"parameters after its {n} positional argument(s): " + (f"it takes {takes}" if takes else
                                                                           "it takes no keyword arguments"))

    def no_keywords(self, node: ast.Call, name: str) -> None:
        if node.keywords:
            self.error(node, KernelTypeError, f"{name}() takes no keyword arguments in kernels")

    def unify(self, args: list[Operand], node: ast.AST, strict: bool = True) -> list[Operand]:
        """Give weak (literal) constants the scalar type of the first strongly typed argument. One that does
        not fit it is an error, or with `strict=False` stays as it is (another overload may take it)."""
        target = None
        for a in args:
            if not (isinstance(a, Const) and a.weak) and not isinstance(a.type, ArrayType):
                target = T.elem_scalar(getattr(a.type, "element_type", a.type))  # a tile: its elements'
                break
        if target is None or target is T.bool_:
            return args
        out = []
        for a in args:
            if isinstance(a, Const) and a.weak and (T.is_int(a.type) or target.is_float):
                if strict or _coerce(a.value, target) is not None:
                    a = Const(self.coerce(a.value, target, node), target)
            out.append(a)
        return out

    def call_builtin(self, name: str, args: list[Operand], node: ast.AST) -> Operand:
        found, args = self.resolve_literals(name, args, node)
        if found is None:
            why = next((m for f in B.NO_MATCH.get(name, ()) if (m := f([a.type for a in args])) is not None), None)
            if why is not None:
                self.error(node, KernelTypeError, why)
            got = ", ".join(T.type_name(a.type) for a in args)
            cands = "\n".join(f"      {ov.signature()}" for ov in B.candidates(name))
            hint = ""
            ts = [T.elem_scalar(a.type) for a in args if not isinstance(a.type, ArrayType)]
            if len(set(ts)) > 1:
                hint = ("\n  (operands of different scalar types: convert one explicitly, "
                        "e.g. float(i) or wp.float64(x))")
            self.error(node, KernelTypeError, f"no overload of {name}() takes ({got}) (Couldn't find function "
                       f"overload for '{name}' that matched inputs with types: [{got}]); these do:\n{cands}{hint}")
        ov, bindings = found
        return self.assign_temp(ir.Call(ov, tuple(args)), ov.ret(bindings))

    def resolve_literals(self, name: str, args: list[Operand], node: ast.AST,
                         outs: dict[int, Any] | None = None) -> tuple[Any, list[Operand]]:
        """Resolve an overload, letting bare literals adapt: first to the other operands' scalar type,
        then as their default types, then to an overload's exact parameter types. `outs` holds the types
        of out / in-out arguments by position (None: a variable the call creates); `args` are the others."""
        outs = outs or {}
        unified = self.unify(args, node, strict=False)  # a literal that does not fit: see the end
        for cand in (unified, [self.materialize(a) for a in args]):
            found = B.resolve(name, self.layout([a.type for a in cand], outs))
            if found is not None:
                return found, cand
        for ov in B.candidates(name):
            if len(ov.params) != len(args) + len(outs):
                continue
            params = [p for i, p in enumerate(ov.params) if i not in outs]
            fitted = []
            for a, p in zip(args, params, strict=True):
                if isinstance(a, Const) and a.weak and isinstance(p, B.Exact) and T.is_scalar(p.type) and (
                        T.is_int(a.type) or p.type.is_float) and _coerce(a.value, p.type) is not None:
                    a = Const(_coerce(a.value, p.type), p.type)
                fitted.append(a)
            b = ov.match(self.layout([a.type for a in fitted], outs))
            if b is not None:
                return (ov, b), fitted
        return None, self.unify(args, node)  # no overload: name a literal that does not fit the operands

    def call_function(self, fn: Function, node: ast.Call) -> Any:
        args = [self.value(a) for a in node.args]
        kwargs = {k.arg: self.value(k.value) for k in node.keywords}
        if None in kwargs:
            self.error(node, KernelSyntaxError, "**kwargs are not supported in kernels")
        inst, err = self.ctx.instantiate(fn, args, kwargs)
        if inst is None:
            self.error(node, KernelTypeError, err)
        return self.call_instance(inst, args, kwargs, node)

    def call_instance(self, inst: Any, args: list[Operand], kwargs: dict, node: ast.AST) -> Any:
        """A call of one instance of a @wp.func: its result, or None (the call is a statement)."""
        ordered = inst.bind_args(args, kwargs)
        ordered = [self.convert(a, p.type, node) for a, p in zip(ordered, inst.ir.params, strict=True)]
        call = ir.Call(inst, tuple(ordered))
        if inst.ir.ret is None:
            self.emit(ir.Eval(call, line=self.cur_line))
            return None
        return self.assign_temp(call, inst.ir.ret)

    def static_value(self, node: ast.Call) -> Any:
        """`wp.static(expr)`'s value: the one found when the function was defined (declare_statics), else its
        argument evaluated now in Python, in the function's global and closure scope."""
        key = _node_key(node)
        if key in self.declared_statics:
            return self.declared_statics[key]
        if len(node.args) != 1 or node.keywords:
            self.error(node, KernelTypeError, "wp.static() takes one expression")
        return self.eval_static(node.args[0], "wp.static()")

    def eval_static(self, node: ast.expr, what: str) -> Any:
        """Evaluate an expression in Python, in the function's global and closure scope."""
        expr = ast.Expression(node)
        ast.fix_missing_locations(expr)
        try:
            # the variable of an unrolled loop is its current value, even where an earlier run of the same loop
            # (nested in another unrolled loop) left a constant local of that name behind
            scope = {**self.scope.closure, **{
                name: _LocalLength(var.type) for name, var in self.scope.vars.items()
                if T.is_composite(var.type) or is_tuple(var.type)
                or isinstance(getattr(var.type, "shape", None), tuple)},
                **self.scope.constants, **self.scope.static_locals}
            code = compile(expr, f"<static expression at {self.src.filename}:{self.src.line(node)}>", "eval")
            return eval(code, self.src.func.__globals__, scope)  # noqa: S307
        except Exception as e:  # the user's expression failed: report it at its source line
            self.error(node, KernelTypeError, f"{what} could not evaluate this expression, which may use only "
                       f"globals, closure values and constants ({type(e).__name__}). Error evaluating static "
                       f"expression: {e}. Make sure all variables used in the static expression are constant.")

    def compile_time(self, node: ast.expr, what: str) -> Any:
        """A compile-time argument (a dtype, a shape): a Python expression of globals, closure values and
        constants, or one that names kernel variables for what their types fix (`a.dtype` of an array argument),
        which then take precedence over globals of the same name."""
        if any(isinstance(x, ast.Name) and x.id in self.scope.vars for x in ast.walk(node)):
            found = self.expr_or_none(node)
            if isinstance(found, PyObj) or (isinstance(found, Const) and not T.is_composite(found.type)):
                return found.value
        return self.eval_static(node, what)

    def materialize(self, v: Operand) -> Operand:
        """A weak literal gets its default type (int32 / float32) when stored to a variable."""
        if isinstance(v, Const) and v.weak:
            return Const(v.value, v.type)
        return v

    def convert(self, v: Operand, t: Any, node: ast.AST, what: str = "value") -> Operand:
        """`v` as type `t`: only weak literals convert implicitly; anything else must match."""
        if v.type == t:
            return v
        if isinstance(v, Const) and v.weak and T.is_scalar(t) and t is not T.bool_:
            if T.is_int(v.type) or t.is_float:
                return Const(self.coerce(v.value, t, node), t)
        if isinstance(v.type, ArrayType) and isinstance(t, ArrayType) and v.type == t:
            return v
        self.error(node, KernelTypeError, f"{what} expects {T.type_name(t)}, got {T.type_name(v.type)}")

    def annotation_type(self, ann: ast.expr, node: ast.AST) -> Any:
        obj = self.expr(ann)
        if isinstance(obj, PyObj):
            try:
                return arg_type(obj.value)
            except TypeError as e:
                self.error(ann, KernelTypeError, str(e))
        self.error(ann, KernelTypeError, "not a type")

    def site(self, node: ast.AST, arr: Operand) -> int:
        line, _ = self.src.location(node)
        return self.ctx.add_site(self.qualname, ast.unparse(node), self.src.filename, line)


_SWIZZLE = {"x": 0, "y": 1, "z": 2, "w": 3}


class _LocalLength:
    """A kernel variable of vector, matrix, tile or tuple type inside a compile-time expression
    (`wp.static(len(v))`): only its length (rows of a matrix, the first axis of a tile, elements of a tuple)
    is known there."""

    def __init__(self, t: Any) -> None:
        self.t = t

    def __len__(self) -> int:
        if is_tuple(self.t):
            return len(self.t.fields)
        shape = self.t.shape if isinstance(getattr(self.t, "shape", None), tuple) else self.t._shape_
        return shape[0]

    def __repr__(self) -> str:
        return f"<a {T.type_name(self.t)} kernel variable: only len() of it is known at compile time>"


_ATOMIC_BITS = {"bit_and": "and", "bit_or": "or", "bit_xor": "xor"}  # augmented bit operators -> atomics
_TRANSFORM_PARTS = {"p": (0, 3), "q": (3, 4)}  # a transform's translation and rotation: (first component, count)
_UNSET = object()


def _always_returns(block: list[ir.Stmt] | tuple[ir.Stmt, ...]) -> bool:
    """Whether running a block always ends in a return: it holds one, an if whose branches both always
    return, or a `while True` loop that no break leaves."""
    for s in block:
        if isinstance(s, ir.Return):
            return True
        if isinstance(s, ir.If) and _always_returns(s.body) and _always_returns(s.orelse):
            return True
        if isinstance(s, ir.While) and isinstance(s.cond, Const) and s.cond.value and not _breaks(s.body):
            return True
    return False


def _breaks(block: tuple[ir.Stmt, ...]) -> bool:
    """Whether a loop body holds a break of its own loop (not of a loop nested in it)."""
    return any(isinstance(s, ir.Break) or (isinstance(s, ir.If) and (_breaks(s.body) or _breaks(s.orelse)))
               for s in block)


def _leaves(stmts: list[ast.stmt]) -> bool:
    """Whether a branch never carries on after its `if`: it ends in return, break or continue, or in an
    if whose branches both leave."""
    if not stmts:
        return False
    last = stmts[-1]
    if isinstance(last, ast.Return | ast.Break | ast.Continue):
        return True
    return isinstance(last, ast.If) and _leaves(last.body) and _leaves(last.orelse)


def _has_bare_return(block: list) -> bool:
    return any(isinstance(s, ir.Return) and s.value is None for s in ir.walk(tuple(block)))


def _fits(v: int, t: Any) -> bool:
    bits = 8 * t.size
    return (-(2 ** (bits - 1)) <= v < 2 ** (bits - 1)) if t.is_signed else 0 <= v < 2**bits


def _coerce(value: Any, t: Any, explicit: bool = False) -> Any:
    """A constant's value as type `t`, or None when an integer would lose bits: implicitly it must lie in
    t's range; an explicit cast may also reinterpret the sign at the same width (wp.uint32(-1)). A float
    cast to an integer type truncates toward zero first."""
    if t.is_float:
        return float(value)
    if t is T.bool_:
        return bool(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            return None
        value = math.trunc(value)
    bits = 8 * t.size
    if not (_fits(value, t) or explicit and -(2 ** (bits - 1)) <= value < 2**bits):
        return None
    return int(T._py_value(t, value))


def _python_alias(obj: Any) -> str | None:
    if isinstance(obj, pytypes.BuiltinFunctionType):
        name = obj.__name__
        if getattr(obj, "__module__", None) in ("math", "builtins") or obj is getattr(math, name, None):
            return B.PYTHON_ALIASES.get(name)
    return None


def _is_dotted_name(node: ast.expr) -> bool:
    """Whether `node` is a plain name or a chain of attributes on one (`wp.types.tid`)."""
    while isinstance(node, ast.Attribute):
        node = node.value
    return isinstance(node, ast.Name)


def _converts(v: Operand, t: Any) -> bool:
    """Whether `v` is a `t` or a literal that converts to one implicitly (as Builder.convert takes it)."""
    return v.type == t or (isinstance(v, Const) and v.weak and T.is_scalar(t) and t is not T.bool_
                           and (T.is_int(v.type) or t.is_float))


def _annotation_text(ann: Any) -> str:
    """A return annotation as its source spells the types: `int16`, `int`, `tuple[int, int]`."""
    if typing.get_origin(ann) is tuple:
        return f"tuple[{', '.join(_annotation_text(a) for a in typing.get_args(ann))}]"
    return getattr(ann, "__name__", repr(ann))


def _describe(obj: Any) -> str:
    if isinstance(obj, pytypes.ModuleType):
        return f"module '{obj.__name__}'"
    if isinstance(obj, type):
        return f"type '{obj.__name__}'"
    if callable(obj):
        return f"'{getattr(obj, '__qualname__', getattr(obj, '__name__', repr(obj)))}'"
    return f"'{type(obj).__name__}' object"
