"""The two families of errors (see `agl_notebook.errors`, which names every error agl_notebook raises).

Their roots live here, in a module that imports nothing of the package, so the modules `agl_notebook.errors`
refers to (transcripts, records, payloads) can raise them without an import loop.
"""


class InputError(ValueError):
    """Something given to agl_notebook is not usable; the message says what, where, and how to fix it."""


class UpstreamUnexpected(RuntimeError):
    """The model or another upstream service did something the step cannot continue from."""
