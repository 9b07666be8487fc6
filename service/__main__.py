"""``python -m service --host H --port P --data-dir D``: serve kpca-stream with uvicorn.

Options default to the ``KPCA_*`` environment (see `service.settings.Settings`).
Without API keys (``KPCA_API_KEYS``) the service listens on loopback only:
asking for another interface exits with status 2, unless
``KPCA_ALLOW_UNAUTHENTICATED=1``. A configuration that cannot be read (a
malformed key entry, say) also exits with status 2, naming the setting.
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

import uvicorn
from pydantic import ValidationError

from service.app import create_app
from service.security import LOOPBACK_HOSTS, allowed_hosts
from service.settings import Settings, get_settings

log = logging.getLogger("service")

#: exit status for a configuration that must not be served
CONFIG_ERROR = 2


def _settings_or_exit() -> Settings:
    try:
        return get_settings()
    except ValidationError as exc:  # printed without the input values: they may hold API keys
        problems = "; ".join(f"{'.'.join(str(p) for p in e['loc']) or 'settings'}: {e['msg']}" for e in exc.errors())
        print(f"kpca-stream: invalid configuration (KPCA_* environment): {problems}", file=sys.stderr)
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
    defaults = _settings_or_exit()
    parser = argparse.ArgumentParser(prog="python -m service", description=__doc__.splitlines()[0])
    parser.add_argument("--host", default=defaults.host, help="interface to listen on (KPCA_HOST)")
    parser.add_argument("--port", type=int, default=defaults.port, help="TCP port (KPCA_PORT)")
    parser.add_argument(
        "--data-dir", type=Path, default=defaults.data_dir, help="data folder (KPCA_DATA_DIR)"
    )
    parser.add_argument(
        "--scheduler", default=defaults.scheduler, help="external dask scheduler address (KPCA_SCHEDULER)"
    )
    args = parser.parse_args(argv)

    settings = defaults.model_copy(
        update={"host": args.host, "port": args.port, "data_dir": args.data_dir, "scheduler": args.scheduler or None}
    )
    refusal = bind_refusal(settings)
    if refusal is not None:
        print(f"kpca-stream: {refusal}", file=sys.stderr)
        raise SystemExit(CONFIG_ERROR)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    _log_access_policy(settings)
    app = create_app(settings)
    uvicorn.run(app, host=settings.host, port=settings.port, timeout_graceful_shutdown=settings.shutdown_timeout_s)


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
