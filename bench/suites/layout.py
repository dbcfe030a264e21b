"""Slab layouts side by side (issue 11): the scattered drain, the seed's table and the metadata per layout."""

import os
from types import SimpleNamespace as NS

from harness import FIRST4, Goal, div, fmt, ratio, w4, worst

ORDER = 100
PLOTS = ["drain.png", "objfreelist.png"]
HEADINGS = [
    "## Slab layouts: the scattered full drain (issue 11)",
    "## Slab layouts: the seed's OBJFREELIST table (issue 11)",
    "## Slab layouts: memory (issue 11)",
]
LAYOUTS = ["freeptr", "objfreelist", "onslab", "offslab", "auto"]
ENUM = {1: "freeptr", 2: "objfreelist", 3: "onslab", 4: "offslab"}
DR_SIZES = [64, 256, 1024]
DR_ROUNDS = 3
# "-resident": slabs emptied by the frees keep their pages (no purge within
# the run, no retention cap), so the layouts are compared without the OS
# layer's madvise and page faults; the BENCH_LAYOUT_ASIS layouts also run
# with the defaults.
RESIDENT = {"USLAB_PURGE_DELAY_MS": "600000", "USLAB_RETAIN_KB": "16777216"}
RESIDENT_TEXT = " ".join(f"{k}={v}" for k, v in RESIDENT.items())
# The seed's table compares the layouts where they matter, at the slabs: the
# barn's depth pinned, so an alloc-N-free-N loop is not kept whole in sheaves.
SLAB_PATH = {"USLAB_BARN_MAX_MB": "0"}
# The seed's kernel SLAB, kmalloc/kfree cycles: N -> (before, after) OBJFREELIST.
SEED = {32: ("116/78", "117/78"), 64: ("121/80", "124/81"), 128: ("168/85", "130/84"),
        256: ("287/95", "177/92"), 512: ("370/117", "286/112"), 1024: ("413/156", "344/141"),
        2048: ("622/248", "519/210"), 4096: ("1102/452", "789/391")}
MEM = [f"{s}{c}" for s in (64, 96, 192, 256, 1024) for c in ("", "-ctor")]


def lname(x):
    """The name of a layout from its enum value (the CSV's "layout" metric)."""
    if x is None:
        return "-"
    return ENUM.get(int(x), "%g" % x) if x == int(x) else "%g" % x


def setup(h):
    drain_reps = os.environ.get("BENCH_DRAIN_REPS")
    return NS(dr_n=h.size(1048576, 131072, 8192),
              dr_reps=int(drain_reps) if drain_reps else h.size(1, h.reps),
              asis=os.environ.get("BENCH_LAYOUT_ASIS", "auto").split(),
              of_loops=h.size(100000, 20000, 2000), of_reps=h.size(5, 3, 1),
              of_procs=h.size(min(h.reps, 2), h.reps), lm_objs=h.size(100000, 20000, 2000))


def names(p):
    return ([f"uslab-{lay}-resident" for lay in LAYOUTS] + [f"uslab-{lay}" for lay in p.asis] + ["uslab-pool"]
            + ["dpdk", "mimalloc"])


def ly_run(h, rep, cmd, resident=False, env=None):
    """One process, USLAB_LAYOUT unset (and the OS layer's settings raised
    when resident), its CSV lines into raw.csv as run rep."""
    e = dict(RESIDENT) if resident else {}
    e.update(env or {})
    h.run(rep, cmd, env=e, unset=("USLAB_LAYOUT", "USLAB_PURGE_DELAY_MS", "USLAB_RETAIN_KB"))


def run(h, p):
    h.log(f"layout: scattered full drain of {p.dr_n} objects ({' '.join(map(str, DR_SIZES))} B), "
          "each layout vs DPDK and mimalloc, first 4 bytes written")
    # The drain writes one word of each object after the refill; BENCH_WRITE=first4: a
    # 4-byte field (issue 34). bench/regress (goals_only): the goal rows' 256 B variants.
    goal = h.goals_only
    for s in DR_SIZES if not goal else (256,):
        for r in h.repetitions(p.dr_reps):
            for lay in LAYOUTS if not goal else ("auto",):
                ly_run(h, r, [h.exe("drain-uslab"), s, p.dr_n, DR_ROUNDS, lay], resident=True, env=FIRST4)
            for lay in p.asis if not goal else ("auto",):
                ly_run(h, r, [h.exe("drain-uslab"), s, p.dr_n, DR_ROUNDS, lay], env=FIRST4)
            # Pool mode (USLAB_POOL, a reserve of N): DPDK's shape, issue 23.
            ly_run(h, r, [h.exe("drain-uslab"), s, p.dr_n, DR_ROUNDS, "pool"], env=FIRST4)
            for peer in ("dpdk", "mimalloc"):
                ly_run(h, r, [h.exe(f"drain-{peer}"), s, p.dr_n, DR_ROUNDS], env=FIRST4)
    h.log("layout: the seed's OBJFREELIST table (alloc then free, N = 32..4096), per layout")
    for r in h.repetitions(p.of_procs):
        ly_run(h, r, [h.exe("objfreelist"), "table", p.of_loops, p.of_reps], resident=True,
               env=SLAB_PATH)
    if not goal:
        # Through the kmalloc classes: one process each way (USLAB_LAYOUT=freeptr, unset).
        ly_run(h, 1, [h.exe("objfreelist"), "kmalloc", p.of_loops, p.of_reps], resident=True,
               env=dict(SLAB_PATH, USLAB_LAYOUT="freeptr"))
        ly_run(h, 1, [h.exe("objfreelist"), "kmalloc", p.of_loops, p.of_reps], resident=True,
               env=SLAB_PATH)
    h.log("layout: metadata and slab memory per layout")
    ly_run(h, 1, [h.exe("objfreelist"), "memory", p.lm_objs])


def report(h, p, r):
    def g(b, v, n, m):
        return h.get(b, v, n, m)

    r.heading(HEADINGS[0])
    r.describe("drain")
    r(f"Ran: `BENCH_WRITE=first4 drain-<peer> SIZE {p.dr_n} {DR_ROUNDS} [LAYOUT]` for SIZE "
      f"{', '.join(map(str, DR_SIZES))}, the median of",
      f"{p.dr_reps} process(es) per variant; uslab-LAYOUT-resident: with `{RESIDENT_TEXT}`, so slabs the drain",
      "empties keep their pages (the layouts compared without madvise and page faults); uslab-LAYOUT",
      f"without the suffix ({' '.join(p.asis)}: BENCH_LAYOUT_ASIS), the OS layer's defaults (a freed page unused",
      "for one to two ticks of USLAB_PURGE_DELAY_MS = 20 ms is purged; at most USLAB_RETAIN_KB = 1 GiB kept).")
    for s in DR_SIZES:
        r("", f"{s}-byte objects:", "")
        rows = []
        for v in names(p):
            d = w4(v)
            if h.has("drain", d, s, "na"):
                rows.append((v, "n/a (EINVAL)", "", "", "", "", "", "", ""))
                continue
            x = g("drain", d, s, "ns")
            rows.append((v, lname(g("drain", d, s, "layout")), f"{fmt(g('drain', d, s, 'free_ns'), '%.1f')} ns",
                         f"{fmt(g('drain', d, s, 'alloc_ns'), '%.1f')} ns",
                         f"{fmt(g('drain', d, s, 'cycles'), '%.0f')} cycles(tsc) {fmt(x, '%.3f')} ns",
                         div(x, g("drain", w4("mimalloc"), s, "ns")), div(x, g("drain", w4("dpdk"), s, "ns")),
                         f"{fmt(g('drain', d, s, 'touch_ns'), '%.1f')} ns",
                         f"{fmt(g('drain', d, s, 'peak_rss_mb'), '%.0f')} MB"))
        r.table(["variant", "layout", "free", "alloc", "per op", "x mimalloc", "x DPDK", "touch", "peak RSS"], rows)
    f = h.dat("drain.dat", [[v] + [fmt(g("drain", w4(v), s, "ns"), "%.3f") for s in DR_SIZES] for v in names(p)])
    h.clustered("drain.png", f, f"scattered full drain, {p.dr_n} objects, per free or alloc (lower is better; log scale)",
                "ns per operation", ["64 B", "256 B", "1 KiB"], settings="set logscale y\nset key top left",
                size="900,450")
    r.image("drain", "drain.png")

    r.heading(HEADINGS[1])
    r.describe("objfreelist")
    r(f"Ran: `{RESIDENT_TEXT} USLAB_BARN_MAX_MB=0 objfreelist table {p.of_loops} {p.of_reps}`, {p.of_procs}",
      "process(es), medians. USLAB_BARN_MAX_MB=0 pins the barn's depth at USLAB_BARN_MAX_FULL, so the",
      "sheaves refill from and flush to the slabs: a deeper barn keeps the freed set whole in sheaves and",
      "no layout is involved. FREEPTR is \"before\", AUTO \"after\"; the last column is the seed's kernel SLAB",
      "(kmalloc/kfree, before -> after OBJFREELIST), for the shape only.", "")

    def af(v, n):
        return f"{fmt(g('objfreelist', v, n, 'alloc_cycles'), '%.0f')} / {fmt(g('objfreelist', v, n, 'free_cycles'), '%.0f')}"

    rows, dat = [], []
    for n, (before, after) in SEED.items():
        row = [n, af("uslab-freeptr", n), af("uslab-auto", n), lname(g("objfreelist", "uslab-auto", n, "layout")),
               div(g("objfreelist", "uslab-auto", n, "alloc_cycles"), g("objfreelist", "uslab-freeptr", n, "alloc_cycles")),
               div(g("objfreelist", "uslab-auto", n, "free_cycles"), g("objfreelist", "uslab-freeptr", n, "free_cycles"))]
        for lay in ("objfreelist", "onslab", "offslab"):
            row.append("n/a" if h.has("objfreelist", f"uslab-{lay}", n, "na") else af(f"uslab-{lay}", n))
        rows.append(row + [f"{before} -> {after}"])
        dat.append([n] + [fmt(g("objfreelist", f"uslab-{lay}", n, "free_cycles"), "%.1f") for lay in LAYOUTS])
    r.table(["N", "freeptr alloc / free", "auto alloc / free", "auto chose", "auto/freeptr alloc", "auto/freeptr free",
             "objfreelist", "onslab", "offslab", "seed SLAB before -> after"], rows)
    f = h.dat("objfreelist.dat", dat)
    h.plot("objfreelist.png", f"""set title "{p.of_loops} allocs then {p.of_loops} frees: cycles per free by layout (lower is better)"
set xlabel "object size (bytes, log)"
set ylabel "TSC cycles per free"
set datafile missing "-"
set logscale x 2
set grid
set yrange [0:*]
set key top left
plot for [i=2:6] "{f}" using 1:i with linespoints title word("{' '.join(LAYOUTS)}", i - 1)
""")
    r.image("objfreelist", "objfreelist.png")
    r("", f"The same through the size classes: `objfreelist kmalloc {p.of_loops} {p.of_reps}` in two processes (one run",
      "each), `USLAB_LAYOUT=freeptr` and unset (auto), with the same settings.", "")
    r.table(["N", "USLAB_LAYOUT=freeptr alloc / free", "unset: alloc / free", "unset chose", "free ratio"],
            [(n, af("kmalloc-freeptr", n), af("kmalloc-auto", n), lname(g("objfreelist", "kmalloc-auto", n, "layout")),
              div(g("objfreelist", "kmalloc-auto", n, "free_cycles"), g("objfreelist", "kmalloc-freeptr", n, "free_cycles")))
             for n in SEED])

    r.heading(HEADINGS[2])
    r.describe("objfreelist")
    r(f"Ran: `objfreelist memory {p.lm_objs}`.", "")
    rows = []
    for q in MEM:
        for lay in LAYOUTS:
            if h.has("layoutmem", lay, q, "na"):
                rows.append((q, lay, "n/a (EINVAL)", "", "", "", "", "", ""))
                continue

            def m(x, f):
                return fmt(g("layoutmem", lay, q, x), f)
            lc = f"auto -> {lname(g('layoutmem', 'auto', q, 'layout'))}" if lay == "auto" else lay
            rows.append((q, lc, m("objperslab", "%.0f"), m("pagesperslab", "%.0f"), m("meta_bytes", "%.0f B"),
                         m("meta_per_obj", "%.2f B"), m("meta_pct", "%.2f%%"), m("mem_per_live", "%.3f"),
                         m("colours", "%.0f")))
    r.table(["size", "layout", "objects / slab", "pages / slab", "metadata / slab", "/ object", "% of slab",
             "slab bytes per live byte", "colours"], rows)


def _drain(v, peer):
    return lambda h, p: (ratio(h.get("drain", w4(v), 256, "ns"), h.get("drain", w4(peer), 256, "ns")), None)


def _other_n(h):
    """The N where auto chose another layout than freeptr (else both columns
    are the same layout, and any difference is noise)."""
    return [n for n in SEED if lname(h.get("objfreelist", "uslab-auto", n, "layout")) != "freeptr"]


def _seed(metric):
    def measure(h, p):
        v, _ = _worst_seed(h, metric)
        return v, None
    return measure


def _worst_seed(h, metric):
    return worst([(ratio(h.get("objfreelist", "uslab-auto", n, metric), h.get("objfreelist", "uslab-freeptr", n, metric)), n)
                  for n in _other_n(h)])


def _meta(h, p):
    v, q = _worst_meta(h)
    return v, f"{fmt(v, '%.2f')}%"


def _worst_meta(h):
    return worst([(h.get("layoutmem", "auto", q, "meta_pct"), q) for q in MEM])


GOALS = []
for _v in ("uslab-auto", "uslab-auto-resident"):
    GOALS += [
        Goal(f"scattered full drain, 256 B, {_v} <= 0.25x mimalloc", _drain(_v, "mimalloc"), "<=", 0.25),
        Goal(f"scattered full drain, 256 B, {_v} <= 3x DPDK", _drain(_v, "dpdk"), "<=", 3),
    ]
GOALS += [
    Goal("scattered full drain, 256 B, pool mode (uslab-pool) <= 1.2x DPDK (issue 23)",
         _drain("uslab-pool", "dpdk"), "<=", 1.2),
    Goal("scattered full drain, 256 B, default mode (uslab-auto) <= 0.5x mimalloc (issue 23)",
         _drain("uslab-auto", "mimalloc"), "<=", 0.5),
    Goal("scattered full drain, 256 B, default mode (uslab-auto) <= 1.0x mimalloc (issue 34)",
         _drain("uslab-auto", "mimalloc"), "<=", 1.0),
    Goal(lambda h, p: "seed table: auto's free <= freeptr's at every N where it is another layout "
         f"(N = {' '.join(map(str, _other_n(h)))}; worst N = {_worst_seed(h, 'free_cycles')[1]})",
         _seed("free_cycles"), "<=", 1),
    Goal(lambda h, p: f"seed table: auto's alloc <= 1.05x freeptr's, same N (worst N = {_worst_seed(h, 'alloc_cycles')[1]})",
         _seed("alloc_cycles"), "<=", 1.05),
    Goal(lambda h, p: f"metadata <= 1% of slab memory, auto, 64 B and more (worst: {_worst_meta(h)[1]})", _meta, "<=", 1),
]
