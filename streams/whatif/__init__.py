"""What-if tuning: what a candidate loop-detection config would change, decided by the real core.

Pure analysis over decoded events (no I/O): :func:`compare` runs the current and the candidate config side by
side, :func:`run_sweep` varies one key; :mod:`streams.whatif.render` turns a :class:`Report` into a terminal
table or a self-contained HTML page, :func:`to_json` into JSON. The CLI is ``loopwatch whatif``.
"""

from streams.whatif.analysis import (
    DECISIONS,
    TIMELINE_BUCKETS,
    Comparison,
    Evaluation,
    Flag,
    IndexChange,
    IndexedEvent,
    Mark,
    NotApplied,
    RunChange,
    RunInfo,
    SummaryRow,
    Tally,
    Timeline,
    compare,
    evaluate,
)
from streams.whatif.render import TABLE_LIMIT, render_html, render_table
from streams.whatif.report import Report, build_report, to_json
from streams.whatif.sweep import (
    SWEEP_KEYS,
    SweepError,
    SweepResult,
    SweepSpec,
    parse_sweep,
    run_sweep,
    with_value,
)

__all__ = [
    "DECISIONS",
    "SWEEP_KEYS",
    "TABLE_LIMIT",
    "TIMELINE_BUCKETS",
    "Comparison",
    "Evaluation",
    "Flag",
    "IndexChange",
    "IndexedEvent",
    "Mark",
    "NotApplied",
    "Report",
    "RunChange",
    "RunInfo",
    "SummaryRow",
    "SweepError",
    "SweepResult",
    "SweepSpec",
    "Tally",
    "Timeline",
    "build_report",
    "compare",
    "evaluate",
    "parse_sweep",
    "render_html",
    "render_table",
    "run_sweep",
    "to_json",
    "with_value",
]
