"""``kpca``: the command line of kpca-stream, over its HTTP API (`client.api.Client`).

Every command but ``serve`` talks HTTP only; ``serve`` starts the service as a process of its own
(``python -m service``, `run_service`), so the client never imports the service's packages.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import click

from client import cli_data, cli_jobs, cli_serving, cli_show
from client.api import DEFAULT_URL
from client.cli_base import EPILOG, Group, State


@click.group(cls=Group, epilog=EPILOG, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--url", envvar="KPCA_URL", default=DEFAULT_URL, show_default=True,
              help="base URL of the kpca-stream service (env KPCA_URL)")
@click.option("--api-key", envvar="KPCA_API_KEY", default=None,
              help="API key, sent as 'Authorization: Bearer KEY' (env KPCA_API_KEY)")
@click.option("--json", "json_output", is_flag=True, help="machine-readable JSON on stdout instead of text")
@click.pass_context
def cli(ctx: click.Context, url: str, api_key: str | None, json_output: bool) -> None:
    """kpca-stream from the command line: upload data, fit kernel PCA, watch fits, project and denoise, export
    and import models."""
    ctx.obj = State(url, api_key, json_output)
    ctx.call_on_close(lambda: ctx.obj._client and ctx.obj._client.close())


@cli.command(context_settings={"ignore_unknown_options": True, "help_option_names": []})
@click.argument("options", nargs=-1, type=click.UNPROCESSED)
@click.pass_context
def serve(ctx: click.Context, options) -> None:
    """Run the service here with OPTIONS (the same as ``python -m service``: ``kpca serve --help``
    lists them, e.g. --host, --port, --data-dir, --scheduler); needs the server's packages. Exits with
    the service's status; Ctrl-C stops the service."""
    if any(option in ("-h", "--help") for option in options):
        click.echo(serve_help(ctx), nl=False)
        ctx.exit(0)
    ctx.exit(run_service(list(options)))


SERVE_TEXT = ("Run kpca-stream here: the HTTP API, the dashboard at / and an embedded dask cluster (or "
              "--scheduler's). Every option overrides the environment variable named beside it; without API "
              "keys the service listens on loopback only. Exits with the service's status; Ctrl-C stops it.")


def serve_help(ctx: click.Context) -> str:
    """``kpca serve --help`` in the style of every other command's help, from the service's own flag table
    (``python -m service.flags``, read in a child process: the client imports none of the server's
    packages). Cost: one process start."""
    done = subprocess.run([sys.executable, "-m", "service.flags"], capture_output=True, text=True)
    if done.returncode != 0:
        raise click.ClickException(f"cannot list the service's options (python -m service.flags): "
                                   f"{done.stderr.strip().splitlines()[-1:] or done.returncode}")
    formatter = ctx.make_formatter()
    formatter.write_usage(ctx.command_path, "[OPTIONS]")
    formatter.write_paragraph()
    with formatter.indentation():
        formatter.write_text(SERVE_TEXT)
    rows = [(", ".join(flag["flags"]) + (f" {flag['metavar'].upper()}" if flag["metavar"] else ""), flag["help"])
            for flag in json.loads(done.stdout)]
    with formatter.section("Options"):
        formatter.write_dl(rows + [("-h, --help", "Show this message and exit.")])
    return formatter.getvalue()


#: what the CLI passes on to the service it runs (SIGINT: see `run_service`)
FORWARDED_SIGNALS = tuple(getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name))


def run_service(argv: list[str]) -> int:
    """Run ``python -m service ARGV`` (this interpreter) as a child process until it ends; its exit status
    (128 + N for a child ended by signal N, as a shell reports it).

    Signals reach the service as if it had been started by itself. Ctrl-C in a terminal interrupts
    the whole foreground process group, the service included, so the first SIGINT the CLI gets is not
    passed on (a second one would make uvicorn skip its graceful shutdown); a later SIGINT, or any
    SIGINT when the child runs in another process group, is. SIGTERM and SIGHUP are passed on at once.
    The CLI waits for the service to finish its shutdown either way. Cost: one process start.
    """
    child: subprocess.Popen | None = None
    interrupts = 0

    def forward(signum, _frame) -> None:
        nonlocal interrupts
        if child is None:
            return
        if signum == signal.SIGINT:
            interrupts += 1
            if interrupts == 1 and _same_process_group(child.pid):
                return  # the terminal sent it to the service too
        try:
            child.send_signal(signum)
        except ProcessLookupError:  # it has just ended
            pass

    previous = {signum: signal.signal(signum, forward) for signum in FORWARDED_SIGNALS}
    try:
        child = subprocess.Popen([sys.executable, "-m", "service", *argv])
        status = child.wait()
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    return 128 - status if status < 0 else status


def _same_process_group(pid: int) -> bool:
    """Whether process ``pid`` is in this process's group (True where process groups do not exist)."""
    try:
        return os.getpgid(pid) == os.getpgrp()
    except AttributeError:  # not on POSIX: a console's Ctrl-C reaches every process attached to it
        return True
    except ProcessLookupError:
        return False


for _module in (cli_data, cli_jobs, cli_serving, cli_show):
    for _command in _module.COMMANDS:
        cli.add_command(_command)


def main() -> None:
    """Entry point of the ``kpca`` console script."""
    cli(prog_name="kpca")
