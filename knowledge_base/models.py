from django.core.exceptions import ValidationError
from django.core.validators import MaxLengthValidator, RegexValidator
from django.db import models
from django.utils.translation import gettext_lazy as _
from simple_history.models import HistoricalRecords

from agents.parameters import ParameterSchemaError, parse_parameter_schema

CATALOG_CODE_VALIDATOR = RegexValidator(
    r"^[A-Z][A-Z0-9_]*$",
    _("Use UPPER_SNAKE_CASE (capital letters, digits and _; starting with a letter)."),
)
MAX_PACKAGE_CONTENT_CHARS = 20_000


class Segment(models.Model):
    code = models.CharField(
        _("code"), max_length=64, unique=True, validators=[CATALOG_CODE_VALIDATOR]
    )
    label = models.CharField(_("name"), max_length=120)
    health_sensitive = models.BooleanField(
        _("health-sensitive"),
        default=False,
        help_text=_("Applies the health limits (no diagnosis, interpretation or medical advice)."),
    )
    is_active = models.BooleanField(_("active"), default=True)
    history = HistoricalRecords()

    class Meta:
        ordering = ["code"]
        verbose_name = _("segment")
        verbose_name_plural = _("segments")

    def __str__(self) -> str:
        return f"{self.code} — {self.label}"


class Intent(models.Model):
    code = models.CharField(
        _("code"), max_length=64, unique=True, validators=[CATALOG_CODE_VALIDATOR]
    )
    label = models.CharField(_("name"), max_length=120)
    is_active = models.BooleanField(_("active"), default=True)
    history = HistoricalRecords()

    class Meta:
        ordering = ["code"]
        verbose_name = _("intent")
        verbose_name_plural = _("intents")

    def __str__(self) -> str:
        return f"{self.code} — {self.label}"


def validate_parameter_schema(value: object) -> None:
    try:
        parse_parameter_schema(value)
    except ParameterSchemaError as exc:
        raise ValidationError(
            _("Invalid parameter schema: %(error)s"), params={"error": exc}
        ) from exc


class Service(models.Model):
    code = models.CharField(
        _("code"), max_length=64, unique=True, validators=[CATALOG_CODE_VALIDATOR]
    )
    label = models.CharField(_("name"), max_length=160)
    segment = models.ForeignKey(
        Segment, on_delete=models.PROTECT, related_name="services", verbose_name=_("segment")
    )
    description = models.TextField(
        _("description"), blank=True, validators=[MaxLengthValidator(4000)]
    )
    parameter_schema = models.JSONField(
        _("parameter schema"),
        default=list,
        blank=True,
        validators=[validate_parameter_schema],
        help_text=_(
            'JSON list of technical parameters: [{"name": "tipo_amostra", '
            '"label": "Tipo de amostra", "type": "text", "required": true}]. '
            "Types: text, integer, decimal, boolean, choice "
            '(with "choices": [...]), date.'
        ),
    )
    is_active = models.BooleanField(_("active"), default=True)
    history = HistoricalRecords()

    class Meta:
        ordering = ["segment__code", "code"]
        verbose_name = _("service")
        verbose_name_plural = _("services")
        indexes = [models.Index(fields=["segment", "is_active"], name="kb_service_segment_active")]

    def __str__(self) -> str:
        return f"{self.code} — {self.label}"


class KBPackage(models.Model):
    package_id = models.CharField(
        _("package ID"), max_length=64, unique=True, validators=[CATALOG_CODE_VALIDATOR]
    )
    title = models.CharField(_("title"), max_length=160)
    description = models.CharField(
        _("one-line description"),
        max_length=200,
        help_text=_("Shown in the compact catalog every agent receives."),
    )
    content = models.TextField(
        _("content"),
        validators=[MaxLengthValidator(MAX_PACKAGE_CONTENT_CHARS)],
        help_text=_("Full text given to the agent when it asks for this package (code 99)."),
    )
    is_active = models.BooleanField(_("active"), default=True)
    health_sensitive = models.BooleanField(_("health-sensitive"), default=False)
    updated_at = models.DateTimeField(_("updated at"), auto_now=True)
    # The editor's change reason (`versioning.forms.ChangeReasonForm`) holds 255 characters,
    # past simple-history's default column of 100.
    history = HistoricalRecords(history_change_reason_field=models.TextField(null=True))

    class Meta:
        ordering = ["package_id"]
        verbose_name = _("knowledge package")
        verbose_name_plural = _("knowledge packages")
        indexes = [models.Index(fields=["is_active", "package_id"], name="kb_package_active")]

    def __str__(self) -> str:
        return self.package_id

    def clean(self) -> None:
        if "\n" in self.description:
            raise ValidationError({"description": _("The description must be a single line.")})
