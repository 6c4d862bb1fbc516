"""Graph capture on the CPU: what is recorded, replay against NumPy, conditionals, tapes, and the errors."""

import gc
import weakref

import numpy as np
import pytest

import loomwork as wp


@wp.kernel
def axpy(y: wp.array(dtype=float), x: wp.array(dtype=float), s: float):
    i = wp.tid()
    y[i] = y[i] + s * x[i]


@wp.kernel
def square(x: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = x[i] * x[i]


@wp.kernel
def total(y: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, y[i])


@wp.kernel
def count_down(c: wp.array(dtype=wp.int32), acc: wp.array(dtype=float), step: float):
    c[0] = c[0] - 1
    acc[0] = acc[0] + step


def _store(a: wp.array(dtype=float), i: int):
    a[i] = 1.0


store_checked = wp.kernel(_store, module="unique", module_options={"mode": "debug"})


def test_capture_records_and_replays_in_order_with_capture_time_scalars():
    """Launches, copies, fill_, zero_ and assign are recorded, not run; each replay runs them in order with
    the scalars they had at capture (as Warp's graph-capture example relies on)."""
    x = wp.array(np.arange(8, dtype=np.float32))
    y = wp.zeros(8, dtype=float)
    z = wp.zeros(8, dtype=float)
    w = wp.zeros(8, dtype=float)
    with wp.ScopedCapture() as capture:
        y.fill_(1.0)
        scale = 1.0
        for _ in range(3):
            wp.launch(axpy, dim=8, inputs=[y, x, scale])
            scale *= 2.0
        wp.copy(z, y)
        w.assign(np.full(8, 5.0, dtype=np.float32))
        y.zero_()
    graph = capture.graph
    assert isinstance(graph, wp.Graph) and graph.operation_count == 7
    for a in (y, z, w):
        np.testing.assert_array_equal(a.numpy(), 0.0)  # nothing ran during the capture
    expect = 1.0 + 7.0 * np.arange(8)
    for _ in range(2):
        wp.capture_launch(graph)
        np.testing.assert_array_equal(z.numpy(), expect)
        np.testing.assert_array_equal(y.numpy(), 0.0)
        np.testing.assert_array_equal(w.numpy(), 5.0)
    x.assign(np.ones(8, dtype=np.float32))  # arrays are recorded by address: the replay reads the new values
    wp.capture_launch(graph)
    np.testing.assert_array_equal(z.numpy(), 8.0)


def test_capture_begin_and_end_and_a_graph_launched_inside_another_capture():
    """capture_begin / capture_end give a Graph; launching a finished graph inside a capture records it."""
    x = wp.array(np.ones(4, dtype=np.float32))
    y = wp.zeros(4, dtype=float)
    wp.capture_begin()
    wp.launch(axpy, dim=4, inputs=[y, x, 1.0])
    inner = wp.capture_end()
    with wp.ScopedCapture() as outer:
        wp.capture_launch(inner)
        wp.capture_launch(inner)
        wp.launch(axpy, dim=4, inputs=[y, x, 10.0])
    np.testing.assert_array_equal(y.numpy(), 0.0)
    wp.capture_launch(outer.graph)
    np.testing.assert_array_equal(y.numpy(), 12.0)


def test_python_cannot_read_what_the_capture_will_write():
    """Inside a capture, .numpy(), element access, str() and list() of an array a recorded operation writes
    raise CaptureError (they would see the values from before the graph runs); other arrays read normally,
    and after the capture every array does."""
    x = wp.array(np.ones(4, dtype=np.float32))
    y = wp.zeros(4, dtype=float)
    with wp.ScopedCapture() as capture:
        wp.launch(axpy, dim=4, inputs=[y, x, 1.0])
        for read in (y.numpy, lambda: y[0], lambda: str(y), y.list, lambda: np.asarray(y),
                     lambda: y.__setitem__(0, 2.0)):
            with pytest.raises(wp.CaptureError, match="graph capture that is still in progress"):
                read()
        np.testing.assert_array_equal(x.numpy(), 1.0)
        view = y[1:3]  # views share the memory, and the refusal
        with pytest.raises(RuntimeError, match="wp.capture_launch"):
            view.numpy()
    np.testing.assert_array_equal(y.numpy(), 0.0)
    wp.capture_launch(capture.graph)
    np.testing.assert_array_equal(y.numpy(), 1.0)


def test_capture_errors_are_clear():
    """Nested captures, a graph launched in its own capture, capture_end without a capture, external and
    apic captures, and a capture on a device that does not exist raise clear errors; a capture left by an
    exception ends, so later launches run at once."""
    y = wp.zeros(1, dtype=float)
    with wp.ScopedCapture():
        with pytest.raises(wp.CaptureError, match="already in progress"):
            wp.capture_begin()
    with pytest.raises(wp.CaptureError, match="no graph capture is in progress"):
        wp.capture_end()
    wp.capture_begin()
    try:
        with pytest.raises(wp.CaptureError, match="still being captured"):
            wp.capture_launch(wp.get_stream().graph)
    finally:
        wp.capture_end()
    with pytest.raises(wp.CaptureError, match="external=True"):
        wp.capture_begin(external=True)
    with pytest.raises(wp.CaptureError, match="capture_save"):
        wp.ScopedCapture(apic=True).__enter__()
    if not wp.is_cuda_available():
        with pytest.raises(wp.DeviceError, match="no CUDA device"):
            wp.capture_begin(device="cuda")
    with pytest.raises(KeyError), wp.ScopedCapture() as capture:
        {}["missing"]
    assert capture.graph.operation_count == 0 and not wp.get_stream().is_capturing
    wp.launch(axpy, dim=1, inputs=[y, y, 0.0])
    with pytest.raises(TypeError, match="wp.Graph"):
        wp.capture_launch(None)


def test_capture_if_and_capture_while_with_callables_and_graphs():
    """capture_if / capture_while read their condition when the graph runs (inside a capture) or at once
    (outside), with callable bodies (given the keyword arguments) or finished Graphs."""
    assert wp.is_conditional_graph_supported()
    cond = wp.array([3], dtype=wp.int32)
    acc = wp.zeros(1, dtype=float)

    def body(step):
        wp.launch(count_down, dim=1, inputs=[cond, acc, step])

    wp.capture_while(cond, body, step=1.0)  # outside a capture: runs now
    assert acc.numpy()[0] == 3.0 and cond.numpy()[0] == 0
    with wp.ScopedCapture() as loop:
        wp.capture_while(cond, body, step=10.0)
    with wp.ScopedCapture() as once:
        body(step=100.0)
    with wp.ScopedCapture() as branch:
        wp.capture_if(cond, on_true=once.graph, on_false=lambda step: body(step), step=1000.0)
    cond.fill_(2)
    wp.capture_launch(loop.graph)
    assert acc.numpy()[0] == 23.0 and cond.numpy()[0] == 0
    wp.capture_launch(branch.graph)  # cond 0: the callable branch
    assert acc.numpy()[0] == 1023.0 and cond.numpy()[0] == -1
    wp.capture_launch(branch.graph)  # cond -1 (nonzero): the graph branch
    assert acc.numpy()[0] == 1123.0 and cond.numpy()[0] == -2
    wp.capture_if(cond, on_false=lambda: pytest.fail("ran the false branch"))  # outside: true, no on_true
    with pytest.raises(TypeError, match="int32"):
        wp.capture_if(acc, on_true=body)
    with pytest.raises(TypeError, match="callable or a wp.Graph"), wp.ScopedCapture():
        wp.capture_while(cond, 3)


def test_forward_and_backward_of_a_tape_are_captured():
    """A Tape's forward launches and its backward pass, recorded in graphs as Warp's optimization examples
    do (a replay of tape.zero() between steps, since the input's gradient accumulates as in Warp), give
    the analytic gradient on each replay as the input changes."""
    x = wp.array(np.arange(4, dtype=np.float32), requires_grad=True)
    y = wp.zeros(4, dtype=float, requires_grad=True)
    loss = wp.zeros(1, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with wp.ScopedCapture() as step:
        loss.zero_()
        with tape:
            wp.launch(square, dim=4, inputs=[x], outputs=[y])
            wp.launch(total, dim=4, inputs=[y], outputs=[loss])
        tape.backward(loss)
    with wp.ScopedCapture() as clear:
        tape.zero()
    for k in range(3):
        wp.capture_launch(step.graph)
        v = np.arange(4) + k
        assert loss.numpy()[0] == pytest.approx(float((v * v).sum()))
        np.testing.assert_allclose(x.grad.numpy(), 2 * v)
        x.assign(v + 1.0)
        wp.capture_launch(clear.graph)
        np.testing.assert_array_equal(x.grad.numpy(), 0.0)


def test_replays_count_as_writes_for_tapes_and_keep_their_arrays_alive():
    """A replay writes like the operations it holds: a Tape that read an array the graph overwrites raises
    OverwriteError at backward; and the graph keeps the arrays it points into alive."""
    x = wp.array(np.ones(4, dtype=np.float32), requires_grad=True)
    y = wp.zeros(4, dtype=float, requires_grad=True)
    with wp.ScopedCapture() as capture:
        x.fill_(2.0)
    tape = wp.Tape()
    with tape:
        wp.launch(square, dim=4, inputs=[x], outputs=[y])
    wp.capture_launch(capture.graph)
    with pytest.raises(wp.OverwriteError, match="fill_"):
        tape.backward(grads={y: np.ones(4, dtype=np.float32)})
    tmp = wp.zeros(4, dtype=float)
    alive = weakref.ref(tmp)
    with wp.ScopedCapture() as capture:
        wp.launch(axpy, dim=4, inputs=[tmp, x, 1.0])
    del tmp
    gc.collect()
    assert alive() is not None
    del capture
    gc.collect()
    assert alive() is None


def test_launches_on_a_named_stream_and_debug_faults_at_replay():
    """A capture on a stream records launches issued with stream=; launches on other streams run at once.
    A debug-mode launch recorded in a graph reports its out-of-bounds fault when the graph runs."""
    s = wp.Stream()
    y = wp.zeros(2, dtype=float)
    x = wp.array(np.ones(2, dtype=np.float32))
    with wp.ScopedCapture(stream=s) as capture:
        wp.launch(axpy, dim=2, inputs=[y, x, 1.0], stream=s)
        wp.launch(axpy, dim=2, inputs=[y, x, 5.0])  # the current stream: not captured
    np.testing.assert_array_equal(y.numpy(), 5.0)
    wp.capture_launch(capture.graph, stream=s)
    np.testing.assert_array_equal(y.numpy(), 6.0)
    with pytest.raises(wp.DeviceError, match="wp.Stream"):
        wp.capture_launch(capture.graph, stream="cpu")
    with wp.ScopedCapture() as capture:
        wp.launch(store_checked, dim=1, inputs=[y, 5])
    with pytest.raises(wp.KernelRuntimeError, match="index 5 is out of bounds"):
        wp.capture_launch(capture.graph)


def test_utils_routines_are_recorded():
    """wp.utils routines called in a capture run when the graph does (a sort and a sum into `out`); one that
    returns its result to Python raises CaptureError there."""
    keys = wp.array(np.array([3, 1, 2, 0], dtype=np.int32))
    values = wp.array(np.arange(4, dtype=np.int32))
    data = wp.array(np.ones(5, dtype=np.float32))
    out = wp.zeros(1, dtype=float)
    with wp.ScopedCapture() as capture:
        wp.utils.radix_sort_pairs(keys, values, 4)
        wp.launch(axpy, dim=5, inputs=[data, data, 1.0])
        wp.utils.array_sum(data, out=out)
        with pytest.raises(wp.CaptureError, match="pass out="):
            wp.utils.array_sum(data)
    np.testing.assert_array_equal(keys.numpy(), [3, 1, 2, 0])
    wp.capture_launch(capture.graph)
    np.testing.assert_array_equal(keys.numpy(), [0, 1, 2, 3])
    np.testing.assert_array_equal(values.numpy(), [3, 1, 2, 0])
    assert out.numpy()[0] == 10.0


def test_a_tape_recorded_in_a_capture_follows_its_replays():
    """A Tape whose forward launches were captured, replayed after its inputs change (an optimizer step by
    a kernel), differentiates the replayed forward at an eager backward; an input the graph itself
    overwrites after reading it is still an OverwriteError."""
    x = wp.array(np.arange(4, dtype=np.float32), requires_grad=True)
    y = wp.zeros(4, dtype=float, requires_grad=True)
    loss = wp.zeros(1, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with wp.ScopedCapture() as forward:
        loss.zero_()
        with tape:
            wp.launch(square, dim=4, inputs=[x], outputs=[y])
            wp.launch(total, dim=4, inputs=[y], outputs=[loss])
    for k in range(2):
        wp.launch(axpy, dim=4, inputs=[x, x, 1.0])  # x doubles: a tracked write of the tape's input
        wp.capture_launch(forward.graph)
        tape.backward(loss)
        np.testing.assert_allclose(x.grad.numpy(), 2 * np.arange(4) * 2.0 ** (k + 1))
        tape.zero()
    z = wp.zeros(4, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with wp.ScopedCapture() as overwrite:
        with tape:
            wp.launch(square, dim=4, inputs=[x], outputs=[z])
        x.fill_(1.0)  # the graph writes x after the recorded launch read it
    wp.capture_launch(overwrite.graph)
    with pytest.raises(wp.OverwriteError, match="fill_"):
        tape.backward(grads={z: np.ones(4, dtype=np.float32)})
