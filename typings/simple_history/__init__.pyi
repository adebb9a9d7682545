# django-simple-history 3.13 ships no type information: these stubs declare the part of its API
# this project uses (versioning, knowledge_base, prompts_admin, the tests and the benches).
