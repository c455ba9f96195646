"""The cyclic garbage collector paused while a step makes objects that outlive it."""
from __future__ import annotations

import contextlib
import gc


@contextlib.contextmanager
def collector_paused():
    """A step without the cyclic garbage collector: reading an OM and loading it makes objects that
    live as long as the model (records, kernels, plans, views), writing one the maps it packs and
    checks, and collections of the youngest generation every 700 of them walk them and the objects
    before them again and again for no garbage (QOperator MobileNetV2 ~8 M instructions of a ~650 M
    load process, ~4 M of its OM's write; importing ge's runtime modules, whose classes and
    tables live as long as the process, ~6 M). Collections resume after, as before (not at all where
    the caller had turned them off)."""
    was_on = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_on:
            gc.enable()
