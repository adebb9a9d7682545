"""The runtime configuration's business hours edited as a form: one field per weekday in pt-BR
("08:00-12:00, 13:00-18:00"; empty: closed), validated, stored as the same JSON; the national
holidays listed."""

from typing import Any

import pytest
from django.test import Client

from prompts_admin.models import DEFAULT_BUSINESS_HOURS, RuntimeConfig
from tests.helpers.staff import PROMPT_EDITORS, logged_in, staff_member

pytestmark = pytest.mark.django_db
URL = "/admin/prompts_admin/runtimeconfig/1/change/"


def form_data(config: RuntimeConfig, **hours: str) -> dict[str, Any]:
    data: dict[str, Any] = {
        name: getattr(config, name)
        for name in (
            "agent_name",
            "company_name",
            "handoff_message_open",
            "handoff_message_closed",
            "unsupported_media_message",
            "invalid_format_message",
            "satisfaction_question",
            "satisfaction_style",
        )
    }
    days = {
        "mon": "08:00-18:00",
        "tue": "08:00-18:00",
        "wed": "08:00-18:00",
        "thu": "08:00-18:00",
        "fri": "08:00-17:00",
        "sat": "",
        "sun": "",
    }
    days.update(hours)
    return data | {f"hours_{day}": value for day, value in days.items()}


def test_the_form_shows_one_pt_br_field_per_weekday_and_the_holidays(
    admin_client: Client,
) -> None:
    RuntimeConfig.load()

    response = admin_client.get(URL)

    page = response.content.decode()
    assert response.status_code == 200
    form = response.context["adminform"].form
    assert [form.fields[f"hours_{d}"].label for d in ("mon", "sat", "sun")] == [
        "Segunda-feira",
        "Sábado",
        "Domingo",
    ]
    assert form.initial["hours_mon"] == "08:00-18:00"
    assert form.initial["hours_sat"] == ""
    assert "business_hours" not in form.fields
    assert '<input type="text" name="hours_fri" value="08:00-17:00" class="vTextField"' in page
    assert "Horário de atendimento (horário de Brasília)" in page
    assert "Nos feriados nacionais fica fechado o dia todo, automaticamente. Em 20" in page
    assert "<li>25/12: Natal</li>" in page
    assert "<li>21/04: Tiradentes</li>" in page


def test_saving_the_form_stores_the_same_json(admin_client: Client) -> None:
    config = RuntimeConfig.load()

    response = admin_client.post(
        URL,
        form_data(config, mon="8:00-12:00, 13:00 – 18:00", sat="09:00-12:00", fri=""),
    )

    assert response.status_code == 302
    config.refresh_from_db()
    assert config.business_hours == DEFAULT_BUSINESS_HOURS | {
        "mon": [["08:00", "12:00"], ["13:00", "18:00"]],
        "fri": [],
        "sat": [["09:00", "12:00"]],
    }


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("8h às 18h", "“8h às 18h” não é um intervalo: escreva como 08:00-18:00."),
        ("18:00-08:00", "“18:00-08:00”: o fim precisa vir depois do início."),
        ("24:00-25:00", "“24:00-25:00” não é um intervalo: escreva como 08:00-18:00."),
        # A superscript digit passes isdigit() but not int().
        ("0²:00-18:00", "“0²:00-18:00” não é um intervalo: escreva como 08:00-18:00."),
        (
            "08:00-12:00, 11:00-18:00",
            "“11:00-18:00” se sobrepõe ao intervalo anterior ou vem antes dele: liste-os em ordem.",
        ),
    ],
)
def test_an_invalid_interval_is_refused_by_name(
    admin_client: Client, value: str, message: str
) -> None:
    config = RuntimeConfig.load()

    response = admin_client.post(URL, form_data(config, wed=value))

    assert response.status_code == 200
    assert response.context["adminform"].form.errors == {"hours_wed": [message]}
    config.refresh_from_db()
    assert config.business_hours == DEFAULT_BUSINESS_HOURS


def test_a_prompt_editor_edits_the_hours_and_a_version_is_recorded() -> None:
    config = RuntimeConfig.load()
    client = logged_in(staff_member(PROMPT_EDITORS))

    response = client.post(URL, form_data(config, sun="10:00-14:00"))

    assert response.status_code == 302
    config.refresh_from_db()
    assert config.business_hours["sun"] == [["10:00", "14:00"]]
    assert config.history.count() == 2


# --- The satisfaction survey ---------------------------------------------------------------


def test_the_survey_is_off_by_default_with_the_default_question() -> None:
    config = RuntimeConfig.load()

    assert (
        config.satisfaction_after_close,
        config.satisfaction_after_lead,
        config.satisfaction_question,
        config.satisfaction_style,
    ) == (False, False, "Como você avalia o atendimento?", "buttons")


def test_turning_the_survey_on_is_saved_with_history(admin_client: Client) -> None:
    config = RuntimeConfig.load()
    data = form_data(config) | {
        "satisfaction_after_close": "on",
        "satisfaction_question": "De 1 a 5, como foi?",
        "satisfaction_style": "list",
    }

    response = admin_client.post(URL, data)

    assert response.status_code == 302
    config.refresh_from_db()
    assert (
        config.satisfaction_after_close,
        config.satisfaction_after_lead,
        config.satisfaction_question,
        config.satisfaction_style,
    ) == (True, False, "De 1 a 5, como foi?", "list")
    assert config.history.latest().satisfaction_style == "list"


@pytest.mark.parametrize("switch", ["satisfaction_after_close", "satisfaction_after_lead"])
def test_a_survey_turned_on_without_a_question_is_refused_in_pt_br(
    admin_client: Client, switch: str
) -> None:
    config = RuntimeConfig.load()
    data = form_data(config) | {switch: "on", "satisfaction_question": "   "}

    response = admin_client.post(URL, data)

    assert response.status_code == 200
    errors = response.context["adminform"].form.errors
    assert errors["satisfaction_question"] == [
        "Escreva a pergunta de satisfação ou desligue a pesquisa."
    ]
    config.refresh_from_db()
    assert getattr(config, switch) is False


def test_a_question_over_whatsapps_limit_is_refused(admin_client: Client) -> None:
    config = RuntimeConfig.load()
    data = form_data(config) | {"satisfaction_question": "x" * 1025}

    response = admin_client.post(URL, data)

    assert response.status_code == 200
    assert response.context["adminform"].form.errors["satisfaction_question"] == [
        "Certifique-se de que o valor tenha no máximo 1024 caracteres (ele possui 1025)."
    ]


def test_an_empty_question_is_allowed_while_the_survey_is_off(admin_client: Client) -> None:
    config = RuntimeConfig.load()

    response = admin_client.post(URL, form_data(config) | {"satisfaction_question": ""})

    assert response.status_code == 302
