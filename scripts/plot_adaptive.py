#!/usr/bin/env python3
"""Draws bench_adaptive's day-shaped ramp as an SVG (no plotting library needed).

    build/bench/bench_adaptive --json | tail -1 > adaptive.json
    scripts/plot_adaptive.py adaptive.json docs/img/adaptive-ramp.svg [backend]

One panel of goodput (requests/s within the objective) per load level, offered load dashed, for the
oracle, the best static setting, latency_target and latency_target with deadline-aware admission;
below it the p99 latency of the requests served, with the objective as a line. `backend` is one of
the bench's backends (default: the first).
"""
import json
import sys
from xml.sax.saxutils import escape

SERIES = [  # key in the bench's JSON, label, colour, dash
    ("offered", "offered load", "#999999", "4 3"),
    ("oracle", "oracle (best static per level)", "#1b9e77", ""),
    ("best_static", "best single static setting", "#7570b3", ""),
    ("servekit", "latency_target", "#d95f02", ""),
    ("admission", "latency_target + admission", "#e7298a", ""),
]

WIDTH, LEFT, RIGHT = 760, 70, 220
TOP_H, BOTTOM_H, GAP, MARGIN = 260, 150, 50, 30


def nice_max(value):
    """A round number at or above value for an axis end."""
    step = 1.0
    while step * 10 < value:
        step *= 10
    for m in (1, 2, 2.5, 5, 10):
        if m * step >= value:
            return m * step
    return 10 * step


def panel(out, top, height, levels, lines, y_max, y_label, ticks_fmt, threshold=None):
    plot_w = WIDTH - LEFT - RIGHT
    n = len(levels)

    def x(i):
        return LEFT + plot_w * (i + 0.5) / n

    def y(v):
        return top + height - height * min(v, y_max) / y_max

    out.append(f'<rect x="{LEFT}" y="{top}" width="{plot_w}" height="{height}" fill="none" '
               f'stroke="#cccccc"/>')
    for k in range(5):
        v = y_max * k / 4
        out.append(f'<line x1="{LEFT}" x2="{LEFT + plot_w}" y1="{y(v):.1f}" y2="{y(v):.1f}" '
                   f'stroke="#eeeeee"/>')
        out.append(f'<text x="{LEFT - 6}" y="{y(v) + 4:.1f}" text-anchor="end">'
                   f'{ticks_fmt(v)}</text>')
    for i, f in enumerate(levels):
        out.append(f'<text x="{x(i):.1f}" y="{top + height + 16}" text-anchor="middle">'
                   f'{round(f * 100)}%</text>')
    out.append(f'<text x="{LEFT - 52}" y="{top + height / 2}" text-anchor="middle" '
               f'transform="rotate(-90 {LEFT - 52} {top + height / 2})">{escape(y_label)}</text>')
    if threshold is not None:
        out.append(f'<line x1="{LEFT}" x2="{LEFT + plot_w}" y1="{y(threshold):.1f}" '
                   f'y2="{y(threshold):.1f}" stroke="#444444" stroke-dasharray="2 2"/>')
    for label, colour, dash, values in lines:
        points = " ".join(f"{x(i):.1f},{y(v):.1f}" for i, v in enumerate(values))
        dash_attr = f' stroke-dasharray="{dash}"' if dash else ""
        out.append(f'<polyline points="{points}" fill="none" stroke="{colour}" stroke-width="2"'
                   f'{dash_attr}/>')


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    with open(sys.argv[1]) as f:
        text = f.read().strip().splitlines()[-1]
    run = json.loads(text)
    backends = run["backends"]
    name = sys.argv[3] if len(sys.argv) > 3 else next(iter(backends))
    b = backends[name]
    levels = b["levels"]
    target = run["target_ms"]
    values = {
        "offered": [f * b["capacity"] for f in levels],
        "oracle": b["oracle"],
        "best_static": b["best_static"]["goodput"],
        "servekit": b["servekit"]["goodput"],
        "admission": b["admission"]["goodput"],
    }
    p99 = {k: b[k]["p99_ms"] for k in ("best_static", "servekit", "admission")}

    height = MARGIN + TOP_H + GAP + BOTTOM_H + MARGIN + 20
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" '
           f'font-family="sans-serif" font-size="11">',
           '<rect width="100%" height="100%" fill="white"/>',
           f'<text x="{LEFT}" y="18" font-size="13">bench_adaptive, {escape(name)}: '
           f'{b["fixed_ms"]:g} ms + {b["per_element_ms"]:g} ms/element, capacity '
           f'{b["capacity"]:.0f}/s, objective p99 &lt;= {target:g} ms</text>']
    top = MARGIN
    y_max = nice_max(max(max(v) for v in values.values()))
    panel(out, top, TOP_H, levels,
          [(label, colour, dash, values[key]) for key, label, colour, dash in SERIES],
          y_max, "goodput (requests/s within the objective)", lambda v: f"{v:.0f}")
    bottom = top + TOP_H + GAP
    p_max = nice_max(max(max(v) for v in p99.values()) * 1.05)
    panel(out, bottom, BOTTOM_H, levels,
          [(label, colour, dash, p99[key]) for key, label, colour, dash in SERIES if key in p99],
          p_max, "p99 of served (ms)", lambda v: f"{v:.0f}", threshold=target)
    legend_x = WIDTH - RIGHT + 16
    for i, (_, label, colour, dash) in enumerate(SERIES):
        yy = MARGIN + 14 + 18 * i
        dash_attr = f' stroke-dasharray="{dash}"' if dash else ""
        out.append(f'<line x1="{legend_x}" x2="{legend_x + 22}" y1="{yy - 4}" y2="{yy - 4}" '
                   f'stroke="{colour}" stroke-width="2"{dash_attr}/>')
        out.append(f'<text x="{legend_x + 28}" y="{yy}">{escape(label)}</text>')
    out.append(f'<text x="{legend_x}" y="{bottom + 14}">dotted: the objective</text>')
    out.append(f'<text x="{LEFT}" y="{height - 8}">load level, in the order run (a day: night, '
               f'peak, night)</text>')
    out.append("</svg>")
    with open(sys.argv[2], "w") as f:
        f.write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
