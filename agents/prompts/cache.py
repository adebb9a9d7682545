"""How much of an agent call's instructions the provider's prompt cache can reuse.

The provider reuses the longest prefix a request shares with a recent one (docs/decisions/0053).
The instructions are the same bytes on every call of one agent and prompt version unless the
prompt text uses a per-call variable (`variables.PromptVariable.per_call`): the cache then stops
where that variable's value first appears. `instructions_cache_share` finds that point by
rendering the text a second time with every per-call value changed, and names the variables
that move it, for the prompt editor's preview. Pure module.
"""

from collections.abc import Mapping
from dataclasses import dataclass

from agents.prompts.assembly import assemble_instructions
from agents.prompts.inputs import PromptInputs
from agents.prompts.variables import VariableValue, per_call_names
from agents.templating import render_prompt_template, variables_used


@dataclass(frozen=True, slots=True)
class InstructionsCacheShare:
    # Characters from the start of the instructions that are the same on every call.
    stable_chars: int
    total_chars: int
    # The per-call variables the text uses, in order of first use: what breaks the cache.
    breakers: tuple[str, ...] = ()

    @property
    def percent(self) -> int:
        """The stable share, in whole percent rounded down (100 only when all is stable)."""
        return self.stable_chars * 100 // self.total_chars if self.total_chars else 100


def instructions_cache_share(
    template: str, values: Mapping[str, VariableValue], inputs: PromptInputs
) -> InstructionsCacheShare:
    """The share of the instructions built from `template` rendered with `values` (the call's
    own) that does not depend on any per-call value."""
    instructions = assemble_instructions(render_prompt_template(template, values), inputs)
    per_call = per_call_names(inputs.agent)
    breakers = tuple(name for name in variables_used(template) if name in per_call)
    if not breakers:
        return InstructionsCacheShare(len(instructions), len(instructions))
    moved = {name: _moved(value) if name in per_call else value for name, value in values.items()}
    other = assemble_instructions(render_prompt_template(template, moved), inputs)
    stable = common_prefix_length(instructions, other)
    return InstructionsCacheShare(stable, len(instructions), breakers)


def common_prefix_length(first: str, second: str) -> int:
    """How many characters the two texts share from their start."""
    low, high = 0, min(len(first), len(second))
    if first[:high] == second[:high]:
        return high
    # Invariant: the first `low` characters match, the first `high` do not.
    while high - low > 1:
        middle = (low + high) // 2
        if first[:middle] == second[:middle]:
            low = middle
        else:
            high = middle
    return low


def _moved(value: VariableValue) -> VariableValue:
    # Another call's value: a boolean flips; a text starts with a character no real value
    # starts with, so the two renders part where the value starts.
    return not value if isinstance(value, bool) else f"\x00{value}"
