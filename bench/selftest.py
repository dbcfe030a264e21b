#!/usr/bin/env python3
"""bench/selftest.py - the harness's own checks, on fake benchmark programs
(no build needed): a complete run passes, a BENCH_WRITE in the environment
is not passed on to the programs, and a missing figure, a failing program
and an unknown BENCH_ONLY name each fail bench/run. make bench-tiny
runs it before the real programs."""
import os
import subprocess
import sys
import tempfile

here = os.path.dirname(os.path.abspath(__file__))
# $n: the how-manieth run of the program this is (1, 2, ...).
LINES = ["uslab_counter,1T,ns,$n", "uslab_counter,2T,ns,1.6", "atomic,1T,ns,3", "atomic,2T,ns,9",
         "uslab_idgen,1T,ns,2", "uslab_idgen,2T,ns,2.1", "atomic_id,1T,ns,3", "atomic_id,2T,ns,8"]


def bench_run(build, only, lines, status=0, env=None):
    """bench/run BENCH_ONLY=only on a fake counter program printing lines
    (and a line naming the BENCH_WRITE it was given)."""
    prog = os.path.join(build, "bench", "counter")
    with open(prog, "w") as f:
        f.write(f"#!/bin/sh\nn=$(($(cat {prog}.n 2>/dev/null || echo 0) + 1)); echo $n > {prog}.n\n"
                + "".join(f"echo CSV,counter,{x}\n" for x in lines)
                + "echo CSV,counter,write-${BENCH_WRITE:-unset},1T,ns,1\n" + f"exit {status}\n")
    if os.path.exists(prog + ".n"):
        os.unlink(prog + ".n")
    os.chmod(prog, 0o755)
    env = dict(os.environ, BENCH_TINY="1", BENCH_REPS="2", BENCH_ONLY=only, **(env or {}))
    r = subprocess.run([os.path.join(here, "run"), build, os.path.join(build, "out")], env=env,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    return r.returncode, r.stdout, r.stderr


def main():
    failed = 0

    def check(what, ok, detail=""):
        nonlocal failed
        print(f"{'ok' if ok else 'FAIL'}: {what}" + ("" if ok else f"\n{detail}"))
        failed += not ok

    with tempfile.TemporaryDirectory() as build:
        os.mkdir(os.path.join(build, "bench"))
        rc, out, err = bench_run(build, "counter", LINES)
        check("a complete run passes", rc == 0, err)
        # Runs 1 and 3 are the default batch's, 2 and 4 USLAB_COUNTER_BATCH=1024's.
        check("alternation and medians", "| uslab_counter | 2.00 ns | 1.60 ns | 0.80 |" in out
              and "| uslab_counter-1024 | 3.00 ns | 1.60 ns | 0.53 |" in out, out)
        check("goal rows judged", "| uslab_counter_add <= 2 ns uncontended | 2.00 ns | **met** |" in out
              and "| unchanged on 2 threads (<= 1.1x), default batch | 0.80x | **met** |" in out, out)
        rc, out, err = bench_run(build, "counter", LINES, env={"BENCH_WRITE": "first4"})
        with open(os.path.join(build, "out", "raw.csv")) as f:
            raw = f.read()
        check("an inherited BENCH_WRITE is not passed on", rc == 0 and "write-unset" in raw
              and "write-first4" not in raw, err + raw)
        rc, out, err = bench_run(build, "counter", LINES[1:])
        check("a missing figure fails the run", rc == 1 and "not measured: uslab_counter_add" in err, err)
        rc, out, err = bench_run(build, "counter", LINES, status=3)
        check("a failing program fails the run", rc == 1 and "exited with 3" in err, err)
        rc, out, err = bench_run(build, "counter", [])
        check("a program printing no CSV line fails the run", rc == 1 and "printed no CSV line" in err, err)
        rc, out, err = bench_run(build, "counter nope", LINES)
        check("an unknown BENCH_ONLY name is refused", rc == 2 and "unknown benchmark(s) nope" in err, err)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
