"""Summarise a ``verdict_noise.py`` output file per noise family (the table of docs/design.md 3.1).

Usage: .venv/bin/python benchmarks/verdict_noise_summary.py benchmarks/results/verdict_noise_DATE.txt

For each family and policy: the worst FA and FR over its cells (sigma x history), the lowest
power at a 1% effect over sigma <= 0.25% (and the real-run cell), and the mean runs / GPU-s at a
1% effect at sigma 0.1% and 0.25% without history (real: the real-run cell).
"""

from __future__ import annotations

import re
import sys


def main(path: str) -> None:
    rows = []
    for line in open(path, encoding="utf-8"):
        parts = re.sub(r"\[[^\]]*\]", " ", line).split()  # drop the Wilson intervals
        if len(parts) != 10 or line.startswith("#") or parts[0] == "family":
            continue
        family, sigma, hist, policy = parts[0], parts[1], parts[2], parts[3]
        fa, fr, pw = float(parts[4]), float(parts[5]), float(parts[6])
        rows.append((family, sigma, hist, policy, fa, fr, pw, float(parts[-3]), float(parts[-2]),
                     float(parts[-1])))
    families = list(dict.fromkeys(r[0] for r in rows))
    print("| family | policy | worst FA % | worst FR % | lowest power @1% (sigma <= 0.25) | "
          "runs @1%, sigma 0.1 / 0.25 | GPU-s @1%, sigma 0.1 / 0.25 |")
    print("|---|---|---|---|---|---|---|")
    for fam in families:
        for pol in ("sequential", "seq-v2-settings", "drift"):
            cells = [r for r in rows if r[0] == fam and r[3] == pol]
            if not cells:
                continue
            low = [r for r in cells if r[1] == "real" or float(r[1]) <= 0.25]

            def at(sig: str, col: int) -> str:
                hit = [r for r in cells if r[1] == sig and r[2] == "none"]
                return f"{hit[0][col]:.2f}" if hit else "-"

            runs = at("real", 8) if fam == "h200" else f"{at('0.10', 8)} / {at('0.25', 8)}"
            gpu = at("real", 9) if fam == "h200" else f"{at('0.10', 9)} / {at('0.25', 9)}"
            print(f"| {fam} | {pol} | {max(r[4] for r in cells):.2f} | {max(r[5] for r in cells):.2f} "
                  f"| {min(r[6] for r in low):.1f} | {runs} | {gpu} |")


if __name__ == "__main__":
    main(sys.argv[1])
