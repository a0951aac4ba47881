#!/bin/sh
# Prints the Debian packages that hold the shared libraries the given binaries load (ldd), one
# per line: what an image's runtime stage installs, and nothing more. Fails on a library that
# is not found or belongs to no package.
set -eu
for f in "$@"; do
  ldd "$f" | awk -v f="$f" '/not found/ {print "runtime-packages: " f ": " $1 " not found" > "/dev/stderr"; exit 1}
                            / => \// {print $3}'
done | sort -u | while read -r lib; do
  # dpkg knows a file by the path its package ships (/lib/... or /usr/lib/... on bookworm).
  pkg=$(dpkg -S "$lib" 2>/dev/null || dpkg -S "$(realpath "$lib")" 2>/dev/null || dpkg -S "/usr$lib" 2>/dev/null) ||
    { echo "runtime-packages: $lib belongs to no package" >&2; exit 1; }
  echo "${pkg%%:*}"
done | sort -u
