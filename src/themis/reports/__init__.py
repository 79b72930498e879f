"""What a run produced, in numbers (``metrics``), files (``files``) and tables (``tables``).

Every metric is defined in ``docs/metrics.md``.
"""

from themis.reports.files import write_run
from themis.reports.metrics import AppRow, RunSummary, app_rows, jain_index, summarize
from themis.reports.tables import summary_table

__all__ = [
    "AppRow",
    "RunSummary",
    "app_rows",
    "jain_index",
    "summarize",
    "summary_table",
    "write_run",
]
