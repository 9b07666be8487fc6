"""``python -m service --host H --port P --data-dir D``: serve kpca-stream with uvicorn.

Every setting of `service.settings.Settings` is a flag (``--max-body-bytes``, ``--api-keys-file``,
...), generated from the model by pydantic-settings' command-line source with its description and
environment variable in ``--help``; a flag overrides its ``KPCA_*`` variable. Without API keys
(``KPCA_API_KEYS``) the service listens on loopback only: asking for another interface exits with
status 2, unless ``KPCA_ALLOW_UNAUTHENTICATED=1``. A configuration that cannot be read (a
malformed key entry, say) also exits with status 2, naming the setting.
"""

from __future__ import annotations

import logging
import os
import re
import sys
from typing import NoReturn

import uvicorn
from pydantic import ValidationError
from pydantic_settings import SettingsError

from service.access_log import log_config
from service.app import create_app
from service.flags import settings_source
from service.http_protocol import HTTP_PROTOCOL
from service.processes import api_process_count, serve_processes
from service.security import LOOPBACK_HOSTS, allowed_hosts
from service.settings import Settings

log = logging.getLogger("service")

#: exit status for a configuration that must not be served
CONFIG_ERROR = 2



def settings_from(argv: list[str] | None) -> Settings:
    """`Settings` from the ``KPCA_*`` environment overridden by the flags in ``argv`` (None: sys.argv);
    ``--help`` prints every flag and exits 0. A value that cannot be read exits with status 2 naming
    the flag and its variable, never echoing the values given (they may be API keys)."""
    argv = sys.argv[1:] if argv is None else list(argv)
    try:
        return Settings(_cli_settings_source=settings_source(argv))
    except SettingsError as exc:
        _exit(_without_values(str(exc)))
    except ValidationError as exc:
        problems = "; ".join(f"{_flag(e['loc'])}: {e['msg']}" for e in exc.errors())
        _exit(f"invalid configuration: {problems}")


def _flag(loc: tuple) -> str:
    if not loc:
        return "settings"
    name = str(loc[0])
    return f"--{name.replace('_', '-')} (KPCA_{name.upper()})"


def _without_values(message: str) -> str:
    """An argparse message with the unrecognised arguments' values left out (``--api-key SECRET``)."""
    return re.sub(r"unrecognized arguments: (.*)",
                  lambda m: "unrecognized arguments: " + " ".join(t for t in m.group(1).split() if t.startswith("-")),
                  message)


def _exit(message: str) -> NoReturn:
    print(f"kpca-stream: {message} (python -m service --help lists the flags)", file=sys.stderr)
    raise SystemExit(CONFIG_ERROR) from None


def bind_refusal(settings: Settings) -> str | None:
    """Why ``settings`` must not be served (listening beyond loopback without keys), or None."""
    if settings.api_keys or settings.allow_unauthenticated:
        return None
    if settings.host.strip("[]").lower() in LOOPBACK_HOSTS:
        return None
    return (f"refusing to listen on {settings.host} without API keys: anyone who can reach it could "
            "read, change and delete every data set and model. Configure keys with KPCA_API_KEYS "
            "(key:scope,...) or KPCA_API_KEYS_FILE, listen on 127.0.0.1, or opt out with "
            "KPCA_ALLOW_UNAUTHENTICATED=1")


def main(argv: list[str] | None = None) -> None:
    settings = settings_from(argv)  # the workers' settings too (workers.settings): a value they cannot use
    # stops the start, not a fit
    refusal = bind_refusal(settings)
    if refusal is not None:
        print(f"kpca-stream: {refusal}", file=sys.stderr)
        raise SystemExit(CONFIG_ERROR)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    _log_access_policy(settings)
    processes = api_process_count(settings)
    if processes > 1:
        serve_processes(settings, sys.argv[1:] if argv is None else list(argv), processes)
        return
    app = create_app(settings)
    grace = settings.shutdown_timeout_s  # seconds, a float: uvicorn hands it to asyncio.timeout
    uvicorn.run(app, host=settings.host, port=settings.port, log_config=log_config(), http=HTTP_PROTOCOL,
                access_log=settings.access_log,
                timeout_graceful_shutdown=grace)  # type: ignore[arg-type]  # uvicorn says int; a float works


def _log_access_policy(settings: Settings) -> None:
    hosts = ", ".join(allowed_hosts(settings))
    if settings.api_keys:
        log.info("API keys required on every route but /healthz (%d keys configured); Host header allowed: %s",
                 len(settings.api_keys), hosts)
    elif settings.allow_unauthenticated and settings.host.strip("[]").lower() not in LOOPBACK_HOSTS:
        log.warning("no API keys and KPCA_ALLOW_UNAUTHENTICATED=1: listening on %s with every route open "
                    "to anyone who can reach it", settings.host)
    else:
        log.info("no API keys configured (KPCA_API_KEYS): listening on %s only, where only this machine "
                 "can connect; Host header allowed: %s", settings.host, hosts)
    if settings.host in ("0.0.0.0", "::") and not settings.allowed_hosts:
        log.warning("listening on every interface but answering only Host %s: set KPCA_ALLOWED_HOSTS to "
                    "the names clients use (or * for any)", hosts)
    if settings.cors_origins:
        log.info("CORS allowed for origins: %s", ", ".join(settings.cors_origins))


if __name__ == "__main__":
    main()
    # Served by several processes, all stopped and the cluster closed: a close that timed out (a worker
    # busy in a task) leaves dask's loop thread finishing it, which held the exit for ~9 s more.
    sys.stdout.flush()
    sys.stderr.flush()
    logging.shutdown()
    os._exit(0)
