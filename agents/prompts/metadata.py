"""The catalog block every agent call's instructions carry after the prompt text (DESIGN.md §6).

Only what is the same for every call of one agent: the assistant and the company (the runtime
settings), the active segments and intentions (triagem) and the compact KB catalog. The
segment/intention lists are here, not in the prompt text, so an override cannot leave the model
without the valid codes; qualificacao's services of the session's segment are in the reference
item and the rest of what changes (clock, instance, customer, collected data) in the context item
(`conversation.py`), so the provider's prompt cache reuses these instructions
(docs/decisions/0053). Nothing about strategic companies is here (their list is confidential and
any customer can ask the model to repeat its instructions): `conversations/handoff.py` matches
them in code. Pure module.
"""

from agents.prompts.inputs import (
    PromptInputs,
    format_intents,
    format_kb_catalog,
    format_segments,
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
    sections.append(
        "## Catálogo da base de conhecimento (ID: descrição)\n" + format_kb_catalog(catalog)
    )
    return "\n\n".join(sections)
