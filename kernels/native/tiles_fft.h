// Tile FFTs (wp.tile_fft / wp.tile_ifft): each row along a tile's last axis of vec2 (re, im) values is
// transformed in place, unnormalized in both directions (Sign -1: forward, exp(-2 pi i jk/n); +1: inverse).
// Power-of-two rows use an iterative radix-2 transform with one twiddle table per tile, other lengths a
// direct DFT. The adjoint of
// either direction is the unnormalized transform of the other direction applied to the gradient.
#pragma once

// w[k] = exp(Sign 2 pi i k / n) for k < n/2: the twiddles of every radix-2 stage, computed once per tile.
template <int Sign, int n, typename S> LW_FUNC void fft_twiddles(vec_t<2, S>* w) {
    const double two_pi = 6.283185307179586476925286766559;
    for (int k = 0; k < n / 2; ++k) {
        const double ang = Sign * two_pi * k / n;
        w[k].c[0] = (S)cos(ang);
        w[k].c[1] = (S)sin(ang);
    }
}

template <int Sign, int n, typename S> LW_FUNC void fft_row(vec_t<2, S>* x, const vec_t<2, S>* w) {
    using V = vec_t<2, S>;
    if constexpr (n <= 1) {
        return;
    } else if constexpr ((n & (n - 1)) == 0) {
        for (int i = 1, j = 0; i < n; ++i) {  // bit reversal permutation
            int bit = n >> 1;
            for (; j & bit; bit >>= 1) j ^= bit;
            j ^= bit;
            if (i < j) {
                V t = x[i];
                x[i] = x[j];
                x[j] = t;
            }
        }
        for (int len = 2; len <= n; len <<= 1) {
            const int stride = n / len;
            for (int i = 0; i < n; i += len) {
                for (int k = 0; k < len / 2; ++k) {
                    const S wr = w[k * stride].c[0], wi = w[k * stride].c[1];
                    V& a = x[i + k];
                    V& b = x[i + k + len / 2];
                    const S br = b.c[0] * wr - b.c[1] * wi, bi = b.c[0] * wi + b.c[1] * wr;
                    b.c[0] = a.c[0] - br;
                    b.c[1] = a.c[1] - bi;
                    a.c[0] += br;
                    a.c[1] += bi;
                }
            }
        }
    } else {
        const double two_pi = 6.283185307179586476925286766559;
        V y[n];
        for (int k = 0; k < n; ++k) {
            double re = 0, im = 0;
            for (int j = 0; j < n; ++j) {
                const double ang = Sign * two_pi * (double)((int64_t)j * k % n) / n;
                const double cs = cos(ang);
                const double sn = sin(ang);
                re += x[j].c[0] * cs - x[j].c[1] * sn;
                im += x[j].c[0] * sn + x[j].c[1] * cs;
            }
            y[k].c[0] = (S)re;
            y[k].c[1] = (S)im;
        }
        for (int k = 0; k < n; ++k) x[k] = y[k];
    }
}

template <int Sign, typename Tl> LW_FUNC Tl tile_fft_rows(const Tl& t) {
    constexpr int n = Tl::rank == 1 ? Tl::d0 : Tl::rank == 2 ? Tl::d1 : Tl::rank == 3 ? Tl::d2 : Tl::d3;
    using V = typename Tl::value_type;
    constexpr bool pow2 = n > 1 && (n & (n - 1)) == 0;
    V w[pow2 ? n / 2 : 1];
    if constexpr (pow2) fft_twiddles<Sign, n>(w);
    Tl r = t;
    for (int row = 0; row < Tl::size / (n > 0 ? n : 1); ++row) fft_row<Sign, n>(r.c + row * n, w);
    return r;
}
template <int Sign, typename Tl> LW_FUNC void adj_tile_fft_rows(const Tl& t, Tl& adj_t, const Tl& adj) {
    const Tl g = tile_fft_rows<-Sign>(adj);
    for (int i = 0; i < Tl::size; ++i) acc(adj_t.c[i], g.c[i]);
}
