"""The report's figures, drawn with matplotlib into SVG text.

Figures are built on ``matplotlib.figure.Figure`` directly and saved with its SVG canvas:
no pyplot and no ``matplotlib.use``, so importing or calling this module never changes the
backend of a notebook or program that uses themis as a library, and no display is needed.
SVG (with text kept as text, ``svg.fonttype = none``) is crisp at any zoom, searchable
in the browser, and inlined into ``report.html`` it keeps the report one file.

Each ``*_figure`` function returns a ``Figure`` (tests measure it) and :func:`to_svg`
turns it into text. They take plain numbers, never a simulation, so a figure can be
redrawn from saved runs. Where a label (a policy) has several runs (seeds), each seed
is drawn: thin lines in the label's colour for distributions, every seed's points in
scatters, a band (min-max) around the median for sweeps, so that the spread between
seeds is visible next to the differences between policies.
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


#: The colour of each label (policy), cycled: the same policy has the same colour in
#: every figure of a report when the labels come in the same order.
COLOURS = (
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd",
    "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf",
)  # fmt: skip


@dataclass(frozen=True)
class Series:
    """One line of a sweep plot: y over x, labelled; with several seeds ``y`` is the
    median and ``low``/``high`` the range drawn as a band."""

    label: str
    x: Sequence[float]
    y: Sequence[float]
    low: Sequence[float] | None = None
    high: Sequence[float] | None = None


def colour(k: int) -> str:
    return COLOURS[k % len(COLOURS)]


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
    """Empirical CDFs: per label, one step line per seed's sample, in the label's colour."""
    fig, ax = _new(title, xlabel, ylabel)
    for k, (label, per_seed) in enumerate(samples.items()):
        several = len(per_seed) > 1
        for s, values in enumerate(per_seed):
            if values:
                xs, ys = _cdf_points(values)
                ax.step(
                    xs,
                    ys,
                    where="post",
                    color=colour(k),
                    linewidth=0.9 if several else 1.4,
                    alpha=0.65 if several else 1.0,
                    label=label if s == 0 else None,
                )
    if marker_x is not None:
        ax.axvline(marker_x, color="grey", linestyle=":", linewidth=1)
    if log_x:
        ax.set_xscale("log")
    ax.set_ylim(0, 1.02)
    ax.legend(loc="lower right", fontsize="small")
    return fig


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
    for k, (ax, (label, per_seed)) in enumerate(zip(axes, usage.items(), strict=False)):
        for s, (times, levels) in enumerate(per_seed):
            hours = [t / 3600 for t in times]
            if s == 0:
                ax.fill_between(hours, levels, step="post", color=colour(k), alpha=0.35, lw=0)
            ax.step(hours, levels, where="post", color=colour(k), linewidth=0.7)
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
    markers = "os^vD<>px*"
    for k, (label, (xs, ys)) in enumerate(points.items()):
        ax.scatter(
            xs, ys, s=14, alpha=0.7, color=colour(k), marker=markers[k % len(markers)], label=label
        )
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
    for k, line in enumerate(series):
        ax.plot(list(line.x), list(line.y), marker="o", color=colour(k), label=line.label)
        if line.low is not None and line.high is not None:
            ax.fill_between(list(line.x), list(line.low), list(line.high), color=colour(k),
                            alpha=0.18, lw=0)  # fmt: skip
    # A log axis only helps across orders of magnitude; over a narrow range its ticks
    # are unreadable.
    if log_y and values and max(values) / min(values) >= 10:
        ax.set_yscale("log")
    if series:
        ax.legend(fontsize="small")
    return fig
