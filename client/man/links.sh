#!/bin/sh
# links.sh - the other names of the client's manual pages in section 3:
# each function a page's NAME section lists besides the page itself, one
# "NAME PAGE" line each (bwc_free bwc_new).  make install makes them
# symbolic links to the page (client/local.mk); tests/check_man.sh checks
# that every function of the public headers has a page or a link.
# Usage: links.sh PAGE.3...
set -eu

for page in "$@"; do
	base=$(basename "$page" .3)
	sed -n '/^\.SH NAME/,/\\-/p' "$page" | sed -e '1d' -e 's/\\-.*//' |
		tr ',' '\n' | tr -d ' \t' | while read -r name; do
			if [ -n "$name" ] && [ "$name" != "$base" ]; then
				echo "$name $base"
			fi
		done
done
