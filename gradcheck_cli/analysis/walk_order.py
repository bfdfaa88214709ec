"""The order a backward pass visits a body's nodes in: every node after all of its consumers."""

from __future__ import annotations

import operator
from collections import deque
from collections.abc import Iterable

from gradcheck_cli.analysis.control_flow import BodyIndex
from gradcheck_cli.graph.model import TensorRef


class Order(list):  # type: ignore[type-arg]
    """Node numbers in the order a backward pass visits them."""

    cyclic = False


def consumers_first(facts: BodyIndex, seeds: Iterable[TensorRef]) -> Order:
    """Ancestors of the seeds, each after all of its consumers: a depth-first walk up the
    inputs, in reverse post-order. A cycle (a TF1 while loop) takes Kahn's algorithm instead,
    which places what it can and leaves the rest to iteration."""
    arrays = facts.arrays
    starts, producers = arrays.input_start, arrays.input_nodes
    if not any(map(operator.ge, producers, arrays.edge_nodes)):
        # Every node after its inputs, as TensorFlow writes a function: the reverse of the
        # body's order visits each node after its consumers (those the seeds do not reach
        # are passed over with nothing to carry).
        return Order(range(len(arrays) - 1, -1, -1))
    seed_nodes = [n for ref in seeds if (n := arrays.ids.get(ref.node)) is not None]
    # 0: not met yet, 1: on the walk's path, 2: done.
    state = bytearray(len(arrays))
    post_order: list[int] = []
    for seed in seed_nodes:
        if state[seed]:
            continue
        state[seed] = 1
        path, positions = [seed], [starts[seed]]
        while path:
            n, edge = path[-1], positions[-1]
            stop = starts[n + 1]
            while edge < stop:
                producer = producers[edge]
                edge += 1
                if producer < 0 or state[producer] == 2:
                    continue
                if state[producer] == 1:
                    return _kahn(facts, seed_nodes)
                state[producer] = 1
                positions[-1] = edge
                path.append(producer)
                positions.append(starts[producer])
                break
            else:
                path.pop()
                positions.pop()
                state[n] = 2
                post_order.append(n)
    post_order.reverse()
    return Order(post_order)


def _kahn(facts: BodyIndex, seed_nodes: list[int]) -> Order:
    """Ancestors of the seeds, each after all of its consumers (Kahn's algorithm); the nodes
    on a cycle go last, by name, and the order is marked cyclic."""
    arrays = facts.arrays
    starts, producers = arrays.input_start, arrays.input_nodes

    def inputs(n: int) -> list[int]:
        return [p for p in producers[starts[n] : starts[n + 1]] if p >= 0]

    ancestors: set[int] = set()
    stack = list(seed_nodes)
    while stack:
        n = stack.pop()
        if n not in ancestors:
            ancestors.add(n)
            stack.extend(inputs(n))
    pending_consumers = dict.fromkeys(sorted(ancestors), 0)
    for n in ancestors:
        for p in inputs(n):
            pending_consumers[p] += 1
    ready = deque(n for n, count in pending_consumers.items() if count == 0)
    order = Order()
    while ready:
        n = ready.popleft()
        order.append(n)
        for p in inputs(n):
            pending_consumers[p] -= 1
            if pending_consumers[p] == 0:
                ready.append(p)
    if len(order) < len(ancestors):
        order.cyclic = True
        placed = set(order)
        order.extend(sorted(ancestors - placed, key=lambda n: arrays.flat.names[n]))
    return order
