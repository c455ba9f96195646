"""core/model/record.py's records (named tuples from annotated class bodies) and the plain model
classes that replaced ge's dataclasses: what their users rely on."""
from __future__ import annotations

import pickle

import numpy as np
import pytest

from ge.core.jsonable import jsonable
from ge.core.model.dynamic_model import Step
from ge.core.model.ge_model import Allocation, Arg, GeModel, TensorDesc
from ge.core.model.record import record
from ge.core.runtime.device import get_device


@record
class Point:
    """A point."""
    x: int
    y: int = 0  # a default

    @property
    def norm1(self) -> int:
        return abs(self.x) + abs(self.y)


def test_a_record_has_its_fields_defaults_methods_and_doc():
    p = Point(3, y=-4)
    assert (p.x, p.y, p.norm1, Point(1).y) == (3, -4, 7, 0)
    assert Point.__doc__ == "A point." and repr(p) == "Point(x=3, y=-4)"
    assert p._replace(y=1) == Point(3, 1) and p._asdict() == {"x": 3, "y": -4}
    assert pickle.loads(pickle.dumps(p)) == p and type(pickle.loads(pickle.dumps(p))) is Point
    assert hash(p) == hash(Point(3, -4)) and not hasattr(p, "__dict__")
    with pytest.raises(AttributeError):
        p.x = 1
    with pytest.raises(TypeError, match=r"Point.__new__\(\) missing 1 required positional argument: 'x'"):
        Point()
    assert Point._fields == ("x", "y") and Point._field_defaults == {"y": 0} and Point._make([5, 6]) == Point(5, 6)
    assert Point(y=2, x=1) == (1, 2) and isinstance(p, tuple) and Point.__match_args__ == ("x", "y")
    with pytest.raises(ValueError, match=r"Got unexpected field names: \['z'\]"):
        p._replace(z=1)
    with pytest.raises(TypeError, match="Expected 2 arguments, got 3"):
        Point._make([1, 2, 3])


def test_records_of_every_size_have_their_own_argument_names():
    """__new__'s code is compiled once per number of fields and renamed: records of one size keep
    their own names, a record without fields is the empty tuple."""
    @record
    class Empty:
        pass

    @record
    class One:
        a: str

    @record
    class Other:
        b: int
        c: int = 2
    assert Empty() == () and repr(Empty()) == "Empty()" and One(a="s").a == "s" and repr(One("s")) == "One(a='s')"
    assert Other(c=3, b=1) == (1, 3) and Other(4).c == 2
    with pytest.raises(TypeError, match="unexpected keyword argument 'a'"):
        Other(a=1)


def test_a_field_named_with_an_underscore_or_twice_is_refused():
    with pytest.raises(TypeError, match=r"record Bad: field names must be unique and not start with '_'"):
        @record
        class Bad:
            _a: int


def test_a_field_without_default_after_one_with_a_default_is_refused():
    with pytest.raises(TypeError, match="record Bad: a field without a default follows one with a default"):
        @record
        class Bad:
            a: int = 0
            b: int


def test_records_are_maps_in_json_and_inspect():
    arg = Arg(1, 64, "float32", (2, 3))
    assert jsonable({"args": [arg, None]}) == {"args": [{"allocation": 1, "offset": 64, "dtype": "float32",
                                                         "shape": [2, 3]}, None]}
    assert Step("node", 2).index == 2  # a field named as a tuple method still reads as the field


def test_a_model_replace_copies_with_changes_and_refuses_unknown_fields():
    m = GeModel("m", [TensorDesc("x", "float32", (1,), 3)], [], [Allocation(0, "WEIGHT", 0)], [], [], [])
    m2 = m.replace(name="n", opset=13)
    assert (m.name, m.opset, m2.name, m2.opset) == ("m", 17, "n", 13) and m2.inputs is m.inputs and m.attrs == {}
    with pytest.raises(TypeError, match="GeModel has no field 'nmae'"):
        m.replace(nmae="x")


def test_a_device_buffer_is_one_value_not_a_tuple_of_inputs():
    device = get_device("cpu")
    buf = device.buffer(16)
    try:
        assert not isinstance(buf, tuple) and buf == type(buf)(device, buf.addr, 16) and len({buf, buf}) == 1
        assert buf.view(np.float32, (4,)).shape == (4,) and "nbytes=16" in repr(buf)
    finally:
        device.free(buf.addr)
