"""What one streamed request left behind: when it was sent, when each piece of its
response arrived, how many tokens it read and wrote, and how it ended. Times are seconds
on the load generator's monotonic clock, from the start of its load; no prompt or response
text is kept here (the text stays with the process that read it unless asked for)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class RequestRecord:
    """One request of a load: `chunk_times` are the arrival times of the stream's pieces
    that carried output text (the first is the first token's), `output_tokens` and
    `prompt_tokens` the engine's own usage counts (or its tokenizer's: `counted_by`)."""

    index: int
    warmup: bool
    scheduled: float  # when the arrival process said to send it
    sent: float  # when its request was written
    chunk_times: tuple[float, ...] = ()
    end: float | None = None  # when its stream ended (None: it did not end)
    prompt_tokens: int | None = None
    output_tokens: int | None = None
    counted_by: str = "usage"  # "usage" (the engine's) or "tokenizer"
    error: str | None = None  # None: completed; else why it failed, in one line
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.error is None and self.end is not None and bool(self.chunk_times)

    @property
    def ttft(self) -> float | None:
        return self.chunk_times[0] - self.sent if self.chunk_times else None

    @property
    def e2e(self) -> float | None:
        return None if self.end is None else self.end - self.sent

    def to_dict(self) -> dict[str, Any]:
        return {"index": self.index, "warmup": self.warmup, "scheduled": self.scheduled,
                "sent": self.sent, "chunk_times": list(self.chunk_times), "end": self.end,
                "prompt_tokens": self.prompt_tokens, "output_tokens": self.output_tokens,
                "counted_by": self.counted_by, "error": self.error, "extra": self.extra}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> RequestRecord:
        return cls(int(d["index"]), bool(d["warmup"]), float(d["scheduled"]),
                   float(d["sent"]), tuple(float(t) for t in d.get("chunk_times", ())),
                   None if d.get("end") is None else float(d["end"]),
                   d.get("prompt_tokens"), d.get("output_tokens"),
                   str(d.get("counted_by", "usage")), d.get("error"),
                   dict(d.get("extra") or {}))
