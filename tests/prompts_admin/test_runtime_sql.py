"""The runtime settings' hand-written read of the strategic companies (prompts_admin/selectors.py)
against the ORM query it replaces, quoted in its comment."""

import pytest
from model_bakery import baker

from agents.sources import StrategicCompanyInfo
from prompts_admin.models import StrategicCompany
from prompts_admin.selectors import DatabasePromptSource, phone_digits

pytestmark = pytest.mark.django_db


def test_the_strategic_companies_are_the_orm_s_active_ones_by_name() -> None:
    baker.make(StrategicCompany, name="Zeta Alimentos", cnpj="", phone_numbers="+55 11 91234-5678")
    baker.make(
        StrategicCompany,
        name="Alfa Águas Claras",
        cnpj="12.345.678/0001-90",
        phone_numbers="(11) 3333-4444\n+1 415 555 0100",
    )
    baker.make(StrategicCompany, name="Inativa", phone_numbers="11 95555-0000", is_active=False)
    orm = tuple(
        StrategicCompanyInfo(name=name, cnpj=cnpj, phones=phone_digits(phones))
        for name, cnpj, phones in StrategicCompany.objects.filter(is_active=True)
        .order_by("name")
        .values_list("name", "cnpj", "phone_numbers")
    )

    companies = DatabasePromptSource().runtime().strategic_companies

    assert companies == orm
    assert [(c.name, c.cnpj, c.phones) for c in companies] == [
        ("Alfa Águas Claras", "12.345.678/0001-90", ("551133334444", "14155550100")),
        ("Zeta Alimentos", "", ("5511912345678",)),
    ]
