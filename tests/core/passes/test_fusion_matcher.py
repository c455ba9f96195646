"""core/passes/_fusion.Matcher: a replacement leaves the readers of every tensor as a fresh graph's
would list them (the removed nodes gone, the new node in), and the graph in order at commit."""
from ge.core.model.ir import Graph, Node
from ge.core.passes._fusion import Matcher


def ladder(n: int) -> Graph:
    """n steps y_k = Relu(MatMul(y_k-1, w) + y_k-1), every MatMul reading the one weight w."""
    nodes, prev = [], "x"
    for k in range(n):
        nodes += [Node("MatMul", [prev, "w"], [f"m{k}"]), Node("Add", [f"m{k}", prev], [f"a{k}"]),
                  Node("Relu", [f"a{k}"], [f"y{k}"])]
        prev = f"y{k}"
    return Graph("ladder", nodes, ["x"], [prev])


def test_replacements_keep_the_readers_of_each_tensor_exact():
    g = ladder(5)
    m = Matcher(g)
    fused = []
    for k in (3, 0, 4):  # out of graph order: a group's place is its last node's
        mm, add = g.nodes[3 * k], g.nodes[3 * k + 1]
        new = Node("FusedMatMulAdd", [mm.inputs[0], "w", add.inputs[1]], list(add.outputs), name=f"f{k}")
        m.replace([mm, add], new)
        fused.append(new)
        assert not m.removed(new) and m.removed(mm) and m.removed(add)
        assert m.producers[f"a{k}"] is new
    w_readers = m.consumers["w"]
    assert [n.name or n.op_type for n in w_readers] == ["MatMul", "MatMul", "f3", "f0", "f4"]
    assert all(not m.removed(n) for n in w_readers)
    assert m.consumers["y2"] == [fused[0], fused[0]]  # y2 fed step 3's MatMul and Add: now its fused node, twice
    assert m.commit() == 3
    assert [n.name or n.op_type for n in g.nodes] == ["f0", "Relu", "MatMul", "Add", "Relu", "MatMul", "Add",
                                                       "Relu", "f3", "Relu", "f4", "Relu"]
    fresh = g.consumers()  # the same readers (the Matcher lists a new node last, the graph in its order)
    assert {k: sorted(map(id, v)) for k, v in fresh.items()} == \
        {k: sorted(map(id, v)) for k, v in m.consumers.items() if v}


def test_a_replacement_after_a_node_was_added_finds_its_place():
    g = ladder(2)
    m = Matcher(g)
    m.replace([g.nodes[0], g.nodes[1]], Node("FusedMatMulAdd", ["x", "w", "x"], ["a0"], name="f0"))
    extra = Node("Relu", ["y1"], ["z"])
    g.nodes.append(extra)  # a pass may add nodes before its next replacement
    m.replace([g.nodes[5], extra], Node("Relu", ["a1"], ["z"], name="r"))
    m.commit()
    assert [n.name or n.op_type for n in g.nodes] == ["f0", "Relu", "MatMul", "Add", "r"]
