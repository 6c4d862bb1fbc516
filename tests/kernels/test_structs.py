"""@wp.struct: fields of every kind, kernel arguments and locals, nesting, gradients through fields."""

import numpy as np
import pytest

import loomwork as wp


@wp.struct
class Material:
    stiffness: float
    tint: wp.vec3


@wp.struct
class Params:
    scale: float
    count: int
    offset: wp.vec3
    rot: wp.mat22
    weights: wp.array(dtype=float)
    material: Material


@wp.func
def stiff(m: Material):
    return m.stiffness * 2.0


@wp.kernel
def use_params(p: Params, out: wp.array(dtype=float), vout: wp.array(dtype=wp.vec3)):
    i = wp.tid()
    out[i] = p.weights[i] * p.scale + float(p.count) + p.rot[1, 1] + stiff(p.material)
    local = Params()
    local.scale = p.scale * 3.0
    local.offset = p.offset + p.material.tint
    local.material.tint.y = 4.0  # nested fields of a local assign in place
    local.material.tint[2] += 1.0
    vout[i] = local.offset * local.scale + local.material.tint


@wp.kernel
def struct_loss(p: Params, x: wp.array(dtype=float), l: wp.array(dtype=float)):
    i = wp.tid()
    m = p.material
    q = Params()
    q.scale = p.scale * x[i]
    wp.atomic_add(l, 0, q.scale * m.stiffness + p.weights[i] * x[i])


def make_params():
    p = Params()
    p.scale = 2.0
    p.count = 3
    p.offset = wp.vec3(1.0, 2.0, 3.0)
    p.rot = wp.mat22(1.0, 0.0, 0.0, 5.0)
    p.weights = wp.array(np.arange(4, dtype=np.float32), requires_grad=True)
    m = Material()
    m.stiffness = 0.25
    m.tint = wp.vec3(0.5, 0.5, 0.5)
    p.material = m
    return p


def test_struct_arguments_fields_and_locals():
    """A struct argument with scalar, int, vector, matrix, array and nested-struct fields; struct locals."""
    p = make_params()
    out = wp.zeros(4, dtype=float)
    vout = wp.zeros(4, dtype=wp.vec3)
    wp.launch(use_params, 4, inputs=[p, out, vout])
    np.testing.assert_allclose(out.numpy(), np.arange(4) * 2.0 + 3.0 + 5.0 + 0.5)
    np.testing.assert_allclose(vout.numpy(), np.tile([1.5, 2.5, 3.5], (4, 1)) * 6.0 + [0.0, 4.0, 1.0])


def test_gradients_through_struct_fields():
    """Gradients flow through struct field reads and writes, into arrays held by a struct."""
    p = make_params()
    x = wp.array(np.array([1.0, 2.0, 3.0, 4.0], dtype=np.float32), requires_grad=True)
    l = wp.zeros(1, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(struct_loss, 4, inputs=[p, x, l])
    tape.backward(loss=l)
    np.testing.assert_allclose(x.grad.numpy(), 2.0 * 0.25 + np.arange(4))
    np.testing.assert_allclose(p.weights.grad.numpy(), x.numpy())


def test_host_side_values_and_errors():
    """Host instances start zeroed, convert assigned values, expose numpy_value(), and reject bad fields."""
    p = Params()
    assert p.scale == 0.0 and p.count == 0 and p.offset == wp.vec3(0.0, 0.0, 0.0) and p.weights is None
    p.offset = (1.0, 2.0, 3.0)
    assert p.offset == wp.vec3(1.0, 2.0, 3.0)
    names = Params.numpy_dtype()["names"]
    record = p.numpy_value()  # one record of numpy_dtype(), as Warp gives it: a tuple in field order
    assert record[names.index("material")][0] == 0.0
    np.testing.assert_array_equal(record[names.index("offset")], [1.0, 2.0, 3.0])
    assert np.zeros(2, dtype=Params.numpy_dtype()).dtype.itemsize == Params.numpy_dtype()["itemsize"]
    with pytest.raises(AttributeError, match="no field 'speed'"):
        p.speed = 1.0
    with pytest.raises(TypeError, match="field 'weights' of struct Params expects array"):
        p.weights = wp.zeros(3, dtype=int)
    with pytest.raises(TypeError, match="expects a Material"):
        p.material = 3.0
    with pytest.raises(wp.LaunchError, match="expects Params but got a Material"):
        wp.launch(use_params, 1, inputs=[Material(), wp.zeros(1, dtype=float), wp.zeros(1, dtype=wp.vec3)])


def test_struct_errors_in_kernels():
    """Unknown fields and assignments into a temporary struct are rejected with clear messages."""

    def unknown(p: Params, out: wp.array(dtype=float)):
        out[0] = p.velocity

    def temporary(p: Params, out: wp.array(dtype=float)):
        Params().material.stiffness = 1.0

    for fn, exc, text in ((unknown, AttributeError, "no field 'velocity'"),
                          (temporary, SyntaxError, "part of a temporary value")):
        k = wp.kernel(fn, module=f"test_structs_{fn.__name__}")
        with pytest.raises(exc, match=text):
            wp.launch(k, 1, inputs=[make_params(), wp.zeros(1, dtype=float)])
    with pytest.raises(TypeError, match="declares no fields"):
        wp.struct(type("Empty", (), {}))


@wp.struct
class Particle:
    x: wp.vec3
    v: wp.vec3
    m: float
    alive: int


@wp.kernel
def integrate(ps: wp.array(dtype=Particle), dt: float):
    i = wp.tid()
    p = ps[i]
    if p.alive == 0:
        return
    p.x = p.x + p.v * dt
    p.v = p.v + wp.vec3(0.0, -9.8, 0.0) * dt
    ps[i] = p


@wp.kernel
def kinetic(ps: wp.array(dtype=Particle), e: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(e, 0, 0.5 * ps[i].m * wp.dot(ps[i].v, ps[i].v))


def test_arrays_of_structs():
    """Arrays of structs: built from instances, updated by kernels, viewed as NumPy records."""
    items = []
    for k in range(4):
        p = Particle()
        p.x, p.v, p.m, p.alive = wp.vec3(float(k), 0.0, 0.0), wp.vec3(1.0, 2.0, 0.0), 2.0, int(k != 3)
        items.append(p)
    ps = wp.array(items, dtype=Particle)
    assert ps.shape == (4,) and ps.numpy().dtype.names == ("x", "v", "m", "alive")
    wp.launch(integrate, 4, inputs=[ps, 0.5])
    rec = ps.numpy()
    np.testing.assert_allclose(rec["x"][:3], [[0.5, 1.0, 0.0], [1.5, 1.0, 0.0], [2.5, 1.0, 0.0]])
    np.testing.assert_allclose(rec["v"][0], [1.0, 2.0 - 4.9, 0.0], rtol=1e-6)
    np.testing.assert_allclose(rec["x"][3], [3.0, 0.0, 0.0])  # not alive: untouched
    z = wp.zeros(3, dtype=Particle)
    assert z.numpy()["m"].tolist() == [0.0, 0.0, 0.0]
    with pytest.raises(TypeError, match="takes Particle instances"):
        wp.array([1.0, 2.0], dtype=Particle)


def test_gradients_into_arrays_of_structs():
    """d(kinetic energy)/d(particle) lands in the struct array's gradient, field by field."""
    p = Particle()
    p.v, p.m = wp.vec3(1.0, 2.0, 3.0), 2.0
    ps = wp.array([p, p], dtype=Particle, requires_grad=True)
    e = wp.zeros(1, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(kinetic, 2, inputs=[ps, e])
    tape.backward(loss=e)
    g = ps.grad.numpy()
    np.testing.assert_allclose(g["v"], [[2.0, 4.0, 6.0]] * 2)  # m * v
    np.testing.assert_allclose(g["m"], [7.0, 7.0])  # |v|^2 / 2


@wp.struct
class Built:
    v: wp.vec3
    f: float
    i: int


@wp.kernel
def build_struct_in_kernel(x: wp.array(dtype=float), out: wp.array(dtype=float)):
    s = Built(wp.vec3(1.0, 2.0, 3.0) * x[0], f=x[0] * 2.0)
    out[0] = s.v[2] + s.f + float(s.i)


def test_struct_constructor_with_field_values_in_kernels():
    """`S(a, b=...)` in a kernel sets the given fields (others zero), positionally or by name, differentiably;
    an unknown or repeated field is named."""
    x = wp.array([2.0], dtype=float, requires_grad=True)
    out = wp.zeros(1, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(build_struct_in_kernel, 1, inputs=[x, out])
    tape.backward(loss=out)
    assert out.numpy()[0] == 10.0 and x.grad.numpy()[0] == 5.0

    def unknown(out: wp.array(dtype=float)):
        out[0] = Built(g=1.0).f

    def twice(out: wp.array(dtype=float)):
        out[0] = Built(wp.vec3(), v=wp.vec3()).f

    for body, match in ((unknown, "has no field 'g'"), (twice, "field 'v' twice")):
        with pytest.raises(wp.KernelTypeError, match=match):
            wp.launch(wp.kernel(body, module="unique"), 1, inputs=[out])


@wp.struct
class Padded:
    a: float
    h: wp.float16
    v: wp.vec3
    i: int


@wp.struct
class Outer:
    s: Padded
    b: bool


def test_struct_arrays_from_instances_and_element_access():
    """An array of structs with padding (a float16 before a vec3) is built from instances byte for byte; its
    elements (`a[i]`, `a.list()`) are struct values again, nested ones included."""
    x = Outer()
    x.s.a, x.s.h, x.s.v, x.s.i, x.b = 1.5, 0.25, wp.vec3(1.0, 2.0, 3.0), 7, True
    arr = wp.array([x, Outer()], dtype=Outer)
    first, second = arr[0], arr.list()[1]
    assert isinstance(first, Outer) and first.s.h == 0.25 and first.s.v == wp.vec3(1.0, 2.0, 3.0)
    assert first.s.i == 7 and first.b is True and second.s.a == 0.0


def test_struct_arrays_show_array_fields_as_records_in_numpy():
    """In `.numpy()` of an array of structs, an array field is a record of its descriptor (data, grad,
    shape, strides, ndim), as Warp shows it, so its pointers can be read."""

    @wp.struct
    class Holder:
        x: wp.array(dtype=wp.float64)
        s: float

    h = Holder()
    h.x = wp.array([1.0, 2.0], dtype=wp.float64)
    h.s = 3.0
    arr = wp.array([h, Holder()], dtype=Holder)
    n = arr.numpy()
    assert n["x"]["data"].tolist() == [h.x.ptr, 0] and n["x"]["shape"][0].tolist()[0] == 2
    assert n["x"]["grad"].tolist() == [0, 0] and n["s"].tolist() == [3.0, 0.0]
    assert n["x"]["ndim"].tolist() == [1, 0]  # a null descriptor has no dimensions


@wp.struct
class Grid:
    a: wp.array2d(dtype=float)


@wp.kernel
def store_views(src: wp.array3d(dtype=float), out: wp.array(dtype=Grid)):
    g = Grid()
    g.a = src[1]
    out[0] = g
    g.a = src[0, 0:2, 1:3][:, :]  # sliced views keep the dimensions they slice
    out[1] = g
    g.a = wp.array(ptr=src.ptr, shape=(3, 4), dtype=float)
    out[2] = g


def test_array_descriptors_record_their_dimension_count():
    """An array field's descriptor records its dimension count (`ndim`, as Warp's array_t) whether the host
    packed it or a kernel made it (a view, a slice, wp.array(ptr=...)); a zeroed struct's is 0."""
    src = wp.array(np.arange(24, dtype=np.float32).reshape(2, 3, 4))
    out = wp.zeros(4, dtype=Grid)
    wp.launch(store_views, 1, inputs=[src, out])
    n = out.numpy()["a"]
    assert n["ndim"].tolist() == [2, 2, 2, 0]
    assert n["shape"][:, :2].tolist() == [[3, 4], [2, 2], [3, 4], [0, 0]]
    assert wp.array([Grid()], dtype=Grid).numpy()["a"]["ndim"].tolist() == [0]


@wp.struct
class Complex:
    re: float
    im: float


@wp.func
def add(a: Complex, b: Complex) -> Complex:
    return Complex(a.re + b.re, a.im + b.im)


@wp.func
def mul(a: Complex, b: Complex) -> Complex:
    return Complex(a.re * b.re - a.im * b.im, a.re * b.im + a.im * b.re)


@wp.kernel
def complex_ops(out: wp.array(dtype=float)):
    a, b = Complex(1.0, 2.0), Complex(3.0, 4.0)
    c = a + b * a
    c += b
    out[0] = c.re
    out[1] = c.im
    out[2] = 2.0 + 3.0 * out[1]  # numbers keep the builtin operators


def test_operators_call_the_functions_named_after_them():
    """`a + b` and `a * b` on values a @wp.func named `add` / `mul` in the kernel's module takes call it
    (Warp's operator overloading, here for a struct); other operands keep the builtins."""
    out = wp.zeros(3)
    wp.launch(complex_ops, 1, inputs=[out])
    assert out.numpy().tolist() == [1.0 - 5.0 + 3.0, 2.0 + 10.0 + 4.0, 2.0 + 3.0 * 16.0]


@wp.kernel
def complex_accumulate(values: wp.array(dtype=Complex)):
    values[0] += Complex(1.0, 1.0)


def test_augmented_assignment_to_an_array_element_calls_the_overloading_function():
    """`a[i] += v` where a @wp.func named `add` takes the element's type reads the element, calls it and
    stores the result (Warp's form; without such a function it is an atomic add)."""
    values = wp.array([Complex(re=2.0, im=3.0)], dtype=Complex)
    wp.launch(complex_accumulate, 1, inputs=[values])
    assert (values.list()[0].re, values.list()[0].im) == (3.0, 4.0)


@wp.struct
class WithArrays:
    x: float
    a: wp.array(dtype=int)
    b: wp.array2d(dtype=float)


def test_struct_elements_read_back_view_their_arrays():
    """Reading struct elements of an array (`list()`, indexing) gives array fields as views of the memory
    their descriptors name (shape, strides and dtype kept), as Warp's; a null array field stays None."""
    s = WithArrays(x=2.0, a=wp.array([1, 2, 3], dtype=int), b=wp.zeros((2, 3)))
    arr = wp.full(4, s, dtype=WithArrays)
    got = arr.list()
    assert got[1].x == 2.0 and got[2].a.numpy().tolist() == [1, 2, 3] and got[3].b.shape == (2, 3)
    assert arr[0].a.dtype == wp.int32 and arr[0].a.ptr == s.a.ptr
    assert wp.full(1, WithArrays(x=1.0), dtype=WithArrays).list()[0].a is None
