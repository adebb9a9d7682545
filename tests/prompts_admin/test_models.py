"""Constraints and validations of prompt overrides, the runtime configuration and strategic companies."""

import pytest
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.db.models import Model
from django.test import Client
from model_bakery import baker

from prompts_admin.models import (
    DEFAULT_HANDOFF_MESSAGE_OPEN,
    MAX_PROMPT_CHARS,
    PromptOverride,
    RuntimeConfig,
    StrategicCompany,
)

pytestmark = pytest.mark.django_db


def validation_messages(obj: Model) -> dict[str, list[str]]:
    with pytest.raises(ValidationError) as excinfo:
        obj.full_clean()
    return excinfo.value.message_dict


# --- PromptOverride ------------------------------------------------------------------------


def test_database_refuses_a_second_active_override_for_an_agent() -> None:
    PromptOverride.objects.create(agent="triagem", content="a", is_active=True)
    with pytest.raises(IntegrityError), transaction.atomic():
        PromptOverride.objects.create(agent="triagem", content="b", is_active=True)
    assert PromptOverride.objects.filter(is_active=True).count() == 1


def test_inactive_overrides_and_other_agents_do_not_conflict() -> None:
    PromptOverride.objects.create(agent="triagem", content="a", is_active=True)
    PromptOverride.objects.create(agent="triagem", content="b", is_active=False)
    PromptOverride.objects.create(agent="triagem", content="c", is_active=False)
    PromptOverride.objects.create(agent="coleta", content="d", is_active=True)
    assert PromptOverride.objects.count() == 4


def test_form_validation_explains_the_active_override_conflict() -> None:
    PromptOverride.objects.create(agent="triagem", content="a", is_active=True)
    second = PromptOverride(agent="triagem", content="b", is_active=True)
    assert validation_messages(second) == {
        "__all__": ["Já existe um prompt personalizado ativo para este agente."]
    }


def test_prompt_content_has_a_size_limit() -> None:
    override = PromptOverride(agent="coleta", content="x" * (MAX_PROMPT_CHARS + 1))
    assert validation_messages(override) == {
        "content": [
            "Certifique-se de que o valor tenha no máximo 30000 caracteres (ele possui 30001)."
        ]
    }


# --- RuntimeConfig -------------------------------------------------------------------------


def test_runtime_config_is_a_single_row() -> None:
    RuntimeConfig(company_name="A").save()
    RuntimeConfig(company_name="B").save()
    assert list(RuntimeConfig.objects.values_list("pk", "company_name")) == [(1, "B")]


def test_database_refuses_a_second_runtime_config_row() -> None:
    RuntimeConfig.load()
    with pytest.raises(IntegrityError), transaction.atomic():
        # bulk_create skips save(), which would force the primary key to 1.
        RuntimeConfig.objects.bulk_create([RuntimeConfig(pk=2)])
    assert RuntimeConfig.objects.count() == 1


def test_runtime_config_defaults_are_pt_br_texts() -> None:
    config = RuntimeConfig.load()
    assert config.handoff_message_open == DEFAULT_HANDOFF_MESSAGE_OPEN
    assert config.handoff_message_open.startswith("Vou transferir seu atendimento")
    assert config.agent_name == "Lia"


def test_runtime_config_cannot_be_added_twice_or_deleted_in_admin(admin_client: Client) -> None:
    assert admin_client.get("/admin/prompts_admin/runtimeconfig/add/").status_code == 200
    RuntimeConfig.load()
    assert admin_client.get("/admin/prompts_admin/runtimeconfig/add/").status_code == 403
    response = admin_client.post("/admin/prompts_admin/runtimeconfig/1/delete/", {"post": "yes"})
    assert response.status_code == 403
    assert RuntimeConfig.objects.count() == 1


@pytest.mark.parametrize(
    ("hours", "message"),
    [
        (["mon"], "O horário comercial deve ser um objeto com os dias da semana."),
        (
            {"seg": []},
            "Dias desconhecidos: seg. Use mon, tue, wed, thu, fri, sat, sun.",
        ),
        ({"mon": "08:00-18:00"}, "mon: use uma lista de intervalos."),
        (
            {"mon": [["18:00", "08:00"]]},
            "mon: intervalo inválido ['18:00', '08:00']; use [\"08:00\", \"18:00\"].",
        ),
        # A superscript digit passes isdigit() but not int().
        (
            {"mon": [["0²:00", "18:00"]]},
            "mon: intervalo inválido ['0²:00', '18:00']; use [\"08:00\", \"18:00\"].",
        ),
    ],
)
def test_business_hours_validation_messages(hours: object, message: str) -> None:
    config = RuntimeConfig(business_hours=hours)
    assert validation_messages(config) == {"business_hours": [message]}


# --- StrategicCompany ----------------------------------------------------------------------


def test_cnpj_with_wrong_check_digits_is_refused() -> None:
    company = StrategicCompany(name="Acme", cnpj="11.222.333/0001-80")
    assert validation_messages(company) == {
        "cnpj": ["CNPJ inválido (dígitos verificadores não conferem)."]
    }


def test_valid_cnpj_is_stored_as_digits() -> None:
    company = StrategicCompany(name="Acme", cnpj="11.222.333/0001-81")
    company.full_clean()
    assert company.cnpj == "11222333000181"


def test_invalid_phone_lines_are_named_in_the_message() -> None:
    company = StrategicCompany(name="Acme", phone_numbers="+55 11 91234-5678\n123\nabc\n")
    assert validation_messages(company) == {
        "phone_numbers": [
            "Telefones inválidos: 123, abc. Escreva um por linha, ex.: +55 11 91234-5678."
        ]
    }


def test_phone_lines_accept_brazilian_numbers_with_or_without_country_code() -> None:
    company = StrategicCompany(name="Acme", phone_numbers="+55 11 91234-5678\n(19) 3200-0000\n\n")
    company.full_clean()
    assert company.phone_numbers == "+55 11 91234-5678\n(19) 3200-0000\n\n"


def test_strategic_company_notes_have_a_size_limit() -> None:
    company = baker.prepare(StrategicCompany, name="Acme", cnpj="", notes="x" * 2001)
    assert validation_messages(company) == {
        "notes": ["Certifique-se de que o valor tenha no máximo 2000 caracteres (ele possui 2001)."]
    }
