"""P4: freeing after a grace period (rcuscale's kfree test, bench_rcu.c): time per object and peak memory."""

from types import SimpleNamespace as NS

from harness import Failure, Goal, div, fmt, ratio, w4

ORDER = 50
HEADINGS = ["## P4: freeing after a grace period (rcuscale's kfree test)"]
VARIANTS = ["free_rcu", "free_rcu_head", "callrcu_glibc", "callrcu_uslab", "defer_rcu"]


def setup(h):
    # The quick size is the full one: at 200 loops uslab's variants ran 3 to
    # 10 ms, a few grace periods, and their ratios to call_rcu's 30 ms moved
    # from 6x to 10x between runs of one binary; at 2000 loops (0.75 s for
    # all five variants) three runs were within 5% of each other.
    args = h.size([2, 2000, 1000], [2, 2000, 1000], [2, 20, 1000])
    return NS(args=args, rp="x".join(map(str, args)), text="")


def run(h, p):
    h.log("P4: deferred free after a grace period (rcuscale kfree test), objects written and not")
    # One command runs every variant in turn, one child process each; each
    # repetition runs it with the first 4 bytes written (BENCH_WRITE=first4,
    # the goal rows) and with one byte written (as before), alternated.
    writes = ("first4",) if h.goals_only else ("none", "first4")
    for r in h.repetitions():
        for w in writes:
            text = h.command([h.exe("rcu")] + p.args + [1], env={"BENCH_WRITE": w})
            p.text += text
            n = 0
            for line in text.splitlines():
                f = line.split(",")
                if len(f) == 6 and f[0] == "CSV" and f[1] == "rcu" and not f[3].startswith("vs_"):
                    h.store.add(r, *f[1:])
                    n += 1
            if not n:
                raise Failure("rcu printed no CSV line")
    with open(h.path("rcu.txt"), "w") as f:
        f.write(p.text)


def report(h, p, r):
    g = h.get("rcu", w4("callrcu_glibc"), p.rp, "ns_per_obj")
    gm = h.get("rcu", w4("callrcu_glibc"), p.rp, "footprint_mb")
    r.heading(HEADINGS[0])
    r.describe("rcu")
    r(f"Ran: `BENCH_WRITE=first4 rcu {' '.join(map(str, p.args))} 1`, {h.reps} times (the goal rows); last column: the",
      f"same with one byte written (`rcu {' '.join(map(str, p.args))} 1`, without BENCH_WRITE). Per object: ns_per_obj;",
      "peak memory: the footprint.", "")
    rows = []
    for v in VARIANTS:
        n, m = h.get("rcu", w4(v), p.rp, "ns_per_obj"), h.get("rcu", w4(v), p.rp, "footprint_mb")
        rows.append((v, f"{fmt(n, '%.1f')} ns", f"{div(g, n)}x faster", f"{fmt(m, '%.1f')} MB", f"{div(m, gm)}x",
                     fmt(h.get("rcu", w4(v), p.rp, "batches"), "%.0f"),
                     f"{fmt(h.get('rcu', v, p.rp, 'ns_per_obj'), '%.1f')} ns"))
    r.table(["variant", "per object", "vs call_rcu + glibc", "peak memory", "vs call_rcu + glibc",
             "grace-period requests", "per object, one byte written"], rows)
    r("", "The program's own lines (seed format), every run:", "")
    r.lines.extend("    " + line for line in p.text.splitlines() if "Total time" in line)


def _speed(v):
    return lambda h, p: (ratio(h.get("rcu", w4("callrcu_glibc"), p.rp, "ns_per_obj"),
                               h.get("rcu", w4(v), p.rp, "ns_per_obj")), None)


def _mem(v):
    return lambda h, p: (ratio(h.get("rcu", w4(v), p.rp, "footprint_mb"),
                               h.get("rcu", w4("callrcu_glibc"), p.rp, "footprint_mb")), None)


# Issue 34 raised P4's goals (>= 5x, <= 0.75x before) to kfree_rcu's of a wave ago.
GOALS = []
for _v in ("free_rcu", "free_rcu_head"):
    GOALS += [
        Goal(f"P4 {_v} per object, written, >= 10x faster than call_rcu + free (issue 34)", _speed(_v), ">=", 10),
        Goal(f"P4 {_v} peak memory, written, <= 0.5x call_rcu + free (issue 34)", _mem(_v), "<=", 0.5),
    ]
