/* NonMaxSuppression (nms.c), onnxruntime's selection operation for operation, so that the indices and
their order are its own. Per (batch, class): the candidates (every box, or those whose score exceeds
the threshold, in index order) go into a binary heap built and popped as libstdc++'s std::priority_queue
does (make_heap, then pop_heap per candidate), ordered by score, ties by the lower index. With a
strict order that is a sort (highest score first); a NaN score (no threshold) compares as neither
greater nor smaller than anything, and the heap's own moves then decide where it comes out, so
copying them is the only way to onnxruntime's order. A popped candidate is kept unless its IoU with
a kept one exceeds iou_threshold, until max_out are kept. The IoU test is onnxruntime's (float32,
each box's corners and area computed once per batch: the same operations give the same values). */
#include <stdint.h>
#include <stdlib.h>

#include "abi.h"

/* No multiply and add may fuse into one rounding: onnxruntime's areas, union and IoU round each step */
#pragma GCC optimize("fp-contract=off")

typedef struct {
    float score;
    int64_t index;
} Candidate;

/* std::less on onnxruntime's BoxInfoPtr: the lower score, or the same score and the higher index */
static inline int below(Candidate a, Candidate b) {
    return a.score < b.score || (a.score == b.score && a.index > b.index);
}

/* libstdc++'s __push_heap: value rises from hole towards top while its parent is below it */
static void push_up(Candidate *h, int64_t hole, int64_t top, Candidate value) {
    int64_t parent = (hole - 1) / 2;
    while (hole > top && below(h[parent], value)) {
        h[hole] = h[parent];
        hole = parent;
        parent = (hole - 1) / 2;
    }
    h[hole] = value;
}

/* libstdc++'s __adjust_heap: the hole sinks to a leaf by the larger child, then value rises into it */
static void adjust(Candidate *h, int64_t hole, int64_t len, Candidate value) {
    int64_t top = hole, child = hole;
    while (child < (len - 1) / 2) {
        child = 2 * (child + 1);
        if (below(h[child], h[child - 1])) child--;
        h[hole] = h[child];
        hole = child;
    }
    if ((len & 1) == 0 && child == (len - 2) / 2) {
        child = 2 * (child + 1);
        h[hole] = h[child - 1];
        hole = child - 1;
    }
    push_up(h, hole, top, value);
}

static void make_heap(Candidate *h, int64_t len) {
    if (len < 2) return;
    for (int64_t parent = (len - 2) / 2;; parent--) {
        adjust(h, parent, len, h[parent]);
        if (parent == 0) return;
    }
}

/* pop_heap then pop_back: the top leaves, the heap is one shorter */
static void pop_heap(Candidate *h, int64_t len) {
    if (len > 1) {
        Candidate last = h[len - 1];
        h[len - 1] = h[0];
        adjust(h, 0, len - 1, last);
    }
}

/* One box's corners and area: x0, y0, x1, y1, area */
typedef struct {
    float x0, y0, x1, y1, area;
} Corners;

/* onnxruntime's MaxMin */
static inline void max_min(float lhs, float rhs, float *lo, float *hi) {
    if (lhs >= rhs) *lo = rhs, *hi = lhs;
    else *lo = lhs, *hi = rhs;
}

static void corners(const float *b, int64_t n, int32_t center, Corners *c) {
    for (int64_t i = 0; i < n; i++, b += 4) {
        Corners *k = &c[i];
        if (center == 0) {  /* [y1, x1, y2, x2], either corner first */
            max_min(b[1], b[3], &k->x0, &k->x1);
            max_min(b[0], b[2], &k->y0, &k->y1);
        } else {  /* [x_center, y_center, width, height] */
            float hw = b[2] / 2, hh = b[3] / 2;
            k->x0 = b[0] - hw, k->x1 = b[0] + hw;
            k->y0 = b[1] - hh, k->y1 = b[1] + hh;
        }
        k->area = (k->x1 - k->x0) * (k->y1 - k->y0);
    }
}

/* std::max and std::min (a NaN operand: as they return it) */
static inline float fmax_std(float a, float b) { return a < b ? b : a; }
static inline float fmin_std(float a, float b) { return b < a ? b : a; }

/* onnxruntime's SuppressByIOU(candidate a, kept b) */
static int suppresses(const Corners *a, const Corners *b, float iou) {
    float ix0 = fmax_std(a->x0, b->x0), ix1 = fmin_std(a->x1, b->x1);
    if (ix1 <= ix0) return 0;
    float iy0 = fmax_std(a->y0, b->y0), iy1 = fmin_std(a->y1, b->y1);
    if (iy1 <= iy0) return 0;
    float inter = (ix1 - ix0) * (iy1 - iy0);
    if (inter <= 0.0f) return 0;
    float uni = a->area + b->area - inter;
    if (a->area <= 0.0f || b->area <= 0.0f || uni <= 0.0f) return 0;
    return inter / uni > iou;
}

int64_t ge_nms(const Nms *p) {
    int64_t n = p->n, max_out = p->max_out ? *p->max_out : 0, rows = 0;
    float iou = p->iou ? *p->iou : 0.0f;
    if (!(iou >= 0.0f && iou <= 1.0f)) return NMS_BAD_IOU;
    int64_t cap = max_out < n ? max_out : n;
    if (cap <= 0) return 0;
    if (p->batch * p->classes * cap > p->capacity) return NMS_NO_ROOM;
    Corners *box = malloc(sizeof(Corners) * (size_t)n);
    Candidate *heap = malloc(sizeof(Candidate) * (size_t)n);
    int64_t *kept = malloc(sizeof(int64_t) * (size_t)cap);
    if (!box || !heap || !kept) {
        free(box), free(heap), free(kept);
        return NMS_NO_MEMORY;
    }
    for (int64_t b = 0; b < p->batch; b++) {
        corners(p->boxes + b * n * 4, n, p->center, box);
        for (int64_t c = 0; c < p->classes; c++) {
            const float *s = p->scores + (b * p->classes + c) * n;
            int64_t len = 0, k = 0;
            for (int64_t i = 0; i < n; i++)
                if (!p->score_threshold || s[i] > *p->score_threshold) heap[len].score = s[i], heap[len++].index = i;
            make_heap(heap, len);
            while (len > 0 && k < cap) {
                int64_t i = heap[0].index, j = 0;
                while (j < k && !suppresses(&box[i], &box[kept[j]], iou)) j++;
                if (j == k) {
                    kept[k++] = i;
                    int64_t *row = p->out + 3 * rows++;
                    row[0] = b, row[1] = c, row[2] = i;
                }
                pop_heap(heap, len--);
            }
        }
    }
    free(box), free(heap), free(kept);
    return rows;
}
