"""How much of each agent call the provider's prompt cache can reuse, and what input costs.

    .venv/bin/python bench/prompt_cache.py [--conversations 100]                # SQLite
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/lab_attendance_b \\
        .venv/bin/python bench/prompt_cache.py                                  # PostgreSQL

Creates a throwaway test database (in memory on SQLite, ``test_<name>`` on PostgreSQL, dropped at
the end) with the demo catalog and runtime configuration (``conversations/fixtures/demo.json``)
and the built-in prompts, and drives ``--conversations`` conversations of 6 customer messages
each through the production pipeline (`session_process`: the real invoker, dispatcher and
database sources) with a scripted in-process model that records every request. Each
conversation greets, asks for a quote in one of the four segments (triagem routes with code 2,
qualificacao asks), asks for the delivery times (code 99 loads a package), gives the service's
parameters (code 3, coleta asks for the registration), gives the registration (code 4) and
confirms (code 5): 9 agent calls. The customers write one minute apart and conversations start
one minute apart, on a clock of the bench's own, so the time in a request changes as it would.

For each agent it prints the share of input characters (and tokens, estimated at 4 characters a
token) that repeat the start of the previous request:

- ``next calls``: from a session's second call of the agent on, against the same session's
  previous call of that agent;
- ``first calls``: a session's first call of the agent against the earlier sessions' first calls
  of it (the one sharing the longest start).

Then the input cost per conversation at each price, without caching (every input token at the
input price) and with it, where a request's cached tokens are estimated as the provider counts
them: its longest shared prefix with an earlier request of the agent (the session's previous one,
or an earlier session's first call), counted only for a request of 1,024 tokens or more, in
128-token steps. Prices: `conversations.model_prices`.

Last, the cached share when the provider routes requests as its guide describes (a hash of the
first ~256 tokens and ``prompt_cache_key`` picks a machine; past about 15 requests a minute a
route spills over to other machines, which never saw the session), with the key per conversation
and per agent and prompt version, at a conversation every 60, 6, 1 and 0.1 seconds.
"""

import argparse
import os
import sys
import zlib
from collections import defaultdict, deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    # Imported where used, after django.setup(); named here for the annotations.
    from agents.llm import CallPurpose, ChatMessage, LLMCallResult

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings_test")
os.environ.setdefault("LOG_LEVEL", "WARNING")

CHARS_PER_TOKEN = 4
CACHE_MIN_TOKENS = 1024
CACHE_STEP_TOKENS = 128
PRICED_MODELS = ("gpt-4o-mini", "gpt-5-mini")
# The provider's routing, as its prompt-caching guide describes it; the machine count and memory
# are the bench's assumptions.
MACHINES = 16
MACHINE_MEMORY = 200
ROUTE_PER_MINUTE = 15
# A Tuesday, 13:00 in Brasília: inside business hours.
START = datetime(2026, 3, 10, 16, 0, tzinfo=UTC)
# Each agent's model is named after it, so a request says which agent made it.
AGENT_MODELS = {
    "OPENAI_MODEL_TRIAGE": "triagem",
    "OPENAI_MODEL_QUALIFICATION": "qualificacao",
    "OPENAI_MODEL_COLLECTION": "coleta",
}

# Per segment: the customer's ask, the intention, the service and its parameters.
SEGMENT_CASES = (
    ("AMBIENTAL", "análise da água do poço", "AGUA_POTABILIDADE",
     {"tipo_amostra": "água de poço", "quantidade_amostras": 2}, "2 amostras de água de poço"),
    ("ALIMENTOS", "análise microbiológica de queijo", "ALIMENTO_MICROBIOLOGICO",
     {"produto": "queijo minas", "quantidade_amostras": 3}, "3 amostras de queijo minas"),
    ("ANIMAL", "análise da água dos bebedouros do gado", "AGUA_DESSEDENTACAO",
     {"quantidade_amostras": 1}, "1 amostra"),
    ("HUMANO", "exame toxicológico para a CNH", "EXAME_TOXICOLOGICO",
     {"finalidade": "CNH", "quantidade_pessoas": 1}, "é para a CNH, só eu"),
)  # fmt: skip


def script(number: int) -> list[tuple[str, list[str]]]:
    """The conversation's customer messages, each with the model's answers to its turn."""
    import json

    segment, ask, service, data, details = SEGMENT_CASES[number % len(SEGMENT_CASES)]
    name = f"Cliente {number}"

    def dumped(payload: dict[str, object]) -> str:
        return json.dumps(payload, ensure_ascii=False, separators=(",", ":"))

    return [
        (
            f"Oi, bom dia! Aqui é {name}.",
            [
                dumped({"s": 1, "nome_cliente": name})
                + f"Olá, {name}! Eu sou a Lia, assistente virtual. Como posso ajudar?"
            ],
        ),
        (
            f"Quero um orçamento de {ask}.",
            [
                dumped({"s": 2, "segmento": segment, "intencao": "ORCAMENTO"}),
                '{"s":1}Claro! Me conte um pouco mais: quantas amostras e de quê?',
            ],
        ),
        (
            "Antes, quais são os prazos de entrega?",
            [
                '{"s":99,"context_needed":"PRAZOS_E_ENTREGA"}',
                '{"s":1}O laudo sai em até 10 dias úteis depois da coleta. Quantas amostras?',
            ],
        ),
        (
            details,
            [
                dumped({"s": 3, "servico": service, "qualification_data": data}),
                '{"s":1}Perfeito! Para o orçamento, preciso do seu nome completo, CPF e e-mail.',
            ],
        ),
        (
            f"{name} da Silva, CPF 529.982.247-25, cliente{number}@example.com",
            [
                dumped(
                    {
                        "s": 4,
                        "cadastro": {
                            "nome": f"{name} da Silva",
                            "documento": "52998224725",
                            "email": f"cliente{number}@example.com",
                        },
                    }
                )
                + f"Confira: *{name} da Silva*, CPF 529.982.247-25, cliente{number}@example.com. "
                "Está tudo certo?"
            ],
        ),
        ("Confirmar", ['{"s":5}Obrigada! Sua solicitação foi registrada.']),
    ]


@dataclass(frozen=True, slots=True)
class Request:
    session: int
    turn: int
    agent: str
    text: str  # instructions and input items, in the order sent


@dataclass
class ScriptedLLM:
    """An `LLMClient` that answers from a script and records each agent request it gets."""

    answers: list[str] = field(default_factory=list)
    requests: list[Request] = field(default_factory=list)
    session: int = 0
    turn: int = 0

    def chat(
        self,
        *,
        model: str,
        instructions: str,
        messages: Sequence["ChatMessage"],
        purpose: "CallPurpose",
        cache_key: str = "",
    ) -> "LLMCallResult":
        from agents.llm import LLMCallResult

        if purpose == "agent":
            # The serialisation the provider hashes: instructions, then each item's role and text.
            text = instructions + "".join(f"\n<{m.role}>\n{m.content}" for m in messages)
            self.requests.append(Request(self.session, self.turn, model, text))
        answer = self.answers.pop(0)
        return LLMCallResult(answer, model, len(instructions) // CHARS_PER_TOKEN, 20, 0)


def tokens(chars: int) -> int:
    return -(-chars // CHARS_PER_TOKEN)


def cached_tokens(request_chars: int, prefix_chars: int) -> int:
    """What the provider would count as cached: nothing under 1,024 tokens, else the shared
    prefix in whole 128-token steps."""
    if tokens(request_chars) < CACHE_MIN_TOKENS:
        return 0
    return (prefix_chars // CHARS_PER_TOKEN) // CACHE_STEP_TOKENS * CACHE_STEP_TOKENS


@dataclass
class Share:
    repeated: int = 0
    total: int = 0

    def add(self, repeated: int, total: int) -> None:
        self.repeated += repeated
        self.total += total

    def line(self) -> str:
        percent = 100 * self.repeated / self.total if self.total else 0.0
        return (
            f"{percent:5.1f}% of {self.total:>10,} chars ({tokens(self.repeated):>9,} of "
            f"{tokens(self.total):>9,} tokens)"
        )


def analyse(requests: list[Request], conversations: int) -> None:
    from agents.prompts.cache import common_prefix_length
    from conversations.model_prices import call_cost_usd

    next_calls: dict[str, Share] = defaultdict(Share)
    first_calls: dict[str, Share] = defaultdict(Share)
    last_of: dict[tuple[int, str], str] = {}
    firsts: dict[str, list[str]] = defaultdict(list)
    totals = {"input": 0, "cached": 0}
    for request in requests:
        key = (request.session, request.agent)
        text = request.text
        own_previous = last_of.get(key)
        # The best earlier session's first call: the provider keeps many, of every segment.
        best_first = max(
            (common_prefix_length(old, text) for old in firsts[request.agent]), default=0
        )
        if own_previous is not None:
            own = common_prefix_length(own_previous, text)
            next_calls[request.agent].add(own, len(text))
        else:
            own = 0
            if firsts[request.agent]:
                first_calls[request.agent].add(best_first, len(text))
            firsts[request.agent].append(text)
        last_of[key] = text
        # The provider's cache: the longest prefix shared with an earlier request of the agent:
        # the session's own previous one, or another session's first call (which shares the
        # instructions and, in the same segment, what follows them).
        totals["input"] += tokens(len(text))
        totals["cached"] += cached_tokens(len(text), max(own, best_first))

    print(f"{len(requests):,} agent requests, {conversations} conversations")
    print("repeated prefix, per agent:")
    for agent in sorted({r.agent for r in requests}):
        print(f"  {agent:<22} next calls  {next_calls[agent].line()}")
        print(f"  {'':<22} first calls {first_calls[agent].line()}")
    every_next = Share()
    every_first = Share()
    for share in next_calls.values():
        every_next.add(share.repeated, share.total)
    for share in first_calls.values():
        every_first.add(share.repeated, share.total)
    print(f"  {'all agents':<22} next calls  {every_next.line()}")
    print(f"  {'':<22} first calls {every_first.line()}")
    per_conversation_in = totals["input"] / conversations
    per_conversation_cached = totals["cached"] / conversations
    print(
        f"input tokens per conversation: {per_conversation_in:,.0f}, of which cached "
        f"(estimated): {per_conversation_cached:,.0f} "
        f"({100 * totals['cached'] / totals['input']:.1f}%)"
    )
    for model in PRICED_MODELS:
        plain = call_cost_usd(model, tokens_input=totals["input"], tokens_output=0)
        cached = call_cost_usd(
            model, tokens_input=totals["input"], tokens_output=0, tokens_cached=totals["cached"]
        )
        if plain is None or cached is None:
            raise SystemExit(f"no price for {model} in conversations/model_prices.py")
        per = Decimal(conversations)
        print(
            f"input cost per conversation at {model:<12} without caching ${plain / per:.6f}   "
            f"with caching ${cached / per:.6f}   (-{100 * (1 - cached / plain):.1f}%)"
        )


def routed_cached_share(
    requests: list[Request], cache_key: Callable[[Request], str], *, start_every: float
) -> float:
    """The share of input tokens cached when the provider routes as documented: by a hash of
    the prompt's first ~256 tokens and ``prompt_cache_key`` to one of `MACHINES`, a route taking
    more than `ROUTE_PER_MINUTE` requests a minute spilling over to the next machines. A request
    reuses the longest prefix of the recent requests its machine served. Conversation c starts at
    c times `start_every` seconds, its messages a minute apart."""
    from agents.prompts.cache import common_prefix_length

    def at(request: Request) -> float:
        return request.session * start_every + request.turn * 60.0

    served: dict[int, deque[str]] = defaultdict(lambda: deque(maxlen=MACHINE_MEMORY))
    recent: dict[tuple[str, str], deque[float]] = defaultdict(deque)
    cached = total = 0
    for request in sorted(requests, key=at):
        when = at(request)
        route = (request.text[: 256 * CHARS_PER_TOKEN], cache_key(request))
        window = recent[route]
        while window and window[0] <= when - 60.0:
            window.popleft()
        spill = len(window) // ROUTE_PER_MINUTE
        machine = (zlib.crc32("\0".join(route).encode()) + spill) % MACHINES
        window.append(when)
        best = max((common_prefix_length(old, request.text) for old in served[machine]), default=0)
        served[machine].append(request.text)
        total += tokens(len(request.text))
        cached += cached_tokens(len(request.text), best)
    return cached / total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--conversations", type=int, default=100)
    args = parser.parse_args()

    import django

    django.setup()
    from django.conf import settings

    for name, agent in AGENT_MODELS.items():
        setattr(settings, name, agent)
    from django.core.management import call_command
    from django.db import connection
    from django.utils import timezone

    from conversations.agent_sources import build_agent_invoker
    from conversations.models import Direction, Instance, Message, Session
    from conversations.turns.deps import PipelineConfig, no_read_receipt
    from conversations.turns.run import session_process
    from conversations.turns.tasks import build_pipeline_deps

    def nothing(_id: int) -> None:
        return None

    test_db = connection.creation.create_test_db(verbosity=0, autoclobber=True)
    try:
        call_command("loaddata", str(ROOT / "conversations/fixtures/demo.json"), verbosity=0)
        instance = Instance.objects.get()
        config = PipelineConfig.from_settings()
        llm = ScriptedLLM()
        now = START

        def clock() -> datetime:
            return now

        # Each conversation's turns one minute apart, conversations started a minute apart:
        # turn t of conversation c happens at START + c + t minutes; run in that order.
        events = sorted(
            (number + turn, number, turn)
            for number in range(args.conversations)
            for turn in range(6)
        )
        scripts = {number: script(number) for number in range(args.conversations)}
        sessions: dict[int, int] = {}
        for minute, number, turn in events:
            now = START + timedelta(minutes=minute)
            if number not in sessions:
                sessions[number] = Session.objects.create(
                    instance=instance, customer_phone=f"55119{number:08d}"
                ).pk
            text, answers = scripts[number][turn]
            Message.objects.create(
                session_id=sessions[number],
                direction=Direction.INBOUND,
                content=text,
                wa_message_id=f"wamid.cache.{number}.{turn}",
                wa_timestamp=timezone.now(),
            )
            llm.answers = list(answers)
            llm.session = number
            llm.turn = turn
            deps = build_pipeline_deps(llm=llm)
            deps = replace(
                deps,
                invoker=build_agent_invoker(llm=llm, prompts=deps.prompts, kb=deps.kb, clock=clock),
                send=nothing,
                enqueue_summary=nothing,
                mark_read=no_read_receipt,
                clock=clock,
            )
            report = session_process(session_id=sessions[number], deps=deps, config=config)
            if report.turns != 1 or llm.answers:
                raise SystemExit(f"conversation {number}, message {turn}: {report} {llm.answers}")
        print(f"database {connection.vendor}; demo catalog; built-in prompts")
        analyse(llm.requests, args.conversations)
        keys: dict[str, Callable[[Request], str]] = {
            "per conversation": lambda r: f"conversa-{r.session}",
            "per agent and version": lambda r: f"{r.agent}-builtin",
        }
        for every in (60.0, 6.0, 1.0, 0.1):
            shares = ", ".join(
                f"{name} {100 * routed_cached_share(llm.requests, key, start_every=every):.1f}%"
                for name, key in keys.items()
            )
            print(
                f"routed (a conversation every {every:g} s): cached share with prompt_cache_key "
                f"{shares}"
            )
    finally:
        connection.creation.destroy_test_db(test_db, verbosity=0)


if __name__ == "__main__":
    main()
