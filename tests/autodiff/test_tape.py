"""The Tape and adjoint launches: the user's documented examples, repeatability, overwrite detection, errors."""

import threading
import warnings

import numpy as np
import pytest

import loomwork as wp


@wp.kernel
def loss(xs: wp.array(dtype=float, ndim=2), l: wp.array(dtype=float)):
    tid = wp.tid()
    wp.atomic_add(l, 0, xs[tid, 0] ** 2.0 + xs[tid, 1] ** 2.0)


pvec2 = wp.types.vector(length=2, dtype=wp.float32)


@wp.func
def rosenbrock(x: float, y: float):
    return (1.0 - x) ** 2.0 + 100.0 * (y - x**2.0) ** 2.0


@wp.kernel
def eval_rosenbrock(xs: wp.array(dtype=pvec2), z: wp.array(dtype=float)):
    i = wp.tid()
    x = xs[i]
    z[i] = rosenbrock(x[0], x[1])


@wp.kernel
def scale(x: wp.array(dtype=float), s: float, y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = x[i] * s


@wp.kernel
def square_sum(y: wp.array(dtype=float), l: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(l, 0, y[i] * y[i])


@wp.kernel
def in_place_double(x: wp.array(dtype=float)):
    i = wp.tid()
    x[i] = x[i] * 2.0


@wp.kernel
def in_place_updates(x: wp.array(dtype=float), y: wp.array(dtype=float), v: wp.array(dtype=wp.vec2)):
    i = wp.tid()
    w = y[i]
    y[i] *= y[i]  # y <- y^2
    x[i] += x[i] * x[i]  # x <- x + x^2 (loads, then an atomic add)
    v[i] = v[i] * w * w  # v <- v y^2


@wp.kernel
def square_in_place(x: wp.array(dtype=float)):
    i = wp.tid()
    x[i] = x[i] * x[i]


@wp.kernel
def read_after_write(x: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    x[i] = x[i] * 2.0
    y[i] = x[i] * x[i]  # reads back what it wrote: its adjoint cannot replay this


@wp.kernel
def store_then_read(x: wp.array(dtype=float), y: wp.array(dtype=float), z: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = x[i] * x[i]
    z[i] = y[i] * 3.0  # reads back what it stored, and stores there no more: the launch leaves what it read


@wp.kernel
def update_in_loop(x: wp.array(dtype=float), n: int):
    i = wp.tid()
    for _ in range(n):
        x[i] = x[i] * x[i]


@wp.kernel
def largest(x: wp.array(dtype=float), m: wp.array(dtype=float)):
    wp.atomic_max(m, 0, x[wp.tid()])


@wp.kernel(enable_backward=False)
def forward_only(x: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = x[i]


def two_stage(x, l):
    y = wp.zeros(len(x), dtype=float, requires_grad=True, retain_grad=True)  # its gradient is read after backward
    tape = wp.Tape()
    with tape:
        wp.launch(scale, len(x), inputs=[x, 3.0, y])
        wp.launch(square_sum, len(x), inputs=[y, l])
    return tape, y


@wp.struct
class _Pose:
    rot: wp.array(dtype=wp.quat)
    weight: float


@wp.kernel
def _pose_loss(pose: _Pose, loss: wp.array(dtype=float)):
    q = pose.rot[0]
    loss[0] = pose.weight * (q[0] * q[0] + 2.0 * q[3])


def test_documented_loss_over_2d_points_optimizes():
    """The user's example: a tape recorded once, backward + a gradient step each iteration, loss falls to ~0."""
    rng = np.random.default_rng(0)
    xs = wp.array(rng.standard_normal((100, 2)), dtype=wp.float32, requires_grad=True)
    l = wp.zeros(1, dtype=wp.float32, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(loss, dim=len(xs), inputs=[xs], outputs=[l], device=xs.device)
    start = l.numpy()[0]
    for _ in range(100):
        tape.zero()
        tape.backward(loss=l)
        np.testing.assert_allclose(xs.grad.numpy(), 2 * xs.numpy(), rtol=1e-6)
        xs.numpy()[...] -= 0.1 * xs.grad.numpy()  # a plain gradient step in place, as opt.step() would
        l.zero_()
        wp.launch(loss, dim=len(xs), inputs=[xs], outputs=[l], device=xs.device)
    assert l.numpy()[0] < 1e-6 * start


def test_documented_rosenbrock_adjoint_launch():
    """The Rosenbrock example without PyTorch: adjoint=True with adj_inputs/adj_outputs, then Adam-free descent."""
    rng = np.random.default_rng(42)
    n = 64
    xy = wp.array(rng.normal(size=(n, 2)).astype(np.float32), dtype=pvec2, requires_grad=True)
    z = wp.zeros(n, requires_grad=True)
    wp.launch(eval_rosenbrock, dim=n, inputs=[xy], outputs=[z])
    z.grad = wp.array(np.ones(n, dtype=np.float32))
    wp.launch(eval_rosenbrock, dim=n, inputs=[xy], outputs=[z], adj_inputs=[xy.grad], adj_outputs=[z.grad],
              adjoint=True)
    x, y = xy.numpy()[:, 0].astype(np.float64), xy.numpy()[:, 1].astype(np.float64)
    expect = np.stack([-2 * (1 - x) - 400 * x * (y - x**2), 200 * (y - x**2)], axis=1)
    np.testing.assert_allclose(xy.grad.numpy(), expect, rtol=1e-4, atol=1e-3)


def test_backward_twice_accumulates_into_inputs_as_warp():
    """A second backward (no zero in between) adds to the inputs' gradients, as Warp's and PyTorch's do, so
    two tapes sharing a parameter sum their gradients; intermediates' gradients are computed afresh;
    tape.zero() starts over."""
    x = wp.array(np.array([1.0, -2.0, 0.5], dtype=np.float32), requires_grad=True)
    l = wp.zeros(1, dtype=float, requires_grad=True)
    tape, y = two_stage(x, l)
    tape.backward(loss=l)
    first = x.grad.numpy().copy()
    np.testing.assert_allclose(first, 18 * x.numpy())
    tape.backward(loss=l)
    np.testing.assert_allclose(x.grad.numpy(), 2 * first)
    np.testing.assert_allclose(y.grad.numpy(), 2 * y.numpy())
    l2 = wp.zeros(1, dtype=float, requires_grad=True)
    other, _ = two_stage(x, l2)
    other.backward(loss=l2)
    np.testing.assert_allclose(x.grad.numpy(), 3 * first)
    tape.zero()
    tape.backward(loss=l)
    np.testing.assert_allclose(x.grad.numpy(), first)


def test_backward_with_grads_leaves_the_callers_buffer_alone():
    """grads={array: adjoint} seeds from the caller's buffer without modifying it; get_adjoint returns .grad."""
    x = wp.array(np.array([1.0, 2.0], dtype=np.float32), requires_grad=True)
    y = wp.zeros(2, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(scale, 2, inputs=[x, 4.0, y])
    seed = wp.array(np.array([1.0, 10.0], dtype=np.float32))
    tape.backward(grads={y: seed})
    np.testing.assert_array_equal(seed.numpy(), [1.0, 10.0])
    np.testing.assert_array_equal(tape.get_adjoint(x).numpy(), [4.0, 40.0])


def test_caller_supplied_gradient_buffers_accumulate():
    """A .grad the caller set by hand is never zeroed by backward: gradients accumulate into it."""
    x = wp.array(np.array([1.0, 2.0], dtype=np.float32))
    x.grad = wp.array(np.array([100.0, 100.0], dtype=np.float32))
    l = wp.zeros(1, dtype=float, requires_grad=True)
    tape, _ = two_stage(x, l)
    tape.backward(loss=l)
    np.testing.assert_allclose(x.grad.numpy(), 100.0 + 18 * x.numpy())


def test_zero_reset_and_record_func():
    """zero() clears gradients; record_func runs a Python backward step in order; reset() forgets launches."""
    x = wp.array(np.array([1.0, 2.0], dtype=np.float32), requires_grad=True)
    y = wp.zeros(2, dtype=float, requires_grad=True)
    l = wp.zeros(1, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(scale, 2, inputs=[x, 2.0, y])
        # a Python-side step l = sum(y) with its own backward
        l.assign([y.numpy().sum()])
        tape.record_func(lambda: y.grad.assign(y.grad.numpy() + l.grad.numpy()[0]), [y, l])
    tape.backward(loss=l)
    np.testing.assert_array_equal(x.grad.numpy(), [2.0, 2.0])
    tape.zero()
    assert not x.grad.numpy().any() and not y.grad.numpy().any()
    tape.backward(loss=l)
    tape.reset()
    assert tape.launches == [] and tape.gradients[x] is x.grad and not x.grad.numpy().any()  # kept, zeroed


def test_scopes_name_the_launches_inside():
    """record_scope_begin/end and tape.scope() tag the launches recorded inside them."""
    x = wp.array(np.ones(2, dtype=np.float32), requires_grad=True)
    y = wp.zeros(2, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        with tape.scope("outer"):
            tape.record_scope_begin("inner")
            wp.launch(scale, 2, inputs=[x, 1.0, y])
            tape.record_scope_end()
        wp.launch(scale, 2, inputs=[x, 1.0, y])
    assert len(tape.launches_in_scope("outer")) == 1 and len(tape.launches_in_scope("inner")) == 1
    with pytest.raises(RuntimeError):
        tape.record_scope_end()


def test_overwrite_by_a_later_kernel_is_reported():
    """A recorded input overwritten by a later launch makes backward raise, naming both kernels and the array."""
    x = wp.array(np.array([1.0, 2.0], dtype=np.float32), requires_grad=True)
    y = wp.zeros(2, dtype=float, requires_grad=True)
    l = wp.zeros(1, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(scale, 2, inputs=[x, 3.0, y])
        wp.launch(square_sum, 2, inputs=[y, l])
        wp.launch(in_place_double, 2, inputs=[y])
    with pytest.raises(wp.OverwriteError) as info:
        tape.backward(loss=l)
    msg = str(info.value)
    assert "kernel 'square_sum'" in msg and "array 'y'" in msg and "'in_place_double'" in msg


def test_overwrite_by_python_and_the_warn_and_off_options():
    """fill_() after recording is caught too; check_overwrites='warn' warns, 'off' stays silent."""
    for mode in ("error", "warn", "off"):
        x = wp.array(np.array([1.0, 2.0], dtype=np.float32), requires_grad=True)
        l = wp.zeros(1, dtype=float, requires_grad=True)
        tape = wp.Tape(check_overwrites=mode)
        with tape:
            wp.launch(square_sum, 2, inputs=[x, l])
        x.fill_(5.0)
        if mode == "error":
            with pytest.raises(wp.OverwriteError, match="fill_"):
                tape.backward(loss=l)
        elif mode == "warn":
            with pytest.warns(RuntimeWarning, match="overwrote"):
                tape.backward(loss=l)
        else:
            with warnings.catch_warnings():
                warnings.simplefilter("error")
                tape.backward(loss=l)
    with pytest.raises(ValueError, match="check_overwrites"):
        wp.Tape(check_overwrites="maybe")


def test_in_place_updates_get_the_gradients_of_the_values_they_read():
    """A kernel that reads arrays and then updates them (x[i] = x[i] * 2, y[i] *= y[i], x[i] += x[i] * x[i])
    differentiates: its adjoint replays from a copy taken before the launch, and each array's gradient becomes
    that of its values before the launch."""
    x0 = np.array([1.0, 3.0], dtype=np.float32)
    x = wp.array(x0, requires_grad=True)
    l = wp.zeros(1, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(in_place_double, 2, inputs=[x])
        wp.launch(in_place_double, 2, inputs=[x])
        wp.launch(square_sum, 2, inputs=[x, l])  # l = sum (4 x0)^2
    tape.backward(loss=l)
    np.testing.assert_array_equal(x.numpy(), 4 * x0)
    np.testing.assert_allclose(x.grad.numpy(), 32 * x0)

    y0 = np.array([0.5, -2.0], dtype=np.float32)
    v0 = np.array([[1.0, 2.0], [3.0, -1.0]], dtype=np.float32)
    x, y = wp.array(x0, requires_grad=True), wp.array(y0, requires_grad=True)
    v = wp.array(v0, dtype=wp.vec2, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(in_place_updates, 2, inputs=[x, y, v])
    gx, gy, gv = np.array([1.0, 2.0], np.float32), np.array([3.0, -1.0], np.float32), np.ones((2, 2), np.float32)
    tape.backward(grads={x: gx, y: gy, v: gv})
    np.testing.assert_allclose(x.numpy(), x0 + x0**2)
    np.testing.assert_allclose(v.numpy(), v0 * (y0**2)[:, None])
    np.testing.assert_allclose(x.grad.numpy(), gx * (1 + 2 * x0))
    np.testing.assert_allclose(y.grad.numpy(), gy * 2 * y0 + (gv * v0).sum(1) * 2 * y0)
    np.testing.assert_allclose(v.grad.numpy(), gv * (y0**2)[:, None])


def test_in_place_update_in_a_graph_capture_differentiates_its_last_replay():
    """In a graph capture the Tape's copy of an array updated in place is recorded too: each replay takes it
    afresh, so backward differentiates the last replay (x <- x^2 from 16 and 81: 2x)."""
    x = wp.array(np.array([2.0, 3.0], dtype=np.float32), requires_grad=True)
    l = wp.zeros(1, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape, wp.ScopedCapture() as capture:
        wp.launch(square_in_place, 2, inputs=[x])
        wp.launch(square_sum, 2, inputs=[x, l])
    for _ in range(3):
        l.zero_()
        wp.capture_launch(capture.graph)
    tape.backward(loss=l)
    np.testing.assert_array_equal(x.numpy(), [256.0, 6561.0])
    np.testing.assert_allclose(x.grad.numpy(), 2 * np.array([256.0, 6561.0]) * 2 * np.array([16.0, 81.0]))


def test_an_array_stored_and_then_read_back_is_differentiated_from_what_the_launch_left():
    """A kernel that stores to an array and only then reads it (no loop around both) reads what it leaves, so
    its adjoint replays from the array as the launch left it (Warp 1.19 gives the same gradients)."""
    x = wp.array(np.array([1.0, 2.0, 3.0], dtype=np.float32), requires_grad=True)
    y, z = wp.zeros_like(x), wp.zeros_like(x)
    tape = wp.Tape()
    with tape:
        wp.launch(store_then_read, 3, inputs=[x, y, z])
    tape.backward(grads={z: wp.ones_like(x)})
    np.testing.assert_array_equal(x.grad.numpy(), [6.0, 12.0, 18.0])  # d(3 x^2)/dx
    np.testing.assert_array_equal(y.grad.numpy(), [0.0, 0.0, 0.0])  # the store took it
    tape.zero()
    tape.backward(grads={y: wp.ones_like(x)})
    np.testing.assert_array_equal(x.grad.numpy(), [2.0, 4.0, 6.0])


def test_reading_an_array_after_writing_it_is_refused_under_a_tape():
    """A kernel that reads back an array it wrote (or reads and writes it in a loop) cannot be differentiated:
    under a Tape the launch is refused before it runs, naming the array and the lines ('warn': a warning,
    'off': nothing)."""
    x, y = wp.array(np.array([1.0, 2.0], dtype=np.float32), requires_grad=True), wp.zeros(2, dtype=float)
    for kernel, args, name in ((read_after_write, [x, y], "read_after_write"),
                               (update_in_loop, [x, 2], "update_in_loop")):
        with wp.Tape(), pytest.raises(wp.OverwriteError) as info:
            wp.launch(kernel, 2, inputs=args)
        msg = str(info.value)
        assert f"kernel '{name}'" in msg and "reads array 'x' at " in msg and "test_tape.py:" in msg, msg
        assert "write the results to a separate array" in msg
    np.testing.assert_array_equal(x.numpy(), [1.0, 2.0])  # refused before it ran
    with wp.Tape(check_overwrites="warn"), pytest.warns(RuntimeWarning, match="reads array 'x' at .* after writing"):
        wp.launch(read_after_write, 2, inputs=[x, y])
    with wp.Tape(check_overwrites="off"), warnings.catch_warnings():
        warnings.simplefilter("error")
        wp.launch(read_after_write, 2, inputs=[x, y])
    np.testing.assert_array_equal(y.numpy(), [16.0, 64.0])


def test_atomic_max_differentiates_on_a_tape():
    """An array a kernel only updates atomically (atomic_max) is not an overwritten input: its adjoint reads the
    maximum the launch left, and the largest value gets the gradient."""
    x, m = wp.array(np.array([1.0, 3.0, 2.0], dtype=np.float32), requires_grad=True), wp.zeros(1, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(largest, 3, inputs=[x, m])
    tape.backward(loss=m)
    np.testing.assert_array_equal(x.grad.numpy(), [0.0, 1.0, 0.0])


def test_backward_argument_errors():
    """A loss of several elements, a loss without a gradient buffer: clear errors. No loss at all is Warp's
    form: the gradients the arrays hold are the seeds."""
    x = wp.array(np.ones(2, dtype=np.float32), requires_grad=True)
    l = wp.zeros(1, dtype=float, requires_grad=True)
    tape, _ = two_stage(x, l)
    tape.backward(loss=l)
    expected = x.grad.numpy().copy()
    tape.zero()
    l.grad.fill_(1.0)
    tape.backward()
    np.testing.assert_array_equal(x.grad.numpy(), expected)
    assert tape.gradients[x] is x.grad and tape.gradients[l] is l.grad
    with pytest.raises(ValueError, match="exactly 1 element"):
        tape.backward(loss=wp.zeros(3, dtype=float, requires_grad=True))
    with pytest.raises(ValueError, match="requires_grad=True"):
        tape.backward(loss=wp.zeros(1, dtype=float))
    with pytest.raises(TypeError, match="wp.array"):
        tape.backward(loss=np.zeros(1))


def test_inputs_without_requires_grad_get_no_gradient():
    """Arrays created without requires_grad are simply left out of the gradient computation."""
    x = wp.array(np.ones(2, dtype=np.float32))
    l = wp.zeros(1, dtype=float, requires_grad=True)
    tape, y = two_stage(x, l)
    tape.backward(loss=l)
    assert x.grad is None and y.grad.numpy().any()


def test_adjoint_launch_errors():
    """adjoint=True on a forward-only kernel, or with mismatched adjoint lists or shapes, raises."""
    x = wp.zeros(2, dtype=float)
    y = wp.zeros(2, dtype=float)
    with pytest.raises(wp.LaunchError, match="enable_backward=False"):
        wp.launch(forward_only, 2, inputs=[x, y], adjoint=True)
    with pytest.raises(wp.LaunchError, match="one for one"):
        wp.launch(scale, 2, inputs=[x, 1.0, y], adj_inputs=[x], adjoint=True)
    with pytest.raises(ValueError, match="must match the array's shape"):
        wp.launch(scale, 2, inputs=[x, 1.0, y], adj_inputs=[wp.zeros(3, dtype=float), None, y], adjoint=True)


def test_gradient_of_a_strided_view_lands_in_the_parent():
    """A view of an array with a gradient carries the matching view of the gradient."""
    x = wp.array(np.arange(6, dtype=np.float32), requires_grad=True)
    l = wp.zeros(1, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(square_sum, 3, inputs=[x[::2], l])
    tape.backward(loss=l)
    np.testing.assert_array_equal(x.grad.numpy(), [0, 0, 4, 0, 8, 0])


def test_adjoints_are_built_on_first_use():
    """A module's adjoint library is compiled only when a backward pass first needs it."""

    def lazy_square(x: wp.array(dtype=float), y: wp.array(dtype=float)):
        i = wp.tid()
        y[i] = x[i] * x[i]

    k = wp.kernel(lazy_square, module="test_tape_lazy_adjoint")
    x = wp.array(np.array([3.0], dtype=np.float32), requires_grad=True)
    y = wp.zeros(1, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(k, 1, inputs=[x, y])
    lm = k.module.load(wp.get_device("cpu"))
    assert lm.adjoints is None
    tape.backward(grads={y: np.ones(1, dtype=np.float32)})
    assert lm.adjoints is not None and x.grad.numpy()[0] == 6.0


def test_tapes_are_distinct_and_nest():
    """Two tapes never compare equal; a tape inside another records its launches on both; re-entering one raises."""
    assert wp.Tape() != wp.Tape()
    x = wp.array(np.array([1.0, 2.0], dtype=np.float32), requires_grad=True)
    y = wp.zeros(2, dtype=float, requires_grad=True)
    l = wp.zeros(1, dtype=float, requires_grad=True)
    outer, inner = wp.Tape(), wp.Tape()
    with outer:
        wp.launch(scale, 2, inputs=[x, 3.0, y])
        with inner:
            wp.launch(square_sum, 2, inputs=[y, l])
        with pytest.raises(RuntimeError, match="already recording"):
            with outer:
                pass
        wp.launch(forward_only, 2, inputs=[x, wp.zeros(2, dtype=float)])  # outer records on after the error
    assert [e.kernel for e in outer.launches] == [scale, square_sum, forward_only]
    assert [e.kernel for e in inner.launches] == [square_sum]
    outer.launches.pop()  # the forward-only launch has no adjoint
    outer.backward(loss=l)
    np.testing.assert_allclose(x.grad.numpy(), 18.0 * x.numpy())  # d/dx sum((3x)^2)


def test_a_tape_records_only_its_own_thread():
    """Launches from another thread stay off this thread's tape; that thread's own tape records them."""
    x = wp.array(np.array([1.0, 2.0], dtype=np.float32), requires_grad=True)
    l = wp.zeros(1, dtype=float, requires_grad=True)
    theirs: list = []

    def other() -> None:
        wp.launch(square_sum, 2, inputs=[x, l])
        with wp.Tape() as t:
            wp.launch(square_sum, 2, inputs=[x, l])
        theirs.append(t)

    with wp.Tape() as mine:
        thread = threading.Thread(target=other)
        thread.start()
        thread.join()
    assert mine.launches == [] and len(theirs[0].launches) == 1


def _chain(x, y, l, check="error"):
    """scale then square_sum: the first launch's result feeds the second."""
    tape = wp.Tape(check_overwrites=check)
    with tape:
        wp.launch(scale, 2, inputs=[x, 3.0, y])
        wp.launch(square_sum, 2, inputs=[y, l])
    return tape


def test_writes_loomwork_does_not_see_are_detected():
    """A recorded input changed through a .numpy() view (taken before or after recording), a wrapped NumPy
    array, a from_ptr alias or a NumPy argument makes backward raise, when the launch's result fed another."""
    def fresh():
        return (wp.zeros(2, dtype=float, requires_grad=True), wp.zeros(1, dtype=float, requires_grad=True))

    values = np.array([1.0, 2.0], dtype=np.float32)
    x = wp.array(values, requires_grad=True)
    view = x.numpy()  # before recording: a checksum is taken when the launch is recorded
    tape = _chain(x, *fresh())
    view[0] = 5.0
    with pytest.raises(wp.OverwriteError, match="write loomwork does not track"):
        tape.backward(loss=tape.launches[1].params[1])

    x = wp.array(values, requires_grad=True)
    tape = _chain(x, *fresh())
    x.numpy()[1] = 5.0  # after recording: the content at the moment it was exposed is the reference
    with pytest.raises(wp.OverwriteError, match="array 'x'"):
        tape.backward(loss=tape.launches[1].params[1])

    wrapped = values.copy()
    alias_buffer = values.copy()
    for arg, change in ((wp.array(wrapped, copy=False, requires_grad=True), wrapped),
                        (wp.from_ptr(alias_buffer.ctypes.data, 2, dtype=float), alias_buffer)):
        tape = _chain(arg, *fresh())
        change[0] = -1.0
        with pytest.raises(wp.OverwriteError):
            tape.backward(loss=tape.launches[1].params[1])

    plain = values.copy()
    y, l = fresh()
    tape = wp.Tape()
    with tape:
        wp.launch(scale, 2, inputs=[plain, 3.0, y])
        wp.launch(square_sum, 2, inputs=[y, l])
    plain *= 2.0
    with pytest.raises(wp.OverwriteError):
        tape.backward(loss=l)

    tape = _chain(wp.array(wrapped, copy=False, requires_grad=True), *fresh(), check="warn")
    wrapped[1] = 7.0
    with pytest.warns(RuntimeWarning, match="does not track"):
        tape.backward(loss=tape.launches[1].params[1])


def test_stepping_parameters_through_an_alias_between_backward_passes():
    """Warp's documented workflow: one recorded launch, parameters updated through a NumPy view (as an
    optimizer would through torch), backward again: no error, the gradient at the new values."""
    x = wp.array(np.array([1.0, 2.0], dtype=np.float32), requires_grad=True)
    view = x.numpy()
    l = wp.zeros(1, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(square_sum, 2, inputs=[x, l])
    for _ in range(3):
        tape.zero()
        tape.backward(loss=l)
        np.testing.assert_allclose(x.grad.numpy(), 2.0 * view)
        view -= 0.25 * x.grad.numpy()


def test_arrays_only_loomwork_touched_are_not_checksummed():
    """Building, filling, assigning, printing and copying an array does not expose it, so recording a launch
    that reads it costs no checksum; handing out .numpy() or the array interface does."""
    x = wp.array(np.array([1.0, 2.0], dtype=np.float32), requires_grad=True)
    x.fill_(1.0)
    x.assign([3.0, 4.0])
    str(x), x.list(), x[0], x.clone()  # noqa: B018
    wp.copy(wp.zeros(2, dtype=float), x)
    assert not x._storage.exposed
    l = wp.zeros(1, dtype=float, requires_grad=True)
    with wp.Tape() as tape:
        wp.launch(square_sum, 2, inputs=[x, l])
    assert [r[3] for r in tape.launches[0].reads] == [None]
    np.asarray(x)
    assert x._storage.exposed and not wp.zeros(2, dtype=float)._storage.exposed


def test_a_launch_that_raised_is_not_recorded():
    """A launch whose arguments cannot be packed raised before running: it stays off the tape."""
    x = wp.zeros(2, dtype=float, requires_grad=True)
    with wp.Tape() as tape:
        with pytest.raises(wp.LaunchError, match="argument 's'"):
            wp.launch(scale, 2, inputs=[x, "three", wp.zeros(2, dtype=float)])
    assert tape.launches == []


@wp.kernel
def doubled_into(x: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = x[i] * 2.0


@wp.kernel
def summed_into(x: wp.array(dtype=float), total: wp.array(dtype=float)):
    wp.atomic_add(total, 0, x[wp.tid()])


def test_copies_and_clones_are_differentiable_on_a_tape():
    """wp.copy (with offsets) and wp.clone inside a Tape pass gradients back to their source, accumulating with
    the source's other uses."""
    x = wp.array(np.arange(1.0, 5.0, dtype=np.float32), requires_grad=True)
    doubled, loss = wp.zeros_like(x), wp.zeros(1, requires_grad=True)
    tape = wp.Tape()
    with tape:
        cloned = wp.clone(x)
        wp.launch(doubled_into, 4, inputs=[x, doubled])
        wp.launch(summed_into, 4, inputs=[doubled, loss])
        wp.launch(summed_into, 4, inputs=[cloned, loss])
    tape.backward(loss)
    assert x.grad.numpy().tolist() == [3.0] * 4

    src, dst = wp.array([1.0, 2.0, 3.0], dtype=float, requires_grad=True), wp.zeros(4, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.copy(dst, src, dest_offset=1, src_offset=1, count=2)
    tape.backward(grads={dst: np.array([10.0, 20.0, 30.0, 40.0], dtype=np.float32)})
    assert src.grad.numpy().tolist() == [0.0, 20.0, 30.0]


def test_gradients_include_arrays_inside_structs():
    """tape.gradients lists the arrays a struct argument carries (Warp's form, used by its diffray example),
    with the analytic gradient, and tape.zero() clears them."""
    pose = _Pose()
    pose.rot = wp.array([wp.quat(0.5, 0.0, 0.0, 1.0)], dtype=wp.quat, requires_grad=True)
    pose.weight = 3.0
    loss = wp.zeros(1, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(_pose_loss, dim=1, inputs=[pose, loss])
    tape.backward(loss)
    np.testing.assert_allclose(tape.gradients[pose.rot].numpy(), [[3.0, 0.0, 0.0, 6.0]])
    tape.zero()
    assert not pose.rot.grad.numpy().any()


@wp.kernel
def square_into(x: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = x[i] * x[i]


def test_seeding_an_output_created_without_gradient():
    """backward(grads={y: g}) for an output made without requires_grad gives it a gradient buffer (as Warp), which
    the store's adjoint consumes, and an array given requires_grad=True after a launch has its gradient seen by
    later launches."""
    x = wp.array(np.arange(3, dtype=np.float32), requires_grad=True)
    y = wp.zeros(n=3)
    assert y.shape == (3,) and y.grad is None
    tape = wp.Tape()
    with tape:
        wp.launch(square_into, 3, inputs=[x], outputs=[y])
    tape.backward(grads={y: wp.ones(n=3)})
    np.testing.assert_array_equal(x.grad.numpy(), [0.0, 2.0, 4.0])
    np.testing.assert_array_equal(y.grad.numpy(), [0.0, 0.0, 0.0])


@wp.struct
class Factors:
    x: wp.array(dtype=float)
    y: wp.array(dtype=float)


@wp.struct
class Wrapped:
    factors: Factors


@wp.kernel
def multiply_factors(w: Wrapped, z: wp.array(dtype=float)):
    i = wp.tid()
    z[i] = w.factors.x[i] * w.factors.y[i]


def test_gradients_of_arrays_in_structs():
    """Arrays reached through (nested) struct arguments are the tape's too: tape.gradients[struct] is a struct
    of their gradients, and tape.zero() zeroes them."""
    f = Factors()
    f.x = wp.array(np.array([1.0, 2.0], dtype=np.float32), requires_grad=True)
    f.y = wp.array(np.array([3.0, 5.0], dtype=np.float32), requires_grad=True)
    w = Wrapped()
    w.factors = f
    z = wp.zeros(2, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(multiply_factors, 2, inputs=[w, z])
    tape.backward(grads={z: np.ones(2, dtype=np.float32)})
    g = tape.gradients[w]
    np.testing.assert_array_equal(g.factors.x.numpy(), [3.0, 5.0])
    np.testing.assert_array_equal(g.factors.y.numpy(), [1.0, 2.0])
    tape.zero()
    np.testing.assert_array_equal(f.x.grad.numpy(), [0.0, 0.0])


def test_scope_markers_follow_warp():
    """tape.scopes holds Warp's open/close markers; a scope that recorded nothing leaves none."""
    tape = wp.Tape()
    tape.record_scope_begin("outer")
    tape.record_scope_begin("empty")
    tape.record_scope_end()
    assert tape.scopes == [(0, "outer", {})]
    tape.launches.append(object())
    tape.record_scope_end()
    assert tape.scopes == [(0, "outer", {}), (1, None, None)]
    tape.record_scope_begin("kept", metadata={"k": 1})
    tape.record_scope_end(remove_scope_if_empty=False)
    assert tape.scopes[-2:] == [(1, "kept", {"k": 1}), (1, None, None)]


@wp.kernel
def times_two(x: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = 2.0 * x[i]


@wp.kernel
def times_three(x: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = 3.0 * x[i]


def _overwritten_twice(retain: bool):
    xa, xb = wp.ones(4, requires_grad=True), wp.ones(4, requires_grad=True)
    y = wp.zeros(4, requires_grad=True, retain_grad=retain)
    tape = wp.Tape()
    with tape:
        wp.launch(times_two, 4, inputs=[xa, y])
        wp.launch(times_three, 4, inputs=[xb, y])
    tape.backward(grads={y: wp.ones(4)})
    return xa.grad.numpy(), xb.grad.numpy(), y.grad.numpy()


def test_a_store_consumes_the_gradient_of_the_value_it_replaces():
    """y written by two launches: only the last write reaches the output, so the first one's input gets no
    gradient; the store's adjoint zeroes y's gradient after reading it (Warp 1.19's rule)."""
    ga, gb, gy = _overwritten_twice(retain=False)
    np.testing.assert_array_equal(ga, np.zeros(4))
    np.testing.assert_array_equal(gb, np.full(4, 3.0))
    np.testing.assert_array_equal(gy, np.zeros(4))


def test_retain_grad_keeps_the_gradient_and_counts_every_write():
    """retain_grad=True keeps y's gradient readable after backward; an element written twice then passes its
    gradient to both writes (the documented cost of retaining)."""
    ga, gb, gy = _overwritten_twice(retain=True)
    np.testing.assert_array_equal(ga, np.full(4, 2.0))
    np.testing.assert_array_equal(gb, np.full(4, 3.0))
    np.testing.assert_array_equal(gy, np.ones(4))


def test_clone_then_overwrite_gives_the_kernel_path_only():
    """out = clone(q) overwritten by a kernel: the copy's adjoint adds nothing (the store consumed the
    gradient), so three doublings give 8, not 27; with retain_grad on the clone the copy path counts too."""
    for retain, expect in ((False, 8.0), (True, 27.0)):
        x = wp.array(np.arange(1.0, 5.0, dtype=np.float32), requires_grad=True)
        loss_ = wp.zeros(1, requires_grad=True)
        tape = wp.Tape()
        with tape:
            q = x
            for _ in range(3):
                out = wp.clone(q, retain_grad=retain)
                wp.launch(times_two, 4, inputs=[q, out])
                q = out
            wp.launch(square_sum_linear, 4, inputs=[q, loss_])
        tape.backward(loss_)
        np.testing.assert_array_equal(x.grad.numpy(), np.full(4, expect))


@wp.kernel
def square_sum_linear(y: wp.array(dtype=float), l: wp.array(dtype=float)):
    wp.atomic_add(l, 0, y[wp.tid()])


def test_retain_grad_needs_requires_grad():
    """retain_grad without requires_grad is refused (constructor and property); dropping requires_grad
    clears it; every creation function takes it; views do not inherit it."""
    with pytest.raises(ValueError, match="requires_grad"):
        wp.zeros(3, retain_grad=True)
    a = wp.zeros(3)
    with pytest.raises(ValueError, match="requires_grad"):
        a.retain_grad = True
    a.requires_grad = True
    a.retain_grad = True
    assert a.retain_grad and not a[1:].retain_grad
    a.requires_grad = False
    assert not a.retain_grad
    for make in (lambda: wp.empty(2, requires_grad=True, retain_grad=True),
                 lambda: wp.ones(2, requires_grad=True, retain_grad=True),
                 lambda: wp.full(2, 5.0, requires_grad=True, retain_grad=True),
                 lambda: wp.zeros_like(wp.zeros(2, requires_grad=True), retain_grad=True),
                 lambda: wp.clone(wp.zeros(2, requires_grad=True), retain_grad=True)):
        assert make().retain_grad


def test_adjoints_passed_to_an_adjoint_launch_are_not_consumed():
    """An adjoint launch given the caller's own adjoint buffers accumulates into them and leaves the output's
    adjoint as it was; with the array's own gradient it consumes it."""
    x, y = wp.ones(3, requires_grad=True), wp.zeros(3, requires_grad=True)
    adj_x, adj_y = wp.zeros(3), wp.full(3, 2.0)
    wp.launch(times_three, 3, inputs=[x, y], adj_inputs=[adj_x, adj_y], adjoint=True)
    np.testing.assert_array_equal(adj_x.numpy(), np.full(3, 6.0))
    np.testing.assert_array_equal(adj_y.numpy(), np.full(3, 2.0))
    y.grad.fill_(2.0)
    wp.launch(times_three, 3, inputs=[x, y], adj_inputs=[x.grad, y.grad], adjoint=True)
    np.testing.assert_array_equal(x.grad.numpy(), np.full(3, 6.0))
    np.testing.assert_array_equal(y.grad.numpy(), np.zeros(3))


@wp.kernel
def _dot_into(x: wp.array(dtype=float), y: wp.array(dtype=float), z: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(z, 0, x[i] * y[i])


def test_visualize_writes_graphviz_source(tmp_path):
    """Tape.visualize: DOT source with a box per launch (a run of identical launches merged, "repeated Nx"), an
    ellipse per array with its dtype and shape, edges in and out, a cluster per scope, written to a file too."""
    x, y = wp.ones(8, requires_grad=True), wp.full(8, 2.0, requires_grad=True)
    z, w = wp.zeros(1, requires_grad=True), wp.zeros(8, requires_grad=True)
    tape = wp.Tape()
    with tape:
        with tape.scope("my loop"):
            for _ in range(16):
                wp.launch(_dot_into, 8, inputs=[x, y, z])
        wp.launch(times_two, 8, inputs=[x, w])
    path = tmp_path / "tape.dot"
    code = tape.visualize(str(path))
    assert path.read_text() == code and code.startswith("digraph")
    assert code.count("_dot_into") == 1 and "repeated 16x" in code and 'label="my loop"' in code
    assert "array: dtype=float32, shape=(8,)" in code and "launch0 -> array" in code and code.count("shape=box") == 2
    unsimplified = tape.visualize(simplify_graph=False)
    assert unsimplified.count("shape=box") == 17
    assert 'label="x"' not in tape.visualize(hide_readonly_arrays=True)


def test_a_recorded_functions_inputs_accumulate_across_backward_passes():
    """The arrays a recorded Python function names keep accumulating into their gradients over backward
    passes, as in Warp (a custom adjoint adds into its inputs' .grad; the Tape cannot tell which are inputs),
    unless declared as the function's writes."""
    x = wp.array(np.array([1.0, 2.0], dtype=np.float32), requires_grad=True)
    y = wp.zeros(2, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        y.assign(2.0 * x.numpy())  # a forward step outside any kernel, with its own backward
        tape.record_func(lambda: x.grad.assign(x.grad.numpy() + 2.0 * y.grad.numpy()), [x, y])
    seed = wp.array(np.ones(2, dtype=np.float32))
    tape.backward(grads={y: seed})
    tape.backward(grads={y: seed})
    np.testing.assert_array_equal(x.grad.numpy(), [4.0, 4.0])
    x.grad.zero_()
    tape = wp.Tape()
    with tape:
        tape.record_func(lambda: y.grad.assign(y.grad.numpy() + 1.0), [x, y], writes=(y,))
        wp.launch(scale, 2, inputs=[y, 1.0, x])
    x.grad.fill_(1.0)
    y.grad.fill_(7.0)
    tape.backward(grads={x: seed})
    np.testing.assert_array_equal(y.grad.numpy(), [2.0, 2.0])  # zeroed first, then the launch's 1 and the function's 1
