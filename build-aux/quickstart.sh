#!/usr/bin/env bash
# Quick start: install what is missing, build in build/, run the main job.
set -euo pipefail

# shellcheck source=build-aux/common.sh
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"

bw_build=$bw_root/build

# What a newcomer should see working; when bitwheeld and bwctl land, this
# becomes: start the daemon, drive it with bwctl, stop it.
main_job() {
	"$bw_build/wheel/bwdemo"
}

bw_install_missing
bw_bootstrap
[ -f "$bw_build/Makefile" ] || bw_configure "$bw_build"
make -C "$bw_build" -j2
main_job
