"""Presence: whether someone looks at a dashboard, as its page knows it.

A small anywidget placed in the dashboard. Its browser side says:

- `visible`: the page is shown (the Page Visibility API: not a background tab, not a
  minimised window) and the dashboard is on screen (an IntersectionObserver on the
  dashboard); False when the view is removed (the notebook closed);
- `touched`: a count bumped when the operator clicks, types, scrolls or moves the
  pointer over the dashboard, at most once every `TOUCH_EVERY_MS` (a message each time);
- `zone`: the browser's time zone (IANA name), so times are shown in the viewer's zone;
- `beat`: a count bumped every `beat_ms` (`BEAT_MS`) while the page lives.

A page that dies without its unload step (a crash, a killed browser, a lost network)
says nothing more: once it missed `LOST_BEATS` beats while no cell ran in the kernel,
the presence is `lost`, and what it watches stops publishing, so the server's culler
(`--MappingKernelManager.cull_idle_timeout`) finds the kernel idle and shuts it down. A
running cell holds the page's messages in the kernel's queue, so the beats missed while
one runs are not counted (`_Cells`).

The page shuts its kernel down when it closes: Voilà sends that request with the page's
`_xsrf` cookie (and refuses it when there is none, "403 '_xsrf' argument missing");
Voilà's own page never asks the server for that cookie, so the browser side makes one,
a random token, when the page has none: the double-submit check then compares the
cookie with the form field as it is meant to (a page of another site can set neither).

Without a browser (a test, nbval) nothing reports: `visible` stays True and the
dashboard refreshes as told. Without the anywidget package it is an empty hidden box
with the same traits, which nothing sets: the dashboard then refreshes as told.
"""

from __future__ import annotations

import time

import ipywidgets
import traitlets

try:
    import anywidget
except ImportError:  # pragma: no cover - a kernel without anywidget
    anywidget = None  # type: ignore[assignment]

TOUCH_EVERY_MS = 10_000
# the page says it lives this often, and is lost after this many beats unheard
BEAT_MS = 10_000
LOST_BEATS = 3

_ESM = """
const TOUCH_EVERY_MS = TOUCH_EVERY;

function ensureXsrfCookie() {
  if (/(^|;\\s*)_xsrf=/.test(document.cookie)) return;
  let base = "/";
  const config = document.getElementById("jupyter-config-data");
  if (config) {
    try { base = JSON.parse(config.textContent).baseUrl || "/"; } catch (e) { /* keep "/" */ }
  }
  const bytes = new Uint8Array(16);
  crypto.getRandomValues(bytes);
  const token = Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
  document.cookie = `_xsrf=${token}; path=${base}; SameSite=Strict`;
}

function render({ model, el }) {
  ensureXsrfCookie();
  el.classList.add("emq-presence");
  const zone = Intl.DateTimeFormat().resolvedOptions().timeZone || "";
  if (zone && model.get("zone") !== zone) {
    model.set("zone", zone);
    model.save_changes();
  }
  // the whole dashboard, once the view is attached; the view itself until then
  let watched = el;
  let onScreen = true;
  let lastTouch = 0;
  const say = () => {
    const now = document.visibilityState === "visible" && onScreen;
    if (model.get("visible") !== now) {
      model.set("visible", now);
      model.save_changes();
    }
  };
  const touch = () => {
    const now = Date.now();
    if (now - lastTouch < TOUCH_EVERY_MS) return;
    lastTouch = now;
    model.set("touched", model.get("touched") + 1);
    model.save_changes();
  };
  const observer = new IntersectionObserver((entries) => {
    onScreen = entries.some((e) => e.isIntersecting);
    say();
  });
  const events = ["pointerdown", "keydown", "wheel", "pointermove"];
  const attach = () => {
    watched = el.closest(".emq-dashboard") || el.parentElement || el;
    observer.observe(watched);
    for (const name of events) watched.addEventListener(name, touch, { passive: true });
  };
  requestAnimationFrame(attach);
  document.addEventListener("visibilitychange", say);
  // the page lives: a beat now and every beat_ms (the kernel may change it)
  const beat = () => {
    model.set("beat", model.get("beat") + 1);
    model.save_changes();
  };
  let beats = null;
  const beatEvery = () => {
    clearInterval(beats);
    beats = setInterval(beat, Math.max(100, model.get("beat_ms")));
  };
  model.on("change:beat_ms", beatEvery);
  beat();
  beatEvery();
  return () => {
    clearInterval(beats);
    model.off("change:beat_ms", beatEvery);
    observer.disconnect();
    document.removeEventListener("visibilitychange", say);
    for (const name of events) watched.removeEventListener(name, touch);
    model.set("visible", false);
    model.save_changes();
  };
}

export default { render };
""".replace("TOUCH_EVERY;", f"{TOUCH_EVERY_MS};")


if anywidget is not None:

    class _Base(anywidget.AnyWidget):
        _esm = _ESM
        _css = ".emq-presence { height: 0; overflow: hidden; }"

else:  # pragma: no cover - a kernel without anywidget

    class _Base(ipywidgets.Box):  # type: ignore[no-redef]
        def __init__(self, **kw: object) -> None:
            super().__init__(layout=ipywidgets.Layout(display="none"), **kw)


class _Cells:
    """Whether a cell runs in this kernel, and when the last one ended (IPython's
    `pre_run_cell` / `post_run_cell` events, watched once a process)."""

    running = False
    ended_at = 0.0
    watched = False

    @classmethod
    def watch(cls) -> None:
        if cls.watched:
            return
        from IPython import get_ipython

        shell = get_ipython()
        if shell is None:  # plain Python: no cell ever runs
            return
        shell.events.register("pre_run_cell", cls._started)
        shell.events.register("post_run_cell", cls._ended)
        cls.watched = True

    @classmethod
    def _started(cls, info: object) -> None:
        cls.running = True

    @classmethod
    def _ended(cls, result: object) -> None:
        cls.running, cls.ended_at = False, time.monotonic()


class Presence(_Base):
    """Whether the dashboard is on a visible screen of a page that lives, how often it
    was touched, and the viewer's time zone (set by the browser; see the module)."""

    visible = traitlets.Bool(True).tag(sync=True)
    touched = traitlets.Int(0).tag(sync=True)
    zone = traitlets.Unicode("").tag(sync=True)
    beat = traitlets.Int(0).tag(sync=True)
    beat_ms = traitlets.Int(BEAT_MS).tag(sync=True)

    def __init__(self, **kw: object) -> None:
        super().__init__(**kw)
        # when the page last said anything (None: no page ever did, as without a browser)
        self.heard_at: float | None = None
        self.observe(self._heard, names=["beat", "touched", "visible", "zone"])
        _Cells.watch()

    def _heard(self, change: object) -> None:
        self.heard_at = time.monotonic()

    @property
    def lost(self) -> bool:
        """True when the page that showed it missed `LOST_BEATS` beats while no cell ran:
        it died without its unload step. Never without a page (nothing ever heard)."""
        if self.heard_at is None or _Cells.running:
            return False
        quiet = time.monotonic() - max(self.heard_at, _Cells.ended_at)
        return quiet > LOST_BEATS * self.beat_ms / 1000

    @property
    def seen(self) -> bool:
        """True while the page lives and shows the dashboard."""
        return self.visible and not self.lost
