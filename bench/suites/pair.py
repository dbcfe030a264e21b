"""P1: the warm alloc+free pair of a 256-byte object, with instruction counts."""

from types import SimpleNamespace as NS

from harness import Goal, div, fmt, ratio
from suites import PEERS

ORDER = 10
PLOTS = ["pair.png"]
HEADINGS = ["## P1: warm alloc+free pair of a 256-byte object"]


def setup(h):
    return NS(iters=h.size(20000000, 2000000, 200000), preps=h.size(7, 7, 1), cg_iters=h.size(200000, 20000), ins={})


def run(h, p):
    h.log("P1: alloc+free pair, 256 bytes")
    h.alternate("pair", [256, p.iters, p.preps], PEERS)
    # Instructions per pair under callgrind: the count inside run_pairs / iters.
    with open(h.path("instructions.csv"), "w") as f:
        for v in PEERS:
            i = h.callgrind([h.exe(f"pair-{v}"), 256, p.cg_iters, 1], "run_pairs", p.cg_iters)
            p.ins[v] = i
            f.write(f"{v},{fmt(i, '%.1f')}\n")


def report(h, p, r):
    u = h.get("pair", "uslab", 256, "ns")
    r.heading(HEADINGS[0])
    r(f"`pair-<peer> 256 {p.iters} {p.preps}`: one object allocated and freed in a loop.",
      "Instructions: callgrind, the count inside the loop function divided by the",
      "iterations, so the loop's own 3 instructions (increment, compare, branch) are",
      "included. uslab's alloc and free are inline (uslab/fastpath.h); uslab-call",
      "calls the exported functions instead.", "")
    rows = []
    for v in PEERS:
        n = h.get("pair", v, 256, "ns")
        rows.append((v, f"{fmt(h.get('pair', v, 256, 'cycles'), '%.0f')} cycles(tsc) {fmt(n, '%.3f')} ns",
                     div(n, u), fmt(p.ins.get(v), "%.1f")))
    r.table(["allocator", "per pair", "ratio to uslab", "instructions per pair"], rows)
    dat = h.dat("pair.dat", [(v, h.get("pair", v, 256, "ns")) for v in PEERS])
    h.bars("pair.png", dat, "alloc+free pair, 256 bytes (lower is better)", "ns per pair")
    r.image("pair", "pair.png")


def _vs(peer):
    return lambda h, p: (ratio(h.get("pair", "uslab", 256, "ns"), h.get("pair", peer, 256, "ns")), None)


def _instructions(h, p):
    i = p.ins.get("uslab")
    if i is None:
        return None, "-"
    return i - 3, f"{i:.1f} per loop iteration, {i - 3:.1f} without the loop's 3"


GOALS = [
    Goal("P1 pair <= 0.5x mimalloc", _vs("mimalloc"), "<=", 0.5),
    Goal("P1 pair <= 0.25x glibc", _vs("glibc"), "<=", 0.25),
    Goal("P1 <= 20 instructions per pair", _instructions, "<=", 20, digits=1),
]
