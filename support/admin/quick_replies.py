"""Quick replies: their admin, and ``GET …/conversations/session/<id>/quick-replies/?q=``, what
the composer's "/" lists (support/admin/quick_replies.js).

Who may do what with a reply (on top of the model permissions, which Support has for quick
replies, `support/migrations/0002_quick_replies_labels.py`):

- a personal reply is its owner's alone: colleagues neither list, read, edit nor delete it
  (a superuser may);
- a shared reply is read by everyone with the view permission and used by everyone who attends
  conversations; editing, deleting, creating one or making one's own shared takes
  ``support.manage_shared_quickreply`` (granted to no group: a superuser gives it to whoever
  keeps the team's texts) or a superuser.

The endpoint is behind the admin's login, for staff with ``conversations.attend_session``
(403 otherwise); the customer's first name is masked for staff without
``conversations.view_personal_data``, as on the page. Bad input is a 400 with a sentence, an
unknown conversation a 404, both as JSON.
"""

from typing import Any, ClassVar, cast

from django import forms
from django.contrib import admin
from django.contrib.auth.models import User
from django.core.exceptions import PermissionDenied
from django.db.models import Q, QuerySet
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.urls import URLPattern, path
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _
from django.views.decorators.http import require_GET

from agents.masking import mask_name
from conversations.models import Session
from conversations.privacy.personal_data import can_view_personal_data
from staff_auth.names import staff_name
from support.models import MANAGE_SHARED_QUICK_REPLIES, QuickReply
from support.quick_replies import first_name, quick_reply_matches
from support.staff_actions import can_attend
from versioning.admin import VersionedAdmin

QUICK_REPLIES_URL_NAME = "conversations_session_quick_replies"
MAX_QUERY_CHARS = 40


def can_manage_shared(user: Any) -> bool:
    return bool(user.is_active and user.has_perm(MANAGE_SHARED_QUICK_REPLIES))


class QuickReplyForm(forms.ModelForm[QuickReply]):
    """The reply's fields, and "shared" for those who may manage shared replies; the owner is
    decided here. `staff_user` (the person editing) and `may_share` are set per request by the
    admin: a declared field is in every form of the class, so "shared" is dropped here for the
    others, or their POST could share a reply."""

    shared = forms.BooleanField(
        label=_("shared with the team"),
        required=False,
        help_text=_("Unticked: a personal reply, listed only for its owner."),
    )
    staff_user: ClassVar[Any] = None
    may_share: ClassVar[bool] = False

    class Meta:
        model = QuickReply
        fields = ("shortcut", "title", "text")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if not self.may_share:
            del self.fields["shared"]
        elif self.instance.pk is not None:
            self.fields["shared"].initial = self.instance.owner_id is None

    def clean_shortcut(self) -> str:
        # "/Boas-Vindas" and "boas-vindas" are the same shortcut.
        return str(self.cleaned_data["shortcut"]).strip().lstrip("/").lower()

    def _owner_id(self) -> int | None:
        kept = self.instance.owner_id if self.instance.pk is not None else None
        if "shared" in self.fields:
            if self.cleaned_data.get("shared"):
                return None
            return kept or self.staff_user.pk
        # Only a personal reply's owner (or a superuser) gets a form without "shared".
        return kept if self.instance.pk is not None else self.staff_user.pk

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or self.cleaned_data
        owner_id = self._owner_id()
        self.instance.owner_id = owner_id
        shortcut = cleaned.get("shortcut")
        if shortcut:
            # The unique constraints name `owner`, which is not a form field: the model's own
            # validation skips them, so they are checked here, with a sentence.
            taken = QuickReply.objects.filter(shortcut=shortcut, owner_id=owner_id).exclude(
                pk=self.instance.pk
            )
            if taken.exists():
                message = (
                    gettext("A shared quick reply with the shortcut /%(shortcut)s exists already.")
                    if owner_id is None
                    else gettext("There is a personal quick reply with the shortcut /%(shortcut)s.")
                )
                self.add_error("shortcut", message % {"shortcut": shortcut})
        return cleaned


@admin.register(QuickReply)
class QuickReplyAdmin(VersionedAdmin[QuickReply]):
    form = QuickReplyForm
    list_display = ("shortcut", "title", "scope", "updated_at")
    search_fields = ("shortcut", "title", "text")
    list_display_links = ("shortcut", "title")

    @admin.display(description=_("scope"))
    def scope(self, obj: QuickReply) -> str:
        if obj.owner_id is None:
            return gettext("shared with the team")
        assert obj.owner is not None
        return gettext("personal to %(user)s") % {"user": staff_name(obj.owner)}

    def get_queryset(self, request: HttpRequest) -> QuerySet[QuickReply]:
        replies = super().get_queryset(request).select_related("owner")
        if request.user.is_superuser:
            return replies
        return replies.filter(Q(owner__isnull=True) | Q(owner_id=request.user.pk))

    def get_fields(self, request: HttpRequest, obj: QuickReply | None = None) -> Any:
        fields: tuple[str, ...] = ("shortcut", "title", "text")
        if can_manage_shared(request.user) and self._may_edit(request, obj):
            return (*fields, "shared")
        # A new reply of someone who may not share is personal: nothing to show.
        return fields if obj is None else (*fields, "scope")

    def get_readonly_fields(self, request: HttpRequest, obj: QuickReply | None = None) -> Any:
        return ("scope",) if "scope" in self.get_fields(request, obj) else ()

    def get_form(
        self,
        request: HttpRequest,
        obj: QuickReply | None = None,
        change: bool = False,
        **kwargs: Any,
    ) -> type[forms.ModelForm[QuickReply]]:
        form = super().get_form(request, obj, change, **kwargs)
        # The form decides the owner, so it needs the person editing.
        attributes = {
            "staff_user": request.user,
            "may_share": "shared" in self.get_fields(request, obj),
        }
        return cast(type[forms.ModelForm[QuickReply]], type(form.__name__, (form,), attributes))

    def _may_edit(self, request: HttpRequest, obj: QuickReply | None) -> bool:
        user = request.user
        if obj is None or user.is_superuser:
            return True
        if obj.owner_id is None:
            return can_manage_shared(user)
        return obj.owner_id == user.pk

    def has_view_permission(self, request: HttpRequest, obj: QuickReply | None = None) -> bool:
        if not super().has_view_permission(request, obj):
            return False
        return (
            obj is None
            or obj.owner_id is None
            or obj.owner_id == request.user.pk
            or request.user.is_superuser
        )

    def has_change_permission(self, request: HttpRequest, obj: QuickReply | None = None) -> bool:
        return super().has_change_permission(request, obj) and self._may_edit(request, obj)

    def has_delete_permission(self, request: HttpRequest, obj: QuickReply | None = None) -> bool:
        return super().has_delete_permission(request, obj) and self._may_edit(request, obj)


# --- The composer's list ----------------------------------------------------------------------


def _error(status: int, message: str) -> JsonResponse:
    return JsonResponse({"error": message}, status=status)


def parse_query(raw: str) -> str | None:
    """What follows "/" in the reply box: letters, digits and hyphens, at most
    `MAX_QUERY_CHARS` ("" lists every reply); None for anything else."""
    query = raw.strip().lstrip("/")
    if len(query) > MAX_QUERY_CHARS or not all(c.isalnum() or c == "-" for c in query):
        return None
    return query


def session_quick_replies(request: HttpRequest, session_id: int) -> HttpResponse:
    user = request.user
    if not can_attend(user):
        raise PermissionDenied
    assert isinstance(user, User)  # the admin lets only logged-in staff through
    query = parse_query(request.GET.get("q", ""))
    if query is None:
        return _error(
            400,
            gettext(
                "q: what follows the / in the reply box, up to %(limit)d letters, digits "
                "or hyphens."
            )
            % {"limit": MAX_QUERY_CHARS},
        )
    name = Session.objects.filter(pk=session_id).values_list("customer_name", flat=True).first()
    if name is None:
        return _error(404, gettext("Conversation #%(id)s does not exist.") % {"id": session_id})
    customer = first_name(name)
    if customer and not can_view_personal_data(user):
        customer = mask_name(customer)
    matches = quick_reply_matches(user=user, query=query, customer_first_name=customer)
    return JsonResponse({"results": [match.as_json() for match in matches]})


def quick_reply_urls(model_admin: admin.ModelAdmin[Session]) -> list[URLPattern]:
    """``<id>/quick-replies/``, registered through `support.admin.sessions.session_admin_urls`."""
    view = require_GET(session_quick_replies)
    return [
        path(
            "<int:session_id>/quick-replies/",
            model_admin.admin_site.admin_view(view),
            name=QUICK_REPLIES_URL_NAME,
        )
    ]
