#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""doc_tuning_options.py USLAB_STAT ROOT - doc/tuning.md's table of
tunables against what the program says (`uslab-stat --options`, the table
of src/options.c): one row per variable and no other, each with the
program's default and range. And a default quoted elsewhere - README.md,
doc/*.md, the public headers, src/ comments - as "`USLAB_X` (N unit" or
"USLAB_X [word] (default N unit" must be the program's default (units:
ms; KiB and MiB, of bytes or of a _KB variable's KiB).

Ranges as tuning.md writes them: `lo..hi` (2^N for a power of two), words
`a, b, c (or 0..2)` for a tunable that takes a word or its index (the
program prints `a,b,c,0..2`); a string tunable (range `-`) is described in
words, only its default (`unset`) is checked. Exit 1 on any difference.
"""
import glob
import os
import re
import subprocess
import sys

stat, root = sys.argv[1], sys.argv[2]
doc = os.path.join(root, "doc", "tuning.md")

prog = {}
out = subprocess.run([stat, "--options"], capture_output=True, text=True, check=True).stdout
for line in out.splitlines():
    if line.startswith("USLAB_"):
        var, _value, default, rng = line.split()[:4]
        prog[var] = (default, rng)
if len(prog) < 10:
    sys.exit(f"doc_tuning_options: only {len(prog)} variables in uslab-stat --options")

rows, in_table = {}, False
for line in open(doc):
    if line.startswith("| variable | default | range |"):
        in_table = True
        continue
    if in_table and not line.startswith("|"):
        break
    m = re.match(r"^\| `(USLAB_\w+)` \| ([^|]*) \| ([^|]*) \|", line)
    if in_table and m:
        rows[m.group(1)] = (m.group(2).strip(), m.group(3).strip())


def normal(rng):
    """A range cell of tuning.md as the program prints it."""
    r = rng.replace("`", "")
    r = re.sub(r"2\^(\d+)", lambda m: str(1 << int(m.group(1))), r)
    m = re.fullmatch(r"(.*\S)\s*\(or (\d+\.\.\d+)\)", r)
    if m:  # words, then their indices
        r = ",".join(w.strip() for w in m.group(1).split(",")) + "," + m.group(2)
    return r


bad = []
for var, (default, rng) in prog.items():
    if var not in rows:
        bad.append(f"{var}: no row")
        continue
    ddef, drng = rows[var]
    if ddef.replace("`", "") != default:
        bad.append(f"{var}: default {ddef}, the program's is {default}")
    if rng != "-" and normal(drng) != rng:
        bad.append(f"{var}: range {drng}, the program's is {rng}")
for var in rows:
    if var not in prog:
        bad.append(f"{var}: a row for a variable the program does not have")
bad = [f"doc/tuning.md: {b}" for b in bad]

# Defaults quoted in prose.
quoted = re.compile(r"\b(USLAB_[A-Z0-9_]+)`?(?: \w+)? \((default:? )?(\d+)(?: ?(KiB|MiB|ms)\b)?")
files = [os.path.join(root, "README.md")] + sorted(glob.glob(os.path.join(root, "doc", "*.md")))
files += sorted(glob.glob(os.path.join(root, "include", "**", "*.h"), recursive=True))
files += sorted(glob.glob(os.path.join(root, "src", "*.[ch]")))
nquoted = 0
for path in files:
    text = re.sub(r"\s*\n\s*(?:\* ?|// ?)?", " ", open(path).read())  # lines joined
    for m in quoted.finditer(text):
        var, n, unit = m.group(1), int(m.group(3)), m.group(4)
        if var not in prog or not prog[var][0].isdigit():
            continue
        scale = {None: 1, "ms": 1, "KiB": 1024, "MiB": 1 << 20}[unit]
        if var.endswith("_KB") and unit:
            scale //= 1024
        nquoted += 1
        if n * scale != int(prog[var][0]):
            bad.append(f"{os.path.relpath(path, root)}: {m.group(0)!r}: the default is {prog[var][0]}")
for b in bad:
    print(b)
print(f"doc_tuning_options: {len(prog)} variables, {nquoted} defaults quoted elsewhere, "
      f"{len(bad)} differences")
sys.exit(1 if bad else 0)
