"""Options of the rewrite report."""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True, slots=True)
class ReportOptions:
    """How much the rewrite report shows.

    Attributes:
        open_applications: applications per rule shown expanded; the rest are collapsed.
        pictures_per_rule: applications per rule drawn as pictures; the rest as text.
        max_pictures: applications drawn as pictures over the whole report.
        chart_ops: op types in the before/after chart (all of them are in the table).
    """

    open_applications: int = 3
    pictures_per_rule: int = 10
    max_pictures: int = 300
    chart_ops: int = 16
