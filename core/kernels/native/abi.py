"""Generated from csrc/abi.h by `python -m ge.core.kernels.native.generate`: do not edit. The
constants (enums and #defines), the argument structs as ctypes classes and every exported function's
(argtypes, restype). abi.h documents each."""
import ctypes

EW_ROUND = 0x100
QR_CHUNK = 0x4000
ACT_NONE = 0
ACT_CLAMP = 1
ACT_GELU = 2
ACT_HARDSIGMOID = 3
ACT_HARDSWISH = 4
ACT_SIGMOID = 5
ACT_SWISH = 6
ACT_LEAKY_RELU = 7
ACT_GELU_TANH = 8
ACT_TANH = 9
HALF_A = 1
HALF_B = 2
HALF_C = 4
HALF_BIAS = 8
CMP_LT = 0
CMP_LE = 1
CMP_GT = 2
CMP_GE = 3
CMP_EQ = 4
NMS_NO_ROOM = -1
NMS_BAD_IOU = -2
NMS_NO_MEMORY = -3
ROWS_LAYER_NORM = 0
ROWS_SOFTMAX = 1
ROWS_RMS_NORM = 2
EW_ADD = 0
EW_SUB = 1
EW_MUL = 2
EW_DIV = 3
EW_MAX = 4
EW_MIN = 5
EW_NEG = 6
EW_ABS = 7
EW_SQRT = 8
EW_RECIP = 9
EW_ADDC = 10
EW_MULC = 11
EW_MAXC = 12
EW_MINC = 13
EW_ERF = 14
EW_SIGMOID = 15
EW_GELU = 16
EW_NUM_OPS = 17
EW_F32 = 0
EW_F64 = 1
EW_I32 = 2
EW_I64 = 3
EW_F16 = 4
QOUT_I32 = 0
QOUT_F32 = 1
QOUT_U8 = 2
QOUT_S8 = 3
QPATH_BYTES = 0
QPATH_PAIRS = 1
QR_QUANTIZE = 0
QR_DEQUANTIZE = 1
QR_ROUND_TRIP = 2
REC_RNN = 0
REC_GRU = 1
REC_LSTM = 2
QDW_TAPS = 0
QDW_COLUMN_PAIRS = 1
QDW_ROW_PAIRS = 2
QDW_FLOAT = 3


class Activation(ctypes.Structure):
    _fields_ = [
        ('act', ctypes.c_int32),
        ('a', ctypes.c_float),
        ('b', ctypes.c_float),
    ]


class GemmArgs(ctypes.Structure):
    _fields_ = [
        ('M', ctypes.c_int64),
        ('N', ctypes.c_int64),
        ('K', ctypes.c_int64),
        ('a', ctypes.c_void_p),
        ('lda', ctypes.c_int64),
        ('ap', ctypes.c_void_p),
        ('b', ctypes.c_void_p),
        ('koff', ctypes.c_void_p),
        ('noff', ctypes.c_void_p),
        ('bp', ctypes.c_void_p),
        ('c', ctypes.c_void_p),
        ('ldc', ctypes.c_int64),
        ('bias_m', ctypes.c_void_p),
        ('bias_n', ctypes.c_void_p),
        ('z', ctypes.c_void_p),
        ('ldz', ctypes.c_int64),
        ('act', Activation),
        ('threads', ctypes.c_int32),
        ('ws', ctypes.c_void_p),
        ('pitch', ctypes.c_int64),
        ('width', ctypes.c_int64),
        ('alpha', ctypes.c_float),
        ('half', ctypes.c_int32),
    ]


class GemmBatch(ctypes.Structure):
    _fields_ = [
        ('g', GemmArgs),
        ('batch', ctypes.c_int64),
        ('a_off', ctypes.c_void_p),
        ('b_off', ctypes.c_void_p),
        ('c_off', ctypes.c_void_p),
        ('bias_off', ctypes.c_void_p),
        ('z_off', ctypes.c_void_p),
    ]


class ConvDirect(ctypes.Structure):
    _fields_ = [
        ('x', ctypes.c_void_p),
        ('koff', ctypes.c_void_p),
        ('wp', ctypes.c_void_p),
        ('y', ctypes.c_void_p),
        ('bias', ctypes.c_void_p),
        ('z', ctypes.c_void_p),
        ('K', ctypes.c_int64),
        ('M', ctypes.c_int64),
        ('rows', ctypes.c_int64),
        ('width', ctypes.c_int64),
        ('pitch', ctypes.c_int64),
        ('ldy', ctypes.c_int64),
        ('act', Activation),
        ('threads', ctypes.c_int32),
        ('wide', ctypes.c_int32),
        ('half', ctypes.c_int32),
    ]


class CallBatch(ctypes.Structure):
    _fields_ = [
        ('fn', ctypes.c_void_p),
        ('args', ctypes.c_void_p),
        ('count', ctypes.c_int64),
        ('threads', ctypes.c_int32),
    ]


class Compare(ctypes.Structure):
    _fields_ = [
        ('a', ctypes.c_void_p),
        ('b', ctypes.c_void_p),
        ('y', ctypes.c_void_p),
        ('n', ctypes.c_int64),
        ('a_step', ctypes.c_int64),
        ('b_step', ctypes.c_int64),
        ('dtype', ctypes.c_int32),
        ('op', ctypes.c_int32),
    ]


class StepCopy(ctypes.Structure):
    _fields_ = [
        ('dst', ctypes.c_char_p),
        ('src', ctypes.c_char_p),
        ('nbytes', ctypes.c_int64),
        ('dst_step', ctypes.c_int64),
        ('src_step', ctypes.c_int64),
    ]


class StepLoop(ctypes.Structure):
    _fields_ = [
        ('fn', ctypes.c_void_p),
        ('args', ctypes.c_void_p),
        ('calls', ctypes.c_int64),
        ('copies', ctypes.c_void_p),
        ('feeds', ctypes.c_int64),
        ('outs', ctypes.c_int64),
        ('back', ctypes.c_int64),
        ('counter', ctypes.c_void_p),
        ('cond', ctypes.c_void_p),
        ('start', ctypes.c_int64),
        ('stop', ctypes.c_int64),
    ]


class PhaseFill(ctypes.Structure):
    _fields_ = [
        ('x', ctypes.c_void_p),
        ('ph', ctypes.c_void_p),
        ('planes', ctypes.c_int64),
        ('h', ctypes.c_int64),
        ('w', ctypes.c_int64),
        ('s0', ctypes.c_int64),
        ('s1', ctypes.c_int64),
        ('pb0', ctypes.c_int64),
        ('pb1', ctypes.c_int64),
        ('sq0', ctypes.c_int64),
        ('sq1', ctypes.c_int64),
        ('used', ctypes.c_uint64),
        ('threads', ctypes.c_int32),
        ('x_half', ctypes.c_int32),
    ]


class Depthwise(ctypes.Structure):
    _fields_ = [
        ('x', ctypes.c_void_p),
        ('w', ctypes.c_void_p),
        ('bias', ctypes.c_void_p),
        ('y', ctypes.c_void_p),
        ('channels', ctypes.c_int64),
        ('mult', ctypes.c_int64),
        ('ih', ctypes.c_int64),
        ('iw', ctypes.c_int64),
        ('rows', ctypes.c_int64),
        ('cols', ctypes.c_int64),
        ('kh', ctypes.c_int64),
        ('kw', ctypes.c_int64),
        ('sh', ctypes.c_int64),
        ('sw', ctypes.c_int64),
        ('dh', ctypes.c_int64),
        ('dw', ctypes.c_int64),
        ('pt', ctypes.c_int64),
        ('pl', ctypes.c_int64),
        ('act', Activation),
        ('threads', ctypes.c_int32),
        ('x_half', ctypes.c_int32),
        ('half', ctypes.c_int32),
    ]


class ConvTransposeArgs(ctypes.Structure):
    _fields_ = [
        ('x', ctypes.c_void_p),
        ('wp', ctypes.c_void_p),
        ('bias', ctypes.c_void_p),
        ('y', ctypes.c_void_p),
        ('batch', ctypes.c_int64),
        ('channels', ctypes.c_int64),
        ('h', ctypes.c_int64),
        ('w', ctypes.c_int64),
        ('oc', ctypes.c_int64),
        ('kh', ctypes.c_int64),
        ('kw', ctypes.c_int64),
        ('act', Activation),
        ('threads', ctypes.c_int32),
    ]


class MaxPool2d(ctypes.Structure):
    _fields_ = [
        ('x', ctypes.c_void_p),
        ('y', ctypes.c_void_p),
        ('inv_rows', ctypes.c_void_p),
        ('inv_cols', ctypes.c_void_p),
        ('planes', ctypes.c_int64),
        ('h', ctypes.c_int64),
        ('w', ctypes.c_int64),
        ('oh', ctypes.c_int64),
        ('ow', ctypes.c_int64),
        ('k0', ctypes.c_int64),
        ('k1', ctypes.c_int64),
        ('s0', ctypes.c_int64),
        ('s1', ctypes.c_int64),
        ('d0', ctypes.c_int64),
        ('d1', ctypes.c_int64),
        ('pb0', ctypes.c_int64),
        ('pb1', ctypes.c_int64),
        ('threads', ctypes.c_int32),
        ('half', ctypes.c_int32),
    ]


class Nearest2d(ctypes.Structure):
    _fields_ = [
        ('x', ctypes.c_void_p),
        ('y', ctypes.c_void_p),
        ('rows', ctypes.c_void_p),
        ('cols', ctypes.c_void_p),
        ('planes', ctypes.c_int64),
        ('ih', ctypes.c_int64),
        ('iw', ctypes.c_int64),
        ('oh', ctypes.c_int64),
        ('ow', ctypes.c_int64),
        ('unit', ctypes.c_int64),
        ('repeat', ctypes.c_int64),
        ('threads', ctypes.c_int32),
    ]


class ConcatBlocks(ctypes.Structure):
    _fields_ = [
        ('src', ctypes.c_void_p),
        ('y', ctypes.c_void_p),
        ('bytes', ctypes.c_void_p),
        ('offset', ctypes.c_void_p),
        ('n', ctypes.c_int64),
        ('outer', ctypes.c_int64),
        ('y_step', ctypes.c_int64),
    ]


class GatherBlocks(ctypes.Structure):
    _fields_ = [
        ('x', ctypes.c_void_p),
        ('y', ctypes.c_void_p),
        ('idx', ctypes.c_void_p),
        ('outer', ctypes.c_int64),
        ('dim', ctypes.c_int64),
        ('n_idx', ctypes.c_int64),
        ('block', ctypes.c_int64),
    ]


class Nms(ctypes.Structure):
    _fields_ = [
        ('boxes', ctypes.c_void_p),
        ('scores', ctypes.c_void_p),
        ('max_out', ctypes.c_void_p),
        ('iou', ctypes.c_void_p),
        ('score_threshold', ctypes.c_void_p),
        ('out', ctypes.c_void_p),
        ('capacity', ctypes.c_int64),
        ('batch', ctypes.c_int64),
        ('classes', ctypes.c_int64),
        ('n', ctypes.c_int64),
        ('center', ctypes.c_int32),
    ]


class RoundTrip(ctypes.Structure):
    _fields_ = [
        ('scale', ctypes.c_float),
        ('zp', ctypes.c_float),
        ('on', ctypes.c_int32),
        ('lo', ctypes.c_int32),
        ('hi', ctypes.c_int32),
        ('is_signed', ctypes.c_int32),
    ]


class Rows(ctypes.Structure):
    _fields_ = [
        ('x', ctypes.c_void_p),
        ('scale', ctypes.c_void_p),
        ('bias', ctypes.c_void_p),
        ('y', ctypes.c_void_p),
        ('rows', ctypes.c_int64),
        ('cols', ctypes.c_int64),
        ('eps', ctypes.c_float),
        ('kind', ctypes.c_int32),
        ('threads', ctypes.c_int32),
        ('half', ctypes.c_int32),
        ('x_trip', RoundTrip),
        ('y_trip', RoundTrip),
    ]


class Eltwise(ctypes.Structure):
    _fields_ = [
        ('n', ctypes.c_int64),
        ('dtype', ctypes.c_int32),
        ('n_ext', ctypes.c_int32),
        ('n_regs', ctypes.c_int32),
        ('n_ops', ctypes.c_int32),
        ('ext', ctypes.c_void_p),
        ('inner', ctypes.c_void_p),
        ('period', ctypes.c_void_p),
        ('code', ctypes.c_void_p),
        ('param', ctypes.c_void_p),
        ('y', ctypes.c_void_p),
    ]


class QOut(ctypes.Structure):
    _fields_ = [
        ('kind', ctypes.c_int32),
        ('bias', ctypes.c_void_p),
        ('scale', ctypes.c_void_p),
        ('scale_step', ctypes.c_int64),
        ('scale_a', ctypes.c_void_p),
        ('fbias', ctypes.c_void_p),
        ('zy', ctypes.c_int32),
        ('lo', ctypes.c_int32),
        ('hi', ctypes.c_int32),
        ('act', Activation),
    ]


class QGemm(ctypes.Structure):
    _fields_ = [
        ('M', ctypes.c_int64),
        ('N', ctypes.c_int64),
        ('K', ctypes.c_int64),
        ('a', ctypes.c_void_p),
        ('lda', ctypes.c_int64),
        ('rows_are_weights', ctypes.c_int32),
        ('bp', ctypes.c_void_p),
        ('b', ctypes.c_void_p),
        ('koff', ctypes.c_void_p),
        ('noff', ctypes.c_void_p),
        ('b_flip', ctypes.c_int32),
        ('zu', ctypes.c_int32),
        ('zs', ctypes.c_void_p),
        ('sum_s', ctypes.c_void_p),
        ('c', ctypes.c_void_p),
        ('ldc', ctypes.c_int64),
        ('out', QOut),
        ('threads', ctypes.c_int32),
        ('ws', ctypes.c_void_p),
        ('path', ctypes.c_int32),
        ('a16', ctypes.c_void_p),
        ('fix_start', ctypes.c_void_p),
        ('fix_q', ctypes.c_void_p),
        ('fix_b', ctypes.c_void_p),
        ('twin_start', ctypes.c_void_p),
        ('twin_q', ctypes.c_void_p),
    ]


class QDepthwise(ctypes.Structure):
    _fields_ = [
        ('x', ctypes.c_void_p),
        ('w', ctypes.c_void_p),
        ('wsum', ctypes.c_void_p),
        ('wf', ctypes.c_void_p),
        ('channels', ctypes.c_int64),
        ('height', ctypes.c_int64),
        ('width', ctypes.c_int64),
        ('pt', ctypes.c_int64),
        ('pl', ctypes.c_int64),
        ('kh', ctypes.c_int64),
        ('kw', ctypes.c_int64),
        ('sh', ctypes.c_int64),
        ('sw', ctypes.c_int64),
        ('dh', ctypes.c_int64),
        ('dw', ctypes.c_int64),
        ('oh', ctypes.c_int64),
        ('ow', ctypes.c_int64),
        ('zx', ctypes.c_int32),
        ('x_flip', ctypes.c_int32),
        ('y', ctypes.c_void_p),
        ('out', QOut),
        ('threads', ctypes.c_int32),
        ('ws', ctypes.c_void_p),
    ]


class QAdd(ctypes.Structure):
    _fields_ = [
        ('a', ctypes.c_void_p),
        ('b', ctypes.c_void_p),
        ('c', ctypes.c_void_p),
        ('n', ctypes.c_int64),
        ('ra', ctypes.c_float),
        ('rb', ctypes.c_float),
        ('fixed', ctypes.c_float),
        ('lo', ctypes.c_int32),
        ('hi', ctypes.c_int32),
        ('is_signed', ctypes.c_int32),
        ('threads', ctypes.c_int32),
        ('a_step', ctypes.c_int32),
        ('b_step', ctypes.c_int32),
    ]


class QuantizeRun(ctypes.Structure):
    _fields_ = [
        ('x', ctypes.c_void_p),
        ('y', ctypes.c_void_p),
        ('n', ctypes.c_int64),
        ('scale', ctypes.c_float),
        ('zp', ctypes.c_float),
        ('lo', ctypes.c_int32),
        ('hi', ctypes.c_int32),
        ('is_signed', ctypes.c_int32),
        ('mode', ctypes.c_int32),
        ('threads', ctypes.c_int32),
    ]


class RecurrentDirection(ctypes.Structure):
    _fields_ = [
        ('xw', ctypes.c_void_p),
        ('r', ctypes.c_void_p),
        ('rp', ctypes.c_void_p),
        ('rp_h', ctypes.c_void_p),
        ('rbh', ctypes.c_void_p),
        ('p', ctypes.c_void_p),
        ('h0', ctypes.c_void_p),
        ('c0', ctypes.c_void_p),
        ('y', ctypes.c_void_p),
        ('yh', ctypes.c_void_p),
        ('yc', ctypes.c_void_p),
        ('ws', ctypes.c_void_p),
        ('reverse', ctypes.c_int32),
    ]


class Recurrent(ctypes.Structure):
    _fields_ = [
        ('kind', ctypes.c_int32),
        ('lbr', ctypes.c_int32),
        ('input_forget', ctypes.c_int32),
        ('has_clip', ctypes.c_int32),
        ('clip', ctypes.c_float),
        ('directions', ctypes.c_int32),
        ('threads', ctypes.c_int32),
        ('T', ctypes.c_int64),
        ('B', ctypes.c_int64),
        ('H', ctypes.c_int64),
        ('x_step', ctypes.c_int64),
        ('x_batch', ctypes.c_int64),
        ('y_step', ctypes.c_int64),
        ('y_batch', ctypes.c_int64),
        ('state_batch', ctypes.c_int64),
        ('lens', ctypes.c_void_p),
        ('dir', RecurrentDirection * 2),
    ]


class ConvNchwc(ctypes.Structure):
    _fields_ = [
        ('x', ctypes.c_void_p),
        ('wp', ctypes.c_void_p),
        ('bias', ctypes.c_void_p),
        ('z', ctypes.c_void_p),
        ('y', ctypes.c_void_p),
        ('batch', ctypes.c_int64),
        ('icb', ctypes.c_int64),
        ('ocb', ctypes.c_int64),
        ('h', ctypes.c_int64),
        ('w', ctypes.c_int64),
        ('oh', ctypes.c_int64),
        ('ow', ctypes.c_int64),
        ('kh', ctypes.c_int64),
        ('kw', ctypes.c_int64),
        ('sh', ctypes.c_int64),
        ('sw', ctypes.c_int64),
        ('ph', ctypes.c_int64),
        ('pw', ctypes.c_int64),
        ('dh', ctypes.c_int64),
        ('dw', ctypes.c_int64),
        ('ic', ctypes.c_int64),
        ('oc', ctypes.c_int64),
        ('planar', ctypes.c_int64),
        ('act', Activation),
        ('threads', ctypes.c_int32),
    ]


class DepthwiseNchwc(ctypes.Structure):
    _fields_ = [
        ('x', ctypes.c_void_p),
        ('wp', ctypes.c_void_p),
        ('bias', ctypes.c_void_p),
        ('z', ctypes.c_void_p),
        ('y', ctypes.c_void_p),
        ('batch', ctypes.c_int64),
        ('cb', ctypes.c_int64),
        ('h', ctypes.c_int64),
        ('w', ctypes.c_int64),
        ('oh', ctypes.c_int64),
        ('ow', ctypes.c_int64),
        ('kh', ctypes.c_int64),
        ('kw', ctypes.c_int64),
        ('sh', ctypes.c_int64),
        ('sw', ctypes.c_int64),
        ('ph', ctypes.c_int64),
        ('pw', ctypes.c_int64),
        ('dh', ctypes.c_int64),
        ('dw', ctypes.c_int64),
        ('act', Activation),
        ('threads', ctypes.c_int32),
    ]


class NchwcReorder(ctypes.Structure):
    _fields_ = [
        ('x', ctypes.c_void_p),
        ('y', ctypes.c_void_p),
        ('batch', ctypes.c_int64),
        ('channels', ctypes.c_int64),
        ('plane', ctypes.c_int64),
        ('to_blocked', ctypes.c_int32),
        ('threads', ctypes.c_int32),
    ]


class NchwcMaxPool(ctypes.Structure):
    _fields_ = [
        ('x', ctypes.c_void_p),
        ('y', ctypes.c_void_p),
        ('planes', ctypes.c_int64),
        ('h', ctypes.c_int64),
        ('w', ctypes.c_int64),
        ('oh', ctypes.c_int64),
        ('ow', ctypes.c_int64),
        ('kh', ctypes.c_int64),
        ('kw', ctypes.c_int64),
        ('sh', ctypes.c_int64),
        ('sw', ctypes.c_int64),
        ('ph', ctypes.c_int64),
        ('pw', ctypes.c_int64),
        ('dh', ctypes.c_int64),
        ('dw', ctypes.c_int64),
        ('threads', ctypes.c_int32),
    ]


class NchwcMean(ctypes.Structure):
    _fields_ = [
        ('x', ctypes.c_void_p),
        ('y', ctypes.c_void_p),
        ('batch', ctypes.c_int64),
        ('channels', ctypes.c_int64),
        ('plane', ctypes.c_int64),
        ('threads', ctypes.c_int32),
    ]


class NchwcScale(ctypes.Structure):
    _fields_ = [
        ('x', ctypes.c_void_p),
        ('scale', ctypes.c_void_p),
        ('y', ctypes.c_void_p),
        ('batch', ctypes.c_int64),
        ('channels', ctypes.c_int64),
        ('plane', ctypes.c_int64),
        ('threads', ctypes.c_int32),
    ]


class AbiEntry(ctypes.Structure):
    _fields_ = [
        ('type', ctypes.c_char_p),
        ('field', ctypes.c_char_p),
        ('offset', ctypes.c_int64),
        ('size', ctypes.c_int64),
    ]


#: every argument struct, in abi.h's order (the loader checks each against the library's layout)
STRUCTS = (Activation, GemmArgs, GemmBatch, ConvDirect, CallBatch, Compare, StepCopy, StepLoop, PhaseFill, Depthwise, ConvTransposeArgs, MaxPool2d, Nearest2d, ConcatBlocks, GatherBlocks, Nms, RoundTrip, Rows, Eltwise, QOut, QGemm, QDepthwise, QAdd, QuantizeRun, RecurrentDirection, Recurrent, ConvNchwc, DepthwiseNchwc, NchwcReorder, NchwcMaxPool, NchwcMean, NchwcScale,)

#: every constant, by name (the loader checks each against the library's value: a library built
#: before an enum grew would read a new opcode as another)
CONSTANTS = ('EW_ROUND', 'QR_CHUNK', 'ACT_NONE', 'ACT_CLAMP', 'ACT_GELU', 'ACT_HARDSIGMOID', 'ACT_HARDSWISH', 'ACT_SIGMOID', 'ACT_SWISH', 'ACT_LEAKY_RELU', 'ACT_GELU_TANH', 'ACT_TANH', 'HALF_A', 'HALF_B', 'HALF_C', 'HALF_BIAS', 'CMP_LT', 'CMP_LE', 'CMP_GT', 'CMP_GE', 'CMP_EQ', 'NMS_NO_ROOM', 'NMS_BAD_IOU', 'NMS_NO_MEMORY', 'ROWS_LAYER_NORM', 'ROWS_SOFTMAX', 'ROWS_RMS_NORM', 'EW_ADD', 'EW_SUB', 'EW_MUL', 'EW_DIV', 'EW_MAX', 'EW_MIN', 'EW_NEG', 'EW_ABS', 'EW_SQRT', 'EW_RECIP', 'EW_ADDC', 'EW_MULC', 'EW_MAXC', 'EW_MINC', 'EW_ERF', 'EW_SIGMOID', 'EW_GELU', 'EW_NUM_OPS', 'EW_F32', 'EW_F64', 'EW_I32', 'EW_I64', 'EW_F16', 'QOUT_I32', 'QOUT_F32', 'QOUT_U8', 'QOUT_S8', 'QPATH_BYTES', 'QPATH_PAIRS', 'QR_QUANTIZE', 'QR_DEQUANTIZE', 'QR_ROUND_TRIP', 'REC_RNN', 'REC_GRU', 'REC_LSTM', 'QDW_TAPS', 'QDW_COLUMN_PAIRS', 'QDW_ROW_PAIRS', 'QDW_FLOAT',)

#: name -> (argtypes, restype) of every function the library exports
SIGNATURES = {
    'ge_cache_sizes': ([ctypes.c_int64, ctypes.c_int64], None),
    'ge_cache_size': ([ctypes.c_int], ctypes.c_int64),
    'ge_mr': ([], ctypes.c_int),
    'ge_nr': ([], ctypes.c_int),
    'ge_kc': ([], ctypes.c_int),
    'ge_packed_a_floats': ([ctypes.c_int64, ctypes.c_int64], ctypes.c_int64),
    'ge_packed_b_floats': ([ctypes.c_int64, ctypes.c_int64], ctypes.c_int64),
    'ge_workspace_floats': ([ctypes.c_int64, ctypes.c_int64, ctypes.c_int64, ctypes.c_int, ctypes.c_int, ctypes.c_int], ctypes.c_int64),
    'ge_pack_a': ([ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64, ctypes.c_int64, ctypes.c_void_p, ctypes.c_int], None),
    'ge_pack_b': ([ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64, ctypes.c_void_p, ctypes.c_int], None),
    'ge_gemm_args': ([ctypes.c_void_p], None),
    'ge_gemm_batch': ([ctypes.c_void_p], None),
    'ge_direct_panel': ([ctypes.c_int, ctypes.c_int64], ctypes.c_int),
    'ge_conv_direct': ([ctypes.c_void_p], None),
    'ge_pixels_block': ([], ctypes.c_int),
    'ge_conv_pixels': ([ctypes.c_void_p], None),
    'ge_depthwise': ([ctypes.c_void_p], None),
    'ge_conv_transpose': ([ctypes.c_void_p], None),
    'ge_max_pool_fits': ([ctypes.c_void_p], ctypes.c_int),
    'ge_call_batch': ([ctypes.c_void_p], None),
    'ge_step_loop': ([ctypes.c_void_p], ctypes.c_int64),
    'ge_conv_direct_items': ([ctypes.c_void_p], ctypes.c_int64),
    'ge_conv_pixels_items': ([ctypes.c_void_p], ctypes.c_int64),
    'ge_max_pool2d': ([ctypes.c_void_p], None),
    'ge_phase_fill': ([ctypes.c_void_p], None),
    'ge_rows': ([ctypes.c_void_p], None),
    'ge_nearest2d': ([ctypes.c_void_p], None),
    'ge_concat': ([ctypes.c_void_p], None),
    'ge_gather': ([ctypes.c_void_p], ctypes.c_int),
    'ge_nms': ([ctypes.c_void_p], ctypes.c_int64),
    'ge_nchwc_block': ([], ctypes.c_int),
    'ge_nchwc_group': ([], ctypes.c_int),
    'ge_nchwc_conv': ([ctypes.c_void_p], None),
    'ge_nchwc_pack': ([ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64, ctypes.c_int64, ctypes.c_int64, ctypes.c_int64, ctypes.c_int64, ctypes.c_void_p], None),
    'ge_nchwc_reorder': ([ctypes.c_void_p], None),
    'ge_nchwc_max_pool': ([ctypes.c_void_p], None),
    'ge_nchwc_mean': ([ctypes.c_void_p], None),
    'ge_nchwc_scale': ([ctypes.c_void_p], None),
    'ge_nchwc_depthwise': ([ctypes.c_void_p], None),
    'ge_gemv': ([ctypes.c_void_p], None),
    'ge_gemv_panel': ([], ctypes.c_int64),
    'ge_gemv_packed_floats': ([ctypes.c_int64, ctypes.c_int64], ctypes.c_int64),
    'ge_gemv_pack': ([ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64, ctypes.c_int64, ctypes.c_int64, ctypes.c_void_p], None),
    'ge_gemv_panels': ([ctypes.c_void_p], None),
    'ge_eltwise': ([ctypes.c_void_p], ctypes.c_int),
    'ge_compare': ([ctypes.c_void_p], None),
    'ge_recurrent_workspace_floats': ([ctypes.c_int32, ctypes.c_int64, ctypes.c_int64], ctypes.c_int64),
    'ge_recurrent': ([ctypes.c_void_p], None),
    'ge_half_to_float': ([ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int], None),
    'ge_float_to_half': ([ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int], None),
    'ge_scale_rows': ([ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64, ctypes.c_void_p], None),
    'ge_qgemm_nr': ([], ctypes.c_int),
    'ge_qgemm_packed_bytes': ([ctypes.c_int64, ctypes.c_int64], ctypes.c_int64),
    'ge_qgemm_workspace_bytes': ([ctypes.c_int64, ctypes.c_int], ctypes.c_int64),
    'ge_qgemm_pack': ([ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64, ctypes.c_int64, ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p], None),
    'ge_qgemm_has_pairs': ([], ctypes.c_int),
    'ge_qgemm_mr': ([], ctypes.c_int),
    'ge_qgemm_pack_pairs': ([ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64, ctypes.c_int64, ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p], None),
    'ge_qgemm_has_twins': ([], ctypes.c_int),
    'ge_qgemm_twin': ([ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64, ctypes.c_void_p, ctypes.c_void_p], ctypes.c_int64),
    'ge_qgemm_twin_fill': ([ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p], None),
    'ge_qgemm_pairs_fit': ([ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64, ctypes.c_int64, ctypes.c_int64, ctypes.c_int], ctypes.c_int),
    'ge_qgemm_rest_quads': ([ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64, ctypes.c_int64, ctypes.c_int64, ctypes.c_int, ctypes.c_int64], ctypes.c_int64),
    'ge_qgemm_split': ([ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64, ctypes.c_int64, ctypes.c_int64, ctypes.c_int, ctypes.c_int64, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p], ctypes.c_int64),
    'ge_qgemm': ([ctypes.c_void_p], None),
    'ge_qgemm_set_amx': ([ctypes.c_int], ctypes.c_int),
    'ge_qdepthwise_slot_bytes': ([ctypes.c_void_p], ctypes.c_int64),
    'ge_qdepthwise_path': ([ctypes.c_void_p], ctypes.c_int32),
    'ge_qdepthwise': ([ctypes.c_void_p], None),
    'ge_qadd': ([ctypes.c_void_p], None),
    'ge_dynamic_quantize': ([ctypes.c_void_p, ctypes.c_int64, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p], None),
    'ge_quantize_run': ([ctypes.c_void_p], None),
    'ge_abi_layout': ([], ctypes.POINTER(AbiEntry)),
    'ge_level': ([], ctypes.c_char_p),
    'ge_isa': ([], ctypes.c_char_p),
}
