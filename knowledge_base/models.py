from django.core.exceptions import ValidationError
from django.core.validators import MaxLengthValidator, RegexValidator
from django.db import models
from django.utils.translation import gettext_lazy as _
from simple_history.models import HistoricalRecords

from agents.parameters import ParameterSchemaError, parse_parameter_schema

CATALOG_CODE_VALIDATOR = RegexValidator(
    r"^[A-Z][A-Z0-9_]*$",
    _("Use MAIÚSCULAS_COM_SUBLINHADO (letras, dígitos e _; começa com letra)."),
)
MAX_PACKAGE_CONTENT_CHARS = 20_000


class Segment(models.Model):
    code = models.CharField(
        _("código"), max_length=64, unique=True, validators=[CATALOG_CODE_VALIDATOR]
    )
    label = models.CharField(_("nome"), max_length=120)
    health_sensitive = models.BooleanField(
        _("sensível à saúde"),
        default=False,
        help_text=_(
            "Aplica os limites de saúde (sem diagnóstico, interpretação ou conselho médico)."
        ),
    )
    is_active = models.BooleanField(_("ativo"), default=True)
    history = HistoricalRecords()

    class Meta:
        ordering = ["code"]
        verbose_name = _("segmento")
        verbose_name_plural = _("segmentos")

    def __str__(self) -> str:
        return f"{self.code} — {self.label}"


class Intent(models.Model):
    code = models.CharField(
        _("código"), max_length=64, unique=True, validators=[CATALOG_CODE_VALIDATOR]
    )
    label = models.CharField(_("nome"), max_length=120)
    is_active = models.BooleanField(_("ativo"), default=True)
    history = HistoricalRecords()

    class Meta:
        ordering = ["code"]
        verbose_name = _("intenção")
        verbose_name_plural = _("intenções")

    def __str__(self) -> str:
        return f"{self.code} — {self.label}"


def validate_parameter_schema(value: object) -> None:
    try:
        parse_parameter_schema(value)
    except ParameterSchemaError as exc:
        raise ValidationError(
            _("Esquema de parâmetros inválido: %(error)s"), params={"error": exc}
        ) from exc


class Service(models.Model):
    code = models.CharField(
        _("código"), max_length=64, unique=True, validators=[CATALOG_CODE_VALIDATOR]
    )
    label = models.CharField(_("nome"), max_length=160)
    segment = models.ForeignKey(
        Segment, on_delete=models.PROTECT, related_name="services", verbose_name=_("segmento")
    )
    description = models.TextField(
        _("descrição"), blank=True, validators=[MaxLengthValidator(4000)]
    )
    parameter_schema = models.JSONField(
        _("esquema de parâmetros"),
        default=list,
        blank=True,
        validators=[validate_parameter_schema],
        help_text=_(
            'Lista JSON de parâmetros técnicos: [{"name": "tipo_amostra", '
            '"label": "Tipo de amostra", "type": "text", "required": true}]. '
            "Tipos: text, integer, decimal, boolean, choice "
            '(com "choices": [...]), date.'
        ),
    )
    is_active = models.BooleanField(_("ativo"), default=True)
    history = HistoricalRecords()

    class Meta:
        ordering = ["segment__code", "code"]
        verbose_name = _("serviço")
        verbose_name_plural = _("serviços")
        indexes = [models.Index(fields=["segment", "is_active"], name="kb_service_segment_active")]

    def __str__(self) -> str:
        return f"{self.code} — {self.label}"


class KBPackage(models.Model):
    package_id = models.CharField(
        _("ID do pacote"), max_length=64, unique=True, validators=[CATALOG_CODE_VALIDATOR]
    )
    title = models.CharField(_("título"), max_length=160)
    description = models.CharField(
        _("descrição de uma linha"),
        max_length=200,
        help_text=_("Aparece no catálogo compacto que todo agente recebe."),
    )
    content = models.TextField(
        _("conteúdo"),
        validators=[MaxLengthValidator(MAX_PACKAGE_CONTENT_CHARS)],
        help_text=_("Texto completo entregue ao agente quando ele pede este pacote (código 99)."),
    )
    is_active = models.BooleanField(_("ativo"), default=True)
    health_sensitive = models.BooleanField(_("sensível à saúde"), default=False)
    updated_at = models.DateTimeField(_("atualizado em"), auto_now=True)
    history = HistoricalRecords()

    class Meta:
        ordering = ["package_id"]
        verbose_name = _("pacote de conhecimento")
        verbose_name_plural = _("pacotes de conhecimento")
        indexes = [models.Index(fields=["is_active", "package_id"], name="kb_package_active")]

    def __str__(self) -> str:
        return self.package_id

    def clean(self) -> None:
        if "\n" in self.description:
            raise ValidationError({"description": _("A descrição deve ter uma única linha.")})
