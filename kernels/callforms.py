"""The kernel language's call forms: calls the front end handles itself rather than resolving against
the builtin table (constructors and casts, wp.tid, atomics, printing and checks, wp.static, local
arrays). Each is registered in `frontend.CALL_FORMS` by the name or
Python object it handles, or in `frontend.CALL_KINDS` by a predicate on the callee; extensions add
their own the same way."""

from __future__ import annotations

import ast
import ctypes
import dataclasses
import re
from typing import Any

from . import builtins as B
from . import ir
from . import types as T
from .annotations import arg_type
from .array import array as array_class
from .array import zeros as array_zeros
from .codegen import printf_directive
from .errors import KernelError, KernelSyntaxError, KernelTypeError
from .frontend import Builder, PyObj, _coerce, _describe, call_form, call_kind
from .functions import Function, GradWrapper, grad
from .ir import ArrayType, Const, Operand, ctype
from .mathlib import matrix_trs
from .structs import field_ctype, is_struct, is_tuple, tuple_type

# -- wp.tid, wp.static, breakpoint ------------------------------------------------------------------


@call_form("tid")
def tid(bld: Builder, node: ast.Call, obj: Any) -> Operand:
    if node.args or node.keywords:
        bld.error(node, KernelTypeError, "wp.tid() takes no arguments")
    if not bld.is_kernel:
        bld.error(node, KernelSyntaxError, "wp.tid() can only be used in kernels, not in functions")
    bld.check_tid_count(1, node)
    return bld.assign_temp(ir.Tid(0, 1), T.int32)


@call_form("static")
def static(bld: Builder, node: ast.Call, obj: Any) -> Any:
    return bld.from_python(bld.static_value(node), node)


@call_form("breakpoint")
def breakpoint_(bld: Builder, node: ast.Call, obj: Any) -> None:
    if node.args or node.keywords:
        bld.error(node, KernelTypeError, "wp.breakpoint() takes no arguments")
    ov = B.Overload("breakpoint", (), lambda b: None, "lw::breakpoint", "Utility", "", False)
    bld.emit(ir.Eval(ir.Call(ov, ()), line=bld.cur_line))


# -- atomics -------------------------------------------------------------------------------------


_WORDS = (T.int32, T.uint32, T.int64, T.uint64)
_ATOMIC_SCALARS = {  # the scalar types each atomic takes (of scalars, or of vectors and matrices but for cas, exch)
    **dict.fromkeys(("add", "sub"), ("[u]int32, [u]int64, float16, bfloat16, float32, or float64",
                                     _WORDS + (T.float16, T.bfloat16, T.float32, T.float64))),
    **dict.fromkeys(("min", "max"), ("[u]int32, [u]int64, bfloat16, float32, or float64",
                                     _WORDS + (T.bfloat16, T.float32, T.float64))),
    **dict.fromkeys(("cas", "exch"), ("[u]int32, [u]int64, float32, or float64", _WORDS + (T.float32, T.float64))),
    **dict.fromkeys(("and", "or", "xor"), ("[u]int32 or [u]int64", _WORDS)),
}


@call_form("atomic_add", "atomic_sub", "atomic_min", "atomic_max", "atomic_exch", "atomic_cas", "atomic_and",
           "atomic_or", "atomic_xor")
def atomic(bld: Builder, node: ast.Call, obj: Any) -> Operand:
    """atomic_op(array, i[, j, ...], [compare,] value): returns the previous value."""
    name = obj.name
    node = bld.by_position(name, node)
    nvalues = 2 if name == "atomic_cas" else 1
    if len(node.args) < 2 + nvalues:
        bld.error(node, KernelTypeError, f"wp.{name}(array, index..., {'compare, ' if nvalues == 2 else ''}value) "
                   "takes an array, indices and a value")
    arr = bld.value(node.args[0])
    if not isinstance(arr.type, ArrayType):
        bld.error(node.args[0], KernelTypeError, f"wp.{name}() needs an array first, got {T.type_name(arr.type)}")
    idx_nodes = node.args[1:-nvalues]
    if len(idx_nodes) != arr.type.ndim:
        bld.error(node, KernelTypeError, f"wp.{name}() on a {arr.type.ndim}-D array takes {arr.type.ndim} "
                   f"indices, got {len(idx_nodes)}")
    indices = tuple(bld.indices(i)[0] for i in idx_nodes)
    dtype = arr.type.dtype
    op = name.split("_", 1)[1]
    scalar = T.elem_scalar(dtype) if T.is_scalar(dtype) or T.is_composite(dtype) else None
    names, types = _ATOMIC_SCALARS[op]
    if scalar not in types or not (T.is_scalar(dtype) or T.is_vector(dtype) or T.is_matrix(dtype)) or (
            not T.is_scalar(dtype) and op in ("cas", "exch")):
        # Warp's rule and words: what the GPU's atomics take
        what = f" (with scalar type {T.type_name(scalar)})" if scalar is not None else ""
        bld.error(node, KernelTypeError, f"{name}() operations only work on arrays with {names} as the underlying "
                  f"scalar types, but got {T.type_name(dtype)}{what}")
    value = bld.convert(bld.value(node.args[-1]), dtype, node.args[-1], what=f"wp.{name}() value")
    compare = None
    if op == "cas":
        compare = bld.convert(bld.value(node.args[-2]), dtype, node.args[-2], what="wp.atomic_cas() compare")
    dest = bld.temp(dtype)
    bld.emit(ir.Atomic(op, arr, indices, value, dest, bld.site(node, arr), compare, line=bld.cur_line))
    return dest


# -- printing and checks ----------------------------------------------------------------------------


@call_form(print, "print")
def print_call(bld: Builder, node: ast.Call, obj: Any) -> None:
    """Python's print: string constants and scalar/vector/matrix values, space-separated, one line."""
    if node.keywords:
        bld.error(node, KernelTypeError, "print() takes no keyword arguments in kernels")
    parts, args = [], []
    for a in node.args:
        if isinstance(a, ast.Constant) and isinstance(a.value, str):
            parts.append(a.value.replace("%", "%%"))
            continue
        v = bld.materialize(bld.value(a))
        text, values = printable(bld, v, a)
        parts.append(text)
        args += values
    bld.emit(ir.Print(" ".join(parts) + "\n", tuple(args), line=bld.cur_line))


def printable(bld: Builder, v: Operand, node: ast.AST) -> tuple[str, list[Operand]]:
    """The format text and values that print `v`: a scalar, vector or matrix as such, an array as
    `array(shape=(...), dtype=...)` with its extents (Warp prints no array), a struct as
    `Name(field=..., ...)` (nested structs and array fields likewise)."""
    if T.is_scalar(v.type) or T.is_composite(v.type):
        return printf_directive(v.type), [v]
    if isinstance(v.type, ArrayType):
        dims = [bld.assign_temp(ir.Shape(v, d), T.int32) for d in range(v.type.ndim)]
        extents = ", ".join(printf_directive(T.int32) for _ in dims) + ("," if len(dims) == 1 else "")
        kind = "indexedarray" if v.type.indexed else "array"
        return f"{kind}(shape=({extents}), dtype={T.type_name(v.type.dtype)})", dims
    if is_struct(v.type):
        texts, values = [], []
        for name, t in v.type.fields.items():
            text, vals = printable(bld, bld.assign_temp(ir.Field(v, name), t), node)
            texts.append(f"{name}={text}")
            values += vals
        return f"{v.type.__name__}({', '.join(texts)})", values
    bld.error(node, KernelTypeError, f"print() cannot show a {T.type_name(v.type)}")


# %[flags][width][.precision][length]conversion
_DIRECTIVE = re.compile(r"%(?P<flags>[-+ #0]*)(?P<width>\*|\d+)?(?:\.(?P<prec>\*|\d*))?"
                        r"(?P<len>hh|h|ll|l|z|j|t|L)?(?P<conv>[a-zA-Z%])")
_INT_CONVERSIONS, _FLOAT_CONVERSIONS = "diuoxXc", "fFeEgGaA"


@call_form("printf")
def printf_call(bld: Builder, node: ast.Call, obj: Any) -> None:
    """wp.printf(fmt, *args): a C format string, one directive per scalar argument. Each directive is
    checked against its argument's kind (integer or float) at compile time, and its length rewritten to
    fit the value as passed (an int64 given to %d prints as %lld), so printf never reads past what it
    was given."""
    if not node.args or not (isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
        bld.error(node, KernelTypeError, "wp.printf takes a constant format string first")
    fmt = node.args[0].value
    values = [(bld.materialize(bld.value(a)), a) for a in node.args[1:]]
    for v, a in values:
        if not T.is_scalar(v.type):
            bld.error(a, KernelTypeError, f"wp.printf arguments must be scalars, got {T.type_name(v.type)}")
    pending = list(values)
    out, args, pos = [], [], 0

    def take(what: str) -> tuple[Operand, ast.expr]:
        if not pending:
            bld.error(node, KernelTypeError, f"wp.printf: the format needs more arguments than the "
                      f"{len(values)} given ({what} has none)")
        return pending.pop(0)

    def integer(what: str, wide: bool) -> Operand:
        v, a = take(what)
        if not T.is_int(v.type) and v.type is not T.bool_:
            bld.error(a, KernelTypeError, f"wp.printf: {what} takes an integer, got {T.type_name(v.type)} "
                      "(convert it, e.g. int(x))")
        t = (T.uint64 if v.type in (T.uint64, T.uint32) else T.int64) if wide else T.int32
        return v if v.type == t else bld.assign_temp(ir.Construct(t, (v,)), t)

    while (start := fmt.find("%", pos)) >= 0:
        out.append(fmt[pos:start])
        m = _DIRECTIVE.match(fmt, start)
        if m is None or (m["conv"] == "%" and m.end() - start > 2):
            bld.error(node.args[0], KernelTypeError, f"wp.printf: {fmt[start:start + 4]!r} is not a "
                      "directive this format understands (write %% for a percent sign)")
        pos = m.end()
        conv, length, what = m["conv"], m["len"] or "", repr(m.group())
        if conv == "%":
            out.append("%%")
            continue
        if m["width"] == "*":
            args.append(integer(f"the * width of {what}", wide=False))
        if m["prec"] == "*":
            args.append(integer(f"the * precision of {what}", wide=False))
        if conv in _INT_CONVERSIONS and length != "L":
            if length in ("h", "hh") or conv == "c":  # printed narrower on purpose: passed as an int
                args.append(integer(what, wide=False))
            else:  # a 64-bit value, or a long asked for: passed as a long long
                nxt = pending[0][0].type if pending else None
                wide = bool(length) or (T.is_int(nxt) and nxt.size == 8)
                args.append(integer(what, wide))
                length = "ll" if wide else ""
        elif conv in _FLOAT_CONVERSIONS and length in ("", "l"):
            v, a = take(what)
            if not T.is_float(v.type):
                bld.error(a, KernelTypeError, f"wp.printf: {what} takes a float, got {T.type_name(v.type)} "
                          "(convert it, e.g. float(i))")
            args.append(v)
            length = ""
        elif conv == "s":
            bld.error(node.args[0], KernelTypeError, f"wp.printf: {what} prints a string, and kernels have no "
                      "string values; put the text in the format itself")
        else:
            bld.error(node.args[0], KernelTypeError, f"wp.printf: {what} is not a directive kernels can print "
                      "(integers: %d %i %u %o %x %X %c, with h, hh, l, ll or z; floats: %f %e %g %a)")
        out.append(f"%{m['flags']}{m['width'] or ''}{'' if m['prec'] is None else '.' + m['prec']}{length}{conv}")
    out.append(fmt[pos:])
    if pending:
        bld.error(pending[0][1], KernelTypeError, f"wp.printf: the format has no directive for this argument "
                  f"({len(values)} arguments given)")
    bld.emit(ir.Print("".join(out), tuple(args), line=bld.cur_line))


@call_form("expect_near", "expect_eq", "expect_neq")
def expect_call(bld: Builder, node: ast.Call, obj: Any) -> None:
    """expect_near(a, b, tolerance=1e-6) / expect_eq(a, b) / expect_neq(a, b): checked where they run,
    reported by line."""
    name = obj.name
    args = list(node.args)
    kwargs = {k.arg: k.value for k in node.keywords}
    if name == "expect_near" and "tolerance" in kwargs:
        args.append(kwargs.pop("tolerance"))
    if kwargs or not 2 <= len(args) <= (3 if name == "expect_near" else 2):
        bld.error(node, KernelTypeError, f"wp.{name} takes (a, b{', tolerance' if name == 'expect_near' else ''})")
    a, b = bld.unify([bld.value(args[0]), bld.value(args[1])], node)
    a, b = bld.materialize(a), bld.materialize(b)
    if a.type != b.type:
        bld.error(node, KernelTypeError, f"wp.{name} compares values of one type, got {T.type_name(a.type)} "
                   f"and {T.type_name(b.type)}: Can't test equality for objects with different types")
    ok = T.is_float(a.type) or (T.is_composite(a.type) and a.type._wp_scalar_type_.is_float) if name == "expect_near" \
        else T.is_scalar(a.type) or T.is_composite(a.type)
    if not ok:
        bld.error(node, KernelTypeError, f"wp.{name} does not take {T.type_name(a.type)}")
    operands = (a, b)
    if name == "expect_near":
        tol = bld.value(args[2]) if len(args) == 3 else Const(1e-6, T.float64)
        if not T.is_float(tol.type) and not (isinstance(tol, Const) and tol.weak):
            bld.error(args[2], KernelTypeError, "the tolerance must be a float")
        operands = (a, b, Const(float(tol.value), T.float64) if isinstance(tol, Const) else tol)
    line, _ = bld.src.location(node)
    where = f"{bld.src.filename}:{line} in {bld.qualname}"
    bld.emit(ir.Print(where, operands, check=name, line=bld.cur_line))


# -- casts and constructors ----------------------------------------------------------------------


@call_form("cast")
def bit_cast(bld: Builder, node: ast.Call, obj: Any) -> Operand:
    """`wp.cast(value, dtype)`: reinterpret the value's bytes as `dtype` (sizes must agree)."""
    args = list(node.args) + [k.value for k in node.keywords if k.arg == "dtype"]
    if len(args) != 2 or any(k.arg not in ("dtype",) for k in node.keywords):
        bld.error(node, KernelTypeError, "wp.cast() takes (value, dtype)")
    v = bld.materialize(bld.value(args[0]))
    target = bld.eval_static(args[1], "wp.cast()'s dtype")
    try:
        target = arg_type(target)
    except TypeError as e:
        bld.error(args[1], KernelTypeError, f"wp.cast(): {e}")
    if isinstance(target, ArrayType) or isinstance(v.type, ArrayType):
        bld.error(node, KernelTypeError, "wp.cast() reinterprets values, not arrays (use array.view(dtype))")
    sizes = [ctypes.sizeof(field_ctype(t)) for t in (v.type, target)]
    if sizes[0] != sizes[1]:
        bld.error(node, KernelTypeError, f"wp.cast(): {T.type_name(v.type)} has {sizes[0]} bytes but "
                   f"{T.type_name(target)} has {sizes[1]}; the sizes must be equal")
    ov = B.Overload("cast", (B.Exact(v.type),), lambda b: target, f"lw::bit_cast<{ctype(target)}>",
                    "Utility", "", False)
    return bld.assign_temp(ir.Call(ov, (v,)), target)


@call_kind(lambda obj: isinstance(obj, type) and (issubclass(obj, T.ScalarType) or obj in (int, float, bool)))
def scalar_cast(bld: Builder, node: ast.Call, obj: Any) -> Operand:
    bld.no_keywords(node, obj.__name__)
    return cast(bld, T.scalar_type(obj), node)


@call_kind(T.is_composite)
def composite_constructor(bld: Builder, node: ast.Call, obj: Any) -> Operand:
    """`vec3(...)`, `mat32d(...)`: a concrete type's constructor. Its own `length=`/`shape=` and `dtype=` may
    be repeated as keywords (as `wp.vector`/`wp.matrix` take them); they must agree with the type."""
    node, args = transform_parts(bld, node, T.is_transform(obj))
    plain = T.is_vector(obj) and not (T.is_quat(obj) or T.is_transform(obj))
    own = {"dtype": obj._wp_scalar_type_}
    if plain:
        own["length"] = obj._length_
    elif T.is_matrix(obj):
        own["shape"] = tuple(obj._shape_)
    kw = static_keywords(bld, node, tuple(own), obj.__name__)
    for name, given in kw.items():
        same = static_scalar(bld, given, node) is own[name] if name == "dtype" else (
            tuple(given) == own[name] if isinstance(given, (tuple, list)) else given == own[name])
        if not same:
            bld.error(node, KernelTypeError, f"{obj.__name__}() was given {name}={given!r}, but its {name} is "
                      f"{_describe(own[name]) if name == 'dtype' else own[name]}")
    return construct(bld, obj, node, args)


@call_kind(is_struct)
def struct_constructor(bld: Builder, node: ast.Call, obj: Any) -> Operand:
    """`S()` is zeroed; `S(a, b=...)` sets the fields given, positionally in declaration order or by name."""
    names = list(obj.fields)
    if len(node.args) > len(names):
        bld.error(node, KernelTypeError, f"{obj.__name__}() takes at most {len(names)} field values, "
                  f"got {len(node.args)}")
    given = dict(zip(names, node.args, strict=False))
    for k in node.keywords:
        if k.arg not in obj.fields:
            bld.error(k.value, KernelTypeError, f"{obj.__name__} has no field '{k.arg}' (fields: {', '.join(names)})")
        if k.arg in given:
            bld.error(k.value, KernelTypeError, f"{obj.__name__}() got field '{k.arg}' twice")
        given[k.arg] = k.value
    var = bld.assign_temp(ir.Construct(obj, ()), obj)
    for name, expr in given.items():
        value = bld.convert(bld.value(expr), obj.fields[name], expr, what=f"field '{name}' of {obj.__name__}")
        bld.emit(ir.SetField(var, name, value, line=bld.cur_line))
    return var


@call_kind(lambda obj: isinstance(obj, Function))
def function_call(bld: Builder, node: ast.Call, obj: Any) -> Any:
    return bld.call_function(obj, node)


@call_form(grad)
def grad_form(bld: Builder, node: ast.Call, obj: Any) -> PyObj:
    """`wp.grad(f)` inside a kernel: the wrapper, a compile-time object that the enclosing call applies."""
    if len(node.args) != 1 or node.keywords:
        bld.error(node, KernelTypeError, "wp.grad() takes one @wp.func function or builtin")
    f = bld.expr(node.args[0])
    if not isinstance(f, PyObj) or not isinstance(f.value, Function | B.Builtin):
        bld.error(node.args[0], KernelTypeError, "wp.grad() takes a @wp.func function or a builtin")
    return PyObj(grad(f.value))


@dataclasses.dataclass(frozen=True)
class BuiltinGradient:
    """A builtin overload that `wp.grad` differentiates: `name` is its gradient wrapper's suffix."""

    name: str
    adjoint: str
    param_types: tuple
    ret: Any


@call_kind(lambda obj: isinstance(obj, GradWrapper))
def gradient_call(bld: Builder, node: ast.Call, obj: Any) -> Operand:
    """`wp.grad(f)(args)`: the gradient of f's float result at `args`, one value per parameter (a tuple
    for several), computed by f's adjoint with the result's adjoint 1 (the module then carries f's adjoint)."""
    name = obj.key
    args = [bld.value(a) for a in node.args]
    if isinstance(obj.func, B.Builtin):
        bld.no_keywords(node, f"wp.grad({name})")
        found, args = bld.resolve_literals(name, args, node)
        if found is None or found[0].outputs:
            bld.error(node, KernelTypeError, f"wp.grad({name}): no overload of {name}() takes "
                      f"({', '.join(T.type_name(a.type) for a in args)})")
        ov, bindings = found
        if not ov.differentiable or ov.adjoint is None:
            bld.error(node, KernelTypeError, f"wp.grad({name}): {ov.signature()} is not differentiable")
        ret, params = ov.ret(bindings), tuple(a.type for a in args)
        key = re.sub(r"\W", "_", f"{ov.adjoint}_{'_'.join(T.type_name(t) for t in params)}")
        target: Any = BuiltinGradient(f"b_{key}", ov.adjoint, params, ret)
        header = ov.header
    else:
        kwargs = {k.arg: bld.value(k.value) for k in node.keywords}
        inst, err = bld.ctx.instantiate(obj.func, args, kwargs)
        if inst is None:
            bld.error(node, KernelTypeError, err)
        target, header = inst.ir, None
        params = tuple(p.type for p in target.params)
        args = [bld.convert(a, t, node) for a, t in zip(inst.bind_args(args, kwargs), params, strict=True)]
        ret = target.ret
    if ret is None or not T.is_float(ret):
        got = "nothing" if ret is None else T.type_name(ret)
        bld.error(node, KernelTypeError, f"wp.grad({name}) needs {name} to return a float scalar; it returns {got}")
    if not params or any(isinstance(t, ArrayType) for t in params):
        bld.error(node, KernelTypeError, f"wp.grad({name}) differentiates with respect to value parameters; "
                  f"{name} has {'none' if not params else 'array parameters'}")
    result = params[0] if len(params) == 1 else tuple_type(params)
    bld.ctx.gradients[target.name] = target
    ov = B.Overload(f"grad({name})", (), lambda b: result, f"lw_grad_{target.name}", "Utility", "", False,
                    header=header)
    return bld.assign_temp(ir.Call(ov, tuple(args)), result)


@call_form(T.vector_value, T.vector, T.matrix_value, T.matrix)  # wp.types.vector(...) constructs too
def composite_form(bld: Builder, node: ast.Call, obj: Any) -> Operand:
    return composite_call(bld, obj in (T.vector_value, T.vector), node)


@call_form(T.quaternion, T.transformation)
def typed_kind_form(bld: Builder, node: ast.Call, obj: Any) -> Operand:
    return typed_kind_call(bld, obj, node)


@call_form("quat_identity", "transform_identity")
def identity_of(bld: Builder, node: ast.Call, obj: Any) -> Operand:
    """wp.quat_identity(dtype=...) / wp.transform_identity(dtype=...): the identity of that scalar type (the
    dtype also positional: transform_identity(float))."""
    kw = static_keywords(bld, node, ("dtype",), obj.name)
    if len(node.args) > 1 or (node.args and "dtype" in kw):
        bld.error(node, KernelTypeError, f"{obj.name}() takes only a dtype")
    if node.args:
        kw["dtype"] = bld.eval_static(node.args[0], f"{obj.name}() dtype")
    st = static_scalar(bld, kw.get("dtype", T.float32), node)
    value = T.quaternion(st)(0.0, 0.0, 0.0, 1.0) if obj.name == "quat_identity" else T.transformation(st)()
    return bld.from_python(value, node)


@call_form("transform_set_translation", "transform_set_rotation")
def transform_set_part(bld: Builder, node: ast.Call, obj: Any) -> None:
    """wp.transform_set_translation(t, p) / transform_set_rotation(t, q): `t.p = p` / `t.q = q`, in place."""
    if len(node.args) != 2 or node.keywords:
        bld.error(node, KernelTypeError, f"wp.{obj.name}() takes (xform, value)")
    base = bld.place(node.args[0])
    if not T.is_transform(base.type):
        bld.error(node.args[0], KernelTypeError, f"wp.{obj.name}() sets a part of a transform, not of a "
                  f"{T.type_name(base.type)}")
    bld.store_transform_part(base, "p" if obj.name.endswith("translation") else "q", bld.value(node.args[1]), node)


@call_form(type)
def type_of(bld: Builder, node: ast.Call, obj: Any) -> Any:
    """`type(x)` in a kernel: x's type, a compile-time object (e.g. `type(a[0])(0)` in generic code)."""
    if len(node.args) != 1 or node.keywords:
        bld.error(node, KernelTypeError, "type() takes one argument in kernels")
    v = bld.expr(node.args[0])
    if not isinstance(v, Operand):
        bld.error(node, KernelTypeError, "type() in kernels takes a value")
    return PyObj(v.type)


@call_form(len)
def len_form(bld: Builder, node: ast.Call, obj: Any) -> Operand:
    if len(node.args) != 1:
        bld.error(node, KernelTypeError, "len() takes one argument")
    v = bld.value(node.args[0])
    if isinstance(v.type, ArrayType):
        return bld.assign_temp(ir.Shape(v, 0), T.int32)
    if T.is_composite(v.type):
        return Const(v.type._shape_[0], T.int32)
    if is_tuple(v.type):
        return Const(len(v.type.fields), T.int32)
    bld.error(node, KernelTypeError, f"len() of {T.type_name(v.type)}")


@call_form(range)
def range_form(bld: Builder, node: ast.Call, obj: Any) -> None:
    bld.error(node, KernelSyntaxError, "range() can only be used as a for-loop iterable")


def cast(bld: Builder, t: Any, node: ast.Call) -> Operand:
    if len(node.args) != 1:
        if not node.args:
            return Const(_coerce(0, t), t)
        bld.error(node, KernelTypeError, f"{t.__name__}() takes one argument")
    v = bld.value(node.args[0])
    if isinstance(v, Const):
        return Const(bld.coerce(v.value, t, node, explicit=True), t)
    if not T.is_scalar(v.type):
        bld.error(node, KernelTypeError, f"cannot convert {T.type_name(v.type)} to {t.__name__}")
    if t is T.bool_:
        return bld.truth(v, node)
    if v.type == t:
        return v
    return bld.assign_temp(ir.Construct(t, (v,)), t)


def construct(bld: Builder, t: Any, node: ast.Call, args: list[Operand] | None = None) -> Operand:
    """A value of composite type `t` from the call's arguments (evaluated here unless given)."""
    n = t._length_
    if args is None:
        args = [bld.value(a) for a in node.args]
    if T.is_transform(t) and len(args) == 2 and not all(T.is_scalar(a.type) for a in args):  # wp.transform(p, q)
        return bld.call_builtin("_make_transform", args, node)
    if T.is_vector(t) and n == 6 and len(args) == 2 and all(T.is_vector(a.type) for a in args):
        return bld.call_builtin("_make_spatial", args, node)  # wp.spatial_vector(w, v)
    if T.is_quat(t) and len(args) == 2 and T.is_vector(args[0].type) and args[0].type._length_ == 3:
        xyz = [bld.assign_temp(ir.Extract(args[0], (Const(i, T.int32),)), args[0].type._wp_scalar_type_)
               for i in range(3)]
        args = [*xyz, args[1]]  # wp.quat(v, w): the imaginary part, then the real one
    if not args:
        return bld.assign_temp(ir.Construct(t, ()), t)
    if len(args) == 1 and T.is_composite(args[0].type):
        if args[0].type._shape_ != t._shape_:
            src, dst = args[0].type, t  # then Warp's words, whose first size is the target's
            words = (f"incompatible matrix of shape {dst._shape_} given when copy constructing a matrix of shape "
                     f"{src._shape_}" if T.is_matrix(dst) and T.is_matrix(src) else
                     f"incompatible vector of length {dst._length_} given when copy constructing a vector of length "
                     f"{src._length_}")
            bld.error(node, KernelTypeError, f"cannot convert {T.type_name(src)} to {T.type_name(dst)}: {words}")
        return args[0] if args[0].type == t else bld.assign_temp(ir.Construct(t, (args[0],)), t)
    if T.is_matrix(t) and len(args) == t._shape_[0] and all(T.is_vector(a.type) for a in args):
        bld.error(node, KernelTypeError, f"{T.type_name(t)}() takes {n} scalars (row-major), not row vectors")
    kind = ("quaternion" if T.is_quat(t) else "transform" if T.is_transform(t) else "matrix" if T.is_matrix(t)
            else "vector")
    if len(args) not in (1, n):
        given = f"incompatible number of values given ({len(args)}) when constructing a {kind}"
        size = f"shape {t._shape_}" if T.is_matrix(t) else f"length {n}"
        words = f"{given}; expected 0, 1, or {n}" if kind == "transform" else f"{given} of {size}"  # Warp's
        bld.error(node, KernelTypeError, f"{T.type_name(t)}() takes 0, 1 or {n} scalar arguments: {words}")
    what = (f"the value used to fill this {kind} is" if len(args) == 1 else
            f"all values used to initialize this {kind} are")
    return bld.assign_temp(ir.Construct(t, tuple(component(bld, a, t, node, what) for a in args)), t)


def component(bld: Builder, v: Operand, t: Any, node: ast.Call, what: str) -> Operand:
    """`v` as a component of a `t` value: a weak literal converts, a value of another scalar type is refused
    (in Warp's words, after ours)."""
    st = t._wp_scalar_type_
    if v.type == st or (isinstance(v, Const) and v.weak and T.is_scalar(v.type)):
        return bld.convert(v, st, node)
    bld.error(node, KernelTypeError, f"{T.type_name(t)}() got a {T.type_name(v.type)} value: {what} expected to be "
              f"of the type `{st.__name__}`")


def static_keywords(bld: Builder, node: ast.Call, allowed: tuple[str, ...], what: str) -> dict:
    """A call's keyword arguments, evaluated in Python when the kernel compiles."""
    out = {}
    for k in node.keywords:
        if k.arg not in allowed:
            bld.error(node, KernelTypeError, f"{what}() takes the keywords {', '.join(allowed)}, not {k.arg}")
        out[k.arg] = bld.compile_time(k.value, f"{what}({k.arg}=...)")  # type(x), v.dtype, a.length too
    return out


@call_form(T.identity)
def identity_call(bld: Builder, node: ast.Call, obj: Any) -> Operand:
    """wp.identity(n, dtype): compile-time arguments, an identity matrix value."""
    kw = static_keywords(bld, node, ("n", "dtype"), "wp.identity")
    for name, a in zip(("n", "dtype"), node.args, strict=False):
        kw[name] = bld.eval_static(a, f"wp.identity({name})")
    n, dtype = kw.get("n"), kw.get("dtype", T.float32)
    if not isinstance(n, int) or n < 1:
        bld.error(node, KernelTypeError, "wp.identity() needs a constant size n (e.g. n=3)")
    t = T.matrix((n, n), static_scalar(bld, dtype, node))
    one, zero = _coerce(1, t._wp_scalar_type_), _coerce(0, t._wp_scalar_type_)
    consts = tuple(Const(one if i % (n + 1) == 0 else zero, t._wp_scalar_type_) for i in range(n * n))
    return bld.assign_temp(ir.Construct(t, consts), t)


def static_scalar(bld: Builder, dtype: Any, node: ast.AST) -> Any:
    try:
        return T.scalar_type(dtype)
    except TypeError:
        bld.error(node, KernelTypeError, f"dtype must be a scalar type, got {_describe(dtype)}")


def composite_call(bld: Builder, is_vec: bool, node: ast.Call) -> Operand:
    """wp.vector(*components, length=, dtype=) and wp.matrix(*components, shape=, dtype=) or
    wp.matrix(pos, rot, scale): the type from the keywords (compile-time) and the arguments."""
    what = "wp.vector" if is_vec else "wp.matrix"
    kw = static_keywords(bld, node, ("length" if is_vec else "shape", "dtype"), what)
    args = [bld.value(a) for a in node.args]
    if not is_vec and len(args) == 3 and T.is_quat(args[1].type):
        return bld.call_function(matrix_trs, node)
    st = dtype_of_call(bld, kw, args, node)
    kind = "vector" if is_vec else "matrix"
    typed = [a for a in args if not (isinstance(a, Const) and a.weak)] or args  # literals follow typed values
    if "dtype" not in kw and len({a.type for a in typed}) > 1:
        found = ", ".join(dict.fromkeys(T.type_name(a.type) for a in typed))
        bld.error(node, KernelTypeError, f"{what}() without dtype= got values of types {found}: all values given "
                  f"when constructing a {kind} must have the same type")
    if not args and (kw.get("length") if is_vec else kw.get("shape")) is None:
        size = "length" if is_vec else "shape"
        bld.error(node, KernelTypeError, f"{what}() has no values to take its size from: the `{size}` argument must "
                  f"be specified when zero-initializing a {kind}")
    if is_vec:
        n = kw.get("length")
        if n is None:
            n = args[0].type._length_ if len(args) == 1 and T.is_vector(args[0].type) else len(args)
        if not isinstance(n, int) or n < 1:
            bld.error(node, KernelTypeError, "wp.vector() needs a constant positive length")
        return construct(bld, T.vector(n, st), node, args)
    shape = kw.get("shape")
    if shape is None:
        k = int(round(len(args) ** 0.5))
        if k * k != len(args):
            bld.error(node, KernelTypeError, f"wp.matrix() got {len(args)} values, not n*n for a square matrix: the "
                      "`shape` argument must be specified when initializing a matrix by value")
        shape = (k, k)
    if not (isinstance(shape, tuple) and len(shape) == 2 and all(isinstance(d, int) and d > 0 for d in shape)):
        bld.error(node, KernelTypeError, f"wp.matrix(shape=...) must be a constant (rows, cols), got {shape!r}")
    return construct(bld, T.matrix(shape, st), node, args)


def typed_kind_call(bld: Builder, factory: Any, node: ast.Call) -> Operand:
    """wp.types.quaternion(*components, dtype=) and wp.types.transformation(p, q, dtype=) in kernels."""
    node, args = transform_parts(bld, node, factory is T.transformation)
    kw = static_keywords(bld, node, ("dtype",), f"wp.types.{factory.__name__}")
    return construct(bld, factory(dtype_of_call(bld, kw, args, node)), node, args)


def transform_parts(bld: Builder, node: ast.Call, is_transform: bool) -> tuple[ast.Call, list[Operand]]:
    """A constructor call's positional values, with a transform's `p=` and `q=` keywords after them (and the
    call without those keywords)."""
    args = [bld.value(a) for a in node.args]
    if not is_transform:
        return node, args
    parts = {k.arg: k.value for k in node.keywords if k.arg in ("p", "q")}
    for name in ("p", "q"):
        if name in parts:
            args.append(bld.value(parts[name]))
    if len(args) == 1 and T.is_vector(args[0].type) and args[0].type._length_ == 3:  # transform(p): q = identity
        args.append(bld.from_python(T.quaternion(args[0].type._wp_scalar_type_)(0.0, 0.0, 0.0, 1.0), node))
    rest = [k for k in node.keywords if k.arg not in ("p", "q")]
    return ast.copy_location(ast.Call(func=node.func, args=node.args, keywords=rest), node), args


def dtype_of_call(bld: Builder, kw: dict, args: list[Operand], node: ast.Call) -> Any:
    """A constructor call's scalar type: its dtype= keyword, else its first argument's, else float32."""
    if "dtype" in kw:
        return static_scalar(bld, kw["dtype"], node)
    return T.elem_scalar(bld.materialize(args[0]).type) if args else T.float32


@call_form(array_zeros)
def local_array(bld: Builder, node: ast.Call, obj: Any) -> Operand:
    """wp.zeros(shape, dtype) inside a kernel: a fixed-size local array, zeroed. It is a local
    vector (1-D) or matrix (2-D, or 1-D of vectors) value: indexed, assigned and differentiated
    like one, private to the thread."""
    shape_node = next((k.value for k in node.keywords if k.arg == "shape"), node.args[0] if node.args else None)
    if shape_node is not None:
        try:
            bld.eval_static(shape_node, "wp.zeros(shape=...)")
        except KernelError:
            bld.error(shape_node, KernelTypeError, "wp.zeros() in a kernel makes a fixed-size local array: the "
                      "`shape` argument must be specified as a constant when zero-initializing an array")
    kw = static_keywords(bld, node, ("shape", "dtype"), "wp.zeros")
    for name, a in zip(("shape", "dtype"), node.args, strict=False):
        kw[name] = bld.eval_static(a, f"wp.zeros({name})")
    dtype = kw.get("dtype", T.float32)
    if not T.is_composite(dtype):
        dtype = static_scalar(bld, dtype, node)
    try:
        t = T.local_array_type(kw.get("shape"), dtype)
    except TypeError as e:
        bld.error(node, KernelTypeError, str(e))
    return bld.assign_temp(ir.Construct(t, ()), t)


@call_form(array_class)
def array_at_address(bld: Builder, node: ast.Call, obj: Any) -> Operand:
    """wp.array(ptr=p, shape=(n, ...), dtype=T) inside a kernel: a contiguous array over the memory at address
    `p` (a uint64, such as another array's `.ptr`), with extents known at run time. It has no gradient."""
    kw = {k.arg: k.value for k in node.keywords}
    if node.args or set(kw) != {"ptr", "shape", "dtype"}:
        bld.error(node, KernelTypeError, "wp.array() in a kernel takes the keywords ptr, shape and dtype (an array "
                  "over existing memory)")
    dtype = bld.eval_static(kw["dtype"], "wp.array(dtype=...)")
    try:
        dtype = arg_type(dtype)
    except TypeError as e:
        bld.error(kw["dtype"], KernelTypeError, f"wp.array(dtype=...): {e}")
    if isinstance(dtype, ArrayType):
        bld.error(kw["dtype"], KernelTypeError, "wp.array(dtype=...) must be a value type, not an array")
    dims = kw["shape"].elts if isinstance(kw["shape"], ast.Tuple) else [kw["shape"]]
    if not 1 <= len(dims) <= 4:
        bld.error(kw["shape"], KernelTypeError, f"wp.array(shape=...) takes 1 to 4 extents, got {len(dims)}")
    ptr = bld.convert(bld.value(kw["ptr"]), T.uint64, kw["ptr"], what="wp.array(ptr=...)")
    sizes = [bld.convert(bld.value(d), T.int32, d, what="an extent of wp.array(shape=...)") for d in dims]
    rt = ArrayType(dtype, len(dims))
    ov = B.Overload("array", (B.Exact(T.uint64),) + (B.Exact(T.int32),) * len(dims), lambda b: rt,
                    f"lw::array_at_address<{ctype(dtype)}>", "Utility", "", False)
    return bld.assign_temp(ir.Call(ov, (ptr, *sizes)), rt)


# -- types ---------------------------------------------------------------------------------
