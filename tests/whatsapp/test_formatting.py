"""Markdown → WhatsApp markup, and the splitter at WhatsApp's 4,096-character limit."""

import pytest

from whatsapp.formatting import format_ai_message_for_whatsapp, split_for_whatsapp


@pytest.mark.parametrize(
    ("markdown", "whatsapp"),
    [
        ("Olá, tudo bem?", "Olá, tudo bem?"),
        ("**negrito**", "*negrito*"),
        ("__negrito__", "*negrito*"),
        ("*negrito do WhatsApp*", "*negrito do WhatsApp*"),
        ("_itálico_", "_itálico_"),
        ("~~riscado~~", "~riscado~"),
        ("~riscado do WhatsApp~", "~riscado do WhatsApp~"),
        ("***os dois***", "*os dois*"),
        ("___os dois___", "_*os dois*_"),
        ("**negrito _com itálico_ dentro**", "*negrito _com itálico_ dentro*"),
        ("_itálico *com negrito* dentro_", "_itálico *com negrito* dentro_"),
        ("Preço: **R$ 120,00** por amostra.", "Preço: *R$ 120,00* por amostra."),
        ("# Análise de água", "*Análise de água*"),
        ("## Prazos **de entrega**", "*Prazos de entrega*"),
        ("Título\n===\ntexto", "*Título*\n\ntexto"),
        ("- pH\n- turbidez\n- cloro", "- pH\n- turbidez\n- cloro"),
        ("* pH\n* turbidez", "- pH\n- turbidez"),
        ("1. Colete\n2. Envie\n3. Aguarde", "1. Colete\n2. Envie\n3. Aguarde"),
        ("3. terceiro\n4. quarto", "3. terceiro\n4. quarto"),
        ("- água\n  - poço\n  - rede", "- água\n   - poço\n   - rede"),
        ("- **Prazo:** 5 dias", "- *Prazo:* 5 dias"),
        ("[nosso site](https://lab.example.com.br)", "nosso site (https://lab.example.com.br)"),
        ("<https://lab.example.com.br>", "https://lab.example.com.br"),
        ("[lab.example.com.br](https://lab.example.com.br)", "https://lab.example.com.br"),
        ("<contato@lab.example.com.br>", "contato@lab.example.com.br"),
        ("Use `pH 7`.", "Use `pH 7`."),
        ("Código ```ABC-1``` aqui", "Código ```ABC-1``` aqui"),
        ("```\nlinha 1\nlinha 2\n```", "```linha 1\nlinha 2```"),
        ("    recuado", "```recuado```"),
        ("> Observação importante", "> Observação importante"),
        ("linha 1\nlinha 2", "linha 1\nlinha 2"),
        ("linha 1  \nlinha 2", "linha 1\nlinha 2"),
        ("Parágrafo 1\n\n\n\nParágrafo 2", "Parágrafo 1\n\nParágrafo 2"),
        ("antes\n\n---\n\ndepois", "antes\n\n———\n\ndepois"),
        ("| Análise | Prazo |\n|---|---|\n| pH | 5 dias |", "*Análise* | *Prazo*\npH | 5 dias"),
        ("<b>negrito</b>", "<b>negrito</b>"),
        ("5 \\* 3 = 15", "5 * 3 = 15"),
        ("![logo](https://x.example/l.png)", "logo (https://x.example/l.png)"),
        ("A &amp; B", "A & B"),
        ("  \n  ", ""),
        ("** solto **", "** solto **"),
    ],
)
def test_markdown_becomes_whatsapp_markup(markdown: str, whatsapp: str) -> None:
    assert format_ai_message_for_whatsapp(markdown) == whatsapp


def test_a_realistic_answer() -> None:
    markdown = (
        "Perfeito, **Ana**! Para a análise de _potabilidade_ preciso de:\n\n"
        "1. **Tipo de amostra** (poço, torneira...)\n"
        "2. **Quantidade** de amostras\n\n"
        "Mais detalhes em [nosso site](https://lab.example.com.br/agua)."
    )

    assert format_ai_message_for_whatsapp(markdown) == (
        "Perfeito, *Ana*! Para a análise de _potabilidade_ preciso de:\n\n"
        "1. *Tipo de amostra* (poço, torneira...)\n"
        "2. *Quantidade* de amostras\n\n"
        "Mais detalhes em nosso site (https://lab.example.com.br/agua)."
    )


# --- split_for_whatsapp ----------------------------------------------------------------------------


def test_a_text_within_the_limit_is_one_part() -> None:
    text = "a" * 4096  # WhatsApp's limit for a text message

    assert split_for_whatsapp(text) == [text]


def test_an_empty_text_has_no_part() -> None:
    assert split_for_whatsapp("  \n ") == []


def test_one_character_over_the_limit_is_cut_hard_when_there_is_no_boundary() -> None:
    text = "a" * 4097

    assert split_for_whatsapp(text) == ["a" * 4096, "a"]


def test_the_cut_is_at_the_last_paragraph_break_that_fits() -> None:
    first = "x" * 3000
    second = "y" * 1000
    third = "z" * 1000
    text = f"{first}\n\n{second}\n\n{third}"

    assert split_for_whatsapp(text) == [f"{first}\n\n{second}", third]


def test_a_paragraph_break_exactly_at_the_limit_still_fits() -> None:
    first = "x" * 4096

    assert split_for_whatsapp(f"{first}\n\nfim") == [first, "fim"]


def test_a_long_paragraph_is_cut_at_a_line_break_then_at_a_sentence_end() -> None:
    sentence = "Frase de teste com algumas palavras. "  # 37 characters
    paragraph = (sentence * 120).strip()  # 4,439 characters, no line break

    parts = split_for_whatsapp(paragraph)

    assert len(parts) == 2
    assert len(parts[0]) == 37 * 110 - 1  # 110 whole sentences fit in 4,096
    assert parts[0].endswith("palavras.")
    assert parts[1] == (sentence * 10).strip()


def test_without_a_sentence_end_the_cut_is_at_a_space() -> None:
    text = ("palavra " * 600).strip()  # 4,799 characters

    parts = split_for_whatsapp(text)

    assert [len(p) for p in parts] == [4095, 703]
    assert " ".join(parts) == text


def test_parts_respect_a_small_limit_and_lose_no_word() -> None:
    text = "Primeiro parágrafo curto.\n\nSegundo parágrafo! Tem duas frases? Sim.\n\nFim"

    parts = split_for_whatsapp(text, limit=30)

    # Paragraphs are packed while they fit; a paragraph too long is cut at a sentence end.
    assert parts == [
        "Primeiro parágrafo curto.",
        "Segundo parágrafo!",
        "Tem duas frases? Sim.\n\nFim",
    ]
    assert all(len(p) <= 30 for p in parts)


def test_a_very_long_text_is_cut_into_many_parts_within_the_limit() -> None:
    paragraph = "Linha de resultado. " * 100  # 2,000 characters
    text = "\n\n".join([paragraph.strip()] * 10)

    parts = split_for_whatsapp(text)

    assert all(len(p) <= 4096 for p in parts)
    assert "\n\n".join(parts) == text
    assert len(parts) == 5
