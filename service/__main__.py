"""``python -m service --host H --port P --data-dir D``: serve kpca-stream with uvicorn.

Options default to the ``KPCA_*`` environment (see `service.settings.Settings`).
"""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

import uvicorn

from service.app import create_app
from service.settings import get_settings


def main(argv: list[str] | None = None) -> None:
    defaults = get_settings()
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
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    app = create_app(settings)
    uvicorn.run(app, host=settings.host, port=settings.port, timeout_graceful_shutdown=settings.shutdown_timeout_s)


if __name__ == "__main__":
    main()
