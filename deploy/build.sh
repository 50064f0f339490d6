#!/bin/sh
# Builds the static tallyd binary: the one Go build command of a release,
# run by the Dockerfile's build stage and by .ci/deploy-check alike, so that
# CI builds exactly what the image ships.
#
#   deploy/build.sh OUTPUT [VERSION]
#
# CGO_ENABLED=0: a static binary, which runs on distroless/static or scratch
# (no libc). -trimpath: no build machine paths in the binary. VERSION is
# what `tallyd --version` and tally_build_info say (a release tag,
# vMAJOR.MINOR.PATCH; empty: the module's, "(devel)" from a checkout).
set -eu
out=${1:?usage: deploy/build.sh OUTPUT [VERSION]}
version=${2:-}
cd "$(dirname "$0")/.."
CGO_ENABLED=0 exec go build -trimpath -ldflags "-s -w -X main.version=${version}" -o "$out" ./cmd/tallyd
