"""The SoC a model is compiled for (`ge atc --soc_version`): checked against the names ATC knows,
recorded in the OM, and what the simulated NPU reports for a model compiled for it (its AI Core
count bounds `--aicore_num`).

The AI Core counts are those of the chip as its product documentation gives them; ge's own
`Ascend-sim` has no hardware behind it and reports the host's view (no AI Core limit)."""
from __future__ import annotations

from .errors import GeError
from .record import record

DEFAULT_SOC = "Ascend-sim"


@record
class Soc:
    name: str
    family: str  # the product line, as ATC's platform config groups them
    aicore_num: int  # 0: no fixed count (the simulator)
    vector_core_num: int = 0


def _family(family: str, aicore: int, vector: int, *names: str) -> dict[str, Soc]:
    return {n: Soc(n, family, aicore, vector) for n in names}


SOCS: dict[str, Soc] = {
    DEFAULT_SOC: Soc(DEFAULT_SOC, "ge simulator", 0),
    **_family("Atlas 200/300/500 inference", 2, 0, "Ascend310"),
    **_family("Atlas inference series (310P; Ascend710 its older name)", 8, 7, "Ascend710", "Ascend310P1",
              "Ascend310P2", "Ascend310P3", "Ascend310P4", "Ascend310P5", "Ascend310P7"),
    **_family("Atlas 200I/500 A2 inference (310B)", 1, 1, "Ascend310B1", "Ascend310B2", "Ascend310B3",
              "Ascend310B4"),
    **_family("Atlas training series (910)", 32, 0, "Ascend910", "Ascend910A", "Ascend910ProA", "Ascend910PremiumA"),
    **_family("Atlas training series (910, 30 cores)", 30, 0, "Ascend910B", "Ascend910ProB"),
    **_family("Atlas A2 training/inference (910B, 24 cores)", 24, 48, "Ascend910B1", "Ascend910B2", "Ascend910B2C"),
    **_family("Atlas A2 training/inference (910B, 20 cores)", 20, 40, "Ascend910B3", "Ascend910B4", "Ascend910B4-1"),
    **_family("Atlas A3 training/inference (910_93)", 24, 48, "Ascend910_9391", "Ascend910_9381", "Ascend910_9392",
              "Ascend910_9382", "Ascend910_9372", "Ascend910_9362"),
    **_family("automotive (610)", 10, 8, "Ascend610", "Ascend610Lite", "BS9SX1AA", "BS9SX1AB", "BS9SX1AC"),
}


def check_soc(name: str) -> Soc:
    """The SoC named by --soc_version; a name ATC does not know is an error naming the close ones."""
    if name in SOCS:
        return SOCS[name]
    import difflib  # here, for the error only: `ge atc` compiled its 83 KB on every run without bytecode
    close = difflib.get_close_matches(name, SOCS, n=4, cutoff=0.6)
    hint = f"did you mean {' or '.join(close)}?" if close else \
        f"known: {', '.join(sorted(s for s in SOCS if s != DEFAULT_SOC))}, or ge's own {DEFAULT_SOC}"
    raise GeError(f"--soc_version={name!r} is not an Ascend SoC ATC knows; {hint}")


def soc_info(name: str) -> dict:
    """What the simulated NPU reports for a model compiled for `name` (an unknown name: just the name,
    as an OM from another tool may carry one)."""
    s = SOCS.get(name)
    if s is None:
        return {"soc_version": name}
    return {"soc_version": s.name, "family": s.family, "aicore_num": s.aicore_num,
            "vector_core_num": s.vector_core_num}
