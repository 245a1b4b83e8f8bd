"""Marked sections of docs/PERFORMANCE.md written by runs other than scripts/bench.sh (the PyTorch
side by side, the GPU figures): each lies between an HTML-comment begin and end marker, is
replaced in place by its own script and carried over unchanged when make_report.py regenerates
the rest of the file."""
import os


def splice(path, begin, end, lines):
    """Replaces the section of `path` between `begin` and `end` with `lines` (which include the
    markers); appends it when the file has none."""
    text = open(path).read() if os.path.exists(path) else ""
    block = "\n".join(lines)
    if begin in text and end in text:
        head, rest = text.split(begin, 1)
        text = head + block + rest.split(end, 1)[1]
    else:
        text = text.rstrip() + ("\n\n" if text.strip() else "") + block + "\n"
    with open(path, "w") as fh:
        fh.write(text)


def keep(path, begin, end):
    """The marked section of an existing `path`, markers included ("" when none)."""
    if not os.path.exists(path):
        return ""
    text = open(path).read()
    if begin not in text or end not in text:
        return ""
    return begin + text.split(begin, 1)[1].split(end, 1)[0] + end
