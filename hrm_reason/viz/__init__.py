"""Pictures of puzzles, of the model's prediction after every segment, and of a run's curves (`hrm viz`).

matplotlib is an optional dependency (the `viz` extra): importing this package without it is a one-line UserError.
Figures are built with matplotlib's object API on the Agg canvas (never pyplot), so no display is needed and the
global backend of a notebook that imports us is left alone.
"""

from __future__ import annotations

from hrm_reason.errors import UserError

try:
    import matplotlib  # noqa: F401
except ImportError:
    raise UserError('hrm viz needs matplotlib, which is not installed: pip install "hrm-reason[viz]"') from None
