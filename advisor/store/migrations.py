"""The store's schema as ordered forward migrations, recorded in a ``_migrations`` table and run on open.

Append a new ``m00N_...`` function to `MIGRATIONS` for every schema change; never edit one that has shipped.
The same list migrates both backends: a migration calls ``con.execute(sql)`` with DuckDB's SQL, and the
PostgreSQL store's connection translates the few type names that differ (DOUBLE, BLOB; see
`advisor.store.postgres`), so write plain portable DDL.
"""

from __future__ import annotations

from typing import Callable


def _m001_initial(con) -> None:
    con.execute(
        """
        CREATE TABLE ladders (
            ladder_hash VARCHAR PRIMARY KEY, name VARCHAR NOT NULL, simulated BOOLEAN NOT NULL,
            config_json VARCHAR NOT NULL, recorded_at TIMESTAMP NOT NULL);
        CREATE TABLE rungs (
            ladder_hash VARCHAR NOT NULL, name VARCHAR NOT NULL, position INTEGER NOT NULL, role VARCHAR NOT NULL,
            hf_id VARCHAR, triton_model VARCHAR, params_total_b DOUBLE, params_active_b DOUBLE,
            usd_per_m_input DOUBLE, usd_per_m_output DOUBLE, price_basis VARCHAR, simulated BOOLEAN,
            self_hosted BOOLEAN, data_leaves_org BOOLEAN, PRIMARY KEY (ladder_hash, name));
        CREATE TABLE suites (
            suite_hash VARCHAR PRIMARY KEY, name VARCHAR NOT NULL, source VARCHAR, config_json VARCHAR,
            recorded_at TIMESTAMP NOT NULL);
        CREATE TABLE tasks (
            suite_hash VARCHAR NOT NULL, task_id VARCHAR NOT NULL, task_class VARCHAR NOT NULL,
            has_skill BOOLEAN NOT NULL, prompt_hash VARCHAR, PRIMARY KEY (suite_hash, task_id));
        CREATE TABLE prompts (prompt_hash VARCHAR PRIMARY KEY, prompt_text VARCHAR NOT NULL);
        CREATE TABLE runs (
            run_key VARCHAR PRIMARY KEY, kind VARCHAR NOT NULL, suite_name VARCHAR NOT NULL,
            suite_hash VARCHAR NOT NULL, task_id VARCHAR NOT NULL, task_class VARCHAR NOT NULL,
            ladder_name VARCHAR NOT NULL, ladder_hash VARCHAR NOT NULL, rung VARCHAR NOT NULL,
            rung_position INTEGER NOT NULL, condition VARCHAR NOT NULL, replica INTEGER NOT NULL,
            seed BIGINT NOT NULL, policy VARCHAR NOT NULL, prompt_hash VARCHAR, stop_reason VARCHAR NOT NULL,
            turns INTEGER NOT NULL, model_calls INTEGER NOT NULL, input_tokens BIGINT NOT NULL,
            output_tokens BIGINT NOT NULL, tokens_from_server BOOLEAN NOT NULL, cost_usd DOUBLE NOT NULL,
            cost_estimated BOOLEAN NOT NULL, judge_input_tokens BIGINT NOT NULL,
            judge_output_tokens BIGINT NOT NULL, judge_cost_usd DOUBLE NOT NULL, latency_s DOUBLE NOT NULL,
            if_score DOUBLE, tc_score DOUBLE, overall DOUBLE, unscored BOOLEAN NOT NULL,
            unscored_reason VARCHAR, bar DOUBLE NOT NULL, near_zero DOUBLE NOT NULL,
            simulated BOOLEAN NOT NULL, advisor_version VARCHAR NOT NULL, settings_json VARCHAR NOT NULL,
            error VARCHAR, started_at TIMESTAMP, finished_at TIMESTAMP);
        CREATE INDEX runs_cell ON runs (suite_name, task_class, rung, condition);
        CREATE TABLE turns (
            run_key VARCHAR NOT NULL, turn INTEGER NOT NULL, action VARCHAR NOT NULL, arguments_json VARCHAR,
            observation VARCHAR, input_tokens BIGINT, output_tokens BIGINT, latency_s DOUBLE,
            finish_reason VARCHAR, PRIMARY KEY (run_key, turn));
        CREATE TABLE criterion_results (
            run_key VARCHAR NOT NULL, checklist VARCHAR NOT NULL, criterion VARCHAR NOT NULL, weight DOUBLE,
            score DOUBLE, detail VARCHAR, PRIMARY KEY (run_key, checklist, criterion));
        CREATE TABLE routing_decisions (
            decision_id VARCHAR PRIMARY KEY, created_at TIMESTAMP NOT NULL, request_hash VARCHAR NOT NULL,
            prompt_text VARCHAR, task_class VARCHAR, policy VARCHAR NOT NULL, mode VARCHAR NOT NULL,
            chosen_rung VARCHAR NOT NULL, expected_cost DOUBLE, p_usable DOUBLE, router_version VARCHAR,
            explanation_json VARCHAR);
        CREATE TABLE live_outcomes (
            decision_id VARCHAR NOT NULL, attempt INTEGER NOT NULL, rung VARCHAR NOT NULL,
            input_tokens BIGINT, output_tokens BIGINT, cost_usd DOUBLE, latency_s DOUBLE,
            verified BOOLEAN, accepted BOOLEAN, error VARCHAR, created_at TIMESTAMP NOT NULL,
            PRIMARY KEY (decision_id, attempt));
        """
    )


def _m002_scenario_score_and_judge_agreement(con) -> None:
    """runs.scenario_score (an imported scenario's own weighted score) and the judge's measured agreement."""
    con.execute(
        """
        ALTER TABLE runs ADD COLUMN scenario_score DOUBLE;
        CREATE TABLE judge_agreement (
            measured_at TIMESTAMP NOT NULL, judge VARCHAR NOT NULL, judge_hash VARCHAR NOT NULL,
            suite_name VARCHAR, runs INTEGER NOT NULL, criteria INTEGER NOT NULL, positives INTEGER NOT NULL,
            negatives INTEGER NOT NULL, false_accept DOUBLE, false_reject DOUBLE, unparsed INTEGER NOT NULL,
            simulated BOOLEAN NOT NULL, detail_json VARCHAR NOT NULL, PRIMARY KEY (measured_at, judge));
        """
    )


def _m003_live_service(con) -> None:
    """What the routing service records beyond m001: per decision its outcome, per attempt its failover flag."""
    con.execute(
        """
        ALTER TABLE routing_decisions ADD COLUMN class_source VARCHAR;
        ALTER TABLE routing_decisions ADD COLUMN chain_json VARCHAR;
        ALTER TABLE routing_decisions ADD COLUMN final_rung VARCHAR;
        ALTER TABLE routing_decisions ADD COLUMN status VARCHAR;
        ALTER TABLE routing_decisions ADD COLUMN http_status INTEGER;
        ALTER TABLE routing_decisions ADD COLUMN attempts INTEGER;
        ALTER TABLE routing_decisions ADD COLUMN failovers INTEGER;
        ALTER TABLE routing_decisions ADD COLUMN total_cost_usd DOUBLE;
        ALTER TABLE routing_decisions ADD COLUMN latency_s DOUBLE;
        ALTER TABLE routing_decisions ADD COLUMN simulated BOOLEAN;
        ALTER TABLE routing_decisions ADD COLUMN api_key VARCHAR;
        ALTER TABLE routing_decisions ADD COLUMN worker VARCHAR;
        ALTER TABLE live_outcomes ADD COLUMN simulated BOOLEAN;
        ALTER TABLE live_outcomes ADD COLUMN failover BOOLEAN;
        ALTER TABLE live_outcomes ADD COLUMN finish_reason VARCHAR;
        ALTER TABLE live_outcomes ADD COLUMN verdict VARCHAR;
        ALTER TABLE live_outcomes ADD COLUMN tokens_from_server BOOLEAN;
        """
    )


def _m004_policy_calls(con) -> None:
    """Per model call of a policy run (orchestrator): the rung sequence and the cost per rung."""
    con.execute(
        """
        CREATE TABLE policy_calls (
            run_key VARCHAR NOT NULL, seq INTEGER NOT NULL, round INTEGER NOT NULL, model VARCHAR NOT NULL,
            role VARCHAR NOT NULL, input_tokens BIGINT NOT NULL, output_tokens BIGINT NOT NULL,
            cost_usd DOUBLE NOT NULL, latency_s DOUBLE NOT NULL, respects BOOLEAN, PRIMARY KEY (run_key, seq));
        """
    )


def _m005_router_promotions(con) -> None:
    """The live feedback loop: every promotion, refusal and rollback of a router artifact, with its evidence."""
    con.execute(
        """
        CREATE TABLE router_promotions (
            promotion_id VARCHAR PRIMARY KEY, created_at TIMESTAMP NOT NULL, action VARCHAR NOT NULL,
            artifact_path VARCHAR NOT NULL, artifact_sha256 VARCHAR NOT NULL, router_version VARCHAR NOT NULL,
            previous_path VARCHAR, previous_sha256 VARCHAR, previous_version VARCHAR, pointer VARCHAR NOT NULL,
            criterion VARCHAR, passed BOOLEAN, window_decisions INTEGER, window_from TIMESTAMP,
            window_to TIMESTAMP, evidence_json VARCHAR NOT NULL);
        """
    )


def _m006_service_verifier_rates(con) -> None:
    """A service verifier's error rates measured on stored probe runs (`advisor verifier measure`): per class
    and rung (rung '*' pools the class), what the verifier said vs usable at the bar."""
    con.execute(
        """
        CREATE TABLE verifier_rates (
            measurement_id VARCHAR NOT NULL, measured_at TIMESTAMP NOT NULL, task_class VARCHAR NOT NULL,
            rung VARCHAR NOT NULL, verifier_hash VARCHAR NOT NULL, config_path VARCHAR, suite_name VARCHAR,
            ladder_name VARCHAR, bar DOUBLE NOT NULL, runs INTEGER NOT NULL, unverifiable INTEGER NOT NULL,
            positives INTEGER NOT NULL, negatives INTEGER NOT NULL, false_accepts INTEGER NOT NULL,
            false_rejects INTEGER NOT NULL, false_accept DOUBLE, false_reject DOUBLE, judge_cost_usd DOUBLE NOT NULL,
            simulated BOOLEAN NOT NULL, PRIMARY KEY (measurement_id, task_class, rung));
        """
    )


def _m007_policy_call_verdicts(con) -> None:
    """Per attempt of a chain policy run (cascade): the verifier's verdict, and whether the attempt was usable
    (so the verifier's false-accept and false-reject rates can be measured)."""
    con.execute(
        """
        ALTER TABLE policy_calls ADD COLUMN verdict VARCHAR;
        ALTER TABLE policy_calls ADD COLUMN accepted BOOLEAN;
        ALTER TABLE policy_calls ADD COLUMN usable BOOLEAN;
        """
    )


def _m008_live_end_user(con) -> None:
    """Per routing decision the request's OpenAI `user` field (the application's end-user id), when sent."""
    con.execute("ALTER TABLE routing_decisions ADD COLUMN end_user VARCHAR")


def _m009_sessions(con) -> None:
    """Agent sessions: per routing decision its session, step, the session's first rung and this step's
    escalation ("reason from->to"); per attempt its session and step (`advisor.service.sessions.latch`)."""
    con.execute(
        """
        ALTER TABLE routing_decisions ADD COLUMN session_id VARCHAR;
        ALTER TABLE routing_decisions ADD COLUMN session_step INTEGER;
        ALTER TABLE routing_decisions ADD COLUMN session_source VARCHAR;
        ALTER TABLE routing_decisions ADD COLUMN session_start_rung VARCHAR;
        ALTER TABLE routing_decisions ADD COLUMN escalation VARCHAR;
        ALTER TABLE live_outcomes ADD COLUMN session_id VARCHAR;
        ALTER TABLE live_outcomes ADD COLUMN session_step INTEGER;
        """
    )


def _m010_shadow_decisions(con) -> None:
    """Shadow mode: per routing decision the candidate router's decision, recorded beside the serving one and not
    applied (`advisor.service.routing.shadow`)."""
    con.execute(
        """
        ALTER TABLE routing_decisions ADD COLUMN shadow_version VARCHAR;
        ALTER TABLE routing_decisions ADD COLUMN shadow_rung VARCHAR;
        ALTER TABLE routing_decisions ADD COLUMN shadow_chain_json VARCHAR;
        ALTER TABLE routing_decisions ADD COLUMN shadow_p_usable DOUBLE;
        ALTER TABLE routing_decisions ADD COLUMN shadow_expected_cost DOUBLE;
        ALTER TABLE routing_decisions ADD COLUMN shadow_error VARCHAR;
        """
    )


def _m011_router_registry(con) -> None:
    """The promoted pointer and the artifacts it can name, inside the store: on PostgreSQL every replica of the
    service reads the same pointer and loads the same bytes (`advisor.router.feedback.pointers`)."""
    con.execute(
        """
        CREATE TABLE router_artifacts (
            sha256 VARCHAR PRIMARY KEY, suffix VARCHAR NOT NULL, router_version VARCHAR NOT NULL,
            body BLOB NOT NULL, stored_at TIMESTAMP NOT NULL);
        CREATE TABLE router_pointers (
            name VARCHAR PRIMARY KEY, sha256 VARCHAR NOT NULL, router_version VARCHAR NOT NULL,
            promotion_id VARCHAR, promoted_at TIMESTAMP NOT NULL);
        """
    )


def _m012_run_failure_kind(con) -> None:
    """Per run, how its model call failed when it stopped on a backend error (timeout, down, key refused, bad
    output, overloaded: `advisor.backends.FailureKind`); NULL for every other run."""
    con.execute("ALTER TABLE runs ADD COLUMN failure VARCHAR")


def _m013_captured_steps(con) -> None:
    """Live agent steps the service captured (opt-in, redacted before they were written), per tenant, and the
    steps it dropped (over the bound, too large) counted per tenant and reason."""
    con.execute(
        """
        CREATE TABLE captured_steps (
            decision_id VARCHAR PRIMARY KEY, tenant VARCHAR NOT NULL, created_at TIMESTAMP NOT NULL,
            task_class VARCHAR, session_id VARCHAR, session_step INTEGER, rung VARCHAR, status VARCHAR,
            verdict VARCHAR, reference_ok BOOLEAN NOT NULL, simulated BOOLEAN NOT NULL, cost_usd DOUBLE,
            request_json VARCHAR NOT NULL, reply_json VARCHAR NOT NULL, size_bytes INTEGER NOT NULL);
        CREATE INDEX captured_steps_tenant ON captured_steps (tenant, created_at);
        CREATE TABLE capture_drops (
            tenant VARCHAR NOT NULL, reason VARCHAR NOT NULL, n BIGINT NOT NULL, last_at TIMESTAMP,
            PRIMARY KEY (tenant, reason));
        """)


#: Ordered forward migrations. Append only; never edit one that has shipped.
MIGRATIONS: list[tuple[str, Callable]] = [
    ("m001_initial", _m001_initial),
    ("m002_scenario_score_and_judge_agreement", _m002_scenario_score_and_judge_agreement),
    ("m003_live_service", _m003_live_service),
    ("m004_policy_calls", _m004_policy_calls),
    ("m005_router_promotions", _m005_router_promotions),
    ("m006_service_verifier_rates", _m006_service_verifier_rates),
    ("m007_policy_call_verdicts", _m007_policy_call_verdicts),
    ("m008_live_end_user", _m008_live_end_user),
    ("m009_sessions", _m009_sessions),
    ("m010_shadow_decisions", _m010_shadow_decisions),
    ("m011_router_registry", _m011_router_registry),
    ("m012_run_failure_kind", _m012_run_failure_kind),
    ("m013_captured_steps", _m013_captured_steps),
]
