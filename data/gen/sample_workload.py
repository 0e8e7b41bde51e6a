#!/usr/bin/env python3
"""sample_workload.py - a Python program with a realistic heap, for data/sample.bin.zst.

It walks /usr/share and /usr/lib/python3* in sorted order and parses the text files it
finds into the data structures a real program holds: JSON documents as dicts and lists,
Python sources as ASTs, text as lists of lines, split words and dicts keyed by line
number, a word Counter, markdown/rst as paragraphs, and numbers as ints and floats. It
stops when its resident set reaches --rss-mb (default 512), runs the garbage collector,
prints "ready pid N ..." on stdout (flushed) and sleeps until killed, so that
"zfolio capture" sees a steady state.

This is a smaller, bounded variant of shared/corpus/gen/py_hold.py (which holds ~5 GB).
Standard library only.

    python3 sample_workload.py [--rss-mb N] [--ready-file PATH]
"""
import argparse
import ast
import collections
import gc
import gzip
import json
import os
import re
import sys
import time

WORD_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]+")
NUM_RE = re.compile(r"-?\d+(?:\.\d+)?")
MAX_FILE = 2_000_000


def rss_mb():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def roots():
    lib = sorted(os.path.join("/usr/lib", d) for d in os.listdir("/usr/lib")
                 if d.startswith("python3"))
    return ["/usr/share"] + lib


def files():
    for root in roots():
        for dp, dns, fs in os.walk(root):
            dns.sort()
            for f in sorted(fs):
                yield os.path.join(dp, f)


def read_text(p):
    if os.path.islink(p) or not os.path.isfile(p) or os.path.getsize(p) > MAX_FILE:
        return None
    try:
        raw = gzip.open(p).read() if p.endswith(".gz") else open(p, "rb").read()
        return raw.decode("utf-8")
    except (OSError, UnicodeDecodeError, EOFError, ValueError):
        return None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rss-mb", type=int, default=512, help="stop loading at this RSS")
    ap.add_argument("--ready-file", help="also write 'ready' to this file")
    args = ap.parse_args()

    store = {"json": {}, "ast": {}, "lines": {}, "kv": {}, "md": {}, "nums": {},
             "words": collections.Counter(), "by_ext": collections.defaultdict(list)}
    n = 0
    for p in files():
        t = read_text(p)
        if t is None:
            continue
        n += 1
        ext = os.path.splitext(p)[1]
        store["by_ext"][ext].append((p, len(t)))
        if ext == ".json":
            try:
                store["json"][p] = json.loads(t)
                continue
            except ValueError:
                pass
        if ext == ".py":
            try:
                store["ast"][p] = ast.parse(t)
            except (SyntaxError, ValueError, RecursionError):
                pass
        if ext in (".md", ".rst"):
            store["md"][p] = [s.split("\n") for s in t.split("\n\n")]
        lines = t.splitlines()
        store["lines"][p] = lines
        store["kv"][p] = {i: l.split() for i, l in enumerate(lines[:200])}
        store["words"].update(WORD_RE.findall(t))
        nums = NUM_RE.findall(t[:20000])
        if nums:
            store["nums"][p] = [float(x) if "." in x else int(x) for x in nums]
        if n % 500 == 0 and rss_mb() >= args.rss_mb:
            break

    gc.collect()
    time.sleep(1)
    print("ready pid %d files %d rss_mb %.0f" % (os.getpid(), n, rss_mb()), flush=True)
    if args.ready_file:
        with open(args.ready_file, "w") as f:
            f.write("ready\n")
    while True:
        time.sleep(60)


if __name__ == "__main__":
    sys.exit(main())
