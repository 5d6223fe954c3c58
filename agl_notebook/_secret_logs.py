"""The one log filter: no secret reaches a log handler.

Apart from `_secrets` because it needs `logging`, which `import agl_notebook` must not load; only the backends that
talk to a network (the Anthropic model, a JSON function's ``api``) import it.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterable, Iterator

from ._secrets import scrub_text, secrets_from_environment


class SecretLogFilter(logging.Filter):
    """Rewrites a log record that holds a secret: the environment's, a request's in flight, or a key's shape.

    The anthropic SDK logs request bodies at DEBUG and httpx2 logs every URL (query included) at INFO; the filter
    sits on those loggers, so no handler sees a secret.
    """

    def __init__(self) -> None:
        super().__init__()
        self._in_flight: dict[str, int] = {}  # secret -> how many requests in flight hold it

    def filter(self, record: logging.LogRecord) -> bool:
        """Scrub ``record``'s message in place; never drops a record."""
        message = record.getMessage()
        clean = scrub_text(message, (*secrets_from_environment(), *self._in_flight))
        if clean != message:
            record.msg, record.args = clean, ()
        return True

    @contextlib.contextmanager
    def holding(self, secrets: Iterable[str]) -> Iterator[None]:
        """Scrub ``secrets`` from log records too while the block runs (a request that sends them)."""
        held = list(secrets)
        for secret in held:
            self._in_flight[secret] = self._in_flight.get(secret, 0) + 1
        try:
            yield
        finally:
            for secret in held:
                left = self._in_flight.get(secret, 1) - 1
                if left > 0:
                    self._in_flight[secret] = left
                else:
                    self._in_flight.pop(secret, None)


LOG_FILTER = SecretLogFilter()
"""The filter on every logger that may see a secret."""


_loggers: dict[str, logging.Logger] = {}  # by name: `logging.getLogger` takes the logging lock on every call


def scrub_logs(*names: str) -> None:
    """Put `LOG_FILTER` on the loggers ``names`` (once each; again if it was taken off)."""
    for name in names:
        logger = _loggers.get(name)
        if logger is None:
            logger = _loggers[name] = logging.getLogger(name)
        if LOG_FILTER not in logger.filters:
            logger.addFilter(LOG_FILTER)
