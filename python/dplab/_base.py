"""The base of the API's errors, apart from `errors.py`.

`results.py` raises it, and `errors.py` names `Results` (its `RunError` carries them), so the
two would import each other.
"""

from __future__ import annotations


class DplabError(Exception):
    """The base of every error the dplab API raises."""
