"""Every differentiable builtin overload: its adjoint agrees with central finite differences (f32 and f64)."""

import os
import zlib

import numpy as np
import pytest

import loomwork as wp
from loomwork.autograd import gradcheck
from loomwork.kernels import builtins as B
from loomwork.kernels.types import from_storage

# input ranges per builtin and argument position, chosen away from kinks and singularities
DOMAINS = {
    "sqrt": [(0.2, 2.0)], "log": [(0.2, 2.0)], "log2": [(0.2, 2.0)], "log10": [(0.2, 2.0)],
    "rsqrt": [(0.2, 2.0)], "cbrt": [(0.2, 2.0)], "asin": [(-0.8, 0.8)], "acos": [(-0.8, 0.8)],
    "pow": [(0.5, 2.0), (0.5, 2.0)], "div": [(-2.0, 2.0), (0.5, 2.0)], "mod": [(0.5, 2.0), (2.5, 3.0)],
    "smoothstep": [(-2.0, -1.5), (1.5, 2.0), (-1.0, 1.0)], "clamp": [(-1.0, 1.0), (-3.0, -2.0), (2.0, 3.0)],
    "atan2": [(0.5, 2.0), (0.5, 2.0)], "tan": [(-1.0, 1.0)], "exp": [(-1.0, 1.0)],
    "frac": [(0.1, 0.9)], "cw_div": [(-2.0, 2.0), (0.5, 2.0)], "erfinv": [(-0.8, 0.8)], "erfcinv": [(0.2, 1.8)],
    "norm_huber": [(-1.0, 1.0), (0.5, 1.5)], "norm_pseudo_huber": [(-1.0, 1.0), (0.5, 2.0)],
    "smooth_normalize": [(-1.0, 1.0), (0.5, 2.0)], "randf": [(0.0, 4e9)], "copysign": [(0.2, 2.0), (-2.0, -0.5)],
}
# decompositions: inputs with well-separated singular values and eigenvalues
SEPARATED = {"svd2": np.diag([2.0, 0.7]), "svd3": np.diag([3.0, 1.5, 0.5]), "qr3": np.diag([3.0, 1.5, 0.5]),
             "eig3": np.diag([3.0, 1.5, 0.0])}


def concrete(pattern, dtype):
    if isinstance(pattern, B.Exact | B.Out):  # in-out parameters here: random states
        return pattern.type
    if isinstance(pattern, B.Quat):
        return wp.quaternion(dtype)
    if isinstance(pattern, B.Transform):
        return wp.transformation(dtype)
    if isinstance(pattern, B.Vec):
        return wp.types.vector(pattern.n if isinstance(pattern.n, int) else 3, dtype)  # n=6: spatial
    if isinstance(pattern, B.Mat):
        return wp.types.matrix((3, 3), dtype)
    return dtype


def cases(dtypes=(wp.float32, wp.float64)):
    out = []
    for name, bi in sorted(B.BUILTINS.items()):
        for k, ov in enumerate(bi.overloads):
            if not ov.differentiable or ov.header is not None:  # extensions' builtins: tested with their types
                continue
            outs = [i for i in ov.outputs if not ov.params[i].inout]  # their values go to the output arrays
            ins = [p for i, p in enumerate(ov.params) if i not in outs]
            if len(ins) > 4:  # the kernel below takes 4 (pnoise 3-D/4-D, curlnoise with octaves: test_noise.py)
                continue
            for dtype in dtypes:
                types = [concrete(p, dtype) for p in ins]
                if dtype not in (wp.float16, wp.bfloat16) and any(
                        getattr(t, "_wp_scalar_type_", t) in (wp.float16, wp.bfloat16) for t in types):
                    continue  # a 16-bit overload: no finite differences in 16 bits (test_half_decompositions)
                if not ins or not all(isinstance(p, B.Quat | B.Transform | B.Exact | B.Value | B.Out) or (
                        isinstance(p, B.Scalar | B.Vec | B.Mat) and p.kind != "int") for p in ins):
                    continue
                it = iter(types)
                b = ov.match([None if i in outs else next(it) for i in range(len(ov.params))])
                if b is None:
                    continue
                # precision from the actual types: float32-only overloads appear once, with f32 tolerances
                prec = wp.float64 if any(getattr(t, "_wp_scalar_type_", t) is wp.float64 for t in types) \
                    else wp.float32
                case = (name, k, prec, types, ov.output_types(b) if outs else ov.ret(b))
                if all(c[:3] != case[:3] for c in out):
                    out.append(case)
    return out


def make_kernel(fn, types, ret, module=None):
    """A kernel applying `fn` elementwise to one array per argument (1 to 4 arguments); for a builtin
    with output parameters (`ret` a tuple of their types), one input and an array per output."""
    if isinstance(ret, tuple):
        return make_output_kernel(fn, types[0], ret, module)
    t = list(types) + [types[0]] * (4 - len(types))
    n = len(types)

    def k(a: wp.array(dtype=t[0]), b: wp.array(dtype=t[1]), c: wp.array(dtype=t[2]), d: wp.array(dtype=t[3]),
          out: wp.array(dtype=ret)):
        i = wp.tid()
        if wp.static(n == 1):
            out[i] = fn(a[i])
        elif wp.static(n == 2):
            out[i] = fn(a[i], b[i])
        elif wp.static(n == 3):
            out[i] = fn(a[i], b[i], c[i])
        else:
            out[i] = fn(a[i], b[i], c[i], d[i])

    return wp.kernel(k, module=module)


def make_output_kernel(fn, t, outs, module=None):
    o0, o1, o2 = list(outs) + [outs[0]] * (3 - len(outs))
    n = len(outs)

    def k(a: wp.array(dtype=t), x: wp.array(dtype=o0), y: wp.array(dtype=o1), z: wp.array(dtype=o2)):
        i = wp.tid()
        u, v, w = o0(), o1(), o2()
        if wp.static(n == 2):
            fn(a[i], u, v)
            x[i] = u
            y[i] = v
        else:
            fn(a[i], u, v, w)
            x[i] = u
            y[i] = v
            z[i] = w

    return wp.kernel(k, module=module)


CASES = cases()
KERNELS = {(name, k, dtype): make_kernel(B.BUILTINS[name], types, ret) for name, k, dtype, types, ret in CASES}
N = 3
SEED = int(os.environ.get("LOOMWORK_TEST_SEED", "0"))  # fixed inputs by default; vary it to stress the table


def random_input(t, lo, hi, rng):
    shape = (N,) + getattr(t, "_shape_", ())
    x = rng.uniform(lo, hi, shape)
    return wp.array(x.astype(wp.dtype_to_numpy(t)), dtype=t)


@pytest.mark.parametrize("name,k,dtype,types,ret", CASES,
                         ids=[f"{c[0]}-{c[1]}-{'f32' if c[2] is wp.float32 else 'f64'}" for c in CASES])
def test_builtin_adjoint_matches_finite_differences(name, k, dtype, types, ret):
    """The adjoint Jacobian of one builtin overload equals the central-difference Jacobian."""
    rng = np.random.default_rng(zlib.crc32(f"{name}-{k}-{SEED}".encode()))
    doms = DOMAINS.get(name, [])
    inputs = []
    for j, t in enumerate(types):
        lo, hi = doms[j] if j < len(doms) else (-1.0, 1.0)
        arr = random_input(t, lo, hi, rng)
        if name in ("min", "max") and j == 1:  # separate the operands so no tie sits within eps
            arr = wp.array(inputs[0].numpy() + np.where(rng.uniform(size=inputs[0].numpy().shape) < 0.5, -0.5, 0.5),
                           dtype=t)
        if name in ("min", "max") and len(types) == 1:  # one vector: components apart, the extreme anywhere
            v = arr.numpy()
            arr = wp.array(v + 0.7 * np.stack([rng.permutation(v.shape[1]) for _ in range(N)]), dtype=t)
        if name in ("abs", "norm_l1"):  # keep away from the kink at 0
            v = arr.numpy()
            arr = wp.array(np.where(np.abs(v) < 0.2, v + 0.5, v), dtype=t)
        if name in ("inverse", "determinant"):  # well-conditioned matrices
            arr = wp.array(arr.numpy() + 3.0 * np.eye(3), dtype=t)
        if name in SEPARATED:
            arr = wp.array(0.3 * arr.numpy() + SEPARATED[name], dtype=t)
        inputs.append(arr)
    inputs += [wp.clone(inputs[0]) for _ in range(4 - len(inputs))]  # unused parameters of the kernel
    if isinstance(ret, tuple):  # a builtin with output parameters: one input, an array per output
        inputs = inputs[:1]
        outs = [wp.zeros(N, dtype=t) for t in ret] + [wp.zeros(N, dtype=ret[0])] * (3 - len(ret))
    else:
        outs = [wp.zeros(N, dtype=ret)]
    f32 = dtype is wp.float32
    gradcheck(KERNELS[name, k, dtype], N, inputs, outs, eps=1e-3 if f32 else 1e-6,
              atol=2e-2 if f32 else 1e-6, rtol=2e-2 if f32 else 1e-5)


def test_the_table_covers_every_differentiable_builtin():
    """Each differentiable builtin name of the kernel layer appears in the gradient table above (extensions'
    builtins, like the mesh queries, are checked against finite differences in their own tests)."""
    names = {b.name for b in B.BUILTINS.values()
             if any(ov.differentiable and ov.header is None for ov in b.overloads)}
    covered = {c[0] for c in CASES}
    assert names - covered == set(), sorted(names - covered)


@wp.kernel
def abs_at_zero(x: wp.array(dtype=float), out: wp.array(dtype=float)):
    i = wp.tid()
    out[i] = wp.abs(x[i])


def test_abs_gradient_at_zero_is_one():
    """The user's FAQ: the gradient of abs at 0 is 1."""
    x = wp.zeros(1, dtype=float, requires_grad=True)
    out = wp.zeros(1, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(abs_at_zero, 1, inputs=[x, out])
    tape.backward(grads={out: np.ones(1, dtype=np.float32)})
    assert x.grad.numpy()[0] == 1.0


@wp.kernel
def roots(x: wp.array(dtype=float), y: wp.array(dtype=float), root: wp.array(dtype=float),
          inv_root: wp.array(dtype=float)):
    i = wp.tid()
    root[i] = wp.sqrt(x[i])
    inv_root[i] = wp.rsqrt(y[i])


@wp.kernel
def nan_only_compared(x: wp.array(dtype=float), out: wp.array(dtype=float)):
    i = wp.tid()
    w = x[i] * wp.log(x[i])  # NaN for x < 0, -inf * 0 at 0: used only by the comparisons
    r = wp.sqrt(x[i]) * 3.0
    if w > 0.0 or r > 100.0:
        out[i] = x[i]
    else:
        out[i] = 2.0 * x[i]


def _gradients(kernel, n_in, values):
    """The gradients of `kernel`'s inputs (n_in arrays holding `values`) with every output seeded with 1."""
    arrays = [wp.array(np.array(values, dtype=np.float32), requires_grad=True) for _ in range(n_in)]
    outs = [wp.zeros(len(values), dtype=float, requires_grad=True) for _ in range(len(kernel.arg_names) - n_in)]
    tape = wp.Tape()
    with tape:
        wp.launch(kernel, len(values), inputs=[*arrays, *outs])
    tape.backward(grads={o: np.ones(len(values), dtype=np.float32) for o in outs})
    return [a.grad.numpy() for a in arrays]


def test_sqrt_gradient_is_infinite_at_zero_and_nan_below():
    """d sqrt(x)/dx and d rsqrt(x)/dx are inf at 0 and NaN below it, as in JAX and PyTorch (they were 0)."""
    d_sqrt, d_rsqrt = _gradients(roots, 2, [-1.0, 0.0, 4.0])
    np.testing.assert_array_equal(d_sqrt, [np.nan, np.inf, 0.25])
    np.testing.assert_array_equal(d_rsqrt, [np.nan, -np.inf, -0.0625])


def test_nan_in_a_value_only_compared_leaves_the_gradient_alone():
    """A NaN or infinite value that only decides a branch contributes nothing to the gradient (no 0 * NaN)."""
    (grad,) = _gradients(nan_only_compared, 1, [-1.0, 0.0, 4.0, 1e-30])
    np.testing.assert_array_equal(grad, [2.0, 2.0, 1.0, 2.0])


def test_every_differentiable_builtin_compiles_for_float16():
    """Each differentiable builtin overload that takes float16 values compiles, forward and adjoint, for them
    (16-bit floats compute through float: a native adjoint that mixes T and float fails to compile)."""
    module = f"{__name__}.float16"
    wp.set_module_options({"mode": "debug"}, module)  # compiled at -O1: only the compiling matters here
    kernels = [make_kernel(B.BUILTINS[name], types, ret, module) for name, _, _, types, ret in cases((wp.float16,))
               if any(getattr(t, "_wp_scalar_type_", t) is wp.float16 for t in types)]
    assert len(kernels) > 50
    loaded = kernels[0].module.load(wp.get_device("cpu"))
    assert all(k.key in loaded.kernels for k in kernels) and loaded.adjoint(kernels[0].key) is not None


def _decomposition_kernel(name, dtype):
    n = 2 if name == "svd2" else 3
    m = wp.types.matrix((n, n), dtype)
    ov = next(ov for ov in B.BUILTINS[name].overloads if ov.params[0].type == m)
    return make_output_kernel(B.BUILTINS[name], m, ov.output_types({}), module=f"{__name__}.half")


DECOMPOSITION_KERNELS = {(name, dtype): _decomposition_kernel(name, dtype) for name in ("svd3", "svd2", "qr3", "eig3")
                         for dtype in (wp.float16, wp.bfloat16, wp.float32)}


@pytest.mark.parametrize("name", ["svd3", "svd2", "qr3", "eig3"])
@pytest.mark.parametrize("half", [wp.float16, wp.bfloat16])
def test_half_decompositions_follow_float32(name, half):
    """A 16-bit decomposition and its adjoint are the float32 ones (checked against finite differences above)
    on the same inputs, rounded to 16 bits."""
    n = 2 if name == "svd2" else 3
    rng = np.random.default_rng(7)
    a = (0.3 * rng.uniform(-1.0, 1.0, (N, n, n)) + SEPARATED[name]).astype(np.float32)
    results = {}
    for dtype in (half, wp.float32):
        kernel = DECOMPOSITION_KERNELS[name, dtype]
        a_dt = wp.array(a, dtype=wp.types.matrix((n, n), dtype), requires_grad=True)
        ret = kernel.arg_types[1:]
        outs = [wp.zeros(N, dtype=t.dtype, requires_grad=True) for t in ret]
        tape = wp.Tape()
        with tape:
            wp.launch(kernel, N, inputs=[a_dt, *outs])
        used = outs[:2] if name in ("qr3", "eig3") else outs
        tape.backward(grads={o: np.ones(o.numpy().shape, dtype=np.float32) for o in used})
        results[dtype] = [from_storage(dtype, o.numpy()).astype(np.float32) for o in [*used, a_dt.grad]]
    tol = 2e-2 if half is wp.bfloat16 else 4e-3
    for got, want in zip(results[half], results[wp.float32], strict=True):
        np.testing.assert_allclose(got, want, atol=tol * max(1.0, np.abs(want).max()), rtol=tol)
