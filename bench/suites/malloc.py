"""As malloc (issue 10): libuslab-malloc.so against glibc, mimalloc, jemalloc
and tcmalloc in real programs, every allocator put under the same Debian
binary with LD_PRELOAD. bench/run-malloc runs this suite alone.

Workloads (Debian's binaries as shipped, scripts in bench/workloads/):
  redis    redis-server with redis-benchmark, pipelined (-P 16), a fixed
           command mix at several value sizes: requests/s, server peak RSS
  python   /usr/bin/python3 bench/workloads/alloc.py, with Python's own
           small-object allocator (the default) and with PYTHONMALLOC=malloc
           (every object through malloc): wall time, peak RSS
  sqlite   sqlite3 :memory: < bench/workloads/sqlite.sql: wall time, peak RSS
  gcc      gcc -O2 -c of a generated C file (bench/workloads/gen-c.py):
           wall time, peak RSS (cc1's)
  cxx      bench/workloads/churn.cpp (built as cxx-churn): 4 C++ threads
           building std::map/unordered_map/vector/string batches that the
           next thread reads and destroys
  perl, gawk, lua, php   a script of hashes/tables, strings, regex
           substitutions, sorting and a churning cache in each language
           (bench/workloads/alloc.pl, .awk, .lua, .php; php also with
           USE_ZEND_ALLOC=0, every allocation through malloc)
  sed      substitutions on generated text (bench/workloads/gen-text.py),
           every line appended to the hold space
  sort     sort -k3,3n -k1,1 of generated text
  xz, zstd compression of generated text (xz -0, zstd -6, one thread)
  git      git log -p --stat on a generated, repacked repository
           (bench/workloads/gen-git.py)
  (each program's run a few seconds at the full size: wall time, peak RSS)

Every (workload, allocator) runs in turn, A B C D E A B C D E ..., BENCH_REPS
times, each run a fresh process; each program's output is checked to be the
same under every allocator. Its own environment: BENCH_MALLOC_ONLY (redis
python sqlite gcc perl gawk sed sort xz zstd git lua php cxx), BENCH_MALLOC_ALLOCS (glibc mimalloc jemalloc tcmalloc
uslab; the ratios need mimalloc; uslab-nokey: uslab with USLAB_FREE_KEY=0, the
drop-in without glibc-level free checks; uslab-alt: uslab under the tunables
BENCH_MALLOC_ALT_ENV gives ("USLAB_PURGE_DELAY_MS=20 ..."); uslab-base: the libuslab-malloc.so named by
BENCH_MALLOC_BASE, another build to alternate with), BENCH_REDIS_PORT (default 16479),
BENCH_MALLOC_REPORT=1 (no runs: the report again from malloc-raw.csv).
"""

import hashlib
import math
import os
import shutil
import subprocess
import tempfile
import time
from types import SimpleNamespace as NS

from harness import Failure, Goal, Store, div, fmt, ratio, worst

ORDER = 200
GOALS_INLINE = True
PEERS = ["glibc", "mimalloc", "jemalloc", "tcmalloc"]
REDIS_KEYS = 100000
REDIS_TESTS = "set,get,lpush,lpop,hset,sadd,zadd"
REDIS_COMMANDS = ["SET", "GET", "LPUSH", "LPOP", "SADD", "HSET", "ZADD"]
# The real programs after gcc: name -> (what the report says it runs, its description).
PROGRAMS = {
    "perl": ("perl bench/workloads/alloc.pl {script_scale}",
             "hashes of small arrays grouped and summed, strings built, split and substituted, a sort by count, "
             "a churning bounded cache"),
    "gawk": ("gawk -v scale={script_scale} -f bench/workloads/alloc.awk",
             "associative arrays of records, string concatenation, split and gsub, sorted traversal"),
    "sed": ("sed -E 's/([a-z]+) ([0-9]+)/\\2:\\1/g; s/([aeiou])\\1*/<&>/g; H; $!d; x; s/\\n/ /g' text ({sed_lines} lines)",
            "regex substitutions on every line, every line appended to the hold space, one substitution "
            "over the whole of it at the end"),
    "sort": ("sort -k3,3n -k1,1 text ({text_lines} lines)", "GNU sort of generated text by a number then a word"),
    "xz": ("xz -T1 -0 -c text ({sed_lines} lines)", "compression, one thread (few, large allocations)"),
    "zstd": ("zstd -q -6 -c text ({text_lines} lines)", "compression, one thread (few, large allocations)"),
    "git": ("git log -p --stat, a repository of {git_commits} commits of 200 files (gen-git.py, repacked)",
            "commits, trees and blobs read from deltas, diffs computed"),
    "lua": ("lua5.4 bench/workloads/alloc.lua {vm_scale}",
            "tables of records, string building and gsub, sorting, a churning cache (Lua reallocs every table "
            "and string through malloc)"),
    "php": ("php -n bench/workloads/alloc.php {vm_scale}",
            "arrays of records, string building, preg_replace, explode/implode, sorting, a churning cache; by "
            "default the Zend engine's own allocator (2 MiB chunks from mmap), USE_ZEND_ALLOC=0: every "
            "allocation through malloc. `-n`: no php.ini, so no shared extension is "
            "loaded (with Debian's php.ini and its extensions, php 8.2 died of SIGSEGV under every preload, "
            "mimalloc's and jemalloc's as well)"),
    "cxx": ("cxx-churn {cxx_scale} 4 (bench/workloads/churn.cpp)",
            "C++: 4 threads build batches of std::map, std::unordered_map, std::vector of std::string, "
            "each batch read and destroyed by the next thread (most memory freed by another thread)"),
}
WORKLOADS = ["redis", "python", "sqlite", "gcc"] + list(PROGRAMS)


def sh(cmd):
    return subprocess.run(cmd, shell=True, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True).stdout.strip()


def so_of(pkg, regex):
    """The library a Debian package installs."""
    return sh(f"dpkg -L {pkg} 2>/dev/null | grep -E '{regex}' | head -1")


def store(h):
    fresh = os.environ.get("BENCH_MALLOC_REPORT", "0") != "1"
    return Store(h.path("malloc-raw.csv"), h.path("malloc-medians.csv"), fresh=fresh,
                 header="rep,workload,allocator,param,metric,value")


def setup(h):
    p = NS(only=os.environ.get("BENCH_MALLOC_ONLY", " ".join(WORKLOADS)).split(),
           allocs=os.environ.get("BENCH_MALLOC_ALLOCS", "glibc mimalloc jemalloc tcmalloc uslab").split(),
           port=int(os.environ.get("BENCH_REDIS_PORT", "16479")),
           report_only=os.environ.get("BENCH_MALLOC_REPORT", "0") == "1",
           redis_sizes=h.size([(16, 200000), (256, 200000), (4096, 50000)],
                              [(16, 20000), (256, 20000), (4096, 5000)], [(16, 2000), (256, 2000), (4096, 500)]),
           py_scale=h.size("1", "0.1", "0.01"), sql_rows=h.size(200000, 20000, 2000),
           gcc_funcs=h.size(150, 20, 2), wl=os.path.join(h.here, "workloads"), gcc_lines="?",
           script_scale=h.size("0.8", "0.1", "0.01"), vm_scale=h.size("0.6", "0.1", "0.01"),
           cxx_scale=h.size("3", "0.3", "0.02"),
           sed_lines=h.size(80000, 10000, 1000),
           text_lines=h.size(400000, 40000, 4000), git_commits=h.size(100, 20, 3))
    p.so = {"glibc": "", "mimalloc": so_of("libmimalloc2.0", r"/libmimalloc\.so\.2$"),
            "jemalloc": so_of("libjemalloc2", r"/libjemalloc\.so\.2$"),
            "tcmalloc": so_of("libtcmalloc-minimal4", r"/libtcmalloc_minimal\.so\.4$"),
            "uslab": os.path.join(h.build, "libuslab-malloc.so")}
    # The same library without the free key (USLAB_FREE_KEY=0): what glibc's checks cost.
    p.so["uslab-nokey"] = p.so["uslab"]
    # The same library under other tunables (BENCH_MALLOC_ALT_ENV="USLAB_X=1 USLAB_Y=2"): a policy to weigh.
    p.so["uslab-alt"] = p.so["uslab"]
    alt = os.environ.get("BENCH_MALLOC_ALT_ENV", "").split()
    if any("=" not in kv or kv.startswith("=") for kv in alt):
        raise Failure(f"BENCH_MALLOC_ALT_ENV: NAME=VALUE words, not {' '.join(alt)!r}")
    ALLOC_ENV["uslab-alt"] = dict(kv.split("=", 1) for kv in alt)
    # Another build of uslab to alternate with (a commit before a change): BENCH_MALLOC_BASE.
    if os.environ.get("BENCH_MALLOC_BASE"):
        p.so["uslab-base"] = os.environ["BENCH_MALLOC_BASE"]
    p.libc = so_of("libc6", r"/libc\.so\.6$")
    for a in p.allocs:
        if a not in p.so:
            raise Failure(f"unknown allocator {a} (BENCH_MALLOC_ALLOCS: {' '.join(p.so)})")
        if a != "glibc" and not os.path.exists(p.so[a]):
            raise Failure(f"no library for {a} ({p.so[a] or 'not installed'}): "
                          "scripts/deps.sh bench, and build the bench preset")
    p.has_mi = "mimalloc" in p.allocs
    p.libs_at_start = uslab_libs(p) if "uslab" in p.allocs else ""
    p.pin_server, p.pin_client = (["taskset", "-c", "1"], ["taskset", "-c", "0"]) if h.nproc >= 2 else ([], [])
    # The rows: one per workload and parameter. "time" is seconds, or for
    # redis the time per request (1 / requests per second): lower is better.
    p.rows = []
    if "redis" in p.only:
        p.rows += [("redis", f"d{d}") for d, _ in p.redis_sizes]
    if "python" in p.only:
        p.rows += [("python3", "-"), ("python3-malloc", "-")]
    if "sqlite" in p.only:
        p.rows += [("sqlite3", "-")]
    if "gcc" in p.only:
        p.rows += [("gcc", "-")]
    for w in PROGRAMS:
        if w in p.only:
            p.rows += [(w, "-")] + ([("php-malloc", "-")] if w == "php" else [])
    unknown = [w for w in p.only if w not in WORKLOADS]
    if unknown:
        raise Failure(f"unknown workload(s) {' '.join(unknown)} (BENCH_MALLOC_ONLY: {' '.join(WORKLOADS)})")
    return p


def uslab_libs(p):
    """md5 and path of the uslab libraries this run measures (libuslab-malloc.so
    and the libuslab.so it loads): a rebuild during the run would mix two."""
    paths = [os.path.realpath(p.so["uslab"])]
    for line in sh(f"ldd {p.so['uslab']}").splitlines():
        f = line.split()
        if "libuslab" in line and len(f) >= 3:
            paths.append(f[2])
    out = []
    for path in paths:
        with open(path, "rb") as f:
            out.append(f"{hashlib.md5(f.read()).hexdigest()}  {path}")
    return "\n".join(out)


def preload(p, workload, a):
    """What LD_PRELOAD holds. Debian's redis-server is linked with
    libjemalloc.so.2 (see the report): without a preload it runs jemalloc, so
    its glibc run preloads libc.so.6 itself, whose malloc then comes before
    jemalloc's in the lookup order."""
    if a == "glibc":
        return p.libc if workload == "redis" else ""
    return p.so[a]


# An allocator's own environment: uslab-nokey is uslab with the free key off.
ALLOC_ENV = {"uslab-nokey": {"USLAB_FREE_KEY": "0"}}


def env_for(pre, extra=None, alloc=None):
    e = dict(os.environ)
    if pre:
        e["LD_PRELOAD"] = pre
    e.update(ALLOC_ENV.get(alloc, {}))
    e.update(extra or {})
    return e


# ---------------------------------------------------------------- runs


class Runner:
    def __init__(self, h, p, tmp):
        self.h, self.p, self.tmp = h, p, tmp
        self.refs = {}

    def record(self, r, w, a, param, metric, value):
        self.h.store.add(r, w, a, param, metric, value)

    def timed(self, r, w, a, cmd, stdin=None, extra_env=None):
        """cmd under the allocator's preload, stdout kept for same_output;
        records seconds (wall time on the monotonic clock around GNU time,
        whose own %e counts in 10 ms steps: at the quick sizes a 50 ms run
        read 1.20x another for one step), peak_kb (GNU time's %M: ru_maxrss,
        the largest process of the tree), user_s, sys_s, cpu_s and minor faults."""
        tf = os.path.join(self.tmp, "time")
        with open(stdin) if stdin else open(os.devnull) as fin:
            t0 = time.perf_counter()
            res = subprocess.run(["/usr/bin/time", "-f", "%e %U %S %M %R", "-o", tf] + cmd, stdin=fin,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=self.tmp,
                                 env=env_for(preload(self.p, w, a), extra_env, a))
            wall = time.perf_counter() - t0
        if res.returncode != 0:
            self.h.log(f"{w} under {a} failed:\n" + "\n".join(res.stderr.decode(errors="replace").splitlines()[-5:]))
            self.record(r, w, a, "-", "failed", 1)
            return None
        with open(tf) as f:
            _, u, s, m, flt = f.read().splitlines()[-1].split()
        for metric, v in (("seconds", "%.4f" % wall), ("peak_kb", m), ("user_s", u), ("sys_s", s),
                          ("cpu_s", "%g" % (float(u) + float(s))), ("minflt", flt)):
            self.record(r, w, a, "-", metric, v)
        return res.stdout

    def same_output(self, w, a, out):
        """The program printed what it printed under the first allocator
        (an allocator that breaks a program must not win)."""
        if out is None:
            return
        out = hashlib.md5(out).hexdigest()
        if w not in self.refs:
            self.refs[w] = out
        elif self.refs[w] != out:
            raise Failure(f"{w} under {a} printed something else than under the first allocator")

    def redis_up(self, port):
        return subprocess.run(["redis-cli", "-p", str(port), "ping"], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL).returncode == 0

    def redis(self, r, a, d, n):
        """A fresh server, one redis-benchmark, the server's peak RSS and its
        memory counters, shutdown."""
        h, p = self.h, self.p
        if self.redis_up(p.port):
            raise Failure(f"port {p.port} is taken (BENCH_REDIS_PORT)")
        logf = os.path.join(self.tmp, "redis.log")
        server = subprocess.Popen(p.pin_server + ["redis-server", "--port", str(p.port), "--bind", "127.0.0.1",
                                                  "--save", "", "--appendonly", "no", "--daemonize", "no",
                                                  "--logfile", logf],
                                  env=env_for(preload(p, "redis", a), alloc=a), cwd=self.tmp,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            for _ in range(200):
                if self.redis_up(p.port) or server.poll() is not None:
                    break
                time.sleep(0.05)
            if server.poll() is not None or not self.redis_up(p.port):
                h.log(f"redis-server under {a} did not start")
                self.record(r, "redis", a, f"d{d}", "failed", 1)
                return
            rb = subprocess.run(p.pin_client + ["redis-benchmark", "-p", str(p.port), "-P", "16", "-n", str(n),
                                                "-r", str(REDIS_KEYS), "-d", str(d), "-t", REDIS_TESTS, "--csv"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=self.tmp)
            info = subprocess.run(["redis-cli", "-p", str(p.port), "info", "memory"], stdout=subprocess.PIPE,
                                  text=True).stdout.replace("\r", "")
            with open(f"/proc/{server.pid}/status") as f:
                hwm = next(line.split()[1] for line in f if line.startswith("VmHWM:"))
            # The server's CPU time (utime + stime, in clock ticks): less exposed
            # to the machine's other load than requests/s, which waits for both CPUs.
            with open(f"/proc/{server.pid}/stat") as f:
                st = f.read().rsplit(")", 1)[1].split()
            ticks = int(st[11]) + int(st[12])
            subprocess.run(["redis-cli", "-p", str(p.port), "shutdown", "nosave"], stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
            server.wait(timeout=30)
        finally:
            if server.poll() is None:
                server.kill()
                server.wait()
        rps = {}
        for line in rb.stdout.splitlines()[1:]:
            f = line.split('"')
            if len(f) > 3 and float(f[3]) > 0:
                rps[f[1]] = float(f[3])
        if len(rps) != 7:
            h.log(f"redis-benchmark under {a} failed:\n" + "\n".join(rb.stderr.splitlines()[-5:]))
            self.record(r, "redis", a, f"d{d}", "failed", 1)
            return
        # Requests/s over the whole mix: all requests / the sum of each test's time.
        self.record(r, "redis", a, f"d{d}", "rps", "%.0f" % (len(rps) * n / sum(n / v for v in rps.values())))
        for t, v in rps.items():
            self.record(r, "redis", a, f"d{d}", f"rps_{t}", "%g" % v)
        self.record(r, "redis", a, f"d{d}", "peak_kb", hwm)
        hz = os.sysconf("SC_CLK_TCK")
        self.record(r, "redis", a, f"d{d}", "cpu_us_per_req", "%.4f" % (ticks / hz / (7 * n) * 1e6))
        for line in info.splitlines():
            k, _, v = line.partition(":")
            if k in ("used_memory", "allocator_allocated", "used_memory_rss"):
                self.record(r, "redis", a, f"d{d}", k, v)


def run(h, p):
    if p.report_only:
        return
    tmp = tempfile.mkdtemp()
    try:
        x = Runner(h, p, tmp)
        big = os.path.join(tmp, "big.c")
        if "gcc" in p.only:
            with open(big, "w") as f:
                subprocess.run(["/usr/bin/python3", os.path.join(p.wl, "gen-c.py"), str(p.gcc_funcs)], stdout=f,
                               check=True)
        py = ["/usr/bin/python3", os.path.join(p.wl, "alloc.py"), p.py_scale]
        cmds = program_commands(h, p, tmp)
        for r in h.repetitions():
            if "redis" in p.only:
                for d, n in p.redis_sizes:
                    h.log(f"rep {r}/{h.reps}: redis -d {d} -n {n}")
                    for a in p.allocs:
                        x.redis(r, a, d, n)
            if "python" in p.only:
                h.log(f"rep {r}/{h.reps}: python3")
                for a in p.allocs:
                    x.same_output("python3", a, x.timed(r, "python3", a, py))
                for a in p.allocs:
                    x.same_output("python3", a, x.timed(r, "python3-malloc", a, py, extra_env={"PYTHONMALLOC": "malloc"}))
            if "sqlite" in p.only:
                h.log(f"rep {r}/{h.reps}: sqlite3")
                for a in p.allocs:
                    out = x.timed(r, "sqlite3", a, ["sqlite3", ":memory:", "-cmd",
                                                    f"CREATE TABLE p(n); INSERT INTO p VALUES ({p.sql_rows})"],
                                  stdin=os.path.join(p.wl, "sqlite.sql"))
                    x.same_output("sqlite3", a, out)
            if "gcc" in p.only:
                h.log(f"rep {r}/{h.reps}: gcc -O2")
                for a in p.allocs:
                    out = x.timed(r, "gcc", a, ["gcc", "-O2", "-c", big, "-o", os.path.join(tmp, "big.o")])
                    if out is not None:
                        with open(os.path.join(tmp, "big.o"), "rb") as f:
                            out += hashlib.md5(f.read()).hexdigest().encode()
                    x.same_output("gcc", a, out)
            for w, (cmd, env) in cmds.items():
                h.log(f"rep {r}/{h.reps}: {w}")
                for a in p.allocs:
                    x.same_output(w, a, x.timed(r, w, a, cmd, extra_env=env))
        if "gcc" in p.only:
            with open(big) as f:
                p.gcc_lines = str(sum(1 for _ in f))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def program_commands(h, p, tmp):
    """The inputs of the programs after gcc, made once (under no preload);
    their commands: name -> (argv, extra environment)."""
    c = {"LC_ALL": "C"}
    w = p.wl
    text, small, repo = os.path.join(tmp, "text.txt"), os.path.join(tmp, "small.txt"), os.path.join(tmp, "repo")
    if any(k in p.only for k in ("sed", "sort", "xz", "zstd")):
        for path, n in ((text, p.text_lines), (small, p.sed_lines)):
            with open(path, "w") as f:
                subprocess.run(["/usr/bin/python3", os.path.join(w, "gen-text.py"), str(n)], stdout=f, check=True)
    if "git" in p.only:
        subprocess.run(["/usr/bin/python3", os.path.join(w, "gen-git.py"), repo, str(p.git_commits)],
                       stdout=subprocess.DEVNULL, check=True)
        subprocess.run(["git", "-C", repo, "repack", "-adfq"], check=True)
    cmds = {
        "perl": (["perl", os.path.join(w, "alloc.pl"), p.script_scale], c),
        "gawk": (["gawk", "-v", f"scale={p.script_scale}", "-f", os.path.join(w, "alloc.awk")], c),
        "sed": (["sed", "-E", r"s/([a-z]+) ([0-9]+)/\2:\1/g; s/([aeiou])\1*/<&>/g; H; $!d; x; s/\n/ /g", small], c),
        "sort": (["sort", "-k3,3n", "-k1,1", text], c),
        "xz": (["xz", "-T1", "-0", "-c", small], c),
        "zstd": (["zstd", "-q", "-6", "-c", text], c),
        "git": (["git", "-C", repo, "log", "-p", "--stat"], dict(c, GIT_CONFIG_GLOBAL="/dev/null", GIT_CONFIG_NOSYSTEM="1",
                                                                  GIT_PAGER="cat")),
        "lua": (["lua5.4", os.path.join(w, "alloc.lua"), p.vm_scale], c),
        "php": (["php", "-n", os.path.join(w, "alloc.php"), p.vm_scale], c),
        "php-malloc": (["php", "-n", os.path.join(w, "alloc.php"), p.vm_scale], dict(c, USE_ZEND_ALLOC="0")),
        "cxx": ([os.path.join(h.build, "bench", "cxx-churn"), p.cxx_scale, "4"], c),
    }
    return {k: v for k, v in cmds.items() if k.split("-")[0] in p.only}


# -------------------------------------------------------------- report


def rowname(row):
    w, param = row
    if w == "redis":
        return f"redis -d {param[1:]}"
    if w == "php-malloc":
        return "php USE_ZEND_ALLOC=0"
    return "python3 PYTHONMALLOC=malloc" if w == "python3-malloc" else w


def tim(h, row, a):
    """The median time per unit of work, or None."""
    if row[0] == "redis":
        v = h.get("redis", a, row[1], "rps")
        return None if not v else float("%.6g" % (1e6 / v))
    return h.get(row[0], a, row[1], "seconds")


def rss(h, row, a):
    return h.get(row[0], a, row[1], "peak_kb")


def cpu(h, row, a):
    """CPU time (user + sys; redis: the server's, per request)."""
    if row[0] == "redis":
        return h.get("redis", a, row[1], "cpu_us_per_req")
    return h.get(row[0], a, "-", "cpu_s")


def best(h, p, row, f):
    """The best peer of a row by f (tim or rss): (value, name)."""
    got = [(f(h, row, a), a) for a in PEERS if a in p.allocs]
    got = [x for x in got if x[0] is not None]
    return min(got) if got else (None, "-")


def geo(h, p, a, f):
    """The geometric mean over the rows of a's f ratio to mimalloc."""
    rs = [ratio(f(h, row, a), f(h, row, "mimalloc")) for row in p.rows]
    rs = [x for x in rs if x is not None and x > 0]
    return math.exp(sum(math.log(x) for x in rs) / len(rs)) if rs else None


def mb(kb):
    return "-" if kb is None else "%.1f MB" % (kb / 1024)


def report(h, p, r):
    r.heading("## As malloc: real programs under LD_PRELOAD (issue 10)")
    mode = " BENCH_TINY=1" if h.tiny else " BENCH_QUICK=1" if h.quick else ""
    r(f"Command: `BENCH_REPS={h.reps}{mode} bench/run-malloc {h.build} {h.out}`.",
      "Debian's binaries as shipped, each allocator put under them with `LD_PRELOAD`;",
      f"every (workload, allocator) pair ran in turn, {h.reps} times, one fresh process per run;",
      "figures are medians. Time ratios are per unit of work (lower is better; for redis,",
      "the inverse of requests per second). Peak RSS is `VmHWM` of the redis server before",
      "shutdown, else GNU time's `%M` (ru_maxrss: the largest process of the tree, cc1 for",
      "gcc). The best peer is the best of glibc, mimalloc, jemalloc and tcmalloc in that row.", "")
    progs = [sh("redis-server --version | cut -d' ' -f1-3"), sh("/usr/bin/python3 --version"),
             "sqlite3 " + sh("sqlite3 --version | cut -d' ' -f1"), sh("gcc --version | head -1")]
    progs += [sh(v) for w, v in (("perl", "perl -e 'print \"perl $^V\"'"), ("gawk", "gawk --version | head -1"),
                                 ("sed", "sed --version | head -1"), ("sort", "sort --version | head -1"),
                                 ("xz", "xz --version | head -1"), ("zstd", "zstd --version"),
                                 ("git", "git --version"), ("lua", "lua5.4 -v"), ("php", "php --version | head -1"))
              if w in p.only]
    r("    programs: " + ", ".join(progs))
    for a in p.allocs:
        how = f"no preload (redis: LD_PRELOAD={p.libc})" if a == "glibc" else f"LD_PRELOAD={p.so[a]}"
        r(f"    {a}: {how}")
    r.lines.extend(f"    (set) {k}={v}" for k, v in sorted(os.environ.items()) if k.startswith("USLAB_"))
    if p.libs_at_start:
        for line in p.libs_at_start.splitlines():
            md5, path = line.split(None, 1)
            r(f"    uslab library: {path} (md5 {md5[:12]})")
        if p.libs_at_start != uslab_libs(p):
            r("", "**Warning: the uslab libraries changed during this run (BUILD_DIR was rebuilt): its runs mix two versions.**")
            h.log(f"warning: the uslab libraries in {h.build} changed during the run")
    if h.reps < 5:
        r("", f"Only {h.reps} alternations: read the ratios with that in mind.")
    if "redis" in p.only:
        redis_report(h, p, r)
    if "python" in p.only:
        r.heading("### python3")
        r(f"`/usr/bin/python3 bench/workloads/alloc.py {p.py_scale}`: records as dicts through json, group-by",
          "and sorting, a tree of small objects (150k at scale 1), __slots__ instances in a dict",
          "keyed by tuples, string building and splitting, a churning bounded cache. By default CPython serves objects",
          "up to 512 bytes from its own pools (pymalloc, arenas from mmap), so malloc sees only the",
          "larger blocks; `PYTHONMALLOC=malloc` sends every object through malloc.", "")
        table_of(h, p, r, ("python3", "-"))
        r("", f"`PYTHONMALLOC=malloc /usr/bin/python3 bench/workloads/alloc.py {p.py_scale}`:", "")
        table_of(h, p, r, ("python3-malloc", "-"))
    if "sqlite" in p.only:
        r.heading("### sqlite3")
        r(f"`sqlite3 :memory: -cmd 'CREATE TABLE p(n); INSERT INTO p VALUES ({p.sql_rows})' < bench/workloads/sqlite.sql`:",
          f"{p.sql_rows} customers and {3 * p.sql_rows} orders inserted through recursive CTEs, four index builds,",
          "joins with group by, group_concat, a window function, a wide sort, update, delete,",
          "create-table-as-select; an in-memory database, so every page is malloc'd memory.", "")
        table_of(h, p, r, ("sqlite3", "-"))
    if "gcc" in p.only:
        r.heading("### gcc")
        r(f"`python3 bench/workloads/gen-c.py {p.gcc_funcs} > big.c; gcc -O2 -c big.c` ({p.gcc_lines} lines:",
          f"{p.gcc_funcs} groups of structs, inline helpers, switch-heavy loops); the preload reaches cc1",
          "through the environment; peak RSS is cc1's.", "")
        table_of(h, p, r, ("gcc", "-"))
    for w, (cmd, what) in PROGRAMS.items():
        if w not in p.only:
            continue
        r.heading(f"### {w}")
        r(f"`{cmd.format(**vars(p))}` (LC_ALL=C): {what}; output checked identical under every allocator.", "")
        table_of(h, p, r, (w, "-"))
        if w == "php":
            r("", f"`USE_ZEND_ALLOC=0 {cmd.format(**vars(p))}`:", "")
            table_of(h, p, r, ("php-malloc", "-"))
    summary(h, p, r)
    r.heading("### Goals")
    r.goals(h, p, GOALS, head="")


def redis_report(h, p, r):
    rs = "/usr/bin/redis-server"
    r.heading("### Does Debian's redis-server call malloc?")
    imports = sh(f"nm -D --undefined-only {rs} | awk '{{ print $2 }}'").split()
    alloc_names = {"malloc", "calloc", "realloc", "free", "malloc_usable_size", "posix_memalign", "aligned_alloc",
                   "mallctl", "nallocx", "mallocx", "rallocx", "xallocx", "sallocx", "dallocx", "sdallocx",
                   "malloc_stats_print"}
    imports = [s for s in imports if s in alloc_names or s.startswith("je_")]
    lib = sh(f"ldd {rs} | awk '/jemalloc/ {{ print $1 }}'")
    built = sh("redis-server --version | grep -o 'malloc=[^ ]*'")
    r(f"`ldd {rs}` lists `{lib}`: Debian builds redis",
      f"with the system jemalloc (`redis-server --version`: `{built}`).",
      "But it calls jemalloc by the standard names; what it imports",
      f"(`nm -D --undefined-only {rs}`, allocation symbols):", "",
      "    " + " ".join(imports) + " ", "",
      "No `je_*` name and none of jemalloc's allocating extensions (`mallocx`, `rallocx`,",
      "`dallocx`, `sdallocx`): every allocation and free is `malloc`/`calloc`/`realloc`/`free`,",
      "sized with `malloc_usable_size`, so a preloaded allocator, found first in the lookup",
      "order, serves them all. Only three jemalloc-specific calls stay with libjemalloc, none of",
      "which allocates for redis: `mallctl` (statistics for INFO, the background-thread switch,",
      "purge), `nallocx` (sdsResize asks jemalloc's size class to skip a useless realloc) and",
      "`malloc_stats_print` (MEMORY MALLOC-STATS). `INFO memory`'s `mem_allocator` is the",
      "compile-time string and says jemalloc under every preload; the evidence is in its counters:",
      "`used_memory` is redis's own count through the preloaded `malloc_usable_size`, and",
      "`allocator_allocated` is jemalloc's `stats.allocated`. Under a preload jemalloc holds",
      "next to nothing while redis holds its data (medians at the largest value size):", "")
    dl = f"d{p.redis_sizes[-1][0]}"

    def mbs(a, k, f):
        v = h.get("redis", a, dl, k)
        return "-" if v is None else f % (v / 1e6)

    r.table([f"allocator (redis -{dl})", "used_memory (redis's count)", "allocator_allocated (jemalloc's)",
             "used_memory_rss"],
            [(a, mbs(a, "used_memory", "%.1f MB"), mbs(a, "allocator_allocated", "%.3f MB"),
              mbs(a, "used_memory_rss", "%.1f MB")) for a in p.allocs])
    r("", f"So redis's glibc run preloads `{p.libc}` (its `malloc` then precedes jemalloc's), and",
      "its jemalloc run is the binary as shipped. jemalloc itself is still initialised in",
      "every run (INFO's statistics call `mallctl` every 100 ms, and redis enables jemalloc's",
      "background thread at start), which costs the other allocators a few MB of RSS, the same for each.")
    r.heading("### redis")
    r(f"`redis-server --port {p.port} --save \"\" --appendonly no --daemonize no` ({' '.join(p.pin_server)}), then",
      f"`redis-benchmark -P 16 -n N -r {REDIS_KEYS} -d D -t {REDIS_TESTS} --csv` ({' '.join(p.pin_client)}),",
      "a fresh server per run. Requests/s over the whole mix (all requests / the sum of each",
      "test's time); peak RSS: the server's VmHWM; server CPU: its utime + stime over all",
      "requests (the machine is shared: requests/s also waits for the other load on both",
      "CPUs, CPU time less so). The list grows to N values before LPOP drains it.", "")
    rows = []
    for d, n in p.redis_sizes:
        row = ("redis", f"d{d}")
        bt, br = best(h, p, row, tim), best(h, p, row, rss)
        for a in p.allocs:
            t, m = tim(h, row, a), rss(h, row, a)
            rows.append((d, n, a, fmt(h.get("redis", a, f"d{d}", "rps"), "%.0f"), div(t, tim(h, row, "mimalloc")),
                         f"{div(t, bt[0])} ({bt[1]})", mb(m), div(m, rss(h, row, "mimalloc")),
                         f"{div(m, br[0])} ({br[1]})", fmt(cpu(h, row, a), "%.2f us"),
                         div(cpu(h, row, a), cpu(h, row, "mimalloc"))))
    r.table(["-d", "-n", "allocator", "requests/s", "time x mimalloc", "x best peer", "peak RSS", "x mimalloc",
             "x best peer", "server CPU per request", "x mimalloc"], rows)
    r("", "Requests/s per command (medians):", "")
    r.table(["-d", "allocator"] + REDIS_COMMANDS,
            [[d, a] + [fmt(h.get("redis", a, f"d{d}", f"rps_{t}"), "%.0f") for t in REDIS_COMMANDS]
             for d, _ in p.redis_sizes for a in p.allocs])


def table_of(h, p, r, row):
    """The standard table of one timed workload."""
    bt, br = best(h, p, row, tim), best(h, p, row, rss)
    w = row[0]
    rows = []
    for a in p.allocs:
        t, m = tim(h, row, a), rss(h, row, a)
        rows.append((a, fmt(t, "%.3f s"), div(t, tim(h, row, "mimalloc")), f"{div(t, bt[0])} ({bt[1]})", mb(m),
                     div(m, rss(h, row, "mimalloc")), f"{div(m, br[0])} ({br[1]})",
                     f"{fmt(h.get(w, a, '-', 'user_s'), '%.2f')} / {fmt(h.get(w, a, '-', 'sys_s'), '%.2f')} s",
                     fmt(h.get(w, a, "-", "minflt"), "%.0f")))
    r.table(["allocator", "time", "x mimalloc", "x best peer", "peak RSS", "x mimalloc", "x best peer", "user / sys",
             "minor faults"], rows)


def summary(h, p, r):
    r.heading("### Summary")
    r("Ratios to mimalloc, per row (lower is better); the geometric mean is over all rows,",
      "each redis value size a row of its own. CPU time: user + sys of the program (redis: of",
      "the server, per request), for reference next to the wall time the goals use.", "")
    head = ["allocator"]
    for row in p.rows:
        head += [f"{rowname(row)} time", "RSS"]
    rows = []
    for a in p.allocs:
        line = [a]
        for row in p.rows:
            line += [div(tim(h, row, a), tim(h, row, "mimalloc")), div(rss(h, row, a), rss(h, row, "mimalloc"))]
        rows.append(line + [fmt(geo(h, p, a, f), "%.3f") for f in (tim, rss, cpu)])
    r.table(head + ["geomean time", "geomean RSS", "geomean CPU time"], rows)
    r("", "uslab against the best peer of each row:", "")
    rows = []
    for row in p.rows:
        bt, br = best(h, p, row, tim), best(h, p, row, rss)
        rows.append((rowname(row), div(tim(h, row, "uslab"), bt[0]), bt[1], div(rss(h, row, "uslab"), br[0]), br[1]))
    r.table(["workload", "uslab time x best peer", "best peer (time)", "uslab RSS x best peer", "best peer (RSS)"], rows)
    if not p.has_mi:
        return
    dat = []
    for row in p.rows:
        dat.append([f'"{rowname(row)}"'] + [ratio(tim(h, row, a), tim(h, row, "mimalloc")) for a in p.allocs]
                   + [ratio(rss(h, row, a), rss(h, row, "mimalloc")) for a in p.allocs])
    dat.append(['"geomean"'] + [geo(h, p, a, tim) for a in p.allocs] + [geo(h, p, a, rss) for a in p.allocs])
    f = h.dat("malloc.dat", [[("%.2f" % c if isinstance(c, float) else c) for c in row] for row in dat])
    na = len(p.allocs)
    h.plot("malloc.png", f"""set multiplot layout 2,1
set style data histogram
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set grid ytics
set yrange [0:*]
set offsets 0, 0, graph 0.08, 0
set key below horizontal
set xtics rotate by -15
set arrow 1 from graph 0, first 1 to graph 1, first 1 nohead dashtype 2
set datafile missing "-"
set title "time per unit of work, ratio to mimalloc (lower is better)"
plot for [i=2:{na + 1}] "{f}" using i:xtic(1) title word("{' '.join(p.allocs)}", i - 1)
set title "peak RSS, ratio to mimalloc (lower is better)"
plot for [i={na + 2}:{2 * na + 1}] "{f}" using i:xtic(1) title word("{' '.join(p.allocs)}", i - {na} - 1)
unset multiplot
""", size="1000,800", extra=" noenhanced")
    r.image("as malloc", "malloc.png")


def _geo_time(h, p):
    v = geo(h, p, "uslab", tim)
    return v, f"{fmt(v, '%.3f')}x over {len(p.rows)} rows (CPU time: {fmt(geo(h, p, 'uslab', cpu), '%.3f')}x)"


def _worst_rss(h, rows):
    """uslab's worst peak RSS against mimalloc's over rows: (ratio, row name)."""
    return worst([(ratio(rss(h, row, "uslab"), rss(h, row, "mimalloc")), rowname(row)) for row in rows])


def _geo_rss(h, p):
    v = geo(h, p, "uslab", rss)
    w = _worst_rss(h, p.rows)
    return v, f"geomean {fmt(v, '%.3f')}x over {len(p.rows)} rows (worst: {div(w[0], 1)}x, {w[1]})"


def _worst_vs_best(h, p):
    w = []
    for row in p.rows:
        bt = best(h, p, row, tim)
        w.append((ratio(tim(h, row, "uslab"), bt[0]), f"{rowname(row)} (best: {bt[1]})"))
    w = worst(w)
    return w[0], f"worst {div(w[0], 1)}x: {w[1]}"


def _uslab_mi(h, p):
    return "uslab" in p.allocs and p.has_mi


# Issue 36's rows: the programs whose live memory swings.
SWINGING = ("php", "php-malloc", "lua", "cxx")


def _rss_swinging(h, p):
    w = _worst_rss(h, [row for row in p.rows if row[0] in SWINGING])
    return w[0], f"worst {div(w[0], 1)}x: {w[1]}"


GOALS = [
    Goal("as malloc: geomean time <= 1.0x mimalloc", _geo_time, "<=", 1.0, when=_uslab_mi, digits=3),
    Goal("as malloc: peak RSS <= 1.1x mimalloc", _geo_rss, "<=", 1.1, when=_uslab_mi, digits=3),
    Goal("as malloc: no workload slower than 1.25x the best peer", _worst_vs_best, "<=", 1.25,
         when=lambda h, p: "uslab" in p.allocs),
    Goal("as malloc: peak RSS <= 1.05x mimalloc's on php, lua and the C++ churn (issue 36)", _rss_swinging, "<=",
         1.05, when=lambda h, p: _uslab_mi(h, p) and any(row[0] in SWINGING for row in p.rows), digits=3),
    Goal("as malloc: peak RSS geomean <= 1.0x mimalloc (issue 36)", _geo_rss, "<=", 1.0, when=_uslab_mi, digits=3),
    Goal("as malloc: geomean time <= 0.95x mimalloc (issue 36)", _geo_time, "<=", 0.95, when=_uslab_mi, digits=3),
    Goal("as malloc: no workload slower than 1.1x the best peer (issue 36)", _worst_vs_best, "<=", 1.1,
         when=lambda h, p: "uslab" in p.allocs),
]


def headings(h, p):
    hs = ["## As malloc: real programs under LD_PRELOAD (issue 10)", "### Summary", "### Goals"]
    if "redis" in p.only:
        hs += ["### Does Debian's redis-server call malloc?", "### redis"]
    hs += [f"### {w}" for w in PROGRAMS if w in p.only]
    return hs + [f"### {w}" for w, k in (("python3", "python"), ("sqlite3", "sqlite"), ("gcc", "gcc")) if k in p.only]


def plots(h, p):
    return ["malloc.png"] if p.has_mi else []
