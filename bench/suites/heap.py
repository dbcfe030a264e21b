"""The page heap (issue 24): realloc growth and huge lines per allocator, madvise calls per GiB, RSS, the drain.

Every (workload, allocator) runs in turn, A B C D E A B C D E ..., BENCH_REPS
times, a fresh process each; outputs are checked identical to glibc's.
"""

import os
import re
import shutil
import subprocess
import tempfile
import time
from types import SimpleNamespace as NS

from harness import FIRST4, Failure, Goal, div, fmt, ratio, w4, worst
from suites.malloc import so_of

ORDER = 105
GOALS_INLINE = True
PLOTS = ["heap.png"]
HEADINGS = [
    "## Page heap (issue 24)",
    "### Growing one huge buffer by realloc",
    "### One huge line: perl, sed, gawk",
    "### madvise calls per GiB returned",
    "### 64 threads, peak RSS",
    "### Scattered full drain, default settings",
    "### Goals (issue 24)",
]
ALLOCS = ["glibc", "uslab", "mimalloc", "jemalloc", "tcmalloc"]
GROW_MODES = ["x1.5", "x2", "+4"]
# One line of the generated file read by each program; what it prints is compared.
LINE_PROGS = {
    "perl": ["perl", "-ne", 'print length($_),"\\n"'],
    "sed": ["sed", "-n", "$="],
    "gawk": ["gawk", "{print length($0)}"],
}
MT_PEERS = ["uslab", "mimalloc"]
DRAIN_SIZE = 256
DRAIN_ROUNDS = 3
DEFAULTS_UNSET = ("USLAB_LAYOUT", "USLAB_PURGE_DELAY_MS", "USLAB_RETAIN_KB")


def setup(h):
    p = NS(grow_mb=h.size(195, 48, 4), line_mb=h.size(195, 48, 4),
           heap_mb=h.size(1024, 256, 16), heap_wait=h.size(5000, 3000, 2000),
           mt_ops=h.size(20000000, 2000000, 200000), mt_reps=h.size(3, 3, 1),
           dr_n=h.size(1048576, 131072, 8192))
    p.so = {"glibc": "", "mimalloc": so_of("libmimalloc2.0", r"/libmimalloc\.so\.2$"),
            "jemalloc": so_of("libjemalloc2", r"/libjemalloc\.so\.2$"),
            "tcmalloc": so_of("libtcmalloc-minimal4", r"/libtcmalloc_minimal\.so\.4$"),
            "uslab": os.path.join(h.build, "libuslab-malloc.so")}
    for a in ALLOCS:
        if a != "glibc" and not os.path.exists(p.so[a]):
            raise Failure(f"heap: no library for {a} ({p.so[a] or 'not installed'}): "
                          "scripts/deps.sh bench, and build the bench preset")
    for prog in ["strace"] + [c[0] for c in LINE_PROGS.values()]:
        if not shutil.which(prog):
            raise Failure(f"heap: no {prog} (scripts/deps.sh bench)")
    return p


# ---------------------------------------------------------------- runs


def timed(h, r, bench, a, p, cmd, tmp, param="-"):
    """cmd under allocator a (LD_PRELOAD): wall seconds (measured here),
    peak_kb (GNU time's %M), user_s, sys_s into the store; its stdout."""
    tf = os.path.join(tmp, "time")
    env = dict(os.environ, LC_ALL="C")
    if p.so[a]:
        env["LD_PRELOAD"] = p.so[a]
    t0 = time.monotonic()
    res = subprocess.run(["/usr/bin/time", "-f", "%M %U %S", "-o", tf] + [str(c) for c in cmd], env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp)
    secs = time.monotonic() - t0
    if res.returncode != 0:
        raise Failure(f"heap: {' '.join(map(str, cmd))} under {a} exited with {res.returncode}: "
                      + res.stderr.strip()[-300:])
    with open(tf) as f:
        m, u, s = f.read().splitlines()[-1].split()
    for metric, v in (("seconds", "%.4f" % secs), ("peak_kb", m), ("user_s", u), ("sys_s", s)):
        h.store.add(r, bench, a, param, metric, v)
    return res.stdout


def same(refs, key, a, out):
    if key not in refs:
        refs[key] = out
    elif refs[key] != out:
        raise Failure(f"heap: {key} under {a} printed something else than under {ALLOCS[0]}")


def gen_line(path, mb):
    """One line of mb MiB (letters and spaces), then a newline."""
    block = ("".join(chr(97 + (i * 7) % 26) for i in range(4095)) + " ").encode()
    with open(path, "wb") as f:
        for _ in range(mb * 256):
            f.write(block)
        f.write(b"\n")


def strace_counts(path):
    """(madvise(MADV_DONTNEED) calls, their bytes, munmap calls, their bytes)."""
    mad = madb = mun = munb = 0
    with open(path) as f:
        for line in f:
            m = re.search(r"madvise\(0x[0-9a-f]+, (\d+), MADV_DONTNEED", line)
            if m:
                mad += 1
                madb += int(m.group(1))
                continue
            m = re.search(r"munmap\(0x[0-9a-f]+, (\d+)", line)
            if m:
                mun += 1
                munb += int(m.group(1))
    return mad, madb, mun, munb


def run(h, p):
    tmp = tempfile.mkdtemp()
    try:
        refs = {}
        line = os.path.join(tmp, "line.txt")
        gen_line(line, p.line_mb)
        h.log(f"heap: realloc growth to {p.grow_mb} MiB and perl/sed/gawk on one {p.line_mb} MiB line, "
              f"under {' '.join(ALLOCS)}")
        for r in h.repetitions():
            for mode in GROW_MODES:
                for a in ALLOCS:
                    out = timed(h, r, f"grow{mode}", a, p, [h.exe("grow"), mode, p.grow_mb], tmp)
                    for ln in out.splitlines():
                        f = ln.split(",")
                        if ln.startswith("CSV,") and len(f) == 6:
                            h.store.add(r, f"grow{mode}", a, "self", f[4], f[5])
                    same(refs, f"grow {mode}", a, out.splitlines()[0])
            for name, cmd in LINE_PROGS.items():
                for a in ALLOCS:
                    same(refs, name, a, timed(h, r, f"line-{name}", a, p, cmd + [line], tmp))
        os.unlink(line)

        h.log(f"heap: madvise calls per GiB returned ({p.heap_mb} MiB; trim and decay; strace counts too)")
        for r in h.repetitions():
            for mode in ("trim", "decay"):
                cmd = [h.exe("heap"), mode, p.heap_mb, p.heap_wait]
                h.run(r, cmd, unset=DEFAULTS_UNSET)
                tf = os.path.join(tmp, "strace")
                h.command(["strace", "-f", "-qq", "-e", "trace=madvise,munmap", "-o", tf] + cmd,
                          unset=DEFAULTS_UNSET)
                mad, madb, mun, munb = strace_counts(tf)
                for metric, v in (("madvise", mad), ("madvise_mb", madb / 2**20), ("munmap", mun),
                                  ("munmap_mb", munb / 2**20),
                                  ("madvise_per_gib", mad * 2**30 / madb if madb else "")):
                    h.store.add(r, "heap-strace", mode, p.heap_mb, metric, v)

        h.log(f"heap: 64 threads on {h.nproc} cores, and the scattered full drain with default settings")

        def rename_as(bench):
            return lambda f: [bench] + f[1:]

        for r in h.repetitions():
            for v in MT_PEERS:
                h.run(r, [h.exe(f"manythreads-{v}"), 64, p.mt_ops, p.mt_reps], env=FIRST4,
                      rename=rename_as("heap-manythreads"))
            h.run(r, [h.exe("drain-uslab"), DRAIN_SIZE, p.dr_n, DRAIN_ROUNDS, "auto"], env=FIRST4,
                  unset=DEFAULTS_UNSET, rename=rename_as("heap-drain"))
            h.run(r, [h.exe("drain-mimalloc"), DRAIN_SIZE, p.dr_n, DRAIN_ROUNDS], env=FIRST4, unset=DEFAULTS_UNSET,
                  rename=rename_as("heap-drain"))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


# -------------------------------------------------------------- report


def rows_grow():
    return [f"grow{m}" for m in GROW_MODES]


def rows_line():
    return [f"line-{n}" for n in LINE_PROGS]


def secs(h, b, a):
    """The grow program's own time of its loop; the others' wall time."""
    if b.startswith("grow"):
        return h.get(b, a, "self", "seconds")
    return h.get(b, a, "-", "seconds")


def peak(h, b, a):
    return h.get(b, a, "-", "peak_kb")


def alloc_table(h, r, rows, label):
    out = []
    for b in rows:
        for a in ALLOCS:
            t, m = secs(h, b, a), peak(h, b, a)
            moves = h.get(b, a, "self", "moves")
            out.append([label(b), a, fmt(t, "%.3f s"), div(t, secs(h, b, "glibc")), div(t, secs(h, b, "mimalloc")),
                        fmt(m and m / 1024, "%.1f MB"), div(m, peak(h, b, "glibc")), div(m, peak(h, b, "mimalloc")),
                        f"{fmt(h.get(b, a, '-', 'user_s'), '%.2f')} / {fmt(h.get(b, a, '-', 'sys_s'), '%.2f')} s"]
                       + ([fmt(moves, "%.0f")] if rows == rows_grow() else []))
    head = ["workload", "allocator", "time", "x glibc", "x mimalloc", "peak RSS", "x glibc", "x mimalloc", "user / sys"]
    r.table(head + (["moved"] if rows == rows_grow() else []), out)


def report(h, p, r):
    r.heading(HEADINGS[0])
    mode = " BENCH_TINY=1" if h.tiny else " BENCH_QUICK=1" if h.quick else ""
    r(f"Command: `BENCH_ONLY=heap{mode} bench/run {h.build}` ({h.reps} alternations, medians).",
      "Allocators under the same binary by `LD_PRELOAD` (glibc: none):", "")
    for a in ALLOCS:
        r(f"    {a}: {('LD_PRELOAD=' + p.so[a]) if p.so[a] else 'no preload'}")
    r.lines.extend(f"    (set) {k}={v}" for k, v in sorted(os.environ.items()) if k.startswith("USLAB_"))

    r.heading(HEADINGS[1])
    r.describe("grow")
    r(f"Ran: `grow MODE {p.grow_mb}` for MODE {', '.join(GROW_MODES)}. Time: the program's own (seconds); peak RSS:",
      "GNU time's %M; moved: the program's moves.", "")
    alloc_table(h, r, rows_grow(), lambda b: b[4:])

    r.heading(HEADINGS[2])
    r(f"A file of one {p.line_mb} MiB line; `perl -ne 'print length($_),\"\\n\"'`, `sed -n '$='`,",
      "`gawk '{print length($0)}'` (LC_ALL=C) read it; outputs checked identical to glibc's.",
      "Time: wall time of the process (measured by the harness); peak RSS: GNU time's %M.", "")
    alloc_table(h, r, rows_line(), lambda b: b[5:])
    dat = []
    for b in rows_grow() + rows_line():
        dat.append([f'"{b}"'] + [ratio(secs(h, b, a), secs(h, b, "glibc")) for a in ALLOCS]
                   + [ratio(peak(h, b, a), peak(h, b, "glibc")) for a in ALLOCS])
    f = h.dat("heap.dat", [[("%.3f" % c if isinstance(c, float) else ("-" if c is None else c)) for c in row]
                           for row in dat])
    na = len(ALLOCS)
    h.plot("heap.png", f"""set multiplot layout 2,1
set style data histogram
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set grid ytics
set yrange [0:*]
set key below horizontal
set arrow 1 from graph 0, first 1 to graph 1, first 1 nohead dashtype 2
set datafile missing "-"
set title "one huge buffer grown by realloc: time, ratio to glibc (lower is better)"
plot for [i=2:{na + 1}] "{f}" using i:xtic(1) title word("{' '.join(ALLOCS)}", i - 1)
set title "peak RSS, ratio to glibc (lower is better)"
plot for [i={na + 2}:{2 * na + 1}] "{f}" using i:xtic(1) title word("{' '.join(ALLOCS)}", i - {na} - 1)
unset multiplot
""", size="1000,800", extra=" noenhanced")
    r.image("page heap: realloc growth", "heap.png")

    r.heading(HEADINGS[3])
    mb = p.heap_mb
    r.describe("heap")
    r(f"Ran: `heap trim|decay {mb} {p.heap_wait}` with USLAB_PURGE_DELAY_MS and USLAB_RETAIN_KB unset, and the same",
      "under `strace -f -e trace=madvise,munmap`, which counts every call of the whole process, the",
      "allocation phase and the program's own munmaps included (its per-GiB figure: madvise(MADV_DONTNEED)",
      "calls x 2^30 / the bytes they covered; the heap stats': madvise_calls x 2^30 / purged_bytes).", "")
    rows = []
    for mode in ("trim", "decay"):
        def s(m):
            return h.get("heap-strace", mode, mb, m)

        def lib(m):
            return h.get("heap", mode, mb, m)

        rows.append((mode, fmt(s("madvise"), "%.0f"), fmt(s("madvise_mb"), "%.0f MB"), fmt(s("munmap"), "%.0f"),
                     fmt(s("munmap_mb"), "%.0f MB"), fmt(s("madvise_per_gib"), "%.0f"),
                     fmt(lib("madvise_calls"), "%.0f"), fmt(lib("purged_mb"), "%.0f MB"),
                     fmt(lib("madvise_per_gib"), "%.0f"), fmt(lib("rss_peak_mb"), "%.0f MB"),
                     fmt(lib("rss_after_mb"), "%.1f MB"), fmt(lib("return_ms"), "%.1f ms")))
    r.table(["mode", "madvise (strace)", "madvised", "munmap (strace)", "munmapped", "madvise per GiB (strace)",
             "madvise_calls (heap stats)", "purged_bytes", "madvise per GiB (heap stats)", "RSS at peak",
             "RSS after", "return time"], rows)

    r.heading(HEADINGS[4])
    r.describe("manythreads")
    r(f"Ran: `BENCH_WRITE=first4 manythreads-<peer> 64 {p.mt_ops} {p.mt_reps}` on {h.nproc} cores.", "")
    r.table(["allocator", "million steps/s", "peak RSS", "x mimalloc"],
            [(v, fmt(h.get("heap-manythreads", w4(v), "64T", "mops"), "%.1f"),
              fmt(h.get("heap-manythreads", w4(v), "64T", "peak_rss_mb"), "%.1f MB"),
              div(h.get("heap-manythreads", w4(v), "64T", "peak_rss_mb"),
                  h.get("heap-manythreads", w4("mimalloc"), "64T", "peak_rss_mb"))) for v in MT_PEERS])

    r.heading(HEADINGS[5])
    r.describe("drain")
    r(f"Ran: `BENCH_WRITE=first4 drain-<peer> {DRAIN_SIZE} {p.dr_n} {DRAIN_ROUNDS} [auto]` with the OS layer's defaults",
      "(USLAB_LAYOUT, USLAB_PURGE_DELAY_MS, USLAB_RETAIN_KB unset): purges may happen during the drain.", "")
    r.table(["allocator", "free", "alloc", "per op", "x mimalloc", "touch", "peak RSS"],
            [(v, fmt(h.get("heap-drain", w4(v), DRAIN_SIZE, "free_ns"), "%.1f ns"),
              fmt(h.get("heap-drain", w4(v), DRAIN_SIZE, "alloc_ns"), "%.1f ns"),
              fmt(h.get("heap-drain", w4(v), DRAIN_SIZE, "ns"), "%.2f ns"),
              div(h.get("heap-drain", w4(v), DRAIN_SIZE, "ns"),
                  h.get("heap-drain", w4("mimalloc"), DRAIN_SIZE, "ns")),
              fmt(h.get("heap-drain", w4(v), DRAIN_SIZE, "touch_ns"), "%.1f ns"),
              fmt(h.get("heap-drain", w4(v), DRAIN_SIZE, "peak_rss_mb"), "%.0f MB"))
             for v in ("uslab-auto", "mimalloc")])

    r.heading(HEADINGS[6])
    r.goals(h, p, GOALS, head="")


def _worst_vs_glibc(rows, f):
    def measure(h, p):
        w = worst([(ratio(f(h, b, "uslab"), f(h, b, "glibc")), b) for b in rows()])
        return w[0], f"worst {div(w[0], 1)}x ({w[1]})"
    return measure


def _mt(h, p):
    return ratio(h.get("heap-manythreads", w4("uslab"), "64T", "peak_rss_mb"),
                 h.get("heap-manythreads", w4("mimalloc"), "64T", "peak_rss_mb")), None


def _drain(h, p):
    return ratio(h.get("heap-drain", w4("uslab-auto"), DRAIN_SIZE, "ns"),
                 h.get("heap-drain", w4("mimalloc"), DRAIN_SIZE, "ns")), None


GOALS = [
    Goal("realloc growth of one buffer (grow x1.5, x2, +4): time <= 1.0x glibc", _worst_vs_glibc(rows_grow, secs),
         "<=", 1.0),
    Goal("realloc growth of one buffer: peak RSS <= 1.0x glibc", _worst_vs_glibc(rows_grow, peak), "<=", 1.0),
    Goal("one huge line (perl, sed, gawk): time <= 1.0x glibc", _worst_vs_glibc(rows_line, secs), "<=", 1.0),
    Goal("one huge line (perl, sed, gawk): peak RSS <= 1.0x glibc", _worst_vs_glibc(rows_line, peak), "<=", 1.0),
    Goal("64 threads on the machine's cores: peak RSS <= 1.0x mimalloc", _mt, "<=", 1.0),
    Goal("scattered full drain, 256 B, default settings <= 0.5x mimalloc", _drain, "<=", 0.5),
]
