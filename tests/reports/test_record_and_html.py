"""Reports: usage curves from intervals, figures as inline SVG, one self-contained HTML file."""

from __future__ import annotations

import html
import re
import subprocess
import sys
from pathlib import Path

from matplotlib.transforms import Bbox

import themis
from themis.policies import policy_names
from themis.reports.comparison import apps_section, comparison_section, single
from themis.reports.html import Figure, Section, Table, config_table, render, write_report
from themis.reports.markdown import markdown_table
from themis.reports.plots import (
    POLICY_STYLES,
    cdf_figure,
    scatter_figure,
    styles_for,
    to_svg,
    usage_figure,
)
from themis.reports.record import gpus_in_use, record_run, thin
from themis.simulator.engine import SimulationResult


def test_gpus_in_use_is_the_exact_step_function(result: SimulationResult) -> None:
    # a: 2 GPUs over [0, 100); b: 2 GPUs over [40, 100) and 2 over [100, 340).
    assert gpus_in_use(result) == ([0.0, 40.0, 100.0, 340.0], [2, 4, 2, 0])


def test_thin_keeps_the_lowest_level_of_each_bin() -> None:
    times = [float(t) for t in range(10)]
    levels = [4, 3, 4, 4, 0, 4, 4, 4, 2, 4]
    assert thin(times, levels, 20) == (times, levels)
    assert thin(times, levels, 4) == ([0.0, 3.0, 6.0, 9.0], [3, 0, 2, 4])


def test_record_holds_rows_sizes_and_usage(result: SimulationResult) -> None:
    record = record_run(result, "label", {"x": 1})
    assert record.label == "label" and record.policy == "hand"
    assert record.rhos() == [1.0, 2.0]
    # One 2-GPU job of t_cluster iterations at 1 s each: 50 and 100 GPU-seconds.
    assert record.app_gpu_hours == {"a": 50.0 / 3600, "b": 100.0 / 3600}
    assert record.capacity == 4


def test_plots_are_svg_with_searchable_text() -> None:
    svg = to_svg(cdf_figure({"pol-x": [[1.0, 2.0, 0.5]]}, "Title Q", "x", log_x=True, marker_x=1))
    assert svg.startswith("<svg") and svg.rstrip().endswith("</svg>")
    assert "<?xml" not in svg  # ready to inline
    # Text kept as text (svg.fonttype none), not glyph paths: the browser can find it.
    assert re.search(r"<text[^>]*>Title Q</text>", svg)
    assert re.search(r"<text[^>]*>pol-x</text>", svg)
    # The same figure gives the same bytes (no random ids).
    again = to_svg(cdf_figure({"pol-x": [[1.0, 2.0, 0.5]]}, "Title Q", "x", log_x=True, marker_x=1))
    assert svg == again


def test_drawing_leaves_the_matplotlib_backend_alone() -> None:
    # A notebook's backend must survive importing and using the reports.
    code = (
        "import sys, matplotlib; matplotlib.use('pdf');"
        "from themis.reports.plots import cdf_figure, to_svg;"
        "to_svg(cdf_figure({'a': [[1.0]]}, 't', 'x'));"
        "print(matplotlib.get_backend(), 'matplotlib.pyplot' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["pdf", "False"]


def _bbox(artist) -> Bbox:
    return artist.get_window_extent()


def test_scatter_legend_sits_outside_the_axes() -> None:
    points = {f"p{k}": ([1.0, 10.0, 100.0], [0.5, 1.0, 2.0]) for k in range(6)}
    fig = scatter_figure(points, "t", "x", "rho", marker_y=1.0)
    fig.draw_without_rendering()
    (ax,) = fig.axes
    (legend,) = fig.legends
    assert not _bbox(legend).overlaps(_bbox(ax))


def test_usage_is_one_panel_per_policy_on_shared_axes() -> None:
    usage = {
        "a": [([0.0, 3600.0, 7200.0], [4, 2, 0])],
        "b": [([0.0, 1800.0], [3, 0])],
        "c": [([0.0, 900.0], [1, 0])],
    }
    fig = usage_figure(usage, 4, "GPUs")
    assert len(fig.axes) == 3
    assert [ax.get_ylabel() for ax in fig.axes] == ["a", "b", "c"]
    assert fig.get_supylabel() == "GPUs in use"  # what the panels' y axis counts
    assert {ax.get_xlim() for ax in fig.axes} == {fig.axes[0].get_xlim()}
    assert {ax.get_ylim() for ax in fig.axes} == {(0.0, 4.4)}


def test_comparison_report_inlines_four_figures(result: SimulationResult, tmp_path: Path) -> None:
    records = [record_run(result, "one"), record_run(result, "two")]
    path = write_report(tmp_path / "r", "T <&>", ["meta"], [comparison_section(records, "C")])
    text = path.read_text()
    assert path.name == "report.html"
    assert "<title>T &lt;&amp;&gt;</title>" in text  # escaped
    assert text.count("<figure") == text.count("<svg") == 4
    assert "max rho" in text and "<th>one</th>" in text and "<th>two</th>" in text
    assert "rho p50 / p90 / p99" in text and "apps with rho &gt; 1" in text
    assert "<img" not in text and 'src="http' not in text  # nothing outside the file


def test_apps_section_lists_worst_first_and_folds_the_full_table(result: SimulationResult) -> None:
    section = apps_section(single([record_run(result, "pol")]))
    worst, full = section.tables
    assert worst.header == ["app", "model", "gangs", "wait (h)", "completion (h)", "rho"]
    assert [row[0] for row in worst.rows] == ["b", "a"]  # rho 2.0 before 1.0
    assert worst.rows[0][-1] == "2.00" and worst.rows[0][2] == "2x1"
    assert worst.sortable and full.sortable
    assert full.folded == "pol: all 2 apps (1 with rho > 1), sortable"
    text = render("t", [], [section])
    assert text.count('<table class="sortable">') == 2
    assert "<details><summary>pol: all 2 apps" in text
    assert "<script>" in text and "localeCompare" in text


def test_config_is_a_table_of_options_as_typed() -> None:
    config = {
        "cluster": "2x4x8",
        "profiles": None,
        "seeds": [0, 1],
        "lease_s": 600.0,
        "fairness_knob": 0.8,
        "gang_mix": False,
        "misreport": {},
        "batch_window_s": 30.5,
    }
    table = config_table(config)
    assert table.header == ["option", "value"]
    assert table.rows == [
        ["--cluster", "2x4x8"],
        ["--profiles", "default"],
        ["--seeds", "0,1"],
        ["--lease", "600"],
        ["--fairness-knob", "0.8"],
        ["--gang-mix", "off"],
        ["--misreport", "none"],
        ["--batch-window", "30.5"],
    ]
    text = render("t", [], [Section("S", "", [table])])
    assert '<table class="text">' in text
    assert "False" not in text and "{}" not in text


def test_render_escapes_cells_and_splits_paragraphs() -> None:
    section = Section("S", "a\n\nb<", [Table(["h"], [["<x>"]])], [Figure("<svg></svg>", "c")])
    text = render("t", [], [section])
    assert "<td>&lt;x&gt;</td>" in text
    assert "<p>a</p><p>b&lt;</p>" in text.replace("\n", "")
    assert "<script>" not in text  # no sortable table, no script


def test_markdown_table() -> None:
    table = Table(["metric", "a|b"], [["x", "1"]], "cap")
    assert markdown_table(table) == "*cap*\n\n| metric | a\\|b |\n| --- | ---: |\n| x | 1 |"


def test_scatter_goes_log_only_across_an_order_of_magnitude() -> None:
    wide = scatter_figure({"p": ([1.0, 2.0], [0.5, 20.0])}, "t", "x", "rho")
    narrow = scatter_figure({"p": ([1.0, 2.0], [0.5, 2.0])}, "t", "x", "rho")
    assert wide.axes[0].get_yscale() == "log" and wide.axes[0].get_ylabel() == "rho (log)"
    assert narrow.axes[0].get_yscale() == "linear"


def test_a_median_over_its_range_breaks_the_line_in_html_not_in_markdown() -> None:
    table = Table(["m"], [["1.67\n0.77-4.63"]])
    # The range is kept on one line: a browser would break it after the hyphen.
    html_text = render("t", [], [Section("S", "", [table])])
    assert '<td>1.67<br><span class="nw">0.77-4.63</span></td>' in html_text
    assert ".nw { white-space: nowrap; }" in html_text
    assert markdown_table(table).endswith("| 1.67 0.77-4.63 |")


def test_a_report_says_what_wrote_it(result: SimulationResult, tmp_path: Path) -> None:
    records = [record_run(result, "one")]
    command = "themis compare --seeds 2 --report 'out/my report'"
    path = write_report(tmp_path, "T", [], [comparison_section(records, "C")], command)
    [line] = re.findall(r'<p class="meta">(written by [^<]*)</p>', path.read_text())
    version, typed, when = line.removeprefix("written by ").split(" · ")
    assert version == f"themis {themis.__version__}"
    assert typed == html.escape(command)
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d UTC", when)


def test_every_builtin_policy_has_its_own_colour_and_marker() -> None:
    names = policy_names()
    styles = styles_for(names)
    assert len({s.colour for s in styles.values()}) == len(names)
    assert len({s.marker for s in styles.values()}) == len(names)
    # Fixed per policy, whatever the order or the company.
    assert styles_for(list(reversed(names))) == styles
    assert styles_for(["gavel"])["gavel"] == styles["gavel"]
    assert styles_for(["themis seed 3"])["themis seed 3"] == styles["themis"]
    # Plugins and other labels: styles unlike any other label's, for a good many.
    labels = [*names, *(f"plugin{k}" for k in range(12))]
    looks = [(s.colour, s.marker, s.dash) for s in styles_for(labels).values()]
    assert len(set(looks)) == len(labels)
    spare = [looks[k] for k in range(len(names), len(labels))]
    assert not {(c, m) for c, m, _ in spare} & {(s.colour, s.marker) for s in styles.values()}


def test_a_cdf_over_seeds_is_one_median_line_with_a_band() -> None:
    seeds = [[1.0, 2.0], [2.0, 3.0], [3.0, 4.0]]
    fig = cdf_figure({"themis": seeds, "fifo": [[1.0, 5.0]] * 5}, "t", "x")
    (ax,) = fig.axes
    assert len(ax.get_lines()) == 2  # one per policy, not one per seed
    assert len(ax.collections) == 2  # a min-max band each
    themis_line = ax.get_lines()[0]
    assert themis_line.get_label() == "themis (median of 3)"
    xs, ys = themis_line.get_data(orig=True)
    # At 1 the seeds' CDFs are 0.5, 0, 0; at 2: 1, 0.5, 0; at 3: 1, 1, 0.5.
    assert list(xs) == [1.0, 2.0, 3.0, 4.0] and list(ys) == [0.0, 0.5, 1.0, 1.0]
    assert themis_line.get_color() == POLICY_STYLES["themis"].colour
    assert themis_line.get_marker() == POLICY_STYLES["themis"].marker
    # Eleven policies' bands would overlap into one mass: lines only.
    many = {name: seeds for name in policy_names()}
    (ax,) = cdf_figure(many, "t", "x").axes
    assert len(ax.get_lines()) == len(many) and not ax.collections
