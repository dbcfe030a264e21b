"""Watching a program (issue 13): what USLAB_STATS=1 costs the P1 pair and a snapshot of 1,000 caches; a live snapshot."""

import os
import subprocess
import time
from types import SimpleNamespace as NS

from harness import FIRST4, Goal, fmt, ratio, w4

ORDER = 120
GOALS_INLINE = True
HEADINGS = ["## Watching a program: what USLAB_STATS=1 costs (issue 13)"]
U = w4("uslab")  # the pair's variant: its object's first 4 bytes written (issue 34)


def setup(h):
    # The forwarding run is stopped once the snapshot is taken: its packet
    # count only has to keep it running that long on any machine.
    return NS(iters=h.size(20000000, 2000000, 200000), fw_packets=2000000000,
              stat_secs=h.size(3.5, 3.5, 1.5), delay=h.size(2, 2, 1), snapshot="", snapshot_ok=False)


def run(h, p):
    h.log(f"stat: P1 with USLAB_STATS=1 against without, {h.reps} alternations; a snapshot's cost")
    for r in h.repetitions():
        for v in ("off", "on"):
            def rename(f, v=v):
                return [f[0], f"{f[1]}-stats-{v}"] + f[2:]
            env = dict(FIRST4, USLAB_STATS="1") if v == "on" else FIRST4
            h.run(r, [h.exe("pair-uslab"), 256, p.iters, 3], env=env, unset=("USLAB_STATS", "USLAB_STATS_MS"),
                  rename=rename)
    h.run(1, [h.exe("stat"), 1000, p.stat_secs], env={"USLAB_STATS": "1"}, unset=("USLAB_STATS_MS",))
    if h.goals_only:
        return
    h.log(f"stat: uslab-stat on forward-uslab magazine 2 threads, {p.delay} s into its run")
    e = dict(os.environ, USLAB_STATS="1")
    e.pop("USLAB_STATS_MS", None)
    fw = subprocess.Popen([h.exe("forward-uslab"), "magazine", "2", str(p.fw_packets), "1"], env=e,
                          stdout=subprocess.DEVNULL)
    try:
        time.sleep(p.delay)
        s = subprocess.run([os.path.join(h.build, "uslab-stat"), "-s", "active", str(fw.pid)],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        p.snapshot = s.stdout
        p.snapshot_ok = s.returncode == 0 and fw.poll() is None
        with open(h.path("stat-forward.txt"), "w") as f:
            f.write(p.snapshot)
    finally:
        fw.terminate()
        fw.wait()
        try:  # the export file a terminated process leaves (export.h)
            os.unlink(f"/dev/shm/uslab-stat.{fw.pid}")
        except FileNotFoundError:
            pass


def report(h, p, r):
    off, on = h.get("pair", f"{U}-stats-off", 256, "ns"), h.get("pair", f"{U}-stats-on", 256, "ns")
    rs = h.get("stat", "uslab", 1000, "refresh_ms")
    r.heading(HEADINGS[0])
    r.describe("pair", "pair-uslab")
    r(f"P1: `BENCH_WRITE=first4 pair-uslab 256 {p.iters} 3` without and with `USLAB_STATS=1`, alternated {h.reps} times:",
      f"{fmt(off, '%.3f')} ns and {fmt(on, '%.3f')} ns per pair.", "")
    r.describe("stat")
    r(f"Ran: `USLAB_STATS=1 stat 1000 {p.stat_secs}`: {fmt(rs, '%.3f')} ms of the process's CPU per snapshot.", "")
    r.goals(h, p, GOALS)
    r("")
    r.describe("forward", "forward-uslab")
    r(f"`uslab-stat -s active PID` of `USLAB_STATS=1 forward-uslab magazine 2 {p.fw_packets} 1`, {p.delay} s into its run"
      " (stopped after the snapshot):", "",
      "```")
    lines = p.snapshot.splitlines()
    r.lines.extend(lines[:12])
    if len(lines) > 12:
        r(lines[-1])
    r("```")
    if not p.snapshot_ok:
        r.unmeasured.append("uslab-stat snapshot of forward-uslab (it failed, or the program had ended)")


GOALS = [
    Goal("P1 pair with USLAB_STATS=1 within 2% of without",
         lambda h, p: (ratio(h.get("pair", f"{U}-stats-on", 256, "ns"), h.get("pair", f"{U}-stats-off", 256, "ns")), None),
         "<=", 1.02),
    Goal("1,000 caches refreshed at 1 s: < 10 ms of CPU per second",
         lambda h, p: (h.get("stat", "uslab", 1000, "cpu_ms_per_s"),
                       f"{fmt(h.get('stat', 'uslab', 1000, 'cpu_ms_per_s'), '%.3f')} ms"),
         "<=", 10, digits=3),
]
