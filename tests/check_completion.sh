#!/bin/bash
# check_completion.sh - bwctl's bash completion (client/bash-completion/
# bwctl), sourced into this bash and driven as bash drives it (COMP_WORDS,
# COMP_CWORD): "bwctl st<TAB>" gives stats, files after --socket, users
# after --owner, and for bwctl and each command exactly the commands and
# options that "bwctl [COMMAND] --help" describes.  Run by make check from
# the build directory ($srcdir from automake's harness).
set -u

srcdir=${srcdir:-.}
bwctl=./client/bwctl
fail=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# shellcheck source=client/bash-completion/bwctl
. "$srcdir/client/bash-completion/bwctl"

# The completions of a command line whose last word is being typed,
# sorted, one a line.
complete_line() {
	read -r -a COMP_WORDS <<<"$1"
	[[ $1 == *' ' ]] && COMP_WORDS+=('')
	COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
	COMPREPLY=()
	_bwctl
	printf '%s\n' "${COMPREPLY[@]}" | sed '/^$/d' | sort
}

expect() {
	local got
	got=$(complete_line "$1" | tr '\n' ' ')
	if [ "$got" != "$2" ]; then
		echo "check_completion: '$1<TAB>' gives '$got', want '$2'"
		fail=1
	fi
}

expect "bwctl st" "stats "
expect "bwctl --socket /x stat" "stats "
expect "bwctl help wa" "watch "
expect "bwctl schedule --rep" "--replace "
expect "bwctl schedule --key " ""
touch "$tmp/bw.sock"
expect "bwctl --socket $tmp/bw." "$tmp/bw.sock "
expect "bwctl metrics --output $tmp/bw.s" "$tmp/bw.sock "
expect "bwctl watch --owner roo" "root "

# Against the help texts: the commands bwctl --help lists, and each
# command's own options (the common ones aside).
help_cmds=$("$bwctl" --help | sed -n '/^Commands:/,/^$/s/^  \([a-z][a-z]*\) .*/\1/p' | sort | tr '\n' ' ')
expect "bwctl " "$(printf '%s\n' $help_cmds help | sort | tr '\n' ' ')"
help_opts=$("$bwctl" --help | grep -oE '^  (-[a-zA-Z], )?--[a-z-]+' | grep -oE -- '--[a-z-]+' | sort | tr '\n' ' ')
expect "bwctl --" "$help_opts"
for cmd in ${help_cmds}; do
	want=$("$bwctl" "$cmd" --help | grep -oE '^  (-[a-zA-Z], )?--[a-z-]+' | grep -oE -- '--[a-z-]+' |
		sort | tr '\n' ' ')
	got=$(complete_line "bwctl $cmd --" | grep -vxE -- '--socket|--daemon-user|--help' | tr '\n' ' ')
	if [ "$got" != "$want" ]; then
		echo "check_completion: 'bwctl $cmd --<TAB>' gives '$got'; bwctl $cmd --help describes '$want'"
		fail=1
	fi
done
[ "$fail" -eq 0 ] && echo "check_completion: commands ${help_cmds}and their options complete"
exit "$fail"
