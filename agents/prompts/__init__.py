"""The built-in prompt of each agent, as a template text (see `variables.py` for its variables).

Order of the final system prompt (`assembly.assemble_system_prompt`): the override or built-in
text, rendered → the metadata block (`metadata.py`) → the runtime guards (`agents/guards.py`),
last, so no admin edit can remove or outweigh them. Pure package.
"""

from agents.prompts import coleta, qualificacao, triagem
from agents.states import AgentName

BUILTIN_TEMPLATES: dict[AgentName, str] = {
    AgentName.TRIAGEM: triagem.TEMPLATE,
    AgentName.QUALIFICACAO: qualificacao.TEMPLATE,
    AgentName.COLETA: coleta.TEMPLATE,
}


def builtin_template(agent: AgentName) -> str:
    """The built-in prompt template of a prompt agent; KeyError for orchestrator/summary."""
    return BUILTIN_TEMPLATES[agent]
