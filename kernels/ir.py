"""The typed intermediate representation between the Python front end and code generation.

Three-address form with structured control flow: every expression's operands are variables or
constants, every statement is one step, and `if`/`for`/`while` keep their nesting so code
generation (and the adjoint pass) can walk the tree. Nodes are frozen dataclasses; `dump()`
prints a function readably (`wp.config.print_ir`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .types import is_scalar, type_name


@dataclass(frozen=True)
class ArrayType:
    """The type of an array value inside a kernel: element dtype and number of dimensions."""

    dtype: Any
    ndim: int
    indexed: bool = False  # an indexedarray: element i of dimension d is data[indices[d][i]]

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


# -- expressions (the right-hand sides of Assign) ---------------------------------------------


@dataclass(frozen=True)
class Call:
    """A builtin overload or a user function instance applied to operands."""

    target: Any  # builtins.Overload or module.FuncInstance
    args: tuple[Operand, ...]
    type: Any = None  # for a builtin with out parameters: the record of its result and outputs

    def __str__(self) -> str:
        return f"{self.target.name}({', '.join(map(str, self.args))})"


@dataclass(frozen=True)
class Load:
    """Read `array[indices]` (all dimensions indexed)."""

    array: Operand
    indices: tuple[Operand, ...]
    site: int

    def __str__(self) -> str:
        return f"load {self.array}[{', '.join(map(str, self.indices))}]"


@dataclass(frozen=True)
class View:
    """The sub-array `array[indices]` with fewer indices than dimensions."""

    array: Operand
    indices: tuple[Operand, ...]

    def __str__(self) -> str:
        return f"view {self.array}[{', '.join(map(str, self.indices))}]"


@dataclass(frozen=True)
class Extract:
    """A component of a vector (`v[i]`), an element (`m[i, j]`) or row (`m[i]`) of a matrix."""

    value: Operand
    indices: tuple[Operand, ...]

    def __str__(self) -> str:
        return f"extract {self.value}[{', '.join(map(str, self.indices))}]"


@dataclass(frozen=True)
class Shape:
    """`array.shape[dim]`."""

    array: Operand
    dim: int

    def __str__(self) -> str:
        return f"shape {self.array}[{self.dim}]"


@dataclass(frozen=True)
class Construct:
    """A value of `type` from components, a broadcast scalar, nothing (zeros) or a conversion."""

    type: Any
    args: tuple[Operand, ...]

    def __str__(self) -> str:
        return f"{type_name(self.type)}({', '.join(map(str, self.args))})"


@dataclass(frozen=True)
class Field:
    """`value.name` of a struct."""

    value: Operand
    name: str

    def __str__(self) -> str:
        return f"{self.value}.{self.name}"


@dataclass(frozen=True)
class Tid:
    """Component `dim` of the thread index for a launch unpacked into `count` indices."""

    dim: int
    count: int

    def __str__(self) -> str:
        return f"tid[{self.dim}/{self.count}]"


@dataclass(frozen=True)
class Copy:
    """The value of another operand (assignment between variables)."""

    value: Operand

    def __str__(self) -> str:
        return str(self.value)


Expr = Call | Load | View | Extract | Field | Shape | Construct | Tid | Copy


# -- statements ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Stmt:
    line: int = field(default=0, kw_only=True)


@dataclass(frozen=True)
class Assign(Stmt):
    dest: Var
    expr: Expr

    def __str__(self) -> str:
        return f"{self.dest} = {self.expr}"


@dataclass(frozen=True)
class Store(Stmt):
    array: Operand
    indices: tuple[Operand, ...]
    value: Operand
    site: int

    def __str__(self) -> str:
        return f"store {self.array}[{', '.join(map(str, self.indices))}] = {self.value}"


@dataclass(frozen=True)
class Atomic(Stmt):
    """`dest = op(&array[indices], value)`, returning the previous value."""

    op: str  # "add", "sub", "min", "max", "exch", "cas", "and", "or", "xor"
    array: Operand
    indices: tuple[Operand, ...]
    value: Operand
    dest: Var | None
    site: int
    compare: Operand | None = None  # for "cas": the value expected in memory

    def __str__(self) -> str:
        lhs = f"{self.dest} = " if self.dest is not None else ""
        cmp = f"{self.compare}, " if self.compare is not None else ""
        return f"{lhs}atomic_{self.op} {self.array}[{', '.join(map(str, self.indices))}], {cmp}{self.value}"


@dataclass(frozen=True)
class SetComponent(Stmt):
    """`var[indices] = value` on a local vector or matrix."""

    var: Var
    indices: tuple[Operand, ...]
    value: Operand

    def __str__(self) -> str:
        return f"{self.var}[{', '.join(map(str, self.indices))}] = {self.value}"


@dataclass(frozen=True)
class SetField(Stmt):
    """`var.name = value` on a local struct."""

    var: Var
    name: str
    value: Operand

    def __str__(self) -> str:
        return f"{self.var}.{self.name} = {self.value}"


@dataclass(frozen=True)
class Print(Stmt):
    """`print(...)` / `wp.printf(...)`: `fmt` is a C format string with one directive per operand.
    `check` (expect_near / expect_eq) instead prints only when its comparison fails."""

    fmt: str
    args: tuple[Operand, ...]
    check: str | None = None

    def __str__(self) -> str:
        return f"printf {self.fmt!r}, {', '.join(map(str, self.args))}"


@dataclass(frozen=True)
class Eval(Stmt):
    """A call kept for its side effects only."""

    expr: Call

    def __str__(self) -> str:
        return str(self.expr)


@dataclass(frozen=True)
class If(Stmt):
    cond: Operand
    body: tuple[Stmt, ...]
    orelse: tuple[Stmt, ...]


@dataclass(frozen=True)
class For(Stmt):
    """`for var in range(start, stop, step)`; the bounds are evaluated once, before the loop."""

    var: Var
    start: Operand
    stop: Operand
    step: Operand
    body: tuple[Stmt, ...]


@dataclass(frozen=True)
class While(Stmt):
    """Run `cond_body`, test `cond`, run `body`; repeat while `cond` holds."""

    cond_body: tuple[Stmt, ...]
    cond: Operand
    body: tuple[Stmt, ...]


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


def array_effects(fn: Function, callee_effects: dict) -> tuple[frozenset[int], frozenset[int]]:
    """Which array parameters (by position) `fn` may read values from and may write.

    Array locals alias the parameters they are copied or viewed from; a call maps its callee's
    effects (`callee_effects[name] = (reads, writes)`) onto the arguments it passes.
    Atomic add/sub only write (their previous value is not a read that gradients depend on).
    """
    alias: dict[Var, set[int]] = {p: {i} for i, p in enumerate(fn.params) if isinstance(p.type, ArrayType)}
    reads: set[int] = set()
    writes: set[int] = set()

    def of(o: Any) -> set[int]:
        return alias.get(o, set()) if isinstance(o, Var) else set()

    def visit(s: Stmt) -> None:
        if isinstance(s, Assign):
            e = s.expr
            if isinstance(s.dest.type, ArrayType) and isinstance(e, Copy | View):
                src = e.value if isinstance(e, Copy) else e.array
                alias.setdefault(s.dest, set()).update(of(src))
            elif isinstance(e, Load):
                reads.update(of(e.array))
            elif isinstance(e, Call) and e.target.native in callee_effects:
                _call(e)
        elif isinstance(s, Store):
            writes.update(of(s.array))
        elif isinstance(s, Atomic):
            writes.update(of(s.array))
            if s.op not in ("add", "sub"):
                reads.update(of(s.array))
        elif isinstance(s, Eval) and s.expr.target.native in callee_effects:
            _call(s.expr)

    def _call(e: Call) -> None:
        r, w = callee_effects[e.target.native]
        for i, a in enumerate(e.args):
            if i in r:
                reads.update(of(a))
            if i in w:
                writes.update(of(a))

    if fn.native_code is not None:  # a C++ snippet: assume it reads every array it is given
        return frozenset(alias), frozenset()
    for _ in range(2):  # a second pass settles aliases made later in a loop body
        for s in walk(fn.body):
            visit(s)
    return frozenset(reads), frozenset(writes)


def operands(s: Stmt) -> list[Any]:
    """Every operand a statement reads (arrays, indices, values, conditions, loop bounds)."""
    if isinstance(s, Assign):
        e = s.expr
        if isinstance(e, Copy):
            return [e.value]
        if isinstance(e, Call | Construct):
            return list(e.args)
        if isinstance(e, Load | View):
            return [e.array, *e.indices]
        if isinstance(e, Extract):
            return [e.value, *e.indices]
        if isinstance(e, Field):
            return [e.value]
        if isinstance(e, Shape):
            return [e.array]
        return []
    if isinstance(s, Store):
        return [s.array, *s.indices, s.value]
    if isinstance(s, Atomic):
        return [s.array, *s.indices, s.value] + ([s.compare] if s.compare is not None else [])
    if isinstance(s, SetComponent):
        return [s.var, *s.indices, s.value]
    if isinstance(s, SetField):
        return [s.var, s.value]
    if isinstance(s, Eval):
        return list(s.expr.args)
    if isinstance(s, Print):
        return list(s.args)
    if isinstance(s, If | While):
        return [s.cond]
    if isinstance(s, For):
        return [s.start, s.stop, s.step]
    if isinstance(s, Return):
        return [s.value] if s.value is not None else []
    return []


def walk(body: tuple[Stmt, ...]):
    """Every statement of a block, nested ones included, in order."""
    for s in body:
        yield s
        for sub in ("cond_body", "body", "orelse"):
            yield from walk(getattr(s, sub, ()))


def private_reductions(fn: Function, kind: str) -> dict[int, tuple[Var, tuple]]:
    """Statements whose array update can accumulate privately per thread (or CPU chunk) and be applied
    with one atomic at the end: `{id(stmt): (array parameter, constant indices)}`.

    kind "atomic": `atomic_add/sub(p, consts, v)` (and `p[consts] += v`) whose result is unused, where p
    is used in no other way; "load": `v = p[consts]` loads, where p is used in no other way (their
    adjoints are such additions into p's gradient).
    """
    stmts = list(walk(fn.body))
    params = {p for p in fn.params if isinstance(p.type, ArrayType) and is_scalar(p.type.dtype)}
    read = {o for s in stmts for o in operands(s) if isinstance(o, Var)}
    found: dict[int, tuple[Var, tuple]] = {}
    for s in stmts:
        if kind == "atomic" and isinstance(s, Atomic) and s.op in ("add", "sub") and s.array in params \
                and all(isinstance(i, Const) for i in s.indices) and (s.dest is None or s.dest not in read):
            found[id(s)] = (s.array, tuple(i.value for i in s.indices))
        elif kind == "load" and isinstance(s, Assign) and isinstance(s.expr, Load) and s.expr.array in params \
                and all(isinstance(i, Const) for i in s.expr.indices):
            found[id(s)] = (s.expr.array, tuple(i.value for i in s.expr.indices))
    # keep only parameters that are used in no other way
    claimed = {p for p, _ in found.values()}
    for s in stmts:
        uses = [o for o in operands(s) if o in claimed]
        if uses and id(s) not in found:
            claimed -= set(uses)
        elif id(s) in found:
            arr = found[id(s)][0]
            others = [o for o in operands(s) if o == arr]
            if len(others) > 1:  # the array also feeds the value or an index
                claimed.discard(arr)
    return {k: v for k, v in found.items() if v[0] in claimed}



def thread_exclusive_arrays(fn: Function) -> set[Var]:
    """Array parameters that every access indexes by exactly this thread's index (`a[i]` with
    `i = wp.tid()`, or `a[i, j]` with `i, j = wp.tid()`): no two threads of a launch touch the same
    element, so their gradient updates need no atomics."""
    stmts = list(walk(fn.body))
    assigned: dict[Var, int] = {}
    for s in stmts:
        d = s.var if isinstance(s, SetComponent | SetField | For) else getattr(s, "dest", None)
        if isinstance(d, Var):
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
        access = None
        if isinstance(s, Assign) and isinstance(s.expr, Load):
            access = (s.expr.array, s.expr.indices)
        elif isinstance(s, Store | Atomic):
            access = (s.array, s.indices)
        exclusive = access is not None and access[0] in candidates and _is_thread_index(access[1], tid)
        for o in operands(s):
            if o in candidates and not (exclusive and o is access[0] and operands(s).count(o) == 1):
                candidates.discard(o)
    return candidates


def _is_thread_index(indices: tuple, tid: dict) -> bool:
    dims = [tid.get(i) if isinstance(i, Var) else None for i in indices]
    if len(indices) == 1:
        return dims[0] == (0, 1)
    return all(d == (k, len(indices)) for k, d in enumerate(dims))
