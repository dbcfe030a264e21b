"""kmalloc: objects of random sizes through each peer's malloc-like interface (issue 10, bench_kmalloc.c)."""

from types import SimpleNamespace as NS

from harness import FIRST4, Goal, div, fmt, ratio, w4
from suites import KPEERS

ORDER = 80
PLOTS = ["kmalloc.png"]
HEADINGS = ["## kmalloc: objects of random sizes (issue 10)"]
WINDOW = 1024
WARM = 65536  # run_steps' warm-up in bench_kmalloc.c (RING * 16)


def setup(h):
    return NS(iters=h.size(20000000, 2000000, 100000), witers=h.size(5000000, 500000, 50000),
              reps=h.size(5, 3, 1), cg_iters=h.size(200000, 20000), ins={})


def run(h, p):
    h.log(f"kmalloc: random-size (8..4096 B) alloc+free pairs and a window of {WINDOW} live, 1 and 2 threads")
    if h.goals_only:
        for n in (1, 2):
            h.alternate("kmalloc", ["pair", n, p.iters, p.reps], ["uslab", "mimalloc", "glibc"], writes=("first4",))
        return
    for n in (1, 2):
        h.alternate("kmalloc", ["pair", n, p.iters, p.reps], KPEERS, writes=("none", "first4"))
        h.alternate("kmalloc", ["window", n, p.witers, p.reps, WINDOW], KPEERS, writes=("first4",))
    # Instructions per random-size pair under callgrind: the count inside
    # run_steps (the timed loop, also run for the warm-up) over its iterations.
    with open(h.path("kmalloc_instructions.csv"), "w") as f:
        for v in KPEERS:
            for name, env in ((v, {}), (w4(v), FIRST4)):
                i = h.callgrind([h.exe(f"kmalloc-{v}"), "pair", 1, p.cg_iters, 1], "run_steps", p.cg_iters + WARM,
                                env=env)
                p.ins[name] = i
                f.write(f"{name},{fmt(i, '%.1f')}\n")


def report(h, p, r):
    def g(v, param, m):
        return h.get("kmalloc", v, param, m)

    r.heading(HEADINGS[0])
    r.describe("kmalloc")
    r(f"Ran: `BENCH_WRITE=first4 kmalloc-<peer> pair 1|2 {p.iters} {p.reps}` (the goal rows); the last columns:",
      f"nothing written (`kmalloc-<peer> pair 1|2 {p.iters} {p.reps}`). Per pair in one thread's loop.",
      f"Instructions: `kmalloc-<peer> pair 1 {p.cg_iters} 1` under callgrind.", "")

    def cells(v, param):
        x = g(w4(v), param, "ns")
        return [f"{fmt(g(w4(v), param, 'cycles'), '%.0f')} cycles(tsc) {fmt(x, '%.3f')} ns",
                div(x, g(w4("mimalloc"), param, "ns")), div(x, g(w4("glibc"), param, "ns"))]

    rows = []
    for v in KPEERS:
        rows.append([v] + cells(v, "pair-1T") + cells(v, "pair-2T")
                    + [fmt(g(w4(v), "pair-2T", "mops"), "%.1f"), fmt(p.ins.get(w4(v)), "%.1f"),
                       f"{fmt(g(v, 'pair-1T', 'ns'), '%.3f')} ns", f"{fmt(g(v, 'pair-2T', 'ns'), '%.3f')} ns",
                       fmt(p.ins.get(v), "%.1f")])
    r.table(["allocator", "1 thread", "x mimalloc", "x glibc", "2 threads", "x mimalloc", "x glibc",
             "2 threads, M pairs/s", "instructions per pair", "1 thread, nothing written",
             "2 threads, nothing written", "instructions, nothing written"], rows)
    r("", f"Ran: `BENCH_WRITE=first4 kmalloc-<peer> window 1|2 {p.witers} {p.reps} {WINDOW}`. Per step (one alloc +",
      "one free) in one thread's loop; peak RSS of the 2-thread run.", "")
    w1, w2 = f"win{WINDOW}-1T", f"win{WINDOW}-2T"
    rows, dat = [], []
    for v in KPEERS:
        rows.append([v] + cells(v, w1) + cells(v, w2) + [f"{fmt(g(w4(v), w2, 'peak_rss_mb'), '%.1f')} MB"])
        dat.append([v] + [g(w4(v), x, "ns") for x in ("pair-1T", "pair-2T", w1, w2)])
    r.table(["allocator", "1 thread", "x mimalloc", "x glibc", "2 threads", "x mimalloc", "x glibc",
             "peak RSS, 2 threads"], rows)
    f = h.dat("kmalloc.dat", dat)
    h.clustered("kmalloc.png", f, "random sizes 8..4096 B, first 4 bytes written, per alloc+free (lower is better)",
                "ns per pair or step, one thread's loop",
                ["pair, 1 thread", "pair, 2 threads", f"window {WINDOW}, 1 thread", f"window {WINDOW}, 2 threads"])
    r.image("kmalloc", "kmalloc.png")


def _vs(n, peer):
    return lambda h, p: (ratio(h.get("kmalloc", w4("uslab"), f"pair-{n}", "ns"),
                               h.get("kmalloc", w4(peer), f"pair-{n}", "ns")), None)


GOALS = []
for _n in ("1T", "2T"):
    GOALS += [
        Goal(f"kmalloc random-size pair, {_n}, written, <= 0.5x mimalloc", _vs(_n, "mimalloc"), "<=", 0.5),
        Goal(f"kmalloc random-size pair, {_n}, written, <= 0.25x glibc", _vs(_n, "glibc"), "<=", 0.25),
    ]
