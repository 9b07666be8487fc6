"""What every ``kpca`` command shares: the exit statuses, the global options' `State`, the click group
that turns the client's errors into messages in the CLI's own words, and the option readers.

The service and `client.upload` name their options as the API does (``?cascade=true``,
``name=...``, ``append=True``, ``{"passes": N}``); `FLAG_WORDS` says how each command spells them on
the command line, and `Group` rewrites a refusal's message with them before printing it.
"""

from __future__ import annotations

import json
import re

import click

from client.api import ApiError, Client, ConnectionFailed

#: exit statuses (also listed in ``kpca --help``)
OK, REFUSED, USAGE, UNREACHABLE, FIT_FAILED, SERVER_ERROR = 0, 1, 2, 3, 4, 5

EPILOG = """\b
Exit status:
  0  done
  1  the server said no (4xx): its message and the field it names are printed
  2  usage error (unknown option, missing argument)
  3  cannot connect to the server (see --url)
  4  the fit failed or was cancelled (watch, fit --wait, cluster --wait, resume --wait)
  5  server error (5xx)
"""

#: command -> [(pattern in the API's words, the command's own words)], applied to the messages it prints
FLAG_WORDS: dict[str, list[tuple[str, str]]] = {
    "upload": [(r"append=True", "--append")],
    "rm": [(r"with \?cascade=true", "with --cascade (kpca rm datasets NAME --cascade)")],
    "import": [(r"\(name=\.\.\.\)", "(--name NEW_NAME)"), (r"dataset=ANOTHER_NAME", "--dataset ANOTHER_NAME")],
    "resume": [(r'\{"passes": (\d+)\}', r"--passes \1")],
}


def in_cli_words(command: str | None, message: str) -> str:
    """``message`` with the API's spellings of ``command``'s options replaced by its flags (`FLAG_WORDS`)."""
    for pattern, words in FLAG_WORDS.get(command or "", []):
        message = re.sub(pattern, words, message)
    return message


class Group(click.Group):
    """A click group that turns the client's errors into messages (in the command's own words,
    `in_cli_words`) and `EPILOG`'s exit statuses."""

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except ApiError as exc:
            message = in_cli_words(ctx.invoked_subcommand, exc.message)
            where = f" [field: {exc.field}]" if exc.field else ""
            _fail(ctx, f"error: {message}{where} (HTTP {exc.status} {exc.code})",
                  {"status": exc.status, "code": exc.code, "message": message, "field": exc.field},
                  SERVER_ERROR if exc.status >= 500 else REFUSED)
        except ConnectionFailed as exc:
            _fail(ctx, f"error: {exc}", {"code": "connection_failed", "message": str(exc)}, UNREACHABLE)


def _fail(ctx: click.Context, text: str, error: dict, status: int) -> None:
    obj = ctx.find_object(State)
    if obj is not None and obj.json:
        click.echo(json.dumps({"error": error}))
    click.echo(text, err=True)
    ctx.exit(status)


class State:
    """The global options, shared by every command."""

    def __init__(self, url: str, api_key: str | None, json_output: bool):
        self.url, self.api_key, self.json = url, api_key, json_output
        self._client: Client | None = None

    @property
    def client(self) -> Client:
        if self._client is None:
            self._client = Client(self.url, self.api_key)
        return self._client

    def emit(self, data, text: str | None = None) -> None:
        """Print ``data`` as JSON (``--json``) or ``text`` for people."""
        if self.json:
            click.echo(json.dumps(data))
        elif text is not None:
            click.echo(text)


pass_state = click.make_pass_decorator(State)


def key_value(value: str):
    """``KEY=VALUE`` as ``(key, value)``, the value read as JSON where it parses."""
    key, sep, raw = value.partition("=")
    if not sep or not key:
        raise click.BadParameter(f"{value!r} is not KEY=VALUE")
    try:
        return key, json.loads(raw)
    except ValueError:
        return key, raw


def kernel_spec(kernel: str, sigma: float | None, kernel_params) -> dict:
    """The request's kernel object from ``--kernel``, ``--sigma`` and ``--kernel-param KEY=VALUE``s."""
    spec = {"type": kernel, **dict(key_value(p) for p in kernel_params)}
    if sigma is not None:
        spec["sigma"] = sigma
    return spec


def solver_params(params, passes: int | None) -> dict:
    """The request's ``params`` from ``--param KEY=VALUE``s and ``--passes``."""
    values = dict(key_value(p) for p in params)
    if passes is not None:
        values["passes"] = passes
    return values


def kernel_options(command):
    """The kernel options of ``fit`` and ``cluster``: --kernel, --sigma, --kernel-param."""
    for option in reversed((
        click.option("--kernel", default="gaussian", show_default=True,
                     help="kernel type (see GET /v1/kernels; rbf is gaussian)"),
        click.option("--sigma", type=float, default=None, help="Gaussian or Laplacian kernel width (default: auto)"),
        click.option("--kernel-param", "kernel_params", multiple=True, metavar="KEY=VALUE",
                     help="another kernel parameter (repeatable), e.g. --kernel-param degree=3"),
    )):
        command = option(command)
    return command


def solver_options(command):
    """The solver options of ``fit`` and ``cluster``: --solver, --passes, --param, --wait."""
    for option in reversed((
        click.option("--solver", default="ritz", show_default=True, help="solver (see GET /v1/solvers)"),
        click.option("--passes", type=click.IntRange(min=1), default=None,
                     help="passes over the data, at most (default: the solver's)"),
        click.option("--param", "params", multiple=True, metavar="KEY=VALUE",
                     help="a solver parameter (repeatable; VALUE read as JSON where it parses), "
                          "e.g. --param eta0=0.05"),
        click.option("--wait", is_flag=True, help="follow the fit until it ends"),
    )):
        command = option(command)
    return command


def bar(done: int, total: int | None, width: int = 24) -> str:
    """``[#####-----]``: ``done`` of ``total`` as a text bar."""
    filled = int(width * done / total) if total else 0
    return "[" + "#" * filled + "-" * (width - filled) + "]"
