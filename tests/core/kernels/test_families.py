"""families.py (which modules register each op) is what the registrations say, so a loaded OM can
import only the kernel families it uses."""
from ge.core.kernels import registry
from ge.core.kernels.families import FAMILIES, STRING_FAMILIES


def test_the_family_index_is_current():
    assert FAMILIES == registry.family_index() and STRING_FAMILIES == registry.family_index(strings=True), (
        "core/kernels/families.py is stale: run python -c 'from ge.core.kernels.registry import "
        "write_family_index; write_family_index()'")


def test_every_op_of_the_index_is_registered_by_its_modules():
    index = registry.family_index()
    assert ("", "Conv") in index and index[("", "Conv")] == ("conv",)
    assert all(modules for modules in index.values())
    assert registry.family_index(strings=True)[("", "Cast")] == ("strings",)  # its string variant
    assert index[("", "Cast")] == ("elementwise",)  # a model without strings never imports that family
