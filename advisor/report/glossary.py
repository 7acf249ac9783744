"""The report's glossary: every term the page uses, defined once, with the settings it depends on filled in."""

from __future__ import annotations

from advisor.plans import MAX_ATTEMPTS


def glossary(settings, largest: str = "the largest rung", simulated: bool = True) -> list[tuple[str, str]]:
    """(term, definition) pairs, in reading order; numbers come from the report's `settings`.

    SIMULATED is defined only when the page has stand-in runs (a report of real runs never says the word)."""
    s = settings
    terms = [
        ("rung", "One model of the ladder, smallest first. The recommendation is a plan over rungs."),
        ("class", "A task class: tasks of one kind (for example api_calls) that are sized together."),
        ("skill", "A task-class document (instructions, worked examples) put in the prompt. \"with a skill\" "
                  "runs have it, \"without a skill\" (baseline) runs do not."),
        ("baseline", "The condition without a skill document."),
        ("IF", "Instruction following: the 0-100 score of the checks on how the answer was given (format, "
               "constraints)."),
        ("TC", "Task completion (also called goal completion): the 0-100 score of the checks on whether the task "
               "got done."),
        ("overall", "The run's 0-100 score combining TC and IF."),
        ("usable", f"A run whose overall score is at least {s.bar:g} (the bar). The usable rate is usable runs / "
                   "scored runs."),
        ("near-zero", f"A run whose overall score is below {s.near_zero:g}: a failure, not a weak pass."),
        ("target", f"The usable rate a class needs: {s.target:.0%}."),
        ("interval", f"The {s.confidence:.0%} two-sided Wilson interval of the usable rate: where the true rate "
                     "lies given the runs so far. Wider with fewer runs."),
        ("clears / below / undecided", "A rung clears when its interval's lower bound reaches the target, is below "
                                       "when its upper bound is under the target, and is undecided otherwise "
                                       "(more runs needed)."),
        ("floor", "The smallest rung whose single attempt clears the target: what holds without retries (the "
                   "answer's 'single attempt' column). The plan, with retries, is the recommendation."),
        ("decided", "The floor is decided when every smaller rung is below; provisional when a smaller rung is "
                    "still undecided (it might clear with more runs); none when no rung clears."),
        ("does not converge", "The rung fails mostly because its runs stop without a final answer (turn, token or "
                              "time budget exhausted, stuck, invalid output)."),
        ("converges to poor results", "The rung's runs finish, but their answers score under the bar."),
        ("plan", "The recommendation: rungs in order with a number of attempts on each, retried while the "
                 "class's verifier rejects and escalated after the last attempt (one attempt on one rung where the "
                 "class has no verifier); the cheapest per usable result whose usable rate, sampled from each "
                 f"rung's posterior, clears the target with {s.confidence:.0%} confidence."),
        ("usable first time", "The rung to use when every result must be usable on the first attempt (no retries, "
                              "no verifier): the lowest cost per attempt / usable rate. Shown where it differs."),
        ("cost per usable result", "Expected model spend (all attempts and escalations, unscored runs included) "
                                   "for one usable result. Shown in $ per 1,000 usable results everywhere."),
        ("$ per attempt, $/task", "Mean model cost of one run (one attempt at one task), in US dollars."),
        ("points/$", "Mean overall score per dollar of one attempt (k = thousand, M = million): a secondary "
                     "efficiency figure; decisions use cost per usable result."),
        ("per month", "Cost per usable result x the usable results a class needs per month (the volume). The "
                      "volume is an assumption, stated on the page (`advisor report --volume CLASS=N/month` changes it)."),
        (f"always {largest}", f"What the same volume would cost running {largest} for every request (with "
                              "retries, no escalation): the comparison for the total."),
        ("lift", "With a skill minus without, on the same tasks (the paired tasks: those that have a skill)."),
        ("unscored", "A run that could not be scored (for example a backend error): left out of every rate, "
                     "counted apart; its cost still counts."),
        ("attempts, verifier", f"A plan tries each of its rungs 1 to {MAX_ATTEMPTS} times (xN) before "
                               f"escalating; a rung's own $ per usable result assumes {s.k}. The verifier that "
                               "decides a retry is "
                        f"assumed to accept a bad answer with probability {s.false_accept:g} and reject a good one "
                        f"with {s.false_reject:g}."),
    ]
    if simulated:
        terms.append(("SIMULATED", "Results from stand-in rungs (seeded CPU simulations of the ladder, not real "
                                   "models). They show the method and the calibrated shape, not measured model "
                                   "quality."))
    return terms
