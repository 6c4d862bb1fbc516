"""Single-exit form for reverse mode: `break`, `continue` and early `return` become an exit-state variable.

The reverse pass walks statements backwards and replays loop iterations, so control must not jump
out of the code it emits. This pass rewrites a function so that every jump is an assignment to
`lw_x` (0: running, 1: continue, 2: break, 3: return) and every statement that may follow a jump
runs under `if lw_x == 0`. Loops end when `lw_x >= 2` (the adjoint emitter checks that at the top of
each `for` iteration; `while` conditions include it). A function's returned value lands in `lw_rv`.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from loomwork.kernels import builtins as B
from loomwork.kernels import ir
from loomwork.kernels import types as T
from loomwork.kernels.ir import Const, Var

EXIT = Var("lw_x", T.int32)


def _ov(name: str, *types: Any) -> B.Overload:
    found = B.resolve(name, list(types))
    assert found is not None, (name, types)
    return found[0]


def has_jumps(body: tuple[ir.Stmt, ...]) -> bool:
    """Whether a block contains break, continue or return anywhere (nested included)."""
    return any(isinstance(s, ir.Break | ir.Continue | ir.Return) for s in ir.walk(body))


class Normalizer:
    def __init__(self, fn: ir.Function) -> None:
        self.fn = fn
        self.ntemps = 0
        self.new_locals: list[Var] = []
        self.rv = Var("lw_rv", fn.ret) if fn.ret is not None else None

    def temp(self, t: Any) -> Var:
        self.ntemps += 1
        v = Var(f"lw_n{self.ntemps}", t)
        self.new_locals.append(v)
        return v

    def exit_is(self, code: int, op: str = "eq") -> tuple[list[ir.Stmt], Var]:
        g = self.temp(T.bool_)
        return [ir.Assign(g, ir.Call(_ov(op, T.int32, T.int32), (EXIT, Const(code, T.int32))))], g

    def run(self) -> ir.Function:
        fn = self.fn
        if not has_jumps(fn.body):
            return fn
        body = [ir.Assign(EXIT, ir.Copy(Const(0, T.int32)))] + self.block(fn.body)
        extra = [EXIT] + ([self.rv] if self.rv is not None else [])
        if self.rv is not None:
            body.append(ir.Return(self.rv))
        return replace(fn, body=tuple(body), locals=fn.locals + tuple(extra) + tuple(self.new_locals))

    def block(self, stmts: tuple[ir.Stmt, ...]) -> list[ir.Stmt]:
        out: list[ir.Stmt] = []
        for i, s in enumerate(stmts):
            out.extend(self.stmt(s))
            if i + 1 < len(stmts) and (isinstance(s, ir.Break | ir.Continue | ir.Return) or has_jumps((s,))):
                guard, g = self.exit_is(0)
                out.extend(guard)
                out.append(ir.If(g, tuple(self.block(stmts[i + 1:])), ()))
                break
        return out

    def stmt(self, s: ir.Stmt) -> list[ir.Stmt]:
        if isinstance(s, ir.Break):
            return [ir.Assign(EXIT, ir.Copy(Const(2, T.int32)))]
        if isinstance(s, ir.Continue):
            return [ir.Assign(EXIT, ir.Copy(Const(1, T.int32)))]
        if isinstance(s, ir.Return):
            out: list[ir.Stmt] = []
            if s.value is not None:
                out.append(ir.Assign(self.rv, ir.Copy(s.value)))
            return out + [ir.Assign(EXIT, ir.Copy(Const(3, T.int32)))]
        if isinstance(s, ir.If):
            return [replace(s, body=tuple(self.block(s.body)), orelse=tuple(self.block(s.orelse)))]
        if isinstance(s, ir.For | ir.While):
            jumps = has_jumps(s.body)
            body = self.block(s.body)
            if jumps:  # a `continue` ends only its own iteration
                cont, g = self.exit_is(1)
                body += cont + [ir.If(g, (ir.Assign(EXIT, ir.Copy(Const(0, T.int32))),), ())]
            if isinstance(s, ir.For):
                loop: ir.Stmt = replace(s, body=tuple(body))
            else:
                cond_body, cond = list(s.cond_body), s.cond
                if jumps:  # keep looping only while running: cond and lw_x < 2
                    c = self.temp(T.bool_)
                    more, g = self.exit_is(2, "lt")
                    cond_body += [ir.Assign(c, ir.Copy(cond)), ir.If(c, tuple(more + [ir.Assign(c, ir.Copy(g))]), ())]
                    cond = c
                loop = replace(s, cond_body=tuple(cond_body), cond=cond, body=tuple(body))
            if not jumps:
                return [loop]
            brk, g = self.exit_is(2)
            return [loop] + brk + [ir.If(g, (ir.Assign(EXIT, ir.Copy(Const(0, T.int32))),), ())]
        return [s]


def normalize(fn: ir.Function) -> ir.Function:
    """`fn` in single-exit form (unchanged when it has no break, continue or return)."""
    return Normalizer(fn).run()
