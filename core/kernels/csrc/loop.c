/* abi.h's StepLoop: a static Loop or Scan body iterated in one native call (core/runtime/hybrid_context.py's
   BoundBody.native_loop). An iteration is its copies and its tasks' prepared calls, as the Python
   iteration of core/kernels/ops/control_flow.py makes them: a Python iteration costs microseconds of
   calls where a small body's kernels take less. */
#include <stdint.h>
#include <string.h>

#include "abi.h"

static void step_copies(const StepCopy *c, int64_t count, int64_t t) {
    for (int64_t i = 0; i < count; i++)  /* (memmove: a body output read at its source may be the input it goes back to) */
        memmove(c[i].dst + t * c[i].dst_step, c[i].src + t * c[i].src_step, (size_t)c[i].nbytes);
}

int64_t ge_step_loop(const StepLoop *l) {
    const StepCopy *outs = l->copies + l->feeds, *back = outs + l->outs;
    for (int64_t t = l->start; t < l->stop; t++) {
        if (l->counter) *l->counter = t;
        step_copies(l->copies, l->feeds, t);
        for (int64_t c = 0; c < l->calls; c++) l->fn[c](l->args[c]);
        step_copies(outs, l->outs, t);
        if (l->cond && !*l->cond) return t + 1;
        step_copies(back, l->back, 0);
    }
    return l->stop;
}
