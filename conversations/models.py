from django.conf import settings
from django.db import models
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from agents.states import AgentName, HandoffReason, SessionState

STATE_CHOICES = [
    (SessionState.TRIAGE.value, _("Triagem")),
    (SessionState.QUALIFYING.value, _("Qualificação")),
    (SessionState.DATA_COLLECT.value, _("Coleta de dados")),
    (SessionState.CONFIRM.value, _("Confirmação")),
    (SessionState.HUMAN.value, _("Com humano")),
    (SessionState.CLOSED.value, _("Encerrada")),
]
AGENT_CHOICES = [
    (AgentName.TRIAGEM.value, _("triagem")),
    (AgentName.QUALIFICACAO.value, _("qualificação")),
    (AgentName.COLETA.value, _("coleta")),
    (AgentName.ORCHESTRATOR.value, _("orquestrador")),
    (AgentName.SUMMARY.value, _("resumo")),
]
HANDOFF_REASON_CHOICES = [
    (HandoffReason.MODEL_REQUESTED.value, _("pedido pelo modelo")),
    (HandoffReason.QUALIFIED_LEAD.value, _("lead qualificado")),
    (HandoffReason.LLM_INVALID_JSON.value, _("resposta do modelo em formato inválido")),
    (HandoffReason.LLM_INVALID_CONTRACT.value, _("resposta do modelo fora do contrato")),
    (HandoffReason.LLM_TIMEOUT.value, _("tempo esgotado no modelo")),
    (HandoffReason.LLM_RATE_LIMITED.value, _("limite de uso do modelo")),
    (HandoffReason.LLM_PROVIDER_ERROR.value, _("erro do provedor do modelo")),
    (HandoffReason.UNKNOWN_PACKAGE.value, _("pacote de conhecimento desconhecido")),
    (HandoffReason.ENRICHMENT_LIMIT.value, _("limite de enriquecimento")),
    (HandoffReason.ROUTING_LOOP.value, _("laço de roteamento")),
    (HandoffReason.STAFF_TAKEOVER.value, _("assumida pela equipe")),
    (HandoffReason.STRATEGIC_COMPANY.value, _("empresa estratégica")),
]


class Instance(models.Model):
    """One WhatsApp business number of the company."""

    phone_number_id = models.CharField(_("phone_number_id do WhatsApp"), max_length=32, unique=True)
    display_phone = models.CharField(_("telefone exibido"), max_length=32, blank=True)
    name = models.CharField(_("nome"), max_length=120)
    brand_context = models.TextField(
        _("contexto da marca"),
        blank=True,
        help_text=_("Texto sobre a marca/unidade entregue aos agentes como metadado."),
    )
    health_sensitive = models.BooleanField(_("sensível à saúde"), default=False)
    access_token = models.CharField(
        _("token de acesso"),
        max_length=512,
        blank=True,
        help_text=_("Opcional; vazio usa WHATSAPP_ACCESS_TOKEN. Nunca é exibido."),
    )
    is_active = models.BooleanField(_("ativa"), default=True)
    created_at = models.DateTimeField(_("criada em"), auto_now_add=True)

    class Meta:
        ordering = ["name"]
        verbose_name = _("instância")
        verbose_name_plural = _("instâncias")

    def __str__(self) -> str:
        return f"{self.name} ({self.display_phone or self.phone_number_id})"


class Session(models.Model):
    """One conversation of one customer on one instance, with a state."""

    instance = models.ForeignKey(
        Instance, on_delete=models.PROTECT, related_name="sessions", verbose_name=_("instância")
    )
    customer_phone = models.CharField(
        _("telefone do cliente"), max_length=20, blank=True, help_text=_("E.164, só dígitos")
    )
    customer_user_id = models.CharField(_("ID de usuário (BSUID)"), max_length=128, blank=True)
    customer_name = models.CharField(_("nome do cliente"), max_length=200, blank=True)
    customer_document = models.CharField(
        _("documento (CPF/CNPJ)"), max_length=14, blank=True, help_text=_("Só dígitos")
    )
    state = models.CharField(
        _("estado"), max_length=16, choices=STATE_CHOICES, default=SessionState.TRIAGE.value
    )
    segment = models.CharField(_("segmento"), max_length=64, blank=True)
    intent = models.CharField(_("intenção"), max_length=64, blank=True)
    service = models.CharField(_("serviço"), max_length=64, blank=True)
    technical_data = models.JSONField(_("dados técnicos"), default=dict, blank=True)
    technical_extras = models.JSONField(
        _("dados técnicos extras"),
        default=dict,
        blank=True,
        help_text=_("Parâmetros enviados pelo modelo que o esquema do serviço não declara."),
    )
    registration_data = models.JSONField(_("dados cadastrais"), default=dict, blank=True)
    registration_extras = models.JSONField(_("dados cadastrais extras"), default=dict, blank=True)
    loaded_packages = models.JSONField(_("pacotes carregados"), default=list, blank=True)
    handoff_reason = models.CharField(
        _("motivo da transferência"), max_length=32, choices=HANDOFF_REASON_CHOICES, blank=True
    )
    handoff_detail = models.CharField(_("detalhe da transferência"), max_length=255, blank=True)
    # Processing lease: who runs this session's turn now, and until when (DESIGN.md §4 step 2).
    lease_token = models.UUIDField(_("token do lease"), null=True, blank=True, editable=False)
    lease_expires_at = models.DateTimeField(_("lease expira em"), null=True, blank=True)
    created_at = models.DateTimeField(_("criada em"), default=timezone.now)
    last_inbound_at = models.DateTimeField(_("última mensagem do cliente"), null=True, blank=True)
    last_message_at = models.DateTimeField(_("última mensagem"), null=True, blank=True)
    handed_off_at = models.DateTimeField(_("transferida em"), null=True, blank=True)
    closed_at = models.DateTimeField(_("encerrada em"), null=True, blank=True)
    updated_at = models.DateTimeField(_("atualizada em"), auto_now=True)

    class Meta:
        ordering = ["-last_message_at", "-id"]
        verbose_name = _("conversa")
        verbose_name_plural = _("conversas")
        indexes = [
            models.Index(
                fields=["instance", "customer_phone", "-created_at"], name="session_phone"
            ),
            models.Index(
                fields=["instance", "customer_user_id", "-created_at"], name="session_user"
            ),
            models.Index(fields=["-last_message_at", "-id"], name="session_recent"),
            models.Index(fields=["state", "-last_message_at"], name="session_state_recent"),
            models.Index(fields=["handoff_reason"], name="session_handoff_reason"),
            models.Index(fields=["segment"], name="session_segment"),
            models.Index(fields=["customer_document"], name="session_document"),
            models.Index(fields=["lease_expires_at"], name="session_lease"),
        ]
        constraints = [
            # At most one open session per customer and instance, even under concurrent webhooks.
            models.UniqueConstraint(
                fields=["instance", "customer_phone"],
                condition=~models.Q(state=SessionState.CLOSED.value) & ~models.Q(customer_phone=""),
                name="session_one_open_per_phone",
            ),
            models.UniqueConstraint(
                fields=["instance", "customer_user_id"],
                condition=~models.Q(state=SessionState.CLOSED.value)
                & ~models.Q(customer_user_id=""),
                name="session_one_open_per_user_id",
            ),
        ]

    def __str__(self) -> str:
        who = self.customer_name or self.customer_phone or self.customer_user_id or "?"
        return f"#{self.pk} {who}"


class Direction(models.TextChoices):
    INBOUND = "INBOUND", _("recebida")
    OUTBOUND = "OUTBOUND", _("enviada")
    SYSTEM = "SYSTEM", _("sistema")


class DeliveryStatus(models.TextChoices):
    PENDING = "pending", _("pendente")
    SENT = "sent", _("enviada")
    DELIVERED = "delivered", _("entregue")
    READ = "read", _("lida")
    PLAYED = "played", _("reproduzida")
    FAILED = "failed", _("falhou")


SUPERSEDED = "superseded"


class Message(models.Model):
    """One row of the message log: INBOUND, OUTBOUND or SYSTEM (an event of the pipeline)."""

    session = models.ForeignKey(
        Session, on_delete=models.CASCADE, related_name="messages", verbose_name=_("conversa")
    )
    direction = models.CharField(_("direção"), max_length=8, choices=Direction.choices)
    message_type = models.CharField(
        _("tipo"),
        max_length=32,
        default="text",
        help_text=_("Tipo do WhatsApp (text, image, ...) ou, em eventos de sistema, o evento."),
    )
    agent = models.CharField(_("agente"), max_length=16, choices=AGENT_CHOICES, blank=True)
    content = models.TextField(_("conteúdo"), blank=True)
    raw_response = models.TextField(_("resposta bruta do modelo"), blank=True)
    json_part = models.JSONField(_("parte JSON"), null=True, blank=True)
    code = models.SmallIntegerField(_("código (s)"), null=True, blank=True)
    action = models.CharField(_("ação"), max_length=32, blank=True)
    error = models.CharField(_("erro"), max_length=64, blank=True)
    turn_id = models.UUIDField(_("turno"), null=True, blank=True)
    part_index = models.PositiveSmallIntegerField(_("parte"), default=0)
    wa_message_id = models.CharField(
        _("ID da mensagem no WhatsApp"), max_length=128, null=True, blank=True, unique=True
    )
    wa_timestamp = models.DateTimeField(_("horário no WhatsApp"), null=True, blank=True)
    processed_at = models.DateTimeField(
        _("processada em"),
        null=True,
        blank=True,
        help_text=_("Mensagens recebidas: quando um turno a respondeu."),
    )
    delivery_status = models.CharField(
        _("status de entrega"), max_length=16, choices=DeliveryStatus.choices, blank=True
    )
    delivery_status_at = models.DateTimeField(_("status em"), null=True, blank=True)
    delivery_error_code = models.IntegerField(_("código de erro"), null=True, blank=True)
    delivery_error_title = models.CharField(_("erro de entrega"), max_length=255, blank=True)
    send_attempts = models.PositiveSmallIntegerField(_("tentativas de envio"), default=0)
    staff_user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
        verbose_name=_("atendente"),
    )
    created_at = models.DateTimeField(_("criada em"), default=timezone.now)

    class Meta:
        ordering = ["created_at", "id"]
        verbose_name = _("mensagem")
        verbose_name_plural = _("mensagens")
        indexes = [
            models.Index(fields=["session", "created_at", "id"], name="message_session_time"),
            models.Index(
                fields=["session", "wa_timestamp"],
                condition=models.Q(direction="INBOUND", processed_at__isnull=True),
                name="message_pending_inbound",
            ),
            models.Index(fields=["turn_id"], name="message_turn"),
        ]

    def __str__(self) -> str:
        return f"{self.direction} #{self.pk} ({self.session_id})"


class DeliveryStatusEvent(models.Model):
    """One WhatsApp status callback, deduplicated on (wamid, status)."""

    wa_message_id = models.CharField(_("ID da mensagem no WhatsApp"), max_length=128)
    status = models.CharField(_("status"), max_length=16)
    message = models.ForeignKey(
        Message,
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="status_events",
        verbose_name=_("mensagem"),
    )
    wa_timestamp = models.DateTimeField(_("horário no WhatsApp"), null=True, blank=True)
    error_code = models.IntegerField(_("código de erro"), null=True, blank=True)
    error_title = models.CharField(_("erro"), max_length=255, blank=True)
    error_details = models.TextField(_("detalhes do erro"), blank=True)
    created_at = models.DateTimeField(_("recebido em"), default=timezone.now)

    class Meta:
        ordering = ["created_at", "id"]
        verbose_name = _("status de entrega")
        verbose_name_plural = _("status de entrega")
        constraints = [
            models.UniqueConstraint(
                fields=["wa_message_id", "status"], name="delivery_status_once_per_wamid"
            )
        ]

    def __str__(self) -> str:
        return f"{self.wa_message_id} {self.status}"


class WebhookOutcome(models.TextChoices):
    RECEIVED = "received", _("recebida")
    PROCESSED = "processed", _("processada")
    IGNORED = "ignored", _("ignorada")
    FAILED = "failed", _("falhou (reprocessar)")


class WebhookDelivery(models.Model):
    """The raw body of one signature-checked webhook POST, kept before it is parsed."""

    raw_body = models.BinaryField(_("corpo bruto"))
    headers = models.JSONField(_("cabeçalhos relevantes"), default=dict, blank=True)
    received_at = models.DateTimeField(_("recebida em"), default=timezone.now)
    processed_at = models.DateTimeField(_("processada em"), null=True, blank=True)
    outcome = models.CharField(
        _("resultado"),
        max_length=16,
        choices=WebhookOutcome.choices,
        default=WebhookOutcome.RECEIVED,
    )
    error = models.TextField(_("erro"), blank=True)
    messages_count = models.PositiveIntegerField(_("mensagens"), default=0)
    statuses_count = models.PositiveIntegerField(_("status"), default=0)

    class Meta:
        ordering = ["-received_at", "-id"]
        verbose_name = _("entrega de webhook")
        verbose_name_plural = _("entregas de webhook")
        indexes = [models.Index(fields=["outcome", "-received_at"], name="webhook_outcome")]

    def __str__(self) -> str:
        return f"#{self.pk} {self.outcome}"


class LLMCallPurpose(models.TextChoices):
    AGENT = "agent", _("agente")
    REPAIR = "repair", _("reparo de formato")
    SUMMARY = "summary", _("resumo operacional")


class LLMCall(models.Model):
    """One model call (agent, repair or summary): its cost, outcome and what it was built from."""

    session = models.ForeignKey(
        Session, on_delete=models.CASCADE, related_name="llm_calls", verbose_name=_("conversa")
    )
    message = models.ForeignKey(
        Message,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="llm_calls",
        verbose_name=_("mensagem"),
    )
    turn_id = models.UUIDField(_("turno"), null=True, blank=True)
    agent = models.CharField(_("agente"), max_length=16, choices=AGENT_CHOICES)
    purpose = models.CharField(_("finalidade"), max_length=16, choices=LLMCallPurpose.choices)
    model = models.CharField(_("modelo"), max_length=64)
    tokens_input = models.PositiveIntegerField(_("tokens de entrada"), default=0)
    tokens_output = models.PositiveIntegerField(_("tokens de saída"), default=0)
    latency_ms = models.PositiveIntegerField(_("latência (ms)"), default=0)
    attempts = models.PositiveSmallIntegerField(_("tentativas"), default=1)
    outcome = models.CharField(
        _("resultado"),
        max_length=32,
        help_text=_("ok, timeout, rate_limited, quota_exceeded, provider_error"),
    )
    error = models.TextField(_("erro"), blank=True)
    prompt_version = models.CharField(
        _("versão do prompt"),
        max_length=32,
        blank=True,
        help_text=_('"builtin" ou o id de histórico do override usado'),
    )
    context_snapshot = models.JSONField(_("contexto da sessão"), null=True, blank=True)
    raw_response = models.TextField(_("resposta bruta"), blank=True)
    created_at = models.DateTimeField(_("criada em"), default=timezone.now)

    class Meta:
        ordering = ["created_at", "id"]
        verbose_name = _("chamada ao modelo")
        verbose_name_plural = _("chamadas ao modelo")
        indexes = [
            models.Index(fields=["session", "created_at"], name="llmcall_session"),
            models.Index(fields=["turn_id"], name="llmcall_turn"),
        ]

    def __str__(self) -> str:
        return f"{self.purpose}/{self.agent} {self.model} {self.outcome}"


class HandoffSummary(models.Model):
    """The operational summary generated when a session is handed to humans (DESIGN.md §10)."""

    session = models.ForeignKey(
        Session, on_delete=models.CASCADE, related_name="summaries", verbose_name=_("conversa")
    )
    closing_reason = models.CharField(_("motivo do encerramento"), max_length=255, blank=True)
    identified_service = models.CharField(_("serviço identificado"), max_length=255, blank=True)
    segment = models.CharField(_("segmento"), max_length=255, blank=True)
    key_points = models.JSONField(_("pontos-chave"), default=list, blank=True)
    collected_data = models.JSONField(_("dados coletados"), default=dict, blank=True)
    next_action = models.TextField(_("próxima ação"), blank=True)
    summary_text = models.TextField(_("resumo"), blank=True)
    raw_json = models.TextField(_("resposta bruta"), blank=True)
    error = models.CharField(_("erro"), max_length=255, blank=True)
    model = models.CharField(_("modelo"), max_length=64, blank=True)
    created_at = models.DateTimeField(_("criado em"), default=timezone.now)

    class Meta:
        ordering = ["-created_at", "-id"]
        get_latest_by = "created_at"
        verbose_name = _("resumo de transferência")
        verbose_name_plural = _("resumos de transferência")
        indexes = [models.Index(fields=["session", "-created_at"], name="summary_session")]

    def __str__(self) -> str:
        return f"{self.session_id}: {self.closing_reason}"


class CrmStatus(models.TextChoices):
    PENDING = "pending", _("pendente")
    DELIVERED = "delivered", _("entregue")
    FAILED = "failed", _("falhou")


class Lead(models.Model):
    """A confirmed request (code 5): the collected data as the customer confirmed it."""

    session = models.OneToOneField(
        Session, on_delete=models.CASCADE, related_name="lead", verbose_name=_("conversa")
    )
    data = models.JSONField(_("dados"), default=dict)
    crm_status = models.CharField(
        _("status no CRM"), max_length=16, choices=CrmStatus.choices, default=CrmStatus.PENDING
    )
    crm_error = models.TextField(_("erro no CRM"), blank=True)
    created_at = models.DateTimeField(_("criado em"), default=timezone.now)

    class Meta:
        ordering = ["-created_at", "-id"]
        verbose_name = _("lead")
        verbose_name_plural = _("leads")

    def __str__(self) -> str:
        return f"lead {self.session_id}"
