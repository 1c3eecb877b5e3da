"""Logging set-up for the command line (one place; modules only call ``logging.getLogger``)."""

from __future__ import annotations

import logging
import os


def setup_logging(level: str | None = None) -> None:
    """Configure root logging: ``LEVEL name: message`` on stderr.

    ``level`` defaults to ``$STORMWATCH_LOG_LEVEL`` or ``INFO``.
    """
    name = (level or os.environ.get("STORMWATCH_LOG_LEVEL") or "INFO").upper()
    logging.basicConfig(
        level=getattr(logging, name, logging.INFO),
        format="%(asctime)s %(levelname)-7s %(name)s: %(message)s",
        datefmt="%H:%M:%S",
    )
    for noisy in ("pymodbus", "amqtt", "transitions", "asyncio"):
        logging.getLogger(noisy).setLevel(max(logging.WARNING, logging.getLogger().level))
