"""How setup.py compiles the native kernels (core/kernels/native_build.py): an object's cache key
changes with anything that changes the object and nothing else, the cache hands back what it was
given, and the line said before compiling names the levels, the work left and a rough time."""
import os

import pytest

from ge.core.kernels.native_build import ObjectCache, build_message, object_key

SOURCE, HEADERS = b"int f(void) { return 1; }\n", [b"#define A 1\n", b"#define B 2\n"]
COMMAND = ["gcc", "-O3", "-DGE_LEVEL=v3", "-march=x86-64-v3", "-I/usr/include/python3.11"]
VERSION = "gcc (Debian 12.2.0-14) 12.2.0\n"


def test_the_key_is_stable():
    assert object_key(SOURCE, HEADERS, COMMAND, VERSION) == object_key(SOURCE, list(HEADERS), list(COMMAND), VERSION)


@pytest.mark.parametrize("change", ["source", "header", "flag", "level", "compiler", "version", "boundary"])
def test_the_key_changes_with_what_makes_the_object(change):
    source, headers, command, version = SOURCE, list(HEADERS), list(COMMAND), VERSION
    if change == "source":
        source = source.replace(b"1", b"2")
    elif change == "header":
        headers[1] = b"#define B 3\n"
    elif change == "flag":
        command[1] = "-O2"
    elif change == "level":
        command[2:4] = ["-DGE_LEVEL=v4", "-march=x86-64-v4"]
    elif change == "compiler":
        command[0] = "clang"
    elif change == "version":
        version = "gcc (Debian 13.1.0-1) 13.1.0\n"
    else:  # the same bytes split otherwise between two parts
        source, headers = SOURCE + HEADERS[0], [b"", HEADERS[1]]
    assert object_key(source, headers, command, version) != object_key(SOURCE, HEADERS, COMMAND, VERSION)


def test_the_cache_gives_back_what_it_kept(tmp_path):
    cache = ObjectCache(str(tmp_path / "cache"))
    key = object_key(SOURCE, HEADERS, COMMAND, VERSION)
    dest = tmp_path / "build" / "v3" / "f.o"
    assert not cache.has(key) and not cache.get(key, str(dest)) and not dest.exists()
    made = tmp_path / "f.o"
    made.write_bytes(b"\x7fELF object")
    cache.put(key, str(made))
    assert cache.has(key) and cache.get(key, str(dest)) and dest.read_bytes() == b"\x7fELF object"
    assert os.listdir(tmp_path / "cache") == [key + ".o"]  # no temporary file left behind


@pytest.mark.parametrize("levels,cached,jobs,want", [
    (["v2", "v3"], 0, 2, "v2 v3: 34 C compiler runs on 2 cores, under a minute"),
    (["v2", "v3", "v4", "v4vnni"], 0, 2, "v2 v3 v4 v4vnni: 68 C compiler runs on 2 cores, about 1 minute"),
    (["v2", "v3", "v4", "v4vnni"], 0, 1, "v2 v3 v4 v4vnni: 68 C compiler runs on 1 core, about 2 minutes"),
    (["v2", "v3", "v4", "v4vnni"], 17, 2,
     "v2 v3 v4 v4vnni: 51 C compiler runs on 2 cores (17 objects reused from an earlier build), about 1 minute"),
    (["armv8"], 17, 4, "armv8: nothing to compile (17 objects reused from an earlier build), linking only"),
])
def test_the_line_said_before_compiling(levels, cached, jobs, want):
    assert build_message(levels, 17, cached, jobs) == "ge: compiling the native kernels for " + want
