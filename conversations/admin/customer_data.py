"""The page of a customer's LGPD requests (`…/conversations/session/personal-data/`): find a
customer by phone or WhatsApp user id (BSUID), then download everything held about them or erase
it, over `conversations.privacy.customer_data`.

Superusers and staff granted ``conversations.erase_customer_data`` only; anyone else gets 403
(the admin's login check comes first). The phone or user id travels in POST bodies, never in a
URL (which access logs and browser histories keep); the session page links here with
``?session=<id>`` and the customer is read from that session. The page lists what was found by
ids, dates and states, not by name: the permission to erase is not the permission to read
personal data. Erasing asks for an explicit confirmation, records the staff member on each
session (an event and an admin log entry) and redirects back (post/redirect/get).
"""

import json
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.contrib.auth.models import User
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse
from django.utils import timezone
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from conversations.models import Session
from conversations.privacy.customer_data import (
    CustomerSelector,
    InvalidSelector,
    can_request_customer_data,
    customer_data_erase,
    customer_data_export,
    customer_find,
    customer_selector,
)

CUSTOMER_DATA_URL_NAME = "conversations_session_personal_data"
PHONE = "phone"
USER_ID = "user_id"


class CustomerForm(forms.Form):
    kind = forms.ChoiceField(
        label=gettext_lazy("Find the customer by"),
        choices=[
            (PHONE, gettext_lazy("phone")),
            (USER_ID, gettext_lazy("WhatsApp user id (BSUID)")),
        ],
        initial=PHONE,
        widget=forms.RadioSelect,
    )
    # Not required: the use case's refusal says what a valid value is.
    value = forms.CharField(label=gettext_lazy("Phone or user id"), max_length=200, required=False)
    confirm = forms.BooleanField(
        label=gettext_lazy(
            "I confirm: erase this customer's personal data from every conversation listed. "
            "This cannot be undone."
        ),
        required=False,
    )

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        kind = cleaned.get("kind")
        if kind is not None:
            value = cleaned.get("value", "")
            try:
                cleaned["selector"] = customer_selector(
                    phone=value if kind == PHONE else "", user_id=value if kind == USER_ID else ""
                )
            except InvalidSelector as refused:
                raise ValidationError(refused.message) from None
        return cleaned


def _initial(request: HttpRequest) -> dict[str, str]:
    """The customer of `?session=<id>` (its phone, else its user id); nothing otherwise."""
    raw = request.GET.get("session", "")
    session = Session.objects.filter(pk=int(raw)).first() if raw.isdigit() else None
    if session is None:
        return {}
    if session.customer_phone:
        return {"kind": PHONE, "value": session.customer_phone}
    if session.customer_user_id:
        return {"kind": USER_ID, "value": session.customer_user_id}
    return {}


def _staff(request: HttpRequest) -> User:
    """The logged-in staff member (`customer_data_view` lets no one else through)."""
    assert isinstance(request.user, User)
    return request.user


def _export_response(selector: CustomerSelector, request: HttpRequest) -> HttpResponse:
    export = customer_data_export(selector, user=_staff(request))
    stamp = timezone.localtime().strftime("%Y%m%d-%H%M%S")
    response = HttpResponse(
        json.dumps(export, ensure_ascii=False, indent=2),
        content_type="application/json; charset=utf-8",
    )
    # Named by the time, not the customer: downloads folders keep file names.
    response["Content-Disposition"] = f'attachment; filename="dados-pessoais-{stamp}.json"'
    return response


def customer_data_view(
    request: HttpRequest, *, model_admin: admin.ModelAdmin[Session]
) -> HttpResponse:
    if not can_request_customer_data(request.user):
        raise PermissionDenied
    here = reverse(f"admin:{CUSTOMER_DATA_URL_NAME}")
    found = None
    if request.method == "POST":
        form = CustomerForm(request.POST)
        action = request.POST.get("action", "find")
        if form.is_valid():
            selector: CustomerSelector = form.cleaned_data["selector"]
            if action == "export":
                return _export_response(selector, request)
            if action == "erase" and form.cleaned_data["confirm"]:
                report = customer_data_erase(
                    selector,
                    now=timezone.now(),
                    operator=_staff(request).get_username(),
                    user=_staff(request),
                )
                messages.success(
                    request,
                    _(
                        "Personal data erased: %(sessions)d conversation(s) anonymised, the "
                        "customer removed from %(deliveries)d webhook body(ies)."
                    )
                    % {"sessions": report.sessions, "deliveries": report.webhook_deliveries},
                )
                return HttpResponseRedirect(here)
            if action == "erase":
                form.add_error("confirm", _("Tick the confirmation to erase."))
            found = customer_find(selector)
    else:
        form = CustomerForm(initial=_initial(request))
    context = {
        **model_admin.admin_site.each_context(request),
        "title": _("A customer's personal data"),
        "opts": Session._meta,
        "form": form,
        "found": found,
        "action_url": here,
    }
    return TemplateResponse(request, "admin/conversations/session/customer_data.html", context)


def customer_data_urls(model_admin: admin.ModelAdmin[Session]) -> list[URLPattern]:
    """The page's URL, for `SessionAdmin.get_urls` (before the admin's `<object_id>/` ones)."""

    def view(request: HttpRequest) -> HttpResponse:
        return customer_data_view(request, model_admin=model_admin)

    return [
        path("personal-data/", model_admin.admin_site.admin_view(view), name=CUSTOMER_DATA_URL_NAME)
    ]
