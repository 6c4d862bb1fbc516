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


# the exit state each jump sets
_EXIT_CODES: dict[type, int] = {ir.Continue: 1, ir.Break: 2, ir.Return: 3}


def has_jumps(body: tuple[ir.Stmt, ...]) -> bool:
    """Whether a block contains break, continue or return anywhere (nested included)."""
    return any(type(s) in _EXIT_CODES for s in ir.walk(body))


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

    def exit_is(self, code: int, line: int, op: str = "eq") -> tuple[list[ir.Stmt], Var]:
        g = self.temp(T.bool_)
        return [ir.Assign(g, ir.Call(_ov(op, T.int32, T.int32), (EXIT, Const(code, T.int32))), line=line)], g

    def run(self) -> ir.Function:
        fn = self.fn
        if not has_jumps(fn.body):
            return fn
        body = [_set_exit(0, 0), *self.block(fn.body)]
        extra = [EXIT] + ([self.rv] if self.rv is not None else [])
        if self.rv is not None:
            body.append(ir.Return(self.rv))
        return replace(fn, body=tuple(body), locals=fn.locals + tuple(extra) + tuple(self.new_locals))

    def block(self, stmts: tuple[ir.Stmt, ...]) -> tuple[ir.Stmt, ...]:
        out: list[ir.Stmt] = []
        for i, s in enumerate(stmts):
            out.extend(self.stmt(s))
            if i + 1 < len(stmts) and has_jumps((s,)):  # what follows runs only while no jump was taken
                guard, g = self.exit_is(0, s.line)
                out.extend(guard)
                out.append(ir.If(g, self.block(stmts[i + 1:]), (), line=s.line))
                break
        return tuple(out)

    def stmt(self, s: ir.Stmt) -> list[ir.Stmt]:
        code = _EXIT_CODES.get(type(s))
        if code is not None:  # a jump sets the exit state; a returned value lands in lw_rv
            return [ir.Assign(self.rv, ir.Copy(v), line=s.line) for v in s.operands()] + [_set_exit(code, s.line)]
        if isinstance(s, ir.For | ir.While) and has_jumps(s.body):
            return self.loop(s)
        return [s.with_blocks(*(self.block(b) for b in s.blocks()))]

    def loop(self, s: ir.For | ir.While) -> list[ir.Stmt]:
        """A loop whose body jumps: `continue` ends only its own iteration, `break` and `return` end the loop."""
        body = self.block(s.body)
        cont, g = self.exit_is(1, s.line)
        body += (*cont, ir.If(g, (_set_exit(0, s.line),), (), line=s.line))
        if isinstance(s, ir.For):
            loop = s.with_blocks(body)
        else:  # keep looping only while running: cond and lw_x < 2
            c = self.temp(T.bool_)
            more, g = self.exit_is(2, s.line, "lt")
            cond_body = (*s.cond_body, ir.Assign(c, ir.Copy(s.cond), line=s.line),
                         ir.If(c, (*more, ir.Assign(c, ir.Copy(g), line=s.line)), (), line=s.line))
            loop = replace(s, cond=c).with_blocks(cond_body, body)
        brk, g = self.exit_is(2, s.line)
        return [loop, *brk, ir.If(g, (_set_exit(0, s.line),), (), line=s.line)]


def _set_exit(code: int, line: int) -> ir.Assign:
    return ir.Assign(EXIT, ir.Copy(Const(code, T.int32)), line=line)


def normalize(fn: ir.Function) -> ir.Function:
    """`fn` in single-exit form (unchanged when it has no break, continue or return)."""
    return Normalizer(fn).run()
