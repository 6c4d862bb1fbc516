"""print() and wp.printf() inside kernels write to the process's standard output."""

import numpy as np
import pytest

import loomwork as wp


@wp.kernel
def shout(x: wp.array(dtype=float), n: wp.array(dtype=wp.int64)):
    i = wp.tid()
    print("value", i, x[i], wp.vec2(x[i], 2.0), n[i], "100%")
    wp.printf("printf %d %.3f\n", i, x[i])


def test_print_and_printf(capfd):
    """Strings, ints, floats, vectors and int64 print like Python's print; printf takes C formats."""
    wp.launch(shout, 1, inputs=[np.array([1.5], dtype=np.float32), np.array([2**40], dtype=np.int64)])
    out = capfd.readouterr().out
    assert "value 0 1.5 [1.5 2] 1099511627776 100%" in out
    assert "printf 0 1.500" in out


@wp.kernel
def expectations(x: wp.array(dtype=float)):
    i = wp.tid()
    wp.expect_near(x[i], 1.0, 0.01)
    wp.expect_near(wp.vec2(x[i], 0.0), wp.vec2(1.0, 0.0), tolerance=0.5)
    wp.expect_eq(i, 0)


def test_expect_near_and_expect_eq(capfd):
    """Failed expectations print the values and the source line; passing ones print nothing."""
    wp.launch(expectations, 2, inputs=[np.array([1.001, 3.0], dtype=np.float32)])
    out = capfd.readouterr().out
    assert out.count("expect_near failed") == 2 and "3 vs 1 (tolerance 0.01)" in out
    assert "expect_eq failed" in out and "1 != 0" in out
    assert "test_print.py:" in out and "in expectations" in out


@wp.kernel
def formats(x: wp.array(dtype=float), n: wp.array(dtype=wp.int64), u: wp.array(dtype=wp.uint32)):
    i = wp.tid()
    wp.printf("a %d %ld %lld %5.2f %e %x %u %c %% %*d|\n", i, i, n[i], x[i], wp.float64(x[i]), 255, u[i], 65, 4, 7)
    wp.printf("b %d %i %hd %zu\n", n[i], n[i], 70000, wp.uint8(3))


def test_printf_directives_fit_their_arguments(capfd):
    """Lengths, widths (also *), %%, and values wider or narrower than the directive's length all print the
    value passed: an int64 given to %d prints whole, an int32 given to %ld too."""
    wp.launch(formats, 1, inputs=[np.array([1.5], dtype=np.float32), np.array([2**40], dtype=np.int64),
                                  np.array([4_000_000_000], dtype=np.uint32)])
    out = capfd.readouterr().out
    assert "a 0 0 1099511627776  1.50 1.500000e+00 ff 4000000000 A %    7|" in out
    assert "b 1099511627776 1099511627776 4464 3" in out


def test_printf_formats_that_do_not_fit_are_compile_errors():
    """A float for %d, an int for %f, %s, too few or too many arguments, an unknown directive: a TypeError at
    the line, never a crash or garbage."""

    def float_for_d(a: wp.array(dtype=float)):
        wp.printf("%d %s\n", 1.0)

    def int_for_f(a: wp.array(dtype=float)):
        wp.printf("%f\n", 1)

    def string(a: wp.array(dtype=float)):
        wp.printf("%s\n", 1)

    def too_few(a: wp.array(dtype=float)):
        wp.printf("%d %d\n", 1)

    def too_many(a: wp.array(dtype=float)):
        wp.printf("%d\n", 1, 2)

    def unknown(a: wp.array(dtype=float)):
        wp.printf("%Lf %q\n", a[0])

    cases = [(float_for_d, "'%d' takes an integer, got float32"), (int_for_f, "'%f' takes a float, got int32"),
             (string, "'%s' prints a string"), (too_few, "needs more arguments than the 1 given"),
             (too_many, "no directive for this argument"), (unknown, "'%Lf' is not a directive kernels can print")]
    for fn, text in cases:
        k = wp.kernel(fn, module=f"test_print_{fn.__name__}")
        with pytest.raises(wp.KernelTypeError) as info:
            wp.launch(k, 1, inputs=[np.zeros(1, dtype=np.float32)])
        assert text in str(info.value) and "test_print.py:" in str(info.value), str(info.value)


@wp.struct
class PrintedPoint:
    x: float
    v: wp.vec2
    b: bool


@wp.kernel
def print_struct_and_bools(flag: bool):
    p = PrintedPoint()
    p.x = 1.5
    print(p)
    print(flag, not flag)


def test_print_structs_and_bools(capfd):
    """print() shows a struct as Name(field=value, ...) and bools as True/False, as Python does."""
    wp.launch(print_struct_and_bools, 1, inputs=[True])
    wp.synchronize_device()
    out = capfd.readouterr().out
    assert "PrintedPoint(x=1.5, v=[0 0], b=False)" in out and "True False" in out


@wp.struct
class _Holder:
    weights: wp.array(dtype=float)
    scale: float


@wp.kernel
def print_arrays(a: wp.array2d(dtype=wp.vec3), h: _Holder):
    print(a)
    print(h)


def test_print_arrays_shows_shape_and_dtype(capfd):
    """print() of an array (alone or as a struct field) shows its extents at run time and its dtype."""
    h = _Holder()
    h.weights, h.scale = wp.zeros(7, dtype=float), 2.0
    wp.launch(print_arrays, 1, inputs=[wp.zeros((3, 4), dtype=wp.vec3), h])
    out = capfd.readouterr().out
    assert "array(shape=(3, 4), dtype=vec3f)" in out
    assert "_Holder(weights=array(shape=(7,), dtype=float32), scale=2)" in out
