"""ais_bench.infer: the InferSession interface (ge.core.acl.ais_bench.interface)."""
