#!/usr/bin/env python3
"""The scale harness's fake nodes (scripts/e2e-scale.sh, docs/e2e.md "Scale"), from a trace's
node list (the `gpushare simulate` node CSV: sn, cpu_milli, memory_mib, gpu, model).

Each node's GPUs are published the way gpushare-node publishes a real node's: this script writes
a simulated inventory per node (docs/inventory.md) and runs
`gpushare-node --inventory ... --config ... --print-resources --output node --node-name NAME`,
which prints the Node object gpushare-node would make of it (the gpushare.io/gpu-inventory
annotation and the extended resources in capacity and allocatable). Only what a kubelet would
add is added here: the node's CPU, memory and pod capacity from the CSV, the well-known labels,
and kwok's annotation (kwok.x-k8s.io/node=fake) so that kwok, and nothing else, manages it.

Writes OUT_DIR/nodes-NNN.json, each a v1 List of at most --chunk nodes, and prints a summary
line: "nodes N gpus G models M1:n1,M2:n2,...".
"""

import argparse
import concurrent.futures
import csv
import json
import os
import subprocess
import sys
import uuid

# GPU models of Alibaba's 2023 trace (../shared/data/alibaba-gpu-v2023/README.md): product name
# and memory as nvidia-smi reports them. G2 and G3 are undisclosed internal models; the memory
# given them is an assumption (docs/e2e.md, "Scale"): the trace asks for GPU fractions
# (gpu_milli), which do not depend on it.
MODELS = {
    "P100": ("Tesla P100-PCIE-16GB", 16280, "6.0", 56),
    "T4": ("Tesla T4", 15360, "7.5", 40),
    "V100M16": ("Tesla V100-SXM2-16GB", 16160, "7.0", 80),
    "V100M32": ("Tesla V100-SXM2-32GB", 32510, "7.0", 80),
    "A10": ("NVIDIA A10", 23028, "8.6", 72),
    "G2": ("G2 (undisclosed, assumed 32 GB)", 32510, "8.0", 108),
    "G3": ("G3 (undisclosed, assumed 80 GB)", 81559, "8.0", 108),
}

NAMESPACE = uuid.UUID("6b1d6c8e-3f0a-4f7e-9b5e-2a7c0d9e1f42")


def die(msg):
    print(f"make_nodes: error: {msg}", file=sys.stderr)
    sys.exit(1)


def read_nodes(path, count):
    rows = []
    with open(path, newline="") as f:
        r = csv.DictReader(f)
        want = {"sn", "cpu_milli", "memory_mib", "gpu", "model"}
        if not r.fieldnames or not want.issubset(r.fieldnames):
            die(f"{path}: want the columns {sorted(want)}, found {r.fieldnames}")
        for line, row in enumerate(r, start=2):
            try:
                gpus = int(row["gpu"])
                cpu = int(row["cpu_milli"])
                mem = int(row["memory_mib"])
            except ValueError:
                die(f"{path}:{line}: gpu, cpu_milli and memory_mib must be integers: {row}")
            if gpus <= 0:
                continue  # a CPU-only node: no GPUs to publish, nothing the harness places there
            if row["model"] not in MODELS:
                die(f"{path}:{line}: GPU model {row['model']!r} is not one of {sorted(MODELS)}")
            rows.append((row["sn"], cpu, mem, gpus, row["model"]))
    if not rows:
        die(f"{path}: no GPU nodes")
    if count <= 0:
        return rows
    # Fewer: the first COUNT. More: the list again, each copy's names suffixed -r1, -r2, ...
    out = []
    for i in range(count):
        sn, cpu, mem, gpus, model = rows[i % len(rows)]
        copy = i // len(rows)
        out.append((sn if copy == 0 else f"{sn}-r{copy}", cpu, mem, gpus, model))
    return out


def inventory(name, gpus, model):
    product, mib, cc, sms = MODELS[model]
    lines = [
        f"# scale harness: fake node {name}, {gpus} x {model}",
        "version: v1",
        'driverVersion: "570.124.06"',
        'cudaDriverVersion: "12.8"',
        "gpus:",
    ]
    for i in range(gpus):
        u = uuid.uuid5(NAMESPACE, f"{name}/{i}")
        lines += [
            f"- index: {i}",
            f"  uuid: GPU-{u}",
            f"  product: {json.dumps(product)}",
            f"  memoryMiB: {mib}",
            f'  computeCapability: "{cc}"',
            f"  numaNode: {0 if i < (gpus + 1) // 2 else 1}",
            f'  pciBusId: "0000:{0x10 + i:02x}:00.0"',
            f"  multiprocessors: {sms}",
            "  migEnabled: false",
        ]
    return "\n".join(lines) + "\n"


def make_node(args, work, row):
    sn, cpu_milli, memory_mib, gpus, model = row
    inv = os.path.join(work, f"{sn}.yaml")
    with open(inv, "w") as f:
        f.write(inventory(sn, gpus, model))
    p = subprocess.run(
        [args.gpushare_node, "--inventory", inv, "--config", args.config, "--print-resources",
         "--output", "node", "--node-name", sn],
        capture_output=True, text=True, timeout=60)
    if p.returncode != 0:
        die(f"gpushare-node for {sn} exited {p.returncode}: {p.stderr.strip()[-500:]}")
    node = json.loads(p.stdout)
    os.unlink(inv)
    meta = node.setdefault("metadata", {})
    meta.setdefault("labels", {}).update({
        "kubernetes.io/hostname": sn,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        "type": "kwok",
        "gpushare.io/scale-harness": "true",
        "gpushare.io/gpu-model": model,
        # the GPU model label of Alibaba's PAI cluster, which the trace's gpu_spec names
        # (gpushare replay: node affinity on it; docs/memory-shares.md)
        "alibabacloud.com/gpu-card-model": model,
    })
    meta.setdefault("annotations", {}).update({
        "kwok.x-k8s.io/node": "fake",
        "node.alpha.kubernetes.io/ttl": "0",
    })
    status = node.setdefault("status", {})
    for key in ("capacity", "allocatable"):
        res = status.setdefault(key, {})
        res["cpu"] = f"{cpu_milli}m"
        res["memory"] = f"{memory_mib}Mi"
        res["pods"] = str(args.max_pods)
    return node


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nodes", required=True, help="node CSV (sn, cpu_milli, memory_mib, gpu, model)")
    ap.add_argument("--count", type=int, default=0, help="how many nodes (0: every GPU node)")
    ap.add_argument("--gpushare-node", required=True, help="the gpushare-node binary")
    ap.add_argument("--config", required=True, help="gpushare-node's config for every node")
    ap.add_argument("--out-dir", required=True)
    ap.add_argument("--chunk", type=int, default=100)
    ap.add_argument("--max-pods", type=int, default=1001)  # FGD's simulator's node limit
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    args = ap.parse_args()

    rows = read_nodes(args.nodes, args.count)
    names = [r[0] for r in rows]
    if len(set(names)) != len(names):
        die(f"{args.nodes}: node names repeat")
    os.makedirs(args.out_dir, exist_ok=True)
    work = os.path.join(args.out_dir, "inventories")
    os.makedirs(work, exist_ok=True)
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        nodes = list(pool.map(lambda r: make_node(args, work, r), rows))
    os.rmdir(work)
    for i in range(0, len(nodes), args.chunk):
        with open(os.path.join(args.out_dir, f"nodes-{i // args.chunk:03d}.json"), "w") as f:
            json.dump({"apiVersion": "v1", "kind": "List", "items": nodes[i:i + args.chunk]}, f)
    models = {}
    for r in rows:
        models[r[4]] = models.get(r[4], 0) + r[3]
    print(f"nodes {len(rows)} gpus {sum(r[3] for r in rows)} models "
          + ",".join(f"{m}:{n}" for m, n in sorted(models.items())))


if __name__ == "__main__":
    main()
