"""The typed intermediate representation between the Python front end and code generation.

Three-address form with structured control flow: every expression's operands are variables or
constants, every statement is one step, and `if`/`for`/`while` keep their nesting so code
generation (and the adjoint pass) can walk the tree. Nodes are frozen dataclasses; `dump()`
prints a function readably (`wp.config.print_ir`).

Every node answers the same questions, so passes need not know node classes: `uses()` /
`operands()` (what it reads, and how), `accesses()` (the array elements it touches) and, for
statements, `targets()` (the variables it writes), `blocks()` / `with_blocks()` (nested blocks) and
`call()`. Each statement keeps its Python `line`, which code generation turns into `#line` directives.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from enum import Enum
from typing import Any, NamedTuple

from .types import is_composite, is_matrix, is_scalar, type_name, vector


@dataclass(frozen=True)
class ArrayType:
    """The type of an array value inside a kernel: element dtype and number of dimensions."""

    dtype: Any
    ndim: int
    indexed: bool = False  # an indexedarray: element i of dimension d is data[indices[d][i]]
    # a view made by slicing inside the kernel: its innermost stride may not be the element size, so
    # element accesses never take the contiguous fast path (not part of the type's identity)
    strided: bool = field(default=False, compare=False)

    @property
    def __name__(self) -> str:  # lets type_name() print it
        kind = "indexedarray" if self.indexed else "array"
        return f"{kind}(dtype={type_name(self.dtype)}, ndim={self.ndim})"

    def __str__(self) -> str:
        return self.__name__

    @property
    def cname(self) -> str:
        """The C++ type of the array descriptor kernels receive."""
        return f"lw::{'indexedarray_t' if self.indexed else 'array_t'}<{ctype(self.dtype)}>"


def ctype(t: Any) -> str:
    """The C++ spelling of a kernel type (None: void)."""
    return "void" if t is None else t.cname


@dataclass(frozen=True)
class Var:
    """A local variable or temporary; `name` is unique within its function."""

    name: str
    type: Any

    def __str__(self) -> str:
        return f"%{self.name}"


@dataclass(frozen=True)
class Const:
    """A compile-time constant. `weak` marks a bare Python literal whose type may still adapt."""

    value: Any
    type: Any
    weak: bool = False

    def __str__(self) -> str:
        return f"{self.value!r}:{type_name(self.type)}"


Operand = Var | Const


class Use(Enum):
    """How a node uses one of its operands."""

    VALUE = "value"  # the result depends on the operand's value (an index, a condition, a nonlinear argument)
    LINEAR = "linear"  # the node's targets are a linear function of the operand (copies, components, sums)
    STORE = "store"  # the operand is written as it is into memory or into part of a target


class Mode(Enum):
    """What a statement does to an array element it accesses."""

    READ = "read"
    WRITE = "write"
    ADD = "add"  # accumulates into it (atomic add/sub): the element's previous value does not matter
    UPDATE = "update"  # reads it and writes it (the other atomics)


class Access(NamedTuple):
    """One array element a node reads or writes: `array[indices]`."""

    array: Operand
    indices: tuple[Operand, ...]
    mode: Mode


def _values(ops: tuple[Operand, ...]) -> tuple[tuple[Operand, Use], ...]:
    return tuple((o, Use.VALUE) for o in ops)


class Node:
    """The interface every expression and statement offers the passes, so they need not know node classes."""

    def uses(self) -> tuple[tuple[Operand, Use], ...]:
        """Every operand the node reads, with how it uses it, in a stable order."""
        return ()

    def operands(self) -> tuple[Operand, ...]:
        """Every operand the node reads (arrays, indices, values, conditions, loop bounds)."""
        return tuple(o for o, _ in self.uses())

    def accesses(self) -> tuple[Access, ...]:
        """The array elements the node reads or writes."""
        return ()


# -- expressions (the right-hand sides of Assign) ---------------------------------------------


@dataclass(frozen=True)
class Expr(Node):
    """The value an Assign gives its destination."""

    def aliased(self) -> tuple[Operand, ...]:
        """The arrays whose memory the expression's value (an array) refers to."""
        return ()


@dataclass(frozen=True)
class Call(Expr):
    """A builtin overload or a user function instance applied to operands."""

    target: Any  # builtins.Overload or module.FuncInstance
    args: tuple[Operand, ...]
    type: Any = None  # for a builtin with out parameters: the record of its result and outputs, which
    # codegen fills through references; the IR call stays pure (outputs are that record's fields)

    def uses(self) -> tuple[tuple[Operand, Use], ...]:
        return _values(self.args)

    def __str__(self) -> str:
        return f"{self.target.name}({', '.join(map(str, self.args))})"


@dataclass(frozen=True)
class Load(Expr):
    """Read `array[indices]` (all dimensions indexed)."""

    array: Operand
    indices: tuple[Operand, ...]
    site: int

    def uses(self) -> tuple[tuple[Operand, Use], ...]:
        return _values((self.array, *self.indices))

    def accesses(self) -> tuple[Access, ...]:
        return (Access(self.array, self.indices, Mode.READ),)

    def __str__(self) -> str:
        return f"load {self.array}[{', '.join(map(str, self.indices))}]"


@dataclass(frozen=True)
class View(Expr):
    """The sub-array `array[indices]` with fewer indices than dimensions."""

    array: Operand
    indices: tuple[Operand, ...]
    site: int = -1  # the bounds-check site of the indices (debug builds report it)

    def uses(self) -> tuple[tuple[Operand, Use], ...]:
        return _values((self.array, *self.indices))

    def aliased(self) -> tuple[Operand, ...]:
        return (self.array,)

    def __str__(self) -> str:
        return f"view {self.array}[{', '.join(map(str, self.indices))}]"


@dataclass(frozen=True)
class SliceView(Expr):
    """`array[i, a:b:s, ...]`: a view with sliced axes kept (Python slice semantics, runtime bounds) and
    indexed axes dropped. `bounds[d]` is (start, stop, step) for a sliced axis (None: omitted) and
    (index, None, None) for an indexed one; `sliced[d]` tells which."""

    array: Operand
    bounds: tuple[tuple[Operand | None, Operand | None, Operand | None], ...]
    sliced: tuple[bool, ...]

    def uses(self) -> tuple[tuple[Operand, Use], ...]:
        return _values((self.array, *(b for bs in self.bounds for b in bs if b is not None)))

    def aliased(self) -> tuple[Operand, ...]:
        return (self.array,)

    def __str__(self) -> str:
        def one(b: tuple, s: bool) -> str:
            return ":".join("" if x is None else str(x) for x in b) if s else str(b[0])
        return f"slice {self.array}[{', '.join(one(b, s) for b, s in zip(self.bounds, self.sliced, strict=True))}]"


@dataclass(frozen=True)
class Extract(Expr):
    """A component of a vector (`v[i]`), an element (`m[i, j]`) or row (`m[i]`) of a matrix."""

    value: Operand
    indices: tuple[Operand, ...]
    site: int = -1  # the bounds-check site of dynamic indices (-1: all constant)

    def uses(self) -> tuple[tuple[Operand, Use], ...]:
        return ((self.value, Use.LINEAR), *_values(self.indices))

    def __str__(self) -> str:
        return f"extract {self.value}[{', '.join(map(str, self.indices))}]"


@dataclass(frozen=True)
class Shape(Expr):
    """`array.shape[dim]`."""

    array: Operand
    dim: int

    def uses(self) -> tuple[tuple[Operand, Use], ...]:
        return ((self.array, Use.VALUE),)

    def __str__(self) -> str:
        return f"shape {self.array}[{self.dim}]"


@dataclass(frozen=True)
class Construct(Expr):
    """A value of `type` from components, a broadcast scalar, nothing (zeros) or a conversion."""

    type: Any
    args: tuple[Operand, ...]

    def uses(self) -> tuple[tuple[Operand, Use], ...]:
        """A vector, matrix, ... is linear in its components; a scalar conversion needs its value."""
        use = Use.LINEAR if is_composite(self.type) else Use.VALUE
        return tuple((a, use) for a in self.args)

    def __str__(self) -> str:
        return f"{type_name(self.type)}({', '.join(map(str, self.args))})"


@dataclass(frozen=True)
class Field(Expr):
    """`value.name` of a struct."""

    value: Operand
    name: str

    def uses(self) -> tuple[tuple[Operand, Use], ...]:
        return ((self.value, Use.LINEAR),)

    def __str__(self) -> str:
        return f"{self.value}.{self.name}"


@dataclass(frozen=True)
class Tid(Expr):
    """Component `dim` of the thread index for a launch unpacked into `count` indices."""

    dim: int
    count: int

    def __str__(self) -> str:
        return f"tid[{self.dim}/{self.count}]"


@dataclass(frozen=True)
class Copy(Expr):
    """The value of another operand (assignment between variables)."""

    value: Operand

    def uses(self) -> tuple[tuple[Operand, Use], ...]:
        return ((self.value, Use.LINEAR),)

    def aliased(self) -> tuple[Operand, ...]:
        return (self.value,) if isinstance(self.value.type, ArrayType) else ()

    def __str__(self) -> str:
        return str(self.value)


@dataclass(frozen=True)
class Part:
    """One step into a value held in memory: the field `name` of a struct, or the components `indices` of a
    vector or matrix (a single index of a matrix: a row). `of` is the type stepped into."""

    of: Any
    name: str | None = None
    indices: tuple[Operand, ...] = ()
    site: int = -1  # the bounds-check site of dynamic indices (-1: none, or all constant)

    @property
    def type(self) -> Any:
        """The type of the part."""
        if self.name is not None:
            return self.of.fields[self.name]
        if is_matrix(self.of) and len(self.indices) == 1:
            return vector(self.of._shape_[1], self.of._wp_scalar_type_)
        return self.of._wp_scalar_type_

    def __str__(self) -> str:
        return f".{self.name}" if self.name is not None else f"[{', '.join(map(str, self.indices))}]"


def _path_values(path: tuple[Part, ...]) -> tuple[tuple[Operand, Use], ...]:
    return _values(tuple(i for p in path for i in p.indices))


# -- statements ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Stmt(Node):
    """One step of a function body; `line` is its Python source line (0: unknown)."""

    line: int = field(default=0, kw_only=True)

    def targets(self) -> tuple[Var, ...]:
        """The variables the statement writes: the one place passes learn what a statement assigns."""
        return ()

    def blocks(self) -> tuple[tuple[Stmt, ...], ...]:
        """The nested blocks, in the order they run first."""
        return ()

    def with_blocks(self, *blocks: tuple[Stmt, ...]) -> Stmt:
        """The same statement with its nested blocks replaced (as many, in the order of `blocks()`)."""
        return self

    def call(self) -> Call | None:
        """The call the statement makes, if any."""
        return None


@dataclass(frozen=True)
class Assign(Stmt):
    dest: Var
    expr: Expr

    def uses(self) -> tuple[tuple[Operand, Use], ...]:
        return self.expr.uses()

    def accesses(self) -> tuple[Access, ...]:
        return self.expr.accesses()

    def targets(self) -> tuple[Var, ...]:
        return (self.dest,)

    def call(self) -> Call | None:
        return self.expr if isinstance(self.expr, Call) else None

    def __str__(self) -> str:
        return f"{self.dest} = {self.expr}"


@dataclass(frozen=True)
class Store(Stmt):
    """`array[indices]<path> = value`: the whole element, or the part of it `path` leads to (`b[i].y = v`)."""

    array: Operand
    indices: tuple[Operand, ...]
    value: Operand
    site: int
    path: tuple[Part, ...] = ()

    def uses(self) -> tuple[tuple[Operand, Use], ...]:
        return (*_values((self.array, *self.indices)), *_path_values(self.path), (self.value, Use.STORE))

    def accesses(self) -> tuple[Access, ...]:
        return (Access(self.array, self.indices, Mode.WRITE),)

    def __str__(self) -> str:
        return f"store {self.array}[{', '.join(map(str, self.indices))}]{''.join(map(str, self.path))} = {self.value}"


@dataclass(frozen=True)
class Atomic(Stmt):
    """`dest = op(&array[indices]<path>, value)`, returning the previous value; `path` leads to a part of the
    element (`b[i].y += v`)."""

    op: str  # "add", "sub", "min", "max", "exch", "cas", "and", "or", "xor"
    array: Operand
    indices: tuple[Operand, ...]
    value: Operand
    dest: Var | None
    site: int
    compare: Operand | None = None  # for "cas": the value expected in memory
    path: tuple[Part, ...] = ()

    @property
    def accumulates(self) -> bool:
        """Whether it adds `value` into the element (add, sub) rather than combining the two."""
        return self.op in ("add", "sub")

    def uses(self) -> tuple[tuple[Operand, Use], ...]:
        value = (self.value, Use.STORE if self.accumulates else Use.VALUE)
        compare = (self.compare,) if self.compare is not None else ()
        return (*_values((self.array, *self.indices)), *_path_values(self.path), value, *_values(compare))

    def accesses(self) -> tuple[Access, ...]:
        return (Access(self.array, self.indices, Mode.ADD if self.accumulates else Mode.UPDATE),)

    def targets(self) -> tuple[Var, ...]:
        return (self.dest,) if self.dest is not None else ()

    def __str__(self) -> str:
        lhs = f"{self.dest} = " if self.dest is not None else ""
        cmp = f"{self.compare}, " if self.compare is not None else ""
        where = f"{self.array}[{', '.join(map(str, self.indices))}]{''.join(map(str, self.path))}"
        return f"{lhs}atomic_{self.op} {where}, {cmp}{self.value}"


@dataclass(frozen=True)
class SetComponent(Stmt):
    """`var[indices] = value` on a local vector or matrix."""

    var: Var
    indices: tuple[Operand, ...]
    value: Operand
    site: int = -1  # the bounds-check site of dynamic indices (-1: all constant)

    def uses(self) -> tuple[tuple[Operand, Use], ...]:
        return ((self.var, Use.LINEAR), *_values(self.indices), (self.value, Use.STORE))

    def targets(self) -> tuple[Var, ...]:
        return (self.var,)

    def __str__(self) -> str:
        return f"{self.var}[{', '.join(map(str, self.indices))}] = {self.value}"


@dataclass(frozen=True)
class SetField(Stmt):
    """`var.name = value` on a local struct."""

    var: Var
    name: str
    value: Operand

    def uses(self) -> tuple[tuple[Operand, Use], ...]:
        return ((self.var, Use.LINEAR), (self.value, Use.STORE))

    def targets(self) -> tuple[Var, ...]:
        return (self.var,)

    def __str__(self) -> str:
        return f"{self.var}.{self.name} = {self.value}"


@dataclass(frozen=True)
class Print(Stmt):
    """`print(...)` / `wp.printf(...)`: `fmt` is a C format string with one directive per operand.
    `check` (expect_near / expect_eq) instead prints only when its comparison fails."""

    fmt: str
    args: tuple[Operand, ...]
    check: str | None = None

    def uses(self) -> tuple[tuple[Operand, Use], ...]:
        return _values(self.args)

    def __str__(self) -> str:
        return f"printf {self.fmt!r}, {', '.join(map(str, self.args))}"


@dataclass(frozen=True)
class Eval(Stmt):
    """A call kept for its side effects only."""

    expr: Call

    def uses(self) -> tuple[tuple[Operand, Use], ...]:
        return self.expr.uses()

    def call(self) -> Call | None:
        return self.expr

    def __str__(self) -> str:
        return str(self.expr)


@dataclass(frozen=True)
class If(Stmt):
    cond: Operand
    body: tuple[Stmt, ...]
    orelse: tuple[Stmt, ...]

    def uses(self) -> tuple[tuple[Operand, Use], ...]:
        return ((self.cond, Use.VALUE),)

    def blocks(self) -> tuple[tuple[Stmt, ...], ...]:
        return (self.body, self.orelse)

    def with_blocks(self, *blocks: tuple[Stmt, ...]) -> If:
        body, orelse = blocks
        return replace(self, body=body, orelse=orelse)


@dataclass(frozen=True)
class For(Stmt):
    """`for var in range(start, stop, step)`; the bounds are evaluated once, before the loop."""

    var: Var
    start: Operand
    stop: Operand
    step: Operand
    body: tuple[Stmt, ...]

    def uses(self) -> tuple[tuple[Operand, Use], ...]:
        return _values((self.start, self.stop, self.step))

    def targets(self) -> tuple[Var, ...]:
        return (self.var,)

    def blocks(self) -> tuple[tuple[Stmt, ...], ...]:
        return (self.body,)

    def with_blocks(self, *blocks: tuple[Stmt, ...]) -> For:
        (body,) = blocks
        return replace(self, body=body)


@dataclass(frozen=True)
class While(Stmt):
    """Run `cond_body`, test `cond`, run `body`; repeat while `cond` holds."""

    cond_body: tuple[Stmt, ...]
    cond: Operand
    body: tuple[Stmt, ...]

    def uses(self) -> tuple[tuple[Operand, Use], ...]:
        return ((self.cond, Use.VALUE),)

    def blocks(self) -> tuple[tuple[Stmt, ...], ...]:
        return (self.cond_body, self.body)

    def with_blocks(self, *blocks: tuple[Stmt, ...]) -> While:
        cond_body, body = blocks
        return replace(self, cond_body=cond_body, body=body)


@dataclass(frozen=True)
class Break(Stmt):
    def __str__(self) -> str:
        return "break"


@dataclass(frozen=True)
class Continue(Stmt):
    def __str__(self) -> str:
        return "continue"


@dataclass(frozen=True)
class Return(Stmt):
    value: Operand | None = None

    def uses(self) -> tuple[tuple[Operand, Use], ...]:
        return ((self.value, Use.VALUE),) if self.value is not None else ()

    def __str__(self) -> str:
        return "return" if self.value is None else f"return {self.value}"


@dataclass(frozen=True)
class Function:
    """A typed function body: a kernel (`is_kernel`) or an instance of a user function."""

    name: str
    params: tuple[Var, ...]
    ret: Any
    locals: tuple[Var, ...]
    body: tuple[Stmt, ...]
    is_kernel: bool
    tid_count: int = 0
    native_code: tuple | None = None  # wp.func_native: (snippet, adjoint snippet, replay snippet)
    filename: str = ""  # the Python file the statements' lines refer to ("" : unknown)

    def dump(self) -> str:
        lines = [
            f"{'kernel' if self.is_kernel else 'func'} {self.name}("
            + ", ".join(f"{p}: {type_name(p.type)}" for p in self.params)
            + f") -> {type_name(self.ret)}"
        ]
        _dump_block(self.body, 1, lines)
        return "\n".join(lines)


def _dump_block(body: tuple[Stmt, ...], depth: int, out: list[str]) -> None:
    pad = "    " * depth
    for s in body:
        if isinstance(s, If):
            out.append(f"{pad}if {s.cond}:")
            _dump_block(s.body, depth + 1, out)
            if s.orelse:
                out.append(f"{pad}else:")
                _dump_block(s.orelse, depth + 1, out)
        elif isinstance(s, For):
            out.append(f"{pad}for {s.var} in range({s.start}, {s.stop}, {s.step}):")
            _dump_block(s.body, depth + 1, out)
        elif isinstance(s, While):
            out.append(f"{pad}while:")
            _dump_block(s.cond_body, depth + 2, out)
            out.append(f"{pad}    test {s.cond}")
            _dump_block(s.body, depth + 1, out)
        else:
            out.append(f"{pad}{s}")


class ArrayEvent(NamedTuple):
    """One access of array parameters by a statement: which parameters (by position), how, where."""

    mode: Mode
    params: frozenset[int]
    line: int
    loops: tuple[int, ...]  # the loops around it (ids of their statements), outermost first
    stmt: Stmt
    direct: bool  # the statement itself accesses the array (not a function it calls)


def array_events(fn: Function, callee_effects: dict) -> list[ArrayEvent]:
    """Every access of an array parameter in program order, through the locals that alias it (copies and
    views) and the user functions it is passed to (`callee_effects[name] = (reads, writes)`: such a call
    writes, then reads)."""
    alias: dict[Var, set[int]] = {p: {i} for i, p in enumerate(fn.params) if isinstance(p.type, ArrayType)}

    def of(o: Any) -> frozenset[int]:
        return frozenset(alias.get(o, ())) if isinstance(o, Var) else frozenset()

    for _ in range(2):  # a second pass settles aliases made later in a loop body
        for s in walk(fn.body):
            if isinstance(s, Assign):
                for src in s.expr.aliased():
                    alias.setdefault(s.dest, set()).update(of(src))
    events: list[ArrayEvent] = []

    def visit(body: tuple[Stmt, ...], loops: tuple[int, ...]) -> None:
        for s in body:
            for a in s.accesses():
                if of(a.array):
                    events.append(ArrayEvent(a.mode, of(a.array), s.line, loops, s, True))
            call = s.call()
            if call is not None and call.target.native in callee_effects:
                r, w = callee_effects[call.target.native]
                for mode, used in ((Mode.WRITE, w), (Mode.READ, r)):
                    params = frozenset().union(*(of(arg) for i, arg in enumerate(call.args) if i in used))
                    if params:
                        events.append(ArrayEvent(mode, params, s.line, loops, s, False))
            elif call is not None and hasattr(call.target, "writes"):  # a builtin given arrays (tile_load, ...):
                # it reads them, or writes them (tile_store; tile_atomic_add accumulates)
                mode = Mode.READ if not call.target.writes else Mode.ADD if "atomic" in call.target.name \
                    else Mode.WRITE
                params = frozenset().union(*(of(arg) for arg in call.args if isinstance(arg.type, ArrayType)))
                if params:
                    events.append(ArrayEvent(mode, params, s.line, loops, s, True))
            inner = (*loops, id(s)) if isinstance(s, For | While) else loops
            for b in s.blocks():
                visit(b, inner)

    visit(fn.body, ())
    return events


def array_effects(fn: Function, callee_effects: dict) -> tuple[frozenset[int], frozenset[int]]:
    """Which array parameters (by position) `fn` may read values from and may write.

    Array locals alias the parameters they are copied or viewed from; a call maps its callee's
    effects (`callee_effects[name] = (reads, writes)`) onto the arguments it passes.
    Atomic add/sub only write (their previous value is not a read that gradients depend on).
    """
    if fn.native_code is not None:  # a C++ snippet: assume it reads every array it is given
        return frozenset(i for i, p in enumerate(fn.params) if isinstance(p.type, ArrayType)), frozenset()
    reads: set[int] = set()
    writes: set[int] = set()
    for e in array_events(fn, callee_effects):
        if e.mode in (Mode.READ, Mode.UPDATE):
            reads |= e.params
        if e.mode is not Mode.READ:
            writes |= e.params
    return frozenset(reads), frozenset(writes)


def accumulated(fn: Function, callee_effects: dict) -> frozenset[int]:
    """Array parameters (by position) whose previous values may matter to what `fn` leaves in them: read,
    accumulated into (atomics) or written by a function it calls. A buffer handed to `fn` for such a
    parameter must start zeroed; one that is only stored to can start as anything."""
    found: set[int] = set()
    for e in array_events(fn, callee_effects):
        if e.mode is not Mode.WRITE or not e.direct:
            found |= e.params
    return frozenset(found)


def function_effects(functions: list[Function]) -> dict[str, tuple[frozenset[int], frozenset[int]]]:
    """`array_effects` of user functions given callees first (a module's build order), by native name."""
    effects: dict[str, tuple[frozenset[int], frozenset[int]]] = {}
    for f in functions:
        effects[f.name] = array_effects(f, effects)
    return effects


class InPlace(NamedTuple):
    """How a kernel updates array parameters (by position) that it also reads: what its adjoint needs."""

    restorable: frozenset[int]  # every read comes before every write (stores and atomic adds in the kernel
    # itself, no loop around both): its adjoint replays from a copy taken before the launch, and a store
    # takes the element's gradient (the value it replaced did not reach the output through the element)
    updated: frozenset[int]  # only atomic min/max/..., or only stored to before every read (no loop around a
    # store and a read): its adjoint reads the values the launch left, which are the values it read
    conflicts: dict[int, tuple[int, int]]  # otherwise: position -> (line of a read, line of a write before it)
    stores: frozenset[int]  # ids of the Store statements into the restorable arrays


def in_place(fn: Function, callee_effects: dict) -> InPlace:
    """Classify the array parameters `fn` both reads and writes (see InPlace)."""
    events = array_events(fn, callee_effects)
    restorable, updated, conflicts = set(), set(), {}
    for p in sorted({p for e in events for p in e.params}):
        mine = [(k, e) for k, e in enumerate(events) if p in e.params]
        reads = [(k, e) for k, e in mine if e.mode in (Mode.READ, Mode.UPDATE)]
        writes = [(k, e) for k, e in mine if e.mode is not Mode.READ]
        if not reads or not writes:
            continue
        if all(e.mode in (Mode.UPDATE, Mode.ADD) for _, e in mine) or all(
                w[1].mode is Mode.WRITE and w[1].direct and w[0] < r[0] and not set(w[1].loops) & set(r[1].loops)
                for r in reads for w in writes):
            updated.add(p)
            continue
        late = [(r, w) for r in reads for w in writes
                if w[0] < r[0] or set(w[1].loops) & set(r[1].loops) or w[1].mode is Mode.UPDATE or not w[1].direct]
        if late:
            (_, read), (_, write) = late[0]
            conflicts[p] = (read.line, write.line)
        else:
            restorable.add(p)
    stores = frozenset(id(e.stmt) for e in events if e.mode is Mode.WRITE and e.direct and e.params & restorable)
    return InPlace(frozenset(restorable), frozenset(updated), conflicts, stores)


def null_tests(fn: Function, callee_tests: dict) -> frozenset[int]:
    """Which array parameters (by position) `fn` compares with null (`wp.unot(a)`), itself or through the
    functions it calls (`callee_tests[name]`): None is a valid argument for them."""
    params = {p: i for i, p in enumerate(fn.params) if isinstance(p.type, ArrayType)}
    found: set[int] = set()
    for s in walk(fn.body):
        call = s.call()
        if call is None:
            continue
        tested = range(len(call.args)) if call.target.name == "unot" else callee_tests.get(call.target.native, ())
        found.update(params[call.args[i]] for i in tested if call.args[i] in params)
    return frozenset(found)


def walk(body: tuple[Stmt, ...]) -> Iterator[Stmt]:
    """Every statement of a block, nested ones included, in order."""
    for s in body:
        yield s
        for b in s.blocks():
            yield from walk(b)


def private_reductions(fn: Function, kind: str) -> dict[int, tuple[Var, tuple]]:
    """Statements whose array update can accumulate privately per thread (or CPU chunk) and be applied
    with one atomic at the end: `{id(stmt): (array parameter, constant indices)}`.

    kind "atomic": `atomic_add/sub(p, consts, v)` (and `p[consts] += v`) whose result is unused, where p
    is used in no other way; "load": `v = p[consts]` loads, where p is used in no other way (their
    adjoints are such additions into p's gradient).
    """
    stmts = list(walk(fn.body))
    params = {p for p in fn.params if isinstance(p.type, ArrayType) and is_scalar(p.type.dtype)}
    read = {o for s in stmts for o in s.operands() if isinstance(o, Var)}
    mode = Mode.ADD if kind == "atomic" else Mode.READ
    found: dict[int, tuple[Var, tuple]] = {}
    for s in stmts:
        if mode is Mode.ADD and read.intersection(s.targets()):
            continue  # the previous value is used
        for a in s.accesses():
            if a.mode is mode and a.array in params and all(isinstance(i, Const) for i in a.indices):
                found[id(s)] = (a.array, tuple(i.value for i in a.indices))
    # keep only parameters that are used in no other way
    claimed = {p for p, _ in found.values()}
    for s in stmts:
        uses = [o for o in s.operands() if o in claimed]
        if uses and id(s) not in found:
            claimed -= set(uses)
        elif id(s) in found:
            arr = found[id(s)][0]
            if s.operands().count(arr) > 1:  # the array also feeds the value or an index
                claimed.discard(arr)
    return {k: v for k, v in found.items() if v[0] in claimed}


def thread_exclusive_arrays(fn: Function) -> set[Var]:
    """Array parameters that every access indexes by exactly this thread's index (`a[i]` with
    `i = wp.tid()`, or `a[i, j]` with `i, j = wp.tid()`): no two threads of a launch touch the same
    element, so their gradient updates need no atomics."""
    stmts = list(walk(fn.body))
    assigned: dict[Var, int] = {}
    for s in stmts:
        for d in s.targets():
            assigned[d] = assigned.get(d, 0) + 1
    tid: dict[Var, tuple[int, int]] = {}
    for s in fn.body:  # top level only: not inside a loop or a branch
        if isinstance(s, Assign) and assigned.get(s.dest) == 1:
            if isinstance(s.expr, Tid):
                tid[s.dest] = (s.expr.dim, s.expr.count)
            elif isinstance(s.expr, Copy) and s.expr.value in tid:
                tid[s.dest] = tid[s.expr.value]
    candidates = {p for p in fn.params if isinstance(p.type, ArrayType) and not p.type.indexed}  # indices repeat
    for s in stmts:
        ops = s.operands()
        exclusive = {a.array for a in s.accesses() if _is_thread_index(a.indices, tid)}
        for o in ops:
            if o in candidates and not (o in exclusive and ops.count(o) == 1):
                candidates.discard(o)
    return candidates


def zeroable_gradients(fn: Function) -> frozenset[int]:
    """Positions of the array parameters whose every access is this thread's own element, with as many
    dimensions as the launch: in a launch over exactly such an array's shape, each thread of the adjoint
    can zero its gradient element before accumulating into it, and a Tape need not zero the gradient
    beforehand (one pass over the memory instead of two)."""
    exclusive = thread_exclusive_arrays(fn)
    return frozenset(k for k, p in enumerate(fn.params)
                     if k < 31 and p in exclusive and p.type.ndim == max(fn.tid_count, 1))  # bits of an int32


def _is_thread_index(indices: tuple, tid: dict) -> bool:
    dims = [tid.get(i) if isinstance(i, Var) else None for i in indices]
    if len(indices) == 1:
        return dims[0] == (0, 1)
    return all(d == (k, len(indices)) for k, d in enumerate(dims))
