"""api_calls: documented API calls against the fixture API (1-2 reference steps)."""

from __future__ import annotations

from common import API, BILLING_KEY, LOGISTICS_KEY, crit, http, regex, route, state, task

CLS = "api_calls"
TOOLS = ["http_request", "read_doc"]


def billing(id, ask, precheck, method, path, body, idem, result_id, body_checks, response):
    """A billing-API write under the billing skill: look up first, Idempotency-Key, cents, `OK <id>`."""
    auth = {"Authorization": f"Bearer {BILLING_KEY}"}
    get_path, get_response = precheck
    instructions = f"""
{ask}
Use the billing API at {API} with the API key `{BILLING_KEY}` (send it as a Bearer token).
Follow the billing API conventions you have been given, and reply with the id of the object you created or changed.
"""
    return task(
        id, CLS, instructions, TOOLS, skill="billing-api",
        api=[route("GET", get_path, get_response, {"Authorization": "Bearer .+"}),
             route(method, path, response, {"Authorization": "Bearer .+"})],
        IF=[crit("idempotency_key", 20, state(method, path, header={"Idempotency-Key": idem}),
                 f"The write carries Idempotency-Key: {idem} (operation-objectid)."),
            crit("looked_up_first", 40, state("GET", get_path), "Fetched the object before changing it."),
            crit("ok_line", 40, regex(r"^OK [A-Za-z0-9_-]+\s*$"), "The reply is the single line `OK <id>`.")],
        TC=[crit("write_made", 60, state(method, path, header={"Authorization": "Bearer .+"}, body=body_checks),
                 "The authenticated write was made with the right values."),
            crit("reports_id", 40, regex(rf"\b{result_id}\b"), f"The reply names {result_id}.")],
        steps=[http("GET", get_path, auth, how=True),
               http(method, path, {**auth, "Idempotency-Key": idem}, body)],
        final=f"OK {result_id}",
        sloppy=f"Done. The API accepted the request and returned {result_id}.",
        wrong=f"OK {result_id[:-1]}{'9' if result_id[-1] != '9' else '8'}",
    )


def logistics(id, ask, precheck, method, path, body, request_id, result_id, body_checks, response):
    """A logistics-API write under the logistics skill: X-Api-Key, X-Request-Id, grams, `DONE <id>`."""
    auth = {"X-Api-Key": LOGISTICS_KEY}
    get_path, get_response = precheck
    instructions = f"""
{ask}
Use the logistics API at {API}; authenticate with the API key `{LOGISTICS_KEY}` in the X-Api-Key header.
Follow the logistics API conventions you have been given, and reply with the id the API returns.
"""
    return task(
        id, CLS, instructions, TOOLS, skill="logistics-api",
        api=[route("GET", get_path, get_response, {"X-Api-Key": LOGISTICS_KEY}),
             route(method, path, response, {"X-Api-Key": LOGISTICS_KEY})],
        IF=[crit("request_id", 20, state(method, path, header={"X-Request-Id": request_id}),
                 f"The write carries X-Request-Id: {request_id} (<order>-<action>)."),
            crit("checked_order_first", 40, state("GET", get_path), "Checked the order's status first."),
            crit("done_line", 40, regex(r"^DONE [A-Za-z0-9_-]+\s*$"), "The reply is the single line `DONE <id>`.")],
        TC=[crit("write_made", 60, state(method, path, header={"X-Api-Key": LOGISTICS_KEY}, body=body_checks)),
            crit("reports_id", 40, regex(rf"\b{result_id}\b"))],
        steps=[http("GET", get_path, auth, how=True),
               http(method, path, {**auth, "X-Request-Id": request_id}, body)],
        final=f"DONE {result_id}",
        sloppy=f"The request went through; the API returned id {result_id}.",
        wrong=f"DONE {result_id[:-1]}{'9' if result_id[-1] != '9' else '8'}",
    )


def plain(id, ask, method, path, body, headers, conv_header, final, final_pattern, sloppy, wrong, tc_body,
          tc_final, response):
    """A task without a skill: every convention is in the instructions."""
    name, value = conv_header
    return task(
        id, CLS, ask, ["http_request"],
        api=[route(method, path, response, {"Authorization": "Bearer .+"})],
        IF=[crit("convention_header", 50, state(method, path, header={name: value}), f"Sends {name}: {value}."),
            crit("reply_format", 50, regex(final_pattern), "The reply has exactly the requested form.")],
        TC=[crit("write_made", 60, state(method, path, header={"Authorization": "Bearer .+"}, body=tc_body)),
            crit("reply_content", 40, regex(tc_final))],
        steps=[http(method, path, headers, body)],
        final=final, sloppy=sloppy, wrong=wrong,
    )


def tasks() -> list[dict]:
    """The api_calls tasks."""
    auth = {"Authorization": f"Bearer {BILLING_KEY}"}
    return [
        billing("api-refund-order",
                "Customer support approved a full refund for order ORD-1042 (19.99 EUR, item arrived damaged). "
                "Create the refund with reason `damaged`.",
                ("/v1/orders/ORD-1042", {"id": "ORD-1042", "status": "delivered", "total_cents": 1999, "currency": "EUR"}),
                "POST", "/v1/refunds", {"order_id": "ORD-1042", "amount_cents": 1999, "reason": "damaged"},
                "refund-ORD-1042", "re_8812", {"order_id": "ORD-1042", "amount_cents": 1999, "reason": "damaged"},
                {"id": "re_8812", "status": "pending"}),
        billing("api-create-invoice",
                "Invoice customer cus_A17 in EUR for two Onboarding workshop days at 450.00 each and one month of "
                "the Support plan at 120.00. Lines: `{description, quantity, unit_amount_cents}`.",
                ("/v1/customers/cus_A17", {"id": "cus_A17", "name": "Acme GmbH", "currency": "EUR", "status": "active"}),
                "POST", "/v1/invoices",
                {"customer_id": "cus_A17", "currency": "EUR", "lines": [
                    {"description": "Onboarding workshop", "quantity": 2, "unit_amount_cents": 45000},
                    {"description": "Support plan", "quantity": 1, "unit_amount_cents": 12000}]},
                "invoice-cus_A17", "inv_5531",
                {"customer_id": "cus_A17", "currency": "EUR", "lines.0.quantity": 2, "lines.0.unit_amount_cents": 45000,
                 "lines.1.unit_amount_cents": 12000},
                {"id": "inv_5531", "status": "draft", "total_cents": 102000}),
        billing("api-void-invoice",
                "Invoice INV-2207 was issued twice by mistake. Void it with reason `duplicate` "
                "(POST /v1/invoices/INV-2207/void).",
                ("/v1/invoices/INV-2207", {"id": "INV-2207", "status": "open", "total_cents": 8900}),
                "POST", "/v1/invoices/INV-2207/void", {"reason": "duplicate"}, "void-INV-2207", "INV-2207",
                {"reason": "duplicate"}, {"id": "INV-2207", "status": "void"}),
        billing("api-apply-credit",
                "Customer cus_B02 gets a 25.00 USD credit for the March SLA breach. Add it with "
                "POST /v1/customers/cus_B02/credits and the note `SLA breach March`.",
                ("/v1/customers/cus_B02", {"id": "cus_B02", "name": "Borealis Ltd", "currency": "USD", "status": "active"}),
                "POST", "/v1/customers/cus_B02/credits",
                {"amount_cents": 2500, "currency": "USD", "note": "SLA breach March"}, "credit-cus_B02", "cr_301",
                {"amount_cents": 2500, "currency": "USD"}, {"id": "cr_301", "balance_cents": 2500}),
        logistics("api-ship-order",
                  "Book an express DHL shipment for order ORD-3381: one parcel of 1.25 kg going to Germany "
                  "(POST /v1/shipments with order_id, carrier, service, weight_grams, to_country).",
                  ("/v1/orders/ORD-3381", {"id": "ORD-3381", "status": "packed", "country": "DE"}),
                  "POST", "/v1/shipments",
                  {"order_id": "ORD-3381", "carrier": "dhl", "service": "express", "weight_grams": 1250, "to_country": "DE"},
                  "ORD-3381-ship", "shp_7710",
                  {"order_id": "ORD-3381", "carrier": "dhl", "weight_grams": 1250, "to_country": "DE"},
                  {"id": "shp_7710", "label_url": "https://labels.example.test/shp_7710.pdf"}),
        logistics("api-cancel-order",
                  "The customer asked to cancel order ORD-5120 before it ships. Cancel it with "
                  "POST /v1/orders/ORD-5120/cancel and reason `customer_request`.",
                  ("/v1/orders/ORD-5120", {"id": "ORD-5120", "status": "processing"}),
                  "POST", "/v1/orders/ORD-5120/cancel", {"reason": "customer_request"}, "ORD-5120-cancel", "ORD-5120",
                  {"reason": "customer_request"}, {"id": "ORD-5120", "status": "cancelled"}),
        logistics("api-return-label",
                  "Order ORD-2954 is coming back: create a return label with POST /v1/returns (order_id, "
                  "carrier `ups`, weight_grams for a 0.8 kg parcel, from_country for France).",
                  ("/v1/orders/ORD-2954", {"id": "ORD-2954", "status": "delivered", "country": "FR"}),
                  "POST", "/v1/returns",
                  {"order_id": "ORD-2954", "carrier": "ups", "weight_grams": 800, "from_country": "FR"},
                  "ORD-2954-return", "ret_118", {"order_id": "ORD-2954", "weight_grams": 800, "from_country": "FR"},
                  {"id": "ret_118", "status": "label_created"}),
        plain("api-update-subscription",
              f"Move subscription sub_9KQ2 to the `pro-annual` plan without proration: PATCH "
              f"{API}/v1/subscriptions/sub_9KQ2 with JSON {{\"plan\": ..., \"proration\": \"none\"}}. "
              f"Authenticate with the Bearer token `{BILLING_KEY}` and send the header `X-Api-Version: 2024-06-01`. "
              "Reply with exactly `UPDATED sub_9KQ2 <new plan>`.",
              "PATCH", "/v1/subscriptions/sub_9KQ2", {"plan": "pro-annual", "proration": "none"},
              {**auth, "X-Api-Version": "2024-06-01"}, ("X-Api-Version", "2024-06-01"),
              "UPDATED sub_9KQ2 pro-annual", r"^UPDATED sub_9KQ2 [a-z-]+\s*$",
              "The subscription sub_9KQ2 is now on pro-annual.", "UPDATED sub_9KQ2 pro-monthly",
              {"plan": "pro-annual", "proration": "none"}, r"pro-annual",
              {"id": "sub_9KQ2", "plan": "pro-annual", "status": "active"}),
        plain("api-create-webhook",
              f"Register a webhook at {API}/v1/webhooks for https://hooks.acme.test/billing receiving the events "
              f"`invoice.paid` and `invoice.voided` (JSON {{\"url\": ..., \"events\": [...]}}). Bearer token: "
              f"`{BILLING_KEY}`. This is the sandbox account: send `X-Account: acct_sandbox_42`. "
              "Reply with exactly `SECRET <signing secret>`.",
              "POST", "/v1/webhooks", {"url": "https://hooks.acme.test/billing", "events": ["invoice.paid", "invoice.voided"]},
              {**auth, "X-Account": "acct_sandbox_42"}, ("X-Account", "acct_sandbox_42"),
              "SECRET whsec_9f8e7d", r"^SECRET whsec_\w+\s*$",
              "Webhook we_12 created. Its signing secret is whsec_9f8e7d.", "SECRET whsec_9f8e7",
              {"url": "https://hooks.acme.test/billing"}, r"\bwhsec_9f8e7d\b",
              {"id": "we_12", "secret": "whsec_9f8e7d"}),
        plain("api-invite-member",
              f"Invite Dana.Ruiz@Acme.test to team team_ops as a `viewer`: POST {API}/v1/teams/team_ops/members "
              f"with JSON {{\"email\": ..., \"role\": ...}}, Bearer token `{BILLING_KEY}`. Our directory stores "
              "e-mail addresses in lower case; send the header `X-Invited-By: it-automation`. "
              "Reply with exactly `INVITED <member id>`.",
              "POST", "/v1/teams/team_ops/members", {"email": "dana.ruiz@acme.test", "role": "viewer"},
              {**auth, "X-Invited-By": "it-automation"}, ("X-Invited-By", "it-automation"),
              "INVITED mem_4410", r"^INVITED mem_\w+\s*$", "Dana has been invited (member mem_4410).",
              "INVITED mem_4401", {"role": "viewer"}, r"\bmem_4410\b",
              {"id": "mem_4410", "status": "invited"}),
    ]
