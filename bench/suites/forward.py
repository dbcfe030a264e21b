"""P5: packet forwarding (the NAPI skb cache pattern, bench_forward.c): packets per second on 1 and 2 threads."""

from types import SimpleNamespace as NS

from harness import FIRST4, Goal, div, fmt, ratio, w4

ORDER = 60
PLOTS = ["forward.png"]
HEADINGS = ["## P5: packet forwarding (the NAPI skb cache pattern)"]
# forward-<peer> VARIANT: the uslab variants are one program, the peers one each.
VARIANTS = [("uslab", "single"), ("uslab", "bulk"), ("uslab", "batch"), ("uslab", "magazine"),
            ("uslab", "magbulk"), ("dpdk", "bulk"), ("mimalloc", "single"), ("glibc", "single")]
NAMES = ["uslab-single", "uslab-bulk", "uslab-batch", "uslab-magazine", "uslab-magbulk", "dpdk", "mimalloc", "glibc"]
USLAB = NAMES[:5]
# 2 threads twice: the default ring (2048 slots, "2T") and a ring of one
# burst (BENCH_FW_RING=64, "2T-r64": RX and TX completion in lockstep).
RUNS = [(1, 2048), (2, 2048), (2, 64)]
COLUMNS = ["1T", "2T", "2T-r64"]


def setup(h):
    return NS(packets=h.size(20000000, 2000000, 100000), preps=h.size(3, 3, 1))


def run(h, p):
    h.log("P5: packet forwarding (RX bursts of 64, TX ring, TX completion), 1 and 2 threads")
    for n, ring in RUNS:
        for r in h.repetitions():
            for (prog, v), name in zip(VARIANTS, NAMES):
                if h.goals_only and name not in USLAB + ["dpdk"]:
                    continue
                h.run(r, [h.exe(f"forward-{prog}"), v, n, p.packets, p.preps],
                      env=dict(FIRST4, BENCH_FW_RING=str(ring)))


def report(h, p, r):
    r.heading(HEADINGS[0])
    r.describe("forward")
    r(f"Ran: `BENCH_WRITE=first4 forward-<peer> VARIANT 1|2 {p.packets} {p.preps}` with `BENCH_FW_RING=2048` (the",
      "default ring: \"1 thread\", \"2 threads\") and, on 2 threads, `BENCH_FW_RING=64` (\"ring 64\": a ring of",
      "one burst, TX completing each as soon as it is there). Million packets per second and ns per packet.", "")
    r("The one-thread regression since 1cb51e6 (issue 23: uslab bulk 0.87-0.95x DPDK there, 0.80-0.84x",
      "at f2bd893): 2d8660b made the bulk free's move (into main, the caller's array cleared, the",
      "NULL test) a loop of 8-byte stores where memcpy and memset had stored 32 bytes at a time.",
      "Instructions, `valgrind --tool=callgrind forward-uslab bulk 1 2000000 1` (whole run, exact):",
      "1cb51e6 70.4M, 2d8660b~1 71.5M, 2d8660b 75.6M, fbd1d27 (handle checks) 76.9M, f2bd893 76.2M;",
      "with the vector copies (the library's in AVX2, picked by an ifunc) and the exported calls'",
      "copy straight into and out of main, 67.2M (-4.6% against 1cb51e6, -11.8% against f2bd893).",
      "Timed on the shared 2-core VM, alternated, the four programs were within noise of each other.", "")
    rows, dat = [], []
    for v in NAMES:
        row = [v]
        for n in COLUMNS:
            m = h.get("forward", w4(v), n, "mpps")
            row += [fmt(m, "%.1f"), fmt(h.get("forward", w4(v), n, "ns"), "%.3f"),
                    div(m, h.get("forward", w4("uslab-single"), n, "mpps")),
                    div(m, h.get("forward", w4("dpdk"), n, "mpps"))]
        rows.append(row)
        dat.append([v] + [h.get("forward", w4(v), n, "mpps") for n in COLUMNS])
    head = ["variant"]
    for t in ("1 thread", "2 threads", "2 threads, ring 64"):
        head += [f"{t} Mpps", "ns/packet", "x single", "x DPDK"]
    r.table(head, rows)
    f = h.dat("forward.dat", dat)
    h.clustered("forward.png", f, "packet forwarding, 256-byte heads, bursts of 64 (higher is better)",
                "million packets per second", ["1 thread", "2 threads (RX, TX completion)", "2 threads, ring of 64"])
    r.image("forward", "forward.png")


def _vs_single(v, n):
    return lambda h, p: (ratio(h.get("forward", w4(v), n, "mpps"), h.get("forward", w4("uslab-single"), n, "mpps")),
                         None)


def _best(h, n):
    got = [(h.get("forward", w4(v), n, "mpps"), v) for v in USLAB]
    got = [x for x in got if x[0] is not None]
    return max(got) if got else (None, "-")


def _best_vs_dpdk(n):
    return lambda h, p: (ratio(_best(h, n)[0], h.get("forward", w4("dpdk"), n, "mpps")), None)


GOALS = []
for _n in COLUMNS:
    GOALS += [
        Goal(f"P5 {_n} magazine (per packet) >= 1.5x single", _vs_single("uslab-magazine", _n), ">=", 1.5),
        Goal(f"P5 {_n} magazine (bursts of 64, magbulk) >= 1.5x single", _vs_single("uslab-magbulk", _n), ">=", 1.5),
        Goal(lambda h, p, n=_n: f"P5 {n} best uslab ({_best(h, n)[1]}) >= 1.2x DPDK", _best_vs_dpdk(_n), ">=", 1.2),
    ]
