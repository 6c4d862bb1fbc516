// loomwork.geometry: hash grid queries (wp.HashGrid). Included after loomwork.h by modules that use them.
#pragma once

namespace lw {

// What HashGrid.id points to: points bucketed by cell, cells hashed into dim_x * dim_y * dim_z buckets.
// With groups, each bucket's points are sorted by group id as well.
struct hash_grid_t {
    uint64_t points;         // vec_t<3, T>*, the points the grid was built from
    uint64_t sorted_ids;     // int32_t*, point indices in bucket order
    uint64_t sorted_groups;  // int32_t*, the group of each position of sorted_ids (grouped grids)
    uint64_t cell_starts;    // int32_t*, per bucket: first position in sorted_ids
    uint64_t cell_ends;      // int32_t*, per bucket: one past its last position
    double cell_width;
    int32_t dim_x, dim_y, dim_z;
    int32_t num_points;
    int32_t grouped;
};

// A neighbour query in progress: the cells around the query point, and where the iteration stands.
struct hash_grid_query_t {
    uint64_t id;
    int32_t sx, sy, sz;    // the first cell on each axis
    int32_t nx, ny, nz;    // cells to visit on each axis (at most one period of the grid)
    int32_t ix, iy, iz;    // the current cell, as offsets from the first
    int32_t cursor, stop;  // positions in sorted_ids left in the current cell
    int32_t group, grouped;
};

// coordinates are binned in float (half points too) or double
LW_FUNC float hash_grid_wide(half x) { return (float)x; }
LW_FUNC float hash_grid_wide(float x) { return x; }
LW_FUNC double hash_grid_wide(double x) { return x; }

// The cell floor(x / width) clamped to the int32 range; NaN falls in cell 0.
template <typename C> LW_FUNC int32_t hash_grid_cell(C x, C inv_width) {
    double c = (double)floor(x * inv_width);
    if (!(c == c)) return 0;
    if (c < -2147483648.0) return -2147483647 - 1;
    return c > 2147483647.0 ? 2147483647 : (int32_t)c;
}

LW_FUNC int32_t hash_grid_wrap(int64_t cell, int32_t dim) {
    int64_t b = cell % dim;
    return (int32_t)(b < 0 ? b + dim : b);
}

// The range of sorted positions of the query's current cell (narrowed to its group in a grouped grid).
// Without groups, the cells left in the row that map to consecutive buckets form one range (HashGrid.build
// gives empty buckets an empty range in place), and the query moves to the last of them.
LW_FUNC void hash_grid_enter(const hash_grid_t& g, hash_grid_query_t& q) {
    const int32_t row = (hash_grid_wrap((int64_t)q.sz + q.iz, g.dim_z) * g.dim_y +
                         hash_grid_wrap((int64_t)q.sy + q.iy, g.dim_y)) * g.dim_x;
    const int32_t bx = hash_grid_wrap((int64_t)q.sx + q.ix, g.dim_x);
    int32_t run = 1;
    if (!q.grouped) {
        run = q.nx - q.ix;
        if (run > g.dim_x - bx) run = g.dim_x - bx;  // the row wraps: the rest is another range
    }
    int32_t lo = ((const int32_t*)g.cell_starts)[row + bx], hi = ((const int32_t*)g.cell_ends)[row + bx + run - 1];
    q.ix += run - 1;
    if (q.grouped) {
        const int32_t* groups = (const int32_t*)g.sorted_groups;
        int32_t a = lo, e = hi;
        while (a < e) {  // first position whose group is >= q.group
            int32_t m = a + (e - a) / 2;
            if (groups[m] < q.group) a = m + 1;
            else e = m;
        }
        lo = a;
        e = hi;
        while (a < e) {  // first position whose group is > q.group
            int32_t m = a + (e - a) / 2;
            if (groups[m] <= q.group) a = m + 1;
            else e = m;
        }
        hi = a;
    }
    q.cursor = lo;
    q.stop = hi;
}

// The bucket a point falls in: HashGrid.build sorts the points by it.
template <typename T> LW_FUNC int32_t hash_grid_bucket(uint64_t id, vec_t<3, T> p) {
    const hash_grid_t& g = *(const hash_grid_t*)id;
    auto inv = decltype(hash_grid_wide(p.c[0]))(1) / decltype(hash_grid_wide(p.c[0]))(g.cell_width);
    return (hash_grid_wrap(hash_grid_cell(hash_grid_wide(p.c[2]), inv), g.dim_z) * g.dim_y +
            hash_grid_wrap(hash_grid_cell(hash_grid_wide(p.c[1]), inv), g.dim_y)) * g.dim_x +
           hash_grid_wrap(hash_grid_cell(hash_grid_wide(p.c[0]), inv), g.dim_x);
}

LW_FUNC int32_t hash_grid_span(int32_t start, int32_t end, int32_t dim) {
    // cells start..end (an empty range when end < start), at most one period: wider would repeat buckets
    int64_t n = (int64_t)end - start + 1;
    return n <= 0 ? 0 : n > dim ? dim : (int32_t)n;
}

// Start a query of the points within max_dist of p (and possibly some farther: test the distance).
template <typename T>
LW_FUNC hash_grid_query_t hash_grid_query_in(uint64_t id, vec_t<3, T> p, T max_dist, int32_t group, int32_t grouped) {
    const hash_grid_t& g = *(const hash_grid_t*)id;
    auto r = hash_grid_wide(max_dist);
    auto inv = decltype(r)(1) / decltype(r)(g.cell_width);
    hash_grid_query_t q{};
    q.id = id;
    int32_t start[3], end[3];
    for (int k = 0; k < 3; ++k) {
        auto x = hash_grid_wide(p.c[k]);
        start[k] = hash_grid_cell(x - r, inv);
        end[k] = hash_grid_cell(x + r, inv);
    }
    q.sx = start[0];
    q.sy = start[1];
    q.sz = start[2];
    q.nx = hash_grid_span(start[0], end[0], g.dim_x);
    q.ny = hash_grid_span(start[1], end[1], g.dim_y);
    q.nz = hash_grid_span(start[2], end[2], g.dim_z);
    q.group = group;
    q.grouped = grouped && g.grouped;
    if (q.nx > 0 && q.ny > 0 && q.nz > 0 && g.num_points > 0) hash_grid_enter(g, q);
    else q.iz = q.nz;  // nothing to visit
    return q;
}
template <typename T> LW_FUNC hash_grid_query_t hash_grid_query(uint64_t id, vec_t<3, T> p, T max_dist) {
    return hash_grid_query_in(id, p, max_dist, 0, 0);
}
template <typename T>
LW_FUNC hash_grid_query_t hash_grid_query(uint64_t id, vec_t<3, T> p, T max_dist, int32_t group) {
    return hash_grid_query_in(id, p, max_dist, group, 1);
}

// The next candidate point of a query: its index into the grid's points. False when none is left.
LW_FUNC bool hash_grid_query_next(hash_grid_query_t& q, int32_t& index) {
    if (q.iz >= q.nz) return false;
    const hash_grid_t& g = *(const hash_grid_t*)q.id;
    while (q.cursor >= q.stop) {
        if (++q.ix >= q.nx) {
            q.ix = 0;
            if (++q.iy >= q.ny) {
                q.iy = 0;
                if (++q.iz >= q.nz) return false;
            }
        }
        hash_grid_enter(g, q);
    }
    index = ((const int32_t*)g.sorted_ids)[q.cursor++];
    return true;
}

// The index of the point at position `index` in bucket order: threads launched over the points and
// mapped through it visit neighbouring points one after another.
LW_FUNC int32_t hash_grid_point_id(uint64_t id, int32_t index) {
    const hash_grid_t& g = *(const hash_grid_t*)id;
    return (index >= 0 && index < g.num_points) ? ((const int32_t*)g.sorted_ids)[index] : -1;
}

}  // namespace lw
