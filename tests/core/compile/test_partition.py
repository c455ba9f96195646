"""The partitioner: unknown shape is contagious between unknown nodes, known clusters never form a
cycle through an unknown node, and small known clusters dissolve (static_model_ops_lower_limit)."""
from ge.core.compile.partition import KNOWN, UNKNOWN, partition
from ge.core.ir import Graph, Node


def chain_graph():
    # a -> U1 -> b -> U2 ; a -> c -> d (known side branch); b also feeds e (after U1 only)
    nodes = [Node("Relu", ["x"], ["a"], name="a"), Node("NonZero", ["a"], ["u1"], name="U1"),
             Node("Relu", ["u1"], ["b"], name="b"), Node("NonZero", ["b"], ["u2"], name="U2"),
             Node("Relu", ["a"], ["c"], name="c"), Node("Relu", ["c"], ["d"], name="d"),
             Node("Add", ["d", "b"], ["e"], name="e")]
    return Graph("g", nodes=nodes, inputs=["x"], outputs=["u2", "e"])


def test_contagion_and_order():
    g = chain_graph()
    unknown = {"U1": "data-dependent", "U2": "data-dependent"}
    clusters = partition(g, unknown, min_static_ops=1)
    assert "contagious" in unknown["b"]  # between U1 and U2
    kinds = {n.name: c.kind for c in clusters for n in c.nodes}
    assert kinds["a"] == kinds["c"] == kinds["d"] == KNOWN and kinds["b"] == UNKNOWN
    # 'e' reads b (after U1): it cannot join a/c/d's cluster, which runs before U1
    cluster_of = {n.name: i for i, c in enumerate(clusters) for n in c.nodes}
    assert cluster_of["e"] != cluster_of["a"] and cluster_of["a"] == cluster_of["d"]
    position = {n: cluster_of[n] for n in cluster_of}
    assert position["a"] < position["U1"] < position["b"] < position["U2"] and position["b"] < position["e"]


def test_small_known_clusters_dissolve():
    g = chain_graph()
    unknown = {"U1": "data-dependent", "U2": "data-dependent"}
    clusters = partition(g, unknown, min_static_ops=4)
    assert all(c.kind == UNKNOWN for c in clusters)
    assert "static_model_ops_lower_limit=4" in unknown["a"]
