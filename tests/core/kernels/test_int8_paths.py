"""Which instructions an int8 product runs on, chosen per layer by its weights (int8_native.product_plan):
without VNNI (v2's SSE, v3 and v4's AVX2) vpmaddubsw where no pair of weights can leave its int16, or on weights
split so that none does where few quads keep a rest, int16 pairs (vpmaddwd) elsewhere. Exact at every
level on the edge of the choice: x = 255 against weight pairs 127 + 1 and -128 + 0 (which fit) and
127 + 127, -128 + -128 (which would saturate vpmaddubsw, as onnxruntime's AVX2 kernel does), everywhere
or in a few places (split); and `ge inspect` says what was chosen."""
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from ge.core import api
from ge.core.inspection import om_info
from ge.core.model.ir import Meta
from ge.core.kernels import backend as backends, lookup, native as native_mod
from ge.core.kernels.ops.int8_native import (depthwise_geometry, depthwise_kernel, on_amx, packed_values,
                                            pairs_fit_int16, product_kernel, product_plan, twin_panels)
from ge.core.kernels.native import QOUT_I32, QOUT_U8, QPATH_BYTES, QPATH_PAIRS

from .int8_reference import reference
from .levels import RUNNABLE, level_params

PAIRS = [  # fits when a pair's positive parts add up to at most 128 and its negative ones to at least -128
    ((127, 1), True), ((127, 2), False), ((64, 64), True), ((65, 64), False), ((-128, 0), True),
    ((-128, -1), False), ((127, -128), True), ((-64, -64), True), ((127, 127), False), ((-128, -128), False)]


@pytest.mark.parametrize("pair,fits", PAIRS)
def test_pairs_fit_int16(pair, fits):
    w = np.array([pair], np.int8)
    assert pairs_fit_int16(w) == fits
    assert pairs_fit_int16((w.astype(np.int16) + 128).astype(np.uint8)) == fits  # uint8 weights, packed as w - 128
    assert pairs_fit_int16(np.array([[0, 127, 127, 0, 127]], np.int8))  # k paired 0-1, 2-3, then 4 alone
    assert not pairs_fit_int16(np.array([[0, 0, 127, 127]], np.int8))



def test_pairs_fit_int16_on_every_pair():
    """Every int8 pair (and its uint8 twin) against the definition: positive parts at most 128,
    negative ones at least -128."""
    a, b = (v.ravel() for v in np.meshgrid(np.arange(-128, 128), np.arange(-128, 128)))
    fits = (np.maximum(a, 0) + np.maximum(b, 0) <= 128) & (np.minimum(a, 0) + np.minimum(b, 0) >= -128)
    pairs = np.stack([a, b], axis=1).astype(np.int8)
    for rows in (pairs, (pairs.astype(np.int16) + 128).astype(np.uint8)):
        assert pairs_fit_int16(rows[fits].reshape(1, -1))  # all that fit, as one row of pairs
        good = rows[fits][:64].ravel()
        for pair in rows[~fits]:  # one pair that does not fit, among pairs that do
            assert not pairs_fit_int16(np.concatenate([good, pair])[None])
        for nat in [native_mod.load_level(RUNNABLE[0])] if RUNNABLE else []:  # Native.qpairs_fit, both layouts
            for fit_rows in (rows[fits].reshape(1, -1), rows[fits].reshape(-1, 2)):
                assert nat.qpairs_fit(fit_rows) and nat.qpairs_fit(np.asfortranarray(fit_rows))
            for bad_rows in (rows.reshape(1, -1), rows.reshape(-1, 2), np.concatenate([good, rows[~fits][-1]])[None]):
                assert not nat.qpairs_fit(bad_rows) and not nat.qpairs_fit(np.asfortranarray(bad_rows))


@pytest.mark.parametrize("unsigned", [False, True])
def test_split_pairs_fit_and_add_up(unsigned):
    """Native.qsplit (every build has it; the builds with int16 pairs use it): main + rest = the weights,
    every pair of both in int16, the rest in quads per group of weight indices, the whole weights' sums."""
    w = np.array([[127, 127, -128, -128, 127, -128, 5, 3, 127], [100, 28, 100, 30, -100, -28, -100, -30, -128]], np.int8)
    if not RUNNABLE:
        pytest.skip("no native level built")
    nat = native_mod.load_level(RUNNABLE[0])
    rows = (w.astype(np.int16) + 128).astype(np.uint8) if unsigned else w
    main, (start, quads, blocks), sums = nat.qsplit(rows, 1)
    rest = np.zeros((2, 12), np.int8)  # each row a group of its own (width 1): its quads' bytes
    for i in range(2):
        for q, block in zip(quads[start[i]:start[i + 1]], blocks[start[i]:start[i + 1]]):
            rest[i, 4 * q:4 * q + 4] = block[0]
    rest = rest[:, :9]
    assert pairs_fit_int16(main) and pairs_fit_int16(rest)
    np.testing.assert_array_equal(main.astype(np.int16) + rest, w)
    assert np.count_nonzero(rest) == 4  # 127 + 127, -128 + -128, 100 + 30, -100 + -30
    np.testing.assert_array_equal(sums, w.sum(axis=1))


@pytest.mark.parametrize("unsigned", [False, True])
def test_rest_quads_count_the_split(unsigned):
    """Native.qrest_quads (product_plan's share, counted without splitting) is the number of quads
    qsplit gives a rest, for rows (k contiguous) and panels (weight indices contiguous), widths 1 to 16,
    odd and even K, at every level built."""
    rng = np.random.default_rng(5)
    w = np.where(rng.random((37, 29)) < 0.05, 127, rng.integers(-40, 40, (37, 29))).astype(np.int8)
    rows = (w.astype(np.int16) + 128).astype(np.uint8) if unsigned else w
    for level in RUNNABLE:
        nat = native_mod.load_level(level)
        for weights in (rows, np.asfortranarray(rows), rows[:, :28], np.asfortranarray(rows[:, :28])):
            for width in (1, 4, 16):
                count = nat.qrest_quads(weights, width)
                assert 0 < count == len(nat.qsplit(weights, width)[1][1])
        assert nat.qrest_quads(np.ones((5, 8), np.int8), 4) == 0


def _product(op: str, level: str, pair, monkeypatch, sparse=False, unsigned=False):
    """op (MatMulInteger: weights as columns; ConvInteger: as rows) on x = 255 (a few 0s) and weights
    whose every pair of k is `pair` (sparse: a few are, the others 3 and -2; unsigned: as uint8
    weights packed to those values, w - 128), at native `level`: (ge's result, the exact one, the
    kernel's plan)."""
    monkeypatch.setattr(backends, "select", lambda *a, **k: backends.Backend(native_mod.load_level(level)))
    rng = np.random.default_rng(3)
    if op == "MatMulInteger":  # K = 38: 9 quads and a short one; N = 20: a full panel and a short one
        x = np.where(rng.random((5, 38)) < 0.9, 255, 0).astype(np.uint8)
        rows = np.resize(np.array(pair, np.int8), (20, 38))
    else:  # K = 3 * 3 * 3 = 27 per output channel (rows padded to 28); 9 x 7 pixels
        x = np.where(rng.random((1, 3, 9, 7)) < 0.9, 255, 0).astype(np.uint8)
        rows = np.resize(np.array(pair, np.int8), (6, 27))
    if sparse:  # the pair in the first quad of the first weight index and near the end of the last
        few = rows.copy()
        rows = np.resize(np.array([3, -2], np.int8), rows.shape)
        rows[0, :2], rows[-1, 22:24] = few[0, :2], few[-1, 22:24]
    if unsigned:
        rows = (rows.astype(np.int16) + 128).astype(np.uint8)
    w = rows.T.copy() if op == "MatMulInteger" else rows.reshape(6, 3, 3, 3)
    kernel = lookup(op, "", 17)({}, [Meta(x.dtype, x.shape), Meta(w.dtype, w.shape)], [None, w], opset=17,
                                name="n").load()
    out = kernel.infer()[0]
    y = np.zeros(out.shape, np.int32)
    ws = np.zeros(kernel.workspace_nbytes(), np.uint8)
    kernel.run([x, w], [y], ws)
    return y, reference(op, [x, w]), kernel.qn if op == "MatMulInteger" else kernel.qc


@pytest.mark.parametrize("level", level_params())
@pytest.mark.parametrize("op", ["MatMulInteger", "ConvInteger"])
@pytest.mark.parametrize("pair,fits", [((127, 1), True), ((-128, 0), True), ((127, 127), False),
                                       ((-128, -128), False)])
def test_products_exact_at_the_edge_of_int16(monkeypatch, level, op, pair, fits):
    y, want, plan = _product(op, level, pair, monkeypatch)
    np.testing.assert_array_equal(y, want)
    nat = native_mod.load_level(level)
    assert nat.qgemm_has_pairs == (level in ("v2", "v3", "v4"))  # without VNNI: the builds with a choice
    assert plan.path == (QPATH_PAIRS if nat.qgemm_has_pairs and not fits else QPATH_BYTES)
    assert plan.plan.fix is None


@pytest.mark.parametrize("level", level_params())
@pytest.mark.parametrize("op", ["MatMulInteger", "ConvInteger"])
@pytest.mark.parametrize("pair,unsigned", [((127, 127), False), ((-128, -128), False), ((127, 127), True)])
def test_split_weights_exact_at_the_edge_of_int16(monkeypatch, level, op, pair, unsigned):
    """A few pairs overflow: without VNNI the weights are split (vpmaddubsw on both parts)."""
    y, want, plan = _product(op, level, pair, monkeypatch, sparse=True, unsigned=unsigned)
    np.testing.assert_array_equal(y, want)
    split = native_mod.load_level(level).qgemm_has_pairs
    assert plan.path == QPATH_BYTES and (plan.plan.fix is not None) == split
    if split:
        assert len(plan.plan.fix[1]) == 2  # one quad of each of two groups keeps a rest


def _edge_weights(kind: str, shape, rng) -> np.ndarray:
    """int8 weights whose pairs of k all fit int16 (fit), a few of which do not (split), or none (wide)."""
    w = rng.integers(-60, 61, shape).astype(np.int8)
    flat = w.reshape(shape[0], -1)
    if kind == "wide":
        flat[:] = np.resize(np.array([127, 127, -128, -128], np.int8), flat.shape)
    elif kind == "split":
        flat[0, :2], flat[-1, 4:6] = (127, 127), (-128, -128)
    return w


@pytest.mark.parametrize("level", level_params())
@pytest.mark.parametrize("op", ["MatMulInteger", "ConvInteger"])
@pytest.mark.parametrize("kind", ["fit", "split", "wide"])
def test_short_tiles_and_last_panels_exact(monkeypatch, level, op, kind):
    """Tiles of every row count (1 to 7 weight indices or rows: a whole tile and each short one) and last
    panels of at most 8 columns, whose first 8 alone AVX2 computes: a 7x7 conv's 49 pixels (3 panels and
    1 column), a product's 19 columns (a panel and 3); edge bytes (0 and 255 beside zero points of 0 and
    255) on each path (vpmaddubsw, split weights, int16 pairs), exact at every level."""
    monkeypatch.setattr(backends, "select", lambda *a, **k: backends.Backend(native_mod.load_level(level)))
    rng = np.random.default_rng(11)
    for m in (1, 2, 3, 4, 5, 6, 7):
        if op == "ConvInteger":  # K = 5 * 3 * 3 = 45, padded: the input's copy with its zero point
            x = rng.choice(np.array([0, 255, 255, 1], np.uint8), (1, 5, 7, 7))
            w = _edge_weights(kind, (m, 5, 3, 3), rng)
            attrs, xz = {"pads": [1, 1, 1, 1]}, np.array(255, np.uint8)
        else:
            x = rng.choice(np.array([0, 255, 255, 1], np.uint8), (m, 45))
            w = _edge_weights(kind, (19, 45), rng).T.copy()
            attrs, xz = {}, np.array(0, np.uint8)
        xs = [x, w, xz]
        kernel = lookup(op, "", 17)(attrs, [Meta(v.dtype, v.shape) for v in xs], [None, w, None], opset=17,
                                    name="n").load()
        out = kernel.infer()[0]
        y = np.zeros(out.shape, np.int32)
        kernel.run(xs, [y], np.zeros(kernel.workspace_nbytes(), np.uint8))
        np.testing.assert_array_equal(y, reference(op, xs, attrs), err_msg=f"{m} rows")
        plan = kernel.qn if op == "MatMulInteger" else kernel.qc
        if native_mod.load_level(level).qgemm_has_pairs:
            assert plan.path == (QPATH_PAIRS if kind == "wide" else QPATH_BYTES)
            assert (plan.plan.fix is not None) == (kind == "split")


@pytest.mark.parametrize("level", level_params())
@pytest.mark.parametrize("kind", ["fit", "split", "wide"])
def test_qlinear_conv_requantized_from_registers_exact(monkeypatch, level, kind):
    """QLinearConv's whole tiles (4 output channels x 16 pixels) requantized from the registers (AVX2
    builds, qgemm.c's store_fused) and the rest stored through memory give the exact bytes: 6 channels (a
    whole tile and a short one) over a 7x7 plane (3 whole panels and a pixel), uint8 and int8 outputs,
    per-channel scales putting products on ties and past the output range, on each path."""
    monkeypatch.setattr(backends, "select", lambda *a, **k: backends.Backend(native_mod.load_level(level)))
    rng = np.random.default_rng(5)
    x = rng.choice(np.array([0, 255, 255, 1, 128], np.uint8), (1, 5, 7, 7))
    w = _edge_weights(kind, (6, 5, 3, 3), rng)
    for ydt, yz in ((np.uint8, 3), (np.int8, -5)):
        xs = [x, np.array(1.0, np.float32), np.array(7, np.uint8), w, np.array([0.5, 1, 0.25, 2, 0.5, 1], np.float32),
              np.zeros(6, np.int8), np.array(60.0, np.float32), np.array(yz, ydt),
              rng.integers(-9000, 9000, 6).astype(np.int32)]
        kernel = lookup("QLinearConv", "", 17)({"pads": [1, 1, 1, 1]}, [Meta(v.dtype, v.shape) for v in xs],
                                               [None] + xs[1:], opset=17, name="n").load()
        out = kernel.infer()[0]
        y = np.full(out.shape, 77, out.dtype)
        kernel.run(xs, [y], np.zeros(kernel.workspace_nbytes(), np.uint8))
        np.testing.assert_array_equal(y, reference("QLinearConv", xs, {"pads": [1, 1, 1, 1]}), err_msg=str(ydt))


def _lane_bounds(slots: np.ndarray) -> np.ndarray:
    """Per 64-byte slot (16 columns' quads) its 32 int16 lanes of vpmaddubsw (a column's bytes 0-1 or 2-3):
    the weights' positive parts added, then their negative parts' magnitude (64 bounds)."""
    v = slots.reshape(-1, 32, 2).astype(np.int16)
    return np.concatenate([np.maximum(v, 0).sum(-1), (-np.minimum(v, 0)).sum(-1)], axis=1)


@pytest.mark.parametrize("level", level_params())
def test_twinned_panels_hold_every_quad_once_and_fit(level):
    """Native.qtwin (qgemm.c's ge_qgemm_twin) on AVX2 builds: each panel's slots are its quads, each once,
    in twins whose int16 lanes add up within 128 both ways (255 x 128 fits int16), a quad without a twin
    beside zeros; on weights of which some quads twin with nothing (a lane of 64 + 64) and lanes on the
    edge (64 + 0 beside 0 + 64: 128, fits; beside 1 + 64: 129, does not; -128 + 0, whose magnitude 128
    leaves int8, twins only with a lane without negative parts: 127 + 1's). Builds without the twinned
    tile (v2's SSE, VNNI) have none."""
    nat = native_mod.load_level(level)
    rng = np.random.default_rng(7)
    k, n = 64, 40  # 16 quads, 3 panels (the last of 8 columns)
    w = rng.integers(-30, 31, (k, n)).astype(np.int8)
    w[0:2, 0], w[4:6, 0], w[8:10, 0] = (64, 0), (0, 64), (1, 64)  # column 0: quads 0, 1 and 2 on the edge
    w[12:16, 16:32] = 64  # quad 3 of the second panel fills every lane alone: no quad twins with it
    w[0::4, 3], w[1::4, 3] = -1, 0  # column 3's first lane: a negative part of 1 in every quad but
    w[16:18, 3], w[20:22, 3] = (-128, 0), (127, 1)  # quads 4 (negative parts 128) and 5 (positive 128)
    bp, _ = nat.qpack(w)
    twins = nat.qtwin(bp, k, n)
    if not nat.qgemm_has_twins:
        assert twins is None
        return
    assert nat.qtwin(bp[:-16], k - 1, n) is None  # K not a multiple of 4
    slots, start, slot_q = twins
    panels, quads = bp.reshape(3, 16, 64), 16
    assert start[0] == 0 and len(start) == 4 and start[-1] == len(slot_q) == len(slots) // 64
    for p in range(3):
        own, q = slots[start[p] * 64:start[p + 1] * 64].reshape(-1, 64), slot_q[start[p]:start[p + 1]]
        alone = q[0::2] == q[1::2]
        assert sorted(q[np.repeat(~alone, 2) | np.tile([True, False], len(alone))]) == list(range(quads))
        np.testing.assert_array_equal(own[0::2], panels[p][q[0::2]])
        np.testing.assert_array_equal(own[1::2][~alone], panels[p][q[1::2][~alone]])
        assert not own[1::2][alone].any()
        bounds = _lane_bounds(own)
        assert (bounds[0::2] + bounds[1::2] <= 128).all()
        assert list(q[0::2]) == sorted(q[0::2]) and (q[0::2] <= q[1::2]).all()  # in order of K
    assert (0, 2) not in set(zip(slot_q[0:start[1]:2], slot_q[1:start[1]:2]))  # 64 + 1 + 64 = 129
    mate = {a: b for x, y in zip(slot_q[0:start[1]:2], slot_q[1:start[1]:2]) for a, b in ((x, y), (y, x))}
    assert mate[4] in (4, 5)  # 128 + 1 beside any other quad
    second = slot_q[start[1]:start[2]]
    assert 3 in second[0::2][second[0::2] == second[1::2]]


@pytest.mark.parametrize("level", level_params())
@pytest.mark.parametrize("kind", ["fit", "split"])
def test_twinned_products_exact(monkeypatch, level, kind):
    """MatMulInteger over twinned panels (AVX2 builds, K a multiple of 4) exact: tiles of 1 to 7 rows, a
    whole panel and one of 3 columns, bytes 0 and 255, zero points on both operands (the weights' counted
    from the rows' sums) and none, twins on the edge of int16 (lanes adding up to 128), and weights split
    (a rest in a few quads, added after the twins)."""
    monkeypatch.setattr(backends, "select", lambda *a, **k: backends.Backend(native_mod.load_level(level)))
    nat = native_mod.load_level(level)
    rng = np.random.default_rng(13)
    w = rng.integers(-30, 31, (48, 19)).astype(np.int8)  # K 48: 12 quads; small weights: most quads twin
    if kind == "split":
        w[0:2, 0], w[4:6, 18] = (127, 127), (-128, -128)
    w[0:2, 1], w[4:6, 1] = (64, 0), (0, 64)
    w[8:10, 2], w[12:14, 2] = (-64, -64), (0, 0)
    for m in (1, 2, 3, 4, 5, 6, 7):
        x = rng.choice(np.array([0, 255, 255, 1], np.uint8), (m, 48))
        for xz, wz in ((None, None), (np.array(255, np.uint8), rng.integers(-3, 4, 19).astype(np.int8))):
            xs = [x, w, xz, wz]
            kernel = lookup("MatMulInteger", "", 17)({}, [None if v is None else Meta(v.dtype, v.shape) for v in xs],
                                                     [None, w, None, wz], opset=17, name="n").load()
            y = np.zeros((m, 19), np.int32)
            kernel.run(xs, [y], np.zeros(kernel.workspace_nbytes(), np.uint8))
            np.testing.assert_array_equal(y, reference("MatMulInteger", xs), err_msg=f"{m} rows, {xz}")
            assert (kernel.qn.twins is not None) == nat.qgemm_has_twins
            assert (kernel.qn.plan.fix is not None) == (kind == "split" and nat.qgemm_has_pairs)


@pytest.mark.parametrize("level", level_params())
def test_twins_left_where_quads_stay_alone(level):
    """Weights whose every lane is full (64 + 64): no quad twins, so the plain tile runs (int8_native.twin_panels)."""
    nat = native_mod.load_level(level)
    if not nat.qgemm_has_twins:
        pytest.skip(f"{level}: a build without the twinned tile")
    w = np.full((32, 16), 64, np.int8)
    bp, _ = nat.qpack(w)
    assert nat.qtwin(bp, 32, 16) is not None and twin_panels(nat, bp, 32, 16) is None
    assert twin_panels(nat, nat.qpack(w // 2)[0], 32, 16) is not None


def test_inspect_says_what_each_layer_runs_on(tmp_path):
    """Two MatMulInteger layers, one whose weight pairs fit int16 and one whose do not: `ge inspect`
    (om_info.inspect, the data of `ge inspect --json`) names each one's instructions at this level."""
    fit = np.resize(np.array([127, 1], np.int8), (16, 32)).T.copy()
    wide = np.resize(np.array([127, 127], np.int8), (16, 32)).T.copy()
    small = np.random.default_rng(2).integers(-20, 21, (32, 16)).astype(np.int8)  # quads that twin
    nodes = [helper.make_node("MatMulInteger", ["x", "w_fit"], ["a"], name="fits"),
             helper.make_node("MatMulInteger", ["x", "w_small"], ["z"], name="small"),
             helper.make_node("Cast", ["a"], ["a8"], to=TensorProto.UINT8, name="cast"),
             helper.make_node("Pad", ["a8", "pads"], ["a32"], name="pad"),
             helper.make_node("MatMulInteger", ["a32", "w_wide"], ["y"], name="wide")]
    inits = [numpy_helper.from_array(fit, "w_fit"), numpy_helper.from_array(wide, "w_wide"),
             numpy_helper.from_array(small, "w_small"),
             numpy_helper.from_array(np.array([0, 0, 0, 16], np.int64), "pads")]
    graph = helper.make_graph(nodes, "two", [helper.make_tensor_value_info("x", TensorProto.UINT8, [4, 32])],
                              [helper.make_tensor_value_info("y", TensorProto.INT32, [4, 16]),
                               helper.make_tensor_value_info("z", TensorProto.INT32, [4, 16])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, tmp_path / "two.onnx")
    om = api.atc(str(tmp_path / "two.onnx"), str(tmp_path / "two")).om_path
    tasks = {t["node"]: t for t in om_info.inspect(om)["tasks"]}
    nat = native_mod.native()
    assert tasks["fits"]["int8_product"] == product_kernel(nat, product_plan(nat, packed_values(fit.T), False))
    assert tasks["wide"]["int8_product"] == product_kernel(nat, product_plan(nat, packed_values(wide.T), False))
    assert tasks["cast"]["int8_product"] == ""
    if nat is not None and nat.qgemm_has_pairs:
        assert "pmaddubsw (every weight pair fits int16)" in tasks["fits"]["int8_product"]
        assert "pmaddwd on int16 pairs" in tasks["wide"]["int8_product"]
    assert ("quads of K in twins" in tasks["small"]["int8_product"]) == (nat is not None and nat.qgemm_has_twins)


def linux_grants_amx() -> bool:
    """Linux lets this process use AMX's tile state (5.16 and later grant it on request: ARCH_REQ_XCOMP_PERM
    for XTILEDATA); asked here, not through ge, so that the test does not take ge's word for it."""
    if "amx_int8" not in native_mod.cpu_flags():
        return False
    try:
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
    except OSError:
        return False
    sys_arch_prctl, arch_req_xcomp_perm, xfeature_xtiledata = 158, 0x1023, 18  # x86-64 Linux
    return libc.syscall(sys_arch_prctl, arch_req_xcomp_perm, xfeature_xtiledata) == 0


@pytest.mark.parametrize("amx", [True, False])
def test_amx_blocks_exact(monkeypatch, amx):
    """Where the CPU has AMX (the v4vnni build on Sapphire Rapids and later) a product over prepacked
    weights runs its whole blocks of 32 rows on tdpbusd, K's last (K mod 64) bytes and the last rows on
    vpdpbusd: exact with AMX and without (qgemm_use_amx(False), as GE_NO_AMX=1), on edge values with
    zero points on both sides (int8 activations: flipped to uint8; uint8 weights: packed as w - 128);
    and `ge inspect`'s words follow int8_native.on_amx."""
    nat = native_mod.native()
    if nat is None:  # GE_NO_NATIVE: the numpy plan, exact as well
        amx = False
    monkeypatch.setattr(backends, "select", lambda *a, **k: backends.Backend(nat))
    rng = np.random.default_rng(5)
    x = rng.choice(np.array([-128, 127, 0, -1, 5], np.int8), (70, 200))  # 2 blocks and 6 rows; 3 steps of K and 8 bytes
    w = rng.choice(np.array([0, 255, 1, 128], np.uint8), (200, 45))
    xz, wz = np.array(-3, np.int8), rng.integers(0, 256, 45).astype(np.uint8)
    xs = [x, w, xz, wz]
    before = nat is not None and nat.qgemm_amx
    try:
        used = nat.qgemm_use_amx(amx) if nat is not None else False
        kernel = lookup("MatMulInteger", "", 17)({}, [Meta(v.dtype, v.shape) for v in xs], [None, w, None, wz],
                                                 opset=17, name="n").load()
        y = np.zeros((70, 45), np.int32)
        kernel.run(xs, [y], np.zeros(kernel.workspace_nbytes(), np.uint8))
        plan = product_plan(nat, packed_values(w.T), False)
        words = product_kernel(nat, plan, on_amx(nat, 70, 200))
    finally:
        if nat is not None:
            nat.qgemm_use_amx(before)
    np.testing.assert_array_equal(y, reference("MatMulInteger", xs))
    assert used == (amx and nat.level == "v4vnni" and linux_grants_amx())
    assert ("tdpbusd (AMX)" in words) == used
    assert not on_amx(nat, 31, 200) and not on_amx(nat, 70, 63)


@pytest.mark.parametrize("level", level_params())
def test_inspect_names_each_depthwise_layers_path(tmp_path, monkeypatch, level):
    """Four int8 depthwise layers whose geometry and outputs decide four paths of ge_qdepthwise: `ge inspect`
    names each layer's own (Native.qdepthwise_path), not the build's choices. On AVX2 and AVX-512 builds:
    3x3 on a small plane, int16 column pairs; 3x3 stride 2 on rows of 56 outputs, int16 rows a channel at a
    time; 5x5 into bytes, float32 FMA; ConvInteger's int32 outputs, the taps in pairs."""
    nat = native_mod.load_level(level)
    monkeypatch.setattr(native_mod, "native", lambda: nat)
    rng = np.random.default_rng(5)
    c = 16

    def q(name, value, dtype):
        return numpy_helper.from_array(np.asarray(value, dtype), name)
    inits = [q("s", 0.05, np.float32), q("z", 128, np.uint8), q("ys", 0.1, np.float32), q("wz", 0, np.int8)]
    for name, k in (("w3", 3), ("w5", 5)):
        inits.append(q(name, rng.integers(-60, 61, (c, 1, k, k)), np.int8))
    nodes, outputs = [], []
    for name, x, w, attrs in (("cols", "x14", "w3", dict(pads=[1, 1, 1, 1])),
                              ("rows", "x112", "w3", dict(pads=[1, 1, 1, 1], strides=[2, 2])),
                              ("float", "x14", "w5", dict(pads=[2, 2, 2, 2]))):
        nodes.append(helper.make_node("QLinearConv", [x, "s", "z", w, "s", "wz", "ys", "z"], [name], name=name,
                                      group=c, **attrs))
        outputs.append(helper.make_tensor_value_info(name, TensorProto.UINT8, None))
    nodes.append(helper.make_node("ConvInteger", ["x14", "w3", "z", "wz"], ["taps"], name="taps", group=c,
                                  pads=[1, 1, 1, 1]))
    outputs.append(helper.make_tensor_value_info("taps", TensorProto.INT32, None))
    graph = helper.make_graph(nodes, "dw", [helper.make_tensor_value_info("x14", TensorProto.UINT8, [1, c, 14, 14]),
                                            helper.make_tensor_value_info("x112", TensorProto.UINT8, [1, c, 8, 112])],
                              outputs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, tmp_path / "dw.onnx")
    om = api.atc(str(tmp_path / "dw.onnx"), str(tmp_path / "dw")).om_path
    said = {t["node"]: t["int8_product"] for t in om_info.inspect(om)["tasks"]}
    shapes = {"cols": ((1, c, 14, 14), 3, (1, c, 14, 14), {}, QOUT_U8), "rows": ((1, c, 8, 112), 3, (1, c, 4, 56),
              {"strides": [2, 2]}, QOUT_U8), "float": ((1, c, 14, 14), 5, (1, c, 14, 14), {}, QOUT_U8),
              "taps": ((1, c, 14, 14), 3, (1, c, 14, 14), {}, QOUT_I32)}
    for name, (x, k, y, attrs, out) in shapes.items():
        path = nat.qdepthwise_path(depthwise_geometry(x, (c, 1, k, k), y, attrs), out)
        assert said[name] == depthwise_kernel(nat, path), name
    if "avx2" in nat.isa:
        assert said["cols"].startswith("depthwise: 3x3 on int16 column pairs")
        assert said["rows"].startswith("depthwise: 3x3 rows of int16 pairs")
        assert said["float"] == "depthwise: float32 FMA by 16 channels (exact)"
    assert said["taps"].startswith("depthwise: taps in pairs")
    assert len(set(said.values())) == (4 if "avx2" in nat.isa else 1)
