"""Narrow phase: exact contacts for the primitive pairs whose generic probes are inexact or wasteful.

Each routine returns slot ``k`` of one pair's contact manifold as a ``ContactPoint`` and recomputes all it
needs, so a kernel runs one thread per (pair, slot) with no state shared between slots. Shapes are centered
in their frames; a capsule's axis is its local Z axis (half height ``hh`` without the caps); a box has
half-extents ``h``. A contact's signed separation is ``dot(normal, point1 - point0) - margin0 - margin1``
(negative: penetration), and a slot is valid only where it is below ``gap``. Everything is ordinary
differentiable arithmetic (branches pick features; the chosen feature's points depend smoothly on the
transforms)."""

from __future__ import annotations

import loomwork as wp

from .shape_kernels import box_normal, box_sdf

# Axes closer to parallel than this (the sine of their angle) rest on two contacts: a capsule on a capsule,
# a capsule on a box face.
PARALLEL_SIN = wp.constant(0.02)
# Box-box: an edge-edge axis is taken only where it separates more than the best face axis by this fraction
# of that face's separation plus EDGE_BIAS_ABS times the largest half-extent; box 1's faces must beat box 0's
# by FACE_BIAS_ABS times it. Face contacts are stable manifolds, so near ties go to faces, and to box 0.
EDGE_BIAS_REL = wp.constant(0.05)
EDGE_BIAS_ABS = wp.constant(1.0e-3)
FACE_BIAS_ABS = wp.constant(1.0e-5)
# An edge-edge axis within about 11 degrees of the best face axis is left to that face: its edges lie nearly in
# the face's plane (a box resting slightly tilted), where one edge contact would let the box rock.
EDGE_FACE_COS = wp.constant(0.98)
# Box-box clipping tolerance, as a fraction of the reference face's size.
CLIP_EPS = wp.constant(1.0e-4)


@wp.struct
class ContactPoint:
    """One contact of a shape pair (all in world space)."""

    valid: int  # 1 where this slot holds a contact
    point0: wp.vec3  # point on shape 0's surface, or on its core (axis) where margin0 > 0
    point1: wp.vec3  # point on shape 1's surface, or on its core where margin1 > 0
    normal: wp.vec3  # unit normal from shape 0 toward shape 1
    margin0: float  # radius the surface of shape 0 lies around point0 (a capsule's radius, 0 for a box)
    margin1: float


@wp.func
def axis_vec(i: int) -> wp.vec3:
    """The unit vector along coordinate axis i (0, 1, 2)."""
    if i == 0:
        return wp.vec3(1.0, 0.0, 0.0)
    if i == 1:
        return wp.vec3(0.0, 1.0, 0.0)
    return wp.vec3(0.0, 0.0, 1.0)


@wp.func
def segment_closest_params(p0: wp.vec3, d0: wp.vec3, p1: wp.vec3, d1: wp.vec3) -> wp.vec2:
    """Parameters (s, t) in [0, 1] of the closest points of segments p0 + s d0 and p1 + t d1. Parallel
    segments get one pair of the closest points; a zero-length segment is its point."""
    r = p0 - p1
    a = wp.dot(d0, d0)
    e = wp.dot(d1, d1)
    f = wp.dot(d1, r)
    s = 0.0
    t = 0.0
    if a > 1.0e-12 and e > 1.0e-12:
        c = wp.dot(d0, r)
        b = wp.dot(d0, d1)
        denom = a * e - b * b
        if denom > 1.0e-6 * a * e:
            s = wp.clamp((b * f - c * e) / denom, 0.0, 1.0)
        t = (b * s + f) / e
        if t < 0.0:
            t = 0.0
            s = wp.clamp(-c / a, 0.0, 1.0)
        elif t > 1.0:
            t = 1.0
            s = wp.clamp((b - c) / a, 0.0, 1.0)
    elif a > 1.0e-12:
        s = wp.clamp(-wp.dot(d0, r) / a, 0.0, 1.0)
    elif e > 1.0e-12:
        t = wp.clamp(f / e, 0.0, 1.0)
    return wp.vec2(s, t)


@wp.func
def touching_normal(u0: wp.vec3, u1: wp.vec3, dc: wp.vec3) -> wp.vec3:
    """A unit normal for two axes whose closest points coincide: their common perpendicular, else the part of
    the center offset dc across u0, else dc, else +Z; turned to point along dc."""
    n = wp.cross(u0, u1)
    if wp.length(n) < 1.0e-6:
        n = dc - u0 * wp.dot(dc, u0)
        if wp.length(n) < 1.0e-9:
            n = dc
            if wp.length(n) < 1.0e-9:
                n = wp.vec3(0.0, 0.0, 1.0)
    n = wp.normalize(n)
    if wp.dot(n, dc) < 0.0:
        n = -n
    return n


@wp.func
def capsule_capsule_contact(x0: wp.transform, r0: float, hh0: float, x1: wp.transform, r1: float, hh1: float,
                            k: int, gap: float) -> ContactPoint:
    """Slot k (0 or 1) of two capsules' contacts. Slot 0: the closest points of the two axes. Where the axes
    are nearly parallel and their projections overlap, slots 0 and 1 are instead the two ends of the overlap
    on axis 0, each with its closest point on axis 1; otherwise slot 1 is invalid. Points lie on the axes,
    margins are the radii."""
    cp = ContactPoint()
    cp.valid = 0
    cp.margin0 = r0
    cp.margin1 = r1
    c0 = wp.transform_get_translation(x0)
    c1 = wp.transform_get_translation(x1)
    u0 = wp.transform_vector(x0, wp.vec3(0.0, 0.0, 1.0))
    u1 = wp.transform_vector(x1, wp.vec3(0.0, 0.0, 1.0))
    a1 = c1 - u1 * hh1
    d1 = u1 * (2.0 * hh1)
    e0 = wp.dot(a1 - c0, u0)
    e1 = wp.dot(a1 + d1 - c0, u0)
    lo = wp.max(-hh0, wp.min(e0, e1))
    hi = wp.min(hh0, wp.max(e0, e1))
    parallel = hh0 > 0.0 and hh1 > 0.0 and wp.length(wp.cross(u0, u1)) < PARALLEL_SIN
    overlap = parallel and hi - lo > 1.0e-4 * (hh0 + hh1)
    if k > 0 and not overlap:
        return cp
    p0 = c0
    p1 = c1
    if overlap:
        end = lo
        if k > 0:
            end = hi
        p0 = c0 + u0 * end
        p1 = a1 + d1 * wp.clamp(wp.dot(p0 - a1, d1) / wp.dot(d1, d1), 0.0, 1.0)
    else:
        a0 = c0 - u0 * hh0
        d0 = u0 * (2.0 * hh0)
        st = segment_closest_params(a0, d0, a1, d1)
        p0 = a0 + d0 * st[0]
        p1 = a1 + d1 * st[1]
    delta = p1 - p0
    dist = wp.length(delta)
    n = wp.vec3(0.0, 0.0, 1.0)
    if dist > 1.0e-9:
        n = delta / dist
    else:
        n = touching_normal(u0, u1, c1 - c0)
    cp.point0 = p0
    cp.point1 = p1
    cp.normal = n
    if wp.dot(n, delta) - r0 - r1 < gap:
        cp.valid = 1
    return cp


@wp.func
def deeper_on_segment(h: wp.vec3, a: wp.vec3, d: wp.vec3, t: float, best: wp.vec2) -> wp.vec2:
    """best (parameter, box signed distance), replaced by parameter t of segment a + t d where that point
    lies deeper in (or nearer to) the box."""
    f = box_sdf(h, a + d * t)
    if f < best[1]:
        return wp.vec2(t, f)
    return best


@wp.func
def segment_deepest_in_box(h: wp.vec3, a: wp.vec3, d: wp.vec3) -> float:
    """Parameter in [0, 1] of the point of segment a + t d (box frame) of least signed distance to the box.
    The distance is convex along the segment: inside the box it is the largest of the 6 face-plane
    distances, linear in t, so its minimum lies at an end or where two of them cross; outside, the nearest
    point pairs the segment's end with the box or its interior with one of the 12 edges. All 29 candidates
    are compared."""
    best = wp.vec2(0.0, box_sdf(h, a))
    best = deeper_on_segment(h, a, d, 1.0, best)
    for j in range(6):
        nj = axis_vec(j // 2) * (1.0 - 2.0 * float(j % 2))
        alpha_j = wp.dot(nj, a)
        beta_j = wp.dot(nj, d)
        hj = wp.dot(wp.abs(nj), h)
        for m in range(6):
            if m > j:
                nm = axis_vec(m // 2) * (1.0 - 2.0 * float(m % 2))
                slope = beta_j - wp.dot(nm, d)
                if wp.abs(slope) > 1.0e-12:
                    t = (wp.dot(nm, a) - wp.dot(wp.abs(nm), h) - alpha_j + hj) / slope
                    best = deeper_on_segment(h, a, d, wp.clamp(t, 0.0, 1.0), best)
    for e in range(12):
        i = e // 4
        s1 = 1.0 - 2.0 * float(e % 2)
        s2 = 1.0 - 2.0 * float((e // 2) % 2)
        corner = wp.cw_mul(axis_vec((i + 1) % 3) * s1 + axis_vec((i + 2) % 3) * s2 - axis_vec(i), h)
        st = segment_closest_params(a, d, corner, axis_vec(i) * (2.0 * wp.dot(axis_vec(i), h)))
        best = deeper_on_segment(h, a, d, st[0], best)
    return best[0]


@wp.func
def clip_to_slab(lo_hi: wp.vec2, a: float, d: float, h: float) -> wp.vec2:
    """The part (lo, hi) of parameter interval lo_hi where coordinate a + t d lies within [-h, h]."""
    lo = lo_hi[0]
    hi = lo_hi[1]
    if wp.abs(d) < 1.0e-12:
        if wp.abs(a) > h:
            hi = lo - 1.0
    else:
        t1 = (-h - a) / d
        t2 = (h - a) / d
        lo = wp.max(lo, wp.min(t1, t2))
        hi = wp.min(hi, wp.max(t1, t2))
    return wp.vec2(lo, hi)


@wp.func
def capsule_box_contact(x0: wp.transform, r: float, hh: float, x1: wp.transform, h: wp.vec3, k: int,
                        gap: float) -> ContactPoint:
    """Slot k (0 or 1) of a capsule's (shape 0) contacts with a box (shape 1). Slot 0: the point of the axis
    deepest in the box (or nearest to it) and the box's surface point nearest to it (inside the box: on the
    face of least penetration). Where that point's nearest box feature is a face the axis lies nearly
    parallel to, slots 0 and 1 are instead the ends of the axis clipped to that face's rectangle, each with
    its projection onto the face (unless an end lies deeper than r below that face and nearer another one);
    otherwise slot 1 is invalid. margin0 = r, margin1 = 0."""
    cp = ContactPoint()
    cp.valid = 0
    cp.margin0 = r
    cp.margin1 = 0.0
    xl = wp.transform_multiply(wp.transform_inverse(x1), x0)
    u = wp.transform_vector(xl, wp.vec3(0.0, 0.0, 1.0))
    a = wp.transform_get_translation(xl) - u * hh
    d = u * (2.0 * hh)
    t_deep = segment_deepest_in_box(h, a, d)
    p = a + d * t_deep
    nb = box_normal(h, p)
    # The face the deepest point lies against, where the axis lies along it.
    fi = 0
    if wp.abs(nb[1]) > wp.abs(nb[fi]):
        fi = 1
    if wp.abs(nb[2]) > wp.abs(nb[fi]):
        fi = 2
    face = wp.abs(nb[fi]) > 0.9999 and hh > 0.0 and wp.abs(u[fi]) < PARALLEL_SIN
    n_face = axis_vec(fi) * wp.sign(nb[fi])
    lo_hi = wp.vec2(0.0, 1.0)
    if face:
        i1 = (fi + 1) % 3
        i2 = (fi + 2) % 3
        lo_hi = clip_to_slab(lo_hi, a[i1], d[i1], h[i1])
        lo_hi = clip_to_slab(lo_hi, a[i2], d[i2], h[i2])
        face = lo_hi[1] - lo_hi[0] > 1.0e-4
        # The deepest point may lie just beside the face (its normal is a face's to 1e-4): keep it.
        lo_hi = wp.vec2(wp.min(lo_hi[0], t_deep), wp.max(lo_hi[1], t_deep))
        # Deep inside, an end may lie far nearer another face: then that face would overstate its depth.
        for e in range(2):
            end = a + d * lo_hi[e]
            if wp.dot(n_face, end) - wp.dot(axis_vec(fi), h) < box_sdf(h, end) - r:
                face = False
    if face:
        p = a + d * lo_hi[wp.min(k, 1)]
        height = wp.dot(n_face, p) - wp.dot(axis_vec(fi), h)  # of p above that face
        cp.point0 = wp.transform_point(x1, p)
        q = p - n_face * height  # on the face's plane; clamped onto the face where p lies just beside it
        q = wp.vec3(wp.clamp(q[0], -h[0], h[0]), wp.clamp(q[1], -h[1], h[1]), wp.clamp(q[2], -h[2], h[2]))
        cp.point1 = wp.transform_point(x1, q)
        cp.normal = -wp.transform_vector(x1, n_face)
        if height - r < gap:
            cp.valid = 1
        return cp
    if k > 0:
        return cp
    dist = box_sdf(h, p)
    cp.point0 = wp.transform_point(x1, p)
    cp.point1 = wp.transform_point(x1, p - nb * dist)
    cp.normal = -wp.transform_vector(x1, nb)
    if dist - r < gap:
        cp.valid = 1
    return cp


@wp.func
def box_axes(x: wp.transform) -> wp.mat33:
    """A box's world axes as the rows of a matrix."""
    return wp.transpose(wp.quat_to_matrix(wp.transform_get_rotation(x)))


@wp.func
def box_axis_separation(d: wp.vec3, ra0: wp.mat33, h0: wp.vec3, ra1: wp.mat33, h1: wp.vec3, n: wp.vec3) -> float:
    """Separation along unit axis n of two boxes (center offset d, axes as rows ra0 and ra1, half-extents h0
    and h1; negative: their projections overlap)."""
    return wp.abs(wp.dot(d, n)) - wp.dot(wp.abs(ra0 * n), h0) - wp.dot(wp.abs(ra1 * n), h1)


@wp.func
def box_edge_center(c: wp.vec3, ra: wp.mat33, h: wp.vec3, i: int, n: wp.vec3) -> wp.vec3:
    """The middle of the edge along axis i of the box (center c, axes as rows ra) farthest along direction n."""
    for m in range(3):
        if m != i:
            c = c + ra[m] * (wp.dot(axis_vec(m), h) * wp.sign(wp.dot(ra[m], n)))
    return c


@wp.func
def face_clip_candidate(c: int, lc: wp.vec3, lu: wp.vec3, lv: wp.vec3, hu: float, hv: float,
                        eps: float) -> wp.vec4:
    """Candidate c (0..23) for a vertex of the incident face (the parallelogram lc + a lu + b lv, |a|, |b|
    <= 1, in the reference face's frame: x, y across it, z out of it) clipped to the reference rectangle
    |x| <= hu, |y| <= hv, as (x, y, z, 1) where it is one, else w = 0. 0..3: incident corners inside the
    rectangle; 4..7: rectangle corners inside the incident face, away from its corners (those are 0..3);
    8..23: crossings of incident edge (c - 8) // 4 with rectangle side (c - 8) % 4, away from both ends of
    each. Within eps a point belongs to exactly one kind, so a Sutherland-Hodgman polygon results without
    repeats."""
    if c < 4:
        p = lc + lu * (1.0 - 2.0 * float(((c + 1) // 2) % 2)) + lv * (1.0 - 2.0 * float(c // 2))
        if wp.abs(p[0]) <= hu + eps and wp.abs(p[1]) <= hv + eps:
            return wp.vec4(p[0], p[1], p[2], 1.0)
        return wp.vec4(0.0)
    if c < 8:
        x = hu * (1.0 - 2.0 * float(((c - 3) // 2) % 2))
        y = hv * (1.0 - 2.0 * float((c - 4) // 2))
        det = lu[0] * lv[1] - lv[0] * lu[1]
        if wp.abs(det) < 1.0e-12:
            return wp.vec4(0.0)
        dx = x - lc[0]
        dy = y - lc[1]
        ca = (dx * lv[1] - dy * lv[0]) / det
        cb = (lu[0] * dy - lu[1] * dx) / det
        # Tolerances in a, b that are eps across the parallelogram's sides.
        ta = eps * wp.length(wp.vec2(lv[0], lv[1])) / wp.abs(det)
        tb = eps * wp.length(wp.vec2(lu[0], lu[1])) / wp.abs(det)
        if wp.abs(ca) > 1.0 + ta or wp.abs(cb) > 1.0 + tb:
            return wp.vec4(0.0)
        for q in range(4):
            corner = lc + lu * (1.0 - 2.0 * float(((q + 1) // 2) % 2)) + lv * (1.0 - 2.0 * float(q // 2))
            if wp.abs(corner[0] - x) <= eps and wp.abs(corner[1] - y) <= eps:
                return wp.vec4(0.0)
        p = lc + lu * ca + lv * cb
        return wp.vec4(x, y, p[2], 1.0)
    edge = (c - 8) // 4
    side = (c - 8) % 4
    pa = lc + lu * (1.0 - 2.0 * float(((edge + 1) // 2) % 2)) + lv * (1.0 - 2.0 * float(edge // 2))
    nxt = (edge + 1) % 4
    pb = lc + lu * (1.0 - 2.0 * float(((nxt + 1) // 2) % 2)) + lv * (1.0 - 2.0 * float(nxt // 2))
    # The side as a line: coordinate ax of a point equals bound; the other coordinate must stay within along.
    ax = side // 2
    bound = hu * (1.0 - 2.0 * float(side % 2))
    along = hv
    if ax == 1:
        bound = hv * (1.0 - 2.0 * float(side % 2))
        along = hu
    da = pa[ax] - bound
    db = pb[ax] - bound
    if wp.abs(da) <= eps or wp.abs(db) <= eps or da * db > 0.0:
        return wp.vec4(0.0)
    p = pa + (pb - pa) * (da / (da - db))
    if wp.abs(p[1 - ax]) >= along - eps:
        return wp.vec4(0.0)
    return wp.vec4(p[0], p[1], p[2], 1.0)


@wp.func
def box_box_contact(x0: wp.transform, h0: wp.vec3, x1: wp.transform, h1: wp.vec3, k: int,
                    gap: float) -> ContactPoint:
    """Slot k (0..7) of two boxes' contacts, by the separating-axis test over their 3 + 3 face normals and
    9 edge-edge cross products (the axis of greatest separation, faces and box 0 preferred in near ties, and
    edge axes close to the best face's normal left to that face).
    Separated by more than gap: no contacts. A face axis: the other box's face most opposed to it is clipped
    to the reference face's rectangle, and slot k is the k-th clipped vertex (up to 8) whose height above the
    reference face is below gap, paired with its projection onto that face. An edge-edge axis: slot 0 only,
    the closest points of the two edges. Margins are 0."""
    cp = ContactPoint()
    cp.valid = 0
    cp.margin0 = 0.0
    cp.margin1 = 0.0
    c0 = wp.transform_get_translation(x0)
    c1 = wp.transform_get_translation(x1)
    ra0 = box_axes(x0)
    ra1 = box_axes(x1)
    d = c1 - c0
    size = wp.max(wp.max(wp.max(h0[0], h0[1]), wp.max(h0[2], h1[0])), wp.max(h1[1], h1[2]))
    best = -1.0e30
    best_axis = -1
    best_n = wp.vec3(0.0, 0.0, 1.0)
    for i in range(6):
        n = ra0[i % 3]
        bias = 0.0
        if i >= 3:
            n = ra1[i - 3]
            bias = FACE_BIAS_ABS * size
        s = box_axis_separation(d, ra0, h0, ra1, h1, n)
        if s > best + bias:
            best = s
            best_axis = i
            best_n = n * wp.sign(wp.dot(d, n))
    largest = best
    face_best = best
    face_n = best_n
    for e in range(9):
        n = wp.cross(ra0[e // 3], ra1[e % 3])
        ln = wp.length(n)
        if ln > 1.0e-3:
            n = n / ln
            s = box_axis_separation(d, ra0, h0, ra1, h1, n)
            largest = wp.max(largest, s)
            if (s > best and s > face_best + EDGE_BIAS_REL * wp.abs(face_best) + EDGE_BIAS_ABS * size
                    and wp.abs(wp.dot(n, face_n)) < EDGE_FACE_COS):
                best = s
                best_axis = 6 + e
                best_n = n * wp.sign(wp.dot(d, n))
    if largest > gap:
        return cp
    cp.normal = best_n
    if best_axis >= 6:
        if k > 0:
            return cp
        i0 = (best_axis - 6) // 3
        i1 = (best_axis - 6) % 3
        u0 = ra0[i0] * wp.dot(axis_vec(i0), h0)
        u1 = ra1[i1] * wp.dot(axis_vec(i1), h1)
        a0 = box_edge_center(c0, ra0, h0, i0, best_n) - u0
        a1 = box_edge_center(c1, ra1, h1, i1, -best_n) - u1
        st = segment_closest_params(a0, u0 * 2.0, a1, u1 * 2.0)
        cp.point0 = a0 + u0 * (2.0 * st[0])
        cp.point1 = a1 + u1 * (2.0 * st[1])
        if wp.dot(best_n, cp.point1 - cp.point0) < gap:
            cp.valid = 1
        return cp
    # Face axis: the reference box owns it, its face normal nr points toward the incident box.
    cr = c0
    rr = ra0
    hr = h0
    ci = c1
    ri = ra1
    hi = h1
    ir = best_axis
    nr = best_n
    if best_axis >= 3:
        cr = c1
        rr = ra1
        hr = h1
        ci = c0
        ri = ra0
        hi = h0
        ir = best_axis - 3
        nr = -best_n
    eu = rr[(ir + 1) % 3]
    ev = rr[(ir + 2) % 3]
    hu = wp.dot(axis_vec((ir + 1) % 3), hr)
    hv = wp.dot(axis_vec((ir + 2) % 3), hr)
    fc = cr + nr * wp.dot(axis_vec(ir), hr)
    # Incident face: the face of the other box whose outward normal is most opposed to nr.
    along = ri * nr
    m = 0
    for j in range(3):
        if wp.abs(along[j]) > wp.abs(along[m]):
            m = j
    ic = ci - ri[m] * (wp.dot(axis_vec(m), hi) * wp.sign(along[m]))
    wu = ri[(m + 1) % 3] * wp.dot(axis_vec((m + 1) % 3), hi)
    wv = ri[(m + 2) % 3] * wp.dot(axis_vec((m + 2) % 3), hi)
    # The incident face in the reference face's frame (x along eu, y along ev, z out along nr).
    frame = wp.mat33(eu[0], eu[1], eu[2], ev[0], ev[1], ev[2], nr[0], nr[1], nr[2])
    lc = frame * (ic - fc)
    lu = frame * wu
    lv = frame * wv
    eps = CLIP_EPS * (hu + hv)
    kept = 0
    for c in range(24):
        v = face_clip_candidate(c, lc, lu, lv, hu, hv, eps)
        if v[3] > 0.0 and v[2] < gap:
            if kept == k:
                on_ref = fc + eu * v[0] + ev * v[1]
                on_inc = on_ref + nr * v[2]
                cp.valid = 1
                cp.point0 = on_ref
                cp.point1 = on_inc
                if best_axis >= 3:
                    cp.point0 = on_inc
                    cp.point1 = on_ref
            kept = kept + 1
    return cp
