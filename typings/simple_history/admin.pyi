from typing import Any, ClassVar, TypeVar

from django.contrib import admin
from django.db.models import Model
from django.http import HttpRequest, HttpResponse

_ModelT = TypeVar("_ModelT", bound=Model)

class SimpleHistoryAdmin(admin.ModelAdmin[_ModelT]):
    object_history_template: ClassVar[str]
    object_history_list_template: ClassVar[str]
    object_history_form_template: ClassVar[str]
    def history_view(
        self, request: HttpRequest, object_id: str, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse: ...
    def history_form_view(
        self,
        request: HttpRequest,
        object_id: str,
        version_id: str,
        extra_context: dict[str, Any] | None = None,
    ) -> HttpResponse: ...
    def render_history_view(
        self, request: HttpRequest, template: str, context: dict[str, Any], **kwargs: Any
    ) -> HttpResponse: ...
    def revert_disabled(self, request: HttpRequest, obj: _ModelT | None = None) -> bool: ...
    def has_view_history_or_change_history_permission(
        self, request: HttpRequest, obj: _ModelT | None = None
    ) -> bool: ...
