<?php
// bench/workloads/alloc.php [SCALE] - an allocation-heavy, deterministic PHP
// program for the malloc suite: arrays of records, string building,
// preg_replace, explode/implode, sorting, a churning cache. The Zend engine
// has its own allocator; USE_ZEND_ALLOC=0 sends every allocation to malloc.
// What it prints depends on SCALE only.
$scale = isset($argv[1]) ? (float)$argv[1] : 1.0;
$n = max(1, (int)(200000 * $scale));
$seed = 42;
function rnd() { global $seed; $seed = ($seed * 1103515245 + 12345) % 2147483648; return $seed; }
$words = [];
for ($i = 0; $i < 4096; $i++) {
    $w = '';
    for ($j = 0; $j < 3 + $i % 9; $j++) $w .= chr(97 + rnd() % 26);
    $words[] = $w;
}
$check = 0;
$groups = [];
for ($i = 1; $i <= $n; $i++) {
    $w = $words[rnd() % 4096];
    $groups[$w][] = ['id' => $i, 'v' => rnd() % 1000, 'tag' => "$w-$i"];
}
ksort($groups, SORT_STRING);
foreach ($groups as $k => $g) {
    $s = 0;
    foreach ($g as $r) $s += $r['v'];
    $check = ($check * 31 + $s + count($g)) % 1000000007;
}
unset($groups);
$lines = [];
for ($i = 1; $i <= intdiv($n, 4); $i++) {
    $t = [];
    for ($j = 0; $j < 12; $j++) $t[] = $words[rnd() % 4096];
    $lines[] = preg_replace('/([aeiou])([a-z])/', '$2$1', implode(' ', $t));
}
$count = [];
foreach ($lines as $l) foreach (explode(' ', $l) as $w) $count[$w] = ($count[$w] ?? 0) + 1;
$text = implode("\n", $lines);
$check = ($check + strlen($text)) % 1000000007;
$cache = []; $order = [];
for ($i = 1; $i <= $n; $i++) {
    $k = rnd() % (intdiv($n, 2) + 1);
    if (!isset($cache[$k])) {
        $cache[$k] = str_repeat('x', 16 + $k % 200);
        $order[] = $k;
        if (count($order) > 5000) unset($cache[array_shift($order)]);
    }
    $check = ($check + strlen($cache[$k] ?? '')) % 1000000007;
}
echo "check $check ", count($count), "\n";
