#!/usr/bin/env python3
"""check_docs.py - every relative link and anchor of the documentation resolves.

Usage: check_docs.py FILE.md...  (paths as given, relative links taken
from each file's directory).  A link is [text](target), ![alt](target) or
a reference definition "[label]: target"; links inside code (fenced
blocks, `spans`) are not links.  Absolute URLs (a scheme such as https:
or mailto:) are not checked: make check runs offline.  A target's path
must name a file or directory of the tree; its #anchor must be a heading
of the Markdown file it names (or of the file itself for a bare #anchor),
slugged as GitHub does (lowercase, punctuation dropped, spaces to '-',
repeats suffixed -1, -2, ...), or an explicit <a name=...>/id=....
Prints each broken link as FILE:LINE: TARGET: why; exits 1 if any.
"""

import os
import re
import sys

FENCE = re.compile(r"^\s*(```|~~~)")
CODE_SPAN = re.compile(r"(`+)(.+?)\1")
INLINE = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
REFDEF = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+.*)?$")
HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
HTML_ANCHOR = re.compile(r"<a\s[^>]*(?:name|id)=\"([^\"]+)\"", re.I)
SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")


def lines_outside_code(path):
    """(line number, text) of each line outside fenced blocks."""
    fenced = None
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            m = FENCE.match(line)
            if m:
                if fenced is None:
                    fenced = m.group(1)
                elif fenced == m.group(1):
                    fenced = None
                continue
            if fenced is None:
                yield n, line.rstrip("\n")


def slug(text):
    """GitHub's anchor for a heading's text."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", text)   # links: their text
    text = re.sub(r"<[^>]+>", "", text)                        # inline HTML
    text = text.strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


_anchors = {}


def anchors(path):
    if path not in _anchors:
        found, seen = set(), {}
        for _, line in lines_outside_code(path):
            found.update(HTML_ANCHOR.findall(line))
            m = HEADING.match(line)
            if m:
                s = slug(m.group(2))
                n = seen.get(s, 0)
                seen[s] = n + 1
                found.add(s if n == 0 else f"{s}-{n}")
        _anchors[path] = found
    return _anchors[path]


def check(path):
    errors = []
    for n, line in lines_outside_code(path):
        text = CODE_SPAN.sub("", line)
        targets = INLINE.findall(text)
        m = REFDEF.match(text)
        if m:
            targets.append(m.group(1))
        for target in targets:
            if SCHEME.match(target) or target.startswith("//"):
                continue
            file, _, anchor = target.partition("#")
            dest = os.path.normpath(os.path.join(os.path.dirname(path), file)) \
                if file else path
            if not os.path.exists(dest):
                errors.append(f"{path}:{n}: {target}: no such file {dest}")
            elif anchor:
                if not dest.endswith(".md") or os.path.isdir(dest):
                    errors.append(f"{path}:{n}: {target}: an anchor in a "
                                  f"file that is not Markdown")
                elif anchor not in anchors(dest):
                    errors.append(f"{path}:{n}: {target}: no heading "
                                  f"#{anchor} in {dest}")
    return errors


def main(argv):
    if len(argv) < 2:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    errors = []
    for path in argv[1:]:
        errors += check(path)
    for e in errors:
        print(e)
    print(f"check_docs: {len(argv) - 1} files, "
          f"{len(errors)} broken links" if errors else
          f"check_docs: every relative link and anchor of {len(argv) - 1} "
          f"files resolves")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
