"""extraction: strict-format extraction from a workspace file (1-2 reference steps)."""

from __future__ import annotations

import json
from collections import Counter

from common import crit, file_check, json_eq, regex, schema, step, task

CLS = "extraction"
ONLY_JSON = r"^\s*[\{\[][\s\S]*[\}\]]\s*$"


def _schema(props: dict) -> dict:
    return {"type": "object", "properties": props, "required": sorted(props), "additionalProperties": False}


def extract(id, ask, path, content, props, expected, tc, wrong, skill):
    """One extraction task: the answer is a JSON document checked by schema (IF) and values (TC)."""
    stem = path.rsplit("/", 1)[-1].rsplit(".", 1)[0]
    out_path = f"out/{stem}.json"
    answer = json.dumps(expected, indent=2)
    keys = ", ".join(f"`{k}`" for k in props)
    if skill:
        instructions = (f"{ask}\nRead `{path}` from the workspace. Fields: {keys}. "
                        "Format the result as our extraction guidelines say.")
        IF = [crit("only_json", 40, regex(ONLY_JSON), "The reply is the JSON document and nothing else."),
              crit("schema", 20, schema(_schema(props)), "Exactly the listed keys, with the right types and formats."),
              crit("saved_copy", 40, file_check(out_path), f"Saved a copy to {out_path}.")]
        steps = [step("read_file", path=path), step("write_file", how=True, path=out_path, content=answer)]
    else:
        instructions = (f"{ask}\nRead `{path}` from the workspace. Reply with a single JSON object with exactly the "
                        f"keys {keys} and nothing else (no prose, no code fences).")
        IF = [crit("only_json", 50, regex(ONLY_JSON)),
              crit("schema", 50, schema(_schema(props)))]
        steps = [step("read_file", path=path)]
    bad = dict(expected)
    bad.update(wrong)
    return task(
        id, CLS, instructions, ["read_file", "write_file", "list_files"], skill="structured-extraction" if skill else None,
        files={path: content},
        IF=IF,
        TC=[crit(f"value_{p.replace('.', '_')}", w, json_eq(p, _dig(expected, p))) for p, w in tc],
        steps=steps, final=answer,
        sloppy="Here is the extracted data:\n```json\n" + answer + "\n```\nLet me know if you need anything else.",
        wrong=json.dumps(bad, indent=2),
    )


def _dig(value, path):
    for part in path.split("."):
        value = value[int(part)] if isinstance(value, list) else value[part]
    return value


DATE = {"type": "string", "pattern": r"^\d{4}-\d{2}-\d{2}$"}
STR = {"type": "string"}
NUM = {"type": "number"}
INT = {"type": "integer"}


def _access_log():
    rows = [("10.0.0.4", "GET", "/api/orders", 200), ("10.0.0.7", "GET", "/api/orders", 200),
            ("10.0.0.4", "POST", "/api/checkout", 502), ("10.0.0.9", "GET", "/health", 200),
            ("10.0.0.7", "GET", "/api/orders", 500), ("10.0.0.4", "GET", "/api/products", 200),
            ("10.0.0.12", "GET", "/api/orders", 200), ("10.0.0.9", "POST", "/api/checkout", 201),
            ("10.0.0.7", "GET", "/api/products", 404), ("10.0.0.4", "POST", "/api/checkout", 503),
            ("10.0.0.12", "GET", "/api/orders", 200), ("10.0.0.9", "GET", "/health", 200)]
    lines = [f'{ip} - - [02/Nov/2026:10:{i:02d}:17 +0000] "{m} {p} HTTP/1.1" {s} {512 + 37 * i} "-" "curl/8.5"'
             for i, (ip, m, p, s) in enumerate(rows)]
    expected = {"total_requests": len(rows), "server_errors": sum(1 for r in rows if r[3] >= 500),
                "top_path": Counter(r[2] for r in rows).most_common(1)[0][0], "unique_ips": len({r[0] for r in rows})}
    return "\n".join(lines) + "\n", expected


def _orders_csv():
    rows = [("A-1001", "EU", "129.90"), ("A-1002", "US", "80.00"), ("A-1003", "EU", "15.50"),
            ("A-1004", "APAC", "240.00"), ("A-1005", "US", "19.99"), ("A-1006", "EU", "54.60"),
            ("A-1007", "APAC", "12.00")]
    text = "order_id,region,amount_eur\n" + "".join(f"{o},{r},{a}\n" for o, r, a in rows)
    revenue: dict[str, float] = {}
    for _, region, amount in rows:
        revenue[region] = round(revenue.get(region, 0.0) + float(amount), 2)
    return text, {"revenue_by_region": revenue, "order_count": len(rows)}


def _bank_csv():
    rows = [("2026-10-01", "Rent", "-1450.00"), ("2026-10-03", "Salary", "3820.55"), ("2026-10-07", "Groceries", "-86.40"),
            ("2026-10-12", "Refund Ikea", "129.00"), ("2026-10-19", "Electricity", "-74.25"), ("2026-10-28", "Gym", "-39.90")]
    text = "date;description;amount\n" + "".join(f"{d};{t};{a}\n" for d, t, a in rows)
    debits = round(sum(-float(a) for _, _, a in rows if float(a) < 0), 2)
    return text, {"total_debits": debits, "largest_credit": max(float(a) for _, _, a in rows), "currency": "EUR"}


def tasks() -> list[dict]:
    """The extraction tasks."""
    log_text, log_expected = _access_log()
    orders_text, orders_expected = _orders_csv()
    bank_text, bank_expected = _bank_csv()
    errors_log = """2026-11-02T13:58:40Z INFO  worker started pid=4411
2026-11-02T14:03:11Z ERROR E1001 upstream timeout calling inventory
2026-11-02T14:03:15Z WARN  retrying inventory call (1/3)
2026-11-02T14:05:02Z ERROR E1001 upstream timeout calling inventory
2026-11-02T14:07:45Z ERROR E2040 payment provider rejected card token
2026-11-02T14:09:00Z INFO  circuit breaker open for inventory
2026-11-02T14:12:30Z ERROR E1001 upstream timeout calling inventory
"""
    return [
        extract("extract-invoice-email", "Extract the invoice details from the supplier's e-mail.", "inbox/invoice.eml",
                """From: accounts@northwind-supplies.test
To: payables@acme.test
Subject: Invoice NW-2026-0412 for October

Hello,

please find attached our invoice NW-2026-0412 dated 3 November 2026. The amount due is EUR 1.284,50
(including 19% VAT), payable within 30 days of the invoice date, i.e. by 3 December 2026.

Kind regards,
Northwind Supplies GmbH
""",
                {"invoice_number": STR, "vendor": STR, "total": NUM, "currency": STR, "due_date": DATE},
                {"invoice_number": "NW-2026-0412", "vendor": "Northwind Supplies GmbH", "total": 1284.5,
                 "currency": "EUR", "due_date": "2026-12-03"},
                [("invoice_number", 20), ("total", 30), ("currency", 15), ("due_date", 25), ("vendor", 10)],
                {"due_date": "2026-11-03", "total": 1284.05}, True),
        extract("extract-access-log", "Summarise the web server access log: number of requests, number of 5xx "
                "responses, the most requested path, and the number of distinct client IPs.", "logs/access.log",
                log_text, {"total_requests": INT, "server_errors": INT, "top_path": STR, "unique_ips": INT},
                log_expected, [("total_requests", 20), ("server_errors", 35), ("top_path", 25), ("unique_ips", 20)],
                {"server_errors": log_expected["server_errors"] + 1, "unique_ips": log_expected["unique_ips"] + 2}, True),
        extract("extract-orders-revenue", "From the orders export, compute revenue per region (EUR, 2 decimals) and "
                "the number of orders. `revenue_by_region` maps region code to revenue.", "exports/orders.csv",
                orders_text, {"revenue_by_region": {"type": "object", "additionalProperties": NUM}, "order_count": INT},
                orders_expected, [("revenue_by_region.EU", 40), ("revenue_by_region.US", 20),
                                  ("revenue_by_region.APAC", 20), ("order_count", 20)],
                {"revenue_by_region": {**orders_expected["revenue_by_region"], "EU": 145.4}}, True),
        extract("extract-action-items", "List the action items from the meeting notes in the order they appear. "
                "`action_items` is a list of objects with `owner` (first name), `task` and `due_date`.", "notes/standup.md",
                """# Platform sync, Monday 2 November 2026

Attendees: Priya, Tom, Wen, Lucas

- Release 4.2 is slipping by a week because of the migration bug.
- ACTION Priya: write the rollback runbook for the migration, by Friday 6 November.
- Tom reported that staging is healthy again.
- ACTION Wen: rotate the staging database credentials before 10 November 2026.
- ACTION Lucas: send the customer notice about the delay, due 4 Nov.
""",
                {"action_items": {"type": "array", "items": {"type": "object", "properties": {
                    "owner": STR, "task": STR, "due_date": DATE}, "required": ["owner", "task", "due_date"],
                    "additionalProperties": False}}},
                {"action_items": [
                    {"owner": "Priya", "task": "Write the rollback runbook for the migration", "due_date": "2026-11-06"},
                    {"owner": "Wen", "task": "Rotate the staging database credentials", "due_date": "2026-11-10"},
                    {"owner": "Lucas", "task": "Send the customer notice about the delay", "due_date": "2026-11-04"}]},
                [("action_items.0.owner", 15), ("action_items.0.due_date", 20), ("action_items.1.owner", 15),
                 ("action_items.1.due_date", 20), ("action_items.2.owner", 15), ("action_items.2.due_date", 15)],
                {"action_items": [
                    {"owner": "Priya", "task": "Write the rollback runbook for the migration", "due_date": "2026-11-06"},
                    {"owner": "Tom", "task": "Check staging health", "due_date": "2026-11-10"},
                    {"owner": "Lucas", "task": "Send the customer notice about the delay", "due_date": "2026-11-14"}]}, True),
        extract("extract-error-log", "From the application log, give the timestamp of the first ERROR line "
                "(`first_error_at`, as written in the log) and `error_counts`, mapping each error code to its count.",
                "logs/app.log", errors_log,
                {"first_error_at": STR, "error_counts": {"type": "object", "additionalProperties": INT}},
                {"first_error_at": "2026-11-02T14:03:11Z", "error_counts": {"E1001": 3, "E2040": 1}},
                [("first_error_at", 40), ("error_counts.E1001", 40), ("error_counts.E2040", 20)],
                {"first_error_at": "2026-11-02T13:58:40Z", "error_counts": {"E1001": 2, "E2040": 1}}, True),
        extract("extract-shipping-label", "Extract the recipient address from the scanned shipping label. "
                "`country` is the ISO 3166 alpha-2 code.", "scans/label.txt",
                """SHIP TO:
  Mme Claire Fontaine
  14 Rue des Lilas, Bât. B
  69003 Lyon
  FRANCE
REF: ORD-2954   WEIGHT: 0.8 KG
""",
                {"name": STR, "street": STR, "city": STR, "postal_code": STR, "country": STR},
                {"name": "Claire Fontaine", "street": "14 Rue des Lilas, Bât. B", "city": "Lyon",
                 "postal_code": "69003", "country": "FR"},
                [("name", 20), ("city", 25), ("postal_code", 30), ("country", 25)],
                {"postal_code": "69300", "country": "FRANCE"}, False),
        extract("extract-cv", "Extract the candidate's details from the CV. `skills` is the list of programming "
                "languages, lower case, sorted alphabetically; `years_experience` counts full years of professional "
                "work up to 2026.", "candidates/cv.txt",
                """JONAS WEBER
jonas.weber@mail.test | Berlin

EXPERIENCE
2019 - 2026  Backend engineer, Fintech Nord (Go, Python, PostgreSQL)
2017 - 2019  Junior developer, Webagentur Süd (PHP, JavaScript)

EDUCATION
2013 - 2017  B.Sc. Computer Science, TU Dresden (Java)
""",
                {"name": STR, "email": STR, "years_experience": INT, "skills": {"type": "array", "items": STR}},
                {"name": "Jonas Weber", "email": "jonas.weber@mail.test", "years_experience": 9,
                 "skills": ["go", "java", "javascript", "php", "python"]},
                [("email", 25), ("years_experience", 35), ("skills", 40)],
                {"years_experience": 13, "skills": ["go", "python"]}, False),
        extract("extract-bank-statement", "From the bank statement (semicolon-separated, EUR), compute "
                "`total_debits` (sum of outgoing amounts, as a positive number), `largest_credit`, and `currency`.",
                "statements/oct.csv", bank_text, {"total_debits": NUM, "largest_credit": NUM, "currency": STR},
                bank_expected, [("total_debits", 50), ("largest_credit", 35), ("currency", 15)],
                {"total_debits": round(bank_expected["total_debits"] - 86.40, 2)}, False),
        extract("extract-support-ticket", "Extract the ticket fields from the support e-mail. `priority` is one "
                "of low, normal, high, urgent.", "inbox/ticket.eml",
                """From: Maria Gomez <maria.gomez@helios-energy.test>
Subject: [TCK-88213] URGENT: dashboards not loading after upgrade

Hi team,
since this morning's upgrade of Larkspur Analytics to 4.2 none of our dashboards load (spinner forever).
This blocks our monthly close, so please treat it as urgent.
Thanks, Maria
""",
                {"ticket_id": STR, "priority": STR, "product": STR, "customer_email": STR},
                {"ticket_id": "TCK-88213", "priority": "urgent", "product": "Larkspur Analytics",
                 "customer_email": "maria.gomez@helios-energy.test"},
                [("ticket_id", 30), ("priority", 30), ("product", 15), ("customer_email", 25)],
                {"ticket_id": "TCK-8821", "priority": "high"}, False),
    ]
