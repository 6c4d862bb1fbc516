"""The IR's node interface (operands, targets, blocks) and the #line directives that map C++ to Python."""

import dataclasses
import inspect
import itertools
import re
import shutil
import subprocess
from collections import Counter

import pytest

import loomwork as wp
from loomwork.autodiff.adjoint import loop_carried, module_adjoint_source
from loomwork.autodiff.normalize import normalize
from loomwork.kernels import build, codegen, ir
from loomwork.kernels import types as T
from loomwork.kernels.builtins import resolve
from loomwork.kernels.frontend import Builder, Source
from loomwork.kernels.module import BuildContext


@wp.func
def bounded_sum(x: float, n: int) -> float:
    s = 0.0
    for _ in range(n):
        if s > 2.0:
            break
        s = s + x * x
    return s


@wp.kernel
def mapped(a: wp.array(dtype=float), b: wp.array(dtype=float)):
    i = wp.tid()
    b[i] = bounded_sum(a[i], 3) + wp.sin(a[i])


@wp.kernel(module="test_ir_debug", module_options={"mode": "debug"})
def debug_mapped(a: wp.array(dtype=float)):
    i = wp.tid()
    a[i] = wp.cos(a[i])


class _Target:
    """Stands in for a builtin overload in hand-built IR."""

    def __init__(self, name: str = "f", native: str = "lw::f") -> None:
        self.name, self.native = name, native


# fields that a statement writes, and those of them it does not also read
WRITTEN = {"Assign": "dest", "Atomic": "dest", "For": "var", "SetComponent": "var", "SetField": "var"}
WRITE_ONLY = {("Assign", "dest"), ("Atomic", "dest"), ("For", "var")}
NODE_CLASSES = [c for c in vars(ir).values() if isinstance(c, type) and issubclass(c, ir.Stmt | ir.Expr)
                and c not in (ir.Stmt, ir.Expr)]


@wp.struct
class _VALUE:
    v: wp.vec3


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
        elif kind == "tuple[Part, ...]":  # a field, then a component by a variable index: the index is read
            v = (ir.Part(_VALUE, name="v"), ir.Part(T.vec3, indices=(var(),)))
        elif kind == "tuple[tuple[Operand | None, Operand | None, Operand | None], ...]":  # slice bounds
            v = ((var(), None, var()), (var(), None, None))
        elif kind == "tuple[bool, ...]":
            v = (True, False)
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
        elif isinstance(v, tuple) and v and isinstance(v[0], tuple):  # slice bounds: (start, stop, step) each
            read += [b for bs in v for b in bs if b is not None]
        elif isinstance(v, tuple) and v and isinstance(v[0], bool):
            pass
        elif isinstance(v, tuple) and v and isinstance(v[0], ir.Part):
            read += [i for p in v for i in p.indices]
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
    assert ir.in_place(fn, {}) == ({0}, set(), {}, {id(store)})  # a is read, then updated: restorable
    late = dataclasses.replace(fn, body=(*body, ir.Assign(x, ir.Load(a, (i,), 0), line=12)))
    assert ir.in_place(late, {}).conflicts == {0: (12, 11)}  # read back after the store
    stored_first = dataclasses.replace(fn, body=(body[0], store, ir.Assign(x, ir.Load(a, (i,), 0), line=12)))
    assert ir.in_place(stored_first, {}).updated == {0}  # only read after it is stored: what the launch left
    assert ir.thread_exclusive_arrays(fn) == {a}
    assert ir.private_reductions(fn, "atomic") == {id(atomic): (out, (0,))}
    # v_c is assigned before the branch reads it in each iteration, and v_y only accumulates: iteration k
    # is replayed alone; with the branch first, it reads the v_c of iteration k - 1, which must be recomputed
    assert loop_carried(loop) == ([c, y], False)
    assert loop_carried(dataclasses.replace(loop, body=loop.body[::-1])) == ([c, y], True)

    jumpless = normalize(fn)
    unknown = [s for s in ir.walk(jumpless.body) if s.line == 0]
    assert len(unknown) == 1  # only the entry's `lw_x = 0`: the rest carry the line of what they replace
    assert not any(isinstance(s, ir.Break) for s in ir.walk(jumpless.body))


# -- #line directives -------------------------------------------------------------------------------


def _presumed(text: str, name: str) -> list:
    """The (file, line) a C++ compiler gives each line of `text` (None for the #line directives)."""
    where, out = [name, 1], []
    for line in text.split("\n"):
        m = re.fullmatch(r'#line (\d+)(?: "(.*)")?', line)
        if m:
            where = [m[2] or where[0], int(m[1])]
            out.append(None)
        else:
            out.append(tuple(where))
            where[1] += 1
    return out


def _python_line(func, text: str) -> int:
    lines, first = inspect.getsourcelines(func)
    return first + next(k for k, line in enumerate(lines) if text in line)


def _sources(k) -> tuple[str, str]:
    ctx = BuildContext(False)
    fn = Builder(Source(k.func), k.key, k.cname, dict(zip(*k.signature(), strict=True)), True, ctx).build()
    return codegen.module_source(ctx.order, [fn], False), module_adjoint_source(ctx.order, [fn], False, ctx.custom)


def test_generated_lines_map_to_python_and_back():
    """Statements (forward and adjoint) map to their Python lines; the rest keeps the generated file's numbers."""
    forward, adjoint = _sources(mapped)
    sin_line = _python_line(mapped.func, "wp.sin")
    square_line = _python_line(bounded_sum.overloads[0], "x * x")
    for text, name, sin, square in ((forward, "module.cpp", "lw::sin(", "lw::mul(v_x, v_x)"),
                                    (adjoint, "module.cpp (adjoint part)", "lw::adj_sin(", "lw::adj_mul(v_x, v_x")):
        where = _presumed(text, name)
        lines = text.split("\n")
        for k, w in enumerate(where):
            if w is not None and w[0] == name:
                assert w[1] == k + 1, (k, lines[k])
        assert {where[k] for k, line in enumerate(lines) if sin in line} == {(__file__, sin_line)}
        assert {where[k] for k, line in enumerate(lines) if square in line} == {(__file__, square_line)}
        assert {where[k][0] for k, line in enumerate(lines) if "LW_EXPORT" in line} == {name}


def test_compiler_errors_name_the_python_file_and_line(tmp_path):
    """A C++ error in a statement is reported at its Python file and line (odd characters in the name too)."""
    x = ir.Var("v_x", F)
    body = (ir.Assign(x, ir.Copy(ir.Const(1.0, F)), line=40),
            ir.Assign(x, ir.Call(_Target(native="lw::no_such_builtin"), (x,)), line=41))
    filename = str(tmp_path / 'odd "name" \\ here.py')
    fn = ir.Function("k_bad", (), None, (x,), body, True, tid_count=1, filename=filename)
    source = codegen.module_source([], [fn], False)
    with pytest.raises(wp.CompileError) as err:
        build.build_cpu(source, "bad", str(tmp_path), False, False, False, "a broken module")
    assert f"{filename}:41:" in str(err.value)
    if build.nvrtc_available():
        with pytest.raises(wp.CompileError) as err:
            build.build_cuda(source, "bad", str(tmp_path), 75, False, False, False, "a broken module")
        assert f"{filename}(41)" in str(err.value)


@pytest.mark.skipif(shutil.which("readelf") is None, reason="needs readelf to read the debug line table")
def test_debug_builds_map_machine_code_to_python_lines():
    """A debug build's line table (DWARF) names this file and the kernel's statement lines."""
    path = debug_mapped.module.load(wp.get_device("cpu")).path
    table = subprocess.run(["readelf", "--debug-dump=decodedline", str(path)], capture_output=True, text=True,
                           check=True).stdout
    name = __file__.rsplit("/", 1)[-1]
    lines = {int(row.split()[1]) for row in table.splitlines() if row.startswith(name + " ")}
    assert _python_line(debug_mapped.func, "wp.cos") in lines
