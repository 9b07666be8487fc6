"""The flags of ``python -m service``, generated from `service.settings.Settings` by pydantic-settings'
command-line source, and ``python -m service.flags``: the same flags as JSON, which ``kpca serve --help``
prints in the CLI's own style (the client never imports this package).
"""

from __future__ import annotations

import json
from typing import TypedDict

from pydantic_settings import CliSettingsSource

from service.settings import Settings


class CliOptions(TypedDict):
    """The `pydantic_settings.CliSettingsSource` options that `CLI_OPTIONS` sets, with their types."""

    cli_prog_name: str
    cli_kebab_case: bool
    cli_implicit_flags: bool
    cli_show_env_vars: bool
    cli_hide_none_type: bool
    cli_avoid_json: bool
    cli_exit_on_error: bool


#: how the flags are generated from `Settings` (`pydantic_settings.CliSettingsSource` options)
CLI_OPTIONS: CliOptions = {"cli_prog_name": "python -m service", "cli_kebab_case": True, "cli_implicit_flags": True,
               "cli_show_env_vars": True, "cli_hide_none_type": True, "cli_avoid_json": True,
               "cli_exit_on_error": False}
#: list settings take a comma-separated value (or a JSON list), whatever the type says
_LIST_METAVAR = "{list[str],str}"


def add_argument(parser, *names, **kwargs):
    """``parser.add_argument`` with a readable metavar for list settings (``A,B,...``)."""
    if kwargs.get("metavar") == _LIST_METAVAR:
        kwargs["metavar"] = "A,B,..."
    return parser.add_argument(*names, **kwargs)


def settings_source(argv: list[str], add=add_argument) -> CliSettingsSource:
    """The command-line source of `Settings` over ``argv`` (each flag declared through ``add``)."""
    return CliSettingsSource(Settings, cli_parse_args=argv, add_argument_method=add, **CLI_OPTIONS)


def flag_table() -> list[dict]:
    """Every flag of ``python -m service`` but ``--help``: ``{"flags": [...], "metavar", "help"}`` in
    declaration order; a boolean setting lists its ``--no-`` form too."""
    table = []

    def record(parser, *names, **kwargs):
        action = add_argument(parser, *names, **kwargs)
        if kwargs.get("action") != "help":
            table.append({"flags": list(action.option_strings), "metavar": kwargs.get("metavar"),
                          "help": kwargs.get("help", "")})
        return action

    settings_source([], record)
    return table



if __name__ == "__main__":
    print(json.dumps(flag_table()))
