"""NUMA (issue 38, bench_numa.c): locality under a fake two-node topology, NUMA on against off."""

from types import SimpleNamespace as NS

from harness import Goal, fmt, ratio

ORDER = 135
GOALS_INLINE = True
HEADINGS = ["## NUMA: objects from the caller's node (issue 38)"]
FAKE = "0:0,1:1"
MODES = [("on", {"USLAB_NUMA_FAKE": FAKE, "USLAB_NUMA": "1"}),
         ("off", {"USLAB_NUMA_FAKE": FAKE, "USLAB_NUMA": "0"})]
ROWS = [("loops", "local", "independent loops, objects on the caller's node", "%.2f%%"),
        ("prodcons", "local", "producer (node 0) -> consumer (node 1): producer's objects on node 0", "%.2f%%"),
        ("kmalloc", "local", "kmalloc, random sizes 8 B - 4 KiB: on the caller's node", "%.2f%%"),
        ("prodcons", "mops", "producer -> consumer throughput, Mobjects/s", "%.2f"),
        ("prodcons", "per_batch", "consumer's remote frees per batch sent home (no lock per object)", "%.1f"),
        ("node", "local_ns", "alloc+free pair, the caller's node, ns", "%.2f"),
        ("node", "remote_ns", "alloc_node(node 1)+free pair from node 0, ns", "%.2f")]


def setup(h):
    return NS(objs=h.size(2000000, 400000, 20000), preps=h.size(5, 3, 1))


def run(h, p):
    h.log(f"numa: fake two-node topology ({FAKE}), NUMA on and off alternated, {h.reps} processes")
    for r in h.repetitions():
        for name, env in MODES:
            h.run(r, [h.exe("numa"), p.objs, p.preps], env=env,
                  unset=("USLAB_PERCPU", "USLAB_DEBUG"),
                  keep=lambda f, name=name: f[1] == name)


def _measured(h, p):
    """Whether the program ran its threads (it prints "skipped" without CPUs 0 and 1)."""
    return h.get("numa", "on", "loops", "local") is not None


def report(h, p, r):
    r.heading(HEADINGS[0])
    r.describe("numa")
    if not _measured(h, p):
        r("Skipped: this machine (or its cpuset) has no CPUs 0 and 1 to run the two threads on.", "")
        return
    r(f"Ran: `USLAB_NUMA_FAKE={FAKE} numa {p.objs} {p.preps}` with `USLAB_NUMA=1` and `USLAB_NUMA=0`,",
      f"alternated, the median of {h.reps} processes (each the median of its {p.preps} repetitions).",
      "What a fake topology cannot show (the memory itself is on one node): doc/design.md, \"NUMA\".", "")
    rows = []
    for b, m, what, f in ROWS:
        on, off = h.get("numa", "on", b, m), h.get("numa", "off", b, m)
        if m in ("remote_ns", "per_batch"):
            off = None  # (no node to ask for, nothing sent home, with NUMA off)
        rows.append((what, fmt(on, f), fmt(off, f)))
    r.table(["what", "NUMA on", "NUMA off"], rows)
    r()
    r.goals(h, p, GOALS)


def _local(b):
    return lambda h, p: (h.get("numa", "on", b, "local"), f"{fmt(h.get('numa', 'on', b, 'local'), '%.2f')}%")


GOALS = [
    Goal("NUMA: independent loops, objects on the caller's node >= 99%", _local("loops"), ">=", 99,
         when=_measured),
    Goal("NUMA: producer -> consumer, producer's objects on its node >= 99%", _local("prodcons"), ">=", 99,
         when=_measured),
    Goal("NUMA: kmalloc of mixed sizes on the caller's node >= 99%", _local("kmalloc"), ">=", 99,
         when=_measured),
    Goal("NUMA: producer -> consumer throughput, on >= 0.9x off",
         lambda h, p: (ratio(h.get("numa", "on", "prodcons", "mops"), h.get("numa", "off", "prodcons", "mops")), None),
         ">=", 0.9, when=_measured),
    Goal("NUMA: consumer's remote frees per batch sent home >= 32 (no lock per object)",
         lambda h, p: (h.get("numa", "on", "prodcons", "per_batch"),
                       fmt(h.get("numa", "on", "prodcons", "per_batch"), "%.1f")),
         ">=", 32, when=_measured),
]
