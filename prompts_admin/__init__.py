"""What prompt admins edit besides the knowledge base.

This app owns each agent's prompt override (an admin-edited template replacing the built-in
prompt; the fixed runtime guards are always appended after it), the single-row runtime
configuration (assistant identity, company name, weekly business hours, the fixed customer texts)
and the strategic companies handed straight to humans. Everything here keeps full history.
"""
