"""The sampling guard (issue 26): its cost at the default rate against USLAB_GUARD=0, and its detection rate."""

import time
from types import SimpleNamespace as NS

from harness import FIRST4, Goal, fmt, ratio, w4

ORDER = 112
HEADINGS = ["## The sampling guard (issue 26)"]
MODES = {"default": {}, "off": {"USLAB_GUARD": "0"}}
UNSET = ("USLAB_GUARD", "USLAB_GUARD_SLOTS", "USLAB_DEBUG")
WINDOWS = (1024, 65536)


def setup(h):
    stress = h.size([4, 25, 5], [2, 10, 2], [2, 2, 1])
    return NS(iters=h.size(20000000, 2000000, 200000), kiters=h.size(20000000, 2000000, 100000),
              witers=h.size(5000000, 500000, 50000), stress=stress, sp="x".join(map(str, stress)),
              trials=h.size(600, 120, 30))


def run(h, p):
    h.log(f"guard: default rate against USLAB_GUARD=0, {h.reps} alternations; {p.trials} planted bugs")
    for r in h.repetitions():
        for m, env in MODES.items():
            def rename(f, m=m):
                return [f[0], f"{f[1]}-{m}"] + f[2:]
            # The pairs and windows with their objects' first 4 bytes written (issue 34).
            e = dict(env, **FIRST4)
            h.run(r, [h.exe("pair-uslab"), 256, p.iters, 3], env=e, unset=UNSET, rename=rename)
            h.run(r, [h.exe("kmalloc-uslab"), "pair", 1, p.kiters, 3], env=e, unset=UNSET, rename=rename)
            for w in WINDOWS if not h.goals_only else (65536,):
                h.run(r, [h.exe("kmalloc-uslab"), "window", 1, p.witers, 3, w], env=e, unset=UNSET,
                      rename=rename)
            t0 = time.monotonic()
            h.command([h.exe("stress")] + p.stress, env=env, unset=UNSET, stdout=False)
            h.store.add(r, "stress", f"stress-{m}", p.sp, "seconds", "%.3f" % (time.monotonic() - t0))
    h.run(1, [h.exe("guard"), p.trials], env={"USLAB_GUARD": "1"}, unset=UNSET)


ROWS = [("P1 pair (256 B, inline)", "pair", w4("uslab"), 256, "ns"),
        ("kmalloc pair (8..4096 B)", "kmalloc", w4("uslab"), "pair-1T", "ns")] + \
    [(f"kmalloc window ({w} live)", "kmalloc", w4("uslab"), f"win{w}-1T", "ns") for w in WINDOWS]


def cost(h, b, v, param, m):
    return ratio(h.get(b, f"{v}-default", param, m), h.get(b, f"{v}-off", param, m))


def report(h, p, r):
    r.heading(HEADINGS[0])
    r.describe("pair", "pair-uslab")
    r.describe("kmalloc", "kmalloc-uslab")
    r(f"Cost: the default rate (USLAB_GUARD unset: one allocation in 1000 slow paths per thread,",
      f"255 slots) against USLAB_GUARD=0, alternated {h.reps} times, medians. `pair-uslab 256 {p.iters} 3`,",
      f"`kmalloc-uslab pair 1 {p.kiters} 3`, `kmalloc-uslab window 1 {p.witers} 3 W` (W = 1024,",
      f"65536 live objects of random sizes: their sheaves miss), and",
      f"`stress {' '.join(map(str, p.stress))}` in wall seconds. The guard samples only on a sheaf miss:",
      "the pairs never miss (the code they run is the same on and off: their ratio is the",
      "machine's noise); the windows and the stress test do. The pairs and windows run with",
      "`BENCH_WRITE=first4` (each object's first 4 bytes written, issue 34).", "")
    rows = []
    for name, b, v, param, m in ROWS:
        a, o = h.get(b, f"{v}-default", param, m), h.get(b, f"{v}-off", param, m)
        rows.append((name, f"{fmt(a, '%.3f')} ns", f"{fmt(o, '%.3f')} ns", fmt(ratio(a, o), "%.3f")))
    a, o = h.get("stress", "stress-default", p.sp, "seconds"), h.get("stress", "stress-off", p.sp, "seconds")
    rows.append(("stress (wall)", f"{fmt(a, '%.2f')} s", f"{fmt(o, '%.2f')} s", fmt(ratio(a, o), "%.3f")))
    r.table(["workload", "guard on (default)", "USLAB_GUARD=0", "on / off"], rows)
    r("", "Detection:", "")
    r.describe("guard")
    r(f"Ran: `USLAB_GUARD=1 guard {p.trials}`.", "")
    rows = []
    for km in ("cache", "kmalloc"):
        for k in ("uaf-write", "uaf-read", "overflow"):
            rows.append((f"{km} {k}", fmt(h.get("guard", f"{km}-{k}", "planted", "reported"), "%.0f"),
                         fmt(h.get("guard", f"{km}-{k}", "planted", "planted"), "%.0f")))
    r.table(["planted", "reported", "of"], rows)
    r()
    r.goals(h, p, GOALS)


def _within(b, v, param, m):
    return lambda h, p: (cost(h, b, v, param, m), None)


GOALS = [
    Goal("guard on: P1 pair within noise (<= 1.05x off)", _within("pair", w4("uslab"), 256, "ns"), "<=", 1.05),
    Goal("guard on: kmalloc pair within noise (<= 1.05x off)", _within("kmalloc", w4("uslab"), "pair-1T", "ns"),
         "<=", 1.05),
    Goal("guard on: kmalloc window 65536 within noise (<= 1.05x off)",
         _within("kmalloc", w4("uslab"), "win65536-1T", "ns"), "<=", 1.05),
    Goal("guard on: stress test within noise (<= 1.05x off)",
         lambda h, p: (ratio(h.get("stress", "stress-default", p.sp, "seconds"),
                             h.get("stress", "stress-off", p.sp, "seconds")), None), "<=", 1.05),
    Goal("forced rate: planted bugs reported (fraction)",
         lambda h, p: (ratio(h.get("guard", "all", "planted", "reported"),
                             h.get("guard", "all", "planted", "planted")), None), ">=", 1.0),
]
