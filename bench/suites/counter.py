"""Counters and ID batches (issue 14, bench_counter.c): ns per add against a shared atomic, 1 and 2 threads."""

from types import SimpleNamespace as NS

from harness import Goal, div, fmt, ratio

ORDER = 130
GOALS_INLINE = True
HEADINGS = ["## Counters and ID batches (issue 14)"]
VARIANTS = ["uslab_counter", "uslab_counter-1024", "atomic", "uslab_idgen", "atomic_id"]


def setup(h):
    return NS(adds=h.size(100000000, 10000000, 1000000))


def run(h, p):
    h.log(f"counter: uslab_counter and uslab_idgen against shared atomics, {h.reps} processes")
    for r in h.repetitions():
        h.run(r, [h.exe("counter"), p.adds, 3], unset=("USLAB_COUNTER_BATCH",))
        h.run(r, [h.exe("counter"), p.adds, 3], env={"USLAB_COUNTER_BATCH": "1024"},
              keep=lambda f: f[1] == "uslab_counter", rename=lambda f: [f[0], "uslab_counter-1024"] + f[2:])


def report(h, p, r):
    r.heading(HEADINGS[0])
    r.describe("counter")
    r(f"Ran: `counter {p.adds} 3` and `USLAB_COUNTER_BATCH=1024 counter {p.adds} 3` (its uslab_counter rows:",
      f"uslab_counter-1024), the median of {h.reps} processes.", "")
    rows = []
    for v in VARIANTS:
        a, b = h.get("counter", v, "1T", "ns"), h.get("counter", v, "2T", "ns")
        rows.append((v, f"{fmt(a, '%.2f')} ns", f"{fmt(b, '%.2f')} ns", div(b, a)))
    r.table(["primitive", "1 thread", "2 threads", "2T / 1T"], rows)
    r()
    r.goals(h, p, GOALS)


GOALS = [
    Goal("uslab_counter_add <= 2 ns uncontended",
         lambda h, p: (h.get("counter", "uslab_counter", "1T", "ns"),
                       f"{fmt(h.get('counter', 'uslab_counter', '1T', 'ns'), '%.2f')} ns"),
         "<=", 2),
    Goal("unchanged on 2 threads (<= 1.1x), default batch",
         lambda h, p: (ratio(h.get("counter", "uslab_counter", "2T", "ns"), h.get("counter", "uslab_counter", "1T", "ns")), None),
         "<=", 1.1),
]
