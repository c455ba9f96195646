"""The OM fuzzer (om_fuzz.py) in the normal test run: a fixed seed, three thousand mutated files (raw,
re-signed and structured), each ending in a GeError or in the unmutated outputs. A longer
campaign: `python -m tests.fuzz.om_fuzz --cases 20000`."""
from __future__ import annotations

import random

import msgpack
import pytest

from ge.core import api
from ge.core.model.errors import DeviceError, FormatError, GeError
from ge.formats.om import reader
from ge.formats.om.schema import WEIGHTS_DATA

from .om_fuzz import SEEDS, Campaign, Layout, main

CASES, BLOCKS = 4000, 10  # about 11 s on this machine; case n mutates seed n % 10


@pytest.fixture(scope="module")
def campaign():
    return Campaign(seed=0)


@pytest.mark.parametrize("block", range(BLOCKS))
def test_mutated_oms_end_in_a_ge_error_or_the_unmutated_outputs(campaign, block):
    n = CASES // BLOCKS
    failures = campaign.run(n, start=block * n)
    assert not failures, "\n".join(failures[:5])


def test_the_mutator_covers_every_kind_and_reaches_the_decoder(campaign):
    kinds, seeds = {}, set()
    for n in range(200):
        case = campaign.case(n)
        kinds.setdefault(case.kind, []).append(n)
        seeds.add(campaign.seed_of(n).name)
    assert set(kinds) == {"raw", "signed", "structured"} and seeds == set(SEEDS)
    # a structured edit passes both checksums: what rejects it is the validation, not the checksum
    for n in kinds["structured"][:40]:
        try:
            api.unload(api.load_from_mem(campaign.case(n).data, **campaign.seed_of(n).load))
        except GeError as e:
            assert "checksum" not in str(e)


def test_an_attribute_of_the_wrong_type_names_task_and_attribute(campaign):
    layout = campaign.seeds[0].layout
    key = next(k for k in layout.decoded if k[0] == 2)  # TASK_INFO
    ti = msgpack.unpackb(msgpack.packb(layout.decoded[key]), raw=False)
    # the seed's LeakyRelu is fused into the Conv before it: its attributes travel in the epilogue
    k = next(j for j, t in enumerate(ti["tasks"]) if any(s[0] == "LeakyRelu" for s in t["attrs"].get("ge.epilogue", [])))
    step = next(s for s in ti["tasks"][k]["attrs"]["ge.epilogue"] if s[0] == "LeakyRelu")
    step[1]["alpha"] = "xxx"
    data = layout.signed({key: msgpack.packb(ti, use_bin_type=True)})
    with pytest.raises(FormatError, match=rf"TASK_INFO.tasks\[{k}\] .*attrs\['ge.epilogue'\]\[\d\] \(LeakyRelu\): "
                                          r"attrs\['alpha'\] must be a float, got 'xxx' \(str\)"):
        api.load_from_mem(data)


def test_an_attribute_edited_to_another_valid_value_is_caught_by_the_declared_outputs(campaign):
    layout = campaign.seeds[0].layout
    key = next(k for k in layout.decoded if k[0] == 2)
    ti = msgpack.unpackb(msgpack.packb(layout.decoded[key]), raw=False)
    k = next(j for j, t in enumerate(ti["tasks"]) if t["op_type"] == "MaxPool")
    ti["tasks"][k]["attrs"]["strides"] = [1, 1]
    data = layout.signed({key: msgpack.packb(ti, use_bin_type=True)})
    with pytest.raises(FormatError, match=r"outputs\[0\] is declared float32 \[2, 4, 4, 4\] but the op computes "
                                          r"float32 \[2, 4, 7, 7\]"):
        api.load_from_mem(data)


def test_the_long_campaign_command(capsys):
    assert main(["--cases", "30", "--seed", "3"]) == 0
    assert "30 cases" in capsys.readouterr().out and Layout


def test_a_consistent_but_huge_allocation_is_refused_as_out_of_memory(campaign):
    """Sizes that agree with each other and stay under the format's 1 TiB bound, but not with the
    host: a DeviceError naming the size, not a MemoryError."""
    layout = campaign.seeds[0].layout
    key = next(k for k in layout.decoded if k[0] == 0)  # MODEL_DEF
    md = msgpack.unpackb(msgpack.packb(layout.decoded[key]), raw=False)
    grow = (1 << 40) - md["allocations"][1]["size"]
    md["allocations"][1]["size"] += grow
    md["memory_size"] += grow
    data = layout.signed({key: msgpack.packb(md, use_bin_type=True)})
    with pytest.raises(DeviceError, match=r"cpu: out of host memory allocating 1099511627776 bytes"):
        api.load_from_mem(data)


def test_a_flipped_bit_in_the_weights_is_caught_by_the_body_checksum(campaign):
    """WEIGHTS_DATA is most of a real OM and what body_checksum (xxh3_128 since format 1.9) is fast
    for: a flipped bit anywhere in it, left unsigned, fails the load naming the checksum; with the
    check off the load goes on (the bytes are a valid model's, only other values)."""
    rng = random.Random(7)
    checked = 0
    for seed in campaign.seeds:
        header, _ = reader.parse_header(memoryview(seed.om))
        for p in header["partitions"]:
            if p["type"] != WEIGHTS_DATA or not p["size"]:
                continue
            for _ in range(8):
                bad = bytearray(seed.om)
                bad[p["offset"] + rng.randrange(p["size"])] ^= 1 << rng.randrange(8)
                with pytest.raises(FormatError, match=r"^<bytes>: checksum mismatch \(file is corrupt or was modified\)$"):
                    api.load_from_mem(bytes(bad), **seed.load)
                checked += 1
    assert checked >= 8 * 4  # cnn, gears, range and hybrid hold inline weights
    assert reader.read_om(bytes(bad), verify_checksum=False).name
