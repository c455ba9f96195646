"""Random sequences of pyACL calls (tests/fuzz/acl_fuzz.py): every call answers with a code in
pyACL's shape, nothing outside known memory is written, and the model still runs bit for bit."""
from collections import Counter

import pytest

from .acl_fuzz import campaign, main, seed_models


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    return seed_models(str(tmp_path_factory.mktemp("acl_fuzz")))


@pytest.mark.parametrize("device,seed", [("cpu", 1), ("cpu", 2), ("sim", 3)])
def test_random_call_sequences_end_in_codes(models, monkeypatch, device, seed):
    monkeypatch.setenv("GE_ACL_DEVICE", device)
    codes = Counter()
    assert campaign(models, cases=15, seed=seed, steps=120, device=device, codes=codes) == []
    # the sequences reach both sides of the calls that matter: runs that work and each kind of refusal
    for call, ret in [("execute", 0), ("execute", 145003), ("execute", 100000), ("execute_async", 0),
                      ("memcpy", 0), ("memcpy", 107000), ("memcpy", 100000), ("free", 0), ("free", 207002),
                      ("malloc", 200000), ("set_dynamic_batch_size", 0), ("set_dynamic_batch_size", 145013)]:
        assert codes[call, ret], (call, ret)


def test_the_campaign_command(capsys, monkeypatch):
    monkeypatch.setenv("GE_ACL_DEVICE", "cpu")
    assert main(["--cases", "2", "--steps", "40", "--seed", "5"]) == 0
    assert "2 sequences of 40 calls: 0 failures" in capsys.readouterr().err
