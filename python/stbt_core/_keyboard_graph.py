"""The graph side of ``stbt.Keyboard``: shortest paths through the keys,
the view of the graph used while navigating, and the neighbouring cells a
grid merges into one key. farmhand's own code."""

import heapq
import itertools

# The weight of an edge whose press may land elsewhere (one of several targets).
_UNSURE_WEIGHT = 100


def _networkx():
    try:
        import networkx  # pylint: disable=import-outside-toplevel
    except ImportError as e:
        raise ImportError("stbt.Keyboard needs networkx (Debian package python3-networkx)") from e
    return networkx


def _adjacent_groups(cells, spec):
    """The cells in groups of neighbours (left, right, above, below) with
    the same ``spec``, in the order of each group's first cell; a name that
    is in two places apart makes two groups (a SHIFT at each end)."""
    at = {tuple(c.position): c for c in cells}
    seen, groups = set(), []
    for cell in cells:
        if cell.index in seen:
            continue
        group, todo = [], [cell]
        seen.add(cell.index)
        while todo:
            c = todo.pop()
            group.append(c)
            x, y = c.position
            for n in (at.get(p) for p in ((x - 1, y), (x + 1, y), (x, y - 1), (x, y + 1))):
                if n is not None and n.index not in seen and spec(n) == spec(cell):
                    seen.add(n.index)
                    todo.append(n)
        groups.append(sorted(group, key=lambda c: c.index))
    return groups


def _strip_shift_transitions(G):
    """A read-only view of ``G`` without the KEY_OK edges out of keys that
    type text (e.g. "after typing a capital letter the keyboard goes back to
    lowercase"): following one while navigating would type a character."""
    nx = _networkx()

    def keep(u, v):
        return not (G[u][v].get("key") == "KEY_OK" and u.text)

    return nx.subgraph_view(G, filter_edge=keep)


def _shortest_path(G, source, targets):
    """The cheapest list of nodes from ``source`` to the nearest of
    ``targets`` (Dijkstra; edges weigh their ``weight``, else 1; ties go to
    the path found first). Raises networkx's ``NetworkXNoPath``."""
    targets = set(targets)
    if source in targets:
        return [source]
    done, best, came_from = set(), {source: 0}, {source: None}
    order = itertools.count()
    heap = [(0, next(order), source)]
    while heap:
        cost, _, node = heapq.heappop(heap)
        if node in done:
            continue
        done.add(node)
        if node in targets:
            path = [node]
            while came_from[path[-1]] is not None:
                path.append(came_from[path[-1]])
            return path[::-1]
        for nxt, data in G[node].items():
            c = cost + data.get("weight", 1)
            if nxt not in done and (nxt not in best or c < best[nxt]):
                best[nxt], came_from[nxt] = c, node
                heapq.heappush(heap, (c, next(order), nxt))
    raise _networkx().NetworkXNoPath("No path to %s." % " or ".join(repr(t) for t in sorted(targets, key=repr)))


def _keys_to_press(G, source, targets):
    """Yields ``(keypress, keys)`` along the shortest path from ``source`` to
    the nearest of ``targets``: the remote-control key to press and the set
    of keys the focus may land on after it. It stops after a press that may
    land on several keys (UP from a wide SPACE bar): the rest of the path
    assumed one of them, so the caller looks where the focus went and plans
    again from there, as stb-tester does."""
    path = _shortest_path(G, source, targets)
    for here, there in zip(path, path[1:]):
        keypress = G[here][there]["key"]
        landings = {k for k, data in G[here].items() if data.get("key") == keypress}
        yield keypress, landings
        if len(landings) > 1:
            return
