// loomwork.geometry: closest points between segments and triangle-triangle intersection tests.
#pragma once

namespace lw {

// The closest points of segments [p1, q1] and [p2, q2] as (s, t, distance): the points are
// p1 + s (q1 - p1) and p2 + t (q2 - p2). A segment of squared length <= eps counts as a point (weight 0).
LW_FUNC vec_t<3, float> closest_point_edge_edge(vec_t<3, float> p1, vec_t<3, float> q1, vec_t<3, float> p2,
                                                vec_t<3, float> q2, float eps) {
    vec_t<3, float> d1 = sub(q1, p1), d2 = sub(q2, p2), r = sub(p1, p2);
    float a = dot(d1, d1), e = dot(d2, d2), f = dot(d2, r);
    float s = 0.0f, t = 0.0f;
    if (a <= eps && e <= eps) {
        // both are points
    } else if (a <= eps) {
        t = clamp(f / e, 0.0f, 1.0f);
    } else {
        float c = dot(d1, r);
        if (e <= eps) {
            s = clamp(-c / a, 0.0f, 1.0f);
        } else {
            float b = dot(d1, d2), denom = a * e - b * b;
            // the closest point of the infinite lines (any s for parallel lines), clamped to the first segment;
            // then the second segment's parameter for it, and the first's again if that one was clamped
            s = denom != 0.0f ? clamp((b * f - c * e) / denom, 0.0f, 1.0f) : 0.0f;
            t = (b * s + f) / e;
            if (t < 0.0f) {
                t = 0.0f;
                s = clamp(-c / a, 0.0f, 1.0f);
            } else if (t > 1.0f) {
                t = 1.0f;
                s = clamp((b - c) / a, 0.0f, 1.0f);
            }
        }
    }
    vec_t<3, float> gap = sub(add(p1, mul(d1, s)), add(p2, mul(d2, t)));
    return make<vec_t<3, float>>(s, t, length(gap));
}

// Its adjoint. The distance's gradient needs no derivative of s and t: each is either clamped (constant nearby)
// or stationary (the distance's derivative along it is zero), so it is the unit gap spread over the segments'
// ends by the weights (bounded by 1 whatever the angle). A parameter that is stationary (not clamped) is
// defined by d1.gap = 0 (s) or d2.gap = 0 (t): implicit differentiation of those conditions gives their
// adjoints, through the 2x2 system when both are free (which is singular for parallel segments: there, none).
LW_FUNC void adj_closest_point_edge_edge(vec_t<3, float> p1, vec_t<3, float> q1, vec_t<3, float> p2,
                                         vec_t<3, float> q2, float eps, vec_t<3, float>& adj_p1,
                                         vec_t<3, float>& adj_q1, vec_t<3, float>& adj_p2, vec_t<3, float>& adj_q2,
                                         float& adj_eps, vec_t<3, float> adj_ret) {
    vec_t<3, float> out = closest_point_edge_edge(p1, q1, p2, q2, eps);
    float s = out.c[0], t = out.c[1], dist = out.c[2];
    vec_t<3, float> d1 = sub(q1, p1), d2 = sub(q2, p2);
    vec_t<3, float> gap = sub(add(p1, mul(d1, s)), add(p2, mul(d2, t)));
    vec_t<3, float> n = dist > 0.0f ? mul(gap, adj_ret.c[2] / dist) : zero<vec_t<3, float>>();
    // the condition of s: d1.gap = 0, its gradients by p1, q1, p2, q2; the condition of t: d2.gap = 0
    vec_t<3, float> g1[4] = {add(neg(gap), mul(d1, 1.0f - s)), add(gap, mul(d1, s)), mul(d1, t - 1.0f), mul(d1, -t)};
    vec_t<3, float> g2[4] = {mul(d2, 1.0f - s), mul(d2, s), sub(mul(d2, t - 1.0f), gap), sub(gap, mul(d2, t))};
    float a = dot(d1, d1), e = dot(d2, d2), b = dot(d1, d2);
    bool s_free = a > eps && s > 0.0f && s < 1.0f, t_free = e > eps && t > 0.0f && t < 1.0f;
    float l1 = 0.0f, l2 = 0.0f;  // the multipliers of the two conditions
    if (s_free && t_free) {
        float det = b * b - a * e;  // of the conditions' Jacobian by (s, t)
        if (det != 0.0f) {
            l1 = (-e * adj_ret.c[0] - b * adj_ret.c[1]) / det;
            l2 = (a * adj_ret.c[1] + b * adj_ret.c[0]) / det;
        }
    } else if (s_free) {
        l1 = adj_ret.c[0] / a;
    } else if (t_free) {
        l2 = -adj_ret.c[1] / e;
    }
    vec_t<3, float>* adj[4] = {&adj_p1, &adj_q1, &adj_p2, &adj_q2};
    float w[4] = {1.0f - s, s, t - 1.0f, -t};
    for (int k = 0; k < 4; ++k) *adj[k] = sub(add(*adj[k], mul(n, w[k])), add(mul(g1[k], l1), mul(g2[k], l2)));
}

// the sign of the volume of (a, b, c, d): which side of the plane (a, b, c) d lies on
template <typename T> LW_FUNC int tri_orient(const vec_t<3, T>& a, const vec_t<3, T>& b, const vec_t<3, T>& c,
                                             const vec_t<3, T>& d) {
    T v = dot(cross(sub(b, a), sub(c, a)), sub(d, a));
    return v > T(0) ? 1 : v < T(0) ? -1 : 0;
}

// 2-D helpers for the coplanar case, on the two axes other than `drop`
template <typename T> LW_FUNC int tri_orient2(const vec_t<3, T>& a, const vec_t<3, T>& b, const vec_t<3, T>& c,
                                              int drop) {
    int u = drop == 0 ? 1 : 0, w = drop == 2 ? 1 : 2;
    T v = (b.c[u] - a.c[u]) * (c.c[w] - a.c[w]) - (b.c[w] - a.c[w]) * (c.c[u] - a.c[u]);
    return v > T(0) ? 1 : v < T(0) ? -1 : 0;
}
template <typename T> LW_FUNC bool tri_segments_meet2(const vec_t<3, T>& a, const vec_t<3, T>& b,
                                                      const vec_t<3, T>& c, const vec_t<3, T>& d, int drop) {
    int o1 = tri_orient2(a, b, c, drop), o2 = tri_orient2(a, b, d, drop);
    int o3 = tri_orient2(c, d, a, drop), o4 = tri_orient2(c, d, b, drop);
    if (o1 * o2 < 0 && o3 * o4 < 0) return true;
    if (o1 == 0 && o2 == 0) {  // collinear: overlapping projections on the longer axis
        int u = drop == 0 ? 1 : 0, w = drop == 2 ? 1 : 2;
        int k = abs(b.c[u] - a.c[u]) + abs(d.c[u] - c.c[u]) >= abs(b.c[w] - a.c[w]) + abs(d.c[w] - c.c[w]) ? u : w;
        return max(min(a.c[k], b.c[k]), min(c.c[k], d.c[k])) <= min(max(a.c[k], b.c[k]), max(c.c[k], d.c[k]));
    }
    return (o1 * o2 <= 0) && (o3 * o4 <= 0);
}
template <typename T> LW_FUNC bool tri_contains2(const vec_t<3, T>& p, const vec_t<3, T>& a, const vec_t<3, T>& b,
                                                 const vec_t<3, T>& c, int drop) {
    int s1 = tri_orient2(a, b, p, drop), s2 = tri_orient2(b, c, p, drop), s3 = tri_orient2(c, a, p, drop);
    return (s1 >= 0 && s2 >= 0 && s3 >= 0) || (s1 <= 0 && s2 <= 0 && s3 <= 0);
}
// the axis to project along for a plane of normal n: its largest component
template <typename T> LW_FUNC int tri_drop_axis(const vec_t<3, T>& n) {
    T ax = abs(n.c[0]), ay = abs(n.c[1]), az = abs(n.c[2]);
    return ax >= ay && ax >= az ? 0 : ay >= az ? 1 : 2;
}
// two triangles in one plane (normal n) overlap: an edge crossing or one holding a vertex of the other
template <typename T> LW_FUNC bool tri_overlap2(const vec_t<3, T>* v, const vec_t<3, T>* u, vec_t<3, T> n) {
    int drop = tri_drop_axis(n);
    for (int i = 0; i < 3; ++i)
        for (int j = 0; j < 3; ++j)
            if (tri_segments_meet2(v[i], v[(i + 1) % 3], u[j], u[(j + 1) % 3], drop)) return true;
    return tri_contains2(v[0], u[0], u[1], u[2], drop) || tri_contains2(u[0], v[0], v[1], v[2], drop);
}

// segment [a, b] meets triangle t (closed sets)
template <typename T> LW_FUNC bool tri_segment_hits(const vec_t<3, T>& a, const vec_t<3, T>& b, const vec_t<3, T>* t) {
    int da = tri_orient(t[0], t[1], t[2], a), db = tri_orient(t[0], t[1], t[2], b);
    if (da * db > 0) return false;
    if (da == 0 && db == 0) {  // the segment lies in the triangle's plane: it crosses an edge or starts inside
        int drop = tri_drop_axis(cross(sub(t[1], t[0]), sub(t[2], t[0])));
        for (int j = 0; j < 3; ++j)
            if (tri_segments_meet2(a, b, t[j], t[(j + 1) % 3], drop)) return true;
        return tri_contains2(a, t[0], t[1], t[2], drop);
    }
    int s1 = tri_orient(a, b, t[0], t[1]), s2 = tri_orient(a, b, t[1], t[2]), s3 = tri_orient(a, b, t[2], t[0]);
    return (s1 >= 0 && s2 >= 0 && s3 >= 0) || (s1 <= 0 && s2 <= 0 && s3 <= 0);
}

// 1 when triangles (v0, v1, v2) and (u0, u1, u2) intersect (touching counts), else 0
template <typename T>
LW_FUNC int32_t intersect_tri_tri(vec_t<3, T> v0, vec_t<3, T> v1, vec_t<3, T> v2, vec_t<3, T> u0, vec_t<3, T> u1,
                                  vec_t<3, T> u2) {
    vec_t<3, T> v[3] = {v0, v1, v2}, u[3] = {u0, u1, u2};
    if (tri_orient(v0, v1, v2, u0) == 0 && tri_orient(v0, v1, v2, u1) == 0 && tri_orient(v0, v1, v2, u2) == 0)
        return tri_overlap2(v, u, cross(sub(v1, v0), sub(v2, v0))) ? 1 : 0;
    for (int i = 0; i < 3; ++i)
        if (tri_segment_hits(v[i], v[(i + 1) % 3], u) || tri_segment_hits(u[i], u[(i + 1) % 3], v)) return 1;
    return 0;
}

}  // namespace lw
