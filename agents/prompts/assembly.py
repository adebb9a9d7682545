"""One agent call's instructions: rendered prompt text → catalog block → fixed guards, last.

The same bytes for every call of one agent and prompt version, unless the text itself uses a
per-call variable (`variables.PromptVariable.per_call`); what changes per call is the context
item (`conversation.py`), sent after the history.

The text is the active override or the built-in template, already rendered with the agent's
variables by `agents/templating.py` (this package does not import Django). Pure module.
"""

from agents.guards import with_fixed_guards
from agents.prompts.inputs import PromptInputs
from agents.prompts.metadata import build_metadata


def assemble_instructions(rendered_text: str, inputs: PromptInputs) -> str:
    body = f"{rendered_text.strip()}\n\n{build_metadata(inputs)}"
    return with_fixed_guards(body, inputs.agent, inputs.runtime)
