"""More of the forms Warp programs use, each against an oracle: componentwise builtins on vectors, host-side
operators of vector and matrix values."""

import numpy as np
import pytest

import loomwork as wp


@wp.kernel
def vector_signs(v: wp.array(dtype=wp.vec3), iv: wp.array(dtype=wp.vec2i), out: wp.array(dtype=wp.vec3),
                 iout: wp.array(dtype=wp.vec2i)):
    i = wp.tid()
    out[i] = wp.sign(v[i])
    iout[i] = wp.sign(iv[i])


def test_sign_of_vectors_is_componentwise():
    """wp.sign of a float or int vector is the sign of each component (-1 below zero, else 1), in kernels and
    in Python scope."""
    v = np.array([[-1.5, 0.0, 2.0], [3.0, -0.25, -7.0]], dtype=np.float32)
    iv = np.array([[-3, 0], [5, -1]], dtype=np.int32)
    out, iout = wp.zeros(2, dtype=wp.vec3), wp.zeros(2, dtype=wp.vec2i)
    wp.launch(vector_signs, 2, inputs=[wp.array(v, dtype=wp.vec3), wp.array(iv, dtype=wp.vec2i), out, iout])
    np.testing.assert_array_equal(out.numpy(), np.where(v < 0, -1.0, 1.0))
    np.testing.assert_array_equal(iout.numpy(), np.where(iv < 0, -1, 1))
    assert list(wp.sign(wp.vec3(-2.0, 0.0, 4.0))) == [-1.0, 1.0, 1.0]


@pytest.mark.parametrize("dtype", [wp.float32, wp.float16, wp.int8, wp.uint32])
def test_host_vector_remainder(dtype):
    """Host-side v % w is componentwise with the dividend's sign (C's fmod, as in kernels); % 0 gives 0."""
    vec = wp.types.vector(3, dtype)
    a = [7, 5, 6] if dtype is wp.uint32 else [-7, 5, 6]
    got = vec(*a) % vec(3, 2, 0)
    want = [np.fmod(a[0], 3), 1, 0]
    assert list(got) == want and type(got) is vec
