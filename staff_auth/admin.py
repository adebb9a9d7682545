"""The admin of users and groups, with the staff groups' display names (`staff_auth.groups`):
in the group list, the user list's filter and the user form's group picker. Otherwise Django's
own `UserAdmin` and `GroupAdmin`."""

from typing import Any

from django.contrib import admin
from django.contrib.admin.options import IncorrectLookupParameters
from django.contrib.auth.admin import GroupAdmin, UserAdmin
from django.contrib.auth.models import Group, User
from django.db.models import ManyToManyField, QuerySet
from django.forms import ModelMultipleChoiceField
from django.http import HttpRequest
from django.utils.translation import gettext_lazy as _

from staff_auth.groups import group_display_name, group_label


class GroupFilter(admin.SimpleListFilter):
    """The user list's "by group" filter, each group by its display name."""

    title = _("groups")
    parameter_name = "groups__id__exact"

    def lookups(
        self, request: HttpRequest, model_admin: admin.ModelAdmin[Any]
    ) -> list[tuple[str, str]]:
        return [
            (str(pk), group_display_name(name))
            for pk, name in Group.objects.order_by("name").values_list("pk", "name")
        ]

    def queryset(self, request: HttpRequest, queryset: QuerySet[User]) -> QuerySet[User]:
        value = self.value()
        if not value:
            return queryset
        if not value.isascii() or not value.isdigit():
            raise IncorrectLookupParameters(value)  # the admin answers with its "?e=1" page
        return queryset.filter(groups__id=int(value))


admin.site.unregister(Group)
admin.site.unregister(User)


@admin.register(Group)
class StaffGroupAdmin(GroupAdmin):
    list_display = ("display_name",)

    @admin.display(description=_("name"), ordering="name")
    def display_name(self, obj: Group) -> str:
        return group_display_name(obj.name)


@admin.register(User)
class StaffUserAdmin(UserAdmin[User]):
    list_filter = ("is_staff", "is_superuser", "is_active", GroupFilter)

    def formfield_for_manytomany(
        self, db_field: ManyToManyField[Any, Any], request: HttpRequest, **kwargs: Any
    ) -> Any:
        field = super().formfield_for_manytomany(db_field, request, **kwargs)
        if db_field.name == "groups" and isinstance(field, ModelMultipleChoiceField):
            # Each group by its display name; the instance attribute shadows the method.
            field.label_from_instance = group_label  # type: ignore[method-assign,assignment]
        return field
