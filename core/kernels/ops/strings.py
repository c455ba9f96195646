"""String tensors: arrays of Python str (numpy dtype object), held by the hybrid executor on the
host; they have no static layout. The string ops (StringConcat, StringSplit, StringNormalizer,
RegexFullMatch) and the string variants of Equal, Cast, CastLike, Shape, Size and of the ops that
move elements (Reshape, Transpose, Gather, Concat, ...: MovedStrings) are registered with
`strings=True`: the executor takes them for a node whose inputs or outputs are strings.
"""
from __future__ import annotations

import re

import numpy as np

from ...model.ir import DTYPES, STRING, Meta
from ..base import HostKernel
from ..registry import lookup, register
from ..values import text

class StringKernel(HostKernel):
    takes_strings = True
    no_layout = "string tensors have no static layout"

    def strings(self, x, what: str = "input 0") -> np.ndarray:
        """x as an object array of str (a numpy unicode array is converted)."""
        a = np.asarray(x)
        if a.dtype.kind == "U":
            return a.astype(object)
        if a.dtype != STRING or not all(type(s) is str for s in a.flat):
            raise self.fail(f"{what} must be a string tensor, got {a.dtype}")
        return a


def _objects(a) -> np.ndarray:
    """A result as an object array (numpy gives a bare str for 0-d operands)."""
    out = np.empty(np.shape(a), STRING)
    out[...] = a
    return out


@register("StringConcat", since=20)
class StringConcat(StringKernel):
    def compute(self, x, y):
        x, y = self.strings(x, "input X"), self.strings(y, "input Y")
        try:
            return [_objects(np.add(x, y, dtype=STRING))]
        except ValueError:
            raise self.fail(f"shapes {list(x.shape)} and {list(y.shape)} do not broadcast") from None


@register("StringSplit", since=20)
class StringSplit(StringKernel):
    """Y: the substrings, padded with "" to the most any element has; Z: each element's count.
    No delimiter (or ""): split on runs of whitespace, as Python's str.split() does."""

    def prepare(self):
        self.delimiter = text(self.attr("delimiter", "")) or None
        self.maxsplit = self.attr("maxsplit")
        if self.maxsplit is not None and int(self.maxsplit) < 0:
            raise self.fail(f"maxsplit {self.maxsplit} must be non-negative")
        self.maxsplit = -1 if self.maxsplit is None else int(self.maxsplit)

    def compute(self, x):
        x = self.strings(x, "input X")
        parts = [s.split(self.delimiter, self.maxsplit) for s in x.flat]
        width = max(map(len, parts), default=0)
        y = np.full((len(parts), width), "", STRING)
        for row, p in zip(y, parts):
            row[:len(p)] = p
        z = np.array([len(p) for p in parts], np.int64)
        return [y.reshape(x.shape + (width,)), z.reshape(x.shape)]


#: languages whose case mapping Unicode tailors (SpecialCasing.txt); every other locale upper- and
#: lowercases by the default mapping, which Python's str methods implement
_TAILORED_CASE = ("tr", "az", "lt")
_CASE_ACTIONS = ("NONE", "LOWER", "UPPER")
_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")
_ASCII_UPPER = str.maketrans("abcdefghijklmnopqrstuvwxyz", "ABCDEFGHIJKLMNOPQRSTUVWXYZ")


@register("StringNormalizer", since=10)
class StringNormalizer(StringKernel):
    """Drops the elements equal to a stopword (compared lowercased unless is_case_sensitive), then
    changes case. Input [C] or [1, C]; when nothing is left the output is one "" ([1] or [1, 1]).
    Case follows the locale: Unicode's default mapping (en_US and every untailored language), ASCII
    letters only in the C/POSIX locale; the tailored ones (Turkish, Azeri, Lithuanian) are refused."""

    def prepare(self):
        self.action = text(self.attr("case_change_action", "NONE"))
        if self.action not in _CASE_ACTIONS:
            raise self.fail(f"case_change_action '{self.action}' must be one of {', '.join(_CASE_ACTIONS)}")
        self.sensitive = bool(int(self.attr("is_case_sensitive", 0)))
        locale = text(self.attr("locale", ""))
        language = re.split(r"[_\-.@]", locale, maxsplit=1)[0].lower()
        if language in _TAILORED_CASE:
            raise self.fail(f"locale '{locale}': its case mapping is tailored (Unicode SpecialCasing); ge "
                            f"upper- and lowercases by Unicode's default mapping only")
        if language in ("c", "posix"):  # the C locale changes the case of ASCII letters only
            self.lower = lambda s: s.translate(_ASCII_LOWER)
            self.upper = lambda s: s.translate(_ASCII_UPPER)
        else:
            self.lower, self.upper = str.lower, str.upper
        stops = [text(s) for s in self.attr("stopwords", None) or []]
        self.stops = set(stops) if self.sensitive else {self.lower(s) for s in stops}

    def compute(self, x):
        x = self.strings(x, "input X")
        if x.ndim not in (1, 2) or (x.ndim == 2 and x.shape[0] != 1):
            raise self.fail(f"input X has shape {list(x.shape)}; [C] or [1, C] expected")
        kept = [s for s in x.flat if (s if self.sensitive else self.lower(s)) not in self.stops]
        if self.action == "LOWER":
            kept = [self.lower(s) for s in kept]
        elif self.action == "UPPER":
            kept = [self.upper(s) for s in kept]
        y = _objects(kept or [""])
        return [y if x.ndim == 1 else y.reshape(1, -1)]


@register("RegexFullMatch", since=20)
class RegexFullMatch(StringKernel):
    """Whether each element matches `pattern` (RE2 syntax) as a whole. Python's re runs it after a
    translation that makes its meaning RE2's (re2_to_python); a pattern whose meaning would differ
    is refused."""

    def prepare(self):
        pattern = self.attr("pattern")
        if pattern is None:
            raise self.fail("attribute 'pattern' is required")
        pattern = text(pattern)
        try:
            self.regex = re.compile(re2_to_python(pattern))
        except (re.error, ValueError) as e:
            raise self.fail(f"pattern {pattern!r}: {e}") from None

    def compute(self, x):
        x = self.strings(x, "input X")
        return [np.array([self.regex.fullmatch(s) is not None for s in x.flat], bool).reshape(x.shape)]


# RE2's Perl classes are ASCII-only; Python's match Unicode (and its \s has \v, RE2's has not)
_CLASSES = {"d": "0-9", "w": "0-9A-Za-z_", "s": "\\t\\n\\f\\r "}
_WORD = "[0-9A-Za-z_]"
_BOUNDARY = f"(?:(?<={_WORD})(?!{_WORD})|(?<!{_WORD})(?={_WORD}))"
#: letter escapes both engines read alike (\A, the control characters); punctuation is literal in both
_SAME_ESCAPES = set("Aaftnrv")


def re2_to_python(p: str) -> str:
    """An RE2 pattern as a Python pattern of the same meaning, or ValueError naming what RE2 reads
    otherwise (or refuses): \\d \\w \\s and \\b are ASCII in RE2; `$` outside multi-line mode is
    the end of the text only; RE2 has no lookaround, backreferences, possessive or atomic groups,
    and Python lacks \\p, \\Q..\\E, \\C, \\z, POSIX classes and the U flag."""
    out, i, in_class, multiline = [], 0, False, False
    while i < len(p):
        c = p[i]
        if c == "\\":
            if i + 1 >= len(p):
                raise ValueError("a trailing backslash")
            e = p[i + 1]
            i += 2
            if e in _CLASSES or e.lower() in _CLASSES:
                cls = _CLASSES[e.lower()]
                if in_class and e.isupper():
                    raise ValueError(f"\\{e} inside a character class")
                out.append(cls if in_class else f"[{'^' if e.isupper() else ''}{cls}]")
            elif e in "bB" and not in_class:
                out.append(_BOUNDARY if e == "b" else f"(?!{_BOUNDARY})")
            elif e == "x" and p[i:i + 1] != "{":
                out.append("\\x")
            elif e in _SAME_ESCAPES or (e.isascii() and not e.isalnum()):
                out.append("\\" + e)
            else:
                raise ValueError(f"the escape \\{e} means something else (or nothing) in one of RE2 and Python")
            continue
        if in_class:
            if c == "[" and p[i + 1:i + 2] in (":", ".", "="):
                raise ValueError("POSIX classes ([[:alpha:]]) are not Python syntax")
            in_class = c != "]"
            out.append(c)
            i += 1
            continue
        if c == "[":
            in_class = True
            out.append("[^" if p[i + 1:i + 2] == "^" else "[")
            i += 2 if p[i + 1:i + 2] == "^" else 1
            if p[i:i + 1] == "]":  # a leading ] is a literal in both
                out.append("\\]")
                i += 1
            continue
        if c == "(" and p[i + 1:i + 2] == "?":
            m = re.match(r"\(\?([a-zA-Z]*)(-[a-zA-Z]*)?([:)])", p[i:])
            if not m and not p.startswith("(?P<", i):
                raise ValueError(f"the group '{p[i:i + 4]}...' (lookaround, backreference, atomic or named the "
                                 f"new way) is not RE2 syntax shared with Python")
            if m:
                flags = (m.group(1) or "") + (m.group(2) or "")[1:]
                if set(flags) - set("ims"):
                    raise ValueError(f"flags '{flags}' (RE2 knows i, m, s, U; Python has no U)")
                if "m" in flags and (i or m.group(2) or m.group(3) != ")"):
                    raise ValueError("the m flag only as (?m) at the start (`$` elsewhere would be read differently)")
                multiline |= "m" in flags
        if c in "*+?}" and p[i + 1:i + 2] == "+":
            raise ValueError("possessive quantifiers are not RE2 syntax")
        if c == "{" and p[i + 1:i + 2] == ",":
            raise ValueError("'{,n}' is a literal in RE2 and a repetition in Python")
        if c == "$" and not multiline:
            out.append("\\Z")
        else:
            out.append(c)
        i += 1
    if in_class:
        raise ValueError("a character class is not closed")
    return "".join(out)


@register("Equal", since=19, strings=True)
class EqualStrings(StringKernel):
    def compute(self, x, y):
        x, y = self.strings(x, "input A"), self.strings(y, "input B")
        try:
            return [np.asarray(np.equal(x, y, dtype=STRING), dtype=bool)]
        except ValueError:
            raise self.fail(f"shapes {list(x.shape)} and {list(y.shape)} do not broadcast") from None


def _to_string(x: np.ndarray) -> np.ndarray:
    """Numbers as the spec writes them: plain shortest round-trip decimals, INF, -INF and NaN."""
    if x.dtype == STRING:
        return x.copy()

    def one(v):
        if x.dtype.kind == "f" or x.dtype.name in ("bfloat16", "float16"):
            f = float(v)
            if f != f:
                return "NaN"
            if f in (float("inf"), float("-inf")):
                return "INF" if f > 0 else "-INF"
            return str(v)
        return str(int(v))
    return _objects(np.array([one(v) for v in x.flat], dtype=STRING).reshape(x.shape))


class _CastStrings(StringKernel):
    """Cast with strings on either side (numbers to and from their decimal text)."""

    def cast(self, x, to: np.dtype):
        x = np.asarray(x)
        if to == STRING:
            return [_to_string(x)]
        x = self.strings(x, "input 0")
        return [np.array([self.number(s, to) for s in x.flat], to).reshape(x.shape)]

    def number(self, s: str, to: np.dtype):
        t = s.strip()
        try:
            if to.kind in "iu":
                try:
                    return int(t)
                except ValueError:
                    return int(float(t))  # "100.5" -> 100, as the spec allows
            value = float(t)  # INF, +INF, -INF, NaN in any case, plain and scientific forms
            return value != 0 if to == np.bool_ else value
        except (ValueError, OverflowError):
            raise self.fail(f"'{s[:40]}' is not a number, cannot cast it to {to}") from None


@register("Cast", since=9, strings=True)
class CastStrings(_CastStrings):
    def prepare(self):
        to = int(self.attr("to", 0))
        if to not in DTYPES:
            raise self.fail(f"'to' {to} is not a type ge supports")
        self.to = DTYPES[to]

    def compute(self, x):
        return self.cast(x, self.to)


@register("CastLike", since=15, strings=True)
class CastLikeStrings(_CastStrings):
    def compute(self, x, like):
        return self.cast(x, np.asarray(like).dtype)


# -- ops that move elements, on strings -------------------------------------------------------------
#: ops whose outputs are their string inputs' elements, moved (the `data`/`X`/`Y` inputs: strings)
MOVES = ("Identity", "Reshape", "Squeeze", "Unsqueeze", "Flatten", "Transpose", "Gather", "GatherElements",
         "GatherND", "Slice", "Expand", "Tile", "Concat", "Split", "Where", "Compress")


class MovedStrings(StringKernel):
    """An op that only moves elements, on string tensors: its numeric kernel (all of its attributes
    and since-version meaning) runs on the elements' indices, and the strings follow them. Each
    string input gets its own range of indices (Concat, Where), the other inputs are as given."""

    def compute(self, *xs):
        pool, ins, base = [], [], 0
        for x in xs:
            a = None if x is None else np.asarray(x)
            if a is not None and (a.dtype == STRING or a.dtype.kind == "U"):
                pool.extend(self.strings(a).reshape(-1).tolist())
                a = np.arange(base, base + a.size, dtype=np.int64).reshape(a.shape)
                base += a.size
            ins.append(a)
        metas = [None if a is None else Meta(a.dtype, a.shape) for a in ins]
        numeric = lookup(self.op_type, "", self.opset, self.name)
        moved = numeric(self.attrs, metas, ins, opset=self.opset, name=self.name, num_outputs=self.num_outputs,
                        backend=self.backend).load().compute(*ins)
        strings = np.array(pool + [""], STRING)  # (an empty pool still indexes)
        return [_objects(strings[np.asarray(y)]) for y in moved]


for _op in MOVES:
    register(_op, since=1, strings=True)(type(f"{_op}Strings", (MovedStrings,), {"__doc__": MovedStrings.__doc__}))


@register("Shape", since=1, strings=True)
class ShapeStrings(StringKernel):
    def compute(self, x):
        start, end = self.attr("start", 0), self.attr("end")
        return [np.array(np.shape(x)[start:end], np.int64)]


@register("Size", since=1, strings=True)
class SizeStrings(StringKernel):
    def compute(self, x):
        return [np.array(np.size(x), np.int64)]
