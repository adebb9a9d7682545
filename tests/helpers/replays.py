"""A finished replay of a text: the activation gate's evidence that the text was tested."""

from decimal import Decimal

from model_bakery import baker

from governance.models import ReplayRun, ReplayStatus
from prompts_admin.models import prompt_content_hash


def replayed(content: str, *, agent: str = "triagem", calls: int = 40) -> ReplayRun:
    """A done replay of `content` for `agent` over `calls` calls, none changed."""
    run: ReplayRun = baker.make(
        ReplayRun,
        agent=agent,
        content=content,
        content_hash=prompt_content_hash(content),
        status=ReplayStatus.DONE,
        calls_selected=calls,
        calls_done=calls,
        cost_usd=Decimal("0.01"),
    )
    return run
