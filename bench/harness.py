"""bench/harness.py - what every uslab benchmark suite shares.

A suite is one module in bench/suites/ (see bench/suites/__init__.py for
what it declares). This module runs the suites and writes the report:

  - alternation: the variants of one benchmark run in turn, A B C ... A B C
    ..., BENCH_REPS times (Bench.alternate, Bench.reps);
  - every CSV line a program prints ("CSV,bench,variant,param,metric,value")
    goes into raw.csv with its repetition (Bench.run);
  - medians.csv: the median of every (bench, variant, param, metric) over the
    repetitions (Store), read back with Bench.get;
  - the report: markdown lines (Report), gnuplot plots (Bench.plot), goal
    rows declared as data next to the benchmark they judge (Goal), printed
    one way (**met**, **missed**, not measured);
  - what a program does is said once, in the header comment of its source
    (bench/bench_<program>.c, .cpp or .sh): Report.describe quotes it into
    the report, so a suite says only what is its own (the command lines it
    ran, its columns and goal rows);
  - at the end, a check that every wanted suite wrote its headings, its
    plots and measured its goal rows: anything missing fails the run.

Sizes come in three modes, chosen by the environment: full (default),
BENCH_QUICK=1 (small, a smoke run) and BENCH_TINY=1 (the smallest sizes
that still run every code path: CI's end-to-end check of the harness).

Objects written (issue 34): a program run with BENCH_WRITE=first4 (FIRST4)
writes the first 4 bytes of every object it allocates, as programs do, and
names its variant "<variant>-w4" (w4()); goal rows judge those runs. The
harness passes BENCH_WRITE only where a suite asks for it (an inherited
one is dropped), so a run's CSV always says which it was.

bench/regress runs the same suites with goals_only set: a suite then runs
only what its goal rows read (at the quick sizes), and no report is written.
"""

import csv
import datetime
import os
import shlex
import subprocess
import sys
import time


def log(prog, msg):
    print(f"{prog}: {msg}", file=sys.stderr, flush=True)


class Failure(Exception):
    """A benchmark program failed, or the report is incomplete."""


# BENCH_WRITE=first4 (bench/bench.h): the runs goal rows judge.
FIRST4 = {"BENCH_WRITE": "first4"}
# What BENCH_WRITE=first4 appends to a program's variant name.
W4 = "-w4"


def w4(v):
    """The name a program gives variant v under BENCH_WRITE=first4."""
    return v + W4


# ------------------------------------------------------------ numbers
# Every figure is a float or None (not measured); these print them.


def num(s):
    """A CSV value as a float; None when empty or not a number."""
    if s is None:
        return None
    try:
        return float(s)
    except ValueError:
        return None


def fmt(a, f):
    """a formatted with the %-format f, or '-' when not measured."""
    return "-" if a is None else f % a


def ratio(a, b):
    """a / b as a float, None when either is missing or b is 0."""
    if a is None or b is None or b == 0:
        return None
    return a / b


def div(a, b):
    """a / b printed with two decimals, '-' when not measurable."""
    return fmt(ratio(a, b), "%.2f")


def worst(pairs):
    """The largest (value, label) of pairs whose value was measured (of equal
    values, the last)."""
    best = (None, "-")
    for p in pairs:
        if p[0] is not None and (best[0] is None or p[0] >= best[0]):
            best = p
    return best


def median_str(values):
    """The median of numeric strings, printed as awk would (%.6g)."""
    vals = sorted((float(v), v) for v in values if num(v) is not None)
    if not vals:
        return ""
    n = len(vals)
    if n % 2:
        return vals[n // 2][1]
    m = (vals[n // 2 - 1][0] + vals[n // 2][0]) / 2
    return "%.6g" % m


# --------------------------------------------------------------- goals


class Goal:
    """One goal row: TEXT, what was measured, and whether it met LIMIT.

    measure(h, p) returns (value, shown): the number compared with limit by
    op ("<=" or ">="), and the text of the "measured" column (None: the value
    with two decimals and an "x"). text is a string or a function of (h, p)
    for rows that name what they found (the worst n, the best variant).
    when(h, p), if given, says whether the row applies to this run at all.
    """

    def __init__(self, text, measure, op, limit, when=None, digits=2):
        assert op in ("<=", ">=")
        self.text, self.measure, self.op, self.limit = text, measure, op, limit
        self.when, self.digits = when, digits

    def row(self, h, p):
        value, shown = self.measure(h, p)
        if value is not None:
            value = round(value, self.digits)  # judged as printed
        if shown is None:
            shown = f"{div(value, 1)}x"
        text = self.text(h, p) if callable(self.text) else self.text
        return text, shown, verdict(value, self.op, self.limit)


def verdict(value, op, limit):
    if value is None:
        return "not measured"
    ok = value <= limit if op == "<=" else value >= limit
    return "**met**" if ok else "**missed**"


# -------------------------------------------------------------- report


def source_of(program):
    """The source file of a benchmark program: bench/bench_<program>.c, .cpp
    or .sh ("-" read as "_": dpdk-noneal is bench_dpdk_noneal.c)."""
    here = os.path.dirname(os.path.abspath(__file__))
    for ext in (".c", ".cpp", ".sh"):
        path = os.path.join(here, f"bench_{program.replace('-', '_')}{ext}")
        if os.path.exists(path):
            return path
    raise Failure(f"no bench/bench_{program}.c (.cpp, .sh) to describe the program {program}")


def description(program):
    """The header comment of the program's source, its own description: the
    text of the first /* */ comment (a script: its first # lines), without
    the SPDX line, the #! line and the comment markers; tabs expanded where
    they stood, so the comment's columns stay aligned."""
    path = source_of(program)
    with open(path) as f:
        lines = [line.rstrip("\n").expandtabs(8) for line in f]
    out = []
    if path.endswith(".sh"):
        for line in lines[1 if lines and lines[0].startswith("#!") else 0:]:
            if not line.startswith("#"):
                break
            out.append(line[2:] if line.startswith("# ") else line[1:])
    else:
        start = next((i for i, line in enumerate(lines) if line.lstrip().startswith("/*")), None)
        if start is not None:
            for line in lines[start + 1:]:
                if line.strip() == "*/":
                    break
                out.append(line[3:] if line.startswith(" * ") else line.strip().lstrip("*").strip())
    while out and not out[-1].strip():
        out.pop()
    if not out:
        raise Failure(f"{path}: no header comment to describe the program {program}")
    return [line.rstrip() for line in out]


class Report:
    """The markdown being written: lines, with a few helpers for tables.

    described: the programs whose description the report holds already
    (program -> the heading it is under), shared by the sections of one
    report so that each program is quoted once."""

    def __init__(self, described=None):
        self.lines = []
        self.headings = []
        self.unmeasured = []
        self.described = {} if described is None else described

    def describe(self, program, name=None):
        """What the program does, in its own words: the header comment of
        bench/bench_<program>.c (.cpp, .sh) as an indented block, or, when
        the report quoted it already, where. name: how the suite calls it
        (default: the program)."""
        name = name or program
        src = os.path.relpath(source_of(program), os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
        if program in self.described:
            self.lines.extend([f"`{name}`: {src}, quoted above ({self.described[program]}).", ""])
            return
        self.described[program] = self.headings[-1].lstrip("# ") if self.headings else "this section"
        self.lines.extend([f"`{name}`, as {src} describes it:", ""])
        self.lines.extend(("    " + line).rstrip() for line in description(program))
        self.lines.append("")

    def __call__(self, *lines):
        """Add lines (each argument one line; no argument: an empty line)."""
        self.lines.extend(lines if lines else [""])

    def heading(self, text):
        self.lines.extend(["", text, ""])
        self.headings.append(text)

    def table(self, header, rows):
        def line(cells):
            return "|" + "|".join(f" {c} " if c != "" else " " for c in cells) + "|"

        self.lines.append(line(header))
        self.lines.append("|" + "---|" * len(header))
        self.lines.extend(line(row) for row in rows)

    def image(self, name, png):
        self.lines.extend(["", f"![{name}]({png})"])

    def goals(self, h, p, goals, head="met"):
        """The goal rows that apply to this run, as one table."""
        rows = []
        for g in goals:
            if g.when is not None and not g.when(h, p):
                continue
            text, shown, met = g.row(h, p)
            if met == "not measured":
                self.unmeasured.append(text)
            rows.append((text, shown, met))
        self.table(["goal", "measured", head], rows)
        return rows

    def text(self):
        return "\n".join(self.lines) + "\n"


# --------------------------------------------------------------- store


class Store:
    """Raw rows (rep, bench, variant, param, metric, value) and their medians."""

    HEADER = "rep,bench,variant,param,metric,value"

    def __init__(self, raw_path, medians_path, fresh=True, header=None):
        self.raw_path = raw_path
        self.medians_path = medians_path
        self.header = header or self.HEADER
        self.med = {}
        if fresh:
            with open(raw_path, "w") as f:
                f.write(self.header + "\n")

    def add(self, rep, bench, variant, param, metric, value):
        with open(self.raw_path, "a") as f:
            f.write(f"{rep},{bench},{variant},{param},{metric},{value}\n")

    def medians(self):
        """Compute the medians from the raw file and write them."""
        vals = {}
        with open(self.raw_path) as f:
            rows = list(csv.reader(f))[1:]
        for row in rows:
            if len(row) != 6:
                continue
            vals.setdefault(tuple(row[1:5]), []).append(row[5])
        lines = sorted(",".join(k) + "," + median_str(v) for k, v in vals.items())
        self.med = {}
        for line in lines:
            b, v, p, m, x = line.split(",")
            self.med[(b, v, p, m)] = x
        with open(self.medians_path, "w") as f:
            f.write("".join(line + "\n" for line in lines))

    def get(self, b, v, p, m):
        return num(self.med.get((b, v, str(p), m)))

    def has(self, b, v, p, m):
        return (b, v, str(p), m) in self.med


# --------------------------------------------------------------- bench


class Bench:
    """One run of the harness: where the programs are, the sizes, the data."""

    def __init__(self, prog, build, out, only, default_reps=5):
        self.prog = prog
        self.here = os.path.dirname(os.path.abspath(__file__))
        self.build = os.path.abspath(build)
        self.bin = os.path.join(self.build, "bench")
        self.out = os.path.abspath(out)
        os.makedirs(self.out, exist_ok=True)
        self.tiny = os.environ.get("BENCH_TINY", "0") == "1"
        self.quick = self.tiny or os.environ.get("BENCH_QUICK", "0") == "1"
        reps = os.environ.get("BENCH_REPS", str(1 if self.tiny else default_reps))
        if not reps.isdigit() or int(reps) < 1:
            raise Failure(f"BENCH_REPS={reps}: a number of alternations, at least 1")
        self.reps = int(reps)
        self.only = only
        self.goals_only = False  # bench/regress: only what the goal rows read
        self.nproc = os.cpu_count() or 1
        self.store = None
        self.plots = []

    # sizes --------------------------------------------------------------
    def size(self, full, quick, tiny=None):
        """The value for this run's mode (tiny defaults to quick)."""
        if self.tiny:
            return quick if tiny is None else tiny
        return quick if self.quick else full

    def log(self, msg):
        log(self.prog, msg)

    def path(self, name):
        return os.path.join(self.out, name)

    # runs ---------------------------------------------------------------
    def exe(self, prog):
        return os.path.join(self.bin, prog)

    def command(self, cmd, env=None, unset=(), stdout=True, check=True):
        """Run cmd (a list) with env added and the names in unset removed;
        its stdout (text), or a Failure when it fails."""
        e = dict(os.environ)
        for k in ("BENCH_WRITE",) + tuple(unset):  # BENCH_WRITE: only where a suite sets it
            e.pop(k, None)
        e.update(env or {})
        try:
            r = subprocess.run([str(c) for c in cmd], env=e, text=True,
                               stdout=subprocess.PIPE if stdout else subprocess.DEVNULL)
        except OSError as err:
            raise Failure(f"{cmd[0]}: {err.strerror} (build the bench preset)") from None
        if check and r.returncode != 0:
            envs = " ".join(f"{k}={v}" for k, v in (env or {}).items())
            raise Failure(
                f"{envs} {shlex.join(str(c) for c in cmd)} exited with {r.returncode}".strip()
            )
        return r.stdout if stdout else ""

    def run(self, rep, cmd, env=None, unset=(), rename=None, keep=None):
        """Run cmd once as repetition rep; its CSV lines into raw.csv.

        rename(fields) may rewrite the five fields (bench, variant, param,
        metric, value) of a line; keep(fields) may drop lines."""
        text = self.command(cmd, env=env, unset=unset)
        n = 0
        for line in text.splitlines():
            if not line.startswith("CSV,"):
                continue
            fields = line.split(",")[1:6]
            if len(fields) != 5 or (keep and not keep(fields)):
                continue
            if rename:
                fields = rename(fields)
            self.store.add(rep, *fields)
            n += 1
        if n == 0:
            raise Failure(f"{shlex.join(str(c) for c in cmd)} printed no CSV line")
        return text

    def alternate(self, prog, args, variants, writes=("none",), env=None):
        """prog-<variant> args for every variant in turn, reps times, once
        per BENCH_WRITE value in writes ("first4": the variant is named
        w4(v); "none": as it was), all of them alternated."""
        for r in self.repetitions():
            for v in variants:
                for w in writes:
                    e = dict(env or {}, BENCH_WRITE=w)
                    self.run(r, [self.exe(f"{prog}-{v}")] + list(args), env=e)

    def repetitions(self, n=None):
        return range(1, (self.reps if n is None else n) + 1)

    def callgrind(self, cmd, function, iters, env=None):
        """Instructions inside function (callgrind) divided by iters, or None;
        env as for command (BENCH_WRITE only if given)."""
        e = dict(os.environ)
        e.pop("BENCH_WRITE", None)
        e.update(env or {})
        r = subprocess.run(
            ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null",
             "--collect-atstart=no", f"--toggle-collect={function}"] + [str(c) for c in cmd],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            env=e,
        )
        for line in r.stderr.splitlines():
            if "Collected" in line:
                return int(line.split()[3]) / iters
        return None

    # medians ------------------------------------------------------------
    def get(self, b, v, p, m):
        return self.store.get(b, v, p, m)

    def has(self, b, v, p, m):
        return self.store.has(b, v, p, m)

    # plots --------------------------------------------------------------
    def dat(self, name, rows):
        """A gnuplot data file: rows of values, None as '-'."""
        with open(self.path(name), "w") as f:
            for row in rows:
                f.write(" ".join("-" if c is None else str(c) for c in row) + "\n")
        return self.path(name)

    def plot(self, png, script, size="800,450", font='"sans,10"', extra=""):
        """Write png with a gnuplot script (terminal and output set here)."""
        self.plots.append(png)
        head = f'set terminal pngcairo size {size} font {font}{extra}\nset output "{self.path(png)}"\n'
        try:
            r = subprocess.run(["gnuplot"], input=head + script, text=True, stderr=subprocess.PIPE)
        except FileNotFoundError:
            raise Failure("no gnuplot (scripts/deps.sh bench)") from None
        if r.returncode != 0:
            raise Failure(f"gnuplot failed for {png}: {r.stderr.strip()}")

    def bars(self, png, dat, title, ylabel):
        """One bar per allocator (the P1, P6 and threads plots)."""
        self.plot(png, f"""set title "{title}"
set ylabel "{ylabel}"
set style data histogram
set style fill solid 0.8 border -1
set boxwidth 0.7
set grid ytics
set yrange [0:*]
set xtics rotate by -30
plot "{dat}" using 2:xtic(1) notitle linecolor rgb "#3465a4"
""")

    def clustered(self, png, dat, title, ylabel, columns, settings="set yrange [0:*]", size="800,450"):
        """Grouped bars: a group per row of dat (its first column names it), a bar per column title."""
        using = ", ".join((f'"{dat}" using 2:xtic(1)' if i == 0 else f'"" using {i + 2}') + f' title "{t}"'
                          for i, t in enumerate(columns))
        self.plot(png, f"""set title "{title}"
set ylabel "{ylabel}"
set datafile missing "-"
set style data histogram
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set grid ytics
{settings}
set xtics rotate by -30
plot {using}
""", size=size)

    def check_plots(self, expected):
        """Every plot the suites declare (and any other they drew) written, a PNG."""
        bad = []
        for png in dict.fromkeys(expected + self.plots):
            try:
                with open(self.path(png), "rb") as f:
                    if f.read(8) != b"\x89PNG\r\n\x1a\n":
                        bad.append(png)
            except OSError:
                bad.append(png)
        return bad


def machine(h):
    """The machine.txt lines: what ran where."""

    def sh(cmd):
        r = subprocess.run(cmd, shell=True, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        return r.stdout.strip()

    def deb(pkg):
        return sh(f"dpkg-query -W -f='${{Version}}' {pkg}")

    cpu = sh("lscpu | sed -n 's/^Model name: *//p' | head -1")
    return [
        "date: " + datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        f"cpu: {cpu}, {h.nproc} cores",
        "kernel: " + os.uname().release,
        "compiler: " + sh("gcc --version | head -1"),
        "flags: library -O3 (CMake Release), benchmarks -O2, static libuslab.a",
        "peers: glibc " + sh("ldd --version | head -1 | awk '{print $NF}'")
        + f", mimalloc {deb('libmimalloc-dev')}, jemalloc {deb('libjemalloc-dev')},"
        + f" tcmalloc {deb('libgoogle-perftools-dev')}, DPDK {deb('libdpdk-dev')}"
        + " (Debian packages as shipped; DPDK: rte_mempool with a 512-object cache,"
        + " EAL --no-huge --no-pci)",
        f"repetitions: {h.reps} alternations, medians",
    ]


# ---------------------------------------------------------------- driver


def discover():
    """The suites in bench/suites/, in their report order (ORDER)."""
    import importlib
    import pkgutil

    here = os.path.dirname(os.path.abspath(__file__))
    if here not in sys.path:
        sys.path.insert(0, here)
    import suites

    mods = []
    for info in pkgutil.iter_modules(suites.__path__):
        if info.name.startswith("_"):
            continue
        m = importlib.import_module(f"suites.{info.name}")
        m.NAME = info.name
        mods.append(m)
    return sorted(mods, key=lambda m: m.ORDER)


def section(h, s, p, described=None):
    """One suite's report section; its headings and goal rows recorded
    (described: Report's, shared by the sections of one report)."""
    r = Report(described)
    s.report(h, p, r)
    wants = s.headings(h, p) if hasattr(s, "headings") else getattr(s, "HEADINGS", [])
    for want in (w.format(nproc=h.nproc) for w in wants):
        if want not in r.headings:
            r.unmeasured.append(f"section '{want}' not written")
    return r


def main(prog, argv, fixed=None, section_file=None):
    """bench/run [BUILD_DIR [OUT_DIR]]; fixed: the suites to run whatever
    BENCH_ONLY says (bench/run-malloc); section_file: write only that suite's
    section there instead of report.md."""
    here = os.path.dirname(os.path.abspath(__file__))
    build = argv[1] if len(argv) > 1 else os.path.join(here, "..", "build", "bench")
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    out = argv[2] if len(argv) > 2 else os.path.join(here, "results", stamp)
    if not os.path.isdir(build):
        log(prog, f"no build directory {build} (cmake --preset bench && cmake --build --preset bench)")
        return 2
    all_suites = discover()
    names = [s.NAME for s in all_suites]
    only = fixed or os.environ.get("BENCH_ONLY", " ".join(names)).split()
    unknown = [n for n in only if n not in names]
    if unknown:
        log(prog, f"unknown benchmark(s) {' '.join(unknown)} (BENCH_ONLY: {' '.join(names)})")
        return 2
    suites = [s for s in all_suites if s.NAME in only]
    try:
        return drive(Bench(prog, build, out, only), suites, section_file)
    except Failure as e:
        log(prog, f"FAILED: {e}")
        return 1


def drive(h, suites, section_file):
    default = Store(h.path("raw.csv"), h.path("medians.csv")) if section_file is None else None
    stores, params = {}, {}
    for s in suites:
        stores[s.NAME] = s.store(h) if hasattr(s, "store") else default
        params[s.NAME] = s.setup(h)
    expected = []
    for s in suites:
        p = params[s.NAME]
        expected += s.plots(h, p) if hasattr(s, "plots") else getattr(s, "PLOTS", [])
    for png in expected:  # none left from an earlier run into the same directory
        if os.path.exists(h.path(png)):
            os.unlink(h.path(png))
    mach = machine(h)
    if section_file is None:
        with open(h.path("machine.txt"), "w") as f:
            f.write("\n".join(mach) + "\n")
    for s in suites:
        h.store = stores[s.NAME]
        t0 = time.monotonic()
        s.run(h, params[s.NAME])
        h.log(f"{s.NAME}: ran in {time.monotonic() - t0:.0f} s")
    for st in {id(v): v for v in stores.values()}.values():
        st.medians()

    # Written in the report's order (the suites with goal rows in the shared
    # table first), so a program's description is quoted where it first shows.
    sections, described = {}, {}
    shared = [s for s in suites if not getattr(s, "GOALS_INLINE", False)]
    inline = [s for s in suites if getattr(s, "GOALS_INLINE", False)]
    for s in shared + inline:
        h.store = stores[s.NAME]
        sections[s.NAME] = section(h, s, params[s.NAME], described)

    problems = []
    if section_file is not None:
        r = sections[suites[0].NAME]
        path = h.path(section_file)
    else:
        path = h.path("report.md")
        r = Report()
        r("# uslab benchmark report", "",
          f"Command: `make bench` (bench/run {h.build}). Machine:", "")
        r.lines.extend("    " + line for line in mach)
        r("", f"Every variant ran in turn, {h.reps} times; figures are medians. TSC cycles",
          "are reference cycles (the TSC rate is fixed, the core clock may differ).")
        for s in shared:
            r.lines += sections[s.NAME].lines
        if any(getattr(s, "GOALS", None) for s in shared):
            r.heading("## Goals")
            rows = []
            for s in shared:
                h.store = stores[s.NAME]
                g = Report()
                g.goals(h, params[s.NAME], getattr(s, "GOALS", []), head="")
                rows += g.lines[2:]
                r.unmeasured += g.unmeasured
            r.table(["goal", "measured", ""], [])
            r.lines += rows
        for s in inline:
            r.lines += sections[s.NAME].lines
        for s in suites:
            r.unmeasured += sections[s.NAME].unmeasured
        r.headings = [x for s in suites for x in sections[s.NAME].headings]
    problems += [f"goal or section not measured: {u}" for u in r.unmeasured]
    problems += [f"plot not written: {p}" for p in h.check_plots(expected)]
    problems += [f"table row with nothing measured: {row}" for row in empty_rows(r.lines)]
    with open(path, "w") as f:
        f.write(r.text())
    latest = os.path.join(h.here, "results", "latest")
    if section_file is None and os.path.dirname(h.out) == os.path.dirname(latest):
        try:  # bench/results/latest: the newest run there
            if os.path.islink(latest):
                os.unlink(latest)
            os.symlink(os.path.basename(h.out), latest)
        except OSError:
            pass
    h.log(f"wrote {path}")
    sys.stdout.write(r.text())
    if problems:
        for p in problems:
            h.log(f"INCOMPLETE: {p}")
        raise Failure(f"the report is incomplete ({len(problems)} problem(s) above)")
    return 0


def empty_rows(lines):
    """Table rows (after the header) where no cell but the first has a figure."""
    bad = []
    for i, line in enumerate(lines):
        if not line.startswith("| ") or i < 2 or not lines[i - 1].startswith("|"):
            continue
        if line.startswith("|---"):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 2 or "n/a" in line:
            continue
        if not any(ch.isdigit() for c in cells[1:] for ch in c):
            bad.append(line)
    return bad
