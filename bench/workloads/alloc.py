# bench/workloads/alloc.py [SCALE] - an allocation-heavy, deterministic Python
# program for bench/run-malloc: dicts, lists, tuples, strings, json, small
# class instances, sorting and a churning cache. SCALE (default 1, may be a
# fraction) multiplies the work; the printed checksum depends on SCALE only.
import collections
import json
import random
import sys

scale = float(sys.argv[1]) if len(sys.argv) > 1 else 1.0
rng = random.Random(42)
check = 0


class Node:
    def __init__(self, key, value, parent=None):
        self.key = key
        self.value = value
        self.parent = parent
        self.children = []


class Point:
    __slots__ = ("x", "y", "tag")

    def __init__(self, x, y, tag):
        self.x = x
        self.y = y
        self.tag = tag


def sz(count):
    return max(1, int(count * scale))


WORDS = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta",
         "iota", "kappa", "lambda", "mu", "nu", "xi", "omicron", "pi", "rho"]

for rnd in range(1):
    # 1. Records: dicts of strings, numbers and short lists, then json.
    records = []
    for i in range(sz(60000)):
        w = WORDS[i % len(WORDS)]
        records.append({
            "id": i,
            "name": f"{w}-{i:06d}",
            "tags": [WORDS[(i * 7 + k) % len(WORDS)] for k in range(i % 5)],
            "score": rng.random() * 100.0,
            "meta": {"owner": w.upper(), "rank": i % 97, "path": "/".join((w, str(i % 13), "x" * (i % 40)))},
        })
    text = json.dumps(records)
    back = json.loads(text)
    check += len(text) + sum(r["meta"]["rank"] for r in back)
    del records, text

    # 2. Group by and sort: many short-lived tuples and lists.
    groups = {}
    for r in back:
        groups.setdefault(r["meta"]["owner"], []).append((r["score"], r["name"]))
    for k in sorted(groups):
        g = sorted(groups[k], reverse=True)
        check += len(g) + len(g[0][1])
    del back, groups

    # 3. A tree of small objects, walked and torn down.
    root = Node("root", 0)
    nodes = [root]
    for i in range(1, sz(150000)):
        parent = nodes[rng.randrange(len(nodes))]
        n = Node(f"k{i}", i, parent)
        parent.children.append(n)
        nodes.append(n)
    stack, total = [root], 0
    while stack:
        n = stack.pop()
        total += n.value
        stack.extend(n.children)
    check += total
    del nodes, root, stack

    # 4. __slots__ instances and a dict keyed by tuples.
    pts = [Point(rng.randrange(1000), rng.randrange(1000), WORDS[i % 17]) for i in range(sz(200000))]
    grid = {}
    for p in pts:
        grid[(p.x // 10, p.y // 10)] = grid.get((p.x // 10, p.y // 10), 0) + 1
    check += len(grid) + max(grid.values())
    del pts, grid

    # 5. Strings: building, splitting, joining, replacing.
    lines = []
    for i in range(sz(80000)):
        lines.append(" ".join(WORDS[(i + k) % 17] * (1 + k % 3) for k in range(i % 9 + 1)))
    blob = "\n".join(lines)
    words = blob.split()
    check += len(words) + len(blob.replace("a", "AA")) + sum(len(w) for w in set(words))
    del lines, blob, words

    # 6. A bounded cache with churn: insert, look up, evict.
    cache = {}
    order = collections.deque()
    for i in range(sz(300000)):
        k = rng.randrange(50000)
        if k in cache:
            check += len(cache[k])
        else:
            cache[k] = [k] * (k % 24) + [str(k)]
            order.append(k)
            if len(order) > 20000:
                cache.pop(order.popleft(), None)
    check += len(cache)
    del cache, order

print(check)
