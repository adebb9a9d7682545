"""Project middleware.

`NulFreeQueryStringMiddleware`: NUL characters are removed from the query string's names and
values before any view reads ``request.GET``. PostgreSQL refuses NUL in text (``DataError``), so
``?state=%00`` or ``?q=%00`` turned every admin changelist — filters, search, the autocomplete —
into a 500 (issue 11 §7); no legitimate parameter carries one. Once, here, rather than in each
admin and filter (Django's own, other apps', the ones to come). A NUL in the path (an object
id such as ``%00/change/``, which a text primary key would pass to PostgreSQL) is answered 404:
no URL of the project contains one.

`AdminActionSelectionMiddleware`: an admin action's selected ids are checked against the
model's primary key before the changelist filters by them.
"""

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from django.contrib import messages
from django.contrib.admin.helpers import ACTION_CHECKBOX_NAME
from django.core.exceptions import ValidationError
from django.db.models import Model
from django.http import (
    HttpRequest,
    HttpResponse,
    HttpResponseNotFound,
    HttpResponseRedirect,
    QueryDict,
)
from django.utils.translation import gettext as _

from compat.django_private import freeze, model_admin_of

if TYPE_CHECKING:
    # Declared by django-stubs only: the type of request.GET.
    from django.http.request import _ImmutableQueryDict


class NulFreeQueryStringMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if "\x00" in request.path_info:
            return HttpResponseNotFound()
        query = request.META.get("QUERY_STRING", "")
        if "%00" in query or "\x00" in query:
            request.GET = without_nul(request.GET)
        return self.get_response(request)


def without_nul(query: QueryDict) -> "_ImmutableQueryDict":
    """A copy of `query` with NUL removed from every name and value (immutable, like GET)."""
    cleaned = QueryDict(mutable=True)
    for name, values in query.lists():
        cleaned.setlist(name.replace("\x00", ""), [value.replace("\x00", "") for value in values])
    return freeze(cleaned)


class AdminActionSelectionMiddleware:
    """An admin action posted with a selected id its model's primary key cannot hold
    (``_selected_action=1%00``, ``abc``, ``²``) goes back to the list with a message: Django's
    ``response_action`` filters ``pk__in`` the raw values, and the field's ``int()`` raised a
    ValueError, a 500 on every changelist with an action. One check for every admin (Django's,
    other apps', the ones to come), before the view runs."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_view(
        self,
        request: HttpRequest,
        view_func: Callable[..., HttpResponse],
        view_args: tuple[Any, ...],
        view_kwargs: dict[str, Any],
    ) -> HttpResponse | None:
        model_admin = model_admin_of(view_func)
        if request.method != "POST" or model_admin is None:
            return None
        selected = request.POST.getlist(ACTION_CHECKBOX_NAME)
        if all(_fits_primary_key(model_admin.model, value) for value in selected):
            return None
        messages.error(
            request, _("The selection is no longer valid. Choose the items again and retry.")
        )
        return HttpResponseRedirect(request.get_full_path())


def _fits_primary_key(model: type[Model], value: str) -> bool:
    if "\x00" in value:  # PostgreSQL refuses it in text, whatever the key's type
        return False
    try:
        model._meta.pk.to_python(value)
    except ValidationError:
        return False
    return True
