"""Reverse-mode code generation: a kernel's typed IR -> the C++ of its adjoint kernel.

An adjoint body first *replays* the forward computation without side effects (no array stores or
atomics), saving every value an assignment overwrites, then walks the statements *backwards*,
accumulating adjoints with each builtin's `adj_` function and restoring the saved values, so each
statement is differentiated at the values it saw going forward.

Loops are reversed iteration by iteration. Iteration k is recomputed from the loop's entry state
(replaying iterations 0..k-1) before it is differentiated, which restores any loop-carried value
the loop overwrote; when every carried variable only flows linearly (accumulators like `s += f(x)`),
their values are not needed and each iteration is replayed alone (O(N) instead of O(N^2)).
User functions get a replay twin (`rep_f`) and an adjoint (`adj_f(args, adj_args&, adj_ret)`).
"""

from __future__ import annotations

from typing import Any

from loomwork.kernels import ir
from loomwork.kernels import types as T
from loomwork.kernels.builtins import Overload
from loomwork.kernels.codegen import (
    SOURCE_NAME,
    Emitter,
    block_frame,
    ctype,
    entry_points,
    fills_lanes,
    is_block_value,
    lane_call,
    lane_roles,
    lanes_entry,
    number_lines,
    privatize,
    runs_lanes,
    unique_slots,
)
from loomwork.kernels.ir import ArrayType, Use, Var
from loomwork.kernels.structs import is_struct, is_tuple, struct_differentiable, tuple_type

from .normalize import normalize

_LINEAR_OPS = {"add", "sub", "neg", "pos"}


def differentiable(t: Any) -> bool:
    """Whether values of type `t` carry adjoints: float scalars, vectors/matrices of them, structs with such
    fields, and extension value types that say so (`differentiable = True`: their header defines `add`)."""
    if is_struct(t):
        return struct_differentiable(t)
    if T.is_record(t) or isinstance(getattr(t, "differentiable", None), bool):  # extension types, tiles
        return bool(getattr(t, "differentiable", False))
    return T.is_composite(t) and t._wp_scalar_type_.is_float or T.is_float(t)


def _is_temp(v: Var) -> bool:
    return v.name.startswith(("t", "lw_n"))


def _uses(s: ir.Stmt) -> tuple[tuple[Any, Use], ...]:
    """How the adjoint uses a statement's operands: as the IR says, except that a sum, difference or
    negation assigned to a variable is linear in its arguments, and a print plays no part."""
    if isinstance(s, ir.Print):
        return ()
    call = s.call() if isinstance(s, ir.Assign) else None
    if call is not None and isinstance(call.target, Overload) and call.target.name in _LINEAR_OPS:
        return tuple((a, Use.LINEAR) for a in call.args)
    return s.uses()


def _upward_exposed(body: tuple[ir.Stmt, ...], defined: set[Var]) -> set[Var]:
    """Variables `body` may read before assigning them, given those `defined` on entry; `defined` grows by what
    the body assigns on every path (what a branch or a nested loop assigns counts only where certain)."""
    exposed: set[Var] = set()
    for s in body:
        exposed |= {op for op, _ in s.uses() if isinstance(op, Var)} - defined
        if isinstance(s, ir.If):
            branches = [set(defined), set(defined)]
            for block, seen in zip(s.blocks(), branches, strict=True):
                exposed |= _upward_exposed(block, seen)
            defined |= branches[0] & branches[1]
        elif s.blocks():
            inner = defined | set(s.targets())
            for block in s.blocks():
                exposed |= _upward_exposed(block, inner)
        else:
            defined |= set(s.targets())
    return exposed


def loop_carried(loop: ir.For | ir.While) -> tuple[list[Var], bool]:
    """Variables a loop body assigns that outlive an iteration, and whether any of their *values*
    is needed by the reverse pass (False: they only flow linearly, or each iteration assigns them before
    reading them, so iterations reverse in O(N))."""
    stmts = [s for b in loop.blocks() for s in ir.walk(b)]
    assigned = {v for s in stmts for v in s.targets()}
    carried = sorted((v for v in assigned if not _is_temp(v) and v not in loop.targets()), key=lambda v: v.name)
    # greatest set of variables whose values no statement needs: start from everything assigned,
    # drop any variable read for its value or flowing into a variable outside the set
    linear = set(assigned)
    changed = True
    while changed:
        changed = False
        for s in stmts:
            for op, use in _uses(s):
                if not isinstance(op, Var) or op not in linear:
                    continue
                if use is Use.VALUE or (use is Use.LINEAR and not linear.issuperset(s.targets())):
                    linear.discard(op)
                    changed = True
    entering: set[Var] = set(loop.targets())
    exposed: set[Var] = set()
    for block in loop.blocks():  # a while loop's condition block, then its body, share one iteration
        exposed |= _upward_exposed(block, entering)
    return carried, any(v not in linear and v in exposed for v in carried)


def _writes_arrays(call: ir.Call) -> bool:
    """Whether a user function call may have side effects the reverse pass differentiates (it takes arrays)."""
    if isinstance(call.target, Overload):
        return call.target.writes
    return any(isinstance(a.type, ArrayType) for a in call.args)


def active_variables(fn: ir.Function) -> set[Var]:
    """The variables whose adjoint can be nonzero: those whose value flows, through assignments and parts
    set in place, into what the reverse pass differentiates (values stored or atomically applied to arrays,
    the returned value, the arguments of user functions that take arrays). The reverse pass skips the rest,
    so a value used only by a comparison or a branch condition adds nothing to the gradient, not even
    0 * NaN when it is NaN or infinite (as in JAX and PyTorch)."""
    stmts = list(ir.walk(fn.body))
    found: set[Var] = set()
    for s in stmts:
        if isinstance(s, ir.Store | ir.Atomic | ir.Return) and s.value is not None:
            found.add(s.value)
        call = s.call()
        if call is not None and _writes_arrays(call):
            found.update(call.args)
    # backwards, so one pass carries activity along a chain of assignments; loops may need another
    flows = [s for s in reversed(stmts) if isinstance(s, ir.Assign | ir.SetComponent | ir.SetField)]
    changed = True
    while changed:
        changed = False
        for s in flows:
            if found.intersection(s.targets()):
                new = {o for o in s.operands() if isinstance(o, Var)} - found
                if new:
                    found |= new
                    changed = True
    return {v for v in found if isinstance(v, Var)}


class AdjointEmitter(Emitter):
    """Writes the replay and reverse passes of one normalized function."""

    def __init__(self, fn: ir.Function, debug: bool, lanes: int = 0) -> None:
        super().__init__(debug, lanes=lanes)
        self.fn = fn
        self.frame: list[tuple[str, Any]] = []  # with lanes: the block values, in the block's frame
        self.decls: list[str] = []
        self.declared: set[str] = set()
        self.nsites = 0
        self.site_ids: dict[int, int] = {}
        counts: dict[Var, int] = {}
        for s in ir.walk(fn.body):
            for v in s.targets():
                counts[v] = counts.get(v, 0) + 1
        params = set(fn.params)
        self.saved = {v for v, n in counts.items() if n > 1 or not _is_temp(v) or v in params}
        self.loops: dict[int, tuple[list[Var], bool]] = {}
        self.exclusive: set[Var] = set()  # kernel array parameters indexed only by this thread's index
        self.consumed: frozenset[int] = frozenset()  # ids of stores that take their element's gradient
        self.active = active_variables(fn)

    # -- names ---------------------------------------------------------------------------------

    def decl(self, name: str, t: Any, init: str = "{}") -> str:
        if name not in self.declared:
            self.declared.add(name)
            if self.roles is not None and is_block_value(t):  # zeroed with the frame when the block starts
                self.frame.append((name, t))
                self.decls.append(f"{ctype(t)}& {name} = lw_f.{name};")
            else:
                self.decls.append(f"{ctype(t)} {name}{init};")
        return name

    def site(self, s: ir.Stmt) -> int:
        key = id(s)
        if key not in self.site_ids:
            self.nsites += 1
            self.site_ids[key] = self.nsites
        return self.site_ids[key]

    def adj(self, o: Any) -> str:
        """The adjoint variable of an operand (a fresh dummy for constants and non-differentiable values)."""
        if isinstance(o, Var) and differentiable(o.type):
            return self.decl(f"a_{o.name}", o.type)
        self.nsites += 1
        return self.decl(f"lw_dummy{self.nsites}", o.type if not isinstance(o.type, ArrayType) else T.int32)

    # -- replay: the forward pass without side effects, saving what assignments overwrite -------

    def replay(self, body: tuple[ir.Stmt, ...]) -> None:
        for s in body:
            self.statement(s, getattr(self, f"r_{type(s).__name__}"), self.site(s))

    def r_Assign(self, s: ir.Assign, n: int) -> None:
        if s.dest in self.saved:
            self.out(f"{self.decl(f'lw_sv{n}', s.dest.type)} = {s.dest.name};")
        call = s.call()
        if call is not None and isinstance(call.target, Overload) and call.target.writes:
            self.out(f"{s.dest.name} = {{}};")  # an update of memory (tile_atomic_add): not applied again
            return
        self.out(f"{s.dest.name} = {self.replay_expr(s.expr)};")

    def r_SetComponent(self, s: ir.SetComponent | ir.SetField, n: int) -> None:
        self.out(f"{self.decl(f'lw_sv{n}', s.var.type)} = {s.var.name};")
        self.block((s,))

    r_SetField = r_SetComponent

    def r_Atomic(self, s: ir.Atomic, n: int) -> None:
        if s.dest is not None:  # the previous value: read, not re-applied
            if s.dest in self.saved:
                self.out(f"{self.decl(f'lw_sv{n}', s.dest.type)} = {s.dest.name};")
            self.out(f"{s.dest.name} = {self.reach(self.element(s.array, s.indices, s.site), s.path)};")

    def r_Eval(self, s: ir.Eval, n: int) -> None:
        if not (isinstance(s.expr.target, Overload) and s.expr.target.writes):  # no side effects in the replay
            self.out(f"{self.replay_expr(s.expr)};")

    def r_If(self, s: ir.If, n: int) -> None:
        c = self.decl(f"lw_c{n}", T.bool_)
        self.out(f"{c} = {self.op(s.cond)};")
        self.out(f"if ({c}) {{")
        self.nest(self.replay, s.body)
        if s.orelse:
            self.out("} else {")
            self.nest(self.replay, s.orelse)
        self.out("}")

    def r_Store(self, s: ir.Stmt, n: int) -> None:
        """Side effects and returns do not replay."""

    r_Print = r_Return = r_Store

    def replay_expr(self, e: ir.Expr) -> str:
        if isinstance(e, ir.Call) and not isinstance(e.target, Overload):  # a user function: its replay twin
            return f"rep_{e.target.native}({self.args([self.op(a) for a in e.args])})"
        return self.expr(e)

    def nest(self, fn: Any, body: tuple[ir.Stmt, ...]) -> None:
        self.depth += 1
        fn(body)
        self.depth -= 1

    def snapshot(self, loop: ir.Stmt, n: int, restore: bool) -> None:
        carried, _ = self.loops[n]
        for v in carried + list(loop.targets()):
            snap = self.decl(f"lw_e{n}_{v.name}", v.type)
            self.out(f"{v.name} = {snap};" if restore else f"{snap} = {v.name};")

    def r_For(self, s: ir.For, n: int) -> None:
        self.loops[n] = loop_carried(s)
        t = s.var.type
        b, e, st = (self.decl(f"lw_{k}{n}", t) for k in ("b", "e", "s"))
        cnt = self.decl(f"lw_cnt{n}", T.int64)
        self.out(f"{b} = {self.op(s.start)}; {e} = {self.op(s.stop)}; {st} = {self.op(s.step)}; {cnt} = 0;")
        self.snapshot(s, n, restore=False)
        cond = f"(({st} > 0) ? (lw_i < {e}) : (lw_i > {e}))"
        self.out(f"for ({ctype(t)} lw_i = {b}; {cond}; lw_i += {st}) {{")
        self.depth += 1
        if "lw_x" in {v.name for v in self.fn.locals}:
            self.out("if (lw_x >= 2) break;")
        self.out(f"++{cnt};")
        self.out(f"{s.var.name} = lw_i;")
        self.replay(s.body)
        self.depth -= 1
        self.out("}")

    def r_While(self, s: ir.While, n: int) -> None:
        self.loops[n] = loop_carried(s)
        cnt = self.decl(f"lw_cnt{n}", T.int64)
        self.out(f"{cnt} = 0;")
        self.snapshot(s, n, restore=False)
        self.out("for (;;) {")
        self.nest(self.replay, s.cond_body)
        self.depth += 1
        self.out(f"if (!{self.op(s.cond)}) break;")
        self.out(f"++{cnt};")
        self.replay(s.body)
        self.depth -= 1
        self.out("}")

    # -- reverse ---------------------------------------------------------------------------------

    def reverse(self, body: tuple[ir.Stmt, ...]) -> None:
        for s in reversed(body):
            self.statement(s, getattr(self, f"rev_{type(s).__name__}"), self.site(s))

    def rev_SetComponent(self, s: ir.SetComponent, n: int) -> None:
        idx = self.component_indices(s.var.type, s.indices, s.site)
        diff = s.var in self.active and differentiable(s.var.type)
        if diff and T.is_matrix(s.var.type) and len(s.indices) == 1:  # a row
            i, adj = idx[0], self.adj(s.var)
            if isinstance(s.value, Var) and differentiable(s.value.type):
                self.out(f"lw::acc({self.adj(s.value)}, lw::row({adj}, {i}));")
            self.out(f"lw::set_row({adj}, {i}, lw::zero<{ctype(s.value.type)}>());")
        elif diff:
            comp = self.component(s.var, idx, self.adj(s.var))
            if isinstance(s.value, Var) and differentiable(s.value.type):
                self.out(f"lw::acc({self.adj(s.value)}, {comp});")
            self.out(f"{comp} = {{}};")
        self.out(f"{s.var.name} = lw_sv{n};")

    def rev_SetField(self, s: ir.SetField, n: int) -> None:
        if s.var in self.active and differentiable(s.var.type) and differentiable(s.value.type):
            comp = f"{self.adj(s.var)}.{s.name}"
            if isinstance(s.value, Var):
                self.out(f"lw::acc({self.adj(s.value)}, {comp});")
            self.out(f"{comp} = {{}};")
        self.out(f"{s.var.name} = lw_sv{n};")

    def rev_Store(self, s: ir.Store, n: int) -> None:
        """The stored value takes the element's gradient, and the element's gradient is then zeroed (as in
        Warp 1.19): the value the store replaced, written earlier in this kernel or by an earlier launch, did
        not reach the output through the element. An array made with `retain_grad=True` (or an adjoint the
        caller passed to an adjoint launch) keeps it, so its gradient stays readable after backward, except
        where the kernel read the array before (a[i] = a[i] * 2.0: `consumed`) or stores into a part of an
        element (b[i].y = v): those always take it, or the gradient would count twice."""
        g = self.reach(self.grad(s.array, s.indices, s.site), s.path)
        a = self.op(s.array)
        steps = []
        if isinstance(s.value, Var) and differentiable(s.value.type):
            steps.append(f"lw::acc({self.adj(s.value)}, {g});")
        if differentiable(s.value.type):
            always = s.path or id(s) in self.consumed
            steps.append(f"{g} = {{}};" if always else f"if (!lw::retains_grad({a})) {g} = {{}};")
        if steps:
            self.out(f"if (lw::has_grad({a})) {{ {' '.join(steps)} }}")

    def rev_Eval(self, s: ir.Eval, n: int) -> None:
        self.reverse_call(s.expr, None, id(s) in self.consumed)

    def rev_If(self, s: ir.If, n: int) -> None:
        self.out(f"if (lw_c{n}) {{")
        self.nest(self.reverse, s.body)
        if s.orelse:
            self.out("} else {")
            self.nest(self.reverse, s.orelse)
        self.out("}")

    def rev_Print(self, s: ir.Stmt, n: int) -> None:
        """Prints and returns have no adjoint."""

    rev_Return = rev_Print

    def rev_For(self, s: ir.For | ir.While, n: int) -> None:
        _, needs_values = self.loops[n]
        self.out(f"for (int64_t lw_k{n} = lw_cnt{n} - 1; lw_k{n} >= 0; --lw_k{n}) {{")
        self.depth += 1
        if needs_values:  # recompute the state at the start of iteration k from the loop's entry state
            self.snapshot(s, n, restore=True)
            self.out(f"for (int64_t lw_j{n} = 0; lw_j{n} < lw_k{n}; ++lw_j{n}) {{")
            self.nest(lambda _: self.replay_iteration(s, n, f"lw_j{n}"), ())
            self.out("}")
        self.replay_iteration(s, n, f"lw_k{n}")
        self.reverse(s.body)
        self.depth -= 1
        self.out("}")
        self.snapshot(s, n, restore=True)

    rev_While = rev_For

    def replay_iteration(self, s: ir.For | ir.While, n: int, k: str) -> None:
        if isinstance(s, ir.For):
            self.out(f"{s.var.name} = ({ctype(s.var.type)})(lw_b{n} + {k} * lw_s{n});")
        else:
            self.replay(s.cond_body)
        self.replay(s.body)

    def grad(self, arr: Any, indices: tuple, site: int) -> str:
        """The gradient element of `arr[indices]`: bounds-checked in debug builds, like the data."""
        idx = ", ".join(self.op(i) for i in indices)
        if self.debug:
            return f"lw::grad_checked(lw_err, {site}, {self.op(arr)}, {idx})"
        fn = "lw::gradc<LW_C>" if self.in_kernel and not getattr(arr.type, "strided", False) else "lw::grad_at"
        return f"{fn}({self.op(arr)}, {idx})"

    def component(self, var: Var, idx: list[str], name: str) -> str:
        if T.is_matrix(var.type):
            return f"{name}.c[({idx[0]}) * {var.type._shape_[1]} + ({idx[1]})]"
        return f"{name}.c[{idx[0]}]"

    def rev_Atomic(self, s: ir.Atomic, n: int) -> None:
        if s.dest is not None:
            if s.dest in self.saved:
                self.out(f"{s.dest.name} = lw_sv{n};")
            if differentiable(s.dest.type):
                self.out(f"{self.adj(s.dest)} = {{}};")
        if not (isinstance(s.value, Var) and differentiable(s.value.type)):
            return
        g = self.reach(self.grad(s.array, s.indices, s.site), s.path)
        a = self.adj(s.value)
        arr = self.op(s.array)
        if s.op == "add":
            self.out(f"if (lw::has_grad({arr})) lw::acc({a}, {g});")
        elif s.op == "sub":
            self.out(f"if (lw::has_grad({arr})) lw::acc({a}, lw::neg({g}));")
        elif T.is_scalar(s.value.type) or T.is_vector(s.value.type) or T.is_matrix(s.value.type):
            # min/max: the value that won gets the gradient (componentwise for vectors and matrices)
            cur = self.reach(self.element(s.array, s.indices, s.site), s.path)
            self.out(f"if (lw::has_grad({arr})) lw::adj_atomic_won({cur}, {self.op(s.value)}, {a}, {g});")

    def rev_Assign(self, s: ir.Assign, n: int) -> None:
        d = s.dest
        if d in self.saved:
            self.out(f"{d.name} = lw_sv{n};")
        e = s.expr
        if not differentiable(d.type) or d not in self.active:
            if isinstance(e, ir.Call) and _writes_arrays(e):
                self.reverse_call(e, None)  # side effects inside a user function still differentiate
            return
        ad = self.adj(d)
        if self.roles is not None and is_block_value(d.type) and lane_call(s):
            # every lane runs the call (it fills a tile from every lane, meeting at barriers inside): each takes
            # its own copy of the result's adjoint before the leader clears it
            g = f"lw_gl{n}"
            self.out(f"{{ {ctype(d.type)} {g} = {ad};")
            self.out(f"if (lw::blk_enter()) {ad} = {{}};")
            self.reverse_call(e, g)
            self.out("}")
            return
        g = self.decl(f"lw_g{n}", d.type)
        self.out(f"{g} = {ad}; {ad} = {{}};")
        getattr(self, f"rev_{type(e).__name__}")(s, g)

    # -- the adjoint of each expression an assignment may have: `g` holds the destination's adjoint --

    def rev_Copy(self, s: ir.Assign, g: str) -> None:
        v = s.expr.value
        if isinstance(v, Var) and differentiable(v.type):
            self.out(f"lw::acc({self.adj(v)}, {g});")

    def rev_Call(self, s: ir.Assign, g: str) -> None:
        self.reverse_call(s.expr, g)

    def rev_Load(self, s: ir.Assign, g: str) -> None:
        e = s.expr
        r = self.private.get(id(s))
        if r is not None:  # accumulated per chunk, applied once by the entry point
            self.out(f"{r.name} += lw::cast<{r.acc_type}>({g});")
        elif e.array in self.exclusive:  # no other thread touches this element, unless the array is a broadcast
            a, target = self.op(e.array), self.grad(e.array, e.indices, e.site)
            self.out(f"if (lw::has_grad({a})) {{ if (LW_C || lw::grad_distinct({a}, {e.array.type.ndim})) "
                     f"lw::acc({target}, {g}); else lw::atomic_add(&{target}, {g}); }}")
        else:
            target = self.grad(e.array, e.indices, e.site)
            self.out(f"if (lw::has_grad({self.op(e.array)})) lw::atomic_add(&{target}, {g});")

    def rev_Extract(self, s: ir.Assign, g: str) -> None:
        e = s.expr
        t = e.value.type
        av = self.adj(e.value)
        idx = self.component_indices(t, e.indices, e.site)
        if T.is_matrix(t) and len(idx) == 1:
            cols = t._shape_[1]
            self.out(f"for (int lw_c = 0; lw_c < {cols}; ++lw_c) lw::acc({av}.c[({idx[0]}) * {cols} + lw_c], "
                     f"{g}.c[lw_c]);")
        elif T.is_matrix(t):
            self.out(f"lw::acc({av}.c[({idx[0]}) * {t._shape_[1]} + ({idx[1]})], {g});")
        else:
            self.out(f"lw::acc({av}.c[{idx[0]}], {g});")

    def rev_Field(self, s: ir.Assign, g: str) -> None:
        e = s.expr
        if differentiable(e.value.type):
            self.out(f"lw::acc({self.adj(e.value)}.{e.name}, {g});")

    def rev_Construct(self, s: ir.Assign, g: str) -> None:
        e = s.expr
        t = e.type
        args = list(e.args)
        if not args:
            return
        src = args[0]
        diff_src = isinstance(src, Var) and differentiable(src.type)
        if T.is_scalar(t):
            if diff_src:
                self.out(f"lw::adj_cast<{t.cname}>({self.op(src)}, {self.adj(src)}, {g});")
        elif len(args) == 1 and T.is_composite(src.type):
            if diff_src:
                self.out(f"lw::adj_convert<{t.cname}>({self.op(src)}, {self.adj(src)}, {g});")
        elif len(args) == 1 and t._length_ > 1:
            if diff_src:
                self.out(f"lw::adj_splat<{t.cname}>({self.op(src)}, {self.adj(src)}, {g});")
        else:
            for i, a in enumerate(args):
                if isinstance(a, Var) and differentiable(a.type):
                    self.out(f"lw::acc({self.adj(a)}, {g}.c[{i}]);")

    def reverse_call(self, e: ir.Call, g: str | None, consumed: bool = False) -> None:
        """The adjoint of a call; `consumed`: a store (tile_store) into an array the kernel read before, whose
        gradient over the stored region it takes whatever retain_grad says (as rev_Store does)."""
        target = e.target
        args = [f"lw::taking_grad({self.op(a)})" if consumed and isinstance(a.type, ArrayType) else self.op(a)
                for a in e.args]
        adjs = [self.adj(a) for a in e.args if not isinstance(a.type, ArrayType)]  # arrays: gradients by pointer
        if isinstance(target, Overload):
            if not target.differentiable or not (target.reads_state or any(
                    isinstance(a, Var) and differentiable(a.type) for a in e.args)):
                return
            if g is None and e.type is None and not target.outputs:  # no result: a store's adjoint (tile_store)
                self.out(f"{target.adjoint}({', '.join(args + adjs)});")
            elif g is not None:
                self.out(f"{target.adjoint}({', '.join(args + adjs + [g])});")
            return
        ret = target.ir.ret
        if self.roles is not None and fills_lanes(target.ir):
            # every lane runs it, each computing the same adjoints of its tile arguments: the leader's reach them,
            # the other lanes' go to a scratch tile
            values = [a for a in e.args if not isinstance(a.type, ArrayType)]
            adjs = [f"(lw::blk_leads() ? {adj} : {self.decl(f'lw_lane_adj{self.site(e)}_{i}', a.type)})"
                    if is_block_value(a.type) else adj for i, (a, adj) in enumerate(zip(values, adjs, strict=True))]
        tail = [g] if g is not None else ([self.decl(f"lw_dummy_r{self.site(e)}", ret)] if ret is not None else [])
        self.out(f"adj_{target.native}({self.args(args + adjs + tail)});")


def _emit_function(em: AdjointEmitter, fn: ir.Function) -> tuple[list[str], list[str]]:
    """Replay and reverse of a function body, with the declarations they need."""
    em.map_lines(fn)
    for v in fn.locals:
        em.decl(v.name, v.type)
    em.depth = 1
    em.lines = []
    em.replay(fn.body)
    replay = em.lines
    em.lines = []
    if fn.ret is not None and differentiable(fn.ret) and any(v.name == "lw_rv" for v in fn.locals):
        em.out(f"lw::acc({em.adj(Var('lw_rv', fn.ret))}, adj_ret);")
    em.reverse(fn.body)
    return replay, em.lines


def function_adjoint(fn: ir.Function, debug: bool, grad_ir: ir.Function | None = None,
                     replay_ir: ir.Function | None = None) -> str:
    """C++ for `rep_<f>` (replay returning the value) and `adj_<f>` of one user-function instance,
    using a custom adjoint (@wp.func_grad) or replay (@wp.func_replay) where one is given."""
    if fn.native_code is not None:
        return native_adjoint(fn, debug)
    name, params_ir, ret_t = fn.name, fn.params, fn.ret
    params = [f"{ctype(p.type)} {p.name}" for p in params_ir]
    ret = ctype(ret_t)
    adj_params = [f"{ctype(p.type)}& adjref_{p.name}" for p in params_ir if not isinstance(p.type, ArrayType)]
    parts = []
    if replay_ir is not None:
        plain = Emitter(debug)
        plain.function(replay_ir)
        parts.append("\n".join(plain.lines))
    if grad_ir is not None:
        plain = Emitter(debug)
        n_ret = 0 if ret_t is None else len(ret_t.fields) if is_tuple(ret_t) else 1
        adj_rets = grad_ir.params[len(grad_ir.params) - n_ret:]
        if n_ret > 1:  # adj_ret0, adj_ret1...: the fields of the tuple's adjoint
            tail = [f"{ret} lw_adj_ret"]
        else:
            tail = [f"{ctype(p.type)} {p.name}" for p in adj_rets]
        plain.out(f"static LW_DEVICE void adj_{name}({plain.params(params + adj_params + tail)})")
        plain.out("{")
        plain.depth = 1
        if n_ret > 1:
            for k, p in enumerate(adj_rets):
                plain.out(f"{ctype(p.type)} {p.name} = lw_adj_ret.f{k};")
        plain.map_lines(grad_ir)
        plain.declare(grad_ir)
        plain.block(grad_ir.body)
        plain.depth = 0
        plain.out("}")
        plain.lines += plain.end_lines()
        parts.append("\n".join(plain.lines))
    if replay_ir is not None and grad_ir is not None:
        return "\n".join(parts) + "\n"
    fn = normalize(fn)
    em = AdjointEmitter(fn, debug)
    replay, reverse = _emit_function(em, fn)
    ret_expr = "lw_rv" if any(v.name == "lw_rv" for v in fn.locals) else f"{ret}{{}}"
    decls = ["    " + d for d in em.decls]
    if replay_ir is None:
        rep = [f"static LW_DEVICE {ret} rep_{name}({em.params(params)})", "{", *decls, *replay]
        rep += [f"    return {ret_expr};"] if ret_t is not None else []
        parts.append("\n".join([*rep, "}", *em.end_lines()]))
    if grad_ir is None:
        if ret_t is not None:
            adj_params.append(f"{ret} adj_ret")
        sig = em.params(params + adj_params)
        flush = [f"    lw::acc(adjref_{p.name}, a_{p.name});" for p in fn.params
                 if differentiable(p.type) and f"a_{p.name}" in em.declared]
        parts.append("\n".join([f"static LW_DEVICE void adj_{name}({sig})", "{", *decls, *replay, *reverse,
                                 *flush, "}", *em.end_lines()]))
    return "\n".join(parts) + "\n"


def native_adjoint(fn: ir.Function, debug: bool) -> str:
    """`rep_`/`adj_` of a wp.func_native function: its replay snippet (by default nothing for a function
    returning nothing, whose side effects already happened, else the forward snippet) and its adjoint
    snippet (by default none: no gradient flows through it)."""
    snippet, adj_snippet, replay_snippet = fn.native_code
    if replay_snippet is None:
        replay_snippet = snippet if fn.ret is not None else ""
    em = Emitter(debug)
    em.native_function(f"rep_{fn.name}", fn, replay_snippet)
    em.native_function(f"adj_{fn.name}", fn, adj_snippet or "", adjoint=True)
    return "\n".join(em.lines) + "\n"


def kernel_adjoint(fn: ir.Function, debug: bool, effects: dict, lanes: int = 0) -> str:
    """C++ for a kernel's adjoint body and its CPU and CUDA entries (`<k>_adj_cpu`, `<k>_adj_cuda`);
    `effects` are the array effects of the functions it calls (ir.function_effects). With `lanes` (a build
    whose blocks run their lanes together) a kernel with block values gets the CPU entry of such blocks."""
    k = fn.name
    zeroable = ir.zeroable_gradients(fn)  # as the kernel layer computes it for the Tape, on the same IR
    fn = normalize(fn)
    lanes = lanes if runs_lanes(fn) else 0
    em = AdjointEmitter(fn, debug, lanes)
    if lanes:
        em.roles = lane_roles(fn)
    em.consumed = ir.in_place(fn, effects).stores
    em.private = {} if debug else privatize(fn, "load", gradient=True)
    em.exclusive = ir.thread_exclusive_arrays(fn)
    em.in_kernel = True  # the body is a template on LW_C, like the forward body
    replay, reverse = _emit_function(em, fn)
    slots = unique_slots(em.private)
    params = "".join(f", {ctype(p.type)} {p.name}" for p in fn.params)
    params += "".join(f", {r.acc_type}& {r.name}" for r in slots)
    decls = ["    " + d for d in em.decls]
    prologue = ["    lw::error_t* lw_err = L.error;"] if debug else []
    if fn.tid_count > 1:
        prologue += ["    int32_t lw_tid[4];", "    lw::tid_split(L, lw_idx, lw_tid);"]
    own = "(int32_t)lw_idx" if fn.tid_count <= 1 else ", ".join(f"lw_tid[{d}]" for d in range(fn.tid_count))
    if zeroable:  # CUDA: each thread zeroes its own elements first (the CPU entry zeroes blocks of them)
        names = {pos: fn.params[pos].name for pos in sorted(zeroable)}
        prologue += ["#if LW_CUDA", *(f"    if (((L.zero_grads >> {pos}) & 1) && lw::has_grad({p})) "
                                      f"lw::gradc<false>({p}, {own}) = {{}};" for pos, p in names.items()), "#endif"]
    frame = []
    if lanes:
        frame = block_frame(f"{k}_adj_frame", em.frame)
        prologue.append(f"    {k}_adj_frame& lw_f = *({k}_adj_frame*)lw::blk_frame();")
    lines = [
        *frame,
        "template <bool LW_C>",
        f"static LW_FORCE_INLINE void {k}_adj_body(const lw::launch_t& L, int64_t lw_idx{params})",
        "{", *prologue, *decls, *replay, *reverse, "}", *em.end_lines(),
    ]
    contig = " && ".join(
        f"lw::inner_contiguous(A.{p.name}, {p.type.ndim})" for p in fn.params if isinstance(p.type, ArrayType)
    ) or "true"
    zero = tuple((pos, fn.params[pos].name, fn.params[pos].type.ndim) for pos in sorted(zeroable))
    if lanes:
        return "\n".join(lines + lanes_entry(k, f"{k}_adj_cpu", f"{k}_adj_body", fn.params, contig, slots, lanes,
                                             f"{k}_adj_frame", zero))
    lines += entry_points(k, f"{k}_adj_cpu", f"{k}_adj_cuda", f"{k}_adj_body", fn.params, contig, slots, simd=True,
                          zero=zero, statements=sum(1 for _ in ir.walk(fn.body)))
    return "\n".join(lines)


def module_adjoint_source(functions: list[ir.Function], kernels: list[ir.Function], debug: bool,
                          custom: dict | None = None, lanes: int = 0) -> str:
    """The adjoint part of a module's source: function twins in dependency order, then kernel adjoints.
    `custom` maps a function's name to its (custom adjoint IR, custom replay IR), either may be None;
    `lanes`: see kernel_adjoint."""
    custom = custom or {}
    parts = [function_adjoint(f, debug, *custom.get(f.name, (None, None))) for f in functions]
    effects = ir.function_effects(functions)
    parts += [kernel_adjoint(k, debug, effects, lanes) for k in kernels]
    # it follows the forward source, whose length is not known here: its lines are numbered on their own
    return number_lines("\n".join(parts), f"{SOURCE_NAME} (adjoint part)")


def function_gradients(functions: list[ir.Function], wanted: list[Any], debug: bool,
                       custom: dict | None = None) -> tuple[str, str]:
    """For a module that calls `wp.grad(f)(args)` from forward code: declarations of `lw_grad_<f>` for
    each f in `wanted` (user functions' IR, or builtin overloads as records with `name`, `adjoint`,
    `param_types`, `ret`), to precede the functions that call them; and the replay and adjoint twins of the
    module's functions followed by the definitions of `lw_grad_<f>`: f's adjoint seeded with a result
    adjoint of 1, returning the parameters' adjoints (one value, or the tuple of them)."""
    custom = custom or {}
    parts = [function_adjoint(f, debug, *custom.get(f.name, (None, None))) for f in functions]
    declarations = []
    for fn in wanted:
        if isinstance(fn, ir.Function):
            types, names, ret_t, adjoint = [p.type for p in fn.params], [p.name for p in fn.params], fn.ret, \
                f"adj_{fn.name}"
        else:
            types, ret_t, adjoint = list(fn.param_types), fn.ret, fn.adjoint
            names = [f"lw_a{i}" for i in range(len(types))]
        ret = ctype(types[0] if len(types) == 1 else tuple_type(tuple(types)))
        head = (f"static LW_DEVICE {ret} lw_grad_{fn.name}"
                f"({', '.join(f'{ctype(t)} {n}' for t, n in zip(types, names, strict=True))})")
        declarations.append(head + ";")
        adjs = [f"lw_g_{n}" for n in names]
        result = adjs[0] if len(adjs) == 1 else f"{ret}{{{', '.join(adjs)}}}"
        parts.append("\n".join([
            head, "{", *(f"    {ctype(t)} lw_g_{n}{{}};" for t, n in zip(types, names, strict=True)),
            f"    {adjoint}({', '.join(names + adjs)}, {ctype(ret_t)}(1));", f"    return {result};", "}"]))
    return "\n".join(declarations), number_lines("\n".join(parts), f"{SOURCE_NAME} (gradients)")
