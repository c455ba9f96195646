/* The phase fill of one plane (phase_fill.c), for kernels that fill as they go. */
#ifndef GE_PHASE_FILL_H
#define GE_PHASE_FILL_H

#include "abi.h"

/* into the layout (f->ph) */
__attribute__((visibility("hidden"))) void phase_fill_plane(const PhaseFill *f, int64_t plane);
/* into dst, phase (r0, r1) at dst + (r0 s1 + r1) phase_stride; padding_zeroed: dst's padding is
   zero already (a buffer reused for planes of the same layout), only x's part is written */
__attribute__((visibility("hidden"))) void phase_fill_plane_into(const PhaseFill *f, int64_t plane, float *dst,
                                                                 int64_t phase_stride, int padding_zeroed);

#endif
