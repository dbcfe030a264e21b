# bench/workloads/alloc.pl [SCALE] - an allocation-heavy, deterministic perl
# program for the malloc suite (bench/suites/malloc.py): hashes of arrays,
# string building, split and join, regex substitutions, sorting, a churning
# cache. SCALE (default 1, may be a fraction) multiplies the work; what it
# prints depends on SCALE only.
use strict;
use warnings;

my $scale = @ARGV ? $ARGV[0] : 1;
my $n = int(200000 * $scale) || 1;
my $seed = 42;
sub rnd { $seed = ($seed * 1103515245 + 12345) % 2147483648; return $seed; }
my @words = map { join "", map { chr(97 + rnd() % 26) } 1 .. (3 + $_ % 9) } 0 .. 4095;
my $check = 0;

# records: hashes of small arrays, grouped and summed
my %group;
for my $i (1 .. $n) {
	my $w = $words[rnd() % @words];
	push @{ $group{$w} }, { id => $i, v => rnd() % 1000, tag => "$w-$i" };
}
for my $k (sort keys %group) {
	my $s = 0;
	$s += $_->{v} for @{ $group{$k} };
	$check = ($check * 31 + $s + scalar @{ $group{$k} }) % 1000000007;
}
undef %group;

# strings: built, split, substituted, joined
my @lines;
for my $i (1 .. $n / 4) {
	my $line = join " ", map { $words[rnd() % @words] } 1 .. 12;
	$line =~ s/([aeiou])([a-z])/$2$1/g;
	push @lines, $line;
}
my %count;
for my $l (@lines) { $count{$_}++ for split / /, $l; }
my @top = (sort { $count{$b} <=> $count{$a} || $a cmp $b } keys %count)[0 .. 9];
$check = ($check + length(join ",", @top)) % 1000000007;
my $text = join "\n", @lines;
$check = ($check + length($text)) % 1000000007;
undef @lines;

# a bounded cache that churns
my (%cache, @order);
for my $i (1 .. $n) {
	my $k = rnd() % ($n / 2 + 1);
	if (!exists $cache{$k}) {
		$cache{$k} = "x" x (16 + $k % 200);
		push @order, $k;
		delete $cache{ shift @order } if @order > 5000;
	}
	$check = ($check + length($cache{$k} // "")) % 1000000007;
}
print "check $check\n";
