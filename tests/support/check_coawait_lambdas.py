#!/usr/bin/env python3
"""Rejects a by-value-capturing lambda written inside a co_await operand.

g++ 12 destroys such a lambda twice (each captured shared_ptr or buffer handle is released twice);
naming the lambda first avoids it. See docs/guide/coroutines.md, "Known compiler limits".
Usage: check_coawait_lambdas.py FILE...; exits 1 and prints file:line for each hit.
"""
import re
import sys

LAMBDA = re.compile(r"(?<![\w)\]])\[([^\[\]]*)\]\s*(?:\(|\{|mutable)")


def operand(text, start):
    """The text from `co_await` at start up to the end of its statement."""
    depth = 0
    for i in range(start, len(text)):
        c = text[i]
        if c in "([{":
            depth += 1
        elif c in ")]}":
            if depth == 0:
                return text[start:i]
            depth -= 1
        elif c == ";" and depth == 0:
            return text[start:i]
    return text[start:]


def by_value(captures):
    for cap in (c.strip() for c in captures.split(",")):
        if cap and not cap.startswith("&") and cap != "this":
            return True
    return False


def code_only(text, markdown):
    """Blanks comments, string literals and (in Markdown) prose, keeping line numbers."""
    if markdown:
        out, fenced = [], False
        for line in text.split("\n"):
            if line.lstrip().startswith("```"):
                fenced = not fenced
                out.append("")
            else:
                out.append(line if fenced else "")
        text = "\n".join(out)
    blank = lambda m: re.sub(r"[^\n]", " ", m.group(0))
    return re.sub(r'//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"', blank, text, flags=re.S)


def hits(path):
    with open(path, encoding="utf-8", errors="replace") as f:
        text = code_only(f.read(), path.endswith(".md"))
    for m in re.finditer(r"\bco_await\b", text):
        for lam in LAMBDA.finditer(operand(text, m.start())):
            if by_value(lam.group(1)):
                yield text.count("\n", 0, m.start()) + 1


def main(paths):
    bad = [f"{p}:{line}" for p in paths for line in hits(p)]
    for b in bad:
        print(f"{b}: by-value lambda inside co_await; name it first (docs/guide/coroutines.md)",
              file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
