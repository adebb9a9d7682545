import pytest

from agents.history import QUOTE_CHARS, HistorySelection, select_history
from agents.llm import ChatMessage
from agents.sources import HistoryEntry

SID = 7


def inbound(text: str, session_id: int = SID, *, error: str = "") -> HistoryEntry:
    return HistoryEntry(session_id, "INBOUND", text, error=error)


def outbound(
    text: str, session_id: int = SID, *, error: str = "", staff: bool = False
) -> HistoryEntry:
    return HistoryEntry(session_id, "OUTBOUND", text, error=error, staff=staff)


def test_inbound_is_user_and_outbound_is_assistant_in_order() -> None:
    entries = [inbound("Oi"), outbound("Olá! Como posso ajudar?"), inbound("Quero um orçamento")]

    selection = select_history(entries, session_id=SID, limit=50)

    assert selection == HistorySelection(
        (
            ChatMessage("user", "Oi"),
            ChatMessage("assistant", "Olá! Como posso ajudar?"),
            ChatMessage("user", "Quero um orçamento"),
        ),
        foreign_dropped=0,
    )


def test_system_events_and_superseded_drafts_are_excluded() -> None:
    entries = [
        inbound("Oi"),
        HistoryEntry(SID, "SYSTEM", "handoff: model_requested"),
        outbound("rascunho que não foi enviado", error="superseded"),
        inbound("Na verdade, quero saber o preço"),
        outbound("Claro! De qual análise?"),
    ]

    selection = select_history(entries, session_id=SID, limit=50)

    assert selection.messages == (
        ChatMessage("user", "Oi"),
        ChatMessage("user", "Na verdade, quero saber o preço"),
        ChatMessage("assistant", "Claro! De qual análise?"),
    )


def test_an_outbound_with_a_delivery_error_other_than_superseded_is_kept() -> None:
    entries = [outbound("Olá!", error="131026")]

    assert select_history(entries, session_id=SID, limit=50).messages == (
        ChatMessage("assistant", "Olá!"),
    )


def test_entries_of_another_session_are_dropped_and_counted() -> None:
    entries = [inbound("Oi"), inbound("CPF 123 de outro cliente", session_id=99), outbound("Olá!")]

    selection = select_history(entries, session_id=SID, limit=50)

    assert selection == HistorySelection(
        (ChatMessage("user", "Oi"), ChatMessage("assistant", "Olá!")), foreign_dropped=1
    )


def test_the_newest_messages_are_kept_oldest_first() -> None:
    entries = [inbound(f"m{i}") if i % 2 == 0 else outbound(f"m{i}") for i in range(10)]

    selection = select_history(entries, session_id=SID, limit=3)

    assert selection.messages == (
        ChatMessage("assistant", "m7"),
        ChatMessage("user", "m8"),
        ChatMessage("assistant", "m9"),
    )


def test_the_limit_counts_only_messages_the_model_sees() -> None:
    entries = [
        inbound("a"),
        outbound("b"),
        HistoryEntry(SID, "SYSTEM", "evento"),
        outbound("c", error="superseded"),
        inbound("d"),
    ]

    assert [m.content for m in select_history(entries, session_id=SID, limit=2).messages] == [
        "b",
        "d",
    ]


def test_a_zero_limit_keeps_no_history_but_still_sends_the_current_message() -> None:
    selection = select_history([inbound("antigo")], session_id=SID, limit=0, current_message="Oi")

    assert selection.messages == (ChatMessage("user", "Oi"),)


@pytest.mark.parametrize(
    ("entries", "current", "expected"),
    [
        # Already stored as the last user entry: not duplicated (whitespace aside).
        ([outbound("Olá!"), inbound("Quero um orçamento")], " Quero um orçamento\n", 2),
        # A new text: appended.
        ([outbound("Olá!"), inbound("Oi")], "Quero um orçamento", 3),
        # The same text said again after an answer is a new message: appended.
        ([inbound("Oi"), outbound("Olá!")], "Oi", 3),
        # Empty history.
        ([], "Oi", 1),
        # No current message, or a blank one.
        ([inbound("Oi")], None, 1),
        ([inbound("Oi")], "   ", 1),
    ],
)
def test_the_current_message_is_appended_unless_it_is_already_the_last_user_entry(
    entries: list[HistoryEntry], current: str | None, expected: int
) -> None:
    messages = select_history(entries, session_id=SID, limit=50, current_message=current).messages

    assert len(messages) == expected
    if current and current.strip():
        assert messages[-1].role == "user"
        assert messages[-1].content.strip() == current.strip()


def test_blank_entries_are_left_out() -> None:
    entries = [inbound("Oi"), outbound("  "), inbound("")]

    assert select_history(entries, session_id=SID, limit=50).messages == (
        ChatMessage("user", "Oi"),
    )


def test_the_teams_messages_are_assistant_turns_marked_as_the_teams() -> None:
    entries = [
        inbound("Quero falar com alguém"),
        outbound("Olá, sou a Ana, da equipe. Posso ajudar?", staff=True),
        inbound("Pode voltar para o robô"),
    ]

    selection = select_history(entries, session_id=SID, limit=50)

    assert selection.messages == (
        ChatMessage("user", "Quero falar com alguém"),
        ChatMessage(
            "assistant", "[Mensagem da equipe humana] Olá, sou a Ana, da equipe. Posso ajudar?"
        ),
        ChatMessage("user", "Pode voltar para o robô"),
    )


# --- quoted replies ----------------------------------------------------------------------------


def quoting(text: str, quoted: str) -> HistoryEntry:
    return HistoryEntry(SID, "INBOUND", text, quoted=quoted)


def test_a_quoted_reply_reads_as_the_quote_then_the_reply() -> None:
    entries = [outbound("Qual é o seu segmento?"), quoting("Alimentos", "Qual é o seu segmento?")]

    assert select_history(entries, session_id=SID, limit=50).messages == (
        ChatMessage("assistant", "Qual é o seu segmento?"),
        ChatMessage("user", '(em resposta a: "Qual é o seu segmento?") Alimentos'),
    )


def test_a_quote_is_read_on_one_line() -> None:
    entries = [quoting("Sim", "Confirma os dados?\n\nNome: Ana\n  E-mail: ana@example.com")]

    assert select_history(entries, session_id=SID, limit=50).messages == (
        ChatMessage(
            "user", '(em resposta a: "Confirma os dados? Nome: Ana E-mail: ana@example.com") Sim'
        ),
    )


@pytest.mark.parametrize(
    ("length", "quote"),
    [
        pytest.param(QUOTE_CHARS - 1, "a" * (QUOTE_CHARS - 1), id="1 under the limit"),
        pytest.param(QUOTE_CHARS, "a" * QUOTE_CHARS, id="at the limit"),
        pytest.param(QUOTE_CHARS + 1, "a" * (QUOTE_CHARS - 1) + "…", id="1 over: cut"),
    ],
)
def test_a_long_quote_is_cut_at_the_limit_with_an_ellipsis(length: int, quote: str) -> None:
    [message] = select_history([quoting("Isso", "a" * length)], session_id=SID, limit=50).messages

    assert message.content == f'(em resposta a: "{quote}") Isso'
    assert len(quote) <= QUOTE_CHARS


@pytest.mark.parametrize("quoted", ["", " \n "])
def test_a_reply_that_quotes_nothing_readable_reads_as_written(quoted: str) -> None:
    assert select_history([quoting("Isso", quoted)], session_id=SID, limit=50).messages == (
        ChatMessage("user", "Isso"),
    )
