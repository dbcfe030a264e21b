# bench/workloads/gen-git.py DIR COMMITS - a deterministic git repository for
# the malloc suite's git run: FILES text files in a tree of directories,
# COMMITS commits each rewriting a few hundred lines across a tenth of them,
# fixed authors and dates (the same hashes on every run).
import os
import random
import subprocess
import sys

root, commits = sys.argv[1], int(sys.argv[2])
files = 200
rng = random.Random(7)
words = ["".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(3 + i % 9)) for i in range(2048)]
env = dict(os.environ, GIT_AUTHOR_NAME="bench", GIT_AUTHOR_EMAIL="bench@example.org", GIT_COMMITTER_NAME="bench",
           GIT_COMMITTER_EMAIL="bench@example.org", GIT_CONFIG_GLOBAL="/dev/null", GIT_CONFIG_NOSYSTEM="1")
subprocess.run(["git", "init", "-q", "-b", "main", root], check=True, env=env)
content = {}


def line():
    return " ".join(rng.choice(words) for _ in range(8))


for f in range(files):
    content[f"d{f % 10}/f{f}.txt"] = [line() for _ in range(200)]
for c in range(commits):
    touched = rng.sample(sorted(content), files // 10) if c else sorted(content)
    for path in touched:
        lines = content[path]
        for _ in range(20):
            i = rng.randrange(len(lines))
            lines[i] = line()
            if rng.random() < 0.3:
                lines.insert(i, line())
        os.makedirs(os.path.join(root, os.path.dirname(path)), exist_ok=True)
        with open(os.path.join(root, path), "w") as fh:
            fh.write("\n".join(lines) + "\n")
    date = f"{1700000000 + c * 3600} +0000"
    subprocess.run(["git", "-C", root, "add", "-A"], check=True, env=env)
    subprocess.run(["git", "-C", root, "commit", "-q", "-m", f"commit {c}"], check=True,
                   env=dict(env, GIT_AUTHOR_DATE=date, GIT_COMMITTER_DATE=date))
