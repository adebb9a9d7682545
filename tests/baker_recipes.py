"""model-bakery recipes: the rows the tests build again and again, with the values the webhook
fixtures and the fake servers expect.

They live here, outside the production packages. `baker.make_recipe("tests.session")` finds them
(model-bakery imports `<name>.baker_recipes` when `<name>` is not an installed app); the tests
import the recipes instead (`from tests import baker_recipes as recipes`), so that
`recipes.session.make(...)` is typed as a `Session`. Fields a test checks are given in the test
(`recipes.session.make(instance=instance, state="HUMAN")`); a recipe's value is one no test needs
to know.
"""

from uuid import uuid4

from django.contrib.auth.models import User
from django.utils import timezone
from model_bakery.recipe import Recipe, foreign_key
from model_bakery.utils import seq

from conversations.models import DeliveryStatus, Direction, Instance, Message, Session

# The number and the customer of tests/helpers/meta_payloads/*.json.
PHONE_NUMBER_ID = "100000000000001"
CUSTOMER_PHONE = "5511987654321"
CUSTOMER_USER_ID = "BR.1234567890123456"

# The instance the webhook fixtures address. A second one in the same test needs its own
# `phone_number_id` (the column is unique).
instance = Recipe(Instance, phone_number_id=PHONE_NUMBER_ID, name="Laboratório Demo")

# An open conversation in TRIAGE (the model's default), each of a customer of its own (at most one
# conversation per customer and instance is open). The `session` fixture is the fixtures' customer.
session = Recipe(Session, instance=foreign_key(instance), customer_phone=seq("551190000000"))

# The conversation of the customer the webhook fixtures' messages come from.
known_customer = session.extend(
    customer_phone=CUSTOMER_PHONE, customer_user_id=CUSTOMER_USER_ID, customer_name="Maria Silva"
)

# A customer's text as the webhook stores it: a wamid of its own, still pending.
inbound = Recipe(
    Message,
    session=foreign_key(session),
    direction=Direction.INBOUND,
    content="Oi",
    wa_message_id=lambda: f"wamid.IN{uuid4().hex[:12]}",
    wa_timestamp=timezone.now,
)

# A part of an answer committed by a turn and not sent yet.
reply = Recipe(
    Message,
    session=foreign_key(session),
    direction=Direction.OUTBOUND,
    content="Olá!",
    delivery_status=DeliveryStatus.PENDING,
)

# A member of the staff with no group and no permission: give them with `tests.helpers.staff`.
staff_user = Recipe(User, username=seq("staff-"), is_staff=True)
