#!/usr/bin/env python3
"""Over-booked pods of one burst, from the cluster's own state (scripts/e2e-scale-hami.sh).

  overbook.py PODS.json NODES.json

PODS.json: `kubectl get pods -o json` of the burst's namespace; NODES.json: the harness's nodes.
Only bound pods count. Prints one line:

  bound=<pods bound> overbooked=<pods> gpus_over=<GPUs booked past their capacity> kind=<...>

Each bound pod is read the way its scheduler books it:
  gpushare  (aliyun.com/gpu-mem): ALIYUN_COM_GPU_MEM_POD units on GPU ALIYUN_COM_GPU_MEM_IDX of
            its node, against that GPU's units and the node's maxClientsPerGpu (the node's
            gpushare.io/gpu-inventory annotation);
  HAMi      (hami.io/vgpu-devices-allocated): per container "UUID,NVIDIA,MiB,cores:" entries,
            against the GPU's devmem, count and devcore in hami.io/node-nvidia-register;
  whole     (any other extended resource, e.g. nvidia.com/gpu): the pods' requests on the node
            against its allocatable.
A GPU (or node) booked past its capacity contributes the fewest of its pods that would have to go
(largest first) to bring it back within capacity: its over-booked pods.
"""

import json
import sys
from collections import defaultdict


def excess(amounts, capacity, max_pods=None):
    """Fewest pods (largest first) to remove so that the rest fit `capacity` (and `max_pods`)."""
    amounts = sorted(amounts, reverse=True)
    total, n = sum(amounts), 0
    while amounts and (total > capacity or (max_pods is not None and len(amounts) > max_pods)):
        total -= amounts.pop(0)
        n += 1
    return n


def main():
    pods = json.load(open(sys.argv[1]))["items"]
    nodes = {n["metadata"]["name"]: n for n in json.load(open(sys.argv[2]))["items"]}
    gpushare = defaultdict(list)  # (node, index) -> units
    hami = defaultdict(lambda: [[], [], 0])  # (node, uuid) -> [MiB], [cores]
    whole = defaultdict(lambda: defaultdict(int))  # node -> resource -> quantity
    bound, kinds = 0, set()
    for p in pods:
        node = p["spec"].get("nodeName")
        if not node or p["status"].get("phase") in ("Succeeded", "Failed"):
            continue
        bound += 1
        ann = p["metadata"].get("annotations", {})
        if "ALIYUN_COM_GPU_MEM_POD" in ann:
            kinds.add("gpushare")
            gpushare[(node, int(ann["ALIYUN_COM_GPU_MEM_IDX"]))].append(int(ann["ALIYUN_COM_GPU_MEM_POD"]))
            continue
        if "hami.io/vgpu-devices-allocated" in ann:
            kinds.add("hami")
            for container in ann["hami.io/vgpu-devices-allocated"].split(";"):
                for dev in container.split(":"):
                    if not dev:
                        continue
                    uuid, _vendor, mem, cores = dev.split(",")
                    hami[(node, uuid)][0].append(int(mem))
                    hami[(node, uuid)][1].append(int(cores))
            continue
        kinds.add("whole")
        for c in p["spec"]["containers"]:
            for r, q in c.get("resources", {}).get("limits", {}).items():
                if "/" in r:
                    whole[node][r] += int(q)

    over = gpus_over = 0
    for (node, index), units in gpushare.items():
        inv = json.loads(nodes[node]["metadata"]["annotations"]["gpushare.io/gpu-inventory"])
        gpu = next(g for g in inv["gpus"] if g["index"] == index)
        n = excess(units, gpu["units"], inv.get("maxClientsPerGpu"))
        over, gpus_over = over + n, gpus_over + (n > 0)
    for (node, uuid), (mem, cores, _) in hami.items():
        reg = json.loads(nodes[node]["metadata"]["annotations"]["hami.io/node-nvidia-register"])
        gpu = next(g for g in reg if g["id"] == uuid)
        n = max(excess(mem, gpu["devmem"], gpu["count"]), excess(cores, gpu["devcore"]))
        over, gpus_over = over + n, gpus_over + (n > 0)
    for node, asked in whole.items():
        alloc = nodes[node]["status"].get("allocatable", {})
        for r, q in asked.items():
            n = max(0, q - int(alloc.get(r, 0)))
            over, gpus_over = over + n, gpus_over + (n > 0)
    print("bound=%d overbooked=%d gpus_over=%d kind=%s" % (bound, over, gpus_over, ",".join(sorted(kinds)) or "none"))


if __name__ == "__main__":
    main()
