#!/usr/bin/env python3
"""Pushes a `docker save` archive (as mkimage.py writes it: one uncompressed layer) to a
registry over plain HTTP, as an OCI image manifest, under one or more names.

  push.py --archive img.tar --registry 127.0.0.1:5000 --as vllm/vllm:latest [--as ...]

The e2e cluster's local registry is the mirror of the seed manifests' registries
(docs/e2e.md): `--as` is the name without the registry host (docker.io's `vllm/vllm:latest`,
registry.cn-hangzhou.aliyuncs.com's `knative-sample/helloworld-go:73fbdd56`).
"""
import argparse
import hashlib
import http.client
import json
import sys
import tarfile


def request(conn, method, path, body=None, headers=None):
    conn.request(method, path, body=body, headers=headers or {})
    r = conn.getresponse()
    data = r.read()
    return r.status, r.getheader("Location"), data


def push_blob(conn, repo, data):
    digest = "sha256:" + hashlib.sha256(data).hexdigest()
    st, _, _ = request(conn, "HEAD", f"/v2/{repo}/blobs/{digest}")
    if st == 200:
        return digest
    st, loc, body = request(conn, "POST", f"/v2/{repo}/blobs/uploads/")
    if st != 202 or not loc:
        sys.exit(f"push.py: starting an upload to {repo}: HTTP {st} {body[:200]!r}")
    if loc.startswith("http"):
        loc = "/" + loc.split("/", 3)[3]
    sep = "&" if "?" in loc else "?"
    st, _, body = request(conn, "PUT", f"{loc}{sep}digest={digest}", data,
                          {"Content-Type": "application/octet-stream", "Content-Length": str(len(data))})
    if st != 201:
        sys.exit(f"push.py: uploading {digest} to {repo}: HTTP {st} {body[:200]!r}")
    return digest


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--archive", required=True)
    ap.add_argument("--registry", required=True, help="host:port, plain HTTP")
    ap.add_argument("--as", dest="names", action="append", required=True, help="repo:tag")
    a = ap.parse_args()
    with tarfile.open(a.archive) as t:
        m = json.load(t.extractfile("manifest.json"))[0]
        config = t.extractfile(m["Config"]).read()
        layers = [t.extractfile(l).read() for l in m["Layers"]]
    conn = http.client.HTTPConnection(a.registry, timeout=30)
    for name in a.names:
        repo, _, tag = name.rpartition(":")
        if not repo or "/" in tag:
            sys.exit(f"push.py: --as {name}: want repo:tag")
        cdig = push_blob(conn, repo, config)
        ldigs = [push_blob(conn, repo, l) for l in layers]
        manifest = json.dumps({
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": cdig, "size": len(config)},
            "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar", "digest": d, "size": len(l)}
                       for d, l in zip(ldigs, layers)],
        }).encode()
        st, _, body = request(conn, "PUT", f"/v2/{repo}/manifests/{tag}", manifest,
                              {"Content-Type": "application/vnd.oci.image.manifest.v1+json"})
        if st != 201:
            sys.exit(f"push.py: manifest {name}: HTTP {st} {body[:300]!r}")
        print(f"pushed {name} ({len(layers)} layer(s)) to {a.registry}")


if __name__ == "__main__":
    main()
