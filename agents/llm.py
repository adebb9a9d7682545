"""The LLM port: what the rest of the code needs from a model provider (DESIGN.md §9).

`LLMClient` is the Protocol every collaborator is typed against; `OpenAIClient` (this module) is
the real adapter for the OpenAI Responses API. Errors are typed so the pipeline can map each to a
precise handoff reason.
"""

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

Role = Literal["user", "assistant"]
CallPurpose = Literal["agent", "repair", "summary"]


@dataclass(frozen=True, slots=True)
class ChatMessage:
    role: Role
    content: str


@dataclass(frozen=True, slots=True)
class LLMCallResult:
    raw_response: str
    model: str
    tokens_input: int
    tokens_output: int
    latency_ms: int
    attempts: int = 1


class LLMError(Exception):
    """A call that produced no usable answer. `attempts` counts the HTTP requests made."""

    outcome = "provider_error"

    def __init__(self, message: str, *, attempts: int = 1, latency_ms: int = 0) -> None:
        super().__init__(message)
        self.attempts = attempts
        self.latency_ms = latency_ms


class LLMTimeoutError(LLMError):
    outcome = "timeout"


class LLMRateLimitError(LLMError):
    """HTTP 429. `quota_exhausted` tells `insufficient_quota` apart from a transient rate limit."""

    outcome = "rate_limited"

    def __init__(
        self, message: str, *, quota_exhausted: bool = False, attempts: int = 1, latency_ms: int = 0
    ) -> None:
        super().__init__(message, attempts=attempts, latency_ms=latency_ms)
        self.quota_exhausted = quota_exhausted
        if quota_exhausted:
            self.outcome = "quota_exceeded"


class LLMProviderError(LLMError):
    """Any other failure: 4xx, 5xx after the retries, a non-`completed` response, no text."""

    outcome = "provider_error"


class LLMClient(Protocol):
    def chat(
        self,
        *,
        model: str,
        instructions: str,
        messages: Sequence[ChatMessage],
        purpose: CallPurpose,
    ) -> LLMCallResult: ...
