"""The nine single-file changes of the code_change class: buggy module, fixed module, tests, value to report."""

CASES = [
    dict(id="code-bulk-discount", module="pricing", func="unit_price", skill=True,
         summary="bulk discount now applies from 100 units",
         ask="In `pricing.py`, the 10% bulk discount must apply from 100 units (inclusive); today it starts at 101.",
         before='''
BASE_PRICE = 12.00


def unit_price(quantity: int) -> float:
    if quantity > 100:
        return round(BASE_PRICE * 0.9, 2)
    return BASE_PRICE
''',
         after='''
BASE_PRICE = 12.00


def unit_price(quantity: int) -> float:
    """Price of one unit; 10% bulk discount from 100 units."""
    if quantity >= 100:
        return round(BASE_PRICE * 0.9, 2)
    return BASE_PRICE
''',
         tests='''
assert unit_price(1) == 12.0
assert unit_price(99) == 12.0
assert unit_price(100) == 10.8
assert unit_price(250) == 10.8
''',
         expr="round(100 * unit_price(100), 2)", value="1080.0", wrong="1200.0"),
    dict(id="code-slugify", module="slug", func="slugify", skill=True,
         summary="slugify collapses runs of separators and trims dashes",
         ask="`slug.slugify` must turn any run of non-alphanumeric characters into a single dash and strip "
             "leading/trailing dashes (`'Hello,  World -- 2026!'` -> `'hello-world-2026'`).",
         before='''
import re


def slugify(text: str) -> str:
    return re.sub(r"[^a-z0-9]", "-", text.lower())
''',
         after='''
import re


def slugify(text: str) -> str:
    """Lower-case slug: runs of non-alphanumerics become one dash, no dashes at the ends."""
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")
''',
         tests='''
assert slugify("Hello,  World -- 2026!") == "hello-world-2026"
assert slugify("abc") == "abc"
assert slugify("--Already-Slug--") == "already-slug"
''',
         expr="slugify('  Q3 Report: Sales & Ops ')", value="q3-report-sales-ops", wrong="q3-report--sales---ops"),
    dict(id="code-parse-duration", module="durations", func="parse_duration", skill=True,
         summary="parse_duration accepts seconds and days",
         ask="`durations.parse_duration` understands `h` and `m` (e.g. `'1h30m'` -> 5400 seconds). Add `d` "
             "(days) and `s` (seconds) units.",
         before='''
import re

UNITS = {"h": 3600, "m": 60}


def parse_duration(text: str) -> int:
    total = 0
    for amount, unit in re.findall(r"(\\d+)([hm])", text):
        total += int(amount) * UNITS[unit]
    return total
''',
         after='''
import re

UNITS = {"d": 86400, "h": 3600, "m": 60, "s": 1}


def parse_duration(text: str) -> int:
    """Seconds in a duration such as '1d2h30m15s'."""
    total = 0
    for amount, unit in re.findall(r"(\\d+)([dhms])", text):
        total += int(amount) * UNITS[unit]
    return total
''',
         tests='''
assert parse_duration("1h30m") == 5400
assert parse_duration("45s") == 45
assert parse_duration("1d") == 86400
assert parse_duration("1d1h1m1s") == 90061
''',
         expr="parse_duration('2h15m30s')", value="8130", wrong="8100"),
    dict(id="code-csv-total", module="csvsum", func="total_amount", skill=True,
         summary="total_amount skips blank lines and strips header spaces",
         ask="`csvsum.total_amount(path)` sums the `amount` column of a CSV file but crashes on `data.csv`, "
             "which has spaces after the commas in its header and blank lines. Make it handle both.",
         before='''
import csv


def total_amount(path: str) -> float:
    with open(path, newline="") as handle:
        return round(sum(float(row["amount"]) for row in csv.DictReader(handle)), 2)
''',
         after='''
import csv


def total_amount(path: str) -> float:
    """Sum of the amount column; header names are stripped and blank lines skipped."""
    with open(path, newline="") as handle:
        reader = csv.DictReader(handle, skipinitialspace=True)
        rows = [row for row in reader if row and any((v or "").strip() for v in row.values())]
        return round(sum(float(row["amount"]) for row in rows), 2)
''',
         tests='''
with open("data.csv", "w") as f:
    f.write("id, amount, note\\n1, 10.50, a\\n\\n2, 4.25, b\\n3, 100, c\\n\\n")
assert total_amount("data.csv") == 114.75
''',
         expr="total_amount('data.csv')", value="114.75", wrong="110.5"),
    dict(id="code-backoff-cap", module="backoff", func="delay", skill=True,
         summary="delay is capped at max_delay",
         ask="`backoff.delay(attempt)` doubles the wait each attempt (0.5 s base) but has no ceiling. Cap it at "
             "`max_delay` (default 30 seconds).",
         before='''
def delay(attempt: int, base: float = 0.5, max_delay: float = 30.0) -> float:
    return base * 2 ** attempt
''',
         after='''
def delay(attempt: int, base: float = 0.5, max_delay: float = 30.0) -> float:
    """Seconds to wait before retry `attempt`: exponential from `base`, at most `max_delay`."""
    return min(max_delay, base * 2 ** attempt)
''',
         tests='''
assert delay(0) == 0.5
assert delay(3) == 4.0
assert delay(10) == 30.0
assert delay(10, max_delay=60) == 60.0
''',
         expr="delay(12)", value="30.0", wrong="2048.0"),
    dict(id="code-config-port", module="settings", func="load_port", skill=False,
         summary="load_port returns an int and defaults to 8080",
         ask="`settings.load_port(env)` must return the `PORT` value as an int, and 8080 when `PORT` is not set "
             "(today it returns a string, and 80 by default).",
         before='''
def load_port(env: dict) -> int:
    return env.get("PORT", "80")
''',
         after='''
def load_port(env: dict) -> int:
    """The PORT setting as an int, 8080 when unset."""
    return int(env.get("PORT", 8080))
''',
         tests='''
assert load_port({}) == 8080
assert load_port({"PORT": "9000"}) == 9000
assert isinstance(load_port({"PORT": "1"}), int)
''',
         expr="load_port({'PORT': '7443'}) + 1", value="7444", wrong="74431"),
    dict(id="code-vat-rounding", module="tax", func="vat", skill=False,
         summary="vat rounds half up with Decimal",
         ask="`tax.vat(amount, rate)` must round half up to cents (`vat('2.50', '0.05')` is `'0.13'`); it uses "
             "float rounding today. Use `decimal`.",
         before='''
def vat(amount: str, rate: str) -> str:
    return f"{round(float(amount) * float(rate), 2):.2f}"
''',
         after='''
from decimal import ROUND_HALF_UP, Decimal


def vat(amount: str, rate: str) -> str:
    """VAT of amount at rate, rounded half up to cents, as a string."""
    value = (Decimal(amount) * Decimal(rate)).quantize(Decimal("0.01"), rounding=ROUND_HALF_UP)
    return f"{value:.2f}"
''',
         tests='''
assert vat("2.50", "0.05") == "0.13"
assert vat("100", "0.19") == "19.00"
assert vat("0.10", "0.25") == "0.03"
assert vat("10.10", "0.25") == "2.53"
''',
         expr="vat('20.20', '0.125')", value="2.53", wrong="2.52"),
    dict(id="code-normalize-email", module="emails", func="normalize_email", skill=False,
         summary="plus tags are removed for gmail.com only",
         ask="`emails.normalize_email` lower-cases and trims addresses and removes `+tag` parts, but the `+tag` "
             "removal must apply to gmail.com addresses only.",
         before='''
def normalize_email(address: str) -> str:
    local, _, domain = address.strip().lower().partition("@")
    local = local.split("+", 1)[0]
    return f"{local}@{domain}"
''',
         after='''
def normalize_email(address: str) -> str:
    """Trimmed, lower-cased address; +tags removed for gmail.com only."""
    local, _, domain = address.strip().lower().partition("@")
    if domain == "gmail.com":
        local = local.split("+", 1)[0]
    return f"{local}@{domain}"
''',
         tests='''
assert normalize_email(" Bob+x@Gmail.com") == "bob@gmail.com"
assert normalize_email("ann+news@example.org") == "ann+news@example.org"
assert normalize_email("C@D.io ") == "c@d.io"
''',
         expr="normalize_email(' Ann+News@Example.org ')", value="ann+news@example.org", wrong="ann@example.org"),
    dict(id="code-iso-week", module="weeks", func="week_label", skill=False,
         summary="week_label uses ISO weeks",
         ask="`weeks.week_label(day)` must return the ISO 8601 week label (`YYYY-Www`, ISO year and week); it uses "
             "Sunday-based `%U` weeks today.",
         before='''
from datetime import date


def week_label(day: date) -> str:
    return day.strftime("%Y-W%U")
''',
         after='''
from datetime import date


def week_label(day: date) -> str:
    """ISO 8601 week label such as 2026-W01."""
    year, week, _ = day.isocalendar()
    return f"{year}-W{week:02d}"
''',
         tests='''
from datetime import date
assert week_label(date(2026, 1, 5)) == "2026-W02"
assert week_label(date(2027, 1, 1)) == "2026-W53"
assert week_label(date(2026, 12, 31)) == "2026-W53"
''',
         expr="week_label(__import__('datetime').date(2026, 1, 1))", value="2026-W01", wrong="2026-W00"),
]
