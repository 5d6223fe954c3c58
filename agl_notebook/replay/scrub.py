"""The scrubber's old home: it is `agl_notebook._secrets` now, re-exported here for imports that still name it."""

from .._secrets import REDACTED, scrub, scrub_text, secrets_from_environment

__all__ = ["REDACTED", "scrub", "scrub_text", "secrets_from_environment"]
