#!/usr/bin/env python3
"""Writes the Deployment that Knative Serving would create for a Service's revision (Knative's
controllers are not part of the e2e cluster; docs/e2e.md): the Service's pod template with the
user container named `user-container` and given $PORT (its containerPort, 8080 when none),
plus a GPU-less `queue-proxy` sidecar (the local busybox image, sleeping).

  kubectl get ksvc NAME -o json | revision.py --replicas N | kubectl apply -f -
"""
import argparse
import json
import sys


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--replicas", type=int, default=1)
    a = ap.parse_args()
    svc = json.load(sys.stdin)
    name, ns = svc["metadata"]["name"], svc["metadata"]["namespace"]
    tmpl = json.loads(json.dumps(svc["spec"]["template"]))
    meta = tmpl.get("metadata", {})
    spec = tmpl["spec"]
    rev = name + "-00001"
    labels = dict(meta.get("labels", {}))
    labels.update({"serving.knative.dev/service": name, "serving.knative.dev/revision": rev})
    spec.pop("containerConcurrency", None)
    spec.pop("timeoutSeconds", None)
    spec.pop("responseStartTimeoutSeconds", None)
    spec.pop("idleTimeoutSeconds", None)
    user = spec["containers"][0]
    user.setdefault("name", "user-container")
    ports = user.get("ports") or [{"containerPort": 8080}]
    port = ports[0]["containerPort"]
    user.setdefault("env", []).append({"name": "PORT", "value": str(port)})
    spec["containers"].append({
        "name": "queue-proxy", "image": "e2e.local/busybox:1.35", "imagePullPolicy": "Never",
        "command": ["/bin/sleep", "infinity"],
    })
    spec.setdefault("terminationGracePeriodSeconds", 1)
    dep = {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": rev + "-deployment", "namespace": ns, "labels": labels},
        "spec": {
            "replicas": a.replicas,
            "selector": {"matchLabels": {"serving.knative.dev/revision": rev}},
            "template": {"metadata": {"labels": labels, "annotations": meta.get("annotations", {})}, "spec": spec},
        },
    }
    json.dump(dep, sys.stdout, indent=1)


if __name__ == "__main__":
    main()
