# SPDX-License-Identifier: MIT
# workload.py [--preload] - a Python workload that allocates a lot (dicts,
# lists, strings, a json round trip, threads compressing and hashing) and
# prints a deterministic digest; tests/preload/run.sh runs it under
# LD_PRELOAD=libuslab-malloc.so (and PYTHONMALLOC=malloc, so every object
# is malloc's) and compares. --preload: fail unless uslab is the malloc.
import ctypes
import hashlib
import json
import random
import sys
import threading
import zlib


def check_preload():
    with open("/proc/self/maps") as f:
        if "libuslab-malloc" not in f.read():
            sys.exit("FAIL: libuslab-malloc.so not mapped: not under LD_PRELOAD")
    libc = ctypes.CDLL(None)
    try:
        owns = libc.uslab_owns
    except AttributeError:
        sys.exit("FAIL: uslab_owns not found")
    owns.argtypes = [ctypes.c_void_p]
    owns.restype = ctypes.c_int
    libc.malloc.argtypes = [ctypes.c_size_t]
    libc.malloc.restype = ctypes.c_void_p
    libc.free.argtypes = [ctypes.c_void_p]
    p = libc.malloc(100)
    ok = owns(p) == 1
    libc.free(p)
    # A Python object's memory, from PyMem_Malloc.
    buf = bytearray(100000)
    addr = ctypes.addressof((ctypes.c_char * len(buf)).from_buffer(buf))
    if not ok or owns(addr) != 1:
        sys.exit("FAIL: malloc's memory is not uslab's")


def dicts_and_lists(rng, h):
    d = {}
    for i in range(150000):
        d["key-%d-%s" % (i, "x" * (i % 37))] = [i, str(i * 3), (i, i + 1)]
    for i in range(0, 150000, 2):
        del d["key-%d-%s" % (i, "x" * (i % 37))]
    for k in list(d)[:20000]:
        d[k].append({"nested": k, "n": len(k)})
    total = sum(v[0] for v in d.values())
    h.update(str((len(d), total)).encode())
    words = ["".join(rng.choice("abcdefghij") for _ in range(rng.randint(1, 30)))
             for _ in range(40000)]
    words.sort()
    joined = " ".join(words)
    h.update(hashlib.sha256(joined.encode()).digest())
    lists = [list(range(rng.randint(0, 500))) for _ in range(3000)]
    h.update(str(sum(len(x) for x in lists)).encode())
    return len(d)


def json_round_trip(rng, h):
    doc = {
        "items": [{"id": i, "name": "item%d" % i, "tags": ["t%d" % (i % 7)] * (i % 5),
                   "price": round(rng.random() * 100, 3), "ok": i % 3 == 0}
                  for i in range(30000)],
        "meta": {"count": 30000, "text": "\u00e9\u4e2d" * 1000},
    }
    text = json.dumps(doc, sort_keys=True)
    back = json.loads(text)
    if back != doc:
        sys.exit("FAIL: json round trip changed the document")
    h.update(hashlib.sha256(text.encode()).digest())
    return len(text)


def thread_work(index, results):
    rng = random.Random(1000 + index)
    h = hashlib.sha256()
    for n in range(60):
        data = "".join("%d:%s;" % (rng.randint(0, 10 ** 6), "y" * rng.randint(0, 200))
                       for _ in range(200)).encode()
        packed = zlib.compress(data, 6)
        if zlib.decompress(packed) != data:
            results[index] = "zlib mismatch"
            return
        h.update(hashlib.sha256(data).digest())
        local = {i: bytes(rng.randint(1, 3000)) for i in range(50)}
        h.update(str(sum(len(v) for v in local.values())).encode())
    results[index] = h.hexdigest()


def main():
    if "--preload" in sys.argv[1:]:
        check_preload()
    rng = random.Random(42)
    h = hashlib.sha256()
    entries = dicts_and_lists(rng, h)
    json_len = json_round_trip(rng, h)
    results = [None] * 4
    threads = [threading.Thread(target=thread_work, args=(i, results)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for r in results:
        if r is None or len(r) != 64:
            sys.exit("FAIL: thread result %r" % (r,))
        h.update(r.encode())
    print("entries", entries)
    print("json", json_len)
    print("digest", h.hexdigest())


main()
