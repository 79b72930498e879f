"""The report's figures, drawn with matplotlib's Agg backend into PNG bytes.

Agg draws without a display, so reports render the same on a headless server, in CI and
on a laptop; PNG bytes (not files) let the HTML report embed every figure and stay one
self-contained file. Each function takes plain numbers, never a simulation, so a figure
can be redrawn from a saved run.
"""

from __future__ import annotations

import io
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import matplotlib

matplotlib.use("Agg")  # before pyplot: no display is needed or wanted

import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

#: Figure size in inches and resolution: 960 x 560 pixels, readable in a browser column.
SIZE = (8.0, 4.67)
DPI = 120


@dataclass(frozen=True)
class Series:
    """One line of a sweep plot: y over x, labelled."""

    label: str
    x: Sequence[float]
    y: Sequence[float]


def _png(fig: Figure) -> bytes:
    buffer = io.BytesIO()
    fig.tight_layout()
    fig.savefig(buffer, format="png", dpi=DPI)
    plt.close(fig)
    return buffer.getvalue()


def _new(title: str, xlabel: str, ylabel: str) -> tuple[Figure, plt.Axes]:
    fig, ax = plt.subplots(figsize=SIZE)
    ax.set_title(title)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(True, alpha=0.3)
    return fig, ax


def _cdf_points(values: Sequence[float]) -> tuple[list[float], list[float]]:
    xs = sorted(values)
    n = len(xs)
    return xs, [(i + 1) / n for i in range(n)]


def cdf_plot(
    samples: Mapping[str, Sequence[float]],
    title: str,
    xlabel: str,
    log_x: bool = False,
    marker_x: float | None = None,
) -> bytes:
    """Empirical CDFs, one step line per label (e.g. per policy)."""
    fig, ax = _new(title, xlabel, "fraction of apps")
    for label, values in samples.items():
        if values:
            xs, ys = _cdf_points(values)
            ax.step(xs, ys, where="post", label=label)
    if marker_x is not None:
        ax.axvline(marker_x, color="grey", linestyle=":", linewidth=1)
    if log_x:
        ax.set_xscale("log")
    ax.set_ylim(0, 1.02)
    ax.legend(loc="lower right", fontsize="small")
    return _png(fig)


def usage_plot(
    usage: Mapping[str, tuple[Sequence[float], Sequence[float]]], capacity: int, title: str
) -> bytes:
    """GPUs in use over time (hours), one step line per label, with the cluster's size."""
    fig, ax = _new(title, "time (hours)", "GPUs in use")
    for label, (times, in_use) in usage.items():
        ax.step([t / 3600 for t in times], in_use, where="post", label=label, linewidth=0.9)
    ax.axhline(capacity, color="black", linestyle="--", linewidth=0.8, label="cluster size")
    ax.set_ylim(0, capacity * 1.08)
    # Busy clusters sit at the top for most of a run: the legend goes in the empty middle.
    ax.legend(loc="lower center", fontsize="small", ncol=3)
    return _png(fig)


def scatter_plot(
    points: Mapping[str, tuple[Sequence[float], Sequence[float]]],
    title: str,
    xlabel: str,
    ylabel: str,
    log_x: bool = True,
    marker_y: float | None = None,
) -> bytes:
    """One marker set per label (e.g. each app's rho against its size, per policy)."""
    fig, ax = _new(title, xlabel, ylabel)
    markers = "os^vD<>px*"
    for k, (label, (xs, ys)) in enumerate(points.items()):
        ax.scatter(xs, ys, s=14, alpha=0.7, marker=markers[k % len(markers)], label=label)
    if marker_y is not None:
        ax.axhline(marker_y, color="grey", linestyle=":", linewidth=1)
    if log_x:
        ax.set_xscale("log")
    ax.legend(loc="upper left", fontsize="small", ncol=2)
    return _png(fig)


def sweep_plot(
    series: Sequence[Series],
    title: str,
    xlabel: str,
    ylabel: str,
    log_y: bool = False,
) -> bytes:
    """How a metric moves as one parameter is swept, one line per policy."""
    fig, ax = _new(title, xlabel, ylabel)
    values = [y for line in series for y in line.y if y > 0]
    for line in series:
        ax.plot(list(line.x), list(line.y), marker="o", label=line.label)
    # A log axis only helps across orders of magnitude; over a narrow range its ticks
    # are unreadable.
    if log_y and values and max(values) / min(values) >= 10:
        ax.set_yscale("log")
    ax.legend(fontsize="small")
    return _png(fig)
