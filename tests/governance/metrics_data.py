"""A small hand-built history of the triage agent's prompt, for the metrics per version: the
built-in prompt on 2 November 2026, then override #N's first version on the 5th. Every number
the tests expect is worked out in `Dataset`'s docstring."""

import uuid
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from zoneinfo import ZoneInfo

from conversations.models import Instance, Lead, LLMCall, Session
from prompts_admin.models import PromptOverride
from tests import baker_recipes as recipes

ZONE = ZoneInfo("America/Sao_Paulo")
PERIOD = (date(2026, 11, 1), date(2026, 11, 10))
BUILTIN_DAY = datetime(2026, 11, 2, 10, 0, tzinfo=ZONE)
OVERRIDE_DAY = datetime(2026, 11, 5, 10, 0, tzinfo=ZONE)


@dataclass(frozen=True)
class Dataset:
    """Built-in (4 conversations, 6 triage calls, latencies 100…600 ms):
    S1 triage in turns 1 and 2, qualificacao in turn 2, coleta in turn 3, then the Lead
    (handoff qualified_lead: not a handoff); S2 model_requested; S3 two turns, a repair in the
    second, llm_invalid_json (a contract violation); S4 still in triage.
    Override (3 real conversations, 4 triage calls, latencies 1000…4000 ms): S5 staff_takeover;
    S6 triage in turns 1 and 2, qualificacao in turns 2 and 3, coleta in turn 4, the Lead; S8
    still in triage. S7 is simulated (model_requested): counted only when asked.
    Every triage call: 100 input and 10 output tokens of gpt-4o-mini; the repair 50 and 5.
    """

    instance: Instance
    override: PromptOverride
    history_id: int

    @property
    def override_version(self) -> str:
        return f"override:{self.history_id}"


def call(
    session: Session,
    *,
    turn: uuid.UUID,
    at: datetime,
    version: str,
    agent: str = "triagem",
    purpose: str = "agent",
    latency: int = 100,
    tokens: tuple[int, int] = (100, 10),
    cached: int = 0,
    model: str = "gpt-4o-mini",
) -> LLMCall:
    return LLMCall.objects.create(
        session=session,
        turn_id=turn,
        agent=agent,
        purpose=purpose,
        model=model,
        tokens_input=tokens[0],
        cached_tokens=cached,
        tokens_output=tokens[1],
        latency_ms=latency,
        outcome="ok",
        prompt_version=version,
        created_at=at,
    )


def conversation(
    instance: Instance, *, reason: str = "", simulated: bool = False, state: str = "TRIAGE"
) -> Session:
    return recipes.session.make(
        instance=instance,
        handoff_reason=reason,
        is_simulated=simulated,
        state="HUMAN" if reason else state,
    )


def turns(count: int) -> list[uuid.UUID]:
    return [uuid.uuid4() for _ in range(count)]


def build() -> Dataset:
    instance = recipes.instance.make()
    override = PromptOverride.objects.create(
        agent="triagem", content="Olá {{ agent_name }}", note="Pergunta a cidade antes"
    )
    history_id = PromptOverride.history.get(id=override.pk).history_id
    builtin, overridden = "builtin", f"override:{history_id}"
    minute = timedelta(minutes=1)

    at = BUILTIN_DAY
    s1 = conversation(instance, reason="qualified_lead")
    t = turns(3)
    call(s1, turn=t[0], at=at, version=builtin, latency=100)
    call(s1, turn=t[1], at=at + minute, version=builtin, latency=200)
    call(s1, turn=t[1], at=at + 2 * minute, version="builtin", agent="qualificacao")
    call(s1, turn=t[2], at=at + 3 * minute, version="builtin", agent="coleta")
    Lead.objects.create(session=s1, created_at=at + 4 * minute)
    s2 = conversation(instance, reason="model_requested")
    call(s2, turn=uuid.uuid4(), at=at, version=builtin, latency=300)
    s3 = conversation(instance, reason="llm_invalid_json")
    t = turns(2)
    call(s3, turn=t[0], at=at, version=builtin, latency=400)
    call(s3, turn=t[1], at=at + minute, version=builtin, latency=500)
    call(s3, turn=t[1], at=at + 2 * minute, version="builtin", purpose="repair", tokens=(50, 5))
    s4 = conversation(instance)
    call(s4, turn=uuid.uuid4(), at=at, version=builtin, latency=600)
    # Outside the period: never counted.
    call(s4, turn=uuid.uuid4(), at=datetime(2026, 11, 11, 0, 0, tzinfo=ZONE), version=builtin)

    at = OVERRIDE_DAY
    s5 = conversation(instance, reason="staff_takeover")
    call(s5, turn=uuid.uuid4(), at=at, version=overridden, latency=1000)
    s6 = conversation(instance, reason="qualified_lead")
    t = turns(4)
    call(s6, turn=t[0], at=at, version=overridden, latency=2000)
    call(s6, turn=t[1], at=at + minute, version=overridden, latency=3000)
    call(s6, turn=t[1], at=at + 2 * minute, version="builtin", agent="qualificacao")
    call(s6, turn=t[2], at=at + 3 * minute, version="builtin", agent="qualificacao")
    call(s6, turn=t[3], at=at + 4 * minute, version="builtin", agent="coleta")
    Lead.objects.create(session=s6, created_at=at + 5 * minute)
    s7 = conversation(instance, reason="model_requested", simulated=True)
    call(s7, turn=uuid.uuid4(), at=at, version=overridden, latency=9000)
    s8 = conversation(instance)
    call(s8, turn=uuid.uuid4(), at=at, version=overridden, latency=4000)
    return Dataset(instance=instance, override=override, history_id=history_id)
