"""The bottom layer: the IR, the model records an OM holds, errors, weight-file names, SoCs.
It imports nothing of ge; everything else may import it."""
