"""Independent threads (bench_threads.c): the throughput of 1 and 2 threads allocating and freeing bursts."""

from types import SimpleNamespace as NS

from harness import Goal, div, fmt, ratio, w4
from suites import PEERS

ORDER = 30
PLOTS = ["threads.png"]
HEADINGS = ["## Independent threads"]


def setup(h):
    return NS(ops=h.size(20000000, 2000000, 200000), preps=h.size(3, 3, 1))


def run(h, p):
    h.log("independent threads, 1 and 2")
    for n in (1, 2):
        if h.goals_only:
            h.alternate("threads", [n, 256, p.ops, p.preps], ["uslab"], writes=("first4",))
        else:
            h.alternate("threads", [n, 256, p.ops, p.preps], PEERS, writes=("none", "first4"))


def report(h, p, r):
    r.heading(HEADINGS[0])
    r.describe("threads")
    r(f"Ran: `threads-<peer> 1|2 256 {p.ops} {p.preps}` (\"8 bytes\": the 8-byte first word) and the same with",
      "`BENCH_WRITE=first4` (\"written\", the goal row); million pairs per second over all threads.", "")
    rows = []
    for v in PEERS:
        a, b = h.get("threads", w4(v), "1T", "mops"), h.get("threads", w4(v), "2T", "mops")
        a8, b8 = h.get("threads", v, "1T", "mops"), h.get("threads", v, "2T", "mops")
        rows.append((v, fmt(a, "%.1f"), fmt(b, "%.1f"), div(b, a), fmt(a8, "%.1f"), fmt(b8, "%.1f"), div(b8, a8)))
    r.table(["allocator", "1 thread, written", "2 threads, written", "2 threads / 1 thread", "1 thread, 8 bytes",
             "2 threads, 8 bytes", "2 threads / 1 thread"], rows)
    dat = h.dat("threads.dat", [(v, h.get("threads", w4(v), "2T", "mops")) for v in PEERS])
    h.bars("threads.png", dat, "2 independent threads, 256 bytes (higher is better)", "million pairs per second")
    r.image("threads", "threads.png")


GOALS = [
    Goal("two threads >= 1.9x one thread (written)",
         lambda h, p: (ratio(h.get("threads", w4("uslab"), "2T", "mops"), h.get("threads", w4("uslab"), "1T", "mops")),
                       None),
         ">=", 1.9),
]
