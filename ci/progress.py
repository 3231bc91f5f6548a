"""The progress ``attnprops check`` prints while the suite runs (:class:`Progress`), from the
events the suite's plugin writes (``--attn-progress``: :mod:`properties.plugin`)."""

from __future__ import annotations

import os
import sys
import time

from attnprops.properties.options import ROBUSTNESS_REASON

__all__ = ["Progress"]


class Progress:
    """Prints the run as it goes, to standard error: one line per finished property
    (``[ 3/64] passed   test_x  1.2 s``; a failure with its first message, as it happens)
    and, on a terminal, a status line naming the properties running now."""

    def __init__(self, stream=None):
        self.stream = stream or sys.stderr
        self.tty = self.stream.isatty()
        self.total = 0
        self.done = 0
        self.failed = 0
        self.running: dict[str, float] = {}  # node id -> when it started

    def __call__(self, event: dict) -> None:
        kind = event.get("event")
        if kind == "collected":
            self.total = event["tests"]
            self._line(
                f"attnprops check: {self.total} property test{'' if self.total == 1 else 's'}"
            )
            if event.get("subject"):  # the subject, its version and its declarations
                self._line(f"  subject: {event['subject']}")
            if event.get("kernel_sizes"):  # the largest sizes drawn, as raised
                self._line(f"  kernel sizes: {event['kernel_sizes']}")
        elif kind == "started":
            self.running[event["nodeid"]] = time.monotonic()
            self._status()
        elif kind == "finished":
            seconds = time.monotonic() - self.running.pop(event["nodeid"], time.monotonic())
            self.done += 1
            outcome = event["outcome"]
            self.failed += outcome == "failed"
            if event.get("reason", "").startswith(ROBUSTNESS_REASON):  # a non-strict xfail
                outcome = {"xpassed": "passed", "xfailed": "not met"}.get(outcome, outcome)
                outcome += " (robustness tier, reported)"
            width = len(str(self.total or self.done))
            head = f"[{self.done:>{width}}/{self.total or '?'}] {outcome:<8} {event['nodeid'].split('::', 1)[-1]}"
            if outcome == "failed":
                first = (event["failures"] or [{"message": event.get("reason", "")}])[0]
                more = len(event["failures"]) - 1
                head += f": {first['message'].splitlines()[0][:160] if first['message'] else ''}"
                head += f" (+{more} more distinct failures)" if more > 0 else ""
            elif outcome == "skipped":
                head += f" ({event.get('reason', '')})"
            self._line(f"{head}  {seconds:.1f} s" if outcome != "skipped" else head)
            self._status()

    def _line(self, text: str) -> None:
        if self.tty:
            self.stream.write("\r\x1b[K")
        self.stream.write(text + "\n")
        self.stream.flush()

    def _status(self) -> None:
        if not self.tty or not self.running:
            return
        names = ", ".join(n.rsplit("::", 1)[-1] for n in self.running)
        # the counts first: a line wider than the terminal is cut at its end, the names
        text = f"  [{self.done}/{self.total or '?'} done, {self.failed} failed] running: {names}"
        try:
            width = os.get_terminal_size(self.stream.fileno()).columns
        except (OSError, ValueError):
            width = 80
        if len(text) >= width:
            text = text[: max(width - 4, 0)] + "..."
        self.stream.write("\r\x1b[K" + text)
        self.stream.flush()

    def close(self) -> None:
        if self.tty:
            self.stream.write("\r\x1b[K")
            self.stream.flush()
