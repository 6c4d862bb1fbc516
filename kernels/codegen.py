"""Code generation: typed IR -> C++ source, one emitter for both targets.

A module's source holds its user-function instances, then for every kernel an argument struct,
a body function (one thread's work) and two thin entry layers chosen by the preprocessor: the CPU
entry runs a range of launch indices (the runtime's thread pool hands out ranges), the CUDA entry
is a grid-stride loop. g++ and NVRTC compile the very same text.

Function and kernel bodies carry `#line` directives, so a compiler message or a debugger names the
Python file and line of the statement; after each body a directive returns to the generated file's
own numbering (see `LINE_MARK`).
"""

from __future__ import annotations

import math
import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from . import ir
from . import types as T
from .builtins import Overload
from .ir import ArrayType, Const, Var, ctype
from .structs import is_struct, struct_differentiable

HEADER_NAME = "loomwork.h"
SOURCE_NAME = "module.cpp"  # what the C++ compiler calls the source of a module

# ends the lines mapped to Python: `number_lines` turns it into a #line directive naming the line's own position
LINE_MARK = "#line lw_generated"


def literal(value: Any, t: Any) -> str:
    """A C++ literal of `value` as type `t`, exact for every finite float."""
    if T.is_composite(t):
        st = t._wp_scalar_type_
        flat = value.numpy_value().reshape(-1) if isinstance(value, T._CompositeMixin) else [value]
        return f"lw::make<{t.cname}>({', '.join(literal(x, st) for x in flat)})"
    if t is T.bool_:
        return "true" if value else "false"
    if t.is_float:
        v = float(value)
        if t is T.float64:
            if not math.isfinite(v):
                return f"lw::f64_bits({struct.unpack('<Q', struct.pack('<d', v))[0]}ULL)"
            return repr(v)
        v32 = float(T.float32.np_dtype.type(v))
        if not math.isfinite(v32):
            text = f"lw::f32_bits({struct.unpack('<I', struct.pack('<f', v32))[0]}u)"
        else:
            text = repr(v32) + "f" if ("." in repr(v32) or "e" in repr(v32)) else repr(v32) + ".0f"
        return f"{t.cname}({text})" if t in (T.float16, T.bfloat16) else text
    v = int(value)
    suffix = {T.int64: "LL", T.uint64: "ULL", T.uint32: "u"}.get(t)
    if suffix:
        return f"{v}{suffix}"
    if t is T.int32:
        return str(v) if v != -(2**31) else "(-2147483647 - 1)"
    return f"(({t.cname}){v})"


def is_tile_type(t: Any) -> bool:
    """Whether `t` is a tile type (`lw::tile_t`): large values the emitter avoids copying."""
    return str(getattr(t, "cname", "")).startswith("lw::tile_t<")


def is_block_value(t: Any) -> bool:
    """Whether values of type `t` belong to the whole block (tiles, tile stacks, and value types that say so
    with `block_value`, as the block queries do): with lanes, they live in the block's frame, which every lane
    sees (native/lanes.h)."""
    return str(getattr(t, "cname", "")).startswith(("lw::tile_t<", "lw::tile_stack_t<")) or \
        getattr(t, "block_value", False) is True


# -- blocks whose lanes run together on the CPU (wp.config.enable_cpu_blocks; native/lanes.h) ----------------
# A statement that makes or changes a block value is block-wide: the leader lane runs it once, between two
# barriers. Three kinds of tile statements run on every lane instead: the per-lane writes below (each lane
# replaces its own element, or applies its own scatter or push, in turn), the copies of their results, and
# the fills every lane contributes to (wp.tile, tile_from_thread, tile_randi/f: `d = f_lane(d, ...)`), which
# have a barrier on both sides so that every lane's part is in before any lane reads the tile.
LANE_WRITES = frozenset({"tile_set", "tile_assign", "tile_scatter_add", "tile_scatter_masked", "tile_stack_push",
                         "tile_stack_pop", "tile_stack_count"})
LANE_FILLS = frozenset({"tile", "tile_from_thread", "tile_randi", "tile_randf"})


def fills_lanes(fn: ir.Function, seen: frozenset = frozenset()) -> bool:
    """Whether a function (or one it calls) fills a tile from every lane of the block (LANE_FILLS): every
    lane must then run its calls, which meet at the fill's barriers."""
    for s in ir.walk(fn.body):
        call = s.call()
        if call is None:
            continue
        t = call.target
        if isinstance(t, Overload):
            if t.name in LANE_FILLS:
                return True
        elif getattr(t, "ir", None) is not None and id(t.ir) not in seen and fills_lanes(t.ir, seen | {id(fn)}):
            return True
    return False


def lane_call(s: ir.Stmt) -> bool:
    """Whether statement `s` calls a user function that fills a tile from every lane (fills_lanes)."""
    call = s.call()
    return call is not None and not isinstance(call.target, Overload) and \
        getattr(call.target, "ir", None) is not None and fills_lanes(call.target.ir)


def lane_roles(fn: ir.Function) -> dict[int, str]:
    """`{id(statement): "block" | "fill"}` for the statements of a kernel run with lanes that are not plain
    per-lane code (see LANE_WRITES); a call of a function that fills a tile from every lane is a fill."""
    def name(s: ir.Stmt) -> str:
        call = s.call()
        return getattr(call.target, "name", "") if call is not None and isinstance(call.target, Overload) else ""

    written = {s.dest for s in ir.walk(fn.body) if isinstance(s, ir.Assign) and name(s) in LANE_WRITES}
    roles = {}
    for s in ir.walk(fn.body):
        if isinstance(s, ir.Assign) and is_block_value(s.dest.type):
            if name(s) in LANE_FILLS or lane_call(s):
                roles[id(s)] = "fill"
            elif not (name(s) in LANE_WRITES or isinstance(s.expr, ir.Copy) and s.expr.value in written):
                roles[id(s)] = "block"
        elif isinstance(s, ir.Eval | ir.Print) and any(is_block_value(o.type) for o in s.operands()) and \
                (isinstance(s, ir.Print) or isinstance(s.expr.target, Overload)) and name(s) not in LANE_WRITES:
            roles[id(s)] = "block"
    return roles


def runs_lanes(fn: ir.Function) -> bool:
    """Whether a kernel built with lanes runs its blocks' lanes together: it has block values, or calls a
    function that fills a tile from every lane."""
    return any(is_block_value(v.type) for v in fn.locals) or fills_lanes(fn)


def lane_free(fn: ir.Function) -> bool:
    """Whether a kernel does the same in every lane of a block (no lane-dependent value, no per-lane side
    effect): then a tiled launch with lanes gives what one lane per block gives, and keeps that fast path.
    Lane-dependent: fills, per-lane writes and reads of tiles, wp.block_dim(), atomics and prints (each lane's
    counts), builtins that write arrays other than through tiles, and calls of user functions (not looked
    into). The lane coordinate of wp.tid() depends on the launch (see launch_tiled)."""
    for s in ir.walk(fn.body):
        if isinstance(s, ir.Atomic | ir.Print):
            return False
        call = s.call()
        if call is None:
            continue
        t = call.target
        if not isinstance(t, Overload) or t.name in LANE_FILLS | LANE_WRITES | {"untile", "block_dim"} or \
                t.writes and not any(is_block_value(a.type) for a in call.args):
            return False
    return True


def block_frame(name: str, values: list[tuple[str, Any]]) -> list[str]:
    """The C++ record of a kernel's block values (`name`), one member per (variable name, type)."""
    return [f"struct {name} {{", *(f"    {ctype(t)} {v};" for v, t in values), "};"]


def _cpu_entry_head(k: str, cpu_name: str) -> list[str]:
    """The opening of a kernel's CPU entry: its signature, and the launch header and arguments unpacked from
    the packed block."""
    return [
        "#if !LW_CUDA",
        f"LW_EXPORT void {cpu_name}(const void* blob, long long begin, long long end)",
        "{",
        "    lw::launch_t L;",
        "    __builtin_memcpy(&L, blob, sizeof(L));",
        f"    {k}_args A;",
        "    __builtin_memcpy(&A, (const char*)blob + sizeof(L), sizeof(A));",
    ]


def lanes_entry(k: str, cpu_name: str, body: str, params: tuple, contig: str, slots: list[Private], lanes: int,
                frame: str, zero: tuple = ()) -> list[str]:
    """The CPU entry of a kernel whose blocks run `lanes` lanes together: its range is one of blocks; each
    block's lanes run `body` as fibers (lw::blk_run), thread index block * lanes + lane, the last block with the
    lanes the launch size leaves it. `zero`: as in entry_points, for the block's threads."""
    args = "".join(f", A.{p.name}" for p in params)
    red = "".join(f", {r.name}_0" for r in slots)
    return [
        *_cpu_entry_head(k, cpu_name),
        *[f"    {r.acc_type} {r.name}_0 = 0;" for r in slots],
        f"    const bool lw_c = {contig};",
        f"    auto lw_lane = [&](int64_t i) {{ if (lw_c) {body}<true>(L, i{args}{red}); "
        f"else {body}<false>(L, i{args}{red}); }};",
        "    for (long long lw_b = begin; lw_b < end; ++lw_b) {",
        f"        const long long lw_lo = lw_b * {lanes}, lw_hi = L.size - lw_lo < {lanes} ? L.size : lw_lo + {lanes};",
        *zeroing(zero),
        f"        lw::blk_run({lanes}, (int32_t)(lw_hi - lw_lo), lw_lo, (long)sizeof({frame}), lw_lane);",
        "    }",
        *[f"    {r.acc_type} {r.name} = {r.name}_0;" for r in slots],
        *[f"    {r.flush}" for r in slots],
        "}",
        "#endif",
        "",
    ]


class Emitter:
    """Writes C++ for IR functions. `debug` adds bounds checks that report to `lw_err`, the launch's error
    record: kernel bodies take it from the launch block, and every generated function receives it as its
    first parameter, so concurrent launches (two Python threads, one module) report separately."""

    def __init__(self, debug: bool, vectorize: Callable | None = None, lanes: int = 0) -> None:
        self.debug = debug
        # lanes per block of the build (0: none): kernels with block values run their blocks' lanes together
        self.lanes = lanes
        self.roles: dict[int, str] | None = None  # lane_roles of the kernel being written with lanes
        # kernel IR, its private accumulators -> the lines of its W-lane CPU body, or None
        # (kernels.simd.vectorizer; None: every kernel runs one thread at a time)
        self.vectorize = vectorize
        self.in_kernel = False  # kernel bodies are templates on LW_C (all arrays innermost-contiguous)
        self.private: dict[int, Private] = {}  # atomic statements accumulated per thread / CPU chunk
        self.lines: list[str] = []
        self.depth = 0
        self.loops = 0
        self.pyfile = ""  # the Python file of the function being written, as a C string ("": no #line)
        self.line = 0  # the Python line of the statement being written (0: unknown)
        self.presumed: int | None = None  # the line the compiler gives the next output line, after a #line
        self.uses: dict[Var, int] = {}  # how often each variable is read in the function being written

    def out(self, text: str) -> None:
        if self.line and self.pyfile and self.line != self.presumed:
            # the file name once; later directives of the function only change the line
            self.lines.append(f"#line {self.line} {self.pyfile}" if self.presumed is None else f"#line {self.line}")
            self.presumed = self.line
        self.lines.append("    " * self.depth + text)
        if self.presumed is not None:
            self.presumed += 1

    def map_lines(self, fn: ir.Function) -> None:
        """Maps the statements written from now on to the lines of `fn`'s Python file (when it is known)."""
        self.pyfile = c_string(fn.filename) if fn.filename else ""
        self.presumed = None

    def end_lines(self) -> list[str]:
        """The lines that end a function mapped to Python: what follows is the generated file's own code."""
        self.presumed = None
        return [LINE_MARK] if self.pyfile else []

    def op(self, o: Any) -> str:
        if isinstance(o, Const):
            return literal(o.value, o.type)
        return o.name

    def params(self, params: list[str]) -> str:
        """A generated function's parameter list: debug builds lead with the error record."""
        return ", ".join(["lw::error_t* lw_err", *params] if self.debug else params)

    def args(self, args: list[str]) -> str:
        """The arguments of a call to a generated function (see `params`)."""
        return ", ".join(["lw_err", *args] if self.debug else args)

    # -- functions ---------------------------------------------------------------------------

    def function(self, fn: ir.Function) -> None:
        if fn.native_code is not None:
            self.native_function(fn.name, fn, fn.native_code[0])
            return
        params = self.params([f"{ctype(p.type)} {p.name}" for p in fn.params])
        self.out(f"static LW_DEVICE {ctype(fn.ret)} {fn.name}({params})")
        self.out("{")
        self.depth += 1
        self.map_lines(fn)
        self.declare(fn)
        self.block(fn.body)
        if fn.ret is not None:
            self.out(f"return {ctype(fn.ret)}{{}};")
        self.depth -= 1
        self.out("}")
        self.lines += self.end_lines()
        self.out("")

    def native_function(self, name: str, fn: ir.Function, snippet: str, adjoint: bool = False) -> None:
        """A wp.func_native body: the user's C++ with the Python parameter names (and, for the adjoint,
        `adj_<name>`: references for values, gradient views for arrays, `adj_ret` for the result)."""
        params = [f"{ctype(p.type)} {native_name(p)}" for p in fn.params]
        ret = "void" if adjoint else ctype(fn.ret)
        if adjoint:
            params += [f"{ctype(p.type)}& adj_{native_name(p)}" for p in fn.params if not isinstance(p.type, ArrayType)]
            if fn.ret is not None:
                params.append(f"{ctype(fn.ret)} adj_ret")
        self.out(f"static LW_DEVICE {ret} {name}({self.params(params)})")
        self.out("{")
        if adjoint:
            for p in fn.params:
                if isinstance(p.type, ArrayType):
                    self.out(f"    {ctype(p.type)} adj_{native_name(p)} = lw::grad_of({native_name(p)});")
        self.lines += ["    " + line for line in snippet.strip("\n").splitlines()]
        if fn.ret is not None and not adjoint:
            self.out(f"    return {ctype(fn.ret)}{{}};")
        self.out("}")
        self.out("")

    def declare(self, fn: ir.Function) -> None:
        """Declares `fn`'s locals (zeroed; tiles, which every path assigns before reading, are left as they
        are: zeroing kilobytes per block would cost as much as the tile's own work) and counts their reads.
        With lanes, block values are references into the block's frame (`<kernel>_frame`)."""
        params = set(fn.params)
        if self.roles is not None:
            self.out(f"{fn.name}_frame& lw_f = *({fn.name}_frame*)lw::blk_frame();")
        for v in fn.locals:
            if v in params:
                continue
            if self.roles is not None and is_block_value(v.type):
                self.out(f"{ctype(v.type)}& {v.name} = lw_f.{v.name};")
            else:
                self.out(f"{ctype(v.type)} {v.name}{{}};" if not is_tile_type(v.type) else f"{ctype(v.type)} {v.name};")
        self.uses = {}
        for s in ir.walk(fn.body):
            for o, _ in s.uses():
                if isinstance(o, Var):
                    self.uses[o] = self.uses.get(o, 0) + 1

    def kernel(self, fn: ir.Function) -> None:
        k = fn.name
        self.out(args_record(fn))
        self.private = {} if self.debug else privatize(fn, "atomic", gradient=False)
        slots = unique_slots(self.private)
        lanes = self.lanes if runs_lanes(fn) else 0
        if lanes:
            self.roles = lane_roles(fn)
            self.lines += block_frame(f"{k}_frame", [(v.name, v.type) for v in fn.locals
                                                     if v not in fn.params and is_block_value(v.type)])
        params = "".join(f", {ctype(p.type)} {p.name}" for p in fn.params)
        params += "".join(f", {r.acc_type}& {r.name}" for r in slots)
        self.out("template <bool LW_C>")
        self.out(f"static LW_FORCE_INLINE void {k}_body(const lw::launch_t& L, int64_t lw_idx{params})")
        self.out("{")
        self.depth += 1
        if self.debug:
            self.out("lw::error_t* lw_err = L.error;")
        if fn.tid_count > 1:
            self.out("int32_t lw_tid[4];")
            self.out("lw::tid_split(L, lw_idx, lw_tid);")
        self.map_lines(fn)
        self.declare(fn)
        self.in_kernel = True
        self.block(fn.body)
        self.in_kernel = False
        self.depth -= 1
        self.out("}")
        self.lines += self.end_lines()
        contig = " && ".join(
            f"lw::inner_contiguous(A.{p.name}, {p.type.ndim})" for p in fn.params if isinstance(p.type, ArrayType)
        ) or "true"
        if lanes:
            self.roles = None
            self.lines += lanes_entry(k, f"{k}_cpu", f"{k}_body", fn.params, contig, slots, lanes, f"{k}_frame")
            return
        simd = self.vectorize(fn, self.private) if self.vectorize is not None and not self.debug else None
        if simd is not None:
            self.lines += ["#if !LW_CUDA", '#include "simd.h"', *simd, "#endif"]
        self.lines += entry_points(k, f"{k}_cpu", f"{k}_cuda", f"{k}_body", fn.params, contig, slots,
                                   lanes=simd is not None, statements=sum(1 for _ in ir.walk(fn.body)))

    # -- statements ------------------------------------------------------------------------

    def block(self, body: tuple[ir.Stmt, ...]) -> None:
        skip = False
        for s, nxt in zip(body, (*body[1:], None)[:len(body)], strict=True):
            if skip:
                skip = False
                continue
            if self.roles is None and self.forwards_tile(s, nxt):
                self.statement(nxt, self.s_Assign_direct, s.expr)
                skip = True
                continue
            self.statement(s, getattr(self, f"s_{type(s).__name__}"))

    def forwards_tile(self, s: ir.Stmt, nxt: ir.Stmt | None) -> bool:
        """Whether `s` computes a tile into a temporary that `nxt` only copies into a variable: then the
        call writes the variable directly (one tile copy less per statement)."""
        if not (isinstance(s, ir.Assign) and isinstance(nxt, ir.Assign) and is_tile_type(s.dest.type)):
            return False
        call = s.call()
        return (call is not None and isinstance(nxt.expr, ir.Copy) and nxt.expr.value is s.dest
                and self.uses.get(s.dest, 0) == 1 and nxt.dest.type == s.dest.type
                and not any((a is nxt.dest or a == nxt.dest) and i != getattr(call.target, "result_alias", None)
                            for i, a in enumerate(call.args)))

    def s_Assign_direct(self, s: ir.Assign, expr: ir.Expr) -> None:
        # placement new: the call's result is built in the variable itself (C++17 guaranteed elision)
        self.out(f"new (&{s.dest.name}, lw_slot{{}}) {ctype(s.dest.type)}({self.expr(expr)});")

    def statement(self, s: ir.Stmt, write: Callable[..., None], *args: Any) -> None:
        """`write(s, *args)` with the output mapped to `s`'s Python line (its block's line when unknown)."""
        outer = self.line
        self.line = s.line or outer
        role = self.roles.get(id(s)) if self.roles is not None else None
        if role == "block":  # the leader runs it once, between barriers
            self.out("if (lw::blk_enter()) {")
            self.depth += 1
            write(s, *args)
            self.depth -= 1
            self.out("}")
            self.out("lw::blk_sync();")
        elif role == "fill":  # every lane adds its part, between barriers
            self.out("lw::blk_sync();")
            write(s, *args)
            self.out("lw::blk_sync();")
        else:
            write(s, *args)
        self.line = outer

    def s_Assign(self, s: ir.Assign) -> None:
        self.out(f"{s.dest.name} = {self.expr(s.expr)};")

    def s_Store(self, s: ir.Store) -> None:
        self.out(f"{self.reach(self.element(s.array, s.indices, s.site), s.path)} = {self.op(s.value)};")

    def s_Atomic(self, s: ir.Atomic) -> None:
        r = self.private.get(id(s))
        if r is not None:
            self.out(f"{r.name} {'+' if s.op == 'add' else '-'}= lw::cast<{r.acc_type}>({self.op(s.value)});")
            return
        cmp = f"{self.op(s.compare)}, " if s.compare is not None else ""
        where = self.reach(self.element(s.array, s.indices, s.site), s.path)
        call = f"lw::atomic_{s.op}(&{where}, {cmp}{self.op(s.value)})"
        self.out(f"{s.dest.name} = {call};" if s.dest is not None else f"{call};")

    def s_SetComponent(self, s: ir.SetComponent) -> None:
        t = s.var.type
        idx = self.component_indices(t, s.indices, s.site)
        if T.is_matrix(t) and len(idx) == 1:
            self.out(f"lw::set_row({s.var.name}, {idx[0]}, {self.op(s.value)});")
        elif T.is_matrix(t):
            self.out(f"{s.var.name}({idx[0]}, {idx[1]}) = {self.op(s.value)};")
        else:
            self.out(f"{s.var.name}.c[{idx[0]}] = {self.op(s.value)};")

    def s_SetField(self, s: ir.SetField) -> None:
        self.out(f"{s.var.name}.{s.name} = {self.op(s.value)};")

    def s_Print(self, s: ir.Print) -> None:
        if s.check is not None:  # expect_near / expect_eq: the location travels as the format string
            ops = ", ".join(self.op(a) for a in s.args)
            self.out(f"lw::{s.check}({ops}, {c_string(s.fmt)});")
            return
        args = "".join(f", {printf_arg(a, self.op(a))}" for a in s.args)
        self.out(f"printf({c_string(s.fmt)}{args}); LW_FLUSH();")

    def s_Eval(self, s: ir.Eval) -> None:
        self.out(f"{self.expr(s.expr)};")

    def s_If(self, s: ir.If) -> None:
        self.out(f"if ({self.op(s.cond)}) {{")
        self.nested(s.body)
        if s.orelse:
            self.out("} else {")
            self.nested(s.orelse)
        self.out("}")

    def s_For(self, s: ir.For) -> None:
        n = self.loops = self.loops + 1
        t = ctype(s.var.type)
        i, e, st = f"lw_i{n}", f"lw_e{n}", f"lw_s{n}"
        if isinstance(s.step, Const):
            cond = f"{i} < {e}" if s.step.value > 0 else f"{i} > {e}"
        else:
            cond = f"({st} > 0) ? ({i} < {e}) : ({i} > {e})"
        self.out(f"for ({t} {i} = {self.op(s.start)}, {e} = {self.op(s.stop)}, {st} = {self.op(s.step)}; "
                 f"{cond}; {i} += {st}) {{")
        self.depth += 1
        self.out(f"{s.var.name} = {i};")
        self.depth -= 1
        self.nested(s.body)
        self.out("}")

    def s_While(self, s: ir.While) -> None:
        self.out("for (;;) {")
        self.nested(s.cond_body)
        self.depth += 1
        self.out(f"if (!{self.op(s.cond)}) break;")
        self.depth -= 1
        self.nested(s.body)
        self.out("}")

    def s_Break(self, s: ir.Break) -> None:
        self.out("break;")

    def s_Continue(self, s: ir.Continue) -> None:
        self.out("continue;")

    def s_Return(self, s: ir.Return) -> None:
        self.out("return;" if s.value is None else f"return {self.op(s.value)};")

    def nested(self, body: tuple[ir.Stmt, ...]) -> None:
        self.depth += 1
        self.block(body)
        self.depth -= 1

    # -- expressions -------------------------------------------------------------------------

    def element(self, arr: Any, indices: tuple, site: int) -> str:
        idx = ", ".join(self.op(i) for i in indices)
        if self.debug:
            return f"lw::at_checked(lw_err, {site}, {self.op(arr)}, {idx})"
        if self.in_kernel and not getattr(arr.type, "strided", False):
            return f"lw::atc<LW_C>({self.op(arr)}, {idx})"
        return f"lw::at({self.op(arr)}, {idx})"

    def reach(self, base: str, path: tuple[ir.Part, ...]) -> str:
        """The C++ lvalue of the part `path` leads to inside the lvalue `base` (fields, components, rows).
        Debug builds check dynamic indices and go to a substitute when one is bad (the value stays as it
        was); release builds clamp them (see `component_indices`)."""
        for p in path:
            if self.debug and any(not isinstance(i, Const) for i in p.indices):
                fn = "row_checked" if T.is_matrix(p.of) and len(p.indices) == 1 else "comp_checked"
                base = f"lw::{fn}(lw_err, {p.site}, {base}, {', '.join(self.op(i) for i in p.indices)})"
                continue
            idx = self.component_indices(p.of, p.indices, p.site) if p.indices else []
            if p.name is not None:
                base = f"{base}.{p.name}"
            elif T.is_matrix(p.of) and len(idx) == 1:
                base = f"lw::row_ref({base}, {idx[0]})"
            elif T.is_matrix(p.of):
                base = f"{base}.c[({idx[0]}) * {p.of._shape_[1]} + ({idx[1]})]"
            else:
                base = f"{base}.c[{idx[0]}]"
        return base

    def expr(self, e: ir.Expr) -> str:
        return getattr(self, f"e_{type(e).__name__}")(e)

    def e_Copy(self, e: ir.Copy) -> str:
        return self.op(e.value)

    def e_Call(self, e: ir.Call) -> str:
        if getattr(e.target, "outputs", ()):
            return self.call_with_outputs(e)
        args = [self.op(a) for a in e.args]
        return f"{e.target.native}({', '.join(args) if isinstance(e.target, Overload) else self.args(args)})"

    def e_Load(self, e: ir.Load) -> str:
        return self.element(e.array, e.indices, e.site)

    def e_View(self, e: ir.View) -> str:
        idx = [self.op(i) for i in e.indices]
        if self.debug:
            idx = [f"lw::checked(lw_err, {e.site}, {i}, {self.op(e.array)}.shape[{d}])" for d, i in enumerate(idx)]
        return f"lw::subview({self.op(e.array)}, {len(idx)}, {', '.join(idx)})"

    def e_SliceView(self, e: ir.SliceView) -> str:
        kinds = ", ".join("1" if s else "0" for s in e.sliced)
        fill = ("lw::slice_begin", "lw::slice_end", "1")
        bounds = ", ".join(f"(int32_t)({self.op(b)})" if b is not None else fill[k]
                           for bs in e.bounds for k, b in enumerate(bs))
        return f"lw::array_slice<{kinds}>({self.op(e.array)}, {{{bounds}}})"

    def component_indices(self, t: Any, indices: tuple, site: int) -> list[str]:
        """Indices into a vector or matrix value of type `t`: constants as they are (the front end checked
        them), dynamic ones checked (debug builds) or clamped into range (release: a wrong index picks a
        wrong component, never the memory beside the value)."""
        extents = t._shape_ if len(indices) > 1 else t._shape_[:1]
        out = []
        for i, n in zip(indices, extents, strict=True):
            if isinstance(i, Const):
                out.append(self.op(i))
            elif self.debug:
                out.append(f"lw::checked(lw_err, {site}, {self.op(i)}, {n})")
            else:
                out.append(f"lw::clamped({self.op(i)}, {n})")
        return out

    def e_Extract(self, e: ir.Extract) -> str:
        idx = self.component_indices(e.value.type, e.indices, e.site)
        if T.is_matrix(e.value.type):
            if len(idx) == 1:
                return f"lw::row({self.op(e.value)}, {idx[0]})"
            return f"{self.op(e.value)}({idx[0]}, {idx[1]})"
        return f"{self.op(e.value)}.c[{idx[0]}]"

    def e_Field(self, e: ir.Field) -> str:
        return f"{self.op(e.value)}.{e.name}"

    def e_Shape(self, e: ir.Shape) -> str:
        return f"{self.op(e.array)}.shape[{e.dim}]"

    def e_Construct(self, e: ir.Construct) -> str:
        t = e.type
        if T.is_scalar(t):
            return f"lw::cast<{t.cname}>({self.op(e.args[0])})"
        if is_struct(t):
            return f"{t.cname}{{}}"
        if not e.args:  # zero, also a transform's quaternion (Warp 1.19 in kernels; its Python class gives identity)
            return f"lw::zero<{t.cname}>()"
        if len(e.args) == 1 and T.is_composite(e.args[0].type):
            return f"lw::convert<{t.cname}>({self.op(e.args[0])})"
        if len(e.args) == 1 and t._length_ > 1:
            return f"lw::splat<{t.cname}>({self.op(e.args[0])})"
        return f"lw::make<{t.cname}>({', '.join(self.op(a) for a in e.args)})"

    def e_Tid(self, e: ir.Tid) -> str:
        if e.count == 1 and self.roles is not None:  # with lanes, as Warp: the first coordinate (the block's)
            return "(int32_t)(lw_idx / (L.size / L.dims[0]))"
        return "(int32_t)lw_idx" if e.count == 1 else f"lw_tid[{e.dim}]"

    def call_with_outputs(self, e: ir.Call) -> str:
        """A builtin with out / in-out parameters as an expression: a lambda fills the call's result record
        (tuple_type: the return value, if any, then one field per output), passing the record's fields
        by reference; in-out fields start from the arguments that follow the inputs."""
        ov = e.target
        outs = ov.outputs
        ninputs = len(ov.params) - len(outs)
        first = len(e.type.fields) - len(outs)  # 1 when the call also returns a value (field f0)
        fields = {pos: f"lw_r.f{first + k}" for k, pos in enumerate(outs)}
        inputs = iter(e.args[:ninputs])
        inouts = iter(e.args[ninputs:])
        init = [f"{fields[pos]} = {self.op(next(inouts))};" for pos in outs if ov.params[pos].inout]
        args = ", ".join(fields[i] if i in fields else self.op(next(inputs)) for i in range(len(ov.params)))
        call = f"{ov.native}({args})"
        body = " ".join([*init, f"lw_r.f0 = {call};" if first else f"{call};"])
        return f"[&]() {{ {ctype(e.type)} lw_r{{}}; {body} return lw_r; }}()"


@dataclass(frozen=True)
class Private:
    """A per-thread (per CPU chunk) accumulator standing in for atomic additions to one array element."""

    name: str
    acc_type: str
    flush: str  # the statement that applies the accumulated value, with the kernel's arguments as A.*


def privatize(fn: ir.Function, kind: str, gradient: bool) -> dict[int, Private]:
    """Accumulators for the statements `ir.private_reductions` finds. float16/float32 sums accumulate in
    float64, which makes them both faster (no contended atomics) and more accurate."""
    out: dict[int, Private] = {}
    slots: dict[tuple, Private] = {}
    for sid, (arr, idx) in ir.private_reductions(fn, kind).items():
        key = (arr.name, idx)
        if key not in slots:
            t = arr.type.dtype
            acc = "double" if t.is_float else t.cname
            n = len(slots)
            where = f"{'lw::grad_at' if gradient else 'lw::at'}(A.{arr.name}, {', '.join(map(str, idx))})"
            guard = f"lw::has_grad(A.{arr.name}) && " if gradient else ""
            flush = f"if ({guard}lw_red{n} != 0) lw::atomic_add(&{where}, lw::cast<{t.cname}>(lw_red{n}));"
            slots[key] = Private(f"lw_red{n}", acc, flush)
        out[sid] = slots[key]
    return out


def unique_slots(private: dict[int, Private]) -> list[Private]:
    return list(dict.fromkeys(private.values()))


UNROLL = 4  # independent accumulator sets per CPU chunk: breaks the add-latency chain of a reduction
LARGE_BODY = 100  # statements: a body this long gets one accumulator set, each copy of it is compiled code
ZERO_BLOCK = 2048  # threads per block of an adjoint that zeroes its gradients first: their elements stay in cache


def entry_points(k: str, cpu_name: str, cuda_name: str, body: str, params: tuple, contig: str,
                 slots: list[Private], simd: bool = False, zero: tuple = (), lanes: bool = False,
                 statements: int = 0) -> list[str]:
    """The CPU range entry and the CUDA grid-stride entry of a kernel body.

    CPU: when `contig` holds (every array innermost-contiguous) the body is instantiated with that
    known and an int32 counter keeps the index affine, so unit-stride loops vectorize. Private
    accumulators live for a CPU chunk (or a CUDA thread) and are applied once at its end; on the CPU
    the loop runs UNROLL threads at a time, each with its own accumulators, summed at the end, unless the
    body has more than LARGE_BODY `statements` (its latency chain is then the body's, and each call site is
    another inlined copy for the compiler to optimize: 4 of them made large adjoints compile 3x slower). `simd`
    tells the compiler that the threads of the contiguous loop are independent (adjoints: their gradient
    updates are atomic or to the thread's own elements), which it cannot prove when many arrays are
    written: without it, the alias checks the loop would need exceed what GCC generates.

    `zero` (adjoints): (bit, parameter name, dimensions) of the gradients the launch header's `zero_grads`
    may ask to zero first (ir.zeroable_gradients). The CPU entry then runs its range in blocks, zeroing a
    block's own gradient elements just before running it, so they are written while in cache; the CUDA
    body zeroes its element first (see the adjoint's prologue).

    `lanes`: the kernel also has a W-lane body (`<kernel>_simd`, kernels/simd.py); the contiguous CPU loop
    runs W threads per call through it and the remaining threads of the range one at a time."""
    args = "".join(f", A.{p.name}" for p in params)
    sets = UNROLL if slots and statements <= LARGE_BODY else 1

    def call(c: str, idx: str, j: int) -> str:
        return f"{body}<{c}>(L, {idx}{args}{''.join(f', {r.name}_{j}' for r in slots)});"

    lo, hi = ("lw_lo", "lw_hi") if zero else ("begin", "end")

    def loop(t: str, c: str) -> list[str]:
        if lanes and c == "true":
            return [
                "    {",
                f"        {t} i = ({t}){lo};",
                f"        for (; i + lw::simd::W <= ({t}){hi}; i += lw::simd::W) {k}_simd<true>(L, i{args});",
                f"        for (; i < ({t}){hi}; ++i) {call(c, 'i', 0)}",
                "    }",
            ]
        if sets == 1:
            pragma = ['        _Pragma("omp simd")'] if simd and c == "true" else []
            return [*pragma, f"        for ({t} i = ({t}){lo}; i < ({t}){hi}; ++i) {call(c, 'i', 0)}"]
        if c == "true":  # kernel threads are unordered: the reductions may be reassociated and vectorized
            red = ", ".join(f"{r.name}_0" for r in slots)
            return [f"        _Pragma(\"omp simd reduction(+: {red})\")",
                    f"        for ({t} i = ({t}){lo}; i < ({t}){hi}; ++i) {call(c, 'i', 0)}"]
        return [
            "    {",
            f"        {t} i = ({t}){lo};",
            f"        for (; i + {sets - 1} < ({t}){hi}; i += {sets}) {{",
            *[f"            {call(c, f'i + {j}' if j else 'i', j)}" for j in range(sets)],
            "        }",
            f"        for (; i < ({t}){hi}; ++i) {call(c, 'i', 0)}",
            "    }",
        ]

    loops = [f"    if ({hi} <= 2147483647LL && {contig})", *loop("int32_t", "true"), "    else",
             *loop("long long", "false")]
    if zero:
        loops = [
            f"    const long long lw_block = L.zero_grads ? {ZERO_BLOCK} : end - begin;",
            "    for (long long lw_lo = begin; lw_lo < end; lw_lo += lw_block) {",
            "        const long long lw_hi = end - lw_lo > lw_block ? lw_lo + lw_block : end;",
            *zeroing(zero), *loops, "    }",
        ]

    decls = [f"    {r.acc_type} {', '.join(f'{r.name}_{j} = 0' for j in range(sets))};" for r in slots]
    combine = [f"    {r.acc_type} {r.name} = {' + '.join(f'{r.name}_{j}' for j in range(sets))};" for r in slots]
    flush = [f"    {r.flush}" for r in slots]
    cuda_args = args + "".join(f", {r.name}_0" for r in slots)
    return [
        *_cpu_entry_head(k, cpu_name),
        *decls,
        *loops,
        *combine,
        *flush,
        "}",
        "#else",
        f'extern "C" __global__ void {cuda_name}(lw::launch_t L, {k}_args A)',
        "{",
        *[f"    {r.acc_type} {r.name}_0 = 0;" for r in slots],
        f"    if ({contig})",
        "        for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < L.size;",
        "             i += (int64_t)blockDim.x * gridDim.x)",
        f"            {body}<true>(L, i{cuda_args});",
        "    else",
        "        for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < L.size;",
        "             i += (int64_t)blockDim.x * gridDim.x)",
        f"            {body}<false>(L, i{cuda_args});",
        *[f"    {r.acc_type} {r.name} = {r.name}_0;" for r in slots],
        *flush,
        "}",
        "#endif",
        "",
    ]


def zeroing(zero: tuple) -> list[str]:
    """The lines that zero the gradients `zero` asks for (see entry_points) of the threads [lw_lo, lw_hi)."""
    lines = []
    for bit, name, ndim in zero:
        test = f"((L.zero_grads >> {bit}) & 1) && lw::has_grad(A.{name})"
        if ndim == 1:
            lines.append(f"        if ({test}) lw::zero_grad_range(A.{name}, lw_lo, lw_hi);")
        else:
            at = ", ".join(f"lw_t[{d}]" for d in range(ndim))
            lines.append(f"        if ({test}) for (long long lw_i = lw_lo; lw_i < lw_hi; ++lw_i) {{ "
                         f"int32_t lw_t[4]; lw::tid_split(L, lw_i, lw_t); lw::grad_at(A.{name}, {at}) = {{}}; }}")
    return lines


def args_record(fn: ir.Function) -> str:
    """The C++ record of a kernel's launch arguments (`<kernel>_args`)."""
    fields = "".join(f" {ctype(p.type)} {p.name};" for p in fn.params) or " char lw_unused;"
    return f"struct {fn.name}_args {{{fields} }};"


def module_source(functions: list[ir.Function], kernels: list[ir.Function], debug: bool,
                  before_kernels: str = "", before_functions: str = "", kernel_bodies: bool = True,
                  vectorize: Callable | None = None, lanes: int = 0) -> str:
    """The complete C++ source of a module: `before_functions` (declarations), user functions in
    dependency order, `before_kernels`, then the kernels. Without `kernel_bodies`, kernels are only
    declared (their argument records): the base of the adjoint library, which calls no forward kernel, so
    it does not compile them a second time. `vectorize`, `lanes`: see Emitter; a build with lanes also
    exports `lw_block_error` (the first error its blocks met, then none)."""
    em = Emitter(debug, vectorize, lanes)
    em.lines += [
        "// generated by loomwork: do not edit",
        f'#include "{HEADER_NAME}"',
        *(f'#include "{h.path.name}"  // {h.digest()}' for h in native_headers(functions + kernels)),
        "",
    ]
    structs = _structs_used(functions + kernels)
    if structs:
        em.lines.append(struct_declarations(structs))
    if before_functions:
        em.lines.append(before_functions)
    for fn in functions:
        em.function(fn)
    if before_kernels:
        em.lines.append(before_kernels)
    for k in kernels:
        if kernel_bodies:
            em.kernel(k)
        else:
            em.lines.append(args_record(k))
    if lanes:
        em.lines += ["#if LW_LANES", 'LW_EXPORT const char* lw_block_error() { return __atomic_exchange_n('
                     '&lw::blk_error, (const char*)nullptr, __ATOMIC_RELAXED); }', "#endif"]
    return number_lines("\n".join(em.lines) + "\n", SOURCE_NAME)


def number_lines(text: str, name: str) -> str:
    """`text` with each LINE_MARK replaced by the #line directive that gives the lines after it their
    own numbers in `text`, in a file called `name`."""
    lines = text.split("\n")
    for i, line in enumerate(lines):
        if line == LINE_MARK:
            lines[i] = f"#line {i + 2} {c_string(name)}"
    return "\n".join(lines)


def struct_declarations(types: list) -> str:
    """C++ declarations of struct types (dependencies first) and their adjoint accumulation."""
    ordered: list = []

    def visit(t: Any) -> None:
        if t in ordered:
            return
        for ft in t.fields.values():
            if is_struct(ft):
                visit(ft)
        ordered.append(t)

    for t in types:
        visit(t)
    lines = ["namespace lw {"]
    for t in ordered:
        name = t.cname.split("::", 1)[1]
        lines.append(f"struct {name} {{")
        lines += [f"    {ctype(ft)} {fn};" for fn, ft in t.fields.items()]
        lines.append("};")
        diff = [fn for fn, ft in t.fields.items() if not isinstance(ft, ArrayType) and struct_differentiable(ft)]
        lines.append(f"LW_FUNC void acc({name}& a, {name} b) {{")
        lines += [f"    acc(a.{fn}, b.{fn});" for fn in diff]
        lines.append("}")
        # gradients of arrays of structs accumulate field by field
        lines.append(f"LW_DEVICE {name} atomic_add({name}* p, {name} v) {{")
        lines.append(f"    {name} r{{}};")
        lines += [f"    r.{fn} = atomic_add(&p->{fn}, v.{fn});" for fn in diff]
        lines.append("    return r;")
        lines.append("}")
    lines.append("}  // namespace lw")
    return "\n".join(lines) + "\n"


def printf_directive(t: Any) -> str:
    """The printf directive(s) for a value of type `t` (vectors and matrices print their components)."""
    if T.is_composite(t):
        return "[" + " ".join([printf_directive(t._wp_scalar_type_)] * int(math.prod(t._shape_))) + "]"
    if t is T.bool_:
        return "%s"
    if t.is_float:
        return "%g"
    if t in (T.int64,):
        return "%lld"
    if t in (T.uint64,):
        return "%llu"
    return "%u" if t in (T.uint8, T.uint16, T.uint32) else "%d"


def printf_arg(o: Any, text: str) -> str:
    """C arguments for one value, promoted the way printf expects them."""
    t = o.type
    if T.is_composite(t):
        n = int(math.prod(t._shape_))
        return ", ".join(printf_arg(ir.Const(0, t._wp_scalar_type_), f"{text}.c[{i}]") for i in range(n))
    if t is T.bool_:
        return f'(({text}) ? "True" : "False")'
    if t.is_float:
        return f"(double)({text})"
    if t in (T.int64, T.uint64):
        return f"(long long)({text})"
    return f"(int)({text})"


def c_string(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def native_name(p: Var) -> str:
    """The name a wp.func_native snippet uses for a parameter (the Python name)."""
    return p.name[2:] if p.name.startswith("v_") else p.name


def native_headers(fns: list[ir.Function]) -> list:
    """The extension headers (kernels.extensions.NativeHeader) that the builtins called and value types
    used by `fns` are declared in, in order of first use. Each include line carries the header's digest,
    so the module's cache key changes when the header does."""
    found: dict = {}
    for fn in fns:
        for v in (*fn.params, *fn.locals):
            h = getattr(v.type, "header", None)
            if h is not None:
                found.setdefault(h, None)
        for s in ir.walk(fn.body):
            e = s.expr if isinstance(s, ir.Assign | ir.Eval) else None
            h = getattr(e.target, "header", None) if isinstance(e, ir.Call) else None
            if h is not None:
                found.setdefault(h, None)
    return list(found)


def _structs_used(fns: list[ir.Function]) -> list:
    found: list = []
    for fn in fns:
        for v in (*fn.params, *fn.locals):
            t = v.type.dtype if isinstance(v.type, ArrayType) else v.type
            if is_struct(t) and t not in found:
                found.append(t)
    return found

