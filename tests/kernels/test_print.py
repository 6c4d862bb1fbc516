"""print() and wp.printf() inside kernels write to the process's standard output."""

import numpy as np

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
