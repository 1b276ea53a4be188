#!/bin/sh
# check_docs.sh - every relative link and #anchor of the documentation
# resolves (tests/check_docs.py says how links and GitHub's anchors are
# read).  Skipped (77) without python3.
set -eu

srcdir=${srcdir:-.}
if ! command -v python3 >/dev/null 2>&1; then
	echo "check_docs: python3 not installed: skipped"
	exit 77
fi
cd "$srcdir"
exec python3 tests/check_docs.py README.md doc/*.md \
	bindings/python/README.md bench/README.md proto/PROTOCOL.md
