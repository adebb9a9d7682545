"""Staff members as the admin sees them: in the groups the data migrations create
(conversations/migrations/0002_staff_groups.py), or with permissions of their own."""

from django.contrib.auth.models import Group, Permission, User
from django.test import Client

from tests import baker_recipes as recipes

SUPPORT = "Support"
PROMPT_EDITORS = "Prompt editors"
PROMPT_APPROVERS = "Prompt approvers"


def staff_member(*groups: str, permissions: tuple[str, ...] = ()) -> User:
    """A staff user in `groups`, with `permissions` ("app_label.codename") granted to them alone.

    An unknown group or permission raises, so a renamed one cannot leave a test checking a user
    with fewer rights than it says.
    """
    user = recipes.staff_user.make()
    user.groups.add(*(Group.objects.get(name=name) for name in groups))
    for permission in permissions:
        app_label, codename = permission.split(".")
        user.user_permissions.add(
            Permission.objects.get(content_type__app_label=app_label, codename=codename)
        )
    return user


def logged_in(user: User) -> Client:
    """A test client with `user`'s admin session."""
    client = Client()
    client.force_login(user)
    return client
