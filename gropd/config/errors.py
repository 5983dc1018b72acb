"""The one error type for bad configuration: it names the file, the key path and what was expected."""

from __future__ import annotations

from fileio import RunFileError  # results/ files that cannot be read back (eval owns the reader)

__all__ = ["ConfigError", "RunFileError"]


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
