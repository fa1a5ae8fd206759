"""Draws the chart of `sparsile bench --plot`: python plot.py RECORDS.json OUT.png

Top: Sparsile's speedup over each peer per case (log scale; above 1 = Sparsile faster).
Bottom: every system's GFLOP/s against arithmetic intensity (flops per minimum byte),
under the roofline min(peak, bandwidth x intensity) of the machine."""

import json
import sys

try:
    import matplotlib
except ImportError:
    sys.exit("plot.py needs matplotlib: run bench/setup.sh (without --minimal)")

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402


def label(r):
    return f"{r['matrix']} {r['op']}" + (f" K={r['k']}" if r.get("k") else "")


def main(src, out):
    with open(src) as f:
        records = json.load(f)
    cases = []
    for r in records:
        if label(r) not in cases:
            cases.append(label(r))
    peers = []
    for r in records:
        if r["system"] != "sparsile" and r["system"] not in peers:
            peers.append(r["system"])
    # Peers: blue, orange, green, purple, brown; Sparsile: red with a black edge.
    colors = ["#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#17becf"]
    ours = "#d62728"

    width = min(26.0, max(10.0, 0.32 * len(cases) * max(1, len(peers)) ** 0.5 + 4))
    fig = plt.figure(figsize=(width, 12))
    grid = fig.add_gridspec(2, 3, height_ratios=[1, 1.1])
    ax1 = fig.add_subplot(grid[0, :])
    ax2 = fig.add_subplot(grid[1, :2])
    ax3 = fig.add_subplot(grid[1, 2])
    measured = {r["system"] for r in records if r.get("median_ms")}
    peers = [p for p in peers if p in measured]

    # Speedups.
    x = np.arange(len(cases))
    bar = 0.8 / max(1, len(peers))
    for p_i, peer in enumerate(peers):
        ys = []
        for c in cases:
            rs = [r for r in records if label(r) == c and r["system"] == peer]
            ok = rs and rs[0].get("speedup") and rs[0].get("correct")
            ys.append(rs[0]["speedup"] if ok else np.nan)
        ax1.bar(x - 0.4 + bar * (p_i + 0.5), ys, bar, label=f"vs {peer}", color=colors[p_i % len(colors)])
    ax1.axhline(1.0, color="black", linewidth=0.8)
    ax1.set_yscale("log")
    ax1.set_xticks(x)
    ax1.set_xticklabels(cases, rotation=60, ha="right", fontsize=8)
    ax1.set_ylabel("Sparsile speedup (peer time / Sparsile time)")
    ax1.set_title("Sparsile's speedup over each peer (above 1: Sparsile faster)")
    if peers:
        ax1.legend(fontsize=8)
    else:
        ax1.text(0.5, 0.5, "no peer measured", transform=ax1.transAxes, ha="center")
    ax1.grid(axis="y", which="both", alpha=0.3)

    # Roofline.
    bw = records[0]["bandwidth_gbs"] if records else 1.0
    peak = records[0]["peak_gflops"] if records else 1.0
    intens = [r["flops"] / r["bytes"] for r in records if r.get("gflops")]
    lo = min(intens + [peak / bw]) / 4 if intens else 0.01
    hi = max(intens + [peak / bw]) * 4 if intens else 100
    xi = np.logspace(np.log10(lo), np.log10(hi), 200)
    ax2.plot(xi, np.minimum(peak, bw * xi), color="black", linewidth=1.2,
             label=f"roofline: {bw:.1f} GB/s, {peak:.0f} GFLOP/s")
    markers = {"spmm": "o", "sddmm": "s", "spmv": "^"}
    systems = ["sparsile"] + peers
    for system in systems:
        for op, mk in markers.items():
            rs = [r for r in records if r["system"] == system and r["op"] == op and r.get("gflops")]
            if not rs:
                continue
            ax2.scatter([r["flops"] / r["bytes"] for r in rs], [r["gflops"] for r in rs],
                        marker=mk, s=36 if system == "sparsile" else 22,
                        color=colors[peers.index(system) % len(colors)] if system != "sparsile" else ours,
                        edgecolors="black" if system == "sparsile" else "none", linewidths=0.5,
                        label=f"{system} {op}")
    ax2.set_xscale("log")
    ax2.set_yscale("log")
    ax2.set_xlabel("arithmetic intensity (flops / minimum byte)")
    ax2.set_ylabel("GFLOP/s (median)")
    ax2.set_title("Position under the roofline")
    ax2.legend(fontsize=7, ncol=3)
    ax2.grid(which="both", alpha=0.3)

    # Geometric means of the speedups per operation.
    ops = [op for op in markers if any(r["op"] == op for r in records)]
    columns = ["best peer"] + peers
    bar = 0.8 / len(columns)
    for c_i, col in enumerate(columns):
        ys = []
        for op in ops:
            if col == "best peer":
                vals = [r["speedup"] for r in records if r["system"] == "sparsile" and r["op"] == op
                        and r.get("speedup") and r.get("correct")]
            else:
                vals = [r["speedup"] for r in records if r["system"] == col and r["op"] == op
                        and r.get("speedup") and r.get("correct")]
            ys.append(float(np.exp(np.mean(np.log(vals)))) if vals else np.nan)
        color = "black" if col == "best peer" else colors[(c_i - 1) % len(colors)]
        bars = ax3.bar(np.arange(len(ops)) - 0.4 + bar * (c_i + 0.5), ys, bar, label=f"vs {col}", color=color)
        for b, y in zip(bars, ys):
            if np.isfinite(y):
                ax3.annotate(f"{y:.2f}", (b.get_x() + b.get_width() / 2, y), ha="center",
                             va="bottom", fontsize=7)
    ax3.axhline(1.0, color="black", linewidth=0.8)
    ax3.set_yscale("log")
    ax3.set_xticks(np.arange(len(ops)))
    ax3.set_xticklabels(ops)
    ax3.set_title("Geometric mean speedup per op")
    ax3.legend(fontsize=8)
    ax3.grid(axis="y", which="both", alpha=0.3)
    fig.tight_layout()
    fig.savefig(out, dpi=110)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
