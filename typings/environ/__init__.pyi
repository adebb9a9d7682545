# django-environ 0.14 ships no type information: these stubs declare the part of its API that
# config/settings.py and bench/support.py use.
import builtins
from os import PathLike
from typing import Any

class Env:
    def __init__(self, **scheme: Any) -> None: ...
    def str(
        self, var: builtins.str, default: builtins.str = ..., multiline: builtins.bool = False
    ) -> builtins.str: ...
    def bool(self, var: builtins.str, default: builtins.bool = ...) -> builtins.bool: ...
    def int(self, var: builtins.str, default: builtins.int = ...) -> builtins.int: ...
    def float(self, var: builtins.str, default: builtins.float = ...) -> builtins.float: ...
    def list(
        self, var: builtins.str, cast: Any = None, default: builtins.list[builtins.str] = ...
    ) -> builtins.list[builtins.str]: ...
    @classmethod
    def db_url_config(
        cls, url: builtins.str, engine: builtins.str | None = None
    ) -> builtins.dict[builtins.str, Any]: ...
    @classmethod
    def email_url_config(
        cls, url: builtins.str, backend: builtins.str | None = None
    ) -> builtins.dict[builtins.str, Any]: ...
    @classmethod
    def read_env(
        cls,
        env_file: builtins.str | PathLike[builtins.str] | None = None,
        overwrite: builtins.bool = False,
        parse_comments: builtins.bool = False,
        encoding: builtins.str = "utf8",
        **overrides: Any,
    ) -> None: ...
