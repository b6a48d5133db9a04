"""Maximum flow / minimum cut with Edmonds–Karp: augment along shortest paths until none is left.

Max-flow min-cut theorem: when no augmenting path remains, the vertices still reachable
from the source in the residual graph form the source side of a minimum cut, and the
edges leaving that side are saturated — their capacities add up to the maximum flow.
Symmetrically, the vertices that can no longer reach the sink form the sink side of a
minimum cut (the largest source side): the cut nearest the sink.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Hashable
from typing import Literal

Capacities = dict[Hashable, dict[Hashable, float]]  # capacities[u][v]: of the edge u -> v


def min_cut(capacities: Capacities, source: Hashable, sink: Hashable,
            nearest: Literal["source", "sink"] = "source") -> set[Hashable]:
    """The source side of a minimum source/sink cut. Where several cuts cost the same,
    `nearest` picks the one nearest the source (the smallest source side, as Edmonds–Karp
    finds it) or nearest the sink (the largest). Edges may have capacity `math.inf`; the
    cut must be finite."""
    residual: Capacities = {}
    for u, edges in capacities.items():
        for v, capacity in edges.items():
            residual.setdefault(u, {})[v] = residual.get(u, {}).get(v, 0) + capacity
            residual.setdefault(v, {}).setdefault(u, 0)  # the reverse edge, to undo flow
    residual.setdefault(source, {})
    residual.setdefault(sink, {})
    while sink in (parents := _reachable(residual, source, stop_at=sink)):
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
    if nearest == "source":
        return set(_reachable(residual, source))
    reversed_residual: Capacities = {u: {} for u in residual}
    for u, edges in residual.items():
        for v, left in edges.items():
            reversed_residual[v][u] = left
    return set(residual) - set(_reachable(reversed_residual, sink))


def _reachable(residual: Capacities, source: Hashable, stop_at: Hashable = None) -> dict[Hashable, Hashable]:
    """Breadth-first search over edges with capacity left; maps each vertex reached to the
    vertex it was reached from (so the path to any vertex is a shortest one). With `stop_at`,
    the search ends when it reaches that vertex (an augmenting path needs no more)."""
    parents: dict[Hashable, Hashable] = {source: source}
    queue = deque([source])
    while queue:
        u = queue.popleft()
        for v, left in residual[u].items():
            if left > 0 and v not in parents:
                parents[v] = u
                if v == stop_at:
                    return parents
                queue.append(v)
    return parents
