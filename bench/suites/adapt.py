"""Sheaves sized by the traffic (issue 23, bench_adapt.c): memory the adaptive capacity holds, against the pinned one."""

from types import SimpleNamespace as NS

from harness import fmt

ORDER = 65
HEADINGS = ["## Sheaves sized by the traffic: memory at peak and after the traffic stops (issue 23)"]
VARIANTS = [("uslab", {}), ("uslab-pinned", {"USLAB_SHEAF_CAPACITY": "126"})]
WHEN = [("peak", "peak of the run"), ("stop", "traffic just stopped"), ("base", "capacity back at its base"),
        ("idle", "after the idle period"), ("exit", "RX and TX exited")]


def setup(h):
    return NS(packets=h.size(20000000, 4000000, 400000), idle_ms=h.size(1500, 1000, 600))


def run(h, p):
    h.log("adapt: 2-thread forwarding (bulk 64), then idle: what the sheaves hold, the time to shrink back")
    for r in h.repetitions():
        for v, env in VARIANTS:
            def rename(f, v=v):
                return [f[0], v] + f[2:]
            h.run(r, [h.exe("adapt"), p.packets, p.idle_ms], env=env,
                  unset=("USLAB_SHEAF_CAPACITY", "USLAB_SHEAF_DECAY_MS", "USLAB_SHEAF_MAX"), rename=rename)


def report(h, p, r):
    r.heading(HEADINGS[0])
    r.describe("adapt")
    r(f"Ran: `adapt {p.packets} {p.idle_ms}` (adaptive: the default) and `USLAB_SHEAF_CAPACITY=126 adapt {p.packets}",
      f"{p.idle_ms}` (pinned: the capacity of before). Medians of {h.reps} runs.", "")
    rows = []
    for v, _ in VARIANTS:
        for when, what in WHEN:
            cap = h.get("adapt", v, when, "capacity")
            if cap is None:
                continue
            rows.append([v, what, fmt(cap, "%.0f"), fmt(h.get("adapt", v, when, "objs"), "%.0f"),
                         fmt(h.get("adapt", v, when, "kib"), "%.0f")])
    r.table(["capacity", "when", "sheaf capacity", "objects cached", "KiB of objects"], rows)
    ms = h.get("adapt", "uslab", "base", "ms")
    r("", f"Back at the base capacity {fmt(ms, '%.0f')} ms after the traffic stopped (no call into uslab meanwhile);",
      "the threads' own two sheaves keep their size until they trade or exit. Forwarding rate of these runs:",
      f"adaptive {fmt(h.get('adapt', 'uslab', 'run', 'mpps'), '%.1f')} Mpps, pinned",
      f"{fmt(h.get('adapt', 'uslab-pinned', 'run', 'mpps'), '%.1f')} Mpps (sampled, threads not pinned: see P5 for",
      "the throughput comparison); barn trades per 1000 packets: adaptive",
      f"{fmt(h.get('adapt', 'uslab', 'run', 'trades_per_kpkt'), '%.2f')}, pinned",
      f"{fmt(h.get('adapt', 'uslab-pinned', 'run', 'trades_per_kpkt'), '%.2f')}.", "")
