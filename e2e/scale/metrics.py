#!/usr/bin/env python3
"""What one burst of pods cost the control plane, from scrapes before and after it.

Used by scripts/e2e-scale-throughput.sh. Each snapshot is a directory holding the Prometheus
text of kube-apiserver (apiserver.txt), kube-scheduler (kube-scheduler.txt) and
gpushare-scheduler (gpushare-scheduler.txt), and /proc figures of the two schedulers
(procs.txt: "<name> <utime+stime ticks> <VmHWM kB>") and when it was taken (time.txt: Unix
seconds).

  metrics.py diff BEFORE AFTER PODS [IDLE]   prints key=value pairs for the burst of PODS pods:
    api_req_per_pod     the API requests the API server served during the burst
                        (apiserver_request_total), less the background (kwok's Lease renewals,
                        the controllers) at the rate seen from IDLE to BEFORE, / PODS
    ks_algo_p99_ms      kube-scheduler's scheduling_algorithm_duration_seconds, p99 (filter and
                        score, extenders' filter and prioritize included)
    ks_attempt_p99_ms   kube-scheduler's scheduling_attempt_duration_seconds{result="scheduled"},
                        p99 (the cycle, binding excluded)
    gs_filter_p99_ms    gpushare-scheduler's own filter / prioritize / bind durations, p99
    gs_prioritize_p99_ms
    gs_bind_p99_ms
    gs_cpu_s, ks_cpu_s  CPU seconds each scheduler spent during the burst
    gs_rss_peak_mib     gpushare-scheduler's peak RSS since it started (VmHWM)

Quantiles are read from the histograms' bucket deltas as Prometheus's histogram_quantile does
(linear within the bucket); "-" when the burst recorded no observation.
"""
import os
import re
import sys

SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})?\s+(\S+)')
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')
TICKS = os.sysconf("SC_CLK_TCK")


def parse(path):
    """[(name, {label: value}, float)] of a Prometheus text file; [] when it is missing."""
    out = []
    try:
        text = open(path).read()
    except OSError:
        return out
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = SAMPLE.match(line)
        if not m:
            continue
        try:
            v = float(m.group(4))
        except ValueError:
            continue
        out.append((m.group(1), dict(LABEL.findall(m.group(3) or "")), v))
    return out


def total(samples, name, want=None):
    return sum(v for n, l, v in samples if n == name and all(l.get(k) == x for k, x in (want or {}).items()))


def buckets(samples, name, want=None):
    """{le: cumulative count} summed over the series that match `want`."""
    b = {}
    for n, l, v in samples:
        if n != name + "_bucket" or any(l.get(k) != x for k, x in (want or {}).items()):
            continue
        le = float("inf") if l["le"] == "+Inf" else float(l["le"])
        b[le] = b.get(le, 0.0) + v
    return b


def quantile(q, before, after):
    delta = sorted((le, after.get(le, 0.0) - before.get(le, 0.0)) for le in after)
    if not delta or delta[-1][1] <= 0:
        return None
    rank = q * delta[-1][1]
    lo_le, lo_count = 0.0, 0.0
    for le, count in delta:
        if count >= rank:
            if le == float("inf"):
                return lo_le  # past the last finite bucket: its bound, as Prometheus does
            return lo_le + (le - lo_le) * (rank - lo_count) / max(count - lo_count, 1e-12)
        lo_le, lo_count = le, count
    return lo_le


def procs(path):
    out = {}
    try:
        for line in open(path):
            f = line.split()
            if len(f) == 3:
                out[f[0]] = (int(f[1]), int(f[2]))
    except OSError:
        pass
    return out


def ms(x):
    return "-" if x is None else "%.1f" % (1000 * x)


def taken(d):
    try:
        return float(open(os.path.join(d, "time.txt")).read().strip())
    except (OSError, ValueError):
        return None


def requests(d):
    return total(parse(os.path.join(d, "apiserver.txt")), "apiserver_request_total")


def diff(before_dir, after_dir, pods, idle_dir=None):
    r = {}
    during = requests(after_dir) - requests(before_dir)
    t_idle, t0, t1 = (taken(idle_dir) if idle_dir else None), taken(before_dir), taken(after_dir)
    if None not in (t_idle, t0, t1) and t0 > t_idle:
        background = (requests(before_dir) - requests(idle_dir)) / (t0 - t_idle)
        r["api_background_per_s"] = "%.1f" % background
        during -= background * (t1 - t0)
    r["api_req_per_pod"] = "%.1f" % (max(during, 0.0) / pods)
    k0, k1 = parse(os.path.join(before_dir, "kube-scheduler.txt")), parse(os.path.join(after_dir, "kube-scheduler.txt"))
    name = "scheduler_scheduling_algorithm_duration_seconds"
    r["ks_algo_p99_ms"] = ms(quantile(0.99, buckets(k0, name), buckets(k1, name)))
    name = "scheduler_scheduling_attempt_duration_seconds"
    r["ks_attempt_p99_ms"] = ms(quantile(0.99, buckets(k0, name, {"result": "scheduled"}), buckets(k1, name, {"result": "scheduled"})))
    g0, g1 = parse(os.path.join(before_dir, "gpushare-scheduler.txt")), parse(os.path.join(after_dir, "gpushare-scheduler.txt"))
    for verb in ("filter", "prioritize", "bind"):
        name = "gpushare_scheduler_%s_duration_seconds" % verb
        r["gs_%s_p99_ms" % verb] = ms(quantile(0.99, buckets(g0, name), buckets(g1, name)))
    p0, p1 = procs(os.path.join(before_dir, "procs.txt")), procs(os.path.join(after_dir, "procs.txt"))
    for key, proc in (("gs", "gpushare-scheduler"), ("ks", "kube-scheduler")):
        if proc in p0 and proc in p1:
            r[key + "_cpu_s"] = "%.1f" % ((p1[proc][0] - p0[proc][0]) / TICKS)
        else:
            r[key + "_cpu_s"] = "-"
    r["gs_rss_peak_mib"] = "%.0f" % (p1["gpushare-scheduler"][1] / 1024) if "gpushare-scheduler" in p1 else "-"
    print(" ".join("%s=%s" % kv for kv in r.items()))


def main(argv):
    if len(argv) in (5, 6) and argv[1] == "diff":
        diff(argv[2], argv[3], max(int(argv[4]), 1), argv[5] if len(argv) == 6 else None)
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
