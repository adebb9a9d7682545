"""Action mapping: a parsed model answer becomes a validated `Action` or a precise `ContractError`.

The model proposes a code; this module decides whether the proposal is acceptable (DESIGN.md §7).
It reads the code table (`agents.codes`) for what a code is — who may use it, whether its message
is required — and owns two dispatch tables of its own: which data fields each agent may send, and
what each code requires beyond that.

Data fields, per agent (nested form preferred; the flat form is accepted):
- ``triagem``: ``segmento``, ``intencao``, ``nome_cliente``;
- ``qualificacao``: ``servico`` and ``qualification_data: {...}``; any other top-level key that
  is not reserved is read as a parameter (flat form);
- ``coleta``: ``cadastro: {...}``; any other top-level key that is not reserved is read as a
  registration field (flat form).
When a key comes in both forms the nested value wins. Keys that belong to another agent, or to a
code that was not used (``motivo`` without 98), are reported in `Action.ignored_keys`.

Options (``"opcoes"``, shape checked by the parser) are any agent's, with the codes that answer
the customer and keep the bot in the conversation (`OPTION_CODES`: 1 and 6); with any other code
they are ignored and reported: code 4 gets its own buttons (Confirmar / Corrigir, the
dispatcher's), and after 5, 8 or 98 there is no bot left to read the customer's tap.

Validation policy:
- the required fields of the code (``segmento``/``intencao`` for 2, ``servico`` and the service's
  required parameters for 3, the registration for 4, ``motivo`` for 98, ``context_needed`` for 99)
  must be present and valid *after merging with what the session already holds*, or the answer is
  an invalid contract;
- code 3 and code 4 also refuse any invalid value they carry (the data moves on to the next step,
  and the customer confirms what code 4 shows);
- any other code carrying an invalid value (an inactive segment, a service of another segment, an
  untyped parameter, a bad e-mail) is still accepted: the value is not merged and is reported in
  `Action.rejected`, so staff can see it and the agent asks again;
- the service's schema decides which parameters are technical data; anything else goes to the
  visible extras. A parameter sent before its service was known waits in the extras and is
  promoted (typed) once the service declares it; a parameter of a previous service that the new
  one does not declare moves back to the extras.

Pure module: no Django import.
"""

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from agents.codes import Code, CodeSpec, MessageRule, code_spec
from agents.context import CatalogSnapshot, ServiceInfo, SessionContext
from agents.contract import OPTIONS_KEY, ParsedLLMResponse
from agents.fields import InvalidValue, missing_for_confirmation, normalise_registration
from agents.parameters import ParameterValueError, coerce_parameter_value
from agents.states import AGENT_FOR_STATE, AgentName, HandoffMotive, HandoffReason

# Top-level keys with a meaning of their own; never read as a flat-form data field.
RESERVED_KEYS: frozenset[str] = frozenset(
    {
        "s",
        "segmento",
        "intencao",
        "nome_cliente",
        "servico",
        "qualification_data",
        "cadastro",
        "motivo",
        "context_needed",
        OPTIONS_KEY,
    }
)
# The codes whose answer may offer options (the module docstring says why only these).
OPTION_CODES: frozenset[Code] = frozenset({Code.RESPOND, Code.CORRECT_DATA})
_CODE_FIELDS: dict[Code, frozenset[str]] = {
    Code.HANDOFF: frozenset({"motivo"}),
    Code.CONTEXT_NEEDED: frozenset({"context_needed"}),
    **{code: frozenset({OPTIONS_KEY}) for code in OPTION_CODES},
}
_AGENT_FIELDS: dict[AgentName, frozenset[str]] = {
    AgentName.TRIAGEM: frozenset({"segmento", "intencao", "nome_cliente"}),
    AgentName.QUALIFICACAO: frozenset({"servico", "qualification_data"}),
    AgentName.COLETA: frozenset({"cadastro"}),
}
# Agents whose non-reserved top-level keys are read as data (the flat form).
_FLAT_FORM_AGENTS = frozenset({AgentName.QUALIFICACAO, AgentName.COLETA})
MAX_NAME_CHARS = 200


class ContractError(ValueError):
    """The answer parses but breaks the contract; `reason` is the handoff reason it leads to.

    `problem` is a stable key (``code_not_allowed``, ``missing_field``...), `field` the payload
    field concerned (``""`` when none) and ``str(error)`` a one-line English explanation that is
    stored as the handoff detail and logged. It names the field and the rule, never a value the
    model sent for a field (a customer's CPF, e-mail, phone...); catalog codes the session holds
    and package IDs are named, being the catalog's words. The raw answer stays on the event.
    """

    def __init__(
        self,
        problem: str,
        detail: str,
        *,
        field: str = "",
        reason: HandoffReason = HandoffReason.LLM_INVALID_CONTRACT,
    ) -> None:
        super().__init__(detail)
        self.problem = problem
        self.field = field
        self.reason = reason


@dataclass(frozen=True, slots=True)
class Action:
    """A validated answer: the code, the customer text, and the session's data after the merge.

    The data fields hold the session's values *after* this answer's data is merged (unchanged
    values included); the code's own effect (a state change, clearing the subject for code 7)
    is the dispatcher's. `message` is ``""`` for a code whose message is ignored.
    """

    code: Code
    agent: AgentName
    message: str
    segment: str
    intent: str
    service: str
    customer_name: str
    technical_data: Mapping[str, Any]
    technical_extras: Mapping[str, Any]
    registration_data: Mapping[str, Any]
    registration_extras: Mapping[str, Any]
    # Values sent but not merged, keyed by payload path (``cadastro.email``, ``servico``...).
    rejected: Mapping[str, InvalidValue] = field(default_factory=dict)
    ignored_keys: tuple[str, ...] = ()
    motive: HandoffMotive | None = None
    packages: tuple[str, ...] = ()
    # The options the answer offers the customer (`OPTION_CODES` only; () otherwise).
    options: tuple[str, ...] = ()

    @property
    def spec(self) -> CodeSpec:
        return _spec(self.code)


def _spec(code: Code) -> CodeSpec:
    spec = code_spec(code)
    assert spec is not None  # every Code member has a row in the table
    return spec


@dataclass(slots=True)
class _Draft:
    """The merge in progress: starts as the session's values, updated field by field."""

    spec: CodeSpec
    parsed: ParsedLLMResponse
    context: SessionContext
    catalog: CatalogSnapshot
    segment: str
    intent: str
    service: str
    customer_name: str
    technical_data: dict[str, Any]
    technical_extras: dict[str, Any]
    registration_data: dict[str, Any]
    registration_extras: dict[str, Any]
    rejected: dict[str, InvalidValue] = field(default_factory=dict)
    # Parameter values sent in this answer that failed their type (name -> error).
    invalid_parameters: dict[str, InvalidValue] = field(default_factory=dict)
    motive: HandoffMotive | None = None
    packages: tuple[str, ...] = ()

    @property
    def code(self) -> Code:
        return self.spec.code


def map_action(
    parsed: ParsedLLMResponse,
    *,
    agent: AgentName,
    context: SessionContext,
    catalog: CatalogSnapshot,
) -> Action:
    """Validate `parsed` for `agent` in `context.state`; raises `ContractError`."""
    state = context.state
    if AGENT_FOR_STATE.get(state) != agent:
        # A caller bug, not the model's: the state decides the agent.
        raise ValueError(f"agent {agent} does not serve state {state}")
    spec = code_spec(parsed.s)
    if spec is None:
        raise ContractError("unknown_code", f"code {parsed.s} is not in the code table", field="s")
    if state not in spec.allowed_states:
        raise ContractError(
            "code_not_allowed",
            f"code {parsed.s} ({spec.name}) is not allowed for {agent} in state {state}",
            field="s",
        )
    message = parsed.message.strip()
    if spec.message is MessageRule.REQUIRED and not message:
        raise ContractError(
            "empty_message", f"code {parsed.s} ({spec.name}) requires a message for the customer"
        )
    if spec.message is MessageRule.IGNORED:
        message = ""

    draft = _Draft(
        spec=spec,
        parsed=parsed,
        context=context,
        catalog=catalog,
        segment=context.segment,
        intent=context.intent,
        service=context.service,
        customer_name=context.customer_name,
        technical_data=dict(context.technical_data),
        technical_extras=dict(context.technical_extras),
        registration_data=dict(context.registration_data),
        registration_extras=dict(context.registration_extras),
    )
    _AGENT_DATA[agent](draft)
    _CODE_RULES.get(spec.code, _no_rule)(draft)

    accepted = _AGENT_FIELDS[agent] | _CODE_FIELDS.get(spec.code, frozenset())
    ignored = tuple(
        sorted(
            key
            for key in parsed.json_part
            if key != "s"
            and key not in accepted
            and (key in RESERVED_KEYS or agent not in _FLAT_FORM_AGENTS)
        )
    )
    return Action(
        code=spec.code,
        agent=agent,
        message=message,
        segment=draft.segment,
        intent=draft.intent,
        service=draft.service,
        customer_name=draft.customer_name,
        technical_data=draft.technical_data,
        technical_extras=draft.technical_extras,
        registration_data=draft.registration_data,
        registration_extras=draft.registration_extras,
        rejected=draft.rejected,
        ignored_keys=ignored,
        motive=draft.motive,
        packages=draft.packages,
        options=parsed.options if spec.code in OPTION_CODES else (),
    )


# --- Data fields per agent -------------------------------------------------------------------


def _is_blank(value: Any) -> bool:
    return value is None or (isinstance(value, str) and not value.strip())


def _code_value(value: Any) -> str:
    """A catalog code as the model may write it (case and spaces tolerated); "" if not text."""
    return value.strip().upper() if isinstance(value, str) else ""


def _triagem_data(draft: _Draft) -> None:
    payload = draft.parsed.json_part
    if "segmento" in payload and not _is_blank(payload["segmento"]):
        code = _code_value(payload["segmento"])
        if code in draft.catalog.segments:
            draft.segment = code
        else:
            draft.rejected["segmento"] = InvalidValue(
                payload["segmento"], "segmento inexistente ou inativo"
            )
    if "intencao" in payload and not _is_blank(payload["intencao"]):
        code = _code_value(payload["intencao"])
        if code in draft.catalog.intents:
            draft.intent = code
        else:
            draft.rejected["intencao"] = InvalidValue(
                payload["intencao"], "intenção inexistente ou inativa"
            )
    if "nome_cliente" in payload and not _is_blank(payload["nome_cliente"]):
        name = payload["nome_cliente"]
        if isinstance(name, str) and len(name.strip()) <= MAX_NAME_CHARS:
            draft.customer_name = " ".join(name.split())
        else:
            draft.rejected["nome_cliente"] = InvalidValue(name, "nome_cliente deve ser um texto")


def _flat_fields(payload: Mapping[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in payload.items() if key not in RESERVED_KEYS}


def _nested(draft: _Draft, key: str) -> dict[str, Any]:
    """The nested object `key` merged over the flat form; a non-object is rejected."""
    payload = draft.parsed.json_part
    merged = _flat_fields(payload)
    nested = payload.get(key)
    if isinstance(nested, Mapping):
        merged.update(nested)
    elif nested is not None:
        draft.rejected[key] = InvalidValue(nested, f"{key} deve ser um objeto")
    return merged


def _qualificacao_data(draft: _Draft) -> None:
    payload = draft.parsed.json_part
    if "servico" in payload and not _is_blank(payload["servico"]):
        code = _code_value(payload["servico"])
        service = draft.catalog.services.get(code)
        if service is None:
            draft.rejected["servico"] = InvalidValue(
                payload["servico"], "serviço inexistente ou inativo"
            )
        elif service.segment != draft.segment:
            draft.rejected["servico"] = InvalidValue(
                payload["servico"],
                f"serviço do segmento {service.segment}, não do segmento da conversa "
                f"({draft.segment or 'nenhum'})",
            )
        else:
            draft.service = service.code
    incoming = {k: v for k, v in _nested(draft, "qualification_data").items() if not _is_blank(v)}
    _merge_parameters(draft, incoming)


def _merge_parameters(draft: _Draft, incoming: Mapping[str, Any]) -> None:
    """Partition known and incoming parameters by the current service's schema."""
    service: ServiceInfo | None = draft.catalog.services.get(draft.service)
    declared = {spec.name: spec for spec in service.parameters} if service else {}
    data: dict[str, Any] = {}
    extras: dict[str, Any] = {}
    # Earlier values first (extras, then data), then this answer's, so the newest wins.
    for source in (draft.technical_extras, draft.technical_data):
        for name, value in source.items():
            spec = declared.get(name)
            if spec is None:
                extras[name] = value
                continue
            try:
                data[name] = coerce_parameter_value(spec, value)
            except ParameterValueError:
                # An old value the schema now refuses stays visible, out of the data.
                extras[name] = value
            else:
                extras.pop(name, None)
    for name, value in incoming.items():
        spec = declared.get(name)
        if spec is None:
            extras[name] = value
            data.pop(name, None)
            continue
        try:
            data[name] = coerce_parameter_value(spec, value)
        except ParameterValueError as exc:
            invalid = InvalidValue(value, str(exc))
            draft.rejected[f"qualification_data.{name}"] = invalid
            draft.invalid_parameters[name] = invalid
        else:
            extras.pop(name, None)
    draft.technical_data = data
    draft.technical_extras = extras


def _coleta_data(draft: _Draft) -> None:
    result = normalise_registration(_nested(draft, "cadastro"))
    draft.registration_data.update(result.data)
    draft.registration_extras.update(result.extras)
    for name, invalid in result.invalid.items():
        draft.rejected[f"cadastro.{name}"] = invalid
    full_name = result.data.get("nome")
    if full_name:
        draft.customer_name = full_name


_AGENT_DATA: dict[AgentName, Callable[[_Draft], None]] = {
    AgentName.TRIAGEM: _triagem_data,
    AgentName.QUALIFICACAO: _qualificacao_data,
    AgentName.COLETA: _coleta_data,
}


# --- What each code requires ------------------------------------------------------------------


def _no_rule(draft: _Draft) -> None:
    return None


def _refuse_rejected(draft: _Draft, path: str) -> None:
    invalid = draft.rejected.get(path)
    if invalid is not None:
        raise ContractError(
            "invalid_field",
            f"code {draft.code.value}: invalid {path}: {invalid.error}",
            field=path,
        )


def _to_qualification(draft: _Draft) -> None:
    for path, value, label in (
        ("segmento", draft.segment, "segment"),
        ("intencao", draft.intent, "intent"),
    ):
        _refuse_rejected(draft, path)
        if not value:
            raise ContractError(
                "missing_field", f"code 2 requires {path} (an active {label})", field=path
            )
        catalog_codes = draft.catalog.segments if path == "segmento" else draft.catalog.intents
        if value not in catalog_codes:
            # Set earlier in the session, deactivated since.
            raise ContractError(
                "invalid_field", f"code 2: {path} {value!r} is no longer active", field=path
            )


def _to_collection(draft: _Draft) -> None:
    _refuse_rejected(draft, "servico")
    if not draft.service:
        raise ContractError(
            "missing_field", "code 3 requires servico (an active service)", field="servico"
        )
    service = draft.catalog.services.get(draft.service)
    if service is None or service.segment != draft.segment:
        raise ContractError(
            "invalid_field",
            f"code 3: service {draft.service!r} is not an active service of segment "
            f"{draft.segment!r}",
            field="servico",
        )
    if draft.invalid_parameters:
        name, invalid = next(iter(draft.invalid_parameters.items()))
        raise ContractError(
            "invalid_parameter",
            f"code 3: invalid parameter {name}: {invalid.error}",
            field=f"qualification_data.{name}",
        )
    missing = [p.name for p in service.required_parameters if p.name not in draft.technical_data]
    if missing:
        raise ContractError(
            "missing_parameter",
            f"code 3: service {service.code} requires {', '.join(missing)}",
            field=f"qualification_data.{missing[0]}",
        )


def _ask_confirmation(draft: _Draft) -> None:
    invalid = sorted(path for path in draft.rejected if path.startswith("cadastro"))
    if invalid:
        _refuse_rejected(draft, invalid[0])
    missing = missing_for_confirmation(draft.registration_data)
    if missing:
        raise ContractError(
            "missing_field",
            f"code 4 requires cadastro fields {', '.join(missing)}",
            field=f"cadastro.{missing[0]}",
        )


def _handoff(draft: _Draft) -> None:
    value = draft.parsed.json_part.get("motivo")
    try:
        draft.motive = HandoffMotive(value.strip().lower() if isinstance(value, str) else "")
    except ValueError:
        allowed = ", ".join(m.value for m in HandoffMotive)
        raise ContractError(
            "missing_field" if _is_blank(value) else "invalid_field",
            f"code 98 requires motivo, one of {allowed}",
            field="motivo",
        ) from None


def _context_needed(draft: _Draft) -> None:
    value = draft.parsed.json_part.get("context_needed")
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or not items or not all(isinstance(i, str) for i in items):
        raise ContractError(
            "invalid_field",
            "code 99 requires context_needed: a package ID or a list of IDs",
            field="context_needed",
        )
    ids = tuple(dict.fromkeys(i.strip().upper() for i in items))
    unknown = [i for i in ids if i not in draft.catalog.packages]
    if unknown:
        raise ContractError(
            "unknown_package",
            f"code 99: unknown or inactive package {', '.join(map(repr, unknown))}",
            field="context_needed",
            reason=HandoffReason.UNKNOWN_PACKAGE,
        )
    draft.packages = ids


_CODE_RULES: dict[Code, Callable[[_Draft], None]] = {
    Code.TO_QUALIFICATION: _to_qualification,
    Code.TO_COLLECTION: _to_collection,
    Code.ASK_CONFIRMATION: _ask_confirmation,
    Code.HANDOFF: _handoff,
    Code.CONTEXT_NEEDED: _context_needed,
}
