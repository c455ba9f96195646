"""ais_bench on ge: `InferSession` and `MultiDeviceSession` (interface.py), and the command line
`python3 -m ais_bench ...` (cli.py) with its inputs, output layout and summary (files.py,
summary.py). The shim's `ais_bench` package re-exports them (docs/ais_bench.md)."""
