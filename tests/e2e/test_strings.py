"""String tensors through the dynamic path: models built with onnx.helper, compiled with ge atc, run
on cpu and sim through the Python API (numpy str or object arrays in, object arrays of str out) and
`ge run` (.npy of numpy's str dtype), compared with onnxruntime; the OM keeps string constants and
string attributes, and a mutated one is refused naming the field."""
import msgpack
import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper

from ge.core import api
from ge.core.model.errors import GeError
from ge.core.kernels.ops.strings import re2_to_python
from ge.formats.om import om_bytes, read_om, writer
from ge.formats.om.decode import Bad
from ge.formats.om.root import decode_root, encode_root
from ge.formats.om.root_check import check_root

from .conftest import onnxruntime_outputs, run_om

S, I64, F, B = T.STRING, T.INT64, T.FLOAT, T.BOOL
DEVICES = ["cpu", "sim"]


def vi(name, elem, shape):
    return helper.make_tensor_value_info(name, elem, shape)


def model(nodes, inputs, outputs, opset=20, inits=()):
    g = helper.make_graph(nodes, "strings", inputs, outputs, list(inits))
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset), helper.make_opsetid("ai.onnx.ml", 4)])


def compile_model(m, tmp_path):
    path = str(tmp_path / "m.onnx")
    onnx.save(m, path)
    return path, api.atc(path, str(tmp_path / "m"))


def check(m, feeds_list, tmp_path):
    """ge on both devices against onnxruntime, for each set of feeds (object arrays of str)."""
    path, result = compile_model(m, tmp_path)
    for feeds in feeds_list:
        expected = onnxruntime_outputs(path, feeds)
        for device in DEVICES:
            got = run_om(result.om_path, device, feeds)
            for g, e in zip(got, expected):
                assert g.shape == e.shape and (g.dtype == object) == (e.dtype == object), (g, e)
                if e.dtype == object:
                    assert all(type(s) is str for s in g.flat)
                np.testing.assert_array_equal(g, e)
    return result


def strings(*items):
    return np.array(items, dtype=object)


def test_a_string_pipeline_against_onnxruntime(tmp_path):
    """Normalize, concatenate with a string constant, split, compare and match: every string op
    on one graph, with numeric work after it."""
    suffix = helper.make_tensor("suffix", S, [1], [b" end"])
    nodes = [helper.make_node("StringNormalizer", ["x"], ["norm"], case_change_action="LOWER",
                              stopwords=["THE"], is_case_sensitive=0, locale="C"),
             helper.make_node("StringConcat", ["norm", "suffix"], ["long"]),
             helper.make_node("StringSplit", ["long"], ["parts", "counts"], delimiter=" "),
             helper.make_node("Equal", ["norm", "probe"], ["same"]),
             helper.make_node("RegexFullMatch", ["long"], ["ok"], pattern=r"[a-z]+\s\w+ end"),
             helper.make_node("Cast", ["counts"], ["fcounts"], to=F),
             helper.make_node("Mul", ["fcounts", "fcounts"], ["sq"])]
    m = model(nodes, [vi("x", S, ["n"]), vi("probe", S, [1])],
              [vi("long", S, None), vi("parts", S, None), vi("counts", I64, None), vi("same", B, None),
               vi("ok", B, None), vi("sq", F, None)], inits=[suffix])
    # (onnxruntime here has the C locale only: it lowercases ASCII letters, as ge does for "C")
    feeds = [{"x": strings("Hello World", "the", "CAFÉ au lait", "ONE two"), "probe": strings("one two")},
             {"x": strings("the", "The"), "probe": strings("x")}]  # every element a stopword: one ""
    result = check(m, feeds, tmp_path)
    om = read_om(result.om_path)
    assert list(om.string_constants) == ["suffix"] and om.string_constants["suffix"].tolist() == [" end"]
    assert not om.weights and [d.dtype for d in om.inputs] == ["object", "object"]
    unknown = {c.nodes[0]: c.reason for c in om.clusters if c.kind == "UNKNOWN"}
    assert unknown["StringNormalizer_0"] == "'x' is a string tensor (no static layout)"


def test_numpy_str_arrays_go_in_and_objects_of_str_come_out(tmp_path):
    m = model([helper.make_node("StringConcat", ["x", "x"], ["y"])], [vi("x", S, [2])], [vi("y", S, None)])
    _, result = compile_model(m, tmp_path)
    for device in DEVICES:
        (y,) = run_om(result.om_path, device, {"x": np.array(["ab", "ç"])})  # dtype <U2
        assert y.dtype == object and y.tolist() == ["abab", "çç"]
        (y,) = run_om(result.om_path, device, {"x": strings(b"q", "r")})  # bytes: UTF-8
        assert y.tolist() == ["qq", "rr"]
    with pytest.raises(GeError, match=r"input 'x' is a string tensor: give a numpy str or object array of str, "
                                      r"got float32"):
        run_om(result.om_path, "cpu", {"x": np.zeros(2, np.float32)})
    with pytest.raises(GeError, match=r"input 'x' is a string tensor; element 3 \(int\) is not a str"):
        run_om(result.om_path, "cpu", {"x": strings("a", 3)})
    with pytest.raises(GeError, match=r"input 'x': shape \[3\] does not match the model's \[2\]"):
        run_om(result.om_path, "cpu", {"x": strings("a", "b", "c")})


def test_cast_and_label_encoder_between_strings_and_numbers(tmp_path):
    nodes = [helper.make_node("Cast", ["x"], ["f"], to=F),
             helper.make_node("Cast", ["f"], ["back"], to=S),
             helper.make_node("LabelEncoder", ["back"], ["code"], domain="ai.onnx.ml",
                              keys_strings=["1.5", "INF"], values_int64s=[7, 9], default_int64=-3),
             helper.make_node("LabelEncoder", ["code"], ["name"], domain="ai.onnx.ml",
                              keys_int64s=[7, 9], values_strings=["seven", "nine"], default_string="?")]
    m = model(nodes, [vi("x", S, [5])], [vi("f", F, None), vi("back", S, None), vi("code", I64, None),
                                         vi("name", S, None)])
    _, result = compile_model(m, tmp_path)
    for device in DEVICES:
        f, back, code, name = run_om(result.om_path, device, {"x": strings("1.5", "-inf", "1e3", "NaN", "+INF")})
        np.testing.assert_array_equal(f, np.array([1.5, -np.inf, 1000, np.nan, np.inf], np.float32))
        assert back.tolist() == ["1.5", "-INF", "1000.0", "NaN", "INF"]
        assert code.tolist() == [7, -3, -3, -3, 9] and name.tolist() == ["seven", "?", "?", "?", "nine"]
    with pytest.raises(GeError, match=r"node 'Cast_0' \(Cast\): 'abc' is not a number, cannot cast it to float32"):
        run_om(result.om_path, "cpu", {"x": strings("1", "abc", "2", "3", "4")})


def test_regex_patterns_keep_re2_meaning_or_are_refused(tmp_path):
    """RE2's \\d, \\w, \\s and \\b are ASCII, its `$` the end of the text: translated, they match
    as onnxruntime's RE2 does; syntax only one engine has is refused at compile time, naming the node."""
    x = strings("١٢٣", "123", "a\n", "é_b", "tab\vx", "word end")
    for pattern in [r"\d+", r"\w+", r"a$\n?", r".*\bend", r"[\w\s]+", r"tab\sx", r"(?i)WORD END"]:
        m = model([helper.make_node("RegexFullMatch", ["x"], ["y"], pattern=pattern)], [vi("x", S, [6])],
                  [vi("y", B, None)])
        check(m, [{"x": x}], tmp_path)
    for pattern, why in [(r"(?=a)a", "lookaround"), (r"(a)\1", r"escape \\1"), (r"\pL", r"escape \\p"),
                         (r"[[:alpha:]]", "POSIX"), (r"a{,2}", "literal in RE2")]:
        m = model([helper.make_node("RegexFullMatch", ["x"], ["y"], pattern=pattern, name="match")],
                  [vi("x", S, [6])], [vi("y", B, None)])
        with pytest.raises(GeError, match=rf"node 'match' \(RegexFullMatch\): pattern .*{why}"):
            compile_model(m, tmp_path)
    assert re2_to_python(r"^a\d$") == r"^a[0-9]\Z"


def test_string_normalizer_refuses_tailored_locales_and_ops_without_strings(tmp_path):
    m = model([helper.make_node("StringNormalizer", ["x"], ["y"], case_change_action="UPPER", locale="tr_TR",
                                name="norm")], [vi("x", S, [2])], [vi("y", S, None)])
    with pytest.raises(GeError, match=r"node 'norm' \(StringNormalizer\): locale 'tr_TR': its case mapping is "
                                      r"tailored"):
        compile_model(m, tmp_path)
    m = model([helper.make_node("ReduceMax", ["x"], ["y"], name="t")], [vi("x", S, [2])], [vi("y", S, None)])
    with pytest.raises(GeError, match=r"node 't': op ReduceMax does not take string tensors in ge \(string ops: "
                                      r"Cast, CastLike, Compress, Concat, Equal"):
        compile_model(m, tmp_path)


def test_the_om_keeps_string_constants_and_refuses_mutated_ones(tmp_path):
    words = helper.make_tensor("words", S, [2], [b"a", b"b"])
    nodes = [helper.make_node("Equal", ["x", "words"], ["y"]),
             helper.make_node("LabelEncoder", ["x"], ["z"], domain="ai.onnx.ml",
                              keys_tensor=helper.make_tensor("k", S, [2], [b"a", b"b"]),
                              values_tensor=helper.make_tensor("v", T.INT16, [2], [1, 2]))]
    m = model(nodes, [vi("x", S, [2])], [vi("y", B, None), vi("z", T.INT16, None)], inits=[words])
    result = check(m, [{"x": strings("a", "c")}], tmp_path)
    dyn = read_om(result.om_path)
    assert read_om(om_bytes(dyn)).string_constants["words"].tolist() == ["a", "b"]
    md, ti = encode_root(dyn)
    assert md["string_constants"]["words"]["data"] == ["a", "b"]

    def refused(mutate, message):
        md2, ti2 = msgpack.unpackb(msgpack.packb(md)), msgpack.unpackb(msgpack.packb(ti))
        mutate(md2, ti2)
        with pytest.raises(Bad, match=message):
            check_root(decode_root(md2, ti2, len(dyn.weight_data)))

    def data(md2, ti2):
        md2["string_constants"]["words"]["data"] = ["a", 7]
    refused(data, r"root MODEL_DEF string_constants\['words'\]: string ndarray data must be 2 strings for shape "
                  r"\[2\], got 2 entries \(not all strings\)")

    def shape(md2, ti2):
        md2["string_constants"]["words"]["shape"] = [3]
    refused(shape, r"must be 3 strings for shape \[3\], got 2 entries")

    def numeric(md2, ti2):
        md2["string_constants"]["words"] = 5
    refused(numeric, r"string_constants\['words'\] must be a string ndarray, got 5")

    def dtype(md2, ti2):
        md2["inputs"][0]["dtype"] = "str"
    refused(dtype, r"root MODEL_DEF input 0: dtype 'str' \(string\) is not one of .*, object")

    def attr(md2, ti2):
        node = next(n for n in ti2["nodes"] if n["op_type"] == "LabelEncoder")
        node["attrs"]["keys_tensor"]["data"] = [b"a", b"b"]
    refused(attr, r"node 'LabelEncoder_1' attrs\['keys_tensor'\]: string ndarray data must be 2 strings")

    def missing(md2, ti2):
        del md2["string_constants"]
    refused(missing, r"root TASK_INFO.steps\[0\] \(node 'Equal_0'\) reads 'words', which no earlier step")

    # the whole file, signed again after the edit: loading it is a GeError naming the field
    fields, parts = writer.fields_and_parts(dyn)
    root = msgpack.unpackb(bytes(parts[0][2]), raw=False)
    root["string_constants"]["words"]["data"] = ["a", None]
    parts[0] = (parts[0][0], 0, msgpack.packb(root, use_bin_type=True))
    head, pieces = writer.assemble(fields, parts)
    with pytest.raises(GeError, match=r"root MODEL_DEF string_constants\['words'\]: string ndarray data must be 2 "
                                      r"strings"):
        api.load_from_mem(head + b"".join(bytes(p) for p in pieces), "cpu")


def test_ge_run_reads_and_writes_str_npy(tmp_path):
    from click.testing import CliRunner

    from ge.cli.main import cli
    m = model([helper.make_node("StringSplit", ["x"], ["parts", "n"])], [vi("x", S, [2])],
              [vi("parts", S, None), vi("n", I64, None)])
    _, result = compile_model(m, tmp_path)
    np.save(tmp_path / "x.npy", np.array(["a b", "c"]))
    runner = CliRunner()
    shown = runner.invoke(cli, ["inspect", result.om_path, "--json"])
    assert shown.exit_code == 0 and '"dtype": "string"' in shown.output, shown.output
    out = tmp_path / "out"
    ran = runner.invoke(cli, ["run", "--model", result.om_path, "--input", str(tmp_path / "x.npy"),
                              "--output-dir", str(out), "--outfmt", "NPY"])
    assert ran.exit_code == 0, ran.output
    parts = np.load(out / "m_output_0.npy", allow_pickle=False)
    assert parts.dtype.kind == "U" and parts.tolist() == [["a", "b"], ["c", ""]]
    assert np.load(out / "m_output_1.npy").tolist() == [2, 1]
    ran = runner.invoke(cli, ["run", "--model", result.om_path, "--input", str(tmp_path / "x.npy"),
                              "--output-dir", str(tmp_path / "txt"), "--outfmt", "TXT"])
    assert ran.exit_code == 0 and (tmp_path / "txt" / "m_output_0.txt").read_text() == "a\nb\nc\n\n"
    bin_out = tmp_path / "bin"
    ran = runner.invoke(cli, ["run", "--model", result.om_path, "--input", str(tmp_path / "x.npy"),
                              "--output-dir", str(bin_out), "--outfmt", "BIN"])
    assert ran.exit_code == 1 and "output 0 is a string tensor, which has no binary layout" in ran.output
    assert not list(bin_out.glob("*"))
    np.save(tmp_path / "pickled.npy", strings("a b", "c"), allow_pickle=True)  # as onnx holds strings: never unpickled
    ran = runner.invoke(cli, ["run", "--model", result.om_path, "--input", str(tmp_path / "pickled.npy"),
                              "--output-dir", str(tmp_path / "from_objects"), "--outfmt", "NPY"])
    assert ran.exit_code == 1 and "pickled.npy" in ran.output and "holds pickled Python objects, which ge never " \
        "loads; save strings as numpy's str dtype" in " ".join(ran.output.split()), ran.output
    assert not (tmp_path / "from_objects").exists()


def test_tfidf_counts_string_tokens(tmp_path):
    node = helper.make_node("TfIdfVectorizer", ["x"], ["y"], mode="TFIDF", min_gram_length=1, max_gram_length=2,
                            max_skip_count=1, pool_strings=["a", "b", "c", "a", "b", "b", "c"],
                            ngram_counts=[0, 3], ngram_indexes=[0, 1, 2, 3, 4], weights=[1.0, 2.0, 3.0, 4.0, 5.0])
    m = model([node], [vi("x", S, [2, 5])], [vi("y", F, None)], opset=17)
    check(m, [{"x": np.array([["a", "b", "c", "a", "z"], ["b", "c", "c", "a", "b"]], object)}], tmp_path)


def test_gears_refuse_strings_with_a_message(tmp_path):
    m = model([helper.make_node("Cast", ["x"], ["s"], to=S), helper.make_node("Cast", ["s"], ["y"], to=F)],
              [vi("x", F, ["b", 2])], [vi("y", F, None)])
    path = str(tmp_path / "m.onnx")
    onnx.save(m, path)
    with pytest.raises(GeError, match=r"'s' is a string tensor: sequences, optionals and strings run in the hybrid "
                                      r"executor, not in gears"):
        api.atc(path, str(tmp_path / "m"), input_shape="x:-1,2", dynamic_batch_size="1,2")
    assert not list(tmp_path.glob("*.om"))


def test_ops_that_move_elements_take_strings(tmp_path):
    """Reshape, Transpose, Gather, Concat, Slice, Where, Unsqueeze, Expand, Split, Tile, Shape and Size on
    strings (the numeric kernels' semantics on the elements' indices) against onnxruntime."""
    inits = [helper.make_tensor("shape", I64, [2], [3, 2]), helper.make_tensor("idx", I64, [2], [2, 0]),
             helper.make_tensor("starts", I64, [1], [1]), helper.make_tensor("ends", I64, [1], [3]),
             helper.make_tensor("axes", I64, [1], [0]), helper.make_tensor("big", I64, [3], [2, 4, 5]),
             helper.make_tensor("reps", I64, [2], [1, 2]), helper.make_tensor("fill", S, [], [b"-"])]
    nodes = [helper.make_node("Reshape", ["x", "shape"], ["r"]),
             helper.make_node("Transpose", ["r"], ["t"], perm=[1, 0]),
             helper.make_node("Gather", ["t", "idx"], ["g"], axis=1),
             helper.make_node("Concat", ["g", "t"], ["c"], axis=1),
             helper.make_node("Slice", ["c", "starts", "ends", "axes"], ["s"]),
             helper.make_node("Equal", ["s", "fill"], ["is_fill"]),
             helper.make_node("Where", ["mask", "s", "fill"], ["w"]),
             helper.make_node("Unsqueeze", ["w", "axes"], ["u"]),
             helper.make_node("Expand", ["u", "big"], ["e"]),
             helper.make_node("Split", ["e"], ["e0", "e1"], axis=1, num_outputs=2),
             helper.make_node("Tile", ["t", "reps"], ["tiled"]),
             helper.make_node("Shape", ["e1"], ["n"]), helper.make_node("Size", ["tiled"], ["k"])]
    m = model(nodes, [vi("x", S, [6]), vi("mask", B, [1, 5])],
              [vi(o, S, None) for o in ("c", "w", "e0", "e1", "tiled")] + [vi("is_fill", B, None), vi("n", I64, None),
                                                                         vi("k", I64, None)], opset=19, inits=inits)
    x = strings("a", "b", "c", "d", "-", "f")
    check(m, [{"x": x, "mask": np.array([[True, False, True, True, False]])}], tmp_path)


def test_strings_pass_through_control_flow(tmp_path):
    then = helper.make_graph([helper.make_node("StringConcat", ["x", "bang"], ["t"])], "then", [],
                             [vi("t", S, None)], [helper.make_tensor("bang", S, [1], [b"!"])])
    other = helper.make_graph([helper.make_node("Identity", ["x"], ["e"])], "else", [], [vi("e", S, None)])
    m = model([helper.make_node("If", ["c"], ["y"], then_branch=then, else_branch=other),
               helper.make_node("StringSplit", ["y"], ["p", "n"], delimiter="!")],
              [vi("c", B, []), vi("x", S, [2])], [vi("y", S, None), vi("n", I64, None)])
    check(m, [{"c": np.array(c), "x": strings("a", "b")} for c in (True, False)], tmp_path)


def test_ranges_refuse_strings_with_a_message(tmp_path):
    m = model([helper.make_node("Equal", ["x", "x"], ["y"])], [vi("x", S, ["n"])], [vi("y", B, None)])
    path = str(tmp_path / "m.onnx")
    onnx.save(m, path)
    with pytest.raises(GeError, match=r"'x' is a string tensor: strings have no shape range to plan; compile with "
                                      r"unknown dims \(-1\) instead of ranges"):
        api.atc(path, str(tmp_path / "m"), input_shape="x:1~4")
    assert not list(tmp_path.glob("*.om"))
