"""The context item: what one agent call knows of its conversation, sent after the history.

Everything here may change from one call to the next — the clock and the business hours, the
instance and its brand text, the stage, the customer's recognised name, the segment, intention
and service, the collected data, the loaded packages' content — and the conversation guards that
name them (`agents.guards.conversation_guards`). The invoker sends it as one ``developer`` item
at the end of the input, so each call's input starts with everything the previous call of the
session sent: the instructions, then the history (docs/decisions/0053). Pure module.
"""

from agents.guards import conversation_guards_section
from agents.prompts.common import STAGE_LABELS
from agents.prompts.inputs import (
    PromptInputs,
    describe_hours,
    describe_instance,
    describe_intent,
    describe_segment,
    describe_service,
    format_data,
    format_datetime,
    format_loaded_packages,
    format_phone,
)
from agents.states import AgentName

HEADING = "# Contexto desta conversa (gerado pelo sistema)"


def build_conversation_context(inputs: PromptInputs) -> str:
    session = inputs.session
    general = [f"- Instância (número de WhatsApp): {describe_instance(inputs)}."]
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
        request = [
            f"- Segmento: {describe_segment(inputs)}.",
            f"- Intenção: {describe_intent(inputs)}.",
            f"- Serviço: {describe_service(inputs)}.",
        ]
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


PACKAGES_HEADING = (
    "# Pacotes da base de conhecimento carregados nesta conversa (gerado pelo sistema)"
)


def build_packages_item(inputs: PromptInputs) -> str:
    """The full content of the session's loaded packages, in the order they were loaded; empty
    when none is. Sent before the history: it changes only when a package is loaded, and then
    only at its end (docs/decisions/0053)."""
    if not inputs.loaded_packages:
        return ""
    return f"{PACKAGES_HEADING}\n\n{format_loaded_packages(inputs.loaded_packages)}"
