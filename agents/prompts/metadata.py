"""The catalog block every agent call's instructions carry after the prompt text (DESIGN.md §6).

Only what is the same for every call of one agent: the assistant and the company (the runtime
settings), the active segments and intentions (triagem), the active services of every segment
with their parameters (qualificacao: the session's segment is named in the context item, so the
block does not depend on it) and the compact KB catalog. The segment/intention/service lists are
here, not in the prompt text, so an override cannot leave the model without the valid codes.
What changes per call (clock, instance, customer, collected data, loaded packages) is in the
context item (`conversation.py`), sent after the history so the provider's prompt cache reuses
these instructions (docs/decisions/0053). Nothing about strategic companies is here (their list
is confidential and any customer can ask the model to repeat its instructions):
`conversations/handoff.py` matches them in code. Pure module.
"""

from agents.prompts.inputs import (
    PromptInputs,
    format_intents,
    format_kb_catalog,
    format_segments,
    format_services,
)
from agents.states import AgentName

HEADING = "# Empresa e catálogo (gerado pelo sistema)"


def build_metadata(inputs: PromptInputs) -> str:
    """The block for `inputs.agent`, from its runtime settings and catalog only."""
    runtime, catalog = inputs.runtime, inputs.catalog
    sections = [
        f"{HEADING}\n- Assistente: {runtime.agent_name}, da empresa {runtime.company_name}."
    ]
    if inputs.agent is AgentName.TRIAGEM:
        sections.append(f"## Segmentos ativos\n{format_segments(catalog)}")
        sections.append(f"## Intenções ativas\n{format_intents(catalog)}")
    elif inputs.agent is AgentName.QUALIFICACAO:
        sections.append("## Serviços ativos, por segmento\n" + _services_by_segment(inputs))
    sections.append(
        "## Catálogo da base de conhecimento (ID: descrição)\n" + format_kb_catalog(catalog)
    )
    return "\n\n".join(sections)


def _services_by_segment(inputs: PromptInputs) -> str:
    catalog = inputs.catalog
    if not catalog.segments:
        return "nenhum segmento ativo"
    return "\n".join(
        f"### {segment.code} — {segment.label}\n{format_services(catalog.services_of(code))}"
        for code, segment in catalog.segments.items()
    )
