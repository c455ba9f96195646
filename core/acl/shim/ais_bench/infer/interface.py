"""from ais_bench.infer.interface import InferSession (ge.core.acl.ais_bench.interface)."""
from ge.core.acl.ais_bench.interface import InferSession, MemorySummary, MultiDeviceSession  # noqa: F401
