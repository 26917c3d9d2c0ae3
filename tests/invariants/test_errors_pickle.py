"""memcert's errors cross process boundaries whole: a worker process's call to the
recorder in the parent, or a worker's own error, comes back pickled. An exception whose
constructor takes more than its message pickles without complaint and then fails to
unpickle on the other side, which once reported a TypeError instead of the error."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest

from invariants.errors import InvalidInput, ValueTooLarge
from invariants.history import HistoryError
from scenarios import ScenarioError

ERRORS = [
    HistoryError("worker 3 invokes while its op 7 is outstanding", "Complete it first.",
                 path="history.jsonl", line=12),
    HistoryError("the line is empty", "Write one entry per line."),
    InvalidInput("attribute", "", "is empty", "Name the attribute."),
    ValueTooLarge("value", "x" * 10, "is longer than 4 bytes", "Send a shorter value."),
    ScenarioError(Path("mixed.toml"), "params.entities", 0, "is not positive",
                  "Give e.g. entities = 4."),
]


@pytest.mark.parametrize("error", ERRORS, ids=lambda e: type(e).__name__)
def test_an_error_unpickles_to_the_same_type_message_and_parts(error):
    again = pickle.loads(pickle.dumps(error))
    assert type(again) is type(error)
    assert str(again) == str(error)
    assert vars(again) == vars(error)
