"""Catalog and package validations, with the messages an admin reads, and their constraints."""

import pytest
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.db.models import Model
from model_bakery import baker

from knowledge_base.models import MAX_PACKAGE_CONTENT_CHARS, KBPackage, Segment, Service

pytestmark = pytest.mark.django_db

CODE_MESSAGE = "Use MAIÚSCULAS_COM_SUBLINHADO (letras, dígitos e _; começa com letra)."


def validation_messages(obj: Model) -> dict[str, list[str]]:
    with pytest.raises(ValidationError) as excinfo:
        obj.full_clean()
    return excinfo.value.message_dict


def package(**fields: object) -> KBPackage:
    values = {"package_id": "COMPANY_INFO", "title": "Sobre", "description": "Quem somos"}
    return KBPackage(**(values | {"content": "Texto."} | fields))


@pytest.mark.parametrize(
    "package_id",
    ["company_info", "Company_Info", "1_INFO", "_INFO", "COMPANY-INFO", "COMPANY INFO"],
)
def test_package_id_must_be_upper_snake_case(package_id: str) -> None:
    assert validation_messages(package(package_id=package_id)) == {"package_id": [CODE_MESSAGE]}


@pytest.mark.parametrize("package_id", ["COMPANY_INFO", "GOYOU", "PRAZOS_2026", "A"])
def test_upper_snake_case_package_ids_are_accepted(package_id: str) -> None:
    item = package(package_id=package_id)
    item.full_clean()
    assert item.package_id == package_id


def test_database_refuses_a_duplicate_package_id() -> None:
    package().save()
    with pytest.raises(IntegrityError), transaction.atomic():
        KBPackage.objects.bulk_create([package(title="outro")])
    assert KBPackage.objects.count() == 1


def test_form_validation_explains_a_duplicate_package_id() -> None:
    package().save()
    assert validation_messages(package(title="outro")) == {
        "package_id": ["Pacote de conhecimento com este ID do pacote já existe."]
    }


def test_package_description_is_one_line() -> None:
    assert validation_messages(package(description="linha 1\nlinha 2")) == {
        "description": ["A descrição deve ter uma única linha."]
    }


def test_package_content_has_a_size_limit() -> None:
    too_long = package(content="x" * (MAX_PACKAGE_CONTENT_CHARS + 1))
    assert validation_messages(too_long) == {
        "content": [
            "Certifique-se de que o valor tenha no máximo 20000 caracteres (ele possui 20001)."
        ]
    }


def test_segment_code_must_be_upper_snake_case() -> None:
    assert validation_messages(Segment(code="humano", label="Saúde")) == {"code": [CODE_MESSAGE]}


@pytest.mark.parametrize(
    ("schema", "problem"),
    [
        ({"name": "x"}, "o esquema deve ser uma lista de parâmetros"),
        (["tipo_amostra"], "parâmetro 1: deve ser um objeto"),
        (
            [{"name": "Tipo Amostra"}],
            "parâmetro 1: 'name' deve ser snake_case minúsculo (ex.: tipo_amostra)",
        ),
        (
            [{"name": "tipo_amostra", "type": "texto"}],
            "parâmetro 1 ('tipo_amostra'): tipo 'texto' inválido; "
            "use um de text, integer, decimal, boolean, choice, date",
        ),
        (
            [{"name": "especie", "type": "choice"}],
            "parâmetro 1 ('especie'): tipo 'choice' exige 'choices'",
        ),
        (
            [{"name": "quantidade", "type": "integer", "required": "sim"}],
            "parâmetro 1 ('quantidade'): 'required' deve ser true ou false",
        ),
        (
            [{"name": "a"}, {"name": "a"}],
            "parâmetro 2: nome repetido 'a'",
        ),
        (
            [{"name": "a", "unidade": "mL"}],
            "parâmetro 1: chaves desconhecidas ['unidade']",
        ),
    ],
)
def test_malformed_parameter_schema_is_refused_with_the_problem(
    schema: object, problem: str
) -> None:
    service = Service(
        code="AGUA", label="Água", segment=baker.make(Segment), parameter_schema=schema
    )
    assert validation_messages(service) == {
        "parameter_schema": [f"Esquema de parâmetros inválido: {problem}"]
    }
