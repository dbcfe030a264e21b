# bench/workloads/gen-text.py LINES - deterministic text for the malloc
# suite's sed, sort, xz and zstd runs: LINES lines of words and numbers
# ("<word> <word> <number> <word>..."), from a fixed seed.
import random
import sys

n = int(sys.argv[1]) if len(sys.argv) > 1 else 100000
rng = random.Random(24)
words = ["".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(3 + i % 9)) for i in range(4096)]
out = sys.stdout
for i in range(n):
    k = 4 + i % 9
    out.write(" ".join(words[rng.randrange(4096)] for _ in range(2)) + f" {rng.randrange(1000000)} "
              + " ".join(words[rng.randrange(4096)] for _ in range(k)) + "\n")
