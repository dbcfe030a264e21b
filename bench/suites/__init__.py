"""bench/suites: one module per benchmark suite (a name BENCH_ONLY takes).

Adding a benchmark is adding one file here; bench/harness.py finds it. A
suite module declares:

  ORDER        its place in the report (and in a run)
  HEADINGS     the report headings it must write (checked after the run)
  GOALS        goal rows (harness.Goal), next to the benchmark they judge;
               with GOALS_INLINE = True the suite prints them in its own
               section (Report.goals), else they join the report's
               "## Goals" table
  setup(h)     its parameters for this run (h.size(full, quick, tiny)),
               returned as an object passed to run, report and the goals
  run(h, p)    the runs: h.alternate, h.run (CSV lines into raw.csv); goal
               rows judge runs with BENCH_WRITE=first4 (harness.FIRST4,
               their variants named harness.w4(v)); with h.goals_only set
               (bench/regress) only the runs its GOALS read
  report(h, p, r)  its section: r(...) lines, r.heading, r.table, h.plot;
               r.describe(program) quotes what the program does from the
               header comment of its source (bench/bench_<program>.c), the
               one place that says it: the suite adds only its own (the
               command lines it ran, with their sizes, and its columns)
  store(h)     optional: its own raw/medians files (the malloc suite)

Why a package of modules and not one file or a table: each benchmark keeps
its sizes, runs, report text, plots and goals in one place, so the four
regions of the old bench/run collapse into one file per suite, and a suite
can be read (or dropped) without reading the others.
"""

# The allocators the microbenchmarks compare (<program>-<peer>).
PEERS = ["uslab", "uslab-call", "glibc", "mimalloc", "jemalloc", "tcmalloc", "dpdk"]
# Through a malloc-like interface (kmalloc, alloc): no DPDK.
KPEERS = ["uslab", "uslab-call", "glibc", "mimalloc", "jemalloc", "tcmalloc"]
