"""JobPanel: one job's row, its payload editor, progress, logs, Remove, and
Reprocess (enabled only when the job is dead); JobDetail: one job read whole beside a
listing (its error, payload and logs never cut), writing nothing.

Every string from the server is shown through `printable`, so a row written by
another client with bytes that are not UTF-8 shows them as `\\xNN`; the editor
then holds that shown text, and "Update data" writes only a payload the
operator actually changed (the stored bytes are never replaced by their picture).
"""

from __future__ import annotations

import html
import json

import ipywidgets as w

from .. import jobs
from ..connector import Connection
from ..decoding import printable, visible, whole_text
from ..errors import BadInput, EMQError, Gone
from .base import Panel, table
from .values import when

# a whole text's box: as tall as this at most, then it scrolls (its width wraps)
WHOLE_TEXT_STYLE = (
    "max-height:22em;overflow:auto;white-space:pre-wrap;overflow-wrap:anywhere;margin:2px 0 8px;"
    "font-family:monospace;font-size:12px;line-height:1.4;background:#f6f8fa;border:1px solid #d0d7de;"
    "padding:6px"
)


def _readable(field: str, value: str) -> str:
    """A row's field as an operator reads it: a time (`..._at`, epoch ms) in the viewer's
    zone with the ms it holds, a whole number with separators, the rest (text another
    node wrote: "²²", 5,000 digits, a time past year 9999) as it is."""
    number = whole_text(value)
    if number is None:
        return value
    if field.endswith("_at"):
        shown = when(number)
        return f"{shown} ({value})" if shown else value
    return f"{number:,}" if len(value) > 3 else value


def _checked_json(text: str) -> str:
    try:
        json.loads(text)
    except ValueError as exc:
        raise BadInput(f"malformed JSON: {exc}") from None
    return text


class JobPanel(Panel):
    def __init__(self, conn: Connection, q: str, job_id: str):
        super().__init__()
        self.conn, self.q, self.job_id, self.title = conn, q, job_id, f"{q} {job_id}"
        self.row_view = w.HTML()
        self.payload = w.Textarea(rows=4, layout=w.Layout(width="100%"))
        self.update_button = w.Button(description="Update data")
        self.update_button.on_click(lambda _: self.update_data())
        self.progress_value = w.Text(placeholder="progress, e.g. 50")
        self.progress_button = w.Button(description="Write progress")
        self.progress_button.on_click(lambda _: self.write_progress())
        self.logs_view = w.HTML()
        self.log_line = w.Text(placeholder="a log line")
        self.log_button = w.Button(description="Add log")
        self.log_button.on_click(lambda _: self.add_log())
        self.remove_button = w.Button(description="Remove", button_style="danger")
        self.remove_button.on_click(lambda _: self.remove())
        self.reprocess_button = w.Button(description="Reprocess", button_style="primary")
        self.reprocess_button.on_click(lambda _: self.reprocess())
        self.writes(
            self.update_button,
            self.progress_button,
            self.log_button,
            self.remove_button,
            self.reprocess_button,
        )
        self.shown_payload: str | None = None
        self.row: dict[str, str] | None = None
        self.children = [
            w.HTML(f"<b>job {html.escape(printable(job_id))}</b> in <b>{html.escape(printable(q))}</b>"),
            self.row_view,
            self.payload,
            self.update_button,
            w.HBox([self.progress_value, self.progress_button]),
            self.logs_view,
            w.HBox([self.log_line, self.log_button]),
            w.HBox([self.reprocess_button, self.remove_button]),
            self.status,
        ]
        self.refresh()

    def refresh(self) -> None:
        try:
            row = jobs.get_job(self.conn, self.q, self.job_id)
            logs = jobs.get_job_logs(self.conn, self.q, self.job_id)
        except Gone as gone:
            self.row = None
            self.shown_payload = None
            self.row_view.value = "<i>no such job (gone)</i>"
            self.logs_view.value = ""
            for b in self._writing:
                self.off(b, f"job {printable(self.job_id)} is gone")
            self.say(gone.line(), "refused")
            return
        except EMQError as exc:
            self.say(f"error: {exc}", "error")
            return
        self.row = row
        self.row_view.value = table(
            {k: _readable(k, v) for k, v in sorted(row.items()) if k != "payload"}, ("field", "value")
        )
        self.shown_payload = self.payload.value = printable(row.get("payload", ""))
        self.logs_view.value = (
            ("<pre>" + "\n".join(html.escape(printable(line)) for line in logs) + "</pre>")
            if logs
            else "<i>no logs</i>"
        )
        for b in self._writing:
            self.off(b, None)
        state = printable(str(row.get("state")))
        if state != "dead":
            self.off(self.reprocess_button, f"only a dead job is reprocessed (this one is {state})")

    def facts(self) -> list[tuple[str, object]]:
        if self.row is None:
            return [("queue", self.q), ("job", self.job_id), ("row", "gone")]
        return [("queue", self.q), ("job", self.job_id), ("payload", self.shown_payload)]

    def update_data(self) -> None:
        """Write the edited payload; an unedited one is not written (what the editor shows
        of undecodable bytes is their `\\xNN` picture, not the bytes)."""
        if not self.writable("update_data"):
            return
        if self.row is not None and self.payload.value == self.shown_payload != self.row.get("payload"):
            self.say("payload unchanged: nothing written (its bytes that are not UTF-8 stay as they are)")
            return
        self.attempt(
            lambda: jobs.update_data(self.conn, self.q, self.job_id, _checked_json(self.payload.value)),
            done="payload replaced",
        )
        self.refresh()

    def write_progress(self) -> None:
        if not self.writable("update_progress"):
            return
        self.attempt(
            jobs.update_progress,
            self.conn,
            self.q,
            self.job_id,
            self.progress_value.value,
            done=f"progress {self.progress_value.value} written and published",
        )
        self.refresh()

    def add_log(self) -> None:
        if not self.writable("add_log"):
            return
        self.attempt(
            jobs.add_log, self.conn, self.q, self.job_id, self.log_line.value, done=lambda n: f"{n} log lines"
        )
        self.log_line.value = ""
        self.refresh()

    def remove(self) -> None:
        if not self.writable("remove"):
            return
        result = self.attempt(jobs.remove_job, self.conn, self.q, self.job_id, done=f"removed {self.job_id}")
        said = self.status_text
        self.refresh()
        if not isinstance(result, EMQError):
            # the refresh finds the job gone: the line says the removal, not a refusal
            self.say(said)

    def reprocess(self) -> None:
        if not self.writable("reprocess"):
            return
        self.attempt(
            jobs.reprocess_job,
            self.conn,
            self.q,
            self.job_id,
            done=f"reprocessed {self.job_id}: dead -> pending",
        )
        self.refresh()


def text_box(title: str, text: str, note: str = "") -> str:
    """`text` in a monospace box under `title`, whole: every character, bytes that are not
    UTF-8 and control characters as `\\xNN`, markup escaped; a long one scrolls in its box."""
    shown = visible(text)
    size = f"{len(shown):,} characters" + (f" · {note}" if note else "")
    return (
        f'<div><b>{html.escape(title)}</b> <small style="color:#57606a">{html.escape(size)}</small></div>'
        f'<pre class="emq-whole" style="{WHOLE_TEXT_STYLE}">{html.escape(shown)}</pre>'
    )


def _payload_text(payload: str) -> str:
    """A payload as JSON indented when it reads as JSON, else as it is."""
    try:
        return json.dumps(json.loads(payload), indent=2, ensure_ascii=False)
    except (ValueError, RecursionError):
        return payload


class JobDetail(w.VBox):
    """One job as `jobs.get_job` and `jobs.get_job_logs` read it, shown whole beside a
    listing: its fields (times in the viewer's zone, whole), its last error, payload and
    logs each in a scrolling monospace box, never cut (a field over
    `defaults.MAX_WHOLE_FIELD` bytes is the one thing not read, and says so). Writes
    nothing. A job gone since its listing was read (removed, moved, its row expired) is
    said gone, not shown stale."""

    def __init__(self) -> None:
        self.head = w.HTML()
        self.body = w.HTML()
        super().__init__([self.head, self.body], layout=w.Layout(width="100%"))
        self.job_id: str | None = None
        self.row: dict[str, str] | None = None
        self.clear()

    def clear(self) -> None:
        self.job_id, self.row = None, None
        self.head.value = (
            '<small style="color:#57606a">click a row for its whole error, payload and logs</small>'
        )
        self.body.value = ""

    def show(self, conn: Connection, q: str, job_id: str) -> dict[str, str] | None:
        """Read job `job_id` of `q` and show it whole; answers its row, None when it is gone
        or the read failed (the pane says which)."""
        self.job_id, self.row = job_id, None
        self.head.value = f"<b>job {html.escape(visible(job_id))}</b> in <b>{html.escape(visible(q))}</b>"
        try:
            row = jobs.get_job(conn, q, job_id)
            logs = jobs.get_job_logs(conn, q, job_id)
        except Gone:
            self.body.value = (
                '<div style="color:#9a6700">gone: no such job now (removed, moved or reprocessed '
                "and finished since this page was read)</div>"
            )
            return None
        except EMQError as exc:
            self.body.value = f'<div style="color:#cf222e">error: {html.escape(visible(str(exc)))}</div>'
            return None
        self.row = row
        fields = {k: _readable(k, v) for k, v in sorted(row.items()) if k not in ("payload", "last_error")}
        lines = "\n".join(printable(line) for line in logs)
        total = getattr(logs, "total", len(logs))
        said = f"the last {len(logs):,} of {total:,} lines" if total > len(logs) else f"{len(logs):,} lines"
        self.body.value = (
            table(fields, ("field", "value"))
            + text_box("last error", row.get("last_error", ""))
            + text_box("payload", _payload_text(row.get("payload", "")))
            + (text_box("logs", lines, said) if logs else "<div><b>logs</b> <small>none</small></div>")
        )
        return row
