# bench/workloads/gen-c.py FUNCTIONS - print a large, deterministic C file for
# bench/run-malloc's compiler workload (gcc -O2 -c): FUNCTIONS groups of
# structs, static inline helpers, switch-heavy functions, loops over arrays
# and string tables, the kind of code that keeps cc1's allocator busy
# (trees, RTL, bitmaps, hash tables). The same FUNCTIONS gives the same file.
import sys

n = int(sys.argv[1]) if len(sys.argv) > 1 else 400
out = sys.stdout.write
out("#include <stddef.h>\n#include <string.h>\n#include <stdio.h>\n\n")
for i in range(n):
    k = 3 + i % 7
    out(f"struct rec{i} {{ int id; unsigned flags; double w[{k}]; char name[{16 + i % 48}]; struct rec{i} *next; }};\n")
    out(f"enum op{i} {{ " + ", ".join(f"OP{i}_{j}" for j in range(8 + i % 9)) + " };\n")
    out(f"static const char *const names{i}[] = {{ " + ", ".join(f'"n{i}_{j}_{"x" * (j % 5)}"' for j in range(6 + i % 6)) + " };\n")
    out(f"static inline double mix{i}(const struct rec{i} *r, double a)\n{{\n"
        f"\tdouble s = a;\n\tfor (int j = 0; j < {k}; j++)\n\t\ts = s * 0.5 + r->w[j] * (j + {i % 5 + 1});\n"
        f"\treturn s + (r->flags & {1 + i % 31}u);\n}}\n")
    out(f"int step{i}(struct rec{i} *head, enum op{i} op, int n, char *buf, size_t len)\n{{\n\tint acc = 0;\n")
    out(f"\tfor (struct rec{i} *r = head; r; r = r->next) {{\n\t\tswitch (op) {{\n")
    for j in range(8 + i % 9):
        e = j % 4
        if e == 0:
            body = f"acc += r->id * {j + 1} + (int)mix{i}(r, {j}.5);"
        elif e == 1:
            body = f"r->flags ^= {1 << (j % 16)}u; acc -= (int)strlen(r->name);"
        elif e == 2:
            body = f"for (int q = 0; q < n; q++) r->w[q % {k}] += q * {j};"
        else:
            body = f"snprintf(buf, len, \"%s:%d\", names{i}[{j} % {6 + i % 6}], r->id); acc += buf[0];"
        out(f"\t\tcase OP{i}_{j}:\n\t\t\t{body}\n\t\t\tbreak;\n")
    out("\t\tdefault:\n\t\t\tacc++;\n\t\t}\n")
    out(f"\t\tif (acc > {1000 + i}) {{\n\t\t\tacc %= {97 + i % 13};\n\t\t\tr->id++;\n\t\t}}\n\t}}\n\treturn acc;\n}}\n\n")
out("int run_all(void *p[], int n, char *buf, size_t len)\n{\n\tint acc = 0;\n")
for i in range(n):
    out(f"\tacc += step{i}(p[{i}], OP{i}_{i % 8}, n, buf, len);\n")
out("\treturn acc;\n}\n")
