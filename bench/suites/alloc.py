"""alloc: larson churn, cross-thread mixed sizes, many threads (issue 10): throughput and peak RSS per peer."""

from types import SimpleNamespace as NS

from harness import div, fmt
from suites import KPEERS

ORDER = 90
PLOTS = ["alloc.png", "alloc_rss.png"]
HEADINGS = ["## alloc: server churn, cross-thread frees, many threads (issue 10)"]
GOALS = []


def setup(h):
    return NS(larson=h.size([2, 20000, 50, 5000, 16, 1024, 5], [2, 20000, 10, 5000, 16, 1024, 3],
                            [2, 2000, 3, 500, 16, 1024, 1]),
              xt_count=h.size(2000000, 500000, 50000), xt_reps=h.size(3, 3, 1),
              mt_ops=h.size(20000000, 2000000, 200000), mt_reps=h.size(3, 3, 1))


def run(h, p):
    h.log(f"alloc: larson churn, cross-thread mixed sizes, 16 and 64 threads on {h.nproc} cores")
    h.alternate("larson", p.larson, KPEERS)
    for m in ("1to1", "2way"):
        h.alternate("xthread", [m, p.xt_count, p.xt_reps], KPEERS)
    for n in (16, 64):
        h.alternate("manythreads", [n, p.mt_ops, p.mt_reps], KPEERS)


def report(h, p, r):
    lt = f"{p.larson[0]}T"
    la = " ".join(map(str, p.larson))
    r.heading(HEADINGS[0])
    r("Throughput in million operations per second (higher is better), memory as the peak resident set",
      "of the process (VmHWM, MB).", "")
    r.describe("larson")
    r(f"Ran: `larson-<peer> {la}` (THREADS STEPS GENS SLOTS MIN MAX REPS).", "")
    rows = []
    for v in KPEERS:
        m = h.get("larson", v, lt, "mops")
        rows.append((v, fmt(m, "%.2f"), div(m, h.get("larson", "mimalloc", lt, "mops")),
                     div(m, h.get("larson", "glibc", lt, "mops")),
                     f"{fmt(h.get('larson', v, lt, 'peak_rss_mb'), '%.1f')} MB",
                     f"{fmt(h.get('larson', v, lt, 'end_rss_mb'), '%.1f')} MB"))
    r.table(["allocator", "M steps/s", "x mimalloc", "x glibc", "peak RSS", "RSS at the end"], rows)

    def cells(b, v, param):
        x = h.get(b, v, param, "mops")
        return [fmt(x, "%.2f"), div(x, h.get(b, "mimalloc", param, "mops")), div(x, h.get(b, "glibc", param, "mops")),
                f"{fmt(h.get(b, v, param, 'peak_rss_mb'), '%.1f')} MB"]

    r("")
    r.describe("xthread")
    r(f"Ran: `xthread-<peer> 1to1|2way {p.xt_count} {p.xt_reps}`.", "")
    r.table(["allocator", "1to1 M objects/s", "x mimalloc", "x glibc", "peak RSS", "2way M objects/s", "x mimalloc",
             "x glibc", "peak RSS"],
            [[v] + cells("xthread", v, "1to1") + cells("xthread", v, "2way") for v in KPEERS])
    r("")
    r.describe("manythreads")
    r(f"Ran: `manythreads-<peer> 16|64 {p.mt_ops} {p.mt_reps}` on {h.nproc} cores.", "")
    r.table(["allocator", "16 threads M steps/s", "x mimalloc", "x glibc", "peak RSS", "64 threads M steps/s",
             "x mimalloc", "x glibc", "peak RSS"],
            [[v] + cells("manythreads", v, "16T") + cells("manythreads", v, "64T") for v in KPEERS])
    cols = [("larson", lt), ("xthread", "1to1"), ("xthread", "2way"), ("manythreads", "16T"), ("manythreads", "64T")]
    for name, metric in (("alloc", "mops"), ("alloc_rss", "peak_rss_mb")):
        f = h.dat(f"{name}.dat", [[v] + [h.get(b, v, x, metric) for b, x in cols] for v in KPEERS])
        if name == "alloc":
            t, y, ls = "throughput (higher is better; log scale)", "million operations per second", "set logscale y"
        else:
            t, y, ls = "peak resident memory (lower is better)", "MB (VmHWM)", "set yrange [0:*]"
        h.clustered(f"{name}.png", f, f"alloc workloads: {t}", y,
                    [f"larson {lt}", "xthread 1to1", "xthread 2way", "16 threads", "64 threads"],
                    settings=ls + "\nset key outside right top", size="900,450")
    r.image("alloc", "alloc.png")
    r.image("alloc memory", "alloc_rss.png")
