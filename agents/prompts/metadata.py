"""The metadata block every agent call gets after the prompt text (DESIGN.md §6).

Identity, instance, business hours now, the per-agent facts of the session (triagem: recognised
name, active segments and intentions; qualificacao: segment, intention, service, the segment's
services with their parameters, partial technical data; coleta: segment, intention, service,
technical data, phone, partial registration), the compact KB catalog and the full content of the
packages loaded in this session. The segment/intention/service lists are
here, not in the prompt text, so an override cannot leave the model without the valid codes.
Nothing about strategic companies is here (their list is confidential and any customer can ask
the model to repeat its instructions): `conversations/handoff.py` matches them in code.
Pure module.
"""

from agents.prompts.inputs import (
    PromptInputs,
    describe_hours,
    describe_instance,
    describe_intent,
    describe_segment,
    describe_service,
    format_data,
    format_datetime,
    format_intents,
    format_kb_catalog,
    format_loaded_packages,
    format_phone,
    format_segments,
    format_services,
)
from agents.states import AgentName

HEADING = "# Contexto desta conversa (gerado pelo sistema)"


def build_metadata(inputs: PromptInputs) -> str:
    session = inputs.session
    general = [
        f"- Assistente: {inputs.runtime.agent_name}, da empresa {inputs.runtime.company_name}.",
        f"- Instância (número de WhatsApp): {describe_instance(inputs)}.",
    ]
    if session.instance.brand_context.strip():
        general.append(
            f"- Sobre a marca/unidade: {' '.join(session.instance.brand_context.split())}"
        )
    general.append(f"- Agora: {format_datetime(inputs.now)} (horário de Brasília).")
    general.append(f"- Horário de atendimento humano: {describe_hours(inputs.hours)}.")
    sections = [HEADING + "\n" + "\n".join(general)]

    if inputs.agent is AgentName.TRIAGEM:
        name = session.customer_name or "ainda não reconhecido"
        sections.append(f"## Cliente\n- Nome reconhecido: {name}.")
        sections.append(f"## Segmentos ativos\n{format_segments(inputs.catalog)}")
        sections.append(f"## Intenções ativas\n{format_intents(inputs.catalog)}")
    else:
        request = [
            f"- Segmento: {describe_segment(inputs)}.",
            f"- Intenção: {describe_intent(inputs)}.",
            f"- Serviço: {describe_service(inputs)}.",
        ]
        if session.customer_name:
            request.insert(0, f"- Cliente: {session.customer_name}.")
        sections.append("## Solicitação em andamento\n" + "\n".join(request))
        if inputs.agent is AgentName.QUALIFICACAO:
            services = format_services(inputs.catalog.services_of(session.segment))
            sections.append(f"## Serviços ativos do segmento\n{services}")
        sections.append(f"## Dados técnicos já coletados\n{format_data(session.technical_data)}")
        if inputs.agent is AgentName.COLETA:
            sections.append(
                f"## Cadastro\n- Telefone do WhatsApp: {format_phone(session.customer_phone)}.\n"
                f"Dados já coletados:\n{format_data(session.registration_data)}"
            )

    sections.append(
        "## Catálogo da base de conhecimento (ID: descrição)\n" + format_kb_catalog(inputs.catalog)
    )
    sections.append(
        "## Pacotes carregados nesta conversa\n" + format_loaded_packages(inputs.loaded_packages)
    )
    return "\n\n".join(sections)
