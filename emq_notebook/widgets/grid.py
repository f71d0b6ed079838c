"""Grids: a pandas frame as an ipydatagrid DataGrid an operator reads at a glance,
and the job ids a click or a row selection names.

Whole numbers are right-aligned with thousands separators, times are shown in the
viewer's zone with the zone named, long text is cut to one line (the Job tab shows
the whole row), ids are shown whole (the row header is as wide as the longest), and
a column can be coloured by a Vega expression over its value. The grid sorts in the
browser (each column header's menu); it holds one page.

A grid is built once and then patched (`patch`): a patch that changes no shown value
sends nothing; else the rows whose shown values changed are sent together in ONE
message (`RowWriter`), whose browser side writes the values that differ into the
grid's dataset and has the grid repaint those cells alone (and the rows the sort
moved), so it keeps its scroll position, its sort and its selection, and no widget
is made (the renderers are the grid's from the start). ipydatagrid's own row and
cell messages reset its model, which repaints every cell on screen for each one,
and its data replacement scrolls back to the top. A change of the rows themselves
(another page, a queue found or gone, a filter) replaces the data in one message,
and the view starts again at the top.
"""

from __future__ import annotations

from typing import Any

import ipydatagrid as dg
import pandas as pd

from ..decoding import printable, shown_id
from .values import local_times

try:
    import anywidget
except ImportError:  # pragma: no cover - a kernel without anywidget
    anywidget = None  # type: ignore[assignment]

ROW_PX = 24
# without the row writer (no anywidget): more changed rows than this in one patch are
# sent as one replacement of the data, fewer as one ipydatagrid row message each
PATCH_MOST = 10
HEADER_PX = 28
# text longer than this is cut in a grid cell (the full text is one click away)
CELL_CHARS = 160


def shown(frame: pd.DataFrame) -> pd.DataFrame:
    """The frame as the grid shows it: times as text, long text cut, bytes as `\\xNN`."""
    out = frame.copy()
    for col in out.columns:
        s = out[col]
        if isinstance(s.dtype, pd.DatetimeTZDtype) or pd.api.types.is_datetime64_any_dtype(s):
            out[col] = local_times(s).astype(object)
        elif pd.api.types.is_bool_dtype(s):
            out[col] = s.map({True: "yes", False: ""})
        elif not pd.api.types.is_numeric_dtype(s):
            out[col] = s.map(_cell)
    out.index = [printable(str(shown_id(i))) for i in out.index]
    out.index.name = frame.index.name or "id"
    return out


def _cell(value: Any) -> str:
    if value is None or (isinstance(value, float) and pd.isna(value)):
        return ""
    text = printable(str(value)).replace("\n", " ")
    return text if len(text) <= CELL_CHARS else text[: CELL_CHARS - 1] + "…"


def renderers(
    frame: pd.DataFrame,
    colours: dict[str, str] | None = None,
    texts: dict[str, str] | None = None,
    wrap: tuple[str, ...] = (),
) -> dict[str, Any]:
    """Right-aligned `1,234` for whole-number columns, a background expression per coloured
    column, a text expression per column shown through one, the `wrap` columns' text
    wrapped onto the row's lines, and the index left-aligned."""
    colours, texts = colours or {}, texts or {}
    # the index (the row header) is named like a column: left-aligned, on the headers' grey
    out: dict[str, Any] = {
        str(frame.index.name or "id"): dg.TextRenderer(
            horizontal_alignment="left", background_color="#f6f8fa"
        )
    }
    for col in frame.columns:
        kw: dict[str, Any] = {}
        if pd.api.types.is_integer_dtype(frame[col]) and col not in texts:
            kw.update(format=",d", horizontal_alignment="right")
        if col in colours:
            kw["background_color"] = dg.VegaExpr(colours[col])
        if col in texts:
            kw["text_value"] = dg.VegaExpr(texts[col])
        if col in wrap:
            kw.update(text_wrap=True, vertical_alignment="top")
        if kw:
            out[col] = dg.TextRenderer(**kw)
    return out


COLUMN_PX = 96
# space for a scroll bar and the borders, so the last row and column are never cut
EDGE_PX = 30


def height(rows: int, most: int = 12, row_px: int = ROW_PX) -> str:
    """A grid tall enough for `rows` rows (at most `most`, then it scrolls)."""
    return f"{HEADER_PX + row_px * max(1, min(rows, most)) + EDGE_PX}px"


def _height(g: dg.DataGrid, rows: int) -> str:
    return height(rows, getattr(g, "most_rows", 12), getattr(g, "row_px", ROW_PX))


def width(frame: pd.DataFrame, widths: dict[str, int], index_px: int) -> str:
    """As wide as its columns (no empty band to the right), at most the page."""
    return f"{index_px + sum(widths.get(c, COLUMN_PX) for c in frame.columns) + EDGE_PX}px"


# a character of the row header's 12px font, at most (ids are ASCII: digits and capitals)
CHAR_PX = 8
INDEX_MAX_PX = 420
# the row header's size when it is not shown (the grid needs one)
INDEX_HIDDEN_PX = 64


def index_width(frame: pd.DataFrame, least: int) -> int:
    """The row header's width: the longest id whole, at least `least` px."""
    longest = max((len(str(i)) for i in frame.index), default=0)
    return min(INDEX_MAX_PX, max(least, CHAR_PX * longest + 16))


def grid(
    frame: pd.DataFrame,
    *,
    colours: dict[str, str] | None = None,
    widths: dict[str, int] | None = None,
    most_rows: int = 12,
    index_px: int = 220,
    texts: dict[str, str] | None = None,
    sort: str | None = None,
    row_px: int = ROW_PX,
    wrap: tuple[str, ...] = (),
    row_header: bool = True,
) -> dg.DataGrid:
    """A row-selecting DataGrid of `shown(frame)`, its renderers made once for its columns
    (`texts`: a column shown through a Vega expression of its value; `wrap`: columns
    whose text wraps onto rows `row_px` high); `sort` names the column the browser sorts
    by at first (ascending). Without `row_header` the ids are not shown (a column of
    the frame names the row) and take no width."""
    view = shown(frame)
    widths = dict(widths or {})
    least = index_width(view, index_px) if row_header else 0
    # made with the first grid, so its browser side listens before the first patch
    writer()
    g = dg.DataGrid(
        view,
        selection_mode="row",
        renderers=renderers(view, colours, texts, wrap),
        base_row_size=row_px,
        base_column_header_size=HEADER_PX,
        base_row_header_size=least or INDEX_HIDDEN_PX,
        base_column_size=COLUMN_PX,
        column_widths=widths,
        header_visibility="all" if row_header else "column",
        header_renderer=dg.TextRenderer(
            horizontal_alignment="left", font="bold 12px sans-serif", background_color="#f6f8fa"
        ),
        layout={
            "height": height(len(view), most_rows, row_px),
            "width": width(view, widths, least),
            "max_width": "100%",
        },
    )
    g.least_index_px = index_px if row_header else None
    g.most_rows = most_rows
    g.row_px = row_px
    g.column_px = widths
    if sort is not None:
        g.transform([{"type": "sort", "column": sort, "desc": False}])
    g.emq_shown = (g._data, _shape(view), _rows(view))
    return g


def _json(value: Any) -> Any:
    """A cell as the browser's dataset holds it (numbers as numbers, NaN as null)."""
    if isinstance(value, float) and value != value:
        return None
    return value.item() if hasattr(value, "item") else value


def _rows(view: pd.DataFrame) -> list[list[Any]]:
    return [[_json(v) for v in row] for row in view.to_numpy(dtype=object).tolist()]


def _shape(view: pd.DataFrame) -> tuple[list, list, list[str]]:
    return list(view.index), list(view.columns), [str(t) for t in view.dtypes]


def patch(g: dg.DataGrid, frame: pd.DataFrame) -> bool:
    """Show `frame` in `g`. The same rows (ids, in the same order) and columns: only the
    rows whose shown values changed are sent, together in one message of the kernel's
    `RowWriter`, and the browser keeps its scroll, sort and selection (True). Other rows:
    the data is replaced, the selection cleared and the view starts at the top (False).
    No widget is made either way."""
    view = shown(frame)
    rows, shape = _rows(view), _shape(view)
    # what the grid was last given here; data set on the grid another way is replaced
    last = getattr(g, "emq_shown", None)
    if last is None or last[0] is not g._data or last[1] != shape:
        g.selections = []
        g.data = view
        # the browser says the new rows' order once it has drawn them (never the old order)
        g._visible_rows = []
        least_px = getattr(g, "least_index_px", 0)
        least = 0 if least_px is None else index_width(view, least_px)
        if least_px is not None:
            g.base_row_header_size = least
        g.layout.height = _height(g, len(view))
        g.layout.width = width(view, getattr(g, "column_px", {}), least)
        g.emq_shown = (g._data, shape, rows)
        return False
    changed = [
        row
        for row, (was, now) in enumerate(zip(last[2], rows, strict=True))
        if was != now and not all(a == b or (a != a and b != b) for a, b in zip(was, now, strict=True))
    ]
    data, cols = g._data["data"], shape[1]
    for row in changed:
        for col, value in zip(cols, rows[row], strict=True):
            data.at[row, col] = value
    g.emq_shown = (g._data, shape, rows)
    if not changed:
        return True
    if writer() is not None:
        writer().write(g, [(row, shape[0][row], rows[row]) for row in changed], cols)
        return True
    if len(changed) > PATCH_MOST:
        # each row message redraws the whole grid: many at once freeze the page, one
        # replacement does not (its view starts again at the top)
        g.selections = []
        g.data = view
        g._visible_rows = []
        g.emq_shown = (g._data, shape, rows)
        return False
    for row in changed:
        g._notify_row_change(row, rows[row])
    return True


_WRITER_ESM = """
// The changed rows of an ipydatagrid DataGrid written in one message, and only what
// changed on screen repainted: each value that differs is written into the grid's
// dataset; the view (the grid's sort and filters) is made again without the model's
// reset (which repaints every cell on screen); then each changed cell on screen, and
// each row on screen whose queue the sort moved, is told changed, a few cells a
// frame: the grid conflates the repaints of a frame into one rectangle, so cells told
// together far apart would repaint all between, and a whole screen at once is a long
// task that holds a click. A view of another length (a filter let a row in or out)
// resets the model as ipydatagrid does.
const CELLS_A_FRAME = 1;
const work = new WeakMap();

async function shown(grid) {
  // the body rows on screen in any view of the grid, [first, last]; null when none shows
  let first = Infinity, last = -1;
  for (const promised of Object.values(grid.views || {})) {
    const view = await Promise.resolve(promised).catch(() => null);  // a view that failed shows nothing
    const lumino = view && view.grid && view.grid.grid;
    if (!lumino) continue;
    const h = lumino.defaultSizes.rowHeight;  // the grid's rows are one height
    first = Math.min(first, Math.floor(lumino.scrollY / h));
    last = Math.max(last, Math.ceil((lumino.scrollY + lumino.pageHeight) / h));
  }
  return last < 0 ? null : [first, last];
}

function repaint(dm, cells) {
  let w = work.get(dm);
  if (!w) work.set(dm, (w = { queue: new Map(), running: false }));
  for (const cell of cells) w.queue.set(cell.join(":"), cell);
  if (w.running) return;
  w.running = true;
  const step = () => {
    const next = w.queue.entries().next();
    if (next.done) {
      w.running = false;
      return;
    }
    w.queue.delete(next.value[0]);
    const [region, row, column, columnSpan] = next.value[1];
    dm.emitChanged({ type: "cells-changed", region, row, column, rowSpan: 1, columnSpan });
    requestAnimationFrame(step);
  };
  step();
}

function runs(columns) {
  // [first, span] of each run of neighbouring columns, at most CELLS_A_FRAME long
  const out = [];
  for (let i = 0; i < columns.length; ) {
    let j = i;
    while (j + 1 < columns.length && columns[j + 1] === columns[j] + 1 && j + 1 - i < CELLS_A_FRAME) j++;
    out.push([columns[i], columns[j] - columns[i] + 1]);
    i = j + 1;
  }
  return out;
}

async function write(model, msg) {
  const grid = await model.widget_manager.get_model(msg.grid);
  const dm = grid && grid.data_model;
  if (!dm || !dm.dataset || !msg.rows.length) return;
  // read before anything is written: from here on nothing waits, so no other message
  // of the writer runs in between
  const on = await shown(grid);
  const data = dm.dataset.data;
  const key = msg.key;
  const changed = new Map();
  for (const [row, id, values] of msg.rows) {
    // a row the dataset no longer holds (the data was replaced since) is skipped
    if (!data[key] || data[key][row] !== id) continue;
    const names = [];
    msg.columns.forEach((name, i) => {
      if (data[name] && data[name][row] !== values[i]) {
        data[name][row] = values[i];
        names.push(name);
      }
    });
    if (names.length) changed.set(id, names);
  }
  if (!changed.size) return;
  const said = (globalThis.emqRowWriter ??= { messages: 0, cells: 0, resets: 0 });
  said.messages += 1;
  const before = dm._currentView;
  const after = dm._transformState.createView(dm.dataset);
  const rows = after.rowCount("body");
  if (!before || before.rowCount("body") !== rows) {
    said.resets += 1;
    dm.currentView = after;
    return;
  }
  const column = new Map(after._bodyFields.map((f, i) => [f.name, i]));
  const was = before.dataset.data[key], now = after.dataset.data[key];
  // without a sort or a filter both views are the dataset itself: no row moved, and
  // the cells that changed are the ones written; else the views are apart, and a cell
  // on screen is repainted when the value shown there is another
  const apart = before.dataset !== after.dataset;
  const moved = apart && now.some((id, r) => was[r] !== id);
  const cells = [];
  for (let r = on ? on[0] : 0; on && r <= Math.min(on[1], rows - 1); r++) {
    let at;
    if (apart) {
      const differ = (region, n) =>
        [...Array(n).keys()].filter((c) => before.data(region, r, c) !== after.data(region, r, c));
      for (const [c, span] of runs(differ("row-header", after.columnCount("row-header")))) {
        cells.push(["row-header", r, c, span]);
      }
      at = differ("body", after.columnCount("body"));
    } else {
      at = (changed.get(now[r]) || []).map((n) => column.get(n)).filter((c) => c !== undefined);
      at.sort((a, b) => a - b);
    }
    for (const [c, span] of runs(at)) cells.push(["body", r, c, span]);
  }
  dm._currentView = after;
  if (moved) {
    // the rows' order as the kernel reads it (what ipydatagrid's reset says too)
    const primary = dm.dataset.schema.primaryKey;
    const keys = Array.isArray(primary) ? primary : [primary];
    const indices = [];
    for (let r = 0; r < rows; r++) {
      const at = dm._primaryKeyMap.get(JSON.stringify(keys.map((k) => after.dataset.data[k][r])));
      indices.push(at === undefined ? r : at);
    }
    dm.dataSync.emit({ type: "row-indices-updated", indices });
  }
  said.cells += cells.length;
  repaint(dm, cells);
}

function initialize({ model }) {
  model.on("msg:custom", (msg) => { write(model, msg).catch((e) => console.error("emq row writer", e)); });
}

export default { initialize };
"""


if anywidget is not None:

    class RowWriter(anywidget.AnyWidget):
        """Writes the changed rows of any grid of this kernel in one message a patch
        (one per kernel: no widget is made a refresh), the grid repainting the changed
        cells on screen only. Never displayed: its browser side listens from the moment
        the page knows it, and counts what it did in `globalThis.emqRowWriter`
        (`messages`, runs of `cells` repainted, `resets` of a model)."""

        _esm = _WRITER_ESM

        def write(self, g: dg.DataGrid, rows: list[tuple[int, Any, list[Any]]], columns: list[str]) -> None:
            """Send `rows` ((dataset row, its id, its shown values)) of grid `g` at once."""
            key = g._data["schema"]["primaryKey"][0]
            self.send({"grid": g.model_id, "key": key, "columns": [str(c) for c in columns], "rows": rows})


_writer: Any = None


def writer() -> Any:
    """The kernel's RowWriter (made at first use, again once closed); None without anywidget."""
    global _writer
    if anywidget is None:
        return None
    if _writer is None or _writer.comm is None:
        _writer = RowWriter()
    return _writer


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


def visible_order(g: dg.DataGrid, frame: pd.DataFrame) -> list[int]:
    """The rows of `frame` (the page the grid holds) in the order the browser shows them:
    as the browser last said (`_visible_rows`, after its sort and its filters), else as
    the grid's sort orders them (no browser, or one that has not drawn these rows yet)."""
    if g._visible_rows:
        return [r for r in g._visible_rows if 0 <= r < len(frame)]
    order = list(range(len(frame)))
    for step in g._transforms:
        column = step.get("column")
        if step.get("type") != "sort" or column is None:
            continue
        values = list(frame.index) if column == frame.index.name else list(frame.get(column, []))
        if len(values) == len(frame):
            order.sort(key=lambda r: _sort_key(values[r]), reverse=bool(step.get("desc")))
    return order


def _sort_key(value: Any) -> tuple[int, Any]:
    # numbers before text, as one list can hold both (a column of another node's values)
    return (0, value) if isinstance(value, (int, float)) else (1, str(value))


def select_id(g: dg.DataGrid, frame: pd.DataFrame, key: str | None) -> None:
    """Highlight the row of `frame` whose id is `key` wherever the browser shows it, and
    no other; no highlight when the grid does not show it (filtered out, gone, None).
    Sends nothing when the highlight is already there."""
    rows: list[dict[str, int]] = []
    if key is not None and key in frame.index:
        at = frame.index.get_loc(key)
        order = visible_order(g, frame)
        if isinstance(at, int) and at in order:
            r = order.index(at)
            rows = [{"r1": r, "c1": 0, "r2": r, "c2": max(0, len(frame.columns) - 1)}]
    if g.selections != rows:
        g.selections = rows


def clicked_id(event: dict, frame: pd.DataFrame) -> str | None:
    """The id of the row a body or row-header click landed on (None for a header click)."""
    if event.get("region") not in ("body", "row-header"):
        return None
    row = event.get("primary_key_row")
    if not isinstance(row, int) or not 0 <= row < len(frame):
        return None
    return str(frame.index[row])
