"""The debug tier's cost (issues 12 and 26): the P1 pair and the stress test per USLAB_DEBUG tier against none."""

import time
from types import SimpleNamespace as NS

from harness import FIRST4, Goal, div, fmt, ratio, w4

ORDER = 110
GOALS_INLINE = True
HEADINGS = ["## The debug tier's cost (issues 12, 26)"]
SETS = ["none", "F", "Z", "P", "U", "FZP", "FZPU"]
UNSET = ("USLAB_DEBUG", "USLAB_ON_BUG")


def setup(h):
    # Pairs: iters in the default tier (P1's count), iters_tier in the debug tiers.
    stress = h.size([4, 25, 5], [2, 10, 2], [2, 2, 1])
    return NS(iters=h.size(20000000, 2000000, 200000), iters_tier=h.size(200000, 20000, 2000),
              stress=stress, sp="x".join(map(str, stress)))


def env(d):
    """The tier's environment; the pairs' objects written (BENCH_WRITE=first4, issue 34)."""
    return dict(FIRST4) if d == "none" else dict(FIRST4, USLAB_DEBUG=d)


U, UC = w4("uslab"), w4("uslab-call")  # the pairs' variants, objects written


def run(h, p):
    h.log(f"debug: the P1 pair and the stress test per debug tier ({' '.join(SETS)}), {h.reps} alternations")
    for r in h.repetitions():
        for d in SETS if not h.goals_only else ("none", "F", "FZPU"):
            n = p.iters if d == "none" else p.iters_tier

            def rename(f, d=d):
                return [f[0], f"{f[1]}-{d}"] + f[2:]
            for prog in ("pair-uslab", "pair-uslab-call") if not h.goals_only else ("pair-uslab",):
                h.run(r, [h.exe(prog), 256, n, 3], env=env(d), unset=UNSET, rename=rename)
            t0 = time.monotonic()
            h.command([h.exe("stress")] + p.stress, env=env(d), unset=UNSET, stdout=False)
            h.store.add(r, "stress", f"stress-{d}", p.sp, "seconds", "%.3f" % (time.monotonic() - t0))


def report(h, p, r):
    r.heading(HEADINGS[0])
    r.describe("pair", "pair-uslab")
    r("Every cache in the tier named (`USLAB_DEBUG=<tier>`; none: the default tier), alternated",
      f"{h.reps} times. P1: `BENCH_WRITE=first4 pair-uslab 256 N 3` (inline fast path) and `pair-uslab-call` (the",
      f"library's functions), N = {p.iters} in the default tier and {p.iters_tier} in the debug tiers;",
      f"stress: `stress {' '.join(map(str, p.stress))}` (tests/stress/stress.c: threads, cross-thread frees, kmalloc,",
      "bulk, magazines, content checks), wall seconds. Every call of a cache in the tier reaches",
      "the library and is checked there; its sheaves hold free objects only (the node lock once",
      "per sheaf); U keeps the caller's return address per allocation and free.", "")
    rows = []
    for d in SETS:
        a, b = h.get("pair", f"{U}-{d}", 256, "ns"), h.get("pair", f"{UC}-{d}", 256, "ns")
        t = h.get("stress", f"stress-{d}", p.sp, "seconds")
        rows.append((d, f"{fmt(a, '%.2f')} ns", div(a, h.get("pair", f"{U}-none", 256, "ns")),
                     f"{fmt(b, '%.2f')} ns", div(b, h.get("pair", f"{UC}-none", 256, "ns")),
                     f"{fmt(t, '%.2f')} s", div(t, h.get("stress", "stress-none", p.sp, "seconds"))))
    r.table(["tier", "P1 inline", "x none", "P1 library", "x none", "stress", "x none"], rows)
    r()
    r.goals(h, p, GOALS)


GOALS = [
    Goal("F P1 pair <= 10x the default tier",
         lambda h, p: (ratio(h.get("pair", f"{U}-F", 256, "ns"), h.get("pair", f"{U}-none", 256, "ns")), None),
         "<=", 10),
    Goal("FZPU P1 pair <= 50x the default tier",
         lambda h, p: (ratio(h.get("pair", f"{U}-FZPU", 256, "ns"), h.get("pair", f"{U}-none", 256, "ns")), None),
         "<=", 50),
    Goal("FZPU P1 pair <= 5x the default tier",
         lambda h, p: (ratio(h.get("pair", f"{U}-FZPU", 256, "ns"), h.get("pair", f"{U}-none", 256, "ns")), None),
         "<=", 5),
    Goal("FZPU stress <= 5x the default tier",
         lambda h, p: (ratio(h.get("stress", "stress-FZPU", p.sp, "seconds"),
                             h.get("stress", "stress-none", p.sp, "seconds")), None),
         "<=", 5),
]
