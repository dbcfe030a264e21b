"""Free latency while another thread shrinks (issue 9 section 7)."""

from types import SimpleNamespace as NS

from harness import fmt

ORDER = 70
HEADINGS = ["## Free latency while another thread shrinks (issue 9 §7)"]
GOALS = []


def setup(h):
    return NS(args=h.size([600000, 20000], [100000, 20000], [20000, 2000]))


def run(h, p):
    h.log("free latency while another thread shrinks (issue 9 §7)")
    # The same program with thread B (256 objects of 4 KiB) and without it (the noise floor).
    for r in h.repetitions():
        for big, label in ((256, "shrinker"), (0, "alone")):
            h.run(r, [h.exe("latency")] + p.args + [big, label])


def report(h, p, r):
    r.heading(HEADINGS[0])
    r(f"`latency {' '.join(map(str, p.args))} 256 shrinker`: thread A (CPU 0) frees 8-byte objects one at a time,",
      "each uslab_cache_free() timed with rdtsc, in batches allocated untimed; thread B (CPU 1)",
      "allocates 256 objects of 4 KiB, frees them and calls uslab_cache_shrink(), in a loop.",
      "`alone` is the same without thread B (BIG = 0): the machine's own noise (preemption).",
      "TSC cycles; sleeps and preemptions are thread A's voluntary and involuntary context",
      "switches while timed.", "")
    rows = []
    for v in ("shrinker", "alone"):
        def g(m):
            return h.get("latency", v, "free8", m)
        mx = g("max_ns")
        rows.append((v, fmt(g("p50_cycles"), "%.0f"), fmt(g("p99_cycles"), "%.0f"), fmt(g("p999_cycles"), "%.0f"),
                     f"{fmt(g('max_cycles'), '%.0f')} cycles(tsc) ({fmt(None if mx is None else mx / 1e6, '%.3f ms')})",
                     fmt(g("over200us"), "%.0f"), f"{fmt(g('a_vcsw'), '%.0f')} / {fmt(g('a_ivcsw'), '%.0f')}",
                     fmt(g("b_rounds"), "%.0f")))
    r.table(["variant", "p50", "p99", "p999", "max", "frees > 200 us", "A sleeps / preemptions", "B rounds"], rows)
