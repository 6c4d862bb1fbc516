"""wp.static (compile-time values, unrolled loops) and the exchange / compare-and-swap / bitwise atomics."""

import numpy as np
import pytest

import loomwork as wp

TAPS = [0.25, 0.5, 0.25]


def make_scaler(factor):
    def scaler(x: wp.array(dtype=float)):
        i = wp.tid()
        x[i] = x[i] * wp.static(factor * 2.0)

    return wp.kernel(scaler, module="test_static_factory")


@wp.kernel
def blur(x: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    s = 0.0
    for k in wp.static(range(len(TAPS))):  # unrolled: k is a constant in each copy of the body
        j = wp.clamp(i + k - 1, 0, x.shape[0] - 1)
        s += x[j] * 0.5 * (wp.static(TAPS[k]) + TAPS[k])  # both spellings read the compile-time list
    y[i] = s


@wp.kernel
def atomics(counts: wp.array(dtype=int), flags: wp.array(dtype=int), owner: wp.array(dtype=int),
            last: wp.array(dtype=float), bits: wp.array(dtype=wp.uint32)):
    i = wp.tid()
    wp.atomic_or(bits, 0, wp.uint32(1) << wp.uint32(i % 32))
    wp.atomic_xor(bits, 1, wp.uint32(i))
    wp.atomic_and(bits, 2, ~(wp.uint32(1) << wp.uint32(i % 32)))
    prev = wp.atomic_cas(owner, 0, -1, i)  # exactly one thread claims the slot
    if prev == -1:
        wp.atomic_add(counts, 0, 1)
    old = wp.atomic_exch(flags, i % 4, i)
    wp.atomic_add(counts, 1, int(old >= 0))
    wp.atomic_exch(last, 0, float(i))


def test_static_values_and_unrolled_loops():
    """wp.static evaluates Python at build time (per factory closure) and unrolls range loops."""
    x = wp.array(np.ones(4, dtype=np.float32))
    for factor in (1.5, 3.0):
        wp.launch(make_scaler(factor), 4, inputs=[x])
    np.testing.assert_allclose(x.numpy(), np.full(4, 3.0 * 6.0))
    xs = np.array([0.0, 4.0, 8.0, 0.0], dtype=np.float32)
    y = wp.zeros(4, dtype=float)
    wp.launch(blur, 4, inputs=[xs, y])
    padded = np.r_[xs[0], xs, xs[-1]]
    np.testing.assert_allclose(y.numpy(), 0.25 * padded[:-2] + 0.5 * padded[1:-1] + 0.25 * padded[2:])


def test_exchange_cas_and_bitwise_atomics():
    """cas lets exactly one thread win; exch returns previous values; or/xor/and combine every thread's bits."""
    n = 10_000
    counts = wp.zeros(2, dtype=int)
    flags = wp.full(4, -1, dtype=int)
    owner = wp.full(1, -1, dtype=int)
    last = wp.zeros(1, dtype=float)
    bits = wp.array(np.array([0, 0, 0xFFFFFFFF], dtype=np.uint32))
    wp.launch(atomics, n, inputs=[counts, flags, owner, last, bits])
    assert counts.numpy()[0] == 1 and 0 <= owner.numpy()[0] < n
    assert counts.numpy()[1] == n - 4  # every exchange but the first per slot saw a thread index
    assert last.numpy()[0] in set(range(n))
    x = 0
    for i in range(n):
        x ^= i
    np.testing.assert_array_equal(bits.numpy(), [0xFFFFFFFF, x, 0])


def test_static_and_atomic_errors():
    """A failing wp.static expression and a bitwise atomic on floats are reported at their line."""

    def bad_static(x: wp.array(dtype=float)):
        x[0] = wp.static(undefined_name)  # noqa: F821

    def bad_atomic(x: wp.array(dtype=float)):
        wp.atomic_or(x, 0, 1.0)

    for fn, text in ((bad_static, "could not evaluate"),
                     (bad_atomic, r"only work on arrays with \[u\]int32 or \[u\]int64 .* but got float32")):
        k = wp.kernel(fn, module=f"test_static_{fn.__name__}")
        with pytest.raises(TypeError, match=text):
            wp.launch(k, 1, inputs=[np.zeros(1, np.float32)])


@wp.struct
class StaticPair:
    m: wp.mat22
    i: int


STATIC_OFFSET = 3


@wp.func
def static_inside_func():
    return wp.static(STATIC_OFFSET + 2)  # a @wp.func run by Python (inside wp.static below) evaluates it too


@wp.func
def make_static_pair(m: wp.mat22, i: int):
    p = StaticPair()
    p.m = m
    p.i = i
    return p


@wp.kernel
def static_struct_value(out: wp.array(dtype=StaticPair), n: wp.array(dtype=int)):
    out[0] = wp.static(make_static_pair(wp.mat22(1.0, 2.0, 3.0, 4.0), static_inside_func()))
    n[0] = wp.static(static_inside_func() + 1)


def test_static_struct_values_and_static_in_python_scope():
    """wp.static(...) may build a struct value in Python (its fields become constants); inside a @wp.func that
    Python runs, wp.static(x) is x."""
    out, n = wp.zeros(1, dtype=StaticPair), wp.zeros(1, dtype=int)
    wp.launch(static_struct_value, 1, inputs=[out, n])
    value = out.numpy()[0]
    assert value[0].tolist() == [[1.0, 2.0], [3.0, 4.0]] and value[1] == 5 and n.numpy()[0] == 6


@wp.kernel
def nan_operands(x: wp.array(dtype=float), out: wp.array(dtype=float), slots: wp.array(dtype=float)):
    n = x[0]
    out[0] = wp.min(n, 1.0)
    out[1] = wp.max(-1.0, n)
    out[2] = wp.clamp(n, -1.0, 1.0)
    out[3] = wp.min(wp.vec3(n, 2.0, 3.0), wp.vec3(-1.0, n, 1.0))[0]
    wp.atomic_min(slots, 0, -1.0)
    wp.atomic_max(slots, 1, 5.0)
    wp.atomic_min(slots, 2, n)


def test_min_max_clamp_and_atomics_ignore_a_nan_operand():
    """As Warp's fmin/fmax: min/max/clamp with one NaN operand give the other (clamp(NaN, lo, hi) = lo), the
    gradient goes where the value came from, a stored NaN gives way to an atomic min/max and a NaN value does
    not replace a number."""
    x = wp.array([np.nan], dtype=float, requires_grad=True)
    out = wp.zeros(4, requires_grad=True)
    slots = wp.array([np.nan, np.nan, 3.0], dtype=float)
    tape = wp.Tape()
    with tape:
        wp.launch(nan_operands, 1, inputs=[x, out, slots])
    assert out.numpy().tolist() == [1.0, -1.0, -1.0, -1.0] and slots.numpy().tolist() == [-1.0, 5.0, 3.0]
    tape.backward(grads={out: np.array([1.0, 1.0, 1.0, 1.0], dtype=np.float32)})
    assert x.grad.numpy()[0] == 0.0


@wp.func
def _sum_tuple(values: tuple[int, int, int]):
    out = 0
    for i in range(wp.static(len(values))):
        out += values[i] * (i + 1)
    return out


@wp.kernel
def static_tuple_lengths(out: wp.array(dtype=int)):
    t = (4, 2.5, wp.vec3(1.0, 2.0, 3.0))
    out[0] = wp.static(len(t))
    out[1] = _sum_tuple((1, 2, 3))


def test_static_len_of_tuples():
    """wp.static(len(t)) of a kernel-local tuple and of a tuple parameter is its element count, usable to
    unroll a loop over the elements."""
    out = wp.zeros(2, dtype=int)
    wp.launch(static_tuple_lengths, 1, inputs=[out])
    np.testing.assert_array_equal(out.numpy(), [3, 1 * 1 + 2 * 2 + 3 * 3])


@wp.kernel
def static_odds_and_ends(out: wp.array(dtype=float)):
    count = 0.0
    for _ in range(wp.static(True)):
        count += 1.0
    t = wp.transform_identity(float)
    d = wp.transform_identity(wp.float64)
    out[0] = count
    out[1] = t.q[3] + float(d.q[3])


def test_static_bool_bounds_and_positional_identity_dtype():
    """range(wp.static(True)) runs once (a bool is the integer it is in Python); transform_identity takes its dtype
    positionally; a static expression that raises names Warp's 'Error evaluating static expression'."""
    out = wp.zeros(2)
    wp.launch(static_odds_and_ends, 1, inputs=[out])
    np.testing.assert_array_equal(out.numpy(), [1.0, 2.0])

    @wp.kernel
    def divides_by_zero(out: wp.array(dtype=float)):
        out[0] = wp.static(1.0 / 0.0)

    with pytest.raises(wp.WarpCodegenError, match="Error evaluating static expression: float division by zero"):
        wp.launch(divides_by_zero, 1, inputs=[out])


_OUTER = 999  # globals named like the loop variables below: wp.static() must see the loop's values instead
_INNER = 888


@wp.kernel
def nested_unrolled_static(results: wp.array(dtype=int)):
    for _OUTER in range(2):
        for _INNER in range(3):
            results[_OUTER * 3 + _INNER] = wp.static(_OUTER * 10 + _INNER)
    results[6] = wp.static(_OUTER * 10 + _INNER)  # after the loops: their last values, as in Python


def test_static_reads_the_current_value_of_nested_unrolled_loops():
    """wp.static() in nested unrolled loops reads each loop variable's value of this iteration (the inner loop
    used to leave its last value behind as a constant that shadowed it on the next outer iteration)."""
    results = wp.zeros(7, dtype=int)
    wp.launch(nested_unrolled_static, 1, inputs=[results])
    assert results.numpy().tolist() == [0, 1, 2, 10, 11, 12, 12]


@wp.kernel(module="unique", module_options={"max_unroll": 3})
def static_reads_the_loop_variable(out: wp.array(dtype=int)):
    s = 0
    for i in range(0, 8):
        s += wp.static(i * i)
    out[0] = s


def test_a_loop_whose_static_reads_its_variable_is_unrolled_past_max_unroll():
    """wp.static(i) inside `for i in range(8)` needs i's values, so the loop unrolls whatever max_unroll says."""
    out = wp.zeros(1, dtype=int)
    wp.launch(static_reads_the_loop_variable, 1, inputs=[out])
    assert out.numpy()[0] == sum(i * i for i in range(8))


_STATIC_SCALE = 3.0


def test_static_expressions_are_evaluated_when_the_kernel_is_defined():
    """A `wp.static` expression that reads only globals and closure values is evaluated once, in source order,
    when the kernel is defined (as in Warp): rebinding the global, or the name that aliases wp.static,
    afterwards changes nothing; one that reads the kernel's own variables is evaluated at the build."""
    global _STATIC_SCALE, _static_alias
    calls = []

    def bump() -> float:
        calls.append(len(calls))
        return float(len(calls))

    _static_alias = wp.static

    @wp.kernel(module="unique")
    def k(out: wp.array(dtype=float)):
        for i in wp.static(range(2)):
            out[i] = wp.static(_STATIC_SCALE) * wp.static(bump()) + float(wp.static(i))
        out[2] = _static_alias(bump())  # noqa: F821 - a global this test sets

    assert calls == [0, 1]
    try:
        _STATIC_SCALE = 100.0
        _static_alias = abs
        out = wp.zeros(3)
        wp.launch(k, 1, inputs=[out])
    finally:
        _STATIC_SCALE = 3.0
        del _static_alias
    np.testing.assert_array_equal(out.numpy(), [3.0, 4.0, 2.0])
    assert calls == [0, 1]
