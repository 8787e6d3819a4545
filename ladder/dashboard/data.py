"""Read a ladder root into the tables the dashboard shows (and serves as CSV): the names other
modules import, kept in one place. It sits in the dashboard's layer because Root is the dashboard's
(its views and tables); the outputs layer below it (ladder.outputs) imports nothing of the dashboard.

The pieces, one concern each: ladder.outputs.files (cached tolerant file readers), ladder.outputs.root
(a root's ladders and step directories), ladder.outputs.readers (the one definition of each number the
report and the dashboard share), ladder.dashboard.views (the dashboard's views), .tables (CSV downloads).
"""

from __future__ import annotations

from ladder.dashboard.tables import Root
from ladder.dashboard.views import MAX_POINTS
from ladder.outputs.files import FileCache, JsonlTable, safe_name, to_csv
from ladder.outputs.readers import hero_prediction

__all__ = ["MAX_POINTS", "FileCache", "JsonlTable", "Root", "hero_prediction", "safe_name", "to_csv"]
