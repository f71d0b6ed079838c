"""Values as an operator reads them in a panel: times in the viewer's zone with the
zone named (`2026-05-01 14:15:00 CEST`), whole numbers with thousands separators.

The viewer's zone is the browser's when a dashboard's page has said it (`Presence`
reports `Intl.DateTimeFormat().resolvedOptions().timeZone`), else this machine's.
"""

from __future__ import annotations

import datetime as dt
import math
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import pandas as pd

from ..decoding import whole_text

_zone: dt.tzinfo | None = None


def set_zone(name: str) -> bool:
    """Show times in the IANA zone `name` from now on; False (nothing changed) for a name
    this machine does not know."""
    global _zone
    try:
        _zone = ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        return False
    return True


def zone() -> dt.tzinfo:
    """The zone times are shown in: the viewer's, else this machine's."""
    if _zone is not None:
        return _zone
    local = dt.datetime.now().astimezone().tzinfo
    return local if local is not None else dt.UTC


def _moment(value: Any) -> dt.datetime | None:
    """An instant from epoch ms (int, float or digits) or a datetime/Timestamp; None when
    the value is none of them (empty, NaT, text)."""
    if value is None or value is pd.NaT:
        return None
    if isinstance(value, pd.Timestamp):
        stamp = value if value.tzinfo else value.tz_localize("UTC")
        return stamp.to_pydatetime()
    if isinstance(value, dt.datetime):
        return value if value.tzinfo else value.replace(tzinfo=dt.UTC)
    if isinstance(value, str):
        value = whole_text(value.strip())
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    # an int too large for a float overflows in isnan as in the division
    try:
        return None if math.isnan(value) else dt.datetime.fromtimestamp(value / 1000, tz=dt.UTC)
    except (OverflowError, OSError, ValueError):
        return None


def when(value: Any, fmt: str = "%Y-%m-%d %H:%M:%S %Z") -> str:
    """`value` (epoch ms or a timestamp) as a local time with its zone; "" when it is no time."""
    moment = _moment(value)
    return "" if moment is None else moment.astimezone(zone()).strftime(fmt)


def clock() -> str:
    """The time now, `14:15:02 CEST`."""
    return dt.datetime.now(zone()).strftime("%H:%M:%S %Z")


def local_times(series: pd.Series) -> pd.Series:
    """A column of timestamps as local times with their zone (empty where none)."""
    return series.map(lambda v: when(v))


def number(n: Any) -> str:
    """A whole number as `1,234`; anything else as it is."""
    if isinstance(n, bool) or not isinstance(n, int):
        return str(n)
    return f"{n:,}"
