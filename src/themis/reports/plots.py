"""The report's figures, drawn with matplotlib into SVG text.

Figures are built on ``matplotlib.figure.Figure`` directly and saved with its SVG canvas:
no pyplot and no ``matplotlib.use``, so importing or calling this module never changes the
backend of a notebook or program that uses themis as a library, and no display is needed.
SVG (with text kept as text, ``svg.fonttype = none``) is crisp at any zoom, searchable
in the browser, and inlined into ``report.html`` it keeps the report one file.

Each ``*_figure`` function returns a ``Figure`` (tests measure it) and :func:`to_svg`
turns it into text. They take plain numbers, never a simulation, so a figure can be
redrawn from saved runs. Where a label (a policy) has several runs (seeds), the figure
shows their median and range: a CDF's median fraction at each value with a min-max band,
a sweep's median with its band; scatters show every seed's points. So the spread between
seeds is visible next to the differences between policies, and five seeds of eleven
policies stay eleven lines, not fifty-five.

Every policy has one style in every figure and every report (:data:`POLICY_STYLES`): a
colour from Paul Tol's colour-blind-safe palettes, a marker and a dash pattern, so that
lines differ by more than colour (red/green blindness, grey print). Labels that are not
built-in policies take the spare styles in order.
"""

from __future__ import annotations

import io
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import matplotlib
from matplotlib.axes import Axes
from matplotlib.figure import Figure

#: Figure width and the height of a one-axes figure, in inches (about 770 x 450 px).
WIDTH = 8.0
HEIGHT = 4.67
#: Height of one panel of a small-multiples figure (one panel per policy).
PANEL_HEIGHT = 1.15
#: Most labels whose CDFs get a min-max band over seeds (more overlap unreadably).
MAX_BANDS = 3


@dataclass(frozen=True)
class Style:
    """How one label (policy) is drawn: colour, marker, and dash pattern of its lines."""

    colour: str
    marker: str
    dash: str | tuple[float, tuple[float, ...]]


_SOLID, _DASHED, _DOTTED, _DASHDOT = "-", (0, (6.0, 2.0)), (0, (1.2, 1.6)), "-."

#: Each built-in policy's style, fixed: the same in every figure whatever the labels'
#: order. Colours from Paul Tol's "vibrant" and "muted" schemes (colour-blind safe); two
#: policies with close colours (themis/tiresias, las/srtf) differ in marker and dash.
POLICY_STYLES: dict[str, Style] = {
    "themis": Style("#CC3311", "o", _SOLID),
    "fifo": Style("#0077BB", "s", _DASHED),
    "ftf-oracle": Style("#000000", "*", _DOTTED),
    "gandiva": Style("#009988", "D", _DASHDOT),
    "gavel": Style("#EE7733", "^", _SOLID),
    "gavel-mmf": Style("#882255", "h", _DASHED),
    "las": Style("#33BBEE", "v", _DASHED),
    "max-min": Style("#777777", "X", _DOTTED),
    "optimus": Style("#AA4499", "P", _DASHDOT),
    "slaq": Style("#999933", "p", _SOLID),
    "srtf": Style("#332288", "<", _DASHED),
    "tiresias": Style("#EE3377", ">", _DOTTED),
}
#: Styles for labels that are not built-in policies (plugins, sweep values), in order.
SPARE_STYLES: tuple[Style, ...] = (
    Style("#117733", "8", _SOLID),
    Style("#BBBBBB", "h", _DASHED),
    Style("#DDAA33", "d", _DASHDOT),
    Style("#88CCEE", "H", _DOTTED),
    Style("#44AA99", "1", _SOLID),
    Style("#DDCC77", "2", _DASHED),
)


def styles_for(labels: Sequence[str]) -> dict[str, Style]:
    """Each label's style: a built-in policy's own (matched on the label's first word,
    so ``themis seed 3`` is drawn as ``themis``), else the next spare one; past the spares
    the built-ins' styles are reused with another marker, so no two labels look alike
    within twenty-three."""
    out: dict[str, Style] = {}
    spare = 0
    markers = "ov^<>sDpPX*h"
    for label in labels:
        key = label.split()[0] if label.split() else label
        if key in POLICY_STYLES:
            out[label] = POLICY_STYLES[key]
            continue
        if spare < len(SPARE_STYLES):
            out[label] = SPARE_STYLES[spare]
        else:
            k = spare - len(SPARE_STYLES)
            base = list(POLICY_STYLES.values())[k % len(POLICY_STYLES)]
            out[label] = Style(base.colour, markers[(k + 5) % len(markers)], base.dash)
        spare += 1
    return out


#: The first colours a comparison of Themis and FIFO shows (tests/reports/test_screenshot).
COLOURS = (POLICY_STYLES["themis"].colour, POLICY_STYLES["fifo"].colour)


@dataclass(frozen=True)
class Series:
    """One line of a sweep plot: y over x, labelled; with several seeds ``y`` is the
    median and ``low``/``high`` the range drawn as a band."""

    label: str
    x: Sequence[float]
    y: Sequence[float]
    low: Sequence[float] | None = None
    high: Sequence[float] | None = None


def to_svg(fig: Figure) -> str:
    """The figure as an ``<svg>`` element (no XML prolog), ready to inline in HTML."""
    buffer = io.BytesIO()
    # While saving: text stays text; a fixed salt makes element ids a hash of their
    # content, so the same figure gives the same bytes and two figures inlined in one page
    # can share an id only for identical definitions.
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": "themis"}):
        fig.savefig(buffer, format="svg", metadata={"Date": None})  # same input, same bytes
    text = buffer.getvalue().decode("utf-8")
    return text[text.index("<svg") :]


def _new(title: str, xlabel: str, ylabel: str, height: float = HEIGHT) -> tuple[Figure, Axes]:
    fig = Figure(figsize=(WIDTH, height), layout="constrained")
    ax = fig.subplots()
    ax.set_title(title)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(True, alpha=0.3)
    return fig, ax


def _cdf_points(values: Sequence[float]) -> tuple[list[float], list[float]]:
    xs = sorted(values)
    n = len(xs)
    return xs, [(i + 1) / n for i in range(n)]


def cdf_figure(
    samples: Mapping[str, Sequence[Sequence[float]]],
    title: str,
    xlabel: str,
    log_x: bool = False,
    marker_x: float | None = None,
    ylabel: str = "fraction of apps",
) -> Figure:
    """Empirical CDFs, one line per label in its style. A label with several samples
    (seeds) is drawn as the median fraction over its seeds at each value, with the
    min-max band of the seeds' CDFs shaded behind it when at most ``MAX_BANDS`` labels
    are drawn (more bands overlap into one grey mass; the tables give the ranges)."""
    fig, ax = _new(title, xlabel, ylabel)
    styles = styles_for(list(samples))
    bands = len(samples) <= MAX_BANDS
    for label, per_seed in samples.items():
        style = styles[label]
        kept = [list(v) for v in per_seed if len(v)]
        if not kept:
            continue
        if len(kept) == 1:
            xs, ys = _cdf_points(kept[0])
            name = label
        else:
            xs, ys, low, high = _cdf_band(kept)
            if bands:
                ax.fill_between(xs, low, high, step="post", color=style.colour, alpha=0.15, lw=0)
            name = f"{label} (median of {len(kept)})"
        ax.step(
            xs,
            ys,
            where="post",
            color=style.colour,
            linestyle=style.dash,
            linewidth=1.4,
            marker=style.marker,
            markevery=_marker_positions(len(xs)),
            markersize=5,
            label=name,
        )
    if marker_x is not None:
        ax.axvline(marker_x, color="grey", linestyle=":", linewidth=1)
    if log_x:
        ax.set_xscale("log")
    ax.set_ylim(0, 1.02)
    ax.legend(loc="lower right", fontsize="small")
    return fig


def _cdf_band(
    samples: Sequence[Sequence[float]],
) -> tuple[list[float], list[float], list[float], list[float]]:
    """At every value any sample takes: the median, lowest and highest fraction of the
    samples' empirical CDFs there."""
    import numpy as np

    grid = np.unique(np.concatenate([np.asarray(v, dtype=float) for v in samples]))
    fractions = np.array(
        [np.searchsorted(np.sort(v), grid, side="right") / len(v) for v in samples]
    )
    return (
        grid.tolist(),
        np.median(fractions, axis=0).tolist(),
        fractions.min(axis=0).tolist(),
        fractions.max(axis=0).tolist(),
    )


def _marker_positions(n: int, count: int = 8) -> list[int]:
    """About ``count`` evenly spread indices of ``n`` points: markers that tell lines
    apart without hiding them."""
    if n <= count:
        return list(range(n))
    return sorted({round(i * (n - 1) / (count - 1)) for i in range(count)})


def usage_figure(
    usage: Mapping[str, Sequence[tuple[Sequence[float], Sequence[float]]]],
    capacity: int,
    title: str,
) -> Figure:
    """GPUs in use over time (hours) as small multiples: one panel per label with the same
    axes, the first curve filled and any others drawn over it, and the cluster's size
    dashed. Overlaid in one axes, a few busy policies' curves hide each other at the top
    of the plot."""
    n = max(1, len(usage))
    fig = Figure(figsize=(WIDTH, 0.9 + PANEL_HEIGHT * n), layout="constrained")
    axes = fig.subplots(n, 1, sharex=True, sharey=True, squeeze=False)[:, 0]
    fig.suptitle(title)
    fig.supylabel("GPUs in use")
    styles = styles_for(list(usage))
    for ax, (label, per_seed) in zip(axes, usage.items(), strict=False):
        style = styles[label]
        for s, (times, levels) in enumerate(per_seed):
            hours = [t / 3600 for t in times]
            # Rasterized: a run's usage curve has a point per event (tens of thousands),
            # 4 MB of the 4.9 MB report as vector paths; as an image it is a few KB,
            # and the axes, labels and the cluster's line stay vector.
            if s == 0:
                ax.fill_between(
                    hours,
                    levels,
                    step="post",
                    color=style.colour,
                    alpha=0.35,
                    lw=0,
                    rasterized=True,
                )
            ax.step(hours, levels, where="post", color=style.colour, linewidth=0.7, rasterized=True)
        ax.axhline(capacity, color="black", linestyle="--", linewidth=0.7)
        ax.set_ylim(0, capacity * 1.1)
        ax.set_ylabel(label, rotation=0, ha="right", va="center", fontsize="small")
        ax.set_yticks([0, capacity])
        ax.grid(True, axis="x", alpha=0.3)
    axes[-1].set_xlabel("time (hours)")
    return fig


def scatter_figure(
    points: Mapping[str, tuple[Sequence[float], Sequence[float]]],
    title: str,
    xlabel: str,
    ylabel: str,
    log_x: bool = True,
    marker_y: float | None = None,
) -> Figure:
    """One marker set per label (each app's rho against its size, per policy; every
    seed's apps). The legend sits outside the axes so it hides no point."""
    fig, ax = _new(title, xlabel, ylabel)
    styles = styles_for(list(points))
    for label, (xs, ys) in points.items():
        style = styles[label]
        ax.scatter(xs, ys, s=16, alpha=0.7, color=style.colour, marker=style.marker, label=label)
    if marker_y is not None:
        ax.axhline(marker_y, color="grey", linestyle=":", linewidth=1)
    if log_x:
        ax.set_xscale("log")
    ys = [y for _, (_, values) in points.items() for y in values if y > 0 and math.isfinite(y)]
    # A few starved apps would squeeze every other point against the axis: log scale when
    # the values span ten times or more.
    if ys and max(ys) / min(ys) >= 10:
        ax.set_yscale("log")
        ax.set_ylabel(f"{ylabel} (log)")
    fig.legend(loc="outside right upper", fontsize="small")
    return fig


def sweep_figure(
    series: Sequence[Series],
    title: str,
    xlabel: str,
    ylabel: str,
    log_y: bool = False,
) -> Figure:
    """How a metric moves as one parameter is swept: per policy the median over seeds
    with its min-max band (a plain line for one seed)."""
    fig, ax = _new(title, xlabel, ylabel)
    values = [
        y
        for line in series
        for y in [*line.y, *(line.low or ()), *(line.high or ())]
        if y > 0 and math.isfinite(y)
    ]
    styles = styles_for([line.label for line in series])
    for line in series:
        style = styles[line.label]
        ax.plot(
            list(line.x),
            list(line.y),
            marker=style.marker,
            linestyle=style.dash,
            color=style.colour,
            label=line.label,
        )
        if line.low is not None and line.high is not None:
            ax.fill_between(list(line.x), list(line.low), list(line.high), color=style.colour,
                            alpha=0.18, lw=0)  # fmt: skip
    # A log axis only helps across orders of magnitude; over a narrow range its ticks
    # are unreadable.
    if log_y and values and max(values) / min(values) >= 10:
        ax.set_yscale("log")
    if series:
        ax.legend(fontsize="small")
    return fig
