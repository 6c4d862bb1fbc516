"""wp.func_native: C++ snippets as functions, with hand-written adjoints and replays."""

import numpy as np
import pytest

import loomwork as wp

SAXPY = "out[tid] = a * x[tid] + y[tid];"
ADJ_SAXPY = """
adj_a += x[tid] * adj_out[tid];
adj_x[tid] += a * adj_out[tid];
adj_y[tid] += adj_out[tid];
"""


@wp.func_native(SAXPY, ADJ_SAXPY)
def native_saxpy(a: wp.float32, x: wp.array(dtype=float), y: wp.array(dtype=float), out: wp.array(dtype=float),
                 tid: int):
    ...


@wp.func_native("return x * x * x;", "adj_x += 3.0f * x * x * adj_ret;")
def cube(x: float) -> float:
    ...


@wp.func_native("return x + 1.0f;")
def no_gradient(x: float) -> float:
    ...


@wp.kernel
def use_saxpy(a: float, x: wp.array(dtype=float), y: wp.array(dtype=float), out: wp.array(dtype=float)):
    tid = wp.tid()
    native_saxpy(a, x, y, out, tid)


@wp.kernel
def use_values(x: wp.array(dtype=float), out: wp.array(dtype=float)):
    i = wp.tid()
    out[i] = cube(x[i]) + no_gradient(x[i]) * 10.0


def test_native_snippet_runs_and_differentiates():
    """A void snippet writing an array, with its adjoint snippet reading adj_out and filling adj_x, adj_y."""
    x = wp.array(np.array([1.0, 2.0, 3.0], dtype=np.float32), requires_grad=True)
    y = wp.array(np.array([10.0, 20.0, 30.0], dtype=np.float32), requires_grad=True)
    out = wp.zeros(3, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(use_saxpy, 3, inputs=[2.0, x, y, out])
    np.testing.assert_array_equal(out.numpy(), [12.0, 24.0, 36.0])
    tape.backward(grads={out: np.array([1.0, 1.0, 2.0], dtype=np.float32)})
    np.testing.assert_array_equal(x.grad.numpy(), [2.0, 2.0, 4.0])
    np.testing.assert_array_equal(y.grad.numpy(), [1.0, 1.0, 2.0])


def test_native_values_with_and_without_adjoints():
    """A value-returning snippet with an adjoint gets its gradient; one without contributes none."""
    x = wp.array(np.array([1.0, 2.0], dtype=np.float32), requires_grad=True)
    out = wp.zeros(2, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(use_values, 2, inputs=[x, out])
    np.testing.assert_array_equal(out.numpy(), [1.0 + 20.0, 8.0 + 30.0])
    tape.backward(grads={out: np.ones(2, dtype=np.float32)})
    np.testing.assert_array_equal(x.grad.numpy(), [3.0, 12.0])


def test_bad_native_snippets():
    """Non-string snippets are refused; C++ errors in a snippet are CompileErrors showing the compiler's message."""
    with pytest.raises(TypeError, match="C\\+\\+ source strings"):
        wp.func_native(42)

    @wp.func_native("return undefined_symbol;")
    def broken(x: float) -> float:
        ...

    def k(a: wp.array(dtype=float)):
        a[0] = broken(a[0])

    kern = wp.kernel(k, module="test_func_native_broken")
    with pytest.raises(wp.CompileError, match="undefined_symbol"):
        wp.launch(kern, 1, inputs=[np.zeros(1, np.float32)])
