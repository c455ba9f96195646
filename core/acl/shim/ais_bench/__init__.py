"""ais_bench on ge (ge.core.acl.ais_bench): `python3 -m ais_bench ...` and ais_bench.infer.interface."""
