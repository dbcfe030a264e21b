"""The C++ API (issue 40, bench_cxx.cpp): container churn on uslab's allocator and resources against the others."""

from types import SimpleNamespace as NS

from harness import Goal, div, fmt, ratio
from suites.malloc import so_of

ORDER = 95
GOALS_INLINE = True
HEADINGS = ["## C++: standard containers on uslab (issue 40)"]
CONTAINERS = ["umap", "list"]
USLAB = ["uslab", "kres", "cres"]
OTHERS = ["std-glibc", "std-mimalloc", "std-jemalloc", "unsync", "sync"]


def setup(h):
    return NS(ops=h.size(4000000, 400000, 20000), live=h.size(100000, 100000, 2000), reps=h.size(3, 3, 1),
              so={"mimalloc": so_of("libmimalloc2.0", r"/libmimalloc\.so\.2$"),
                  "jemalloc": so_of("libjemalloc2", r"/libjemalloc\.so\.2$")})


def run(h, p):
    h.log("cxx: std::unordered_map and std::list churn, uslab's allocator and resources against the others")
    args = [p.ops, p.live, p.reps]
    for r in h.repetitions():
        for c in CONTAINERS:
            for s in ("uslab", "kres", "cres", "std", "unsync", "sync"):
                h.run(r, [h.exe("cxx-bench"), c, s] + args, env={"BENCH_PEER_NAME": "glibc"} if s == "std" else {})
            for peer in ("mimalloc", "jemalloc"):
                if p.so[peer]:
                    h.run(r, [h.exe("cxx-bench"), c, "std"] + args,
                          env={"BENCH_PEER_NAME": peer, "LD_PRELOAD": p.so[peer]})


def _ns(h, p, c, v):
    return h.get("cxx", f"{c}-{v}", str(p.live), "ns")


def _best(h, p, c, names):
    got = [(_ns(h, p, c, v), v) for v in names if _ns(h, p, c, v) is not None]
    return min(got) if got else (None, "-")


def report(h, p, r):
    r.heading(HEADINGS[0])
    r.describe("cxx", "cxx-bench")
    r(f"Ran: `cxx-bench umap|list SCHEME {p.ops} {p.live} {p.reps}` for every scheme; std-<malloc>: the std scheme",
      "on glibc's malloc, and with mimalloc's or jemalloc's library in `LD_PRELOAD`. ns per operation, the",
      f"median of the program's repetitions, then of {h.reps} alternated runs.", "")
    names = USLAB + OTHERS
    rows = []
    for c in CONTAINERS:
        best = _best(h, p, c, OTHERS)[0]
        rows.append([c] + [f"{fmt(_ns(h, p, c, v), '%.2f')}" for v in names] + [div(_best(h, p, c, USLAB)[0], best)])
    r.table(["container"] + names + ["best uslab / best other"], rows)
    r()
    r.goals(h, p, GOALS)


def _vs_best(c):
    def m(h, p):
        u, uv = _best(h, p, c, USLAB)
        o, ov = _best(h, p, c, OTHERS)
        x = ratio(u, o)
        return x, f"{fmt(x, '%.2f')}x ({uv} {fmt(u, '%.2f')} ns, {ov} {fmt(o, '%.2f')} ns)"
    return m


GOALS = [Goal(f"C++ {c}: the best uslab scheme <= 1.0x the best of the others (issue 40)", _vs_best(c), "<=", 1.0)
         for c in CONTAINERS]
