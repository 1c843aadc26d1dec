"""Retries of one API call, for transient failures only.

What is transient is the backend's call (`classify`); here is the waiting: the server's
`retry-after` when it sends one, otherwise exponential backoff with jitter. Every retry is
logged with what failed and how long it waits, so a slow run is never silently slow.
"""

from __future__ import annotations

import email.utils
import logging
import random
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TypeVar

import tenacity

from htam_graph.llm.settings import RetryPolicy

logger = logging.getLogger(__name__)

T = TypeVar("T")

# Rate limited, server errors and Anthropic's 529 overloaded. Never 400/401/403/404: the
# same request would fail the same way.
TRANSIENT_STATUS = frozenset({429, 500, 502, 503, 504, 529})


@dataclass(frozen=True)
class Failure:
    """One failed attempt as the retry loop and the error messages need it."""

    status: int | None  # HTTP status; None when no answer came (connection, timeout, bad body)
    message: str
    transient: bool
    retry_after_s: float | None = None  # what the server asked us to wait


def retry_after_s(headers: Mapping[str, str]) -> float | None:
    """The wait a response asks for: `retry-after-ms`, then `retry-after` in seconds (a
    float is accepted) or as an HTTP date; None when absent or unreadable."""
    if (ms := headers.get("retry-after-ms")) is not None:
        try:
            return max(float(ms) / 1000, 0.0)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(float(value), 0.0)
    except ValueError:
        parsed = email.utils.parsedate_tz(value)
        return None if parsed is None else max(email.utils.mktime_tz(parsed) - time.time(), 0.0)


def with_retries(
    call: Callable[[], T], *, policy: RetryPolicy, classify: Callable[[BaseException], Failure | None], what: str
) -> T:
    """`call()`, retried up to `policy.max_retries` times while it fails transiently; the
    last exception propagates unchanged when retries run out or the failure is not
    transient. `classify` returns None for exceptions that are no API failure (bugs)."""

    def transient(e: BaseException) -> bool:
        failure = classify(e)
        return failure is not None and failure.transient

    def wait(state: tenacity.RetryCallState) -> float:
        failure = _failure_of(state, classify)
        if failure.retry_after_s is not None:
            return failure.retry_after_s
        backoff = min(policy.backoff_s * 2 ** (state.attempt_number - 1), policy.backoff_max_s)
        return backoff * random.uniform(0.75, 1.0)

    def log(state: tenacity.RetryCallState) -> None:
        failure = _failure_of(state, classify)
        sleep = state.next_action.sleep if state.next_action else 0.0
        logger.warning(
            "%s failed (%s: %s); retry %d of %d in %.2f s",
            what,
            failure.status or "no answer",
            failure.message,
            state.attempt_number,
            policy.max_retries,
            sleep,
        )

    retrying = tenacity.Retrying(
        stop=tenacity.stop_after_attempt(policy.max_retries + 1),
        retry=tenacity.retry_if_exception(transient),
        wait=wait,
        before_sleep=log,
        reraise=True,
    )
    return retrying(call)


def _failure_of(state: tenacity.RetryCallState, classify: Callable[[BaseException], Failure | None]) -> Failure:
    assert state.outcome is not None  # tenacity waits and logs only after a failed attempt
    exc = state.outcome.exception()
    failure = classify(exc) if exc is not None else None
    assert failure is not None  # only transient failures are retried
    return failure
