"""DPDK mempool ops (issue 23): uslab's driver (dpdk/) against ring_mp_mc and stack, in testpmd and from non-EAL threads."""

import os
import shutil
from types import SimpleNamespace as NS

from harness import Failure, Goal, div, fmt, ratio

ORDER = 66
PLOTS = ["dpdk.png"]
HEADINGS = ["## DPDK mempool driver (issue 23)"]
OPS = ["uslab", "ring_mp_mc", "stack"]
CACHES = [250, 0]
# Non-EAL threads: bucket crashes with them (its per-lcore state is indexed
# by rte_lcore_id(), which is LCORE_ID_ANY there), so it is not run.
NONEAL_THREADS = 2


def setup(h):
    return NS(secs=h.size(5, 2, 0.3), warm=h.size(1, 1, 0.2),
              iters=h.size(2000000, 300000, 30000), ireps=h.size(5, 3, 1),
              driver=os.path.join(h.build, "dpdk", "librte_mempool_uslab.so"),
              script=os.path.join(h.here, "bench_dpdk_testpmd.sh"),
              # EAL's -d refuses a driver below a world-writable directory (a
              # checkout under /tmp): this runs each command on a private copy then.
              private=os.path.join(h.here, "..", "tests", "dpdk", "private-driver.sh"),
              testpmd=shutil.which("dpdk-testpmd"))


def run(h, p):
    if not os.path.exists(p.driver):
        raise Failure(f"no {p.driver} (the bench preset builds it when pkg-config finds libdpdk)")
    if not p.testpmd:
        raise Failure("no dpdk-testpmd (Debian package dpdk-dev: scripts/deps.sh bench)")
    h.log("dpdk: testpmd io forwarding on net_null per mempool ops and mbuf cache; non-EAL get/put")
    for r in h.repetitions():
        for cache in CACHES:
            for ops in OPS:
                h.run(r, ["sh", p.private, p.driver, "sh", p.script, p.testpmd, "@DRIVER@", ops, cache,
                          p.secs, p.warm])
        for ops in OPS:
            h.run(r, ["sh", p.private, p.driver, h.exe("dpdk-noneal"), "@DRIVER@", ops, NONEAL_THREADS,
                      p.iters, p.ireps])


def _tp(h, ops, cache):
    return h.get("dpdk", f"testpmd-{ops}", f"cache{cache}", "mpps")


def _ne(h, ops):
    return h.get("dpdk", f"noneal-{ops}", f"{NONEAL_THREADS}T", "mops")


def report(h, p, r):
    r.heading(HEADINGS[0])
    r.describe("dpdk_testpmd", "dpdk-testpmd")
    r(f"Ran: `bench/bench_dpdk_testpmd.sh dpdk-testpmd {p.driver} OPS MBCACHE {p.secs} {p.warm}` (Debian's",
      f"dpdk-testpmd) for OPS {', '.join(OPS)} and MBCACHE {' and '.join(map(str, CACHES))}.", "")
    r.describe("dpdk_noneal", "dpdk-noneal")
    r(f"Ran: `dpdk-noneal DRIVER OPS {NONEAL_THREADS} {p.iters} {p.ireps}` for OPS {', '.join(OPS)}.", "")
    rows, dat = [], []
    for ops in OPS:
        row = [ops]
        for cache in CACHES:
            m = _tp(h, ops, cache)
            row += [fmt(m, "%.2f"), div(m, _tp(h, "ring_mp_mc", cache)),
                    fmt(h.get("dpdk", f"testpmd-{ops}", f"cache{cache}", "wall_mpps"), "%.2f") + " / "
                    + fmt(h.get("dpdk", f"testpmd-{ops}", f"cache{cache}", "cpu_share"), "%.2f")]
        n = _ne(h, ops)
        row += [fmt(n, "%.1f"), div(n, _ne(h, "ring_mp_mc")),
                fmt(sum(h.get("dpdk", f"testpmd-{ops}", f"cache{c}", "nombuf") or 0 for c in CACHES), "%.0f")]
        rows.append(row)
        dat.append([ops] + [_tp(h, ops, c) for c in CACHES])
    r.table(["ops", "testpmd Mpps/port, mbcache 250", "x ring_mp_mc", "wall Mpps / CPU share",
             "mbcache 0", "x ring_mp_mc", "wall Mpps / CPU share",
             f"non-EAL {NONEAL_THREADS} threads, M obj/s", "x ring_mp_mc", "RX-nombuf"], rows)
    f = h.dat("dpdk.dat", dat)
    h.clustered("dpdk.png", f, "testpmd io forwarding, 2 net_null ports (higher is better)",
                "Mpps per port", ["mbuf cache 250", "mbuf cache 0"])
    r.image("dpdk", "dpdk.png")


def _testpmd_vs_ring(cache):
    return lambda h, p: (ratio(_tp(h, "uslab", cache), _tp(h, "ring_mp_mc", cache)), None)


def _best_peer(h):
    got = [(_ne(h, o), o) for o in ("ring_mp_mc", "stack") if _ne(h, o) is not None]
    return max(got) if got else (None, "-")


def _noneal(h, p):
    return ratio(_ne(h, "uslab"), _best_peer(h)[0]), None


GOALS = [
    Goal("dpdk testpmd uslab >= 1.0x ring_mp_mc, mbuf cache 250", _testpmd_vs_ring(250), ">=", 1.0),
    Goal("dpdk testpmd uslab >= 1.3x ring_mp_mc, mbuf cache 0", _testpmd_vs_ring(0), ">=", 1.3),
    Goal(lambda h, p: f"dpdk non-EAL {NONEAL_THREADS} threads, bursts of 32: uslab >= 2x the best of "
         f"ring_mp_mc and stack ({_best_peer(h)[1]})", _noneal, ">=", 2.0),
]
