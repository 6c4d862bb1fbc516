"""The JAX bridge: arrays through DLPack, kernels as JAX primitives (XLA CPU FFI), vmap, grad, callbacks."""

import math
import os
import subprocess
import sys
import textwrap
from functools import partial
from pathlib import Path

import numpy as np
import pytest

import loomwork as wp

jax = pytest.importorskip("jax", reason="JAX is not installed (pip install 'jax[cpu]')")
import jax.numpy as jnp  # noqa: E402

from loomwork.jax_experimental import GraphMode, jax_callable, jax_kernel, register_ffi_callback  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


@wp.kernel
def scale_k(a: wp.array(dtype=float), s: float, out: wp.array(dtype=float)):
    i = wp.tid()
    out[i] = a[i] * s


@wp.kernel
def add_int_k(a: wp.array(dtype=int), b: wp.array(dtype=int), out: wp.array(dtype=int)):
    i = wp.tid()
    out[i] = a[i] + b[i]


@wp.kernel
def matmul_k(a: wp.array2d(dtype=float), b: wp.array2d(dtype=float), c: wp.array2d(dtype=float)):
    i, j = wp.tid()
    s = wp.float32(0.0)
    for k in range(a.shape[1]):
        s += a[i, k] * b[k, j]
    c[i, j] = s


@wp.kernel
def vecmat_k(a: wp.array(dtype=float), b: wp.array(dtype=wp.vec3), c: wp.array(dtype=wp.mat22),
             d: wp.array(dtype=float), e: wp.array(dtype=wp.vec3), f: wp.array(dtype=wp.mat22)):
    i = wp.tid()
    d[i] = a[i] + 1.0
    e[i] = b[i] * 2.0
    f[i] = wp.transpose(c[i])


@wp.kernel
def vec_scale_k(a: wp.array(dtype=wp.vec2), v: wp.vec2, out: wp.array(dtype=wp.vec2)):
    i = wp.tid()
    out[i] = wp.cw_mul(a[i], v)


@wp.kernel
def rowsum_k(m: wp.array2d(dtype=float), sums: wp.array(dtype=float)):
    i, j = wp.tid()
    wp.atomic_add(sums, i, m[i, j])


@wp.kernel
def total_k(a: wp.array(dtype=float), total: wp.array(dtype=float)):
    wp.atomic_add(total, 0, a[wp.tid()])


@wp.kernel
def lookup_k(table: wp.array(dtype=float), idx: wp.array(dtype=int), out: wp.array(dtype=float)):
    i = wp.tid()
    out[i] = table[idx[i]]


@wp.kernel
def poly_k(a: wp.array(dtype=float), b: wp.array(dtype=wp.vec2), idx: wp.array(dtype=int), s: float,
           c: wp.array(dtype=float), d: wp.array(dtype=float)):
    i = wp.tid()
    c[i] = wp.sin(a[i]) * b[i][0] + b[i][1] * b[i][1] * s
    d[i] = a[i] * a[i] * float(idx[i])


@wp.kernel
def saxpy_k(x: wp.array(dtype=float), y: wp.array(dtype=float), a: float, out: wp.array(dtype=float)):
    i = wp.tid()
    out[i] = a * x[i] + y[i]


@wp.kernel
def no_output_k(a: wp.array(dtype=float), s: float):
    pass


@wp.struct
class Particle:
    x: wp.vec3
    m: float


@wp.kernel
def particles_k(p: wp.array(dtype=Particle), out: wp.array(dtype=float)):
    out[wp.tid()] = p[wp.tid()].m


# -- arrays, dtypes, devices ---------------------------------------------------------------------------------

def test_from_jax_and_to_jax_share_memory():
    """from_jax views a JAX array's memory (vec2 from trailing dims); to_jax views an array's memory back."""
    x = jnp.arange(8, dtype=jnp.float32).reshape(4, 2)
    a = wp.from_jax(x, dtype=wp.vec2)
    assert a.shape == (4,) and a.dtype == wp.vec2 and a.ptr == x.unsafe_buffer_pointer()
    np.testing.assert_array_equal(a.numpy(), np.asarray(x))
    b = wp.array(np.arange(6, dtype=np.float32).reshape(2, 3), dtype=wp.vec3)
    y = wp.to_jax(b)
    assert y.shape == (2, 3) and y.unsafe_buffer_pointer() == b.ptr
    np.testing.assert_array_equal(np.asarray(y), b.numpy())
    with pytest.raises(TypeError, match="jax.Array"):
        wp.from_jax(np.zeros(3))
    with pytest.raises(TypeError, match="wp.array"):
        wp.to_jax(x)


def test_dtype_and_device_conversions():
    """dtype_from_jax / dtype_to_jax are inverse on every scalar type; devices map to JAX's CPU device."""
    for st in (wp.bool, wp.int8, wp.uint8, wp.int16, wp.uint16, wp.int32, wp.uint32, wp.int64, wp.uint64,
               wp.float16, wp.bfloat16, wp.float32, wp.float64):
        assert wp.dtype_from_jax(wp.dtype_to_jax(st)) is st
    assert wp.dtype_to_jax(wp.float32) is jnp.float32 and wp.dtype_from_jax(jnp.dtype("int32")) is wp.int32
    with pytest.raises(TypeError, match="vec3"):
        wp.dtype_to_jax(wp.vec3)
    with pytest.raises(TypeError, match="complex64"):
        wp.dtype_from_jax(jnp.complex64)
    cpu = jax.devices("cpu")[0]
    assert wp.device_from_jax(cpu) == wp.get_device("cpu") and wp.device_to_jax("cpu") == cpu


# -- kernels as primitives -----------------------------------------------------------------------------------

def test_kernel_with_static_and_traced_scalars():
    """A static scalar is packed into the launch; a traced one is an operand: one compile for any value."""
    f = jax_kernel(scale_k)
    a = jnp.arange(10, dtype=jnp.float32)
    (out,) = jax.jit(lambda a: f(a, 2.5))(a)
    np.testing.assert_allclose(out, np.arange(10) * 2.5)
    g = jax.jit(lambda a, s: f(a, s))
    for s in (2.0, -3.0, 0.5):
        np.testing.assert_allclose(g(a, s)[0], np.arange(10) * s)
    assert g._cache_size() == 1
    (out,) = f(a, jnp.float32(4.0))  # eager, with a JAX scalar
    np.testing.assert_allclose(out, np.arange(10) * 4.0)


def test_large_launch_runs_on_the_pool_and_matches_numpy():
    """saxpy over 2^20 elements (past the serial threshold, so on the thread pool) matches NumPy."""
    n = 1 << 20
    rng = np.random.default_rng(0)
    x, y = rng.random(n, dtype=np.float32), rng.random(n, dtype=np.float32)
    (out,) = jax.jit(lambda x, y, a: jax_kernel(saxpy_k)(x, y, a))(x, y, 1.5)
    np.testing.assert_allclose(out, 1.5 * x + y, rtol=1e-6)


def test_int_arrays_and_launch_dims_and_matmul():
    """Int arrays add; a 2-d kernel takes launch_dims (also per call) different from its inputs' shapes."""
    (s,) = jax.jit(lambda: jax_kernel(add_int_k)(jnp.arange(5, dtype=jnp.int32), jnp.ones(5, jnp.int32)))()
    np.testing.assert_array_equal(s, np.arange(5) + 1)
    mm = jax_kernel(matmul_k)
    rng = np.random.default_rng(1)
    a, b = rng.random((3, 2), dtype=np.float32), rng.random((2, 4), dtype=np.float32)
    (c,) = jax.jit(lambda a, b: mm(a, b, launch_dims=(3, 4)))(a, b)
    np.testing.assert_allclose(c, a @ b, rtol=1e-6)
    (c,) = jax_kernel(matmul_k, launch_dims=(3, 4))(jnp.asarray(a), jnp.asarray(b))
    np.testing.assert_allclose(c, a @ b, rtol=1e-6)


def test_vector_and_matrix_outputs_in_both_shape_forms():
    """vec3 and mat22 arrays are trailing JAX dims; output_dims in the array's own form or JAX's agree."""
    f = jax_kernel(vecmat_k, num_outputs=3)
    n = 4
    a = jnp.arange(n, dtype=jnp.float32)
    b = jnp.arange(3 * n, dtype=jnp.float32).reshape(n, 3)
    c = jnp.arange(4 * n, dtype=jnp.float32).reshape(n, 2, 2)
    for dims in (None, n, (n,), {"d": n, "e": n, "f": n}, {"d": n, "e": (n, 3), "f": (n, 2, 2)},
                 {"d": a.shape, "e": b.shape, "f": c.shape}):
        d, e, m = jax.jit(lambda a, b, c, dims=dims: f(a, b, c, output_dims=dims))(a, b, c)
        assert d.shape == (n,) and e.shape == (n, 3) and m.shape == (n, 2, 2)
        np.testing.assert_allclose(d, np.asarray(a) + 1)
        np.testing.assert_allclose(e, np.asarray(b) * 2)
        np.testing.assert_allclose(m, np.asarray(c).transpose(0, 2, 1))


def test_vector_scalar_argument_static_and_traced():
    """A vec2 scalar parameter takes a static wp.vec2 or a traced JAX array of shape (2,)."""
    f = jax_kernel(vec_scale_k)
    a = jnp.arange(6, dtype=jnp.float32).reshape(3, 2)
    expect = np.asarray(a) * np.array([2.0, -1.0], np.float32)
    np.testing.assert_allclose(jax.jit(lambda a: f(a, wp.vec2(2.0, -1.0)))(a)[0], expect)
    np.testing.assert_allclose(jax.jit(lambda a, v: f(a, v))(a, jnp.array([2.0, -1.0]))[0], expect)


def test_in_out_argument_and_zeroed_accumulated_outputs():
    """An in-out argument starts from its input; an output the kernel accumulates into starts at zero."""
    rs = jax_kernel(rowsum_k, in_out_argnames=["sums"])
    m = jnp.arange(12, dtype=jnp.float32).reshape(3, 4)
    (sums,) = jax.jit(rs)(m, jnp.full(3, 10.0, jnp.float32))
    np.testing.assert_allclose(sums, np.asarray(m).sum(1) + 10)
    tot = jax.jit(lambda a: jax_kernel(total_k)(a, output_dims=1))
    for _ in range(3):  # XLA reuses buffers: each call must start from zero
        np.testing.assert_allclose(tot(jnp.ones(100, jnp.float32))[0], [100.0])


@pytest.mark.parametrize("method", ["broadcast_all", "expand_dims", "sequential", "sequential_unrolled",
                                    "legacy_vectorized"])
def test_vmap_methods_agree_with_numpy(method):
    """Every vmap_method batches a kernel (given at creation or per call), unbatched operands included."""
    f = jax_kernel(saxpy_k, vmap_method=method)
    x = jnp.arange(12, dtype=jnp.float32).reshape(3, 4)
    y = jnp.ones(4, jnp.float32)
    (out,) = jax.jit(jax.vmap(lambda x: f(x, y, 2.0)))(x)
    np.testing.assert_allclose(out, 2 * np.asarray(x) + 1)
    g = jax_kernel(saxpy_k)
    (out,) = jax.vmap(lambda x, a: g(x, x, a, vmap_method=method))(x, jnp.arange(3, dtype=jnp.float32))
    np.testing.assert_allclose(out, np.asarray(x) * (np.arange(3)[:, None] + 1))


def test_nested_vmap_and_in_out_batch_axes():
    """vmap inside vmap, and the documents' in-out rowsum on batch axes 0, 1 and 2."""
    f = jax_kernel(saxpy_k)
    x = jnp.arange(24, dtype=jnp.float32).reshape(2, 3, 4)
    y = jnp.arange(4, dtype=jnp.float32)
    (out,) = jax.jit(jax.vmap(jax.vmap(lambda x: f(x, y, 3.0))))(x)
    np.testing.assert_allclose(out, 3 * np.asarray(x) + np.asarray(y))
    rs = jax_kernel(rowsum_k, in_out_argnames=["sums"])
    m = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    for axis, expect in ((0, m.sum(2)), (1, m.sum(2).T), (2, m.sum(1).T)):
        (out,) = jax.jit(jax.vmap(rs, in_axes=(axis, 0)))(m, jnp.zeros(expect.shape, jnp.float32))
        np.testing.assert_allclose(out, expect)


def test_vmap_with_unbatched_table_and_partial_launch_dims():
    """The documents' lookup: an unbatched table, batched indices, launch_dims through partial."""
    f = jax_kernel(lookup_k)
    table = jnp.arange(100, dtype=jnp.float32) * 2
    idx = jax.random.randint(jax.random.key(0), (20, 50), 0, 100, dtype=jnp.int32)
    (out,) = jax.jit(jax.vmap(partial(f, launch_dims=50), in_axes=(None, 0)))(table, idx)
    np.testing.assert_allclose(out, np.asarray(idx) * 2)
    (out,) = jax.jit(jax.vmap(partial(f, launch_dims=20), in_axes=(None, 1)))(table, idx)
    np.testing.assert_allclose(out, np.asarray(idx).T * 2)


# -- gradients ----------------------------------------------------------------------------------------------

def poly_jnp(a, b, idx, s):
    return jnp.sin(a) * b[:, 0] + b[:, 1] ** 2 * s, a * a * idx.astype(jnp.float32)


def test_gradients_match_jax_numpy_and_finite_differences():
    """enable_backward: grads of every float input (a float and a vec2 array) through two outputs match the
    same function in jax.numpy and central finite differences; the int input gets a zero (float0) cotangent."""
    f = jax_kernel(poly_k, num_outputs=2, enable_backward=True)
    rng = np.random.default_rng(2)
    n = 9
    a = jnp.asarray(rng.random(n, dtype=np.float32))
    b = jnp.asarray(rng.random((n, 2), dtype=np.float32))
    idx = jnp.arange(n, dtype=jnp.int32)

    def loss(fn, a, b):
        c, d = fn(a, b, idx, 1.5)
        return jnp.sum(c * jnp.arange(n)) + jnp.sum(d ** 2)

    ga, gb = jax.jit(jax.grad(lambda a, b: loss(f, a, b), argnums=(0, 1)))(a, b)
    ra, rb = jax.grad(lambda a, b: loss(poly_jnp, a, b), argnums=(0, 1))(a, b)
    np.testing.assert_allclose(ga, ra, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(gb, rb, rtol=1e-5, atol=1e-5)
    a64, h = np.asarray(a, np.float64), 1e-3
    for i in (0, 4, 8):
        e = np.zeros(n)
        e[i] = h
        up = loss(f, jnp.asarray(a64 + e, jnp.float32), b)
        down = loss(f, jnp.asarray(a64 - e, jnp.float32), b)
        assert abs((up - down) / (2 * h) - ga[i]) < 2e-2 * max(1.0, abs(ga[i]))
    gi = jax.grad(lambda a, i: jnp.sum(f(a, b, i, 1.0)[1]), argnums=1, allow_int=True)(a, idx)
    assert gi.dtype == jax.dtypes.float0


def test_gradient_under_vmap_and_with_launch_dims():
    """The adjoint batches under vmap like the forward launch, and takes custom launch dimensions."""
    f = jax_kernel(saxpy_k, enable_backward=True)
    x = jnp.arange(12, dtype=jnp.float32).reshape(3, 4)
    y = jnp.ones(4, jnp.float32)
    g = jax.vmap(jax.grad(lambda x: jnp.sum(f(x, y, 2.0)[0] ** 2)))(x)
    np.testing.assert_allclose(g, 4 * (2 * np.asarray(x) + 1))
    mm = jax_kernel(matmul_k, enable_backward=True)
    a, b = jnp.ones((3, 2), jnp.float32), jnp.full((2, 4), 2.0, jnp.float32)
    ga = jax.grad(lambda a: jnp.sum(mm(a, b, launch_dims=(3, 4))[0]))(a)
    np.testing.assert_allclose(ga, jax.grad(lambda a: jnp.sum(a @ b))(a))


def test_gradient_with_respect_to_a_traced_scalar_is_refused():
    """Differentiating with respect to a scalar argument raises, naming the kernel and the argument."""
    f = jax_kernel(saxpy_k, enable_backward=True)
    x = jnp.ones(4, jnp.float32)
    with pytest.raises(TypeError, match="saxpy_k.*'a'"):
        jax.grad(lambda a: jnp.sum(f(x, x, a)[0]))(2.0)


# -- bad input ----------------------------------------------------------------------------------------------

def test_bad_kernels_and_options_are_refused_at_creation():
    """No output, an output that is not an array (inputs after outputs), unknown or misplaced in-out names,
    in-out with backward, an unknown vmap method: each a clear error naming the kernel."""
    with pytest.raises(ValueError, match="scale_k.*at least one output"):
        jax_kernel(scale_k, num_outputs=0)
    with pytest.raises(TypeError, match="no_output_k.*output 's' must be an array"):
        jax_kernel(no_output_k)
    with pytest.raises(ValueError, match="rowsum_k.*no parameter.*'total'"):
        jax_kernel(rowsum_k, in_out_argnames=["total"])
    with pytest.raises(ValueError, match="vecmat_k.*in-out argument 'f' comes after"):
        jax_kernel(vecmat_k, num_outputs=3, in_out_argnames=["f"])
    with pytest.raises(ValueError, match="rowsum_k.*enable_backward"):
        jax_kernel(rowsum_k, in_out_argnames=["sums"], enable_backward=True)
    with pytest.raises(ValueError, match="scale_k.*vmap_method"):
        jax_kernel(scale_k, vmap_method="parallel")
    with pytest.raises(TypeError, match="@wp.kernel"):
        jax_kernel(lambda x: x)
    with pytest.raises(TypeError, match="particles_k.*'p'.*JAX cannot hold"):
        jax_kernel(particles_k)


def test_bad_calls_are_refused_at_trace_time():
    """Wrong dtype, dimensions, component dims, argument count, output dims, in-out shape, vmap axis: errors
    at trace time naming the kernel and the argument."""
    f = jax_kernel(scale_k)
    v = jax_kernel(vecmat_k, num_outputs=3)
    a, b, c = jnp.zeros(4), jnp.zeros((4, 3)), jnp.zeros((4, 2, 2))
    with pytest.raises(TypeError, match="scale_k.*'a'.*float32.*int32"):
        jax.jit(lambda: f(jnp.zeros(4, jnp.int32), 1.0))()
    with pytest.raises(TypeError, match="scale_k.*'a'.*1 dimension"):
        jax.jit(lambda: f(jnp.zeros((2, 2)), 1.0))()
    with pytest.raises(TypeError, match="vecmat_k.*'b'.*ending in \\(3,\\)"):
        v(a, jnp.zeros((4, 2)), c)
    with pytest.raises(TypeError, match="scale_k.*takes 2 input"):
        f(a)
    with pytest.raises(TypeError, match="scale_k.*'s'.*float32"):
        f(a, "x")
    with pytest.raises(ValueError, match="vecmat_k.*output 'e'.*\\(4, 2\\)"):
        v(a, b, c, output_dims={"d": 4, "e": (4, 2), "f": 4})
    with pytest.raises(ValueError, match="vecmat_k.*no entry for output 'f'"):
        v(a, b, c, output_dims={"d": 4, "e": 4})
    with pytest.raises(ValueError, match="rowsum_k.*'sums' has shape \\(3,\\).*5"):
        jax_kernel(rowsum_k, in_out_argnames=["sums"])(jnp.zeros((3, 4)), jnp.zeros(3), output_dims=5)
    with pytest.raises(ValueError, match="matmul_k.*unpacks wp.tid\\(\\) into 2"):
        jax_kernel(matmul_k)(jnp.zeros((2, 2)), jnp.zeros((2, 2)), launch_dims=4)
    with pytest.raises(ValueError, match="total_k.*no input array.*launch_dims"):
        jax_kernel(total_k, num_outputs=2)()
    with pytest.raises(ValueError):
        jax.vmap(lambda x: f(x, 1.0), in_axes=2)(jnp.zeros((3, 4)))


# -- Python functions and callbacks ------------------------------------------------------------------------

def two_scales(a: wp.array(dtype=float), b: wp.array(dtype=wp.vec2), s: float, c: wp.array(dtype=float),
               d: wp.array(dtype=wp.vec2)):
    wp.launch(scale_k, dim=a.shape, inputs=[a, s], outputs=[c])
    wp.launch(vec_scale_k, dim=b.shape, inputs=[b, wp.vec2(s, s)], outputs=[d])


def test_jax_callable_launches_several_kernels_with_traced_scalars_and_vmap():
    """jax_callable runs a function launching two kernels: static or traced scalar, every graph mode, vmap."""
    a = jnp.arange(6, dtype=jnp.float32)
    b = jnp.arange(8, dtype=jnp.float32).reshape(4, 2)
    for mode in (GraphMode.JAX, GraphMode.WARP, GraphMode.NONE):
        f = jax_callable(two_scales, num_outputs=2, graph_mode=mode)
        c, d = jax.jit(lambda a, b, s, f=f: f(a, b, s, output_dims={"c": a.shape, "d": b.shape}))(a, b, 3.0)
        np.testing.assert_allclose(c, np.asarray(a) * 3)
        np.testing.assert_allclose(d, np.asarray(b) * 3)
    c, d = jax.vmap(lambda a, b: f(a, b, 2.0, output_dims={"c": a.shape, "d": b.shape}))(
        jnp.stack([a, a + 1]), jnp.stack([b, b]))
    np.testing.assert_allclose(c, np.stack([a, a + 1]) * 2)
    assert d.shape == (2, 4, 2)


def test_register_ffi_callback_and_its_errors():
    """A registered callback gets buffers kernels take, attributes, a context; its exception fails the call."""
    seen = {}

    def cb(inputs, outputs, attrs, ctx):
        seen.update(attrs, stream=ctx.stream)
        wp.launch(scale_k, dim=inputs[0].shape, inputs=[inputs[0], attrs["scale"]], outputs=[outputs[0]])

    register_ffi_callback("lw_test_scale", cb)
    a = jnp.arange(5, dtype=jnp.float32)
    call = jax.ffi.ffi_call("lw_test_scale", jax.ShapeDtypeStruct(a.shape, a.dtype))
    np.testing.assert_allclose(call(a, scale=np.float32(2.0), tag="x"), np.arange(5) * 2)
    assert seen == {"scale": 2.0, "tag": "x", "stream": None}

    def boom(inputs, outputs, attrs, ctx):
        raise ValueError("no such thing")

    register_ffi_callback("lw_test_boom", boom)
    with pytest.raises(Exception, match="lw_test_boom: ValueError: no such thing"):
        jax.ffi.ffi_call("lw_test_boom", jax.ShapeDtypeStruct((2,), jnp.float32))(a).block_until_ready()


# -- several devices -----------------------------------------------------------------------------------------

SHARD_SCRIPT = """
import numpy as np, jax, jax.numpy as jnp
from jax.sharding import PartitionSpec as P
from jax.experimental.shard_map import shard_map
import loomwork as wp
from loomwork.jax_experimental import jax_kernel

@wp.kernel
def times_two(a: wp.array(dtype=float), out: wp.array(dtype=float)):
    out[wp.tid()] = a[wp.tid()] * 2.0

@wp.kernel
def matmul(a: wp.array2d(dtype=float), b: wp.array2d(dtype=float), c: wp.array2d(dtype=float)):
    i, j = wp.tid()
    s = wp.float32(0.0)
    for k in range(a.shape[1]):
        s += a[i, k] * b[k, j]
    c[i, j] = s

assert jax.device_count() == 4
mesh = jax.sharding.Mesh(np.array(jax.devices()), "x")
f = jax_kernel(times_two)
x = jax.device_put(jnp.arange(20, dtype=jnp.float32), jax.sharding.NamedSharding(mesh, P("x")))
y = shard_map(lambda a: f(a)[0], mesh=mesh, in_specs=(P("x"),), out_specs=P("x"), check_rep=False)(x)
assert len(y.sharding.device_set) == 4
np.testing.assert_allclose(np.asarray(y), np.arange(20) * 2)
mm = jax_kernel(matmul)
a = np.arange(8 * 3, dtype=np.float32).reshape(8, 3)
b = np.arange(3 * 5, dtype=np.float32).reshape(3, 5)
c = shard_map(lambda a, b: mm(a, b, launch_dims=(a.shape[0], b.shape[1]))[0], mesh=mesh,
              in_specs=(P("x", None), P(None, None)), out_specs=P("x", None), check_rep=False)(a, b)
np.testing.assert_allclose(np.asarray(c), a @ b, rtol=1e-6)
print("ok")
"""


def test_shard_map_on_four_cpu_devices(tmp_path):
    """The documents' shard_map examples (element-wise, row-sharded matmul) on 4 virtual CPU devices."""
    script = tmp_path / "shard.py"
    script.write_text(textwrap.dedent(SHARD_SCRIPT))
    env = {**os.environ, "XLA_FLAGS": "--xla_force_host_platform_device_count=4", "JAX_PLATFORMS": "cpu"}
    r = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert r.returncode == 0 and r.stdout.strip().endswith("ok"), r.stderr[-3000:]


def test_handler_is_cached_on_disk_by_content():
    """The FFI handler library lives in the kernel cache, in a folder named by its content hash."""
    from loomwork.kernels.jax_cpu import handler_library

    path = Path(handler_library()._name)
    assert path.is_file() and path.parent.name.startswith("jax_ffi-")
    assert Path(wp.config.kernel_cache_dir).resolve() in path.resolve().parents
    assert math.isfinite(float(jax_kernel(scale_k)(jnp.ones(2), 1.0)[0][0]))


@wp.kernel(module="test_jax_bridge_debug", module_options={"mode": "debug"})
def shifted_k(a: wp.array(dtype=float), out: wp.array(dtype=float)):
    i = wp.tid()
    out[i] = a[i + 1]


def test_debug_build_reports_out_of_bounds_as_a_failed_call():
    """A debug-mode kernel's out-of-bounds read fails the JAX call, naming the kernel, index and source site."""
    f = jax.jit(lambda a: jax_kernel(shifted_k)(a)[0])
    with pytest.raises(Exception, match="shifted_k.*index 4 is out of bounds for an extent of 4.*a\\[i \\+ 1\\]"):
        f(jnp.arange(4, dtype=jnp.float32)).block_until_ready()
    np.testing.assert_array_equal(jax_kernel(shifted_k)(jnp.arange(5.0, dtype=jnp.float32), launch_dims=4)[0],
                                  [1, 2, 3, 4])
