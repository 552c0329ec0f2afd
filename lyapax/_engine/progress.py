"""Progress bars of long runs: a tqdm bar moved by the host between pieces.

A run asked for ``progress=True`` (or given a text file) shows a ``tqdm`` bar
on stderr (or in that file), moved between pieces of work: a single run
(``lyapunov_spectrum``) runs its blocks in pieces of about half a second,
each continuing the last (the same program and the same numbers as one
call); sweeps move it after each chunk of rows, ``run_until_converged``
after each chunk of steps. A bar never lives inside a compiled program.
Like tqdm's ``delay``, a bar is drawn only once the work has run for
:data:`DELAY_S` (half a second): shorter work prints nothing and pays only
for a clock read per move.

Progress is silent by default: library calls print nothing unless asked.
Under a caller's ``jax.jit``/``jax.vmap``/``jax.grad`` trace a run cannot
report (its loop is part of the caller's program); the entry points then
warn and run without a bar.
"""

from __future__ import annotations

import sys
import time
from typing import Any, Protocol, runtime_checkable

import jax

__all__ = ["DELAY_S", "Bar", "TextSink", "chunks_hook", "sink"]

#: Seconds of work before a bar is drawn (tqdm's ``delay``): shorter work
#: prints nothing and pays nothing for the bar.
DELAY_S = 0.5


@runtime_checkable
class TextSink(Protocol):
    """Where a progress bar goes: anything with ``write(str)`` and
    ``flush()`` (a text file, ``sys.stderr``, ``io.StringIO``)."""

    def write(self, text: str, /) -> Any: ...

    def flush(self) -> Any: ...


def sink(progress: Any) -> Any:
    """Where a bar goes: ``sys.stderr`` for True, None for False/None, else
    ``progress`` itself when it has ``write`` and ``flush``.

    Raises:
        TypeError: anything else.
    """
    if progress is True:
        return sys.stderr
    if progress is False or progress is None:
        return None
    if isinstance(progress, TextSink):
        return progress
    raise TypeError(
        "progress must be True, False or a text file (with write and flush); got "
        f"{progress!r} of type {type(progress).__name__}"
    )


def chunks_hook(bar: Bar) -> Any:
    """The hook of :meth:`~lyapax._internal.batching.Plan.run` that moves
    ``bar`` by chunks of rows (:meth:`Bar.by_chunks`); None when no bar is
    shown, so a sweep without a bar runs its chunks with no hook at all."""
    return bar.by_chunks if bar.active else None


class Bar:
    """A progress bar of ``total`` units (a no-op when ``progress`` is off).

    ``initial``: units already done (a resumed run). ``postfix(text)`` sets
    the text after the bar (e.g. the worst stderr against the tolerance);
    ``to(n)`` moves it to ``n`` units (never back); ``close()`` ends it. A
    context manager that closes on exit.
    """

    def __init__(
        self, progress: Any, total: float, desc: str, unit: str, initial: float = 0
    ) -> None:
        self._out = sink(progress)
        self._bar: Any = None
        self._n = initial
        self._pending: tuple[float, Any] | None = None
        self._postfix: str | None = None
        self._total, self._desc, self._unit = total, desc, unit
        self._began = time.perf_counter()

    @property
    def active(self) -> bool:
        """A bar was asked for (it is drawn once the work outlasts :data:`DELAY_S`)."""
        return self._out is not None

    def _draw(self) -> Any:
        """The tqdm bar, made on the first move after :data:`DELAY_S`; its
        rate counts from then (``initial`` = the units done by that time)."""
        if self._bar is None and time.perf_counter() - self._began >= DELAY_S:
            from tqdm import tqdm  # imported only when a bar is shown

            self._bar = tqdm(
                total=self._total,
                initial=self._n,
                desc=self._desc,
                unit=self._unit,
                file=self._out,
                leave=True,
                mininterval=0.2,
                unit_scale=self._total >= 10_000,
            )
            if self._postfix is not None:
                self._bar.set_postfix_str(self._postfix, refresh=False)
        return self._bar

    def to(self, n: float) -> None:
        if self._out is None or n <= self._n:
            return
        bar = self._draw()  # made now: it starts from the units done before
        delta, self._n = n - self._n, n
        if bar is not None:
            bar.update(delta)

    def done(self, n: float, out: Any) -> Any:
        """Wait for the arrays of ``out`` (when a bar is shown), move to
        ``n``, and return ``out``: a chunk's bar moves when it is computed,
        not when it is dispatched."""
        if self._out is not None:
            jax.block_until_ready(out)
            self.to(n)
        return out

    def by_chunks(self, index: int, start: int, stop: int, compute: Any) -> Any:
        """A hook of :meth:`~lyapax._internal.batching.Plan.run` (rows
        ``start:stop`` of a batch): once the next chunk is dispatched, waits
        for the previous one and moves the bar to its last row, so the
        device is never idle while the host waits (the last chunk is waited
        for by :meth:`close`)."""
        del index, start
        out = compute()
        if self._out is not None:
            self._settle()
            self._pending = (stop, out)
        return out

    def _settle(self) -> None:
        if self._pending is not None:
            n, out = self._pending
            self._pending = None
            self.done(n, out)

    def postfix(self, text: str) -> None:
        self._postfix = text
        if self._bar is not None:
            self._bar.set_postfix_str(text, refresh=False)  # drawn by the next move

    def close(self) -> None:
        if self._out is not None:
            self._settle()
            if self._bar is not None:
                self._bar.close()
            self._out = self._bar = None

    def __enter__(self) -> Bar:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
