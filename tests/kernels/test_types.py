"""Host-side behaviour of scalar, vector and matrix types."""

import numpy as np
import pytest

import loomwork as wp


def test_python_types_map_to_warp_defaults():
    """Python float/int/bool mean float32/int32/bool, as in Warp."""
    from loomwork.kernels.types import scalar_type

    assert scalar_type(float) is wp.float32
    assert scalar_type(int) is wp.int32
    assert scalar_type(bool) is wp.bool
    assert scalar_type(np.float64) is wp.float64


@pytest.mark.parametrize("t", [wp.int8, wp.uint8, wp.int16, wp.uint16, wp.int32, wp.uint32, wp.int64,
                               wp.uint64, wp.float16, wp.float32, wp.float64, wp.bool])
def test_dtype_numpy_round_trip(t):
    """dtype_to_numpy and dtype_from_numpy are inverses for every scalar type."""
    assert wp.dtype_from_numpy(wp.dtype_to_numpy(t)) is t


def test_dtype_from_numpy_rejects_unknown():
    """A NumPy dtype without an equivalent raises TypeError."""
    with pytest.raises(TypeError, match="no loomwork equivalent"):
        wp.dtype_from_numpy(np.complex64)


def test_scalar_instances_hold_converted_values():
    """wp.float32(x).value rounds to float32; integer types wrap like NumPy."""
    assert wp.float32(0.1).value == float(np.float32(0.1))
    assert wp.int8(130).value == -126
    assert float(wp.float16(1.0 / 3.0)) == float(np.float16(1.0 / 3.0))


def test_vector_construction_and_access():
    """Vectors build from components, a scalar, a sequence; support .x/.y/.z and indexing."""
    v = wp.vec3(1.0, 2.0, 3.0)
    assert (v.x, v.y, v.z) == (1.0, 2.0, 3.0)
    assert wp.vec3(2.0) == wp.vec3(2.0, 2.0, 2.0)
    assert wp.vec3([4, 5, 6])[2] == 6.0
    assert wp.vec3() == wp.vec3(0.0, 0.0, 0.0)
    v.y = 7.0
    assert v[1] == 7.0
    with pytest.raises(ValueError, match="expected 3 elements, got 2"):
        wp.vec3(1.0, 2.0)
    with pytest.raises(IndexError):
        v[3]


def test_vector_arithmetic_matches_numpy():
    """Host-side + - * / on vectors agree with NumPy."""
    a, b = wp.vec3(1.0, 2.0, 3.0), wp.vec3(0.5, -1.0, 4.0)
    np.testing.assert_allclose(np.array(a + b), np.array([1.5, 1.0, 7.0]))
    np.testing.assert_allclose(np.array(a - b), np.array([0.5, 3.0, -1.0]))
    np.testing.assert_allclose(np.array(a * 2.0), np.array([2.0, 4.0, 6.0]))
    np.testing.assert_allclose(np.array(2.0 * a), np.array([2.0, 4.0, 6.0]))
    np.testing.assert_allclose(np.array(a / 2.0), np.array([0.5, 1.0, 1.5]))
    np.testing.assert_allclose(np.array(-a), -np.array([1.0, 2.0, 3.0]))


def test_matrix_rows_elements_and_product():
    """m[i, j] is an element, m[i] a row; @ is the matrix product."""
    m = wp.mat22(1.0, 2.0, 3.0, 4.0)
    assert m[0, 1] == 2.0
    assert m[1] == wp.vec2(3.0, 4.0)
    m[1, 0] = 5.0
    assert m[1, 0] == 5.0
    np.testing.assert_allclose(np.array(m @ wp.vec2(1.0, 1.0)), [3.0, 9.0])


def test_vector_factory_is_cached():
    """wp.types.vector(3, float32) is the very class wp.vec3."""
    assert wp.types.vector(length=3, dtype=wp.float32) is wp.vec3
    assert wp.types.matrix(shape=(3, 3), dtype=wp.float64) is wp.mat33d
    assert wp.types.vector(2, wp.float64) is wp.vec2d


def test_layouts_match_native_sizes():
    """Vector and matrix values occupy exactly their components (no padding)."""
    import ctypes

    assert ctypes.sizeof(wp.vec3) == 12
    assert ctypes.sizeof(wp.mat44d) == 128
    assert ctypes.sizeof(wp.vec3h) == 6


def test_constant_accepts_values_only():
    """wp.constant returns scalar, vector and struct values and rejects other objects, naming their type."""
    assert wp.constant(3) == 3
    assert wp.constant(wp.vec2(1.0, 2.0)) == wp.vec2(1.0, 2.0)

    @wp.struct
    class Held:
        x: float

    held = Held()
    assert wp.constant(held) is held
    with pytest.raises(TypeError, match="Invalid constant type: <class 'list'>"):
        wp.constant([1, 2])


def test_builtins_evaluate_in_python_scope():
    """Math builtins called outside kernels evaluate with NumPy semantics."""
    assert wp.sqrt(4.0) == 2.0
    assert wp.length(wp.vec3(3.0, 4.0, 0.0)) == pytest.approx(5.0)
    assert wp.normalize(wp.vec2(3.0, 4.0)) == wp.vec2(0.6, 0.8)
    with pytest.raises(TypeError, match="kernel builtin"):
        wp.tid()


def test_python_scope_scalar_arithmetic_keeps_the_type():
    """wp.float32(2) * 3.0 is a float32 (rounded like one); integers wrap and divide like in kernels."""
    a = wp.float32(2.0)
    assert a * 3.0 == 6.0 and isinstance(a * 3.0, wp.float32) and isinstance(1.0 - a, wp.float32)
    assert (wp.float32(1.0) / 3.0).value == float(np.float32(1.0) / np.float32(3.0))
    assert np.isinf((wp.float32(1e20) * wp.float32(1e20)).value) and np.isnan((wp.float32(0.0) / 0.0).value)
    assert wp.int8(100) * 3 == 44 and wp.int32(7) // 2 == 3 and wp.int32(7) // 0 == 0 and wp.int32(7) / 2 == 3.5
    assert -wp.float16(1.5) == -1.5 and abs(wp.int32(-4)) == 4 and wp.float64(2.0) < 3
    assert wp.int32(-7) % 2 == -1 and wp.int32(7) % -2 == 1 and wp.int32(-7) // 2 == -4
    for t, lo in ((wp.int32, -(2**31)), (wp.int64, -(2**63))):  # MIN // -1 wraps to MIN, MIN % -1 is 0
        assert t(lo) // t(-1) == lo and t(lo) % t(-1) == 0
    with pytest.raises(TypeError, match="convert one first"):
        wp.float32(1.0) + wp.float64(1.0)


def test_rotation_helpers_run_in_python_scope():
    q = wp.quat_from_euler(wp.vec3(0.1, 0.2, 0.3), 0, 1, 2)
    np.testing.assert_allclose(wp.quat_to_euler(q, 0, 1, 2).numpy_value(), [0.1, 0.2, 0.3], atol=1e-6)
    assert np.isnan(wp.quat_to_euler(q, 0, 0, 2).numpy_value()).all()
    twist = wp.spatial_vector(1.0, 2.0, 3.0, 4.0, 5.0, 6.0)
    assert wp.velocity_at_point(twist, wp.vec3(1.0, 0.0, 0.0)) == wp.vec3(4, 8, 4)


def test_python_scope_slices_and_operators_of_values():
    """Vectors and matrices take slices in Python scope (read and write), unary +, and a matrix key that is
    neither an int nor a pair is a KeyError; integer scalars expose their ctypes type as `_type_`."""
    v = wp.vec4(1.0, 2.0, 3.0, 4.0)
    v[1:3] = (-2.0, -3.0)
    assert list(v[0:2]) == [1.0, -2.0] and str(+v) == "[1.0, -2.0, -3.0, 4.0]"
    with pytest.raises(ValueError, match="same size: 2 components"):
        v[1:3] = (1.0, 2.0, 3.0)
    m = wp.mat33(*range(9))
    assert isinstance(m[0:2], wp.types.matrix((2, 3), float)) and list(m[:, 1]) == [1.0, 4.0, 7.0]
    m[0:2, 0] = (7.0, 8.0)
    assert m[1, 0] == 8.0 and m[2, 0] == 6.0
    with pytest.raises(KeyError, match="expected int or pair of ints"):
        m[None]
    with pytest.raises(KeyError, match="one or two indices, got 3"):
        m[0, 1, 2]
    assert wp.uint8._type_(300).value == 44 and +wp.int16(3) == 3 and float(wp.float32(2) ** 3) == 8.0
    with pytest.raises(TypeError, match="float scalars"):
        wp.int32(2) ** 2


def test_scalar_index_and_value_from_pointer():
    """Integer scalars convert where Python needs an int (`__index__`: ctypes, range); `vec3.from_ptr(address)`
    copies a value from host memory and refuses a null address; a vector key that is not an int or slice is a
    KeyError."""
    import ctypes

    assert ctypes.c_int(wp.int16(5)).value == 5 and list(range(wp.uint8(3))) == [0, 1, 2]
    with pytest.raises(TypeError):
        ctypes.c_int(wp.float32(1.0))
    v = wp.vec3(1.0, 2.0, 3.0)
    assert wp.vec3.from_ptr(ctypes.addressof(v)) == v
    with pytest.raises(RuntimeError, match="NULL pointer"):
        wp.vec3.from_ptr(0)
    with pytest.raises(KeyError, match="expected int or slice"):
        v[None]


@pytest.mark.parametrize("dtype", [wp.float16, wp.float32, wp.float64, wp.int16])
def test_host_matrix_vector_products(dtype):
    """Host-side m * v, m @ v, v * m, v @ m and m * m are matrix products (NumPy's), m * s componentwise."""
    m_np, v_np = np.array([[2.0, 4.0], [6.0, 8.0]]), np.array([1.0, 2.0])
    m, v = wp.types.matrix((2, 2), dtype)(m_np), wp.types.vector(2, dtype)(v_np)
    for got, want in ((m * v, m_np @ v_np), (m @ v, m_np @ v_np), (v * m, v_np @ m_np), (v @ m, v_np @ m_np),
                      (m * m, m_np @ m_np), (m * dtype(2), m_np * 2), (dtype(2) * m, m_np * 2)):
        np.testing.assert_array_equal(got.numpy_value(), want)
    assert type(m * v) is type(v) and type(m * m) is type(m)


def test_host_copy_of_half_vectors_keeps_values():
    """Constructing a float16 vector or matrix from another copies values, not the raw half bits."""
    v = wp.vec3h(2.0, 4.0, 6.0)
    c = wp.vec3h(v)
    c[0] = 123.0
    assert list(v) == [2.0, 4.0, 6.0] and list(c) == [123.0, 4.0, 6.0]
    assert list(wp.mat22h([wp.vec2h(1.0, 2.0), wp.vec2h(3.0, 4.0)])[1]) == [3.0, 4.0]


def test_host_rows_columns_and_bad_assignments():
    """get/set_row and get/set_col read and write one row or column; bad keys, values and sizes raise."""
    m = wp.mat22(1.0, 2.0, 3.0, 4.0)
    m.set_row(1, (5.0, 6.0))
    m.set_col(0, wp.vec2(7.0, 8.0))
    assert m == wp.mat22(7.0, 2.0, 8.0, 6.0)
    assert list(m.get_row(0)) == [7.0, 2.0] and list(m.get_col(1)) == [2.0, 6.0]
    with pytest.raises(IndexError, match="Invalid row index"):
        m.set_row(2, (0.0, 0.0))
    with pytest.raises(TypeError, match="expected row of length 2"):
        wp.mat22((1, 2, 3), (3, 4, 5))
    v = wp.vec3i(1, 2, 3)
    with pytest.raises(KeyError, match="expected int or slice"):
        v[None] = 0
    with pytest.raises(TypeError, match="a `int32` value but got `str`"):
        v[0] = "1"
    with pytest.raises(TypeError, match="sequence of `int32` values but got `vec3i`"):
        v[:1] = (v,)
    with pytest.raises(ValueError, match="same size"):
        v[:1] = (1, 2)


def test_transform_parts_by_keyword_and_assignment():
    """As in Warp 1.19: transform(p=..., q=...) with p defaulting to zero and q to the identity, transform(p), and
    t.p / t.q assignable; unknown or repeated parts are TypeErrors."""
    t = wp.transform(p=(1.0, 2.0, 3.0), q=(0.0, 0.0, 0.6, 0.8))
    np.testing.assert_allclose(t, [1, 2, 3, 0, 0, 0.6, 0.8], rtol=1e-6)
    np.testing.assert_array_equal(wp.transform(p=wp.vec3(1.0, 2.0, 3.0)), [1, 2, 3, 0, 0, 0, 1])
    np.testing.assert_array_equal(wp.transformd(q=wp.quatd(0.0, 1.0, 0.0, 0.0)), [0, 0, 0, 0, 1, 0, 0])
    np.testing.assert_array_equal(wp.transform(wp.vec3(4.0, 5.0, 6.0)), [4, 5, 6, 0, 0, 0, 1])
    np.testing.assert_array_equal(wp.transform(*range(7)), range(7))
    t.p = wp.vec3(9.0, 8.0, 7.0)
    t.q = (0.0, 1.0, 0.0, 0.0)
    np.testing.assert_array_equal(t, [9, 8, 7, 0, 1, 0, 0])
    assert list(t.p) == [9, 8, 7] and list(t.q) == [0, 1, 0, 0]
    for args, kwargs, words in (((), {"r": (0, 0, 0, 1)}, "unexpected keyword argument 'r'"),
                                (((1.0, 2.0, 3.0),), {"p": (1.0, 2.0, 3.0)}, "multiple values for argument 'p'")):
        with pytest.raises(TypeError, match=words):  # Warp's words
            wp.transform(*args, **kwargs)


def test_missing_swizzle_components_are_attribute_errors():
    """v.z on a vec2 is an AttributeError (so hasattr and getattr with a default work), reading and writing."""
    v = wp.vec2(1.0, 2.0)
    assert v.y == 2.0 and not hasattr(v, "z") and not hasattr(v, "w") and getattr(v, "z", None) is None
    with pytest.raises(AttributeError, match="vec2f has 2 components, so 'vec2f' object has no attribute 'w'"):
        v.w = 1.0
    assert hasattr(wp.vec4(), "w") and hasattr(wp.quat(), "w")


def test_missing_vector_components_and_swizzles_are_attribute_errors():
    """In Python, a vec2 has no z or w, and swizzle names cannot be assigned (Warp's 'no attribute' errors);
    other attributes can still be set on the object."""
    import re

    v2, v3 = wp.vec2(1.0, 2.0), wp.vec3(1.0, 2.0, 3.0)
    for name in ("z", "w"):
        with pytest.raises(AttributeError, match=re.escape(f"vec2f has 2 components, so 'vec2f' object has no "
                                                           f"attribute '{name}'") + "$"):
            getattr(v2, name)
        with pytest.raises(AttributeError, match=f"no attribute '{name}'$"):
            setattr(v2, name, 9.0)
    for name in ("xy", "zw", "xyzw"):
        with pytest.raises(AttributeError, match=f"no attribute '{name}'$"):
            setattr(v3, name, 9.0)
    v3.foo = 9
    assert v3.foo == 9 and list(v3) == [1.0, 2.0, 3.0] and not hasattr(v2, "w")


def test_scalar_types_are_numpy_dtypes_and_composites_name_their_kind():
    """np.dtype(wp.float32) is float32 (also for a value and a subclass), so NumPy arrays can be made with Warp
    dtypes; vector, matrix, quaternion and transform types carry Warp's name of their kind."""
    class Sub(wp.float32):
        pass

    assert np.dtype(wp.float32) == np.float32 and np.dtype(wp.int8(3)) == np.int8 and np.dtype(Sub) == np.float32
    assert np.zeros(2, dtype=wp.uint16).dtype == np.uint16 and np.dtype(wp.float16) == np.float16
    kinds = [t._wp_generic_type_str_ for t in (wp.vec2l, wp.mat22d, wp.quatf, wp.transformd, wp.spatial_vector)]
    assert kinds == ["vec_t", "mat_t", "quat_t", "transform_t", "vec_t"]


def test_empty_slices_of_composites_compare_equal():
    """In Python scope, as in kernels, slices with no elements are equal whatever their shapes."""
    m = wp.mat44(*range(16))
    assert m[123:] == wp.types.matrix((0, 0), float)() and m[:, 9:] == m[5:]
    assert not m[1:] == m[:3] and m[:2] == wp.matrix_from_rows(wp.vec4(0, 1, 2, 3), wp.vec4(4, 5, 6, 7))


def test_python_scope_operators_need_one_scalar_type():
    """Two composite values of different scalar types have no operator in Python scope, as in kernels: the
    error names the operation and both types (numbers mix freely)."""
    with pytest.raises(RuntimeError, match="function 'mul' compatible with the arguments 'mat22f, mat22d'"):
        wp.mat22f(1.0, 2.0, 3.0, 4.0) * wp.mat22d(1.0, 2.0, 3.0, 4.0)
    with pytest.raises(RuntimeError, match="'add' compatible with the arguments 'vec3f, vec3d'"):
        wp.vec3(1.0, 2.0, 3.0) + wp.vec3d(1.0, 2.0, 3.0)
    assert wp.vec3(1.0, 2.0, 3.0) * 2 == wp.vec3(2.0, 4.0, 6.0)
