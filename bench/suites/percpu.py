"""Per-CPU sheaves (issue 25): per-thread against per-CPU sheaves (USLAB_PERCPU=0, 1) at 2 to 256 threads."""

from types import SimpleNamespace as NS

from harness import FIRST4, W4, Goal, div, fmt, ratio, w4

ORDER = 145
HEADINGS = ["## Per-CPU sheaves: many threads on {nproc} cores (issue 25)"]
MODES = [("perthread", {"USLAB_PERCPU": "0"}), ("percpu", {"USLAB_PERCPU": "1"})]
THREADS = (2, 4, 8, 16, 64, 256)
PEERS = ["mimalloc", "tcmalloc"]


SA_THREADS = (2, 64, 256)


def setup(h):
    return NS(ops=h.size(400000000, 40000000, 256000), pair=h.size(20000000, 4000000, 200000),
              sa_cycles=h.size(2000000, 400000, 32768),
              mt_ops=h.size(20000000, 4000000, 256000), threads=h.size(THREADS, THREADS, (2, 64, 256)))


def mode_rename(mode, bench):
    """The line's variant replaced by the mode, "-w4" kept (every run here is BENCH_WRITE=first4)."""
    def rename(f):
        return [bench, mode + (W4 if f[1].endswith(W4) else "")] + f[2:]
    return rename


def wget(h, bench, mode, param, m):
    """A figure of a mode's run, objects written (BENCH_WRITE=first4, the goal rows)."""
    return h.get(bench, w4(mode), param, m)


def run(h, p):
    h.log("percpu: per-thread against per-CPU sheaves, threads-uslab at " +
          " ".join(map(str, p.threads)) + " threads, the pair, manythreads at 64")
    for r in h.repetitions():
        for n in p.threads:
            for mode, env in MODES:
                h.run(r, [h.exe("threads-uslab"), n, 256, max(p.ops // n, 1000), 1], env=dict(env, **FIRST4),
                      unset=("USLAB_PERCPU_THREADS",), rename=mode_rename(mode, "percpu-threads"))
        # The seed's socket cycle (three caches, dentries freed at once): the same total
        # cycles at every thread count.
        for n in SA_THREADS:
            for mode, env in MODES:
                h.run(r, [h.exe("socketalloc"), "uslab-nodefer", n, max(p.sa_cycles // n, 256), 3], env=dict(env, **FIRST4),
                      unset=("USLAB_PERCPU_THREADS",), rename=mode_rename(mode, "percpu-socket"))
        for mode, env in MODES:
            h.run(r, [h.exe("pair-uslab"), 256, p.pair, 3], env=dict(env, **FIRST4),
                  rename=mode_rename(mode, "percpu-pair"))
            h.run(r, [h.exe("manythreads-uslab"), 64, p.mt_ops, 1], env=dict(env, **FIRST4),
                  rename=mode_rename(mode, "percpu-many"))
        # auto (the default): the rule picks per N
        for n in p.threads if not h.goals_only else ():
            h.run(r, [h.exe("threads-uslab"), n, 256, max(p.ops // n, 1000), 1], env=FIRST4,
                  unset=("USLAB_PERCPU", "USLAB_PERCPU_THREADS"), rename=mode_rename("auto", "percpu-threads"))
        for v in PEERS:
            if not h.goals_only:
                h.run(r, [h.exe(f"threads-{v}"), 64, 256, max(p.ops // 64, 1000), 1], env=FIRST4,
                      rename=mode_rename(v, "percpu-threads"))
            h.run(r, [h.exe(f"manythreads-{v}"), 64, p.mt_ops, 1], env=FIRST4, rename=mode_rename(v, "percpu-many"))


def g(h, mode, n, m):
    return wget(h, "percpu-threads", mode, f"{n}T", m)


def p999_growth(h, n):
    """The larger of the alloc and free p999 at n threads over the 2-thread ones (per-CPU)."""
    rs = [ratio(g(h, "percpu", n, m), g(h, "percpu", 2, m)) for m in ("alloc_p999_ns", "free_p999_ns")]
    return None if None in rs else max(rs)


def peers_rss(h):
    rss = [wget(h, "percpu-many", v, "64T", "peak_rss_mb") for v in PEERS]
    return None if None in rss else min(rss)


def report(h, p, r):
    r.heading(HEADINGS[0].format(nproc=h.nproc))
    r.describe("threads", "threads-uslab")
    r(f"Ran: `threads-uslab N 256 {p.ops}/N 1` with `USLAB_PERCPU=0` (per-thread sheaves) and `=1` (per-CPU),",
      "alternated, medians (p999 in ns). `auto` is the default (`USLAB_PERCPU_THREADS=32`: per CPU from 65",
      "threads here). Every program of this section runs with `BENCH_WRITE=first4` (each object's first 4 bytes",
      "written, issue 34).", "")
    rows = []
    for n in p.threads:
        for mode in ("perthread", "percpu", "auto"):
            rows.append([f"{n}", mode, fmt(g(h, mode, n, "mops"), "%.1f"),
                         div(g(h, mode, n, "mops"), g(h, mode, p.threads[0], "mops")),
                         fmt(g(h, mode, n, "alloc_p999_ns"), "%.0f"), fmt(g(h, mode, n, "free_p999_ns"), "%.0f"),
                         fmt(g(h, mode, n, "held_kb"), "%.0f"), fmt(g(h, mode, n, "rss_mb"), "%.1f")])
    for v in PEERS:
        rows.append(["64", v, fmt(g(h, v, 64, "mops"), "%.1f"), "", fmt(g(h, v, 64, "alloc_p999_ns"), "%.0f"),
                     fmt(g(h, v, 64, "free_p999_ns"), "%.0f"), "", fmt(g(h, v, 64, "rss_mb"), "%.1f")])
    r.table(["threads", "sheaves", "M pairs/s", f"/ {p.threads[0]} threads", "alloc p999", "free p999",
             "held KiB", "RSS MB"], rows)
    pt = [wget(h, "percpu-pair", m, "256", "ns") for m, _ in MODES]
    r("")
    r.describe("pair", "pair-uslab")
    r(f"The one-thread pair (`pair-uslab 256 {p.pair} 3`, the inline paths): per-thread",
      f"{fmt(pt[0], '%.2f')} ns, per-CPU {fmt(pt[1], '%.2f')} ns ({div(pt[1], pt[0])}).", "")
    r.describe("socketalloc")
    r(f"Ran: `socketalloc uslab-nodefer N {p.sa_cycles}/N 3` (the dentry freed at once); million cycles per second",
      "over all threads, held_kb:", "")
    rows = []
    for n in SA_THREADS:
        row = [f"{n}"]
        for mode, _ in MODES:
            m = wget(h, "percpu-socket", mode, f"{n}T", "mcps")
            row += [fmt(m, "%.2f"), div(m, wget(h, "percpu-socket", mode, "2T", "mcps")),
                    fmt(wget(h, "percpu-socket", mode, f"{n}T", "held_kb"), "%.0f")]
        rows.append(row)
    r.table(["threads", "per-thread M cycles/s", "/ 2 threads", "held KiB", "per-CPU M cycles/s", "/ 2 threads",
             "held KiB"], rows)
    r("")
    rows = []
    for v in ["perthread", "percpu"] + PEERS:
        rows.append([v, fmt(wget(h, "percpu-many", v, "64T", "mops"), "%.1f"),
                     fmt(wget(h, "percpu-many", v, "64T", "peak_rss_mb"), "%.1f")])
    r.describe("manythreads", "manythreads-<peer>")
    r(f"Ran: `manythreads-<peer> 64 {p.mt_ops} 1`:", "")
    r.table(["allocator", "M steps/s", "peak RSS MB"], rows)


GOALS = [
    Goal("per-CPU: 64 threads >= 0.95x the 2-thread throughput",
         lambda h, p: (ratio(g(h, "percpu", 64, "mops"), g(h, "percpu", 2, "mops")), None), ">=", 0.95),
    Goal("per-CPU: 256 threads >= 0.95x the 2-thread throughput",
         lambda h, p: (ratio(g(h, "percpu", 256, "mops"), g(h, "percpu", 2, "mops")), None), ">=", 0.95, when=lambda h, p: 256 in p.threads),
    Goal("per-CPU: socketalloc 64 threads >= 0.95x the 2-thread throughput",
         lambda h, p: (ratio(wget(h, "percpu-socket", "percpu", "64T", "mcps"),
                             wget(h, "percpu-socket", "percpu", "2T", "mcps")), None), ">=", 0.95),
    Goal("per-CPU: socketalloc 256 threads >= 0.95x the 2-thread throughput",
         lambda h, p: (ratio(wget(h, "percpu-socket", "percpu", "256T", "mcps"),
                             wget(h, "percpu-socket", "percpu", "2T", "mcps")), None), ">=", 0.95),
    Goal("per-CPU: 256-thread sheaf memory <= 1.5x the 2-thread",
         lambda h, p: (ratio(g(h, "percpu", 256, "held_kb"), g(h, "percpu", 2, "held_kb")), None), "<=", 1.5, when=lambda h, p: 256 in p.threads),
    Goal("per-CPU: 64-thread p999 (alloc, free) <= 4x the 2-thread", lambda h, p: (p999_growth(h, 64), None),
         "<=", 4.0),
    Goal("per-CPU: 256-thread p999 (alloc, free) <= 4x the 2-thread", lambda h, p: (p999_growth(h, 256), None),
         "<=", 4.0, when=lambda h, p: 256 in p.threads),
    Goal("per-CPU: 2 threads >= 0.95x per-thread's 2 threads",
         lambda h, p: (ratio(g(h, "percpu", 2, "mops"), g(h, "perthread", 2, "mops")), None), ">=", 0.95),
    Goal("per-CPU: manythreads 64 peak RSS <= the lower of mimalloc's and tcmalloc's",
         lambda h, p: (ratio(wget(h, "percpu-many", "percpu", "64T", "peak_rss_mb"), peers_rss(h)), None), "<=", 1.0),
    Goal("per-CPU pair <= 2x the per-thread inline pair",
         lambda h, p: (ratio(wget(h, "percpu-pair", "percpu", "256", "ns"),
                             wget(h, "percpu-pair", "perthread", "256", "ns")), None), "<=", 2.0),
]
