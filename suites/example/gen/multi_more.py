"""The other six multi_step tasks (incident notes, dispute refunds, offboarding, migration review with the
ops skill; price rollout and SLA report without it)."""

from __future__ import annotations

import json

from common import called, crit, file_check, http, json_eq, regex, route, state, step
from ops import AUTH, REQ, md, notify, ops_task, skill_if


def _gateway_log() -> str:
    lines = []
    for i in range(40):
        status = 503 if i in (7, 8, 19, 26, 33) else 200
        note = " upstream=db error=\"db pool exhausted\"" if status == 503 else ""
        lines.append(f"2026-11-02T09:{10 + i // 4:02d}:{(i * 13) % 60:02d}Z GET /api/orders status={status} "
                     f"ms={30 + (i * 7) % 90}{note}")
    return "\n".join(lines) + "\n"


def incident():
    report, inc = "reports/INC-4821.md", "/v1/incidents/INC-4821"
    return ops_task(
        "multi-incident-notes",
        "Run the `incident-notes` workflow for incident INC-4821: from `logs/gateway.log` compute the error rate (5xx "
        f"share of requests, percent, one decimal) and pick the root cause label, write `{report}`, POST "
        f"{{\"error_rate_pct\": ..., \"root_cause\": ...}} to {inc}/notes, and set the incident status to `mitigated` "
        f"(PATCH {inc} {{\"status\": \"mitigated\"}}). Root cause labels: db-pool-exhausted, upstream-timeout, "
        "bad-deploy. Reply with the note id.", True,
        [route("POST", f"{inc}/notes", {"id": "note_9"}, REQ), route("PATCH", inc, {"id": "INC-4821", "status": "mitigated"}, REQ)],
        skill_if("runbook-incident-notes", report, ("POST", f"{inc}/notes", "incident-notes-INC-4821")),
        [crit("note_posted", 35, state("POST", f"{inc}/notes", header=REQ,
                                       body={"error_rate_pct": 12.5, "root_cause": "db-pool-exhausted"})),
         crit("status_mitigated", 25, state("PATCH", inc, header=REQ, body={"status": "mitigated"})),
         crit("report_rate", 15, file_check(report, contains="12.5%")),
         crit("reports_note_id", 25, regex(r"\bnote_9\b"))],
        [step("read_doc", how=True, doc_id="runbook-incident-notes"), step("read_file", path="logs/gateway.log"),
         step("run_python", code="lines = open('logs/gateway.log').read().splitlines()\n"
              "bad = [l for l in lines if 'status=5' in l]\nprint(len(bad), len(lines), round(100 * len(bad) / len(lines), 1))\n"),
         step("write_file", path=report, content=md("INC-4821: gateway errors on /api/orders",
              "Error rate 12.5% (5 of 40 requests); root cause db-pool-exhausted.")),
         http("POST", f"{inc}/notes", {**AUTH, "Idempotency-Key": "incident-notes-INC-4821"},
              {"error_rate_pct": 12.5, "root_cause": "db-pool-exhausted"}),
         http("PATCH", inc, {**AUTH, "Idempotency-Key": "incident-notes-INC-4821-status"}, {"status": "mitigated"}),
         notify("incident-notes INC-4821: 12.5% errors, db-pool-exhausted, mitigated (note_9)")],
        f"DONE {report} note_9", f"Incident INC-4821 is mitigated; I posted note note_9 and wrote {report}.",
        f"DONE {report} note_6", files={"logs/gateway.log": _gateway_log()})


def disputes():
    report = "reports/dispute-refunds-2026-11.md"
    data = [{"id": "dp_1", "order": "ORD-7001", "amount_cents": 4999, "refunded": False},
            {"id": "dp_2", "order": "ORD-7002", "amount_cents": 12000, "refunded": True},
            {"id": "dp_3", "order": "ORD-7010", "amount_cents": 2500, "refunded": False}]
    r1, r2, r3 = "/v1/orders/ORD-7001/refunds", "/v1/orders/ORD-7010/refunds", "/v1/orders/ORD-7002/refunds"
    return ops_task(
        "multi-dispute-refunds",
        "Run the `dispute-refunds` workflow for November 2026: list won disputes (GET /v1/disputes?status=won), refund "
        "each one that is not refunded yet (POST /v1/orders/<order>/refunds with {\"amount_cents\", \"reason\": "
        f"\"dispute_won\"}}), and write a ledger to `{report}` with one row per refund. Reply with the refund ids.", True,
        [route("GET", "/v1/disputes", {"data": data}, REQ), route("POST", r1, {"id": "re_9001"}, REQ),
         route("POST", r2, {"id": "re_9002"}, REQ), route("POST", r3, {"id": "re_9003"}, REQ)],
        skill_if("runbook-dispute-refunds", report, ("POST", r1, "dispute-refunds-ORD-7001")),
        [crit("refund_7001", 25, state("POST", r1, header=REQ, body={"amount_cents": 4999, "reason": "dispute_won"})),
         crit("refund_7010", 25, state("POST", r2, header=REQ, body={"amount_cents": 2500, "reason": "dispute_won"})),
         crit("no_double_refund", 20, state("POST", r3, must_happen=False), "ORD-7002 was already refunded."),
         crit("reports_ids", 30, regex(r"re_9001[\s\S]*re_9002|re_9002[\s\S]*re_9001"))],
        [step("read_doc", how=True, doc_id="runbook-dispute-refunds"), http("GET", "/v1/disputes?status=won", AUTH),
         http("POST", r1, {**AUTH, "Idempotency-Key": "dispute-refunds-ORD-7001"}, {"amount_cents": 4999, "reason": "dispute_won"}),
         http("POST", r2, {**AUTH, "Idempotency-Key": "dispute-refunds-ORD-7010"}, {"amount_cents": 2500, "reason": "dispute_won"}),
         step("write_file", path=report, content=md("Dispute refunds, November 2026", "2 refunds, 74.99 EUR in total.",
              "| order | refund | amount EUR |\n|---|---|---|\n| ORD-7001 | re_9001 | 49.99 |\n| ORD-7010 | re_9002 | 25.00 |")),
         notify("dispute-refunds 2026-11: 2 refunds, 74.99 EUR (re_9001 re_9002)")],
        f"DONE {report} re_9001 re_9002", f"Refunded ORD-7001 (re_9001) and ORD-7010 (re_9002); ledger in {report}.",
        f"DONE {report} re_9001 re_9003")


def offboarding():
    report = "reports/offboarding-2026-11.md"
    users = [{"id": "u_311", "email": "r.kim@acme.test", "status": "departed"},
             {"id": "u_342", "email": "l.moreau@acme.test", "status": "departed"}]
    return ops_task(
        "multi-offboarding",
        "Run the `offboarding` workflow: find departed users (GET /v1/users?status=departed), revoke each one's "
        "sessions (DELETE /v1/users/<id>/sessions), record one audit event (POST /v1/audit-events {\"action\": "
        f"\"offboarding\", \"user_ids\": [...]}}), and write `{report}` listing the users. Reply with the audit event id.",
        True,
        [route("GET", "/v1/users", {"data": users}, REQ), route("DELETE", r"^/v1/users/u_\d+/sessions$", {"revoked": True}, REQ),
         route("POST", "/v1/audit-events", {"id": "aud_55"}, REQ)],
        skill_if("runbook-offboarding", report, ("DELETE", "/v1/users/u_311/sessions", "offboarding-u_311")),
        [crit("revoked_u_311", 20, state("DELETE", "/v1/users/u_311/sessions", header=REQ)),
         crit("revoked_u_342", 20, state("DELETE", "/v1/users/u_342/sessions", header=REQ)),
         crit("audit_event", 25, state("POST", "/v1/audit-events", header=REQ,
                                       body={"action": "offboarding", "user_ids": ["u_311", "u_342"]})),
         crit("report_lists_users", 10, file_check(report, contains="u_342")),
         crit("reports_audit_id", 25, regex(r"\baud_55\b"))],
        [step("read_doc", how=True, doc_id="runbook-offboarding"), step("search_docs", query="offboarding sessions audit"),
         http("GET", "/v1/users?status=departed", AUTH),
         http("DELETE", "/v1/users/u_311/sessions", {**AUTH, "Idempotency-Key": "offboarding-u_311"}),
         http("DELETE", "/v1/users/u_342/sessions", {**AUTH, "Idempotency-Key": "offboarding-u_342"}),
         http("POST", "/v1/audit-events", {**AUTH, "Idempotency-Key": "offboarding-2026-11"},
              {"action": "offboarding", "user_ids": ["u_311", "u_342"]}),
         step("write_file", path=report, content=md("Offboarding, November 2026", "Sessions revoked for 2 users (audit aud_55).",
              "| user | e-mail |\n|---|---|\n| u_311 | r.kim@acme.test |\n| u_342 | l.moreau@acme.test |")),
         notify("offboarding 2026-11: 2 users, sessions revoked (aud_55)")],
        f"DONE {report} aud_55", f"Both departed users are offboarded; audit event aud_55; see {report}.",
        f"DONE {report} aud_5")


def migration():
    report = "reports/mig_42-review.md"
    sql = "-- 0042: speed up the orders dashboard\nCREATE INDEX CONCURRENTLY idx_orders_created ON orders (created_at);\nANALYZE orders;\n"
    approve = "/v1/migrations/mig_42/approve"
    return ops_task(
        "multi-migration-review",
        "Run the `migration-review` workflow for migration mig_42 (GET /v1/migrations/mig_42 names its file under "
        "`migrations/`): count its SQL statements, decide whether it is destructive, write the review to "
        f"`{report}`, and approve it if it is not destructive (POST {approve} with {{\"statements\", \"destructive\", "
        "\"reviewer\": \"ops-agent\"}). Reply with the approval id.", True,
        [route("GET", "/v1/migrations/mig_42", {"id": "mig_42", "status": "pending_review", "file": "0042_add_index.sql"}, REQ),
         route("POST", approve, {"id": "apr_12", "status": "approved"}, REQ)],
        skill_if("runbook-migration-review", report, ("POST", approve, "migration-review-mig_42")),
        [crit("approved", 40, state("POST", approve, header=REQ, body={"statements": 2, "destructive": False})),
         crit("report_names_file", 15, file_check(report, contains="0042_add_index.sql")),
         crit("report_verdict", 15, regex(r"not destructive|non-destructive", target=f"file:{report}", flags="i")),
         crit("reports_id", 30, regex(r"\bapr_12\b"))],
        [step("read_doc", how=True, doc_id="runbook-migration-review"), http("GET", "/v1/migrations/mig_42", AUTH),
         step("read_file", path="migrations/0042_add_index.sql"),
         step("run_python", code="sql = open('migrations/0042_add_index.sql').read()\n"
              "body = '\\n'.join(l for l in sql.splitlines() if not l.startswith('--'))\n"
              "stmts = [s for s in body.split(';') if s.strip()]\n"
              "print(len(stmts), any(w in body.upper() for w in ('DROP', 'TRUNCATE')))\n"),
         step("write_file", path=report, content=md("Review of mig_42 (0042_add_index.sql)",
              "2 statements; not destructive (CREATE INDEX CONCURRENTLY, ANALYZE). Approved.")),
         http("POST", approve, {**AUTH, "Idempotency-Key": "migration-review-mig_42"},
              {"statements": 2, "destructive": False, "reviewer": "ops-agent"}),
         notify("migration-review mig_42: 2 statements, not destructive, approved (apr_12)")],
        f"DONE {report} apr_12", f"mig_42 looks safe and is approved (apr_12). Review: {report}.",
        f"DONE {report} apr_21", files={"migrations/0042_add_index.sql": sql})


def price_rollout():
    report = "reports/price-changes-2026-12.md"
    products = [{"sku": "SKU-1", "price_cents": 1790}, {"sku": "SKU-2", "price_cents": 500},
                {"sku": "SKU-3", "price_cents": 3990}, {"sku": "SKU-4", "price_cents": 750}]
    csv_text = "sku,price_eur\nSKU-1,19.90\nSKU-2,5.00\nSKU-3,42.00\nSKU-4,7.50\n"
    return ops_task(
        "multi-price-rollout",
        "Roll out the December price list `prices/2026-12.csv`: compare it with the live prices (GET /v1/products, "
        "prices in cents) and PATCH /v1/products/<sku> {\"price_cents\": ...} only for products whose price changes. "
        "Send `Idempotency-Key: price-<sku>` with each PATCH. Write the changes (sku, old and new price) to "
        f"`{report}`, then post a short summary to the `#pricing` channel (POST /v1/notifications {{\"channel\", "
        "\"text\"}). Reply with exactly `DONE <report path> <number of products changed>`.", False,
        [route("GET", "/v1/products", {"data": products}, REQ),
         route("PATCH", r"^/v1/products/SKU-\d+$", {"updated": True}, REQ)],
        [crit("idempotency_key", 30, state("PATCH", "/v1/products/SKU-1", header={"Idempotency-Key": "price-SKU-1"})),
         crit("notified_pricing", 35, state("POST", "/v1/notifications", body={"channel": "#pricing"})),
         crit("done_line", 35, regex(r"^DONE reports/\S+ \d+\s*$"))],
        [crit("patched_sku_1", 25, state("PATCH", "/v1/products/SKU-1", header=REQ, body={"price_cents": 1990})),
         crit("patched_sku_3", 25, state("PATCH", "/v1/products/SKU-3", header=REQ, body={"price_cents": 4200})),
         crit("unchanged_untouched", 15, state("PATCH", r"/v1/products/SKU-[24]", must_happen=False)),
         crit("report_lists_change", 10, file_check(report, contains="SKU-3")),
         crit("reports_count", 25, regex(r"\s2\s*$"))],
        [step("read_file", path="prices/2026-12.csv"), http("GET", "/v1/products", AUTH),
         step("run_python", code="import csv\nlive = " + json.dumps({p["sku"]: p["price_cents"] for p in products}) +
              "\nnew = {r['sku']: round(float(r['price_eur']) * 100) for r in csv.DictReader(open('prices/2026-12.csv'))}\n"
              "print({s: (live[s], c) for s, c in new.items() if live[s] != c})\n"),
         http("PATCH", "/v1/products/SKU-1", {**AUTH, "Idempotency-Key": "price-SKU-1"}, {"price_cents": 1990}),
         http("PATCH", "/v1/products/SKU-3", {**AUTH, "Idempotency-Key": "price-SKU-3"}, {"price_cents": 4200}),
         step("write_file", path=report, content="# Price changes, December 2026\n\n| sku | old EUR | new EUR |\n|---|---|---|\n"
              "| SKU-1 | 17.90 | 19.90 |\n| SKU-3 | 39.90 | 42.00 |\n"),
         notify("December prices live: SKU-1 19.90, SKU-3 42.00 (2 products)", channel="#pricing")],
        f"DONE {report} 2", f"Updated SKU-1 and SKU-3; details in {report}. Products changed: 2",
        f"DONE {report} 3", files={"prices/2026-12.csv": csv_text})


def sla_report():
    report = "reports/sla-2026-11.json"
    tickets = [{"id": f"T-{100 + i}", "resolution_hours": h} for i, h in enumerate([2.0, 9.5, 4.0, 11.0, 7.0, 8.0])]
    return ops_task(
        "multi-sla-report",
        "Produce the November 2026 support SLA report. Read the SLA policy (doc `sla-policy`) for what counts as a "
        "breach, get the tickets (GET /v1/tickets?month=2026-11), compute the median resolution time in hours and "
        f"the number of breaches, save them as JSON {{\"median_resolution_hours\", \"breaches\"}} to `{report}`, and "
        "POST each figure to /v1/metrics as {\"name\", \"value\", \"period\": \"2026-11\"} (names "
        "`median_resolution_hours` and `sla_breaches`). When done, notify `#support` (POST /v1/notifications "
        "{\"channel\", \"text\"}). Reply with exactly `DONE <report path> median <hours>`.", False,
        [route("GET", "/v1/tickets", {"data": tickets}, REQ), route("POST", "/v1/metrics", {"id": "met_3"}, REQ)],
        [crit("read_policy", 30, called("read_doc", doc_id="sla-policy")),
         crit("notified_support", 30, state("POST", "/v1/notifications", body={"channel": "#support"})),
         crit("done_line", 40, regex(r"^DONE reports/sla-2026-11\.json median [\d.]+\s*$"))],
        [crit("file_median", 20, json_eq("median_resolution_hours", 7.5, target=f"file:{report}")),
         crit("file_breaches", 15, json_eq("breaches", 2, target=f"file:{report}")),
         crit("metric_median", 25, state("POST", "/v1/metrics", header=REQ,
                                         body={"name": "median_resolution_hours", "value": 7.5, "period": "2026-11"})),
         crit("metric_breaches", 15, state("POST", "/v1/metrics", header=REQ, body={"name": "sla_breaches", "value": 2})),
         crit("reports_median", 25, regex(r"\b7\.5\b"))],
        [step("read_doc", how=True, doc_id="sla-policy"), http("GET", "/v1/tickets?month=2026-11", AUTH),
         step("run_python", code="import statistics\nh = " + json.dumps([t["resolution_hours"] for t in tickets]) +
              "\nprint(statistics.median(h), sum(1 for x in h if x > 8))\n"),
         step("write_file", path=report, content=json.dumps({"median_resolution_hours": 7.5, "breaches": 2})),
         http("POST", "/v1/metrics", AUTH, {"name": "median_resolution_hours", "value": 7.5, "period": "2026-11"}),
         http("POST", "/v1/metrics", AUTH, {"name": "sla_breaches", "value": 2, "period": "2026-11"}),
         notify("SLA 2026-11: median 7.5 h, 2 breaches", channel="#support")],
        f"DONE {report} median 7.5", f"The November median resolution time was 7.5 hours with 2 breaches ({report}).",
        f"DONE {report} median 8.0")


def more_tasks() -> list[dict]:
    """The six tasks of this module."""
    return [incident(), disputes(), offboarding(), migration(), price_rollout(), sla_report()]
