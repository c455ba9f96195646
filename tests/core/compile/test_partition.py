"""The partitioner: unknown shape is contagious between unknown nodes, connected unknown nodes form
one cluster, known clusters never form a cycle through an unknown node, and small known clusters
dissolve (static_model_ops_lower_limit) into the unknown clusters beside them."""
from ge.core.compile.partition import KNOWN, UNKNOWN, partition
from ge.core.model.ir import Graph, Node


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
    # U1 -> b -> U2 are connected: one UNKNOWN cluster (MergeClustersUnknownShape), in graph order
    assert cluster_of["U1"] == cluster_of["b"] == cluster_of["U2"]
    assert [n.name for n in clusters[cluster_of["U1"]].nodes] == ["U1", "b", "U2"]
    assert clusters[cluster_of["U1"]].reason == "data-dependent"
    assert cluster_of["a"] < cluster_of["U1"] < cluster_of["e"]
    assert [c.kind for c in clusters] == [KNOWN, UNKNOWN, KNOWN]


def test_unknown_nodes_not_connected_stay_apart():
    # two NonZeros on separate branches of a known node: no edge joins them, so two clusters
    nodes = [Node("Relu", ["x"], ["a"], name="a"), Node("NonZero", ["a"], ["u1"], name="U1"),
             Node("NonZero", ["a"], ["u2"], name="U2")]
    g = Graph("g", nodes=nodes, inputs=["x"], outputs=["u1", "u2"])
    clusters = partition(g, {"U1": "data-dependent", "U2": "data-dependent"}, min_static_ops=1)
    assert [(c.kind, [n.name for n in c.nodes]) for c in clusters] == [(KNOWN, ["a"]), (UNKNOWN, ["U1"]),
                                                                      (UNKNOWN, ["U2"])]


def test_small_known_clusters_dissolve():
    g = chain_graph()
    unknown = {"U1": "data-dependent", "U2": "data-dependent"}
    clusters = partition(g, unknown, min_static_ops=4)
    assert "static_model_ops_lower_limit=4" in unknown["a"]
    # every node is unknown now, and they are all connected: one cluster, whose cause is the NonZeros
    assert len(clusters) == 1 and clusters[0].kind == UNKNOWN and len(clusters[0].nodes) == 7
    assert clusters[0].reason == "data-dependent"


def test_a_dissolved_cluster_spreads_contagion():
    # U -> p -> q -> c <- U2: {p, q} and {c} are known clusters (c has one more unknown ancestor); with
    # limit 2, {c} dissolves, so p and q now lie between unknown nodes and are contagious; then every
    # unknown node is connected: one cluster. The tail t1 -> t2 stays known.
    nodes = [Node("NonZero", ["x"], ["u"], name="U"), Node("NonZero", ["x"], ["u2"], name="U2"),
             Node("Relu", ["u"], ["p"], name="p"), Node("Relu", ["p"], ["q"], name="q"),
             Node("Add", ["q", "u2"], ["c"], name="c"),
             Node("Relu", ["x"], ["t1"], name="t1"), Node("Relu", ["t1"], ["t2"], name="t2")]
    g = Graph("g", nodes=nodes, inputs=["x"], outputs=["c", "t2"])
    unknown = {"U": "data-dependent", "U2": "data-dependent"}
    assert [c.kind for c in partition(g, dict(unknown), min_static_ops=1)].count(KNOWN) == 3
    clusters = partition(g, unknown, min_static_ops=2)
    assert "static_model_ops_lower_limit=2" in unknown["c"]
    assert "contagious" in unknown["p"] and "contagious" in unknown["q"]
    assert sorted((c.kind, sorted(n.name for n in c.nodes)) for c in clusters) == [
        (KNOWN, ["t1", "t2"]), (UNKNOWN, ["U", "U2", "c", "p", "q"])]
