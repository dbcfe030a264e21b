"""P4: freeing after a grace period (rcuscale's kfree test)."""

from types import SimpleNamespace as NS

from harness import Failure, Goal, div, fmt, ratio

ORDER = 50
HEADINGS = ["## P4: freeing after a grace period (rcuscale's kfree test)"]
VARIANTS = ["free_rcu", "free_rcu_head", "callrcu_glibc", "callrcu_uslab", "defer_rcu"]


def setup(h):
    args = h.size([2, 2000, 1000], [2, 200, 1000], [2, 20, 1000])
    return NS(args=args, rp="x".join(map(str, args)), text="")


def run(h, p):
    h.log("P4: deferred free after a grace period (rcuscale kfree test)")
    # One command runs every variant in turn, reps times, one child process
    # each; run r of a variant is its r-th line of a metric.
    seen, lines = {}, []
    p.text = h.command([h.exe("rcu")] + p.args + [h.reps])
    with open(h.path("rcu.txt"), "w") as f:
        f.write(p.text)
    for line in p.text.splitlines():
        f = line.split(",")
        if len(f) == 6 and f[0] == "CSV" and f[1] == "rcu" and not f[3].startswith("vs_"):
            k = (f[2], f[4])
            seen[k] = seen.get(k, 0) + 1
            lines.append((seen[k], *f[1:]))
    if not lines:
        raise Failure("rcu printed no CSV line")
    for row in lines:
        h.store.add(*row)


def report(h, p, r):
    g = h.get("rcu", "callrcu_glibc", p.rp, "ns_per_obj")
    gm = h.get("rcu", "callrcu_glibc", p.rp, "footprint_mb")
    r.heading(HEADINGS[0])
    r(f"`rcu {' '.join(map(str, p.args))} {h.reps}`: threads x loops x objects of 24 bytes (8 bytes and a",
      "struct rcu_head, like rcuscale's kfree_obj), each loop allocating its objects and",
      "freeing them after a grace period; time from the first loop to the end of the",
      "final barrier, divided by all objects; memory: peak RSS above the start, one",
      "child process per variant and run. Grace periods: liburcu urcu-memb.", "")
    rows = []
    for v in VARIANTS:
        n, m = h.get("rcu", v, p.rp, "ns_per_obj"), h.get("rcu", v, p.rp, "footprint_mb")
        rows.append((v, f"{fmt(n, '%.1f')} ns", f"{div(g, n)}x faster", f"{fmt(m, '%.1f')} MB", f"{div(m, gm)}x",
                     fmt(h.get("rcu", v, p.rp, "batches"), "%.0f")))
    r.table(["variant", "per object", "vs call_rcu + glibc", "peak memory", "vs call_rcu + glibc",
             "grace-period requests"], rows)
    r("", "The program's own lines (seed format), every run:", "")
    r.lines.extend("    " + line for line in p.text.splitlines() if "Total time" in line)


def _speed(v):
    return lambda h, p: (ratio(h.get("rcu", "callrcu_glibc", p.rp, "ns_per_obj"), h.get("rcu", v, p.rp, "ns_per_obj")), None)


def _mem(v):
    return lambda h, p: (ratio(h.get("rcu", v, p.rp, "footprint_mb"), h.get("rcu", "callrcu_glibc", p.rp, "footprint_mb")), None)


GOALS = []
for _v in ("free_rcu", "free_rcu_head"):
    GOALS += [
        Goal(f"P4 {_v} per object >= 5x faster than call_rcu + free", _speed(_v), ">=", 5),
        Goal(f"P4 {_v} peak memory <= 0.75x call_rcu + free", _mem(_v), "<=", 0.75),
    ]
