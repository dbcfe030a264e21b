"""P2/P3: bulk alloc and free per object against single calls, DPDK and mimalloc (bench_bulk.c)."""

from types import SimpleNamespace as NS

from harness import Goal, div, fmt, ratio, w4, worst

ORDER = 40
PLOTS = ["bulk01.png"]
HEADINGS = [
    "## P2: bulk alloc and free (the seed's slab_bulk_test01)",
    "### slab_bulk_test02: repeated bulk calls, cycles per object",
    "### slab_bulk_test05: kfree_bulk against kmem_cache_free_bulk (issue 11)",
    "## P3: the worst case (slab_bulk_test03), chunks of 64 from a large live set",
]
BULK_PEERS = ["uslab", "uslab-call", "dpdk", "mimalloc"]
N = [1, 2, 3, 4, 8, 16, 30, 32, 34, 48, 64, 128, 158, 250]
# test03: (program, USLAB_LOOKAHEAD, USLAB_SHEAF_CAPACITY); the program names its variant.
T3 = [("uslab", 0, None), ("uslab", 3, None), ("uslab", 8, None), ("uslab", 0, 1), ("uslab", 3, 1),
      ("uslab", 8, 1), ("dpdk", None, None), ("mimalloc", None, None)]
T3_NAMES = ["uslab-la0", "uslab-la3", "uslab-la8", "uslab-la0-nosheaf", "uslab-la3-nosheaf",
            "uslab-la8-nosheaf", "dpdk", "mimalloc"]
# test03 with nothing written too (the seed's case): the goal rows' three.
T3_NONE = ["uslab-la3", "dpdk", "mimalloc"]


def setup(h):
    return NS(b1=h.size(2000000, 200000, 20000), b2=h.size(200000, 20000, 4096), b2_repeat=h.size(100, 20, 3),
              b3_live=h.size(1000000, 100000, 10000), b3_ops=h.size(200000, 20000, 2000))


def run(h, p):
    h.log("P2/P3: bulk alloc/free (the seed's slab_bulk_test01/02/03), objects written and not")
    if h.goals_only:
        h.alternate("bulk", ["test01", p.b1], ["uslab", "dpdk"], writes=("first4",))
        h.alternate("bulk", ["test05", p.b1], ["uslab"], writes=("first4",))
    else:
        h.alternate("bulk", ["test01", p.b1], BULK_PEERS, writes=("none", "first4"))
        h.alternate("bulk", ["test02", p.b2, p.b2_repeat], ["uslab", "dpdk"])
        h.alternate("bulk", ["test05", p.b1], ["uslab"], writes=("none", "first4"))
    for r in h.repetitions():
        for (prog, la, cap), name in zip(T3, T3_NAMES):
            env = {}
            if la is not None:
                env["USLAB_LOOKAHEAD"] = str(la)
            if cap is not None:
                env["USLAB_SHEAF_CAPACITY"] = str(cap)
            if h.goals_only and name not in T3_NONE:
                continue
            writes = ("none", "first4") if name in T3_NONE and not h.goals_only else ("first4",)
            for w in writes:
                h.run(r, [h.exe(f"bulk-{prog}"), "test03", p.b3_live, 64, p.b3_ops], env=dict(env, BENCH_WRITE=w))


def report(h, p, r):
    def g(t, v, n, m):
        return h.get(t, v, n, m)

    U, D, M = w4("uslab"), w4("dpdk"), w4("mimalloc")
    r.heading(HEADINGS[0])
    r.describe("bulk")
    r(f"Ran: `BENCH_WRITE=first4 bulk-<peer> test01 {p.b1}` (every object's first 4 bytes written: the goal rows);",
      f"the last two columns: nothing written, as in the seed's module (`bulk-<peer> test01 {p.b1}`).", "")
    rows, dat = [], []
    for n in N:
        uf, ub = g("test01", U, n, "fallback_ns"), g("test01", U, n, "bulk_ns")
        df, db = g("test01", D, n, "fallback_ns"), g("test01", D, n, "bulk_ns")
        mb = g("test01", M, n, "bulk_ns")
        pb = g("test01", U, n, "pool_ns")
        ub0, db0 = g("test01", "uslab", n, "bulk_ns"), g("test01", "dpdk", n, "bulk_ns")
        imp = "-" if uf is None or ub is None else "%.1f%%" % (100 * (uf - ub) / uf)
        rows.append((n, f"{fmt(g('test01', U, n, 'fallback_cycles'), '%.0f')} cycles(tsc) {fmt(uf, '%.3f')} ns",
                     f"{fmt(g('test01', U, n, 'bulk_cycles'), '%.0f')} cycles(tsc) {fmt(ub, '%.3f')} ns",
                     imp, f"{fmt(df, '%.3f')} ns", f"{fmt(db, '%.3f')} ns", div(ub, db), f"{fmt(pb, '%.3f')} ns",
                     div(pb, db), f"{fmt(mb, '%.3f')} ns", f"{fmt(ub0, '%.3f')} ns", div(ub0, db0)))
        dat.append((n, ub, uf, db, g("test01", w4("uslab-call"), n, "bulk_ns"), mb, ub0))
    r.table(["n", "uslab fallback", "uslab bulk", "improved", "DPDK fallback", "DPDK bulk", "uslab/DPDK bulk",
             "uslab pool get/put", "pool/DPDK", "mimalloc bulk (loop)", "uslab bulk, nothing written",
             "uslab/DPDK, nothing written"], rows)
    f = h.dat("bulk01.dat", dat)
    h.plot("bulk01.png", f"""set title "bulk alloc+free, 256 bytes, first 4 bytes written, per object (lower is better)"
set xlabel "objects per call (log)"
set ylabel "ns per object"
set datafile missing "-"
set logscale x 2
set grid
set yrange [0:*]
set key top right
plot "{f}" using 1:2 with linespoints title "uslab bulk (inline)", \\
     "" using 1:5 with linespoints title "uslab bulk (library call)", \\
     "" using 1:3 with linespoints title "uslab fallback (single calls)", \\
     "" using 1:4 with linespoints title "DPDK mempool bulk", \\
     "" using 1:6 with linespoints title "mimalloc (loop of single calls)", \\
     "" using 1:7 with linespoints dashtype 2 title "uslab bulk, nothing written"
""")
    r.image("bulk", "bulk01.png")

    r.heading(HEADINGS[1])
    r(f"Ran: `bulk-<peer> test02 {p.b2} {p.b2_repeat}`, nothing written (the seed's case).", "")

    def t2(v, n):
        return (f"{fmt(g('test02', v, n, 'min'), '%.1f')} / {fmt(g('test02', v, n, 'avg'), '%.2f')} / "
                f"{fmt(g('test02', v, n, 'max'), '%.1f')} / {fmt(g('test02', v, n, 'stddev'), '%.2f')}")

    r.table(["n", "uslab min / avg / max / stddev", "DPDK min / avg / max / stddev"],
            [(n, t2("uslab", n), t2("dpdk", n)) for n in (16, 48, 144, 512, 2048)])

    r.heading(HEADINGS[2])
    r(f"Ran: `BENCH_WRITE=first4 bulk-uslab test05 {p.b1}`; last column: kfree_bulk / free_bulk(c) with nothing",
      f"written (`bulk-uslab test05 {p.b1}`).", "")
    rows = []
    for n in N:
        a, b = g("test05", U, n, "cache_cycles"), g("test05", U, n, "kfree_bulk_cycles")
        rows.append((n, fmt(a, "%.0f"), fmt(b, "%.0f"), div(b, a), fmt(g("test05", U, n, "kfree_cycles"), "%.0f"),
                     div(g("test05", "uslab", n, "kfree_bulk_cycles"), g("test05", "uslab", n, "cache_cycles"))))
    r.table(["n", "free_bulk(c)", "kfree_bulk", "kfree_bulk / free_bulk(c)", "kfree loop",
             "kfree_bulk / free_bulk(c), nothing written"], rows)

    r.heading(HEADINGS[3])
    r(f"Ran: `BENCH_WRITE=first4 bulk-<peer> test03 {p.b3_live} 64 {p.b3_ops}`, uslab with USLAB_LOOKAHEAD=0, 3, 8",
      "(\"la\") and each also with USLAB_SHEAF_CAPACITY=1 (\"nosheaf\"); nothing written (uslab-la3, dpdk,",
      "mimalloc): the same without BENCH_WRITE.", "")
    d3, d30 = g("test03", D, 64, "ns"), g("test03", "dpdk", 64, "ns")
    rows = []
    for v in T3_NAMES:
        x, x0 = g("test03", w4(v), 64, "ns"), g("test03", v, 64, "ns")
        rows.append((v, f"{fmt(g('test03', w4(v), 64, 'cycles'), '%.0f')} cycles(tsc) {fmt(x, '%.3f')} ns", div(x, d3),
                     f"{fmt(x0, '%.3f')} ns" if v in T3_NONE else "", div(x0, d30) if v in T3_NONE else ""))
    r.table(["variant", "per object", "ratio to DPDK", "nothing written", "ratio to DPDK, nothing written"], rows)


N_DPDK = [n for n in N if 8 <= n <= 250]  # the goal's range (issues 23, 34)
U, D = w4("uslab"), w4("dpdk")  # the goal rows judge objects written


def _worst_n_vs_dpdk(h):
    return worst([(ratio(h.get("test01", U, n, "bulk_ns"), h.get("test01", D, n, "bulk_ns")), n) for n in N_DPDK])


def _worst_vs_dpdk(h, p):
    return _worst_n_vs_dpdk(h)[0], None


def _flat(h, p):
    xs = [x for x in (h.get("test01", U, n, "bulk_ns") for n in N) if x is not None]
    v = max(xs) / min(xs) if xs and min(xs) > 0 else None
    return v, fmt(v, "%.2f")


def _t3(peer):
    return lambda h, p: (ratio(h.get("test03", w4("uslab-la3"), 64, "ns"), h.get("test03", w4(peer), 64, "ns")), None)


def _k5(h, p):
    v, _ = worst([(ratio(h.get("test05", U, n, "kfree_bulk_cycles"), h.get("test05", U, n, "cache_cycles")), n)
                  for n in N])
    return v, None


GOALS = [
    Goal(lambda h, p: "P2 bulk per object, written, <= 1.0x DPDK for every n from 8 to 250 "
         f"(worst: n = {_worst_n_vs_dpdk(h)[1]}; issues 23, 34)", _worst_vs_dpdk, "<=", 1.0),
    Goal("P2 flat, written: max/min over n = 1..250 <= 2", _flat, "<=", 2),
    Goal("P2 n = 1 bulk, written, <= 1.1x the single path",
         lambda h, p: (ratio(h.get("test01", U, 1, "bulk_ns"), h.get("test01", U, 1, "fallback_ns")), None),
         "<=", 1.1),
    Goal("P3 scattered chunks of 64, written, <= 2x DPDK", _t3("dpdk"), "<=", 2),
    Goal("P3 scattered chunks of 64, written, <= 0.5x mimalloc", _t3("mimalloc"), "<=", 0.5),
    Goal("kfree_bulk <= 1.2x free_bulk(c), written, n = 1..250 (worst n; test05)", _k5, "<=", 1.2),
]
