"""multi_step: read API data or files, compute, write a report, post results, notify (5-8 reference steps)."""

from __future__ import annotations

import json

from common import crit, file_check, http, regex, route, state, step
from multi_more import more_tasks
from ops import AUTH, REQ, md, notify, ops_task, skill_if


def tasks() -> list[dict]:
    """The multi_step tasks."""
    invoices = [{"id": "INV-3001", "customer": "cus_A17", "amount_cents": 120000, "days_overdue": 12},
                {"id": "INV-3007", "customer": "cus_B02", "amount_cents": 45000, "days_overdue": 40},
                {"id": "INV-3011", "customer": "cus_A17", "amount_cents": 98000, "days_overdue": 5},
                {"id": "INV-3019", "customer": "cus_C33", "amount_cents": 68000, "days_overdue": 71},
                {"id": "INV-3024", "customer": "cus_B02", "amount_cents": 100000, "days_overdue": 33}]
    report = "reports/overdue-2026-11.md"
    overdue = ops_task(
        "multi-overdue-report",
        f"Run the `overdue-report` workflow for November 2026: get the overdue invoices (GET /v1/invoices?status=overdue), "
        f"total them per customer, write the report to `{report}` (total in EUR with 2 decimals and the per-customer "
        "totals), and POST {\"kind\": \"overdue\", \"period\": \"2026-11\", \"total_cents\": ..., \"customers\": "
        "<number of customers>} to /v1/reports. Reply with the report id.", True,
        [route("GET", "/v1/invoices", {"data": invoices}, REQ), route("POST", "/v1/reports", {"id": "rep_77"}, REQ)],
        skill_if("runbook-overdue-report", report, ("POST", "/v1/reports", "overdue-report-2026-11")),
        [crit("report_total", 25, file_check(report, contains="4310.00")),
         crit("report_top_customer", 10, file_check(report, contains="cus_A17")),
         crit("posted_totals", 40, state("POST", "/v1/reports", header=REQ,
                                         body={"kind": "overdue", "total_cents": 431000, "customers": 3})),
         crit("reports_id", 25, regex(r"\brep_77\b"))],
        [step("read_doc", how=True, doc_id="runbook-overdue-report"),
         http("GET", "/v1/invoices?status=overdue", AUTH),
         step("run_python", code="inv = " + json.dumps(invoices) + "\nby = {}\nfor i in inv:\n"
              "    by[i['customer']] = by.get(i['customer'], 0) + i['amount_cents']\nprint(sum(by.values()), by)\n"),
         step("write_file", path=report, content=md("Overdue invoices, November 2026",
              "Total overdue: 4310.00 EUR across 3 customers.",
              "| customer | overdue EUR |\n|---|---|\n| cus_A17 | 2180.00 |\n| cus_B02 | 1450.00 |\n| cus_C33 | 680.00 |")),
         http("POST", "/v1/reports", {**AUTH, "Idempotency-Key": "overdue-report-2026-11"},
              {"kind": "overdue", "period": "2026-11", "total_cents": 431000, "customers": 3}),
         notify("Overdue report 2026-11: 4310.00 EUR, 3 customers (rep_77)")],
        f"DONE {report} rep_77", f"Finished: the report is in {report} and the API stored it as rep_77.",
        f"DONE {report} rep_71")

    items = [{"sku": "SKU-100", "on_hand": 4, "reorder_point": 10, "reorder_qty": 50, "supplier": "sup_1"},
             {"sku": "SKU-101", "on_hand": 25, "reorder_point": 10, "reorder_qty": 40, "supplier": "sup_1"},
             {"sku": "SKU-205", "on_hand": 0, "reorder_point": 5, "reorder_qty": 20, "supplier": "sup_2"},
             {"sku": "SKU-310", "on_hand": 3, "reorder_point": 8, "reorder_qty": 30, "supplier": "sup_1"},
             {"sku": "SKU-412", "on_hand": 12, "reorder_point": 12, "reorder_qty": 24, "supplier": "sup_2"}]
    report = "reports/restock-2026-11.md"
    po1, po2 = "/v1/suppliers/sup_1/purchase-orders", "/v1/suppliers/sup_2/purchase-orders"
    restock = ops_task(
        "multi-restock",
        "Run the `restock` workflow: read the inventory (GET /v1/inventory), find the items to reorder, create one "
        "purchase order per supplier (POST /v1/suppliers/<supplier>/purchase-orders with {\"items\": [{\"sku\", "
        f"\"quantity\"}}]}}), and write a report to `{report}` listing each ordered SKU with its quantity and purchase "
        "order id. Reply with the purchase order ids.", True,
        [route("GET", "/v1/inventory", {"items": items}, REQ), route("POST", po1, {"id": "po_501"}, REQ),
         route("POST", po2, {"id": "po_502"}, REQ)],
        skill_if("runbook-restock", report, ("POST", po1, "restock-sup_1")),
        [crit("po_sup_1", 25, state("POST", po1, header=REQ, body={"items.0.sku": "SKU-100", "items.0.quantity": 50,
                                                                    "items.1.sku": "SKU-310", "items.1.quantity": 30})),
         crit("po_sup_2", 25, state("POST", po2, header=REQ, body={"items.0.sku": "SKU-205", "items.0.quantity": 20})),
         crit("report_lists_skus", 15, file_check(report, contains="SKU-310")),
         crit("reports_ids", 35, regex(r"po_501[\s\S]*po_502|po_502[\s\S]*po_501"))],
        [step("read_doc", how=True, doc_id="runbook-restock"), http("GET", "/v1/inventory", AUTH),
         step("run_python", code="items = " + json.dumps(items) + "\nprint([(i['supplier'], i['sku'], i['reorder_qty']) "
              "for i in items if i['on_hand'] < i['reorder_point']])\n"),
         http("POST", po1, {**AUTH, "Idempotency-Key": "restock-sup_1"},
              {"items": [{"sku": "SKU-100", "quantity": 50}, {"sku": "SKU-310", "quantity": 30}]}),
         http("POST", po2, {**AUTH, "Idempotency-Key": "restock-sup_2"}, {"items": [{"sku": "SKU-205", "quantity": 20}]}),
         step("write_file", path=report, content=md("Restock, November 2026", "3 SKUs reordered from 2 suppliers.",
              "| sku | quantity | purchase order |\n|---|---|---|\n| SKU-100 | 50 | po_501 |\n| SKU-310 | 30 | po_501 |\n"
              "| SKU-205 | 20 | po_502 |")),
         notify("Restock 2026-11: po_501 (sup_1), po_502 (sup_2)")],
        f"DONE {report} po_501 po_502", f"I placed po_501 and po_502 and wrote {report}.", f"DONE {report} po_501")
    return [overdue, restock, *more_tasks()]
