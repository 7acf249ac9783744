"""doc_retrieval: find the answer in the fixture docs and cite the doc id (2 reference steps)."""

from __future__ import annotations

from common import called, crit, regex, step, task

CLS = "doc_retrieval"
TOOLS = ["search_docs", "read_doc"]

DOCS = {
    "kb-retention": """# Data retention
Updated: 2026-09-14
Event data is retained for 30 days on the Free plan and for 400 days on the Business plan.
Deleted workspaces are purged after 14 days; until then an owner can restore them.
Retention applies per workspace and cannot be extended per project.
""",
    "kb-rate-limits": """# API rate limits
Updated: 2026-10-02
The Free plan allows 60 requests per minute per token. The Pro plan allows 600 requests per minute per token.
Short bursts of up to twice the limit are tolerated for 10 seconds.
Over the limit the API answers 429 with a Retry-After header in seconds.
""",
    "kb-rate-limits-2023": """# API rate limits (archived)
Updated: 2023-02-11
ARCHIVED: superseded by kb-rate-limits. In 2023 the Pro plan allowed 300 requests per minute per token.
""",
    "kb-sso": """# Single sign-on
Updated: 2026-06-30
Larkspur supports SAML 2.0 and OpenID Connect on the Business plan. SCIM 2.0 provisioning is available.
An SSO session lasts 12 hours; after that users sign in again. API tokens are not affected by SSO sessions.
""",
    "kb-backups": """# Backups and recovery
Updated: 2026-08-21
Backups run nightly at 02:00 UTC and are kept for 35 days.
Point-in-time recovery covers the last 7 days, with a granularity of 5 minutes.
Restores are requested through support and complete within 4 hours.
""",
    "kb-webhooks": """# Webhooks
Updated: 2026-10-19
Deliveries time out after 10 seconds. Failed deliveries are retried with exponential backoff, up to 8 attempts
spread over 24 hours, then the endpoint is marked failing.
Every delivery is signed with HMAC-SHA256 in the Larkspur-Signature header.
""",
    "kb-errors": """# Error codes
Updated: 2026-07-07
LS-1001: the token is invalid. LS-1002: the token has expired; request a new one.
LS-2040: the workspace quota is exceeded; delete data or upgrade the plan.
LS-3300: the event does not match the dataset schema.
""",
    "kb-config": """# Ingest configuration
Updated: 2026-09-01
`ingest.batch_size` (default 500): events per batch sent by the SDK.
`ingest.flush_interval_ms` (default 2000): the longest an event waits in the SDK buffer, in milliseconds.
`LARKSPUR_REGION` (environment variable, default eu-west-1): the region the SDK sends to.
""",
    "kb-exports": """# Exports
Updated: 2026-05-15
CSV exports hold at most 1,000,000 rows; use Parquet for larger exports.
Download links expire after 24 hours. Exports are kept for 7 days, then deleted.
""",
    "kb-audit": """# Audit log
Updated: 2026-04-03
Admin actions are recorded in the audit log and kept for 180 days (event data retention does not apply).
Export audit events with GET /v1/audit-events; filters: actor, action, since.
""",
}


def qa(id, question, query, doc, answer, value_pattern, wrong_answer, wrong_pattern, skill):
    """One doc-retrieval task. With the skill: `Answer:` + citation + read the full doc.
    Without: the instructions ask for the citation."""
    cite = rf"\[{doc}\]"
    if skill:
        instructions = f"{question}\nUse the Larkspur documentation tools. Answer the way you have been shown."
        IF = [crit("cites_doc", 40, regex(cite), f"Cites [{doc}]."),
              crit("answer_prefix", 30, regex(r"^Answer: "), "Starts with `Answer: `."),
              crit("read_full_doc", 30, called("read_doc", doc_id=doc), "Read the page before answering.")]
        final = f"Answer: {answer} [{doc}]"
    else:
        instructions = (f"{question}\nSearch the Larkspur documentation, read the relevant page, and answer in one "
                        "sentence that ends with the id of the page you used in square brackets, e.g. [kb-example].")
        IF = [crit("cites_doc", 60, regex(cite), f"Ends with [{doc}]."),
              crit("read_full_doc", 40, called("read_doc", doc_id=doc))]
        final = f"{answer} [{doc}]"
    return task(
        id, CLS, instructions, TOOLS, skill="kb-answers" if skill else None, docs=DOCS,
        IF=IF,
        TC=[crit("right_value", 70, regex(value_pattern, flags="i"), "States the value from the doc."),
            crit("no_stale_value", 30, regex(wrong_pattern, flags="i", must_match=False),
                 "Does not give the distractor value.")],
        steps=[step("search_docs", query=query), step("read_doc", how=True, doc_id=doc)],
        final=final, sloppy=answer.replace(".", "") + " as far as I can tell.", wrong=f"{wrong_answer} [{doc}]",
    )


def tasks() -> list[dict]:
    """The doc_retrieval tasks."""
    return [
        qa("docs-retention-business", "How long is event data kept on the Business plan?", "event data retention business plan",
           "kb-retention", "Event data is kept for 400 days on the Business plan.", r"\b400\s*days\b",
           "Event data is kept for 30 days.", r"\b30\s*days\b", True),
        qa("docs-rate-limit-pro", "What is the API rate limit per token on the Pro plan?", "rate limit pro plan requests per minute",
           "kb-rate-limits", "The Pro plan allows 600 requests per minute per token.", r"\b600\b",
           "The Pro plan allows 300 requests per minute per token.", r"\b300\b", True),
        qa("docs-webhook-retries", "How many delivery attempts does Larkspur make for a failing webhook?", "webhook retries attempts",
           "kb-webhooks", "Failed webhook deliveries are retried up to 8 attempts over 24 hours.", r"\b8\s*attempts\b",
           "Webhook deliveries are retried up to 5 attempts.", r"\b5\s*attempts\b", True),
        qa("docs-error-ls2040", "A customer sees error LS-2040. What does it mean?", "error code LS-2040",
           "kb-errors", "LS-2040 means the workspace quota is exceeded.", r"quota\s+is\s+exceeded",
           "LS-2040 means the token has expired.", r"expired", True),
        qa("docs-flush-interval", "What is the default of `ingest.flush_interval_ms`?", "ingest flush interval default",
           "kb-config", "The default of ingest.flush_interval_ms is 2000 milliseconds.", r"\b2000\b",
           "The default of ingest.flush_interval_ms is 500 milliseconds.", r"\b500\b", True),
        qa("docs-backup-retention", "How long are nightly backups kept?", "backups kept nightly",
           "kb-backups", "Nightly backups are kept for 35 days.", r"\b35\s*days\b",
           "Nightly backups are kept for 7 days.", r"\b7\s*days\b", False),
        qa("docs-export-link-expiry", "How long does an export download link stay valid?", "export download link expire",
           "kb-exports", "Export download links expire after 24 hours.", r"\b24\s*hours\b",
           "Export download links expire after 7 days.", r"\b7\s*days\b", False),
        qa("docs-audit-retention", "How long are audit log entries kept?", "audit log kept days",
           "kb-audit", "Audit log entries are kept for 180 days.", r"\b180\s*days\b",
           "Audit log entries are kept for 400 days.", r"\b400\s*days\b", False),
        qa("docs-sso-session", "How long does an SSO session last before users must sign in again?", "SSO session lifetime hours",
           "kb-sso", "An SSO session lasts 12 hours.", r"\b12\s*hours\b",
           "An SSO session lasts 24 hours.", r"\b24\s*hours\b", False),
    ]
