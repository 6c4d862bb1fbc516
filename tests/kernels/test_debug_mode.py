"""Debug mode: every out-of-bounds index (arrays, gradients, vector/matrix/local-array components, inside
functions and adjoints) raises wp.KernelRuntimeError, per launch and per thread; release clamps components."""

import gc
import subprocess
import sys
import threading

import numpy as np
import pytest

import loomwork as wp

wp.set_module_options({"mode": "debug"})  # this file's kernels; `clamped` below lives in a release module


@wp.func
def pick(v: wp.vec3, j: int):
    return v[j]


@wp.func
def halve(x: float):
    return x * 0.5


@wp.func_grad(halve)
def adj_halve(x: float, adj_ret: float):
    wp.adjoint[x] += 0.5 * adj_ret


@wp.func_native("return x + 1.0f;")
def plus_one(x: float) -> float:
    ...


@wp.kernel
def components(out: wp.array(dtype=float), which: int, j: int):
    v = wp.vec3(1.0, 2.0, 3.0)
    m = wp.mat22(1.0, 2.0, 3.0, 4.0)
    if which == 0:
        out[0] = v[j]
    elif which == 1:
        out[0] = m[j, 0]
    elif which == 2:
        r = m[j]
        out[0] = r[1]
    elif which == 3:
        l = wp.zeros(shape=4, dtype=float)
        l[j] = 5.0
        out[0] = l[3]
    elif which == 4:
        v[j] = 7.0
        out[0] = v[2]
    else:
        out[0] = pick(v, j)


@wp.kernel
def element_parts(a: wp.array(dtype=wp.vec3), m: wp.array(dtype=wp.mat22), j: int):
    a[0][j] = 1.0
    m[0][j, 1] = 2.0


@wp.kernel
def gather(x: wp.array(dtype=float), idx: wp.array(dtype=int), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = halve(x[idx[i]]) + plus_one(0.0)  # plus_one passes no gradient


@wp.kernel
def sum_into(y: wp.array(dtype=float), l: wp.array(dtype=float)):
    wp.atomic_add(l, 0, y[wp.tid()])


@wp.kernel
def pick_grad(x: wp.array(dtype=wp.vec3), j: int, y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = x[i][j] * 2.0


@wp.kernel
def gather_indexed(src: wp.indexedarray(dtype=float), out: wp.array(dtype=float)):
    i = wp.tid()
    out[i] = src[i] * 2.0


@wp.struct
class Big:  # 1 KiB, four times the size of the substitute element debug mode once used
    a: wp.mat44d
    b: wp.mat44d
    c: wp.mat44d
    d: wp.mat44d
    e: wp.mat44d
    f: wp.mat44d
    g: wp.mat44d
    h: wp.mat44d


@wp.kernel
def store_big(out: wp.array(dtype=Big), k: int):
    i = wp.tid()
    s = Big()
    s.a = wp.mat44d(1.0)
    s.h = wp.mat44d(2.0)
    out[i + k] = s


@wp.kernel
def fault_then_wait(x: wp.array(dtype=float), stage: wp.array(dtype=int)):
    x[5] = 1.0  # out of bounds: recorded in this launch's error record
    wp.atomic_add(stage, 0, 1)  # stage 1: the fault is recorded
    n = 0
    while wp.atomic_add(stage, 0, 0) < 2 and n < 400000000:  # until the other thread has launched
        n += 1


@wp.kernel
def in_bounds(x: wp.array(dtype=float)):
    i = wp.tid()
    x[i] = 2.0


def test_dynamic_component_indices_raise():
    """v[j], m[j, 0], m[j], l[j] = ..., v[j] = ... and v[j] inside a @wp.func raise naming the site; in range works."""
    out = wp.zeros(1, dtype=float)
    cases = [(0, "v[j]", 3), (1, "m[j, 0]", 2), (2, "m[j]", 2), (3, "l[j]", 4), (4, "v[j]", 3), (5, "v[j]", 3)]
    for which, text, extent in cases:
        for j in (extent, -1):
            with pytest.raises(wp.KernelRuntimeError) as info:
                wp.launch(components, 1, inputs=[out, which, j])
            msg = str(info.value)
            assert f"index {j} is out of bounds for an extent of {extent} in `{text}`" in msg, msg
            assert "test_debug_mode.py:" in msg
    assert "in 'pick'" in msg
    expect = {0: 2.0, 1: 3.0, 2: 4.0, 3: 0.0, 4: 3.0, 5: 2.0}  # j = 1
    for which, value in expect.items():
        wp.launch(components, 1, inputs=[out, which, 1])
        assert out.numpy()[0] == value
    a, m = wp.zeros(1, dtype=wp.vec3), wp.zeros(1, dtype=wp.mat22)
    with pytest.raises(wp.KernelRuntimeError, match=r"index 3 is out of bounds for an extent of 3 in `a\[0\]\[j\]`"):
        wp.launch(element_parts, 1, inputs=[a, m, 3])
    wp.launch(element_parts, 1, inputs=[a, m, 1])
    assert a.numpy().tolist() == [[0, 1, 0]] and m.numpy().tolist() == [[[0, 0], [0, 2]]]  # the fault wrote nothing


def test_release_clamps_dynamic_component_indices():
    """In release builds a component index out of range is clamped: a wrong component, never memory beside it."""
    k = wp.kernel(components.func, module="test_debug_mode_release")
    assert k.module.option("mode") == "release"
    out = wp.zeros(1, dtype=float)
    for which, j, value in [(0, 7, 3.0), (0, -5, 1.0), (1, 9, 3.0), (2, -1, 2.0), (3, 100, 5.0), (4, 50, 7.0)]:
        wp.launch(k, 1, inputs=[out, which, j])
        assert out.numpy()[0] == value, (which, j)
    parts = wp.kernel(element_parts.func, module="test_debug_mode_release")
    a, m = wp.zeros(2, dtype=wp.vec3), wp.zeros(2, dtype=wp.mat22)
    wp.launch(parts, 1, inputs=[a, m, 5])  # parts of the first elements only
    assert a.numpy().tolist() == [[0, 0, 1], [0, 0, 0]] and m.numpy().tolist() == [[[0, 0], [0, 2]], [[0, 0], [0, 0]]]


def test_adjoint_gradient_accumulation_is_checked():
    """An adjoint launch whose index runs past the gradient raises and writes nothing outside it."""
    buffer = wp.zeros(16, dtype=float)
    x = wp.array(np.arange(4, dtype=np.float32), requires_grad=True)
    x.grad = buffer[:4]
    y = wp.zeros(2, dtype=float, requires_grad=True)
    y.grad.fill_(1.0)
    idx = wp.array(np.array([1, 9], dtype=np.int32))
    with pytest.raises(wp.KernelRuntimeError) as info:
        wp.launch(gather, 2, inputs=[x, idx, y], adjoint=True)
    msg = str(info.value)
    assert "(in its adjoint)" in msg and "index 9 is out of bounds for an extent of 4 in `x[idx[i]]`" in msg
    assert not buffer.numpy()[4:].any()
    buffer.zero_()  # the thread with a good index did its part
    idx.assign(np.array([1, 3], dtype=np.int32))
    y.grad.fill_(1.0)  # the first adjoint's stores took y's gradient (consumed, as in Warp 1.19)
    wp.launch(gather, 2, inputs=[x, idx, y], adjoint=True)  # in range: halve's custom gradient
    np.testing.assert_array_equal(buffer.numpy(), [0, 0.5, 0, 0.5] + [0] * 12)


def test_adjoint_component_index_is_checked():
    """The reverse pass of v[j] checks j too (its adjoint would otherwise write beside the local value)."""
    x = wp.zeros(2, dtype=wp.vec3, requires_grad=True)
    y = wp.zeros(2, dtype=float, requires_grad=True)
    with pytest.raises(wp.KernelRuntimeError, match=r"\(in its adjoint\).*index 3 .* `x\[i\]\[j\]`"):
        wp.launch(pick_grad, 2, inputs=[x, 3, y], adjoint=True, adj_inputs=[x.grad, 0, y.grad])
    y.grad.fill_(1.0)
    wp.launch(pick_grad, 2, inputs=[x, 2, y], adjoint=True, adj_inputs=[x.grad, 0, y.grad])
    np.testing.assert_array_equal(x.grad.numpy(), [[0, 0, 2], [0, 0, 2]])


def test_indexedarray_positions_are_checked():
    """An index array changed after the indexedarray was made: the position it maps to is checked, forward
    and in the adjoint."""
    data = wp.array(np.arange(4, dtype=np.float32), requires_grad=True)
    idx = wp.array(np.array([0, 2], dtype=np.int32))
    view = wp.indexedarray(data, [idx])
    out = wp.zeros(2, dtype=float, requires_grad=True)
    idx.assign(np.array([0, 7], dtype=np.int32))
    with pytest.raises(wp.KernelRuntimeError, match=r"index 7 is out of bounds for an extent of 4 in `src\[i\]`"):
        wp.launch(gather_indexed, 2, inputs=[view, out])
    with pytest.raises(wp.KernelRuntimeError, match=r"\(in its adjoint\).*index 7"):
        wp.launch(gather_indexed, 2, inputs=[view, out], adjoint=True)
    idx.assign(np.array([0, 3], dtype=np.int32))
    wp.launch(gather_indexed, 2, inputs=[view, out])
    np.testing.assert_array_equal(out.numpy(), [0.0, 6.0])


def test_a_faulting_launch_is_not_recorded_on_the_tape():
    """A launch that raised stays off the tape, so backward never replays it past x.grad."""
    x = wp.array(np.arange(4, dtype=np.float32), requires_grad=True)
    y = wp.zeros(2, dtype=float, requires_grad=True)
    bad = wp.array(np.array([0, 4], dtype=np.int32))
    good = wp.array(np.array([3, 3], dtype=np.int32))
    tape = wp.Tape()
    with tape:
        with pytest.raises(wp.KernelRuntimeError):
            wp.launch(gather, 2, inputs=[x, bad, y])
        wp.launch(gather, 2, inputs=[x, good, y])
    assert len(tape.launches) == 1 and tape.launches[0].params[1] is good
    tape.backward(grads={y: np.ones(2, dtype=np.float32)})
    np.testing.assert_array_equal(x.grad.numpy(), [0, 0, 0, 1.0])


def test_backward_after_an_untracked_index_change_is_checked():
    """An index array changed through NumPy after recording: an OverwriteError, or with the check off, a
    KernelRuntimeError from the adjoint instead of a write past x.grad."""
    x = wp.array(np.arange(4, dtype=np.float32), requires_grad=True)
    y = wp.zeros(2, dtype=float, requires_grad=True)
    idx = wp.array(np.array([0, 1], dtype=np.int32))
    l = wp.zeros(1, dtype=float, requires_grad=True)
    for mode, error in (("error", wp.OverwriteError), ("off", wp.KernelRuntimeError)):
        idx.assign(np.array([0, 1], dtype=np.int32))
        tape = wp.Tape(check_overwrites=mode)
        with tape:
            wp.launch(gather, 2, inputs=[x, idx, y])
            wp.launch(sum_into, 2, inputs=[y, l])
        idx.numpy()[1] = 1000
        with pytest.raises(error):
            tape.backward(loss=l)


def store_big_out_of_bounds() -> None:
    """Stores a 1 KiB struct out of bounds on every core, five times, then keeps using memory. The kernel
    is alone in its module, so nothing of its own lies beside the substitute element."""
    alone = wp.kernel(store_big.func, module="unique", module_options={"mode": "debug"})
    out = wp.zeros(4, dtype=Big)
    for _ in range(5):
        try:
            wp.launch(alone, 100_000, inputs=[out, 4])
        except wp.KernelRuntimeError as e:
            print("raised" if "is out of bounds for an extent of 4 in `out[i + k]`" in str(e) else e)
    filler = [np.ones(1000) for _ in range(1000)]
    wp.launch(alone, 4, inputs=[out, 0])
    print("ok" if out.numpy()["h"].sum() == 4 * 16 * 2.0 and len(filler) == 1000 else "wrong")
    gc.collect()


def test_out_of_bounds_struct_larger_than_any_fixed_substitute():
    """A struct larger than 256 bytes stored out of bounds raises and corrupts nothing: in a process of its
    own, which must exit cleanly (it crashed when the substitute element was a fixed 256 bytes)."""
    proc = subprocess.run([sys.executable, __file__], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["raised"] * 5 + ["ok"], proc.stdout


def test_fault_records_are_per_thread():
    """A fault in one thread's launch is reported there, never to another thread launching the same module
    meanwhile (which once saw a false alarm while the faulting launch missed its own error)."""
    x = wp.zeros(4, dtype=float)
    stage = wp.zeros(1, dtype=int)
    errors: list = []

    def faulting() -> None:
        try:
            wp.launch(fault_then_wait, 1, inputs=[x, stage])
        except wp.KernelRuntimeError as e:
            errors.append(e)

    wp.launch(in_bounds, 4, inputs=[x])  # built before the threads start
    t = threading.Thread(target=faulting)
    t.start()
    view = stage.numpy()
    while view[0] < 1 and t.is_alive():
        t.join(0.001)
    try:
        wp.launch(in_bounds, 4, inputs=[x])  # while the other launch holds its fault: no error here
    finally:
        view[0] = 2
        t.join()
    assert len(errors) == 1 and "`x[5]`" in str(errors[0])


if __name__ == "__main__":  # the subprocess of test_out_of_bounds_struct_larger_than_any_fixed_substitute
    store_big_out_of_bounds()
