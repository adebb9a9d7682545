"""Masked admin pages for staff without `conversations.view_personal_data`.

`PersonalDataMaskingMixin` goes first in a conversation admin's bases: for such staff the list's
rows and the object of the change and history pages are display copies
(`conversations.privacy.personal_data`), so every column, readonly field, title and breadcrumb
shows the masked values. The list joins each row's session (`select_related`, no extra query) so its
known values are at hand. Such staff may filter the lists only by their list filters: Django's
admin otherwise accepts a lookup on any column in the query string (`?customer_phone=...`),
which would tell them whether a given person talked to the company.
"""

from typing import Any, TypeVar

from django.contrib import admin
from django.contrib.admin.views.main import ChangeList
from django.db.models import Model, QuerySet
from django.http import HttpRequest

from agents.masking import Masker
from compat.django_private import LOOKUP_SEP
from conversations.privacy.personal_data import can_view_personal_data, masked_row

ModelT = TypeVar("ModelT", bound=Model)


class MaskingChangeList(ChangeList):
    def get_results(self, request: HttpRequest) -> None:
        super().get_results(request)
        model_admin = self.model_admin
        # Only PersonalDataMaskingMixin.get_changelist answers this class.
        assert isinstance(model_admin, PersonalDataMaskingMixin)
        if model_admin.masks_personal_data(request):
            maskers: dict[int, Masker] = {}
            self.result_list = [model_admin.mask_row(obj, maskers) for obj in self.result_list]


class PersonalDataMaskingMixin(admin.ModelAdmin[ModelT]):
    """Rows shown masked to staff who may not read personal data.

    `session_relation`: the row's path to its session (joined in masked lists), or None.
    """

    session_relation: str | None = "session"

    def masks_personal_data(self, request: HttpRequest) -> bool:
        return not can_view_personal_data(request.user)

    def mask_row(self, obj: ModelT, maskers: dict[int, Masker]) -> ModelT:
        return masked_row(obj, maskers=maskers)

    def get_queryset(self, request: HttpRequest) -> QuerySet[ModelT]:
        queryset = super().get_queryset(request)
        if self.session_relation and self.masks_personal_data(request):
            queryset = queryset.select_related(self.session_relation)
        return queryset

    def lookup_allowed(self, lookup: str, value: str, request: HttpRequest) -> bool:
        if self.masks_personal_data(request) and (
            lookup.split(LOOKUP_SEP, 1)[0] not in self.masked_lookup_fields(request)
        ):
            return False
        return super().lookup_allowed(lookup, value, request)

    def masked_lookup_fields(self, request: HttpRequest) -> set[str]:
        """The columns staff without the permission may filter by: the list filters', the
        row's session (the message log of one conversation) and the primary key."""
        allowed = {"id", "pk", self.session_relation or "id"}
        date_hierarchy = getattr(self, "date_hierarchy", None)
        if date_hierarchy:
            allowed.add(date_hierarchy.split(LOOKUP_SEP, 1)[0])
        for item in self.get_list_filter(request):
            if isinstance(item, list | tuple):
                item = item[0]
            if isinstance(item, str):
                allowed.add(item.split(LOOKUP_SEP, 1)[0])
        return allowed

    def get_changelist(self, request: HttpRequest, **kwargs: Any) -> type[ChangeList]:
        return MaskingChangeList

    def get_object(
        self, request: HttpRequest, object_id: str, from_field: str | None = None
    ) -> ModelT | None:
        obj = super().get_object(request, object_id, from_field)
        if obj is None or not self.masks_personal_data(request):
            return obj
        # A list's deferred columns are shown here: load them now, so they are masked too (a
        # deferred column read later would load the stored value).
        deferred = obj.get_deferred_fields()
        if deferred:
            obj.refresh_from_db(fields=sorted(deferred))
        return self.mask_row(obj, {})
