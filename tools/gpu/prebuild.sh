#!/usr/bin/env bash
# tools/gpu/prebuild.sh [--old REV] TARGET...: builds TARGETs (paths under build/gpu, e.g.
# build/gpu/sparsed build/gpu/tests/engine/test_cuda_backend) here for sm_90, and with --old the
# daemon of tree REV in a worktree at results/tmp/old-REV; strips them and packs them into
# results/tmp/bins.tar.xz, the one file a device call carries besides .debs (the binaries alone
# pass the 64 MiB carry limit; packed they take ~1/3). On the device:
#   tar xJf results/tmp/bins.tar.xz && AB_PREBUILT=1 [OLD=results/tmp/old-REV] \
#       bash results/<date>/runN.sh
# (tools/gpu_ab.sh: AB_PREBUILT skips the build there; results/2026-12-02-s12/ ran this way.)
set -euo pipefail
old=
if [ "${1:-}" = --old ]; then
    old=$2
    shift 2
fi
[ $# -gt 0 ] || { echo "usage: $0 [--old REV] build/gpu/TARGET..." >&2; exit 2; }
make -j"$(nproc)" BUILD=build/gpu "$@"
files=("$@")
if [ -n "$old" ]; then
    dir=results/tmp/old-$old
    [ -d "$dir" ] || git worktree add "$dir" "$old"
    make -C "$dir" -j"$(nproc)" BUILD=build/gpu build/gpu/sparsed
    files+=("$dir/build/gpu/sparsed")
fi
strip "${files[@]}"
mkdir -p results/tmp
XZ_OPT=-9 tar cJf results/tmp/bins.tar.xz "${files[@]}"
echo "results/tmp/bins.tar.xz: $(du -h results/tmp/bins.tar.xz | cut -f1) (${files[*]})"
