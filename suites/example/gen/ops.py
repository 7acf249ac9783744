"""The ops workflows the multi_step tasks share: the class, its tools, the ops API's auth, the runbooks, the ops
skill's checks and the report layout (`multi_step` and `multi_more` write their tasks with them)."""

from __future__ import annotations

from common import API, OPS_KEY, called, crit, http, regex, route, state, task

CLS = "multi_step"
TOOLS = ["search_docs", "read_doc", "http_request", "read_file", "write_file", "run_python", "list_files"]
AUTH = {"Authorization": f"Bearer {OPS_KEY}"}
REQ = {"Authorization": "Bearer .+"}
NOTIFY = route("POST", "/v1/notifications", {"id": "ntf_1", "delivered": True}, REQ)

RUNBOOKS = {
    "runbook-overdue-report": "# Runbook: overdue invoice report\nUpdated: 2026-10-01\nMonthly. Pull overdue invoices, "
    "total them per customer, write the report, POST the totals to /v1/reports (kind `overdue`), notify #ops.\n",
    "runbook-restock": "# Runbook: restock\nUpdated: 2026-09-12\nAn item needs restocking when on_hand is strictly below "
    "its reorder_point. Order reorder_qty units. One purchase order per supplier, listing its items in inventory "
    "order, via POST /v1/suppliers/<supplier>/purchase-orders.\n",
    "runbook-incident-notes": "# Runbook: incident notes\nUpdated: 2026-08-30\nError rate = 5xx responses / all "
    "requests in the incident window, in percent with one decimal. Root cause labels: db-pool-exhausted, "
    "upstream-timeout, bad-deploy. After posting the note, set the incident status to `mitigated`.\n",
    "runbook-dispute-refunds": "# Runbook: dispute refunds\nUpdated: 2026-10-20\nRefund every won dispute that is not "
    "refunded yet, for the disputed amount, with reason `dispute_won`, via POST /v1/orders/<order>/refunds. Never "
    "refund a dispute twice.\n",
    "runbook-offboarding": "# Runbook: offboarding\nUpdated: 2026-07-14\nFor every departed user: revoke all sessions "
    "(DELETE /v1/users/<id>/sessions). Then record one audit event with action `offboarding` and the user ids.\n",
    "runbook-migration-review": "# Runbook: migration review\nUpdated: 2026-06-02\nA migration is destructive when it "
    "contains DROP or TRUNCATE. Count the SQL statements (separated by `;`). Approve non-destructive migrations "
    "with POST /v1/migrations/<id>/approve {statements, destructive, reviewer: \"ops-agent\"}.\n",
    "sla-policy": "# Support SLA policy\nUpdated: 2026-05-05\nA ticket breaches the SLA when its resolution takes more "
    "than 8 hours. Report the median resolution time in hours and the number of breaches per month.\n",
    "ops-notifications": "# Notifications\nUpdated: 2026-04-11\nPOST /v1/notifications {\"channel\": \"#ops\", \"text\": "
    "\"...\"} posts to a chat channel.\n",
}
SKILL_FINAL = r"^DONE reports/\S+ [A-Za-z0-9_ -]+\s*$"


def skill_if(runbook: str, report: str, write: tuple[str, str, str]) -> list[dict]:
    """Instruction-following checks of the ops-workflows skill."""
    method, path, idem = write
    return [crit("read_runbook", 20, called("read_doc", doc_id=runbook), "Read the workflow's runbook first."),
            crit("report_layout", 20, regex(r"^# .+[\s\S]*^## Summary$", target=f"file:{report}", flags="m"),
                 "The report has a `# ` title and a `## Summary` section."),
            crit("idempotency_key", 20, state(method, path, header={"Idempotency-Key": idem})),
            crit("notified_ops", 20, state("POST", "/v1/notifications", body={"channel": "#ops"})),
            crit("done_line", 20, regex(SKILL_FINAL), "Replies `DONE <report path> <ids>`.")]


def notify(text: str, channel: str = "#ops") -> dict:
    """The reference notification step (a `how` step)."""
    return http("POST", "/v1/notifications", AUTH, {"channel": channel, "text": text}, how=True)


def md(title: str, summary: str, body: str = "") -> str:
    """A report in the skill's layout."""
    return f"# {title}\n\n## Summary\n{summary}\n" + (f"\n## Details\n{body}\n" if body else "")


def ops_task(id, ask, skill, api, IF, TC, steps, final, sloppy, wrong, files=None):
    """A multi-step task on the ops API."""
    auth_line = f"The API is at {API}; authenticate with `Authorization: Bearer {OPS_KEY}`."
    instructions = ask.strip() + "\n" + auth_line + ("\nWork as our ops workflow guidelines describe." if skill else "")
    return task(id, CLS, instructions, TOOLS, skill="ops-workflows" if skill else None, docs=RUNBOOKS,
                api=[*api, NOTIFY], files=files, IF=IF, TC=TC, steps=steps, final=final, sloppy=sloppy, wrong=wrong,
                limits={"max_turns": 20})
