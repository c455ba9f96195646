/* conv.PhaseLayout.fill for 2-D inputs: the padded input split into its stride phases, ph[r0, r1,
plane, q0, q1] = x[plane, q0 * s0 + r0 - pb0, q1 * s1 + r1 - pb1], zero outside x. Items are runs of
planes (each source row is read once for all its phases); every element of a used phase is written. */
#include "abi.h"
#include "pool.h"
#include "simd.h"


/* d[q] = src[2 q] for q < n, reading at most `avail` floats of src: pairs of vectors, one shuffle. */
static inline void take_evens(float *d, const float *src, int64_t n, int64_t avail) {
    int64_t q = 0;
#if !defined(__clang__)
    ivec even;
    for (int i = 0; i < VL; i++) even[i] = 2 * i;
    for (; q + VL <= n && 2 * q + 2 * VL <= avail; q += VL)
        vstore(d + q, __builtin_shuffle(vload(src + 2 * q), vload(src + 2 * q + VL), even));
#endif
    for (; q < n; q++) d[q] = src[2 * q];
}

static NO_LIBCALLS void phase_fill_plane(const PhaseFill *f, int64_t plane) {
    const float *x = f->x + plane * f->h * f->w;
    int64_t phase_size = f->planes * f->sq0 * f->sq1;
    for (int64_t r0 = 0; r0 < f->s0; r0++)
        for (int64_t q0 = 0; q0 < f->sq0; q0++) {
            int64_t hh = q0 * f->s0 + r0 - f->pb0;
            for (int64_t r1 = 0; r1 < f->s1; r1++) {  /* the phases of one source row, while it is in L1 */
                if (!(f->used >> (r0 * f->s1 + r1) & 1)) continue;
                float *d = f->ph + (r0 * f->s1 + r1) * phase_size + (plane * f->sq0 + q0) * f->sq1;
                int64_t lo = 0, hi = f->sq1;  /* the q1 whose column lies inside x */
                while (lo < hi && lo * f->s1 + r1 - f->pb1 < 0) lo++;
                while (hi > lo && (hi - 1) * f->s1 + r1 - f->pb1 >= f->w) hi--;
                if (hh < 0 || hh >= f->h || lo >= hi) { fill_floats(d, f->sq1, 0.0f); continue; }
                const float *src = x + hh * f->w + lo * f->s1 + r1 - f->pb1;
                fill_floats(d, lo, 0.0f);
                if (f->s1 == 1) copy_floats(d + lo, src, hi - lo);
                else if (f->s1 == 2) take_evens(d + lo, src, hi - lo, x + (hh + 1) * f->w - src);
                else for (int64_t q = 0; q < hi - lo; q++) d[lo + q] = src[q * f->s1];
                fill_floats(d + hi, f->sq1 - hi, 0.0f);
            }
        }
}


static void phase_fill_item(void *ctx, int64_t it, int slot) {
    const PhaseFill *f = ctx;
    (void)slot;
    int64_t per = 1 + FILL_ITEM_FLOATS / (f->h * f->w + 1);
    for (int64_t plane = it * per; plane < (it + 1) * per && plane < f->planes; plane++) phase_fill_plane(f, plane);
}

void ge_phase_fill(const PhaseFill *f) {
    int64_t per = 1 + FILL_ITEM_FLOATS / (f->h * f->w + 1);
    pool_run(phase_fill_item, (void *)f, (f->planes + per - 1) / per, f->threads);
}
