"""The teacher-scoring interface every backend (transformers, vLLM engine, vLLM server) implements."""

from __future__ import annotations

from typing import Protocol


class TeacherScorer(Protocol):
    """Scores student responses under the teacher, prompt rendered in the teacher's own mode."""

    def score(self, prompt_ids: list[list[int]], response_ids: list[list[int]]) -> list[list[float]]:
        """Return log π_T(y_t | prompt, y_<t) for every token of every response.

        prompt_ids[r] is the teacher's own rendering of row r's prompt; response_ids[r]
        are the student's sampled tokens, appended unchanged. Output row r has
        len(response_ids[r]) entries.
        """
        ...
