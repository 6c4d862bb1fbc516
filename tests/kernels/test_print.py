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
