#!/bin/sh
# Installs the Debian packages listed in LIST (one per line, what runtime-packages.sh printed)
# without recommends, then removes apt's lists, LIST and this script: one image layer with the
# packages and nothing else. Used by every runtime stage of the Containerfile.
set -eu
list=$1
apt-get update -qq
xargs -a "$list" apt-get install -y -qq --no-install-recommends
rm -rf /var/lib/apt/lists/* "$list" "$0"
