"""GE's DynamicShapePartitioner (docs/design.md, Dynamic shapes): KNOWN_SHAPE and UNKNOWN_SHAPE clusters.

Partition() = MarkUnknownShapeNodes -> InitClusters -> MergeClusters (unknown, normal, input data)
-> PruneUniqueClusters. Unknown shape is contagious: a known node on a path between two unknown
nodes becomes unknown (its output feeds an unknown node, so the two are managed together).
Known nodes merge when they are connected and have the same set of unknown ancestors: that is
exactly when merging cannot create a cycle through an unknown node (a known cluster must run as
one static submodel, after all its inputs and before all its consumers). Known clusters smaller
than `min_static_ops` (ATC's --static_model_ops_lower_limit) are not worth a submodel: their nodes
become unknown (GE's ChangeSmallClusterType), and contagion and clustering run again with them.
Connected unknown nodes form one UNKNOWN cluster (MergeClustersUnknownShape); contagion makes it
convex, so the cluster graph stays acyclic and the hybrid executor runs the cluster's nodes one
after another, in graph order.
"""
from __future__ import annotations

from ..model.ir import Graph, Node

KNOWN, UNKNOWN = "KNOWN", "UNKNOWN"


class PartCluster:
    __slots__ = ("kind", "nodes", "reason")

    def __init__(self, kind: str, nodes: list[Node], reason: str = ""):
        self.kind, self.nodes, self.reason = kind, nodes, reason


def partition(graph: Graph, unknown: dict[str, str], min_static_ops: int = 1) -> list[PartCluster]:
    """Clusters of `graph` (topologically sorted) in an executable order. `unknown` maps node
    names to why they are unknown (MarkUnknownShapeNodes, from infer_dynamic); it is extended in
    place with the nodes made unknown here."""
    graph.toposort()
    nodes = graph.nodes
    producer = {o: i for i, n in enumerate(nodes) for o in n.outputs if o}
    preds = [{producer[t] for t in n.inputs if t in producer} for n in nodes]

    succs: list[set[int]] = [set() for _ in nodes]
    for i, ps in enumerate(preds):
        for p in ps:
            succs[p].add(i)
    while True:  # a dissolved small cluster is unknown: contagion and clustering run again
        _spread_unknown(nodes, preds, succs, unknown)
        parent = _known_clusters(nodes, preds, unknown)
        members: dict[int, list[int]] = {}
        for i in range(len(nodes)):
            if nodes[i].name not in unknown:
                members.setdefault(_find(parent, i), []).append(i)
        small = [ids for ids in members.values() if len(ids) < min_static_ops]
        if not small:
            break
        for ids in small:  # ChangeSmallClusterType: not worth a submodel, its nodes run in the hybrid executor
            for i in ids:
                unknown[nodes[i].name] = (f"known cluster of {len(ids)} node(s) is smaller than "
                                          f"static_model_ops_lower_limit={min_static_ops}")
    # MergeClustersUnknownShape: connected unknown nodes form one cluster
    for i, n in enumerate(nodes):
        if n.name in unknown:
            for p in preds[i]:
                if nodes[p].name in unknown:
                    parent[_find(parent, i)] = _find(parent, p)
    # PruneUniqueClusters: one cluster per root
    members = {}
    for i in range(len(nodes)):
        members.setdefault(_find(parent, i), []).append(i)
    return _ordered(nodes, preds, members, unknown)


def _spread_unknown(nodes, preds, succs, unknown) -> None:
    """Contagion: a known node reached from an unknown node and reaching one becomes unknown."""
    is_unknown = [n.name in unknown for n in nodes]
    from_unknown = _reach(preds, is_unknown)
    to_unknown = _reach(succs, is_unknown, reverse=True)
    for i, n in enumerate(nodes):
        if not is_unknown[i] and from_unknown[i] and to_unknown[i]:
            unknown[n.name] = "on a path between unknown-shape nodes (contagious)"


def _known_clusters(nodes, preds, unknown) -> list[int]:
    """InitClusters + MergeClustersNormal: union-find parents joining connected known nodes with
    equal unknown-ancestor sets (unknown nodes stay alone)."""
    ancestors = [0] * len(nodes)  # bitset of unknown ancestors (inclusive for unknown nodes)
    for i, n in enumerate(nodes):
        bits = 0
        for p in preds[i]:
            bits |= ancestors[p]
        ancestors[i] = bits | ((1 << i) if n.name in unknown else 0)
    parent = list(range(len(nodes)))
    for i, n in enumerate(nodes):
        if n.name in unknown:
            continue
        for p in preds[i]:
            if nodes[p].name not in unknown and ancestors[p] == ancestors[i]:
                parent[_find(parent, i)] = _find(parent, p)
    return parent


def _find(parent: list[int], i: int) -> int:
    while parent[i] != i:
        parent[i] = parent[parent[i]]
        i = parent[i]
    return i


def _cause(members: list[Node], unknown: dict[str, str]) -> str:
    """Why a cluster is unknown: its first node's own cause (unknown dims, data-dependent, control
    flow), before the reasons that only follow from it (contagion, the lower op limit)."""
    reasons = [unknown[n.name] for n in members]
    own = [r for r in reasons if "contagious" not in r and "static_model_ops_lower_limit" not in r]
    return (own or reasons)[0]


def _reach(edges: list[set[int]], seeds: list[bool], reverse: bool = False) -> list[bool]:
    """reached[i]: some seed strictly before i along `edges` (preds; or succs with reverse)."""
    n = len(seeds)
    reached = [False] * n
    order = range(n - 1, -1, -1) if reverse else range(n)
    for i in order:
        reached[i] = any(seeds[j] or reached[j] for j in edges[i])
    return reached


def _ordered(nodes, preds, members, unknown) -> list[PartCluster]:
    """Clusters in a topological order of the cluster graph (Kahn, lowest first node first)."""
    import heapq
    cluster_of = {}
    clusters: list[PartCluster] = []
    for ids in sorted(members.values(), key=min):
        for i in ids:
            cluster_of[i] = len(clusters)
        if nodes[ids[0]].name in unknown:  # its nodes run one by one in the hybrid executor, in graph order
            cluster_nodes = [nodes[i] for i in sorted(ids)]
            clusters.append(PartCluster(UNKNOWN, cluster_nodes, _cause(cluster_nodes, unknown)))
        else:
            clusters.append(PartCluster(KNOWN, [nodes[i] for i in sorted(ids)]))
    deps = [set() for _ in clusters]
    for i, ps in enumerate(preds):
        deps[cluster_of[i]].update(cluster_of[p] for p in ps if cluster_of[p] != cluster_of[i])
    users: list[list[int]] = [[] for _ in clusters]
    for c, ds in enumerate(deps):
        for d in ds:
            users[d].append(c)
    pending = [len(d) for d in deps]
    ready = [c for c, k in enumerate(pending) if k == 0]
    heapq.heapify(ready)
    order = []
    while ready:
        c = heapq.heappop(ready)
        order.append(clusters[c])
        for u in users[c]:
            pending[u] -= 1
            if not pending[u]:
                heapq.heappush(ready, u)
    assert len(order) == len(clusters), "partitioner produced a cycle"  # excluded by the merge rule
    return order
