"""core/model/ir/graph.py's stable_topological_order (Graph.toposort): each index after those it waits
on, the lowest ready index first, so a sorted list keeps its order; indices on a cycle are left out."""
import pytest

from ge.core.model.errors import GraphError
from ge.core.model.ir import Graph, Node
from ge.core.model.ir.graph import stable_topological_order


@pytest.mark.parametrize("waits_on, order", [
    ([set(), {0}, {0, 1}, {2}], [0, 1, 2, 3]),  # sorted already: kept
    ([{2}, set(), {1}, {0, 2}], [1, 2, 0, 3]),  # 0 waits on 2
    ([{1}, set(), set(), {2}], [1, 0, 2, 3]),  # the lowest ready first: 0 as soon as 1 is done
    ([set(), {2}, {1}, {0}], [0, 3]),  # 1 and 2 wait on each other: left out
    ([], []),
])
def test_each_index_comes_after_what_it_waits_on(waits_on, order):
    assert stable_topological_order(waits_on) == order


def test_toposort_orders_a_graph_and_names_a_cycle():
    g = Graph("g", [Node("Relu", ["a"], ["b"], name="second"), Node("Relu", ["x"], ["a"], name="first")], ["x"], ["b"])
    g.toposort()
    assert [n.name for n in g.nodes] == ["first", "second"]
    g.nodes.append(Node("Add", ["b", "d"], ["c"], name="loop1"))
    g.nodes.append(Node("Relu", ["c"], ["d"], name="loop2"))
    with pytest.raises(GraphError, match=r"graph has a cycle through node 'loop1' \(Add\)"):
        g.toposort()
