# bench/workloads/alloc.awk - an allocation-heavy, deterministic gawk
# program for the malloc suite: gawk -v scale=S -f alloc.awk. Associative
# arrays, string concatenation, split, gsub and sorted traversal; what it
# prints depends on scale only.
function rnd() { seed = (seed * 1103515245 + 12345) % 2147483648; return seed }
BEGIN {
	if (scale == "") scale = 1
	n = int(150000 * scale); if (n < 1) n = 1
	seed = 42
	for (i = 0; i < 4096; i++) {
		w = ""
		for (j = 0; j < 3 + i % 9; j++) w = w sprintf("%c", 97 + rnd() % 26)
		words[i] = w
	}
	for (i = 1; i <= n; i++) {
		w = words[rnd() % 4096]
		cnt[w]++
		rec[i] = w " " i " " (rnd() % 1000)
	}
	for (i = 1; i <= n; i += 2) delete rec[i]
	line = ""
	for (i = 1; i <= n / 4; i++) {
		s = ""
		for (j = 0; j < 10; j++) s = s words[rnd() % 4096] " "
		gsub(/[aeiou]/, "&&", s)
		m = split(s, parts, " ")
		for (j = 1; j <= m; j++) pairs[parts[j] SUBSEP j]++
		if (length(line) < 200000) line = line s
	}
	PROCINFO["sorted_in"] = "@ind_str_asc"
	check = 0
	for (k in cnt) check = (check * 31 + cnt[k] + length(k)) % 1000000007
	for (k in pairs) check = (check + pairs[k]) % 1000000007
	for (k in rec) check = (check + length(rec[k])) % 1000000007
	print "check", check, length(line)
}
