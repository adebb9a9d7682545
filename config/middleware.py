"""Project middleware.

`NulFreeQueryStringMiddleware`: NUL characters are removed from the query string's names and
values before any view reads ``request.GET``. PostgreSQL refuses NUL in text (``DataError``), so
``?state=%00`` or ``?q=%00`` turned every admin changelist — filters, search, the autocomplete —
into a 500 (issue 11 §7); no legitimate parameter carries one. Once, here, rather than in each
admin and filter (Django's own, other apps', the ones to come). A NUL in the path (an object
id such as ``%00/change/``, which a text primary key would pass to PostgreSQL) is answered 404:
no URL of the project contains one.
"""

from collections.abc import Callable
from typing import TYPE_CHECKING

from django.http import HttpRequest, HttpResponse, HttpResponseNotFound, QueryDict

from compat.django_private import freeze

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
