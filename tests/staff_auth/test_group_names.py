"""The staff groups read in pt-BR wherever the admin lists them; their rows keep their names."""

import re

import pytest
from django.contrib.auth.models import Group, User
from django.test import Client
from model_bakery import baker

from staff_auth.groups import group_display_name

pytestmark = pytest.mark.django_db


def test_the_project_groups_have_pt_br_display_names_and_others_their_own() -> None:
    names = ("Support", "Prompt editors", "Prompt approvers", "Auditoria")
    assert [group_display_name(n) for n in names] == [
        "Suporte",
        "Editores de prompt",
        "Aprovadores de prompt",
        "Auditoria",
    ]
    assert sorted(Group.objects.values_list("name", flat=True)) == [
        "Prompt approvers",
        "Prompt editors",
        "Support",
    ]


def test_the_group_list_shows_the_display_names(admin_client: Client) -> None:
    page = admin_client.get("/admin/auth/group/").content.decode()

    assert sorted(re.findall(r'<a href="/admin/auth/group/\d+/change/">([^<]+)</a>', page)) == [
        "Aprovadores de prompt",
        "Editores de prompt",
        "Suporte",
    ]


def test_the_user_list_filters_by_the_display_names(admin_client: Client) -> None:
    support = Group.objects.get(name="Support")
    page = admin_client.get("/admin/auth/user/").content.decode()

    assert f'href="?groups__id__exact={support.pk}"' in page
    assert re.search(rf'href="\?groups__id__exact={support.pk}"[^>]*>Suporte</a>', page)


def test_the_user_form_picks_groups_by_their_display_names(admin_client: Client) -> None:
    user = baker.make(User, username="marina", is_staff=True)
    support = Group.objects.get(name="Support")
    page = admin_client.get(f"/admin/auth/user/{user.pk}/change/").content.decode()

    assert f'<option value="{support.pk}">Suporte</option>' in page
