"""The IR's node interface: operands, targets and blocks of every node, and the passes that read them."""

import dataclasses
import itertools
from collections import Counter

import pytest

from loomwork.autodiff.adjoint import loop_carried
from loomwork.autodiff.normalize import normalize
from loomwork.kernels import ir
from loomwork.kernels import types as T
from loomwork.kernels.builtins import resolve


class _Target:
    """Stands in for a builtin overload in hand-built IR."""

    def __init__(self, name: str = "f", native: str = "lw::f", out_positions: tuple = ()) -> None:
        self.name, self.native = name, native
        if out_positions:
            self.out_positions = out_positions


# fields that a statement writes, and those of them it does not also read
WRITTEN = {"Assign": "dest", "Atomic": "dest", "For": "var", "SetComponent": "var", "SetField": "var"}
WRITE_ONLY = {("Assign", "dest"), ("Atomic", "dest"), ("For", "var")}
NODE_CLASSES = [c for c in vars(ir).values() if isinstance(c, type) and issubclass(c, ir.Stmt | ir.Expr)
                and c not in (ir.Stmt, ir.Expr)]


def _instance(cls: type) -> tuple:
    """An instance of a node class with distinct values in every field, and those values by field name."""
    n = itertools.count()

    def var() -> ir.Var:
        return ir.Var(f"x{next(n)}", T.float32)

    values = {}
    for f in dataclasses.fields(cls):
        kind = f.type
        if f.name == "line":
            continue
        if kind in ("Operand", "Var", "Operand | None", "Var | None"):
            v = var()
        elif kind == "tuple[Operand, ...]":
            v = (var(), var())
        elif kind == "tuple[Stmt, ...]":
            v = (ir.Break(line=next(n)),)
        elif kind == "Expr":
            v = ir.Copy(var())
        elif kind == "Call":
            v = ir.Call(_Target(), (var(),))
        elif kind == "int":
            v = next(n)
        elif f.name == "op":
            v = "add"
        elif kind == "str":
            v = "name"
        elif kind == "str | None":
            v = None
        elif f.name == "type":
            v = T.vec3
        elif f.name == "target":
            v = _Target()
        else:
            raise AssertionError(f"no test value for {cls.__name__}.{f.name}: {kind}")
        values[f.name] = v
    return cls(**values), values


@pytest.mark.parametrize("cls", NODE_CLASSES, ids=lambda c: c.__name__)
def test_every_node_reports_each_field_through_the_interface(cls):
    """Every operand field is in operands() (with a role), written fields are targets(), block fields blocks()."""
    node, values = _instance(cls)
    name = cls.__name__
    read, blocks = [], []
    for field, v in values.items():
        if isinstance(v, ir.Var | ir.Const) and (name, field) not in WRITE_ONLY:
            read.append(v)
        elif isinstance(v, ir.Expr):
            read += v.operands()
        elif isinstance(v, tuple) and v and isinstance(v[0], ir.Var):
            read += v
        elif isinstance(v, tuple):
            blocks.append(v)
    assert Counter(node.operands()) == Counter(read)
    assert [o for o, _ in node.uses()] == list(node.operands())
    assert all(isinstance(u, ir.Use) for _, u in node.uses())
    assert all(a.array in node.operands() and isinstance(a.mode, ir.Mode) for a in node.accesses())
    if issubclass(cls, ir.Stmt):
        assert node.targets() == ((values[WRITTEN[name]],) if name in WRITTEN else ())
        assert node.blocks() == tuple(blocks)
        assert node.with_blocks(*node.blocks()) == node
        fresh = tuple((ir.Continue(line=100 + k),) for k in range(len(blocks)))
        assert node.with_blocks(*fresh).blocks() == fresh


F, I32 = T.float32, T.int32


def _overload(name: str, *types) -> object:
    return resolve(name, list(types))[0]


def test_passes_read_a_hand_built_kernel_through_the_interface():
    """walk, targets, operands, blocks and the array analyses agree with a small kernel written by hand."""
    arr = ir.ArrayType(F, 1)
    a, out = ir.Var("v_a", arr), ir.Var("v_out", arr)
    i, j, x, y, c = ir.Var("t1", I32), ir.Var("v_j", I32), ir.Var("v_x", F), ir.Var("v_y", F), ir.Var("v_c", T.bool_)
    zero, three, one = ir.Const(0, I32), ir.Const(3, I32), ir.Const(1, I32)
    branch = ir.If(c, (ir.Assign(y, ir.Call(_overload("add", F, F), (y, x)), line=7),), (ir.Break(line=9),), line=6)
    loop = ir.For(j, zero, three, one, (ir.Assign(c, ir.Call(_overload("lt", I32, I32), (j, i)), line=6), branch),
                  line=5)
    atomic = ir.Atomic("add", out, (zero,), y, None, 1, line=10)
    store = ir.Store(a, (i,), y, 2, line=11)
    body = (ir.Assign(i, ir.Tid(0, 1), line=2), ir.Assign(x, ir.Load(a, (i,), 0), line=3),
            ir.Assign(y, ir.Copy(x), line=4), loop, atomic, store)
    fn = ir.Function("k", (a, out), None, (i, j, x, y, c), body, True, tid_count=1)

    assert [type(s).__name__ for s in ir.walk(fn.body)] == [
        "Assign", "Assign", "Assign", "For", "Assign", "If", "Assign", "Break", "Atomic", "Store"]
    assert loop.targets() == (j,) and loop.operands() == (zero, three, one) and loop.blocks() == (loop.body,)
    assert branch.blocks() == (branch.body, branch.orelse) and branch.operands() == (c,)
    assert atomic.targets() == () and atomic.operands() == (out, zero, y)
    assert store.targets() == () and store.operands() == (a, i, y)
    assert ir.array_effects(fn, {}) == ({0}, {0, 1})
    assert ir.thread_exclusive_arrays(fn) == {a}
    assert ir.private_reductions(fn, "atomic") == {id(atomic): (out, (0,))}
    assert loop_carried(loop) == ([c, y], True)  # the branch needs v_c's value

    jumpless = normalize(fn)
    unknown = [s for s in ir.walk(jumpless.body) if s.line == 0]
    assert len(unknown) == 1  # only the entry's `lw_x = 0`: the rest carry the line of what they replace
    assert not any(isinstance(s, ir.Break) for s in ir.walk(jumpless.body))


def test_out_parameters_of_a_call_are_targets():
    """A call whose target names out-parameter positions writes those arguments (Assign and Eval)."""
    p, u, v, d = (ir.Var(n, F) for n in "puvd")
    call = ir.Call(_Target("query", out_positions=(1, 2)), (p, u, v))
    assert ir.Assign(d, call).targets() == (d, u, v)
    assert ir.Eval(call).targets() == (u, v)
    assert ir.Eval(ir.Call(_Target(), (p,))).targets() == ()
