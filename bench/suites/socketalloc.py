"""Socket allocation (issue 14, bench_socketalloc.c): N threads in the wall time of one; then many threads at once."""

import re
import time
from types import SimpleNamespace as NS

from harness import FIRST4, Failure, Goal, div, fmt, ratio, w4

ORDER = 140
GOALS_INLINE = True
PLOTS = ["socketalloc.png"]
HEADINGS = ["## Socket allocation: N threads in the wall time of one (issue 14)", "### Many threads on {nproc} cores"]
VARIANTS = ["2008", "p1", "p2", "p3", "p4", "p5", "p6", "p7", "uslab", "uslab-nodefer", "uslab-late"]
PEERS = ["uslab", "glibc", "mimalloc", "jemalloc", "tcmalloc"]


def setup(h):
    # uslab-late needs 4 turns of its 8192-entry ring per thread: 32768 cycles.
    # cycles_2m: issue 34's goal row, 2 threads x 2M cycles against 1 thread x 2M.
    return NS(cycles=h.size(1000000, 100000, 32768), th_ops=h.size(200000000, 4000000, 256000),
              stress=h.size([25, 5], [25, 2], [2, 1]), cycles_2m=h.size(2000000, 2000000, 32768))


def run(h, p):
    # socketalloc VARIANT N CYCLES REPS, one process per run (REPS 1; 5 for the
    # uslab variants, whose runs are short enough for the machine's noise).
    # 1, 2 and 4 threads do p.cycles each; 64 threads p.cycles / 32 each, 256
    # threads (uslab variants only) p.cycles / 128: the same total as two
    # threads, so throughput and wall time compare directly. A variant's
    # thread counts run back to back: the ratios compare runs seconds apart,
    # not minutes (the machine's load drifts).
    # Every run with BENCH_WRITE=first4: a 4-byte store at offset 0 right after each inode's and
    # dentry's allocation (bench_socketalloc.c), the variant named w4(v).
    h.log("socketalloc: the seed's socket allocation, 2008 -> each patch -> uslab, 1 2 4 64 (256) threads")
    for r in h.repetitions():
        for v in VARIANTS if not h.goals_only else ["uslab"]:
            ri = 5 if v.startswith("uslab") else 1
            for n in (1, 2, 4, 64, 256) if not h.goals_only else (1, 2, 64):
                c = {64: p.cycles // 32, 256: p.cycles // 128}.get(n, p.cycles)
                if n == 256 and ri == 1:
                    continue
                if v == "uslab-late" and c < 32768:
                    continue
                h.run(r, [h.exe("socketalloc"), v, n, c, ri], env=FIRST4)
        for n in (1, 2):
            h.run(r, [h.exe("socketalloc"), "uslab", n, p.cycles_2m, 5], env=FIRST4,
                  rename=lambda f: ["socketalloc-2M"] + f[1:])
    if h.goals_only:
        return
    h.log(f"many threads: threads-<peer> and the stress test at 2, 64 and 256 threads on {h.nproc} cores")
    for r in h.repetitions():
        for n in (2, 64, 256):
            for v in PEERS:
                h.run(r, [h.exe(f"threads-{v}"), n, 256, p.th_ops // n, 1],
                      rename=lambda f: ["threads-many"] + f[1:] if f[0] == "threads" else f)
            t0 = time.monotonic()
            text = h.command([h.exe("stress"), n] + p.stress)
            t = time.monotonic() - t0
            m = re.search(r"^ok stress.*: ([0-9]+) objects", text, re.M)
            if not m:
                raise Failure(f"stress {n} {' '.join(map(str, p.stress))}: no 'ok' line")
            h.store.add(r, "stress", "uslab", f"{n}T", "mobjs", "%.4f" % (int(m.group(1)) / (t * 1e6)))


def report(h, p, r):
    def sa(v, n, m):
        return h.get("socketalloc", w4(v), n, m)

    r.heading(HEADINGS[0])
    r.describe("socketalloc")
    r("Ran: `BENCH_WRITE=first4 socketalloc VARIANT N CYCLES 1` (REPS 5 for the uslab variants), each variant's",
      f"thread counts back to back: 1, 2, 4 threads {p.cycles} cycles each; 64 threads {p.cycles // 32} each (the",
      f"2-thread total), 256 threads (uslab variants) {p.cycles // 128} each; uslab-late only where its ring turns",
      f"over (CYCLES >= 32768). {h.nproc} CPUs. Ratios: to 1 thread.", "")
    rows = []
    for v in VARIANTS:
        t1, t2, t4 = sa(v, "1T", "wall_s"), sa(v, "2T", "wall_s"), sa(v, "4T", "wall_s")
        rows.append((v, f"{fmt(t1, '%.3f')} s", f"{fmt(t2, '%.3f')} s", div(t2, t1), f"{fmt(t4, '%.3f')} s",
                     div(t4, t1), fmt(sa(v, "64T", "mcps"), "%.2f"), div(sa(v, "64T", "mcps"), sa(v, "2T", "mcps"))))
    r.table(["variant", "1T wall", "2T wall", "2T / 1T", "4T wall", "4T / 1T", "64T Mcycles/s",
             "64T / 2T throughput"], rows)
    r("", "Latency of one cycle (p50 / p99 / p999):", "")
    r.table(["variant", "1T", "2T", "64T"],
            [[v] + [" / ".join(fmt(sa(v, n, q), "%.0f") for q in ("p50_ns", "p99_ns", "p999_ns")) + " ns"
                    for n in ("1T", "2T", "64T")] for v in VARIANTS])
    f = h.dat("socketalloc.dat", [[v] + [sa(v, n, "wall_s") for n in ("1T", "2T", "4T")] for v in VARIANTS])
    h.plot("socketalloc.png", f"""set title "socketalloc: wall time of N threads x {p.cycles} cycles each ({h.nproc} cores; lower is better)"
set ylabel "seconds (log)"
set datafile missing "-"
set logscale y
set style data histogram
set style histogram cluster gap 1
set style fill solid 0.8 border -1
set grid ytics
set key top right
set xtics rotate by -30
plot "{f}" using 2:xtic(1) title "1 thread", '' using 3 title "2 threads", '' using 4 title "4 threads"
""", size="900,450")
    r.image("socketalloc", "socketalloc.png")
    w1, w2 = h.get("socketalloc-2M", w4("uslab"), "1T", "wall_s"), h.get("socketalloc-2M", w4("uslab"), "2T", "wall_s")
    r("", f"Issue 34's row, `BENCH_WRITE=first4 socketalloc uslab 1|2 {p.cycles_2m} 5`, alternated with the runs",
      f"above: {fmt(w1, '%.3f')} s on 1 thread, {fmt(w2, '%.3f')} s on 2 ({div(w2, w1)}x).", "")
    r.goals(h, p, GOALS)

    r.heading(HEADINGS[1].format(nproc=h.nproc))
    r("Memory the caches hold while every thread is done with its loop and alive (held: objects",
      "handed out of slabs that the program no longer holds: sheaves, barns, deferred frees):", "")

    def kb(b, v, n):
        return f"{fmt(h.get(b, w4(v) if b == 'socketalloc' else v, n, 'held_kb'), '%.0f')} KB"

    r.table(["benchmark", "2 threads", "64 threads", "256 threads"],
            [("socketalloc uslab, held", *(kb("socketalloc", "uslab", n) for n in ("2T", "64T", "256T"))),
             ("socketalloc uslab-nodefer, held", *(kb("socketalloc", "uslab-nodefer", n) for n in ("2T", "64T", "256T"))),
             ("threads-uslab 256 B, held", *(kb("threads-many", "uslab", n) for n in ("2T", "64T", "256T")))])
    r("")
    r.describe("threads")
    r(f"Ran: `threads-<peer> N 256 {p.th_ops}/N 1` ({p.th_ops} pairs in all), nothing written.", "")
    rows = []
    for v in PEERS:
        def t(n, m, f):
            return fmt(h.get("threads-many", v, n, m), f)
        rows.append((v, t("2T", "mops", "%.1f"), t("64T", "mops", "%.1f"), t("256T", "mops", "%.1f"),
                     div(h.get("threads-many", v, "256T", "mops"), h.get("threads-many", v, "2T", "mops")),
                     " / ".join(t(n, "alloc_p999_ns", "%.0f") for n in ("2T", "64T", "256T")) + " ns",
                     " / ".join(t(n, "rss_mb", "%.1f") for n in ("2T", "64T", "256T")) + " MB"))
    r.table(["allocator", "2T Mpairs/s", "64T", "256T", "256T / 2T", "alloc p999 2T / 64T / 256T",
             "RSS 2T / 64T / 256T"], rows)
    s = [fmt(h.get("stress", "uslab", n, "mobjs"), "%.2f") for n in ("2T", "64T", "256T")]
    r("", f"`stress N {' '.join(map(str, p.stress))}` (tests/stress/stress.c, objects checked word by word, all freed on",
      f"another thread): {s[0]} / {s[1]} / {s[2]} million objects per second at 2 / 64 / 256 threads.")


def _wall2(v, bench="socketalloc"):
    return lambda h, p: ratio(h.get(bench, w4(v), "2T", "wall_s"), h.get(bench, w4(v), "1T", "wall_s"))


def _r2(h, p):
    v = _wall2("uslab")(h, p)
    others = ", ".join(f"{o}: {div(_wall2(o)(h, p), 1)}x" for o in ("2008", "uslab-nodefer", "uslab-late"))
    return v, f"{div(v, 1)}x ({others})"


GOALS = [
    Goal("uslab: 2 threads in <= 1.05x the 1-thread wall time", _r2, "<=", 1.05),
    Goal("uslab: 2 threads x 2M cycles in <= 1.35x the wall time of 1 thread x 2M (issue 34)",
         lambda h, p: (_wall2("uslab", "socketalloc-2M")(h, p), None), "<=", 1.35),
    Goal("uslab: 64 threads >= 0.95x the 2-thread throughput",
         lambda h, p: (ratio(h.get("socketalloc", w4("uslab"), "64T", "mcps"),
                             h.get("socketalloc", w4("uslab"), "2T", "mcps")), None),
         ">=", 0.95),
    Goal("uslab: 64-thread p999 <= 4x the 2-thread p999",
         lambda h, p: (ratio(h.get("socketalloc", w4("uslab"), "64T", "p999_ns"),
                             h.get("socketalloc", w4("uslab"), "2T", "p999_ns")), None),
         "<=", 4),
]
