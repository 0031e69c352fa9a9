"""structlog set-up: a console renderer for people, JSON lines when asked (`--log-json` or EXTRACT_LOG_FORMAT=json)."""

from __future__ import annotations

import logging
import os
import sys

import structlog


def configure(json_logs: bool | None = None, level: str | None = None) -> None:
    if json_logs is None:
        json_logs = os.environ.get("EXTRACT_LOG_FORMAT", "").lower() == "json"
    level_name = (level or os.environ.get("EXTRACT_LOG_LEVEL") or "INFO").upper()
    renderer = structlog.processors.JSONRenderer() if json_logs else structlog.dev.ConsoleRenderer(
        colors=sys.stderr.isatty()
    )
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(logging.getLevelName(level_name)),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=False,
    )
