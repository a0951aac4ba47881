#!/usr/bin/env python3
"""Writes a container image as a `docker save` archive that `ctr images import` reads.

The e2e cluster never pulls: every image it runs is made here from files on this machine
(a static pause, Debian's static busybox), one layer, reproducible (fixed mtimes, sorted).

  mkimage.py --out img.tar --name registry.k8s.io/pause:3.10 --entrypoint /pause \
             --file /path/to/pause:/pause [--file SRC:DST ...] [--link TARGET:DST ...] \
             [--dir /tmp] [--env K=V ...] [--cmd ARG ...]
"""
import argparse
import hashlib
import io
import json
import os
import sys
import tarfile


def add_dirs(tar, seen, path):
    parts = path.strip("/").split("/")[:-1]
    cur = ""
    for p in parts:
        cur = f"{cur}/{p}" if cur else p
        if cur in seen:
            continue
        seen.add(cur)
        ti = tarfile.TarInfo(cur)
        ti.type = tarfile.DIRTYPE
        ti.mode = 0o755
        tar.addfile(ti)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--name", required=True, action="append", help="repo:tag (repeatable)")
    ap.add_argument("--entrypoint", action="append", default=[])
    ap.add_argument("--cmd", action="append", default=[])
    ap.add_argument("--env", action="append", default=[])
    ap.add_argument("--file", action="append", default=[], help="SRC:DST (mode kept)")
    ap.add_argument("--link", action="append", default=[], help="TARGET:DST symlink")
    ap.add_argument("--dir", action="append", default=[], help="empty directory (mode 1777 for /tmp)")
    a = ap.parse_args()

    entries = []
    for spec in a.file:
        src, _, dst = spec.partition(":")
        if not dst:
            sys.exit(f"mkimage: --file wants SRC:DST, got {spec!r}")
        entries.append(("file", dst.lstrip("/"), src))
    for spec in a.link:
        target, _, dst = spec.partition(":")
        if not dst:
            sys.exit(f"mkimage: --link wants TARGET:DST, got {spec!r}")
        entries.append(("link", dst.lstrip("/"), target))
    for d in a.dir:
        entries.append(("dir", d.strip("/"), None))
    entries.sort(key=lambda e: e[1])

    layer = io.BytesIO()
    with tarfile.open(fileobj=layer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        seen = set()
        for kind, dst, src in entries:
            add_dirs(tar, seen, dst)
            ti = tarfile.TarInfo(dst)
            ti.mtime = 0
            if kind == "file":
                with open(src, "rb") as f:
                    data = f.read()

                ti.size = len(data)
                ti.mode = os.stat(src).st_mode & 0o7777
                tar.addfile(ti, io.BytesIO(data))
            elif kind == "link":
                ti.type = tarfile.SYMTYPE
                ti.linkname = src
                ti.mode = 0o777
                tar.addfile(ti)
            else:
                if dst in seen:
                    continue
                seen.add(dst)
                ti.type = tarfile.DIRTYPE
                ti.mode = 0o1777 if dst == "tmp" else 0o755
                tar.addfile(ti)
    layer_bytes = layer.getvalue()
    diff_id = "sha256:" + hashlib.sha256(layer_bytes).hexdigest()

    config = {
        "architecture": "amd64",
        "os": "linux",
        "created": "1970-01-01T00:00:00Z",
        "config": {
            "Env": a.env or ["PATH=/bin"],
            "Entrypoint": a.entrypoint or None,
            "Cmd": a.cmd or None,
            "WorkingDir": "/",
        },
        "rootfs": {"type": "layers", "diff_ids": [diff_id]},
        "history": [{"created": "1970-01-01T00:00:00Z", "created_by": "e2e/images/mkimage.py"}],
    }
    config_bytes = json.dumps(config, sort_keys=True).encode()
    config_name = hashlib.sha256(config_bytes).hexdigest() + ".json"
    layer_name = diff_id[len("sha256:"):] + "/layer.tar"
    manifest = [{"Config": config_name, "RepoTags": a.name, "Layers": [layer_name]}]

    with tarfile.open(a.out, mode="w", format=tarfile.PAX_FORMAT) as out:
        def put(name, data):
            ti = tarfile.TarInfo(name)
            ti.size = len(data)
            ti.mode = 0o644
            out.addfile(ti, io.BytesIO(data))
        put(config_name, config_bytes)
        put(layer_name, layer_bytes)
        put("manifest.json", json.dumps(manifest).encode())


if __name__ == "__main__":
    main()
