"""Kernel threads across SIMD lanes on the CPU (ISPC-style): a second body per kernel that runs W consecutive
threads in one call (W = 16 with AVX-512, else 8; see native/simd.h).

A uniformity analysis splits a kernel's variables: *varying* ones (they depend on the thread index, on a
varying value, or are assigned under a condition that differs between threads) are held as W lanes, the
others stay scalars. Varying arithmetic of float and integer scalars, vectors and matrices becomes vector
code; control flow on a varying condition runs both ways under a lane mask (assignments blend, stores and
calls go to the lanes that are on); loops with uniform bounds stay loops. What has no vector form (user
function calls, atomics, most builtins, gathers under a mask) runs lane by lane inside the same body, each
lane doing exactly what the scalar thread does, so results are the scalar path's bit for bit.

A kernel keeps the scalar path alone where it uses a construct the lanes cannot express, or where they would
gain little; `vectorizer` says which, and why, when `wp.config.verbose` is on.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any

from . import ir
from . import types as T
from .builtins import Overload
from .codegen import Emitter, is_tile_type
from .ir import Const, Var, ctype

REG = (T.float32, T.float64, T.int32, T.uint32, T.int64, T.uint64)  # scalars held in one vector register
FLOATS = (T.float32, T.float64)
INTS = (T.int32, T.uint32, T.int64, T.uint64)


def is_reg(t: Any) -> bool:
    return t in REG


def is_comp(t: Any) -> bool:
    """A vector or matrix held component by component (one register per component)."""
    return T.is_composite(t) and t.cname.startswith(("lw::vec_t<", "lw::mat_t<")) and t._wp_scalar_type_ in REG


def _same(ts: list, kinds: tuple) -> bool:
    return len(set(ts)) == 1 and ts[0] in kinds


def _float_comp(t: Any) -> bool:
    return is_comp(t) and t._wp_scalar_type_ in FLOATS


def _comp_scalar(ts: list) -> bool:
    """(vector or matrix, its scalar) or (scalar, vector or matrix), floats."""
    a, b = ts
    return (_float_comp(a) and b is a._wp_scalar_type_) or (_float_comp(b) and a is b._wp_scalar_type_)


# builtin name -> whether simd.h has a lane form for these argument types
VECTOR_CALLS: dict[str, Callable[[list], bool]] = {
    **{n: (lambda ts: len(ts) == 2 and (_same(ts, REG) or (_same(ts, ts[:1]) and _float_comp(ts[0]))))
       for n in ("add", "sub", "min", "max")},
    **{n: (lambda ts: _same(ts, REG) or _float_comp(ts[0])) for n in ("neg", "pos")},
    "mul": lambda ts: _same(ts, REG) or _comp_scalar(ts),
    "div": lambda ts: _same(ts, FLOATS) or _comp_scalar(ts),
    "clamp": lambda ts: _same(ts, REG),
    **{n: (lambda ts: _same(ts, REG)) for n in ("lt", "le", "gt", "ge", "eq", "ne")},
    **{n: (lambda ts: _same(ts, INTS)) for n in ("bit_and", "bit_or", "bit_xor")},
    "invert": lambda ts: _same(ts, INTS) or ts == [T.bool_],
    "abs": lambda ts: _same(ts, REG) or _float_comp(ts[0]),
    "sign": lambda ts: _same(ts, REG),
    **{n: (lambda ts: _same(ts, FLOATS)) for n in ("sqrt", "rsqrt", "lerp", "isnan", "isfinite")},
    **{n: (lambda ts: _same(ts, ts[:1]) and T.is_vector(ts[0]) and _float_comp(ts[0]))
       for n in ("dot", "length", "length_sq")},
    "cross": lambda ts: _same(ts, ts[:1]) and T.is_vector(ts[0]) and ts[0]._length_ == 3 and _float_comp(ts[0]),
    **{n: (lambda ts: ts[0] is T.bool_ and ts[1] == ts[2] and (is_reg(ts[1]) or _float_comp(ts[1])))
       for n in ("select", "where")},
}


@dataclass
class Plan:
    """What the analysis found: the varying variables, those equal to the 1-D thread index, and whether a
    return under a varying condition can end some lanes early."""

    body: tuple[ir.Stmt, ...]
    varying: set[Var] = field(default_factory=set)
    linear: set[Var] = field(default_factory=set)
    lanes_end: bool = False


class Scalar(Exception):
    """A construct the lanes cannot express: the kernel keeps the scalar path."""

    def __init__(self, what: str, why: str, line: int) -> None:
        super().__init__(what)
        self.what, self.why, self.line = what, why, line


def _expr_varying(e: ir.Expr, varying: set[Var]) -> bool:
    if isinstance(e, ir.Tid) or (isinstance(e, ir.Call) and not isinstance(e.target, Overload)):
        return True  # user functions run lane by lane: they may write memory once per thread
    return any(isinstance(o, Var) and o in varying for o in e.operands())


def analyze(fn: ir.Function) -> Plan:
    """The varying variables of kernel `fn` (a fixed point: loops carry values around) and its linear ones."""
    plan = Plan(fn.body)
    v = plan.varying

    def is_v(o: Any) -> bool:
        return isinstance(o, Var) and o in v

    def block(body: tuple[ir.Stmt, ...], vctx: bool) -> bool:
        changed = False
        for s in body:
            marks: tuple[Var, ...] = ()
            if isinstance(s, ir.Assign):
                marks = (s.dest,) if vctx or _expr_varying(s.expr, v) else ()
            elif isinstance(s, ir.Atomic):
                marks = s.targets()
            elif isinstance(s, ir.SetComponent | ir.SetField):
                marks = (s.var,) if vctx or any(is_v(o) for o in s.operands()) else ()
            elif isinstance(s, ir.If):
                inner = vctx or is_v(s.cond)
                changed |= block(s.body, inner) | block(s.orelse, inner)
            elif isinstance(s, ir.For):
                inner = vctx or any(is_v(o) for o in (s.start, s.stop, s.step))
                marks = (s.var,) if inner else ()
                changed |= block(s.body, inner)
            elif isinstance(s, ir.While):
                inner = vctx or is_v(s.cond)
                changed |= block(s.cond_body, inner) | block(s.body, inner)
            elif isinstance(s, ir.Return) and vctx:
                plan.lanes_end = True
            for m in marks:
                if m not in v:
                    v.add(m)
                    changed = True
        return changed

    while block(fn.body, False):
        pass
    # variables assigned once, from the 1-D thread index or a copy of such a variable
    assigned: dict[Var, list[ir.Expr]] = {}
    for s in ir.walk(fn.body):
        for t in s.targets():
            assigned.setdefault(t, []).append(s.expr if isinstance(s, ir.Assign) else None)
    if fn.tid_count == 1:
        grew = True
        while grew:
            grew = False
            for var, exprs in assigned.items():
                if var in plan.linear or len(exprs) != 1 or var.type is not T.int32:
                    continue
                e = exprs[0]
                if isinstance(e, ir.Tid) or (isinstance(e, ir.Copy) and e.value in plan.linear):
                    plan.linear.add(var)
                    grew = True
    return plan


def check(fn: ir.Function, plan: Plan, private: dict) -> None:
    """Raises Scalar for the first construct of `fn` the lane body cannot run."""
    for v in fn.locals:
        if is_tile_type(v.type):
            raise Scalar("tile operations", "a tile is shared by the threads of a block", 0)
    if private:
        line = next((s.line for s in ir.walk(fn.body) if id(s) in private), 0)
        raise Scalar("an atomic sum into a fixed element", "it is accumulated per chunk of threads in thread order",
                     line)

    def is_v(o: Any) -> bool:
        return isinstance(o, Var) and o in plan.varying

    def visit(body: tuple[ir.Stmt, ...], vifs: int) -> None:
        for s in body:
            if isinstance(s, ir.Print):
                raise Scalar("print()", "the threads' lines would interleave", s.line)
            if isinstance(s, ir.Break | ir.Continue) and vifs:
                word = "break" if isinstance(s, ir.Break) else "continue"
                raise Scalar(word, "it is under a condition that differs between threads", s.line)
            if isinstance(s, ir.For):
                if any(is_v(o) for o in (s.start, s.stop, s.step)):
                    raise Scalar("a for loop", "its bounds differ between threads", s.line)
                visit(s.body, 0)
            elif isinstance(s, ir.While):
                visit(s.cond_body, 0)
                visit(s.body, 0)
            elif isinstance(s, ir.If):
                inner = vifs + (1 if is_v(s.cond) else 0)
                visit(s.body, inner)
                visit(s.orelse, inner)
            elif isinstance(s, ir.Eval | ir.Assign) and isinstance(s.call(), ir.Call):
                target = s.call().target
                if getattr(target, "writes", False):
                    raise Scalar(f"{target.name}()", "it writes memory as a block", s.line)

    visit(fn.body, 0)


class LaneEmitter(Emitter):
    """Writes a kernel's W-lane body (`<kernel>_simd`): varying variables as `lw::simd::vary<T>`, uniform ones
    as scalars; `lw_exec` is the mask of the lanes that run the current statement."""

    def __init__(self, plan: Plan) -> None:
        super().__init__(debug=False)
        self.plan = plan
        self.lane: str | None = None  # inside a lane-by-lane loop: the lane index variable
        self.masked = False  # inside control flow on a varying condition: assignments blend
        self.masks = 0
        self.per_lane: list[tuple[int, str]] = []  # (line, what) of statements that run lane by lane
        # work done in vector form and lane by lane, each statement weighted by its loop nesting
        self.weights = loop_weights(plan.body)
        self.vector_work = 0
        self.loop_vector_work = 0  # the part of vector_work inside loops
        self.lane_work = 0

    def varying(self, o: Any) -> bool:
        return isinstance(o, Var) and o in self.plan.varying

    def op(self, o: Any) -> str:
        if self.varying(o):
            return f"lw::simd::lane<{ctype(o.type)}>({o.name}, {self.lane})" if self.lane else o.name
        return super().op(o)

    def vop(self, o: Any) -> str:
        """An operand as lanes: varying ones as they are, uniform ones broadcast."""
        return o.name if self.varying(o) else f"lw::simd::splat<{ctype(o.type)}>({super().op(o)})"

    def write(self, fn: ir.Function) -> None:
        k = fn.name
        # a parameter the kernel assigns under a varying condition arrives as a scalar and becomes lanes
        params = "".join(f", {ctype(p.type)} {p.name}{'_lw_in' if self.varying(p) else ''}" for p in fn.params)
        self.out("template <bool LW_C>")
        self.out(f"static LW_FORCE_INLINE void {k}_simd(const lw::launch_t& L, int64_t lw_idx{params})")
        self.out("{")
        self.depth += 1
        for p in fn.params:
            if self.varying(p):
                t = ctype(p.type)
                self.out(f"lw::simd::vary<{t}> {p.name} = lw::simd::splat<{t}>({p.name}_lw_in);")
        self.out("lw::simd::mask_t lw_exec = lw::simd::all_lanes();")
        if self.plan.lanes_end:
            self.out("lw::simd::mask_t lw_alive = lw_exec;")
        if fn.tid_count > 1:
            self.out("lw::simd::vary<int32_t> lw_vtid[4];")
            self.out("for (int lw_l = 0; lw_l < lw::simd::W; ++lw_l) {")
            self.out(f"    int32_t lw_t[4]; lw::tid_split(L, lw_idx + lw_l, lw_t);"
                     f" for (int d = 0; d < {fn.tid_count}; ++d) lw_vtid[d][lw_l] = lw_t[d];")
            self.out("}")
        self.map_lines(fn)
        params_set = set(fn.params)
        for v in fn.locals:
            if v not in params_set:
                self.out(f"lw::simd::vary<{ctype(v.type)}> {v.name}{{}};" if self.varying(v)
                         else f"{ctype(v.type)} {v.name}{{}};")
        self.in_kernel = True
        self.block(fn.body)
        self.in_kernel = False
        self.depth -= 1
        self.out("}")
        self.lines += self.end_lines()

    def block(self, body: tuple[ir.Stmt, ...]) -> None:
        for s in body:
            self.statement(s, getattr(self, f"v_{type(s).__name__}"))

    def lanewise(self, s: ir.Stmt, what: str, write: Callable[[], None]) -> None:
        """`write()` once per lane that is on, with varying operands read as that lane's value."""
        self.per_lane.append((s.line, what))
        self.lane_work += self.weights.get(id(s), 1)
        self.out('_Pragma("GCC unroll 1") for (int lw_l = 0; lw_l < lw::simd::W; ++lw_l) {')
        self.depth += 1
        self.out("if (!lw_exec[lw_l]) continue;")
        self.lane = "lw_l"
        write()
        self.lane = None
        self.depth -= 1
        self.out("}")

    def assign(self, dest: Var, value: str) -> None:
        t = ctype(dest.type)
        self.out(f"{dest.name} = lw::simd::blend<{t}>(lw_exec, {value}, {dest.name});" if self.masked
                 else f"{dest.name} = {value};")

    def linear_access(self, array: Any, indices: tuple, elem: Any) -> bool:
        """Whether array[indices] is W consecutive elements read or written as one block."""
        t = array.type
        return (not self.masked and not self.plan.lanes_end and not self.varying(array) and t.ndim == 1
                and not t.indexed and not t.strided and indices[0] in self.plan.linear
                and (is_reg(elem) or (T.is_vector(elem) and is_comp(elem))))

    # -- statements ------------------------------------------------------------------------

    def vector_expr(self, e: ir.Expr, t: Any) -> str | None:
        """The lanes of `e` as one vector expression, or None when it has no vector form."""
        if isinstance(e, ir.Copy):
            return self.vop(e.value)
        if isinstance(e, ir.Tid):
            return "lw::simd::iota((int32_t)lw_idx)" if e.count == 1 else f"lw_vtid[{e.dim}]"
        if not any(self.varying(o) for o in e.operands()) and not isinstance(e, ir.Load):
            if isinstance(e, ir.Call) and not isinstance(e.target, Overload):
                return None
            return f"lw::simd::splat<{ctype(t)}>({self.expr(e)})"  # assigned under a varying condition
        if isinstance(e, ir.Call):
            ov = e.target
            test = VECTOR_CALLS.get(getattr(ov, "name", ""))
            if (isinstance(ov, Overload) and test is not None and ov.native == f"lw::{ov.name}" and ov.header is None
                    and not ov.outputs and test([a.type for a in e.args])):
                return f"lw::simd::{ov.name}({', '.join(self.vop(a) for a in e.args)})"
            return None
        if isinstance(e, ir.Construct):
            if T.is_scalar(t) and len(e.args) == 1:
                src = e.args[0].type
                if src == t:
                    return self.vop(e.args[0])
                if is_reg(t) and is_reg(src) and not (src in FLOATS and t in INTS):
                    return f"lw::simd::convert<{ctype(t)}>({self.vop(e.args[0])})"
                return None
            if not is_comp(t) or any(a.type is not t._wp_scalar_type_ for a in e.args):
                return None
            n = components(t)
            if not e.args:
                return f"lw::simd::vary<{ctype(t)}>{{}}"
            if len(e.args) == 1:
                return f"lw::simd::fill<{ctype(t)}>({self.vop(e.args[0])})"
            if len(e.args) == n:
                return f"lw::simd::make<{ctype(t)}>({', '.join(self.vop(a) for a in e.args)})"
            return None
        if isinstance(e, ir.Extract):
            vt = e.value.type
            if not is_comp(vt) or not all(isinstance(i, Const) for i in e.indices):
                return None
            idx = [int(i.value) for i in e.indices]
            if T.is_vector(vt) and len(idx) == 1:
                return f"{self.op(e.value)}.c[{idx[0]}]"
            if T.is_matrix(vt) and len(idx) == 2:
                return f"{self.op(e.value)}.c[{idx[0] * vt._shape_[1] + idx[1]}]"
            return None
        if isinstance(e, ir.Load) and self.linear_access(e.array, e.indices, t):
            return f"lw::simd::load_linear({self.op(e.array)}, (int64_t)lw_idx)"
        return None

    def v_Assign(self, s: ir.Assign) -> None:
        if not self.varying(s.dest):
            self.s_Assign(s)
            return
        value = self.vector_expr(s.expr, s.dest.type)
        if value is not None:
            if isinstance(s.expr, ir.Call | ir.Load | ir.Construct):
                w = self.weights.get(id(s), 1)
                self.vector_work += w
                self.loop_vector_work += w if w > 1 else 0
            self.assign(s.dest, value)
            return
        t = ctype(s.dest.type)
        self.lanewise(s, describe(s.expr), lambda: self.out(
            f"lw::simd::set_lane<{t}>({s.dest.name}, lw_l, {self.expr(s.expr)});"))

    def v_Store(self, s: ir.Store) -> None:
        if not any(self.varying(o) for o in s.operands()):
            if self.masked or self.plan.lanes_end:
                self.out("if (lw::simd::any(lw_exec)) {")
                self.nested_call(lambda: self.s_Store(s))
                self.out("}")
            else:
                self.s_Store(s)
            return
        if not s.path and self.linear_access(s.array, s.indices, s.value.type):
            self.out(f"lw::simd::store_linear({self.op(s.array)}, (int64_t)lw_idx, {self.vop(s.value)});")
            return
        self.lanewise(s, "a store to elements that are not consecutive", lambda: self.s_Store(s))

    def nested_call(self, write: Callable[[], None]) -> None:
        self.depth += 1
        write()
        self.depth -= 1

    def v_Atomic(self, s: ir.Atomic) -> None:
        def one() -> None:
            cmp = f"{self.op(s.compare)}, " if s.compare is not None else ""
            where = self.reach(self.element(s.array, s.indices, s.site), s.path)
            call = f"lw::atomic_{s.op}(&{where}, {cmp}{self.op(s.value)})"
            if s.dest is None:
                self.out(f"{call};")
            else:
                self.out(f"lw::simd::set_lane<{ctype(s.dest.type)}>({s.dest.name}, lw_l, {call});")

        self.lanewise(s, f"atomic_{s.op}", one)

    def through_lane_copy(self, s: ir.SetComponent | ir.SetField, write: Callable[[Any], None]) -> None:
        """A statement that changes part of a varying variable, lane by lane on a scalar copy of the lane."""
        t = ctype(s.var.type)

        def one() -> None:
            self.out(f"{t} lw_t = lw::simd::lane<{t}>({s.var.name}, lw_l);")
            write(replace(s, var=Var("lw_t", s.var.type)))
            self.out(f"lw::simd::set_lane<{t}>({s.var.name}, lw_l, lw_t);")

        self.lanewise(s, "a component write with a dynamic index" if isinstance(s, ir.SetComponent)
                      else "a struct field write", one)

    def v_SetComponent(self, s: ir.SetComponent) -> None:
        if not self.varying(s.var):
            self.s_SetComponent(s)
            return
        t = s.var.type
        if is_comp(t) and all(isinstance(i, Const) for i in s.indices) and (
                (T.is_vector(t) and len(s.indices) == 1) or (T.is_matrix(t) and len(s.indices) == 2)):
            idx = [int(i.value) for i in s.indices]
            k = idx[0] if len(idx) == 1 else idx[0] * t._shape_[1] + idx[1]
            st = ctype(t._wp_scalar_type_)
            target = f"{s.var.name}.c[{k}]"
            value = self.vop(s.value)
            self.out(f"{target} = lw::simd::blend<{st}>(lw_exec, {value}, {target});" if self.masked
                     else f"{target} = {value};")
            return
        self.through_lane_copy(s, self.s_SetComponent)

    def v_SetField(self, s: ir.SetField) -> None:
        if not self.varying(s.var):
            self.s_SetField(s)
            return
        self.through_lane_copy(s, self.s_SetField)

    def v_Eval(self, s: ir.Eval) -> None:
        self.lanewise(s, describe(s.expr), lambda: self.s_Eval(s))

    def v_If(self, s: ir.If) -> None:
        if not self.varying(s.cond):
            self.s_If(s)
            return
        n = self.masks = self.masks + 1
        outer = self.masked
        self.out("{")
        self.depth += 1
        self.out(f"const lw::simd::mask_t lw_m{n} = lw_exec, lw_c{n} = {self.op(s.cond)};")
        self.masked = True
        for body, test in ((s.body, f"lw_c{n}"), (s.orelse, f"~lw_c{n}")):
            if not body:
                continue
            self.out(f"lw_exec = lw_m{n} & {test};")
            self.out("if (lw::simd::any(lw_exec)) {")
            self.nested(body)
            self.out("}")
        self.masked = outer
        self.out(f"lw_exec = lw_m{n}{' & lw_alive' if self.plan.lanes_end else ''};")
        if not outer and any(isinstance(x, ir.Return) for x in ir.walk((s,))):
            self.out("if (!lw::simd::any(lw_exec)) return;")
        self.depth -= 1
        self.out("}")

    def v_For(self, s: ir.For) -> None:
        if not self.varying(s.var):
            self.s_For(s)
            return
        n = self.loops = self.loops + 1
        t = ctype(s.var.type)
        i, e, st = f"lw_i{n}", f"lw_e{n}", f"lw_s{n}"
        cond = f"{i} < {e}" if isinstance(s.step, Const) and s.step.value > 0 else (
            f"{i} > {e}" if isinstance(s.step, Const) else f"({st} > 0) ? ({i} < {e}) : ({i} > {e})")
        self.out(f"for ({t} {i} = {self.op(s.start)}, {e} = {self.op(s.stop)}, {st} = {self.op(s.step)}; "
                 f"{cond}; {i} += {st}) {{")
        self.depth += 1
        self.assign(s.var, f"lw::simd::splat<{t}>({i})")
        self.depth -= 1
        self.nested(s.body)
        self.out("}")

    def v_While(self, s: ir.While) -> None:
        if not self.varying(s.cond):
            self.s_While(s)
            return
        n = self.masks = self.masks + 1
        outer = self.masked
        self.masked = True
        self.out("{")
        self.depth += 1
        self.out(f"const lw::simd::mask_t lw_m{n} = lw_exec;")
        self.out("for (;;) {")
        self.nested(s.cond_body)
        self.depth += 1
        self.out(f"lw_exec = lw_exec & {self.op(s.cond)};")
        self.out("if (!lw::simd::any(lw_exec)) break;")
        self.depth -= 1
        self.nested(s.body)
        self.out("}")
        self.out(f"lw_exec = lw_m{n}{' & lw_alive' if self.plan.lanes_end else ''};")
        self.depth -= 1
        self.out("}")
        self.masked = outer

    def v_Break(self, s: ir.Break) -> None:
        self.s_Break(s)

    def v_Continue(self, s: ir.Continue) -> None:
        self.s_Continue(s)

    def v_Return(self, s: ir.Return) -> None:
        if not self.masked:
            self.out("return;")
        else:
            self.out("lw_alive &= ~lw_exec; lw_exec = lw::simd::mask_t{};")

    def e_Tid(self, e: ir.Tid) -> str:
        return f"(int32_t)(lw_idx + {self.lane})" if e.count == 1 else f"lw_vtid[{e.dim}][{self.lane}]"


LOOP_WEIGHT = 8  # how much more a statement inside a loop counts than one outside
# a kernel gets a lane body when its vector work is at least LANE_COST times its lane-by-lane work (a statement
# run lane by lane costs what the scalar thread pays plus moving its operands out of lanes and back; e.g. hash
# grid queries, whose loops are mostly per-lane calls, stay scalar)
LANE_COST = 2


def loop_weights(body: tuple[ir.Stmt, ...], weight: int = 1) -> dict[int, int]:
    """id(statement) -> LOOP_WEIGHT ** (the number of loops around it)."""
    out: dict[int, int] = {}
    for s in body:
        out[id(s)] = weight
        inner = weight * LOOP_WEIGHT if isinstance(s, ir.For | ir.While) else weight
        for b in s.blocks():
            out.update(loop_weights(b, inner))
    return out


def components(t: Any) -> int:
    """The number of scalars in a vector or matrix type."""
    n = 1
    for d in t._shape_:
        n *= int(d)
    return n


def describe(e: ir.Expr) -> str:
    """A short name of the construct an expression is, for the verbose report."""
    if isinstance(e, ir.Call):
        return f"{e.target.name}({', '.join(T.type_name(a.type) for a in e.args)})"
    if isinstance(e, ir.Construct):
        return f"{T.type_name(e.type)}({', '.join(T.type_name(a.type) for a in e.args)})"
    if isinstance(e, ir.Load):
        return "a load of elements that are not consecutive (or under a mask)"
    return type(e).__name__.lower()


@dataclass
class Vectorized:
    """A kernel's lane body: its C++ lines, the constructs it runs lane by lane, and the (loop-weighted)
    amounts of work in vector form and lane by lane."""

    lines: list[str]
    per_lane: list[tuple[int, str]]
    vector_work: int
    loop_vector_work: int
    lane_work: int


def lane_body(fn: ir.Function, private: dict) -> Vectorized:
    """The W-lane body of kernel `fn` (raises Scalar when it keeps the scalar path)."""
    plan = analyze(fn)
    check(fn, plan, private)
    em = LaneEmitter(plan)
    em.write(fn)
    return Vectorized(em.lines, em.per_lane, em.vector_work, em.loop_vector_work, em.lane_work)


def vectorizer(report: Callable[[str], None] | None) -> Callable[[ir.Function, dict], list[str] | None]:
    """What code generation calls for each kernel: its lane body's lines, or None (scalar path only).
    `report` (wp.config.verbose) receives one line per kernel saying which constructs stay scalar and why."""

    def run(fn: ir.Function, private: dict) -> list[str] | None:
        name = fn.name.split("_", 1)[-1]
        where = fn.filename or "<kernel>"
        try:
            v = lane_body(fn, private)
        except Scalar as e:
            if report:
                report(f"loomwork: kernel '{name}' runs one thread at a time on the CPU: {e.what} at "
                       f"{where}:{e.line} ({e.why})")
            return None
        lanewise = "; ".join(f"{what} at line {line}" for line, what in _unique(v.per_lane))
        if not v.loop_vector_work:
            # a kernel without loops is bound by memory, not arithmetic: a lane body would mostly add build time
            if report:
                report(f"loomwork: kernel '{name}' runs one thread at a time on the CPU: no loop does vector work "
                       "(its threads are cheap; lanes pay off in compute-bound loops)")
            return None
        if v.lane_work * LANE_COST > v.vector_work:
            # moving values between lanes and scalars would cost more than the vector work saves
            if report:
                report(f"loomwork: kernel '{name}' runs one thread at a time on the CPU: too much of its work has no "
                       f"vector form ({lanewise})")
            return None
        if report:
            report(f"loomwork: kernel '{name}' runs threads across SIMD lanes on the CPU"
                   + (f"; lane by lane (no vector form): {lanewise}" if lanewise else ""))
        return v.lines

    return run


def _unique(items: list) -> Iterator:
    return iter(dict.fromkeys(items))

