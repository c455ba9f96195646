"""The static model's records as data: every msgpack map of the header, MODEL_DEF and TASK_INFO,
each field with its type and range. `decode(RECORD, value, path)` checks a whole record (and the
records inside it) in one step and returns its fields as a `Decoded` namespace; any failure is a
`Bad` naming the field's path, e.g. `TASK_INFO.tasks[12].workspace must be an integer in [0, ...]`.

The reader (reader.py) then checks only what types cannot say: the cross-references between
records (allocation ids, offsets and sizes inside their allocation, names, the sizes the header
and MODEL_DEF repeat). docs/om-format.md is the prose version of these tables.
"""
from __future__ import annotations

from itertools import chain, islice, repeat
from operator import itemgetter

from ge.core.model.ge_model import ALLOCATION_KINDS, WEIGHT_ID, Allocation, Arg, TensorDesc, TensorPlan, WeightDesc

from .decode import Bad, attr_map, clip, plain, show, tname
from .schema import (BODY_CHECKSUM_SIZE, CHECKSUM_SIZE, DTYPES, known_dtype, MAX_ALLOCATION_SIZE, MAX_ARRAY_LEN, MAX_DIM, MAX_INT,
                     MAX_MODELS, MAX_OPSET, MAX_PARTITIONS, MAX_RANK, MAX_TOTAL_SIZE, SMALL_DTYPES)

_MISSING = object()
_NUMPY_DTYPES = frozenset(DTYPES) - frozenset(SMALL_DTYPES)


class Decoded(dict):
    """A decoded record: its fields by name (also as attributes)."""
    __getattr__ = dict.__getitem__


# ---------------------------------------------------------------- field types


class Invalid(Exception):
    """A value that is not of its field's type: `message` follows the field's path, which the
    records around it build on the way out (no path is formatted while values are valid)."""

    def __init__(self, message: str):
        self.message, self.path = message, []

    def at(self, step: str) -> "Invalid":
        self.path.append(step)
        return self


class Field:
    """One field's type: `check(v)` returns the value to keep or raises Invalid. `default`: the
    value of an absent field (a field added by a later minor version); without it, absent is Bad.

    What a Record's fast path needs (see Record): `kind`, the one Python type a valid value has
    (None: the field has no fast path, nor its records), and what is left to check once the value is
    of that type: `names`, the values it may take (a set; None: any), and `post`, None (nothing more)
    or a function returning the value to keep, as `check`."""
    default = _MISSING
    kind: type | None = None
    names: frozenset | None = None
    post = None

    def since(self, default) -> "Field":
        self.default = default
        return self

    def check_list(self, v: list, nullable: bool) -> list:
        """Every entry of list `v` checked (None kept where `nullable`); raises Invalid without the
        entry's index (List finds it again, on the way to the message)."""
        check = self.check
        if nullable:
            return [None if x is None else check(x) for x in v]
        return [check(x) for x in v]


class Int(Field):
    kind = int  # (a Record's fast path checks its Ints' ranges, a few at a time)

    def __init__(self, lo: int = 0, hi: int = MAX_INT):
        self.lo, self.hi = lo, hi

    def check(self, v):
        if type(v) is not int or not self.lo <= v <= self.hi:
            raise Invalid(f" must be an integer in [{self.lo}, {self.hi}], got {show(v)}")
        return v

    def check_list(self, v: list, nullable: bool) -> list:
        """A list of ints as a whole: one pass each for the types, the least and the greatest (the
        dataflow plan's one offset per task argument), entry by entry only to find a bad one."""
        if nullable or (v and (set(map(type, v)) != _INT_ONLY or min(v) < self.lo or max(v) > self.hi)):
            return super().check_list(v, nullable)
        return v


class Str(Field):
    kind = str

    def __init__(self, choices: tuple | None = None):
        self.choices = choices
        if choices is not None:
            self.names = frozenset(choices)

    def check(self, v):
        if type(v) is not str:
            raise Invalid(f" must be a string, got {show(v)}")
        if self.choices is not None and v not in self.choices:
            raise Invalid(f" '{clip(v)}' is not one of {', '.join(self.choices)}")
        return v


class Bool(Field):
    kind = bool

    def check(self, v):
        if type(v) is not bool:
            raise Invalid(f" must be a bool, got {show(v)}")
        return v


class Digest(Field):
    kind = bytes

    def __init__(self, size: int = CHECKSUM_SIZE):
        self.size = size
        self.post = self.check

    def check(self, v):
        if type(v) is not bytes or len(v) != self.size:
            raise Invalid(f" must be {self.size} bytes, got {show(v) if type(v) is not bytes else len(v)}")
        return v


class Sha256Hex(Field):
    """64 lowercase hex digits, or "" (an inline weight has none)."""
    kind = str

    def __init__(self):
        self.post = self.check

    def check(self, v):
        if type(v) is not str or (v and (len(v) != 64 or v.strip(_HEX))):
            raise Invalid(f" '{clip(v)}' is not 64 lowercase hex digits")
        return v

    def check_list(self, v: list, nullable: bool) -> list:
        if not nullable and set(map(type, v)) <= _STR_ONLY and set(map(len, v)) <= {0, 64} and not "".join(v).strip(_HEX):
            return v
        return super().check_list(v, nullable)


class DType(Field):
    kind = str
    names = _NUMPY_DTYPES  # (ml_dtypes' names take check_each, where known_dtype imports ml_dtypes)

    def check(self, v):
        if not known_dtype(v):
            raise Invalid(f": dtype {show(v)} is not one of {', '.join(DTYPES)}")
        return v


class Shape(Field):
    kind = list

    def __init__(self):
        self.post = self.check

    def check(self, v):
        if type(v) is list and len(v) <= MAX_RANK and (not v or (set(map(type, v)) == _INT_ONLY and min(v) >= 0
                                                                 and max(v) <= MAX_DIM)):
            return tuple(v)  # (the common case, in a few C calls; the checks below say what is wrong)
        if type(v) is not list:
            raise Invalid(f" must be a list, got {show(v)}")
        if len(v) > MAX_RANK:
            raise Invalid(f" has {len(v)} entries, more than the limit {MAX_RANK}")
        for d in v:
            if type(d) is not int or not 0 <= d <= MAX_DIM:
                raise Invalid(f": shape {show(v)} must be non-negative integers")
        return tuple(v)

    def check_list(self, v: list, nullable: bool) -> list:
        """Shapes as a whole: their ranks, then all their dims at once."""
        if not nullable and set(map(type, v)) <= _LIST_ONLY and (not v or max(map(len, v)) <= MAX_RANK):
            dims = list(chain.from_iterable(v))
            if not dims or (set(map(type, dims)) == _INT_ONLY and min(dims) >= 0 and max(dims) <= MAX_DIM):
                return list(map(tuple, v))
        return super().check_list(v, nullable)


class Attrs(Field):
    """A str-keyed map of attribute values (decode.py: tagged ndarrays and dtypes decoded)."""
    kind = dict

    def __init__(self):
        self.post = self.check

    def check(self, v):
        try:
            return attr_map(v, "", 0)
        except Bad as e:  # its message goes on from the path inside the map: "['key']: ...", " must be ..."
            raise Invalid(str(e)) from None

    def check_list(self, v: list, nullable: bool) -> list:
        """Maps that need no decoding (every task's attributes, most often), seen at once, as they are."""
        if (not nullable and set(map(type, v)) <= _DICT_ONLY and set(map(type, chain.from_iterable(v))) <= _STR_ONLY
                and plain(list(chain.from_iterable(map(dict.values, v))), 1)):
            return v
        return super().check_list(v, nullable)


class Num(Field):
    """A float, or an int where a float is meant (a bool is neither)."""
    kind = float  # (an int takes the Record's slow path, which accepts it)

    def check(self, v):
        if type(v) not in (int, float):
            raise Invalid(f" must be a number, got {show(v)}")
        return v


class AttrsWith(Attrs):
    """An attribute map some of whose keys ge itself reads: those, when present, of these types."""

    check_list = Field.check_list  # (each map's known keys checked)

    def __init__(self, **known: Field):
        super().__init__()
        self.known = tuple(known.items())

    def check(self, v):
        out = super().check(v)
        for key, spec in self.known:
            if key in out:
                try:
                    spec.check(out[key])
                except Invalid as e:
                    raise e.at(f"['{key}']")
        return out


class List(Field):
    """A list of at most `max_len` entries, each of type `item` (None: unchecked here)."""

    kind = list

    def __init__(self, item: Field | None, max_len: int = MAX_ARRAY_LEN, nullable: bool = False):
        self.item, self.max_len, self.nullable = item, max_len, nullable
        self.post = self.check

    def check(self, v):
        if type(v) is not list:
            raise Invalid(f" must be a list, got {show(v)}")
        if len(v) > self.max_len:
            raise Invalid(f" has {len(v)} entries, more than the limit {self.max_len}")
        if self.item is None:
            return v
        try:
            return self.item.check_list(v, self.nullable)
        except Invalid:  # the entries again, one by one, to say which
            pass
        check, nullable, out = self.item.check, self.nullable, []
        for j, x in enumerate(v):
            try:
                out.append(None if x is None and nullable else check(x))
            except Invalid as e:
                raise e.at(f"[{j}]")
        return out


    def check_list(self, v: list, nullable: bool) -> list:
        """Lists as a whole (each task's inputs, say): their entries checked as one list, then split."""
        if nullable or self.item is None or not set(map(type, v)) <= _LIST_ONLY or (v and max(map(len, v)) > self.max_len):
            return super().check_list(v, nullable)
        entries = iter(self.item.check_list(list(chain.from_iterable(v)), self.nullable))
        return [list(islice(entries, n)) for n in map(len, v)]


class Deferred(Field):
    """A field whose type is made on first use: one that imports a module only the models that have the
    field need (AIPP's configuration)."""

    def __init__(self, make):
        self.make, self.field = make, None

    def check(self, v):
        if self.field is None:
            self.field = self.make()
        return self.field.check(v)


class Record(Field):
    """A msgpack map with these fields (unknown keys, from a newer minor version, are ignored),
    decoded as `into`: Decoded, or a record class (core/model/record.py) whose fields are these, in
    this order (the reader keeps it as it is).

    The fields' checks are compiled once into a fast path that takes a valid map in a few C calls:
    all values fetched at once (itemgetter), their types compared as one tuple, the Ints' ranges by
    groups (min and max), then each field's `post`. Anything it does not take (a field absent, of
    another type, out of range, failing its post) goes to `check_each`, the fields one by one in
    order, which is the one that decides: it returns the value or raises the message naming the field.
    """
    kind = dict

    def __init__(self, into: type = Decoded, /, **fields: Field):
        self.fields, self.keys, self.into = tuple(fields.items()), tuple(fields), into
        if into is not Decoded and into._fields != tuple(fields):
            raise TypeError(f"Record into {into.__name__}: fields {tuple(fields)} are not {into._fields}")
        self.post = self.check
        keys, specs = tuple(fields), tuple(fields.values())
        self.kinds = tuple(spec.kind for spec in specs)
        self.pick = None if None in self.kinds else _getter(keys)  # None: every map takes check_each
        ranges = {}
        for k, spec in enumerate(specs):
            if type(spec) is Int:
                ranges.setdefault((spec.lo, spec.hi), []).append(k)
        self.ranges = tuple((_getter(ks), lo, hi) for (lo, hi), ks in ranges.items())
        self.named = tuple((k, spec.names) for k, spec in enumerate(specs) if spec.names is not None)
        self.posted = tuple((k, spec) for k, spec in enumerate(specs) if spec.post is not None)

    def check(self, v):
        if type(v) is not dict or self.pick is None:
            return self.check_each(v)
        try:
            vals = self.pick(v)
        except KeyError:  # an absent field: its default or its message
            return self.check_each(v)
        if tuple(map(type, vals)) != self.kinds:
            return self.check_each(v)
        for pick, lo, hi in self.ranges:
            ints = pick(vals)
            if min(ints) < lo or max(ints) > hi:
                return self.check_each(v)
        for k, names in self.named:
            if vals[k] not in names:
                return self.check_each(v)
        if self.posted:
            vals = list(vals)
            try:
                for k, spec in self.posted:
                    vals[k] = spec.post(vals[k])
            except Invalid:
                return self.check_each(v)
        if self.into is Decoded:
            return Decoded(zip(self.keys, vals))
        return tuple.__new__(self.into, vals)  # (the record's own __new__ is a Python function: the same tuple)

    def check_list(self, v: list, nullable: bool) -> list:
        """Records as columns: the check above, each step once for all of them (a field's values by
        its own check_list). Anything it does not take goes record by record (check, then check_each)."""
        if nullable and None in v:  # the others as a list, the Nones put back
            checked = iter(self.check_list([x for x in v if x is not None], False))
            return [None if x is None else next(checked) for x in v]
        if not v or self.pick is None or set(map(type, v)) != _DICT_ONLY:
            return super().check_list(v, False)
        try:
            cols = list(zip(*map(self.pick, v)))
        except KeyError:  # an absent field: its default or its message
            return super().check_list(v, False)
        for k, kind in enumerate(self.kinds):
            if set(map(type, cols[k])) != {kind}:
                return super().check_list(v, False)
        for pick, lo, hi in self.ranges:
            ints = list(chain.from_iterable(pick(cols)))
            if min(ints) < lo or max(ints) > hi:
                return super().check_list(v, False)
        for k, names in self.named:
            if not names.issuperset(cols[k]):
                return super().check_list(v, False)
        for k, spec in self.posted:
            cols[k] = spec.check_list(list(cols[k]), False)
        if self.into is Decoded:
            return list(map(Decoded, map(zip, repeat(self.keys), zip(*cols))))
        return list(map(tuple.__new__, repeat(self.into), zip(*cols)))

    def check_each(self, v):
        if type(v) is not dict:
            raise Invalid(f" must be a map, got {tname(v)}")
        out = Decoded()
        for key, spec in self.fields:
            x = v.get(key, _MISSING)
            if x is _MISSING:
                if spec.default is _MISSING:
                    raise Invalid(f" has no '{key}'")
                out[key] = spec.default
                continue
            try:
                out[key] = spec.check(x)
            except Invalid as e:
                raise e.at(f".{key}")
        return out if self.into is Decoded else tuple.__new__(self.into, out.values())


_INT_ONLY, _STR_ONLY, _LIST_ONLY, _DICT_ONLY = {int}, {str}, {list}, {dict}
_HEX = "0123456789abcdef"


def _getter(keys: tuple):
    """itemgetter(*keys), which returns a tuple for one key too."""
    if len(keys) == 1:
        return lambda m, key=keys[0]: (m[key],)
    return itemgetter(*keys)


def decode(record: Record, value, path: str) -> Decoded:
    """`value` checked as `record`; Bad naming the field's path (`path` + the steps inside)."""
    try:
        return record.check(value)
    except Invalid as e:
        raise Bad(path + "".join(reversed(e.path)) + e.message) from None


# ---------------------------------------------------------------- the records

PARTITION = Record(type=Int(), submodel=Int(), offset=Int(hi=MAX_TOTAL_SIZE), size=Int(hi=MAX_TOTAL_SIZE))

HEADER = Record(  # after header_version, which decides whether the rest can be read at all
    checksum=Digest(),
    body_checksum=Digest(BODY_CHECKSUM_SIZE).since(None),  # format 1.9: required from 1.9 on (reader.py)
    length=Int(hi=MAX_TOTAL_SIZE),
    is_encrypt=Int(hi=255),
    is_checksum=Int(hi=1),
    model_type=Int(hi=255),
    gen_mode=Int(hi=1),
    name=Str(),
    ops=Int(),
    om_ir_version=Int(),
    model_num=Int(lo=1, hi=MAX_MODELS),
    platform_version=Str(),
    platform_type=Int(hi=255),
    has_unknown_shape=Bool(),
    atc_cmdline=Str(),
    partitions=List(PARTITION, MAX_PARTITIONS),
    header_checksum=Digest(),
)

ALLOCATION = Record(
    Allocation,
    id=Int(),  # == its position
    kind=Str(ALLOCATION_KINDS),
    size=Int(hi=MAX_ALLOCATION_SIZE),
    io_index=Int(lo=-1),  # which model input / output (INPUT, OUTPUT), else -1
    file=Str().since(""),  # format 1.1: the weight file of a FILE_CONSTANT allocation
)

TENSOR_DESC = Record(TensorDesc, name=Str(), dtype=DType(), shape=Shape(), allocation=Int())  # a model input / output

TENSOR_PLAN = Record(TensorPlan, name=Str(), allocation=Int(), offset=Int(), nbytes=Int(), dtype=DType(), shape=Shape(),
                     first=Int(lo=-1), last=Int(lo=-1), alias_of=Str())

WEIGHT = Record(WeightDesc, name=Str(), dtype=DType(), shape=Shape(), offset=Int(), nbytes=Int(), file=Str(),
                file_offset=Int(), sha256=Sha256Hex(),
                allocation=Int().since(WEIGHT_ID))  # format 1.1: FILE_CONSTANT allocations

def _aipp_record() -> Record:
    """One input's AIPP as `ge inspect` shows it: the input, raw and model shapes, and every setting
    of the AIPP configuration (formats/aipp_config.py), typed as declared there (a dynamic one's are
    the defaults; its parameters come at run time through `params_input`)."""
    import dataclasses

    from ..aipp_config import AippConfig
    by_type = {"int": Int(lo=-MAX_INT), "bool": Bool(), "str": Str(), "float": Num(), "list": List(None)}
    settings = {f.name: by_type[f.type] for f in dataclasses.fields(AippConfig)
                if f.name not in ("source", "aipp_mode", "given", "max_src_image_size")}
    return Record(input=Str(), raw_dtype=Str(), raw_shape=Shape(), model_shape=Shape(), mode=Str().since("static"),
                  params_input=Str().since(""), max_src_image_size=Int().since(0), **settings)


MODEL_ATTRS = AttrsWith(  # the model attributes ge reads back (ge inspect, atc --mode=1/6)
    lower_bound=Int(),  # the feature maps' lower bound
    stream_num=Int(lo=1),
    event_num=Int(),
    external_weight=Int(hi=2),  # ATC's --external_weight mode
    aipp=Deferred(lambda: List(_aipp_record())),  # static AIPP steps, one per preprocessed input
    atc_options=Attrs(),  # the ATC options given and what ge made of them (core/atc/conversion_settings.py)
)

ROOT_ATTRS = AttrsWith(  # a dynamic OM's root model: the attributes ge reads back besides root_check's
    atc_options=Attrs(),
)

MODEL_DEF = Record(
    name=Str(),
    soc_version=Str(),
    opset=Int(lo=1, hi=MAX_OPSET),
    memory_size=Int(),  # FEATURE_MAP + WORKSPACE sizes
    weight_size=Int(),  # WEIGHT size
    workspace_size=Int(),  # WORKSPACE size
    zero_copy_memory_size=Int(),  # INPUT + OUTPUT sizes
    stream_num=Int(lo=1),
    event_num=Int(),
    allocations=List(ALLOCATION),
    inputs=List(TENSOR_DESC),
    outputs=List(TENSOR_DESC),
    tensors=List(TENSOR_PLAN),
    weights=List(WEIGHT),
    attrs=MODEL_ATTRS,
)

ARG = Record(Arg, allocation=Int(), offset=Int(), dtype=DType(), shape=Shape())

TASK = Record(
    node=Str(),
    op_type=Str(),
    domain=Str(),
    opset=Int(lo=1, hi=MAX_OPSET),
    attrs=Attrs(),
    inputs=List(ARG, nullable=True),  # None: an absent optional input
    outputs=List(ARG, nullable=True),  # format 1.3: None, an omitted optional output
    workspace=Int(),  # scratch bytes at offset 0 of WORKSPACE
)

DATAFLOW = Record(  # format 1.4: the dataflow executors' memory plan
    deps=List(List(Int())),  # per task: the earlier tasks it waits for
    fm_offsets=List(Int(lo=-1)),  # per task argument: its feature-map offset, -1 where it stays
    fm_size=Int(hi=MAX_ALLOCATION_SIZE),
    lower_bound=Int(hi=MAX_ALLOCATION_SIZE),
)

TASK_INFO = Record(tasks=List(TASK), dataflow=DATAFLOW.since(None))
