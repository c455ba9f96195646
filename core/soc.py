"""The SoC a model is compiled for (`ge atc --soc_version`), recorded in the OM and reported by
the simulated NPU."""
DEFAULT_SOC = "Ascend-sim"
