#!/usr/bin/env python3
"""Instruction counts of a callgrind output file, split into glibc's allocator and the rest.

    callgrind_count.py CALLGRIND_OUT  ->  prints "TOTAL ALLOCATOR"

ALLOCATOR is the self count of glibc's malloc/free family (malloc, free, _int_malloc, _int_free,
malloc_consolidate, unlink_chunk, memalign, ...). scripts/bench.sh reports the cache-hit
dispatch counts without it: the allocator's path length per call depends on the heap's layout
(which bins hold free chunks, when a consolidation runs), and varied by several hundred
instructions a call between runs of one binary, while everything else repeated within a few
instructions (docs/PERFORMANCE.md, dispatch). Self counts are read from the cost lines of each
function; the cost line after a calls= line is a call's inclusive cost and is skipped.
"""
import os
import re
import sys

ALLOCATOR = re.compile(
    r"malloc|free|_int_|consolidate|unlink_chunk|memalign|alloc_perturb|tcache|arena|calloc|"
    r"realloc|morecore|brk")


def count(path):
    names = {}  # (kind, id) -> name, for callgrind's name compression "(id) name"
    ob = fn = ""
    total = allocator = 0
    after_call = False

    def name(kind, rest):
        m = re.match(r"\((\d+)\)(?: (.*))?", rest)
        if not m:
            return rest
        if m.group(2) is not None:
            names[(kind, m.group(1))] = m.group(2)
        return names.get((kind, m.group(1)), "?")

    in_alloc = False
    with open(path, errors="replace") as f:
        for line in f:
            if not line.strip():
                continue
            c = line[0]
            if c.isdigit() or c in "+-*":
                if after_call:
                    after_call = False
                    continue
                v = int(line.split()[-1])
                total += v
                if in_alloc:
                    allocator += v
                continue
            key, _, rest = line.rstrip("\n").partition("=")
            if key == "ob":
                ob = name("ob", rest)
            elif key == "fn":
                fn = name("fn", rest)
                in_alloc = (os.path.basename(ob).startswith("libc.so")
                            and ALLOCATOR.search(fn) is not None)
            elif key == "cob":
                name("ob", rest)
            elif key == "cfn":
                name("fn", rest)
            elif key in ("fl", "fi", "fe", "cfi", "cfl"):
                name("fl", rest)
            elif key == "calls":
                after_call = True
    return total, allocator


if __name__ == "__main__":
    t, a = count(sys.argv[1])
    print(t, a)
