// loomwork native runtime: the types and builtins generated kernels call, for both targets.
// Self-contained (no standard headers) so NVRTC compiles it without a CUDA toolkit and g++ parses
// it in a few milliseconds. Every operation is written once behind LW_FUNC.
#pragma once

#if defined(__CUDACC__)
#define LW_CUDA 1
#define LW_FUNC __host__ __device__ inline
#define LW_DEVICE __device__ inline
#define LW_FORCE_INLINE __device__ __forceinline__
#else
#define LW_CUDA 0
#define LW_FUNC inline __attribute__((always_inline))
#define LW_DEVICE inline
#define LW_FORCE_INLINE inline __attribute__((always_inline))
#define LW_EXPORT extern "C" __attribute__((visibility("default")))
#endif

#if !LW_CUDA
extern "C" int printf(const char* fmt, ...);
extern "C" int fflush(void* stream);
#define LW_FLUSH() fflush(0)
#else
#define LW_FLUSH()
#endif

typedef signed char int8_t;
typedef unsigned char uint8_t;
typedef short int16_t;
typedef unsigned short uint16_t;
typedef int int32_t;
typedef unsigned int uint32_t;
typedef long long int64_t;
typedef unsigned long long uint64_t;

// placement new with a tag of our own (no <new>, and no clash with it): a call's result built in place,
// as generated code does for tiles (`new (&v, lw_slot{}) T(f(...))` elides the copy)
struct lw_slot {};
LW_FUNC void* operator new(decltype(sizeof(0)), void* p, lw_slot) noexcept { return p; }
LW_FUNC void operator delete(void*, void*, lw_slot) noexcept {}

namespace lw {

// ---------------------------------------------------------------------------------------------
// launch bounds and the debug-mode error record (mirrored by kernels/launch.py)

struct error_t {
    int32_t code;   // 0: none, 1: index out of bounds
    int32_t site;   // which indexing site (a table in the Python module maps it to a message)
    int64_t index;
    int64_t extent;
};

struct launch_t {
    int64_t size;     // total threads
    int32_t ndim;
    int32_t dims[4];
    int32_t zero_grads;  // adjoint launches: bit k set: each thread first zeroes its own gradient element of
                         // array parameter k (Tape.backward's fused zeroing, see ir.zeroable_gradients)
    error_t* error;   // debug builds: where this launch reports its first fault (the launching thread's record)
};

// the same bytes read as another type of the same size (wp.cast; compilers turn the loop into a move)
template <typename D, typename S> LW_FUNC D bit_cast(S s) {
    D d;
    const char* from = (const char*)&s;
    char* to = (char*)&d;
    for (unsigned i = 0; i < sizeof(D); ++i) to[i] = from[i];
    return d;
}

// ---------------------------------------------------------------------------------------------
// half precision (storage type; arithmetic goes through float)

struct half {
    uint16_t u;
    half() = default;
    LW_FUNC half(float f) : u(float_to_half(f)) {}
    LW_FUNC half(double f) : u(float_to_half((float)f)) {}
    LW_FUNC half(int32_t i) : u(float_to_half((float)i)) {}
    LW_FUNC operator float() const { return half_to_float(u); }

    static LW_FUNC uint16_t float_to_half(float f) {
#if LW_CUDA && defined(__CUDA_ARCH__)
        unsigned short h;
        asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
        return h;
#elif defined(__F16C__)  // one instruction (round to nearest even), not the branches below inlined at every use
        typedef float v4sf __attribute__((vector_size(16)));
        typedef short v8hi __attribute__((vector_size(16)));
        v8hi h = __builtin_ia32_vcvtps2ph(v4sf{f, 0.0f, 0.0f, 0.0f}, 0);
        return (uint16_t)h[0];
#else
        uint32_t x = __builtin_bit_cast(uint32_t, f);
        uint32_t sign = (x >> 16) & 0x8000u;
        uint32_t absx = x & 0x7fffffffu;
        if (absx >= 0x7f800000u) return (uint16_t)(sign | 0x7c00u | (absx > 0x7f800000u ? 0x200u : 0u));
        if (absx >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u);  // overflow to inf
        if (absx < 0x38800000u) {                                    // subnormal or zero
            float a = __builtin_bit_cast(float, absx) * 16777216.0f;   // scale by 2^24
            uint32_t m = (uint32_t)(a + 0.5f);
            if (a + 0.5f == (float)m && (m & 1u)) m -= 1u;             // ties to even
            return (uint16_t)(sign | m);
        }
        uint32_t mant = absx & 0x7fffffu;
        uint32_t exp = (absx >> 23) - 112u;
        uint32_t h = (exp << 10) | (mant >> 13);
        uint32_t rest = mant & 0x1fffu;
        if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) h += 1u;
        return (uint16_t)(sign | h);
#endif
    }
    static LW_FUNC float half_to_float(uint16_t h) {
#if LW_CUDA && defined(__CUDA_ARCH__)
        float f;
        asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
        return f;
#elif defined(__F16C__)
        typedef float v4sf __attribute__((vector_size(16)));
        typedef short v8hi __attribute__((vector_size(16)));
        v4sf f = __builtin_ia32_vcvtph2ps(v8hi{(short)h, 0, 0, 0, 0, 0, 0, 0});
        return f[0];
#else
        uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
        uint32_t exp = (h >> 10) & 0x1fu;
        uint32_t mant = h & 0x3ffu;
        if (exp == 0) {
            float f = (float)mant * 5.9604644775390625e-08f;  // 2^-24
            return sign ? -f : f;
        }
        uint32_t bits = exp == 31 ? (sign | 0x7f800000u | (mant << 13)) : (sign | ((exp + 112u) << 23) | (mant << 13));
        return __builtin_bit_cast(float, bits);
#endif
    }
};

// bfloat16: the upper half of a float32 (same range, 8 significant bits); storage, arithmetic through float
struct bfloat16 {
    uint16_t u;
    bfloat16() = default;
    LW_FUNC bfloat16(float f) : u(float_to_bf16(f)) {}
    LW_FUNC bfloat16(double f) : u(float_to_bf16((float)f)) {}
    LW_FUNC bfloat16(int32_t i) : u(float_to_bf16((float)i)) {}
    LW_FUNC operator float() const { return bit_cast<float>((uint32_t)u << 16); }

    static LW_FUNC uint16_t float_to_bf16(float f) {
        uint32_t x = bit_cast<uint32_t>(f);
        if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40u);  // NaN stays a quiet NaN
        return (uint16_t)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);                 // round to nearest even
    }
};

// ---------------------------------------------------------------------------------------------
// scalar math: one overload per float type; half and bfloat16 go through float

#if LW_CUDA
#define LW_MATH1(name, ff, fd)                                     \
    LW_FUNC float name(float x) { return ::ff(x); }                \
    LW_FUNC double name(double x) { return ::fd(x); }              \
    LW_FUNC half name(half x) { return half(::ff((float)x)); }     \
    LW_FUNC bfloat16 name(bfloat16 x) { return bfloat16(::ff((float)x)); }
#define LW_MATH2(name, ff, fd)                                                 \
    LW_FUNC float name(float x, float y) { return ::ff(x, y); }                \
    LW_FUNC double name(double x, double y) { return ::fd(x, y); }             \
    LW_FUNC half name(half x, half y) { return half(::ff((float)x, (float)y)); } \
    LW_FUNC bfloat16 name(bfloat16 x, bfloat16 y) { return bfloat16(::ff((float)x, (float)y)); }
#else
#define LW_MATH1(name, ff, fd)                                          \
    LW_FUNC float name(float x) { return __builtin_##ff(x); }           \
    LW_FUNC double name(double x) { return __builtin_##fd(x); }         \
    LW_FUNC half name(half x) { return half(__builtin_##ff((float)x)); } \
    LW_FUNC bfloat16 name(bfloat16 x) { return bfloat16(__builtin_##ff((float)x)); }
#define LW_MATH2(name, ff, fd)                                                      \
    LW_FUNC float name(float x, float y) { return __builtin_##ff(x, y); }           \
    LW_FUNC double name(double x, double y) { return __builtin_##fd(x, y); }        \
    LW_FUNC half name(half x, half y) { return half(__builtin_##ff((float)x, (float)y)); } \
    LW_FUNC bfloat16 name(bfloat16 x, bfloat16 y) { return bfloat16(__builtin_##ff((float)x, (float)y)); }
#endif

LW_MATH1(sqrt, sqrtf, sqrt)
LW_MATH1(sin, sinf, sin)
LW_MATH1(cos, cosf, cos)
LW_MATH1(tan, tanf, tan)
LW_MATH1(asin, asinf, asin)
LW_MATH1(acos, acosf, acos)
LW_MATH1(atan, atanf, atan)
LW_MATH1(sinh, sinhf, sinh)
LW_MATH1(cosh, coshf, cosh)
LW_MATH1(tanh, tanhf, tanh)
LW_MATH1(exp, expf, exp)
LW_MATH1(log, logf, log)
LW_MATH1(log2, log2f, log2)
LW_MATH1(log10, log10f, log10)
LW_MATH1(floor, floorf, floor)
LW_MATH1(ceil, ceilf, ceil)
LW_MATH1(trunc, truncf, trunc)
LW_MATH1(round, roundf, round)
LW_MATH1(cbrt, cbrtf, cbrt)
LW_MATH1(erf, erff, erf)
LW_MATH1(erfc, erfcf, erfc)
LW_MATH2(atan2, atan2f, atan2)
LW_MATH2(pow, powf, pow)
LW_MATH2(fmod, fmodf, fmod)
LW_MATH1(rint, rintf, rint)
LW_MATH2(copysign, copysignf, copysign)

// scalar_only<T, R = T>::type is R for the scalar types and absent otherwise, so the generic scalar
// templates below never compete with the vector and matrix overloads
template <typename T, typename R = T> struct scalar_only {};
#define LW_SCALAR_ONLY(T) template <typename R> struct scalar_only<T, R> { typedef R type; };
LW_SCALAR_ONLY(bool)
LW_SCALAR_ONLY(int8_t)
LW_SCALAR_ONLY(uint8_t)
LW_SCALAR_ONLY(int16_t)
LW_SCALAR_ONLY(uint16_t)
LW_SCALAR_ONLY(int32_t)
LW_SCALAR_ONLY(uint32_t)
LW_SCALAR_ONLY(int64_t)
LW_SCALAR_ONLY(uint64_t)
LW_SCALAR_ONLY(float)
LW_SCALAR_ONLY(double)
LW_SCALAR_ONLY(half)
LW_SCALAR_ONLY(bfloat16)
#undef LW_SCALAR_ONLY

template <typename T> LW_FUNC typename scalar_only<T>::type add(T a, T b) { return T(a + b); }
template <typename T> LW_FUNC typename scalar_only<T>::type sub(T a, T b) { return T(a - b); }
template <typename T> LW_FUNC typename scalar_only<T>::type mul(T a, T b) { return T(a * b); }
LW_FUNC float div(float a, float b) { return a / b; }
LW_FUNC double div(double a, double b) { return a / b; }
// integer division truncates (C semantics, like Warp) and never traps: division by zero gives 0, and the one
// quotient that overflows, MIN / -1, wraps to MIN (remainder 0)
template <typename T> LW_FUNC bool by_minus_one(T b) { return T(-1) < T(0) && b == T(-1); }
template <typename T> LW_FUNC typename scalar_only<T>::type div(T a, T b) {
    if (b == T(0)) return T(0);
    return by_minus_one(b) ? T(0ull - (unsigned long long)a) : T(a / b);
}
template <typename T> LW_FUNC typename scalar_only<T>::type mod(T a, T b) {
    return b == T(0) || by_minus_one(b) ? T(0) : T(a % b);
}
template <typename T> LW_FUNC T floordiv(T a, T b) {
    T q = div(a, b), r = mod(a, b);
    return (r != T(0) && ((r < T(0)) != (b < T(0)))) ? T(q - T(1)) : q;
}
LW_FUNC float floordiv(float a, float b) { return floor(a / b); }
LW_FUNC double floordiv(double a, double b) { return floor(a / b); }
LW_FUNC float mod(float a, float b) { return fmod(a, b); }
LW_FUNC double mod(double a, double b) { return fmod(a, b); }
template <typename T> LW_FUNC typename scalar_only<T>::type neg(T a) { return T(-a); }
template <typename T> LW_FUNC typename scalar_only<T>::type pos(T a) { return a; }
template <typename T> LW_FUNC T bit_and(T a, T b) { return T(a & b); }
template <typename T> LW_FUNC T bit_or(T a, T b) { return T(a | b); }
template <typename T> LW_FUNC T bit_xor(T a, T b) { return T(a ^ b); }
template <typename T> LW_FUNC T lshift(T a, T b) { return T(a << b); }
template <typename T> LW_FUNC T rshift(T a, T b) { return T(a >> b); }
template <typename T> LW_FUNC T invert(T a) { return T(~a); }
LW_FUNC bool invert(bool a) { return !a; }
// the integer's bits in its own width, counted
template <typename T> LW_FUNC int32_t bit_count(T x) {
    uint64_t u = (uint64_t)x;
    if (sizeof(T) < 8) u &= ((uint64_t)1 << (8 * sizeof(T))) - 1u;
#if LW_CUDA
    return __popcll(u);
#else
    return __builtin_popcountll(u);
#endif
}

template <typename T> LW_FUNC typename scalar_only<T, bool>::type lt(T a, T b) { return a < b; }
template <typename T> LW_FUNC typename scalar_only<T, bool>::type le(T a, T b) { return a <= b; }
template <typename T> LW_FUNC typename scalar_only<T, bool>::type gt(T a, T b) { return a > b; }
template <typename T> LW_FUNC typename scalar_only<T, bool>::type ge(T a, T b) { return a >= b; }
template <typename T> LW_FUNC typename scalar_only<T, bool>::type eq(T a, T b) { return a == b; }
template <typename T> LW_FUNC typename scalar_only<T, bool>::type ne(T a, T b) { return a != b; }
template <typename T> LW_FUNC typename scalar_only<T, bool>::type truth(T a) { return a != T(0); }

// min/max ignore a NaN operand (IEEE minNum/maxNum, as Warp's fmin/fmax): NaN only when both are
template <typename T> LW_FUNC typename scalar_only<T>::type min(T a, T b) { return (b < a || a != a) ? b : a; }
template <typename T> LW_FUNC typename scalar_only<T>::type max(T a, T b) { return (a < b || a != a) ? b : a; }
template <typename T> LW_FUNC T clamp(T x, T lo, T hi) { return min(max(x, lo), hi); }
template <typename T> LW_FUNC typename scalar_only<T>::type abs(T a) { return a < T(0) ? T(-a) : a; }
#if LW_CUDA
LW_FUNC float abs(float a) { return ::fabsf(a); }
LW_FUNC double abs(double a) { return ::fabs(a); }
#else
LW_FUNC float abs(float a) { return __builtin_fabsf(a); }
LW_FUNC double abs(double a) { return __builtin_fabs(a); }
#endif
template <typename T> LW_FUNC typename scalar_only<T>::type sign(T a) { return a < T(0) ? T(-1) : T(1); }
template <typename T> LW_FUNC typename scalar_only<T>::type step(T a) { return a < T(0) ? T(1) : T(0); }
template <typename T> LW_FUNC typename scalar_only<T>::type nonzero(T a) { return a == T(0) ? T(0) : T(1); }
template <typename T> LW_FUNC T lerp(T a, T b, T t) { return a + (b - a) * t; }
template <typename T> LW_FUNC T frac(T x) { return x - trunc(x); }
template <typename T> LW_FUNC T rsqrt(T x) { return T(1) / sqrt(x); }
template <typename T> LW_FUNC T degrees(T x) { return x * T(57.29577951308232); }
template <typename T> LW_FUNC T radians(T x) { return x * T(0.017453292519943295); }
template <typename T> LW_FUNC typename scalar_only<T, bool>::type isnan(T x) { return x != x; }
template <typename T> LW_FUNC typename scalar_only<T, bool>::type isinf(T x) { return x == x && (x - x) != (x - x); }
template <typename T> LW_FUNC typename scalar_only<T, bool>::type isfinite(T x) { return (x - x) == (x - x); }
template <typename T> LW_FUNC T smoothstep(T a, T b, T x) {
    T t = clamp(T((x - a) / (b - a)), T(0), T(1));
    return T(t * t * (T(3) - T(2) * t));
}

template <typename To, typename From> LW_FUNC To cast(From x) { return To(x); }

// the operators of a 16-bit float type H (half, bfloat16): computed in float, rounded back to H
#define LW_NARROW_OPS(H)                                                                  \
    LW_FUNC H add(H a, H b) { return H((float)a + (float)b); }                             \
    LW_FUNC H sub(H a, H b) { return H((float)a - (float)b); }                             \
    LW_FUNC H mul(H a, H b) { return H((float)a * (float)b); }                             \
    LW_FUNC H div(H a, H b) { return H((float)a / (float)b); }                             \
    LW_FUNC H floordiv(H a, H b) { return H(floor((float)a / (float)b)); }                 \
    LW_FUNC H mod(H a, H b) { return H(fmod((float)a, (float)b)); }                        \
    LW_FUNC H neg(H a) { H r = a; r.u ^= 0x8000u; return r; }                              \
    LW_FUNC bool lt(H a, H b) { return (float)a < (float)b; }                              \
    LW_FUNC bool le(H a, H b) { return (float)a <= (float)b; }                             \
    LW_FUNC bool gt(H a, H b) { return (float)a > (float)b; }                              \
    LW_FUNC bool ge(H a, H b) { return (float)a >= (float)b; }                             \
    LW_FUNC bool eq(H a, H b) { return (float)a == (float)b; }                             \
    LW_FUNC bool ne(H a, H b) { return (float)a != (float)b; }                             \
    LW_FUNC bool truth(H a) { return (float)a != 0.0f; }                                   \
    LW_FUNC bool unot(H a) { return (float)a == 0.0f; }                                    \
    LW_FUNC H min(H a, H b) { return min((float)a, (float)b) == (float)a ? a : b; }        \
    LW_FUNC H max(H a, H b) { return max((float)a, (float)b) == (float)a ? a : b; }        \
    LW_FUNC H abs(H a) { H r = a; r.u &= 0x7fffu; return r; }                              \
    LW_FUNC H sign(H a) { return H((float)a < 0.0f ? -1.0f : 1.0f); }                      \
    LW_FUNC bool isnan(H x) { return isnan((float)x); }                                    \
    LW_FUNC bool isinf(H x) { return isinf((float)x); }                                    \
    LW_FUNC bool isfinite(H x) { return isfinite((float)x); }                              \
    template <typename To> LW_FUNC To cast(H x) { return To((float)x); }
LW_NARROW_OPS(half)
LW_NARROW_OPS(bfloat16)
#undef LW_NARROW_OPS

// literals that have no C++ spelling (inf, nan) come in as bit patterns
#if LW_CUDA
LW_FUNC float f32_bits(uint32_t u) { return __int_as_float((int)u); }
LW_FUNC double f64_bits(uint64_t u) { return __longlong_as_double((long long)u); }
#else
LW_FUNC float f32_bits(uint32_t u) { return __builtin_bit_cast(float, u); }
LW_FUNC double f64_bits(uint64_t u) { return __builtin_bit_cast(double, u); }
#endif

// ---------------------------------------------------------------------------------------------
// vectors and matrices

template <int N, typename T> struct vec_t {
    T c[N > 0 ? N : 1];  // an empty slice is a vec_t<0, T>: one unused slot, as C++ has no empty arrays
    LW_FUNC T& operator[](int i) { return c[i]; }
    LW_FUNC const T& operator[](int i) const { return c[i]; }
};

template <int R, int C, typename T> struct mat_t {
    T c[R * C > 0 ? R * C : 1];  // row-major, like NumPy (an empty slice keeps one unused slot)
    LW_FUNC T& operator()(int i, int j) { return c[i * C + j]; }
    LW_FUNC const T& operator()(int i, int j) const { return c[i * C + j]; }
};

template <int N, typename T> LW_FUNC vec_t<N, T> vec_fill(T s) {
    vec_t<N, T> r;
    for (int i = 0; i < N; ++i) r.c[i] = s;
    return r;
}
template <typename V, typename... A> LW_FUNC V make(A... a) {
    V r;
    decltype(r.c[0] + r.c[0]) tmp[] = {a...};
    for (int i = 0; i < (int)sizeof...(A); ++i) r.c[i] = tmp[i];
    return r;
}
template <typename V> LW_FUNC V zero() {
    V r;
    for (int i = 0; i < (int)(sizeof(r.c) / sizeof(r.c[0])); ++i) r.c[i] = 0;
    return r;
}
template <typename V, typename S> LW_FUNC V splat(S s) {
    V r;
    for (int i = 0; i < (int)(sizeof(r.c) / sizeof(r.c[0])); ++i) r.c[i] = s;
    return r;
}
template <typename V, typename W> LW_FUNC V convert(const W& w) {
    V r;
    for (int i = 0; i < (int)(sizeof(r.c) / sizeof(r.c[0])); ++i) r.c[i] = decltype(r.c[0] + r.c[0])(w.c[i]);
    return r;
}

#define LW_ELEMWISE2(name)                                                               \
    template <int N, typename T> LW_FUNC vec_t<N, T> name(vec_t<N, T> a, vec_t<N, T> b) { \
        vec_t<N, T> r;                                                                    \
        for (int i = 0; i < N; ++i) r.c[i] = name(a.c[i], b.c[i]);                        \
        return r;                                                                         \
    }                                                                                     \
    template <int R, int C, typename T>                                                   \
    LW_FUNC mat_t<R, C, T> name(mat_t<R, C, T> a, mat_t<R, C, T> b) {                     \
        mat_t<R, C, T> r;                                                                 \
        for (int i = 0; i < R * C; ++i) r.c[i] = name(a.c[i], b.c[i]);                    \
        return r;                                                                         \
    }
LW_ELEMWISE2(add)
LW_ELEMWISE2(sub)
LW_ELEMWISE2(min)
LW_ELEMWISE2(max)

#define LW_ELEMWISE1(name)                                                  \
    template <int N, typename T> LW_FUNC vec_t<N, T> name(vec_t<N, T> a) {  \
        vec_t<N, T> r;                                                      \
        for (int i = 0; i < N; ++i) r.c[i] = name(a.c[i]);                  \
        return r;                                                           \
    }                                                                       \
    template <int R, int C, typename T> LW_FUNC mat_t<R, C, T> name(mat_t<R, C, T> a) { \
        mat_t<R, C, T> r;                                                   \
        for (int i = 0; i < R * C; ++i) r.c[i] = name(a.c[i]);              \
        return r;                                                           \
    }
LW_ELEMWISE1(neg)
LW_ELEMWISE1(abs)
LW_ELEMWISE1(pos)
LW_ELEMWISE1(sign)

template <int N, typename T> LW_FUNC vec_t<N, T> mul(vec_t<N, T> a, T s) {
    vec_t<N, T> r;
    for (int i = 0; i < N; ++i) r.c[i] = mul(a.c[i], s);
    return r;
}
template <int N, typename T> LW_FUNC vec_t<N, T> mul(T s, vec_t<N, T> a) { return mul(a, s); }
template <int N, typename T> LW_FUNC vec_t<N, T> div(vec_t<N, T> a, T s) {
    vec_t<N, T> r;
    for (int i = 0; i < N; ++i) r.c[i] = div(a.c[i], s);
    return r;
}
template <int N, typename T> LW_FUNC vec_t<N, T> div(T s, vec_t<N, T> a) {
    vec_t<N, T> r;
    for (int i = 0; i < N; ++i) r.c[i] = div(s, a.c[i]);
    return r;
}
template <int N, typename T> LW_FUNC vec_t<N, T> cw_mul(vec_t<N, T> a, vec_t<N, T> b) {
    vec_t<N, T> r;
    for (int i = 0; i < N; ++i) r.c[i] = mul(a.c[i], b.c[i]);
    return r;
}
template <int N, typename T> LW_FUNC vec_t<N, T> cw_div(vec_t<N, T> a, vec_t<N, T> b) {
    vec_t<N, T> r;
    for (int i = 0; i < N; ++i) r.c[i] = div(a.c[i], b.c[i]);
    return r;
}
// bit operators and % componentwise on integer (and, for %, float) vectors and matrices
LW_ELEMWISE2(bit_and)
LW_ELEMWISE2(bit_or)
LW_ELEMWISE2(bit_xor)
LW_ELEMWISE2(lshift)
LW_ELEMWISE2(rshift)
LW_ELEMWISE2(mod)
LW_ELEMWISE1(invert)
template <int R, int C, typename T> LW_FUNC mat_t<R, C, T> cw_mul(mat_t<R, C, T> a, mat_t<R, C, T> b) {
    mat_t<R, C, T> r;
    for (int i = 0; i < R * C; ++i) r.c[i] = mul(a.c[i], b.c[i]);
    return r;
}
template <int R, int C, typename T> LW_FUNC mat_t<R, C, T> cw_div(mat_t<R, C, T> a, mat_t<R, C, T> b) {
    mat_t<R, C, T> r;
    for (int i = 0; i < R * C; ++i) r.c[i] = div(a.c[i], b.c[i]);
    return r;
}
template <int R, int C, typename T> LW_FUNC mat_t<R, C, T> mul(mat_t<R, C, T> a, T s) {
    mat_t<R, C, T> r;
    for (int i = 0; i < R * C; ++i) r.c[i] = mul(a.c[i], s);
    return r;
}
template <int R, int C, typename T> LW_FUNC mat_t<R, C, T> mul(T s, mat_t<R, C, T> a) { return mul(a, s); }
template <int R, int C, typename T> LW_FUNC mat_t<R, C, T> div(mat_t<R, C, T> a, T s) {
    mat_t<R, C, T> r;
    for (int i = 0; i < R * C; ++i) r.c[i] = div(a.c[i], s);
    return r;
}
template <int R, int C, typename T> LW_FUNC mat_t<R, C, T> div(T s, mat_t<R, C, T> a) {
    mat_t<R, C, T> r;
    for (int i = 0; i < R * C; ++i) r.c[i] = div(s, a.c[i]);
    return r;
}
template <int R, int C, typename T> LW_FUNC vec_t<R, T> mul(mat_t<R, C, T> m, vec_t<C, T> v) {
    vec_t<R, T> r;
    for (int i = 0; i < R; ++i) {
        T s = T(0);
        for (int j = 0; j < C; ++j) s = add(s, mul(m.c[i * C + j], v.c[j]));
        r.c[i] = s;
    }
    return r;
}
template <int R, int C, typename T> LW_FUNC vec_t<C, T> mul(vec_t<R, T> v, mat_t<R, C, T> m) {
    vec_t<C, T> r;
    for (int j = 0; j < C; ++j) {
        T s = T(0);
        for (int i = 0; i < R; ++i) s = add(s, mul(v.c[i], m.c[i * C + j]));
        r.c[j] = s;
    }
    return r;
}
template <int R, int K, int C, typename T> LW_FUNC mat_t<R, C, T> mul(mat_t<R, K, T> a, mat_t<K, C, T> b) {
    mat_t<R, C, T> r;
    for (int i = 0; i < R; ++i)
        for (int j = 0; j < C; ++j) {
            T s = T(0);
            for (int k = 0; k < K; ++k) s = add(s, mul(a.c[i * K + k], b.c[k * C + j]));
            r.c[i * C + j] = s;
        }
    return r;
}
template <int R, int C, typename T> LW_FUNC mat_t<C, R, T> transpose(mat_t<R, C, T> a) {
    mat_t<C, R, T> r;
    for (int i = 0; i < R; ++i)
        for (int j = 0; j < C; ++j) r.c[j * R + i] = a.c[i * C + j];
    return r;
}
template <int N, typename T> LW_FUNC bool eq(vec_t<N, T> a, vec_t<N, T> b) {
    for (int i = 0; i < N; ++i)
        if (!eq(a.c[i], b.c[i])) return false;
    return true;
}
template <int N, typename T> LW_FUNC bool ne(vec_t<N, T> a, vec_t<N, T> b) { return !eq(a, b); }
template <int R, int C, typename T> LW_FUNC bool eq(mat_t<R, C, T> a, mat_t<R, C, T> b) {
    for (int i = 0; i < R * C; ++i)
        if (!eq(a.c[i], b.c[i])) return false;
    return true;
}
template <int R, int C, typename T> LW_FUNC bool ne(mat_t<R, C, T> a, mat_t<R, C, T> b) { return !eq(a, b); }

template <int R, int C, typename T> LW_FUNC vec_t<C, T> row(const mat_t<R, C, T>& m, int64_t i) {
    vec_t<C, T> r;
    for (int j = 0; j < C; ++j) r.c[j] = m.c[i * C + j];
    return r;
}
template <int R, int C, typename T> LW_FUNC void set_row(mat_t<R, C, T>& m, int64_t i, vec_t<C, T> v) {
    for (int j = 0; j < C; ++j) m.c[i * C + j] = v.c[j];
}
// row i of a matrix in memory, as a vector stores and atomics can write through (same layout as C scalars)
template <int R, int C, typename T> LW_FUNC vec_t<C, T>& row_ref(mat_t<R, C, T>& m, int64_t i) {
    return *reinterpret_cast<vec_t<C, T>*>(m.c + i * C);
}

template <int N, typename T> LW_FUNC T dot(vec_t<N, T> a, vec_t<N, T> b) {
    if constexpr (N == 0) return T(0);  // an empty slice
    T s = mul(a.c[0], b.c[0]);
    for (int i = 1; i < N; ++i) s = add(s, mul(a.c[i], b.c[i]));
    return s;
}
template <typename T> LW_FUNC vec_t<3, T> cross(vec_t<3, T> a, vec_t<3, T> b) {
    vec_t<3, T> r;
    r.c[0] = sub(mul(a.c[1], b.c[2]), mul(a.c[2], b.c[1]));
    r.c[1] = sub(mul(a.c[2], b.c[0]), mul(a.c[0], b.c[2]));
    r.c[2] = sub(mul(a.c[0], b.c[1]), mul(a.c[1], b.c[0]));
    return r;
}
template <int N, typename T> LW_FUNC T length_sq(vec_t<N, T> a) { return dot(a, a); }
template <int N, typename T> LW_FUNC T length(vec_t<N, T> a) { return sqrt(dot(a, a)); }
template <int N, typename T> LW_FUNC vec_t<N, T> normalize(vec_t<N, T> a) {
    T l = length(a);
    return l > T(0) ? div(a, l) : zero<vec_t<N, T>>();
}
template <int N, typename T> LW_FUNC vec_t<N, T> lerp(vec_t<N, T> a, vec_t<N, T> b, T t) {
    return add(a, mul(sub(b, a), t));
}
template <int R, int C, typename T> LW_FUNC mat_t<R, C, T> lerp(mat_t<R, C, T> a, mat_t<R, C, T> b, T t) {
    return add(a, mul(sub(b, a), t));
}
template <int N, typename T> LW_FUNC vec_t<N, T> clamp(vec_t<N, T> x, vec_t<N, T> lo, vec_t<N, T> hi) {
    return min(max(x, lo), hi);
}

// ---------------------------------------------------------------------------------------------
// arrays: a pointer, a gradient pointer, a shape and byte strides (mirrors kernels/array.py)

template <typename T> struct array_t {
    T* data;
    T* grad;
    int32_t shape[4];
    int64_t strides[4];
    int32_t ndim;  // 0 in a null descriptor; kernels take the dimension count from the argument's type
    // element access for wp.func_native snippets (generated code indexes through lw::at)
    LW_FUNC T& operator[](int64_t i) const { return *(T*)((char*)data + i * strides[0]); }
};

// wp.array(ptr=..., shape=..., dtype=...) in a kernel: a contiguous array (no gradient) over memory at an address
template <typename T, typename... S> LW_FUNC array_t<T> array_at_address(uint64_t ptr, S... extents) {
    array_t<T> a = {};
    a.data = reinterpret_cast<T*>(ptr);
    a.ndim = int32_t(sizeof...(S));
    const int32_t n[] = {int32_t(extents)...};
    int64_t stride = sizeof(T);
    for (int d = int(sizeof...(S)) - 1; d >= 0; --d) {
        a.shape[d] = n[d];
        a.strides[d] = stride;
        stride *= n[d];
    }
    return a;
}
template <typename T> LW_FUNC uint64_t array_address(const array_t<T>& a) { return reinterpret_cast<uint64_t>(a.data); }

template <typename T> LW_FUNC T& at(const array_t<T>& a, int64_t i) {
    return *(T*)((char*)a.data + i * a.strides[0]);
}
template <typename T> LW_FUNC T& at(const array_t<T>& a, int64_t i, int64_t j) {
    return *(T*)((char*)a.data + i * a.strides[0] + j * a.strides[1]);
}
template <typename T> LW_FUNC T& at(const array_t<T>& a, int64_t i, int64_t j, int64_t k) {
    return *(T*)((char*)a.data + i * a.strides[0] + j * a.strides[1] + k * a.strides[2]);
}
template <typename T> LW_FUNC T& at(const array_t<T>& a, int64_t i, int64_t j, int64_t k, int64_t l) {
    return *(T*)((char*)a.data + i * a.strides[0] + j * a.strides[1] + k * a.strides[2] + l * a.strides[3]);
}
// The same accesses when every array's innermost stride is known to be sizeof(T) (C == true): the
// CPU entry for contiguous arguments, where the compiler can vectorize unit-stride loops.
template <bool C, typename T> LW_FUNC T& atc(const array_t<T>& a, int64_t i) {
    return C ? a.data[i] : at(a, i);
}
template <bool C, typename T> LW_FUNC T& atc(const array_t<T>& a, int64_t i, int64_t j) {
    return C ? ((T*)((char*)a.data + i * a.strides[0]))[j] : at(a, i, j);
}
template <bool C, typename T> LW_FUNC T& atc(const array_t<T>& a, int64_t i, int64_t j, int64_t k) {
    return C ? ((T*)((char*)a.data + i * a.strides[0] + j * a.strides[1]))[k] : at(a, i, j, k);
}
template <bool C, typename T> LW_FUNC T& atc(const array_t<T>& a, int64_t i, int64_t j, int64_t k, int64_t l) {
    return C ? ((T*)((char*)a.data + i * a.strides[0] + j * a.strides[1] + k * a.strides[2]))[l] : at(a, i, j, k, l);
}

// in a sorted 1-D array, the first index of [lo, hi) whose element is not less than v; as Warp's, the last index
// (hi - 1) when every element is less, so the result indexes the range (lo for an empty range)
template <typename T> LW_FUNC int32_t lower_bound(const array_t<T>& a, int32_t lo, int32_t hi, T v) {
    hi = hi > lo ? hi - 1 : lo;
    while (lo < hi) {
        int32_t mid = lo + (hi - lo) / 2;
        if (at(a, mid) < v) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}
template <typename T> LW_FUNC int32_t lower_bound(const array_t<T>& a, T v) { return lower_bound(a, 0, a.shape[0], v); }

// The top bit of a descriptor's gradient pointer (never set in a user-space or device address) marks an array
// made with retain_grad=True, or an adjoint the caller passed to an adjoint launch: a store's adjoint then
// leaves the element's gradient in place. Every use of the pointer goes through grad_ptr.
constexpr unsigned long long RETAIN_GRAD_BIT = 1ull << 63;
template <typename T> LW_FUNC T* grad_ptr(const array_t<T>& a) {
    return (T*)((unsigned long long)a.grad & ~RETAIN_GRAD_BIT);
}
template <typename T> LW_FUNC bool retains_grad(const array_t<T>& a) {
    return ((unsigned long long)a.grad & RETAIN_GRAD_BIT) != 0;
}
// `a` with its gradient taken by stores whatever retain_grad says: a kernel that read the array before storing
// into it (an in-place update) must not pass the replaced values' gradient on to the values it read
template <typename T> LW_FUNC array_t<T> taking_grad(const array_t<T>& a) {
    array_t<T> r = a;
    r.grad = grad_ptr(a);
    return r;
}

// an indexedarray: element i of dimension d is data[indices[d][i]] (a null index array: identity)
template <typename T> struct indexedarray_t {
    array_t<T> arr;
    int32_t* indices[4];
    int32_t shape[4];
};
template <typename T> LW_FUNC int64_t map_index(const indexedarray_t<T>& a, int d, int64_t i) {
    return a.indices[d] ? (int64_t)a.indices[d][i] : i;
}
template <typename T> LW_FUNC T& at(const indexedarray_t<T>& a, int64_t i) { return at(a.arr, map_index(a, 0, i)); }
template <typename T> LW_FUNC T& at(const indexedarray_t<T>& a, int64_t i, int64_t j) {
    return at(a.arr, map_index(a, 0, i), map_index(a, 1, j));
}
template <typename T> LW_FUNC T& at(const indexedarray_t<T>& a, int64_t i, int64_t j, int64_t k) {
    return at(a.arr, map_index(a, 0, i), map_index(a, 1, j), map_index(a, 2, k));
}
template <typename T> LW_FUNC T& at(const indexedarray_t<T>& a, int64_t i, int64_t j, int64_t k, int64_t l) {
    return at(a.arr, map_index(a, 0, i), map_index(a, 1, j), map_index(a, 2, k), map_index(a, 3, l));
}
template <bool C, typename T, typename... I> LW_FUNC T& atc(const indexedarray_t<T>& a, I... idx) { return at(a, idx...); }
template <typename T> LW_FUNC indexedarray_t<T> grad_of(const indexedarray_t<T>& a) {
    indexedarray_t<T> g = a;
    g.arr.data = grad_ptr(a.arr);
    return g;
}
template <typename T> LW_FUNC bool inner_contiguous(const indexedarray_t<T>& a, int ndim) { return true; }
template <typename T> LW_FUNC bool has_grad(const array_t<T>& a) { return a.grad != 0; }
// whether distinct indices reach distinct elements of the first `ndim` dimensions: false for a broadcast view
// (a dimension of more than one element with stride 0), where threads indexing by their own index share elements
template <typename T> LW_FUNC bool grad_distinct(const array_t<T>& a, int ndim) {
    for (int d = 0; d < ndim; ++d)
        if (a.shape[d] > 1 && a.strides[d] == 0) return false;
    return true;
}
template <typename T> LW_FUNC bool has_grad(const indexedarray_t<T>& a) { return a.arr.grad != 0; }
template <typename T> LW_FUNC bool retains_grad(const indexedarray_t<T>& a) { return retains_grad(a.arr); }

// whether a kernel body may take `a` as laid out for its fast instantiation (LW_C): the innermost dimension
// contiguous and no broadcast dimension, so that threads indexing by their own index own distinct elements
template <typename T> LW_FUNC bool inner_contiguous(const array_t<T>& a, int ndim) {
    return (a.shape[ndim - 1] <= 1 || a.strides[ndim - 1] == (int64_t)sizeof(T)) && grad_distinct(a, ndim - 1);
}

// a view of `a` with its leading `n` dimensions indexed away
template <typename T> LW_FUNC array_t<T> subview(const array_t<T>& a, int n, int64_t i, int64_t j = 0, int64_t k = 0) {
    array_t<T> r;
    int64_t idx[3] = {i, j, k};
    char* p = (char*)a.data;
    for (int d = 0; d < n; ++d) p += idx[d] * a.strides[d];
    r.data = (T*)p;
    r.grad = a.grad ? (T*)((char*)grad_ptr(a) + (p - (char*)a.data)) : 0;
    for (int d = 0; d < 4; ++d) {
        r.shape[d] = d + n < 4 ? a.shape[d + n] : 0;
        r.strides[d] = d + n < 4 ? a.strides[d + n] : 0;
    }
    r.ndim = a.ndim > n ? a.ndim - n : 0;
    return r;
}

// an indexedarray with its leading `n` dimensions indexed away (each index mapped through its index array);
// the result is an indexedarray over the remaining dimensions, sharing data, gradient and index arrays
template <typename T> LW_FUNC indexedarray_t<T> subview(const indexedarray_t<T>& a, int n, int64_t i, int64_t j = 0,
                                                         int64_t k = 0) {
    int64_t idx[3] = {i, j, k};
    int64_t offset = 0;
    for (int d = 0; d < n; ++d) offset += map_index(a, d, idx[d]) * a.arr.strides[d];
    indexedarray_t<T> r;
    r.arr.data = (T*)((char*)a.arr.data + offset);
    r.arr.grad = a.arr.grad ? (T*)((char*)grad_ptr(a.arr) + offset) : 0;
    for (int d = 0; d < 4; ++d) {
        bool kept = d + n < 4;
        r.arr.shape[d] = kept ? a.arr.shape[d + n] : 0;
        r.arr.strides[d] = kept ? a.arr.strides[d + n] : 0;
        r.indices[d] = kept ? a.indices[d + n] : 0;
        r.shape[d] = kept ? a.shape[d + n] : 0;
    }
    r.arr.ndim = a.arr.ndim > n ? a.arr.ndim - n : 0;
    return r;
}

// a[i, a:b:s, ...] inside a kernel: bounds holds (start, stop, step) per leading axis (for an indexed axis
// the index and two ignored values); sliced axes follow Python's slice rules (omitted bounds are
// slice_begin/slice_end, out-of-range ones clamp), indexed axes are dropped (negative indices count from
// the end). The view shares the array's data and gradient.
constexpr int32_t slice_begin = -2147483647 - 1;
constexpr int32_t slice_end = 2147483647;
LW_FUNC int32_t slice_clamp(int32_t x, int32_t n, int32_t step) {
    if (step > 0) {
        if (x == slice_begin) return 0;
        if (x == slice_end) return n;
        if (x < 0) x += n;
        return x < 0 ? 0 : x > n ? n : x;
    }
    if (x == slice_begin) return n - 1;
    if (x == slice_end) return -1;
    if (x < 0) x += n;
    return x < -1 ? -1 : x > n - 1 ? n - 1 : x;
}
template <int... S, typename T> LW_FUNC array_t<T> array_slice(const array_t<T>& a,
                                                                const int32_t (&bounds)[3 * sizeof...(S)]) {
    constexpr int N = sizeof...(S);
    constexpr bool sliced[N] = {S != 0 ...};
    array_t<T> r;
    int64_t offset = 0;
    int32_t shape[4];
    int64_t strides[4];
    int kept = 0;
    for (int d = 0; d < N; ++d) {
        int32_t n = a.shape[d];
        int32_t start = bounds[3 * d], stop = bounds[3 * d + 1], step = bounds[3 * d + 2];
        if (!sliced[d]) {
            offset += (int64_t)(start < 0 ? start + n : start) * a.strides[d];
            continue;
        }
        if (step == 0) step = 1;  // rejected by the front end when constant
        start = slice_clamp(start, n, step);
        stop = slice_clamp(stop, n, step);
        int32_t len = step > 0 ? (stop > start ? (stop - start + step - 1) / step : 0)
                               : (start > stop ? (start - stop - step - 1) / (-step) : 0);
        if (len > 0) offset += (int64_t)start * a.strides[d];
        shape[kept] = len;
        strides[kept++] = a.strides[d] * step;
    }
    for (int d = N; d < 4; ++d) {
        shape[kept] = a.shape[d];
        strides[kept++] = a.strides[d];
    }
    r.data = (T*)((char*)a.data + offset);
    r.grad = a.grad ? (T*)((char*)grad_ptr(a) + offset) : 0;
    for (int d = 0; d < 4; ++d) {
        r.shape[d] = d < kept ? shape[d] : 0;
        r.strides[d] = d < kept ? strides[d] : 0;
    }
    int dropped = 0;
    for (int d = 0; d < N; ++d) dropped += sliced[d] ? 0 : 1;
    r.ndim = a.ndim > dropped ? a.ndim - dropped : 0;
    return r;
}

// Debug mode: record the first out-of-bounds index and return a harmless index instead; an element
// access with a bad index goes to a thread's substitute element of the element's own type.
template <typename T> LW_FUNC int64_t check_index(error_t* err, int site, int64_t i, int64_t n, bool& bad) {
    if (i >= 0 && i < n) return i;
    if (err && err->code == 0) {
#if LW_CUDA
        if (atomicCAS((int*)&err->code, 0, 1) == 0) {
#else
        int32_t expected = 0;
        if (__atomic_compare_exchange_n(&err->code, &expected, 1, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) {
#endif
            err->site = site;
            err->index = i;
            err->extent = n;
        }
    }
    bad = true;
    return 0;
}
template <typename T> LW_FUNC T& dummy_ref() {
    // sized and aligned for T (a struct may be any size); on the GPU one per type, shared by all threads
#if LW_CUDA
    static __align__(16) char storage[sizeof(T)];
#else
    alignas(64) static thread_local char storage[sizeof(T)];
#endif
    return *(T*)storage;
}
LW_FUNC int64_t checked(error_t* err, int site, int64_t i, int64_t n) {
    bool bad = false;
    return check_index<int>(err, site, i, n, bad);
}
// Debug builds: a component (or row) of a vector or matrix in memory by dynamic indices; a bad index
// reports and gives the substitute, so a store or atomic through it changes nothing of the value.
template <int N, typename T> LW_FUNC T& comp_checked(error_t* e, int site, vec_t<N, T>& v, int64_t i) {
    bool bad = false;
    i = check_index<T>(e, site, i, N, bad);
    return bad ? dummy_ref<T>() : v.c[i];
}
template <int R, int C, typename T>
LW_FUNC T& comp_checked(error_t* e, int site, mat_t<R, C, T>& m, int64_t i, int64_t j) {
    bool bad = false;
    i = check_index<T>(e, site, i, R, bad);
    j = check_index<T>(e, site, j, C, bad);
    return bad ? dummy_ref<T>() : m.c[i * C + j];
}
template <int R, int C, typename T> LW_FUNC vec_t<C, T>& row_checked(error_t* e, int site, mat_t<R, C, T>& m, int64_t i) {
    bool bad = false;
    i = check_index<T>(e, site, i, R, bad);
    return bad ? dummy_ref<vec_t<C, T>>() : *reinterpret_cast<vec_t<C, T>*>(m.c + i * C);
}
// A dynamic index into a vector, matrix row or kernel-local array of extent n, in release builds:
// clamped into range, so a wrong index reads or writes a wrong component, never the memory beside it.
LW_FUNC int64_t clamped(int64_t i, int64_t n) { return i < 0 ? 0 : (i >= n ? n - 1 : i); }
template <typename T> LW_FUNC T& at_checked(error_t* e, int site, const array_t<T>& a, int64_t i) {
    bool bad = false;
    i = check_index<T>(e, site, i, a.shape[0], bad);
    return bad ? dummy_ref<T>() : at(a, i);
}
template <typename T> LW_FUNC T& at_checked(error_t* e, int site, const array_t<T>& a, int64_t i, int64_t j) {
    bool bad = false;
    i = check_index<T>(e, site, i, a.shape[0], bad);
    j = check_index<T>(e, site, j, a.shape[1], bad);
    return bad ? dummy_ref<T>() : at(a, i, j);
}
template <typename T>
LW_FUNC T& at_checked(error_t* e, int site, const array_t<T>& a, int64_t i, int64_t j, int64_t k) {
    bool bad = false;
    i = check_index<T>(e, site, i, a.shape[0], bad);
    j = check_index<T>(e, site, j, a.shape[1], bad);
    k = check_index<T>(e, site, k, a.shape[2], bad);
    return bad ? dummy_ref<T>() : at(a, i, j, k);
}
template <typename T>
LW_FUNC T& at_checked(error_t* e, int site, const array_t<T>& a, int64_t i, int64_t j, int64_t k, int64_t l) {
    bool bad = false;
    i = check_index<T>(e, site, i, a.shape[0], bad);
    j = check_index<T>(e, site, j, a.shape[1], bad);
    k = check_index<T>(e, site, k, a.shape[2], bad);
    l = check_index<T>(e, site, l, a.shape[3], bad);
    return bad ? dummy_ref<T>() : at(a, i, j, k, l);
}
// an indexedarray: the indices against its shape, then the positions they map to against the data's
template <typename T, typename... I> LW_FUNC T& at_checked(error_t* e, int site, const indexedarray_t<T>& a, I... idx) {
    int64_t v[] = {(int64_t)idx...};
    bool bad = false;
    for (int d = 0; d < (int)sizeof...(I); ++d) v[d] = check_index<T>(e, site, v[d], a.shape[d], bad);
    if (bad) return dummy_ref<T>();
    for (int d = 0; d < (int)sizeof...(I); ++d) v[d] = check_index<T>(e, site, map_index(a, d, v[d]), a.arr.shape[d], bad);
    if (bad) return dummy_ref<T>();
    if constexpr (sizeof...(I) == 1) return at(a.arr, v[0]);
    else if constexpr (sizeof...(I) == 2) return at(a.arr, v[0], v[1]);
    else if constexpr (sizeof...(I) == 3) return at(a.arr, v[0], v[1], v[2]);
    else return at(a.arr, v[0], v[1], v[2], v[3]);
}

// ---------------------------------------------------------------------------------------------
// atomics: return the previous value, like Warp

#if LW_CUDA
template <typename T> LW_DEVICE typename scalar_only<T>::type atomic_add(T* p, T v) { return atomicAdd(p, v); }
LW_DEVICE int64_t atomic_add(int64_t* p, int64_t v) {
    return (int64_t)atomicAdd((unsigned long long*)p, (unsigned long long)v);
}
LW_DEVICE int32_t atomic_min(int32_t* p, int32_t v) { return atomicMin(p, v); }
LW_DEVICE int32_t atomic_max(int32_t* p, int32_t v) { return atomicMax(p, v); }
LW_DEVICE uint32_t atomic_min(uint32_t* p, uint32_t v) { return atomicMin(p, v); }
LW_DEVICE uint32_t atomic_max(uint32_t* p, uint32_t v) { return atomicMax(p, v); }
LW_DEVICE int64_t atomic_min(int64_t* p, int64_t v) { return atomicMin((long long*)p, (long long)v); }
LW_DEVICE int64_t atomic_max(int64_t* p, int64_t v) { return atomicMax((long long*)p, (long long)v); }
LW_DEVICE uint64_t atomic_min(uint64_t* p, uint64_t v) { return atomicMin(p, v); }
LW_DEVICE uint64_t atomic_max(uint64_t* p, uint64_t v) { return atomicMax(p, v); }
LW_DEVICE float atomic_min(float* p, float v) {
    int* ip = (int*)p;
    int old = *ip;
    while (v < __int_as_float(old) || __int_as_float(old) != __int_as_float(old)) {
        int prev = atomicCAS(ip, old, __float_as_int(v));
        if (prev == old) break;
        old = prev;
    }
    return __int_as_float(old);
}
LW_DEVICE float atomic_max(float* p, float v) {
    int* ip = (int*)p;
    int old = *ip;
    while (v > __int_as_float(old) || __int_as_float(old) != __int_as_float(old)) {
        int prev = atomicCAS(ip, old, __float_as_int(v));
        if (prev == old) break;
        old = prev;
    }
    return __int_as_float(old);
}
LW_DEVICE double atomic_min(double* p, double v) {
    unsigned long long* ip = (unsigned long long*)p;
    unsigned long long old = *ip;
    while (v < __longlong_as_double((long long)old) || isnan(__longlong_as_double((long long)old))) {
        unsigned long long prev = atomicCAS(ip, old, (unsigned long long)__double_as_longlong(v));
        if (prev == old) break;
        old = prev;
    }
    return __longlong_as_double((long long)old);
}
LW_DEVICE double atomic_max(double* p, double v) {
    unsigned long long* ip = (unsigned long long*)p;
    unsigned long long old = *ip;
    while (v > __longlong_as_double((long long)old) || isnan(__longlong_as_double((long long)old))) {
        unsigned long long prev = atomicCAS(ip, old, (unsigned long long)__double_as_longlong(v));
        if (prev == old) break;
        old = prev;
    }
    return __longlong_as_double((long long)old);
}
#else
template <typename T> inline typename scalar_only<T>::type atomic_add(T* p, T v) {
    return __atomic_fetch_add(p, v, __ATOMIC_RELAXED);
}
template <typename T> inline T atomic_float_update(T* p, T v, int op) {
    T old;
    __atomic_load(p, &old, __ATOMIC_RELAXED);
    for (;;) {
        T next = op == 0 ? old + v : (op == 1 ? min(old, v) : max(old, v));  // a stored NaN gives way
        if (op != 0 && next == old) return old;
        if (__atomic_compare_exchange(p, &old, &next, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) return old;
    }
}
inline float atomic_add(float* p, float v) { return atomic_float_update(p, v, 0); }
inline double atomic_add(double* p, double v) { return atomic_float_update(p, v, 0); }
template <typename T> inline typename scalar_only<T>::type atomic_min(T* p, T v) { return atomic_float_update(p, v, 1); }
template <typename T> inline typename scalar_only<T>::type atomic_max(T* p, T v) { return atomic_float_update(p, v, 2); }
#endif

// 16-bit floats: a compare-and-swap loop on the 32-bit word that holds the value; op 0 adds, 1 takes the
// minimum, 2 the maximum (a stored NaN gives way, as for the wider floats)
template <typename H> LW_DEVICE float update16(H cur, H v, int op) {
    float c = (float)cur, w = (float)v;
    return op == 0 ? c + w : (op == 1 ? (w < c || c != c ? w : c) : (w > c || c != c ? w : c));
}
template <typename H> LW_DEVICE H atomic_update16(H* p, H v, int op) {
    uint32_t* word = (uint32_t*)((uint64_t)p & ~(uint64_t)3);
    int shift = ((uint64_t)p & 2) ? 16 : 0;
#if LW_CUDA
    uint32_t old = *word;
    for (;;) {
        H cur; cur.u = (uint16_t)(old >> shift);
        uint32_t next = (old & ~(0xffffu << shift)) | ((uint32_t)H(update16(cur, v, op)).u << shift);
        if (next == old) return cur;
        uint32_t prev = atomicCAS((unsigned int*)word, old, next);
        if (prev == old) return cur;
        old = prev;
    }
#else
    uint32_t old = __atomic_load_n(word, __ATOMIC_RELAXED);
    for (;;) {
        H cur; cur.u = (uint16_t)(old >> shift);
        uint32_t next = (old & ~(0xffffu << shift)) | ((uint32_t)H(update16(cur, v, op)).u << shift);
        if (next == old) return cur;
        if (__atomic_compare_exchange_n(word, &old, next, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) return cur;
    }
#endif
}
LW_DEVICE half atomic_add(half* p, half v) { return atomic_update16(p, v, 0); }
LW_DEVICE bfloat16 atomic_add(bfloat16* p, bfloat16 v) { return atomic_update16(p, v, 0); }
LW_DEVICE bfloat16 atomic_min(bfloat16* p, bfloat16 v) { return atomic_update16(p, v, 1); }
LW_DEVICE bfloat16 atomic_max(bfloat16* p, bfloat16 v) { return atomic_update16(p, v, 2); }
template <typename T> LW_DEVICE T atomic_sub(T* p, T v) { return atomic_add(p, neg(v)); }

// vectors and matrices: atomic per component; the previous value is assembled from the components
#define LW_COMPONENT_ATOMIC(op)                                                                            \
    template <int N, typename T> LW_DEVICE vec_t<N, T> atomic_##op(vec_t<N, T>* p, vec_t<N, T> v) {        \
        vec_t<N, T> r;                                                                                      \
        for (int i = 0; i < N; ++i) r.c[i] = atomic_##op(&p->c[i], v.c[i]);                               \
        return r;                                                                                           \
    }                                                                                                       \
    template <int R, int C, typename T> LW_DEVICE mat_t<R, C, T> atomic_##op(mat_t<R, C, T>* p, mat_t<R, C, T> v) { \
        mat_t<R, C, T> r;                                                                                   \
        for (int i = 0; i < R * C; ++i) r.c[i] = atomic_##op(&p->c[i], v.c[i]);                            \
        return r;                                                                                           \
    }
LW_COMPONENT_ATOMIC(add)
LW_COMPONENT_ATOMIC(min)
LW_COMPONENT_ATOMIC(max)

// ---------------------------------------------------------------------------------------------
// thread index: the launch's linear index split into its dimensions (row-major, last fastest)

LW_FUNC void tid_split(const launch_t& L, int64_t idx, int32_t* out) {
    for (int d = L.ndim - 1; d > 0; --d) {
        out[d] = (int32_t)(idx % L.dims[d]);
        idx /= L.dims[d];
    }
    out[0] = (int32_t)idx;
}

// ---------------------------------------------------------------------------------------------
// adjoints: adj_f(args..., adj_args&..., adj_ret) accumulates d(out)/d(arg) * adj_ret into adj_args

// gradient access: the same addressing as the data, through a view whose data is the gradient
template <typename T> LW_FUNC array_t<T> grad_of(const array_t<T>& a) {
    array_t<T> g = a;
    g.data = grad_ptr(a);
    return g;
}
template <typename T, typename... I> LW_FUNC T& grad_at(const array_t<T>& a, I... idx) { return at(grad_of(a), idx...); }
template <bool C, typename T, typename... I> LW_FUNC T& gradc(const array_t<T>& a, I... idx) {
    return atc<C>(grad_of(a), idx...);
}
template <typename T, typename... I> LW_FUNC T& grad_at(const indexedarray_t<T>& a, I... idx) {
    return at(grad_of(a), idx...);
}
template <bool C, typename T, typename... I> LW_FUNC T& gradc(const indexedarray_t<T>& a, I... idx) {
    return at(grad_of(a), idx...);
}
// debug builds: the gradient element, bounds-checked like the data (a bad index reports and goes nowhere)
template <typename A, typename... I> LW_FUNC auto& grad_checked(error_t* e, int site, const A& a, I... idx) {
    return at_checked(e, site, grad_of(a), idx...);
}

// Tape.backward's fused zeroing (codegen.entry_points): the gradient elements [lo, hi) of a 1-D array
template <typename T> LW_FUNC void zero_grad_range(const array_t<T>& a, int64_t lo, int64_t hi) {
    if (a.strides[0] == (int64_t)sizeof(T)) {
        __builtin_memset((void*)&grad_at(a, lo), 0, (unsigned long long)(hi - lo) * sizeof(T));
        return;
    }
    for (int64_t i = lo; i < hi; ++i) grad_at(a, i) = T{};
}

// accumulate into a value of any differentiable type
template <typename T> LW_FUNC void acc(T& a, T b) { a = add(a, b); }
// the adjoint of atomic_min/max: the value that won (the element's value now) gets the gradient,
// component by component for vectors and matrices
template <typename T> LW_FUNC typename scalar_only<T, void>::type adj_atomic_won(T cur, T v, T& adj_v, T g) {
    if (eq(cur, v) || (!eq(cur, cur) && !eq(v, v))) acc(adj_v, g);  // a NaN stored by a NaN value won too
}
template <int N, typename T>
LW_FUNC void adj_atomic_won(const vec_t<N, T>& cur, const vec_t<N, T>& v, vec_t<N, T>& adj_v, const vec_t<N, T>& g) {
    for (int i = 0; i < N; ++i) adj_atomic_won(cur.c[i], v.c[i], adj_v.c[i], g.c[i]);
}
template <int R, int C, typename T>
LW_FUNC void adj_atomic_won(const mat_t<R, C, T>& cur, const mat_t<R, C, T>& v, mat_t<R, C, T>& adj_v,
                            const mat_t<R, C, T>& g) {
    for (int i = 0; i < R * C; ++i) adj_atomic_won(cur.c[i], v.c[i], adj_v.c[i], g.c[i]);
}

template <typename T> LW_FUNC typename scalar_only<T, void>::type adj_add(T a, T b, T& adj_a, T& adj_b, T adj) { acc(adj_a, adj); acc(adj_b, adj); }
template <typename T> LW_FUNC typename scalar_only<T, void>::type adj_sub(T a, T b, T& adj_a, T& adj_b, T adj) { acc(adj_a, adj); acc(adj_b, neg(adj)); }
template <typename T> LW_FUNC typename scalar_only<T, void>::type adj_pos(T a, T& adj_a, T adj) { acc(adj_a, adj); }
template <typename T> LW_FUNC typename scalar_only<T, void>::type adj_neg(T a, T& adj_a, T adj) { acc(adj_a, neg(adj)); }
template <typename T, typename = typename scalar_only<T>::type> LW_FUNC void adj_mul(T a, T b, T& adj_a, T& adj_b, T adj) {
    adj_a += adj * b;
    adj_b += adj * a;
}
template <typename T> LW_FUNC typename scalar_only<T, void>::type adj_div(T a, T b, T& adj_a, T& adj_b, T adj) {
    acc(adj_a, div(adj, b));
    acc(adj_b, neg(div(mul(adj, a), mul(b, b))));
}
template <typename T> LW_FUNC typename scalar_only<T, void>::type adj_mod(T a, T b, T& adj_a, T& adj_b, T adj) {
    acc(adj_a, adj);
    acc(adj_b, neg(mul(adj, trunc(div(a, b)))));
}
template <typename T> LW_FUNC typename scalar_only<T, void>::type adj_pow(T a, T b, T& adj_a, T& adj_b, T adj) {
    T r = pow(a, b);
    if (!(a == T(0) && b < T(1))) acc(adj_a, mul(mul(adj, b), pow(a, sub(b, T(1)))));
    if (a > T(0)) acc(adj_b, mul(mul(adj, r), log(a)));
}
// sqrt and rsqrt: no guard at 0 or below, so the derivative is inf at 0 and NaN below, as in JAX and PyTorch
template <typename T> LW_FUNC typename scalar_only<T, void>::type adj_sqrt(T a, T& adj_a, T adj) {
    acc(adj_a, div(mul(T(0.5), adj), sqrt(a)));
}
template <typename T> LW_FUNC typename scalar_only<T, void>::type adj_sin(T a, T& adj_a, T adj) { acc(adj_a, mul(adj, cos(a))); }
template <typename T> LW_FUNC typename scalar_only<T, void>::type adj_cos(T a, T& adj_a, T adj) { acc(adj_a, neg(mul(adj, sin(a)))); }
template <typename T> LW_FUNC typename scalar_only<T, void>::type adj_tan(T a, T& adj_a, T adj) {
    T t = tan(a);
    acc(adj_a, mul(adj, add(T(1), mul(t, t))));
}
template <typename T> LW_FUNC typename scalar_only<T, void>::type adj_asin(T a, T& adj_a, T adj) {
    acc(adj_a, div(adj, sqrt(sub(T(1), mul(a, a)))));
}
template <typename T> LW_FUNC typename scalar_only<T, void>::type adj_acos(T a, T& adj_a, T adj) {
    acc(adj_a, neg(div(adj, sqrt(sub(T(1), mul(a, a))))));
}
template <typename T> LW_FUNC typename scalar_only<T, void>::type adj_atan(T a, T& adj_a, T adj) { acc(adj_a, div(adj, add(T(1), mul(a, a)))); }
template <typename T> LW_FUNC typename scalar_only<T, void>::type adj_sinh(T a, T& adj_a, T adj) { acc(adj_a, mul(adj, cosh(a))); }
template <typename T> LW_FUNC typename scalar_only<T, void>::type adj_cosh(T a, T& adj_a, T adj) { acc(adj_a, mul(adj, sinh(a))); }
template <typename T> LW_FUNC typename scalar_only<T, void>::type adj_tanh(T a, T& adj_a, T adj) {
    T t = tanh(a);
    acc(adj_a, mul(adj, sub(T(1), mul(t, t))));
}
template <typename T> LW_FUNC typename scalar_only<T, void>::type adj_exp(T a, T& adj_a, T adj) { acc(adj_a, mul(adj, exp(a))); }
template <typename T> LW_FUNC typename scalar_only<T, void>::type adj_log(T a, T& adj_a, T adj) { acc(adj_a, div(adj, a)); }
template <typename T> LW_FUNC typename scalar_only<T, void>::type adj_log2(T a, T& adj_a, T adj) { acc(adj_a, div(adj, mul(a, T(0.6931471805599453)))); }
template <typename T> LW_FUNC typename scalar_only<T, void>::type adj_log10(T a, T& adj_a, T adj) { acc(adj_a, div(adj, mul(a, T(2.302585092994046)))); }
template <typename T> LW_FUNC typename scalar_only<T, void>::type adj_cbrt(T a, T& adj_a, T adj) {
    T c = cbrt(a);
    if (c != T(0)) acc(adj_a, div(adj, mul(T(3), mul(c, c))));
}
template <typename T> LW_FUNC typename scalar_only<T, void>::type adj_degrees(T a, T& adj_a, T adj) { acc(adj_a, mul(adj, T(57.29577951308232))); }
template <typename T> LW_FUNC typename scalar_only<T, void>::type adj_radians(T a, T& adj_a, T adj) { acc(adj_a, mul(adj, T(0.017453292519943295))); }
template <typename T> LW_FUNC typename scalar_only<T, void>::type adj_rsqrt(T a, T& adj_a, T adj) {
    acc(adj_a, mul(adj, div(T(-0.5), mul(a, sqrt(a)))));
}
template <typename T> LW_FUNC typename scalar_only<T, void>::type adj_frac(T a, T& adj_a, T adj) { acc(adj_a, adj); }
template <typename T> LW_FUNC typename scalar_only<T, void>::type adj_copysign(T x, T y, T& adj_x, T& adj_y, T adj) {
    acc(adj_x, mul(adj, mul(copysign(T(1), x), copysign(T(1), y))));
}
template <typename T> LW_FUNC typename scalar_only<T, void>::type adj_atan2(T y, T x, T& adj_y, T& adj_x, T adj) {
    T d = add(mul(x, x), mul(y, y));
    if (d > T(0)) {
        acc(adj_y, div(mul(adj, x), d));
        acc(adj_x, neg(div(mul(adj, y), d)));
    }
}
// min/max/clamp: the gradient goes to the operand that was selected; abs: sign, with 1 at 0
template <typename T> LW_FUNC typename scalar_only<T, void>::type adj_min(T a, T b, T& adj_a, T& adj_b, T adj) {
    if (lt(b, a) || isnan(a)) acc(adj_b, adj); else acc(adj_a, adj);
}
template <typename T> LW_FUNC typename scalar_only<T, void>::type adj_max(T a, T b, T& adj_a, T& adj_b, T adj) {
    if (lt(a, b) || isnan(a)) acc(adj_b, adj); else acc(adj_a, adj);
}
template <typename T> LW_FUNC typename scalar_only<T, void>::type adj_clamp(T x, T lo, T hi, T& adj_x, T& adj_lo, T& adj_hi, T adj) {
    T m = max(x, lo);  // the forward is min(max(x, lo), hi): a NaN x gives min(lo, hi)
    if (lt(hi, m) || isnan(m)) acc(adj_hi, adj);
    else if (lt(x, lo) || isnan(x)) acc(adj_lo, adj);
    else acc(adj_x, adj);
}
template <typename T> LW_FUNC typename scalar_only<T, void>::type adj_abs(T a, T& adj_a, T adj) { acc(adj_a, lt(a, T(0)) ? neg(adj) : adj); }
template <typename T> LW_FUNC typename scalar_only<T, void>::type adj_lerp(T a, T b, T t, T& adj_a, T& adj_b, T& adj_t, T adj) {
    acc(adj_a, mul(adj, sub(T(1), t)));
    acc(adj_b, mul(adj, t));
    acc(adj_t, mul(adj, sub(b, a)));
}
template <typename T> LW_FUNC typename scalar_only<T, void>::type adj_smoothstep(T a, T b, T x, T& adj_a, T& adj_b, T& adj_x, T adj) {
    T w = sub(b, a);
    T t = div(sub(x, a), w);
    if (t <= T(0) || t >= T(1)) return;
    T dr = mul(mul(T(6), t), sub(T(1), t));
    T g = mul(adj, dr);
    acc(adj_x, div(g, w));
    acc(adj_a, mul(g, div(sub(x, b), mul(w, w))));
    acc(adj_b, mul(g, div(sub(a, x), mul(w, w))));
}
template <typename To, typename From> LW_FUNC void adj_cast(From x, From& adj_x, To adj) {
    acc(adj_x, cast<From>(adj));
}
// the adjoints a 16-bit float type needs beyond the generic ones
#define LW_NARROW_ADJ(H)                                                                      \
    LW_FUNC void adj_mul(H a, H b, H& adj_a, H& adj_b, H adj) {                                \
        acc(adj_a, mul(adj, b));                                                               \
        acc(adj_b, mul(adj, a));                                                               \
    }                                                                                          \
    template <typename To> LW_FUNC void adj_cast(H x, H& adj_x, To adj) { acc(adj_x, H((float)adj)); }
LW_NARROW_ADJ(half)
LW_NARROW_ADJ(bfloat16)
#undef LW_NARROW_ADJ

// vectors and matrices (elementwise forms loop over the scalar adjoints)
#define LW_ADJ_ELEMWISE2(name)                                                                      \
    template <int N, typename T>                                                                   \
    LW_FUNC void adj_##name(vec_t<N, T> a, vec_t<N, T> b, vec_t<N, T>& adj_a, vec_t<N, T>& adj_b,   \
                            vec_t<N, T> adj) {                                                     \
        for (int i = 0; i < N; ++i) adj_##name(a.c[i], b.c[i], adj_a.c[i], adj_b.c[i], adj.c[i]);  \
    }                                                                                              \
    template <int R, int C, typename T>                                                            \
    LW_FUNC void adj_##name(mat_t<R, C, T> a, mat_t<R, C, T> b, mat_t<R, C, T>& adj_a,              \
                            mat_t<R, C, T>& adj_b, mat_t<R, C, T> adj) {                           \
        for (int i = 0; i < R * C; ++i) adj_##name(a.c[i], b.c[i], adj_a.c[i], adj_b.c[i], adj.c[i]); \
    }
LW_ADJ_ELEMWISE2(add)
LW_ADJ_ELEMWISE2(sub)
LW_ADJ_ELEMWISE2(min)
LW_ADJ_ELEMWISE2(max)
#define LW_ADJ_ELEMWISE1(name)                                                                      \
    template <int N, typename T> LW_FUNC void adj_##name(vec_t<N, T> a, vec_t<N, T>& adj_a, vec_t<N, T> adj) { \
        for (int i = 0; i < N; ++i) adj_##name(a.c[i], adj_a.c[i], adj.c[i]);                       \
    }                                                                                              \
    template <int R, int C, typename T>                                                            \
    LW_FUNC void adj_##name(mat_t<R, C, T> a, mat_t<R, C, T>& adj_a, mat_t<R, C, T> adj) {          \
        for (int i = 0; i < R * C; ++i) adj_##name(a.c[i], adj_a.c[i], adj.c[i]);                   \
    }
LW_ADJ_ELEMWISE1(neg)
LW_ADJ_ELEMWISE1(pos)
LW_ADJ_ELEMWISE1(abs)

template <int N, typename T> LW_FUNC void adj_mul(vec_t<N, T> a, T s, vec_t<N, T>& adj_a, T& adj_s, vec_t<N, T> adj) {
    acc(adj_a, mul(adj, s));
    acc(adj_s, dot(adj, a));
}
template <int N, typename T> LW_FUNC void adj_mul(T s, vec_t<N, T> a, T& adj_s, vec_t<N, T>& adj_a, vec_t<N, T> adj) {
    adj_mul(a, s, adj_a, adj_s, adj);
}
template <int N, typename T> LW_FUNC void adj_div(vec_t<N, T> a, T s, vec_t<N, T>& adj_a, T& adj_s, vec_t<N, T> adj) {
    acc(adj_a, div(adj, s));
    acc(adj_s, neg(div(dot(adj, a), mul(s, s))));
}
template <int N, typename T> LW_FUNC void adj_div(T s, vec_t<N, T> a, T& adj_s, vec_t<N, T>& adj_a, vec_t<N, T> adj) {
    for (int i = 0; i < N; ++i) adj_div(s, a.c[i], adj_s, adj_a.c[i], adj.c[i]);
}
template <int R, int C, typename T>
LW_FUNC void adj_mul(mat_t<R, C, T> a, T s, mat_t<R, C, T>& adj_a, T& adj_s, mat_t<R, C, T> adj) {
    for (int i = 0; i < R * C; ++i) adj_mul(a.c[i], s, adj_a.c[i], adj_s, adj.c[i]);
}
template <int R, int C, typename T>
LW_FUNC void adj_mul(T s, mat_t<R, C, T> a, T& adj_s, mat_t<R, C, T>& adj_a, mat_t<R, C, T> adj) {
    adj_mul(a, s, adj_a, adj_s, adj);
}
template <int R, int C, typename T>
LW_FUNC void adj_div(mat_t<R, C, T> a, T s, mat_t<R, C, T>& adj_a, T& adj_s, mat_t<R, C, T> adj) {
    for (int i = 0; i < R * C; ++i) adj_div(a.c[i], s, adj_a.c[i], adj_s, adj.c[i]);
}
template <int R, int C, typename T>
LW_FUNC void adj_div(T s, mat_t<R, C, T> a, T& adj_s, mat_t<R, C, T>& adj_a, mat_t<R, C, T> adj) {
    for (int i = 0; i < R * C; ++i) adj_div(s, a.c[i], adj_s, adj_a.c[i], adj.c[i]);
}
template <int R, int C, typename T>
LW_FUNC void adj_mul(mat_t<R, C, T> m, vec_t<C, T> v, mat_t<R, C, T>& adj_m, vec_t<C, T>& adj_v, vec_t<R, T> adj) {
    for (int i = 0; i < R; ++i)
        for (int j = 0; j < C; ++j) {
            acc(adj_m.c[i * C + j], mul(adj.c[i], v.c[j]));
            acc(adj_v.c[j], mul(m.c[i * C + j], adj.c[i]));
        }
}
template <int R, int C, typename T>
LW_FUNC void adj_mul(vec_t<R, T> v, mat_t<R, C, T> m, vec_t<R, T>& adj_v, mat_t<R, C, T>& adj_m, vec_t<C, T> adj) {
    for (int i = 0; i < R; ++i)
        for (int j = 0; j < C; ++j) {
            acc(adj_v.c[i], mul(m.c[i * C + j], adj.c[j]));
            acc(adj_m.c[i * C + j], mul(v.c[i], adj.c[j]));
        }
}
template <int R, int K, int C, typename T>
LW_FUNC void adj_mul(mat_t<R, K, T> a, mat_t<K, C, T> b, mat_t<R, K, T>& adj_a, mat_t<K, C, T>& adj_b,
                     mat_t<R, C, T> adj) {
    for (int i = 0; i < R; ++i)
        for (int j = 0; j < C; ++j)
            for (int k = 0; k < K; ++k) {
                acc(adj_a.c[i * K + k], mul(adj.c[i * C + j], b.c[k * C + j]));
                acc(adj_b.c[k * C + j], mul(a.c[i * K + k], adj.c[i * C + j]));
            }
}
template <int R, int C, typename T> LW_FUNC void adj_transpose(mat_t<R, C, T> a, mat_t<R, C, T>& adj_a, mat_t<C, R, T> adj) {
    acc(adj_a, transpose(adj));
}
template <int N, typename T> LW_FUNC void adj_cw_mul(vec_t<N, T> a, vec_t<N, T> b, vec_t<N, T>& adj_a, vec_t<N, T>& adj_b,
                                                     vec_t<N, T> adj) {
    for (int i = 0; i < N; ++i) adj_mul(a.c[i], b.c[i], adj_a.c[i], adj_b.c[i], adj.c[i]);
}
template <int N, typename T> LW_FUNC void adj_cw_div(vec_t<N, T> a, vec_t<N, T> b, vec_t<N, T>& adj_a, vec_t<N, T>& adj_b,
                                                     vec_t<N, T> adj) {
    for (int i = 0; i < N; ++i) adj_div(a.c[i], b.c[i], adj_a.c[i], adj_b.c[i], adj.c[i]);
}
template <int N, typename T> LW_FUNC void adj_mod(vec_t<N, T> a, vec_t<N, T> b, vec_t<N, T>& adj_a, vec_t<N, T>& adj_b,
                                                  vec_t<N, T> adj) {
    for (int i = 0; i < N; ++i) adj_mod(a.c[i], b.c[i], adj_a.c[i], adj_b.c[i], adj.c[i]);
}
template <int R, int C, typename T>
LW_FUNC void adj_cw_mul(mat_t<R, C, T> a, mat_t<R, C, T> b, mat_t<R, C, T>& adj_a, mat_t<R, C, T>& adj_b, mat_t<R, C, T> adj) {
    for (int i = 0; i < R * C; ++i) adj_mul(a.c[i], b.c[i], adj_a.c[i], adj_b.c[i], adj.c[i]);
}
template <int R, int C, typename T>
LW_FUNC void adj_cw_div(mat_t<R, C, T> a, mat_t<R, C, T> b, mat_t<R, C, T>& adj_a, mat_t<R, C, T>& adj_b, mat_t<R, C, T> adj) {
    for (int i = 0; i < R * C; ++i) adj_div(a.c[i], b.c[i], adj_a.c[i], adj_b.c[i], adj.c[i]);
}
template <int N, typename T> LW_FUNC void adj_dot(vec_t<N, T> a, vec_t<N, T> b, vec_t<N, T>& adj_a, vec_t<N, T>& adj_b, T adj) {
    acc(adj_a, mul(b, adj));
    acc(adj_b, mul(a, adj));
}
template <typename T> LW_FUNC void adj_cross(vec_t<3, T> a, vec_t<3, T> b, vec_t<3, T>& adj_a, vec_t<3, T>& adj_b,
                                             vec_t<3, T> adj) {
    acc(adj_a, cross(b, adj));
    acc(adj_b, cross(adj, a));
}
template <int N, typename T> LW_FUNC void adj_length(vec_t<N, T> a, vec_t<N, T>& adj_a, T adj) {
    T l = length(a);
    if (l > T(0)) acc(adj_a, mul(a, div(adj, l)));
}
template <int N, typename T> LW_FUNC void adj_length_sq(vec_t<N, T> a, vec_t<N, T>& adj_a, T adj) {
    acc(adj_a, mul(a, mul(T(2), adj)));
}
template <int N, typename T> LW_FUNC void adj_normalize(vec_t<N, T> a, vec_t<N, T>& adj_a, vec_t<N, T> adj) {
    T l = length(a);
    if (l > T(0)) {
        vec_t<N, T> n = div(a, l);
        acc(adj_a, div(sub(adj, mul(n, dot(n, adj))), l));
    }
}
template <int N, typename T>
LW_FUNC void adj_lerp(vec_t<N, T> a, vec_t<N, T> b, T t, vec_t<N, T>& adj_a, vec_t<N, T>& adj_b, T& adj_t, vec_t<N, T> adj) {
    acc(adj_a, mul(adj, sub(T(1), t)));
    acc(adj_b, mul(adj, t));
    acc(adj_t, dot(adj, sub(b, a)));
}
template <int R, int C, typename T>
LW_FUNC void adj_lerp(mat_t<R, C, T> a, mat_t<R, C, T> b, T t, mat_t<R, C, T>& adj_a, mat_t<R, C, T>& adj_b, T& adj_t,
                      mat_t<R, C, T> adj) {
    for (int i = 0; i < R * C; ++i) {
        acc(adj_a.c[i], mul(adj.c[i], sub(T(1), t)));
        acc(adj_b.c[i], mul(adj.c[i], t));
        acc(adj_t, mul(adj.c[i], sub(b.c[i], a.c[i])));
    }
}

// constructors, conversions and component access
template <typename V, typename S> LW_FUNC void adj_splat(S s, S& adj_s, V adj) {
    for (int i = 0; i < (int)(sizeof(adj.c) / sizeof(adj.c[0])); ++i) acc(adj_s, adj.c[i]);
}
template <typename T, typename U> LW_FUNC void acc_cast(T& a, U b) { acc(a, cast<T>(b)); }
template <typename V, typename W> LW_FUNC void adj_convert(W w, W& adj_w, V adj) {
    for (int i = 0; i < (int)(sizeof(adj.c) / sizeof(adj.c[0])); ++i) acc_cast(adj_w.c[i], adj.c[i]);
}

// ---------------------------------------------------------------------------------------------
// quaternions (x, y, z, w; w real) and rigid transforms (p then q). Both are vectors underneath, so
// elementwise operations and their adjoints apply; results convert back through the constructors.

template <typename T> struct quat_t : vec_t<4, T> {
    quat_t() = default;
    LW_FUNC quat_t(const vec_t<4, T>& v) : vec_t<4, T>(v) {}
};
template <typename T> struct transform_t : vec_t<7, T> {
    transform_t() = default;
    LW_FUNC transform_t(const vec_t<7, T>& v) : vec_t<7, T>(v) {}
};
// an adjoint of a quaternion or transform that arrives as its plain vector accumulates into it
template <typename T> LW_FUNC void acc(quat_t<T>& a, vec_t<4, T> b) { acc((vec_t<4, T>&)a, b); }
template <typename T> LW_FUNC void acc(transform_t<T>& a, vec_t<7, T> b) { acc((vec_t<7, T>&)a, b); }


template <typename T> LW_FUNC vec_t<3, T> qv(const quat_t<T>& q) { return make<vec_t<3, T>>(q.c[0], q.c[1], q.c[2]); }
template <typename T> LW_FUNC quat_t<T> make_quat(vec_t<3, T> v, T w) { return make<quat_t<T>>(v.c[0], v.c[1], v.c[2], w); }
template <typename T> LW_FUNC quat_t<T> conj(const quat_t<T>& q) { return make<quat_t<T>>(neg(q.c[0]), neg(q.c[1]), neg(q.c[2]), q.c[3]); }

template <typename T> LW_FUNC quat_t<T> quat_identity_t() { return make<quat_t<T>>(T(0), T(0), T(0), T(1)); }
LW_FUNC quat_t<float> quat_identity() { return quat_identity_t<float>(); }

template <typename T> LW_FUNC quat_t<T> mul(quat_t<T> a, quat_t<T> b) {
    vec_t<3, T> av = qv(a), bv = qv(b);
    T aw = a.c[3], bw = b.c[3];
    return make_quat(add(add(mul(aw, bv), mul(bw, av)), cross(av, bv)), sub(mul(aw, bw), dot(av, bv)));
}
template <typename T> LW_FUNC void adj_mul(quat_t<T> a, quat_t<T> b, quat_t<T>& adj_a, quat_t<T>& adj_b, quat_t<T> adj) {
    // <adj, a b> = <adj conj(b), a> = <conj(a) adj, b>
    acc(adj_a, mul(adj, conj(b)));
    acc(adj_b, mul(conj(a), adj));
}
template <typename T> LW_FUNC quat_t<T> quat_inverse(quat_t<T> q) { return conj(q); }
template <typename T> LW_FUNC void adj_quat_inverse(quat_t<T> q, quat_t<T>& adj_q, quat_t<T> adj) { acc(adj_q, conj(adj)); }

template <typename T> LW_FUNC vec_t<3, T> quat_rotate(quat_t<T> q, vec_t<3, T> v) {
    vec_t<3, T> u = qv(q);
    T w = q.c[3];
    return add(add(mul(v, sub(mul(T(2), mul(w, w)), T(1))), mul(cross(u, v), mul(T(2), w))), mul(u, mul(T(2), dot(u, v))));
}
template <typename T>
LW_FUNC void adj_quat_rotate(quat_t<T> q, vec_t<3, T> v, quat_t<T>& adj_q, vec_t<3, T>& adj_v, vec_t<3, T> adj) {
    vec_t<3, T> u = qv(q);
    T w = q.c[3];
    T two = T(2);
    acc(adj_v, add(add(mul(adj, sub(mul(two, mul(w, w)), T(1))), mul(cross(adj, u), mul(two, w))), mul(u, mul(two, dot(u, adj)))));
    T gw = dot(adj, add(mul(v, mul(T(4), w)), mul(cross(u, v), two)));
    vec_t<3, T> gu = add(mul(cross(v, adj), mul(two, w)), mul(add(mul(adj, dot(u, v)), mul(v, dot(adj, u))), two));
    acc(adj_q, make_quat(gu, gw));
}
template <typename T> LW_FUNC vec_t<3, T> quat_rotate_inv(quat_t<T> q, vec_t<3, T> v) { return quat_rotate(conj(q), v); }
template <typename T>
LW_FUNC void adj_quat_rotate_inv(quat_t<T> q, vec_t<3, T> v, quat_t<T>& adj_q, vec_t<3, T>& adj_v, vec_t<3, T> adj) {
    quat_t<T> g = zero<quat_t<T>>();
    adj_quat_rotate(conj(q), v, g, adj_v, adj);
    acc(adj_q, conj(g));
}
template <typename T> LW_FUNC mat_t<3, 3, T> quat_to_matrix(quat_t<T> q) {
    mat_t<3, 3, T> m;
    for (int j = 0; j < 3; ++j) {
        vec_t<3, T> e = zero<vec_t<3, T>>();
        e.c[j] = T(1);
        vec_t<3, T> col = quat_rotate(q, e);
        for (int i = 0; i < 3; ++i) m.c[i * 3 + j] = col.c[i];
    }
    return m;
}
template <typename T> LW_FUNC void adj_quat_to_matrix(quat_t<T> q, quat_t<T>& adj_q, mat_t<3, 3, T> adj) {
    for (int j = 0; j < 3; ++j) {
        vec_t<3, T> e = zero<vec_t<3, T>>(), adj_e = zero<vec_t<3, T>>(), adj_col;
        e.c[j] = T(1);
        for (int i = 0; i < 3; ++i) adj_col.c[i] = adj.c[i * 3 + j];
        adj_quat_rotate(q, e, adj_q, adj_e, adj_col);
    }
}
template <typename T> LW_FUNC quat_t<T> quat_from_axis_angle(vec_t<3, T> axis, T angle) {
    T h = mul(angle, T(0.5));
    return make_quat(mul(axis, sin(h)), cos(h));
}
template <typename T>
LW_FUNC void adj_quat_from_axis_angle(vec_t<3, T> axis, T angle, vec_t<3, T>& adj_axis, T& adj_angle, quat_t<T> adj) {
    T h = mul(angle, T(0.5));
    vec_t<3, T> av = qv(adj);
    acc(adj_axis, mul(av, sin(h)));
    acc(adj_angle, mul(T(0.5), sub(mul(dot(av, axis), cos(h)), mul(adj.c[3], sin(h)))));
}
template <typename T> LW_FUNC quat_t<T> quat_rpy(T roll, T pitch, T yaw) {
    T cr = cos(mul(roll, T(0.5))), sr = sin(mul(roll, T(0.5)));
    T cp = cos(mul(pitch, T(0.5))), sp = sin(mul(pitch, T(0.5)));
    T cy = cos(mul(yaw, T(0.5))), sy = sin(mul(yaw, T(0.5)));
    return make<quat_t<T>>(sub(mul(cy, mul(sr, cp)), mul(sy, mul(cr, sp))), add(mul(cy, mul(cr, sp)), mul(sy, mul(sr, cp))),
                           sub(mul(sy, mul(cr, cp)), mul(cy, mul(sr, sp))), add(mul(cy, mul(cr, cp)), mul(sy, mul(sr, sp))));
}
template <typename T>
LW_FUNC void adj_quat_rpy(T roll, T pitch, T yaw, T& adj_roll, T& adj_pitch, T& adj_yaw, quat_t<T> adj) {
    // each half-angle pair (c, s) enters linearly: differentiate by rotating that pair, (c, s) -> (-s, c) / 2
    T cr = cos(mul(roll, T(0.5))), sr = sin(mul(roll, T(0.5)));
    T cp = cos(mul(pitch, T(0.5))), sp = sin(mul(pitch, T(0.5)));
    T cy = cos(mul(yaw, T(0.5))), sy = sin(mul(yaw, T(0.5)));
    auto q = [](T cr, T sr, T cp, T sp, T cy, T sy) {
        return make<quat_t<T>>(sub(mul(cy, mul(sr, cp)), mul(sy, mul(cr, sp))), add(mul(cy, mul(cr, sp)), mul(sy, mul(sr, cp))),
                               sub(mul(sy, mul(cr, cp)), mul(cy, mul(sr, sp))), add(mul(cy, mul(cr, cp)), mul(sy, mul(sr, sp))));
    };
    acc(adj_roll, mul(T(0.5), dot(adj, q(neg(sr), cr, cp, sp, cy, sy))));
    acc(adj_pitch, mul(T(0.5), dot(adj, q(cr, sr, neg(sp), cp, cy, sy))));
    acc(adj_yaw, mul(T(0.5), dot(adj, q(cr, sr, cp, sp, neg(sy), cy))));
}

template <typename T> LW_FUNC vec_t<3, T> transform_get_translation(transform_t<T> t) { return make<vec_t<3, T>>(t.c[0], t.c[1], t.c[2]); }
template <typename T> LW_FUNC quat_t<T> transform_get_rotation(transform_t<T> t) { return make<quat_t<T>>(t.c[3], t.c[4], t.c[5], t.c[6]); }
template <typename T> LW_FUNC transform_t<T> make_transform(vec_t<3, T> p, quat_t<T> q) {
    return make<transform_t<T>>(p.c[0], p.c[1], p.c[2], q.c[0], q.c[1], q.c[2], q.c[3]);
}
template <typename T> LW_FUNC transform_t<T> transform_identity_t() { return make_transform(zero<vec_t<3, T>>(), quat_identity_t<T>()); }
LW_FUNC transform_t<float> transform_identity() { return transform_identity_t<float>(); }
template <typename T> LW_FUNC void adj_transform_get_translation(transform_t<T> t, transform_t<T>& adj_t, vec_t<3, T> adj) {
    for (int i = 0; i < 3; ++i) acc(adj_t.c[i], adj.c[i]);
}
template <typename T> LW_FUNC void adj_transform_get_rotation(transform_t<T> t, transform_t<T>& adj_t, quat_t<T> adj) {
    for (int i = 0; i < 4; ++i) acc(adj_t.c[3 + i], adj.c[i]);
}
template <typename T>
LW_FUNC void adj_make_transform(vec_t<3, T> p, quat_t<T> q, vec_t<3, T>& adj_p, quat_t<T>& adj_q, transform_t<T> adj) {
    for (int i = 0; i < 3; ++i) acc(adj_p.c[i], adj.c[i]);
    for (int i = 0; i < 4; ++i) acc(adj_q.c[i], adj.c[3 + i]);
}
template <typename T> LW_FUNC vec_t<3, T> transform_point(transform_t<T> t, vec_t<3, T> p) {
    return add(quat_rotate(transform_get_rotation(t), p), transform_get_translation(t));
}
template <typename T>
LW_FUNC void adj_transform_point(transform_t<T> t, vec_t<3, T> p, transform_t<T>& adj_t, vec_t<3, T>& adj_p, vec_t<3, T> adj) {
    quat_t<T> gq = zero<quat_t<T>>();
    adj_quat_rotate(transform_get_rotation(t), p, gq, adj_p, adj);
    for (int i = 0; i < 3; ++i) acc(adj_t.c[i], adj.c[i]);
    for (int i = 0; i < 4; ++i) acc(adj_t.c[3 + i], gq.c[i]);
}
template <typename T> LW_FUNC vec_t<3, T> transform_vector(transform_t<T> t, vec_t<3, T> v) {
    return quat_rotate(transform_get_rotation(t), v);
}
template <typename T>
LW_FUNC void adj_transform_vector(transform_t<T> t, vec_t<3, T> v, transform_t<T>& adj_t, vec_t<3, T>& adj_v, vec_t<3, T> adj) {
    quat_t<T> gq = zero<quat_t<T>>();
    adj_quat_rotate(transform_get_rotation(t), v, gq, adj_v, adj);
    for (int i = 0; i < 4; ++i) acc(adj_t.c[3 + i], gq.c[i]);
}
template <typename T> LW_FUNC transform_t<T> transform_multiply(transform_t<T> a, transform_t<T> b) {
    quat_t<T> aq = transform_get_rotation(a);
    return make_transform(add(transform_get_translation(a), quat_rotate(aq, transform_get_translation(b))),
                          mul(aq, transform_get_rotation(b)));
}
template <typename T> LW_FUNC transform_t<T> mul(transform_t<T> a, transform_t<T> b) { return transform_multiply(a, b); }
template <typename T>
LW_FUNC void adj_transform_multiply(transform_t<T> a, transform_t<T> b, transform_t<T>& adj_a, transform_t<T>& adj_b,
                                   transform_t<T> adj) {
    quat_t<T> aq = transform_get_rotation(a), bq = transform_get_rotation(b);
    quat_t<T> gaq = zero<quat_t<T>>(), gbq = zero<quat_t<T>>();
    vec_t<3, T> gbp = zero<vec_t<3, T>>();
    vec_t<3, T> adj_p = transform_get_translation(adj);
    adj_quat_rotate(aq, transform_get_translation(b), gaq, gbp, adj_p);
    adj_mul(aq, bq, gaq, gbq, transform_get_rotation(adj));
    for (int i = 0; i < 3; ++i) {
        acc(adj_a.c[i], adj_p.c[i]);
        acc(adj_b.c[i], gbp.c[i]);
    }
    for (int i = 0; i < 4; ++i) {
        acc(adj_a.c[3 + i], gaq.c[i]);
        acc(adj_b.c[3 + i], gbq.c[i]);
    }
}
template <typename T>
LW_FUNC void adj_mul(transform_t<T> a, transform_t<T> b, transform_t<T>& adj_a, transform_t<T>& adj_b, transform_t<T> adj) {
    adj_transform_multiply(a, b, adj_a, adj_b, adj);
}
template <typename T> LW_FUNC transform_t<T> transform_inverse(transform_t<T> t) {
    quat_t<T> qi = conj(transform_get_rotation(t));
    return make_transform(neg(quat_rotate(qi, transform_get_translation(t))), qi);
}
template <typename T> LW_FUNC void adj_transform_inverse(transform_t<T> t, transform_t<T>& adj_t, transform_t<T> adj) {
    quat_t<T> qi = conj(transform_get_rotation(t));
    quat_t<T> gqi = transform_get_rotation(adj);
    vec_t<3, T> gp = zero<vec_t<3, T>>();
    adj_quat_rotate(qi, transform_get_translation(t), gqi, gp, neg(transform_get_translation(adj)));
    quat_t<T> gq = conj(gqi);
    for (int i = 0; i < 3; ++i) acc(adj_t.c[i], gp.c[i]);
    for (int i = 0; i < 4; ++i) acc(adj_t.c[3 + i], gq.c[i]);
}

// ---------------------------------------------------------------------------------------------
// random numbers: a 32-bit state advanced by a permuted congruential step (PCG's RXS-M-XS output
// permutation applied to an LCG step). Each draw advances the caller's state (an in-out argument) and
// maps the new state(s) through a pure function `<name>_of`.

LW_FUNC uint32_t rand_next(uint32_t s) {
    uint32_t x = s * 747796405u + 2891336453u;
    x = ((x >> ((x >> 28u) + 4u)) ^ x) * 277803737u;
    return (x >> 22u) ^ x;
}
LW_FUNC uint32_t rand_init(int32_t seed) { return rand_next((uint32_t)seed); }
LW_FUNC uint32_t rand_init(int32_t seed, int32_t offset) { return rand_next((uint32_t)seed + rand_next((uint32_t)offset)); }
LW_FUNC float rand_unit(uint32_t s) { return (float)(s >> 8) * (1.0f / 16777216.0f); }  // [0, 1), 24 bits
LW_FUNC int32_t randi_of(uint32_t s) { return (int32_t)s; }
LW_FUNC int32_t randi_of(uint32_t s, int32_t lo, int32_t hi) {
    uint32_t span = (uint32_t)(hi - lo);
    return span == 0u ? lo : lo + (int32_t)(s % span);
}
LW_FUNC float randf_of(uint32_t s) { return rand_unit(s); }
LW_FUNC float randf_of(uint32_t s, float lo, float hi) { return lo + (hi - lo) * rand_unit(s); }
LW_FUNC uint32_t draw(uint32_t& s) { return s = rand_next(s); }
LW_FUNC int32_t randi(uint32_t& s) { return randi_of(draw(s)); }
LW_FUNC int32_t randi(uint32_t& s, int32_t lo, int32_t hi) { return randi_of(draw(s), lo, hi); }
LW_FUNC float randf(uint32_t& s) { return randf_of(draw(s)); }
LW_FUNC float randf(uint32_t& s, float lo, float hi) { return randf_of(draw(s), lo, hi); }
// the adjoint gets the inputs (lo, hi), then the state as it was before the draw, then the adjoints
template <typename Rec>
LW_FUNC void adj_randf(float lo, float hi, uint32_t s, float& adj_lo, float& adj_hi, uint32_t& adj_s, const Rec& adj) {
    float u = rand_unit(rand_next(s));
    adj_lo += adj.f0 * (1.0f - u);
    adj_hi += adj.f0 * u;
}
LW_FUNC float randn_of(uint32_t s1, uint32_t s2) {  // Box-Muller on two uniforms, Warp's stream: u1 in (0, 1)
    float u1 = rand_unit(s1) + 5.96e-8f, u2 = rand_unit(s2);
    return sqrt(-2.0f * log(u1)) * cos(6.283185307179586f * u2);
}
LW_FUNC float randn(uint32_t& s) { uint32_t a = draw(s), b = draw(s); return randn_of(a, b); }

// ---------------------------------------------------------------------------------------------
// more vector and matrix math

template <int N, int M, typename T> LW_FUNC mat_t<N, M, T> outer(vec_t<N, T> a, vec_t<M, T> b) {
    mat_t<N, M, T> r;
    for (int i = 0; i < N; ++i)
        for (int j = 0; j < M; ++j) r.c[i * M + j] = mul(a.c[i], b.c[j]);
    return r;
}
template <int N, int M, typename T>
LW_FUNC void adj_outer(vec_t<N, T> a, vec_t<M, T> b, vec_t<N, T>& adj_a, vec_t<M, T>& adj_b, mat_t<N, M, T> adj) {
    for (int i = 0; i < N; ++i)
        for (int j = 0; j < M; ++j) {
            acc(adj_a.c[i], mul(adj.c[i * M + j], b.c[j]));
            acc(adj_b.c[j], mul(adj.c[i * M + j], a.c[i]));
        }
}
template <typename T> LW_FUNC mat_t<3, 3, T> skew(vec_t<3, T> v) {
    T z = T(0);
    return make<mat_t<3, 3, T>>(z, neg(v.c[2]), v.c[1], v.c[2], z, neg(v.c[0]), neg(v.c[1]), v.c[0], z);
}
template <typename T> LW_FUNC void adj_skew(vec_t<3, T> v, vec_t<3, T>& adj_v, mat_t<3, 3, T> adj) {
    acc(adj_v.c[0], sub(adj.c[7], adj.c[5]));
    acc(adj_v.c[1], sub(adj.c[2], adj.c[6]));
    acc(adj_v.c[2], sub(adj.c[3], adj.c[1]));
}
template <int N, typename T> LW_FUNC T trace(mat_t<N, N, T> m) {
    T s = m.c[0];
    for (int i = 1; i < N; ++i) s = add(s, m.c[i * N + i]);
    return s;
}
template <int N, typename T> LW_FUNC void adj_trace(mat_t<N, N, T> m, mat_t<N, N, T>& adj_m, T adj) {
    for (int i = 0; i < N; ++i) acc(adj_m.c[i * N + i], adj);
}
template <int N, typename T> LW_FUNC mat_t<N, N, T> diag(vec_t<N, T> v) {
    mat_t<N, N, T> r = zero<mat_t<N, N, T>>();
    for (int i = 0; i < N; ++i) r.c[i * N + i] = v.c[i];
    return r;
}
template <int N, typename T> LW_FUNC void adj_diag(vec_t<N, T> v, vec_t<N, T>& adj_v, mat_t<N, N, T> adj) {
    for (int i = 0; i < N; ++i) acc(adj_v.c[i], adj.c[i * N + i]);
}

// determinants by cofactor expansion (N <= 4); cofactor(m)(i, j) = (-1)^(i+j) det(minor(i, j))
template <int N, typename T> LW_FUNC mat_t<N - 1, N - 1, T> minor_of(const mat_t<N, N, T>& m, int i, int j) {
    mat_t<N - 1, N - 1, T> r;
    int k = 0;
    for (int a = 0; a < N; ++a)
        for (int b = 0; b < N; ++b)
            if (a != i && b != j) r.c[k++] = m.c[a * N + b];
    return r;
}
template <typename T> LW_FUNC T det_of(const mat_t<1, 1, T>& m) { return m.c[0]; }
template <int N, typename T> LW_FUNC T det_of(const mat_t<N, N, T>& m) {
    T s = T(0);
    for (int j = 0; j < N; ++j) {
        T term = mul(m.c[j], det_of(minor_of(m, 0, j)));
        s = (j % 2) ? sub(s, term) : add(s, term);
    }
    return s;
}
template <int N, typename T> LW_FUNC mat_t<N, N, T> cofactor(const mat_t<N, N, T>& m) {
    mat_t<N, N, T> c;
    for (int i = 0; i < N; ++i)
        for (int j = 0; j < N; ++j) {
            T d = det_of(minor_of(m, i, j));
            c.c[i * N + j] = ((i + j) % 2) ? neg(d) : d;
        }
    return c;
}
template <typename T> LW_FUNC mat_t<1, 1, T> cofactor(const mat_t<1, 1, T>& m) { return make<mat_t<1, 1, T>>(T(1)); }
// float32 determinants (and their cofactors) are summed in double: the expansion's terms cancel, and in
// float32 a 4x4's rounding shows in finite differences of it
template <typename T> struct det_precision { using type = T; };
template <> struct det_precision<float> { using type = double; };
template <int N, typename W, typename T> LW_FUNC mat_t<N, N, W> widened(const mat_t<N, N, T>& m) {
    mat_t<N, N, W> r;
    for (int i = 0; i < N * N; ++i) r.c[i] = W(m.c[i]);
    return r;
}
template <int N, typename T> LW_FUNC T determinant(mat_t<N, N, T> m) {
    return T(det_of(widened<N, typename det_precision<T>::type>(m)));
}
template <int N, typename T> LW_FUNC void adj_determinant(mat_t<N, N, T> m, mat_t<N, N, T>& adj_m, T adj) {
    using W = typename det_precision<T>::type;
    mat_t<N, N, W> c = cofactor(widened<N, W>(m));
    mat_t<N, N, T> r;
    for (int i = 0; i < N * N; ++i) r.c[i] = mul(T(c.c[i]), adj);
    acc(adj_m, r);
}
template <int N, typename T> LW_FUNC mat_t<N, N, T> inverse(mat_t<N, N, T> m) {
    T d = det_of(m);
    return d == T(0) ? zero<mat_t<N, N, T>>() : div(transpose(cofactor(m)), d);  // singular: zeros, like Warp
}
template <int N, typename T> LW_FUNC void adj_inverse(mat_t<N, N, T> m, mat_t<N, N, T>& adj_m, mat_t<N, N, T> adj) {
    mat_t<N, N, T> inv = inverse(m);
    mat_t<N, N, T> it = transpose(inv);
    acc(adj_m, neg(mul(mul(it, adj), it)));
}

template <int N, typename T> LW_FUNC T norm_l1(vec_t<N, T> v) {
    T s = abs(v.c[0]);
    for (int i = 1; i < N; ++i) s = add(s, abs(v.c[i]));
    return s;
}
template <int N, typename T> LW_FUNC void adj_norm_l1(vec_t<N, T> v, vec_t<N, T>& adj_v, T adj) {
    for (int i = 0; i < N; ++i) adj_abs(v.c[i], adj_v.c[i], adj);
}
template <int N, typename T> LW_FUNC T norm_l2(vec_t<N, T> v) { return length(v); }
template <int N, typename T> LW_FUNC void adj_norm_l2(vec_t<N, T> v, vec_t<N, T>& adj_v, T adj) { adj_length(v, adj_v, adj); }

// select(cond, a, b) is b when cond holds (Warp's argument order); where(cond, a, b) is a when it holds
template <typename V> LW_FUNC V select(bool c, V a, V b) { return c ? b : a; }
template <typename V> LW_FUNC void adj_select(bool c, V a, V b, bool& adj_c, V& adj_a, V& adj_b, V adj) {
    if (c) acc(adj_b, adj); else acc(adj_a, adj);
}
template <typename V> LW_FUNC V where(bool c, V a, V b) { return c ? a : b; }
template <typename V> LW_FUNC void adj_where(bool c, V a, V b, bool& adj_c, V& adj_a, V& adj_b, V adj) {
    if (c) acc(adj_a, adj); else acc(adj_b, adj);
}

// ---------------------------------------------------------------------------------------------
// exchange, compare-and-swap and bitwise atomics (integers; exch and cas on floats too). Each returns
// the previous value.

#if LW_CUDA
template <typename T> LW_DEVICE T atomic_exch(T* p, T v) { return atomicExch(p, v); }
LW_DEVICE int64_t atomic_exch(int64_t* p, int64_t v) {
    return (int64_t)atomicExch((unsigned long long*)p, (unsigned long long)v);
}
LW_DEVICE double atomic_exch(double* p, double v) {
    return __longlong_as_double((long long)atomicExch((unsigned long long*)p, (unsigned long long)__double_as_longlong(v)));
}
template <typename T> LW_DEVICE T atomic_cas(T* p, T cmp, T v) { return atomicCAS(p, cmp, v); }
LW_DEVICE int64_t atomic_cas(int64_t* p, int64_t cmp, int64_t v) {
    return (int64_t)atomicCAS((unsigned long long*)p, (unsigned long long)cmp, (unsigned long long)v);
}
LW_DEVICE float atomic_cas(float* p, float cmp, float v) {
    return __int_as_float(atomicCAS((int*)p, __float_as_int(cmp), __float_as_int(v)));
}
LW_DEVICE double atomic_cas(double* p, double cmp, double v) {
    return __longlong_as_double((long long)atomicCAS((unsigned long long*)p, (unsigned long long)__double_as_longlong(cmp),
                                                     (unsigned long long)__double_as_longlong(v)));
}
template <typename T> LW_DEVICE T atomic_and(T* p, T v) { return atomicAnd(p, v); }
template <typename T> LW_DEVICE T atomic_or(T* p, T v) { return atomicOr(p, v); }
template <typename T> LW_DEVICE T atomic_xor(T* p, T v) { return atomicXor(p, v); }
LW_DEVICE int64_t atomic_and(int64_t* p, int64_t v) { return (int64_t)atomicAnd((unsigned long long*)p, (unsigned long long)v); }
LW_DEVICE int64_t atomic_or(int64_t* p, int64_t v) { return (int64_t)atomicOr((unsigned long long*)p, (unsigned long long)v); }
LW_DEVICE int64_t atomic_xor(int64_t* p, int64_t v) { return (int64_t)atomicXor((unsigned long long*)p, (unsigned long long)v); }
#else
template <typename T> inline T atomic_exch(T* p, T v) {
    T old;
    __atomic_exchange(p, &v, &old, __ATOMIC_SEQ_CST);
    return old;
}
template <typename T> inline T atomic_cas(T* p, T cmp, T v) {
    __atomic_compare_exchange(p, &cmp, &v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
    return cmp;  // on failure the builtin stored the current value here; on success it is the old value
}
template <typename T> inline T atomic_and(T* p, T v) { return __atomic_fetch_and(p, v, __ATOMIC_SEQ_CST); }
template <typename T> inline T atomic_or(T* p, T v) { return __atomic_fetch_or(p, v, __ATOMIC_SEQ_CST); }
template <typename T> inline T atomic_xor(T* p, T v) { return __atomic_fetch_xor(p, v, __ATOMIC_SEQ_CST); }
#endif
LW_COMPONENT_ATOMIC(and)
LW_COMPONENT_ATOMIC(or)
LW_COMPONENT_ATOMIC(xor)
#undef LW_COMPONENT_ATOMIC

// ---------------------------------------------------------------------------------------------
// spatial vectors (6 components: the angular part w on top, the linear part v at the bottom)

template <typename T> LW_FUNC vec_t<3, T> spatial_top(vec_t<6, T> a) { return make<vec_t<3, T>>(a.c[0], a.c[1], a.c[2]); }
template <typename T> LW_FUNC vec_t<3, T> spatial_bottom(vec_t<6, T> a) { return make<vec_t<3, T>>(a.c[3], a.c[4], a.c[5]); }
template <typename T> LW_FUNC vec_t<6, T> make_spatial(vec_t<3, T> w, vec_t<3, T> v) {
    return make<vec_t<6, T>>(w.c[0], w.c[1], w.c[2], v.c[0], v.c[1], v.c[2]);
}
template <typename T> LW_FUNC void adj_spatial_top(vec_t<6, T> a, vec_t<6, T>& adj_a, vec_t<3, T> adj) {
    for (int i = 0; i < 3; ++i) acc(adj_a.c[i], adj.c[i]);
}
template <typename T> LW_FUNC void adj_spatial_bottom(vec_t<6, T> a, vec_t<6, T>& adj_a, vec_t<3, T> adj) {
    for (int i = 0; i < 3; ++i) acc(adj_a.c[3 + i], adj.c[i]);
}
template <typename T>
LW_FUNC void adj_make_spatial(vec_t<3, T> w, vec_t<3, T> v, vec_t<3, T>& adj_w, vec_t<3, T>& adj_v, vec_t<6, T> adj) {
    acc(adj_w, spatial_top(adj));
    acc(adj_v, spatial_bottom(adj));
}
template <typename T> LW_FUNC T spatial_dot(vec_t<6, T> a, vec_t<6, T> b) { return dot(a, b); }
template <typename T> LW_FUNC void adj_spatial_dot(vec_t<6, T> a, vec_t<6, T> b, vec_t<6, T>& adj_a, vec_t<6, T>& adj_b, T adj) {
    adj_dot(a, b, adj_a, adj_b, adj);
}
// motion cross product: [wa x wb ; va x wb + wa x vb]
template <typename T> LW_FUNC vec_t<6, T> spatial_cross(vec_t<6, T> a, vec_t<6, T> b) {
    vec_t<3, T> wa = spatial_top(a), va = spatial_bottom(a), wb = spatial_top(b), vb = spatial_bottom(b);
    return make_spatial(cross(wa, wb), add(cross(va, wb), cross(wa, vb)));
}
template <typename T>
LW_FUNC void adj_spatial_cross(vec_t<6, T> a, vec_t<6, T> b, vec_t<6, T>& adj_a, vec_t<6, T>& adj_b, vec_t<6, T> adj) {
    vec_t<3, T> wa = spatial_top(a), va = spatial_bottom(a), wb = spatial_top(b), vb = spatial_bottom(b);
    vec_t<3, T> gt = spatial_top(adj), gb = spatial_bottom(adj);
    vec_t<3, T> gwa = zero<vec_t<3, T>>(), gva = gwa, gwb = gwa, gvb = gwa;
    adj_cross(wa, wb, gwa, gwb, gt);
    adj_cross(va, wb, gva, gwb, gb);
    adj_cross(wa, vb, gwa, gvb, gb);
    acc(adj_a, make_spatial(gwa, gva));
    acc(adj_b, make_spatial(gwb, gvb));
}
// force cross product: [wa x wb + va x vb ; wa x vb]
template <typename T> LW_FUNC vec_t<6, T> spatial_cross_dual(vec_t<6, T> a, vec_t<6, T> b) {
    vec_t<3, T> wa = spatial_top(a), va = spatial_bottom(a), wb = spatial_top(b), vb = spatial_bottom(b);
    return make_spatial(add(cross(wa, wb), cross(va, vb)), cross(wa, vb));
}
template <typename T>
LW_FUNC void adj_spatial_cross_dual(vec_t<6, T> a, vec_t<6, T> b, vec_t<6, T>& adj_a, vec_t<6, T>& adj_b, vec_t<6, T> adj) {
    vec_t<3, T> wa = spatial_top(a), va = spatial_bottom(a), wb = spatial_top(b), vb = spatial_bottom(b);
    vec_t<3, T> gt = spatial_top(adj), gb = spatial_bottom(adj);
    vec_t<3, T> gwa = zero<vec_t<3, T>>(), gva = gwa, gwb = gwa, gvb = gwa;
    adj_cross(wa, wb, gwa, gwb, gt);
    adj_cross(va, vb, gva, gvb, gt);
    adj_cross(wa, vb, gwa, gvb, gb);
    acc(adj_a, make_spatial(gwa, gva));
    acc(adj_b, make_spatial(gwb, gvb));
}

// ---------------------------------------------------------------------------------------------
// random sampling: pure functions of the states drawn for them

LW_FUNC uint32_t randu_of(uint32_t s) { return s; }
LW_FUNC uint32_t randu_of(uint32_t s, uint32_t lo, uint32_t hi) {
    uint32_t span = hi - lo;
    return span == 0u ? lo : lo + s % span;
}
LW_FUNC uint32_t randu(uint32_t& s) { return randu_of(draw(s)); }
LW_FUNC uint32_t randu(uint32_t& s, uint32_t lo, uint32_t hi) { return randu_of(draw(s), lo, hi); }
LW_FUNC vec_t<2, float> sample_unit_square_of(uint32_t a, uint32_t b) {
    return make<vec_t<2, float>>(rand_unit(a) - 0.5f, rand_unit(b) - 0.5f);
}
LW_FUNC vec_t<3, float> sample_unit_cube_of(uint32_t a, uint32_t b, uint32_t c) {
    return make<vec_t<3, float>>(rand_unit(a) - 0.5f, rand_unit(b) - 0.5f, rand_unit(c) - 0.5f);
}
LW_FUNC vec_t<2, float> sample_unit_ring_of(uint32_t a) {
    float t = 6.283185307179586f * rand_unit(a);
    return make<vec_t<2, float>>(cos(t), sin(t));
}
LW_FUNC vec_t<2, float> sample_unit_disk_of(uint32_t a, uint32_t b) {
    float r = sqrt(rand_unit(a)), t = 6.283185307179586f * rand_unit(b);
    return make<vec_t<2, float>>(r * cos(t), r * sin(t));
}
LW_FUNC vec_t<3, float> sample_unit_sphere_surface_of(uint32_t a, uint32_t b) {
    float z = 1.0f - 2.0f * rand_unit(a), r = sqrt(max(0.0f, 1.0f - z * z)), t = 6.283185307179586f * rand_unit(b);
    return make<vec_t<3, float>>(r * cos(t), r * sin(t), z);
}
LW_FUNC vec_t<3, float> sample_unit_sphere_of(uint32_t a, uint32_t b, uint32_t c) {
    return mul(sample_unit_sphere_surface_of(a, b), cbrt(rand_unit(c)));
}
LW_FUNC vec_t<3, float> sample_unit_hemisphere_surface_of(uint32_t a, uint32_t b) {
    vec_t<3, float> v = sample_unit_sphere_surface_of(a, b);
    v.c[2] = abs(v.c[2]);
    return v;
}
LW_FUNC vec_t<3, float> sample_unit_hemisphere_of(uint32_t a, uint32_t b, uint32_t c) {
    return mul(sample_unit_hemisphere_surface_of(a, b), cbrt(rand_unit(c)));
}
LW_FUNC vec_t<2, float> sample_triangle_of(uint32_t a, uint32_t b) {  // uniform barycentrics (u, v), u + v <= 1
    float r = sqrt(rand_unit(a)), t = rand_unit(b);
    return make<vec_t<2, float>>(1.0f - r, r * t);
}
// the samplers as draws: sample_unit_square(state) and so on
#define LW_DRAW1(name) LW_FUNC auto name(uint32_t& s) { uint32_t a = draw(s); return name##_of(a); }
#define LW_DRAW2(name) LW_FUNC auto name(uint32_t& s) { uint32_t a = draw(s), b = draw(s); return name##_of(a, b); }
#define LW_DRAW3(name) \
    LW_FUNC auto name(uint32_t& s) { uint32_t a = draw(s), b = draw(s), c = draw(s); return name##_of(a, b, c); }
LW_DRAW2(sample_unit_square)
LW_DRAW3(sample_unit_cube)
LW_DRAW1(sample_unit_ring)
LW_DRAW2(sample_unit_disk)
LW_DRAW2(sample_unit_sphere_surface)
LW_DRAW3(sample_unit_sphere)
LW_DRAW2(sample_unit_hemisphere_surface)
LW_DRAW3(sample_unit_hemisphere)
LW_DRAW2(sample_triangle)
#undef LW_DRAW1
#undef LW_DRAW2
#undef LW_DRAW3
// Poisson counts: Knuth's product of uniforms for small means, a rounded normal for large ones
LW_FUNC uint32_t poisson(uint32_t& s, float lam) {
    if (lam > 30.0f) {
        float x = lam + sqrt(lam) * randn(s);
        return x < 0.0f ? 0u : (uint32_t)(x + 0.5f);
    }
    float limit = exp(-lam), p = 1.0f;
    uint32_t k = 0;
    while ((p *= rand_unit(draw(s))) > limit) ++k;
    return k;
}
// inverse-transform sampling: the first index whose cdf entry is >= u (binary search)
template <typename T> LW_FUNC int32_t sample_cdf_of(uint32_t s, const array_t<T>& cdf) {
    T u = T(rand_unit(s));
    int32_t lo = 0, hi = cdf.shape[0] - 1;
    if (hi < 0) return 0;
    while (lo < hi) {
        int32_t mid = lo + (hi - lo) / 2;
        if (at(cdf, mid) < u) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}
template <typename T> LW_FUNC int32_t sample_cdf(uint32_t& s, const array_t<T>& cdf) { return sample_cdf_of(draw(s), cdf); }

// ---------------------------------------------------------------------------------------------
// gradient (Perlin) noise in 1 to 4 dimensions, the same field as Warp's for the same state: each lattice
// point's gradient is a normalized uniform draw in [-0.5, 0.5]^D (uniform in [-1, 1] in 1-D) from a hash of
// its coordinates plus the state; corner values are blended axis by axis (x first) with the quintic fade.
// The blend carries the value, its gradient and Hessian (noise/pnoise adjoints use the gradient,
// curlnoise's value the gradient and its adjoint the Hessian).

template <int D> struct noise_jet {
    float v;
    vec_t<D, float> g;
    mat_t<D, D, float> h;
};
LW_FUNC float fade(float t) { return t * t * t * (t * (t * 6.0f - 15.0f) + 10.0f); }
LW_FUNC float fade_deriv(float t) { return 30.0f * t * t * (t * (t - 2.0f) + 1.0f); }
LW_FUNC float fade_deriv2(float t) { return 60.0f * t * (t * (t * 2.0f - 3.0f) + 1.0f); }

template <int D> LW_FUNC vec_t<D, float> lattice_gradient(uint32_t state, const int32_t* cell) {
    const uint32_t primes[4] = {73856093u, 19349663u, 53471161u, 10000019u};
    uint32_t h = 0;  // c0 p0 ^ c1 p1 ^ ... ^ (cL pL + state): the last axis's term carries the state
    for (int k = 0; k < D - 1; ++k) h ^= (uint32_t)cell[k] * primes[k];
    h ^= (uint32_t)cell[D - 1] * primes[D - 1] + state;
    vec_t<D, float> g;
    if (D == 1) {
        g.c[0] = randf_of(rand_next(h), -1.0f, 1.0f);
        return g;
    }
    for (int k = 0; k < D; ++k) g.c[k] = rand_unit(h = rand_next(h)) - 0.5f;
    return normalize(g);
}

// the jet of the noise field at fractional position f within the cell whose corners are lo (offset 0)
// and hi (offset 1) per axis; with_hessian = false leaves h unset
template <int D, bool with_hessian>
LW_FUNC noise_jet<D> noise_cell(uint32_t state, const int32_t* lo, const int32_t* hi, const float* f) {
    noise_jet<D> j[1 << D];
    for (int corner = 0; corner < (1 << D); ++corner) {
        int32_t cell[D];
        float off[D];
        for (int k = 0; k < D; ++k) {
            const bool up = (corner >> k) & 1;
            cell[k] = up ? hi[k] : lo[k];
            off[k] = up ? f[k] - 1.0f : f[k];
        }
        j[corner].g = lattice_gradient<D>(state, cell);
        float v = off[0] * j[corner].g.c[0];
        for (int k = 1; k < D; ++k) v += off[k] * j[corner].g.c[k];
        j[corner].v = v;
        if (with_hessian) j[corner].h = zero<mat_t<D, D, float>>();
    }
    for (int k = 0; k < D; ++k) {  // blend along axis k: corner c (bits 0..k clear) with c + 2^k, into c
        const float s = fade(f[k]), ds = fade_deriv(f[k]), dds = fade_deriv2(f[k]);
        const int step = 1 << k;
        for (int c = 0; c < (1 << D); c += 2 * step) {
            noise_jet<D>& a = j[c];
            const noise_jet<D>& b = j[c + step];
            const float dv = b.v - a.v, slope = dv * ds;
            vec_t<D, float> dg;
            for (int i = 0; i < D; ++i) dg.c[i] = b.g.c[i] - a.g.c[i];
            if (with_hessian) {
                for (int r = 0; r < D; ++r)
                    for (int q = 0; q < D; ++q) {
                        float e = (b.h(r, q) - a.h(r, q)) * s;
                        if (r == k) e += ds * dg.c[q];
                        if (q == k) e += ds * dg.c[r];
                        if (r == k && q == k) e += dv * dds;
                        a.h(r, q) += e;
                    }
            }
            for (int i = 0; i < D; ++i) a.g.c[i] = dg.c[i] * s + slope * (i == k ? 1.0f : 0.0f) + a.g.c[i];
            a.v = dv * s + a.v;
        }
    }
    return j[0];
}

// periods: nullptr, or one per axis (a period <= 0 leaves that axis unwrapped)
template <int D, bool with_hessian>
LW_FUNC noise_jet<D> noise_at(uint32_t state, const vec_t<D, float>& x, const int32_t* period) {
    int32_t lo[D], hi[D];
    float f[D];
    for (int k = 0; k < D; ++k) {
        const float b = floor(x.c[k]);
        f[k] = x.c[k] - b;
        lo[k] = (int32_t)b;
        hi[k] = lo[k] + 1;
        if (period && period[k] > 0) {  // Warp's cells for x >= 0; Warp's C remainder breaks the period below 0
            lo[k] = (lo[k] % period[k] + period[k]) % period[k];
            hi[k] = (lo[k] + 1) % period[k];
        }
    }
    return noise_cell<D, with_hessian>(state, lo, hi, f);
}
LW_FUNC float noise(uint32_t seed, float x) { return noise_at<1, false>(seed, make<vec_t<1, float>>(x), nullptr).v; }
template <int D> LW_FUNC float noise(uint32_t seed, vec_t<D, float> x) { return noise_at<D, false>(seed, x, nullptr).v; }
LW_FUNC void adj_noise(uint32_t seed, float x, uint32_t&, float& adj_x, float adj) {
    adj_x += adj * noise_at<1, false>(seed, make<vec_t<1, float>>(x), nullptr).g.c[0];
}
template <int D> LW_FUNC void adj_noise(uint32_t seed, vec_t<D, float> x, uint32_t&, vec_t<D, float>& adj_x, float adj) {
    acc(adj_x, mul(noise_at<D, false>(seed, x, nullptr).g, adj));
}
LW_FUNC float pnoise(uint32_t seed, float x, int32_t px) {
    return noise_at<1, false>(seed, make<vec_t<1, float>>(x), &px).v;
}
LW_FUNC void adj_pnoise(uint32_t seed, float x, int32_t px, uint32_t&, float& adj_x, int32_t&, float adj) {
    adj_x += adj * noise_at<1, false>(seed, make<vec_t<1, float>>(x), &px).g.c[0];
}
#define LW_PNOISE(D, PARAMS, ADJ_PARAMS, ...)                                                                 \
    LW_FUNC float pnoise(uint32_t seed, vec_t<D, float> x, PARAMS) {                                         \
        const int32_t p[D] = {__VA_ARGS__};                                                                  \
        return noise_at<D, false>(seed, x, p).v;                                                             \
    }                                                                                                        \
    LW_FUNC void adj_pnoise(uint32_t seed, vec_t<D, float> x, PARAMS, uint32_t&, vec_t<D, float>& adj_x,      \
                            ADJ_PARAMS, float adj) {                                                         \
        const int32_t p[D] = {__VA_ARGS__};                                                                  \
        acc(adj_x, mul(noise_at<D, false>(seed, x, p).g, adj));                                              \
    }
#define LW_COMMA ,
LW_PNOISE(2, int32_t px LW_COMMA int32_t py, int32_t& LW_COMMA int32_t&, px, py)
LW_PNOISE(3, int32_t px LW_COMMA int32_t py LW_COMMA int32_t pz, int32_t& LW_COMMA int32_t& LW_COMMA int32_t&, px, py,
          pz)
LW_PNOISE(4, int32_t px LW_COMMA int32_t py LW_COMMA int32_t pz LW_COMMA int32_t pt,
          int32_t& LW_COMMA int32_t& LW_COMMA int32_t& LW_COMMA int32_t&, px, py, pz, pt)
#undef LW_PNOISE
#undef LW_COMMA

// divergence-free noise, Warp's field: octaves of the noise gradient at freq * x (freq *= lacunarity and the
// amplitude *= gain per octave). In 2-D the curl of one potential, (-dN/dy, dN/dx), all octaves with one
// state; in 3-D (and for vec4 = (x, y, z, t)) of three potentials, the state re-seeded before the second
// and third potential of each octave. `adjoint` accumulates J^T adj (J from the potentials' Hessians).
template <int D>
LW_FUNC auto curlnoise_eval(uint32_t state, vec_t<D, float> x, uint32_t octaves, float lacunarity, float gain,
                            const vec_t<(D == 2 ? 2 : 3), float>* adj, vec_t<D, float>* adj_x) {
    constexpr int fields = D == 2 ? 1 : 3;
    vec_t<D, float> sum[fields];
    for (int n = 0; n < fields; ++n) sum[n] = zero<vec_t<D, float>>();
    float freq = 1.0f, amp = 1.0f;
    for (uint32_t o = 0; o < octaves; ++o) {
        const vec_t<D, float> pt = mul(freq, x);
        noise_jet<D> jet[fields];
        for (int n = 0; n < fields; ++n) {
            if (n == 1) state = rand_init((int32_t)state, 10019689);
            if (n == 2) state = rand_init((int32_t)state, 13112221);
            jet[n] = adj ? noise_at<D, true>(state, pt, nullptr) : noise_at<D, false>(state, pt, nullptr);
            sum[n] = add(sum[n], mul(amp, jet[n].g));
        }
        if (adj) {  // d out / d x = amp * freq * (rows of the Hessians), applied transposed to adj
            const float scale = amp * freq;
            for (int q = 0; q < D; ++q) {
                float g;
                if constexpr (D == 2) {
                    g = -jet[0].h(1, q) * adj->c[0] + jet[0].h(0, q) * adj->c[1];
                } else {
                    g = (jet[2].h(1, q) - jet[1].h(2, q)) * adj->c[0] +
                        (jet[0].h(2, q) - jet[2].h(0, q)) * adj->c[1] +
                        (jet[1].h(0, q) - jet[0].h(1, q)) * adj->c[2];
                }
                adj_x->c[q] += scale * g;
            }
        }
        amp *= gain;
        freq *= lacunarity;
    }
    vec_t<(D == 2 ? 2 : 3), float> r;
    if constexpr (D == 2) {
        r.c[0] = -sum[0].c[1];
        r.c[1] = sum[0].c[0];
    } else {
        r.c[0] = sum[2].c[1] - sum[1].c[2];
        r.c[1] = sum[0].c[2] - sum[2].c[0];
        r.c[2] = sum[1].c[0] - sum[0].c[1];
    }
    return r;
}
template <int D> LW_FUNC auto curlnoise(uint32_t seed, vec_t<D, float> x, uint32_t octaves, float lacunarity, float gain) {
    return curlnoise_eval<D>(seed, x, octaves, lacunarity, gain, nullptr, nullptr);
}
template <int D> LW_FUNC auto curlnoise(uint32_t seed, vec_t<D, float> x) { return curlnoise(seed, x, 1u, 2.0f, 0.5f); }
template <int D, typename R>
LW_FUNC void adj_curlnoise(uint32_t seed, vec_t<D, float> x, uint32_t octaves, float lacunarity, float gain, uint32_t&,
                           vec_t<D, float>& adj_x, uint32_t&, float&, float&, const R& adj) {
    curlnoise_eval<D>(seed, x, octaves, lacunarity, gain, &adj, &adj_x);
}
template <int D, typename R>
LW_FUNC void adj_curlnoise(uint32_t seed, vec_t<D, float> x, uint32_t&, vec_t<D, float>& adj_x, const R& adj) {
    curlnoise_eval<D>(seed, x, 1u, 2.0f, 0.5f, &adj, &adj_x);
}

// ---------------------------------------------------------------------------------------------
// expectations inside kernels: print a message (with the source location) when one fails

template <typename T> LW_FUNC void print_components(const T& v) { printf("%g", (double)v); }
template <int N, typename T> LW_FUNC void print_components(const vec_t<N, T>& v) {
    for (int i = 0; i < N; ++i) printf(i ? " %g" : "[%g", (double)v.c[i]);
    printf("]");
}
template <int R, int C, typename T> LW_FUNC void print_components(const mat_t<R, C, T>& m) {
    for (int i = 0; i < R * C; ++i) printf(i == 0 ? "[%g" : (i % C ? " %g" : "; %g"), (double)m.c[i]);
    printf("]");
}
template <typename T> LW_FUNC bool near_all(T a, T b, double tol) { return abs((double)a - (double)b) <= tol; }
template <int N, typename T> LW_FUNC bool near_all(vec_t<N, T> a, vec_t<N, T> b, double tol) {
    for (int i = 0; i < N; ++i)
        if (!near_all(a.c[i], b.c[i], tol)) return false;
    return true;
}
template <int R, int C, typename T> LW_FUNC bool near_all(mat_t<R, C, T> a, mat_t<R, C, T> b, double tol) {
    for (int i = 0; i < R * C; ++i)
        if (!near_all(a.c[i], b.c[i], tol)) return false;
    return true;
}
// quaternions and transforms print and compare as their vectors (the generic templates above would
// otherwise be the better match for these derived types)
template <typename T> LW_FUNC void print_components(const quat_t<T>& v) { print_components((const vec_t<4, T>&)v); }
template <typename T> LW_FUNC void print_components(const transform_t<T>& v) {
    print_components((const vec_t<7, T>&)v);
}
template <typename T> LW_FUNC bool near_all(quat_t<T> a, quat_t<T> b, double tol) {
    return near_all((vec_t<4, T>)a, (vec_t<4, T>)b, tol);
}
template <typename T> LW_FUNC bool near_all(transform_t<T> a, transform_t<T> b, double tol) {
    return near_all((vec_t<7, T>)a, (vec_t<7, T>)b, tol);
}
template <typename T> LW_FUNC void expect_near(T a, T b, double tol, const char* where) {
    if (near_all(a, b, tol)) return;
    printf("expect_near failed at %s: ", where);
    print_components(a);
    printf(" vs ");
    print_components(b);
    printf(" (tolerance %g)\n", tol);
    LW_FLUSH();
}
template <typename T> LW_FUNC void expect_eq(T a, T b, const char* where) {
    if (eq(a, b)) return;
    printf("expect_eq failed at %s: ", where);
    print_components(a);
    printf(" != ");
    print_components(b);
    printf("\n");
    LW_FLUSH();
}
template <typename T> LW_FUNC void expect_neq(T a, T b, const char* where) {
    if (!eq(a, b)) return;
    printf("expect_neq failed at %s: ", where);
    print_components(a);
    printf(" == ");
    print_components(b);
    printf("\n");
    LW_FLUSH();
}

template <typename T> LW_FUNC bool unot(T a) { return !(a != T(0)); }
template <typename T> LW_FUNC bool unot(const array_t<T>& a) { return a.data == nullptr; }
template <typename T> LW_FUNC T div_approx(T a, T b) { return div(a, b); }
template <typename T> LW_FUNC typename scalar_only<T, void>::type adj_div_approx(T a, T b, T& adj_a, T& adj_b, T adj) { adj_div(a, b, adj_a, adj_b, adj); }
#include "lanes.h"
#if LW_CUDA
LW_DEVICE float div_approx(float a, float b) { return __fdividef(a, b); }
LW_FUNC int32_t block_dim() { return (int32_t)blockDim.x; }
LW_DEVICE void breakpoint() { __brkpt(); }
#else
LW_FUNC int32_t block_dim() { return blk_dim(); }  // 1 unless the block's lanes run together (lanes.h)
#if defined(__linux__)
extern "C" int open(const char* path, int flags, ...);
extern "C" long read(int fd, void* buf, unsigned long n);
extern "C" int close(int fd);
extern "C" int raise(int sig);
// Stop in the attached debugger (SIGTRAP); without one (TracerPid 0 in /proc/self/status) do nothing,
// so a forgotten wp.breakpoint() cannot kill the process.
inline void breakpoint() {
    char buf[1024];
    int fd = open("/proc/self/status", 0);
    if (fd < 0) return;
    long n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    buf[n > 0 ? n : 0] = 0;
    for (long i = 0; i + 10 < n; ++i) {
        if (buf[i] == 'T' && buf[i + 1] == 'r' && buf[i + 2] == 'a' && buf[i + 6] == 'P' && buf[i + 9] == ':') {
            long j = i + 10;
            while (buf[j] == ' ' || buf[j] == '\t') ++j;
            if (buf[j] != '0') raise(5);
            return;
        }
    }
}
#else
inline void breakpoint() {}
#endif
#endif

#include "linalg.h"
#include "tiles.h"
#include "tiles_fft.h"

}  // namespace lw
