"""The one error type for bad configuration: it names the file, the key path and what was expected."""

from __future__ import annotations


class ConfigError(Exception):
    """Bad input in a manifest, profile, grid, run file or override.

    Printed as `<file>: <key.path>: <problem> (expected <expectation>)`; the CLI exits 2 on it.
    """

    def __init__(self, file: str, key: str, problem: str, expected: str | None = None):
        self.file, self.key, self.problem, self.expected = file, key, problem, expected
        message = f"{file}: {key or '<top level>'}: {problem}"
        if expected:
            message += f" (expected {expected})"
        super().__init__(message)


class RunFileError(ConfigError):
    """A file under results/ that cannot be read back: invalid, truncated, missing or edited.

    Printed as `<file>: <problem>; <what to do>`; the CLI exits 2 on it (it is a ConfigError).
    """

    def __init__(self, file: str, problem: str, remedy: str):
        self.file, self.key, self.problem, self.expected = file, "", problem, remedy
        Exception.__init__(self, f"{file}: {problem}; {remedy}")
