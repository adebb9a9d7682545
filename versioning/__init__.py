"""The versioned admin shared by every app whose admin-edited models keep history.

`versioning.admin.VersionedAdmin` (simple-history's list of versions and revert, read-only
versions for those who may not change the object) and `versioning.diff` (a field-by-field diff
between any two versions), `versioning.history` (a row's latest version, the historical
model), with their templates and stylesheet. It sits below the apps that use
it (knowledge_base, prompts_admin) and imports none of them; no models.
"""
