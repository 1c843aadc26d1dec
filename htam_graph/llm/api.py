"""What the two HTTP backends (Anthropic, OpenAI-compatible) share: retries around each
request, pricing, the preflight, and one mapping from what failed to what the caller sees.

A failed request ends as exactly one of: ConfigError (key or model: the user fixes a
setting), BackendError (the account is refused), LLMUnavailable (transient failures
outlived the retries), RequestRejected (the request itself was refused). The SDKs' own
retries are off: the retry loop here is the only one, so every retry is logged and its
backoff is configurable.
"""

from __future__ import annotations

import logging
from abc import abstractmethod
from collections.abc import Callable
from typing import ClassVar, TypeVar

from htam_graph.errors import BackendError, ConfigError
from htam_graph.llm.base import LLMClient, LLMUnavailable, RequestRejected, Usage
from htam_graph.llm.prices import find_price, load_prices, priced_usage
from htam_graph.llm.retry import Failure, RetryPolicy, with_retries
from htam_graph.llm.settings import API_KEY_ENV, LLMSettings

logger = logging.getLogger(__name__)

T = TypeVar("T")

# A server that does not accept the connection within this is not there; the request
# itself may take up to the settings' timeout_s (a long answer).
CONNECT_TIMEOUT_S = 5.0


class MalformedResponse(Exception):
    """A 2xx response without what the protocol promises (no content, no usage): treated
    as transient, since a proxy or an overloaded server produces these."""


class ApiClient(LLMClient):
    """An LLM behind an HTTP API reached through its official SDK."""

    writes_reflections: ClassVar[bool] = True

    def __init__(self, settings: LLMSettings, model: str) -> None:
        self.settings = settings
        self.model = model
        self._price = find_price(load_prices(settings.prices), model)
        key = settings.api_key_value()
        if not key:
            raise ConfigError(
                f"no API key for the {self.name} backend: set {self.key_env} or HTAM_LLM__API_KEY", setting=self.key_env
            )
        self._api_key = key

    @property
    def key_env(self) -> str:
        return API_KEY_ENV[self.name]

    @property
    @abstractmethod
    def base_url(self) -> str:
        """The endpoint requests go to, for messages."""

    @abstractmethod
    def _classify(self, e: BaseException) -> Failure | None:
        """The SDK exception as a Failure (transient or not); None for anything that is not
        a failed request, which then propagates as the bug it is."""

    @abstractmethod
    def _check_model(self) -> None:
        """Ask the endpoint about the model (through `_call`): a 404 there is an unknown model."""

    def check(self) -> None:
        try:
            self._check_model()
        except LLMUnavailable as e:
            raise BackendError(
                f"{e}; check HTAM_LLM__BASE_URL and the network", backend=self.name, model=self.model
            ) from None
        except RequestRejected as e:
            raise BackendError(
                f"{e}; check HTAM_LLM__BASE_URL and HTAM_LLM__MODEL", backend=self.name, model=self.model
            ) from None
        if self._price is None:
            logger.warning(
                "no price for model %r: its cost is reported as unknown; name it in a price file (HTAM_LLM__PRICES)",
                self.model,
            )

    def _call(self, what: str, call: Callable[[], T], retry: bool = True) -> T:
        """`call()` with retries (none for the preflight: a run should not start by waiting
        out backoffs for an endpoint that is down); what still fails becomes UserError,
        LLMUnavailable or RequestRejected."""
        policy = self.settings.retry_policy if retry else RetryPolicy(max_retries=0, backoff_s=0.0, backoff_max_s=0.0)
        try:
            return with_retries(call, policy=policy, classify=self._classify, what=f"{self.name} {what}")
        except Exception as e:
            failure = self._classify(e)
            if failure is None:
                raise
            raise self._error(failure, policy.max_retries) from e

    def _error(self, failure: Failure, retries: int) -> Exception:
        where = f"{self.name} at {self.base_url}"
        status, message = failure.status, failure.message
        if status == 401:
            return ConfigError(
                f"{where} rejected the API key (401: {message}); set {self.key_env} or HTAM_LLM__API_KEY",
                setting=self.key_env,
            )
        if status in (402, 403) or (status == 429 and not failure.transient):
            return BackendError(
                f"{where} refused the account ({status}: {message}); check its billing and permissions",
                backend=self.name,
                model=self.model,
                status=status,
            )
        if status == 404:
            return ConfigError(
                f"{where} has no model {self.model!r} (404: {message}); set HTAM_LLM__MODEL (or HTAM_LLM__BASE_URL)",
                setting="HTAM_LLM__MODEL",
                value=self.model,
            )
        if failure.transient:
            return LLMUnavailable(
                f"{where}, model {self.model}: {status or 'no answer'}: {message}"
                + (f" (gave up after {retries} retries)" if retries else "")
            )
        return RequestRejected(f"{where} rejected the request for model {self.model} ({status}: {message})")

    def _usage(
        self, *, input_tokens: int, output_tokens: int, cache_read_tokens: int, cache_write_tokens: int
    ) -> Usage:
        return priced_usage(
            self._price,
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            cache_read_tokens=cache_read_tokens,
            cache_write_tokens=cache_write_tokens,
        )


def connection_failure(e: BaseException) -> Failure:
    """A request that got no HTTP answer; the low-level cause (refused, DNS, timeout) is
    what a user needs to see, and the SDK keeps it in __cause__."""
    cause = f" ({e.__cause__})" if e.__cause__ is not None and str(e.__cause__) else ""
    return Failure(status=None, message=f"{e}{cause}", transient=True)


def malformed_failure(e: BaseException) -> Failure:
    return Failure(status=None, message=f"unreadable response: {e}", transient=True)
