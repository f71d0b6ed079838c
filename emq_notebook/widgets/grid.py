"""Grids: a pandas frame as an ipydatagrid DataGrid an operator reads at a glance,
and the job ids a click or a row selection names.

Whole numbers are right-aligned with thousands separators, times are shown as
`YYYY-MM-DD HH:MM:SS` (UTC), long text is cut to one line (the Job tab shows the
whole row), and a column can be coloured by a Vega expression over its value.
The grid sorts in the browser (each column header's menu); it holds one page.
"""

from __future__ import annotations

from typing import Any

import ipydatagrid as dg
import pandas as pd

from ..decoding import printable

ROW_PX = 24
HEADER_PX = 28
# text longer than this is cut in a grid cell (the full text is one click away)
CELL_CHARS = 160


def shown(frame: pd.DataFrame) -> pd.DataFrame:
    """The frame as the grid shows it: times as text, long text cut, bytes as `\\xNN`."""
    out = frame.copy()
    for col in out.columns:
        s = out[col]
        if isinstance(s.dtype, pd.DatetimeTZDtype) or pd.api.types.is_datetime64_any_dtype(s):
            out[col] = s.dt.strftime("%Y-%m-%d %H:%M:%S").fillna("")
        elif pd.api.types.is_bool_dtype(s):
            out[col] = s.map({True: "yes", False: ""})
        elif not pd.api.types.is_numeric_dtype(s):
            out[col] = s.map(_cell)
    out.index = [printable(str(i)) for i in out.index]
    out.index.name = frame.index.name or "id"
    return out


def _cell(value: Any) -> str:
    if value is None or (isinstance(value, float) and pd.isna(value)):
        return ""
    text = printable(str(value)).replace("\n", " ")
    return text if len(text) <= CELL_CHARS else text[: CELL_CHARS - 1] + "…"


def renderers(frame: pd.DataFrame, colours: dict[str, str] | None = None) -> dict[str, Any]:
    """Right-aligned `1,234` for whole-number columns, a background expression per coloured
    column, and the index left-aligned."""
    colours = colours or {}
    # the index (the row header) is named like a column: left-aligned, on the headers' grey
    out: dict[str, Any] = {
        str(frame.index.name or "id"): dg.TextRenderer(
            horizontal_alignment="left", background_color="#f6f8fa"
        )
    }
    for col in frame.columns:
        kw: dict[str, Any] = {}
        if pd.api.types.is_integer_dtype(frame[col]):
            kw.update(format=",d", horizontal_alignment="right")
        if col in colours:
            kw["background_color"] = dg.VegaExpr(colours[col])
        if kw:
            out[col] = dg.TextRenderer(**kw)
    return out


COLUMN_PX = 96
# space for a scroll bar and the borders, so the last row and column are never cut
EDGE_PX = 30


def height(rows: int, most: int = 12) -> str:
    """A grid tall enough for `rows` rows (at most `most`, then it scrolls)."""
    return f"{HEADER_PX + ROW_PX * max(1, min(rows, most)) + EDGE_PX}px"


def width(frame: pd.DataFrame, widths: dict[str, int], index_px: int) -> str:
    """As wide as its columns (no empty band to the right), at most the page."""
    return f"{index_px + sum(widths.get(c, COLUMN_PX) for c in frame.columns) + EDGE_PX}px"


def grid(
    frame: pd.DataFrame,
    *,
    colours: dict[str, str] | None = None,
    widths: dict[str, int] | None = None,
    most_rows: int = 12,
    index_px: int = 220,
) -> dg.DataGrid:
    """A row-selecting DataGrid of `shown(frame)`."""
    view = shown(frame)
    widths = dict(widths or {})
    g = dg.DataGrid(
        view,
        selection_mode="row",
        renderers=renderers(view, colours),
        base_row_size=ROW_PX,
        base_column_header_size=HEADER_PX,
        base_row_header_size=index_px,
        base_column_size=COLUMN_PX,
        column_widths=widths,
        header_visibility="all",
        header_renderer=dg.TextRenderer(
            horizontal_alignment="left", font="bold 12px sans-serif", background_color="#f6f8fa"
        ),
        layout={
            "height": height(len(view), most_rows),
            "width": width(view, widths, index_px),
            "max_width": "100%",
        },
    )
    return g


def refill(
    g: dg.DataGrid, frame: pd.DataFrame, colours: dict[str, str] | None = None, most_rows: int = 12
) -> None:
    """Show `frame` in `g` (renderers rebuilt for its columns, selection cleared)."""
    view = shown(frame)
    g.selections = []
    g.data = view
    g.renderers = renderers(view, colours)
    g.layout.height = height(len(view), most_rows)


def selected_rows(g: dg.DataGrid) -> list[int]:
    """The visible row numbers of the selection, top to bottom, each once."""
    rows: set[int] = set()
    for rect in g.selections:
        rows.update(range(min(rect["r1"], rect["r2"]), max(rect["r1"], rect["r2"]) + 1))
    return sorted(rows)


def selected_ids(g: dg.DataGrid, frame: pd.DataFrame) -> list[str]:
    """The ids of `frame` (the page the grid shows) on the selected rows, in the order the
    browser shows them (after its sort); a row past the page's end is ignored."""
    order = list(g._visible_rows) or list(range(len(frame)))
    return [str(frame.index[order[r]]) for r in selected_rows(g) if r < len(order) and order[r] < len(frame)]


def clicked_id(event: dict, frame: pd.DataFrame) -> str | None:
    """The id of the row a body or row-header click landed on (None for a header click)."""
    if event.get("region") not in ("body", "row-header"):
        return None
    row = event.get("primary_key_row")
    if not isinstance(row, int) or not 0 <= row < len(frame):
        return None
    return str(frame.index[row])
