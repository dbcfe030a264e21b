"""Independent threads: 1 and 2 threads allocating and freeing bursts."""

from types import SimpleNamespace as NS

from harness import Goal, div, fmt, ratio
from suites import PEERS

ORDER = 30
PLOTS = ["threads.png"]
HEADINGS = ["## Independent threads"]


def setup(h):
    return NS(ops=h.size(20000000, 2000000, 200000), preps=h.size(3, 3, 1))


def run(h, p):
    h.log("independent threads, 1 and 2")
    for n in (1, 2):
        h.alternate("threads", [n, 256, p.ops, p.preps], PEERS)


def report(h, p, r):
    r.heading(HEADINGS[0])
    r(f"`threads-<peer> N 256 {p.ops} {p.preps}`: every thread allocates bursts of 64 objects",
      "(writing their first word) and frees them in reverse; million pairs per second",
      "over all threads.", "")
    rows = []
    for v in PEERS:
        a, b = h.get("threads", v, "1T", "mops"), h.get("threads", v, "2T", "mops")
        rows.append((v, fmt(a, "%.1f"), fmt(b, "%.1f"), div(b, a)))
    r.table(["allocator", "1 thread", "2 threads", "2 threads / 1 thread"], rows)
    dat = h.dat("threads.dat", [(v, h.get("threads", v, "2T", "mops")) for v in PEERS])
    h.bars("threads.png", dat, "2 independent threads, 256 bytes (higher is better)", "million pairs per second")
    r.image("threads", "threads.png")


GOALS = [
    Goal("two threads >= 1.9x one thread",
         lambda h, p: (ratio(h.get("threads", "uslab", "2T", "mops"), h.get("threads", "uslab", "1T", "mops")), None),
         ">=", 1.9),
]
