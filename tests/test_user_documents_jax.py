"""The snippets of the user's JAX document (`../shared/seeds/002_*`), run as written with `import loomwork as wp`
and `from loomwork.jax_experimental import ...` on the CPU. Kernels the document defines twice under one name
(add_kernel over ints and over floats) get a suffix here; the distributed shard_map program runs verbatim as 2
processes of 2 CPU devices each, with the environment `mpirun -np 2` gives them."""

import math
import os
import random
import socket
import subprocess
import sys
from functools import partial
from pathlib import Path

import numpy as np
import pytest

import loomwork as wp

jax = pytest.importorskip("jax", reason="JAX is not installed (pip install 'jax[cpu]')")
import jax.numpy as jnp  # noqa: E402

from loomwork.jax_experimental import jax_callable, jax_kernel, register_ffi_callback  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


@wp.kernel
def triple_kernel(input: wp.array[float], output: wp.array[float]):
    tid = wp.tid()
    output[tid] = 3.0 * input[tid]


@wp.kernel
def add_kernel_int(a: wp.array[int],
                   b: wp.array[int],
                   output: wp.array[int]):
    tid = wp.tid()
    output[tid] = a[tid] + b[tid]


@wp.kernel
def sincos_kernel(angle: wp.array[float],
                  # outputs
                  sin_out: wp.array[float],
                  cos_out: wp.array[float]):
    tid = wp.tid()
    sin_out[tid] = wp.sin(angle[tid])
    cos_out[tid] = wp.cos(angle[tid])


@wp.kernel
def diagonal_kernel(output: wp.array[wp.mat33]):
    tid = wp.tid()
    output[tid] = wp.mat33(1.0, 0.0, 0.0, 0.0, 2.0, 0.0, 0.0, 0.0, 3.0)


@wp.kernel
def scale_kernel(a: wp.array[float],
                 s: float,  # scalar input
                 output: wp.array[float]):
    tid = wp.tid()
    output[tid] = a[tid] * s


@wp.kernel
def matmul_kernel(
    a: wp.array2d[float],  # NxK input
    b: wp.array2d[float],  # KxM input
    c: wp.array2d[float],  # NxM output
):
    # launch dimensions should be (N, M)
    i, j = wp.tid()
    N = a.shape[0]
    K = a.shape[1]
    M = b.shape[1]
    if i < N and j < M:
        s = wp.float32(0)
        for k in range(K):
            s += a[i, k] * b[k, j]
        c[i, j] = s


@wp.kernel
def funky_kernel(a: wp.array[float],
                 # outputs
                 b: wp.array[float],
                 c: wp.array[float]):
    ...


@wp.kernel
def vecmat_kernel(a: wp.array[float],
                  b: wp.array[wp.vec3],
                  c: wp.array[wp.mat22],
                  # outputs
                  d: wp.array[float],
                  e: wp.array[wp.vec3],
                  f: wp.array[wp.mat22]):
    ...


@wp.kernel
def add_kernel(a: wp.array[float], b: wp.array[float], output: wp.array[float]):
    tid = wp.tid()
    output[tid] = a[tid] + b[tid]


@wp.kernel
def rowsum_kernel(matrix: wp.array2d[float], sums: wp.array1d[float]):
    i, j = wp.tid()
    wp.atomic_add(sums, i, matrix[i, j])


@wp.kernel
def lookup_kernel(table: wp.array[float], indices: wp.array[int], output: wp.array[float]):
    i = wp.tid()
    output[i] = table[indices[i]]


@wp.kernel
def scale_sum_square(
    a: wp.array[float],
    b: wp.array[float],
    s: float,
    out: wp.array[float],
):
    tid = wp.tid()
    out[tid] = (a[tid] * s + b[tid]) ** 2.0


@wp.kernel
def multi_output(
    a: wp.array[float],
    b: wp.array[float],
    s: float,
    c: wp.array[float],
    d: wp.array[float],
):
    tid = wp.tid()
    c[tid] = a[tid] ** 2.0
    d[tid] = a[tid] * b[tid] * s


@wp.kernel
def scale_vec2(a: wp.array[wp.vec2], s: float, out: wp.array[wp.vec2]):
    tid = wp.tid()
    out[tid] = a[tid] * s


@wp.kernel
def scale_vec_kernel(a: wp.array[wp.vec2], s: float, output: wp.array[wp.vec2]):
    tid = wp.tid()
    output[tid] = a[tid] * s


def test_introduction_from_jax_to_jax():
    """warp_array = wp.from_jax(jax_array); jax_array = wp.to_jax(warp_array): zero-copy both ways."""
    jax_array = jnp.arange(10, dtype=jnp.float32)
    warp_array = wp.from_jax(jax_array)
    assert warp_array.ptr == jax_array.unsafe_buffer_pointer()
    jax_array = wp.to_jax(warp_array)
    assert jax_array.unsafe_buffer_pointer() == warp_array.ptr
    np.testing.assert_array_equal(jax_array, np.arange(10))


def test_triple_add_sincos_diagonal():
    """The first four kernels: one input, two inputs (ints), two outputs, no input with launch_dims."""
    jax_triple = jax_kernel(triple_kernel)

    @jax.jit
    def f():
        x = jnp.arange(0, 64, dtype=jnp.float32)
        return jax_triple(x)

    np.testing.assert_allclose(f()[0], 3 * np.arange(64))

    jax_add = jax_kernel(add_kernel_int)

    @jax.jit
    def g():
        n = 10
        a = jnp.arange(n, dtype=jnp.int32)
        b = jnp.ones(n, dtype=jnp.int32)
        return jax_add(a, b)

    np.testing.assert_array_equal(g()[0], np.arange(10) + 1)

    jax_sincos = jax_kernel(sincos_kernel, num_outputs=2)  # specify multiple outputs

    @jax.jit
    def h():
        a = jnp.linspace(0, 2 * math.pi, 32)
        return jax_sincos(a)

    s, c = h()
    angles = np.linspace(0, 2 * math.pi, 32, dtype=np.float32)
    np.testing.assert_allclose(s, np.sin(angles), atol=1e-6)
    np.testing.assert_allclose(c, np.cos(angles), atol=1e-6)

    jax_diagonal = jax_kernel(diagonal_kernel)

    @jax.jit
    def k():
        # launch dimensions determine the output shape
        return jax_diagonal(launch_dims=4)

    np.testing.assert_array_equal(k()[0], np.tile(np.diag([1.0, 2.0, 3.0]), (4, 1, 1)))


def test_scalar_inputs_constant_traced_and_static():
    """A constant scalar; the 'traced scalar' snippet (which runs here, compiled once); a static one."""
    jax_scale = jax_kernel(scale_kernel)

    @jax.jit
    def f():
        a = jnp.arange(10, dtype=jnp.float32)
        return jax_scale(a, 2.0)  # ok: constant scalar argument

    np.testing.assert_allclose(f()[0], np.arange(10) * 2)

    @jax.jit
    def g(a, s):
        return jax_scale(a, s)  # traced scalar argument: a 0-d operand here

    a = jnp.arange(10, dtype=jnp.float32)
    np.testing.assert_allclose(g(a, 2.0)[0], np.arange(10) * 2)
    np.testing.assert_allclose(g(a, 5.0)[0], np.arange(10) * 5)
    assert g._cache_size() == 1

    # make scalar arguments static
    @partial(jax.jit, static_argnames=["s"])
    def h(a, s):
        return jax_scale(a, s)  # ok: static scalar argument

    np.testing.assert_allclose(h(a, 2.0)[0], np.arange(10) * 2)


def test_launch_and_output_dimensions():
    """matmul with custom launch_dims; funky_kernel's output_dims as an int, a dict, with launch_dims."""
    jax_matmul = jax_kernel(matmul_kernel)

    @jax.jit
    def f():
        N1, M1, K1 = 3, 4, 2
        a1 = jnp.full((N1, K1), 2, dtype=jnp.float32)
        b1 = jnp.full((K1, M1), 3, dtype=jnp.float32)
        result1 = jax_matmul(a1, b1, launch_dims=(N1, M1))
        N2, M2, K2 = 4, 3, 2
        a2 = jnp.full((N2, K2), 2, dtype=jnp.float32)
        b2 = jnp.full((K2, M2), 3, dtype=jnp.float32)
        result2 = jax_matmul(a2, b2, launch_dims=(N2, M2))
        return result1, result2

    r1, r2 = f()
    np.testing.assert_array_equal(r1[0], np.full((3, 4), 12.0))
    np.testing.assert_array_equal(r2[0], np.full((4, 3), 12.0))

    jax_funky = jax_kernel(funky_kernel, num_outputs=2)
    n, m, k = 5, 7, 3
    a = jnp.zeros(k, jnp.float32)
    b, c = jax_funky(a, output_dims=n)
    assert b.shape == c.shape == (n,)
    b, c = jax_funky(a, output_dims={"b": n, "c": m})
    assert b.shape == (n,) and c.shape == (m,)
    b, c = jax_funky(a, launch_dims=k, output_dims={"b": n, "c": m})
    assert b.shape == (n,) and c.shape == (m,)


def test_vector_and_matrix_arrays():
    """vecmat_kernel's arrays as trailing JAX dims, and its four equivalent output_dims spellings."""
    jax_vecmat = jax_kernel(vecmat_kernel, num_outputs=3)
    n = 10
    a = jnp.zeros(n, dtype=jnp.float32)          # scalar array
    b = jnp.zeros((n, 3), dtype=jnp.float32)     # vec3 array
    c = jnp.zeros((n, 2, 2), dtype=jnp.float32)  # mat22 array
    for dims in (None, n, {"d": n, "e": n, "f": n}, {"d": n, "e": (n, 3), "f": (n, 2, 2)},
                 {"d": a.shape, "e": b.shape, "f": c.shape}):
        d, e, f = jax.jit(lambda a, b, c, dims=dims: jax_vecmat(a, b, c, output_dims=dims))(a, b, c)
        assert d.shape == (n,) and e.shape == (n, 3) and f.shape == (n, 2, 2)


def test_vmap_snippets():
    """vmap_method at creation and per call, the basic vmap, the in-out rowsum, the table lookup."""
    jax_callback = jax_kernel(add_kernel, vmap_method="sequential")
    a = jnp.arange(3 * 4, dtype=jnp.float32).reshape((3, 4))
    b = jnp.ones(3 * 4, dtype=jnp.float32).reshape((3, 4))

    @jax.jit
    def f(a, c):
        (x,) = jax.vmap(jax_callback)(a, a)  # uses "sequential"
        (y,) = jax.vmap(lambda c: jax_callback(c, c, vmap_method="expand_dims"))(c)  # uses "expand_dims"
        return x, y

    x, y = f(a, b)
    np.testing.assert_allclose(x, 2 * np.asarray(a))
    np.testing.assert_allclose(y, 2 * np.asarray(b))

    jax_add = jax_kernel(add_kernel)
    (output,) = jax.jit(jax.vmap(jax_add))(a, b)
    np.testing.assert_allclose(output, np.asarray(a) + 1)

    jax_rowsum = jax_kernel(rowsum_kernel, in_out_argnames=["sums"])
    matrices = jnp.arange(2 * 3 * 4, dtype=jnp.float32).reshape((2, 3, 4))
    m = np.asarray(matrices)
    sums = jnp.zeros((2, 3), dtype=jnp.float32)
    (output,) = jax.jit(jax.vmap(jax_rowsum, in_axes=(0, 0)))(matrices, sums)
    np.testing.assert_allclose(output, m.sum(2))
    sums = jnp.zeros((3, 2), dtype=jnp.float32)
    (output,) = jax.jit(jax.vmap(jax_rowsum, in_axes=(1, 0)))(matrices, sums)
    np.testing.assert_allclose(output, m.sum(2).T)
    sums = jnp.zeros((4, 2), dtype=jnp.float32)
    (output,) = jax.jit(jax.vmap(jax_rowsum, in_axes=(2, 0)))(matrices, sums)
    np.testing.assert_allclose(output, m.sum(1).T)

    jax_lookup = jax_kernel(lookup_kernel)
    N = 100
    table = jnp.arange(N, dtype=jnp.float32)
    key = jax.random.key(42)
    indices = jax.random.randint(key, (20, 50), 0, N, dtype=jnp.int32)
    (output,) = jax.jit(jax.vmap(partial(jax_lookup, launch_dims=50), in_axes=(None, 0)))(
        table, indices
    )
    np.testing.assert_allclose(output, np.asarray(indices))
    (output,) = jax.jit(jax.vmap(partial(jax_lookup, launch_dims=20), in_axes=(None, 1)))(
        table, indices
    )
    np.testing.assert_allclose(output, np.asarray(indices).T)


def test_automatic_differentiation_snippets():
    """The three autodiff examples, checked against jax.numpy's gradients of the same functions."""
    jax_scale = jax_kernel(scale_sum_square, num_outputs=1, enable_backward=True)

    @partial(jax.jit, static_argnames=["s"])
    def loss(a, b, s):
        (out,) = jax_scale(a, b, s)
        return jnp.sum(out)

    n = 16
    a = jnp.arange(n, dtype=jnp.float32)
    b = jnp.ones(n, dtype=jnp.float32)
    s = 2.0
    da, db = jax.grad(loss, argnums=(0, 1))(a, b, s)
    ra, rb = jax.grad(lambda a, b: jnp.sum((a * s + b) ** 2), argnums=(0, 1))(a, b)
    np.testing.assert_allclose(da, ra, rtol=1e-6)
    np.testing.assert_allclose(db, rb, rtol=1e-6)

    jax_multi = jax_kernel(multi_output, num_outputs=2, enable_backward=True)

    def caller(fn, a, b, s):
        c, d = fn(a, b, s)
        return jnp.sum(c + d)

    da, db = jax.grad(lambda a, b, s: caller(jax_multi, a, b, s), argnums=(0, 1))(a, b, s)
    ra, rb = jax.grad(lambda a, b: jnp.sum(a ** 2 + a * b * s), argnums=(0, 1))(a, b)
    np.testing.assert_allclose(da, ra, rtol=1e-6)
    np.testing.assert_allclose(db, rb, rtol=1e-6)

    jax_vec = jax_kernel(scale_vec2, num_outputs=1, enable_backward=True)

    @partial(jax.jit, static_argnames=["s"])
    def vec_loss(a, s):
        (out,) = jax_vec(a, s)
        return jnp.sum(out)

    a2 = jnp.arange(10, dtype=jnp.float32).reshape((5, 2))  # vec2 payload shape
    (da2,) = jax.grad(vec_loss, argnums=(0,))(a2, 3.0)
    np.testing.assert_allclose(da2, np.full((5, 2), 3.0))


# The Python function to call.
# Note the argument type annotations, just like Warp kernels.
def example_func(
    # inputs
    a: wp.array[float],
    b: wp.array[wp.vec2],
    s: float,
    # outputs
    c: wp.array[float],
    d: wp.array[wp.vec2],
):
    # launch multiple kernels
    wp.launch(scale_kernel, dim=a.shape, inputs=[a, s], outputs=[c])
    wp.launch(scale_vec_kernel, dim=b.shape, inputs=[b, s], outputs=[d])


def test_jax_callable_snippet():
    """example_func launches two kernels through jax_callable with per-output dims."""
    jax_func = jax_callable(example_func, num_outputs=2)

    @jax.jit
    def f():
        # inputs
        a = jnp.arange(10, dtype=jnp.float32)
        b = jnp.arange(10, dtype=jnp.float32).reshape((5, 2))  # wp.vec2
        s = 2.0
        # output shapes
        output_dims = {"c": a.shape, "d": b.shape}
        c, d = jax_func(a, b, s, output_dims=output_dims)
        return c, d

    r1, r2 = f()
    np.testing.assert_allclose(r1, np.arange(10) * 2)
    np.testing.assert_allclose(r2, np.arange(10).reshape(5, 2) * 2)


# the Python function to call
def warp_func(inputs, outputs, attrs, ctx):
    # input arrays
    a = inputs[0]
    b = inputs[1]

    # scalar attributes
    s = attrs["scale"]

    # output arrays
    c = outputs[0]
    d = outputs[1]

    device = wp.device_from_jax(jax.local_devices()[0])
    stream = wp.Stream(device, cuda_stream=ctx.stream)

    with wp.ScopedStream(stream):
        # launch with arrays of scalars
        wp.launch(scale_kernel, dim=a.shape, inputs=[a, s], outputs=[c])

        # launch with arrays of vec2
        # NOTE: the input shapes are from JAX arrays, so we need to strip the inner dimension for vec2 arrays
        wp.launch(scale_vec_kernel, dim=b.shape[0], inputs=[b, s], outputs=[d])


def test_register_ffi_callback_snippet():
    """warp_func registered as an FFI target and called through jax.ffi.ffi_call with a scale attribute."""
    register_ffi_callback("warp_func", warp_func)
    n = 10
    a = jnp.arange(n, dtype=jnp.float32)
    b = jnp.arange(n, dtype=jnp.float32).reshape((n // 2, 2))  # array of wp.vec2
    s = 2.0
    out_types = [
        jax.ShapeDtypeStruct(a.shape, jnp.float32),
        jax.ShapeDtypeStruct(b.shape, jnp.float32),  # array of wp.vec2
    ]
    call = jax.ffi.ffi_call("warp_func", out_types)
    c, d = call(a, b, scale=s)
    np.testing.assert_allclose(c, np.arange(n) * 2)
    np.testing.assert_allclose(d, np.arange(n).reshape(5, 2) * 2)


DISTRIBUTED_PROGRAM = """
import loomwork as wp
import jax
import jax.numpy as jnp
from jax.sharding import PartitionSpec as P
from functools import partial
from jax.experimental.multihost_utils import process_allgather
allgather = partial(process_allgather, tiled=True)  # JAX 0.10 gathers global arrays tiled
from jax.experimental.shard_map import shard_map
from loomwork.jax_experimental import jax_kernel
import numpy as np

# Initialize JAX distributed environment
jax.distributed.initialize()
num_gpus = jax.device_count()

def print_on_process_0(*args, **kwargs):
    if jax.process_index() == 0:
        print(*args, **kwargs)

print_on_process_0(f"Running on {num_gpus} GPU(s)")

@wp.kernel
def multiply_by_two_kernel(
    a_in: wp.array[float],
    a_out: wp.array[float],
):
    index = wp.tid()
    a_out[index] = a_in[index] * 2.0

jax_warp_multiply = jax_kernel(multiply_by_two_kernel)

def warp_multiply(x):
    result = jax_warp_multiply(x)
    return result

    # a_in here is the full sharded array with shape (M,)
    # The output will also be a sharded array with shape (M,)
def warp_distributed_operator(a_in):
    def _sharded_operator(a_in):
        # Inside the sharded operator, a_in is a local shard on each device
        # If we have N devices and input size M, each shard has shape (M/N,)

        # warp_multiply applies the Warp kernel to the local shard
        result = warp_multiply(a_in)[0]

        # result has the same shape as the input shard (M/N,)
        return result

    # shard_map distributes the computation across devices
    return shard_map(
        _sharded_operator,
        mesh=jax.sharding.Mesh(np.array(jax.devices()), "x"),
        in_specs=(P("x"),),  # Input is sharded along the 'x' axis
        out_specs=P("x"),    # Output is also sharded along the 'x' axis
        check_rep=False,
    )(a_in)

print_on_process_0("Test distributed multiplication using JAX + Warp")

devices = jax.devices()
mesh = jax.sharding.Mesh(np.array(devices), "x")
sharding_spec = jax.sharding.NamedSharding(mesh, P("x"))

input_size = num_gpus * 5  # 5 elements per device
single_device_arrays = jnp.arange(input_size, dtype=jnp.float32)

# Define the shape of the input array based on the total input size
shape = (input_size,)

# Create a list of arrays by distributing the single_device_arrays across the available devices
# Each device will receive a portion of the input data
arrays = [
    jax.device_put(single_device_arrays[index], d)  # Place each element on the corresponding device
    for d, index in sharding_spec.addressable_devices_indices_map(shape).items()
]

# Combine the individual device arrays into a single sharded array
sharded_array = jax.make_array_from_single_device_arrays(shape, sharding_spec, arrays)

# sharded_array has shape (input_size,) but is distributed across devices
print_on_process_0(f"Input array: {allgather(sharded_array)}")

# warp_result has the same shape and sharding as sharded_array
warp_result = warp_distributed_operator(sharded_array)

# allgather collects results from all devices, resulting in a full array of shape (input_size,)
print_on_process_0("Warp Output:", allgather(warp_result))
"""


def _free_ompi_port() -> int:
    """A free port among those Open MPI's job ids map to (JAX derives the coordinator's port from the job id)."""
    for _ in range(100):
        port = random.randint(61440, 65535)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
                return port
            except OSError:
                continue
    pytest.skip("no free port for the coordinator")


def test_distributed_shard_map_program_as_two_processes(tmp_path):
    """The document's distributed program, verbatim but for JAX 0.10's tiled=True in process_allgather, as 2
    processes of 2 CPU devices (the environment `mpirun -np 2` sets); process 0 prints the doubled input."""
    script = tmp_path / "distributed.py"
    script.write_text(DISTRIBUTED_PROGRAM)
    job = (_free_ompi_port() - 61440) * 4096
    procs = []
    for rank in range(2):
        env = {**os.environ, "OMPI_MCA_orte_hnp_uri": f"{job}.0;tcp://127.0.0.1:1", "OMPI_COMM_WORLD_SIZE": "2",
               "OMPI_COMM_WORLD_RANK": str(rank), "OMPI_COMM_WORLD_LOCAL_RANK": str(rank), "JAX_PLATFORMS": "cpu",
               "XLA_FLAGS": "--xla_force_host_platform_device_count=2"}
        procs.append(subprocess.Popen([sys.executable, str(script)], env=env, stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, text=True, cwd=ROOT))
    outs = []
    for p in procs:
        try:
            outs.append(p.communicate(timeout=300))
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            raise
    for p, (_, err) in zip(procs, outs, strict=True):
        assert p.returncode == 0, err[-3000:]
    out0 = outs[0][0]
    assert "Running on 4 GPU(s)" in out0
    result = out0[out0.index("Warp Output:") + len("Warp Output:"):]
    np.testing.assert_allclose(np.array(result.strip(" []\n").split(), dtype=float), np.arange(20) * 2)
