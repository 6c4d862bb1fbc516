// loomwork.geometry: hash grid queries (wp.HashGrid). Included after loomwork.h by modules that use them.
#pragma once

namespace lw {

// What HashGrid.id points to: points bucketed by cell, cells hashed into dim_x * dim_y * dim_z buckets.
struct hash_grid_t {
    uint64_t points;       // vec_t<3, float>*, the points the grid was built from
    uint64_t sorted_ids;   // int32_t*, point indices in bucket order
    uint64_t cell_starts;  // int32_t*, per bucket: first position in sorted_ids
    uint64_t cell_ends;    // int32_t*, per bucket: one past its last position
    float cell_width;
    int32_t dim_x, dim_y, dim_z;
    int32_t num_points;
};

// A neighbour query in progress: the cells around the query point, and where the iteration stands.
struct hash_grid_query_t {
    uint64_t id;
    int32_t x_start, y_start, z_start;
    int32_t x_end, y_end, z_end;
    int32_t x, y, z;
    int32_t cursor, stop;  // positions in sorted_ids left in the current cell
};

LW_FUNC int32_t hash_grid_cell(float x, float inv_width) { return (int32_t)floor(x * inv_width); }

LW_FUNC int32_t hash_grid_bucket(const hash_grid_t& g, int32_t x, int32_t y, int32_t z) {
    int32_t bx = x % g.dim_x, by = y % g.dim_y, bz = z % g.dim_z;
    bx += bx < 0 ? g.dim_x : 0;
    by += by < 0 ? g.dim_y : 0;
    bz += bz < 0 ? g.dim_z : 0;
    return (bz * g.dim_y + by) * g.dim_x + bx;
}

// Start a query of the points within max_dist of p (and possibly some farther: test the distance).
LW_FUNC hash_grid_query_t hash_grid_query(uint64_t id, vec_t<3, float> p, float max_dist) {
    const hash_grid_t& g = *(const hash_grid_t*)id;
    const float inv = 1.0f / g.cell_width;
    hash_grid_query_t q{};
    q.id = id;
    q.x_start = hash_grid_cell(p.c[0] - max_dist, inv);
    q.y_start = hash_grid_cell(p.c[1] - max_dist, inv);
    q.z_start = hash_grid_cell(p.c[2] - max_dist, inv);
    // a range wider than the grid would visit buckets twice: clamp it to one period per axis
    q.x_end = min(hash_grid_cell(p.c[0] + max_dist, inv), q.x_start + g.dim_x - 1);
    q.y_end = min(hash_grid_cell(p.c[1] + max_dist, inv), q.y_start + g.dim_y - 1);
    q.z_end = min(hash_grid_cell(p.c[2] + max_dist, inv), q.z_start + g.dim_z - 1);
    q.x = q.x_start;
    q.y = q.y_start;
    q.z = q.z_start;
    const int32_t b = hash_grid_bucket(g, q.x, q.y, q.z);
    q.cursor = ((const int32_t*)g.cell_starts)[b];
    q.stop = ((const int32_t*)g.cell_ends)[b];
    return q;
}

// The next candidate point of a query: its index into the grid's points. False when none is left.
LW_FUNC bool hash_grid_query_next(hash_grid_query_t& q, int32_t& index) {
    const hash_grid_t& g = *(const hash_grid_t*)q.id;
    while (q.cursor >= q.stop) {
        if (++q.x > q.x_end) {
            q.x = q.x_start;
            if (++q.y > q.y_end) {
                q.y = q.y_start;
                if (++q.z > q.z_end) return false;
            }
        }
        const int32_t b = hash_grid_bucket(g, q.x, q.y, q.z);
        q.cursor = ((const int32_t*)g.cell_starts)[b];
        q.stop = ((const int32_t*)g.cell_ends)[b];
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
