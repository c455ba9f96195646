"""The arena planner on literal lifetimes, with exact offsets."""
import itertools

import numpy as np
import pytest

from ge.core.model import arena
from ge.core.model.arena import Buffer, align, lower_bound, lowest_fit, plan_arena


def overlaps(a, b):
    return a.first <= b.last and b.first <= a.last


def assert_valid(buffers, plan):
    for a, b in itertools.combinations(buffers, 2):
        if overlaps(a, b):
            ra = (plan.offsets[a.name], plan.offsets[a.name] + a.nbytes)
            rb = (plan.offsets[b.name], plan.offsets[b.name] + b.nbytes)
            assert ra[1] <= rb[0] or rb[1] <= ra[0], f"{a.name} and {b.name} overlap in memory and time"
    for b in buffers:
        assert plan.offsets[b.name] % 64 == 0


def test_chain_reuses_two_slots():
    # a -> b -> c -> d: each tensor is read by the next step only, so two slots suffice
    bufs = [Buffer("a", 1024, 0, 1), Buffer("b", 1024, 1, 2), Buffer("c", 1024, 2, 3), Buffer("d", 1024, 3, 4)]
    plan = plan_arena(bufs)
    assert plan.offsets == {"a": 0, "b": 1024, "c": 0, "d": 1024}
    assert plan.size == plan.lower_bound == 2048


def test_residual_block_exact_offsets():
    # x(0..3) is kept for the residual Add at step 3 while y1, y2 come and go
    bufs = [Buffer("x", 4096, 0, 3), Buffer("y1", 2048, 1, 2), Buffer("y2", 4096, 2, 3), Buffer("out", 4096, 3, 4)]
    plan = plan_arena(bufs)
    assert plan.offsets == {"x": 0, "y2": 4096, "out": 8192, "y1": 8192}
    assert plan.size == 12288 == plan.lower_bound


def test_best_fit_picks_the_smallest_gap():
    bufs = [Buffer("big", 1000, 0, 5), Buffer("hole1", 300, 0, 1), Buffer("mid", 500, 0, 5),
            Buffer("hole2", 100, 0, 1), Buffer("top", 200, 0, 5), Buffer("cap", 80, 0, 5),
            Buffer("small", 64, 2, 3)]
    plan = plan_arena(bufs)
    assert_valid(bufs, plan)
    # big 0, mid 1024, hole1 1536 (320 B), top 1856, hole2 2112 (128 B), cap 2240
    assert [plan.offsets[n] for n in ("big", "mid", "hole1", "top", "hole2", "cap")] == [0, 1024, 1536, 1856, 2112, 2240]
    # after hole1/hole2 die, "small" goes into the smallest freed gap that fits it
    assert plan.offsets["small"] == plan.offsets["hole2"]


def test_alignment_rounds_sizes():
    bufs = [Buffer("a", 1, 0, 1), Buffer("b", 65, 0, 1)]
    plan = plan_arena(bufs)
    assert plan.offsets == {"b": 0, "a": 128}
    assert plan.size == 192 == lower_bound(bufs) and align(65) == 128


def test_empty():
    plan = plan_arena([])
    assert plan.size == 0 and plan.lower_bound == 0 and plan.offsets == {}


@pytest.mark.parametrize("seed", range(20))
def test_random_lifetimes_are_valid_and_near_the_bound(seed):
    rng = np.random.default_rng(seed)
    bufs = []
    for i in range(60):
        first = int(rng.integers(0, 50))
        bufs.append(Buffer(f"t{i}", int(rng.integers(1, 1 << 16)), first, first + int(rng.integers(0, 6))))
    plan = plan_arena(bufs)
    assert_valid(bufs, plan)
    assert plan.lower_bound <= plan.size <= 1.5 * plan.lower_bound


@pytest.mark.parametrize("seed", range(10))
@pytest.mark.parametrize("rule", ["lifetimes", "conflicts", "no reuse"])
def test_few_buffers_placed_as_many(monkeypatch, seed, rule):
    """The placement of few buffers (Python ints of bits) and of many (numpy rows) agree, offset for offset."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 140))
    bufs = [Buffer(f"t{i}", int(rng.integers(1, 1 << 12)), f, f + int(rng.integers(0, 30)))
            for i, f in enumerate(rng.integers(0, 100, n).tolist())]
    conflicts = None
    if rule == "conflicts":
        pairs = rng.random((n, n)) < 0.3
        conflicts = np.packbits(pairs | pairs.T, axis=1)
    few = plan_arena(bufs, conflicts=conflicts, reuse=rule != "no reuse")
    monkeypatch.setattr(arena, "FEW_BUFFERS", 0)
    many = plan_arena(bufs, conflicts=conflicts, reuse=rule != "no reuse")
    assert few == many and list(few.offsets) == list(many.offsets)


def test_lowest_fit_takes_the_lowest_of_the_smallest_gaps():
    # placed [0, 64), [192, 256), [320, 512), [576, 640): gaps of 128 at 64, 64 at 256, 64 at 512
    start, end = np.array([320, 0, 576, 192]), np.array([512, 64, 640, 256])
    assert lowest_fit(start, end, 64) == 256
    assert lowest_fit(start, end, 128) == 64
    assert lowest_fit(start, end, 192) == 640
    assert lowest_fit(start[:0], end[:0], 64) == 0


@pytest.mark.parametrize("seed", range(40))
def test_lowest_fit_walks_few_neighbours_as_it_scans_many(monkeypatch, seed):
    """The Python walk (few neighbours) and the numpy scan (many) agree, overlapping neighbours included."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(0, 120))
    start = rng.integers(0, 40, n) * 64
    end = start + rng.integers(0, 6, n) * 64
    size = int(rng.integers(0, 4)) * 64
    walked = lowest_fit(start, end, size)
    monkeypatch.setattr(arena, "FEW_NEIGHBOURS", 0)
    assert lowest_fit(start, end, size) == walked
