"""The runner's named errors. A leaf: every other runner module may raise these; nothing here imports the runner."""


class RunnerError(Exception):
    """Base of every error the runner raises on bad input or a broken invariant."""


class CheckpointError(RunnerError):
    """A checkpoint folder is missing, malformed, or holds weights that do not fit its config."""


class ConfigMismatchError(RunnerError):
    """A draft does not fit its target (layer ids, hidden size, vocab)."""


class UnsupportedConfigError(RunnerError):
    """A config asks for a feature this runner does not implement (refused by name, never ignored)."""


class InvalidRequestError(RunnerError):
    """A request is malformed: empty prompt, out-of-vocab ids, too long for the model, bad sampling params."""


class CacheCapacityError(RunnerError):
    """The KV cache cannot hold a request's prompt plus its generation budget."""


class PositionInvariantError(RunnerError):
    """The draft context is not where the committed length says it must be; drafting would use a wrong context."""
