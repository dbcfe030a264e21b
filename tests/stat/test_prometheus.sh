#!/bin/sh
# test_prometheus.sh USLAB_STAT STAT_CHILD PROMTOOL - uslab-stat --prometheus against a live
# process. The child (stat_child.c) runs under a fake two-node topology (the node families),
# the sampling guard on every slow path (objects in its slots) and USLAB_ON_BUG=report, and
# frees an object of a debug cache twice, twice over (two reports it outlives, and two caches
# of one name). What is checked:
# - promtool check metrics (Prometheus's own parser and linter) accepts the output without a
#   word, for one process and for --prometheus-all;
# - every figure is the one uslab-stat --json shows of the same process (the snapshot of
#   uslab_cache_stats(), uslab_node_stats, uslab_heap_stats, uslab_bug_count()): every cache's
#   every gauge and event counter, every node's entry, the page heap, the reports; the child
#   is idle, so two reads agree;
# - labels: pid and program on every sample, cache names escaped as the other views show them
#   (no raw escape byte), the second cache of a name "name#2", no two samples one series;
# - --prometheus-all with no exporter prints nothing and exits 0; errors as the other modes.
set -u
stat=$1 child=$2 promtool=$3
dir=$(mktemp -d)
fail() { echo "test_prometheus: $*" >&2; rm -rf "$dir"; exit 1; }
mkfifo "$dir/in"
# A directory of the test's own: --prometheus-all sees this child alone, not the machine's others.
mkdir -m 700 "$dir/stats"
export USLAB_STATS_DIR="$dir/stats"
USLAB_NUMA_FAKE=0:0,1:1 USLAB_GUARD=1 USLAB_ON_BUG=report USLAB_STATS=1 USLAB_STATS_MS=20 \
	"$child" < "$dir/in" > "$dir/out" 2> "$dir/err" &
pid=$!
exec 3> "$dir/in" # the child runs until this closes
for i in $(seq 100); do grep -q ready "$dir/out" 2>/dev/null && break; sleep 0.1; done
grep -q ready "$dir/out" || fail "the child did not start: $(cat "$dir/err")"
want_a=$(sed -n 's/.*stat_a=\([0-9]*\).*/\1/p' "$dir/out")
echo bug >&3
echo bug >&3
for i in $(seq 100); do [ "$(grep -c bugged "$dir/out")" -eq 2 ] && break; sleep 0.1; done
[ "$(grep -c bugged "$dir/out")" -eq 2 ] || fail "the child did not free twice: $(cat "$dir/err")"
reports=$(sed -n 's/^bugged reports=//p' "$dir/out" | tail -1)
[ "$reports" -eq 2 ] || fail "the child counted $reports reports, want 2"
grep -q "^uslab: BUG stat_bug: " "$dir/err" || fail "no report on stderr: $(cat "$dir/err")"
sleep 0.2 # a snapshot after "bugged"

"$stat" --prometheus "$pid" > "$dir/prom" 2> "$dir/stderr" || fail "--prometheus failed: $(cat "$dir/stderr")"
[ -s "$dir/prom" ] && [ ! -s "$dir/stderr" ] || fail "--prometheus: no output, or a message: $(cat "$dir/stderr")"
"$promtool" check metrics < "$dir/prom" > "$dir/lint" 2>&1 ||
	fail "promtool check metrics refuses the output: $(head -20 "$dir/lint")"
[ ! -s "$dir/lint" ] || fail "promtool check metrics: $(head -20 "$dir/lint")"
if LC_ALL=C grep -q "$(printf '[\033\007]')" "$dir/prom"; then fail "--prometheus: a raw escape byte"; fi
"$stat" --json "$pid" > "$dir/json" || fail "--json failed"

python3 - "$dir/prom" "$dir/json" "$pid" "$want_a" "$reports" <<'PY' || fail "--prometheus disagrees with --json (output in the lines above)"
import json, re, sys

prom, js, pid, want_a, reports = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
d = json.load(open(js))

# The text format: "# HELP name text", "# TYPE name type", "name{k="v",...} value".
helps, types, series, fam_of = {}, {}, {}, {}
esc = {"\\": "\\", '"': '"', "n": "\n"}
for line in open(prom, encoding="utf-8").read().splitlines():
    m = re.match(r"# (HELP|TYPE) (\S+) (.*)$", line)
    if m:
        table = helps if m.group(1) == "HELP" else types
        assert m.group(2) not in table, "two %s lines for %s" % (m.group(1), m.group(2))
        table[m.group(2)] = m.group(3)
        continue
    assert not line.startswith("#"), line
    m = re.match(r"([a-z_]+)\{(.*)\} (\S+)$", line)
    assert m, "not a sample (or a timestamp): " + line
    name, rest, value = m.groups()
    assert name in types and name in helps, "no HELP or TYPE before " + line
    labels, i = {}, 0
    while i < len(rest):
        k = re.match(r'([a-z_]+)="', rest[i:])
        assert k, line
        i += k.end()
        v = ""
        while rest[i] != '"':
            if rest[i] == "\\":
                v += esc[rest[i + 1]]
                i += 2
            else:
                v += rest[i]
                i += 1
        labels[k.group(1)] = v
        i += 1
        if i < len(rest):
            assert rest[i] == ",", line
            i += 1
    assert labels["pid"] == pid and labels["program"] == "stat_child", line
    key = (name,) + tuple(sorted(labels.items()))
    assert key not in series, "two samples of one series: " + line
    series[key] = float(value)
    assert (types[name] == "counter") == name.endswith("_total"), name

def get(name, **labels):
    labels.update(pid=pid, program="stat_child")
    key = (name,) + tuple(sorted(labels.items()))
    assert key in series, "no sample %s %s" % (name, labels)
    return series[key]

def shown(s):  # export_escape(): what every view shows of a name
    return "".join(c if " " <= c <= "~" and c != "\\" else "\\x%02x" % b
                   for c, b in ((chr(b), b) for b in s.encode()))

# The labels of the caches: oldest first, the second of a name "name#2" (JSON lists newest first).
seen, label = {}, {}
for i in reversed(range(len(d["caches"]))):
    name = d["caches"][i]["name"]
    seen[name] = seen.get(name, 0) + 1
    label[i] = shown(name) + ("#%d" % seen[name] if seen[name] > 1 else "")
assert seen.get("stat_bug") == 2, seen
assert sorted(v for v in label.values() if v.startswith("stat_bug")) == ["stat_bug", "stat_bug#2"]
assert "evil\\x1b[2J\\x1b]0;x\\x07" in label.values(), label

gauges = {"objects_active": "active_objs", "objects": "num_objs", "objects_sheaved": "sheaved",
          "objects_guarded": "guard_objs", "slabs_active": "active_slabs", "slabs": "num_slabs",
          "slabs_partial": "partial_slabs", "object_size_bytes": "object_size",
          "object_stride_bytes": "objsize", "objects_per_slab": "objperslab",
          "slab_meta_bytes": "meta_bytes", "memory_bytes": "bytes",
          "sheaf_capacity": "sheaf_capacity", "sheaf_capacity_min": "sheaf_capacity_min",
          "sheaf_capacity_max": "sheaf_capacity_max", "barn_sheaves_full": "barn_full",
          "barn_sheaves_empty": "barn_empty", "percpu": "percpu", "percpu_cpus": "percpu_cpus",
          "percpu_sheaves": "percpu_sheaves", "percpu_objects": "percpu_objects"}
nodes = {"slabs": "num_slabs", "slabs_active": "active_slabs", "slabs_partial": "partial_slabs",
         "objects": "num_objs", "objects_active": "active_objs", "remote_frees_total": "remote_frees",
         "fallbacks_total": "fallbacks", "pool_objects": "pool_objs"}
checked = 0
for i, c in enumerate(d["caches"]):
    cl = label[i]
    for g, j in gauges.items():
        assert get("uslab_cache_" + g, cache=cl) == c[j], (cl, g, c[j])
    assert get("uslab_cache_slab_size_bytes", cache=cl) == c["pagesperslab"] * 4096, cl
    for e, v in c["events"].items():
        assert get("uslab_cache_events_total", cache=cl, event=e) == v, (cl, e, v)
    assert len(c["nodes"]) == 2, c
    for n in c["nodes"]:
        for g, j in nodes.items():
            assert get("uslab_cache_node_" + g, cache=cl, node=str(n["node"])) == n[j], (cl, n, g)
    checked += 1
per_cache = sum(1 for k in series if "cache" in dict(k[1:]))
assert per_cache == checked * (len(gauges) + 1 + len(d["caches"][0]["events"]) + 2 * len(nodes)), \
    "samples of no JSON figure: %d" % per_cache
# (At least what the child holds: full sheaves left in a node's barn count as active too, and
# under two nodes whether any are left depends on where the threads ran.)
assert get("uslab_cache_objects_active", cache="stat_a") >= want_a
assert sum(c["guard_objs"] for c in d["caches"]) > 0, "no object in the guard (USLAB_GUARD=1)"
for k, v in d["heap"].items():
    name = "uslab_heap_" + k
    name = name + "_total" if name + "_total" in types else name
    assert get(name) == v, (k, v)
assert get("uslab_reports_total") == d["reports"] == reports, (d["reports"], reports)
for k in ("queued", "freed", "batches", "leaked"):
    assert get("uslab_rcu_%s_total" % k) == d["rcu"][k], k
assert get("uslab_rcu_queued_total") == 100
assert 0 < get("uslab_snapshot_refreshes_total") <= d["refreshes"]  # (--json read later)
print("test_prometheus: %d caches, %d samples, %d families agree with --json" % (checked, len(series), len(types)))
PY

# --prometheus-all: a second exporter beside it; each family's lines once, its samples of both
# processes together (promtool refuses a family in two places); the first process's samples as
# --prometheus shows them (every figure but the snapshot's count, time and cost holds still).
mkfifo "$dir/in2"
USLAB_STATS=1 USLAB_STATS_MS=20 "$child" < "$dir/in2" > "$dir/out2" 2>&1 &
pid2=$!
exec 4> "$dir/in2"
for i in $(seq 100); do grep -q ready "$dir/out2" 2>/dev/null && break; sleep 0.1; done
grep -q ready "$dir/out2" || fail "the second child did not start: $(cat "$dir/out2")"
sleep 0.2
"$stat" --prometheus-all > "$dir/all" 2> "$dir/stderr" || fail "--prometheus-all failed: $(cat "$dir/stderr")"
[ ! -s "$dir/stderr" ] || fail "--prometheus-all: $(cat "$dir/stderr")"
"$promtool" check metrics < "$dir/all" > "$dir/lint" 2>&1 && [ ! -s "$dir/lint" ] ||
	fail "promtool check metrics, --prometheus-all: $(head -20 "$dir/lint")"
[ "$(grep -c '^# TYPE ' "$dir/all")" -eq "$(grep -v '^#' "$dir/all" | sed 's/{.*//' | sort -u | wc -l)" ] ||
	fail "--prometheus-all: a family's TYPE line twice, or none"
grep -q "^uslab_cache_objects_active{pid=\"$pid2\",program=\"stat_child\",cache=\"stat_a\"} " "$dir/all" ||
	fail "--prometheus-all misses the second process"
"$stat" --prometheus "$pid" > "$dir/prom"
grep "{pid=\"$pid\"," "$dir/all" | grep -v "^uslab_snapshot_" > "$dir/all.cmp"
grep -v "^#" "$dir/prom" | grep -v "^uslab_snapshot_" > "$dir/prom.cmp"
cmp -s "$dir/all.cmp" "$dir/prom.cmp" ||
	fail "--prometheus-all is not --prometheus $pid: $(diff "$dir/all.cmp" "$dir/prom.cmp" | head)"
exec 4>&-
wait "$pid2" || fail "the second child failed"
mkdir -m 700 "$dir/none"
USLAB_STATS_DIR="$dir/none" "$stat" --prometheus-all > "$dir/all" 2> "$dir/stderr" ||
	fail "--prometheus-all without exporters: status $?"
[ ! -s "$dir/all" ] && [ ! -s "$dir/stderr" ] || fail "--prometheus-all without exporters: $(cat "$dir/all" "$dir/stderr")"

# Errors as the other modes: 1 and one line, 2 for a usage error.
"$stat" --prometheus 999999999 2> "$dir/err2"; [ $? -eq 1 ] && grep -q "no process" "$dir/err2" ||
	fail "--prometheus, no process: $(cat "$dir/err2")"
"$stat" --prometheus $$ > "$dir/prom" 2> "$dir/err2"; [ $? -eq 1 ] && grep -q "does not export" "$dir/err2" &&
	[ ! -s "$dir/prom" ] || fail "--prometheus, a process that does not export: $(cat "$dir/err2")"
"$stat" --prometheus 2> /dev/null; [ $? -eq 2 ] || fail "--prometheus without a pid"
"$stat" --prometheus-all "$pid" 2> /dev/null; [ $? -eq 2 ] || fail "--prometheus-all PID"
"$stat" -w 1 --prometheus "$pid" 2> /dev/null; [ $? -eq 2 ] || fail "-w with --prometheus"

exec 3>&-
wait "$pid" || fail "the child failed: $(cat "$dir/err")"
rm -rf "$dir"
echo "ok test_prometheus: promtool check metrics accepts --prometheus and --prometheus-all;" \
	"every cache, node, event, heap figure and the reports as --json has them;" \
	"escaped and numbered cache names; no exporter, errors"
