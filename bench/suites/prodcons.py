"""P6: producer -> consumer on two threads (bench_prodcons.c), throughput and latency."""

from types import SimpleNamespace as NS

from harness import Goal, div, fmt, ratio, w4
from suites import PEERS

ORDER = 20
PLOTS = ["prodcons.png"]
HEADINGS = ["## P6: producer -> consumer on two threads"]


def setup(h):
    return NS(count=h.size(4000000, 1000000, 100000), preps=h.size(3, 3, 1))


def run(h, p):
    h.log("P6: producer -> consumer, 256 bytes")
    if h.goals_only:
        h.alternate("prodcons", [256, p.count, p.preps], ["uslab", "mimalloc"], writes=("first4",))
        return
    h.alternate("prodcons", [256, p.count, p.preps], PEERS, writes=("none", "first4"))


def report(h, p, r):
    u = h.get("prodcons", w4("uslab"), 256, "mops")
    r.heading(HEADINGS[0])
    r.describe("prodcons")
    r(f"Ran: `prodcons-<peer> 256 {p.count} {p.preps}` (\"8 bytes\": the 8-byte word) and the same with",
      "`BENCH_WRITE=first4` (\"written\", the goal rows). Latency in TSC cycles.", "")

    def pct(v, op):
        return " / ".join(fmt(h.get("prodcons", v, 256, f"{op}_{q}"), "%.0f") for q in ("p50", "p99", "p999"))

    rows = []
    for v in PEERS:
        m = h.get("prodcons", w4(v), 256, "mops")
        rows.append((v, fmt(m, "%.2f"), f"{div(u, m)}x", pct(w4(v), "alloc"), pct(w4(v), "free"),
                     fmt(h.get("prodcons", v, 256, "mops"), "%.2f")))
    r.table(["allocator", "Mobjects/s, written", "uslab is", "alloc p50 / p99 / p999", "free p50 / p99 / p999",
             "Mobjects/s, 8 bytes"], rows)
    dat = h.dat("prodcons.dat", [(v, h.get("prodcons", w4(v), 256, "mops")) for v in PEERS])
    h.bars("prodcons.png", dat, "producer -> consumer, 256 bytes, first 4 bytes written (higher is better)",
           "million objects per second")
    r.image("prodcons", "prodcons.png")


def _p99(op):
    def measure(h, p):
        u, m = h.get("prodcons", w4("uslab"), 256, f"{op}_p99"), h.get("prodcons", w4("mimalloc"), 256, f"{op}_p99")
        return ratio(u, m), f"{fmt(u, '%.0f')} vs {fmt(m, '%.0f')} cycles"
    return measure


GOALS = [
    Goal("P6 throughput >= 1.5x mimalloc",
         lambda h, p: (ratio(h.get("prodcons", w4("uslab"), 256, "mops"), h.get("prodcons", w4("mimalloc"), 256, "mops")),
                       None),
         ">=", 1.5),
    Goal("P6 alloc p99 <= mimalloc's", _p99("alloc"), "<=", 1),
    Goal("P6 free p99 <= mimalloc's", _p99("free"), "<=", 1),
]
