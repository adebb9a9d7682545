"""The two items of an agent call that are about its conversation (docs/decisions/0053).

- The context item, sent last, after the history: what may change from one call to the next —
  the clock and the business hours, the brand text, the stage, the customer's recognised name,
  the service, the collected data — and the conversation guards, which name the instance, the
  segment and the intention (`agents.guards.conversation_guards`). Each call's input then starts
  with everything the previous call of the session sent.
- The reference item, sent before the history: what the conversation looked up of the catalog —
  its segment's services (qualificacao), its loaded packages' content — which changes only when
  the segment does or a package is loaded, so it is cached with the history.

Pure module.
"""

from agents.guards import conversation_guards_section
from agents.prompts.common import STAGE_LABELS
from agents.prompts.inputs import (
    PromptInputs,
    describe_hours,
    describe_service,
    format_data,
    format_datetime,
    format_loaded_packages,
    format_phone,
    format_services,
)
from agents.states import AgentName

HEADING = "# Contexto desta conversa (gerado pelo sistema)"


def build_conversation_context(inputs: PromptInputs) -> str:
    session = inputs.session
    # The instance, the segment and the intention are named once, by the conversation guard.
    general = []
    if session.instance.brand_context.strip():
        general.append(
            f"- Sobre a marca/unidade: {' '.join(session.instance.brand_context.split())}"
        )
    general.append(f"- Agora: {format_datetime(inputs.now)} (horário de Brasília).")
    general.append(f"- Horário de atendimento humano: {describe_hours(inputs.hours)}.")
    general.append(f"- Etapa atual: {STAGE_LABELS[session.state]}.")
    sections = [HEADING + "\n" + "\n".join(general)]

    if inputs.agent is AgentName.TRIAGEM:
        name = session.customer_name or "ainda não reconhecido"
        sections.append(f"## Cliente\n- Nome reconhecido: {name}.")
    else:
        request = [f"- Serviço: {describe_service(inputs)}."]
        if session.customer_name:
            request.insert(0, f"- Cliente: {session.customer_name}.")
        sections.append("## Solicitação em andamento\n" + "\n".join(request))
        sections.append(f"## Dados técnicos já coletados\n{format_data(session.technical_data)}")
        if inputs.agent is AgentName.COLETA:
            sections.append(
                f"## Cadastro\n- Telefone do WhatsApp: {format_phone(session.customer_phone)}.\n"
                f"Dados já coletados:\n{format_data(session.registration_data)}"
            )
    sections.append(conversation_guards_section(inputs))
    return "\n\n".join(sections)


REFERENCE_HEADING = "# Referência desta conversa (gerado pelo sistema)"


def build_reference_item(inputs: PromptInputs) -> str:
    """What the conversation has looked up of the catalog, sent before the history: the active
    services of its segment (qualificacao) and the full content of its loaded packages, in the
    order they were loaded; empty when there is neither. It changes only when the segment does
    (back through triage) or a package is loaded, and then only at its end
    (docs/decisions/0053)."""
    sections = []
    if inputs.agent is AgentName.QUALIFICACAO:
        services = format_services(inputs.catalog.services_of(inputs.session.segment))
        sections.append(f"## Serviços ativos do segmento\n{services}")
    if inputs.loaded_packages:
        sections.append(
            "## Pacotes carregados nesta conversa\n"
            + format_loaded_packages(inputs.loaded_packages)
        )
    if not sections:
        return ""
    return "\n\n".join([REFERENCE_HEADING, *sections])
