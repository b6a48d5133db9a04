"""Maximum flow / minimum cut with Edmonds–Karp: augment along shortest paths until none is left.

Max-flow min-cut theorem: when no augmenting path remains, the vertices still reachable
from the source in the residual graph form the source side of a minimum cut, and the
edges leaving that side are saturated — their capacities add up to the maximum flow.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Hashable

Capacities = dict[Hashable, dict[Hashable, float]]  # capacities[u][v]: of the edge u -> v


def min_cut(capacities: Capacities, source: Hashable, sink: Hashable) -> set[Hashable]:
    """The source side of a minimum source/sink cut (the smallest such side, as
    Edmonds–Karp finds it). Edges may have capacity `math.inf`; the cut must be finite."""
    residual: Capacities = {}
    for u, edges in capacities.items():
        for v, capacity in edges.items():
            residual.setdefault(u, {})[v] = residual.get(u, {}).get(v, 0) + capacity
            residual.setdefault(v, {}).setdefault(u, 0)  # the reverse edge, to undo flow
    residual.setdefault(source, {})
    while sink in (parents := _reachable(residual, source)):
        path = []
        v = sink
        while v != source:
            path.append((parents[v], v))
            v = parents[v]
        flow = min(residual[u][v] for u, v in path)  # the path's bottleneck
        if flow == math.inf:
            raise ValueError("every cut has infinite capacity")
        for u, v in path:
            residual[u][v] -= flow
            residual[v][u] += flow
    return set(_reachable(residual, source))


def _reachable(residual: Capacities, source: Hashable) -> dict[Hashable, Hashable]:
    """Breadth-first search over edges with capacity left; maps each vertex reached to the
    vertex it was reached from (so the path to any vertex is a shortest one)."""
    parents: dict[Hashable, Hashable] = {source: source}
    queue = deque([source])
    while queue:
        u = queue.popleft()
        for v, left in residual[u].items():
            if left > 0 and v not in parents:
                parents[v] = u
                queue.append(v)
    return parents
