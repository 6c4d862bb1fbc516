"""Errors are part of the API: each names the kernel, the argument or the source line, with a caret."""

import itertools
import re
import traceback

import numpy as np
import pytest

import loomwork as wp

_ids = itertools.count()


def fresh_kernel(fn):
    """Make `fn` a kernel in a module of its own, so its error cannot break other tests' kernels."""
    return wp.kernel(fn, module=f"test_errors_{next(_ids)}")


def build_error(fn, exc_type):
    k = fresh_kernel(fn)
    with pytest.raises(exc_type) as info:
        wp.launch(k, dim=1, inputs=[np.zeros(1, dtype=np.float32)])
    return str(info.value)


def test_unsupported_constructs_point_at_the_line():
    """List comprehensions, lambdas, try, with and f-strings are rejected with a caret."""

    def comprehension(a: wp.array(dtype=float)):
        b = [x for x in range(3)]  # noqa: F841

    def uses_lambda(a: wp.array(dtype=float)):
        f = lambda x: x  # noqa: E731, F841

    def uses_try(a: wp.array(dtype=float)):
        try:
            a[0] = 1.0
        except Exception:
            pass

    def uses_fstring(a: wp.array(dtype=float)):
        s = f"{a}"  # noqa: F841

    cases = [(comprehension, "list comprehensions are not supported"),
             (uses_lambda, "lambdas are not supported"),
             (uses_try, "exceptions (try) is not supported"),
             (uses_fstring, "f-strings are not supported")]
    for fn, text in cases:
        msg = build_error(fn, wp.KernelSyntaxError)
        assert text in msg, msg
        assert f"kernel '{fn.__qualname__}'" in msg
        assert "test_errors.py:" in msg and "^" in msg


def test_syntax_errors_are_python_syntax_errors():
    """KernelSyntaxError is also a SyntaxError."""

    def uses_with(a: wp.array(dtype=float)):
        with open("x"):
            pass

    build_error(uses_with, SyntaxError)
    try:
        wp.launch(fresh_kernel(uses_with), dim=1, inputs=[np.zeros(1, dtype=np.float32)])
    except SyntaxError:
        shown = traceback.format_exc()
    assert "with blocks" in shown and "<no detail available>" not in shown  # tracebacks show the message


def test_unknown_name_is_a_name_error():
    """An undefined name raises NameError with the name and the caret under it (a KeyError too, with Warp's
    words, which is what Warp raises)."""

    def unknown(a: wp.array(dtype=float)):
        a[0] = undefined_thing  # noqa: F821

    msg = build_error(unknown, NameError)
    assert "name 'undefined_thing' is not defined" in msg
    assert "^^^^^^^^^^^^^^^" in msg
    assert "Referencing undefined symbol: undefined_thing" in build_error(unknown, KeyError)


def test_type_mismatch_lists_the_overloads():
    """Mixing float and int operands is a TypeError naming the candidates and suggesting a cast."""

    def mixed(a: wp.array(dtype=float)):
        i = wp.tid()
        a[i] = a[i] + i

    msg = build_error(mixed, TypeError)
    assert "no overload of add() takes (float32, int32)" in msg
    assert "add(Scalar, Scalar)" in msg and "float(i)" in msg


def test_store_of_the_wrong_type():
    """Storing a vec3 into a float array is a TypeError."""

    def bad_store(a: wp.array(dtype=float)):
        a[0] = wp.vec3(1.0)

    assert "array element expects float32, got vec3f" in build_error(bad_store, wp.KernelTypeError)


def test_assigning_into_a_temporary_value():
    """A component or field store into a call's or an expression's result is an error at its line."""

    def into_call(a: wp.array(dtype=float)):
        wp.vec3d(1.0, 2.0, 3.0)[2] = wp.float64(a[0])

    def into_expression(a: wp.array(dtype=float)):
        v = wp.vec3(1.0)
        (v + v).x = a[0]

    for fn in (into_call, into_expression):
        msg = build_error(fn, wp.KernelSyntaxError)
        assert "cannot assign into a part of a temporary value" in msg and "test_errors.py:" in msg and "^" in msg


def test_variable_changing_type():
    """A local assigned an int, then a vec3, is a TypeError."""

    def retyped(a: wp.array(dtype=float)):
        x = 1
        x = wp.vec3(0.0)  # noqa: F841

    assert "variable 'x' expects int32, got vec3f" in build_error(retyped, TypeError)


def test_attribute_and_index_errors():
    """A missing vector component is an AttributeError; a constant index past a vector's end an IndexError."""

    def bad_attr(a: wp.array(dtype=float)):
        v = wp.vec2(1.0)
        a[0] = v.z

    def bad_index(a: wp.array(dtype=float)):
        v = wp.vec3(1.0)
        a[0] = v[3]

    assert "vec2f has no attribute 'z'" in build_error(bad_attr, AttributeError)
    assert "index 3 out of range for vec3f" in build_error(bad_index, IndexError)


def test_recursion_and_python_calls_are_rejected():
    """Recursive @wp.func and calls to plain Python functions raise clear errors."""

    @wp.func
    def recurse(x: float):
        return recurse(x)

    def helper(x):
        return x

    def calls_recursive(a: wp.array(dtype=float)):
        a[0] = recurse(1.0)

    def calls_python(a: wp.array(dtype=float)):
        a[0] = helper(1.0)

    assert "recursion is not supported" in build_error(calls_recursive, TypeError)
    assert "cannot call 'test_recursion_and_python_calls_are_rejected.<locals>.helper'" in build_error(
        calls_python, TypeError)


def test_kernel_return_value_and_loops_over_arrays():
    """Kernels cannot return values (a TypeError, as in Warp), and loop only over range()."""

    def returns(a: wp.array(dtype=float)):
        return 1.0

    def loops_over_array(a: wp.array(dtype=float)):
        for _x in a:
            pass

    assert "Warp kernels cannot return values" in build_error(returns, TypeError)
    assert "kernels loop only over range" in build_error(loops_over_array, SyntaxError)


def test_missing_annotation_names_the_parameter():
    """A kernel parameter without a type annotation is reported by name."""

    def unannotated(a):
        pass

    msg = build_error(unannotated, TypeError)
    assert "parameter 'a' needs a type annotation" in msg


def test_function_argument_mismatch():
    """Calling a @wp.func with arguments no overload takes lists what each overload expects."""

    @wp.func
    def takes_vec(v: wp.vec3):
        return v[0]

    def caller(a: wp.array(dtype=float)):
        a[0] = takes_vec(1.0)

    msg = build_error(caller, TypeError)
    assert "argument 'v' expects vec3f, got float32" in msg


def test_integer_constants_that_do_not_fit():
    """An integer literal or constant expression that does not fit where it goes is a TypeError at its
    line (it became 0 or wrapped): wider than 64 bits, or outside an int32 / unsigned target's range."""

    def power(a: wp.array(dtype=float)):
        a[0] = float(2**100)

    def literal(a: wp.array(dtype=float)):
        a[0] = float(100000000000000000000)

    def shift_into_int32(a: wp.array(dtype=float)):
        n = int(a[0])
        n = 1 << 40
        a[0] = float(n)

    def into_int32(a: wp.array(dtype=float)):
        x: wp.int32 = 3000000000
        a[0] = float(x)

    def cast_loses_bits(a: wp.array(dtype=float)):
        a[0] = float(wp.int32(2**40))

    def negative_into_unsigned(a: wp.array(dtype=float)):
        a[0] = float(wp.uint32(a[0]) + wp.uint32(5) * -1)

    cases = [(power, "at least 101 bits: it does not fit in 64 bits"),
             (literal, "the integer constant 100000000000000000000 does not fit in 64 bits"),
             (shift_into_int32, "the constant 1099511627776 does not fit in int32"),
             (into_int32, "the constant 3000000000 does not fit in int32"),
             (cast_loses_bits, "the constant 1099511627776 does not fit in int32"),
             (negative_into_unsigned, "the constant -1 does not fit in uint32")]
    for fn, text in cases:
        msg = build_error(fn, wp.KernelTypeError)
        assert text in msg and "test_errors.py:" in msg, msg


def test_function_signatures_and_returns_are_checked():
    """*args / **kwargs, a return value that does not match the annotation, a function that can fall off its
    end while returning a value elsewhere, and '-> None' with a value are TypeErrors naming file and line."""

    @wp.func
    def star_args(*args):
        return 1.0

    @wp.func
    def star_kwargs(x: float, **kw):
        return x

    @wp.func
    def annotated_int(x: float) -> int:
        return x * 2.0

    @wp.func
    def falls_off(x: float) -> float:
        if x > 0.0:
            return x

    @wp.func
    def inferred_falls_off(x: float):
        for _ in range(3):
            if x > 0.0:
                return x

    @wp.func
    def annotated_none(x: float) -> None:
        return x

    def call(f):
        def caller(a: wp.array(dtype=float)):
            a[0] = f(a[0])
        return caller

    cases = [(star_args, "has the parameter *args: *args and **kwargs are not supported"),
             (star_kwargs, "has the parameter **kw"),
             (annotated_int, "`annotated_int` has its return type annotated as `int` but the code returns a value of "
                             "type `float32`"),
             (falls_off, "returns float32, but it can reach its end without a return"),
             (inferred_falls_off, "can reach its end without a return"),
             (annotated_none, "annotated '-> None' but returns a value")]
    for f, text in cases:
        msg = build_error(call(f), wp.KernelTypeError)
        assert text in msg and "test_errors.py:" in msg, msg

    @wp.func
    def generic_square(x: wp.Float) -> wp.Float:  # a generic annotation: the type comes from the returns
        return x * x

    @wp.func
    def every_path_returns(x: float) -> wp.float32:
        if x > 0.0:
            return 1.0
        elif x < -1.0:
            return 2  # a literal converts to the annotated type
        while True:
            if x < 5.0:
                return generic_square(x)

    k = fresh_kernel(call(every_path_returns))
    a = wp.array(np.array([-3.0], dtype=np.float32))
    wp.launch(k, 1, inputs=[a])
    assert a.numpy()[0] == 2.0


def test_local_assigned_on_some_paths_only():
    """A local assigned in one branch of an if, or only in a loop that may run zero times or leave before
    assigning it, and read after it is a NameError naming it and the line; assigned in both branches, before
    the if, in the branch that carries on, or in a loop every way out of which assigns it, it is not."""

    def one_branch(a: wp.array(dtype=float)):
        if a[0] > 0.0:
            y = 2.0
        a[0] = y

    def nested_branch(a: wp.array(dtype=float)):
        y = 0.0
        if a[0] > 0.0:
            if a[1] > 0.0:
                z = 1.0
            else:
                y = 2.0
            a[0] = z + y

    def dynamic_range(a: wp.array(dtype=float)):
        for j in range(int(a[0])):
            y = float(j)
        a[0] = y

    def while_loop(a: wp.array(dtype=float)):
        while a[0] > 0.0:
            a[0] = a[0] - 1.0
            t = a[0]
        a[1] = t

    def break_first(a: wp.array(dtype=float)):
        for j in range(3):
            if a[j] > 0.0:
                break
            y = a[j]
        a[0] = y

    def while_true_break_first(a: wp.array(dtype=float)):
        while True:
            if a[0] > 0.0:
                break
            y = a[0]
            break
        a[0] = y

    def empty_range(a: wp.array(dtype=float)):
        for _j in range(0):
            y = 1.0
        a[0] = y

    branch, loop = "only in some branches of an if above", "only inside a loop above, which may run zero times"
    for fn, name, why in ((one_branch, "y", branch), (nested_branch, "z", branch), (dynamic_range, "y", loop),
                          (while_loop, "t", loop), (break_first, "y", loop), (while_true_break_first, "y", loop),
                          (empty_range, "y", loop)):
        msg = build_error(fn, NameError)
        assert f"local variable '{name}' may be read here before it is assigned: it is assigned {why}" in msg, msg
        assert "test_errors.py:" in msg

    def every_path(a: wp.array(dtype=float)):
        i = wp.tid()
        if a[i] > 0.0:
            y = 1.0
        elif a[i] < -1.0:
            y = 2.0
        else:
            y = 3.0
        if a[i] > 5.0:
            return
        else:
            z = y
        w = 0.0
        last = 0.0
        for j in range(int(a[i])):
            if j > 2:
                continue
            w = w + z
            last = w
        for j in range(100):  # a constant range runs: its last value, as in Python and Warp
            u = float(j)
        while True:  # left only by the break, after the assignment
            w = w - 1.0
            t = w
            if w <= 0.0:
                break
        a[i] = y + z + w + last + t + u

    k = fresh_kernel(every_path)
    a = wp.array(np.array([2.5], dtype=np.float32))
    wp.launch(k, 1, inputs=[a])
    assert a.numpy()[0] == 1.0 + 1.0 + 0.0 + 2.0 + 0.0 + 99.0

    def do_while(a: wp.array(dtype=float)):
        for _k in range(2):
            s = 0.0
            while s < 1.5:  # true for the value s holds on entry: the body runs, so p is assigned
                s = s + a[0]
                p = s * 2.0
            a[1] = p

    k = fresh_kernel(do_while)
    a = wp.array(np.array([1.0, 0.0], dtype=np.float32))
    wp.launch(k, 1, inputs=[a])
    assert a.numpy()[1] == 4.0

    def changed_before_loop(a: wp.array(dtype=float)):
        s = 0.0
        s = a[0]  # no longer known: the loop may not run
        while s < 1.5:
            s = s + 1.0
            p = s
        a[1] = p

    assert "local variable 'p' may be read here" in build_error(changed_before_loop, NameError)


# -- launch-time errors ----------------------------------------------------------------------------


@wp.kernel
def scale(x: wp.array(dtype=float), y: wp.array(dtype=float), s: float, n: int):
    i = wp.tid()
    y[i] = x[i] * s + float(n)


@wp.kernel
def grid2(out: wp.array2d(dtype=float)):
    i, j = wp.tid()
    out[i, j] = 1.0


@wp.kernel
def reads_past_end(x: wp.array(dtype=float), y: wp.array2d(dtype=float)):
    i = wp.tid()
    y[0, i] = x[i + 1]


def test_wrong_argument_count_names_the_signature():
    """Too few arguments: LaunchError with the kernel name and its parameters."""
    with pytest.raises(wp.LaunchError, match=r"kernel 'scale' \(defined at .*test_errors.py:\d+\) takes 4 "
                                             r"argument\(s\) \(x: array\(dtype=float32"):
        wp.launch(scale, dim=1, inputs=[np.zeros(1, np.float32)])


def test_wrong_argument_types_name_the_argument():
    """A float64 NumPy array, a float where an int goes, a scalar where an array goes: errors name the argument."""
    x = np.zeros(4, np.float32)
    with pytest.raises(TypeError, match="argument 'x' expects array\\(dtype=float32, ndim=1\\), got a NumPy array "
                                        "of float64"):
        wp.launch(scale, dim=4, inputs=[np.zeros(4), x, 1.0, 1])
    with pytest.raises(TypeError, match="argument 'n' expects int32, got float"):
        wp.launch(scale, dim=4, inputs=[x, x, 1.0, 1.5])
    with pytest.raises(TypeError, match="argument 'y' expects array"):
        wp.launch(scale, dim=4, inputs=[x, 3.0, 1.0, 1])
    with pytest.raises(TypeError, match="argument 'x' expects .*got an array of dtype int32"):
        wp.launch(scale, dim=4, inputs=[wp.zeros(4, dtype=int), x, 1.0, 1])
    with pytest.raises(ValueError, match="argument 'n': 10000000000 does not fit in int32"):
        wp.launch(scale, dim=4, inputs=[x, x, 1.0, 10**10])


def test_bad_launch_dimensions():
    """Negative or too many dimensions, and a grid that does not match wp.tid() unpacking, raise ValueError."""
    x = np.zeros(4, np.float32)
    with pytest.raises(ValueError, match="non-negative"):
        wp.launch(scale, dim=-1, inputs=[x, x, 1.0, 1])
    with pytest.raises(ValueError, match="1 to 4"):
        wp.launch(scale, dim=(1, 1, 1, 1, 1), inputs=[x, x, 1.0, 1])
    with pytest.raises(ValueError, match="unpacks wp.tid\\(\\) into 2 indices but was launched with dim=\\(4,\\)"):
        wp.launch(grid2, dim=4, inputs=[wp.zeros((2, 2), dtype=float)])


def test_wrong_device_is_reported():
    """Launching on a device that does not exist here raises DeviceError naming it."""
    x = np.zeros(4, np.float32)
    with pytest.raises(wp.DeviceError, match="'cuda:99' is not available"):
        wp.launch(scale, dim=4, inputs=[x, x, 1.0, 1], device="cuda:99")


def test_calling_a_kernel_directly_explains_launch():
    """kernel(...) in Python scope raises TypeError pointing at wp.launch."""
    with pytest.raises(TypeError, match="wp.launch"):
        scale(1, 2)


def test_debug_mode_reports_out_of_bounds_index():
    """In debug mode an out-of-bounds index raises, naming the kernel, index, extent and source line."""
    wp.config.mode = "debug"
    try:
        x = np.zeros(8, np.float32)
        y = wp.zeros((1, 8), dtype=float)
        with pytest.raises(wp.KernelRuntimeError) as info:
            wp.launch(reads_past_end, dim=8, inputs=[x, y])
        msg = str(info.value)
        assert "kernel 'reads_past_end'" in msg and "index 8 is out of bounds for an extent of 8" in msg
        assert "`x[i + 1]`" in msg and "test_errors.py:" in msg
        assert isinstance(info.value, IndexError)
        wp.launch(reads_past_end, dim=7, inputs=[x, y])  # in range: no error, and the record was reset
    finally:
        wp.config.mode = "release"


def test_kernel_without_source_file_says_why():
    """A kernel made by exec() (no source file) raises a KernelError explaining that source is needed."""
    env = {"wp": wp}
    exec("def made(a: wp.array(dtype=float)):\n    a[0] = 1.0\n", env)  # noqa: S102
    k = wp.kernel(env["made"], module="test_errors_exec")
    with pytest.raises(wp.KernelError, match="define them in a file"):
        wp.launch(k, dim=1, inputs=[np.zeros(1, np.float32)])


def test_composite_constructor_errors_say_what_warp_says():
    """Vector and matrix constructors refuse bad values with our message (type, kernel, line), ending in the
    words Warp 1.19 uses for the same mistake (its own tests match them)."""

    def wrong_count(a: wp.array(dtype=float)):
        wp.types.vector(1.0, 2.0, length=5)

    def no_length(a: wp.array(dtype=float)):
        wp.types.vector()

    def mixed(a: wp.array(dtype=float)):
        wp.types.vector(1.0, 2)

    def wrong_type(a: wp.array(dtype=float)):
        x = wp.float64(a[0])
        wp.vec2(x, x)

    def matrix_count(a: wp.array(dtype=float)):
        wp.mat22(1.0, 2.0, 3.0)

    def matrix_no_shape(a: wp.array(dtype=float)):
        wp.types.matrix(1.0, 2.0, 3.0)

    def matrix_fill(a: wp.array(dtype=float)):
        wp.types.matrix(a[0], shape=(3, 2), dtype=wp.float16)

    cases = [(wrong_count, r"vec5f\(\) .* incompatible number of values given \(2\) when constructing a vector of "
                           r"length 5$"),
             (no_length, r"the `length` argument must be specified when zero-initializing a vector$"),
             (mixed, r"got values of types float32, int32: all values given when constructing a vector must have "
                     r"the same type$"),
             (wrong_type, r"vec2f\(\) got a float64 value: all values used to initialize this vector are expected "
                          r"to be of the type `float32`$"),
             (matrix_count, r"incompatible number of values given \(3\) when constructing a matrix of shape "
                            r"\(2, 2\)$"),
             (matrix_no_shape, r"the `shape` argument must be specified when initializing a matrix by value$"),
             (matrix_fill, r"the value used to fill this matrix is expected to be of the type `float16`$")]
    for fn, pattern in cases:
        msg = build_error(fn, wp.KernelTypeError)
        assert f"kernel '{fn.__qualname__}'" in msg and "test_errors.py:" in msg, msg
        assert re.search(pattern, msg), msg


def test_slice_assignment_of_the_wrong_value_is_a_value_error_in_warps_words():
    """A vector or matrix slice takes a value of its shape and scalar type (or a scalar of that type): anything
    else is a ValueError (and a KernelError) naming the slice, ending in Warp 1.19's sentence."""

    def vec_dtype(a: wp.array(dtype=float)):
        v = wp.vec4(1.0, 2.0, 3.0, 4.0)
        v[1:] = wp.vec3d(5.0, 6.0, 7.0)

    def vec_scalar(a: wp.array(dtype=float)):
        v = wp.vec4(1.0, 2.0, 3.0, 4.0)
        v[1:] = wp.float64(5.0)

    def vec_length(a: wp.array(dtype=float)):
        v = wp.vec4(1.0, 2.0, 3.0, 4.0)
        v[1:] = wp.vec2(5.0, 6.0)

    def mat_shape(a: wp.array(dtype=float)):
        m = wp.mat33()
        m[1:, 1:] = wp.mat33()

    cases = [(vec_dtype, r"the value is a vec3d: The provided vector is expected to be of length 3 with dtype "
                         r"float32\.$"),
             (vec_scalar, r"The provided value is expected to be a vector of length 3, with dtype float32\.$"),
             (vec_length, r"The length of the provided vector \(2\) isn't compatible with the given slice "
                          r"\(expected 3\)\.$"),
             (mat_shape, r"The shape of the provided matrix \(\(3, 3\)\) isn't compatible with the given slice "
                         r"\(expected \(2, 2\)\)\.$")]
    for fn, pattern in cases:
        msg = build_error(fn, ValueError)
        assert f"kernel '{fn.__qualname__}'" in msg and "this slice of " in msg, msg
        assert re.search(pattern, msg), msg


def test_expect_eq_of_two_types_is_refused_in_warps_words():
    """wp.expect_eq / expect_neq compare values of one type (Warp: "Can't test equality ...")."""

    def two_types(a: wp.array(dtype=float)):
        wp.expect_neq(wp.vec3f(0.0, 0.0, 0.0), wp.vec2f(0.0, 0.0))

    msg = build_error(two_types, wp.KernelTypeError)
    assert re.search(r"got vec3f and vec2f: Can't test equality for objects with different types$", msg), msg


@wp.func
def _half(x: float):
    return x * 0.5


@wp.func
def _double(x: float):
    return x * 2.0


def test_front_end_refusals_end_in_warps_words():
    """Refusals Warp 1.19's own tests match by text: our message (kernel, line, caret), then Warp's words."""

    def kernel_annotated(a: wp.array(dtype=float)) -> float:
        return

    def kernel_returns_none(a: wp.array(dtype=float)):
        return None

    def uses_list(a: wp.array(dtype=float)):
        x = [1.0, 2.0]  # noqa: F841

    def uses_dict(a: wp.array(dtype=float)):
        x = {"a": 1.0}  # noqa: F841

    def missing_function(a: wp.array(dtype=float)):
        a[0] = wp.nonexistent_func(1.0)

    def missing_namespace(a: wp.array(dtype=float)):
        a[0] = wp.foo.bar(1.0)

    def rebinds_function(a: wp.array(dtype=float)):
        f = _half
        f = _double
        a[0] = f(1.0)

    def rebinds_to_value(a: wp.array(dtype=float)):
        f = _half
        f = 1.0
        a[0] = f

    def rebinds_grad(a: wp.array(dtype=float)):
        g = wp.grad(_half)
        g, x = (1.0, 2.0)  # noqa: F841
        a[0] = x

    text = "Warp kernels cannot return values. Write results to output arguments, and omit the return annotation " \
           "or use `-> None`."
    cases = [(kernel_annotated, wp.KernelTypeError, "has a return annotation: " + text),
             (kernel_returns_none, wp.KernelTypeError, "this kernel returns a value: " + text),
             (uses_list, wp.KernelSyntaxError, "List constructs are not supported in kernels. Use vectors like "
                                               "`wp.vec3()`"),
             (uses_dict, wp.KernelSyntaxError, "Construct `ast.Dict` not supported in kernels."),
             (missing_function, AttributeError, "module 'loomwork' has no attribute 'nonexistent_func': Could not "
                                                "find function wp.nonexistent_func"),
             (missing_namespace, AttributeError, "has no attribute 'foo': `foo` is not an attribute of wp"),
             (rebinds_function, wp.KernelTypeError, "'f' names a function here ('_half'): rebinding "
                                                    "function-valued local 'f' to '_double'"),
             (rebinds_to_value, wp.KernelTypeError, "rebinding function-valued local 'f' to a non-function value"),
             (rebinds_grad, wp.KernelTypeError, "Cannot reassign local 'g': it holds wp.grad(")]
    for fn, exc, part in cases:
        msg = build_error(fn, exc)
        assert f"kernel '{fn.__qualname__}'" in msg and "test_errors.py:" in msg and part in msg, msg


def test_return_annotation_mismatches_name_the_function_in_warps_words():
    """A @wp.func whose returns do not fit its annotation is refused with the function's name, the annotation
    as written and what the code returns (Warp 1.19's sentences)."""

    @wp.func
    def narrows(x: wp.int32) -> wp.int16:
        return wp.int8(x)

    @wp.func
    def two_for_one(x: int) -> int:
        return (x + x, x * x)

    @wp.func
    def wrong_types(x: int) -> tuple[int, int]:
        return (x, 1.23)

    @wp.func
    def too_few(x: int) -> tuple[int, int, int]:
        return (x + x, x * x)

    def k1(a: wp.array(dtype=float)):
        narrows(1)

    def k2(a: wp.array(dtype=float)):
        two_for_one(1)

    def k3(a: wp.array(dtype=float)):
        _x, _y = wrong_types(1)

    def k4(a: wp.array(dtype=float)):
        _x, _y, _z = too_few(1)

    cases = [(k1, "The function `narrows` has its return type annotated as `int16` but the code returns a value "
                  "of type `int8`."),
             (k2, "The function `two_for_one` has its return type annotated as `int` but the code returns 2 values."),
             (k3, "The function `wrong_types` has its return type annotated as `tuple[int, int]` but the code "
                  "returns a tuple with types `(int32, float32)`."),
             (k4, "The function `too_few` has its return type annotated as a tuple of 3 elements but the code "
                  "returns 2 values.")]
    for fn, text in cases:
        msg = build_error(fn, wp.KernelTypeError)
        assert msg.endswith(text) and "test_errors.py:" in msg, msg
