/* The ABI of ge's native kernels, in one place: the argument structs, the activation codes and other
constants, and the exported functions. Each kernel takes one struct pointer (ctypes converts one
pointer instead of twenty arguments). core/kernels/native/generate.py reads this file and writes the
Python binding (native/abi.py: ctypes classes, constants, signatures) and the layout table
(abi_layout.h) that ge_abi_layout() (module.c) exports and the loader checks at load: a mismatch
refuses the library. Keep to the subset of C the generator reads (its docstring says which). */
#ifndef GE_ABI_H
#define GE_ABI_H

#include <stdint.h>

/* The activation a kernel applies as it stores, after bias and residual, with its parameters a, b:
   CLAMP min(max(x, a), b) (Relu, Relu6, Clip); GELU x/2 (1 + erf(x / sqrt 2)); HARDSIGMOID
   max(0, min(1, a x + b)); HARDSWISH x max(0, min(1, x / 6 + 1/2)); SIGMOID 1 / (1 + e^-x);
   SWISH x sigmoid(a x) (SiLU: a = 1); LEAKY_RELU x >= 0 ? x : a x; GELU_TANH x/2 (1 + tanh(z)),
   z = sqrt(2/pi) (x + 0.044715 x^3) (GPT-2's gelu_new); TANH tanh(x). */
enum { ACT_NONE, ACT_CLAMP, ACT_GELU, ACT_HARDSIGMOID, ACT_HARDSWISH, ACT_SIGMOID, ACT_SWISH, ACT_LEAKY_RELU,
       ACT_GELU_TANH, ACT_TANH };

typedef struct {
    int32_t act;
    float a, b;
} Activation;

/* Which operands of a GEMM (GemmArgs.half) or a direct convolution (ConvDirect.half: HALF_C, and HALF_B for the pixels kernel) are
   float16 (half.h: converted as they are read, rounded once as they are stored; the arithmetic is
   float32): A's raw rows, B's gathered values, C with Z, the per-column bias. Packed weights and
   bias_m are float32 always. */
enum { HALF_A = 1, HALF_B = 2, HALF_C = 4, HALF_BIAS = 8 };

/* A call's arguments in one struct: ctypes converts one pointer instead of 23 arguments
   (microseconds per call; a kernel keeps its struct while its buffers stay put). */
typedef struct {
    int64_t M, N, K;
    const float *a;
    int64_t lda;
    const float *ap, *b;
    const int64_t *koff, *noff;
    const float *bp;
    float *c;
    int64_t ldc;
    const float *bias_m, *bias_n, *z;  /* z may be c (same ldz): a residual written over (alpha 1) */
    int64_t ldz;
    Activation act;
    int32_t threads;
    float *ws;
    int64_t pitch, width;  /* flat columns (see Epilogue), or 0 */
    float alpha;
    int32_t half;  /* HALF_* bits: those operands are float16 (offsets and leading dimensions in elements) */
} GemmArgs;

/* A batch of products with one shape, C[i] = act(alpha A[i] @ B[i] + bias_n[i] + Z[i]) (attention's
Q K^T and P V per head): `g` holds the first one's arguments, the offsets (in floats, NULL: all 0)
where each operand of product i starts from it. Items are products, each a single-threaded GEMM
with its own slot of the workspace (ge_workspace_floats(M, N, K, 1, 1, 1) floats per slot): a head's
product is too small to share between threads. */
typedef struct {
    GemmArgs g;
    int64_t batch;
    const int64_t *a_off, *b_off, *c_off, *bias_off, *z_off;
} GemmBatch;

/* The direct convolution (direct_conv.c): y[ch * ldy + oy * width + ox] = act(bias[ch] + z[...] +
sum_k wp[k][ch] * x[koff[k] + oy * pitch + ox]); z may be y (each element of Z is read just before
its element of Y is written) */
typedef struct {
    const float *x;
    const int64_t *koff;
    const float *wp;
    float *y;
    const float *bias, *z;
    int64_t K, M, rows, width, pitch, ldy;  /* y[ch * ldy + oy * width + ox], x row oy at oy * pitch */
    Activation act;
    int32_t threads;
    int32_t wide;  /* the wide tile (weights packed for it: ge_direct_panel(wide, M)) */
    int32_t half;  /* HALF_C: y and z are float16; HALF_B: x is float16 (the pixels convolution only) */
} ConvDirect;

/* Prepared calls run as one job of the pool (pool.c), a call per item: fn[i](args[i]); each runs alone
   on the thread that takes it (its own pool_run finds the pool busy), so a thread keeps whole calls
   (a batch's items: every layer of an image on the thread that wrote its input) */
typedef void (*CallFn)(const void *args);
typedef struct {
    const CallFn *fn;
    const void *const *args;
    int64_t count;
    int32_t threads;
} CallBatch;

/* A comparison y = a OP b (eltwise.c's ge_compare): y bool (a byte, 0 or 1), a and b of one dtype (EW_F32,
   EW_F64, EW_I32, EW_I64), each n elements or one broadcast to all (a_step, b_step: 1 or 0); NaN compares
   false, as numpy's ufuncs and C's operators do (a Loop's condition, i + 1 < stop, in its native loop) */
enum { CMP_LT, CMP_LE, CMP_GT, CMP_GE, CMP_EQ };
typedef struct {
    const void *a, *b;
    uint8_t *y;
    int64_t n, a_step, b_step;
    int32_t dtype, op;
} Compare;

/* A static Loop or Scan body iterated natively (loop.c): iterations start .. stop - 1, each t the
   iteration number written to *counter (when not NULL), the `feeds` copies, the prepared calls
   fn[i](args[i]), the `outs` copies, then (unless *cond, when not NULL, is 0: the loop ends) the
   `back` copies; copies holds the three lists in that order. Returns the iteration after the last
   one run. */
typedef struct {
    char *dst;
    const char *src;
    int64_t nbytes, dst_step, src_step;  /* iteration t copies nbytes from src + t src_step to dst + t dst_step */
} StepCopy;

typedef struct {
    const CallFn *fn;
    const void *const *args;
    int64_t calls;
    const StepCopy *copies;
    int64_t feeds, outs, back;
    int64_t *counter;
    const uint8_t *cond;
    int64_t start, stop;
} StepLoop;

/* The phase fill of conv.PhaseLayout (phase_fill.c) */
typedef struct {
    const float *x;
    float *ph;
    int64_t planes, h, w, s0, s1, pb0, pb1, sq0, sq1;
    uint64_t used;  /* bit r0 * s1 + r1: a kernel tap reads that phase (a 1x1 stride-2 conv reads one of 4) */
    int32_t threads;
    int32_t x_half;  /* x is float16 (converted as it is laid out; ph is float32) */
} PhaseFill;

/* The depthwise convolution (depthwise.c) of one batch item: x (channels, ih, iw) float32 or float16
   (x_half), y (channels * mult, rows, cols); w[oc][kh * kw], bias[oc] (or NULL) float32 */
typedef struct {
    const float *x, *w, *bias;
    float *y;
    int64_t channels, mult, ih, iw, rows, cols;
    int64_t kh, kw, sh, sw, dh, dw, pt, pl;  /* the kernel, strides, dilations and the pads at the beginnings */
    Activation act;
    int32_t threads;
    int32_t x_half;  /* x is float16 */
    int32_t half;    /* HALF_C: y is float16 */
} Depthwise;

/* ConvTranspose with its kernel as its stride, 2-D, one group (conv_transpose.c): x (batch, channels, h, w),
   y (batch, oc, h kh, w kw); wp[a][c][o][b] the weights W[c][o][a][b] reordered; bias[oc] or NULL */
typedef struct {
    const float *x, *wp, *bias;
    float *y;
    int64_t batch, channels, h, w, oc, kh, kw;
    Activation act;
    int32_t threads;
} ConvTransposeArgs;

/* MaxPool or AveragePool, 2-D (max_pool.c): planes of h x w into planes of oh x ow */
typedef struct {
    const float *x;
    float *y;
    /* AveragePool: 1 / the window's count along each output row and column (a window's count is their
       product); both NULL: MaxPool */
    const float *inv_rows, *inv_cols;
    int64_t planes, h, w, oh, ow, k0, k1, s0, s1, d0, d1, pb0, pb1;
    int32_t threads;
    int32_t half;  /* x and y are float16 (rows converted as read, the maxima exact in float32) */
} MaxPool2d;

/* Resize mode=nearest over planes (resize.c): y[p][i][j] = x[p][rows[i]][cols[j]] for p < planes,
   i < oh, j < ow, each element `unit` bytes (a float32 or float16, a blocked tensor's 16 channels);
   repeat > 0 says cols[j] == j / repeat (an integer-scale upsample, copied without the gather) */
typedef struct {
    const void *x;
    void *y;
    const int64_t *rows, *cols;
    int64_t planes, ih, iw, oh, ow, unit, repeat;
    int32_t threads;
} Nearest2d;

/* Concat of C-contiguous inputs (copy.c): for o < outer and each input k < n, the block of bytes[k] bytes
   at src[k] + o * bytes[k] goes to y + o * y_step + offset[k] */
typedef struct {
    const void *const *src;
    void *y;
    const int64_t *bytes, *offset;
    int64_t n, outer, y_step;
} ConcatBlocks;

/* Gather (copy.c): y[o][i] = x[o][idx[i]] for o < outer, i < n_idx, each a block of `block` bytes, x
   with `dim` blocks along the gathered axis; a negative index counts from the end. ge_gather returns
   0, or 1 (writing nothing) when an index is outside [-dim, dim) */
typedef struct {
    const void *x;
    void *y;
    const int64_t *idx;
    int64_t outer, dim, n_idx, block;
} GatherBlocks;

/* NonMaxSuppression (nms.c): per batch b < batch and class c < classes, onnxruntime's greedy selection
   over boxes [batch, n, 4] (center 0: [y1, x1, y2, x2]; 1: [x_center, y_center, width, height]) by
   scores [batch, classes, n]. The optional inputs are read where they point, as the op's scalars (NULL:
   absent): at most max_out kept per class (absent or negative: none), iou (absent: 0), only scores
   above score_threshold (absent: every score). Each kept box is a row (b, c, index) of out, in
   selection order; ge_nms returns the rows written, or an NMS_* error when out has room for fewer
   than batch * classes * min(n, max_out) rows (capacity), the iou is outside [0, 1] or the workspace
   cannot be allocated. */
enum { NMS_NO_ROOM = -1, NMS_BAD_IOU = -2, NMS_NO_MEMORY = -3 };
typedef struct {
    const float *boxes, *scores;
    const int64_t *max_out;
    const float *iou, *score_threshold;
    int64_t *out;
    int64_t capacity, batch, classes, n;
    int32_t center;
} Nms;

/* A QuantizeLinear then DequantizeLinear of float32 values, per tensor (simd.h's vround_trip): none
   where `on` is 0; lo, hi the 8-bit type's range */
typedef struct {
    float scale, zp;
    int32_t on, lo, hi, is_signed;
} RoundTrip;

/* LayerNormalization, Softmax or RMSNormalization over rows of `cols` floats (rows.c):
   ROWS_LAYER_NORM (x - mean) / sqrt(var + eps) * scale + bias; ROWS_SOFTMAX;
   ROWS_RMS_NORM x / sqrt(mean(x * x) + eps) * scale (bias unused) */
enum { ROWS_LAYER_NORM, ROWS_SOFTMAX, ROWS_RMS_NORM };
typedef struct {
    const float *x, *scale, *bias;  /* scale and bias: `cols` floats, or NULL */
    float *y;
    int64_t rows, cols;
    float eps;
    int32_t kind;  /* ROWS_* */
    int32_t threads;
    int32_t half;  /* x and y are float16 (scale and bias float32) */
    RoundTrip x_trip, y_trip;  /* ROWS_SOFTMAX, float32: x read through x_trip, y stored through y_trip (QDQ
                                  models: a QuantizeDequantize on either side of the softmax) */
} Rows;

/* A chain of elementwise ops evaluated block by block in registers (eltwise.c, kernels/fused_elementwise.py):
   registers 0..n_ext-1 are the operands (base addresses; inner[r] == 0: n contiguous elements, else
   element i reads ext[r][(i / inner[r]) % period[r]]), then the scratch slots, then the output (last).
   Each op is 4 int32 (opcode, dst, a, b) and one double param. */
enum { EW_ADD, EW_SUB, EW_MUL, EW_DIV, EW_MAX, EW_MIN, EW_NEG, EW_ABS, EW_SQRT, EW_RECIP, EW_ADDC, EW_MULC,
       EW_MAXC, EW_MINC, EW_ERF, EW_SIGMOID, EW_GELU, EW_NUM_OPS };  /* EW_ERF, EW_SIGMOID, EW_GELU: float32 and
                                                                        float16 chains only */
enum { EW_F32, EW_F64, EW_I32, EW_I64, EW_F16 };
#define EW_ROUND 0x100  /* opcode flag, float16 chains: the step ends here, its result rounded to float16 */
typedef struct {
    int64_t n;
    int32_t dtype, n_ext, n_regs, n_ops;
    const void *const *ext;
    const int64_t *inner, *period;
    const int32_t *code;
    const double *param;
    void *y;
} Eltwise;
/* int8 kernels (qgemm.c): what an int32 accumulator (zero points taken out) becomes as it is stored,
   per weight index w (an output channel): acc + bias[w], then
   QOUT_I32 as it is; QOUT_F32 act(float(acc) * (*scale_a) * scale[w] (+ fbias[w])) (MatMulIntegerToFloat);
   QOUT_U8 / QOUT_S8 saturate(rint_half_even(float(acc) * scale[w]) + zy) clamped to [lo, hi]
   (requantization: scale = x_scale * w_scale / y_scale). scale_step 0: one scale for every w. */
enum { QOUT_I32, QOUT_F32, QOUT_U8, QOUT_S8 };

typedef struct {
    int32_t kind;
    const int32_t *bias;
    const float *scale;
    int64_t scale_step;
    const float *scale_a, *fbias;
    int32_t zy, lo, hi;
    Activation act;  /* QOUT_F32 only */
} QOut;

/* The u8 x s8 product (qgemm.c documents the operands and the paths): C[i * ldc + j].
   QPATH_BYTES: the operands as bytes (VNNI vpdpbusd; without VNNI vpmaddubsw, only for weights whose every
   pair of k fits int16 products, see qgemm.c; portable C). QPATH_PAIRS (builds where
   ge_qgemm_has_pairs(): x86-64 without VNNI): the operands widened to int16 pairs of k, vpmaddwd;
   the weights widened when packed (ge_qgemm_pack_pairs, or int16 rows), the activation rows into
   a16 (M * 4 quads(K) int16, the caller's scratch) or its gathered panels into the workspace. */
enum { QPATH_BYTES, QPATH_PAIRS };
typedef struct {
    int64_t M, N, K;
    const uint8_t *a;  /* rows: a[i * lda + k] */
    int64_t lda;
    int32_t rows_are_weights;  /* 1: rows s8 weights (zero-padded to a multiple of 4), panels gathered u8; 0: rows u8, panels prepacked s8 */
    const int8_t *bp;  /* prepacked panels (ge_qgemm_pack), or NULL: gathered b[koff[k] + noff[n]] */
    const uint8_t *b;
    const int64_t *koff, *noff;
    int32_t b_flip;  /* the gathered values are int8: flip their sign bit */
    int32_t zu;  /* the u8 operand's zero point */
    const int32_t *zs, *sum_s;  /* the s8 operand's zero points (NULL: 0) and sums over K, per weight index */
    void *c;
    int64_t ldc;
    QOut out;
    int32_t threads;
    uint8_t *ws;  /* ge_qgemm_workspace_bytes(K, threads) */
    int32_t path;  /* QPATH_BYTES or QPATH_PAIRS */
    int16_t *a16;  /* QPATH_PAIRS: the rows as int16 (the weights, rows_are_weights), or scratch they are widened into */
    /* QPATH_BYTES on builds with pairs, weights split (or NULL: none): the packed weights keep every
       pair in int16 and the rest of each pair is added by the quads listed here, per group (a panel,
       or with rows_are_weights QMR rows): entries fix_start[g] .. fix_start[g + 1] - 1, each a quad of
       K (fix_q) and its weight bytes (fix_b: QNR * 4 of the panel's, or QMR * 4 of the rows') */
    const int64_t *fix_start;
    const int32_t *fix_q;
    const int8_t *fix_b;
    /* QPATH_BYTES over prepacked weights on builds where ge_qgemm_has_twins() (or NULL: K's quads in
       order): the panels as ge_qgemm_twin regrouped them, panel p the 64-byte slots twin_start[p] ..
       twin_start[p + 1] - 1 of bp, taken in twos, slot s multiplying the activation's quad twin_q[s] */
    const int64_t *twin_start;
    const int32_t *twin_q;
} QGemm;

/* The int8 depthwise convolution of one batch item (qgemm.c): x (C, height, width) uint8 or int8 (x_flip),
   padded (pt, pl at the beginnings) with the zero point zx (uint8, flipped for int8); w[c][kh * kw]
   the centred weights (w - w_zp), wsum[c] their sums (at most 64 taps), wf the same weights as float32
   in groups of 16 channels, [ceil(C / 16)][kh * kw][16] (zeros past C; nchwc.h's layout, which the
   AVX2 builds compute in); y (C, oh, ow); ws: ge_qdepthwise_slot_bytes per thread */
typedef struct {
    const uint8_t *x;
    const int16_t *w;
    const int32_t *wsum;
    const float *wf;
    int64_t channels, height, width, pt, pl, kh, kw, sh, sw, dh, dw, oh, ow;
    int32_t zx, x_flip;
    void *y;
    QOut out;
    int32_t threads;
    uint8_t *ws;
} QDepthwise;

/* QLinearAdd on two tensors of one shape, or one of them a single value for every element (its step 0,
   else 1: a QDQ model's Gelu adds 1) (qgemm.c) */
typedef struct {
    const uint8_t *a, *b;
    uint8_t *c;
    int64_t n;
    float ra, rb, fixed;
    int32_t lo, hi, is_signed, threads, a_step, b_step;
} QAdd;

/* QuantizeLinear, DequantizeLinear or both in turn, per tensor, float32 <-> int8 or uint8 (qgemm.c): x and
   y of n elements each, C-contiguous; lo, hi the 8-bit type's range; items of QR_CHUNK elements */
enum { QR_QUANTIZE, QR_DEQUANTIZE, QR_ROUND_TRIP };
#define QR_CHUNK 16384
typedef struct {
    const void *x;
    void *y;
    int64_t n;
    float scale, zp;
    int32_t lo, hi, is_signed, mode, threads;
} QuantizeRun;

/* RNN, GRU and LSTM's recurrence (recurrent.c), float32, default activations: one direction's operands.
   xw: the input projection (X W^T + Wb + Rb; GRU linear_before_reset: + Wb only in the h~ gate) of
   step t, batch item b at xw + t * x_step + b * x_batch (Recurrent's strides), gates in ONNX's order;
   r: R [G*H][H] as rows (the GEMV's weights); rp (and GRU linear_before_reset 0: rp_h, the h~ gate's)
   R^T packed by ge_pack_b, or NULL: the GEMV runs; rbh: GRU's Rbh (linear_before_reset 1) or NULL;
   p: LSTM's peepholes [3H] (i, o, f) or NULL; h0, c0: initial states (rows state_batch apart) or NULL;
   y (rows y_step, y_batch apart), yh, yc: outputs or NULL; ws: ge_recurrent_workspace_floats floats. */
enum { REC_RNN, REC_GRU, REC_LSTM };
typedef struct {
    const float *xw, *r, *rp, *rp_h, *rbh, *p, *h0, *c0;
    float *y, *yh, *yc, *ws;
    int32_t reverse;
} RecurrentDirection;

typedef struct {
    int32_t kind, lbr, input_forget, has_clip;
    float clip;
    int32_t directions, threads;
    int64_t T, B, H, x_step, x_batch, y_step, y_batch, state_batch;
    const int32_t *lens;  /* sequence_lens (each in [0, T]) or NULL: every item T steps */
    RecurrentDirection dir[2];
} Recurrent;

/* Convolution in the blocked layout NCHW16c, B = ge_nchwc_block() = 16 (nchwc.c): x [batch][icb][h][w][B],
   y and z [batch][ocb][oh][ow][B] (z may be y, or NULL), wp per group of ge_nchwc_group() output blocks
   (the last group: those left) [icb][kh][kw][B in][the group's blocks x B out], bias
   [ocb * B] (zeros past the output channels); pads ph, pw at the beginnings. ic, oc: the channels
   (the padding past them neither read nor computed). planar: x is NCHW [batch][ic][h][w] instead (a
   stem's few input channels; icb 1, wp [1][kh][kw][ic][...]). */
typedef struct {
    const float *x, *wp, *bias, *z;
    float *y;
    int64_t batch, icb, ocb, h, w, oh, ow, kh, kw, sh, sw, ph, pw, dh, dw, ic, oc, planar;
    Activation act;
    int32_t threads;
} ConvNchwc;

/* The depthwise convolution (group == channels, one output channel per group) in the blocked layout
   (nchwc_depthwise.c): x [batch][cb][h][w][B], y and z [batch][cb][oh][ow][B] (z may be y, or NULL),
   wp [cb][kh][kw][B], bias [cb * B] (zeros past the channels); pads ph, pw at the beginnings. */
typedef struct {
    const float *x, *wp, *bias, *z;
    float *y;
    int64_t batch, cb, h, w, oh, ow, kh, kw, sh, sw, ph, pw, dh, dw;
    Activation act;
    int32_t threads;
} DepthwiseNchwc;

/* NCHW [batch][channels][plane] <-> NCHW16c [batch][ceil(channels / B)][plane][B] (to_blocked: x is
   the NCHW one), zeros in the blocked tensor's channels past `channels` */
typedef struct {
    const float *x;
    float *y;
    int64_t batch, channels, plane;
    int32_t to_blocked, threads;
} NchwcReorder;

/* MaxPool on NCHW16c (nchwc_pool.c): x [planes][h][w][B], y [planes][oh][ow][B] (planes = batch x blocks),
   pads ph, pw at the beginnings, taps outside X skipped */
typedef struct {
    const float *x;
    float *y;
    int64_t planes, h, w, oh, ow, kh, kw, sh, sw, ph, pw, dh, dw;
    int32_t threads;
} NchwcMaxPool;

/* GlobalAveragePool of NCHW16c x [batch][ceil(channels / B)][plane][B] into NCHW y [batch][channels] */
typedef struct {
    const float *x;
    float *y;
    int64_t batch, channels, plane;
    int32_t threads;
} NchwcMean;

/* A squeeze-excite gate on NCHW16c (nchwc_pool.c): y = x * scale per channel, x and y [batch][ceil(channels /
   B)][plane][B] (y may be x), scale NCHW [batch][channels]; zeros past the channels */
typedef struct {
    const float *x, *scale;
    float *y;
    int64_t batch, channels, plane;
    int32_t threads;
} NchwcScale;

/* One row of the layout table: a struct's size (field NULL) or one field's offset and size. */
typedef struct {
    const char *type, *field;
    int64_t offset, size;
} AbiEntry;

/* The L1d and L2 (bytes) the blockings are sized to (caches.h): 0 for this CPU's, as the C library
   reports them; at most the sizes they were tuned for. */
void ge_cache_sizes(int64_t l1d_bytes, int64_t l2_bytes);
int64_t ge_cache_size(int level);  /* 1: the L1d in use, 2: the L2 */
int ge_mr(void);
int ge_nr(void);
int ge_kc(void);
int64_t ge_packed_a_floats(int64_t M, int64_t K);
int64_t ge_packed_b_floats(int64_t K, int64_t N);
int64_t ge_workspace_floats(int64_t M, int64_t N, int64_t K, int raw_a, int gathered_b, int threads);
void ge_pack_a(const float *a, int64_t lda, int64_t M, int64_t K, float *ap, int threads);
void ge_pack_b(const float *b, const int64_t *koff, const int64_t *noff, int64_t K, int64_t N, float *bp,
               int threads);
void ge_gemm_args(const GemmArgs *args);
void ge_gemm_batch(const GemmBatch *bt);
int ge_direct_panel(int wide, int64_t m);
void ge_conv_direct(const ConvDirect *d);
int ge_pixels_block(void);
void ge_conv_pixels(const ConvDirect *d);
void ge_depthwise(const Depthwise *d);
void ge_conv_transpose(const ConvTransposeArgs *t);
int ge_max_pool_fits(const MaxPool2d *p);
void ge_call_batch(const CallBatch *b);
int64_t ge_step_loop(const StepLoop *l);
/* The pool items of a direct or pixels convolution (the split a test checks) */
int64_t ge_conv_direct_items(const ConvDirect *d);
int64_t ge_conv_pixels_items(const ConvDirect *d);
void ge_max_pool2d(const MaxPool2d *p);
void ge_phase_fill(const PhaseFill *f);
void ge_rows(const Rows *r);
void ge_nearest2d(const Nearest2d *p);
void ge_concat(const ConcatBlocks *c);
int ge_gather(const GatherBlocks *g);
int64_t ge_nms(const Nms *p);
int ge_nchwc_block(void);
int ge_nchwc_group(void);
void ge_nchwc_conv(const ConvNchwc *c);
/* W (oc, c, kk = kh * kw floats), C-contiguous, into ConvNchwc's wp (nchwc.py's NchwcConv.pack): per group
   of up to `group` of the ocp output channels (whole blocks), [ceil(c / cin)][kk][cin][its channels], zeros
   past c and oc; cin the input channels per block (B, or c for a planar x) */
void ge_nchwc_pack(const float *w, int64_t oc, int64_t c, int64_t kk, int64_t cin, int64_t ocp, int64_t group,
                   float *wp);
void ge_nchwc_reorder(const NchwcReorder *r);
void ge_nchwc_max_pool(const NchwcMaxPool *p);
void ge_nchwc_mean(const NchwcMean *m);
void ge_nchwc_scale(const NchwcScale *s);
void ge_nchwc_depthwise(const DepthwiseNchwc *d);
/* gemv.c: y = act(x @ W^T + bias) for few rows of x (M, lda, a), weights as rows of K (bp: [N][K]),
   y at c, ldc; bias_n, act, threads (the GemmArgs fields the GEMV reads; the rest is unused). */
void ge_gemv(const GemmArgs *g);
/* gemv.c's packed GEMV for a MatMul's constant W [K][N] (few rows, M, lda, a): W packed once by
   ge_gemv_pack into ge_gemv_packed_floats(K, N) floats at bp (column panels of ge_gemv_panel()
   outputs; W[k][n] at w[k * sk + n * sn], element strides: a Gemm's transB weights are packed as they
   lie); y at c, ldc; bias_n, act, threads, half (HALF_A, HALF_C) as ge_gemv. */
int64_t ge_gemv_panel(void);
int64_t ge_gemv_packed_floats(int64_t K, int64_t N);
void ge_gemv_pack(const float *w, int64_t K, int64_t N, int64_t sk, int64_t sn, float *out);
void ge_gemv_panels(const GemmArgs *g);
int ge_eltwise(const Eltwise *e);
void ge_compare(const Compare *c);
int64_t ge_recurrent_workspace_floats(int32_t kind, int64_t B, int64_t H);
void ge_recurrent(const Recurrent *r);
void ge_half_to_float(const uint16_t *src, float *dst, int64_t n, int threads);
void ge_float_to_half(const float *src, uint16_t *dst, int64_t n, int threads);
void ge_scale_rows(const float *w, const double *s, int64_t rows, int64_t cols, float *out);
int ge_qgemm_nr(void);
int64_t ge_qgemm_packed_bytes(int64_t K, int64_t N);
int64_t ge_qgemm_workspace_bytes(int64_t K, int threads);
void ge_qgemm_pack(const int8_t *w, int64_t ldw, int64_t K, int64_t N, int flip, int8_t *bp, int32_t *sums);
int ge_qgemm_has_pairs(void);
int ge_qgemm_mr(void);
void ge_qgemm_pack_pairs(const int8_t *w, int64_t ldw, int64_t K, int64_t N, int flip, int16_t *bp, int32_t *sums);
int ge_qgemm_has_twins(void);
int64_t ge_qgemm_twin(const int8_t *bp, int64_t K, int64_t N, int64_t *start, int32_t *quad);
void ge_qgemm_twin_fill(const int8_t *bp, int64_t K, int64_t N, const int64_t *start, const int32_t *quad, int8_t *out);
int ge_qgemm_pairs_fit(const int8_t *w, int64_t si, int64_t sk, int64_t N, int64_t K, int flip);
int64_t ge_qgemm_rest_quads(const int8_t *w, int64_t si, int64_t sk, int64_t N, int64_t K, int flip, int64_t width);
int64_t ge_qgemm_split(const int8_t *w, int64_t si, int64_t sk, int64_t N, int64_t K, int flip, int64_t width,
                       int8_t *main, int64_t mi, int64_t mk, int32_t *sums, int64_t *fix_start, int32_t *fix_q,
                       int8_t *fix_b);
void ge_qgemm(const QGemm *g);
int ge_qgemm_set_amx(int want);
int64_t ge_qdepthwise_slot_bytes(const QDepthwise *d);
/* The path ge_qdepthwise takes for d's geometry and output (its pointers unread; `ge inspect` names it):
   QDW_TAPS the taps in int16 pairs per channel (every build), QDW_COLUMN_PAIRS 3x3 on a plane of int16
   column pairs by 16 channels, QDW_ROW_PAIRS 3x3 rows in int16 pairs per channel, QDW_FLOAT float32 FMA
   by 16 channels (the last three on AVX2 and AVX-512 builds, into bytes) */
enum { QDW_TAPS, QDW_COLUMN_PAIRS, QDW_ROW_PAIRS, QDW_FLOAT };
int32_t ge_qdepthwise_path(const QDepthwise *d);
void ge_qdepthwise(const QDepthwise *d);
void ge_qadd(const QAdd *q);
void ge_dynamic_quantize(const float *x, int64_t n, uint8_t *y, float *scale_out, uint8_t *zp_out);
void ge_quantize_run(const QuantizeRun *q);
const AbiEntry *ge_abi_layout(void);
const char *ge_level(void);
const char *ge_isa(void);

#endif
