"""Free latency while another thread shrinks (issue 9 section 7, bench_latency.c)."""

from types import SimpleNamespace as NS

from harness import fmt

ORDER = 70
HEADINGS = ["## Free latency while another thread shrinks (issue 9 §7)"]
GOALS = []


VARIANTS = ((256, "shrinker", None), (64, "population", 4 << 20), (0, "alone", None))


def setup(h):
    return NS(args=h.size([600000, 20000], [100000, 20000], [20000, 2000]))


def run(h, p):
    h.log("free latency while another thread shrinks (issue 9 §7)")
    # The same program with thread B (256 objects of 4 KiB), with B freeing and shrinking a
    # large population (64 objects of 4 MiB, 256 MiB a round: issue 35 item 9), and without
    # B (the noise floor).
    for r in h.repetitions():
        for big, label, size in VARIANTS:
            h.run(r, [h.exe("latency")] + p.args + [big, label] + ([size] if size else []))


def report(h, p, r):
    r.heading(HEADINGS[0])
    r.describe("latency")
    a = ' '.join(map(str, p.args))
    r(f"Ran: `latency {a} 256 shrinker`, `latency {a} 64 population {4 << 20}` (B frees and shrinks",
      f"64 objects of 4 MiB a round) and `latency {a} 0 alone`",
      "(no thread B: the machine's own noise, preemption). TSC cycles.", "")
    rows = []
    for _, v, _ in VARIANTS:
        def g(m):
            return h.get("latency", v, "free8", m)
        mx = g("max_ns")
        rows.append((v, fmt(g("p50_cycles"), "%.0f"), fmt(g("p99_cycles"), "%.0f"), fmt(g("p999_cycles"), "%.0f"),
                     f"{fmt(g('max_cycles'), '%.0f')} cycles(tsc) ({fmt(None if mx is None else mx / 1e6, '%.3f ms')})",
                     fmt(g("over200us"), "%.0f"), f"{fmt(g('a_vcsw'), '%.0f')} / {fmt(g('a_ivcsw'), '%.0f')}",
                     fmt(g("b_rounds"), "%.0f")))
    r.table(["variant", "p50", "p99", "p999", "max", "frees > 200 us", "A sleeps / preemptions", "B rounds"], rows)
