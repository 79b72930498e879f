"""Reports: usage curves from intervals, figures as PNG, one self-contained HTML file."""

from __future__ import annotations

import base64
import re
import struct
from pathlib import Path

from themis.reports.comparison import comparison_section
from themis.reports.html import Figure, Section, Table, render, write_report
from themis.reports.markdown import markdown_table
from themis.reports.plots import DPI, SIZE, cdf_plot
from themis.reports.record import gpus_in_use, record_run, thin
from themis.simulator.engine import SimulationResult


def png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", data[16:24])
    return width, height


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


def test_plots_are_pngs_of_the_declared_size() -> None:
    png = cdf_plot({"p": [1.0, 2.0, 0.5]}, "t", "x", log_x=True, marker_x=1.0)
    assert png_size(png) == (round(SIZE[0] * DPI), round(SIZE[1] * DPI))


def test_comparison_report_embeds_four_figures(result: SimulationResult, tmp_path: Path) -> None:
    records = [record_run(result, "one"), record_run(result, "two")]
    path = write_report(tmp_path / "r", "T <&>", ["meta"], [comparison_section(records, "C")])
    text = path.read_text()
    assert path.name == "report.html"
    assert "<title>T &lt;&amp;&gt;</title>" in text  # escaped
    images = re.findall(r'src="data:image/png;base64,([A-Za-z0-9+/=]+)"', text)
    assert len(images) == 4
    for image in images:
        png_size(base64.b64decode(image))
    assert "max rho" in text and "<th>one</th>" in text and "<th>two</th>" in text
    assert 'src="http' not in text  # nothing outside the file


def test_render_escapes_cells_and_splits_paragraphs() -> None:
    section = Section("S", "a\n\nb<", [Table(["h"], [["<x>"]])], [Figure(b"png", "c")])
    text = render("t", [], [section])
    assert "<td>&lt;x&gt;</td>" in text
    assert "<p>a</p><p>b&lt;</p>" in text.replace("\n", "")


def test_markdown_table() -> None:
    table = Table(["metric", "a|b"], [["x", "1"]], "cap")
    assert markdown_table(table) == "*cap*\n\n| metric | a\\|b |\n| --- | ---: |\n| x | 1 |"
