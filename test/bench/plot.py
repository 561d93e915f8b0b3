#!/usr/bin/python3
"""Plots publish time against pool count from the benchmark's publish_curve.csv.

Usage: plot.py publish_curve.csv publish_time.png

One panel per workload (1 initial sync, 4 scale): for each number of pools,
the seconds from the first push (controller) or the first create (baseline)
until that many pools were published. Run by resourceslice-bench at its end.
"""
import csv
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

TITLES = {"1": "1: initial sync", "4": "4: scale"}
STYLES = {"controller": dict(color="tab:blue"), "baseline": dict(color="tab:gray", linestyle="--")}
LABELS = {"controller": "controller (push to published)", "baseline": "baseline (direct creates)"}


def main(csv_path, png_path):
    series = {}
    with open(csv_path, newline="") as f:
        for row in csv.DictReader(f):
            key = (row["workload"], row["series"])
            series.setdefault(key, ([], []))
            series[key][0].append(int(row["pools"]))
            series[key][1].append(float(row["seconds"]))
    workloads = sorted({w for w, _ in series})
    if not workloads:
        return 1
    fig, axes = plt.subplots(1, len(workloads), figsize=(6 * len(workloads), 4.5), squeeze=False)
    for ax, w in zip(axes[0], workloads):
        for name in ("baseline", "controller"):
            if (w, name) not in series:
                continue
            pools, seconds = series[(w, name)]
            ax.step(pools, seconds, where="post", label=LABELS[name], **STYLES[name])
        ax.set_title(TITLES.get(w, w))
        ax.set_xlabel("pools published")
        ax.set_ylabel("seconds")
        ax.grid(True, alpha=0.3)
        ax.legend(loc="upper left")
    fig.suptitle("Publish time against pool count (same run, same cluster)")
    fig.tight_layout()
    fig.savefig(png_path, dpi=100)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
