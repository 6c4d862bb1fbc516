// loomwork native runtime, part 2: matrix construction and reductions, the error function, and the
// small dense decompositions (svd2/svd3, qr3, eig3) with their analytic adjoints. Included by
// loomwork.h inside namespace lw. Decompositions return every factor packed as rows of one matrix
// (the front end splits it), so one call computes them once and one adjoint sees all their gradients.

// ---------------------------------------------------------------------------------------------
// matrices from row or column vectors

template <int K, int N, typename T> LW_FUNC mat_t<K, N, T> rows_of(const vec_t<N, T>* v) {
    mat_t<K, N, T> r;
    for (int i = 0; i < K; ++i)
        for (int j = 0; j < N; ++j) r.c[i * N + j] = v[i].c[j];
    return r;
}
template <int K, int N, typename T> LW_FUNC void adj_rows_of(vec_t<N, T>* const* g, const mat_t<K, N, T>& adj) {
    for (int i = 0; i < K; ++i)
        for (int j = 0; j < N; ++j) acc(g[i]->c[j], adj.c[i * N + j]);
}
template <int K, int N, typename T> LW_FUNC mat_t<N, K, T> cols_of(const vec_t<N, T>* v) {
    return transpose(rows_of<K, N, T>(v));
}
template <int K, int N, typename T> LW_FUNC void adj_cols_of(vec_t<N, T>* const* g, const mat_t<N, K, T>& adj) {
    adj_rows_of<K, N, T>(g, transpose(adj));
}
#define LW_FROM_VECTORS(name, helper, RES)                                                                     \
    template <int N, typename T> LW_FUNC RES(1) name(vec_t<N, T> a) {                                          \
        vec_t<N, T> v[1] = {a};                                                                                 \
        return helper<1, N, T>(v);                                                                              \
    }                                                                                                           \
    template <int N, typename T> LW_FUNC void adj_##name(vec_t<N, T>, vec_t<N, T>& ga, RES(1) adj) {           \
        vec_t<N, T>* g[1] = {&ga};                                                                              \
        adj_##helper<1, N, T>(g, adj);                                                                          \
    }                                                                                                           \
    template <int N, typename T> LW_FUNC RES(2) name(vec_t<N, T> a, vec_t<N, T> b) {                          \
        vec_t<N, T> v[2] = {a, b};                                                                              \
        return helper<2, N, T>(v);                                                                              \
    }                                                                                                           \
    template <int N, typename T> LW_FUNC RES(3) name(vec_t<N, T> a, vec_t<N, T> b, vec_t<N, T> c) {           \
        vec_t<N, T> v[3] = {a, b, c};                                                                           \
        return helper<3, N, T>(v);                                                                              \
    }                                                                                                           \
    template <int N, typename T> LW_FUNC RES(4) name(vec_t<N, T> a, vec_t<N, T> b, vec_t<N, T> c, vec_t<N, T> d) { \
        vec_t<N, T> v[4] = {a, b, c, d};                                                                        \
        return helper<4, N, T>(v);                                                                              \
    }                                                                                                           \
    template <int N, typename T>                                                                                \
    LW_FUNC void adj_##name(vec_t<N, T>, vec_t<N, T>, vec_t<N, T>& ga, vec_t<N, T>& gb, RES(2) adj) {          \
        vec_t<N, T>* g[2] = {&ga, &gb};                                                                         \
        adj_##helper<2, N, T>(g, adj);                                                                          \
    }                                                                                                           \
    template <int N, typename T>                                                                                \
    LW_FUNC void adj_##name(vec_t<N, T>, vec_t<N, T>, vec_t<N, T>, vec_t<N, T>& ga, vec_t<N, T>& gb,           \
                            vec_t<N, T>& gc, RES(3) adj) {                                                      \
        vec_t<N, T>* g[3] = {&ga, &gb, &gc};                                                                    \
        adj_##helper<3, N, T>(g, adj);                                                                          \
    }                                                                                                           \
    template <int N, typename T>                                                                                \
    LW_FUNC void adj_##name(vec_t<N, T>, vec_t<N, T>, vec_t<N, T>, vec_t<N, T>, vec_t<N, T>& ga,               \
                            vec_t<N, T>& gb, vec_t<N, T>& gc, vec_t<N, T>& gd, RES(4) adj) {                    \
        vec_t<N, T>* g[4] = {&ga, &gb, &gc, &gd};                                                               \
        adj_##helper<4, N, T>(g, adj);                                                                          \
    }
#define LW_ROWS_RES(K) mat_t<K, N, T>
#define LW_COLS_RES(K) mat_t<N, K, T>
LW_FROM_VECTORS(matrix_from_rows, rows_of, LW_ROWS_RES)
LW_FROM_VECTORS(matrix_from_cols, cols_of, LW_COLS_RES)
#undef LW_FROM_VECTORS
#undef LW_ROWS_RES
#undef LW_COLS_RES

template <int R, int C, typename T> LW_FUNC T ddot(mat_t<R, C, T> a, mat_t<R, C, T> b) {
    T s = T(0);
    for (int i = 0; i < R * C; ++i) s = add(s, mul(a.c[i], b.c[i]));
    return s;
}
template <int R, int C, typename T>
LW_FUNC void adj_ddot(mat_t<R, C, T> a, mat_t<R, C, T> b, mat_t<R, C, T>& adj_a, mat_t<R, C, T>& adj_b, T adj) {
    acc(adj_a, mul(b, adj));
    acc(adj_b, mul(a, adj));
}

// reductions of one vector: the extreme component and its index (the first one on ties)
template <int N, typename T> LW_FUNC uint32_t argmin(vec_t<N, T> v) {
    uint32_t k = 0;
    for (int i = 1; i < N; ++i)
        if (lt(v.c[i], v.c[k])) k = (uint32_t)i;
    return k;
}
template <int N, typename T> LW_FUNC uint32_t argmax(vec_t<N, T> v) {
    uint32_t k = 0;
    for (int i = 1; i < N; ++i)
        if (gt(v.c[i], v.c[k])) k = (uint32_t)i;
    return k;
}
// min(v) / max(v) fold like the scalar min/max (fmin/fmax): a NaN component gives way to any number
template <int N, typename T> LW_FUNC uint32_t extreme_index(vec_t<N, T> v, bool smallest) {
    uint32_t k = 0;
    for (int i = 1; i < N; ++i)
        if ((smallest ? lt(v.c[i], v.c[k]) : gt(v.c[i], v.c[k])) || !eq(v.c[k], v.c[k])) k = (uint32_t)i;
    return eq(v.c[k], v.c[k]) ? k : 0;
}
template <int N, typename T> LW_FUNC T min(vec_t<N, T> v) { return v.c[extreme_index(v, true)]; }
template <int N, typename T> LW_FUNC T max(vec_t<N, T> v) { return v.c[extreme_index(v, false)]; }
template <int N, typename T> LW_FUNC void adj_min(vec_t<N, T> v, vec_t<N, T>& adj_v, T adj) {
    acc(adj_v.c[extreme_index(v, true)], adj);
}
template <int N, typename T> LW_FUNC void adj_max(vec_t<N, T> v, vec_t<N, T>& adj_v, T adj) {
    acc(adj_v.c[extreme_index(v, false)], adj);
}

// classification of every component: true when any component is nan/inf, when all are finite
#define LW_ANY_COMPONENT(name, join, start)                                        \
    template <int N, typename T> LW_FUNC bool name(vec_t<N, T> v) {                \
        bool r = start;                                                             \
        for (int i = 0; i < N; ++i) r = r join name(v.c[i]);                        \
        return r;                                                                   \
    }                                                                               \
    template <int R, int C, typename T> LW_FUNC bool name(mat_t<R, C, T> m) {      \
        bool r = start;                                                             \
        for (int i = 0; i < R * C; ++i) r = r join name(m.c[i]);                    \
        return r;                                                                   \
    }
LW_ANY_COMPONENT(isnan, ||, false)
LW_ANY_COMPONENT(isinf, ||, false)
LW_ANY_COMPONENT(isfinite, &&, true)
#undef LW_ANY_COMPONENT

// ---------------------------------------------------------------------------------------------
// the error function and its inverses

template <typename T> LW_FUNC void adj_erf(T x, T& adj_x, T adj) {
    acc(adj_x, mul(adj, mul(T(1.1283791670955126), exp(neg(mul(x, x))))));
}
template <typename T> LW_FUNC void adj_erfc(T x, T& adj_x, T adj) {
    acc(adj_x, neg(mul(adj, mul(T(1.1283791670955126), exp(neg(mul(x, x)))))));
}
// erfinv: Giles' single-precision approximation, then Newton steps on erf (two reach double precision)
template <typename T> LW_FUNC T erfinv(T x) {
    if (x <= T(-1)) return x == T(-1) ? T(-1) / T(0) : T(0) / T(0);
    if (x >= T(1)) return x == T(1) ? T(1) / T(0) : T(0) / T(0);
    float xf = (float)x;
    float w = -(float)log((1.0f - xf) * (1.0f + xf)), p;
    if (w < 5.0f) {
        w = w - 2.5f;
        p = 2.81022636e-08f;
        p = 3.43273939e-07f + p * w; p = -3.5233877e-06f + p * w; p = -4.39150654e-06f + p * w;
        p = 0.00021858087f + p * w; p = -0.00125372503f + p * w; p = -0.00417768164f + p * w;
        p = 0.246640727f + p * w; p = 1.50140941f + p * w;
    } else {
        w = (float)sqrt(w) - 3.0f;
        p = -0.000200214257f;
        p = 0.000100950558f + p * w; p = 0.00134934322f + p * w; p = -0.00367342844f + p * w;
        p = 0.00573950773f + p * w; p = -0.0076224613f + p * w; p = 0.00943887047f + p * w;
        p = 1.00167406f + p * w; p = 2.83297682f + p * w;
    }
    T y = T(p * xf);
    for (int k = 0; k < (sizeof(T) > 4 ? 2 : 1); ++k) y = y - (erf(y) - x) / (T(1.1283791670955126) * exp(-y * y));
    return y;
}
template <typename T> LW_FUNC T erfcinv(T x) { return erfinv(T(1) - x); }
template <typename T> LW_FUNC void adj_erfinv(T x, T& adj_x, T adj) {
    T y = erfinv(x);
    acc(adj_x, mul(adj, mul(T(0.88622692545275801), exp(mul(y, y)))));
}
template <typename T> LW_FUNC void adj_erfcinv(T x, T& adj_x, T adj) {
    T y = erfcinv(x);
    acc(adj_x, neg(mul(adj, mul(T(0.88622692545275801), exp(mul(y, y))))));
}
#define LW_NARROW_ERFINV(H)                                          \
    LW_FUNC H erfinv(H x) { return H(erfinv((float)x)); }            \
    LW_FUNC H erfcinv(H x) { return H(erfcinv((float)x)); }
LW_NARROW_ERFINV(half)
LW_NARROW_ERFINV(bfloat16)
#undef LW_NARROW_ERFINV

// ---------------------------------------------------------------------------------------------
// small dense decompositions. Rotations are built from Jacobi and Givens steps, so every orthogonal
// factor is a proper rotation (determinant +1).

template <int N, typename T> LW_FUNC mat_t<N, N, T> eye() {
    mat_t<N, N, T> r = zero<mat_t<N, N, T>>();
    for (int i = 0; i < N; ++i) r.c[i * N + i] = T(1);
    return r;
}
template <typename T> LW_FUNC T tiny_rel() { return sizeof(T) > 4 ? T(1e-12) : T(1e-6); }

// S (symmetric) = V diag(d) V^T by cyclic Jacobi sweeps; d ascending
template <int N, typename T> LW_FUNC void sym_eig(mat_t<N, N, T> S, mat_t<N, N, T>& V, vec_t<N, T>& d) {
    V = eye<N, T>();
    for (int sweep = 0; sweep < 16; ++sweep) {
        T off = T(0), on = T(0);
        for (int i = 0; i < N; ++i)
            for (int j = 0; j < N; ++j) (i == j ? on : off) += S.c[i * N + j] * S.c[i * N + j];
        if (!(off > (sizeof(T) > 4 ? T(1e-32) : T(1e-16)) * on)) break;
        for (int p = 0; p < N - 1; ++p)
            for (int q = p + 1; q < N; ++q) {
                T apq = S.c[p * N + q];
                if (apq == T(0)) continue;
                T theta = (S.c[q * N + q] - S.c[p * N + p]) / (T(2) * apq);
                T at = abs(theta);
                T t = at > T(1e15) ? T(0.5) / theta : (theta < T(0) ? T(-1) : T(1)) / (at + sqrt(theta * theta + T(1)));
                T c = T(1) / sqrt(t * t + T(1)), s = t * c;
                for (int k = 0; k < N; ++k) {  // S <- S J (columns p, q)
                    T sp = S.c[k * N + p], sq = S.c[k * N + q];
                    S.c[k * N + p] = c * sp - s * sq;
                    S.c[k * N + q] = s * sp + c * sq;
                }
                for (int k = 0; k < N; ++k) {  // S <- J^T S (rows p, q)
                    T sp = S.c[p * N + k], sq = S.c[q * N + k];
                    S.c[p * N + k] = c * sp - s * sq;
                    S.c[q * N + k] = s * sp + c * sq;
                }
                for (int k = 0; k < N; ++k) {  // V <- V J
                    T vp = V.c[k * N + p], vq = V.c[k * N + q];
                    V.c[k * N + p] = c * vp - s * vq;
                    V.c[k * N + q] = s * vp + c * vq;
                }
            }
    }
    for (int i = 0; i < N; ++i) d.c[i] = S.c[i * N + i];
    for (int i = 0; i < N - 1; ++i)  // selection sort; a swap of two columns negates one to keep det(V) = +1
        for (int j = i + 1; j < N; ++j)
            if (d.c[j] < d.c[i]) {
                T tmp = d.c[i]; d.c[i] = d.c[j]; d.c[j] = tmp;
                for (int k = 0; k < N; ++k) {
                    T vi = V.c[k * N + i];
                    V.c[k * N + i] = V.c[k * N + j];
                    V.c[k * N + j] = -vi;
                }
            }
}

// B = Q R by Givens rotations: Q a rotation, R upper triangular with R(i, i) >= 0 except the last
template <int N, typename T> LW_FUNC void qr_givens(mat_t<N, N, T> B, mat_t<N, N, T>& Q, mat_t<N, N, T>& R) {
    R = B;
    Q = eye<N, T>();
    for (int col = 0; col < N - 1; ++col)
        for (int q = col + 1; q < N; ++q) {
            T a = R.c[col * N + col], b = R.c[q * N + col];
            T r = sqrt(a * a + b * b);
            T c = r == T(0) ? T(1) : a / r, s = r == T(0) ? T(0) : b / r;
            for (int k = 0; k < N; ++k) {
                T rp = R.c[col * N + k], rq = R.c[q * N + k];
                R.c[col * N + k] = c * rp + s * rq;
                R.c[q * N + k] = c * rq - s * rp;
                T qp = Q.c[k * N + col], qq = Q.c[k * N + q];
                Q.c[k * N + col] = c * qp + s * qq;
                Q.c[k * N + q] = c * qq - s * qp;
            }
            R.c[q * N + col] = T(0);
        }
}

// A = U diag(s) V^T with U, V rotations and s sorted by decreasing value; s[N-1] < 0 when det(A) < 0
template <int N, typename T> LW_FUNC void svd_of(const mat_t<N, N, T>& A, mat_t<N, N, T>& U, vec_t<N, T>& s, mat_t<N, N, T>& V) {
    vec_t<N, T> d;
    sym_eig(mul(transpose(A), A), V, d);
    for (int i = 0; i < N / 2; ++i)  // descending: reverse the columns, negating one of each swapped pair
        for (int k = 0; k < N; ++k) {
            T vi = V.c[k * N + i];
            V.c[k * N + i] = V.c[k * N + N - 1 - i];
            V.c[k * N + N - 1 - i] = -vi;
        }
    mat_t<N, N, T> R;
    qr_givens(mul(A, V), U, R);
    for (int i = 0; i < N; ++i) s.c[i] = R.c[i * N + i];
}

// the off-diagonal factor 1 / (e_j - e_i) of spectral adjoints; 0 where the spectrum is degenerate
template <int N, typename T> LW_FUNC mat_t<N, N, T> gap_inverse(const vec_t<N, T>& e) {
    T scale = T(0);
    for (int i = 0; i < N; ++i) scale = max(scale, abs(e.c[i]));
    mat_t<N, N, T> F = zero<mat_t<N, N, T>>();
    for (int i = 0; i < N; ++i)
        for (int j = 0; j < N; ++j) {
            T g = e.c[j] - e.c[i];
            if (i != j && abs(g) > tiny_rel<T>() * scale) F.c[i * N + j] = T(1) / g;
        }
    return F;
}

// The decompositions write the caller's variables (wp.svd3(A, U, sigma, V)); their adjoints read the
// adjoint of the call's result record, one field per output in order (f0, f1, ...).
template <int N, typename T, typename Rec>
LW_FUNC void adj_svd_of(const mat_t<N, N, T>& A, mat_t<N, N, T>& adj_A, const Rec& adj) {
    mat_t<N, N, T> U, V;
    vec_t<N, T> s, s2;
    svd_of(A, U, s, V);
    for (int i = 0; i < N; ++i) s2.c[i] = s.c[i] * s.c[i];
    mat_t<N, N, T> F = gap_inverse(s2);
    mat_t<N, N, T> J = mul(transpose(U), adj.f0), K = mul(transpose(V), adj.f2), inner;
    for (int i = 0; i < N; ++i)
        for (int j = 0; j < N; ++j) {
            T fij = F.c[i * N + j];
            T t = fij * (J.c[i * N + j] - J.c[j * N + i]) * s.c[j] + s.c[i] * fij * (K.c[i * N + j] - K.c[j * N + i]);
            inner.c[i * N + j] = i == j ? adj.f1.c[i] : t;
        }
    acc(adj_A, mul(mul(U, inner), transpose(V)));
}

template <int N, typename T, typename Rec>
LW_FUNC void adj_qr_givens(mat_t<N, N, T> A, mat_t<N, N, T>& adj_A, const Rec& adj) {
    mat_t<N, N, T> Q, R;
    qr_givens(A, Q, R);
    // dA = (gQ + Q copyltu(M)) R^-T with M = R gR^T - gQ^T Q (copyltu: the lower triangle mirrored up)
    mat_t<N, N, T> M = sub(mul(R, transpose(adj.f1)), mul(transpose(adj.f0), Q)), L;
    for (int i = 0; i < N; ++i)
        for (int j = 0; j < N; ++j) L.c[i * N + j] = i >= j ? M.c[i * N + j] : M.c[j * N + i];
    acc(adj_A, mul(add(adj.f0, mul(Q, L)), transpose(inverse(R))));
}

// symmetric eigendecomposition of (A + A^T) / 2, eigenvectors in Q's columns
template <int N, typename T> LW_FUNC mat_t<N, N, T> sym_part(const mat_t<N, N, T>& A) {
    return mul(add(A, transpose(A)), T(0.5));
}
template <int N, typename T> LW_FUNC void sym_eig_of(const mat_t<N, N, T>& A, mat_t<N, N, T>& Q, vec_t<N, T>& d) {
    sym_eig(sym_part(A), Q, d);
}
template <int N, typename T, typename Rec>
LW_FUNC void adj_sym_eig_of(const mat_t<N, N, T>& A, mat_t<N, N, T>& adj_A, const Rec& adj) {
    mat_t<N, N, T> Q;
    vec_t<N, T> d;
    sym_eig(sym_part(A), Q, d);
    mat_t<N, N, T> F = gap_inverse(d), W = mul(transpose(Q), adj.f0), inner;
    for (int i = 0; i < N; ++i)
        for (int j = 0; j < N; ++j) inner.c[i * N + j] = i == j ? adj.f1.c[i] : F.c[i * N + j] * W.c[i * N + j];
    acc(adj_A, sym_part(mul(mul(Q, inner), transpose(Q))));
}

// 16-bit float decompositions compute in float32: the factors and the adjoint are rounded back once
#define LW_NARROW_DECOMPOSITIONS(H)                                                                           \
    template <int N> LW_FUNC void svd_of(const mat_t<N, N, H>& A, mat_t<N, N, H>& U, vec_t<N, H>& s, mat_t<N, N, H>& V) { \
        mat_t<N, N, float> u, v;                                                                              \
        vec_t<N, float> sf;                                                                                   \
        svd_of(convert<mat_t<N, N, float>>(A), u, sf, v);                                                     \
        U = convert<mat_t<N, N, H>>(u); s = convert<vec_t<N, H>>(sf); V = convert<mat_t<N, N, H>>(v);        \
    }                                                                                                         \
    template <int N, typename Rec>                                                                            \
    LW_FUNC void adj_svd_of(const mat_t<N, N, H>& A, mat_t<N, N, H>& adj_A, const Rec& adj) {                  \
        struct { mat_t<N, N, float> f0; vec_t<N, float> f1; mat_t<N, N, float> f2; } a = {                    \
            convert<mat_t<N, N, float>>(adj.f0), convert<vec_t<N, float>>(adj.f1), convert<mat_t<N, N, float>>(adj.f2)}; \
        mat_t<N, N, float> g = zero<mat_t<N, N, float>>();                                                    \
        adj_svd_of(convert<mat_t<N, N, float>>(A), g, a);                                                     \
        acc(adj_A, convert<mat_t<N, N, H>>(g));                                                               \
    }                                                                                                         \
    template <int N> LW_FUNC void qr_givens(mat_t<N, N, H> A, mat_t<N, N, H>& Q, mat_t<N, N, H>& R) {         \
        mat_t<N, N, float> q, r;                                                                              \
        qr_givens(convert<mat_t<N, N, float>>(A), q, r);                                                      \
        Q = convert<mat_t<N, N, H>>(q); R = convert<mat_t<N, N, H>>(r);                                       \
    }                                                                                                         \
    template <int N, typename Rec> LW_FUNC void adj_qr_givens(mat_t<N, N, H> A, mat_t<N, N, H>& adj_A, const Rec& adj) { \
        struct { mat_t<N, N, float> f0, f1; } a = {convert<mat_t<N, N, float>>(adj.f0),                       \
                                                   convert<mat_t<N, N, float>>(adj.f1)};                      \
        mat_t<N, N, float> g = zero<mat_t<N, N, float>>();                                                    \
        adj_qr_givens(convert<mat_t<N, N, float>>(A), g, a);                                                  \
        acc(adj_A, convert<mat_t<N, N, H>>(g));                                                               \
    }                                                                                                         \
    template <int N> LW_FUNC void sym_eig_of(const mat_t<N, N, H>& A, mat_t<N, N, H>& Q, vec_t<N, H>& d) {     \
        mat_t<N, N, float> q;                                                                                 \
        vec_t<N, float> df;                                                                                   \
        sym_eig_of(convert<mat_t<N, N, float>>(A), q, df);                                                    \
        Q = convert<mat_t<N, N, H>>(q); d = convert<vec_t<N, H>>(df);                                         \
    }                                                                                                         \
    template <int N, typename Rec>                                                                            \
    LW_FUNC void adj_sym_eig_of(const mat_t<N, N, H>& A, mat_t<N, N, H>& adj_A, const Rec& adj) {              \
        struct { mat_t<N, N, float> f0; vec_t<N, float> f1; } a = {convert<mat_t<N, N, float>>(adj.f0),       \
                                                                   convert<vec_t<N, float>>(adj.f1)};         \
        mat_t<N, N, float> g = zero<mat_t<N, N, float>>();                                                    \
        adj_sym_eig_of(convert<mat_t<N, N, float>>(A), g, a);                                                 \
        acc(adj_A, convert<mat_t<N, N, H>>(g));                                                               \
    }
LW_NARROW_DECOMPOSITIONS(half)
LW_NARROW_DECOMPOSITIONS(bfloat16)
#undef LW_NARROW_DECOMPOSITIONS

// quaternion to axis (unit, zero for the identity) and angle in [0, pi]: q and -q are the same rotation,
// so a negative w flips the axis and the angle measures the shorter way round
template <typename T> LW_FUNC void quat_to_axis_angle(const quat_t<T>& q, vec_t<3, T>& axis, T& angle) {
    vec_t<3, T> v = qv(q);
    T s = length(v), f = q.c[3] < T(0) ? T(-1) : T(1);
    axis = s > T(0) ? mul(div(v, s), f) : zero<vec_t<3, T>>();
    angle = T(2) * atan2(s, T(f * q.c[3]));
}
template <typename T, typename Rec>
LW_FUNC void adj_quat_to_axis_angle(const quat_t<T>& q, quat_t<T>& adj_q, const Rec& adj) {
    vec_t<3, T> v = qv(q);
    T s = length(v), w = q.c[3], f = w < T(0) ? T(-1) : T(1);
    if (!(s > T(0))) return;
    vec_t<3, T> u = div(v, s);
    T r2 = T(s * s + w * w);  // (16-bit floats compute in float: each result is cast back to T)
    // axis = f u: d/dv = f (I - u u^T) / s; angle = 2 atan2(s, |w|): d/ds = 2 |w| / r2, d/dw = -2 f s / r2
    vec_t<3, T> gv = add(mul(div(sub(adj.f0, mul(u, dot(u, adj.f0))), s), f), mul(u, T(adj.f1 * T(2) * f * w / r2)));
    acc(adj_q, make_quat(gv, T(-adj.f1 * T(2) * f * s / r2)));
}

// ---------------------------------------------------------------------------------------------
// 4x4 homogeneous matrices acting on 3-D points and vectors, and the spatial adjoint

template <typename T> LW_FUNC vec_t<3, T> transform_point(mat_t<4, 4, T> m, vec_t<3, T> p) {
    vec_t<3, T> r;
    for (int i = 0; i < 3; ++i) r.c[i] = m.c[i * 4] * p.c[0] + m.c[i * 4 + 1] * p.c[1] + m.c[i * 4 + 2] * p.c[2] + m.c[i * 4 + 3];
    return r;
}
template <typename T> LW_FUNC vec_t<3, T> transform_vector(mat_t<4, 4, T> m, vec_t<3, T> v) {
    vec_t<3, T> r;
    for (int i = 0; i < 3; ++i) r.c[i] = m.c[i * 4] * v.c[0] + m.c[i * 4 + 1] * v.c[1] + m.c[i * 4 + 2] * v.c[2];
    return r;
}
template <typename T>
LW_FUNC void adj_transform_vector(mat_t<4, 4, T> m, vec_t<3, T> v, mat_t<4, 4, T>& adj_m, vec_t<3, T>& adj_v, vec_t<3, T> adj) {
    for (int i = 0; i < 3; ++i)
        for (int j = 0; j < 3; ++j) {
            acc(adj_m.c[i * 4 + j], mul(adj.c[i], v.c[j]));
            acc(adj_v.c[j], mul(adj.c[i], m.c[i * 4 + j]));
        }
}
template <typename T>
LW_FUNC void adj_transform_point(mat_t<4, 4, T> m, vec_t<3, T> p, mat_t<4, 4, T>& adj_m, vec_t<3, T>& adj_p, vec_t<3, T> adj) {
    adj_transform_vector(m, p, adj_m, adj_p, adj);
    for (int i = 0; i < 3; ++i) acc(adj_m.c[i * 4 + 3], adj.c[i]);
}

// [[R, 0], [S, R]]: the motion-vector transform of a rotation R and a (skew) coupling S
template <typename T> LW_FUNC mat_t<6, 6, T> spatial_adjoint(mat_t<3, 3, T> R, mat_t<3, 3, T> S) {
    mat_t<6, 6, T> a = zero<mat_t<6, 6, T>>();
    for (int i = 0; i < 3; ++i)
        for (int j = 0; j < 3; ++j) {
            a.c[i * 6 + j] = R.c[i * 3 + j];
            a.c[(i + 3) * 6 + j + 3] = R.c[i * 3 + j];
            a.c[(i + 3) * 6 + j] = S.c[i * 3 + j];
        }
    return a;
}
template <typename T>
LW_FUNC void adj_spatial_adjoint(mat_t<3, 3, T> R, mat_t<3, 3, T> S, mat_t<3, 3, T>& adj_R, mat_t<3, 3, T>& adj_S, mat_t<6, 6, T> adj) {
    for (int i = 0; i < 3; ++i)
        for (int j = 0; j < 3; ++j) {
            acc(adj_R.c[i * 3 + j], add(adj.c[i * 6 + j], adj.c[(i + 3) * 6 + j + 3]));
            acc(adj_S.c[i * 3 + j], adj.c[(i + 3) * 6 + j]);
        }
}

// ---------------------------------------------------------------------------------------------
// Huber norms and the normalization through the pseudo-Huber norm (delta defaults to 1)

template <int N, typename T> LW_FUNC T norm_huber(vec_t<N, T> v, T d) {
    T n = length(v);
    return n <= d ? T(0.5) * n * n : d * (n - T(0.5) * d);
}
template <int N, typename T> LW_FUNC void adj_norm_huber(vec_t<N, T> v, T d, vec_t<N, T>& adj_v, T& adj_d, T adj) {
    T n = length(v);
    if (n <= d) {
        acc(adj_v, mul(v, adj));
    } else {
        acc(adj_v, mul(v, T(adj * d / n)));  // (16-bit floats compute in float: results are cast back to T)
        acc(adj_d, T(adj * (n - d)));
    }
}
template <int N, typename T> LW_FUNC T norm_pseudo_huber(vec_t<N, T> v, T d) {
    return d * sqrt(T(1) + dot(v, v) / (d * d));
}
template <int N, typename T>
LW_FUNC void adj_norm_pseudo_huber(vec_t<N, T> v, T d, vec_t<N, T>& adj_v, T& adj_d, T adj) {
    T r = sqrt(T(T(1) + dot(v, v) / (d * d)));
    acc(adj_v, mul(v, T(adj / (d * r))));
    acc(adj_d, T(adj / r));  // d/dd of sqrt(d^2 + |v|^2) = d / sqrt(d^2 + |v|^2)
}
template <int N, typename T> LW_FUNC vec_t<N, T> smooth_normalize(vec_t<N, T> v, T d) {
    return div(v, norm_pseudo_huber(v, d));
}
template <int N, typename T>
LW_FUNC void adj_smooth_normalize(vec_t<N, T> v, T d, vec_t<N, T>& adj_v, T& adj_d, vec_t<N, T> adj) {
    T h = norm_pseudo_huber(v, d);
    T g = T(-dot(adj, v) / (h * h));  // d(v / h) = dv / h - v dh / h^2
    acc(adj_v, div(adj, h));
    adj_norm_pseudo_huber(v, d, adj_v, adj_d, g);
}
#define LW_DEFAULT_DELTA(name, R)                                                                           \
    template <int N, typename T> LW_FUNC R name(vec_t<N, T> v) { return name(v, T(1)); }                   \
    template <int N, typename T> LW_FUNC void adj_##name(vec_t<N, T> v, vec_t<N, T>& adj_v, R adj) {      \
        T adj_d = T(0);                                                                                     \
        adj_##name(v, T(1), adj_v, adj_d, adj);                                                             \
    }
LW_DEFAULT_DELTA(norm_huber, T)
LW_DEFAULT_DELTA(norm_pseudo_huber, T)
#undef LW_DEFAULT_DELTA
template <int N, typename T> LW_FUNC vec_t<N, T> smooth_normalize(vec_t<N, T> v) { return smooth_normalize(v, T(1)); }
template <int N, typename T> LW_FUNC void adj_smooth_normalize(vec_t<N, T> v, vec_t<N, T>& adj_v, vec_t<N, T> adj) {
    T adj_d = T(0);
    adj_smooth_normalize(v, T(1), adj_v, adj_d, adj);
}
