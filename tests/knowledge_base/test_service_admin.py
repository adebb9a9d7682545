"""A service's parameter schema edited as rows in the admin: the stored JSON shown as one row of
inputs per parameter plus empty rows, read back as the same JSON, each row checked by the pure
validator with the row named, the history kept; Support sees the rows read-only."""

from typing import Any

import pytest
from django.test import Client
from model_bakery import baker

from knowledge_base.models import Segment, Service

pytestmark = pytest.mark.django_db

SCHEMA = [
    {"name": "tipo_amostra", "label": "Tipo de amostra", "type": "text", "required": True},
    {
        "name": "matriz",
        "label": "Matriz",
        "type": "choice",
        "required": False,
        "choices": ["água", "solo"],
    },
]


@pytest.fixture
def service() -> Service:
    segment = baker.make(Segment, code="AMBIENTAL", label="Ambiental")
    return Service.objects.create(
        code="ANALISE_AGUA",
        label="Análise de água",
        segment=segment,
        description="Potabilidade",
        parameter_schema=SCHEMA,
    )


def url(service: Service) -> str:
    return f"/admin/knowledge_base/service/{service.pk}/change/"


def row(name: str, label: str, kind: str = "text", **extra: str) -> dict[str, str]:
    return {"name": name, "label": label, "type": kind} | extra


def form_data(service: Service, *rows: dict[str, str]) -> dict[str, Any]:
    """The change form as posted: the service's fields and `rows` (blank rows included)."""
    data: dict[str, Any] = {
        "code": service.code,
        "label": service.label,
        "segment": service.segment_id,
        "description": service.description,
        "is_active": "on",
        "parameter_schema-TOTAL": str(len(rows)),
    }
    for i, values in enumerate(rows):
        data |= {f"parameter_schema-{i}-{key}": value for key, value in values.items()}
    return data


def existing_rows() -> list[dict[str, str]]:
    return [
        row("tipo_amostra", "Tipo de amostra", required="on"),
        row("matriz", "Matriz", "choice", choices="água, solo"),
    ]


BLANK = row("", "")


def test_the_change_form_shows_one_row_per_parameter_and_three_empty_rows(
    prompt_editor_client: Client, service: Service
) -> None:
    response = prompt_editor_client.get(url(service))

    page = response.content.decode()
    assert response.status_code == 200
    assert (
        "<th>#</th><th>Nome</th><th>Rótulo</th><th>Tipo</th><th>Obrigatório</th>"
        "<th>Opções</th><th>Remover</th>"
    ) in page
    assert '<input type="text" name="parameter_schema-0-name" value="tipo_amostra"' in page
    assert 'name="parameter_schema-0-label" value="Tipo de amostra"' in page
    assert (
        '<input type="checkbox" name="parameter_schema-0-required" aria-label="Obrigatório" checked>'
        in page
    )
    assert (
        '<input type="checkbox" name="parameter_schema-1-required" aria-label="Obrigatório">'
        in page
    )
    assert '<option value="choice" selected>Escolha de uma lista</option>' in page
    assert 'name="parameter_schema-1-choices" value="água, solo"' in page
    assert '<input type="checkbox" name="parameter_schema-1-delete" aria-label="Remover">' in page
    assert 'name="parameter_schema-4-name" value=""' in page
    assert "parameter_schema-4-delete" not in page  # an empty row has nothing to remove
    assert '<input type="hidden" name="parameter_schema-TOTAL" value="5">' in page
    assert "parameter_schema-5-name" not in page
    assert '<textarea name="parameter_schema"' not in page


def test_saving_the_rows_unchanged_writes_the_same_json_and_no_new_version(
    prompt_editor_client: Client, service: Service
) -> None:
    response = prompt_editor_client.post(
        url(service), form_data(service, *existing_rows(), BLANK, BLANK, BLANK)
    )

    assert response.status_code == 302
    service.refresh_from_db()
    assert service.parameter_schema == SCHEMA
    latest = service.history.latest()
    assert latest.diff_against(latest.prev_record).changed_fields == []


def test_adding_a_row_appends_the_parameter_and_the_history_diffs_the_json(
    prompt_editor_client: Client, service: Service, prompt_editor_user: Any
) -> None:
    new = row("quantidade", " Quantidade de amostras ", "integer", required="on")

    response = prompt_editor_client.post(
        url(service), form_data(service, *existing_rows(), BLANK, new, BLANK)
    )

    assert response.status_code == 302
    service.refresh_from_db()
    added = {
        "name": "quantidade",
        "label": "Quantidade de amostras",
        "type": "integer",
        "required": True,
    }
    assert service.parameter_schema == [*SCHEMA, added]
    latest = service.history.latest()
    assert latest.history_user == prompt_editor_user
    changes = latest.diff_against(latest.prev_record).changes
    assert [(c.field, c.old, c.new) for c in changes] == [
        ("parameter_schema", SCHEMA, [*SCHEMA, added])
    ]
    history = prompt_editor_client.get(f"/admin/knowledge_base/service/{service.pk}/history/")
    assert history.status_code == 200


def test_editing_a_row_changes_type_required_and_choices(
    prompt_editor_client: Client, service: Service
) -> None:
    rows = [
        row("tipo_amostra", "Tipo de amostra", "choice", choices="poço, rede ,, torneira"),
        row("matriz", "Matriz da amostra", "text", required="on"),
    ]

    response = prompt_editor_client.post(url(service), form_data(service, *rows))

    assert response.status_code == 302
    service.refresh_from_db()
    assert service.parameter_schema == [
        {
            "name": "tipo_amostra",
            "label": "Tipo de amostra",
            "type": "choice",
            "required": False,
            "choices": ["poço", "rede", "torneira"],
        },
        {"name": "matriz", "label": "Matriz da amostra", "type": "text", "required": True},
    ]


def test_ticking_remove_deletes_the_row(prompt_editor_client: Client, service: Service) -> None:
    first, second = existing_rows()

    response = prompt_editor_client.post(
        url(service), form_data(service, first | {"delete": "on"}, second, BLANK)
    )

    assert response.status_code == 302
    service.refresh_from_db()
    assert service.parameter_schema == [SCHEMA[1]]


def test_removing_every_row_stores_an_empty_list(
    prompt_editor_client: Client, service: Service
) -> None:
    first, second = existing_rows()

    response = prompt_editor_client.post(
        url(service), form_data(service, first | {"delete": "on"}, second | {"delete": "on"})
    )

    assert response.status_code == 302
    service.refresh_from_db()
    assert service.parameter_schema == []


@pytest.mark.parametrize(
    ("rows", "messages"),
    [
        (
            [BLANK, row("Tipo Amostra", "Tipo")],
            ["Linha 2: 'name' deve ser snake_case minúsculo (ex.: tipo_amostra)"],
        ),
        ([row("tipo", "")], ["Linha 1: 'label' deve ser um texto"]),
        ([row("matriz", "Matriz", "choice")], ["Linha 1: tipo 'choice' exige 'choices'"]),
        (
            [row("tipo", "Tipo", "text", choices="a, b")],
            ["Linha 1: 'choices' só vale para tipo 'choice'"],
        ),
        (
            [row("tipo", "Tipo", "float")],
            ["Linha 1: tipo 'float' inválido; use um de text, integer, decimal, boolean, choice, date"],
        ),
        ([row("tipo", "Tipo"), BLANK, row("tipo", "Outro")], ["Linha 3: nome repetido 'tipo'"]),
        (
            [row("", "Sem nome"), row("ok", "Ok"), row("x", "X", "choice")],
            [
                "Linha 1: 'name' deve ser snake_case minúsculo (ex.: tipo_amostra)",
                "Linha 3: tipo 'choice' exige 'choices'",
            ],
        ),
    ],
)  # fmt: skip
def test_invalid_rows_are_refused_naming_the_row_and_nothing_is_saved(
    prompt_editor_client: Client,
    service: Service,
    rows: list[dict[str, str]],
    messages: list[str],
) -> None:
    response = prompt_editor_client.post(url(service), form_data(service, *rows))

    assert response.status_code == 200
    form = response.context["adminform"].form
    assert form.errors["parameter_schema"] == messages
    service.refresh_from_db()
    assert service.parameter_schema == SCHEMA
    assert service.history.count() == 1
    page = response.content.decode()
    # The rows come back as typed, with three empty rows after them.
    typed = [r for r in rows if r["name"] or r["label"]]
    assert f'name="parameter_schema-0-label" value="{typed[0]["label"]}"' in page
    total = len(typed) + 3
    assert f'<input type="hidden" name="parameter_schema-TOTAL" value="{total}">' in page


def test_a_post_without_the_rows_is_refused(prompt_editor_client: Client, service: Service) -> None:
    data = form_data(service)
    del data["parameter_schema-TOTAL"]

    response = prompt_editor_client.post(url(service), data)

    assert response.status_code == 200
    assert response.context["adminform"].form.errors["parameter_schema"] == [
        "As linhas de parâmetros não foram enviadas."
    ]
    service.refresh_from_db()
    assert service.parameter_schema == SCHEMA


def test_adding_a_service_with_rows(prompt_editor_client: Client, service: Service) -> None:
    data = form_data(service, row("volume", "Volume (L)", "decimal"), BLANK) | {
        "code": "ANALISE_SOLO",
        "label": "Análise de solo",
    }

    response = prompt_editor_client.post("/admin/knowledge_base/service/add/", data)

    assert response.status_code == 302
    created = Service.objects.get(code="ANALISE_SOLO")
    assert created.parameter_schema == [
        {"name": "volume", "label": "Volume (L)", "type": "decimal", "required": False}
    ]


def test_support_sees_the_rows_read_only_and_cannot_change_them(
    support_client: Client, service: Service
) -> None:
    response = support_client.get(url(service))

    page = response.content.decode()
    assert response.status_code == 200
    assert "parameter_schema-0-name" not in page
    assert (
        "<tr><td><code>tipo_amostra</code></td><td>Tipo de amostra</td><td>text</td>"
        "<td>sim</td><td></td></tr>"
        "<tr><td><code>matriz</code></td><td>Matriz</td><td>choice</td><td>não</td>"
        "<td>água, solo</td></tr>"
    ) in page
    first, second = existing_rows()
    post = support_client.post(url(service), form_data(service, first | {"delete": "on"}, second))
    assert post.status_code == 403
    service.refresh_from_db()
    assert service.parameter_schema == SCHEMA


def test_an_older_version_shows_its_rows_to_an_editor_and_its_table_to_support(
    prompt_editor_client: Client, support_client: Client, service: Service
) -> None:
    first_version = service.history.earliest()
    service.parameter_schema = [SCHEMA[1]]
    service.save()
    version_url = f"{url(service).removesuffix('change/')}history/{first_version.history_id}/"

    editor_page = prompt_editor_client.get(version_url).content.decode()
    support_page = support_client.get(version_url).content.decode()

    assert '<input type="text" name="parameter_schema-0-name" value="tipo_amostra"' in editor_page
    assert '<input type="hidden" name="parameter_schema-TOTAL" value="5">' in editor_page
    assert "parameter_schema-0-name" not in support_page
    assert "<tr><td><code>tipo_amostra</code></td><td>Tipo de amostra</td>" in support_page
