#!/usr/bin/python3
"""Checks that every block a test source marks `// README: <name>` ... `// README: end` is in
README.md as a fenced C++ block, word for word, so that the README's code is the code the tests
compile and run.

  check_readme_snippets.py README.md SOURCE...
"""
import re
import sys


def blocks(path):
    text = open(path, encoding="utf-8").read()
    return re.findall(r"^// README: (?!end\b)([^\n]+)\n(.*?)^// README: end$", text, re.S | re.M)


def main(readme, sources):
    fenced = re.findall(r"^```cpp\n(.*?)^```$", open(readme, encoding="utf-8").read(), re.S | re.M)
    failures, found = [], 0
    for source in sources:
        for name, code in blocks(source):
            found += 1
            if code not in fenced:
                failures.append(f"{source}: the '{name}' block is not a ```cpp block of {readme}")
    if not found:
        failures.append(f"no '// README: <name>' blocks in {', '.join(sources)}")
    for f in failures:
        print(f"check_readme_snippets: {f}", file=sys.stderr)
    if not failures:
        print(f"check_readme_snippets: {found} blocks, each in {readme}")
    return 1 if failures else 0


if __name__ == "__main__":
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    sys.exit(main(sys.argv[1], sys.argv[2:]))
